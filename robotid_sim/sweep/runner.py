"""Run a sweep into its folder, resuming what an earlier run of it left (SPEC: Monte Carlo sweeps).

1. The sweep is checked before anything runs: every (robot, excitation, noise preset) combination is
   prepared as a scenario would be (:func:`robotid_sim.scenario.plan.prepare_run`: robot, estimators and
   their options, both excitations against the joint limits, the noise chain, the run's size).
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
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robotid_sim.errors import ConfigError
from robotid_sim.progress import Progress
from robotid_sim.run_folder import output_root
from robotid_sim.sweep import store
from robotid_sim.sweep.config import SweepConfig, load_sweep_config, parse_sweep_config
from robotid_sim.sweep.tasks import cell_identity, prepare_cell, run_cell, task_id

log = logging.getLogger(__name__)

#: the parent folder of a sweep's folder when none is given
DEFAULT_SWEEPS_DIR = Path("runs") / "sweeps"

#: ``write_report(run_dir, title, info, rows, summary, crb) -> {name: path}``: the sweep's report
#: (:func:`robotid_sim.report.sweep.write_report`)
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


def build_cells(config: SweepConfig, base_dir: Path) -> list[dict[str, Any]]:
    """Every cell of the grid, in order (robot, excitation, noise, repetition), each with its estimators and
    their task ids."""
    simulation = config.simulation.model_dump(mode="json")
    validation = config.validation.model_dump(mode="json")
    estimators = [{"name": e.name, "label": e.label, "options": e.options} for e in config.estimators]
    cells = []
    for robot in config.robots:
        for excitation_label, excitation in config.excitations.items():
            for noise_label, noise in config.noise.items():
                for repetition in range(config.repetitions):
                    seed = config.seed + repetition
                    identity = cell_identity(robot, excitation, noise, seed, simulation, validation)
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
                            "simulation": simulation,
                            "validation": validation,
                            "estimators": [{**e, "task_id": task_id(identity, e)} for e in estimators],
                        }
                    )
    return cells


def check_sweep(config: SweepConfig, cells: list[dict[str, Any]]) -> None:
    """Prepare each (robot, excitation, noise) combination once; raise the first problem, naming the combination."""
    seen = set()
    for cell in cells:
        key = (cell["robot"], cell["excitation_label"], cell["noise_label"])
        if key in seen:
            continue
        seen.add(key)
        try:
            prepare_cell(cell)
        except ConfigError as exc:
            raise ConfigError(
                f"sweep '{config.name}', robot '{key[0]}', excitation '{key[1]}', noise '{key[2]}': {exc}"
            ) from None


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
        resume: an existing sweep folder to complete (its ``sweep.yaml`` unless ``sweep`` is given).
        executor: ``local`` (processes on this machine) or ``dask``.
        workers: worker processes (default: one per core).
        address: a Dask scheduler address (``dask`` only; default: a local cluster).
        max_tasks: run at most this many tasks this time (whole cells), the rest on a later start.
        progress: callable(``"sweep"``, tasks done, tasks to run) as results come in.
        base_dir: folder relative robot paths are resolved against (default: the sweep file's, else the working
            folder).
        write_report: writes the report from the tables (:data:`ReportWriter`); None: no report.

    Raises:
        ConfigError (or another RobotIdError): a sweep that cannot run; nothing is simulated then.
    """
    run_dir, config, base = _locate(sweep, out_dir, resume, base_dir)
    if max_tasks is not None and max_tasks < 0:
        raise ConfigError(f"max_tasks must be >= 0, got {max_tasks}")
    cells = build_cells(config, base)
    check_sweep(config, cells)
    store.open_run_dir(run_dir)
    store.write_sweep_file(run_dir, config.model_dump(mode="json", exclude_defaults=False))

    done = {e["task_id"] for c in cells for e in c["estimators"] if store.load_result(run_dir, e["task_id"])}
    pending = []
    budget = max_tasks if max_tasks is not None else float("inf")
    for cell in cells:
        missing = [e for e in cell["estimators"] if e["task_id"] not in done]
        if missing and budget > 0:
            pending.append({**cell, "estimators": missing[: int(min(budget, len(missing)))]})
            budget -= len(pending[-1]["estimators"])
    to_run = sum(len(c["estimators"]) for c in pending)
    total = sum(len(c["estimators"]) for c in cells)
    log.info("sweep %s: %d tasks, %d done before, %d to run now", config.name, total, len(done), to_run)
    report = progress or (lambda *_: None)
    report("sweep", 0, to_run)
    from robotid_sim.sweep.executors import run_cells

    start = time.perf_counter()
    ran = 0
    for cell, outcome in run_cells(run_cell, pending, executor=executor, workers=workers, address=address):
        if isinstance(outcome, BaseException):
            log.warning(
                "sweep cell %s/%s/%s seed %d was lost (%s: %s); it runs again on the next start",
                cell["robot"], cell["excitation_label"], cell["noise_label"], cell["seed"],
                type(outcome).__name__, outcome,
            )  # fmt: skip
            continue
        for record in outcome:
            store.save_result(run_dir, record)
        ran += len(outcome)
        report("sweep", ran, to_run)
    seconds = time.perf_counter() - start
    return _finish(run_dir, config, cells, (len(done), ran, seconds, executor), write_report)


def _locate(sweep, out_dir, resume, base_dir) -> tuple[Path, SweepConfig, Path]:
    """(run folder, config, base folder of relative robot paths) from the arguments of :func:`run_sweep`."""
    path = None
    if sweep is None:
        if resume is None:
            raise ConfigError("give a sweep file (or a bundled sweep name), or resume=RUN_DIR")
        recorded = Path(resume) / store.SWEEP_FILE
        if not recorded.is_file():
            raise ConfigError(f"{resume} is not a sweep folder (it has no {store.SWEEP_FILE}); give the sweep file")
        config = load_sweep_config(recorded)
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
            raise ConfigError(f"{resume} is not a sweep folder (it has no {store.SWEEP_FILE})")
    else:
        run_dir = output_root(out_dir, DEFAULT_SWEEPS_DIR) / config.folder_name
    if base_dir is not None:
        base = Path(base_dir)
    else:
        base = path.parent if path is not None else Path.cwd()
    return run_dir, config, base


def _finish(
    run_dir: Path, config: SweepConfig, cells, counts: tuple[int, int, float, str], write_report: ReportWriter | None
) -> SweepOutcome:
    """Write the tables (and the report) from every result of the grid; ``counts``: (reused, ran, seconds,
    executor) of this call."""
    from robotid_sim.sweep import aggregate

    reused, ran, seconds, executor = counts
    records = [r for c in cells for e in c["estimators"] if (r := store.load_result(run_dir, e["task_id"])) is not None]
    total = sum(len(c["estimators"]) for c in cells)
    rows = aggregate.table_rows(records)
    summary = aggregate.summary_rows(rows)
    crb = aggregate.crb_rows(records)
    tables = {
        "results": aggregate.write_csv(run_dir / "results.csv", rows, aggregate.TABLE_COLUMNS),
        "summary": aggregate.write_csv(run_dir / "summary.csv", summary),
        "crb": aggregate.write_csv(run_dir / "crb.csv", crb),
    }
    parquet = aggregate.write_parquet(run_dir / "results.parquet", rows, aggregate.TABLE_COLUMNS)
    if parquet is not None:
        tables["results_parquet"] = parquet
    failed = sum(r["status"] == "failed" for r in rows)
    info = {
        "tasks": f"{len(rows)} of {total} done ({failed} failed)",
        "grid": f"{len(config.robots)} robots × {len(config.excitations)} excitations × {len(config.noise)} noise "
        f"presets × {config.repetitions} repetitions × {len(config.estimators)} estimators",
        "seeds": f"{config.seed} … {config.seed + config.repetitions - 1}",
        "last run": f"{ran} tasks in {seconds:.1f} s ({executor} executor)",
        "results": "results.csv"
        + (", results.parquet" if parquet is not None else f" (no Parquet: {aggregate.PARQUET_HINT})"),
    }
    if config.description:
        info["description"] = " ".join(config.description.split())
    if write_report is not None:
        tables |= write_report(run_dir, config.name, info, rows, summary, crb)
    return SweepOutcome(run_dir, total, reused, ran, failed, total - len(rows), seconds, tables)
