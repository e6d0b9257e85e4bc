"""``robotid-sim identify``: models from recordings (simulated, or a real robot's logs).

The command's arguments are one data scenario (:class:`~robotid_sim.scenario.schema.Scenario` with ``data:``): with
held-out recordings it is a whole study in a run folder (:func:`run_identify_study`, a scenario run); without,
:func:`prepare_recordings` checks the same fields, loads and preprocesses the recordings and builds the
estimators, and the caller fits and shows each model.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robotid_sim.progress import Progress
from robotid_sim.scenario.schema import PreprocessingConfig, parse_scenario


def run_identify_study(
    scenario: Mapping[str, Any], out_dir: str | Path | None = None, progress: Progress | None = None
) -> Path:
    """The data scenario ``scenario`` (a mapping, with validation recordings) run into a new run folder under
    ``out_dir`` (:func:`~robotid_sim.studies.run.run_scenario`); ConfigError naming the field it refuses."""
    from robotid_sim.studies.run import run_scenario

    return run_scenario(parse_scenario(dict(scenario), "identify"), out_dir=out_dir, progress=progress)


def prepare_recordings(scenario: Mapping[str, Any]) -> tuple[Any, list[tuple[str, Any]], list[str]]:
    """Everything to identify from the identification recordings of ``scenario`` (a data-scenario mapping whose
    validation recordings are not used), checked before the recordings are read.

    Returns:
        ``(problem, estimators, notes)``: the :class:`~robotid_sim.identification.IdentificationProblem` of the
        preprocessed recordings, ``(name, estimator)`` pairs with their options applied, and the preprocessing's
        notes.

    Raises:
        ConfigError: a field of ``scenario``, an unknown estimator or option; DataError: a recording.
    """
    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.plugins import get_estimator
    from robotid_sim.robot import load_robot
    from robotid_sim.scenario.plan import preprocess_dataset
    from robotid_sim.sim.logs import load_logs, parse_log_source

    parse_scenario({**scenario, "data": None}, "identify")  # every field checked before the work
    estimators = [(e["name"], get_estimator(e["name"]).from_options(**e["options"])) for e in scenario["estimators"]]
    robot = load_robot(scenario["robot"], sidecar=scenario["sidecar"], lock_joints=scenario["lock_joints"] or None)
    data = scenario["data"]
    sources = [parse_log_source({**data["defaults"], "path": path}, "--layout") for path in data["identification"]]
    ds, notes = preprocess_dataset(load_logs(sources, robot), PreprocessingConfig(**scenario["preprocessing"]))
    problem = IdentificationProblem(robot, ds, velocity_deadband=scenario["identification"]["velocity_deadband"])
    return problem, estimators, notes
