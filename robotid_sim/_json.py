"""Plain JSON data from nested dicts, lists, numpy arrays and numpy scalars."""

from __future__ import annotations

from typing import Any

import numpy as np


def jsonable(obj: Any) -> Any:
    """``obj`` with arrays as lists, numpy scalars as Python numbers and every dict key a string."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
