"""Results unchanged by a restructure: every bundled scenario, ``identify --validate`` on a log set and
``sweep small``, run through the command line, compared value by value with a reference collection.

Usage::

    python benchmarks/restructure_parity.py collect OUT_DIR       # run everything, write OUT_DIR/fingerprint.npz
    python benchmarks/restructure_parity.py compare REF_DIR NEW_DIR [--rtol 1e-12] [--rename OLD=NEW] [--ignore KEY]

``collect`` runs each bundled scenario (``robotid-sim run NAME``), simulates a small planar3r log set
(``robotid-sim simulate``, fixed seeds) and identifies it with ``identify --validate``, and runs the
bundled ``small`` sweep; it completes an interrupted collection in the same folder. It keeps every number
of each ``metrics.json``, of each saved model (``models/*.json`` and ``models/*.npz``) and of the sweep's
``results.csv``/``summary.csv``, keyed by file and JSON path, leaving out wall-clock times.

``compare`` prints the keys that differ by more than ``rtol`` relative (``atol`` = rtol x the largest
magnitude of that key's array, so exact zeros compare) and the keys missing from the new collection, and
exits 1 if any; keys only in the new collection (e.g. a model's diagnostics newly reported) are listed,
not counted as differences.

The reference of the restructure (issue 26) was collected on commit 6a8c5ca with this same script; the sweep's
figures were renamed to the run's metric names and its task ids changed with its record version, so::

    python benchmarks/restructure_parity.py compare REF NEW --ignore task_id \
        --rename param_error=base_parameter_error --rename torque_error=torque_relative_error_vs_truth \
        --rename trajectory_error=trajectory_rms_total
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SCENARIOS = (
    "prrrp_seed004",
    "scara_seed000",
    "three_axis_seed000",
    "three_axis_seed000_closed_loop",
    "planar3r_seed002",
    "planar3r_seed003",
    "hyper9_seed001",
)

#: JSON keys whose values are wall-clock measurements, not results
TIMING_KEYS = ("time", "seconds", "duration", "elapsed", "wall", "started", "finished", "created", "date")

LOG_NOISE = "tau: {std: 0.5}\nq: {std: 1.0e-4}\n"
LOG_EXCITATION = "{{type: fourier, harmonics: 5, base_frequency: 0.2, periods: 1, seed: {seed}}}\n"


def _cli(*args: str, cwd: Path) -> None:
    started = time.perf_counter()
    proc = subprocess.run(["robotid-sim", *args], cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - started
    print(f"  robotid-sim {' '.join(args)}: exit {proc.returncode} in {took:.0f} s", flush=True)
    if proc.returncode != 0:
        sys.exit(f"failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def _is_timing(key: str) -> bool:
    low = key.lower()
    return any(word in low for word in TIMING_KEYS)


def _flatten(value, prefix: str, out: dict[str, np.ndarray]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not _is_timing(str(key)):
                _flatten(item, f"{prefix}/{key}", out)
        return
    if isinstance(value, list):
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            arr = None
        if arr is not None and arr.dtype != object:
            out[prefix] = arr
            return
        for i, item in enumerate(value):
            _flatten(item, f"{prefix}[{i}]", out)
        return
    if isinstance(value, bool):
        out[prefix] = np.asarray(float(value))
    elif isinstance(value, int | float):
        out[prefix] = np.asarray(float(value))
    elif value is None:
        out[prefix] = np.asarray(np.nan)
    elif isinstance(value, str):
        out[prefix + "#str"] = np.asarray(value)


#: the columns that name a row of a sweep table (its cell and estimator), so rows compare whatever their order
ROW_IDENTITY = ("robot", "excitation", "noise", "repetition", "seed", "estimator")


def _csv_numbers(path: Path, prefix: str, out: dict[str, np.ndarray]) -> None:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows):
        name = ",".join(row[c] for c in ROW_IDENTITY if c in row) or str(i)
        for key, text in row.items():
            if _is_timing(key) or key in ROW_IDENTITY:
                continue
            try:
                out[f"{prefix}[{name}]/{key}"] = np.asarray(float(text))
            except (TypeError, ValueError):
                out[f"{prefix}[{name}]/{key}#str"] = np.asarray(str(text))


def _run_folder(run_dir: Path, tag: str, out: dict[str, np.ndarray]) -> None:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    if isinstance(metrics, dict):  # metrics_version 2: the rows of the sections, in the one list's former order
        metrics = metrics["estimators"] + metrics["controllers"] + metrics["failed"]
    _flatten(metrics, f"{tag}/metrics.json", out)
    for model_json in sorted((run_dir / "models").glob("*.json")):
        _flatten(json.loads(model_json.read_text()), f"{tag}/models/{model_json.name}", out)
    for model_npz in sorted((run_dir / "models").glob("*.npz")):
        with np.load(model_npz, allow_pickle=False) as arrays:
            for key in arrays.files:
                out[f"{tag}/models/{model_npz.name}/{key}"] = np.asarray(arrays[key])


def _only_child(folder: Path) -> Path:
    children = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    if len(children) != 1:
        sys.exit(f"expected one run folder in {folder}, found {[p.name for p in children]}")
    return children[0]


def _fresh(folder: Path) -> bool:
    """True when ``folder`` holds no finished result yet (an interrupted collection is completed, not redone)."""
    if folder.exists() and any(p.is_dir() and not p.name.startswith(".") for p in folder.iterdir()):
        return False
    folder.mkdir(parents=True, exist_ok=True)
    return True


def collect(out_dir: Path) -> None:
    values: dict[str, np.ndarray] = {}
    for name in SCENARIOS:
        parent = out_dir / "runs" / name
        if _fresh(parent):
            _cli("run", name, "--out", str(parent), cwd=out_dir)
        _run_folder(_only_child(parent), name, values)

    logs = out_dir / "logs"
    study = out_dir / "runs" / "identify_validate"
    if _fresh(study):
        _identify_validate(out_dir, logs, study)
    _run_folder(_only_child(study), "identify_validate", values)

    sweeps = out_dir / "sweeps"
    if _fresh(sweeps):
        _cli("sweep", "small", "--out", str(sweeps), "--no-progress", cwd=out_dir)
    sweep_dir = _only_child(sweeps)
    for table in ("results.csv", "summary.csv"):
        _csv_numbers(sweep_dir / table, f"sweep/{table}", values)

    np.savez_compressed(out_dir / "fingerprint.npz", **values)
    print(f"{len(values)} values in {out_dir / 'fingerprint.npz'}")


def _identify_validate(out_dir: Path, logs: Path, study: Path) -> None:
    """Three noisy planar3r recordings (two to identify from, one held out), identified with four estimators."""
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    (logs / "noise.yaml").write_text(LOG_NOISE)
    for seed, stem in ((1, "ident_a"), (2, "ident_b"), (3, "valid")):
        (logs / f"{stem}.yaml").write_text(LOG_EXCITATION.format(seed=seed))
        _cli("simulate", "--robot", "planar3r", "--noise", "noise.yaml", "--excitation", f"{stem}.yaml",
             "--seed", str(seed), "--out", f"{stem}.csv", cwd=logs)  # fmt: skip
    _cli("identify", "--robot", "planar3r", "--data", "logs/ident_a.csv", "--data", "logs/ident_b.csv",
         "--validate", "logs/valid.csv", "--estimator", "ols", "--estimator", "wls", "--estimator", "irls",
         "--estimator", "lmi_wls", "--lowpass", "20", "--name", "logset", "--out", str(study), cwd=out_dir)  # fmt: skip


def _renamed(key: str, renames: list[tuple[str, str]]) -> str:
    head, _, last = key.rpartition("/")
    for old, new in renames:
        last = last.replace(old, new)
    return f"{head}/{last}"


def compare(ref_dir: Path, new_dir: Path, rtol: float, renames=(), ignore=()) -> int:
    """Compare two collections; ``renames`` (old, new) apply to the reference's last key part (a renamed
    metric), keys whose last part (without ``#str``) is in ``ignore`` are left out on both sides."""
    with np.load(ref_dir / "fingerprint.npz", allow_pickle=False) as f:
        ref = {_renamed(k, list(renames)): f[k] for k in f.files}
    with np.load(new_dir / "fingerprint.npz", allow_pickle=False) as f:
        new = {k: f[k] for k in f.files}
    for values in (ref, new):
        for key in [k for k in values if k.rpartition("/")[2].removesuffix("#str") in ignore]:
            del values[key]
    problems = [f"only in reference: {k}" for k in sorted(ref.keys() - new.keys())]
    added = sorted(new.keys() - ref.keys())
    worst = 0.0
    for key in sorted(ref.keys() & new.keys()):
        a, b = ref[key], new[key]
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            problems.append(f"{key}: shape/type {a.shape} {a.dtype} vs {b.shape} {b.dtype}")
        elif a.dtype.kind in "US":
            if not np.array_equal(a, b):
                problems.append(f"{key}: {a!r} vs {b!r}")
        else:
            a = a.astype(float)
            b = b.astype(float)
            if not np.array_equal(np.isnan(a), np.isnan(b)):
                problems.append(f"{key}: NaN pattern differs")
                continue
            finite = np.isfinite(a) & np.isfinite(b)
            scale = np.max(np.abs(a[finite])) if finite.any() else 0.0
            diff = np.abs(a[finite] - b[finite])
            tol = rtol * np.maximum(np.abs(a[finite]), scale)
            rel = float(np.max(diff / np.where(tol > 0, tol / rtol, 1.0))) if diff.size else 0.0
            worst = max(worst, rel)
            if np.any(diff > tol) or not np.array_equal(a[~finite], b[~finite], equal_nan=True):
                problems.append(f"{key}: max relative difference {rel:.3g}")
    compared = len(ref.keys() & new.keys())
    print(f"compared {compared} values (reference {len(ref)}, new {len(new)}); largest relative difference {worst:.3g}")
    for line in problems:
        print("  " + line)
    if added:
        print(f"{len(added)} values new (not in the reference; allowed: e.g. diagnostics now reported):")
        for key in added:
            print(f"  + {key}")
    print(f"identical to rtol {rtol:g}" if not problems else f"{len(problems)} differences")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_collect = sub.add_parser("collect")
    p_collect.add_argument("out_dir", type=Path)
    p_compare = sub.add_parser("compare")
    p_compare.add_argument("ref_dir", type=Path)
    p_compare.add_argument("new_dir", type=Path)
    p_compare.add_argument("--rtol", type=float, default=1e-12)
    p_compare.add_argument("--rename", action="append", default=[], metavar="OLD=NEW", help="a renamed metric")
    p_compare.add_argument("--ignore", action="append", default=[], metavar="NAME", help="a key to leave out")
    args = parser.parse_args()
    if args.command == "collect":
        collect(args.out_dir.resolve())
        return 0
    renames = [tuple(text.split("=", 1)) for text in args.rename]
    return compare(args.ref_dir, args.new_dir, args.rtol, renames, set(args.ignore))


if __name__ == "__main__":
    sys.exit(main())
