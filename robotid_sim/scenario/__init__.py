"""Scenarios: the YAML schema, the bundled scenarios, and the checked plan of a run
(:mod:`robotid_sim.scenario.plan`); :mod:`robotid_sim.studies` runs them.

The names below are imported on first access (PEP 562): reading a scenario (:func:`load_scenario`) does
not load the estimators or the simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robotid_sim._lazy import lazy_attributes

_LAZY_ATTRIBUTES: dict[str, str] = {
    "DEFAULT_SCENARIO": "robotid_sim.scenario.plan",
    "bundled_scenarios": "robotid_sim.scenario.plan",
    "prepare_closed_loop_study": "robotid_sim.scenario.plan",
    "prepare_run": "robotid_sim.scenario.plan",
    "resolve_scenario_path": "robotid_sim.scenario.plan",
    "ClosedLoopStudy": "robotid_sim.scenario.schema",
    "Scenario": "robotid_sim.scenario.schema",
    "load_scenario": "robotid_sim.scenario.schema",
    "parse_closed_loop_study": "robotid_sim.scenario.schema",
    "parse_scenario": "robotid_sim.scenario.schema",
}

if TYPE_CHECKING:
    from robotid_sim.scenario.plan import (
        DEFAULT_SCENARIO,
        bundled_scenarios,
        prepare_closed_loop_study,
        prepare_run,
        resolve_scenario_path,
    )
    from robotid_sim.scenario.schema import (
        ClosedLoopStudy,
        Scenario,
        load_scenario,
        parse_closed_loop_study,
        parse_scenario,
    )

__all__ = [
    "DEFAULT_SCENARIO",
    "ClosedLoopStudy",
    "Scenario",
    "bundled_scenarios",
    "load_scenario",
    "parse_closed_loop_study",
    "parse_scenario",
    "prepare_closed_loop_study",
    "prepare_run",
    "resolve_scenario_path",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY_ATTRIBUTES)
