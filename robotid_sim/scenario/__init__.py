"""Scenarios: YAML schema and the runner that turns one into a run folder.

The names below are imported on first access (PEP 562): reading a scenario (:func:`load_scenario`) does
not load the runner, the estimators, the simulator or the report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robotid_sim._lazy import lazy_attributes

_LAZY_ATTRIBUTES: dict[str, str] = {
    "load_run_result": "robotid_sim.scenario.results",
    "DEFAULT_SCENARIO": "robotid_sim.scenario.runner",
    "bundled_scenarios": "robotid_sim.scenario.runner",
    "prepare_closed_loop_study": "robotid_sim.scenario.runner",
    "prepare_run": "robotid_sim.scenario.runner",
    "resolve_scenario_path": "robotid_sim.scenario.runner",
    "run_scenario": "robotid_sim.scenario.runner",
    "run_closed_loop_study": "robotid_sim.scenario.runner",
    "ClosedLoopStudy": "robotid_sim.scenario.schema",
    "Scenario": "robotid_sim.scenario.schema",
    "load_scenario": "robotid_sim.scenario.schema",
    "parse_closed_loop_study": "robotid_sim.scenario.schema",
    "parse_scenario": "robotid_sim.scenario.schema",
}

if TYPE_CHECKING:
    from robotid_sim.scenario.results import load_run_result
    from robotid_sim.scenario.runner import (
        DEFAULT_SCENARIO,
        bundled_scenarios,
        prepare_closed_loop_study,
        prepare_run,
        resolve_scenario_path,
        run_closed_loop_study,
        run_scenario,
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
    "load_run_result",
    "load_scenario",
    "parse_closed_loop_study",
    "parse_scenario",
    "prepare_closed_loop_study",
    "prepare_run",
    "resolve_scenario_path",
    "run_closed_loop_study",
    "run_scenario",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY_ATTRIBUTES)
