"""A sweep's tables: one row per task, statistics per (robot, excitation, noise, estimator), and the
Cramér–Rao comparison per base parameter.

The task table is written as CSV and, when pyarrow is installed (the ``sweep`` extra), as Parquet beside it.
Statistics are taken over the successful repetitions whose figure is finite; a diverged model (open-loop
trajectory left the workspace, inf) counts in the divergence rate, not in the trajectory statistics.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robotid_sim.safety import atomic_write
from robotid_sim.sweep.tasks import FIGURES, PROTOCOL_FIELDS

log = logging.getLogger(__name__)

#: the columns of the task table, in order
TABLE_COLUMNS = (
    "robot",
    "excitation",
    "noise",
    "repetition",
    "seed",
    "estimator",
    "status",
    *FIGURES,
    "diverged",
    "error",
    "task_id",
)
#: the cell of a summary row
GROUP = ("robot", "excitation", "noise", "estimator")
PERCENTILES = (5, 50, 95)
PARQUET_HINT = "pip install 'robotid-sim[sweep]' (pyarrow) to also get results.parquet"


def table_columns(protocol: bool = False) -> tuple[str, ...]:
    """The task table's columns: :data:`TABLE_COLUMNS`, and with BIRDy's protocol its fields before ``error``."""
    if not protocol:
        return TABLE_COLUMNS
    at = TABLE_COLUMNS.index("error")
    return (*TABLE_COLUMNS[:at], *PROTOCOL_FIELDS, *TABLE_COLUMNS[at:])


def table_rows(records: Iterable[dict[str, Any]], columns: Sequence[str] = TABLE_COLUMNS) -> list[dict[str, Any]]:
    """The task table: one flat row per record (lists such as the base-parameter values left out)."""
    return [{key: record.get(key) for key in columns} for record in records]


def _values(rows: Sequence[dict[str, Any]], figure: str) -> np.ndarray:
    values = np.array([np.nan if r[figure] is None else float(r[figure]) for r in rows], float)
    return values[np.isfinite(values)]


def summary_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (robot, excitation, noise, estimator), in the table's order: tasks, failures, divergence rate, and for
    each figure of merit mean, std (ddof 1), 5th, 50th and 95th percentiles over the successful repetitions."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in GROUP), []).append(row)
    out = []
    for key, members in groups.items():
        ok = [r for r in members if r["status"] == "ok"]
        rolled = [r for r in ok if r["diverged"] or r["trajectory_rms_total"] is not None]
        summary: dict[str, Any] = dict(zip(GROUP, key, strict=True))
        summary |= {
            "tasks": len(members),
            "failures": len(members) - len(ok),
            # over the repetitions with an open-loop trajectory (a model without forward dynamics has none)
            "divergence_rate": float(np.mean([bool(r["diverged"]) for r in rolled])) if rolled else None,
        }
        for figure in FIGURES:
            values = _values(ok, figure)
            stats = {"mean": None, "std": None, **{f"p{p}": None for p in PERCENTILES}}
            if values.size:
                stats["mean"] = float(values.mean())
                stats["std"] = float(values.std(ddof=1)) if values.size > 1 else 0.0
                stats |= {
                    f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(values, PERCENTILES), strict=True)
                }
            summary |= {f"{figure}_{name}": value for name, value in stats.items()}
        out.append(summary)
    return out


def crb_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Monte Carlo spread against the Cramér–Rao bound, per base parameter, for every (robot, excitation, noise,
    estimator) whose records carry the bound (a model linear in the base parameters under Gaussian torque
    noise of known σ).

    Each row: the parameter, its true value, the Monte Carlo mean and std (ddof 1) of the estimates over the
    successful repetitions with finite values, the bound's std (mean over the repetitions; the regressor is the
    same in each when only the torque is noisy), and their ratio (1: the estimator attains the bound).
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for record in records:
        if record.get("status") == "ok" and record.get("crb_std") and record.get("base_values"):
            groups.setdefault(tuple(record[k] for k in GROUP), []).append(record)
    out = []
    for key, members in groups.items():
        names = members[0]["base_names"]
        members = [m for m in members if m["base_names"] == names and None not in m["base_values"]]
        if len(members) < 2:
            continue
        values = np.array([m["base_values"] for m in members], float)
        bound = np.mean(np.array([m["crb_std"] for m in members], float), axis=0)
        spread = values.std(axis=0, ddof=1)
        for k, name in enumerate(names):
            out.append(
                {
                    **dict(zip(GROUP, key, strict=True)),
                    "parameter": name,
                    "true": float(members[0]["base_true"][k]),
                    "mc_mean": float(values[:, k].mean()),
                    "mc_std": float(spread[k]),
                    "crb_std": float(bound[k]),
                    "ratio": float(spread[k] / bound[k]) if bound[k] > 0 else None,
                    "repetitions": len(members),
                }
            )
    return out


def write_csv(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> Path:
    """``rows`` as CSV (empty cells for None), written atomically."""
    columns = list(columns) if columns is not None else list(dict.fromkeys(k for row in rows for k in row))

    def write(fh):
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)

    atomic_write(path, write, binary=False)
    return path


def write_parquet(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> Path | None:
    """``rows`` as Parquet through pyarrow, written atomically; None (and a log line) without pyarrow."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        log.warning("pyarrow is not installed: wrote CSV only; %s", PARQUET_HINT)
        return None
    types = {
        "repetition": pa.int64(),
        "seed": pa.int64(),
        "diverged": pa.bool_(),
        **{figure: pa.float64() for figure in FIGURES},
        **{"initial": pa.int64(), "initial_error": pa.float64(), "d_beta": pa.float64()},
        **{"iterations": pa.int64(), "model_evaluations": pa.int64(), "physically_consistent": pa.bool_()},
    }
    schema = pa.schema([(c, types.get(c, pa.string())) for c in columns])
    table = pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows], schema=schema)
    atomic_write(path, lambda fh: pq.write_table(table, fh))
    return path


def read_table(path: Path) -> list[dict[str, Any]]:
    """A task table back (``results.parquet`` through pyarrow, else ``results.csv``), for tests and tools."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))
