"""Seed 003 on planar3r (issue 15): ``sequential`` and ``ols`` over many noise seeds, with the acceptance figures.

    python benchmarks/sequential_seed003.py [--seeds 20]

For each noise seed, the identification data of ``scenarios/planar3r_seed003.yaml`` (its sequential sine, noise
and rate) is simulated and identified by ``sequential`` (per-joint weighting, the default), ``sequential`` with
``weighting: none`` (seed 003's ordinary least squares) and ``ols`` on all the data. Each model is judged as
issue 15 asks, on the scenario's validation trajectory (noise-free truth, as the runner does):

- the worst relative error among the base parameters whose relative std is below 5 %, and how many seeds have
  one above 2 %;
- the worst acceleration RSD of M(q)⁻¹(τ − h) under the validation torque, and how many seeds exceed 5 %;
- the worst 2 s open-loop error against the true arm's rollout, and how many seeds exceed 2°.

The same is printed with one frequency per joint (5 cycles at the velocity limit) and for the setting the scenario
had first (200 Hz, 3 cycles at one frequency, 0.1 N·m on every joint), to show why they were changed. One seed is
a single draw; these counts are what the acceptance means.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import numpy as np
import yaml

import robotid_sim as rid
from robotid_sim.identification import IdentificationProblem
from robotid_sim.identification.validation import forward_dynamics_validation, open_loop_reference
from robotid_sim.plugins import get_estimator

SCENARIO = yaml.safe_load((Path(__file__).resolve().parents[1] / "scenarios" / "planar3r_seed003.yaml").read_text())
HORIZON_S = SCENARIO["validation"]["trajectory_horizon"]
ESTIMATORS = {
    "sequential": ("sequential", {}),
    "sequential (weighting none)": ("sequential", {"weighting": "none"}),
    "ols": ("ols", {}),
}


def _settings() -> dict[str, tuple[dict, dict, float]]:
    """(excitation, noise, rate) of the scenario, of the scenario at one frequency, and of its first setting."""
    excitation, noise, rate = SCENARIO["excitation"], SCENARIO["noise"], SCENARIO["simulation"]["rate_hz"]
    heavy_noise = copy.deepcopy(noise)
    heavy_noise["tau"] = {"std": 0.1}
    one_frequency = {**excitation, "frequency_steps": [1.0]}
    return {
        "scenario (1 kHz, 3 cycles at 0.5 w and at w, 0.03/0.02/0.01 N·m)": (excitation, noise, rate),
        "one frequency (1 kHz, 5 cycles at w, same noise)": ({**one_frequency, "cycles": 5}, noise, rate),
        "first setting (200 Hz, 3 cycles at w, 0.1 N·m)": (one_frequency, heavy_noise, 200.0),
    }


def _validation(robot, rate_hz: float):
    ds = rid.simulate(robot, SCENARIO["validation"]["excitation"], rate_hz=rate_hz)
    return ds, open_loop_reference(robot, ds, HORIZON_S, simulated=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    robot = rid.load_robot(SCENARIO["robot"])
    truth = robot.base_parameters().true_values()
    for label, (excitation, noise, rate) in _settings().items():
        validation = _validation(robot, rate)
        rows = {name: [] for name in ESTIMATORS}
        for seed in range(args.seeds):
            ds = rid.simulate(robot, excitation, noise=noise, seed=seed, rate_hz=rate)
            problem = IdentificationProblem(robot, ds)
            for name, (estimator, options) in ESTIMATORS.items():
                model = get_estimator(estimator)(**options).fit(problem)
                relative = np.abs(np.asarray(model.values) - truth) / np.abs(truth)
                usable = model.std / np.abs(truth) < 0.05
                check = forward_dynamics_validation(model, *validation)
                rows[name].append(
                    (
                        relative[usable].max() if usable.any() else 0.0,
                        int(usable.sum()),
                        check.acceleration_rsd.max(),
                        np.degrees(check.max_error).max(),
                    )
                )
        print(f"\n{label}: {args.seeds} noise seeds, {ds.n_samples} samples each")
        print(
            f"{'estimator':28s} {'usable':>7s} {'max err':>8s} {'> 2 %':>6s} {'max qdd RSD':>12s} {'> 5 %':>6s} "
            f"{'max |dq| [deg]':>15s} {'> 2 deg':>8s}"
        )
        for name, values in rows.items():
            err, usable, rsd, deg = (np.array(column) for column in zip(*values, strict=True))
            print(
                f"{name:28s} {usable.min():>3d}-{usable.max():<3d} {100 * err.max():7.2f}% {np.sum(err >= 0.02):>6d} "
                f"{100 * rsd.max():11.2f}% {np.sum(rsd >= 0.05):>6d} {deg.max():15.2f} {np.sum(deg >= 2.0):>8d}"
            )


if __name__ == "__main__":
    main()
