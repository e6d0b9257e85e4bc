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
    assert np.all(exact.rms < 1e-8) and np.all(exact.rsd < 1e-8) and np.all(exact.agreement_index > 1 - 1e-12)
    wrong = trajectory_error(model.with_values(model.values * 1.3).forward_dynamics, reference, *args)
    assert np.all(wrong.rms > 1e-4) and np.all(wrong.rsd > 1e-6) and np.all(wrong.agreement_index < 1.0)


def test_a_diverging_model_gives_an_infinite_trajectory_error():
    q0, qd0, tau = np.zeros(2), np.zeros(2), np.zeros((50, 2))
    reference = np.zeros((50, 2))

    def exploding(q, qd, tau):  # an unstable model: qdd grows with q without bound
        return 1e6 * (q + 1.0) ** 3

    error = trajectory_error(exploding, reference, q0, qd0, tau, 0.01)
    assert np.all(np.isinf(error.rms)) and np.all(np.isinf(error.rsd))
    assert np.array_equal(error.agreement_index, [0.0, 0.0])
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
    assert np.isinf(error.rms).all() and np.isinf(error.rsd).all() and error.agreement_index.tolist() == [0.0]


def _free_fall(q, qd, tau):  # qdd = tau - 1: a known, smooth motion
    return tau - 1.0


def test_trajectory_error_of_a_perfect_model_is_rms_0_rsd_0_ai_1():
    """Seed 004 Table 5: a model that moves exactly as the reference has RMS 0, RSD 0, AI 1 on every joint."""
    q0, qd0 = np.array([0.5, -1.0]), np.array([1.0, 0.0])
    tau = np.column_stack([np.sin(np.linspace(0, 3, 80)), np.cos(np.linspace(0, 3, 80))])
    reference, _ = rollout(_free_fall, q0, qd0, tau, 0.01)
    error = trajectory_error(_free_fall, reference, q0, qd0, tau, 0.01)
    assert error.rms.tolist() == [0.0, 0.0]
    assert error.rsd.tolist() == [0.0, 0.0]
    assert error.agreement_index.tolist() == [1.0, 1.0]


def test_trajectory_error_takes_the_reference_as_the_observed_signal():
    """RSD divides by the reference's energy (seed 004 Eq. 46), not the model's: o is the true motion."""
    from robotid_sim.identification import metrics as M

    q0, qd0 = np.array([0.5, -1.0]), np.array([1.0, 0.0])
    tau = np.column_stack([np.sin(np.linspace(0, 3, 80)), np.cos(np.linspace(0, 3, 80))])
    reference, _ = rollout(_free_fall, q0, qd0, tau, 0.01)

    def heavier(q, qd, tau):
        return 0.8 * (tau - 1.0)

    moved, _ = rollout(heavier, q0, qd0, tau, 0.01)
    error = trajectory_error(heavier, reference, q0, qd0, tau, 0.01)
    assert np.allclose(error.rms, M.rms_index(reference, moved))
    assert np.allclose(error.rsd, M.rsd(reference, moved))
    assert not np.allclose(error.rsd, M.rsd(moved, reference))
    assert np.allclose(error.agreement_index, M.agreement_index(reference, moved))
    assert np.all((error.agreement_index > 0) & (error.agreement_index < 1))
