"""Cost of the online estimators (issues 12 and 31) on a hyper9 record at 1 kHz, beside OLS in the same run.

    python benchmarks/online_speed.py [--robot hyper9] [--seconds 60] [--rate 1000] [--filter-seconds 10]
                                      [--estimators ols,adaline,hopfield,ekf,ukf,cdkf,sr_ukf,sr_cdkf,sr_ekf]
                                      [--repeats 3]

The data is exact (a multi-sine inside the joint limits, the torque of the true model), so it
also reports how far each estimate is from the truth. Each estimator's figure is its cost per
sample, which decides whether it keeps up with the robot: at 1 kHz it must stay under 1 ms.

- ``ekf`` runs once over the whole record (one pass, the compiled step; ``seconds_per_step`` is the
  filter's own loop, the fit's total includes the noise estimation and the excitation check);
- ``ukf``, ``cdkf``, ``sr_ukf``, ``sr_cdkf``, ``sr_ekf`` run over the first ``--filter-seconds`` of it (their
  steps cost milliseconds on 118 states). Not shorter than about 10 s: from λ0 = 0.1 the estimate is no physical
  model for the first ~2.5 s on hyper9, and there the EKF-type steps take the recorded acceleration without the
  model's Jacobian (the SR-EKF 1.4 ms a sample over the first 2 s against 2.1 ms over 10 s);
- ``adaline`` and ``hopfield`` replay the stream (up to 100 epochs): their per-sample figure is the fit time
  over samples × epochs run, the cost of one update of the delta rule, beside the fit time over samples;
- ``update µs`` (the Kalman filters): the thread CPU time of one ``update(sample)`` of the estimator's streaming
  API (``stream(problem)``) over the record it was fitted on, each sample timed alone, the median and the mean over
  the samples of ``--repeats`` streams: what a controller's thread pays per sample without ``fit``'s bookkeeping
  (its recorded history and covariance eigenvalue checks).

A filter that diverges from the default start (λ0 = 0.1) in its warm-up fit (on its record: numba compiles or
loads its cache) says where, and its cost is measured from λ0 = 1.1 × the truth (CAD-like values) instead. Then
``--repeats`` rounds, each a timed fit and a stream of every estimator in turn (a slow stretch of this shared
machine, whose speed drifts by 20–50 % over minutes, falls on one round of each, not on all of one estimator's):
the fit figures are the medians over the rounds, wall-clock; ``cpu µs/step`` is the thread CPU time per sample of
the filter's own loop (``cpu_seconds_per_step``; of the whole fit for the others): the same work, less inflated
by other processes on a loaded machine. The load average and a reference BLAS product's time (the machine's
speed at the time) are printed last.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

import robotid_sim as rid
from robotid_sim.errors import IdentificationError
from robotid_sim.identification import IdentificationProblem
from robotid_sim.plugins import get_estimator
from robotid_sim.sim.dataset import Dataset

FILTERS = ("ukf", "cdkf", "sr_ukf", "sr_cdkf", "sr_ekf")


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


def reference_product_us(d: int = 118, m: int = 27, reps: int = 2000) -> float:
    """The machine's speed at the time of the run: thread CPU µs of one (d, m) × (m, d) product (the shape of the
    EKF's update on hyper9) on one BLAS thread, the best of five batches. The filters' figures of two runs compare
    in units of it (the shared machine's speed drifts by ±20 % over an hour)."""
    rng = np.random.default_rng(0)
    a, b = rng.random((d, m)), rng.random((m, d))
    best = np.inf
    with threadpool_limits(1):
        for _ in range(5):
            t0 = time.thread_time()
            for _ in range(reps):
                a @ b
            best = min(best, (time.thread_time() - t0) / reps)
    return 1e6 * best


def stream_costs(name: str, options: dict, problem) -> np.ndarray | None:
    """(N,) the thread CPU seconds of each ``update(sample)`` of the estimator's streaming API over ``problem``'s
    samples, each timed alone: what a controller's thread pays per sample, without ``fit``'s bookkeeping (the
    recorded history, the covariance's eigenvalue checks). None for the estimators without one."""
    if name not in ("ekf", *FILTERS):
        return None
    ds = problem.dataset
    costs = np.empty(ds.n_samples)
    stream = get_estimator(name)(**options).stream(problem)
    for k in range(ds.n_samples):
        t0 = time.thread_time()
        stream.update(ds.t[k], ds.q[k], ds.qd[k], ds.qdd[k], ds.tau[k])
        costs[k] = time.thread_time() - t0
    return costs


def timed_fit(name: str, options: dict, on) -> tuple:
    """(the model, wall-clock seconds, seconds per step, CPU seconds per step) of one fit on ``on``. Raises
    IdentificationError where the fit fails."""
    samples = on.dataset.n_samples
    t0, cpu0 = time.perf_counter(), time.thread_time()
    model = get_estimator(name)(**options).fit(on)
    elapsed, cpu = time.perf_counter() - t0, time.thread_time() - cpu0
    step = model.diagnostics.get("seconds_per_step")
    epochs = model.diagnostics.get("epochs")
    per_step = elapsed / (samples * epochs) if epochs else step if step else elapsed / samples
    return model, elapsed, per_step, model.diagnostics.get("cpu_seconds_per_step", cpu / samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="hyper9")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--filter-seconds", type=float, default=10.0, help="record length of the sigma-point filters")
    parser.add_argument("--estimators", default=",".join(("ols", "adaline", "hopfield", "ekf", *FILTERS)))
    parser.add_argument("--repeats", type=int, default=3, help="rounds of timed fits and streams, median")
    args = parser.parse_args()
    robot = rid.load_robot(args.robot)
    t, q, qd, qdd = multisine(robot, args.seconds, args.rate)
    ds = Dataset(t, q, qd, qdd, robot.inverse_dynamics(q, qd, qdd), joint_names=robot.joint_names, metadata={})
    structure = robot.structure()
    problem = IdentificationProblem(structure, ds)
    short = IdentificationProblem(structure, ds.slice(0, int(args.filter_seconds * args.rate)))
    truth = robot.base_parameters().true_values()
    size = f"{ds.n_samples} samples ({args.seconds:g} s at {args.rate:g} Hz), {problem.base.count} base parameters"
    print(f"{args.robot}: {size}; the filters {short.dataset.n_samples} samples")
    with threadpool_limits(1):  # one core: what a controller's thread has
        runs = []  # (label, name, options, record): the warm-up fit (numba compiles or loads its cache) decides
        for name in args.estimators.split(","):
            on = short if name in FILTERS else problem
            compiled = {"engine": "compiled"} if name in ("ekf", *FILTERS) else {}  # the step compiled however short
            starts = ((name, {}), (f"{name} (λ0 = 1.1·truth)", {"initial_parameters": list(1.1 * truth)}))
            for label, options in ((label, {**compiled, **options}) for label, options in starts):
                try:
                    get_estimator(name)(**options).fit(on)
                except IdentificationError as exc:  # a filter that diverged: its cost from a start near the truth
                    print(f"{label}: {exc}")
                    continue
                runs.append((label, name, options, on))
                break
        fits, costs = {run[0]: [] for run in runs}, {run[0]: [] for run in runs}
        for _ in range(args.repeats):  # rounds over the estimators: a slow stretch falls on one round of each
            for label, name, options, on in runs:
                fits[label].append(timed_fit(name, options, on))
                costs[label].append(stream_costs(name, options, on))
    header = f"{'estimator':10s} {'fit [s]':>9s} {'samples':>8s} {'µs/sample':>10s} {'µs/step':>9s}"
    print(f"{header} {'cpu µs/step':>12s} {'param error':>12s} {'update µs median / mean':>24s}")
    for label, _, _, on in runs:
        samples = on.dataset.n_samples
        elapsed, per_step, cpu_step = np.median([fit[1:] for fit in fits[label]], axis=0)
        error = np.linalg.norm(fits[label][-1][0].base_values() - truth) / np.linalg.norm(truth)
        update = ""
        if costs[label][0] is not None:
            every = np.concatenate(costs[label])
            update = f"{1e6 * np.median(every):.0f} / {1e6 * every.mean():.0f}"
        row = f"{label:10s} {elapsed:9.2f} {samples:8d} {1e6 * elapsed / samples:10.1f} {1e6 * per_step:9.1f}"
        print(f"{row} {1e6 * cpu_step:12.1f} {error:12.2e} {update:>24s}")
    print("load average (1, 5, 15 min):", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"reference (118, 27) x (27, 118) product: {reference_product_us():.1f} µs (the machine's speed now)")


if __name__ == "__main__":
    main()
