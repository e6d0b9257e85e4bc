"""One evaluation (issue 26): the metrics of a model on validation data, under one set of names, with the model's
own diagnostics copied by a rule rather than a list."""

from __future__ import annotations

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim.identification import metrics as M
from robotid_sim.identification.evaluation import METRIC_NAMES, diagnostic_keys, evaluate, reported_diagnostics
from robotid_sim.identification.validation import open_loop_reference


@pytest.fixture(scope="module")
def fitted():
    robot = rid.load_robot("planar3r")
    excitation = {"type": "fourier", "harmonics": 3, "base_frequency": 0.25, "seed": 1}
    ds = rid.simulate(robot, excitation, duration=4.0, rate_hz=100, noise={"tau": {"std": 0.05}}, seed=0)
    validation = {**excitation, "seed": 7}
    ds_val = rid.simulate(robot, validation, duration=4.0, rate_hz=100, noise={"tau": {"std": 0.05}}, seed=1)
    return robot, rid.identify(ds, robot, "ols"), ds_val


def test_a_simulated_evaluation_has_every_figure_of_runs_and_sweeps(fitted):
    robot, model, ds_val = fitted
    open_loop = open_loop_reference(robot, ds_val, 0.5, simulated=True)
    evaluation = evaluate(model, ds_val, truth=robot.base_parameters(), open_loop=open_loop, condition_number=3.0)
    metrics = evaluation.metrics
    for name in ("torque_rms_total", "torque_relative_error_vs_truth", "base_parameter_error", "trajectory_rms_total"):
        assert np.isfinite(metrics[name]), name
    pred = model.predict_torque(ds_val.q, ds_val.qd, ds_val.qdd)
    assert metrics["torque_rms_total"] == float(M.torque_rms_total(ds_val.tau, pred))
    assert metrics["torque_relative_error_vs_truth"] == float(
        M.relative_parameter_error(pred.ravel(), ds_val.truth.tau.ravel())
    )
    assert metrics["condition_number"] == 3.0
    assert evaluation.tau_predicted.shape == ds_val.tau.shape and evaluation.has_forward_dynamics


def test_without_a_truth_the_figures_that_need_one_are_none_or_absent(fitted):
    _, model, ds_val = fitted
    metrics = evaluate(model, ds_val).metrics
    assert metrics["torque_rms_vs_truth_total"] is None and metrics["torque_relative_error_vs_truth"] is None
    assert "base_parameter_error" not in metrics and "trajectory_rms_total" not in metrics
    assert metrics["torque_nrms_limit_pct"] is None  # no effort limits given


def test_numbers_and_short_number_lists_of_the_diagnostics_are_reported_the_rest_is_not(fitted):
    _, model, _ = fitted
    model.diagnostics.update(
        {
            "iterations": np.int64(4),
            "converged": True,
            "per_joint": np.array([1.0, 2.0, 3.0]),
            "with_gaps": [1, None, 2.5],
            "stop_reason": "tolerance",
            "steps": [{"step": 1}],
            "matrix": np.eye(2),
            "long": list(range(1000)),
            "fit_time_s": 123.0,  # a metric's name: the metric wins
        }
    )
    reported = reported_diagnostics(model)
    assert reported["iterations"] == 4 and reported["converged"] == 1.0
    assert reported["per_joint"] == [1.0, 2.0, 3.0] and reported["with_gaps"] == [1, None, 2.5]
    assert not {"stop_reason", "steps", "matrix", "long", "fit_time_s"} & set(reported)
    row = {"estimator": "ols", "torque_rms_total": 1.0, **reported}
    assert diagnostic_keys(row) == list(reported)
    assert "fit_time_s" in METRIC_NAMES
