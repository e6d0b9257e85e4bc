"""Fast dynamics (CRBA mass matrix, RNEA bias, forward dynamics from standard parameters).

Checked against the previous implementations (M column by column from the batched numpy RNEA,
and the generic ``forward_dynamics_from_inverse`` over the regressor), against PyBullet, on
physically inconsistent parameter vectors and on prismatic joints, at N = 1 and batched.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import BUNDLED
from pybullet_reference import PyBulletReference

from robotid_sim.dynamics import crba
from robotid_sim.dynamics.forward import forward_dynamics_from_inverse
from robotid_sim.dynamics.newton_euler import rnea

ALL = BUNDLED + ["arm6"]
TOL = 1e-10


def _close(a, b, tol=TOL):
    """Max abs difference within tol relative to the largest entry (at least 1)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    err = np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))
    assert err < tol, err


def _random_theta(robot, rng):
    """A physically inconsistent parameter vector: every entry random, masses of either sign."""
    theta = robot.true_parameters() + rng.normal(scale=0.5, size=robot.n_parameters)
    theta[robot.parameter_slices()["inertial"]] = rng.normal(size=10 * robot.n_dof)
    return theta


def _old_mass_matrix(robot, q):
    """The previous Robot.mass_matrix: column j = RNEA torque at qdd = e_j, qd = 0, no gravity."""
    n, N = robot.n_dof, len(q)
    q_rep = np.tile(q, (n, 1))
    e = np.repeat(np.eye(n), N, axis=0)
    cols = rnea(robot.joints, robot.inertials, q_rep.T.copy(), 0 * q_rep.T, e.T.copy(), np.zeros(3)).T
    M = cols.reshape(n, N, n).transpose(1, 2, 0)
    return M if robot.rotor_inertia is None else M + np.diag(robot.rotor_inertia)


def _old_bias(robot, q, qd):
    return rnea(robot.joints, robot.inertials, q.T.copy(), qd.T.copy(), 0 * q.T, robot.gravity).T + (
        robot.friction.torque(qd)
    )


def _old_forward(robot, theta, q, qd, tau):
    """The generic construction of identified models: n + 1 regressor calls, then a solve."""
    return forward_dynamics_from_inverse(lambda a, b, c: robot.regressor(a, b, c) @ theta, q, qd, tau)


@pytest.fixture(scope="module")
def references(robots):
    refs = {name: PyBulletReference(r.urdf_path, r.gravity, r.joint_names) for name, r in robots.items()}
    yield refs
    for ref in refs.values():
        ref.close()


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("consistent", [True, False], ids=["true", "inconsistent"])
def test_mass_matrix_bias_and_torque_equal_the_previous_implementation(name, consistent, robots, rng):
    robot = robots[name]
    if not consistent:
        robot = robot.with_parameters(_random_theta(robot, rng))
    q, qd, qdd = robot.random_states(rng, 64)
    for sl in (slice(0, 1), slice(None)):  # N = 1 and batched
        _close(robot.mass_matrix(q[sl]), _old_mass_matrix(robot, q[sl]))
        _close(robot.bias_torque(q[sl], qd[sl]), _old_bias(robot, q[sl], qd[sl]))
        old_tau = rnea(robot.joints, robot.inertials, q[sl].T.copy(), qd[sl].T.copy(), qdd[sl].T.copy(), robot.gravity)
        _close(robot.rigid_body_torque(q[sl], qd[sl], qdd[sl]), old_tau.T)
        _close(
            robot.rigid_body_torque(q[sl], qd[sl], qdd[sl], gravity=False), old_tau.T - _old_bias_gravity(robot, q[sl])
        )
    assert np.array_equal(robot.mass_matrix(q[0]), robot.mass_matrix(q[:1]))  # a 1-D state is one sample
    M = robot.mass_matrix(q)
    assert np.array_equal(M, M.transpose(0, 2, 1))


def _old_bias_gravity(robot, q):
    return rnea(robot.joints, robot.inertials, q.T.copy(), 0 * q.T, 0 * q.T, robot.gravity).T


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("consistent", [True, False], ids=["true", "inconsistent"])
def test_forward_dynamics_equals_the_generic_construction_and_solves_the_equation(name, consistent, robots, rng):
    robot = robots[name]
    theta = robot.true_parameters() if consistent else _random_theta(robot, rng)
    model = robot.with_parameters(theta)
    q, qd, qdd = robot.random_states(rng, 64)
    tau = model.inverse_dynamics(q, qd, qdd)
    M, h = model.mass_matrix(q), model.bias_torque(q, qd)
    cond = np.linalg.cond(M)
    for sl in (slice(0, 1), slice(None)):
        new = model.forward_dynamics(q[sl], qd[sl], tau[sl])
        old = _old_forward(robot, theta, q[sl], qd[sl], tau[sl])
        # two LU solves of the same M differ by rounding times the condition number
        _close(new, old, TOL * max(1.0, cond[sl].max() / 1e4))
        # residual: M qdd = tau - h
        _close(np.einsum("nij,nj->ni", M[sl], new), (tau - h)[sl])
    if consistent:
        _close(model.forward_dynamics(q, qd, tau), qdd)


@pytest.mark.parametrize("name", ALL)
def test_rigid_body_dynamics_match_pybullet(name, robots, references, rng):
    robot, ref = robots[name], references[name]
    q, qd, qdd = robot.random_states(rng, 20)
    M = robot.mass_matrix(q)
    if robot.rotor_inertia is not None:
        M = M - np.diag(robot.rotor_inertia)
    M_pb = ref.mass_matrix(q)
    _close(M, M_pb)
    h_pb = ref.inverse_dynamics(q, qd, np.zeros_like(q))
    _close(robot.rigid_body_torque(q, qd, np.zeros_like(q)), h_pb)
    _close(robot.bias_torque(q, qd) - robot.friction.torque(qd), h_pb)
    _close(robot.rigid_body_torque(q, qd, qdd), ref.inverse_dynamics(q, qd, qdd))
    # forward dynamics of the rigid body solves PyBullet's M qdd = tau - h (a backward-error check:
    # qdd itself may differ from PyBullet's solve by rounding times cond(M), up to ~1e4 on hyper9)
    rigid = robot.with_parameters(robot.true_parameters() * _inertial_mask(robot))
    tau = rigid.inverse_dynamics(q, qd, qdd)
    _close(np.einsum("nij,nj->ni", M_pb, rigid.forward_dynamics(q, qd, tau)), tau - h_pb)
    _close(rigid.forward_dynamics(q[:1], qd[:1], tau[:1]), qdd[:1])


def _inertial_mask(robot):
    """1 on the inertial parameters, 0 on rotor inertia and friction."""
    mask = np.zeros(robot.n_parameters)
    mask[robot.parameter_slices()["inertial"]] = 1.0
    return mask


def test_identified_model_path_on_hyper9(robots, rng):
    """The equivalent standard vector of a base-parameter model gives the same torques and qdd."""
    robot = robots["hyper9"]
    base = robot.base_parameters()
    beta = base.true_values() * (1.0 + 0.3 * rng.normal(size=base.count))  # an "identified", inconsistent beta
    theta_equiv = np.zeros(robot.n_parameters)
    theta_equiv[base.independent] = beta
    q, qd, qdd = robot.random_states(rng, 50)

    def inverse(a, b, c):
        return robot.regressor(a, b, c, columns=base.independent) @ beta

    _close(robot.regressor(q, qd, qdd) @ theta_equiv, inverse(q, qd, qdd))
    model = robot.with_parameters(theta_equiv)
    tau = robot.inverse_dynamics(q, qd, qdd)
    for sl in (slice(0, 1), slice(None)):
        _close(
            model.forward_dynamics(q[sl], qd[sl], tau[sl]),
            forward_dynamics_from_inverse(inverse, q[sl], qd[sl], tau[sl]),
        )
    # the recipe of the crba module docstring: the same without a Robot copy
    sl = robot.parameter_slices()
    inertials = theta_equiv[sl["inertial"]].reshape(robot.n_dof, 10)
    friction = np.einsum("nik,ik->ni", robot.friction.columns(qd), theta_equiv[sl["friction"]].reshape(robot.n_dof, -1))
    qdd_direct = crba.forward_dynamics(
        robot.joints, inertials, robot.gravity, q, qd, tau - friction, theta_equiv[sl["rotor"]]
    )
    _close(qdd_direct, model.forward_dynamics(q, qd, tau))


def test_prismatic_joints_with_inconsistent_parameters(robots, rng):
    robot = robots["prrrp"]
    assert robot.joint_kinds[0] == robot.joint_kinds[-1] == "prismatic"
    theta = _random_theta(robot, rng)
    theta[robot.parameter_slices()["inertial"][9::10]] *= -1.0  # flip every mass sign too
    model = robot.with_parameters(theta)
    q, qd, qdd = robot.random_states(rng, 30)
    tau = model.inverse_dynamics(q, qd, qdd)
    _close(model.forward_dynamics(q, qd, tau), _old_forward(robot, theta, q, qd, tau), 1e-8)
    _close(model.inverse_dynamics(q, qd, qdd), robot.regressor(q, qd, qdd) @ theta)


def test_mass_matrix_and_bias_function(robots, rng):
    robot = robots["scara"]
    q, qd, _ = robot.random_states(rng, 10)
    chain = crba.pack_chain(robot.joints)
    assert crba.pack_chain(robot.joints) is chain and crba.pack_chain(chain) is chain
    assert crba.pack_chain(robot.with_parameters(robot.true_parameters()).joints) is chain  # copies share it
    M, h = crba.mass_matrix_and_bias(chain, robot.inertials, robot.gravity, q, qd, robot.rotor_inertia)
    _close(M, robot.mass_matrix(q))
    _close(h, robot.bias_torque(q, qd) - robot.friction.torque(qd))
    M2, none = crba.mass_matrix_and_bias(robot.joints, robot.inertials, robot.gravity, q[0], None)
    assert none is None and M2.shape == (1, 4, 4)
    _close(M2[0] + np.diag(robot.rotor_inertia), M[0])
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        crba.mass_matrix_and_bias(chain, robot.inertials, robot.gravity, q[:, :3], qd)
    with pytest.raises(ValueError, match="inertials"):
        crba.mass_matrix_and_bias(chain, robot.inertials[:3], robot.gravity, q, qd)
    # read-only and non-contiguous inputs (e.g. broadcast or memory-mapped data) give the same
    q_ro = np.asfortranarray(q)
    q_ro.flags.writeable = False
    _close(crba.mass_matrix_and_bias(chain, robot.inertials, robot.gravity, q_ro, qd, robot.rotor_inertia)[0], M)


def test_the_threaded_kernels_run_only_for_large_batches_on_several_threads(monkeypatch):
    """With one numba thread (each of a sweep's workers) a threaded kernel would be the serial one plus its
    scheduling, and another compilation."""
    import numba

    big = crba.PARALLEL_MIN_SAMPLES
    for threads, expected in ((1, (False, False)), (2, (False, True))):
        monkeypatch.setattr(numba, "get_num_threads", lambda threads=threads: threads)
        assert (crba.threaded(big - 1), crba.threaded(big)) == expected


def test_threaded_and_numpy_paths_agree_with_the_serial_kernels(robots, rng, monkeypatch):
    robot = robots["hyper9"].with_parameters(_random_theta(robots["hyper9"], rng))
    q, qd, qdd = robot.random_states(rng, 40)
    tau = robot.inverse_dynamics(q, qd, qdd)
    serial = (robot.mass_matrix(q), robot.bias_torque(q, qd), robot.forward_dynamics(q, qd, tau))
    monkeypatch.setattr(crba, "threaded", lambda N: True)
    threaded = (robot.mass_matrix(q), robot.bias_torque(q, qd), robot.forward_dynamics(q, qd, tau))
    monkeypatch.setattr(crba, "_KERNELS", False)  # as without numba
    numpy = (robot.mass_matrix(q), robot.bias_torque(q, qd), robot.forward_dynamics(q, qd, tau))
    for a, b, c in zip(serial, threaded, numpy, strict=True):
        assert np.array_equal(a, b)
        _close(c, a, 1e-9)


def test_threaded_rnea_blocks_cover_every_sample(robots, rng, monkeypatch):
    """The threaded RNEA runs blocks of BLOCK samples: several blocks and a partial last one."""
    from robotid_sim.dynamics import crba_kernels

    robot = robots["hyper9"].with_parameters(_random_theta(robots["hyper9"], rng))
    N = 2 * crba_kernels.BLOCK + 37
    q, qd, qdd = robot.random_states(rng, N)
    serial = robot.rigid_body_torque(q, qd, qdd)
    monkeypatch.setattr(crba, "threaded", lambda N: True)
    assert np.array_equal(robot.rigid_body_torque(q, qd, qdd), serial)
    _close(serial, rnea(robot.joints, robot.inertials, q.T.copy(), qd.T.copy(), qdd.T.copy(), robot.gravity).T, 1e-12)


@pytest.mark.parametrize("threaded", [False, True])
def test_singular_mass_matrix_raises_both_data_and_linalg_error(robots, monkeypatch, threaded):
    import robotid_sim as rid

    robot = robots["planar3r"]
    theta = robot.true_parameters()
    theta[robot.parameter_slices()["inertial"]] = 0.0  # massless: M = 0
    model = robot.with_parameters(theta)
    if threaded:
        monkeypatch.setattr(crba, "threaded", lambda N: True)
    q = np.zeros((3, 3))
    with pytest.raises(rid.DataError, match="sample 0"):
        model.forward_dynamics(q, q, q)
    with pytest.raises(np.linalg.LinAlgError):
        model.forward_dynamics(q, q, q)


def test_import_does_not_import_numba():
    code = (
        "import sys, robotid_sim as rid\n"
        "r = rid.load_robot('planar3r')\n"
        "from robotid_sim.dynamics import crba\n"
        "assert 'numba' not in sys.modules\n"
        "r.mass_matrix([0.1, 0.2, 0.3])\n"
        "assert 'numba' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
