"""The ``sequential`` estimator (seed 003 §3.2, §4, §5.1) and the minimal set's forward dynamics (§3.3)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml
from robotid_sim_plugins.sequential import SequentialEstimator

import robotid_sim as rid
from robotid_sim.errors import IdentificationError
from robotid_sim.excitation import excitation_from_config
from robotid_sim.identification import IdentificationProblem
from robotid_sim.identification.validation import rollout
from robotid_sim.report import EstimatorOutcome
from robotid_sim.report.tables import sequential_step_rows
from robotid_sim.scenario.runner import OpenLoopReference, forward_dynamics_validation

SCENARIO = yaml.safe_load((Path(__file__).parents[1] / "scenarios" / "planar3r_seed003.yaml").read_text())
VALIDATION = SCENARIO["validation"]["excitation"]
HORIZON_S = 2.0


@pytest.fixture(scope="module")
def robot():
    return rid.load_robot("planar3r")


@pytest.fixture(scope="module")
def clean(robot):
    """Noise-free data of the scenario's sequential excitation, and its problem."""
    ds = rid.simulate(robot, SCENARIO["excitation"], rate_hz=SCENARIO["simulation"]["rate_hz"])
    return ds, IdentificationProblem(robot, ds)


@pytest.fixture(scope="module")
def noisy(robot):
    """The scenario's data: its excitation, noise and seed."""
    ds = rid.simulate(
        robot,
        SCENARIO["excitation"],
        noise=SCENARIO["noise"],
        seed=SCENARIO["seed"],
        rate_hz=SCENARIO["simulation"]["rate_hz"],
    )
    return ds, IdentificationProblem(robot, ds)


@pytest.fixture(scope="module")
def clean_model(clean):
    return SequentialEstimator().fit(clean[1])


@pytest.fixture(scope="module")
def noisy_model(noisy):
    return SequentialEstimator().fit(noisy[1])


@pytest.fixture(scope="module")
def validation(robot):
    """The scenario's validation trajectory, noise-free, and its 2 s open-loop reference (the true robot's
    rollout under the true torque, as the runner makes it)."""
    ds = rid.simulate(robot, VALIDATION, rate_hz=SCENARIO["simulation"]["rate_hz"])
    K = int(round(HORIZON_S / ds.dt))
    args = (ds.q[0], ds.qd[0], ds.tau[:K], ds.dt)
    reference = rollout(robot.forward_dynamics, *args)[0]
    return ds, OpenLoopReference(ds.t[:K] - ds.t[0], reference, *args)


def _relative_errors(model, robot):
    truth = robot.base_parameters().true_values()
    return np.abs(np.asarray(model.values) - truth) / np.abs(truth)


def test_sequential_recovers_base_parameters_without_noise(clean_model, robot):
    assert clean_model.parameter_names == robot.base_parameters().names
    assert _relative_errors(clean_model, robot).max() < 1e-6


def test_sequential_under_scenario_noise_is_within_its_standard_deviations(noisy_model, robot):
    truth = robot.base_parameters().true_values()
    error = np.abs(np.asarray(noisy_model.values) - truth)
    std = noisy_model.std
    relative_std = std / np.abs(truth)
    # the covariance (each step's OLS covariance plus the earlier steps' propagated through the subtraction)
    # accounts for the errors
    assert np.all(error <= 3.5 * std), dict(zip(noisy_model.parameter_names, (error / std).round(2), strict=True))
    # parameters identified to better than 2 % / 3 (3σ inside 2 %) are within 2 %; the others within 2 %
    # wherever their relative std is below 5 % and 2 % is more than 1.5σ of them
    relative = error / np.abs(truth)
    precise = relative_std < 0.02 / 3
    assert precise.sum() >= 6
    assert np.all(relative[precise] < 0.02)
    usable = (relative_std < 0.05) & (0.02 > 1.5 * relative_std)
    assert np.all(relative[usable] < 0.02)


def test_every_single_joint_excitation_stays_inside_the_velocity_limit(robot, clean):
    excitation = excitation_from_config(SCENARIO["excitation"], robot)
    limit = np.array([j.velocity_limit for j in robot.joints])
    t, _, qd, _ = excitation.sample(1000.0)
    ds, problem = clean
    segments = [s for s in problem.segments if s.label == "joint"]
    assert [s.joint for s in segments] == [2, 1, 0]  # distal to base (seed 003 §4)
    for segment in segments:
        inside = segment.mask(t)
        moving = np.abs(qd[inside, segment.joint]).max()
        assert moving <= limit[segment.joint] * (1 + 1e-9)
        assert moving >= 0.99 * limit[segment.joint]  # the frequency was raised to the limit
        held = np.delete(qd[inside], segment.joint, axis=1)
        assert np.abs(held).max() == 0.0
        # and the simulated arm too
        recorded = np.abs(ds.truth.qd[segment.mask(ds.t)]).max(axis=0)
        assert np.all(recorded <= limit * (1 + 1e-3))


def test_forward_dynamics_of_the_minimal_set_reproduces_accelerations_and_motion(clean_model, noisy_model, validation):
    ds, open_loop = validation
    for model in (clean_model, noisy_model):
        check = forward_dynamics_validation(model, ds, open_loop)
        assert np.all(np.isfinite(check.max_error))
        assert np.degrees(check.max_error).max() < 2.0  # 2 s open loop within 2° on every joint
    check = forward_dynamics_validation(clean_model, ds, open_loop)
    assert check.acceleration_rsd.max() < 0.05
    assert check.q_open_loop.shape == open_loop.q_reference.shape


def test_rank_check_and_condition_number_of_every_step(clean_model, noisy_model, robot):
    for model, extra in ((clean_model, 0), (noisy_model, 1)):
        steps = model.diagnostics["steps"]
        assert [s["joint"] for s in steps] == [2, 1, 0]
        added = [name for s in steps for name in s["parameters"]]
        assert sorted(added) == sorted(robot.base_parameters().names)
        assert steps[0]["parameters"] == ["ZZ3", "MX3", "MY3", "fc3", "fv3", "S3"]
        for s in steps:
            assert s["rank_h"] == s["expected_rank"]
            assert s["rank_h_tau"] == s["rank_h"] + extra  # seed 003 §3.2: noise raises rank [H τ] by one
            assert 1.0 < s["condition_number"] < 1e3
        assert model.diagnostics["rank_check"] == ("consistent" if extra == 0 else "noisy")
    assert max(s["residual_rms"] for s in clean_model.diagnostics["steps"]) < 1e-9
    residuals = [s["residual_rms"] for s in noisy_model.diagnostics["steps"]]
    assert np.allclose(residuals, SCENARIO["noise"]["tau"]["std"], rtol=0.1)  # the torque noise, nothing more


def test_the_report_lists_the_steps(clean_model, robot):
    outcome = EstimatorOutcome.of_model("sequential", clean_model, {}, np.zeros((1, 3)), None)
    headers, rows = sequential_step_rows(outcome, list(robot.joint_names))
    assert headers[2] == "parameters added" and len(rows) == 3
    assert rows[0][1].text == robot.joint_names[2]
    assert rows[2][2].text == "ZZ1, MX1, MY1, fc1, fv1, S1"


def test_data_without_single_joint_segments_is_refused(robot):
    ds = rid.simulate(robot, VALIDATION, rate_hz=100)
    with pytest.raises(IdentificationError, match="sequential_sine"):
        SequentialEstimator().fit(IdentificationProblem(robot, ds))


def test_a_joint_without_its_segment_is_refused(clean, robot):
    ds, _ = clean
    metadata = dict(ds.metadata)
    metadata["segments"] = [s for s in ds.metadata["segments"] if s["joint"] != 0]
    problem = IdentificationProblem(robot, dataclasses.replace(ds, metadata=metadata))
    with pytest.raises(IdentificationError, match=robot.joint_names[0]):
        SequentialEstimator().fit(problem)


def test_a_segment_whose_other_joints_move_is_refused(robot):
    ds = rid.simulate(robot, VALIDATION, rate_hz=100)
    metadata = dict(ds.metadata)
    third = float(ds.t[-1]) / 3
    metadata["segments"] = [
        {"label": "joint", "start": k * third, "end": (k + 1) * third, "joint": 2 - k} for k in range(3)
    ]
    problem = IdentificationProblem(robot, dataclasses.replace(ds, metadata=metadata))
    with pytest.raises(IdentificationError, match="not a single-joint excitation"):
        SequentialEstimator().fit(problem)
