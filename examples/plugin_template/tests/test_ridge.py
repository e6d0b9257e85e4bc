"""Tests a plugin package should have: it is found through its entry point, and it works."""

import numpy as np
import pytest
from robotid_sim_myestimator import RidgeEstimator

import robotid_sim as rid
from robotid_sim.plugins import estimators, list_plugins, reset_plugin_manager
from robotid_sim.testing import parametrize_with_checks


@parametrize_with_checks([RidgeEstimator])
def test_ridge_passes_the_estimator_contract(estimator, check):
    check(estimator)


def test_ridge_is_registered_through_the_entry_point():
    reset_plugin_manager()
    assert estimators()["ridge"] is RidgeEstimator
    info = {p.name: p for p in list_plugins()}["myestimator"]
    assert info.ok and info.distribution == "robotid-sim-myestimator"


def test_ridge_with_tiny_alpha_agrees_with_ols():
    robot = rid.load_robot("planar3r")
    data = rid.simulate(robot, seed=0)  # the robot's default excitation, no noise
    ridge = rid.identify(data, robot, "ridge", alpha=1e-12)
    ols = rid.identify(data, robot, "ols")
    assert np.allclose(ridge.values, ols.values, rtol=1e-4, atol=1e-8)


def test_negative_alpha_is_refused():
    with pytest.raises(rid.ConfigError, match="option 'alpha': Input should be greater than or equal to 0"):
        RidgeEstimator.from_options(alpha=-1.0)
