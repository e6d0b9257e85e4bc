"""Issue 27, defects 4, 7, 8 and 11 (simulate, closed loop, rl-demo): absurd sizes are refused up front with
the estimate, every seed entry point refuses a negative seed, a refused command leaves nothing behind, and an
excitation cut short by a shorter duration is named as the cause of a failed identification.

The rl-demo cases run without Stable-Baselines3 (it is not installed in CI): each check must come before it
is imported, which ``sys.modules["stable_baselines3"] = None`` makes visible (an import would fail with the
"pip install" message instead).
"""

from __future__ import annotations

import re
import sys
import time

import numpy as np
import pytest
import yaml
from helpers import cli_process, run_cli

import robotid_sim as rid
from robotid_sim.cli import main
from robotid_sim.errors import ConfigError, IdentificationError
from robotid_sim.sim.simulate import resolve_excitation

#: a Fourier excitation lasting 10^5 s (27.8 h): 10^8 physics steps, about 65 GB to simulate
ABSURD_EXCITATION = {"type": "fourier", "harmonics": 3, "base_frequency": 1e-5, "periods": 1}


def _listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# ------------------------------------------------------------------------------------------- simulate
def test_simulate_refuses_an_absurd_excitation_in_under_2_s_with_the_estimate(robots):
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"would need about [\d.]+ GB of memory \(limit") as info:
        rid.simulate(robots["planar3r"], ABSURD_EXCITATION)
    assert time.perf_counter() - start < 2.0  # the limit; measured 0.5 s (resolving the excitation)
    assert "1e+08 physics steps" in str(info.value) and "--duration" in str(info.value)


def test_simulate_checks_the_limits_of_only_the_part_of_the_excitation_it_plays(robots):
    robot = robots["planar3r"]
    excitation = resolve_excitation(robot, ABSURD_EXCITATION)
    seen = []
    evaluate = type(excitation).evaluate

    def spy(self, t):
        seen.append(float(np.max(t)))
        return evaluate(self, t)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(excitation), "evaluate", spy)
        excitation.check_limits(robot, duration=0.5)
    assert seen and max(seen) == 0.5


def test_the_cli_refuses_an_absurd_excitation_file_before_simulating_and_writes_nothing(tmp_path):
    (tmp_path / "long.yaml").write_text(yaml.safe_dump(ABSURD_EXCITATION))
    before = _listing(tmp_path)
    args = ["simulate", "--robot", "planar3r", "--excitation", "long.yaml", "--out", "data.npz"]
    proc = run_cli(args, tmp_path, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: this simulation") and "GB of memory" in lines[0] and "--duration" in lines[0]
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("seed", [-1, 1.5, "0"])
def test_simulate_refuses_a_seed_numpy_does_not_take(robots, seed):
    with pytest.raises(ConfigError, match=r"seed must be a whole number >= 0"):
        rid.simulate(robots["planar3r"], "default", duration=0.01, seed=seed)


def test_a_default_excitation_cut_short_is_named_as_the_cause_of_the_failed_identification(robots):
    robot = robots["planar3r"]
    ds = rid.simulate(robot, "default", duration=3.0, rate_hz=100)
    cut = ds.metadata["excitation_cut"]
    assert "lasts 54.99 s" in cut and "['joint1', 'joint2']" in cut
    with pytest.raises(IdentificationError, match=r"rank-deficient.*The cause: the excitation 'sequential_sine'"):
        rid.identify(ds, robot, "ols")


def test_an_excitation_played_whole_is_not_called_cut(robots):
    ds = rid.simulate(robots["planar3r"], {"type": "fourier", "harmonics": 2, "base_frequency": 2.0}, duration=0.2)
    assert "excitation_cut" not in ds.metadata


# ------------------------------------------------------------------------------------------- closed loop
def test_run_closed_loop_refuses_an_absurd_duration_with_the_estimate(robots):
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"the closed loop \(1 controllers x 1e\+12 steps\) would need about"):
        rid.run_closed_loop(robots["planar3r"], "pd", duration=1e9)
    assert time.perf_counter() - start < 2.0


def test_a_closed_loop_whose_controllers_all_fail_leaves_no_runs_folder_and_blames_the_gains(tmp_path):
    before = _listing(tmp_path)
    args = ["closed-loop", "--robot", "planar3r", "--controller", 'pid:{"kp": 1e7, "kd": 0}', "--duration", "0.1"]
    proc = run_cli(args, tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert "the controller 'pid' did not track it" in error and "excitation amplitude" not in error
    assert _listing(tmp_path) == before


# ------------------------------------------------------------------------------------------- rl-demo
@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--timesteps", str(10**15)], r"1e\+15 PPO steps.*years of training"),
        (["--envs", str(10**9)], r"1,000,000,000 env copies.*TB of memory"),
        (["--episodes", str(10**9)], r"1,000,000,000 evaluation episodes.*years of training"),
        (["--seed", "-1"], r"seed \(--seed\) must be a whole number >= 0, got -1"),
        (["--envs", "0"], r"num_envs \(--envs\) must be a whole number >= 1"),
    ],
)
def test_rl_demo_refuses_bad_sizes_and_seeds_before_importing_stable_baselines3(tmp_path, monkeypatch, flags, expected):
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # an import would raise (in the fork too)
    result = cli_process(["rl-demo", *flags], tmp_path)
    err = result.stderr
    assert result.returncode == 2 and "Traceback" not in err and err.strip().count("\n") == 0, err
    assert re.search(expected, " ".join(err.split())), err
    assert _listing(tmp_path) == []


def test_rl_demo_refuses_an_unknown_estimator_before_importing_stable_baselines3(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)
    result = cli_process(["rl-demo", "--estimator", "nosuch"], tmp_path)
    assert result.returncode == 2 and "unknown estimator 'nosuch'" in result.stderr
    assert _listing(tmp_path) == []


def test_rl_demo_refusal_in_a_process_exits_2_and_leaves_nothing(tmp_path):
    before = _listing(tmp_path)
    proc = run_cli(["rl-demo", "--timesteps", str(10**15)], tmp_path, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error: this RL demo"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert _listing(tmp_path) == before


def test_a_closed_loop_run_folder_keeps_each_controllers_time_series(tmp_path, capsys):
    args = ["closed-loop", "--robot", "planar3r", "--controller", "pd", "--controller", "ff=feedforward"]
    assert main([*args, "--duration", "0.05", "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    (run_dir,) = tmp_path.iterdir()
    for label in ("pd", "ff"):
        with np.load(run_dir / "closed_loop" / f"{label}.npz") as series:
            assert str(series["controller"]) == label and series["t"].shape == (50,)
            assert all(series[name].shape == (50, 3) for name in ("q", "qd", "q_ref", "qd_ref", "tau"))
            assert np.all(np.isfinite(series["tau"]))


# ------------------------------------------------------------------------------------------- random states
def test_random_states_of_an_unlimited_prismatic_joint_stay_within_a_sensible_stroke(robots, monkeypatch):
    robot = robots["prrrp"]
    unlimited = (np.full(robot.n_dof, -np.inf), np.full(robot.n_dof, np.inf))
    monkeypatch.setattr(type(robot), "position_limits", property(lambda self: unlimited))
    q, _, _ = robot.random_states(np.random.default_rng(0), 2000)
    prismatic = np.array(robot.joint_kinds) == "prismatic"
    assert prismatic.any() and np.abs(q[:, prismatic]).max() <= 0.2  # metres, not ±π m
    assert np.abs(q[:, ~prismatic]).max() > 3.0  # continuous revolute joints keep ±π rad


def test_rl_demo_names_its_cli_flag_for_an_estimator_without_forward_dynamics(tmp_path, monkeypatch):
    """The refusal of a model the envs cannot step names ``--estimator`` (it said "give robot=…", a Python
    keyword); noise-free 12 s multisines stand in for the demo's 55 s of simulated data."""
    from robotid_sim import sim
    from robotid_sim.studies import rl_demo
    from robotid_sim.testing import exact_datasets

    robot, data, _ = exact_datasets("planar3r")
    monkeypatch.setattr(sim, "simulate", lambda *args, **kwargs: data)
    with pytest.raises(ConfigError) as info:
        rl_demo._training_model(robot, "sindy", 0, tmp_path)
    message = str(info.value)
    assert "--estimator" in message and "without forward dynamics" in message and "robot=" not in message
    assert not (tmp_path / "models").exists()


def test_a_rate_too_low_to_record_two_samples_is_refused_before_simulating(tmp_path):
    """``simulate --rate 1e-9`` simulated the whole excitation, then failed on a one-sample dataset without naming
    the rate; the step and sample counts are checked first."""
    result = cli_process(["simulate", "--robot", "planar3r", "--rate", "1e-9", "--out", "a.csv"], tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "rate_hz = 1e-09 Hz gives 1 sample; a dataset needs at least 2" in result.stderr
    assert "simulate" not in result.stderr.replace("simulation:", "")  # no progress bar: nothing was simulated
    assert _listing(tmp_path) == []
