"""Idle thread pools (issue 10): CPU burnt after the work is done, with and without the quiet settings.

    python benchmarks/idle_threads.py [--repeats 5] [--idle 0.3]

Each configuration runs in a fresh process (the settings only act before NumPy and numba load their
thread pools): once with OpenBLAS's and OpenMP's defaults (``OMP_WAIT_POLICY`` and
``OPENBLAS_THREAD_TIMEOUT`` removed from the environment), once with
:data:`robotid_sim.threads.QUIET_THREAD_SETTINGS` (what ``robotid-sim`` sets). Per workload it prints
the median wall time and process CPU time of the work, and the process CPU time spent during an idle
``time.sleep`` right after it (ideally ~0: no worker spinning).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from robotid_sim.threads import QUIET_THREAD_SETTINGS

CHILD = r"""
import json, statistics, sys, time
import numpy as np
import robotid_sim as rid
from robotid_sim.identification import IdentificationProblem
from robotid_sim.sim.dataset import Dataset

repeats, idle = int(sys.argv[1]), float(sys.argv[2])
robot = rid.load_robot("hyper9")
rng = np.random.default_rng(0)
q, qd, qdd = robot.random_states(rng, 25_000)
tau = robot.inverse_dynamics(q, qd, qdd)
ds = Dataset(np.arange(25_000) * 0.005, q, qd, qdd, tau, joint_names=robot.joint_names, metadata={})
A = rng.standard_normal((20_000, 91))
small = rng.standard_normal((600, 91))

def ols():
    IdentificationProblem(robot, ds).least_squares().solve()

work = {
    "numba threaded RNEA, 25k samples": lambda: robot.rigid_body_torque(q, qd, qdd),
    "numba threaded regressor, 25k samples": lambda: robot.regressor(q, qd, qdd),
    "BLAS Gram 20000x91 (threaded)": lambda: A.T @ A,
    "200 small Gram products 600x91": lambda: [small.T @ small for _ in range(200)],
    "streamed OLS, hyper9 25k samples": ols,
}
out = {}
for label, fn in work.items():
    fn()  # compile / warm up
    walls, cpus, idles = [], [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        t1, c1 = time.perf_counter(), time.process_time()
        time.sleep(idle)
        c2 = time.process_time()
        walls.append(t1 - t0); cpus.append(c1 - c0); idles.append(c2 - c1)
    out[label] = [statistics.median(walls), statistics.median(cpus), statistics.median(idles)]
print(json.dumps(out))
"""


def run(env: dict[str, str], repeats: int, idle: float) -> dict[str, list[float]]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(repeats), str(idle)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--idle", type=float, default=0.3, help="seconds of sleep after each call")
    args = parser.parse_args()
    defaults = {k: v for k, v in os.environ.items() if k not in QUIET_THREAD_SETTINGS}
    quiet = {**defaults, **QUIET_THREAD_SETTINGS}
    results = {"defaults": run(defaults, args.repeats, args.idle), "quiet": run(quiet, args.repeats, args.idle)}
    print(f"idle CPU = process CPU time during a {args.idle * 1e3:.0f} ms sleep after the call (medians)")
    print(f"quiet settings: {' '.join(f'{k}={v}' for k, v in QUIET_THREAD_SETTINGS.items())}\n")
    print("| workload | settings | wall ms | CPU ms | idle CPU ms |\n|---|---|---|---|---|")
    for label in results["defaults"]:
        for setting, table in results.items():
            wall, cpu, idle = table[label]
            print(f"| {label} | {setting} | {wall * 1e3:.1f} | {cpu * 1e3:.1f} | {idle * 1e3:.1f} |")


if __name__ == "__main__":
    main()
