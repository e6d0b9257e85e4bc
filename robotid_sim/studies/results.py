"""Read a finished run folder back into a :class:`StudyResult` (for ``robotid-sim report``).

A run folder is input like any other (SPEC §13): every file is read only from inside the folder
(:func:`robotid_sim.safety.inside`, which also refuses a symbolic link pointing out of it), ``scenario.yaml``
through :func:`robotid_sim.safety.load_yaml_file`, and ``metrics.json`` / ``truth.json`` are checked (valid
JSON of the expected structure, size-limited, estimator names that are safe file names) before use. A damaged
folder is a one-line :class:`~robotid_sim.errors.DataError`, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from robotid_sim.control.comparison import ClosedLoopOutcome
from robotid_sim.errors import ConfigError, DataError
from robotid_sim.identification import load_model
from robotid_sim.identification import metrics as M
from robotid_sim.identification.evaluation import Failure
from robotid_sim.identification.validation import (
    OPEN_LOOP_FILE,
    OpenLoopReference,
    forward_dynamics_validation,
    validation_reference,
)
from robotid_sim.report import REPORT_CONTEXT_FILE, EstimatorOutcome, SensitivityOutcome, StudyResult, friction_curves
from robotid_sim.safety import inside, load_yaml_file, safe_name
from robotid_sim.scenario.schema import CAD_LABEL, CLOSED_LOOP_FILE
from robotid_sim.sim.dataset import load_dataset
from robotid_sim.studies.metrics_files import METRICS_SECTIONS, METRICS_VERSION, split_metrics_rows

#: largest ``metrics.json`` / ``truth.json`` / ``scenario.yaml`` read back (bytes)
MAX_TEXT_BYTES = 16 * 1024**2


def load_run_result(run_dir: str | Path) -> StudyResult:
    """The study of a run folder written by :func:`run_scenario` or :func:`run_closed_loop_study`.

    Predictions are recomputed from the saved models on the saved validation data. Closed-loop rows come back
    with their metrics only (no time series). The report's info, notes and joint kinds come from
    ``report.json``, the parameter labels from ``scenario.yaml``, the sensitivity study from ``sensitivity.json``,
    so that :func:`~robotid_sim.report.write_report` of the result writes the run's own report again.

    Raises:
        DataError: a missing or damaged file, a file that points outside the folder, or a ``metrics.json``
            that is not ``{"metrics_version": 2, "estimators": [...], "controllers": [...], "failed": [...]}``
            (:mod:`robotid_sim.studies.metrics_files`; the one list of earlier versions is read too) of
            ``{"estimator": <safe name>, <metric>: number or list of numbers}`` and
            ``{"controller": <label>, <metric>: number, text or list of them}`` rows.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise DataError(f"{run_dir} is not a run folder (not a folder)")
    if (run_dir / CLOSED_LOOP_FILE).exists() and not (run_dir / "scenario.yaml").exists():
        return _closed_loop_result(run_dir)
    needed = ["scenario.yaml", "metrics.json", "truth.json", "data/validation.npz"]
    missing = [n for n in needed if not (run_dir / n).exists()]
    if missing:
        raise DataError(f"{run_dir} is not a complete run folder (missing {missing})")
    scenario = _scenario(run_dir)
    rows, controller_rows = _metrics(run_dir)
    ds_val = load_dataset(_path(run_dir, "data/validation.npz"))
    truth = _truth_table(run_dir)
    truth_names = [name for name, _, _ in truth]
    truth_values = np.array([value for _, _, value in truth])
    open_loop = OpenLoopReference.load(_path(run_dir, OPEN_LOOP_FILE)) if (run_dir / OPEN_LOOP_FILE).exists() else None
    outcomes, models = [], {}
    for row in rows:
        if row.get("status") == "failed":
            continue
        name = row["estimator"]
        model = models[name] = load_model(_path(run_dir, f"models/{name}.json"))
        outcome = EstimatorOutcome.of_model(
            name,
            model,
            {k: v for k, v in row.items() if k != "estimator"},
            model.predict_torque(ds_val.q, ds_val.qd, ds_val.qdd),
            f"models/{name}.json",
            truth_names=truth_names,
            truth_values=truth_values,
        )
        forward = forward_dynamics_validation(model, ds_val, open_loop)
        outcome.qdd_predicted, outcome.q_open_loop = forward.qdd, forward.q_open_loop
        outcomes.append(outcome)
    title = scenario.get("name")
    robot = scenario.get("robot")
    return StudyResult(
        **_report_context(run_dir),
        title=title if isinstance(title, str) else run_dir.name,
        robot_name=robot if isinstance(robot, str) else "?",
        joint_names=list(ds_val.joint_names),
        scenario=scenario,
        t_validation=ds_val.t,
        tau_measured=ds_val.tau,
        tau_true=None if ds_val.truth is None else ds_val.truth.tau,
        outcomes=outcomes,
        base_parameter_table=truth,
        baselines=[o.name for o in outcomes if o.name == CAD_LABEL],
        closed_loop=_closed_loop_outcomes(controller_rows),
        failures=_failures(rows, "estimator") + _failures(controller_rows, "controller"),
        friction_curves=friction_curves(models, ds_val.qd),
        qdd_reference=np.asarray(validation_reference(ds_val).qdd, float),
        open_loop_t=None if open_loop is None else open_loop.t,
        q_open_loop_reference=None if open_loop is None else open_loop.q_reference,
        parameter_labels=_parameter_labels(run_dir, scenario),
        sensitivity=_sensitivity(run_dir) if (run_dir / "sensitivity.json").exists() else None,
    )


def _closed_loop_result(run_dir: Path) -> StudyResult:
    """The study of a closed-loop run folder (``closed_loop.yaml``, ``metrics.json``)."""
    study = _scenario(run_dir, CLOSED_LOOP_FILE)
    rows, controller_rows = _metrics(run_dir)
    if rows:
        raise DataError(f"{run_dir / 'metrics.json'} is damaged (estimator rows in a closed-loop run folder)")
    outcomes = _closed_loop_outcomes(controller_rows)
    n = max((len(o.metrics.get("eta") or []) for o in outcomes), default=0)
    joints = outcomes[0].metrics.get("joints") if outcomes else None
    if not (isinstance(joints, list) and len(joints) == n):
        joints = [f"joint {j + 1}" for j in range(n)]
    title, robot = study.get("name"), study.get("robot")
    return StudyResult(
        **_report_context(run_dir),
        title=title if isinstance(title, str) else run_dir.name,
        robot_name=robot if isinstance(robot, str) else "?",
        joint_names=[str(j) for j in joints],
        scenario=study,
        t_validation=np.zeros(0),
        tau_measured=np.zeros((0, n)),
        tau_true=None,
        outcomes=[],
        closed_loop=outcomes,
        failures=_failures(controller_rows, "controller"),
    )


def _report_context(run_dir: Path) -> dict[str, Any]:
    """``info``, ``notes`` and ``joint_kinds`` of the run's report (:data:`REPORT_CONTEXT_FILE`), checked;
    empty for a run folder written before the file existed."""
    if not (run_dir / REPORT_CONTEXT_FILE).exists():
        return {}
    where = run_dir / REPORT_CONTEXT_FILE
    data = _read_json(run_dir, REPORT_CONTEXT_FILE)
    info, notes, kinds = (data.get(k) if isinstance(data, dict) else None for k in ("info", "notes", "joint_kinds"))
    if not (
        isinstance(info, dict)
        and all(isinstance(v, str) for v in info.values())
        and isinstance(notes, list)
        and all(isinstance(v, str) for v in notes)
        and isinstance(kinds, list)
        and all(k in ("revolute", "prismatic") for k in kinds)
    ):
        raise DataError(
            f"{where} is damaged (expected {{'info': {{key: text}}, 'notes': [text], 'joint_kinds': "
            "['revolute' or 'prismatic']}); run the scenario again"
        )
    return {"info": info, "notes": notes, "joint_kinds": kinds}


def _parameter_labels(run_dir: Path, scenario: dict) -> dict[str, str]:
    """The scenario's ``report.parameter_labels``, checked."""
    report = scenario.get("report")
    labels = (report.get("parameter_labels") if isinstance(report, dict) else None) or {}
    if not (isinstance(labels, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())):
        raise DataError(f"{run_dir / 'scenario.yaml'} is damaged (report.parameter_labels is not a mapping of texts)")
    return dict(labels)


def _sensitivity(run_dir: Path) -> SensitivityOutcome:
    """The ±50 % sensitivity study of ``sensitivity.json`` (a None RMS: the simulation diverged, inf)."""
    where = run_dir / "sensitivity.json"
    data = _read_json(run_dir, "sensitivity.json")
    try:
        rows = data["parameters"]
        factors = tuple(float(f) for f in data["factors"])

        def rms(values) -> np.ndarray:
            return np.array(values, dtype=float)  # None (diverged) becomes NaN, made inf below

        table = M.SensitivityTable(
            parameter_names=tuple(str(row["name"]) for row in rows),
            values=np.array([float(row["value"]) for row in rows]),
            factors=factors,
            rms=np.nan_to_num(np.array([rms(row["rms"]) for row in rows]), nan=np.inf).reshape(
                len(rows), len(factors), -1
            ),
            rms_total=np.nan_to_num(np.array([rms(row["rms_total"]) for row in rows]), nan=np.inf).reshape(
                len(rows), len(factors)
            ),
        )
        estimator, horizon = str(data["estimator"]), float(data["horizon_s"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{where} is damaged ({type(exc).__name__}: {exc}); run the scenario again") from None
    return SensitivityOutcome(estimator, table, horizon)


def _closed_loop_outcomes(rows: list[dict]) -> list[ClosedLoopOutcome]:
    return [
        ClosedLoopOutcome(row["controller"], {k: v for k, v in row.items() if k != "controller"})
        for row in rows
        if row.get("status") != "failed"
    ]


def _path(run_dir: Path, relative: str) -> Path:
    """``run_dir / relative``, refused unless it stays inside the run folder (links resolved)."""
    return inside(run_dir, relative, "run folder file")


def _read_json(run_dir: Path, relative: str) -> Any:
    path = _path(run_dir, relative)
    where = run_dir / relative
    try:
        size = path.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise DataError(f"{where} is {size:,} bytes (limit {MAX_TEXT_BYTES:,}); not a run folder's file")
        text = path.read_bytes().decode("utf-8")
        return json.loads(text)
    except OSError as exc:
        raise DataError(f"cannot read {where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DataError(f"{where} is damaged (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{where} is damaged (not valid JSON: {exc})") from None
    except RecursionError:
        raise DataError(f"{where} is damaged (JSON nested too deeply)") from None


def _scenario(run_dir: Path, name: str = "scenario.yaml") -> dict:
    path = _path(run_dir, name)
    if path.stat().st_size > MAX_TEXT_BYTES:
        raise DataError(f"{run_dir / name} is larger than {MAX_TEXT_BYTES:,} bytes")
    try:
        data = load_yaml_file(path, "run scenario")
    except ConfigError as exc:
        raise DataError(str(exc)) from None
    if not isinstance(data, dict):
        raise DataError(f"{run_dir / name} is damaged (not a mapping of scenario fields)")
    return data


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, int | float | str | bool)


#: text fields of the metrics row of an estimator or controller that failed (:meth:`Failure.metrics_row`)
FAILURE_FIELDS = ("status", "error", "traceback")


def _failures(rows: list[dict], kind: str) -> list[Failure]:
    """The failures recorded in ``metrics.json`` rows of ``kind`` ('estimator' or 'controller')."""
    return [
        Failure(kind, row[kind], str(row.get("error", "")), str(row.get("traceback", "")))
        for row in rows
        if row.get("status") == "failed"
    ]


def _metrics(run_dir: Path) -> tuple[list[dict], list[dict]]:
    """The rows of ``metrics.json``, checked, split into estimator rows (names safe and unique, values numbers or
    lists of numbers) and closed-loop rows (``controller`` labels unique, values JSON scalars or lists of them)."""
    where = run_dir / "metrics.json"
    sections = _metrics_sections(where, _read_json(run_dir, "metrics.json"))
    failed = sections["failed"]
    rows = sections["estimators"] + [row for row in failed if isinstance(row, dict) and "controller" not in row]
    controller_rows = sections["controllers"] + [row for row in failed if isinstance(row, dict) and "controller" in row]
    labels: set[str] = set()
    for k, row in enumerate(controller_rows):
        label = row["controller"]
        if not isinstance(label, str) or not label or label.casefold() in labels:
            raise DataError(
                f"{where} is damaged (closed-loop row {k}: a missing or repeated 'controller' {label!r:.40})"
            )
        labels.add(label.casefold())
        for key, value in row.items():
            if not (_is_scalar(value) or (isinstance(value, list) and all(_is_scalar(v) for v in value))):
                raise DataError(
                    f"{where} is damaged (closed-loop row {k}, '{key}': expected a number, a text or a list of them, "
                    f"got {json.dumps(value)[:40]})"
                )
    seen: set[str] = set()
    for k, row in enumerate(rows):
        if not isinstance(row, dict) or "estimator" not in row:
            raise DataError(f"{where} is damaged (row {k} is not a mapping with an 'estimator')")
        name = row["estimator"]
        try:
            safe_name(name, "estimator name")
        except ConfigError as exc:
            raise DataError(f"{where}, row {k}: {exc}; refusing to read its model") from None
        if name.casefold() in seen:
            raise DataError(f"{where} is damaged (estimator '{name}' appears twice)")
        seen.add(name.casefold())
        for key, value in row.items():
            if key == "estimator" or (key in FAILURE_FIELDS and isinstance(value, str)):
                continue
            ok = value is None or _is_number(value)
            ok = ok or (isinstance(value, list) and all(v is None or _is_number(v) for v in value))
            if not ok:
                raise DataError(
                    f"{where} is damaged (row {k}, '{key}': expected a number or a list of numbers, "
                    f"got {json.dumps(value)[:40]})"
                )
    return rows, controller_rows


def _metrics_sections(where: Path, document: Any) -> dict[str, list]:
    """The sections of a ``metrics.json`` (:mod:`robotid_sim.studies.metrics_files`), checked; the one list of
    rows that runs before version 2 wrote is split the same way."""
    if isinstance(document, list):
        return split_metrics_rows(document)
    if not isinstance(document, dict) or document.get("metrics_version") != METRICS_VERSION:
        version = document.get("metrics_version") if isinstance(document, dict) else None
        raise DataError(
            f"{where} is damaged or from another robotid_sim (expected a mapping with metrics_version "
            f"{METRICS_VERSION}, got {type(document).__name__} with metrics_version {version!r:.20}); run the scenario "
            "again"
        )
    for name in METRICS_SECTIONS:
        if not isinstance(document.get(name, []), list):
            raise DataError(f"{where} is damaged ('{name}' is not a list of rows)")
    return {name: document.get(name, []) for name in METRICS_SECTIONS}


def _truth_table(run_dir: Path) -> list[tuple[str, str, float]]:
    """The (name, expression, true value) rows the run wrote to ``truth.json``."""
    data = _read_json(run_dir, "truth.json")
    try:
        rows = data["base_parameters"]
        if not isinstance(rows, list):
            raise TypeError("'base_parameters' is not a list")
        table = [(str(r["name"]), str(r["expression"]), float(r["value"])) for r in rows]
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{run_dir / 'truth.json'} is malformed ({exc})") from None
    return table
