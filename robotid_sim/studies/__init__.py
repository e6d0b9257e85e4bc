"""Studies: the conductors that write a run folder and its report (the layer above :mod:`robotid_sim.report`).

Each study checks everything first (the planning lives with its stage: :mod:`robotid_sim.scenario.plan`,
:mod:`robotid_sim.sweep`), then calls the stages in order and writes a folder through
:mod:`robotid_sim.run_folder`:

- :func:`run_scenario` (``robotid-sim run``): :mod:`robotid_sim.studies.run`;
- ``robotid-sim identify`` (with ``--validate`` a scenario run): :mod:`robotid_sim.studies.identify`;
- :func:`run_closed_loop_study` (``robotid-sim closed-loop``): :mod:`robotid_sim.studies.closed_loop`;
- :func:`run_sweep` (``robotid-sim sweep``): :mod:`robotid_sim.studies.sweep`;
- :func:`run_rl_demo` (``robotid-sim rl-demo``): :mod:`robotid_sim.studies.rl_demo`, its training recipe in
  :mod:`robotid_sim.studies.rl_training`;
- :func:`run_rl_compare` (``robotid-sim rl-demo --compare``): :mod:`robotid_sim.studies.rl_compare`;
- :func:`load_run_result` reads a run folder back for ``robotid-sim report``: :mod:`robotid_sim.studies.results`.

The names below are imported on first access (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robotid_sim._lazy import lazy_attributes

_LAZY_ATTRIBUTES: dict[str, str] = {
    "run_closed_loop_study": "robotid_sim.studies.closed_loop",
    "load_run_result": "robotid_sim.studies.results",
    "run_rl_compare": "robotid_sim.studies.rl_compare",
    "run_rl_demo": "robotid_sim.studies.rl_demo",
    "run_scenario": "robotid_sim.studies.run",
    "run_sweep": "robotid_sim.studies.sweep",
}

if TYPE_CHECKING:
    from robotid_sim.studies.closed_loop import run_closed_loop_study
    from robotid_sim.studies.results import load_run_result
    from robotid_sim.studies.rl_compare import run_rl_compare
    from robotid_sim.studies.rl_demo import run_rl_demo
    from robotid_sim.studies.run import run_scenario
    from robotid_sim.studies.sweep import run_sweep

__all__ = ["load_run_result", "run_closed_loop_study", "run_rl_compare", "run_rl_demo", "run_scenario", "run_sweep"]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY_ATTRIBUTES)
