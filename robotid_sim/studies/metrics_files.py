"""``metrics.json`` and ``metrics.csv`` of a run folder.

``metrics.json`` keeps the estimators, the controllers and the failures apart::

    {"metrics_version": 2,
     "estimators": [{"estimator": NAME, <metric>: value, ...}, ...],
     "controllers": [{"controller": LABEL, <metric>: value, ...}, ...],
     "failed": [{"estimator" or "controller": NAME, "status": "failed", "error": ..., "traceback": ...}, ...]}

Runs before version 2 wrote one list of all these rows; :func:`split_metrics_rows` reads both.
``metrics.csv`` has one row per estimator, controller or failure (a list value ``key`` becomes ``key_1``,
``key_2``, ...).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

#: the layout of ``metrics.json`` this version writes (module docstring)
METRICS_VERSION = 2
#: the lists of ``metrics.json``, in their order
METRICS_SECTIONS = ("estimators", "controllers", "failed")


def split_metrics_rows(rows: list) -> dict[str, list]:
    """The rows of one list (each estimator, controller or failure, in any order) in the three sections of
    ``metrics.json``: a row with ``"status": "failed"`` is a failure, one with a ``controller`` and no
    ``estimator`` a controller, any other an estimator."""
    sections: dict[str, list] = {name: [] for name in METRICS_SECTIONS}
    for row in rows:
        if isinstance(row, dict) and row.get("status") == "failed":
            sections["failed"].append(row)
        elif isinstance(row, dict) and "controller" in row and "estimator" not in row:
            sections["controllers"].append(row)
        else:
            sections["estimators"].append(row)
    return sections


def write_metrics(run_dir: Path, rows: list[dict]) -> None:
    """``rows`` (estimators, controllers and failures) as ``metrics.json`` (module docstring) and as
    ``metrics.csv``."""
    sections = split_metrics_rows(rows)
    document = {"metrics_version": METRICS_VERSION, **sections}
    (run_dir / "metrics.json").write_text(json.dumps(document, indent=2) + "\n")
    flat = []
    for row in (row for name in METRICS_SECTIONS for row in sections[name]):
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
