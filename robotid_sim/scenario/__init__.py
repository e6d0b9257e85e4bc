"""Scenarios: YAML schema and the runner that turns one into a run folder."""

from robotid_sim.scenario.results import load_run_result
from robotid_sim.scenario.runner import (
    DEFAULT_SCENARIO,
    bundled_scenarios,
    resolve_scenario_path,
    run_scenario,
)
from robotid_sim.scenario.schema import Scenario, load_scenario, parse_scenario

__all__ = [
    "DEFAULT_SCENARIO", "Scenario", "bundled_scenarios", "load_run_result", "load_scenario", "parse_scenario",
    "resolve_scenario_path", "run_scenario",
]
