"""The compiled stepping of ``IdentifiedArm-v0`` (one kernel call per control step) follows the integration it
replaced: ``semi_implicit_euler`` over the model's forward dynamics, to 1e-12 over 200 steps."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.dynamics.forward import robust_forward, semi_implicit_euler
from robotid_sim.envs.dynamics import CopyParameters
from robotid_sim.identification import StandardParameterModel

IDENTIFIED_ARM_ID = "robotid_sim/IdentifiedArm-v0"


def _true_model(name: str, covariance: bool = False) -> StandardParameterModel:
    """The robot's true standard parameters as an identified model (with a 1 % covariance if asked)."""
    robot = rid.load_robot(name)
    theta = robot.true_parameters()
    cov = np.diag((0.01 * theta) ** 2 + 1e-12) if covariance else None
    return StandardParameterModel(robot.structure(), theta, covariance=cov)


def _max_deviation(env, forward, steps: int = 200, amplitude: float = 0.1) -> float:
    """Largest |q - q_ref|, |qd - qd_ref| over ``steps`` env steps against the Python integration of ``forward``."""
    options = env.arm.options
    q, qd = env.q[None].copy(), env.qd[None].copy()
    rng = np.random.default_rng(1)
    deviation = 0.0
    for _ in range(steps):
        action = rng.uniform(-amplitude, amplitude, env.action_space.shape).astype(np.float32)
        _, tau = env.arm.torque(action)
        env.step(action)
        q, qd, ok = semi_implicit_euler(forward, q, qd, tau, options.physics_dt, options.substeps)
        assert ok[0]
        deviation = max(deviation, np.abs(q[0] - env.q).max(), np.abs(qd[0] - env.qd).max())
    return deviation


@pytest.mark.parametrize("name", ["planar3r", "hyper9"])
def test_compiled_step_follows_the_python_integration_of_the_model(name):
    model = _true_model(name)
    assert CopyParameters(model, 1).compiled
    env = gymnasium.make(IDENTIFIED_ARM_ID, model=model).unwrapped
    env.reset(seed=5)
    friction = type(env.model.equivalent_robot.friction).__name__
    assert friction == {"planar3r": "CoulombViscous", "hyper9": "NonlinearStribeck"}[name]

    def forward(q, qd, tau):
        return robust_forward(model.forward_dynamics, q, qd, tau)

    assert _max_deviation(env, forward) <= 1e-12


def test_compiled_step_with_parameter_draws_follows_the_per_copy_forward_dynamics():
    model = _true_model("hyper9", covariance=True)
    env = gymnasium.make(IDENTIFIED_ARM_ID, model=model, parameter_draws="covariance").unwrapped
    env.reset(seed=2)
    reference = CopyParameters(model, 1)
    reference.set(0, env.episode_parameters)
    assert _max_deviation(env, reference.forward) <= 1e-12


def test_compiled_step_keeps_the_starting_state_of_a_copy_whose_mass_matrix_is_singular():
    model = _true_model("planar3r")
    copies = CopyParameters(model, 2)
    copies.set(1, np.zeros_like(model.standard_equivalent()))  # no mass at all: M = 0
    q = np.array([[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]])
    qd = np.zeros((2, 3))
    ok = copies.step(q, qd, np.ones((2, 3)), 1e-3, 10)
    assert ok.tolist() == [True, False]
    assert np.array_equal(q[1], [0.1, 0.2, 0.3]) and np.array_equal(qd[1], np.zeros(3))
    assert not np.array_equal(qd[0], np.zeros(3))
