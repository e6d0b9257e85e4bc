"""Run a scenario end to end into a new run folder (SPEC §13): the conductor of ``robotid-sim run`` and
``identify --validate``.

:func:`run_scenario` reads top to bottom: prepare (:func:`robotid_sim.scenario.plan.prepare_scenario`, everything
checked before anything is simulated) → get data (:func:`~robotid_sim.scenario.plan.simulate_datasets`, or the
recordings of a data scenario) → preprocess (:func:`~robotid_sim.scenario.plan.preprocess_datasets`) → identify
(each estimator's ``fit``) → evaluate (:func:`robotid_sim.identification.evaluation.evaluate`) → closed loop
(:func:`robotid_sim.control.comparison.run_closed_loop_plan`, when the scenario has one) → report
(:func:`robotid_sim.report.write_report`). The folder is built by
:func:`robotid_sim.run_folder.build_run_folder` (a ``.partial-*`` folder renamed at the end, removed on failure,
SIGTERM or Ctrl-C).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robotid_sim.control.comparison import run_closed_loop_plan
from robotid_sim.identification import IdentificationProblem, LinearParameterModel
from robotid_sim.identification import metrics as M
from robotid_sim.identification.evaluation import Failure, evaluate, fit_timed
from robotid_sim.identification.validation import OPEN_LOOP_FILE, open_loop_reference, rollout, validation_reference
from robotid_sim.progress import Progress
from robotid_sim.report import EstimatorOutcome, SensitivityOutcome, StudyResult, friction_curves, write_report
from robotid_sim.run_folder import build_run_folder, existing_ancestor, output_root
from robotid_sim.safety import safe_name
from robotid_sim.scenario.plan import (
    RunPlan,
    cad_model,
    friction_source,
    prepare_scenario,
    preprocess_datasets,
    simulate_datasets,
)
from robotid_sim.scenario.schema import CAD_LABEL, Scenario
from robotid_sim.sim.logs import experiments
from robotid_sim.studies.closed_loop import write_closed_loop_series
from robotid_sim.studies.metrics_files import write_metrics

log = logging.getLogger(__name__)

#: a robust estimator rejecting more than this fraction of a joint's samples is flagged in the report
REJECTION_WARNING_FRACTION = 0.05
#: seconds of open-loop simulation behind each RMS of the sensitivity study
SENSITIVITY_HORIZON_S = 0.5


def run_scenario(
    scenario: str | Path | Scenario | None = None,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    on_estimator_done: Callable[[EstimatorOutcome], None] | None = None,
) -> Path:
    """Run a scenario and return the new run folder.

    Everything is checked first (:func:`~robotid_sim.scenario.plan.prepare_run`); then the run folder is built
    under ``out_dir`` by :func:`robotid_sim.run_folder.build_run_folder` (stale partial folders removed first; a
    ``.partial-*`` folder renamed at the end).

    Args:
        scenario: a path, a bundled scenario name, a :class:`Scenario`, or None (the default).
        out_dir: parent of the run folder (default ``./runs``).
        progress: callable(label, done, total) for progress bars.
        on_estimator_done: called with each estimator's outcome as soon as it is ready.

    Raises:
        ConfigError: a scenario that cannot run (nothing is written then), an output folder that cannot be
            created or lacks the space for the data.
        SystemExit: status 143 on SIGTERM, after the partial folder is removed.
    """
    root = output_root(out_dir)  # checked first: creates nothing, and refuses in a moment
    plan = prepare_scenario(scenario)
    try:
        free = shutil.disk_usage(existing_ancestor(root)).free
    except OSError:
        free = None
    if free is not None:
        plan.budget.check_disk(free, root)
    report = progress or (lambda *_: None)
    return build_run_folder(root, plan.scenario.name, lambda run_dir: _run(plan, run_dir, report, on_estimator_done))


def _run(plan: RunPlan, run_dir: Path, progress: Progress, on_done) -> None:
    """prepare → get data → preprocess → identify → evaluate → closed loop → report, into ``run_dir``."""
    sc = plan.scenario
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False))
    ds, ds_val = plan.recorded if plan.recorded is not None else simulate_datasets(plan, progress)
    ds_ident, ds_val, notes = preprocess_datasets(plan, ds, ds_val)
    (run_dir / "data").mkdir()
    ds.save(run_dir / "data" / "identification.npz")
    ds_val.save(run_dir / "data" / "validation.npz")
    problem = IdentificationProblem(
        plan.structure, ds_ident, velocity_deadband=sc.identification.velocity_deadband
    )  # estimators never see the truth
    condition = problem.check_excitation()
    context = _context(plan, run_dir, ds_val)
    identified = _identify_and_evaluate(plan, problem, condition, context, ds_val, run_dir, progress, on_done)
    notes += _notes(plan, identified, context)
    sensitivity = _sensitivity_study(plan, identified, ds_val, run_dir, notes)
    closed_loop, stopped = [], []
    if plan.closed_loop is not None:
        by_label = {o.name.casefold(): model for o, model in zip(identified.outcomes, identified.models, strict=True)}
        closed_loop, more, stopped = run_closed_loop_plan(plan.closed_loop, plan.robot, by_label, progress)
        write_closed_loop_series(run_dir, closed_loop)
        notes += more
    failures = identified.failures + stopped
    rows = identified.rows + [{"controller": o.name, **o.metrics} for o in closed_loop]
    write_metrics(run_dir, rows + [failure.metrics_row() for failure in failures])
    info = _info(plan, ds, ds_val, problem, condition)
    result = _result(plan, context, identified, ds_val, notes, info, sensitivity, closed_loop, failures)
    write_report(run_dir, result, figures=sc.report.figures)


@dataclasses.dataclass(frozen=True)
class _Context:
    """What every model of a run is judged against: the truth of a simulation (None for recorded data), the
    open-loop reference, and the ``CAD`` model (the robot's own parameters; None without URDF inertia)."""

    truth: Any
    open_loop: Any
    cad: Any


def _context(plan: RunPlan, run_dir: Path, ds_val) -> _Context:
    """The run's truth (written to ``truth.json``) and open-loop reference (to :data:`OPEN_LOOP_FILE`)."""
    simulated = plan.recorded is None
    truth = plan.robot.base_parameters()
    truth_table = truth.table() if simulated else []
    (run_dir / "models").mkdir()
    (run_dir / "truth.json").write_text(
        json.dumps({"base_parameters": [{"name": n, "expression": e, "value": v} for n, e, v in truth_table]}, indent=2)
        + "\n"
    )
    open_loop = open_loop_reference(
        plan.robot, ds_val, plan.scenario.validation.trajectory_horizon, simulated=simulated
    )
    if open_loop is not None:
        open_loop.save(run_dir / OPEN_LOOP_FILE)
    return _Context(truth if simulated else None, open_loop, cad_model(plan.robot))


@dataclasses.dataclass
class _Identified:
    """The estimators' results: outcomes and models of those that fitted (and ``CAD``), in order, their rows of
    ``metrics.json``, those without forward dynamics, and the failures of those whose ``fit`` raised."""

    outcomes: list[EstimatorOutcome] = dataclasses.field(default_factory=list)
    models: list = dataclasses.field(default_factory=list)
    rows: list[dict] = dataclasses.field(default_factory=list)
    without_forward: list[str] = dataclasses.field(default_factory=list)
    failures: list[Failure] = dataclasses.field(default_factory=list)


def _identify_and_evaluate(
    plan: RunPlan, problem, condition: float, context: _Context, ds_val, run_dir: Path, progress: Progress, on_done
) -> _Identified:
    """Fit each estimator (then ``CAD``), save its model and evaluate it on the validation data; an estimator
    whose ``fit`` raises is recorded and the others run. Raises the first estimator's error when all failed."""
    effort_limits = np.array([j.effort_limit for j in plan.robot.joints], float)
    entries = [(entry.display, estimator) for entry, estimator in plan.estimators]
    if context.cad is not None:
        entries.append((CAD_LABEL, None))
    done, errors = _Identified(), []
    for k, (label, estimator) in enumerate(entries):
        progress("identify", k, len(entries))
        try:
            model = context.cad if estimator is None else fit_timed(estimator, problem)
        except Exception as exc:  # noqa: BLE001 - a plugin's fit may raise anything; the others still run
            done.failures.append(Failure.of("estimator", label, exc))
            errors.append(exc)
            log.warning("estimator '%s' failed: %s: %s", label, type(exc).__name__, exc)
            continue
        model_path = model.save(run_dir / "models" / f"{safe_name(label, 'estimator label')}.json")
        evaluation = evaluate(
            model,
            ds_val,
            truth=context.truth,
            open_loop=context.open_loop,
            effort_limits=effort_limits,
            condition_number=condition,
        )
        if not evaluation.has_forward_dynamics:
            done.without_forward.append(label)
        outcome = _outcome(label, model, context.truth, evaluation, str(model_path.relative_to(run_dir)))
        done.outcomes.append(outcome)
        done.models.append(model)
        done.rows.append({"estimator": label, **evaluation.metrics})
        if on_done is not None:
            on_done(outcome)
    progress("identify", len(entries), len(entries))
    if len(errors) == len(plan.estimators):
        raise errors[0]  # nothing to compare: the run fails with the (first) estimator's own error
    return done


def _outcome(name: str, model, truth, evaluation, model_path: str) -> EstimatorOutcome:
    """What the report shows of one estimator; true values only for base-parameter models of a simulation."""
    outcome = EstimatorOutcome.of_model(
        name,
        model,
        evaluation.metrics,
        evaluation.tau_predicted,
        model_path,
        truth_names=None if truth is None else list(truth.names),
        truth_values=None if truth is None else truth.true_values(),
    )
    outcome.qdd_predicted, outcome.q_open_loop = evaluation.forward.qdd, evaluation.forward.q_open_loop
    return outcome


def _notes(plan: RunPlan, identified: _Identified, context: _Context) -> list[str]:
    """The report's notes on the estimators: no forward dynamics, rejected samples, the CAD row, no truth,
    diverged open-loop simulations."""
    notes = []
    if identified.without_forward:
        notes.append(
            f"{', '.join(identified.without_forward)}: no forward dynamics (a library with products of "
            "accelerations, or accelerations beside functions of the velocity), so no acceleration or open-loop "
            "validation"
        )
    notes += _robust_notes(identified.outcomes)
    simulated = plan.recorded is None
    if context.cad is not None:
        notes.append(
            f"'{CAD_LABEL}' is the robot's own parameters (URDF inertia; friction: {friction_source(plan.robot)}) "
            "predicting the validation torque" + ("; in a simulation these are the truth" if simulated else "")
        )
    if not simulated:
        notes.append(
            "recorded data: no truth, so the torque RMS against the noise-free torque and the base-parameter error "
            "are not available; the trajectory RMS compares each model's open-loop motion with the measured one"
        )
    diverged = [o.name for o in identified.outcomes if not np.isfinite(o.metrics.get("trajectory_rms_total", 0.0))]
    if diverged:
        notes.append(
            f"trajectory RMS inf: the open-loop simulation of {', '.join(diverged)} diverged within "
            f"{plan.scenario.validation.trajectory_horizon:g} s; such a model's mass matrix is not positive definite "
            "at some state (physically inconsistent parameters)"
        )
    return notes


def _robust_notes(outcomes: list[EstimatorOutcome]) -> list[str]:
    """A line per robust estimator: samples rejected per joint, flagged above :data:`REJECTION_WARNING_FRACTION`."""
    notes = []
    for o in outcomes:
        counts, fractions = o.metrics.get("rejected_per_joint"), o.metrics.get("rejected_fraction_per_joint")
        if counts is None or fractions is None:
            continue
        worst = max(fractions) if fractions else 0.0
        per_joint = ", ".join(f"{c} ({100 * f:.1f} %)" for c, f in zip(counts, fractions, strict=False))
        line = f"'{o.name}' rejected per joint: {per_joint}"
        if worst > REJECTION_WARNING_FRACTION:
            line += (
                f" — WARNING: more than {100 * REJECTION_WARNING_FRACTION:g} % of a joint's samples rejected; the "
                "threshold may be too tight for this data (raise 'threshold' or 'k_sigma')"
            )
        notes.append(line)
    return notes


def _sensitivity_study(
    plan: RunPlan, identified: _Identified, ds_val, run_dir: Path, notes: list[str]
) -> SensitivityOutcome | None:
    """The scenario's ``sensitivity`` study of one estimator's model, or None (a note says why)."""
    config = plan.scenario.sensitivity
    if config is None:
        return None
    name = config.estimator
    labels = [o.name for o in identified.outcomes]
    model = identified.models[labels.index(name)] if name in labels else None
    if model is None:
        notes.append(f"no ±50 % sensitivity: estimator '{name}' failed")
    elif isinstance(model, LinearParameterModel):
        notes.append(f"±50 % sensitivity of '{name}' written to sensitivity.json")
        return _sensitivity(model, name, config.factors, ds_val, run_dir)
    else:
        notes.append(f"no ±50 % sensitivity: '{name}' is not a model linear in parameters")
    return None


def _sensitivity(model, name: str, factors: list[float], ds_val, run_dir: Path) -> SensitivityOutcome:
    """Each identified parameter scaled by each factor on the open-loop validation trajectory (seed 004 Table 6,
    Fig. 8), written to ``sensitivity.json``: one rollout of :data:`SENSITIVITY_HORIZON_S` per parameter and
    factor other than 1, plus the nominal one."""
    K = max(int(round(SENSITIVITY_HORIZON_S / ds_val.dt)), 2)
    tau = ds_val.truth.tau[:K]
    q0, qd0 = ds_val.truth.q[0], ds_val.truth.qd[0]

    def simulate_fn(values):
        return rollout(model.with_values(values).forward_dynamics, q0, qd0, tau, ds_val.dt)[0]

    table = M.sensitivity(simulate_fn, model.values, model.parameter_names, factors)
    horizon = round(len(tau) * ds_val.dt, 9)
    data = {"estimator": name, "horizon_s": horizon, **M.sensitivity_to_dict(table)}
    (run_dir / "sensitivity.json").write_text(json.dumps(data, indent=2) + "\n")
    return SensitivityOutcome(name, table, horizon)


def _info(plan: RunPlan, ds, ds_val, problem, condition: float) -> dict[str, str]:
    """The key/values at the top of the report: robot, samples, base parameters, condition number, data."""
    sc, robot = plan.scenario, plan.robot
    info = {
        "robot": robot.name,
        "samples (identification)": str(ds.n_samples),
        "samples (validation)": str(ds_val.n_samples),
        "base parameters": str(problem.base.count),
        "condition number": f"{condition:.4g}",
        "friction": friction_source(robot),
    }
    if robot.locked_joints:
        info["locked joints"] = ", ".join(f"{name} = {value:g}" for name, value in robot.locked_joints.items())
    if plan.recorded is None:
        info |= {
            "noise": json.dumps(ds.metadata.get("noise")),
            "excitation": ds.metadata["excitation"].get("type", "?"),
            "seed": str(sc.seed),
        }
    else:
        info |= {
            "identification files": ", ".join(name for name, _ in experiments(ds)),
            "validation files": ", ".join(name for name, _ in experiments(ds_val)),
        }
    if sc.identification.velocity_deadband is not None:
        info["velocity dead-band"] = json.dumps(sc.identification.velocity_deadband)
    return info


def _result(
    plan: RunPlan, context: _Context, identified: _Identified, ds_val, notes, info, sensitivity, closed_loop, failures
) -> StudyResult:
    """Everything the report shows of the run."""
    sc, robot = plan.scenario, plan.robot
    labels = [o.name for o in identified.outcomes]
    open_loop = context.open_loop
    return StudyResult(
        title=sc.name,
        robot_name=robot.name,
        joint_names=list(robot.joint_names),
        scenario=sc.model_dump(mode="json"),
        t_validation=ds_val.t,
        tau_measured=ds_val.tau,
        tau_true=ds_val.truth.tau if context.truth is not None else None,
        outcomes=identified.outcomes,
        base_parameter_table=context.truth.table() if context.truth is not None else [],
        notes=notes,
        info=info,
        baselines=[CAD_LABEL] if context.cad is not None else [],
        closed_loop=closed_loop,
        parameter_labels=dict(sc.report.parameter_labels),
        sensitivity=sensitivity,
        friction_curves=friction_curves(dict(zip(labels, identified.models, strict=True)), ds_val.qd),
        failures=failures,
        qdd_reference=np.asarray(validation_reference(ds_val).qdd, float),
        open_loop_t=None if open_loop is None else open_loop.t,
        q_open_loop_reference=None if open_loop is None else open_loop.q_reference,
        joint_kinds=[joint.kind for joint in robot.joints],
    )
