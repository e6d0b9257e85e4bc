"""Issue 31's acceptance on seed 004's PRRRP arm: every filter of the EKF family over the whole identification
record of the default scenario ``prrrp_seed004`` (8,224 samples at 200 Hz), noise-free and with the scenario noise.

    python benchmarks/filters_prrrp.py [--filters ekf,ukf,cdkf,sr_ukf,sr_cdkf,sr_ekf,pf] [--particles 500]
                                       [--engine auto]

Each filter runs from its defaults (λ0 = 0.1, the ``auto`` preset), ``--engine compiled`` with every step compiled
(the EKF's step and the UKF's and CDKF's one-call step, which ``auto`` takes only from 50,000 samples). Printed per
filter and record: the largest relative error over the base parameters whose true value is not 0 (noise-free: all
of them; with noise: the well-excited ones, OLS relative std below 5 %), the largest |value| of the two that are 0,
the ``converged`` diagnostic, the fit time and the cost per sample.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from robotid_sim import plugins
from robotid_sim.errors import IdentificationError
from robotid_sim.identification import IdentificationProblem
from robotid_sim.scenario.plan import prepare_run, resolve_scenario_path, simulate_dataset
from robotid_sim.scenario.schema import load_scenario
from robotid_sim.sim.dataset import Dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filters", default="ekf,ukf,cdkf,sr_ukf,sr_cdkf,sr_ekf,pf")
    parser.add_argument("--particles", type=int, default=500, help="particles of the pf")
    parser.add_argument("--engine", default="auto", choices=["auto", "compiled", "filterpy"])
    args = parser.parse_args()
    plan = prepare_run(load_scenario(resolve_scenario_path("prrrp_seed004")))
    noisy = simulate_dataset(plan, "identification")
    tr = noisy.truth
    clean = Dataset(noisy.t, tr.q, tr.qd, tr.qdd, tr.tau, joint_names=noisy.joint_names, metadata=noisy.metadata)
    structure = plan.robot.structure()
    truth = plan.robot.base_parameters().true_values()
    ols = plugins.get_estimator("ols")().fit(IdentificationProblem(structure, noisy))
    with np.errstate(divide="ignore"):
        well = (ols.std / np.abs(truth) < 0.05) & (truth != 0)
    print(f"prrrp_seed004: {noisy.n_samples} samples; well-excited with noise: {np.array(ols.parameter_names)[well]}")
    header = f"{'filter':8s} {'record':6s} {'max rel err':>11s} {'|zeros|':>8s} {'converged':>9s} {'fit [s]':>8s}"
    print(f"{header} {'µs/sample':>10s}")
    for name in args.filters.split(","):
        options = {"engine": args.engine} | ({"particles": args.particles} if name == "pf" else {})
        for label, ds, keep in (("clean", clean, truth != 0), ("noisy", noisy, well)):
            t0 = time.perf_counter()
            try:
                model = plugins.get_estimator(name)(**options).fit(IdentificationProblem(structure, ds))
            except IdentificationError as exc:  # a filter that diverged says where
                print(f"{name:8s} {label:6s} failed: {exc}")
                continue
            elapsed = time.perf_counter() - t0
            error = np.max(np.abs(model.values[keep] - truth[keep]) / np.abs(truth[keep]))
            zeros = np.abs(model.values[truth == 0]).max()
            step = 1e6 * model.diagnostics["seconds_per_step"]
            converged = str(model.diagnostics["converged"])
            print(f"{name:8s} {label:6s} {error:11.2e} {zeros:8.1e} {converged:>9s} {elapsed:8.1f} {step:10.0f}")


if __name__ == "__main__":
    main()
