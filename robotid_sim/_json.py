"""Plain JSON data from nested dicts, lists, numpy arrays, numpy scalars and paths: the one JSON sanitiser."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np


def jsonable(obj: Any, *, default: Callable[[Any], Any] | None = None) -> Any:
    """``obj`` with arrays as lists, numpy scalars as Python numbers, paths as text and every dict key a string.

    Args:
        obj: the value to convert (nested dicts, lists and tuples are converted item by item).
        default: called on any other object that is not None, a bool, int, float or str (``default=str``
            writes its text); without it such an object is returned unchanged (and ``json.dumps`` refuses it).
    """
    if isinstance(obj, dict):
        return {str(k): jsonable(v, default=default) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v, default=default) for v in obj]
    if isinstance(obj, np.ndarray):
        if default is not None and obj.dtype.kind == "O":
            return [jsonable(v, default=default) for v in obj]
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if default is None or obj is None or isinstance(obj, bool | int | float | str):
        return obj
    return default(obj)


def json_default(value: Any) -> Any:
    """A ``json.dumps(..., default=json_default)`` hook: numpy values and paths as plain JSON, else TypeError."""
    if isinstance(value, np.generic | np.ndarray | os.PathLike):
        return jsonable(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")
