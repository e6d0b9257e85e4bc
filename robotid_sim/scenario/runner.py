"""Run a scenario end to end into a new run folder (SPEC §13).

The run is built in a hidden ``.partial-*`` folder and renamed to its final name only when
everything is written, so a failed run never leaves a folder that looks complete, and a run
never overwrites an earlier one.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import numpy as np
import yaml

from robotid_sim.errors import ConfigError
from robotid_sim.identification import BaseParameterModel, IdentificationProblem, LinearParameterModel
from robotid_sim.identification import metrics as M
from robotid_sim.identification.validation import rollout, trajectory_error
from robotid_sim.plugins import get_estimator
from robotid_sim.report import EstimatorOutcome, StudyResult, write_report
from robotid_sim.robot import load_robot
from robotid_sim.scenario.schema import Scenario, load_scenario
from robotid_sim.signal import butterworth_filtfilt, central_difference, period_average
from robotid_sim.sim.dataset import Signals
from robotid_sim.sim.simulate import resolve_excitation, simulate

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]

DEFAULT_RUNS_DIR = Path("runs")


def bundled_scenarios() -> dict[str, Path]:
    """Bundled scenario files by stem."""
    import robotid_sim_scenarios

    root = Path(robotid_sim_scenarios.__file__).parent
    return {p.stem: p for p in sorted(root.glob("*.yaml"))}


#: the scenario ``robotid-sim run`` runs without argument
DEFAULT_SCENARIO = "prrrp_seed004"


def resolve_scenario_path(name_or_path: str | Path | None) -> Path:
    """A scenario path from a path, a bundled scenario name, or None (the default scenario)."""
    if name_or_path is None:
        return bundled_scenarios()[DEFAULT_SCENARIO]
    path = Path(name_or_path)
    if path.is_file():
        return path
    bundled = bundled_scenarios()
    if str(name_or_path) in bundled:
        return bundled[str(name_or_path)]
    raise ConfigError(f"scenario '{name_or_path}' is neither a file nor a bundled scenario ({', '.join(bundled)})")


def _new_run_dir(root: Path, name: str) -> tuple[Path, Path]:
    """(partial dir created now, final dir name reserved); never an existing folder."""
    root.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for k in range(1000):
        final = root / (f"{name}-{stamp}" if k == 0 else f"{name}-{stamp}-{k}")
        partial = root / f".partial-{final.name}"
        if final.exists() or partial.exists():
            continue
        try:
            partial.mkdir()
        except FileExistsError:
            continue
        return partial, final
    raise ConfigError(f"could not find a free run folder name under {root}")


def _validation_excitation(scenario: Scenario, robot):
    cfg = scenario.validation.excitation
    if cfg is not None:
        return resolve_excitation(robot, cfg)
    ident = scenario.excitation
    if ident == "default":
        ident = robot.sidecar.default_excitation if robot.sidecar is not None else None
    reseeded = _reseed(ident) if isinstance(ident, dict) else None
    if reseeded is None or reseeded == ident:
        raise ConfigError(
            "validation.excitation is required when the identification excitation has no 'seed' "
            "(the validation trajectory must differ from the identification one)"
        )
    return resolve_excitation(robot, reseeded)


def _reseed(config, offset: int = 1000):
    """A copy of an excitation mapping with every 'seed' moved by ``offset``."""
    if isinstance(config, dict):
        return {k: (int(v) + offset if k == "seed" else _reseed(v, offset)) for k, v in config.items()}
    if isinstance(config, list):
        return [_reseed(v, offset) for v in config]
    return config


def _preprocess(ds, cfg):
    """Apply the scenario's preprocessing to the measured signals (SPEC §7), in this order:
    period averaging (seed 001 §5), zero-phase low-pass, differentiation."""
    if cfg.lowpass_hz is None and not cfg.differentiate and cfg.period_average is None:
        return ds, []
    notes = []
    if cfg.period_average is not None:
        ds = _average_periods(ds, cfg.period_average)
        notes.append(f"{cfg.period_average} periods averaged into one (seed 001 §5)")
    q, qd, qdd, tau = ds.q, ds.qd, ds.qdd, ds.tau
    fs = 1.0 / ds.dt
    if cfg.lowpass_hz is not None:
        q, qd, tau = (butterworth_filtfilt(x, fs, cfg.lowpass_hz) for x in (q, qd, tau))
        notes.append(f"zero-phase Butterworth low-pass at {cfg.lowpass_hz} Hz on q, qd, tau")
    if cfg.differentiate:
        qd = central_difference(q, ds.dt)
        qdd = central_difference(qd, ds.dt)
        notes.append("qd and qdd recomputed from q by central differences (seed 001 Eq. 24)")
    elif cfg.lowpass_hz is not None:
        qdd = butterworth_filtfilt(qdd, fs, cfg.lowpass_hz)
    return dataclasses.replace(ds, q=q, qd=qd, qdd=qdd, tau=tau), notes


def _average_periods(ds, periods: int):
    """The mean of the first ``periods`` periods of a dataset recorded on a Fourier excitation."""
    exc = ds.metadata.get("excitation", {})
    if exc.get("type") != "fourier" or "omega_f" not in exc:
        raise ConfigError(
            f"preprocessing.period_average needs a periodic (fourier) excitation, got '{exc.get('type')}'"
        )
    samples = 2 * np.pi / float(exc["omega_f"]) / ds.dt
    if abs(samples - round(samples)) > 1e-6 * samples:
        raise ConfigError(
            f"preprocessing.period_average: the period ({samples:.4g} samples) is not a whole number of "
            "samples; choose rate_hz so that rate_hz / base_frequency is an integer"
        )
    samples = int(round(samples))
    if ds.n_samples < periods * samples:
        raise ConfigError(
            f"preprocessing.period_average = {periods} but the data holds {ds.n_samples / samples:.2f} periods; "
            "set excitation.periods (or simulation.duration) to cover them"
        )
    part = ds.slice(0, periods * samples)

    def mean(x):
        return period_average(x, samples)

    truth = None if part.truth is None else Signals(*(mean(getattr(part.truth, k)) for k in ("q", "qd", "qdd", "tau")))
    return type(ds)(
        part.t[:samples],
        mean(part.q),
        mean(part.qd),
        mean(part.qdd),
        mean(part.tau),
        truth=truth,
        joint_names=list(ds.joint_names),
        metadata={**ds.metadata, "period_averaged": periods},
    )


def run_scenario(
    scenario: str | Path | Scenario | None = None,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    on_estimator_done: Callable[[EstimatorOutcome], None] | None = None,
) -> Path:
    """Run a scenario and return the new run folder.

    Args:
        scenario: a path, a bundled scenario name, a :class:`Scenario`, or None (the default).
        out_dir: parent of the run folder (default ``./runs``).
        progress: callable(task, done, total) for progress bars.
        on_estimator_done: called with each estimator's outcome as soon as it is ready.
    """
    if isinstance(scenario, Scenario):
        sc, base_dir = scenario, Path.cwd()
    else:
        path = resolve_scenario_path(scenario)
        sc, base_dir = load_scenario(path), path.parent
    robot_ref = sc.robot
    if robot_ref.endswith(".urdf") and not Path(robot_ref).is_absolute():
        robot_ref = str((base_dir / robot_ref).resolve())
    robot = load_robot(robot_ref)
    # fail on unknown estimators / options before any work is done
    estimators = [(e, get_estimator(e.name).from_options(**e.options)) for e in sc.estimators]
    report = progress or (lambda *_: None)

    partial, final = _new_run_dir(Path(out_dir) if out_dir is not None else DEFAULT_RUNS_DIR, sc.name)
    try:
        _run(sc, robot, estimators, partial, report, on_estimator_done)
        partial.rename(final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    log.info("run written to %s", final)
    return final


def _run(sc: Scenario, robot, estimators, run_dir: Path, report: Progress, on_done) -> None:
    sim = sc.simulation
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False))

    def sim_progress(label):
        return lambda done, total: report(label, done, total)

    ds = simulate(
        robot,
        sc.excitation,
        duration=sim.duration,
        noise=sc.noise,
        seed=sc.seed,
        rate_hz=sim.rate_hz,
        dt=sim.dt,
        kp=sim.kp,
        kd=sim.kd,
        progress=sim_progress("simulate identification data"),
    )
    val_exc = _validation_excitation(sc, robot)
    ds_val = simulate(
        robot,
        val_exc,
        duration=sc.validation.duration,
        noise=sc.noise,
        seed=sc.seed + sc.validation.noise_seed_offset,
        rate_hz=sim.rate_hz,
        dt=sim.dt,
        kp=sim.kp,
        kd=sim.kd,
        progress=sim_progress("simulate validation data"),
    )
    (run_dir / "data").mkdir()
    ds.save(run_dir / "data" / "identification.npz")
    ds_val.save(run_dir / "data" / "validation.npz")
    ds_ident, notes = _preprocess(ds, sc.preprocessing)

    problem = IdentificationProblem(robot.structure(), ds_ident)  # estimators never see the truth
    condition = problem.check_excitation()
    truth = robot.base_parameters()
    truth_base = truth.true_values()
    truth_table = truth.table()
    tau_val_true = ds_val.truth.tau
    outcomes: list[EstimatorOutcome] = []
    models = []
    metric_rows = []
    horizon = sc.validation.trajectory_horizon
    K = int(round(horizon / ds_val.dt))
    (run_dir / "models").mkdir()
    (run_dir / "truth.json").write_text(
        json.dumps({"base_parameters": [{"name": n, "expression": e, "value": v} for n, e, v in truth_table]}, indent=2)
        + "\n"
    )
    if K > 1:
        rollout_args = (ds_val.truth.q[0], ds_val.truth.qd[0], ds_val.truth.tau[:K], ds_val.dt)
        q_reference, _ = rollout(robot.forward_dynamics, *rollout_args)
    for k, (entry, estimator) in enumerate(estimators):
        report("identify", k, len(estimators))
        model = estimator.fit(problem)
        model_path = model.save(run_dir / "models" / f"{entry.display}.json")
        pred = model.predict_torque(ds_val.q, ds_val.qd, ds_val.qdd)
        rms = M.torque_rms(ds_val.tau, pred)
        metrics: dict = {
            "torque_rms": rms.tolist(),
            "torque_rms_total": float(M.torque_rms_total(ds_val.tau, pred)),
            "torque_rms_vs_truth_total": float(M.torque_rms_total(tau_val_true, pred)),
            "rsd": M.rsd(ds_val.tau, pred).tolist(),
            "agreement_index": M.agreement_index(ds_val.tau, pred).tolist(),
            "fit_time_s": float(model.diagnostics.get("fit_time_s", np.nan)),
            "condition_number": float(condition),
        }
        base_values = model.base_values() if isinstance(model, LinearParameterModel) else None
        if base_values is not None:
            metrics["base_parameter_error"] = float(M.relative_parameter_error(base_values, truth_base))
        if K > 1:
            err = trajectory_error(model.forward_dynamics, q_reference, *rollout_args)
            metrics["trajectory_rms"] = err.tolist()
            metrics["trajectory_rms_total"] = float(np.sqrt(np.mean(err**2)))
        for key in ("iterations", "outliers_rejected"):
            if key in model.diagnostics:
                metrics[key] = model.diagnostics[key]
        outcome = _outcome(entry.display, model, truth, metrics, pred, str(model_path.relative_to(run_dir)))
        outcomes.append(outcome)
        models.append(model)
        metric_rows.append({"estimator": entry.display, **metrics})
        if on_done is not None:
            on_done(outcome)
    report("identify", len(estimators), len(estimators))

    diverged = [o.name for o in outcomes if not np.isfinite(o.metrics.get("trajectory_rms_total", 0.0))]
    if diverged:
        notes.append(
            f"trajectory RMS inf: the open-loop simulation of {', '.join(diverged)} diverged within "
            f"{horizon:g} s; such a model's mass matrix is not positive definite at some state "
            "(physically inconsistent parameters)"
        )
    if sc.sensitivity and outcomes:
        if isinstance(models[0], LinearParameterModel):
            notes.append(_sensitivity(models[0], outcomes[0].name, ds_val, run_dir))
        else:
            notes.append(f"no ±50 % sensitivity: '{outcomes[0].name}' is not a model linear in parameters")

    _write_metrics(run_dir, metric_rows)
    result = StudyResult(
        title=sc.name,
        robot_name=robot.name,
        joint_names=list(robot.joint_names),
        scenario=sc.model_dump(mode="json"),
        t_validation=ds_val.t,
        tau_measured=ds_val.tau,
        tau_true=tau_val_true,
        outcomes=outcomes,
        base_parameter_table=truth_table,
        notes=notes,
        info={
            "robot": robot.name,
            "samples (identification)": str(ds.n_samples),
            "samples (validation)": str(ds_val.n_samples),
            "base parameters": str(problem.base.count),
            "condition number": f"{condition:.4g}",
            "noise": json.dumps(ds.metadata.get("noise")),
            "excitation": ds.metadata["excitation"].get("type", "?"),
            "seed": str(sc.seed),
        },
    )
    write_report(run_dir, result)


def _outcome(name: str, model, truth, metrics: dict, pred, model_path: str) -> EstimatorOutcome:
    """What the report shows of one estimator; true values only for base-parameter models."""
    names, values, std = model.parameter_table()
    is_base = isinstance(model, BaseParameterModel) and list(names) == list(truth.names)
    history = model.history
    return EstimatorOutcome(
        name=name,
        parameter_names=list(names),
        values=values,
        std=std,
        true_values=truth.true_values() if is_base else None,
        metrics=metrics,
        tau_predicted=pred,
        history=None if history is None else history.values,
        history_t=None if history is None else history.t,
        model_path=model_path,
    )


def _write_metrics(run_dir: Path, rows: list[dict]) -> None:
    (run_dir / "metrics.json").write_text(json.dumps(rows, indent=2) + "\n")
    flat = []
    for row in rows:
        out = {}
        for key, value in row.items():
            if isinstance(value, list):
                out.update({f"{key}_{j + 1}": v for j, v in enumerate(value)})
            else:
                out[key] = value
        flat.append(out)
    fields = list(dict.fromkeys(k for row in flat for k in row))
    with open(run_dir / "metrics.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(flat)


def _sensitivity(model, name: str, ds_val, run_dir: Path) -> str:
    """±50 % sensitivity of each identified parameter on the open-loop trajectory (seed 004 Table 6)."""
    K = max(int(round(0.5 / ds_val.dt)), 2)
    tau = ds_val.truth.tau[:K]
    q0, qd0 = ds_val.truth.q[0], ds_val.truth.qd[0]

    def simulate_fn(values):
        return rollout(model.with_values(values).forward_dynamics, q0, qd0, tau, ds_val.dt)[0]

    table = M.sensitivity(simulate_fn, model.values, model.parameter_names)
    (run_dir / "sensitivity.json").write_text(json.dumps(M.sensitivity_to_dict(table), indent=2) + "\n")
    return f"±50 % sensitivity of '{name}' written to sensitivity.json"
