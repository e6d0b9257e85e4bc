"""Issue 31 point 2: the EKF's automatic preset from the default start (λ0 = 0.1) on every bundled scenario's
identification data (its noise and preprocessing), beside OLS on the same data.

Prints per scenario the samples, the base parameters, the relative error ‖β̂ − β‖/‖β‖ of OLS and of the EKF
(over the base parameters the robot's own reduction shares with the scenario's), the ratio, the EKF's
non-physical samples (its estimate's mass matrix not positive definite) and the fit time; a filter that fails
says why.

    python benchmarks/ekf_scenarios.py [--scenarios prrrp_seed004,hyper9_seed001,...] [--engine compiled|filterpy]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=None, help="comma-separated names (default: every bundled one)")
    parser.add_argument("--engine", default="compiled", choices=("compiled", "filterpy", "auto"))
    args = parser.parse_args()

    from robotid_sim import plugins
    from robotid_sim.errors import IdentificationError
    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.scenario.plan import prepare_run, preprocess_dataset, resolve_scenario_path, simulate_dataset
    from robotid_sim.scenario.schema import load_scenario

    names = args.scenarios.split(",") if args.scenarios else sorted(p.stem for p in SCENARIOS.glob("*.yaml"))
    print(f"{'scenario':<32} {'samples':>8} {'b':>4} {'OLS':>9} {'EKF':>9} {'ratio':>6} {'non-phys':>8} {'s':>5}")
    for name in names:
        plan = prepare_run(load_scenario(resolve_scenario_path(name)))
        data, _ = preprocess_dataset(simulate_dataset(plan, "identification"), plan.scenario.preprocessing)
        problem = IdentificationProblem(plan.structure, data)
        reference = plan.robot.base_parameters()
        truth_of = dict(zip(reference.names, reference.true_values(), strict=True))
        shared = np.array([n in truth_of for n in problem.base_parameter_names])
        truth = np.array([truth_of.get(n, 0.0) for n in problem.base_parameter_names])

        def error(values, shared=shared, truth=truth) -> float:
            return float(np.linalg.norm((values - truth)[shared]) / np.linalg.norm(truth[shared]))

        ols = error(plugins.get_estimator("ols")().fit(problem).values)
        start = time.perf_counter()
        row = f"{name:<32} {data.n_samples:>8} {len(truth):>4} {ols:9.2e}"
        try:
            model = plugins.get_estimator("ekf")(engine=args.engine).fit(problem)
        except IdentificationError as exc:
            print(f"{row} EKF failed: {exc}", flush=True)
            continue
        ekf = error(model.values)
        nonphysical = model.diagnostics.get("non_physical_samples", 0)
        print(f"{row} {ekf:9.2e} {ekf / ols:6.2f} {nonphysical:>8} {time.perf_counter() - start:5.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
