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
from robotid_sim.identification.validation import forward_dynamics_validation, open_loop_reference
from robotid_sim.report import EstimatorOutcome
from robotid_sim.report.tables import sequential_step_rows

SCENARIO = yaml.safe_load((Path(__file__).parents[1] / "scenarios" / "planar3r_seed003.yaml").read_text())
VALIDATION = SCENARIO["validation"]["excitation"]
HORIZON_S = 2.0


@pytest.fixture(scope="module")
def robot():
    return rid.load_robot("planar3r")


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
def clean(robot, noisy):
    """Noise-free data of the scenario's sequential excitation (the noisy data's truth: the same simulation), and
    its problem."""
    ds = noisy[0]
    truth = ds.truth
    ds = dataclasses.replace(ds, q=truth.q, qd=truth.qd, qdd=truth.qdd, tau=truth.tau)
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
    return ds, open_loop_reference(robot, ds, HORIZON_S, simulated=True)


def _relative_errors(model, robot):
    truth = robot.base_parameters().true_values()
    return np.abs(np.asarray(model.values) - truth) / np.abs(truth)


def test_sequential_recovers_base_parameters_without_noise(clean_model, robot):
    assert clean_model.parameter_names == robot.base_parameters().names
    assert _relative_errors(clean_model, robot).max() < 1e-6


def test_under_the_scenario_noise_every_parameter_with_relative_std_below_5_percent_is_within_2_percent(
    noisy_model, robot
):
    truth = robot.base_parameters().true_values()
    error = np.abs(np.asarray(noisy_model.values) - truth)
    relative_std = noisy_model.std / np.abs(truth)
    usable = relative_std < 0.05
    assert usable.sum() == len(truth)  # at 1 kHz, two frequencies and sensor noise every base parameter is usable
    relative = error / np.abs(truth)
    assert np.all(relative[usable] < 0.02), dict(zip(noisy_model.parameter_names, relative.round(4), strict=True))
    # and the reported std accounts for the errors
    assert np.all(error <= 3.5 * noisy_model.std)


def _heavy_noise_model(robot, weighting: str, tau_std):
    """``sequential`` on the scenario's excitation at 200 Hz, one frequency, with a heavy torque noise ``tau_std``."""
    excitation = {**SCENARIO["excitation"], "frequency_steps": [1.0]}
    noise = {**SCENARIO["noise"], "tau": {"std": tau_std}}
    ds = rid.simulate(robot, excitation, noise=noise, seed=1, rate_hz=200)
    return SequentialEstimator(weighting=weighting).fit(IdentificationProblem(robot, ds))


@pytest.mark.parametrize("weighting", ["none", "per_joint"])
def test_under_heavy_torque_noise_the_errors_stay_within_the_reported_standard_deviations(robot, weighting):
    """0.1 N·m on every joint (9 % of joint 3's RMS torque): parameters are off by up to 20 %, and the covariance
    (each step's plus the earlier steps' propagated through the subtraction) accounts for it."""
    model = _heavy_noise_model(robot, weighting, 0.1)
    truth = robot.base_parameters().true_values()
    error = np.abs(np.asarray(model.values) - truth)
    assert np.all(error <= 3.5 * model.std), dict(zip(model.parameter_names, (error / model.std).round(2), strict=True))
    assert (model.std / np.abs(truth)).max() > 0.05  # the noise is heavy indeed


def test_per_joint_weighting_uses_the_quiet_joints_equations(robot):
    """SIMO rows of joints with 30× different noise: the weighted steps give smaller standard deviations than
    ordinary least squares for the parameters of the distal links (identified mostly from the quiet joint 3)."""
    noise = [0.3, 0.1, 0.01]
    weighted, plain = (_heavy_noise_model(robot, w, noise) for w in ("per_joint", "none"))
    truth = robot.base_parameters().true_values()
    link3 = [i for i, name in enumerate(plain.parameter_names) if name.endswith("3")]
    assert np.all(weighted.std[link3] < 0.5 * plain.std[link3])
    assert np.all(np.abs(np.asarray(weighted.values) - truth) <= 3.5 * weighted.std)
    # each step's residual is reported in N·m, not in the weighted units
    for step in weighted.diagnostics["steps"]:
        assert step["residual_rms"] == pytest.approx(np.sqrt(np.mean(np.square(noise))), rel=0.1)


def test_every_single_joint_excitation_stays_inside_the_velocity_limit(robot, clean):
    excitation = excitation_from_config(SCENARIO["excitation"], robot)
    limit = np.array([j.velocity_limit for j in robot.joints])
    t, _, qd, _ = excitation.sample(1000.0)
    ds, problem = clean
    segments = [s for s in problem.segments if s.label == "joint"]
    steps = SCENARIO["excitation"]["frequency_steps"]
    assert [s.joint for s in segments] == [j for j in (2, 1, 0) for _ in steps]  # distal to base (seed 003 §4)
    for segment, fraction in zip(segments, steps * 3, strict=True):
        inside = segment.mask(t)
        moving = np.abs(qd[inside, segment.joint]).max()
        assert moving <= limit[segment.joint] * (1 + 1e-9)
        assert moving >= 0.99 * fraction * limit[segment.joint]  # the last frequency is raised to the limit
        held = np.delete(qd[inside], segment.joint, axis=1)
        assert np.abs(held).max() == 0.0
        # and the simulated arm too
        recorded = np.abs(ds.truth.qd[segment.mask(ds.t)]).max(axis=0)
        assert np.all(recorded <= limit * (1 + 1e-3))


def test_forward_dynamics_of_the_minimal_set_reproduces_accelerations_and_motion(clean_model, noisy_model, validation):
    ds, open_loop = validation
    for model in (clean_model, noisy_model):
        check = forward_dynamics_validation(model, ds, open_loop)
        assert check.acceleration_rsd.max() < 0.05  # M(q)⁻¹(τ − h) against the recorded accelerations
        assert np.all(np.isfinite(check.max_error))
        assert np.degrees(check.max_error).max() < 2.0  # 2 s open loop within 2° on every joint
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
    noise = np.sqrt(np.mean(np.square(SCENARIO["noise"]["tau"]["std"])))
    assert np.allclose(residuals, noise, rtol=0.1)  # the torque noise, nothing more


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
