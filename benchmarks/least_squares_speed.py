"""Batched torque and least squares on hyper9 (issue 10): µs per sample, beside Pinocchio in the same run.

    python benchmarks/least_squares_speed.py [--samples 25000] [--repeats 5]

- Batched torque: ``robot.rigid_body_torque`` (the compiled Newton–Euler kernels, no regressor formed)
  on 1 thread and on all threads, ``robot.inverse_dynamics`` (with rotor inertia and friction), against
  Pinocchio's ``rnea`` called per sample from Python (``pip install pin``; skipped without it).
- OLS on N samples, regressor included: the path before issue 10 (the batched-numpy reference regressor,
  stacked, then the QR of ``weighted_least_squares``), the compiled regressor stacked then the same QR,
  and the streamed normal equations of ``IdentificationProblem.least_squares().solve()`` (what ``ols`` runs)
  on 1 thread and on all threads. The estimates are compared (largest relative difference).

Medians over repeats; threads limited with ``numba.set_num_threads`` and threadpoolctl (BLAS). Idle
OpenBLAS/OpenMP workers are made to sleep as ``robotid-sim`` does (``robotid_sim.threads``), before NumPy
loads; run with ``OMP_WAIT_POLICY=ACTIVE`` or ``OPENBLAS_THREAD_TIMEOUT=28`` in the environment to see the
defaults (spinning workers then slow the threaded figures).
"""

from __future__ import annotations

from robotid_sim.threads import quiet_thread_pools

quiet_thread_pools()  # before NumPy and numba load their thread pools, as robotid-sim does

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import robotid_sim as rid  # noqa: E402
from robotid_sim.dynamics.regressor import reference_regressor  # noqa: E402
from robotid_sim.identification import IdentificationProblem, weighted_least_squares  # noqa: E402
from robotid_sim.sim.dataset import Dataset  # noqa: E402


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up (compilation, caches)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def one_thread(fn):
    def run():
        threads = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            with threadpool_limits(limits=1, user_api="blas"):
                return fn()
        finally:
            numba.set_num_threads(threads)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=25_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    N, R = args.samples, args.repeats
    robot = rid.load_robot("hyper9")
    rng = np.random.default_rng(0)
    q, qd, qdd = robot.random_states(rng, N)
    tau = robot.inverse_dynamics(q, qd, qdd)
    tau = tau + 0.02 * np.std(tau, axis=0) * rng.standard_normal(tau.shape)
    ds = Dataset(np.arange(N) * 0.005, q, qd, qdd, tau, joint_names=robot.joint_names, metadata={})
    us = 1e6 / N
    rows: list[tuple[str, float]] = []

    # ------------------------------------------------------------------ batched torque
    rows.append(
        (
            "torque: rigid_body_torque, 1 thread",
            median_time(one_thread(lambda: robot.rigid_body_torque(q, qd, qdd)), R) * us,
        )
    )
    rows.append(
        ("torque: rigid_body_torque, all threads", median_time(lambda: robot.rigid_body_torque(q, qd, qdd), R) * us)
    )
    rows.append(
        (
            "torque: inverse_dynamics (rotor, friction), all threads",
            median_time(lambda: robot.inverse_dynamics(q, qd, qdd), R) * us,
        )
    )
    try:
        import pinocchio as pin
    except ImportError:
        pin = None
    pin_rnea = None
    if pin is not None:
        model = pin.buildModelFromUrdf(str(robot.urdf_path))
        model.gravity.linear = robot.gravity
        data = model.createData()
        n_ref = min(N, 5000)

        def run_pin():
            for k in range(n_ref):
                pin.rnea(model, data, q[k], qd[k], qdd[k])

        pin_rnea = median_time(run_pin, 3) / n_ref * 1e6
        check = np.array([pin.rnea(model, data, q[k], qd[k], qdd[k]) for k in range(100)])
        assert np.allclose(check, robot.rigid_body_torque(q[:100], qd[:100], qdd[:100]), atol=1e-9)
        rows.append(("torque: Pinocchio rnea per sample from Python", pin_rnea))

    # ------------------------------------------------------------------ OLS, regressor included
    base = robot.base_parameters()
    y = tau.reshape(-1)

    def before():
        W = reference_regressor(robot, q, qd, qdd, columns=base.independent).reshape(-1, base.count)
        return weighted_least_squares(W, y).beta

    def compiled_qr():
        return weighted_least_squares(base.regressor(q, qd, qdd).reshape(-1, base.count), y).beta

    def streamed():
        return IdentificationProblem(robot, ds).least_squares().solve().beta

    t_before = median_time(before, R)
    rows.append(("OLS: numpy regressor stacked + QR (before issue 10)", t_before * us))
    rows.append(("OLS: compiled regressor stacked + QR", median_time(compiled_qr, R) * us))
    t_one = median_time(one_thread(streamed), R)
    rows.append(("OLS: streamed normal equations, 1 thread", t_one * us))
    t_all = median_time(streamed, R)
    rows.append(("OLS: streamed normal equations, all threads", t_all * us))
    reference, fast = before(), streamed()
    difference = float(np.max(np.abs(fast - reference)) / np.max(np.abs(reference)))

    print(f"hyper9, N = {N} samples ({N * robot.n_dof} rows x {base.count} base parameters), medians of {R}")
    print(f"numba threads: {numba.get_num_threads()} ({numba.threading_layer()})\n")
    print("| what | µs / sample |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value:.2f} |")
    print()
    if pin_rnea is not None:
        one, every = pin_rnea / rows[0][1], pin_rnea / rows[1][1]
        print(f"batched torque vs Pinocchio rnea: {one:.1f}x (1 thread), {every:.1f}x (all threads)")
    print(f"OLS streamed vs before issue 10: {t_before / t_one:.1f}x (1 thread), {t_before / t_all:.1f}x (all threads)")
    print(f"largest relative difference of the estimates: {difference:.1e}")


if __name__ == "__main__":
    main()
