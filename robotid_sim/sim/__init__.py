"""Simulation: the exact PyBullet backend, BIRDy's closed-loop data, noise models, the Dataset and its file formats.

The names below are imported on first access (PEP 562): ``import robotid_sim.sim`` loads neither
PyBullet nor SciPy; ``robotid_sim.sim.Dataset`` loads only :mod:`robotid_sim.sim.dataset` and its file
formats, :mod:`robotid_sim.sim.recordings`.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from robotid_sim._lazy import lazy_attributes

_LAZY_ATTRIBUTES: dict[str, str] = {
    "BIRDY_TX40_PID": "robotid_sim.sim.closed_loop_data",
    "ClosedLoopRecord": "robotid_sim.sim.closed_loop_data",
    "NOISE_PRESETS": "robotid_sim.sim.closed_loop_data",
    "NoisePreset": "robotid_sim.sim.closed_loop_data",
    "PIDLoop": "robotid_sim.sim.closed_loop_data",
    "birdy_dataset": "robotid_sim.sim.closed_loop_data",
    "closed_loop_record": "robotid_sim.sim.closed_loop_data",
    "Dataset": "robotid_sim.sim.dataset",
    "Signals": "robotid_sim.sim.dataset",
    "load_dataset": "robotid_sim.sim.dataset",
    "LogSource": "robotid_sim.sim.logs",
    "load_log": "robotid_sim.sim.logs",
    "load_logs": "robotid_sim.sim.logs",
    "stack_experiments": "robotid_sim.sim.logs",
    "PyBulletSimulator": "robotid_sim.sim.pybullet_sim",
    "simulate": "robotid_sim.sim.simulate",
}

if TYPE_CHECKING:
    from robotid_sim.sim.closed_loop_data import (
        BIRDY_TX40_PID,
        NOISE_PRESETS,
        ClosedLoopRecord,
        NoisePreset,
        PIDLoop,
        birdy_dataset,
        closed_loop_record,
    )
    from robotid_sim.sim.dataset import Dataset, Signals, load_dataset
    from robotid_sim.sim.logs import LogSource, load_log, load_logs, stack_experiments
    from robotid_sim.sim.pybullet_sim import PyBulletSimulator
    from robotid_sim.sim.simulate import simulate

__all__ = [
    "BIRDY_TX40_PID",
    "ClosedLoopRecord",
    "Dataset",
    "LogSource",
    "NOISE_PRESETS",
    "NoisePreset",
    "PIDLoop",
    "PyBulletSimulator",
    "Signals",
    "birdy_dataset",
    "closed_loop_record",
    "load_dataset",
    "load_log",
    "load_logs",
    "simulate",
    "stack_experiments",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY_ATTRIBUTES)


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
