"""Least squares without the stacked regressor (issue 10): the problem's streamed normal equations
against the dense QR on the stacked base regressor, on every bundled robot and the in-test URDF."""

from __future__ import annotations

import os

import numpy as np
import pytest
from robotid_sim_plugins.irls import IRLSEstimator
from robotid_sim_plugins.ols import OLSEstimator
from robotid_sim_plugins.wls import WLSEstimator

import robotid_sim.identification.problem as problem_module
from robotid_sim.identification import IdentificationProblem, weighted_least_squares
from robotid_sim.sim.dataset import Dataset
from robotid_sim.sim.logs import stack_experiments
from robotid_sim.testing import exact_multisine

ROBOTS = ["scara", "three_axis", "planar3r", "prrrp", "hyper9", "arm6"]


def _noisy(robot, seed: int, duration: float = 8.0) -> Dataset:
    """Multi-sine data of ``robot`` with 2 % torque noise and a few large outliers (no PyBullet run)."""
    t, q, qd, qdd = exact_multisine(robot, seed, duration, 50.0)
    tau = robot.inverse_dynamics(q, qd, qdd)
    rng = np.random.default_rng(seed)
    scale = np.std(tau, axis=0)
    tau = tau + 0.02 * scale * rng.standard_normal(tau.shape) + 5 * scale * (rng.random(tau.shape) < 0.01)
    return Dataset(t, q, qd, qdd, tau, joint_names=robot.joint_names, metadata={})


def _two_experiments(robot) -> Dataset:
    return stack_experiments([_noisy(robot, 1, 5.0), _noisy(robot, 2, 4.0)], names=["first", "second"])


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _cases(problem: IdentificationProblem, rng: np.random.Generator):
    """(label, solve arguments, dense row weights) with and without weights and zero-weight rows."""
    n, joint, cell = problem.n_dof, problem.row_joint(), problem.least_squares().row_cell
    lam = rng.uniform(0.2, 30.0, n)
    per_cell = rng.uniform(0.2, 30.0, problem.least_squares().n_cells)
    keep = rng.random(problem.n_rows) > 0.03
    mostly_dropped = rng.random(problem.n_rows) > 0.7
    yield "ols", {}, np.ones(problem.n_rows)
    yield "per-joint weights", {"weights": lam}, lam[joint]
    yield "per-cell weights", {"weights": per_cell}, per_cell[cell]
    yield "zero-weight rows", {"weights": lam, "keep": keep}, lam[joint] * keep
    yield "most rows dropped", {"weights": lam, "keep": mostly_dropped}, lam[joint] * mostly_dropped


@pytest.mark.parametrize("name", ROBOTS)
@pytest.mark.parametrize("layout", ["one experiment", "two experiments", "dead-band"])
def test_streamed_least_squares_equals_the_dense_qr(robots, name, layout, rng, monkeypatch):
    robot = robots[name]
    # small chunks: several per experiment, so chunk and experiment boundaries are crossed
    monkeypatch.setattr(problem_module, "CHUNK_BYTES", 64 * robot.n_dof * robot.base_parameters().count * 8)
    ds = _two_experiments(robot) if layout == "two experiments" else _noisy(robot, 0)
    deadband = 0.05 * np.abs(ds.qd).max(axis=0) if layout == "dead-band" else None
    problem = IdentificationProblem(robot, ds, velocity_deadband=deadband)
    solver = problem.least_squares()
    W, y = problem.base_regressor(), problem.torque_vector()
    for label, kwargs, w in _cases(problem, rng):
        expected = weighted_least_squares(W, y, w)
        fit = solver.solve(**kwargs)
        assert _relative(fit.beta, expected.beta) < 1e-9, (label, _relative(fit.beta, expected.beta))
        assert _relative(fit.residual, y - W @ expected.beta) < 1e-9, label
        assert np.allclose(
            fit.covariance, expected.covariance, rtol=1e-6, atol=1e-9 * np.abs(expected.covariance).max()
        )


def test_the_streamed_gram_and_counts_are_those_of_the_stacked_rows(robots, monkeypatch):
    robot = robots["prrrp"]
    monkeypatch.setattr(problem_module, "CHUNK_BYTES", 100 * 5 * robot.base_parameters().count * 8)
    ds = _two_experiments(robot)
    problem = IdentificationProblem(robot, ds, velocity_deadband=0.05)
    solver = problem.least_squares()
    W, cell = problem.base_regressor(), solver.row_cell
    assert np.allclose(solver.gram_matrix(), W.T @ W, rtol=1e-12, atol=1e-12 * np.abs(W.T @ W).max())
    keep = np.random.default_rng(0).random(problem.n_rows) > 0.5
    expected = [np.count_nonzero(np.any(W[keep & (cell == c)] != 0, axis=0)) for c in range(solver.n_cells)]
    assert solver.n_params(keep).tolist() == expected
    joint = problem.row_joint()
    per_joint = [np.count_nonzero(np.any(W[keep & (joint == j)] != 0, axis=0)) for j in range(problem.n_dof)]
    assert solver.n_params(keep, per_joint=True).tolist() == per_joint
    assert _relative(problem.predict_rows(np.arange(1.0, W.shape[1] + 1)), W @ np.arange(1.0, W.shape[1] + 1)) < 1e-12


@pytest.mark.parametrize("cls", [OLSEstimator, WLSEstimator, IRLSEstimator])
def test_builtin_least_squares_never_stack_the_regressor(robots, cls):
    """OLS, WLS and IRLS fit from the streamed Gram matrices: the problem never forms its (m, b) regressor."""
    problem = IdentificationProblem(robots["hyper9"], _noisy(robots["hyper9"], 3, 6.0))
    model = cls().fit(problem)
    assert "_base_regressor" not in problem.__dict__ and "_kept_regressor" not in problem.__dict__
    W = problem.base_regressor()
    if cls is OLSEstimator:
        assert _relative(model.values, weighted_least_squares(W, problem.torque_vector()).beta) < 1e-9


def test_check_excitation_from_the_gram_matrix_matches_the_qr(robots):
    problem = IdentificationProblem(robots["hyper9"], _noisy(robots["hyper9"], 5, 6.0))
    cond = problem.check_excitation()
    assert "_base_regressor" not in problem.__dict__
    W = problem.base_regressor()
    assert cond == pytest.approx(np.linalg.cond(W), rel=1e-8)
    _, scaled, _, raw = problem._rank_test(W)
    _, gram_scaled, _, gram_raw = problem_module._gram_rank_test(W.T @ W)
    assert gram_scaled == pytest.approx(scaled, rel=1e-8) and gram_raw == pytest.approx(raw, rel=1e-8)


@pytest.mark.parametrize("name", ROBOTS)
def test_linear_models_predict_with_the_batched_torque(robots, name):
    """predict_torque runs the Newton–Euler kernels on the equivalent standard parameters: it equals
    regressor @ values (base and standard models) without forming the regressor."""
    from robotid_sim.identification import BaseParameterModel, StandardParameterModel

    robot = robots[name]
    problem = IdentificationProblem(robot, _noisy(robot, 7, 3.0))
    beta = problem.least_squares().solve().beta
    ds = _noisy(robot, 8, 2.0)
    rng = np.random.default_rng(0)
    for model in (
        BaseParameterModel.from_problem(problem, beta),
        StandardParameterModel.from_problem(
            problem, robot.true_parameters() * rng.uniform(0.5, 1.5, robot.n_parameters)
        ),
    ):
        expected = model.regressor(ds.q, ds.qd, ds.qdd) @ model.values
        assert _relative(model.predict_torque(ds.q, ds.qd, ds.qdd), expected) < 1e-12
        assert _relative(model.predict_torque(ds.q[0], ds.qd[0], ds.qdd[0]), expected[:1]) < 1e-12


def test_quiet_thread_pools_adds_only_what_is_unset(monkeypatch):
    from robotid_sim.cli import main
    from robotid_sim.threads import QUIET_THREAD_SETTINGS, quiet_thread_pools

    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    added = quiet_thread_pools(env)
    assert env["OMP_WAIT_POLICY"] == "ACTIVE" and added == {"OPENBLAS_THREAD_TIMEOUT": "4"}
    for key in QUIET_THREAD_SETTINGS:
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert {k: os.environ[k] for k in QUIET_THREAD_SETTINGS} == QUIET_THREAD_SETTINGS
