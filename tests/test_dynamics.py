"""Dynamics core (issue 2): regressor, mass matrix and forward dynamics against PyBullet."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import BUNDLED
from pybullet_reference import PyBulletReference

from robotid_sim.dynamics.friction import NoFriction

ALL = BUNDLED + ["arm6"]


@pytest.fixture(scope="module")
def references(robots):
    refs = {name: PyBulletReference(r.urdf_path, r.gravity, r.joint_names) for name, r in robots.items()}
    yield refs
    for ref in refs.values():
        ref.close()


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("name", ALL)
def test_inertial_regressor_matches_pybullet_inverse_dynamics(name, robots, references, rng):
    robot = robots[name]
    q, qd, qdd = robot.random_states(rng, 1000)
    theta = robot.true_parameters()
    inertial = robot.parameter_slices()["inertial"]
    tau_model = robot.regressor(q, qd, qdd)[..., inertial] @ theta[inertial]
    tau_pb = references[name].inverse_dynamics(q, qd, qdd)
    assert _rel(tau_model, tau_pb) < 1e-8
    # per-sample too: no sample hides behind the norm
    assert np.max(np.abs(tau_model - tau_pb)) < 1e-8 * max(1.0, np.abs(tau_pb).max())


@pytest.mark.parametrize("name", ALL)
def test_mass_matrix_matches_pybullet(name, robots, references, rng):
    robot = robots[name]
    q, _, _ = robot.random_states(rng, 200)
    M = robot.mass_matrix(q)
    if robot.rotor_inertia is not None:
        M = M - np.diag(robot.rotor_inertia)
    M_pb = references[name].mass_matrix(q)
    assert _rel(M, M_pb) < 1e-8
    assert np.allclose(M, M.transpose(0, 2, 1))


@pytest.mark.parametrize("name", ALL)
def test_full_regressor_times_theta_equals_inverse_dynamics(name, robots, rng):
    robot = robots[name]
    q, qd, qdd = robot.random_states(rng, 500)
    tau = robot.regressor(q, qd, qdd) @ robot.true_parameters()
    assert _rel(tau, robot.inverse_dynamics(q, qd, qdd)) < 1e-12


@pytest.mark.parametrize("name", ALL)
def test_forward_dynamics_agrees_with_pybullet_step(name, robots, references, rng):
    robot = robots[name]
    ref = references[name]
    q, qd, qdd_true = robot.random_states(rng, 20)
    # friction and rotor inertia off: PyBullet only knows the rigid body
    rigid = dataclasses.replace(robot, friction=NoFriction(robot.n_dof), rotor_inertia=None, _structure=None)
    tau = rigid.inverse_dynamics(q, qd, qdd_true)
    qdd_model = rigid.forward_dynamics(q, qd, tau)
    assert np.allclose(qdd_model, qdd_true, rtol=0, atol=1e-8)
    qdd_pb = np.array([ref.step_acceleration(q[k], qd[k], tau[k]) for k in range(len(q))])
    assert np.max(np.abs(qdd_model - qdd_pb)) < 1e-6 * max(1.0, np.abs(qdd_pb).max())


@pytest.mark.parametrize("name", ALL)
def test_forward_dynamics_inverts_inverse_dynamics_with_friction_and_rotor(name, robots, rng):
    robot = robots[name]
    q, qd, qdd = robot.random_states(rng, 300)
    tau = robot.inverse_dynamics(q, qd, qdd)
    assert np.allclose(robot.forward_dynamics(q, qd, tau), qdd, atol=1e-8)


def test_forward_dynamics_from_any_linear_model_matches_true_model(robots, rng):
    from robotid_sim.dynamics import forward_dynamics_from_inverse

    robot = robots["hyper9"]
    base = robot.base_parameters()
    beta = base.true_values()
    q, qd, qdd = robot.random_states(rng, 100)
    tau = robot.inverse_dynamics(q, qd, qdd)
    qdd_base = forward_dynamics_from_inverse(lambda a, b, c: base.regressor(a, b, c) @ beta, q, qd, tau)
    assert np.allclose(qdd_base, qdd, atol=1e-7)


@pytest.mark.parametrize("name", ALL)
def test_regressor_of_selected_columns_equals_those_columns_of_the_full_one(name, robots, rng):
    robot = robots[name]
    q, qd, qdd = robot.random_states(rng, 50)
    full = robot.regressor(q, qd, qdd)
    columns = np.sort(rng.choice(robot.n_parameters, size=robot.n_parameters // 2, replace=False))
    # equal to rounding: the batched products may sum in another order for a column subset
    assert np.allclose(robot.regressor(q, qd, qdd, columns=columns), full[..., columns], rtol=1e-13, atol=1e-13)
    base = robot.base_parameters()
    assert np.allclose(base.regressor(q, qd, qdd), full[..., base.independent], rtol=1e-13, atol=1e-13)
