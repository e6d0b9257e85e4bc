"""``robotid-sim sweep``: argument parsing and printing only (the work is :func:`robotid_sim.sweep.run_sweep`).

Wired into :mod:`robotid_sim.cli` by ``add_sweep_parser(sub, parents=[common])``. A user error (a bad sweep file,
an unknown robot or estimator, Dask not installed, a folder that cannot be written) prints one line
``error: ...`` and returns 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

#: exit code of a user error, as :mod:`robotid_sim.cli` uses
EXIT_USER_ERROR = 2


def add_sweep_parser(subparsers, parents: Sequence[argparse.ArgumentParser] = ()) -> argparse.ArgumentParser:
    """Add the ``sweep`` command to ``subparsers`` (the result of ``parser.add_subparsers()``)."""
    p = subparsers.add_parser(
        "sweep",
        parents=list(parents),
        help="Monte Carlo sweep: robots × excitations × noise × estimators × repetitions (resumable)",
        description=(
            "Run a sweep file (or a bundled sweep: small, birdy) into <out>/<output>; running it again, or with "
            "--resume RUN_DIR, runs only the tasks not yet done. Writes results.parquet/.csv, summary.csv, "
            "crb.csv, box plots and report.md/.html."
        ),
    )
    p.add_argument("sweep", nargs="?", help="sweep YAML file or bundled sweep name (omit with --resume)")
    p.add_argument("--out", default=None, help="parent folder of the sweep's folder (default: runs/sweeps)")
    p.add_argument("--resume", metavar="RUN_DIR", default=None, help="complete the sweep in this folder")
    p.add_argument("--executor", choices=("local", "dask"), default="local", help="local processes (default) or Dask")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    p.add_argument("--address", default=None, help="Dask scheduler address (tcp://host:8786); default: a local cluster")
    p.add_argument("--max-tasks", type=int, default=None, help="run at most this many tasks now (resume later)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_sweep_command)
    return p


def _print_error(message: str) -> None:
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run the sweep the arguments name; print where the results are. Returns the exit code."""
    from robotid_sim.errors import RobotIdError

    if args.sweep is None and args.resume is None:
        _print_error("give a sweep file or a bundled sweep name (small, birdy), or --resume RUN_DIR")
        return EXIT_USER_ERROR
    try:
        outcome = _run(args)
    except RobotIdError as exc:
        _print_error(str(exc))
        return EXIT_USER_ERROR
    except OSError as exc:
        where = f" '{exc.filename}'" if exc.filename else ""
        _print_error(f"cannot access{where}: {exc.strerror or exc}")
        return EXIT_USER_ERROR
    table = outcome.tables.get("results_parquet", outcome.tables["results"])
    print(
        f"sweep folder: {outcome.run_dir}\n"
        f"tasks: {outcome.tasks} ({outcome.reused} done before, {outcome.ran} run now in {outcome.seconds:.1f} s, "
        f"{outcome.failed} failed, {outcome.missing} still to run)\n"
        f"report: {outcome.tables['markdown']}  table: {table}"
    )
    if "results_parquet" not in outcome.tables:
        from robotid_sim.sweep.aggregate import PARQUET_HINT

        print(f"note: CSV only; {PARQUET_HINT}")
    return 0


def _run(args: argparse.Namespace):
    from robotid_sim.sweep.runner import run_sweep

    kwargs = {
        "resume": args.resume,
        "executor": args.executor,
        "workers": args.workers,
        "address": args.address,
        "max_tasks": args.max_tasks,
    }
    if args.no_progress or not sys.stderr.isatty():
        return run_sweep(args.sweep, args.out, **kwargs)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        task = bar.add_task("sweep", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return run_sweep(args.sweep, args.out, progress=progress, **kwargs)
