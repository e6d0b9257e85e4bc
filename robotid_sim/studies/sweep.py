"""A Monte Carlo sweep (``robotid-sim sweep``) with its report: the tasks and tables of
:func:`robotid_sim.sweep.runner.run_sweep_tasks`, and the box plots and Markdown/HTML report of
:func:`robotid_sim.report.sweep.write_report`."""

from __future__ import annotations

from pathlib import Path

from robotid_sim.progress import Progress
from robotid_sim.report.sweep import write_report
from robotid_sim.sweep.config import SweepConfig
from robotid_sim.sweep.runner import SweepOutcome, run_sweep_tasks


def run_sweep(
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
) -> SweepOutcome:
    """Run (or resume) a sweep and write its tables and report; the arguments are those of
    :func:`~robotid_sim.sweep.runner.run_sweep_tasks` (``progress``: callable(label, done, total)).

    Raises:
        ConfigError (or another RobotIdError): a sweep that cannot run; nothing is simulated then.
    """
    return run_sweep_tasks(
        sweep,
        out_dir,
        resume=resume,
        executor=executor,
        workers=workers,
        address=address,
        max_tasks=max_tasks,
        progress=progress,
        base_dir=base_dir,
        write_report=write_report,
    )
