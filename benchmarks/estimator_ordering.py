"""How often the validation torque error orders irls < wls < ols (issue 4), over noise seeds.

    python benchmarks/estimator_ordering.py [--seeds 10]

planar3r, Fourier identification excitation, per-joint torque noise std 1.0 / 0.02 / 0.01 N·m
plus 2 % outliers of up to 20 / 0.4 / 0.2 N·m; validation on another Fourier trajectory,
error against the noise-free validation torque. The same setting as
tests/test_estimators.py::test_validation_torque_error_orders_irls_below_wls_below_ols.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

import robotid_sim as rid
from robotid_sim.sim.simulate import resolve_noise

NOISE = {
    "q": {"snr_db": 80},
    "qd": {"snr_db": 60},
    "qdd": {"snr_db": 45},
    "tau": {"std": [1.0, 0.02, 0.01]},
    "outliers": {"fraction": 0.02, "magnitude": [20.0, 0.4, 0.2], "signal": "tau"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    robot = rid.load_robot("planar3r")
    clean = rid.simulate(robot, {"type": "fourier", "harmonics": 5, "base_frequency": 0.1, "periods": 2, "seed": 0})
    val = rid.simulate(robot, {"type": "fourier", "harmonics": 4, "base_frequency": 0.2, "seed": 3})
    chain = resolve_noise(robot, NOISE)
    held = 0
    print(f"{'seed':>4} {'ols':>8} {'wls':>8} {'irls':>8}  ordered")
    for seed in range(args.seeds):
        noisy = chain.apply(clean.truth.as_dict(), np.random.default_rng(seed))
        ds = dataclasses.replace(clean, **noisy)
        rms = {}
        for name in ("ols", "wls", "irls"):
            model = rid.identify(ds, robot, estimator=name)
            err = model.predict_torque(val.q, val.qd, val.qdd) - val.truth.tau
            rms[name] = float(np.sqrt(np.mean(err**2)))
        ok = rms["irls"] < rms["wls"] < rms["ols"]
        held += ok
        print(f"{seed:>4} {rms['ols']:8.4f} {rms['wls']:8.4f} {rms['irls']:8.4f}  {ok}")
    print(f"irls < wls < ols held for {held} of {args.seeds} seeds")


if __name__ == "__main__":
    main()
