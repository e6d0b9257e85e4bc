"""Read a finished run folder back into a :class:`StudyResult` (for ``robotid-sim report``)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from robotid_sim.errors import DataError
from robotid_sim.identification import load_model
from robotid_sim.report import EstimatorOutcome, StudyResult
from robotid_sim.sim.dataset import load_dataset


def load_run_result(run_dir: str | Path) -> StudyResult:
    """The study of a run folder written by :func:`run_scenario`.

    Predictions are recomputed from the saved models on the saved validation data.
    """
    run_dir = Path(run_dir)
    needed = ["scenario.yaml", "metrics.json", "data/validation.npz"]
    missing = [n for n in needed if not (run_dir / n).exists()]
    if missing:
        raise DataError(f"{run_dir} is not a complete run folder (missing {missing})")
    scenario = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    rows = json.loads((run_dir / "metrics.json").read_text())
    ds_val = load_dataset(run_dir / "data" / "validation.npz")
    outcomes = []
    truth_base = None
    base_table = []
    for row in rows:
        name = row["estimator"]
        model = load_model(run_dir / "models" / f"{name}.json")
        if truth_base is None:
            base = model.robot.base_parameters()
            truth_base = base.true_values()
            base_table = base.table()
        is_base = model.parameter_names == list(base.names)
        outcomes.append(EstimatorOutcome(
            name=name, parameter_names=model.parameter_names, values=model.values, std=model.std,
            true_values=truth_base if is_base else None,
            metrics={k: v for k, v in row.items() if k != "estimator"},
            tau_predicted=model.predict_torque(ds_val.q, ds_val.qd, ds_val.qdd),
            history=model.history, history_t=model.history_t, model_path=f"models/{name}.json",
        ))
    return StudyResult(
        title=scenario.get("name", run_dir.name), robot_name=scenario.get("robot", "?"),
        joint_names=list(ds_val.joint_names), scenario=scenario, t_validation=ds_val.t,
        tau_measured=ds_val.tau, tau_true=None if ds_val.truth is None else ds_val.truth.tau,
        outcomes=outcomes, base_parameter_table=base_table,
    )
