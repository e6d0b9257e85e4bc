"""Seed 001 on hyper9 (issue 13): the cost of ``two_loop`` on 25 000 samples and the whole bundled study.

    python benchmarks/hyper9_seed001.py [--repeats 3] [--skip-study]

1. Simulates the identification data of ``scenarios/hyper9_seed001.yaml`` (5 periods of 25 s at
   200 Hz: 25 000 samples, current noise and outliers, the arm's nonlinear friction) *without* the
   period averaging, and times ``two_loop`` (inner IRLS + LMI, outer friction fit) on all 25 000
   samples, beside ``ols`` on the same problem in the same process (the reference; medians of
   ``--repeats`` fits). It also prints how far each fitted exponent α is from the arm's.
2. Runs the whole study (``robotid-sim run scenarios/hyper9_seed001.yaml``: simulation, period
   averaging, every estimator, validation, report) once, times it, and prints the summed validation
   torque RMS of each model (seed 001 Table 5: 53.0 → 46.7 → 35.6 → 35.6 → 27.2 N·m), against the
   measured and against the true validation torque, and whether the sums strictly decrease.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from robotid_sim.identification import IdentificationProblem
from robotid_sim.plugins import get_estimator
from robotid_sim.scenario.plan import prepare_run, simulate_dataset
from robotid_sim.scenario.schema import load_scenario
from robotid_sim.studies import run_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "hyper9_seed001.yaml"


def _median_fit(estimator, problem, repeats: int) -> tuple[float, object]:
    times, model = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        model = estimator.fit(problem)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-study", action="store_true")
    args = parser.parse_args()

    plan = prepare_run(load_scenario(SCENARIO))
    ds = simulate_dataset(plan, "identification")
    problem = IdentificationProblem(plan.structure, ds)
    get_estimator("lmi_wls")().fit(problem)  # warm-up: imports cvxpy, compiles the kernels
    t_ols, _ = _median_fit(get_estimator("ols")(), problem, max(args.repeats, 5))
    two_loop = next(estimator for entry, estimator in plan.estimators if entry.name == "two_loop")  # its options
    t_two, model = _median_fit(two_loop, problem, args.repeats)
    d = model.diagnostics
    error = np.array(d["alpha"]) - plan.robot.friction.alpha
    print(
        f"two_loop on {ds.n_samples} samples: median {t_two:.1f} s over {args.repeats} fits ({t_two / t_ols:.0f}x ols)"
    )
    print(f"  ols {t_ols:.3f} s; outer iterations {d['outer_iterations']}, inner {d['inner_iterations']}")
    print(f"  alpha - truth: {np.round(error, 3).tolist()} (max |error| {np.abs(error).max():.3f})")
    if args.skip_study:
        return

    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        run_dir = run_scenario(SCENARIO, out_dir=out)
        t_study = time.perf_counter() - t0
        rows = json.loads((Path(run_dir) / "metrics.json").read_text())["estimators"]
    print(f"whole study: {t_study:.1f} s")
    sums = []
    for row in rows:
        if "torque_rms" not in row:
            continue
        total = float(np.sum(row["torque_rms"]))
        sums.append((row["estimator"], total))
        consistent = {1.0: True, 0.0: False}.get(row.get("physically_consistent"))
        print(
            f"  {row['estimator']:16s} sum RMS {total:8.4f} N·m "
            f"(vs truth, RMS of all {row['torque_rms_vs_truth_total']:.4f})"
            f"  consistent: {consistent}  trajectory RMS {row.get('trajectory_rms_total', float('nan')):.3g}"
        )
    chain = [total for name, total in sums if name != "CAD"]
    print("sums strictly decrease along the estimators:", all(b < a for a, b in zip(chain, chain[1:], strict=False)))


if __name__ == "__main__":
    main()
