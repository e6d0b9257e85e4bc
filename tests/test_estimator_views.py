"""Carried over to issue 27: an estimator's per-joint view of the rows in use.

With a velocity dead-band each joint keeps its own samples, so the stacked rows of ``base_regressor()`` are not N
whole samples and a third-party estimator's ``reshape(-1, n)`` of them mixes joints. ``problem.joint_rows()``
gives each joint's samples, regressor rows and torque; a toy estimator written on it (Gautier's weighted least
squares, seed 001 Eq. 26) agrees with the built-in streamed solver.
"""

from __future__ import annotations

import numpy as np
import pytest

from robotid_sim.identification import BaseParameterModel, Estimator, IdentificationProblem, JointRows
from robotid_sim.sim.dataset import Dataset

DEADBAND = [0.3, 0.5, 0.2]


@pytest.fixture(scope="module")
def problem(robots) -> IdentificationProblem:
    """10 s of two sines per joint on planar3r at 200 Hz, torque with white noise of 0.05 N·m; a dead-band that
    leaves out a different number of rows for each joint."""
    robot = robots["planar3r"]
    t = np.arange(2000) * 0.005
    w = np.array([1.0, 1.7, 2.3])
    q = np.sin(np.outer(t, w)) + 0.3 * np.sin(np.outer(t, 2.9 * w))
    qd = np.cos(np.outer(t, w)) * w + 0.3 * 2.9 * w * np.cos(np.outer(t, 2.9 * w))
    qdd = -np.sin(np.outer(t, w)) * w**2 - 0.3 * (2.9 * w) ** 2 * np.sin(np.outer(t, 2.9 * w))
    tau = robot.inverse_dynamics(q, qd, qdd) + np.random.default_rng(0).normal(0.0, 0.05, q.shape)
    return IdentificationProblem(robot, Dataset(t, q, qd, qdd, tau), velocity_deadband=DEADBAND)


class JointWeightedToy(Estimator):
    """A third party's Gautier WLS written on the per-joint view: OLS, σ_j² per joint, then WLS."""

    name = "toy_joint_wls"

    def _fit(self, problem):
        views = problem.joint_rows()
        W = np.vstack([v.regressor for v in views])
        y = np.concatenate([v.torque for v in views])
        beta = np.linalg.lstsq(W, y, rcond=None)[0]
        b = W.shape[1]
        variance = np.array([np.sum((v.torque - v.regressor @ beta) ** 2) / (len(v.torque) - b) for v in views])
        scale = np.concatenate([np.full(len(v.torque), 1.0 / np.sqrt(s)) for v, s in zip(views, variance, strict=True)])
        beta = np.linalg.lstsq(W * scale[:, None], y * scale, rcond=None)[0]
        return BaseParameterModel.from_problem(problem, beta, diagnostics={"variance": variance.tolist()})


def test_joint_rows_are_each_joints_samples_regressor_and_torque(problem):
    views = problem.joint_rows()
    full = problem.base_regressor(stacked=False, all_rows=True)
    qd, tau = problem.dataset.qd, problem.dataset.tau
    assert [v.joint for v in views] == [0, 1, 2] and all(isinstance(v, JointRows) for v in views)
    assert [v.name for v in views] == list(problem.structure.joint_names)
    assert [problem.n_samples - len(v.samples) for v in views] == problem.deadband_rows_removed
    assert len(set(problem.deadband_rows_removed)) == 3  # the joints keep different samples
    for v, threshold in zip(views, DEADBAND, strict=True):
        np.testing.assert_array_equal(v.samples, np.flatnonzero(np.abs(qd[:, v.joint]) >= threshold))
        np.testing.assert_array_equal(v.regressor, full[v.samples, v.joint])
        np.testing.assert_array_equal(v.torque, tau[v.samples, v.joint])
        np.testing.assert_array_equal(v.regressor, problem.base_regressor()[v.rows])


def test_a_toy_estimator_on_the_per_joint_view_matches_the_built_in_weighted_solver(problem):
    model = JointWeightedToy().fit(problem)
    variance = np.array(model.diagnostics["variance"])
    solver = problem.least_squares()
    reference = solver.solve(1.0 / variance).beta
    np.testing.assert_allclose(model.values, reference, rtol=1e-7, atol=1e-9)
