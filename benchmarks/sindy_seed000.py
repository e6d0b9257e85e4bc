"""Seed 000 (Guo et al. 2025; issue 14): SINDy against stepwise SINDy on the SCARA and three-axis arms.

For both arms and the seed's three noise cases (none; 70/50/30 dB; 60/40/20 dB on q/qd/qdd): library
sizes, fit times (median of ``--repeats``), active terms per joint and the validation torque RMS per joint
(against the true torque, on another Fourier trajectory) of ``sindy`` and ``stepwise_sindy``; then the
three-axis closed loop of seed 000 Fig. 15 in PyBullet (Stribeck friction): eta (mean |q_ref - q|, deg) per
joint (deg) under PID, the Step I model's torque + PID and the Step III model's torque + PID, models identified
on the noise-free data.

Data: PyBullet runs (200 Hz) of the default :class:`StepwiseExcitation` (30 static creeps, 30 sweeps from
random poses, 2 Fourier segments); states from the excitation's labels. Options as in
``scenarios/*_seed000.yaml``.

    python benchmarks/sindy_seed000.py [--repeats 3] [--closed-loop-duration 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import robotid_sim as rid
from robotid_sim.control.closed_loop import run_closed_loop
from robotid_sim.control.model_based import Feedforward
from robotid_sim.control.pid import PID
from robotid_sim.excitation import StepwiseExcitation
from robotid_sim.excitation.fourier import FourierExcitation
from robotid_sim.identification import IdentificationProblem
from robotid_sim.scenario import load_scenario
from robotid_sim.scenario.plan import bundled_scenarios
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.noise import noise_from_config

CASES = {
    "none": None,
    "70/50/30 dB": {"q": {"snr_db": 70}, "qd": {"snr_db": 50}, "qdd": {"snr_db": 30}},
    "60/40/20 dB": {"q": {"snr_db": 60}, "qd": {"snr_db": 40}, "qdd": {"snr_db": 20}},
}


def _scenario_setup(arm: str) -> tuple[dict, dict, dict]:
    """(validation excitation, sindy options, stepwise_sindy options) of the bundled scenario ``<arm>_seed000``."""
    sc = load_scenario(bundled_scenarios()[f"{arm}_seed000"])
    options = {entry.display: entry.options for entry in sc.estimators}
    return sc.validation.excitation, options["sindy"], options["stepwise"]


#: per arm, what its bundled scenario runs: (validation excitation, sindy options, stepwise_sindy options)
SETUP = {arm: _scenario_setup(arm) for arm in ("scara", "three_axis")}


def estimator(name, **options):
    return rid.plugins.get_estimator(name).from_options(**options)


def with_noise(ds, noise, seed=3):
    if noise is None:
        return ds
    measured = noise_from_config(noise).apply(ds.truth.as_dict(), np.random.default_rng(seed))
    return Dataset(ds.t, **measured, truth=ds.truth, joint_names=ds.joint_names, metadata=ds.metadata)


def timed_fit(est, problem, repeats):
    times, model = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        model = est.fit(problem)
        times.append(time.perf_counter() - t0)
    return model, float(np.median(times))


def fmt(values, digits=3):
    return "[" + ", ".join(f"{v:.{digits}g}" if isinstance(v, float) else str(v) for v in values) + "]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--closed-loop-duration", type=float, default=5.0)
    args = parser.parse_args()
    print("| arm | noise | estimator | library | fit s | active terms | validation RMS (N·m / N) | relative |")
    print("|---|---|---|---:|---:|---|---|---|")
    noise_free = {}
    for name in ("scara", "three_axis"):
        robot = rid.load_robot(name)
        ident = rid.simulate(robot, StepwiseExcitation(robot, seed=0), rate_hz=200)
        val = rid.simulate(robot, SETUP[name][0], rate_hz=100)
        scale = np.sqrt(np.mean(val.truth.tau**2, axis=0))
        _, sindy_options, stepwise_options = SETUP[name]
        for case, noise in CASES.items():
            problem = IdentificationProblem(robot, with_noise(ident, noise))
            for label, est in (
                ("sindy", estimator("sindy", **sindy_options)),
                ("stepwise_sindy", estimator("stepwise_sindy", **stepwise_options)),
            ):
                model, fit_s = timed_fit(est, problem, args.repeats)
                rms = np.sqrt(np.mean((model.predict_torque(val.q, val.qd, val.qdd) - val.truth.tau) ** 2, axis=0))
                d = model.diagnostics
                print(
                    f"| {name} | {case} | {label} | {d['library_size']} | {fit_s:.2f} | {d['active_terms']} | "
                    f"{fmt(rms.tolist())} | {fmt((rms / scale).tolist(), 2)} |"
                )
            if name == "three_axis" and noise is None:
                noise_free = {
                    "step1": estimator("stepwise_sindy", steps=1, **stepwise_options).fit(problem),
                    "step3": estimator("stepwise_sindy", **stepwise_options).fit(problem),
                }
    robot = rid.load_robot("three_axis")
    reference = FourierExcitation.random(robot, harmonics=3, base_frequency=0.1, seed=7)
    print(f"\nthree_axis closed loop in PyBullet, {args.closed_loop_duration:g} s, eta = mean |q_ref - q| (deg):")
    print("| controller | eta per joint | s |")
    print("|---|---|---:|")
    eta = {}
    for label, controller in (
        ("PID", PID()),
        ("FF Step I", Feedforward(model=noise_free["step1"])),
        ("FF Step III", Feedforward(model=noise_free["step3"])),
    ):
        t0 = time.perf_counter()
        eta[label] = run_closed_loop(robot, controller, reference=reference, duration=args.closed_loop_duration).eta
        print(f"| {label} | {fmt(eta[label].tolist(), 3)} | {time.perf_counter() - t0:.1f} |")
    print(f"\nPID -> Step III reduction per joint: {fmt((eta['PID'] / eta['FF Step III']).tolist(), 3)}")


if __name__ == "__main__":
    main()
