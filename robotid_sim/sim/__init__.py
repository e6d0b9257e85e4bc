"""Simulation: the exact PyBullet backend, noise models, and the Dataset with its file formats.

The names below are imported on first access (PEP 562): ``import robotid_sim.sim`` loads neither
PyBullet nor SciPy; ``robotid_sim.sim.Dataset`` loads only :mod:`robotid_sim.sim.dataset`.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

_LAZY_ATTRIBUTES: dict[str, str] = {
    "Dataset": "robotid_sim.sim.dataset",
    "Signals": "robotid_sim.sim.dataset",
    "load_dataset": "robotid_sim.sim.dataset",
    "PyBulletSimulator": "robotid_sim.sim.pybullet_sim",
    "simulate": "robotid_sim.sim.simulate",
}

if TYPE_CHECKING:
    from robotid_sim.sim.dataset import Dataset, Signals, load_dataset
    from robotid_sim.sim.pybullet_sim import PyBulletSimulator
    from robotid_sim.sim.simulate import simulate

__all__ = ["Dataset", "PyBulletSimulator", "Signals", "load_dataset", "simulate"]


def __getattr__(name: str) -> Any:
    module = _LAZY_ATTRIBUTES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_ATTRIBUTES})


class _Package(types.ModuleType):
    """This package, keeping ``robotid_sim.sim.simulate`` the function, as an eager import did.

    Importing the submodule :mod:`robotid_sim.sim.simulate` makes the import system set the package
    attribute ``simulate`` to that module; the function of the same name must win, so the module is not
    stored and the attribute is looked up lazily instead (the module stays in ``sys.modules``).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY_ATTRIBUTES and isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
