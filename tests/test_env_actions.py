"""Issue 27, defect 6: every env refuses a bad action, an unknown or bad keyword argument, a bad seed or reset
option with a project error naming what is expected, before the arm moves; finite actions out of [-1, 1] are
still clipped."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from test_envs import true_model

import robotid_sim as rid
from robotid_sim.envs import (
    IDENTIFIED_ARM_ID,
    PYBULLET_ARM_ID,
    IdentifiedArmEnv,
    IdentifiedArmVectorEnv,
    PyBulletArmEnv,
)
from robotid_sim.envs.sb3 import SB3VecEnvAdapter
from robotid_sim.errors import ConfigError, DataError

#: actions a planar3r env (3 joints) must refuse, by what is wrong with them
BAD_ACTIONS = {
    "nan": np.array([np.nan, 0.0, 0.0]),
    "inf": np.array([0.0, np.inf, 0.0], np.float32),
    "-inf": [0.0, 0.0, -np.inf],
    "(3, 3)": np.zeros((3, 3)),
    "(3, 1)": np.zeros((3, 1)),
    "(1, 3)": np.zeros((1, 3)),
    "(2,)": np.zeros(2),
    "(4,)": np.zeros(4),
    "scalar": 0.5,
    "strings": ["a", "b", "c"],
    "ragged": [0.1, [0.2, 0.3], 0.4],
}


@pytest.fixture(scope="module")
def planar3r():
    return rid.load_robot("planar3r")


@pytest.fixture(scope="module")
def model(planar3r):
    return true_model(planar3r)


@pytest.fixture(scope="module")
def single_envs(model, planar3r):
    envs = {
        "identified": gymnasium.make(IDENTIFIED_ARM_ID, model=model),
        "pybullet": gymnasium.make(PYBULLET_ARM_ID, robot=planar3r),
    }
    for env in envs.values():
        env.reset(seed=0)
    yield envs
    for env in envs.values():
        env.close()


@pytest.mark.parametrize("kind", ["identified", "pybullet"])
@pytest.mark.parametrize("bad", BAD_ACTIONS, ids=list(BAD_ACTIONS))
def test_single_envs_refuse_a_non_finite_or_misshapen_action_before_moving(single_envs, kind, bad):
    env = single_envs[kind]
    q, steps = env.unwrapped.q.copy(), env.unwrapped.steps
    with pytest.raises(DataError, match=r"shape \(3,\) \(one value in \[-1, 1\] per joint|must be finite") as info:
        env.step(BAD_ACTIONS[bad])
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)
    assert np.array_equal(env.unwrapped.q, q) and env.unwrapped.steps == steps  # nothing moved
    env.step(np.zeros(3))  # the env goes on


def test_finite_actions_outside_the_box_are_clipped_as_documented(model):
    env = gymnasium.make(IDENTIFIED_ARM_ID, model=model)
    env.reset(seed=1)
    outside = env.step(np.array([5.0, -7.0, 0.5]))
    env.reset(seed=1)
    clipped = env.step(np.array([1.0, -1.0, 0.5]))
    assert np.array_equal(outside[0], clipped[0]) and outside[1] == clipped[1]


@pytest.mark.parametrize(
    "bad",
    [np.zeros((3, 3)), np.zeros((2, 3, 1)), np.zeros(3), np.zeros((2, 2)), [[0.0, np.nan, 0.0], [0.0] * 3]],
    ids=["(3, 3)", "(2, 3, 1)", "(3,)", "(2, 2)", "nan"],
)
def test_the_vector_env_and_the_sb3_adapter_take_only_finite_actions_of_shape_copies_by_joints(model, bad):
    venv = gymnasium.make_vec(IDENTIFIED_ARM_ID, num_envs=2, model=model, autoreset_mode="SameStep")
    venv.reset(seed=0)
    q = venv.q.copy()
    with pytest.raises(DataError, match=r"shape \(2, 3\) \(one row per copy|must be finite"):
        venv.step(bad)
    assert np.array_equal(venv.q, q) and not venv.steps.any()
    adapter = SB3VecEnvAdapter(venv)
    with pytest.raises(DataError, match=r"shape \(2, 3\)|must be finite"):
        adapter.step(bad)
    assert np.array_equal(venv.q, q)


def _makers(model, robot):
    """Every way to make an env, each taking extra keyword arguments."""
    return {
        "make identified": lambda **kw: gymnasium.make(IDENTIFIED_ARM_ID, model=model, **kw),
        "make pybullet": lambda **kw: gymnasium.make(PYBULLET_ARM_ID, robot=robot, **kw),
        "make_vec": lambda **kw: gymnasium.make_vec(IDENTIFIED_ARM_ID, num_envs=2, model=model, **kw),
        "IdentifiedArmEnv": lambda **kw: IdentifiedArmEnv(model, **kw),
        "PyBulletArmEnv": lambda **kw: PyBulletArmEnv(robot, **kw),
        "IdentifiedArmVectorEnv": lambda **kw: IdentifiedArmVectorEnv(model, **kw),
    }


MAKERS = [
    "make identified",
    "make pybullet",
    "make_vec",
    "IdentifiedArmEnv",
    "PyBulletArmEnv",
    "IdentifiedArmVectorEnv",
]


@pytest.mark.filterwarnings("ignore:.*render_mode='window'")
@pytest.mark.parametrize("maker", MAKERS)
def test_unknown_and_bad_keyword_arguments_raise_config_error_naming_them(model, planar3r, maker):
    make = _makers(model, planar3r)[maker]
    with pytest.raises(ConfigError, match=r"unknown option\(s\) \['colour'\]; valid options: \[.*'task'.*'control_dt'"):
        make(colour="red")
    bad_values = {
        "control_dt": "fast",
        "physics_dt": float("nan"),
        "task": 3,
        "torque_limit": [float("nan")] * 3,
        "render_mode": "window",
    }
    for option, value in bad_values.items():
        with pytest.raises(ConfigError, match=option):
            make(**{option: value})
    with pytest.raises(ConfigError, match="1,000,000,000 physics steps per env step, more than 100,000"):
        make(control_dt=1e6)  # an env step that would never end


@pytest.mark.parametrize(
    ("option", "value"),
    [("max_episode_steps", -1), ("num_envs", 10**12)],
)
def test_the_vector_env_refuses_bad_sizes_before_allocating(model, option, value):
    with pytest.raises(ConfigError, match=option):
        gymnasium.make_vec(IDENTIFIED_ARM_ID, model=model, **{"num_envs": 2, option: value})


def test_a_missing_model_or_robot_is_a_config_error():
    with pytest.raises(ConfigError, match="model="):
        gymnasium.make(IDENTIFIED_ARM_ID)
    with pytest.raises(ConfigError, match="model="):
        IdentifiedArmVectorEnv(num_envs=2)
    with pytest.raises(ConfigError, match="robot="):
        gymnasium.make(PYBULLET_ARM_ID)


@pytest.mark.parametrize("kind", ["identified", "pybullet"])
def test_single_envs_refuse_bad_seeds_and_unknown_reset_options(single_envs, kind):
    env = single_envs[kind]
    for seed in (-1, 1.5, "0", True):
        with pytest.raises(ConfigError, match="seed"):
            env.reset(seed=seed)
    with pytest.raises(ConfigError, match=r"unknown reset option\(s\) \['low'\]"):
        env.reset(options={"low": -0.1})
    assert np.array_equal(env.reset(seed=np.int64(3))[0], env.reset(seed=3, options={})[0])


def test_the_vector_env_refuses_bad_seeds_and_reset_options(model):
    venv = IdentifiedArmVectorEnv(model, num_envs=2)
    for seed in (-1, [1], [0, -1], "ab", 2.0):
        with pytest.raises(ConfigError, match="seed"):
            venv.reset(seed=seed)
    with pytest.raises(ConfigError, match=r"unknown reset option\(s\) \['low'\]; valid keys: \['reset_mask'\]"):
        venv.reset(options={"low": -0.1})
    with pytest.raises(ConfigError, match="reset_mask"):
        venv.reset(options={"reset_mask": [True, False]})
    assert np.array_equal(venv.reset(seed=np.array([4, 5]))[0], venv.reset(seed=4)[0])
