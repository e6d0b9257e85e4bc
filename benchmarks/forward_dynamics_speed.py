"""Forward-dynamics speed of an identified base-parameter model on hyper9: µs per state.

    python benchmarks/forward_dynamics_speed.py [--robot hyper9] [--repeats 7]

Baseline (in the same process): the generic construction for any model linear in qdd,
``forward_dynamics_from_inverse(inverse, q, qd, tau)`` with
``inverse = model.predict_torque`` of a ``BaseParameterModel`` holding the true base values
(n + 1 regressor evaluations folded into one batch, then ``np.linalg.solve``).

New: ``model.forward_dynamics(q, qd, tau)`` of the same identified model: the equivalent
standard parameter vector ``theta_equiv`` (the base values at ``base.independent``, zeros
elsewhere: K is the identity on those columns, so it has the same base values) on the model's
cached ``equivalent_robot`` (CRBA + RNEA + LU per sample, compiled numba kernels of
:mod:`robotid_sim.dynamics.crba`). Also timed with ``robot.with_parameters(theta_equiv)``
inside the timed call (what it would cost without the cache).

Second reference: PyBullet's ``calculateMassMatrix`` per state (M only, no solve).

Both paths are checked equal (torques and accelerations, relative 1e-10) before timing. Medians
over repeats; the numba kernels are compiled (or loaded from the disk cache) before timing.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import robotid_sim as rid
from robotid_sim.dynamics import crba
from robotid_sim.dynamics.forward import forward_dynamics_from_inverse
from robotid_sim.identification import BaseParameterModel


def timed(fn, inner: int) -> float:
    """Time of one call (s), averaged over ``inner`` calls."""
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def measure(N, q, qd, tau, inverse, robot, model, theta_equiv, pybullet, repeats):
    """Median per-batch times (s) of: baseline, new (model built once), new with the copy, PyBullet M.

    The four are interleaved in every repeat, so that load from other processes hits them alike.
    """
    p, body, cid = pybullet
    ql = q.tolist()

    def run_pb():
        for k in range(N):
            p.calculateMassMatrix(body, ql[k], physicsClientId=cid)

    runs = [
        (lambda: forward_dynamics_from_inverse(inverse, q, qd, tau), 20 if N == 1 else 1),
        (lambda: model.forward_dynamics(q, qd, tau), 2000 if N == 1 else 20),
        (lambda: robot.with_parameters(theta_equiv).forward_dynamics(q, qd, tau), 2000 if N == 1 else 20),
        (run_pb, 200 if N == 1 else 1),
    ]
    times = [[timed(fn, inner) for fn, inner in runs] for _ in range(repeats)]
    return [statistics.median(column) for column in zip(*times, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="hyper9")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    robot = rid.load_robot(args.robot)
    base = robot.base_parameters()
    beta = base.true_values()
    theta_equiv = np.zeros(robot.n_parameters)
    theta_equiv[base.independent] = beta
    identified = BaseParameterModel(robot.structure(), base.independent, beta)
    inverse = identified.predict_torque

    rng = np.random.default_rng(0)
    q, qd, qdd = robot.random_states(rng, 1000)
    tau = robot.inverse_dynamics(q, qd, qdd)

    # equality: same torques from theta_equiv, same accelerations from both paths
    tau_base = inverse(q, qd, qdd)
    tau_equiv = robot.regressor(q, qd, qdd) @ theta_equiv
    err_tau = np.max(np.abs(tau_equiv - tau_base)) / np.max(np.abs(tau_base))
    qdd_old = forward_dynamics_from_inverse(inverse, q, qd, tau)
    qdd_new = identified.forward_dynamics(q, qd, tau)
    err_qdd = np.max(np.abs(qdd_new - qdd_old)) / np.max(np.abs(qdd_old))
    print(f"{robot.name} ({robot.n_dof} joints), {base.count} base parameters")
    print(f"max relative difference: torque (theta_equiv vs base) {err_tau:.1e}, qdd (new vs old) {err_qdd:.1e}")
    if not (err_tau < 1e-10 and err_qdd < 1e-10):
        raise SystemExit("the two paths disagree beyond 1e-10")

    import pybullet as p

    cid = p.connect(p.DIRECT)
    body = p.loadURDF(str(robot.urdf_path), useFixedBase=True, flags=p.URDF_USE_INERTIA_FROM_FILE, physicsClientId=cid)

    print(
        f"{'N':>6} {'baseline µs/state':>18} {'new µs/state':>13} {'ratio':>7} {'new+copy µs/state':>18} "
        f"{'ratio':>7} {'pybullet M µs/state':>20}"
    )
    for N in (1, 1000):
        t_old, t_new, t_copy, t_pb = measure(
            N, q[:N], qd[:N], tau[:N], inverse, robot, identified, theta_equiv, (p, body, cid), args.repeats
        )
        us = 1e6 / N
        print(
            f"{N:>6} {t_old * us:>18.2f} {t_new * us:>13.2f} {t_old / t_new:>6.0f}x {t_copy * us:>18.2f} "
            f"{t_old / t_copy:>6.0f}x {t_pb * us:>20.2f}"
        )
    p.disconnect(cid)

    # where the N = 1 time goes, and the threaded kernels at large N
    model = identified.equivalent_robot
    chain = crba.pack_chain(model.joints)
    inertials, rotor = model.inertials, model.rotor_inertia
    friction = model.friction.torque(qd[:1])
    t_kernel = statistics.median(
        timed(
            lambda: crba.forward_dynamics(chain, inertials, robot.gravity, q[:1], qd[:1], tau[:1] - friction, rotor),
            2000,
        )
        for _ in range(args.repeats)
    )
    t_copy = statistics.median(timed(lambda: robot.with_parameters(theta_equiv), 200) for _ in range(args.repeats))
    q4, qd4, qdd4 = robot.random_states(rng, 4096)
    tau4 = robot.inverse_dynamics(q4, qd4, qdd4)
    t_big = statistics.median(timed(lambda: identified.forward_dynamics(q4, qd4, tau4), 5) for _ in range(args.repeats))
    print(
        f"N = 1: crba.forward_dynamics on a packed chain (no validation, friction precomputed) {t_kernel * 1e6:.2f} µs"
    )
    print(f"robot.with_parameters(theta_equiv) alone: {t_copy * 1e6:.1f} µs")
    print(f"N = 4096 (threaded kernels, >= crba.PARALLEL_MIN_SAMPLES): {t_big / 4096 * 1e6:.2f} µs/state")


if __name__ == "__main__":
    main()
