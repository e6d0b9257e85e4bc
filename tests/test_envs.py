"""Gymnasium environments (SPEC §11, issue 11): IdentifiedArm-v0, PyBulletArm-v0, the vector env, SB3 adapter."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import pytest
from conftest import BUNDLED
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import robotid_sim as rid
from robotid_sim.envs import IDENTIFIED_ARM_ID, PYBULLET_ARM_ID, IdentifiedArmVectorEnv
from robotid_sim.envs.sb3 import SB3VecEnvAdapter, to_sb3
from robotid_sim.envs.spec import (
    ACTION_COST,
    TORQUE_FROM_DYNAMICS,
    TORQUE_LIMIT_FACTOR,
    VELOCITY_BOUND_FACTOR,
    VELOCITY_COST,
    ArmEnvOptions,
    arm_spec,
)
from robotid_sim.errors import ConfigError
from robotid_sim.identification import StandardParameterModel


def true_model(robot) -> StandardParameterModel:
    """The CAD model: the robot's true standard parameters as an identified model."""
    return StandardParameterModel(robot.structure(), robot.true_parameters())


def pd_actions(obs: np.ndarray, env) -> np.ndarray:
    """Computed torque with a critically damped 5 rad/s error dynamics towards the observed target, as
    normalised actions; from the identified env's model, or the PyBullet env's robot."""
    arm = env.unwrapped.arm
    dynamics = getattr(env.unwrapped, "model", None) or env.unwrapped.robot
    n = arm.n_dof
    q, qd, target = (np.asarray(obs[k * n : (k + 1) * n], float)[None] for k in range(3))
    qdd = 25.0 * (target - q) - 10.0 * qd
    tau = dynamics.bias_torque(q, qd)[0] + dynamics.mass_matrix(q)[0] @ qdd[0]
    return np.clip(tau / arm.torque_limit, -1, 1).astype(np.float32)


@pytest.fixture(scope="module")
def planar3r(robots):
    return robots["planar3r"]


@pytest.fixture(scope="module")
def ols_with_friction(planar3r):
    """OLS on noise-free data of planar3r (default excitation), friction (Coulomb + viscous + offset) included."""
    return rid.identify(rid.simulate(planar3r, "default"), planar3r, "ols")


@pytest.fixture(scope="module")
def ols_without_friction(planar3r):
    """OLS on noise-free data of planar3r with its friction removed (the sidecar's friction left out)."""
    frictionless = rid.load_robot("planar3r", sidecar=planar3r.sidecar.model_copy(update={"friction": None}))
    assert frictionless.friction.kind == "none"
    return rid.identify(rid.simulate(frictionless, "default"), frictionless, "ols")


@pytest.fixture(scope="module")
def ols_noisy(planar3r):
    """OLS with a real covariance: 5 s of Fourier excitation, torque noise 0.5 N·m."""
    excitation = {"type": "fourier", "harmonics": 5, "base_frequency": 0.2, "seed": 0, "margin": 0.05}
    dataset = rid.simulate(planar3r, excitation, noise={"tau": {"std": 0.5}})
    return rid.identify(dataset, planar3r, "ols")


# ------------------------------------------------------------------------------ single envs


@pytest.mark.parametrize("name", BUNDLED)
def test_check_env_passes_for_both_envs_on_every_bundled_robot(robots, name):
    robot = robots[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning of the checker fails the test
        for env in (
            gymnasium.make(IDENTIFIED_ARM_ID, model=true_model(robot), render_mode="rgb_array"),
            gymnasium.make(PYBULLET_ARM_ID, robot=name, task="track", render_mode="rgb_array"),
        ):
            check_env(env.unwrapped)  # render check included: posed identified arm, PyBullet arm
            frame = env.unwrapped.render()
            assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8 and frame.std() > 0
            env.close()


def test_identified_and_pybullet_envs_have_identical_spaces_and_tasks(robots):
    robot = robots["three_axis"]
    identified = gymnasium.make(IDENTIFIED_ARM_ID, model=true_model(robot), task="track")
    truth = gymnasium.make(PYBULLET_ARM_ID, robot=robot, task="track")
    assert identified.observation_space == truth.observation_space
    assert identified.action_space == truth.action_space
    assert identified.action_space == gymnasium.spaces.Box(-1, 1, (3,), np.float32)
    assert np.array_equal(identified.unwrapped.arm.torque_limit, [j.effort_limit for j in robot.joints])
    for seed in (0, 1):
        assert np.array_equal(identified.reset(seed=seed)[0], truth.reset(seed=seed)[0])
    assert identified.metadata["render_modes"] == ["rgb_array"] and identified.metadata["render_fps"] == 100


def test_reset_with_a_seed_is_deterministic(robots):
    env = gymnasium.make(IDENTIFIED_ARM_ID, model=true_model(robots["scara"]))
    first, _ = env.reset(seed=7)
    steps = [env.step(np.full(4, 0.1))[0] for _ in range(3)]
    other, _ = env.reset(seed=8)
    again, _ = env.reset(seed=7)
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    assert all(np.array_equal(s, env.step(np.full(4, 0.1))[0]) for s in steps)


def test_time_limit_truncates_and_leaving_the_limits_terminates(robots):
    robot = robots["prrrp"]  # a vertical prismatic first joint: without force it falls out of its range
    env = gymnasium.make(PYBULLET_ARM_ID, robot=robot, max_episode_steps=500)
    obs, _ = env.reset(seed=0)
    terminated = truncated = False
    steps = 0
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(np.zeros(5))
        assert env.observation_space.contains(obs)  # the last observation too: clipped into the bounds
        steps += 1
    assert terminated and not truncated and steps < 500
    q = env.unwrapped.q
    lower, upper = env.unwrapped.arm.lower, env.unwrapped.arm.upper
    assert np.any((q < lower) | (q > upper))
    short = gymnasium.make(IDENTIFIED_ARM_ID, model=true_model(robots["planar3r"]), max_episode_steps=3)
    obs, _ = short.reset(seed=0)
    ends = []
    for _ in range(3):
        obs, _, terminated, truncated, _ = short.step(pd_actions(obs, short))
        ends.append((terminated, truncated))
    assert ends == [(False, False), (False, False), (False, True)]


def test_reward_is_two_at_the_target_at_rest_pays_for_precision_and_stays_bounded(robots):
    arm = arm_spec(robots["planar3r"], ArmEnvOptions())
    q, rest = np.array([[0.3, -0.2, 0.1]]), np.zeros((1, 3))
    assert arm.reward(q, rest, q, np.zeros((1, 3)))[0] == 2.0
    far = np.stack([arm.lower, arm.upper])  # opposite ends of every joint's range
    assert arm.reward(far[:1], rest, far[1:], np.ones((1, 3)))[0] == pytest.approx(-ACTION_COST, abs=1e-6)
    # the error counts by its absolute value (a squared error leaves a policy no gradient near the target)
    half = arm.lower + 0.5 * (arm.upper - arm.lower)
    assert arm.reward(half[None], rest, arm.upper[None], np.zeros((1, 3)))[0] == pytest.approx(0.5, abs=1e-4)
    # the precision term: 0.05 rad off on every joint earns much less than 0.01 rad off
    target = np.zeros((1, 3))
    near, nearer = (arm.reward(np.full((1, 3), d), rest, target, np.zeros((1, 3)))[0] for d in (0.05, 0.01))
    assert nearer - near > 0.3
    # moving at the velocity limit costs VELOCITY_COST
    moving = arm.reward(q, arm.velocity_limit[None], q, np.zeros((1, 3)))[0]
    assert moving == pytest.approx(2.0 - VELOCITY_COST)


def test_a_run_away_state_gets_a_bounded_reward(robots):
    """Regression: an identified model that blew up within one control step (q ~ 1e300) gave a reward of
    -1e300, float32 infinity in Stable-Baselines3, and NaN everywhere after VecNormalize."""
    arm = arm_spec(robots["planar3r"], ArmEnvOptions())
    q = np.array([[1e300, -1e300, 3.0]])
    qd = np.array([[1e300, np.inf, -1e300]])
    r = arm.reward(q, qd, np.zeros((1, 3)), np.ones((1, 3)))
    low = -VELOCITY_COST * VELOCITY_BOUND_FACTOR**2 - ACTION_COST
    assert np.isfinite(r).all() and low - 1e-12 <= r[0] <= 2.0
    assert np.isfinite(np.float32(r[0]))


def test_torque_limits_fall_back_to_the_dynamics_without_urdf_effort_limits(robots):
    robot = robots["planar3r"]
    structure = robot.structure()
    no_effort = dataclasses.replace(
        structure, joints=tuple(dataclasses.replace(j, effort_limit=np.inf) for j in structure.joints)
    )
    arm = arm_spec(no_effort, ArmEnvOptions(), robot.inverse_dynamics)
    q, qd, qdd = robot.random_states(np.random.default_rng(0), 1000)
    expected = TORQUE_LIMIT_FACTOR * np.abs(robot.inverse_dynamics(q, qd, qdd)).max(axis=0)
    assert arm.torque_limit_source == TORQUE_FROM_DYNAMICS and np.allclose(arm.torque_limit, expected)
    with pytest.raises(ConfigError, match="torque_limit"):
        arm_spec(no_effort, ArmEnvOptions())
    assert np.array_equal(arm_spec(no_effort, ArmEnvOptions(torque_limit=5.0)).torque_limit, [5.0] * 3)


def test_bad_options_name_the_field(robots):
    model = true_model(robots["planar3r"])
    with pytest.raises(ConfigError, match="task"):
        gymnasium.make(IDENTIFIED_ARM_ID, model=model, task="juggle")
    with pytest.raises(ConfigError, match="whole multiple"):
        gymnasium.make(IDENTIFIED_ARM_ID, model=model, control_dt=0.0105)
    with pytest.raises(ConfigError, match="torque_limit"):
        gymnasium.make(PYBULLET_ARM_ID, robot="planar3r", torque_limit=[1.0, 2.0])


def test_a_saved_model_path_works_and_is_checked_against_the_robot(tmp_path, robots, ols_with_friction):
    path = ols_with_friction.save(tmp_path / "planar3r_ols")
    env = gymnasium.make(IDENTIFIED_ARM_ID, model=str(path), robot="planar3r")
    assert env.unwrapped.model == ols_with_friction and env.unwrapped.robot.name == "planar3r"
    assert gymnasium.make(IDENTIFIED_ARM_ID, model=path).unwrapped.robot is not None  # the registered robot
    with pytest.raises(rid.ModelError, match="differs"):
        gymnasium.make(IDENTIFIED_ARM_ID, model=path, robot="three_axis")


# ------------------------------------------------------------------------------ sim to sim


def _max_difference(model, friction: bool, seed: int = 0, steps: int = 200) -> float:
    """Largest |q_identified − q_pybullet| (rad) over ``steps`` control steps of the same PD action sequence."""
    identified = gymnasium.make(IDENTIFIED_ARM_ID, model=model)
    truth = gymnasium.make(PYBULLET_ARM_ID, robot="planar3r", friction=friction)
    obs, _ = identified.reset(seed=seed)
    assert np.array_equal(obs, truth.reset(seed=seed)[0])
    worst = 0.0
    for _ in range(steps):
        action = pd_actions(obs, identified)  # computed once, applied to both
        obs, _, terminated, _, _ = identified.step(action)
        _, _, terminated_truth, _, _ = truth.step(action)
        assert not (terminated or terminated_truth)
        worst = max(worst, float(np.abs(identified.unwrapped.q - truth.unwrapped.q).max()))
    return worst


def test_noise_free_ols_model_follows_pybullet_without_friction(ols_without_friction):
    """Same dynamics, same trajectories: a friction-free OLS model of friction-free data against PyBullet's
    rigid body (friction=False), within 1e-3 rad over 200 steps (measured: 3e-11 rad)."""
    assert _max_difference(ols_without_friction, friction=False) < 1e-3


def test_noise_free_ols_model_with_friction_follows_pybullet_with_friction(ols_with_friction):
    assert _max_difference(ols_with_friction, friction=True, seed=1) < 1e-3


def test_a_model_with_friction_does_not_follow_pybullet_without_friction(ols_with_friction):
    """The comparison can fail: identified friction against a friction-free PyBullet drifts by far more than 1e-3."""
    identified = gymnasium.make(IDENTIFIED_ARM_ID, model=ols_with_friction)
    truth = gymnasium.make(PYBULLET_ARM_ID, robot="planar3r", friction=False)
    obs, _ = identified.reset(seed=0)
    truth.reset(seed=0)
    for _ in range(50):
        action = pd_actions(obs, identified)
        obs = identified.step(action)[0]
        truth.step(action)
    assert np.abs(identified.unwrapped.q - truth.unwrapped.q).max() > 1e-2


# ------------------------------------------------------------------------------ parameter draws


def test_covariance_draws_give_other_dynamics_at_every_reset_reproducibly(ols_noisy):
    env = gymnasium.make(IDENTIFIED_ARM_ID, model=ols_noisy, parameter_draws="covariance")
    state = (np.array([[0.3, -0.4, 0.6]]), np.array([[0.5, 0.0, -0.5]]), np.array([[2.0, 1.0, 0.5]]))
    obs_a, _ = env.reset(seed=3)
    qdd_a = env.unwrapped.forward_dynamics(*state)
    env.reset()
    qdd_b = env.unwrapped.forward_dynamics(*state)
    obs_again, _ = env.reset(seed=3)
    assert np.array_equal(env.unwrapped.forward_dynamics(*state), qdd_a) and np.array_equal(obs_again, obs_a)
    assert np.abs(qdd_a - qdd_b).max() > 1e-3
    assert np.abs(qdd_a - ols_noisy.forward_dynamics(*state)).max() > 1e-3
    # the task depends on the seed only: the same start and goal as without draws
    plain = gymnasium.make(IDENTIFIED_ARM_ID, model=ols_noisy)
    assert np.array_equal(plain.reset(seed=3)[0], obs_a)


def test_covariance_draws_need_a_covariance(robots):
    with pytest.raises(ConfigError, match="covariance"):
        gymnasium.make(IDENTIFIED_ARM_ID, model=true_model(robots["planar3r"]), parameter_draws="covariance")


# ------------------------------------------------------------------------------ pickling, async


@pytest.mark.parametrize("env_id", [IDENTIFIED_ARM_ID, PYBULLET_ARM_ID])
def test_envs_pickle_mid_episode_and_continue_alike(robots, env_id, ols_noisy):
    kwargs = {"model": ols_noisy, "parameter_draws": "covariance"} if env_id == IDENTIFIED_ARM_ID else {}
    env = gymnasium.make(env_id, robot="planar3r", render_mode="rgb_array", **kwargs)
    obs, _ = env.reset(seed=2)
    for _ in range(5):
        obs = env.step(pd_actions(obs, env))[0]
    env.render()  # a live PyBullet client exists now
    copy = pickle.loads(pickle.dumps(env))
    for _ in range(5):
        action = pd_actions(obs, env)
        obs = env.step(action)[0]
        assert np.allclose(copy.step(action)[0], obs, rtol=0, atol=1e-12)
    assert copy.render().shape == (240, 320, 3)


def test_async_vector_env_of_two_copies_steps_like_the_sync_one(robots):
    model = true_model(robots["planar3r"])
    results = []
    for mode in ("async", "sync"):
        venv = gymnasium.make_vec(IDENTIFIED_ARM_ID, num_envs=2, vectorization_mode=mode, model=model)
        obs, _ = venv.reset(seed=4)
        trace = [obs]
        for _ in range(3):
            trace.append(venv.step(np.full((2, 3), 0.2, np.float32))[0])
        venv.close()
        results.append(np.array(trace))
    assert np.array_equal(*results)


# ------------------------------------------------------------------------------ vector env


def _sync_twin(model, num_envs, autoreset_mode, **kwargs):
    return gymnasium.make_vec(
        IDENTIFIED_ARM_ID,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": autoreset_mode},
        model=model,
        **kwargs,
    )


def _assert_same_info(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if key == "final_obs":
            assert all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(a[key], b[key], strict=True))
        elif isinstance(a[key], dict):
            _assert_same_info(a[key], b[key])
        else:
            assert np.array_equal(a[key], b[key]), key


@pytest.mark.parametrize(
    ("autoreset_mode", "task", "draws"),
    [
        (AutoresetMode.NEXT_STEP, "reach", None),
        (AutoresetMode.SAME_STEP, "track", None),
        (AutoresetMode.NEXT_STEP, "track", "covariance"),
    ],
)
def test_vector_env_steps_exactly_like_a_sync_vector_env_of_single_envs(ols_noisy, autoreset_mode, task, draws):
    kwargs = {"task": task, "parameter_draws": draws, "max_episode_steps": 12}
    venv = gymnasium.make_vec(IDENTIFIED_ARM_ID, num_envs=4, model=ols_noisy, autoreset_mode=autoreset_mode, **kwargs)
    twin = _sync_twin(ols_noisy, 4, autoreset_mode, **kwargs)
    assert isinstance(venv, IdentifiedArmVectorEnv) and venv.metadata["autoreset_mode"] == autoreset_mode
    assert venv.single_observation_space == twin.single_observation_space
    assert venv.observation_space == twin.observation_space and venv.action_space == twin.action_space
    obs, info = venv.reset(seed=11)
    twin_obs, twin_info = twin.reset(seed=11)
    assert np.array_equal(obs, twin_obs)
    _assert_same_info(info, twin_info)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(40):
        actions = rng.uniform(-0.5, 0.5, venv.action_space.shape).astype(np.float32)
        step, twin_step = venv.step(actions), twin.step(actions)
        assert venv.observation_space.contains(step[0])
        assert step[0].dtype == np.float32 and step[1].shape == step[2].shape == step[3].shape == (4,)
        for ours, theirs in zip(step[:4], twin_step[:4], strict=True):
            assert np.array_equal(ours, theirs)
        _assert_same_info(step[4], twin_step[4])
        ends += int(np.sum(step[2] | step[3]))
    assert ends >= 4  # time limits (12 steps) and terminations happened and were reset


def test_vector_env_resets_deterministically_and_from_a_seed_list(robots):
    model = true_model(robots["three_axis"])
    venv = gymnasium.make_vec(IDENTIFIED_ARM_ID, num_envs=3, model=model)
    first, _ = venv.reset(seed=[5, 6, 7])
    again, _ = venv.reset(seed=5)
    assert np.array_equal(first, again)
    assert not np.array_equal(first[0], first[1])


def test_vector_env_with_autoreset_disabled_resets_only_the_masked_copies(robots):
    model = true_model(robots["planar3r"])
    venv = IdentifiedArmVectorEnv(model, num_envs=3, max_episode_steps=2, autoreset_mode=AutoresetMode.DISABLED)
    obs, _ = venv.reset(seed=0)
    venv.step(np.zeros((3, 3)))
    _, _, _, truncated, _ = venv.step(np.zeros((3, 3)))
    assert truncated.all()
    with pytest.raises(gymnasium.error.ResetNeeded, match="reset_mask"):
        venv.step(np.zeros((3, 3)))
    mask = np.array([True, False, True])
    new, info = venv.reset(options={"reset_mask": mask})
    assert np.array_equal(info["_t"], mask) and np.array_equal(venv.steps, [0, 2, 0])
    assert not np.array_equal(new[0], obs[0])


def test_vector_entry_point_is_registered_and_renders_copy_zero(robots):
    venv = gymnasium.make_vec(
        IDENTIFIED_ARM_ID, num_envs=2, model=true_model(robots["planar3r"]), render_mode="rgb_array"
    )
    assert isinstance(venv, IdentifiedArmVectorEnv)
    venv.reset(seed=0)
    (frame,) = venv.render()
    assert frame.shape == (240, 320, 3)
    venv.close()


# ------------------------------------------------------------------------------ Stable-Baselines3 adapter


def test_sb3_adapter_speaks_the_vecenv_interface(robots):
    model = true_model(robots["planar3r"])
    venv = gymnasium.make_vec(IDENTIFIED_ARM_ID, num_envs=3, model=model, autoreset_mode="SameStep")
    adapter = SB3VecEnvAdapter(venv)
    for method in ("reset", "step_async", "step_wait", "close", "get_attr", "set_attr", "env_method"):
        assert callable(getattr(adapter, method))
    assert adapter.num_envs == 3 and adapter.observation_space == venv.single_observation_space
    assert adapter.seed(9) == [9, 10, 11]
    obs = adapter.reset()
    assert np.array_equal(obs, venv.reset(seed=9)[0])  # the seeds were used
    adapter.seed(9)
    adapter.reset()
    venv.unwrapped.max_episode_steps = 2
    adapter.step(np.zeros((3, 3)))
    obs, rewards, dones, infos = adapter.step(np.zeros((3, 3)))
    assert rewards.dtype == np.float32 and dones.dtype == bool and dones.all() and len(infos) == 3
    assert all(info["TimeLimit.truncated"] for info in infos)
    assert all(info["terminal_observation"].shape == (12,) for info in infos)
    assert all(r["t"] == 0.0 for r in adapter.reset_infos) and infos[0]["t"] == pytest.approx(0.02)
    assert adapter.get_attr("max_episode_steps", [0, 1]) == [2, 2]
    assert adapter.env_is_wrapped(gymnasium.Wrapper) == [False] * 3
    with pytest.raises(ConfigError, match="SameStep"):
        SB3VecEnvAdapter(gymnasium.make_vec(IDENTIFIED_ARM_ID, num_envs=2, model=model))


def test_to_sb3_gives_a_stable_baselines3_vecenv_or_says_how_to_install_it(robots):
    venv = gymnasium.make_vec(
        IDENTIFIED_ARM_ID, num_envs=2, model=true_model(robots["planar3r"]), autoreset_mode="SameStep"
    )
    try:
        from stable_baselines3.common.vec_env import VecEnv
    except ImportError:
        with pytest.raises(ConfigError, match=r"robotid-sim\[rl\]"):
            to_sb3(venv)
        return
    sb3_env = to_sb3(venv)
    assert isinstance(sb3_env, VecEnv) and sb3_env.reset().shape == (2, 12)


# ------------------------------------------------------------------------------ registration


@pytest.mark.parametrize(
    "code",
    [
        "import robotid_sim, gymnasium; gymnasium.make('robotid_sim/PyBulletArm-v0', robot='planar3r')",
        "import gymnasium, robotid_sim; gymnasium.make('robotid_sim/PyBulletArm-v0', robot='planar3r')",
        "import gymnasium; gymnasium.make('robotid_sim:robotid_sim/PyBulletArm-v0', robot='planar3r')",
    ],
    ids=["robotid_sim-first", "gymnasium-first", "module-prefix"],
)
def test_envs_are_registered_whichever_is_imported_first(code):
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
