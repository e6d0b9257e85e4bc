"""A sweep's run folder: one small JSON file per finished task, written atomically as it finishes.

Layout of ``<output root>/<sweep output>/``::

    sweep.yaml            the sweep as last run
    results/<id>.json     one finished (cell, estimator) task; <id> is its hash (robotid_sim.sweep.tasks.task_id)
    results.parquet/.csv  one row per task of the grid that has a result
    summary.csv, crb.csv  aggregates (robotid_sim.sweep.aggregate)
    plots/*.png, report.md, report.html

A result file's name is never taken from a user string or from a file: :func:`result_path` builds it from a
hash it checks is hexadecimal, and only the tasks of the current grid are read back, so nothing can make the
sweep read or write outside its folder. A damaged or foreign result file counts as missing (its task runs
again).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from robotid_sim.errors import ConfigError
from robotid_sim.safety import atomic_write

log = logging.getLogger(__name__)

RESULTS_DIR = "results"
SWEEP_FILE = "sweep.yaml"
_TASK_ID = re.compile(r"^[0-9a-f]{24}$")
#: largest result file read back (a record is a few kilobytes)
MAX_RESULT_BYTES = 4 * 2**20


def result_path(run_dir: Path, task_id: str) -> Path:
    """``run_dir/results/<task_id>.json``; ValueError unless ``task_id`` is a task hash."""
    if not _TASK_ID.match(task_id):
        raise ValueError(f"not a task id: {task_id!r}")
    return run_dir / RESULTS_DIR / f"{task_id}.json"


def open_run_dir(run_dir: Path) -> Path:
    """Create ``run_dir`` and its ``results`` folder (kept when they exist); ConfigError if it cannot."""
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"the sweep folder {run_dir} exists and is not a folder")
    try:
        (run_dir / RESULTS_DIR).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the sweep folder {run_dir}: {exc.strerror or exc}") from None
    return run_dir


def write_sweep_file(run_dir: Path, config_data: dict[str, Any]) -> None:
    import yaml

    atomic_write(run_dir / SWEEP_FILE, lambda fh: fh.write(yaml.safe_dump(config_data, sort_keys=False)), binary=False)


def save_result(run_dir: Path, record: dict[str, Any]) -> Path:
    """Write one task's record atomically (it appears whole or not at all)."""
    path = result_path(run_dir, record["task_id"])
    text = json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n"
    atomic_write(path, lambda fh: fh.write(text), binary=False)
    return path


def load_result(run_dir: Path, task_id: str) -> dict[str, Any] | None:
    """The record of a finished task, or None when it has none (missing, damaged or another task's)."""
    path = result_path(run_dir, task_id)
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RESULT_BYTES:
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log.warning("sweep result %s is damaged; its task runs again", path)
        return None
    if not isinstance(record, dict) or record.get("task_id") != task_id or record.get("status") not in ("ok", "failed"):
        log.warning("sweep result %s is not this task's; its task runs again", path)
        return None
    return record
