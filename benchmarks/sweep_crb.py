"""Monte Carlo spread of ``ols`` against the Cramér–Rao bound on ``prrrp`` (issue 17 acceptance).

A sweep of one cell repeated R times (default 200): the prrrp arm on its default excitation (fifth-order
polynomial moves through random waypoints, seed 004), Gaussian torque noise of one σ on every joint and no other
noise, so the base regressor Y is exact and the same in every repetition. Ordinary least squares is then
unbiased with covariance σ²(YᵀY)⁻¹, the Cramér–Rao bound; the script prints, per base parameter, the standard
deviation of the R estimates, the bound and their ratio, and checks every ratio is within 20 % of 1 (with
R = 200 the standard error of a sample std is about 1/sqrt(2(R − 1)) = 5 %).

    python benchmarks/sweep_crb.py [--repetitions 200] [--sigma 0.05] [--workers N] [--executor local|dask]

Exit status 1 when a ratio is outside the tolerance.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

TOLERANCE = 0.20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--sigma", type=float, default=0.05, help="torque noise σ (N and N·m), every joint")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--executor", default="local")
    args = parser.parse_args()

    from robotid_sim.studies import run_sweep
    from robotid_sim.sweep.aggregate import read_table

    sweep = {
        "name": "prrrp_crb",
        "robots": ["prrrp"],
        "excitations": {"default": "default"},
        "noise": {f"tau_{args.sigma:g}": {"tau": {"std": args.sigma}}},
        "estimators": ["ols"],
        "repetitions": args.repetitions,
        "seed": 0,
        "validation": {"trajectory_horizon": 0},
    }
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        outcome = run_sweep(sweep, out, executor=args.executor, workers=args.workers)
        seconds = time.perf_counter() - start
        rows = read_table(outcome.tables["crb"])
    print(
        f"prrrp, default excitation, Gaussian torque noise σ = {args.sigma:g} on every joint, ols, "
        f"{args.repetitions} repetitions ({outcome.ran} tasks in {seconds:.1f} s, {outcome.failed} failed)"
    )
    print(f"{'parameter':>10} {'true':>12} {'MC mean':>12} {'MC std':>11} {'CRB std':>11} {'ratio':>7}")
    worst = 0.0
    for row in rows:
        ratio = float(row["ratio"])
        worst = max(worst, abs(ratio - 1.0))
        print(
            f"{row['parameter']:>10} {float(row['true']):12.5g} {float(row['mc_mean']):12.5g} "
            f"{float(row['mc_std']):11.4g} {float(row['crb_std']):11.4g} {ratio:7.3f}"
        )
    ok = bool(rows) and worst <= TOLERANCE
    print(f"largest |ratio - 1| = {worst:.3f} ({'within' if ok else 'OUTSIDE'} {TOLERANCE:.0%})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
