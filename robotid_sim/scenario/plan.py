"""Everything a scenario run needs, checked before anything is simulated, and its data (SPEC §13).

:func:`prepare_run` checks the scenario's fields and the names that become file names
(:mod:`robotid_sim.scenario.schema`), the robot, each estimator and its options, the base-parameter names of
``report.parameter_labels``, both excitations (built, and checked against the joint limits), the noise chain
(against the robot's joint count), the preprocessing, the ``closed_loop`` section (its controllers, options,
models, reference and cost: :mod:`robotid_sim.scenario.closed_loop`), and the run's memory and time
(:mod:`robotid_sim.scenario.budget`: an absurd ``duration``, ``dt`` or ``rate_hz`` is refused with the estimate
and the limit unless ``simulation.allow_large: true``). A scenario refused there leaves nothing on disk.
:func:`simulate_datasets` and :func:`preprocess_datasets` then give a run its data;
:func:`robotid_sim.studies.run.run_scenario` conducts the run.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any, Literal

import numpy as np

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.excitation import excitation_from_config
from robotid_sim.identification import StandardParameterModel
from robotid_sim.identification.problem import check_data_matches_robot, validate_velocity_deadband
from robotid_sim.plugins import get_estimator
from robotid_sim.progress import Progress, relabel
from robotid_sim.robot import load_robot
from robotid_sim.scenario.budget import RunBudget, SimulationCost, estimate_run
from robotid_sim.scenario.closed_loop import ClosedLoopPlan, prepare_closed_loop
from robotid_sim.scenario.schema import (
    CAD_LABEL,
    ClosedLoopStudy,
    PreprocessingConfig,
    Scenario,
    load_scenario,
)
from robotid_sim.signal.filters import check_cutoff
from robotid_sim.signal.preprocess import LOWPASS_NAME, period_samples, preprocess
from robotid_sim.sim.cost import simulation_cost
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


def preprocess_datasets(plan: RunPlan, ds: Dataset, ds_val: Dataset) -> tuple[Dataset, Dataset, list[str]]:
    """The scenario's ``preprocessing`` applied to the identification data, and to recorded validation data
    when it filters or differentiates (a simulation's validation data is evaluated as simulated).

    Returns:
        ``(identification data as preprocessed, validation data as evaluated, notes for the report)``.
    """
    pre = plan.scenario.preprocessing
    ds_ident, notes = preprocess_dataset(ds, pre)
    if plan.recorded is not None and (pre.lowpass_hz is not None or pre.differentiate):
        # recorded validation data gets the same treatment; data/validation.npz holds it as evaluated
        ds_val, _ = preprocess_dataset(ds_val, pre)
        notes.append("the validation recordings were preprocessed the same way (data/validation.npz holds them so)")
    return ds_ident, ds_val, notes


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


def resolve_path(base_dir: Path, ref: str | None) -> str | None:
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
        resolve_path(base_dir, sc.robot), sidecar=resolve_path(base_dir, sc.sidecar), lock_joints=sc.lock_joints or None
    )
    estimators = [(e, get_estimator(e.name).from_options(**e.options)) for e in sc.estimators]
    structure = _model_structure(robot, sc.identification.friction_model)
    validate_velocity_deadband(sc.identification.velocity_deadband, robot.n_dof)  # its length, before simulating
    for _, estimator in estimators:
        estimator.check_structure(structure)
    base = structure.base_parameters()
    _check_parameter_labels(sc.report.parameter_labels, base.names, robot.name)
    n_base = base.count
    forms_regressor = any(not estimator.streams_regressor for _, estimator in estimators)
    if sc.data is not None:
        ident, val = _load_recordings(sc, robot, base_dir)
        _check_recorded_lowpass(sc.preprocessing, ident, val)
        budget = estimate_run(
            SimulationCost(robot.n_dof, 0, ident.n_samples),
            SimulationCost(robot.n_dof, 0, val.n_samples),
            n_base,
            forms_regressor=forms_regressor,
        )
        budget.check()
        closed_loop = _prepare_closed_loop(sc, robot, None, base_dir)
        return RunPlan(
            sc, robot, estimators, budget, recorded=(ident, val), closed_loop=closed_loop, structure=structure
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
    _check_simulated_preprocessing(sc.preprocessing, excitation, sim.rate_hz, ident_cost.samples)
    budget = estimate_run(ident_cost, val_cost, n_base, forms_regressor=forms_regressor)
    budget.check(allow_large=sim.allow_large)
    # after the budget: checking the limits evaluates the whole trajectory
    excitation.check_limits(robot, duration=min(duration, excitation.duration))
    validation_excitation.check_limits(robot, duration=min(validation_duration, validation_excitation.duration))
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
        cad_model(robot) is not None,
        validation_excitation,
        base_dir,
        allow_large=sc.simulation.allow_large,
    )


def _check_simulated_preprocessing(pre: PreprocessingConfig, excitation, rate_hz: float, samples: int) -> None:
    """Period averaging and the low-pass cut-off checked against the samples the simulation will record (the
    periods kept by averaging, which come first)."""
    if pre.period_average is not None:
        samples = period_samples(excitation.describe(), 1.0 / rate_hz, samples, pre.period_average)
    if pre.lowpass_hz is not None:
        check_cutoff(pre.lowpass_hz, rate_hz, samples, LOWPASS_NAME)


def _check_recorded_lowpass(pre: PreprocessingConfig, ident: Dataset, val: Dataset) -> None:
    """The low-pass cut-off checked against each experiment it will filter (its rate and length), before a run
    folder exists: the identification recordings, and the validation recordings, which are filtered too."""
    if pre.lowpass_hz is None:
        return
    for ds in (ident, val):
        for _, samples in experiments(ds):
            part = ds.slice(samples.start, samples.stop)
            # period averaging shortens a record before it is filtered: then only its rate is checked here
            length = part.n_samples if pre.period_average is None else None
            check_cutoff(pre.lowpass_hz, 1.0 / part.dt, length, LOWPASS_NAME)


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
        resolve_path(base_dir, study.robot),
        sidecar=resolve_path(base_dir, study.sidecar),
        lock_joints=study.lock_joints or None,
    )
    cad = cad_model(robot)
    plan = prepare_closed_loop(study.closed_loop, robot, [], cad is not None, None, base_dir)
    return ClosedLoopStudyPlan(study, robot, plan, {CAD_LABEL.casefold(): cad} if cad is not None else {})


def simulate_datasets(plan: RunPlan, progress: Progress | None = None) -> tuple[Dataset, Dataset]:
    """The identification and validation datasets of a simulated scenario (``plan.recorded`` is None).

    Args:
        plan: the checked run (:func:`prepare_run`).
        progress: callable(label, done, total), told the simulations' progress.
    """
    return simulate_dataset(plan, "identification", progress), simulate_dataset(plan, "validation", progress)


def simulate_dataset(
    plan: RunPlan, which: Literal["identification", "validation"], progress: Progress | None = None
) -> Dataset:
    """One dataset of a simulated scenario: ``which`` is ``"identification"`` (the scenario's excitation and seed)
    or ``"validation"`` (its validation excitation, the seed plus the validation's noise-seed offset)."""
    sc, sim = plan.scenario, plan.scenario.simulation
    if which == "identification":
        excitation, duration, seed = plan.excitation, plan.duration, sc.seed
    else:
        excitation, duration = plan.validation_excitation, plan.validation_duration
        seed = sc.seed + sc.validation.noise_seed_offset
    ds = simulate(
        plan.robot,
        excitation,
        duration=duration,
        seed=seed,
        progress=relabel(progress, f"simulate {which} data"),
        noise=plan.noise,
        rate_hz=sim.rate_hz,
        dt=sim.dt,
        kp=sim.kp,
        kd=sim.kd,
    )
    if plan.excitation_default is not None:
        ds.metadata["excitation_default"] = plan.excitation_default
    return ds


def cad_model(robot) -> StandardParameterModel | None:
    """The robot's own parameters (URDF inertia, sidecar or URDF friction) as a model; None if the URDF has none."""
    theta = robot.true_parameters()
    if not np.any(robot.inertials[:, 0] > 0):
        return None
    return StandardParameterModel(robot.structure(), theta, estimator="cad")


def friction_source(robot) -> str:
    """Where the robot's friction comes from: its own ``friction_source``, else ``sidecar`` or ``none``."""
    return getattr(robot, "friction_source", None) or ("sidecar" if robot.sidecar is not None else "none")


def prepare_scenario(scenario: str | Path | Scenario | None = None) -> RunPlan:
    """:func:`prepare_run` of a scenario given as a path or a bundled name (relative paths against its folder), a
    :class:`Scenario` (relative paths against the working folder), or None (:data:`DEFAULT_SCENARIO`)."""
    if isinstance(scenario, Scenario):
        return prepare_run(scenario, Path.cwd())
    path = resolve_scenario_path(scenario)
    return prepare_run(load_scenario(path), path.parent)
