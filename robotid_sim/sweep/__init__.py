"""Monte Carlo sweeps: a grid of robots × excitations × noise presets × estimators × repetitions, run on local
processes or a Dask cluster, resumable, with BIRDy's figures of merit and the Cramér–Rao bound.

:func:`robotid_sim.studies.run_sweep` runs a sweep and writes its report.

The names below are imported on first access (PEP 562): importing the package loads nothing heavy, so a
worker process that unpickles a task limits its thread pools before NumPy starts them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robotid_sim._lazy import lazy_attributes

_LAZY_ATTRIBUTES: dict[str, str] = {
    "SweepConfig": "robotid_sim.sweep.config",
    "bundled_sweeps": "robotid_sim.sweep.config",
    "load_sweep_config": "robotid_sim.sweep.config",
    "parse_sweep_config": "robotid_sim.sweep.config",
    "SweepInterrupted": "robotid_sim.sweep.runner",
    "SweepOutcome": "robotid_sim.sweep.runner",
    "run_sweep_tasks": "robotid_sim.sweep.runner",
    "cramer_rao_std": "robotid_sim.sweep.tasks",
}

if TYPE_CHECKING:
    from robotid_sim.sweep.config import SweepConfig, bundled_sweeps, load_sweep_config, parse_sweep_config
    from robotid_sim.sweep.runner import SweepInterrupted, SweepOutcome, run_sweep_tasks
    from robotid_sim.sweep.tasks import cramer_rao_std

__all__ = [
    "SweepConfig",
    "SweepInterrupted",
    "SweepOutcome",
    "bundled_sweeps",
    "cramer_rao_std",
    "load_sweep_config",
    "parse_sweep_config",
    "run_sweep_tasks",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY_ATTRIBUTES)
