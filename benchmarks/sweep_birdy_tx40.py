"""Wall time of BIRDy's protocol on the TX40 (``scenarios/sweeps/birdy_tx40.yaml``) with the local executor, and
BIRDy's table per (method, noise preset).

Issue 30's target: under 60 minutes on this (2-core) machine. ``--repetitions R`` and ``--initial-estimates I``
run a reduced protocol and extrapolate to the file's: a cell (noise realisation) costs its closed-loop
simulation plus each one-step estimator once plus each iterative estimator once per initial estimate, so the
run's task time is split into those parts (from each task's fit time) and scaled accordingly; the estimate is
marked as such. With several realisations it also prints, per method, the error of the mean estimate beside its
standard error (bias against spread). ``--presets`` keeps some of the six noise presets (the estimate scales to
all of them).

    python benchmarks/sweep_birdy_tx40.py [--repetitions R] [--initial-estimates I] [--presets P ...]
                                           [--estimators E ...] [--sweep FILE] [--workers N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 60 * 60


def _reduced(config, args):
    """The sweep file's config with the reduced protocol the arguments ask for."""
    update = {}
    if args.repetitions is not None:
        update["repetitions"] = args.repetitions
    if args.initial_estimates is not None:
        update["initial_estimates"] = config.initial_estimates.model_copy(update={"count": args.initial_estimates})
    if args.presets:
        update["noise"] = {label: preset for label, preset in config.noise.items() if label in args.presets}
    if args.estimators:
        update["estimators"] = [e for e in config.estimators if e.display in args.estimators]
    return config.model_copy(update=update)


def _estimate(config, full, outcome, wall: float, workers: int, records) -> float:
    """The full protocol's wall time from the reduced run's: the workers' busy time (tasks' wall time × workers)
    split into the iterative estimators' fits (scaled by cells × initial estimates) and the rest (closed-loop
    simulations, one-step fits, evaluation: scaled by cells); the set-up and the tables' time kept as measured."""
    cells = len(config.noise) * config.repetitions
    full_cells = len(full.noise) * full.repetitions
    busy = outcome.seconds * workers
    iterative = sum(float(r["fit_time_s"] or 0.0) for r in records if r.get("iterations") is not None)
    scaled = (busy - iterative + iterative * full.initial_count / config.initial_count) * full_cells / cells
    return wall - outcome.seconds + scaled / workers


def _bias_text(records) -> str:
    """Bias against spread per (noise preset, method) over its noise realisations: the error of the mean estimate
    ‖β̄ − β‖/‖β‖, the norm of the mean's standard error ‖s/√R‖/‖β‖ (what ‖β̄ − β‖ would be without bias), each
    run's mean ‖β̂ − β‖/‖β‖, and the parameter furthest from the truth in standard errors of the mean."""
    import numpy as np

    runs: dict[tuple[str, str], list] = {}
    for r in records:
        if r["status"] == "ok" and r["base_values"] is not None:
            runs.setdefault((r["noise"], r["estimator"]), []).append(r)
    lines = [f"{'preset / method':<34}{'R':>4}{'mean est.':>11}{'± SE':>8}{'per run':>9}  largest bias (SEs)"]
    for (noise, name), group in runs.items():
        if len(group) < 2:
            continue
        values, truth = np.array([r["base_values"] for r in group]), np.array(group[0]["base_true"])
        norm, mean = np.linalg.norm(truth), values.mean(axis=0)
        se = values.std(axis=0, ddof=1) / np.sqrt(len(group))
        t = np.divide(mean - truth, se, out=np.zeros_like(se), where=se > 0)
        worst = int(np.argmax(np.abs(t)))
        per_run = np.linalg.norm(values - truth, axis=1).mean() / norm
        lines.append(
            f"{noise + ' / ' + name:<34}{len(group):>4}{100 * np.linalg.norm(mean - truth) / norm:>10.2f}%"
            f"{100 * np.linalg.norm(se) / norm:>7.2f}%{100 * per_run:>8.1f}%  "
            f"{group[0]['base_names'][worst]} {t[worst]:+.0f}"
        )
    return "\n".join(lines) if len(lines) > 1 else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=None, help="fewer noise realisations, then extrapolate")
    parser.add_argument("--initial-estimates", type=int, default=None, help="fewer initial estimates")
    parser.add_argument("--presets", nargs="*", default=None, help="noise presets to run (default: all six)")
    parser.add_argument("--estimators", nargs="*", default=None, help="estimator labels to run (default: all)")
    parser.add_argument("--sweep", default="birdy_tx40", help="another sweep file of the same form")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--keep", default=None, help="write the sweep folder here instead of a temporary one")
    args = parser.parse_args()

    from robotid_sim.report.sweep import birdy_text
    from robotid_sim.studies import run_sweep
    from robotid_sim.sweep import load_sweep_config
    from robotid_sim.sweep.aggregate import read_table
    from robotid_sim.sweep.executors import default_workers
    from robotid_sim.sweep.merit import COLUMNS
    from robotid_sim.sweep.runner import build_cells
    from robotid_sim.sweep.store import load_result

    full = load_sweep_config(args.sweep)
    config = _reduced(full, args)
    workers = args.workers or default_workers()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        outcome = run_sweep(config, args.keep or tmp, workers=workers)
        wall = time.perf_counter() - start
        cells = build_cells(config, Path.cwd())
        records = [load_result(outcome.run_dir, e["task_id"]) for c in cells for e in c["estimators"]]
        records = [r for r in records if r is not None]
        birdy = read_table(outcome.tables["birdy"])
    numeric = [c for c in COLUMNS if c not in ("robot", "excitation", "noise", "estimator")]
    birdy = [{k: (None if v in ("", None) else float(v) if k in numeric else v) for k, v in r.items()} for r in birdy]
    print(
        f"{config.name}: {len(config.noise)} presets × {config.repetitions} noise realisations × "
        f"{config.initial_count} initial estimates × {len(config.estimators)} methods = {outcome.tasks} tasks, "
        f"{outcome.failed} failed; {wall:.1f} s wall ({outcome.seconds:.1f} s running tasks)"
    )
    reduced = config.model_dump() != full.model_dump()
    estimate = _estimate(config, full, outcome, wall, workers, records) if reduced else wall
    label = "extrapolated from this run" if reduced else "measured"
    print(f"full protocol: {estimate / 60:.1f} min ({label}); target < {TARGET_S / 60:.0f} min")
    times: dict[str, list[float]] = {}
    for record in records:
        if record["fit_time_s"] is not None:
            times.setdefault(record["estimator"], []).append(float(record["fit_time_s"]))
    print(f"\n{'method':<26}{'runs':>6}{'s per estimate':>16}")
    for name, values in times.items():
        print(f"{name:<26}{len(values):>6}{sum(values) / len(values):>16.3g}")
    print()
    print(birdy_text(birdy))
    bias = _bias_text(records)
    if bias:
        print(f"\nbias against spread over the noise realisations (‖·‖/‖β‖):\n{bias}")
    return 0 if estimate < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
