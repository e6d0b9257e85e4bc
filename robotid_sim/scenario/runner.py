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

The run is built in a hidden ``.partial-*`` folder and renamed to its final name only when
everything is written, so a failed run never leaves a folder that looks complete, and a run
never overwrites an earlier one. An interrupted run (Ctrl-C, or SIGTERM as sent by ``timeout``, CI runners
and ``kill``) removes its partial folder before exiting (SIGTERM exits with status 143). A run killed
outright (SIGKILL, out of memory) cannot; each partial folder therefore records its owner (process id,
process start time, host) in a ``.owner`` file, and every run first removes the partial folders under its
output folder whose owner process on this host is no longer running, saying so in a warning (those of a
live run, or of another host, are left alone; one without an owner record is removed once untouched for
24 hours).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
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
from robotid_sim.identification.lmi import model_consistency
from robotid_sim.identification.problem import check_data_matches_robot
from robotid_sim.identification.validation import TrajectoryError, rollout
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
from robotid_sim.safety import safe_name
from robotid_sim.scenario.budget import RunBudget, SimulationCost, estimate_run, simulation_cost
from robotid_sim.scenario.closed_loop import ClosedLoopPlan, prepare_closed_loop, run_closed_loop_plan
from robotid_sim.scenario.schema import CAD_LABEL, CLOSED_LOOP_FILE, ClosedLoopStudy, Scenario, load_scenario
from robotid_sim.signal import period_average
from robotid_sim.sim.dataset import Dataset, Signals
from robotid_sim.sim.logs import experiments, load_logs, parse_log_source, preprocess
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


#: prefix of the folder a run is built in
PARTIAL_PREFIX = ".partial-"
#: file in a partial folder naming the process that builds it
OWNER_FILE = ".owner"
#: a partial folder without a readable owner record is stale once untouched this long (seconds)
UNOWNED_STALE_AFTER_S = 24 * 3600.0


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of process ``pid`` from Linux ``/proc``, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _process_start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux), or None if unknown."""
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def _owner_record() -> dict[str, Any]:
    pid = os.getpid()
    return {
        "pid": pid,
        "start": _process_start(pid),
        "host": socket.gethostname(),
        "created": datetime.now().isoformat(timespec="seconds"),
    }


def _alive(pid: int, start: int | None) -> bool:
    """Whether process ``pid`` (started at ``start`` ticks, when known) still runs on this host."""
    if os.name == "nt":
        return True  # os.kill(pid, 0) would terminate the process there: never probe, never remove
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # exists but belongs to another user (PermissionError), or cannot tell: assume alive
    stat = _proc_stat(pid)
    if stat is not None:
        state, started = stat
        if state in ("Z", "X"):
            return False  # killed, not yet reaped by its parent
        if start is not None and started != start:
            return False  # the id was reused by a newer process
    return True


def _stale_reason(partial: Path) -> str | None:
    """Why ``partial`` is a leftover of a run that no longer runs, or None to leave it."""
    try:
        with open(partial / OWNER_FILE, "rb") as fh:
            owner = json.loads(fh.read(4096))
    except (OSError, ValueError):
        owner = None
    pid = owner.get("pid") if isinstance(owner, dict) else None
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        try:
            idle = time.time() - partial.stat().st_mtime
        except OSError:
            return None
        if idle > UNOWNED_STALE_AFTER_S:
            return f"no owner record, untouched for {idle / 3600:.0f} h"
        return None
    if owner.get("host") != socket.gethostname():
        return None  # another machine's run (shared folder): we cannot tell whether it still runs
    start = owner.get("start")
    if _alive(pid, start if isinstance(start, int) and not isinstance(start, bool) else None):
        return None
    return f"its run, process {pid}, is no longer running"


def remove_stale_partials(root: str | Path) -> list[Path]:
    """Remove the ``.partial-*`` folders under ``root`` left by runs that were killed (module docstring).

    A folder whose owner process (``.owner``: pid, start time, host) still runs on this host, or that belongs
    to another host, is left alone. Each removal is logged as a warning naming the folder.

    Returns:
        The folders removed.
    """
    root = Path(root)
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    removed = []
    for path in entries:
        if not path.name.startswith(PARTIAL_PREFIX) or path.is_symlink() or not path.is_dir():
            continue
        reason = _stale_reason(path)
        if reason is None:
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            log.warning("removed the partial run folder %s left by an interrupted run (%s)", path, reason)
            removed.append(path)
    return removed


def _new_run_dir(root: Path, name: str) -> tuple[Path, Path]:
    """(partial dir created now with its owner record, final dir name reserved); never an existing folder."""
    safe_name(name, "scenario name")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the output folder {root}: {exc.strerror or exc}") from None
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for k in range(1000):
        final = root / (f"{name}-{stamp}" if k == 0 else f"{name}-{stamp}-{k}")
        partial = root / f"{PARTIAL_PREFIX}{final.name}"
        if final.exists() or partial.exists():
            continue
        try:
            partial.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"cannot create a run folder in {root}: {exc.strerror or exc}") from None
        try:
            (partial / OWNER_FILE).write_text(json.dumps(_owner_record()) + "\n")
        except BaseException as exc:
            shutil.rmtree(partial, ignore_errors=True)
            if isinstance(exc, OSError):
                raise ConfigError(f"cannot write into the run folder {partial}: {exc.strerror or exc}") from None
            raise
        return partial, final
    raise ConfigError(f"could not find a free run folder name under {root}")


@contextlib.contextmanager
def _sigterm_raises_system_exit() -> Iterator[None]:
    """While inside, SIGTERM raises ``SystemExit(143)`` so that clean-up code runs (main thread only).

    Installed only where SIGTERM has its default action (which would kill the process without clean-up);
    an application's own handler, or an ignored SIGTERM, is left as it is. The previous handler is
    restored on exit. After the first SIGTERM further ones are ignored, so they cannot cut the clean-up.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) not in (
        signal.SIG_DFL,
        None,
    ):
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def terminate(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


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


def _preprocess(ds, cfg):
    """Apply the scenario's preprocessing to the measured signals (SPEC §7), in this order:
    period averaging (seed 001 §5), zero-phase low-pass, differentiation; the last two within each
    experiment (:func:`robotid_sim.sim.logs.preprocess`), never across the join of two recordings."""
    notes = []
    if cfg.period_average is not None:
        ds = _average_periods(ds, cfg.period_average)
        notes.append(f"{cfg.period_average} periods averaged into one (seed 001 §5)")
    ds, more = preprocess(ds, lowpass_hz=cfg.lowpass_hz, differentiate=cfg.differentiate)
    return ds, notes + list(more)


def _period_samples(excitation: dict, sample_dt: float, n_samples: int, periods: int) -> int:
    """Samples per period for ``preprocessing.period_average``; ConfigError unless ``periods`` whole periods fit."""
    if excitation.get("type") != "fourier" or "omega_f" not in excitation:
        raise ConfigError(
            f"preprocessing.period_average needs a periodic (fourier) excitation, got '{excitation.get('type')}'"
        )
    samples = 2 * np.pi / float(excitation["omega_f"]) / sample_dt
    if abs(samples - round(samples)) > 1e-6 * samples:
        raise ConfigError(
            f"preprocessing.period_average: the period ({samples:.4g} samples) is not a whole number of "
            "samples; choose rate_hz so that rate_hz / base_frequency is an integer"
        )
    samples = int(round(samples))
    if n_samples < periods * samples:
        raise ConfigError(
            f"preprocessing.period_average = {periods} but the data holds {n_samples / samples:.2f} periods; "
            "set excitation.periods (or simulation.duration) to cover them"
        )
    return samples


def _average_periods(ds, periods: int):
    """The mean of the first ``periods`` periods of a dataset recorded on a Fourier excitation."""
    samples = _period_samples(ds.metadata.get("excitation", {}), ds.dt, ds.n_samples, periods)
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
        _period_samples(excitation.describe(), 1.0 / sim.rate_hz, ident_cost.samples, pre.period_average)
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


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def run_scenario(
    scenario: str | Path | Scenario | None = None,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    on_estimator_done: Callable[[EstimatorOutcome], None] | None = None,
) -> Path:
    """Run a scenario and return the new run folder.

    Everything is checked first (:func:`prepare_run`); then stale partial folders under ``out_dir`` are
    removed (:func:`remove_stale_partials`) and the run is built in a ``.partial-*`` folder, renamed at the
    end (module docstring).

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
    root = _output_root(out_dir)
    try:
        free = shutil.disk_usage(_existing_ancestor(root)).free
    except OSError:
        free = None
    if free is not None:
        plan.budget.check_disk(free, root)
    report = progress or (lambda *_: None)
    return _build_run_folder(root, sc.name, lambda partial: _run(plan, partial, report, on_estimator_done))


def _output_root(out_dir: str | Path | None) -> Path:
    """The parent folder of the run folder (default ``./runs``); ConfigError if it is a file."""
    root = Path(out_dir) if out_dir is not None else DEFAULT_RUNS_DIR
    if root.exists() and not root.is_dir():
        raise ConfigError(f"the output folder {root} exists and is not a folder")
    return root


def _build_run_folder(root: Path, name: str, write: Callable[[Path], None]) -> Path:
    """Remove stale partial folders under ``root``, let ``write`` fill a new ``.partial-*`` folder, and rename it
    to its final name (module docstring); on any failure or interruption the partial folder is removed."""
    remove_stale_partials(root)
    with _sigterm_raises_system_exit():
        partial, final = _new_run_dir(root, name)
        try:
            write(partial)
            (partial / OWNER_FILE).unlink()
            partial.rename(final)
        except BaseException as exc:
            shutil.rmtree(partial, ignore_errors=True)
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                log.warning("run interrupted: removed its partial folder %s", partial)
            raise
    log.info("run written to %s", final)
    return final


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
    root = _output_root(out_dir)
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

    return _build_run_folder(root, plan.study.name, write)


def _run(plan: RunPlan, run_dir: Path, report: Progress, on_done) -> None:
    sc = plan.scenario
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(sc.model_dump(mode="json"), sort_keys=False))
    ds, ds_val = plan.recorded if plan.recorded is not None else _simulate(plan, report)
    ds_ident, notes = _preprocess(ds, sc.preprocessing)
    if plan.recorded is not None and (sc.preprocessing.lowpass_hz is not None or sc.preprocessing.differentiate):
        # recorded validation data gets the same treatment; data/validation.npz holds it as evaluated
        ds_val, _ = _preprocess(ds_val, sc.preprocessing)
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
    torque_scale = _torque_scales(robot, ds_val.tau)
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
        pred = model.predict_torque(ds_val.q, ds_val.qd, ds_val.qdd)
        rms = M.torque_rms(ds_val.tau, pred)
        metrics: dict = {
            "torque_rms": rms.tolist(),
            "torque_rms_total": float(M.torque_rms_total(ds_val.tau, pred)),
            "torque_rms_vs_truth_total": float(M.torque_rms_total(tau_val_true, pred)) if simulated else None,
            "torque_nrms_range_pct": (100.0 * rms / torque_scale["range"]).tolist(),
            "torque_nrms_limit_pct": _percent(rms, torque_scale["limit"]),
            "rsd": M.rsd(ds_val.tau, pred).tolist(),
            "agreement_index": M.agreement_index(ds_val.tau, pred).tolist(),
            "fit_time_s": float(model.diagnostics.get("fit_time_s", np.nan)) if estimator is not None else None,
            "condition_number": float(condition),
        }
        consistency = model_consistency(model)
        if consistency is not None:
            metrics["physically_consistent"] = float(consistency.consistent)
            metrics["link_min_eigenvalue"] = [
                float(v) if np.isfinite(v) else None for v in consistency.link_min_eigenvalue
            ]
        if isinstance(model, LinearParameterModel) and simulated:
            # against the true values of the model's own base parameters (its friction law may have fewer
            # coefficients than the truth's)
            truth_base = _values_by_name(truth, model.structure.base_parameters().names)
            metrics["base_parameter_error"] = float(M.relative_parameter_error(model.base_values(), truth_base))
        forward = forward_dynamics_validation(model, ds_val, open_loop)
        if forward.acceleration_rms is None:
            without_forward.append(label)
        else:
            metrics["acceleration_rms"] = forward.acceleration_rms.tolist()
            metrics["acceleration_rsd"] = forward.acceleration_rsd.tolist()
        if open_loop is not None and model.has_forward_dynamics:
            err = TrajectoryError.between(forward.q_open_loop, open_loop.q_reference)  # the rollout just made
            metrics["trajectory_rms"] = err.rms.tolist()
            metrics["trajectory_rms_total"] = float(np.sqrt(np.mean(err.rms**2)))
            metrics["trajectory_rsd"] = err.rsd.tolist()
            metrics["trajectory_agreement_index"] = err.agreement_index.tolist()
            metrics["trajectory_max_error"] = [float(x) if np.isfinite(x) else None for x in forward.max_error]
        for key in REPORTED_DIAGNOSTICS:
            if key in model.diagnostics:
                metrics[key] = model.diagnostics[key]
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


#: the open-loop validation's reference, in a run folder (read back by ``robotid-sim report``)
OPEN_LOOP_FILE = "data/open_loop.npz"


@dataclasses.dataclass(frozen=True)
class OpenLoopReference:
    """The open-loop validation of a run (SPEC §9, seed 003 Fig. 12–14): every model is simulated from the
    reference's first state under the reference torque, and compared with the reference motion.

    Attributes:
        t: (K,) time from the start of the rollout (s).
        q_reference: (K, n) the reference motion: the true robot's rollout (simulation) or the measured one.
        q0, qd0: (n,) the first state; tau: (K, n) the torque, held over each interval dt (s).
    """

    t: np.ndarray
    q_reference: np.ndarray
    q0: np.ndarray
    qd0: np.ndarray
    tau: np.ndarray
    dt: float

    def save(self, path: Path) -> None:
        np.savez(path, **{k: np.asarray(v, float) for k, v in dataclasses.asdict(self).items()})

    @classmethod
    def load(cls, path: Path) -> OpenLoopReference:
        """Read :meth:`save`'s file. Raises DataError when it is damaged."""
        try:
            with np.load(path, allow_pickle=False) as data:
                fields = {f.name: np.asarray(data[f.name], float) for f in dataclasses.fields(cls)}
        except (OSError, KeyError, ValueError) as exc:
            raise DataError(f"{path} is damaged ({type(exc).__name__}: {exc})") from None
        fields["dt"] = float(fields["dt"])
        K, n = fields["q_reference"].shape if fields["q_reference"].ndim == 2 else (0, 0)
        if K < 2 or fields["t"].shape != (K,) or fields["tau"].shape != (K, n) or fields["q0"].shape != (n,):
            raise DataError(f"{path} is damaged (inconsistent shapes)")
        return cls(**fields)


@dataclasses.dataclass(frozen=True)
class ForwardDynamicsValidation:
    """A model's forward dynamics on the validation data (seed 003 §3.3, Fig. 12–14).

    Attributes:
        qdd: (N, n) accelerations M(q)⁻¹(τ − h(q, qd)) of the model under the validation torque
            (:func:`validation_reference`), or None when its mass matrix is singular somewhere or the model has
            no forward dynamics.
        acceleration_rms, acceleration_rsd: (n,) against the recorded accelerations (inf when ``qdd`` is None);
            None for a model without forward dynamics.
        q_open_loop: (K, n) the model's open-loop motion under the reference torque (NaN after a divergence),
            or None without an open-loop reference.
        max_error: (n,) max |q_model − q_reference| over the horizon (rad or m; inf after a divergence); empty
            without an open-loop reference.
    """

    qdd: np.ndarray | None
    acceleration_rms: np.ndarray | None
    acceleration_rsd: np.ndarray | None
    q_open_loop: np.ndarray | None
    max_error: np.ndarray


def validation_reference(ds_val):
    """The signals a model's forward dynamics is judged on: the noise-free ``truth`` of a simulation (so that
    only the model differs, as in the open-loop validation; torque noise divided by a small inertia would
    swamp the accelerations), else the measured ones."""
    return ds_val.truth if ds_val.truth is not None else ds_val


def open_loop_reference(robot, ds_val, horizon: float, *, simulated: bool) -> OpenLoopReference | None:
    """The open-loop validation of ``horizon`` s: from the first state of ``ds_val``'s first experiment under its
    torque, the true robot's motion (``simulated``: the robot's rollout from the noise-free ``truth``) or the
    measured motion (recorded data); None when the horizon is under two samples or longer than that experiment."""
    K = int(round(horizon / ds_val.dt))
    first = _first_experiment(ds_val)
    if not 1 < K <= first.stop - first.start:
        return None
    ref = ds_val.truth if simulated else ds_val
    rollout_args = (ref.q[first.start], ref.qd[first.start], ref.tau[first.start : first.start + K], ds_val.dt)
    q_reference = rollout(robot.forward_dynamics, *rollout_args)[0] if simulated else ref.q[first][:K]
    return OpenLoopReference(ds_val.t[first][:K] - ds_val.t[first.start], q_reference, *rollout_args)


def forward_dynamics_validation(model, ds_val, open_loop: OpenLoopReference | None) -> ForwardDynamicsValidation:
    """Accelerations of ``model`` under the validation torque against the recorded ones (both from
    :func:`validation_reference`), and its open-loop rollout against ``open_loop``'s reference (seed 003 §3.3:
    the minimal set rebuilt into M(q) and h(q, qd))."""
    if not model.has_forward_dynamics:
        return ForwardDynamicsValidation(None, None, None, None, np.zeros(0))
    ref = validation_reference(ds_val)
    n = ref.q.shape[1]
    try:
        qdd = np.asarray(model.forward_dynamics(ref.q, ref.qd, ref.tau), float)
        if not np.all(np.isfinite(qdd)):
            raise DataError("non-finite accelerations")
        rms, rsd = M.rms_index(ref.qdd, qdd), M.rsd(ref.qdd, qdd)
    except (DataError, np.linalg.LinAlgError):
        qdd, rms, rsd = None, np.full(n, np.inf), np.full(n, np.inf)
    if open_loop is None:
        return ForwardDynamicsValidation(qdd, rms, rsd, None, np.zeros(0))
    q_model = rollout(model.forward_dynamics, open_loop.q0, open_loop.qd0, open_loop.tau, open_loop.dt)[0]
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(q_model - open_loop.q_reference)
        max_error = np.where(np.isfinite(error).all(axis=0), np.max(error, axis=0), np.inf)
    return ForwardDynamicsValidation(qdd, rms, rsd, q_model, max_error)


#: model diagnostics copied into ``metrics.json`` (and shown by the report when present)
REPORTED_DIAGNOSTICS = (
    "iterations",
    "outliers_rejected",
    "rejected_per_joint",
    "rejected_fraction_per_joint",
    "rejected_fraction",
    "deadband_rows_removed",
)
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


def _torque_scales(robot, tau: np.ndarray) -> dict[str, np.ndarray]:
    """Per-joint scales of the normalised RMS: the validation torque's range, and the URDF effort limit (or NaN)."""
    span = np.ptp(tau, axis=0)
    limit = np.array([j.effort_limit for j in robot.joints], float)
    limit = np.where(np.isfinite(limit) & (limit > 0), limit, np.nan)
    return {"range": np.where(span > 0, span, np.nan), "limit": limit}


def _percent(rms: np.ndarray, scale: np.ndarray) -> list[float | None] | None:
    """100·rms/scale per joint, None where the scale is unknown; None when no joint has one."""
    if not np.isfinite(scale).any():
        return None
    return [float(100.0 * r / s) if np.isfinite(s) else None for r, s in zip(rms, scale, strict=True)]


def _friction_source(robot) -> str:
    return getattr(robot, "friction_source", None) or ("sidecar" if robot.sidecar is not None else "none")


def _first_experiment(ds) -> slice:
    return experiments(ds)[0][1]


def _values_by_name(truth, names) -> np.ndarray:
    """The true base values of the parameters ``names`` (each one of the truth's, as ``_model_structure`` checks)."""
    values = dict(zip(truth.names, truth.true_values(), strict=True))
    return np.array([values[n] for n in names])


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
