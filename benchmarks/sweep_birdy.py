"""Wall time of the bundled BIRDy-style sweep (``scenarios/sweeps/birdy.yaml``) with the local executor.

Issue 17's target: under 30 minutes on this (2-core) machine. ``--repetitions R`` runs a reduced sweep (R
repetitions instead of the file's) and extrapolates linearly to the full one (the tasks are independent and
of equal cost per repetition); the estimate is marked as such.

    python benchmarks/sweep_birdy.py [--repetitions R] [--workers N] [--executor local|dask] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

TARGET_S = 30 * 60


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=None, help="fewer repetitions, then extrapolate")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--executor", default="local")
    parser.add_argument("--keep", default=None, help="write the sweep folder here instead of a temporary one")
    args = parser.parse_args()

    from robotid_sim.studies import run_sweep
    from robotid_sim.sweep import load_sweep_config
    from robotid_sim.sweep.aggregate import read_table

    config = load_sweep_config("birdy")
    full = config.repetitions
    if args.repetitions is not None:
        config = config.model_copy(update={"repetitions": args.repetitions})
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        outcome = run_sweep(config, args.keep or tmp, executor=args.executor, workers=args.workers)
        wall = time.perf_counter() - start
        summary = read_table(outcome.tables["summary"])
    scale = full / config.repetitions
    print(
        f"birdy sweep: {len(config.robots)} robots × {len(config.noise)} noise presets × {len(config.estimators)} "
        f"estimators × {config.repetitions} repetitions = {outcome.tasks} tasks, {outcome.failed} failed; "
        f"{wall:.1f} s wall ({outcome.seconds:.1f} s running tasks, {args.executor} executor)"
    )
    estimate = wall if scale == 1 else (wall - outcome.seconds) + outcome.seconds * scale
    label = "measured" if scale == 1 else f"extrapolated from {config.repetitions} to {full} repetitions"
    print(f"full sweep ({full} repetitions): {estimate / 60:.1f} min ({label}); target < {TARGET_S / 60:.0f} min")
    print(f"{'estimator':>10} {'param err p50':>14} {'torque err p50':>15} {'diverged':>9} {'failed':>7} {'fit s':>8}")
    by_estimator: dict[str, list[dict]] = {}
    for row in summary:
        by_estimator.setdefault(row["estimator"], []).append(row)

    def median(rows, key):
        values = sorted(float(r[key]) for r in rows if r[key] not in ("", None))
        return f"{values[len(values) // 2]:.3g}" if values else "–"

    for name, rows in by_estimator.items():
        failed = sum(int(r["failures"]) for r in rows)
        diverged = [float(r["divergence_rate"]) for r in rows if r["divergence_rate"] not in ("", None)]
        rate = f"{100 * sum(diverged) / len(diverged):.0f} %" if diverged else "–"
        parameter, torque = median(rows, "base_parameter_error_p50"), median(rows, "torque_relative_error_vs_truth_p50")
        print(f"{name:>10} {parameter:>14} {torque:>15} {rate:>9} {failed:>7} {median(rows, 'fit_time_s_mean'):>8}")
    return 0 if estimate < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
