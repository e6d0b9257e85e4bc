"""Run a sweep into its folder, resuming what an earlier run of it left (SPEC: Monte Carlo sweeps).

1. The sweep is checked before anything runs or any folder is created: a folder holding another sweep is
   refused (:func:`_check_same_sweep`), then NaN or infinite numbers anywhere
   (:func:`robotid_sim.sweep.config.check_finite`), the executor arguments
   (:func:`robotid_sim.sweep.executors.check_executor`), the grid's size from the file alone
   (:func:`check_grid_size`), and every (robot, excitation, noise preset) combination prepared as a scenario
   would be (:func:`robotid_sim.scenario.plan.prepare_run`: robot, estimators and their options, both
   excitations against the joint limits, the noise chain, the run's size). Only then are task hashes computed.
2. The grid is laid out in cells (robot, excitation, noise, repetition) of tasks (one per estimator), each task
   named by its hash (:func:`robotid_sim.sweep.tasks.task_id`).
3. Tasks whose result file is already in ``results/`` are kept; the cells that still miss a task run on the
   executor (:mod:`robotid_sim.sweep.executors`), each simulating its data once for its missing estimators.
   Each record is written atomically the moment its cell comes back (:mod:`robotid_sim.sweep.store`). A failed
   estimator or simulation is recorded with its error and the sweep goes on; a cell lost with its worker is
   not recorded and runs on the next start.
4. The tables (:mod:`robotid_sim.sweep.aggregate`) and the report (:mod:`robotid_sim.report.sweep`, given by
   :func:`robotid_sim.studies.run_sweep`) are written from every result of the grid, so a resumed sweep reports
   the whole grid.

Running the same sweep again (same output folder, or ``resume=RUN_DIR``) therefore runs only the tasks not yet
done; ``max_tasks`` stops after that many tasks (whole cells' worth, at most), leaving the rest for later.
Ctrl-C or SIGTERM (:func:`stop_signals`) stops the workers and raises :class:`SweepInterrupted`, whose message
gives the ``--resume`` command; a refusal after the folder was created (a Dask scheduler that cannot be
reached) removes the folders this call created.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shlex
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from robotid_sim.errors import ConfigError, RobotIdError
from robotid_sim.progress import Progress
from robotid_sim.run_folder import existing_ancestor, output_root
from robotid_sim.safety import memory_limit_bytes
from robotid_sim.scenario.budget import format_bytes
from robotid_sim.sweep import store
from robotid_sim.sweep.config import SweepConfig, check_finite, load_sweep_config, parse_sweep_config
from robotid_sim.sweep.tasks import cell_identity, estimator_identity, prepare_cell, run_cell, task_id

log = logging.getLogger(__name__)

#: the parent folder of a sweep's folder when none is given
DEFAULT_SWEEPS_DIR = Path("runs") / "sweeps"
#: most tasks a sweep may have without ``simulation.allow_large`` (the bundled birdy sweep has 4,000)
MAX_TASKS = 100_000
#: disk per task: its result file (about 2 kB of JSON) in a 4 kB file-system block
TASK_FILE_BYTES = 4096
#: memory per task while the grid is laid out and its results are read back (measured: about 2.5 kB)
TASK_MEMORY_BYTES = 4096

#: ``write_report(run_dir, title, info, rows, summary, crb[, birdy=..., parameters=...]) -> {name: path}``: the
#: sweep's report (:func:`robotid_sim.report.sweep.write_report`); BIRDy's tables only for a protocol sweep
ReportWriter = Callable[..., dict[str, Path]]


@dataclasses.dataclass(frozen=True)
class SweepOutcome:
    """What a call of :func:`run_sweep_tasks` did.

    Attributes:
        run_dir: the sweep's folder.
        tasks: (cell, estimator) tasks of the grid.
        reused: tasks whose result was already on disk.
        ran: tasks run (and recorded) by this call.
        failed: tasks of the grid recorded as failed (this call's and earlier ones').
        missing: tasks still without a result (``max_tasks`` reached, or a worker lost).
        seconds: wall time of the tasks run by this call.
        tables: the files written (``results``, ``results_parquet``, ``summary``, ``crb``, ``markdown``, ...).
    """

    run_dir: Path
    tasks: int
    reused: int
    ran: int
    failed: int
    missing: int
    seconds: float
    tables: dict[str, Path]


def _resolve_robot(robot: str, base_dir: Path) -> str:
    if Path(robot).is_absolute() or not (robot.endswith((".urdf", ".yaml", ".yml")) or "/" in robot):
        return robot
    return str((base_dir / robot).resolve())


def _estimator_tasks(config: SweepConfig) -> list[dict[str, Any]]:
    """Each estimator of a cell, once per initial estimate: its identity (what its task's hash covers,
    :func:`robotid_sim.sweep.tasks.estimator_identity`)."""
    initial = None if config.initial_estimates is None else config.initial_estimates.model_dump(mode="json")
    return [
        estimator_identity(e, initial, index)
        for e in config.estimators
        for index in (range(config.initial_count) if initial is not None else [None])
    ]


def _cell_settings(config: SweepConfig) -> dict[str, Any]:
    """What every cell of the grid shares: simulation, validation, closed-loop data and initial-estimate settings."""
    return {
        "simulation": config.simulation.model_dump(mode="json"),
        "validation": config.validation.model_dump(mode="json"),
        "data": None if config.data is None else config.data.closed_loop.model_dump(mode="json"),
        "initial_estimates": None
        if config.initial_estimates is None
        else config.initial_estimates.model_dump(mode="json", exclude={"count"}),
    }


def build_cells(config: SweepConfig, base_dir: Path) -> list[dict[str, Any]]:
    """Every cell of the grid, in order (robot, excitation, noise, repetition), each with its estimators (one
    per initial estimate with ``initial_estimates``) and their task ids."""
    shared = _cell_settings(config)
    estimators = _estimator_tasks(config)
    cells = []
    for robot in config.robots:
        for excitation_label, excitation in config.excitations.items():
            for noise_label, noise in config.noise.items():
                for repetition in range(config.repetitions):
                    seed = config.seed + repetition
                    identity = cell_identity(
                        robot, excitation, noise, seed, shared["simulation"], shared["validation"], shared["data"]
                    )
                    cells.append(
                        {
                            "robot": robot,
                            "robot_ref": _resolve_robot(robot, base_dir),
                            "excitation_label": excitation_label,
                            "excitation": excitation,
                            "noise_label": noise_label,
                            "noise": noise,
                            "repetition": repetition,
                            "seed": seed,
                            **shared,
                            "estimators": [{**e, "task_id": task_id(identity, e)} for e in estimators],
                        }
                    )
    return cells


def check_grid_size(config: SweepConfig, run_dir: Path) -> None:
    """Refuse a grid too large to lay out or store, from its size alone (nothing is built): more than
    :data:`MAX_TASKS` tasks (unless ``simulation.allow_large``), more memory than the limit
    (:func:`robotid_sim.safety.memory_limit_bytes`, doubled with ``allow_large``), or more result files than
    the free space under the output folder.

    Raises:
        ConfigError: stating the estimate and the limit.
    """
    tasks = config.task_count
    allow_large = config.simulation.allow_large
    memory, disk = tasks * TASK_MEMORY_BYTES, tasks * TASK_FILE_BYTES
    memory_limit = memory_limit_bytes() * (2 if allow_large else 1)
    free = shutil.disk_usage(existing_ancestor(run_dir)).free
    problems = []
    if tasks > MAX_TASKS and not allow_large:
        problems.append(f"more than the {MAX_TASKS:,} tasks a sweep may have")
    if memory > memory_limit:
        problems.append(f"more memory than the limit of {format_bytes(memory_limit)}")
    if disk > free:
        problems.append(f"more than the {format_bytes(free)} free under {run_dir.parent}")
    if not problems:
        return
    hint = "lower repetitions, or split the grid into several sweeps"
    if tasks > MAX_TASKS and not allow_large and memory <= memory_limit * 2 and disk <= free:
        hint += ", or set simulation.allow_large: true to run it anyway"
    raise ConfigError(
        f"sweep '{config.name}' has {tasks:,} tasks ({_grid_text(config)}), about {format_bytes(memory)} of "
        f"memory and {format_bytes(disk)} of result files: {' and '.join(problems)}; {hint}"
    )


def _grid_text(config: SweepConfig) -> str:
    initial = "" if config.initial_estimates is None else f" × {config.initial_count} initial estimates"
    return (
        f"{len(config.robots)} robots × {len(config.excitations)} excitations × {len(config.noise)} noise "
        f"presets × {config.repetitions} repetitions × {len(config.estimators)} estimators{initial}"
    )


def check_sweep(config: SweepConfig, base_dir: Path) -> None:
    """Prepare each (robot, excitation, noise) combination once (a closed-loop sweep: each (robot, excitation),
    and one initial estimate drawn); raise the first problem, naming the combination."""
    from robotid_sim.sweep.protocol import draw_initial, prepare_closed_loop_cell

    shared = _cell_settings(config)
    estimators = [estimator_identity(e) for e in config.estimators]
    noises = config.noise if config.data is None else {"(any)": None}
    for robot in config.robots:
        for excitation_label, excitation in config.excitations.items():
            for noise_label, noise in noises.items():
                spec = {"robot_ref": _resolve_robot(robot, base_dir), "excitation": excitation, "noise": noise}
                spec |= {**shared, "estimators": estimators}
                where = f"sweep '{config.name}', robot '{robot}', excitation '{excitation_label}'"
                try:
                    if config.data is None:
                        plan = prepare_cell(spec)
                        _refuse_closed_loop_estimators(plan.estimators)
                    else:
                        plan = prepare_closed_loop_cell(spec)
                    if config.initial_estimates is not None:
                        settings = config.initial_estimates
                        truth = plan.robot.true_parameters()
                        draw_initial(plan.structure, truth, settings.relative_std, settings.seed, 0)
                except ConfigError as exc:
                    noise_text = f", noise '{noise_label}'" if config.data is None else ""
                    raise ConfigError(f"{where}{noise_text}: {exc}") from None


def _refuse_closed_loop_estimators(estimators) -> None:
    """An estimator that needs closed-loop data (``needs_closed_loop``) in an open-loop sweep: ConfigError."""
    for entry, estimator in estimators:
        if getattr(estimator, "needs_closed_loop", False):
            raise ConfigError(
                f"estimator '{entry.display}' needs closed-loop data; add 'data: {{closed_loop: {{}}}}' to the sweep "
                "(BIRDy's closed-loop generation) or remove it"
            )


def run_sweep_tasks(
    sweep: str | Path | SweepConfig | dict | None = None,
    out_dir: str | Path | None = None,
    *,
    resume: str | Path | None = None,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    max_tasks: int | None = None,
    progress: Progress | None = None,
    base_dir: str | Path | None = None,
    write_report: ReportWriter | None = None,
) -> SweepOutcome:
    """Run (or resume) a sweep and write its tables, and its report with ``write_report`` when given
    (:func:`robotid_sim.studies.run_sweep` gives it).

    Args:
        sweep: a sweep file, a bundled sweep name (``small``, ``birdy``), a :class:`SweepConfig` or its mapping;
            None with ``resume`` (the sweep recorded in that folder).
        out_dir: parent of the sweep's folder (default ``runs/sweeps``); the folder is ``<out_dir>/<output>``.
        resume: an existing sweep folder to complete (its ``sweep.yaml``; a ``sweep`` given too must be that
            same grid).
        executor: ``local`` (processes on this machine) or ``dask``.
        workers: worker processes (default: one per core).
        address: a Dask scheduler address (``dask`` only; default: a local cluster).
        max_tasks: run at most this many tasks this time (whole cells), the rest on a later start.
        progress: callable(``"sweep"``, tasks done, tasks to run) as results come in.
        base_dir: folder relative robot paths are resolved against (default: the sweep's ``robot_folder``, else
            the sweep file's folder, else the working folder).
        write_report: writes the report from the tables (:data:`ReportWriter`); None: no report.

    Raises:
        ConfigError (or another RobotIdError): a sweep that cannot run; nothing is simulated or written then.
        SweepInterrupted: Ctrl-C or SIGTERM; the workers are stopped and every finished task is saved.
    """
    from robotid_sim.sweep.executors import check_executor

    run_dir, config, base = _locate(sweep, out_dir, resume, base_dir)
    check_finite(config)
    if max_tasks is not None and max_tasks < 0:
        raise ConfigError(f"--max-tasks must be >= 0, got {max_tasks}")
    check_executor(executor, workers, address)
    check_grid_size(config, run_dir)
    check_sweep(config, base)
    cells = build_cells(config, base)
    created = _outermost_missing(run_dir)
    counts = _RunCounts(total=sum(len(c["estimators"]) for c in cells))
    with stop_signals() as received:
        try:
            store.open_run_dir(run_dir)
            store.write_sweep_file(run_dir, _recorded(config, base, run_dir))
            done = {e["task_id"] for c in cells for e in c["estimators"] if store.load_result(run_dir, e["task_id"])}
            pending = _pending(cells, done, max_tasks)
            counts.reused, counts.to_run = len(done), sum(len(c["estimators"]) for c in pending)
            log.info("sweep %s: %d tasks, %d done before, %d to run now", config.name, *counts.summary())
            start = time.perf_counter()
            _run_pending(run_dir, pending, counts, (executor, workers, address), progress)
            seconds = time.perf_counter() - start
            return _finish(run_dir, config, cells, (len(done), counts.ran, seconds, executor), write_report)
        except RobotIdError:
            if created is not None and not _has_results(run_dir):
                shutil.rmtree(created, ignore_errors=True)  # a refusal leaves nothing behind
            raise
        except (KeyboardInterrupt, SystemExit):
            if not received:
                raise
            raise SweepInterrupted(run_dir, received[0], counts.reused + counts.ran, counts.total) from None


def _has_results(run_dir: Path) -> bool:
    try:
        return any((run_dir / store.RESULTS_DIR).iterdir())
    except OSError:
        return False


def _outermost_missing(folder: Path) -> Path | None:
    """The outermost folder that creating ``folder`` creates (``folder`` or one above it); None if it exists."""
    path = folder.absolute()
    if path.exists():
        return None
    while not path.parent.exists():
        path = path.parent
    return path


@dataclasses.dataclass
class _RunCounts:
    """Tasks of the grid, done before this call, to run now, and run (saved) so far."""

    total: int
    reused: int = 0
    to_run: int = 0
    ran: int = 0

    def summary(self) -> tuple[int, int, int]:
        return self.total, self.reused, self.to_run


def _pending(cells: list[dict[str, Any]], done: set[str], max_tasks: int | None) -> list[dict[str, Any]]:
    """The cells that still miss a task, each with only its missing estimators, up to ``max_tasks`` tasks."""
    pending = []
    budget = max_tasks if max_tasks is not None else float("inf")
    for cell in cells:
        missing = [e for e in cell["estimators"] if e["task_id"] not in done]
        if missing and budget > 0:
            pending.append({**cell, "estimators": missing[: int(min(budget, len(missing)))]})
            budget -= len(pending[-1]["estimators"])
    return pending


def _run_pending(run_dir: Path, pending, counts: _RunCounts, executor_args: tuple, progress) -> None:
    """Run the pending cells, saving each record as its cell comes back (``counts.ran``); an exception (a
    Ctrl-C or SIGTERM made one by :func:`stop_signals`) stops the workers on its way out."""
    from robotid_sim.sweep.executors import run_cells

    report = progress or (lambda *_: None)
    report("sweep", 0, counts.to_run)
    if not pending:
        return
    with contextlib.closing(run_cells(run_cell, pending, *executor_args)) as outcomes:
        for cell, outcome in outcomes:
            if isinstance(outcome, BaseException):
                log.warning(
                    "sweep cell %s/%s/%s seed %d was lost (%s: %s); it runs again on the next start",
                    cell["robot"], cell["excitation_label"], cell["noise_label"], cell["seed"],
                    type(outcome).__name__, outcome,
                )  # fmt: skip
                continue
            for record in outcome:
                store.save_result(run_dir, record)
            counts.ran += len(outcome)
            report("sweep", counts.ran, counts.to_run)


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by Ctrl-C (SIGINT) or SIGTERM: its workers are stopped, every finished task is saved in
    its folder, and ``robotid-sim sweep --resume RUN_DIR`` finishes it.

    Attributes:
        run_dir: the sweep's folder.
        status: the exit status the signal stands for (130 for SIGINT, 143 for SIGTERM).
        saved: tasks of the grid with a result in the folder.
        total: tasks of the grid.
    """

    def __init__(self, run_dir: Path, signum: int, saved: int, total: int):
        self.run_dir, self.status, self.saved, self.total = run_dir, 128 + signum, saved, total
        name = signal.Signals(signum).name
        super().__init__(
            f"sweep interrupted ({name}): {saved} of {total} tasks are saved in {run_dir}; finish it with: "
            f"robotid-sim sweep --resume {shlex.quote(str(run_dir))}"
        )


@contextlib.contextmanager
def stop_signals() -> Iterator[list[int]]:
    """Within (main thread only): the first SIGINT raises KeyboardInterrupt and the first SIGTERM
    ``SystemExit(143)``; the signal numbers received are appended to the yielded list. Every later SIGINT or
    SIGTERM is ignored, so a second Ctrl-C cannot cut the clean-up short. A handler the application installed
    itself is left as it is; the previous handlers are restored on exit."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def stop(signum, frame):
        received.append(signum)
        if len(received) > 1:
            return
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    defaults = {signal.SIGINT: (signal.default_int_handler,), signal.SIGTERM: (signal.SIG_DFL, None)}
    previous = {s: signal.getsignal(s) for s in defaults if signal.getsignal(s) in defaults[s]}
    for signum in previous:
        signal.signal(signum, stop)
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _locate(sweep, out_dir, resume, base_dir) -> tuple[Path, SweepConfig, Path]:
    """(run folder, config, base folder of relative robot paths) from the arguments of :func:`run_sweep`;
    refuses a folder that holds another sweep (module docstring)."""
    path = None
    if sweep is None:
        if resume is None:
            raise ConfigError("give a sweep file (or a bundled sweep name), or resume=RUN_DIR")
        path = Path(resume) / store.SWEEP_FILE
        if not path.is_file():
            raise ConfigError(f"{resume} is not a sweep folder (it has no {store.SWEEP_FILE}); give the sweep file")
        config = load_sweep_config(path)
    elif isinstance(sweep, SweepConfig):
        config = sweep
    elif isinstance(sweep, dict):
        config = parse_sweep_config(sweep)
    else:
        from robotid_sim.sweep.config import resolve_sweep_path

        path = resolve_sweep_path(sweep)
        config = load_sweep_config(path)
    if resume is not None:
        run_dir = Path(resume)
        if not (run_dir / store.SWEEP_FILE).is_file():
            raise ConfigError(f"{resume} is not a sweep folder (it has no {store.SWEEP_FILE}); give the sweep file")
    else:
        run_dir = output_root(out_dir, DEFAULT_SWEEPS_DIR) / config.folder_name
    _check_same_sweep(config, run_dir, resume is not None)
    folder = path.parent if path is not None else Path.cwd()
    if base_dir is not None:
        base = Path(base_dir)
    else:
        base = folder / config.robot_folder if config.robot_folder is not None else folder
    return run_dir, config, base


def _grid(config: SweepConfig) -> dict[str, Any]:
    """What makes a sweep the same grid (not its description, its folder's name, nor where its robot files were
    found)."""
    return config.model_dump(mode="json", exclude={"description", "output", "robot_folder"})


def _check_same_sweep(config: SweepConfig, run_dir: Path, resuming: bool) -> None:
    """Refuse to run ``config`` into a folder holding another sweep: with ``--resume`` one of another grid, and
    without it one of another name (the same name with another grid grows or shrinks that sweep)."""
    recorded_file = run_dir / store.SWEEP_FILE
    if not recorded_file.is_file():
        return
    try:
        recorded = load_sweep_config(recorded_file)
    except ConfigError as exc:
        raise ConfigError(f"{run_dir} holds a sweep file this sweep cannot read ({exc}); give another --out") from None
    if recorded.name == config.name and (not resuming or _grid(recorded) == _grid(config)):
        return
    mine, theirs = _grid(config), _grid(recorded)
    differ = [k for k in mine if mine[k] != theirs.get(k)]
    hint = (
        f"finish it with 'robotid-sim sweep --resume {shlex.quote(str(run_dir))}' (no sweep file)"
        if resuming
        else f"give '{config.name}' its own folder ('output:' in the sweep file, or another --out)"
    )
    raise ConfigError(
        f"{run_dir} holds the sweep '{recorded.name}' ({recorded.task_count} tasks), not the sweep "
        f"'{config.name}' ({config.task_count} tasks; they differ in {', '.join(differ)}); {hint}"
    )


def _recorded(config: SweepConfig, base: Path, run_dir: Path) -> dict[str, Any]:
    """The sweep as written to its folder's ``sweep.yaml``: with ``robot_folder`` relative to that folder when
    a robot is a relative path, so that ``--resume`` finds it from any working folder."""
    data = config.model_dump(mode="json", exclude={"robot_folder"})
    if any(_resolve_robot(r, base) != r for r in config.robots):
        data["robot_folder"] = os.path.relpath(base.resolve(), run_dir.resolve())
    return data


def _protocol_tables(config: SweepConfig, cells, records) -> dict[str, list[dict[str, Any]]]:
    """BIRDy's figures of merit per (method, preset) and the per-parameter errors (:mod:`robotid_sim.sweep.merit`)."""
    from robotid_sim.sweep import merit

    refs = {c["robot"]: c["robot_ref"] for c in cells}
    data = None if config.data is None else config.data.closed_loop.model_dump(mode="json")
    robots = merit.load_robots(list(refs), refs) if data is not None else {}
    return {
        "birdy": merit.protocol_rows(records, data, robots, config.excitations),
        "parameters": merit.parameter_rows(records),
    }


def _finish(
    run_dir: Path, config: SweepConfig, cells, counts: tuple[int, int, float, str], write_report: ReportWriter | None
) -> SweepOutcome:
    """Write the tables (and the report) from every result of the grid; ``counts``: (reused, ran, seconds,
    executor) of this call."""
    from robotid_sim.sweep import aggregate, merit

    reused, ran, seconds, executor = counts
    records = [r for c in cells for e in c["estimators"] if (r := store.load_result(run_dir, e["task_id"])) is not None]
    total = sum(len(c["estimators"]) for c in cells)
    protocol = config.data is not None or config.initial_estimates is not None
    columns = aggregate.table_columns(protocol)
    rows = aggregate.table_rows(records, columns)
    summary = aggregate.summary_rows(rows)
    crb = aggregate.crb_rows(records)
    tables = {
        "results": aggregate.write_csv(run_dir / "results.csv", rows, columns),
        "summary": aggregate.write_csv(run_dir / "summary.csv", summary),
        "crb": aggregate.write_csv(run_dir / "crb.csv", crb),
    }
    extra = {}
    if protocol:
        extra = _protocol_tables(config, cells, records)
        tables["birdy"] = aggregate.write_csv(run_dir / "birdy.csv", extra["birdy"], merit.COLUMNS)
        tables["birdy_parameters"] = aggregate.write_csv(run_dir / "birdy_parameters.csv", extra["parameters"])
    parquet = aggregate.write_parquet(run_dir / "results.parquet", rows, columns)
    if parquet is not None:
        tables["results_parquet"] = parquet
    failed = sum(r["status"] == "failed" for r in rows)
    info = {
        "tasks": f"{len(rows)} of {total} done ({failed} failed)",
        "grid": _grid_text(config),
        "seeds": f"{config.seed} … {config.seed + config.repetitions - 1}",
        "last run": f"{ran} tasks in {seconds:.1f} s ({executor} executor)",
        "results": "results.csv"
        + (", results.parquet" if parquet is not None else f" (no Parquet: {aggregate.PARQUET_HINT})"),
    }
    if config.description:
        info["description"] = " ".join(config.description.split())
    if write_report is not None:
        tables |= write_report(run_dir, config.name, info, rows, summary, crb, **extra)
    return SweepOutcome(run_dir, total, reused, ran, failed, total - len(rows), seconds, tables)
