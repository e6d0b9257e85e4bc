"""A closed-loop comparison on its own (``robotid-sim closed-loop``) into a new run folder: the study is checked
(:func:`robotid_sim.scenario.plan.prepare_closed_loop_study`), each controller drives the plant
(:func:`robotid_sim.control.comparison.run_closed_loop_plan`), and the metrics and report are written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import yaml

from robotid_sim.control.comparison import run_closed_loop_plan
from robotid_sim.errors import IdentificationError
from robotid_sim.progress import Progress
from robotid_sim.report import StudyResult, write_report
from robotid_sim.run_folder import build_run_folder, output_root
from robotid_sim.scenario.plan import ClosedLoopStudyPlan, friction_source, prepare_closed_loop_study
from robotid_sim.scenario.schema import CLOSED_LOOP_FILE, ClosedLoopStudy
from robotid_sim.studies.metrics_files import write_metrics


def run_closed_loop_study(
    study: ClosedLoopStudy | ClosedLoopStudyPlan,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    base_dir: str | Path | None = None,
) -> Path:
    """A closed-loop comparison on its own (``robotid-sim closed-loop``) into a new run folder.

    The study is checked first (:func:`~robotid_sim.scenario.plan.prepare_closed_loop_study`, unless it is given
    prepared); the folder is then built like a scenario run's (``.partial-*``, renamed at the end, never an
    existing one). It holds ``closed_loop.yaml`` (the study as run), ``metrics.json`` and ``metrics.csv`` (one row
    per controller: η and the largest error per joint), the time series of each controller
    (``closed_loop/<label>.npz``, :func:`write_closed_loop_series`), ``plots/tracking_errors.png``, ``report.md``
    and ``report.html``.

    Args:
        study: the validated study, or the plan ``prepare_closed_loop_study`` made of it.
        out_dir: parent of the run folder (default ``./runs``).
        progress: callable(label, done, total) for progress bars.
        base_dir: as for ``prepare_closed_loop_study``.

    Raises:
        ConfigError (or another :class:`~robotid_sim.errors.RobotIdError`): a study that cannot run; nothing
            is written then.
    """
    plan = study if isinstance(study, ClosedLoopStudyPlan) else prepare_closed_loop_study(study, base_dir)
    root = output_root(out_dir)
    report = progress or (lambda *_: None)
    return build_run_folder(root, plan.study.name, lambda run_dir: _write(plan, run_dir, report))


def _write(plan: ClosedLoopStudyPlan, run_dir: Path, progress: Progress) -> None:
    """Run every controller of ``plan`` and write the study's files into ``run_dir``."""
    robot = plan.robot
    data = plan.study.model_dump(mode="json")
    (run_dir / CLOSED_LOOP_FILE).write_text(yaml.safe_dump(data, sort_keys=False))
    outcomes, notes, failures = run_closed_loop_plan(plan.closed_loop, robot, plan.models, progress)
    if failures and not outcomes:
        raise IdentificationError(f"every controller failed; the first, '{failures[0].name}': {failures[0].error}")
    rows = [{"controller": o.name, **o.metrics} for o in outcomes] + [f.metrics_row() for f in failures]
    write_metrics(run_dir, rows)
    write_closed_loop_series(run_dir, outcomes)
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
        info={"friction": friction_source(robot)},
        closed_loop=outcomes,
        failures=failures,
    )
    write_report(run_dir, result)


#: folder of a run folder holding one ``.npz`` of time series per closed-loop controller
CLOSED_LOOP_SERIES_DIR = "closed_loop"


def write_closed_loop_series(run_dir: Path, outcomes) -> list[Path]:
    """Save each controller's time series as ``closed_loop/<label>.npz`` in ``run_dir`` (none: no folder).

    Each file holds ``t`` (N,) in s and ``q``, ``qd``, ``q_ref``, ``qd_ref``, ``tau`` (N, n) in SI units (rad,
    m, rad/s, m/s, N·m, N) and ``controller``, the label. A label's characters other than letters, digits,
    ``.``, ``_`` and ``-`` become ``_`` in the file name (``feedforward(ols)`` → ``feedforward_ols_.npz``).
    """
    written = []
    for outcome in outcomes:
        if outcome.series is None:
            continue
        folder = run_dir / CLOSED_LOOP_SERIES_DIR
        folder.mkdir(exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", outcome.name)
        path = folder / f"{stem}.npz"
        if path.exists():  # two labels alike once cleaned ('a(b' and 'a)b')
            path = folder / f"{stem}-{len(written)}.npz"
        np.savez(path, controller=np.array(outcome.name), **outcome.series)
        written.append(path)
    return written
