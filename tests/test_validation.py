"""Trajectory-level validation by forward simulation (issue 4, SPEC §9)."""

from __future__ import annotations

import numpy as np

import robotid_sim as rid
from robotid_sim.identification.validation import rollout, trajectory_error


def test_rollout_of_the_true_model_follows_the_simulator(robots):
    robot = robots["prrrp"]
    ds = rid.simulate(robot, "default", duration=1.0, rate_hz=1000)
    q, _ = rollout(robot.forward_dynamics, ds.truth.q[0], ds.truth.qd[0], ds.truth.tau[:300], ds.dt, substeps=1)
    # same semi-implicit Euler as Bullet at the same step: the trajectories agree closely
    assert np.max(np.abs(q - ds.truth.q[:300])) < 1e-3


def test_trajectory_error_is_zero_for_the_true_model_and_grows_with_parameter_error(robots):
    robot = robots["planar3r"]
    ds = rid.simulate(robot, {"type": "fourier", "harmonics": 4, "base_frequency": 0.2, "seed": 1})
    model = rid.identify(ds, robot, estimator="ols")
    # start in motion: at rest, exact Coulomb friction makes sign(0) vs sign(1e-15) chatter
    k0 = 300
    args = (ds.truth.q[k0], ds.truth.qd[k0], ds.truth.tau[k0 : k0 + 100], ds.dt)
    reference, _ = rollout(robot.forward_dynamics, *args)
    exact = trajectory_error(model.forward_dynamics, reference, *args)
    assert np.all(exact < 1e-8)
    wrong = model.with_values(model.values * 1.3)
    assert np.all(trajectory_error(wrong.forward_dynamics, reference, *args) > 1e-4)


def test_a_diverging_model_gives_an_infinite_trajectory_error():
    q0, qd0, tau = np.zeros(2), np.zeros(2), np.zeros((50, 2))
    reference = np.zeros((50, 2))

    def exploding(q, qd, tau):  # an unstable model: qdd grows with q without bound
        return 1e6 * (q + 1.0) ** 3

    error = trajectory_error(exploding, reference, q0, qd0, tau, 0.01)
    assert np.all(np.isinf(error))
    q, _ = rollout(exploding, q0, qd0, tau, 0.01)
    assert np.isnan(q[-1]).all() and np.isfinite(q[0]).all()


def test_a_huge_but_finite_divergence_is_inf_without_an_overflow_warning():
    """hyper9_seed001 printed 'RuntimeWarning: overflow encountered in square': positions near 1e200 are
    finite, their squared error is not."""
    import warnings

    reference = np.zeros((3, 1))

    def runaway(q, qd, tau):
        return np.full_like(q, 1e205)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        error = trajectory_error(runaway, reference, np.zeros(1), np.zeros(1), np.zeros((3, 1)), 0.01)
    assert np.isinf(error).all()
