"""Essential parameters (Pham and Gautier 1991; issue 31 deliver 4): the base parameters the data determine."""

from __future__ import annotations

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.errors import ConfigError
from robotid_sim.identification import IdentificationProblem
from robotid_sim.identification.essential import essential_parameters
from robotid_sim.identification.evaluation import evaluate
from robotid_sim.plugins import get_estimator
from robotid_sim.report import EstimatorOutcome, StudyResult
from robotid_sim.report.markdown import render_html, render_markdown

NOISE = {"q": {"snr_db": 70}, "qd": {"snr_db": 50}, "qdd": {"snr_db": 30}, "tau": {"std": 0.5}}
VALIDATION = {"type": "fourier", "harmonics": 5, "base_frequency": 0.04, "periods": 1, "seed": 1}


@pytest.fixture(scope="module")
def hyper9():
    """hyper9, one period of its default excitation at 50 Hz with noise on every signal, and a validation log."""
    robot = rid.load_robot("hyper9")
    data = rid.simulate(robot, "default", noise=NOISE, rate_hz=50, seed=0)
    validation = rid.simulate(robot, VALIDATION, noise=NOISE, rate_hz=50, seed=1)
    return robot, IdentificationProblem(robot, data), validation


@pytest.fixture(scope="module")
def exact_planar3r():
    robot = rid.load_robot("planar3r")
    return robot, IdentificationProblem(robot, rid.simulate(robot, "default", noise=None))


def _rms(model, ds) -> float:
    return float(np.sqrt(np.mean((model.predict_torque(ds.q, ds.qd, ds.qdd) - ds.tau) ** 2)))


@pytest.mark.parametrize("name", ["ols", "wls", "irls"])
def test_hyper9_essential_set_is_smaller_and_validates_within_2_percent_of_the_base_model(hyper9, name):
    _, problem, validation = hyper9
    full = get_estimator(name)().fit(problem)
    essential = get_estimator(name)(essential=True).fit(problem)
    b = len(problem.base_parameter_names)
    kept = essential.diagnostics["essential_parameters"]
    assert kept < b
    assert np.count_nonzero(essential.values) == kept
    assert len(essential.diagnostics["essential_dropped"]) == b - kept
    assert essential.diagnostics["essential_residual_growth"] <= 0.002
    assert abs(_rms(essential, validation) / _rms(full, validation) - 1) < 0.02
    np.testing.assert_allclose(essential.diagnostics["essential_full_values"], full.values, rtol=1e-9, atol=1e-12)


def test_each_step_drops_the_parameter_with_the_largest_relative_std(hyper9):
    """The first step checked against a dense least squares of the stacked regressor."""
    _, problem, _ = hyper9
    W, y = problem.base_regressor(), problem.torque_vector()
    beta, *_ = np.linalg.lstsq(W, y, rcond=None)
    sigma2 = np.sum((y - W @ beta) ** 2) / (W.shape[0] - W.shape[1])
    std = np.sqrt(sigma2 * np.diag(np.linalg.inv(W.T @ W)))
    relative = 100 * std / np.abs(beta)
    chosen = essential_parameters(problem.least_squares(), problem.base_parameter_names)
    first_name, first_std = chosen.dropped[0]
    assert first_name == problem.base_parameter_names[int(np.argmax(relative))]
    assert first_std == pytest.approx(relative.max(), rel=1e-6)
    # the covariance of the kept parameters is the least squares' on their columns
    idx = np.flatnonzero(chosen.kept)
    Wk = W[:, idx]
    bk = np.linalg.lstsq(Wk, y, rcond=None)[0]
    np.testing.assert_allclose(chosen.beta[idx], bk, rtol=1e-7, atol=1e-10)
    assert np.all(chosen.beta[~chosen.kept] == 0)


def test_exact_data_keeps_every_base_parameter(exact_planar3r):
    robot, problem = exact_planar3r
    chosen = essential_parameters(problem.least_squares(), problem.base_parameter_names)
    assert chosen.kept.all() and not chosen.dropped
    np.testing.assert_allclose(chosen.beta, robot.base_parameters().true_values(), rtol=1e-8, atol=1e-10)


def test_bad_essential_options_are_one_line(exact_planar3r):
    with pytest.raises(ConfigError, match="essential_threshold"):
        get_estimator("ols")(essential=True, essential_threshold=0)
    with pytest.raises(ConfigError, match="use one of them"):
        get_estimator("irls")(essential=True, physical=True)
    _, problem = exact_planar3r
    with pytest.raises(ConfigError, match="threshold"):
        essential_parameters(problem.least_squares(), problem.base_parameter_names, threshold=float("nan"))


def test_the_report_lists_the_dropped_parameters_and_the_validation_change(hyper9):
    robot, problem, validation = hyper9
    model = get_estimator("wls")(essential=True).fit(problem)
    evaluation = evaluate(model, validation, truth=robot.base_parameters())
    change = evaluation.metrics["essential_validation_change_pct"]
    full = model.with_values(np.asarray(model.diagnostics["essential_full_values"]))
    assert change == pytest.approx(100 * (_rms(model, validation) / _rms(full, validation) - 1), rel=1e-9)
    assert "essential_full_values" not in evaluation.metrics
    outcome = EstimatorOutcome.of_model("wls", model, evaluation.metrics, evaluation.tau_predicted, None)
    study = StudyResult(
        title="essential",
        robot_name=robot.name,
        joint_names=list(robot.joint_names),
        scenario={"name": "essential"},
        t_validation=validation.t,
        tau_measured=validation.tau,
        tau_true=validation.truth.tau,
        outcomes=[outcome],
    )
    text = render_markdown(study, {})
    assert "## Essential parameters (Pham and Gautier 1991)" in text
    first = model.diagnostics["essential_dropped"][0]
    assert first in text and f"{change:.3g}"[:4] in text
    assert "Essential parameters" in render_html(study, {})
