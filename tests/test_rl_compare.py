"""What identification is worth for RL (issue 28): the recipe's pieces, the oracle's env, the CAD model, the
covariance of ``lmi_wls`` for parameter draws, the refusal of a model the envs cannot step, and a short
``rl-demo --compare`` run whose table holds every policy.

The figures (a policy within 0.05 rad, the comparison over 3 seeds) come from ``benchmarks/rl_compare.py`` and
``robotid-sim rl-demo`` (docs/benchmarks.md): training to them takes minutes.
"""

from __future__ import annotations

import json
import re
import sys

import gymnasium
import numpy as np
import pytest

from robotid_sim.envs import IDENTIFIED_ARM_ID, PYBULLET_ARM_ID
from robotid_sim.envs.identified import indefinite_mass_fraction
from robotid_sim.errors import ConfigError
from robotid_sim.identification import StandardParameterModel
from robotid_sim.robot.physical import pseudo_inertia
from robotid_sim.studies.rl_compare import CAD_ERROR, POLICIES, cad_parameters
from robotid_sim.studies.rl_demo import check_training_model, demo_torque_limit
from robotid_sim.studies.rl_training import policy_features


@pytest.fixture(scope="module")
def planar3r(robots):
    return robots["planar3r"]


def test_the_oracles_env_steps_exactly_as_the_pybullet_truth(planar3r):
    """The oracle trains on the true parameters in IdentifiedArm-v0: with friction on, its observations equal
    PyBulletArm-v0's over a whole episode of random actions (the same equations, integrator and step)."""
    limit = demo_torque_limit(planar3r)
    common = {"task": "reach", "torque_limit": limit, "max_episode_steps": 300}
    true = StandardParameterModel(planar3r.structure(), planar3r.true_parameters())
    oracle = gymnasium.make(IDENTIFIED_ARM_ID, model=true, **common)
    truth = gymnasium.make(PYBULLET_ARM_ID, robot=planar3r, **common)
    a, _ = oracle.reset(seed=3)
    b, _ = truth.reset(seed=3)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(300):
        action = np.clip(rng.normal(0.0, 0.3, 3), -1, 1).astype(np.float32)
        a, ra, ta, *_ = oracle.step(action)
        b, rb, tb, *_ = truth.step(action)
        worst = max(worst, float(np.abs(a.astype(float) - b).max()))
        assert ta == tb
    truth.close()
    assert worst <= 1e-6


def test_a_cad_model_is_consistent_within_its_error_and_has_no_friction(planar3r):
    theta = cad_parameters(planar3r, np.random.default_rng(0))
    true = planar3r.true_parameters()
    names = planar3r.structure().parameter_names
    assert len(theta) == len(true)
    for j in range(planar3r.n_dof):
        k = names.index(f"M{j + 1}")
        phi = theta[k - 9 : k + 1]  # XX..ZZ, MX, MY, MZ, M
        assert np.linalg.eigvalsh(pseudo_inertia(phi)).min() > 0
        assert abs(phi[9] / true[k] - 1) <= CAD_ERROR
        moments = true[k - 3 : k]
        assert np.all(np.abs(phi[6:9] - moments) <= CAD_ERROR * np.abs(moments) + 1e-15)
        assert phi[9] != true[k]  # it is not the truth
    friction = [i for i, name in enumerate(names) if re.fullmatch(r"(fc|fv|S)\d+", name)]
    assert friction and np.all(theta[friction] == 0)
    model = StandardParameterModel(planar3r.structure(), theta)
    assert indefinite_mass_fraction(model, planar3r) == 0.0


def test_a_model_whose_mass_matrix_is_not_positive_definite_is_refused_for_training(planar3r):
    """Regression: the demo trained on an ols model whose mass matrix was indefinite at 74 % of planar3r's
    workspace, so most episodes ended after one step and PPO learned nothing (median final error 0.49 rad
    after 3 M steps). Such a model is refused naming --estimator lmi_wls, and an env of it warns."""
    theta = planar3r.true_parameters().copy()
    names = planar3r.structure().parameter_names
    k = names.index("M3")
    theta[k - 9 : k - 3] *= -1.0  # link 3's inertia negative: no rigid body
    broken = StandardParameterModel(planar3r.structure(), theta, estimator="ols")
    assert indefinite_mass_fraction(broken, planar3r) > 0.5
    with pytest.raises(ConfigError, match=r"not positive definite at \d+% .*--estimator lmi_wls"):
        check_training_model(broken, "ols", planar3r)
    with pytest.warns(UserWarning, match="not positive definite"):
        gymnasium.make(IDENTIFIED_ARM_ID, model=broken, task="reach").close()


def test_policy_features_are_trigonometric_for_revolute_joints_and_carry_the_error():
    obs = np.array([[0.5, 0.02, 1.0, -0.5, 0.7, 0.1, 0.0, 0.0]], np.float32)  # q (2), qd (2), q* (2), qd* (2)
    x = policy_features(obs, np.array([False, True]))
    assert x.shape == (1, 10) and x.dtype == np.float32
    assert np.allclose(x[0], [np.sin(0.5), 0.02, np.cos(0.5), 0.0, 1.0, -0.5, 0.2, 0.08, -1.0, 0.5], atol=1e-6)
    assert np.array_equal(policy_features(obs[0], np.array([False, True])), x)


def test_lmi_wls_draws_move_only_the_identified_combinations(lmi_planar3r):
    """lmi_wls carries the least-squares covariance of its base parameters lifted to the standard ones, so that
    parameter_draws='covariance' works on a physically consistent model (issue 28, policy (d))."""
    model, problem = lmi_planar3r
    K = problem.base.K
    cov = np.asarray(model.covariance)
    assert cov.shape == (len(model.values),) * 2 and np.allclose(cov, cov.T)
    assert np.linalg.eigvalsh(cov).min() > -1e-12 * np.abs(cov).max()
    assert np.linalg.matrix_rank(cov, tol=1e-9 * np.abs(cov).max()) == K.shape[0]
    null = np.eye(K.shape[1]) - np.linalg.pinv(K) @ K  # the directions the data cannot see
    assert np.abs(null @ cov @ null.T).max() <= 1e-9 * np.abs(cov).max()
    env = gymnasium.make(IDENTIFIED_ARM_ID, model=model, task="reach", parameter_draws="covariance")
    env.reset(seed=0)
    env.close()


@pytest.fixture(scope="module")
def lmi_planar3r(planar3r):
    import robotid_sim as rid
    from robotid_sim.identification import IdentificationProblem

    data = rid.simulate(planar3r, {"type": "fourier", "harmonics": 5, "base_frequency": 0.1}, duration=10.0, seed=0)
    problem = IdentificationProblem(planar3r, data)
    from robotid_sim.plugins import get_estimator

    return get_estimator("lmi_wls").from_options().fit(problem), problem


def test_a_short_comparison_writes_a_table_of_every_policy(tmp_path):
    """In a fresh interpreter: a process forked from the test's (``cli_process``) is killed by GNU OpenMP when it
    runs torch after the test's process has used OpenMP (other tests' torch estimators)."""
    pytest.importorskip("stable_baselines3")
    from helpers import run_cli

    args = ["rl-demo", "--compare", "--timesteps", "64", "--envs", "2", "--seeds", "1", "--episodes", "1"]
    result = run_cli([*args, "--out", str(tmp_path)], tmp_path, columns=200)
    assert result.returncode == 0, result.stderr
    for name in POLICIES:
        assert f" {name} " in result.stdout
    (run_dir,) = tmp_path.iterdir()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert list(metrics["summary"]) == list(POLICIES)
    assert {r["policy"] for r in metrics["results"]} == set(POLICIES)
    assert all(len(r["final_errors"]) == 1 and np.isfinite(r["final_errors"]).all() for r in metrics["results"])
    assert metrics["data_seconds"]["identified"] <= 60.0 and metrics["data_seconds"]["poor"] <= 10.0
    report = (run_dir / "report.md").read_text()
    assert all(f"| {name} |" in report for name in POLICIES) and "on PyBullet" in report
    assert {p.name for p in (run_dir / "models").glob("*.json")} == {"identified.json", "poor.json", "cad.json"}
    assert {p.name for p in (run_dir / "plots").iterdir()} == {"final_errors.png", "success.png"}
    assert (run_dir / "report.html").exists()


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--seeds", "0"], r"seeds \(--seeds\) must be a whole number >= 1, got 0"),
        (["--workers", "0"], r"workers \(--workers\) must be a whole number >= 1, got 0"),
        (["--timesteps", str(10**12)], r"PPO steps.*years of training"),
    ],
)
def test_a_bad_comparison_is_refused_in_one_line_before_stable_baselines3_is_imported(
    tmp_path, monkeypatch, flags, expected
):
    from helpers import cli_process

    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # an import would raise (in the fork too)
    result = cli_process(["rl-demo", "--compare", *flags], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().count("\n") == 0 and re.search(expected, " ".join(result.stderr.split()))
    assert list(tmp_path.iterdir()) == []
