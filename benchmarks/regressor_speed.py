"""Regressor speed on hyper9 (issue 2): µs per sample for N = 25,000 samples.

    python benchmarks/regressor_speed.py [--samples 25000] [--repeats 7]

Reference: Pinocchio's ``computeJointTorqueRegressor`` called per sample from Python (if the
``pin`` package is installed, measured side by side and the ratio printed), else PyBullet's
``calculateInverseDynamics`` per sample (a torque only, not a regressor) as the in-process
reference. Medians over repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import robotid_sim as rid


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=25_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    robot = rid.load_robot("hyper9")
    rng = np.random.default_rng(0)
    q, qd, qdd = robot.random_states(rng, args.samples)
    N = args.samples

    ours = median_time(lambda: robot.regressor(q, qd, qdd), args.repeats)
    base = robot.base_parameters()
    ours_base = median_time(lambda: base.regressor(q, qd, qdd), args.repeats)
    print(
        f"hyper9, N = {N}: robotid_sim regressor      {ours / N * 1e6:7.2f} µs/sample "
        f"({ours * 1e3:.0f} ms per batch, output {N}x{robot.n_dof}x{robot.n_parameters})"
    )
    print(f"hyper9, N = {N}: robotid_sim base regressor {ours_base / N * 1e6:7.2f} µs/sample")

    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    if pin is not None:
        model = pin.buildModelFromUrdf(str(robot.urdf_path))
        model.gravity.linear = robot.gravity
        data = model.createData()
        n_ref = min(N, 5000)

        def run_pin():
            for k in range(n_ref):
                pin.computeJointTorqueRegressor(model, data, q[k], qd[k], qdd[k])

        t_pin = median_time(run_pin, 3) / n_ref
        print(f"pinocchio computeJointTorqueRegressor per sample: {t_pin * 1e6:7.2f} µs/sample")
        print(f"ratio pinocchio / robotid_sim: {t_pin / (ours / N):.2f}x")
    else:
        import pybullet as p

        cid = p.connect(p.DIRECT)
        body = p.loadURDF(
            str(robot.urdf_path), useFixedBase=True, flags=p.URDF_USE_INERTIA_FROM_FILE, physicsClientId=cid
        )
        n_ref = min(N, 5000)
        ql, qdl, qddl = q.tolist(), qd.tolist(), qdd.tolist()

        def run_pb():
            for k in range(n_ref):
                p.calculateInverseDynamics(body, ql[k], qdl[k], qddl[k], physicsClientId=cid)

        t_pb = median_time(run_pb, 3) / n_ref
        print("pinocchio not installed (pip install pin to measure the reference side by side)")
        print(f"pybullet calculateInverseDynamics per sample (torque only): {t_pb * 1e6:7.2f} µs/sample")
        print(f"ratio pybullet-torque / robotid_sim-regressor: {t_pb / (ours / N):.2f}x")


if __name__ == "__main__":
    main()
