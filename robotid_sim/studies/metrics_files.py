"""``metrics.json`` and ``metrics.csv`` of a run folder: one row per estimator, controller or failure."""

from __future__ import annotations

import csv
import json
from pathlib import Path


def write_metrics(run_dir: Path, rows: list[dict]) -> None:
    """``rows`` as ``metrics.json`` and as ``metrics.csv`` (a list value ``key`` becomes ``key_1``, ``key_2``, ...)."""
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
