"""Simulator speed (issue 3): wall time and real-time factor for 125 s of hyper9 at 1 kHz
(seed 001's experiment length), against raw PyBullet stepping of the same arm in the same run.

    python benchmarks/simulator_speed.py [--seconds 125] [--repeats 3]

Raw PyBullet = per step: setJointMotorControlArray(TORQUE_CONTROL) + stepSimulation + reading
the joint states (the least any torque-controlled loop does). robotid_sim = the full tracking
loop of ``PyBulletSimulator.track`` (state read, PD + computed torque through
calculateInverseDynamics, step, recording at 200 Hz, motor torque with rotor inertia and
friction). Medians over repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pybullet as p

import robotid_sim as rid
from robotid_sim.sim.pybullet_sim import PyBulletSimulator


def raw_pybullet(robot, steps: int) -> float:
    cid = p.connect(p.DIRECT)
    p.setGravity(*robot.gravity, physicsClientId=cid)
    p.setTimeStep(1e-3, physicsClientId=cid)
    body = p.loadURDF(str(robot.urdf_path), useFixedBase=True, flags=p.URDF_USE_INERTIA_FROM_FILE, physicsClientId=cid)
    joints = list(range(p.getNumJoints(body, physicsClientId=cid)))
    p.setJointMotorControlArray(body, joints, p.VELOCITY_CONTROL, forces=[0.0] * len(joints), physicsClientId=cid)
    tau = [0.0] * len(joints)
    t0 = time.perf_counter()
    for _ in range(steps):
        p.setJointMotorControlArray(body, joints, p.TORQUE_CONTROL, forces=tau, physicsClientId=cid)
        p.stepSimulation(physicsClientId=cid)
        p.getJointStates(body, joints, physicsClientId=cid)
    elapsed = time.perf_counter() - t0
    p.disconnect(cid)
    return elapsed


def ours(robot, excitation, seconds: float) -> float:
    steps = int(round(seconds / 1e-3))
    t = np.arange(steps) * 1e-3
    q, qd, qdd = excitation.evaluate(t)
    with PyBulletSimulator(robot) as sim:
        t0 = time.perf_counter()
        sim.track(q, qd, qdd, decimation=5)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=125.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    robot = rid.load_robot("hyper9")
    from robotid_sim.sim.simulate import resolve_excitation

    excitation = resolve_excitation(robot, "default")
    steps = int(round(args.seconds / 1e-3))
    raw, full = [], []
    for _ in range(args.repeats):
        raw.append(raw_pybullet(robot, steps))
        full.append(ours(robot, excitation, args.seconds))
    raw_s, full_s = statistics.median(raw), statistics.median(full)
    print(f"hyper9, {args.seconds:g} s simulated at 1 kHz ({steps} steps), medians of {args.repeats}:")
    print(
        f"  raw PyBullet stepping : {raw_s:7.2f} s wall, real-time factor {args.seconds / raw_s:6.1f}x, "
        f"{raw_s / steps * 1e6:6.1f} µs/step"
    )
    print(
        f"  robotid_sim tracking  : {full_s:7.2f} s wall, real-time factor {args.seconds / full_s:6.1f}x, "
        f"{full_s / steps * 1e6:6.1f} µs/step"
    )
    print(f"  speed relative to raw PyBullet: {raw_s / full_s:.2f} (goal >= 0.5)")


if __name__ == "__main__":
    main()
