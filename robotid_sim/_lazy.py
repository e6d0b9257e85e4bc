"""PEP 562 lazy attributes for package ``__init__`` files: names load on first access.

Usage in a package's ``__init__.py``::

    __getattr__, __dir__ = lazy_attributes(__name__, {"Dataset": "robotid_sim.sim.dataset"})

``package.Dataset`` then imports :mod:`robotid_sim.sim.dataset` on first access and caches the
object in the package's namespace, so later accesses are plain look-ups. ``submodules`` names
sub-modules reachable as attributes (``robotid_sim.plugins``) without an explicit import.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from typing import Any


def lazy_attributes(
    package: str, attributes: dict[str, str], submodules: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``attributes`` maps a name to its defining module."""
    submodules = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        module = attributes.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        vars(sys.modules[package])[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *attributes, *submodules})

    return __getattr__, __dir__
