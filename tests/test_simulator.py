"""The simulator is the model (issue 3): exact torque, realised accelerations, limits, frames."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BUNDLED

import robotid_sim as rid
from robotid_sim.sim.pybullet_sim import PyBulletSimulator


def _sine_reference(robot, seconds=1.0, dt=1e-3):
    t = np.arange(int(seconds / dt)) * dt
    lo, hi = robot.position_limits
    lo, hi = np.where(np.isfinite(lo), lo, -3.0), np.where(np.isfinite(hi), hi, 3.0)
    mid, amp = (lo + hi) / 2, 0.25 * (hi - lo) / 2
    w = 0.5 * np.minimum(robot.velocity_limit / amp, np.sqrt(robot.acceleration_limit / amp))
    phase = np.arange(robot.n_dof)
    s, c = np.sin(w * t[:, None] + phase), np.cos(w * t[:, None] + phase)
    return mid + amp * s, amp * w * c, -amp * w**2 * s


@pytest.mark.parametrize("name", BUNDLED)
def test_recorded_torque_equals_the_model_without_noise(name, robots):
    """Noise off: tau recorded == regressor(q, qd, qdd) @ theta at the recorded states, friction and
    rotor inertia included (the simulator *is* the model)."""
    robot = robots[name]
    ds = rid.simulate(robot, "default", duration=3.0, noise=None, rate_hz=200)
    tau_model = robot.regressor(ds.q, ds.qd, ds.qdd) @ robot.true_parameters()
    rel = np.linalg.norm(ds.tau - tau_model) / np.linalg.norm(ds.tau)
    assert rel < 1e-6
    assert np.array_equal(ds.tau, ds.truth.tau)


@pytest.mark.parametrize("name", BUNDLED)
def test_recorded_acceleration_is_what_pybullet_realised(name, robots):
    robot = robots[name]
    q_ref, qd_ref, qdd_ref = _sine_reference(robot, seconds=0.5)
    with PyBulletSimulator(robot) as sim:
        rec = sim.track(q_ref, qd_ref, qdd_ref, decimation=1)
    # semi-implicit Euler: qd[k+1] = qd[k] + dt * qdd[k]
    realised = np.diff(rec["qd"], axis=0) / sim.dt
    assert np.max(np.abs(realised - rec["qdd"][:-1])) < 1e-6 * max(1.0, np.abs(rec["qdd"]).max())


def test_tracking_follows_the_reference(robots):
    robot = robots["hyper9"]
    q_ref, qd_ref, qdd_ref = _sine_reference(robot, seconds=2.0)
    with PyBulletSimulator(robot) as sim:
        rec = sim.track(q_ref, qd_ref, qdd_ref, decimation=5)
    assert np.max(np.abs(rec["q"] - q_ref[::5])) < 1e-3


def test_general_torque_path_matches_the_model_forward_dynamics(robots):
    """Any motor torque (PID...): Bullet + injected friction and rotor inertia == model forward dynamics."""
    robot = robots["scara"]
    rng = np.random.default_rng(0)
    with PyBulletSimulator(robot) as sim:
        q0 = np.array([0.3, -0.4, 0.07, 0.5])
        qd0 = np.array([0.2, -0.1, 0.02, 0.3])
        sim.reset(q0, qd0)
        tau = rng.normal(0, 2.0, robot.n_dof)
        qdd = sim.step_torque(tau)
    expected = robot.forward_dynamics(q0, qd0, tau)[0]
    assert np.allclose(qdd, expected, atol=1e-8)


def test_simulator_turns_off_every_exactness_trap(robots):
    import pybullet as p

    robot = robots["hyper9"]
    with PyBulletSimulator(robot) as sim:
        for j in sim.joint_ids:
            info = p.getDynamicsInfo(sim.body, j, physicsClientId=sim.client)
            mass = info[0]
            assert mass == pytest.approx(robot.inertials[sim.joint_ids.index(j), 9])
            assert p.getJointInfo(sim.body, j, physicsClientId=sim.client)[6] == 0.0  # joint damping


def test_excitation_outside_the_limits_is_refused(robots):
    robot = robots["planar3r"]
    # a 1 rad/s-amplitude velocity harmonic at 0.1 rad/s swings the joints ±10 rad
    too_big = {"type": "fourier", "q0": [0.0, 0.0, 0.0], "a": [[1.0, -1.0]] * 3, "b": [[0.0, 0.0]] * 3, "omega_f": 0.1}
    with pytest.raises(rid.ConfigError, match="leaves the (position|velocity|acceleration) limits of joint"):
        rid.simulate(robot, too_big)


def test_rate_must_divide_the_physics_rate(robots):
    with pytest.raises(rid.ConfigError, match="must divide the physics rate"):
        rid.simulate(robots["prrrp"], "default", duration=0.5, rate_hz=300)


def test_rgb_array_frame(robots):
    with PyBulletSimulator(robots["planar3r"]) as sim:
        frame = sim.render(width=64, height=48)
    assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8
    assert frame.std() > 0  # not a blank image


def test_noise_is_seeded_and_truth_is_kept(robots):
    robot = robots["prrrp"]
    noise = {"q": {"snr_db": 60}, "tau": {"std": 0.1}}
    a = rid.simulate(robot, "default", duration=1.0, noise=noise, seed=3)
    b = rid.simulate(robot, "default", duration=1.0, noise=noise, seed=3)
    c = rid.simulate(robot, "default", duration=1.0, noise=noise, seed=4)
    assert np.array_equal(a.tau, b.tau) and not np.array_equal(a.tau, c.tau)
    assert np.array_equal(a.truth.tau, c.truth.tau)
    assert np.std(a.tau - a.truth.tau) == pytest.approx(0.1, rel=0.15)
    assert a.metadata["seed"] == 3 and a.metadata["robot"] == "prrrp"


def test_current_noise_takes_gear_ratio_and_torque_constant_from_the_sidecar(robots):
    robot = robots["hyper9"]
    ds = rid.simulate(robot, "default", duration=1.0, noise={"current": {"current_std": 0.01}}, seed=0)
    # torque noise std = N·K·sigma_i = 160 · K_j · 0.01 A (seed 001 Eq. 1)
    expected = 160 * np.array(robot.sidecar.torque_measurement.torque_constant) * 0.01
    measured = np.std(ds.tau - ds.truth.tau, axis=0)
    assert np.allclose(measured, expected, rtol=0.25)
