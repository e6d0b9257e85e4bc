"""The stepwise collection's options for stepwise SINDy (seed 000 §3, issue 14): many static poses and
constant-velocity sweeps from random poses, inside every limit, with exact labels."""

from __future__ import annotations

import json

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.errors import ConfigError
from robotid_sim.excitation import StepwiseExcitation
from robotid_sim.excitation.base import JointLimits
from robotid_sim.excitation.from_config import excitation_from_config

ROBOTS = ("scara", "three_axis", "planar3r", "prrrp", "hyper9")


@pytest.fixture(scope="module")
def robots():
    return {name: rid.load_robot(name) for name in ROBOTS}


def runs(mask: np.ndarray) -> int:
    return int(np.count_nonzero(np.diff(mask.astype(int)) == 1) + mask[0])


@pytest.mark.parametrize("name", ROBOTS)
@pytest.mark.parametrize("seed", [0, 5])
def test_defaults_have_thirty_poses_and_thirty_sweeps_inside_the_limits(robots, name, seed):
    robot = robots[name]
    exc = StepwiseExcitation(robot, seed=seed)
    exc.check_limits(robot)
    t, q, qd, qdd = exc.sample(200.0)
    lim = JointLimits.of(robot).shrunk(0.02)
    assert np.all(np.abs(qd) <= lim.velocity * (1 + 1e-9))
    assert np.all(np.abs(qdd) <= lim.acceleration * (1 + 1e-9))
    segs = exc.segments
    assert sum(s.label == "static" for s in segs) == 30
    assert sum(s.label == "constant_velocity" for s in segs) == 30
    for s in segs:
        sel = s.mask(t)
        if s.label == "constant_velocity":  # exact: constant qd, zero qdd, from the first to the last sample
            np.testing.assert_allclose(qd[sel], np.tile(qd[sel][0], (sel.sum(), 1)), atol=1e-12)
            np.testing.assert_allclose(qdd[sel], 0.0, atol=1e-12)
            assert s.end - s.start == pytest.approx(1.0)
        elif s.label == "static":
            assert np.abs(qd[sel]).max() <= np.deg2rad(0.1) + 1e-12
    assert exc.duration < 700


def test_sweeps_start_from_spread_poses_in_both_directions(robots):
    robot = robots["three_axis"]
    exc = StepwiseExcitation(robot, seed=0)
    t, q, qd, _ = exc.sample(100.0)
    starts = np.array([q[s.mask(t)][0] for s in exc.segments if s.label == "constant_velocity"])
    velocities = np.array([qd[s.mask(t)][0] for s in exc.segments if s.label == "constant_velocity"])
    lim = JointLimits.of(robot).shrunk(0.02)
    width = np.minimum(lim.upper, np.pi) - np.maximum(lim.lower, -np.pi)
    assert np.all(np.ptp(starts, axis=0) > 0.4 * width)  # not all through the centre
    assert np.all((velocities > 0).any(axis=0) & (velocities < 0).any(axis=0))
    assert np.all(np.abs(velocities) >= 0.2 * lim.velocity * 0.5)
    poses = np.array([q[s.mask(t)][0] for s in exc.segments if s.label == "static"])
    assert np.all(np.ptp(poses, axis=0) > 0.5 * width)


def test_counts_and_durations_are_options(robots):
    robot = robots["scara"]
    exc = StepwiseExcitation(robot, n_poses=5, n_sweeps=7, sweep_time=0.5, fourier_segments=0, seed=2)
    labels = [s.label for s in exc.segments]
    assert labels.count("static") == 5 and labels.count("constant_velocity") == 7
    t, _, _, _ = exc.sample(100.0)
    static = np.zeros_like(t, bool)
    for s in exc.segments:
        if s.label == "static":
            static |= s.mask(t)
    assert runs(static) == 5
    none = StepwiseExcitation(robot, n_poses=2, n_sweeps=0, speeds=[0.5], fourier_segments=0)
    assert [s.label for s in none.segments].count("constant_velocity") == 2  # the centred sweep, there and back
    exc.check_limits(robot)
    none.check_limits(robot)


def test_same_seed_same_trajectory_and_describe_round_trips(robots):
    robot = robots["three_axis"]
    a, b = StepwiseExcitation(robot, seed=4), StepwiseExcitation(robot, seed=4)
    t = np.linspace(0, a.duration, 2001)
    for x, y in zip(a.evaluate(t), b.evaluate(t), strict=True):
        np.testing.assert_array_equal(x, y)
    described = a.describe()
    assert "n_sweeps" not in described and "speeds" not in described  # defaults left out
    again = excitation_from_config(json.loads(json.dumps(described)), robot)
    for x, y in zip(a.evaluate(t), again.evaluate(t), strict=True):
        np.testing.assert_array_equal(x, y)
    custom = StepwiseExcitation(robot, n_sweeps=3, sweep_time=0.7, sweep_speeds=(0.3, 0.5))
    assert {"n_sweeps": 3, "sweep_time": 0.7, "sweep_speeds": [0.3, 0.5]}.items() <= custom.describe().items()


@pytest.mark.parametrize(
    "options, message",
    [
        ({"n_sweeps": -1}, "n_sweeps"),
        ({"sweep_time": 0.0}, "sweep_time"),
        ({"sweep_speeds": (0.5, 0.2)}, "sweep_speeds"),
        ({"sweep_speeds": (0.0, 0.5)}, "sweep_speeds"),
        ({"sweep_speeds": (0.5,)}, "sweep_speeds"),
    ],
)
def test_bad_sweep_options_are_clear_errors(robots, options, message):
    with pytest.raises(ConfigError, match=message):
        StepwiseExcitation(robots["scara"], **options)


def test_a_scenario_can_set_the_sweeps(robots):
    """The scenario reader did not know n_sweeps, sweep_time and sweep_speeds: a YAML could not set them."""
    cfg = {"type": "stepwise", "n_poses": 3, "n_sweeps": 3, "sweep_time": 0.5, "sweep_speeds": [0.3, 0.6]}
    exc = excitation_from_config(cfg, robots["scara"])
    assert sum(s.label == "constant_velocity" for s in exc.segments) == 3
    again = excitation_from_config(exc.describe(), robots["scara"])
    assert again.duration == exc.duration
    with pytest.raises(ConfigError, match="'sweep_time' must be a number > 0"):
        excitation_from_config({**cfg, "sweep_time": -1}, robots["scara"])
