"""The sim-to-sim RL demo (``robotid-sim rl-demo``, issue 11): the optional extra, the run folder, the report.

The full demo (3 million PPO steps, minutes) is measured in docs/benchmarks.md; here a short run checks
that everything is wired and written, when Stable-Baselines3 is installed.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.cli import main
from robotid_sim.studies.rl_demo import demo_torque_limit


def test_without_stable_baselines3_the_demo_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # as if not installed
    code = main(["rl-demo", "--timesteps", "10", "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'robotid-sim[rl]'" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("flag", "value"), [("--timesteps", "0"), ("--envs", "-1"), ("--episodes", "0")])
def test_bad_numbers_are_refused_before_any_work(tmp_path, capsys, flag, value):
    pytest.importorskip("stable_baselines3")
    code = main(["rl-demo", flag, value, "--out", str(tmp_path / "runs")])
    assert code == 2 and flag in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_demo_torque_limits_are_twice_gravity_within_the_effort_limits():
    robot = rid.load_robot("planar3r")
    limit = np.array(demo_torque_limit(robot))
    effort = np.array([j.effort_limit for j in robot.joints])
    q, _, _ = robot.random_states(np.random.default_rng(0), 2000)
    gravity = np.abs(robot.inverse_dynamics(q, 0 * q, 0 * q)).max(axis=0)
    assert np.all(limit <= effort) and np.all(limit >= 0.1 * effort)
    assert np.allclose(limit, np.clip(2 * gravity, 0.1 * effort, effort))


def test_a_short_demo_writes_its_run_folder(tmp_path):
    """In a fresh interpreter: a process forked from the test's (``cli_process``) is killed by GNU OpenMP when it
    runs torch after the test's process has used OpenMP (other tests' torch estimators)."""
    pytest.importorskip("stable_baselines3")
    from helpers import run_cli

    result = run_cli(
        ["rl-demo", "--timesteps", "64", "--envs", "2", "--episodes", "1", "--out", str(tmp_path)], tmp_path
    )
    assert result.returncode == 0 and "sim-to-sim gap" in result.stdout, result.stderr
    (run_dir,) = tmp_path.iterdir()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics["summary"]) == {"identified", "pybullet"}
    for env in ("identified", "pybullet"):
        assert len(metrics["returns"][env]) == len(metrics["final_errors"][env]) == 1
        assert np.all(np.isfinite(metrics["final_errors"][env]))
    assert metrics["timesteps"] == 64 and metrics["gap"] > 0
    assert (run_dir / "plots" / "final_errors.png").stat().st_size > 0 and (run_dir / "plots" / "episode.png").exists()
    assert "Sim-to-sim gap" in (run_dir / "report.md").read_text() and (run_dir / "report.html").exists()
    assert (run_dir / "models" / "lmi_wls.json").exists()
    assert "success" in (run_dir / "report.md").read_text()
    assert 0.0 <= metrics["summary"]["pybullet"]["success_rate"] <= 1.0


def test_an_unknown_parameter_draw_is_refused_before_any_work(tmp_path):
    from robotid_sim.errors import ConfigError
    from robotid_sim.studies import run_rl_demo

    with pytest.raises(ConfigError, match=r"parameter_draws \(--parameter-draws\) must be 'covariance'"):
        run_rl_demo(tmp_path / "runs", parameter_draws="uniform")
    assert not (tmp_path / "runs").exists()
