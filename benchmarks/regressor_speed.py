"""Regressor speed on hyper9 (issue 2): µs per sample for N = 25,000 samples.

    python benchmarks/regressor_speed.py [--samples 25000] [--repeats 7] [--no-compile-time]

Measured, interleaved (each repeat runs every case once), medians over the repeats, every output
a fresh array:

- ``Robot.regressor`` (compiled kernels) for the full regressor (9 x 126) on 1 thread and on all
  of numba's threads, and the same for the base regressor (91 columns);
- the batched numpy reference (:func:`robotid_sim.dynamics.regressor.reference_regressor`);
- Pinocchio's ``computeJointTorqueRegressor`` called per sample from Python (if ``pinocchio``
  imports; else PyBullet's ``calculateInverseDynamics`` per sample, a torque only, not a
  regressor), on the first 5,000 samples;
- the memory floor: writing a fresh (N, 9, 126) float64 array (``np.empty`` then ``fill``).

Then, unless ``--no-compile-time``, the first-call time of the serial and threaded kernels in a
fresh process with an empty numba cache (``NUMBA_CACHE_DIR`` pointed at a new temporary
directory), and again in a second process that loads them from that cache.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numba
import numpy as np

import robotid_sim as rid
from robotid_sim.dynamics.regressor import reference_regressor

_FIRST_CALL = """
import time
import numpy as np
import robotid_sim as rid
robot = rid.load_robot("hyper9")
q = np.random.default_rng(0).uniform(-1, 1, (4096, robot.n_dof))
t0 = time.perf_counter()
robot.regressor(q[:1], q[:1], q[:1])
t1 = time.perf_counter()
robot.regressor(q, q, q)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def first_call_times(cache_dir: str) -> tuple[float, float]:
    """Seconds for the first serial call (N = 1; numba import included) and the first threaded call
    (N = 4096) in a fresh process whose numba cache is ``cache_dir``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache_dir}
    out = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, check=True, capture_output=True, text=True)
    serial, threaded = map(float, out.stdout.split())
    return serial, threaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=25_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-compile-time", action="store_true", help="skip the fresh-cache compile measurement")
    args = parser.parse_args()
    robot = rid.load_robot("hyper9")
    N = args.samples
    q, qd, qdd = robot.random_states(np.random.default_rng(0), N)
    base = robot.base_parameters()
    all_threads = numba.config.NUMBA_NUM_THREADS
    shape = (N, robot.n_dof, robot.n_parameters)

    def on_threads(k, fn):
        def run():
            numba.set_num_threads(k)
            try:
                fn()
            finally:
                numba.set_num_threads(all_threads)

        return run

    def floor():
        np.empty(shape).fill(1.0)

    cases = {
        "full, 1 thread": on_threads(1, lambda: robot.regressor(q, qd, qdd)),
        f"full, {all_threads} threads": on_threads(all_threads, lambda: robot.regressor(q, qd, qdd)),
        "base, 1 thread": on_threads(1, lambda: base.regressor(q, qd, qdd)),
        f"base, {all_threads} threads": on_threads(all_threads, lambda: base.regressor(q, qd, qdd)),
        "numpy reference (full)": lambda: reference_regressor(robot, q, qd, qdd),
        "memory floor (fresh full-size array)": floor,
    }

    n_ref = min(N, 5000)
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    if pin is not None:
        model = pin.buildModelFromUrdf(str(robot.urdf_path))
        model.gravity.linear = np.asarray(robot.gravity, float)
        data = model.createData()
        reference = "pinocchio computeJointTorqueRegressor, Python loop"

        def run_reference():
            for k in range(n_ref):
                pin.computeJointTorqueRegressor(model, data, q[k], qd[k], qdd[k])

    else:
        import pybullet as p

        cid = p.connect(p.DIRECT)
        body = p.loadURDF(
            str(robot.urdf_path), useFixedBase=True, flags=p.URDF_USE_INERTIA_FROM_FILE, physicsClientId=cid
        )
        ql, qdl, qddl = q.tolist(), qd.tolist(), qdd.tolist()
        reference = "pybullet calculateInverseDynamics (torque only), Python loop"

        def run_reference():
            for k in range(n_ref):
                p.calculateInverseDynamics(body, ql[k], qdl[k], qddl[k], physicsClientId=cid)

    per_sample = {name: N for name in cases}
    cases[reference] = run_reference
    per_sample[reference] = n_ref

    for fn in cases.values():  # warm up: kernels loaded or compiled, threads started
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeats):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    us = {name: statistics.median(t) / per_sample[name] * 1e6 for name, t in times.items()}

    print(
        f"hyper9, N = {N} ({robot.n_dof} joints, {robot.n_parameters} columns, base {base.count}), "
        f"fresh outputs, median of {args.repeats} interleaved repeats; {reference} on {n_ref} samples"
    )
    width = max(map(len, us)) + 2
    print(f"{'':{width}} {'µs/sample':>10} {'ref / this':>11}")
    for name, value in us.items():
        ratio = us[reference] / value
        print(f"{name:{width}} {value:10.2f} {ratio:10.2f}x")

    if not args.no_compile_time:
        with tempfile.TemporaryDirectory() as cache:
            fresh = first_call_times(cache)
            cached = first_call_times(cache)
        print("first call in a new process (serial N = 1 incl. numba import / threaded N = 4096):")
        print(f"  empty numba cache (compile): {fresh[0]:6.2f} s / {fresh[1]:6.2f} s")
        print(f"  cached (load):               {cached[0]:6.2f} s / {cached[1]:6.2f} s")


if __name__ == "__main__":
    main()
