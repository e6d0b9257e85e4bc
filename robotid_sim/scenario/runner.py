"""Run a scenario end to end into a new run folder (SPEC §13).

Before anything is simulated, everything the run needs is checked (:func:`prepare_run`): the scenario's
fields and the names that become file names (:mod:`robotid_sim.scenario.schema`), the robot, each
estimator and its options, the base-parameter names of ``report.parameter_labels``, both excitations (built,
and checked against the joint limits), the noise chain (against the robot's joint count), the preprocessing,
the ``closed_loop`` section (its controllers, options, models, reference and cost:
:mod:`robotid_sim.scenario.closed_loop`), and the run's memory and time
(:mod:`robotid_sim.scenario.budget`: an absurd ``duration``, ``dt`` or ``rate_hz`` is refused with the
estimate and the limit unless ``simulation.allow_large: true``). Then the output folder must be creatable and
hold the data files. A scenario refused there leaves nothing on disk.

The run is built by :func:`robotid_sim.run_folder.build_run_folder` (a ``.partial-*`` folder renamed at the end,
removed on failure, SIGTERM or Ctrl-C).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from robotid_sim.errors import ConfigError, DataError, IdentificationError
from robotid_sim.excitation import excitation_from_config
from robotid_sim.identification import (
    IdentificationProblem,
    LinearParameterModel,
    StandardParameterModel,
)
from robotid_sim.identification import metrics as M
from robotid_sim.identification.evaluation import evaluate
from robotid_sim.identification.problem import check_data_matches_robot
from robotid_sim.identification.validation import (
    OPEN_LOOP_FILE,
    open_loop_reference,
    rollout,
    validation_reference,
)
from robotid_sim.plugins import get_estimator
from robotid_sim.report import (
    EstimatorOutcome,
    Failure,
    SensitivityOutcome,
    StudyResult,
    friction_curves,
    write_report,
)
from robotid_sim.robot import load_robot
from robotid_sim.run_folder import build_run_folder, existing_ancestor, output_root
from robotid_sim.safety import safe_name
from robotid_sim.scenario.budget import RunBudget, SimulationCost, estimate_run, simulation_cost
from robotid_sim.scenario.closed_loop import ClosedLoopPlan, prepare_closed_loop, run_closed_loop_plan
from robotid_sim.scenario.schema import (
    CAD_LABEL,
    CLOSED_LOOP_FILE,
    ClosedLoopStudy,
    PreprocessingConfig,
    Scenario,
    load_scenario,
)
from robotid_sim.signal.preprocess import period_samples, preprocess
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.logs import experiments, load_logs, parse_log_source, per_experiment
from robotid_sim.sim.simulate import (
    GENERIC_EXCITATION,
    generic_excitation_limits,
    generic_excitation_note,
    resolve_excitation,
    resolve_noise,
    simulate,
)

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]


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


def _validation_excitation(scenario: Scenario, robot):
    """The validation trajectory: ``validation.excitation``, else the identification one with its seeds moved.

    ``excitation: default`` whose default has no seed to move (a fixed, e.g. optimised, trajectory; or a
    robot without a default) is validated on the generic random Fourier excitation
    (:data:`~robotid_sim.sim.simulate.GENERIC_EXCITATION`, another seed) inside the robot's limits.
    """
    cfg = scenario.validation.excitation
    if cfg is not None:
        return resolve_excitation(robot, cfg)
    ident = scenario.excitation
    is_default = ident == "default"
    if is_default:
        ident = robot.sidecar.default_excitation if robot.sidecar is not None else None
    reseeded = _reseed(ident) if isinstance(ident, dict) else None
    if reseeded is not None and reseeded != ident:
        return resolve_excitation(robot, reseeded)
    if is_default:
        log.info("validation: the default excitation of '%s' has no seed; using a generic Fourier series", robot.name)
        return excitation_from_config(_reseed(dict(GENERIC_EXCITATION)), generic_excitation_limits(robot))
    raise ConfigError(
        "validation.excitation is required when the identification excitation has no 'seed' "
        "(the validation trajectory must differ from the identification one); add a 'seed' to the excitation "
        "or give validation: {excitation: {...}}"
    )


def _reseed(config, offset: int = 1000):
    """A copy of an excitation mapping with every 'seed' moved by ``offset``."""
    if isinstance(config, dict):
        return {k: (int(v) + offset if k == "seed" else _reseed(v, offset)) for k, v in config.items()}
    if isinstance(config, list):
        return [_reseed(v, offset) for v in config]
    return config


def preprocess_dataset(ds, cfg: PreprocessingConfig):
    """The scenario's ``preprocessing`` applied to a dataset (:func:`robotid_sim.signal.preprocess.preprocess`:
    period averaging, then low-pass and differentiation within each experiment); ``(dataset, notes)``."""
    return preprocess(
        ds,
        per_experiment=per_experiment,
        experiments=experiments,
        lowpass_hz=cfg.lowpass_hz,
        differentiate=cfg.differentiate,
        period_average=cfg.period_average,
    )


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """Everything a run needs, built and checked by :func:`prepare_run` before anything is simulated.

    Attributes:
        scenario: the validated scenario.
        robot: the robot (its sidecar and locked joints applied).
        estimators: (scenario entry, estimator) pairs, options applied.
        budget: the estimated memory, time and disk of the run.
        excitation, validation_excitation: the two trajectories, checked against the joint limits
            (None for a data scenario).
        noise: the noise chain, checked against the robot's joint count (None for a data scenario).
        duration, validation_duration: seconds simulated for each (0 for a data scenario).
        excitation_default: what ``excitation: default`` means for a robot whose sidecar gives no
            default (:func:`~robotid_sim.sim.simulate.generic_excitation_note`), else None; recorded in
            both datasets' metadata.
        recorded: (identification, validation) datasets of a data scenario, loaded and checked; else None.
        closed_loop: the ``closed_loop`` section, checked
            (:func:`~robotid_sim.scenario.closed_loop.prepare_closed_loop`); None without one.
        structure: what the estimators are given: the robot's structure, with the friction law of
            ``identification.friction_model`` when the scenario states one.
    """

    scenario: Scenario
    robot: Any
    estimators: list
    budget: RunBudget
    excitation: Any = None
    validation_excitation: Any = None
    noise: Any = None
    duration: float = 0.0
    validation_duration: float = 0.0
    excitation_default: dict | None = None
    recorded: tuple[Dataset, Dataset] | None = None
    closed_loop: ClosedLoopPlan | None = None
    structure: Any = None


def _model_structure(robot, law: dict | None):
    """The robot's structure with the friction law the scenario's models assume (``identification.friction_model``)."""
    structure = robot.structure()
    if law is None:
        return structure
    try:
        assumed = structure.with_friction_law(law)
    except ConfigError as exc:
        raise ConfigError(f"scenario field 'identification.friction_model': {exc}") from None
    new = [n for n in assumed.parameter_names if n not in structure.parameter_names]
    if new:
        raise ConfigError(
            f"scenario field 'identification.friction_model': law '{assumed.friction_law['model']}' has friction "
            f"parameters {new[:3]} that robot '{robot.name}' ({structure.friction_law['model']}) lacks, so they have "
            "no true value; choose a law whose coefficients are among the robot's (the same law, or a simpler one: "
            "coulomb_viscous and nonlinear have fc, fv, S)"
        )
    return assumed


def _resolve(base_dir: Path, ref: str | None) -> str | None:
    """A path of the scenario made absolute against its folder (a bundled robot name is left alone)."""
    if ref is None or Path(ref).is_absolute() or not (ref.endswith((".urdf", ".yaml", ".yml")) or "/" in ref):
        return ref
    return str((base_dir / ref).resolve())


def _load_recordings(sc: Scenario, robot, base_dir: Path) -> tuple[Dataset, Dataset]:
    """The identification and validation recordings of a data scenario, each stacked as experiments."""
    loaded = []
    for which in ("identification", "validation"):
        sources = [
            parse_log_source(entry, f"scenario field 'data.{which}[{k}]'")
            for k, entry in enumerate(sc.data.sources(which))
        ]
        loaded.append(load_logs(sources, robot, base_dir=base_dir))
    ident, val = loaded
    for ds, which in ((ident, "identification"), (val, "validation")):
        check_data_matches_robot(ds, robot.structure())
        if ds.n_samples < 2 * robot.n_dof:
            raise DataError(f"the {which} data holds {ds.n_samples} samples; record more")
    return ident, val


def prepare_run(sc: Scenario, base_dir: str | Path | None = None) -> RunPlan:
    """Build and check everything a scenario run needs; nothing is simulated or written.

    Args:
        sc: a validated scenario.
        base_dir: folder that relative paths of the scenario (URDF, sidecar, data files) are resolved against
            (default: the working folder).

    Raises:
        ConfigError (or another :class:`~robotid_sim.errors.RobotIdError`): the first problem found, in this
            order: robot, estimators and their options (also against the robot: ``Estimator.check_structure``),
            the names of ``report.parameter_labels`` (base parameters of the robot), data files or excitations
            and noise chain, preprocessing, resource budget (memory, time), excitation limits.
    """
    base_dir = Path.cwd() if base_dir is None else Path(base_dir)
    robot = load_robot(
        _resolve(base_dir, sc.robot), sidecar=_resolve(base_dir, sc.sidecar), lock_joints=sc.lock_joints or None
    )
    estimators = [(e, get_estimator(e.name).from_options(**e.options)) for e in sc.estimators]
    structure = _model_structure(robot, sc.identification.friction_model)
    for _, estimator in estimators:
        estimator.check_structure(structure)
    base = structure.base_parameters()
    _check_parameter_labels(sc.report.parameter_labels, base.names, robot.name)
    n_base = base.count
    forms_regressor = any(not estimator.streams_regressor for _, estimator in estimators)
    if sc.data is not None:
        ident, val = _load_recordings(sc, robot, base_dir)
        _check_lowpass(sc.preprocessing.lowpass_hz, 1.0 / ident.dt, "the identification data's rate")
        budget = estimate_run(
            SimulationCost(robot.n_dof, 0, ident.n_samples),
            SimulationCost(robot.n_dof, 0, val.n_samples),
            n_base,
            forms_regressor=forms_regressor,
        )
        budget.check()
        return RunPlan(
            scenario=sc,
            robot=robot,
            estimators=estimators,
            budget=budget,
            recorded=(ident, val),
            closed_loop=_prepare_closed_loop(sc, robot, None, base_dir),
            structure=structure,
        )
    sim = sc.simulation
    excitation = resolve_excitation(robot, sc.excitation)
    validation_excitation = _validation_excitation(sc, robot)
    noise = resolve_noise(robot, sc.noise)
    noise.check_joints(robot.n_dof)
    duration = float(excitation.duration if sim.duration is None else sim.duration)
    validation_duration = float(
        validation_excitation.duration if sc.validation.duration is None else sc.validation.duration
    )
    ident_cost = simulation_cost(robot.n_dof, duration, sim.dt, sim.rate_hz, "simulation")
    val_cost = simulation_cost(robot.n_dof, validation_duration, sim.dt, sim.rate_hz, "validation simulation")
    pre = sc.preprocessing
    _check_lowpass(pre.lowpass_hz, sim.rate_hz, "simulation.rate_hz")
    if pre.period_average is not None:
        period_samples(excitation.describe(), 1.0 / sim.rate_hz, ident_cost.samples, pre.period_average)
    budget = estimate_run(ident_cost, val_cost, n_base, forms_regressor=forms_regressor)
    budget.check(allow_large=sim.allow_large)
    # after the budget: checking the limits evaluates the whole trajectory
    excitation.check_limits(robot)
    validation_excitation.check_limits(robot)
    return RunPlan(
        scenario=sc,
        robot=robot,
        estimators=estimators,
        budget=budget,
        excitation=excitation,
        validation_excitation=validation_excitation,
        noise=noise,
        duration=duration,
        validation_duration=validation_duration,
        excitation_default=generic_excitation_note(robot) if sc.excitation == "default" else None,
        closed_loop=_prepare_closed_loop(sc, robot, validation_excitation, base_dir),
        structure=structure,
    )


def _check_parameter_labels(labels: dict[str, str], names: list[str], robot_name: str) -> None:
    """ConfigError naming each key of ``report.parameter_labels`` that is not a base parameter of the robot."""
    unknown = [name for name in labels if name not in names]
    if unknown:
        raise ConfigError(
            f"scenario field 'report.parameter_labels': {', '.join(repr(n) for n in unknown)} "
            f"{'is not a base parameter' if len(unknown) == 1 else 'are not base parameters'} of robot "
            f"'{robot_name}'; its base parameters are {', '.join(names)}"
        )


def _prepare_closed_loop(sc: Scenario, robot, validation_excitation, base_dir: Path) -> ClosedLoopPlan | None:
    """The scenario's ``closed_loop`` section checked, its models named by the estimators' labels; None without one."""
    if sc.closed_loop is None:
        return None
    return prepare_closed_loop(
        sc.closed_loop,
        robot,
        [e.display for e in sc.estimators],
        _cad_model(robot) is not None,
        validation_excitation,
        base_dir,
        allow_large=sc.simulation.allow_large,
    )


def _check_lowpass(lowpass_hz: float | None, rate_hz: float, what: str) -> None:
    if lowpass_hz is not None and lowpass_hz >= rate_hz / 2:
        raise ConfigError(
            f"preprocessing.lowpass_hz = {lowpass_hz:g} Hz must be below the Nyquist frequency of {what}, "
            f"{rate_hz / 2:g} Hz"
        )


def run_scenario(
    scenario: str | Path | Scenario | None = None,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    on_estimator_done: Callable[[EstimatorOutcome], None] | None = None,
) -> Path:
    """Run a scenario and return the new run folder.

    Everything is checked first (:func:`prepare_run`); then the run folder is built under ``out_dir`` by
    :func:`robotid_sim.run_folder.build_run_folder` (stale partial folders removed first; a ``.partial-*``
    folder renamed at the end).

    Args:
        scenario: a path, a bundled scenario name, a :class:`Scenario`, or None (the default).
        out_dir: parent of the run folder (default ``./runs``).
        progress: callable(task, done, total) for progress bars.
        on_estimator_done: called with each estimator's outcome as soon as it is ready.

    Raises:
        ConfigError: a scenario that cannot run (nothing is written then), an output folder that cannot be
            created or lacks the space for the data.
        SystemExit: status 143 on SIGTERM, after the partial folder is removed.
    """
    if isinstance(scenario, Scenario):
        sc, base_dir = scenario, Path.cwd()
    else:
        path = resolve_scenario_path(scenario)
        sc, base_dir = load_scenario(path), path.parent
    plan = prepare_run(sc, base_dir)
    root = output_root(out_dir)
    try:
        free = shutil.disk_usage(existing_ancestor(root)).free
    except OSError:
        free = None
    if free is not None:
        plan.budget.check_disk(free, root)
    report = progress or (lambda *_: None)
    return build_run_folder(root, sc.name, lambda partial: _run(plan, partial, report, on_estimator_done))


@dataclasses.dataclass(frozen=True)
class ClosedLoopStudyPlan:
    """A closed-loop study checked by :func:`prepare_closed_loop_study`: the study, its robot, its checked
    section, and the models its labels name (``CAD``)."""

    study: ClosedLoopStudy
    robot: Any
    closed_loop: ClosedLoopPlan
    models: dict[str, Any]


def prepare_closed_loop_study(study: ClosedLoopStudy, base_dir: str | Path | None = None) -> ClosedLoopStudyPlan:
    """Check everything a closed-loop study needs (the robot, each controller and its options, each model file,
    the reference against the joint limits, the time and memory limits); nothing is simulated or written.

    Args:
        study: the validated study.
        base_dir: folder that relative paths (URDF, sidecar, model files) are resolved against (default: the
            working folder).

    Raises:
        ConfigError (or another :class:`~robotid_sim.errors.RobotIdError`): the first problem found.
    """
    base_dir = Path.cwd() if base_dir is None else Path(base_dir)
    robot = load_robot(
        _resolve(base_dir, study.robot),
        sidecar=_resolve(base_dir, study.sidecar),
        lock_joints=study.lock_joints or None,
    )
    cad = _cad_model(robot)
    plan = prepare_closed_loop(study.closed_loop, robot, [], cad is not None, None, base_dir)
    return ClosedLoopStudyPlan(study, robot, plan, {CAD_LABEL.casefold(): cad} if cad is not None else {})


def run_closed_loop_study(
    study: ClosedLoopStudy | ClosedLoopStudyPlan,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    base_dir: str | Path | None = None,
) -> Path:
    """A closed-loop comparison on its own (``robotid-sim closed-loop``) into a new run folder.

    The study is checked first (:func:`prepare_closed_loop_study`, unless it is given prepared); the folder is
    then built like a scenario run's (``.partial-*``, renamed at the end, never an existing one). It holds
    ``closed_loop.yaml`` (the study as run), ``metrics.json`` and ``metrics.csv`` (one row per controller: η
    and the largest error per joint), ``plots/tracking_errors.png``, ``report.md`` and ``report.html``.

    Args:
        study: the validated study, or the plan :func:`prepare_closed_loop_study` made of it.
        out_dir: parent of the run folder (default ``./runs``).
        progress: callable(task, done, total) for progress bars.
        base_dir: as for :func:`prepare_closed_loop_study`.

    Raises:
        ConfigError (or another :class:`~robotid_sim.errors.RobotIdError`): a study that cannot run; nothing
            is written then.
    """
    plan = study if isinstance(study, ClosedLoopStudyPlan) else prepare_closed_loop_study(study, base_dir)
    root = output_root(out_dir)
    report = progress or (lambda *_: None)
    robot = plan.robot

    def write(run_dir: Path) -> None:
        data = plan.study.model_dump(mode="json")
        (run_dir / CLOSED_LOOP_FILE).write_text(yaml.safe_dump(data, sort_keys=False))
        outcomes, notes, failures = run_closed_loop_plan(plan.closed_loop, robot, plan.models, report)
        if failures and not outcomes:
            raise IdentificationError(f"every controller failed; the first, '{failures[0].name}': {failures[0].error}")
        rows = [{"controller": o.name, **o.metrics} for o in outcomes] + [f.metrics_row() for f in failures]
        _write_metrics(run_dir, rows)
        result = StudyResult(
            title=plan.study.name,
            robot_name=robot.name,
            joint_names=list(robot.joint_names),
            scenario=data,
            t_validation=np.zeros(0),
            tau_measured=np.zeros((0, robot.n_dof)),
            tau_true=None,
            outcomes=[],
            notes=notes,
            info={"friction": _friction_source(robot)},
            closed_loop=outcomes,
            failures=failures,
        )
        write_report(run_dir, result)

    return build_run_folder(root, plan.study.name, write)


def _run(plan: RunPlan, run_dir: Path, report: Progress, on_done) -> None:
    sc = plan.scenario
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False))
    ds, ds_val = plan.recorded if plan.recorded is not None else _simulate(plan, report)
    ds_ident, notes = preprocess_dataset(ds, sc.preprocessing)
    if plan.recorded is not None and (sc.preprocessing.lowpass_hz is not None or sc.preprocessing.differentiate):
        # recorded validation data gets the same treatment; data/validation.npz holds it as evaluated
        ds_val, _ = preprocess_dataset(ds_val, sc.preprocessing)
        notes.append("the validation recordings were preprocessed the same way (data/validation.npz holds them so)")
    (run_dir / "data").mkdir()
    ds.save(run_dir / "data" / "identification.npz")
    ds_val.save(run_dir / "data" / "validation.npz")
    _study(plan, run_dir, ds, ds_ident, ds_val, notes, report, on_done)


def _simulate(plan: RunPlan, report: Progress) -> tuple[Dataset, Dataset]:
    """The identification and validation datasets of a simulated scenario."""
    sc, robot, sim = plan.scenario, plan.robot, plan.scenario.simulation

    def sim_progress(label):
        return lambda done, total: report(label, done, total)

    common = {"noise": plan.noise, "rate_hz": sim.rate_hz, "dt": sim.dt, "kp": sim.kp, "kd": sim.kd}
    ds = simulate(
        robot,
        plan.excitation,
        duration=plan.duration,
        seed=sc.seed,
        progress=sim_progress("simulate identification data"),
        **common,
    )
    ds_val = simulate(
        robot,
        plan.validation_excitation,
        duration=plan.validation_duration,
        seed=sc.seed + sc.validation.noise_seed_offset,
        progress=sim_progress("simulate validation data"),
        **common,
    )
    if plan.excitation_default is not None:
        ds.metadata["excitation_default"] = ds_val.metadata["excitation_default"] = plan.excitation_default
    return ds, ds_val


def _cad_model(robot) -> StandardParameterModel | None:
    """The robot's own parameters (URDF inertia, sidecar or URDF friction) as a model; None if the URDF has none."""
    theta = robot.true_parameters()
    if not np.any(robot.inertials[:, 0] > 0):
        return None
    return StandardParameterModel(robot.structure(), theta, estimator="cad")


def _study(plan: RunPlan, run_dir: Path, ds, ds_ident, ds_val, notes: list[str], report: Progress, on_done) -> None:
    """Identify with every estimator, evaluate on the validation data, run the closed loop (if the scenario has
    one) with the models just identified, write models, metrics and the report.

    A simulated run has a truth (``ds_val.truth`` and the robot's parameters); a data scenario has none, and
    the metrics that need one are left out (shown as not available). The ``CAD`` row is the robot's own
    parameters predicting the validation torque.
    """
    sc, robot, estimators = plan.scenario, plan.robot, plan.estimators
    simulated = plan.recorded is None
    problem = IdentificationProblem(
        plan.structure, ds_ident, velocity_deadband=sc.identification.velocity_deadband
    )  # estimators never see the truth
    condition = problem.check_excitation()
    truth = robot.base_parameters()
    truth_table = truth.table() if simulated else []
    tau_val_true = ds_val.truth.tau if simulated else None
    effort_limits = np.array([j.effort_limit for j in robot.joints], float)
    outcomes: list[EstimatorOutcome] = []
    without_forward: list[str] = []
    failed: list[tuple[Failure, Exception]] = []  # estimators whose fit raised
    failures: list[Failure] = []  # controllers that raised or stopped in the loop
    models = []
    metric_rows = []
    (run_dir / "models").mkdir()
    (run_dir / "truth.json").write_text(
        json.dumps({"base_parameters": [{"name": n, "expression": e, "value": v} for n, e, v in truth_table]}, indent=2)
        + "\n"
    )
    horizon = sc.validation.trajectory_horizon
    open_loop = open_loop_reference(robot, ds_val, horizon, simulated=simulated)
    if open_loop is not None:
        open_loop.save(run_dir / OPEN_LOOP_FILE)
    cad = _cad_model(robot)
    entries = [(entry.display, estimator) for entry, estimator in estimators]
    if cad is not None:
        entries.append((CAD_LABEL, None))
    for k, (label, estimator) in enumerate(entries):
        report("identify", k, len(entries))
        if estimator is None:
            model = cad
        else:
            try:
                model = estimator.fit(problem)
            except Exception as exc:  # noqa: BLE001 - a plugin's fit may raise anything; the others still run
                failed.append((Failure.of("estimator", label, exc), exc))
                log.warning("estimator '%s' failed: %s: %s", label, type(exc).__name__, exc)
                continue
        model_path = model.save(run_dir / "models" / f"{safe_name(label, 'estimator label')}.json")
        evaluation = evaluate(
            model,
            ds_val,
            truth=truth if simulated else None,
            open_loop=open_loop,
            effort_limits=effort_limits,
            condition_number=condition,
        )
        metrics, pred, forward = evaluation.metrics, evaluation.tau_predicted, evaluation.forward
        if not evaluation.has_forward_dynamics:
            without_forward.append(label)
        outcome = _outcome(
            label, model, truth if simulated else None, metrics, pred, str(model_path.relative_to(run_dir))
        )
        outcome.qdd_predicted, outcome.q_open_loop = forward.qdd, forward.q_open_loop
        outcomes.append(outcome)
        models.append(model)
        metric_rows.append({"estimator": label, **metrics})
        if on_done is not None:
            on_done(outcome)
    report("identify", len(entries), len(entries))
    if len(failed) == len(estimators):
        raise failed[0][1]  # nothing to compare: the run fails with the (first) estimator's own error
    labels = [o.name for o in outcomes]
    if without_forward:
        notes.append(
            f"{', '.join(without_forward)}: no forward dynamics (a library with products of accelerations, or "
            "accelerations beside functions of the velocity), so no acceleration or open-loop validation"
        )

    notes += _robust_notes(outcomes)
    if cad is not None:
        notes.append(
            f"'{CAD_LABEL}' is the robot's own parameters (URDF inertia; friction: {_friction_source(robot)}) "
            "predicting the validation torque" + ("; in a simulation these are the truth" if simulated else "")
        )
    if not simulated:
        notes.append(
            "recorded data: no truth, so the torque RMS against the noise-free torque and the base-parameter error "
            "are not available; the trajectory RMS compares each model's open-loop motion with the measured one"
        )
    diverged = [o.name for o in outcomes if not np.isfinite(o.metrics.get("trajectory_rms_total", 0.0))]
    if diverged:
        notes.append(
            f"trajectory RMS inf: the open-loop simulation of {', '.join(diverged)} diverged within "
            f"{horizon:g} s; such a model's mass matrix is not positive definite at some state "
            "(physically inconsistent parameters)"
        )
    sensitivity = None
    if sc.sensitivity is not None:
        name = sc.sensitivity.estimator
        model = models[labels.index(name)] if name in labels else None
        if model is None:
            notes.append(f"no ±50 % sensitivity: estimator '{name}' failed")
        elif isinstance(model, LinearParameterModel):
            sensitivity = _sensitivity(model, name, sc.sensitivity.factors, ds_val, run_dir)
            notes.append(f"±50 % sensitivity of '{name}' written to sensitivity.json")
        else:
            notes.append(f"no ±50 % sensitivity: '{name}' is not a model linear in parameters")

    closed_loop = []
    if plan.closed_loop is not None:
        by_label = {label.casefold(): model for label, model in zip(labels, models, strict=True)}
        closed_loop, more, stopped = run_closed_loop_plan(plan.closed_loop, robot, by_label, report)
        notes += more
        metric_rows += [{"controller": o.name, **o.metrics} for o in closed_loop]
        failures += stopped

    failures = [failure for failure, _ in failed] + failures
    metric_rows += [failure.metrics_row() for failure in failures]
    _write_metrics(run_dir, metric_rows)
    info = {
        "robot": robot.name,
        "samples (identification)": str(ds.n_samples),
        "samples (validation)": str(ds_val.n_samples),
        "base parameters": str(problem.base.count),
        "condition number": f"{condition:.4g}",
        "friction": _friction_source(robot),
    }
    if robot.locked_joints:
        info["locked joints"] = ", ".join(f"{name} = {value:g}" for name, value in robot.locked_joints.items())
    if simulated:
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
        info=info,
        baselines=[CAD_LABEL] if cad is not None else [],
        closed_loop=closed_loop,
        parameter_labels=dict(sc.report.parameter_labels),
        sensitivity=sensitivity,
        friction_curves=friction_curves(dict(zip(labels, models, strict=True)), ds_val.qd),
        failures=failures,
        qdd_reference=np.asarray(validation_reference(ds_val).qdd, float),
        open_loop_t=None if open_loop is None else open_loop.t,
        q_open_loop_reference=None if open_loop is None else open_loop.q_reference,
    )
    write_report(run_dir, result)


#: a robust estimator rejecting more than this fraction of a joint's samples is flagged in the report
REJECTION_WARNING_FRACTION = 0.05


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


def _friction_source(robot) -> str:
    return getattr(robot, "friction_source", None) or ("sidecar" if robot.sidecar is not None else "none")


def _outcome(name: str, model, truth, metrics: dict, pred, model_path: str) -> EstimatorOutcome:
    """What the report shows of one estimator; true values only for base-parameter models of a simulation."""
    return EstimatorOutcome.of_model(
        name,
        model,
        metrics,
        pred,
        model_path,
        truth_names=None if truth is None else list(truth.names),
        truth_values=None if truth is None else truth.true_values(),
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


#: seconds of open-loop simulation behind each RMS of the sensitivity study
SENSITIVITY_HORIZON_S = 0.5


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
