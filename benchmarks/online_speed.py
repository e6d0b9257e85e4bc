"""Cost of the online estimators (issue 12) on a 60 s, 200 Hz hyper9 record, beside OLS in the same run.

    python benchmarks/online_speed.py [--robot hyper9] [--seconds 60] [--rate 200]

The data is exact (a multi-sine inside the joint limits, the torque of the true model), so it
also reports how far each estimate is from the truth. ``ekf`` runs once (a single pass, a Python
step per sample on filterpy's ``ExtendedKalmanFilter``); its µs per step is the figure that
decides whether a long record is practical. ``adaline`` and ``hopfield`` replay the stream in a
compiled loop (up to 100 epochs). Times are wall-clock of one fit; the OLS fit is the reference.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import robotid_sim as rid
from robotid_sim.identification import IdentificationProblem
from robotid_sim.plugins import get_estimator
from robotid_sim.sim.dataset import Dataset


def multisine(robot, seconds: float, rate: float, seed: int = 0):
    """(t, q, qd, qdd): four sines per joint inside 80 % of its range, below its velocity limit."""
    rng = np.random.default_rng(seed)
    lo, hi = robot.position_limits
    lo, hi = np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)
    mid, half = (lo + hi) / 2, 0.4 * (hi - lo)
    t = np.arange(int(seconds * rate)) / rate
    w = 2 * np.pi * np.array([0.15, 0.35, 0.6, 0.9])
    amp = rng.uniform(-1, 1, (robot.n_dof, w.size))
    amp *= half[:, None] / np.abs(amp).sum(1, keepdims=True)
    amp = np.clip(amp, -robot.velocity_limit[:, None] / w / w.size, robot.velocity_limit[:, None] / w / w.size)
    phase = rng.uniform(0, 2 * np.pi, amp.shape)
    arg = w * t[:, None, None] + phase
    return t, mid + (amp * np.sin(arg)).sum(2), (amp * w * np.cos(arg)).sum(2), -(amp * w**2 * np.sin(arg)).sum(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="hyper9")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args()
    robot = rid.load_robot(args.robot)
    t, q, qd, qdd = multisine(robot, args.seconds, args.rate)
    ds = Dataset(t, q, qd, qdd, robot.inverse_dynamics(q, qd, qdd), joint_names=robot.joint_names, metadata={})
    problem = IdentificationProblem(robot.structure(), ds)
    truth = robot.base_parameters().true_values()
    size = f"{ds.n_samples} samples ({args.seconds:g} s at {args.rate:g} Hz), {problem.base.count} base parameters"
    print(f"{args.robot}: {size}")
    print(f"{'estimator':10s} {'fit [s]':>9s} {'vs ols':>8s} {'µs/sample':>10s} {'param error':>12s}")
    reference = None
    for name in ("ols", "adaline", "hopfield", "ekf"):
        get_estimator(name)().fit(IdentificationProblem(robot.structure(), ds.slice(0, 400)))  # compile, warm caches
        t0 = time.perf_counter()
        model = get_estimator(name)().fit(problem)
        elapsed = time.perf_counter() - t0
        reference = reference or elapsed
        error = np.linalg.norm(model.base_values() - truth) / np.linalg.norm(truth)
        per_sample = 1e6 * elapsed / ds.n_samples
        print(f"{name:10s} {elapsed:9.2f} {elapsed / reference:7.0f}× {per_sample:10.1f} {error:12.2e}")


if __name__ == "__main__":
    main()
