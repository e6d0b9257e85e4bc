"""Read a finished run folder back into a :class:`StudyResult` (for ``robotid-sim report``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from robotid_sim.errors import DataError
from robotid_sim.identification import BaseParameterModel, load_model
from robotid_sim.report import EstimatorOutcome, StudyResult
from robotid_sim.sim.dataset import load_dataset


def load_run_result(run_dir: str | Path) -> StudyResult:
    """The study of a run folder written by :func:`run_scenario`.

    Predictions are recomputed from the saved models on the saved validation data.
    """
    run_dir = Path(run_dir)
    needed = ["scenario.yaml", "metrics.json", "truth.json", "data/validation.npz"]
    missing = [n for n in needed if not (run_dir / n).exists()]
    if missing:
        raise DataError(f"{run_dir} is not a complete run folder (missing {missing})")
    scenario = yaml.safe_load((run_dir / "scenario.yaml").read_text())
    rows = json.loads((run_dir / "metrics.json").read_text())
    ds_val = load_dataset(run_dir / "data" / "validation.npz")
    truth = _truth_table(run_dir)
    truth_names = [name for name, _, _ in truth]
    truth_values = np.array([value for _, _, value in truth])
    outcomes = []
    for row in rows:
        name = row["estimator"]
        model = load_model(run_dir / "models" / f"{name}.json")
        names, values, std = model.parameter_table()
        is_base = isinstance(model, BaseParameterModel) and list(names) == truth_names
        history = model.history
        outcomes.append(
            EstimatorOutcome(
                name=name,
                parameter_names=list(names),
                values=values,
                std=std,
                true_values=truth_values if is_base else None,
                metrics={k: v for k, v in row.items() if k != "estimator"},
                tau_predicted=model.predict_torque(ds_val.q, ds_val.qd, ds_val.qdd),
                history=None if history is None else history.values,
                history_t=None if history is None else history.t,
                model_path=f"models/{name}.json",
            )
        )
    return StudyResult(
        title=scenario.get("name", run_dir.name),
        robot_name=scenario.get("robot", "?"),
        joint_names=list(ds_val.joint_names),
        scenario=scenario,
        t_validation=ds_val.t,
        tau_measured=ds_val.tau,
        tau_true=None if ds_val.truth is None else ds_val.truth.tau,
        outcomes=outcomes,
        base_parameter_table=truth,
    )


def _truth_table(run_dir: Path) -> list[tuple[str, str, float]]:
    """The (name, expression, true value) rows the runner wrote to ``truth.json``."""
    data = json.loads((run_dir / "truth.json").read_text())
    try:
        return [(str(r["name"]), str(r["expression"]), float(r["value"])) for r in data["base_parameters"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{run_dir / 'truth.json'} is malformed ({exc})") from None
