"""The ``semiparametric`` estimator (seed 001 §4.4, Eq. 33): a rigid-body model plus an MLP trained on its
residual. The data is exact multi-sine motion of the bundled planar 3R arm whose torque holds a
velocity-dependent effect its Coulomb + viscous friction model cannot express."""

from __future__ import annotations

import json

import numpy as np
import pytest
from robotid_sim_plugins.semiparametric import SemiparametricEstimator

from robotid_sim import plugins
from robotid_sim.errors import ConfigError, IdentificationError
from robotid_sim.identification import IdentificationProblem, MLPCorrection, ResidualModel, load_model
from robotid_sim.robot import load_robot
from robotid_sim.sim.dataset import Dataset, Signals
from robotid_sim.testing import parametrize_with_checks

#: training options of the fits below: fewer epochs than the default, enough for this short record
FAST = {"epochs": 300}
#: a quick fit, for the tests that check plumbing rather than accuracy
QUICK = {"epochs": 15, "hidden": [8]}


def unmodelled(qd: np.ndarray) -> np.ndarray:
    """A smooth velocity-dependent torque (N·m) per joint: not in the span of fc·sign(qd) + fv·qd + offset."""
    return 0.3 * np.sin(3.0 * qd) + 0.2 * qd**2


def multisine(robot, seed: int, duration: float = 20.0, rate_hz: float = 50.0):
    """(t, q, qd, qdd): four sines per joint with exact derivatives, inside the joint and velocity limits."""
    rng = np.random.default_rng(seed)
    n = robot.n_dof
    t = np.arange(int(duration * rate_hz)) / rate_hz
    w = 2 * np.pi * np.array([0.15, 0.35, 0.6, 0.9])
    amp = rng.uniform(-1, 1, size=(n, w.size))
    amp *= 0.4 * 3.1 / np.abs(amp).sum(axis=1, keepdims=True)
    amp = np.minimum(np.abs(amp), robot.velocity_limit[:, None] / w / w.size) * np.sign(amp)
    arg = w * t[:, None, None] + rng.uniform(0, 2 * np.pi, size=(n, w.size))
    q = np.sum(amp * np.sin(arg), axis=2)
    qd = np.sum(amp * w * np.cos(arg), axis=2)
    qdd = -np.sum(amp * w**2 * np.sin(arg), axis=2)
    return t, q, qd, qdd


def recording(robot, seed: int, noise: float = 0.0, effect=unmodelled, **kwargs) -> Dataset:
    t, q, qd, qdd = multisine(robot, seed, **kwargs)
    true_tau = robot.inverse_dynamics(q, qd, qdd) + effect(qd)
    tau = true_tau + noise * np.random.default_rng(100 + seed).standard_normal(true_tau.shape)
    return Dataset(t, q, qd, qdd, tau, truth=Signals(q, qd, qdd, true_tau), joint_names=robot.joint_names)


@pytest.fixture(scope="module")
def study():
    """(robot, problem on a noisy record, validation record of another trajectory)."""
    robot = load_robot("planar3r")
    return robot, IdentificationProblem(robot.structure(), recording(robot, 0, noise=0.02)), recording(robot, 1)


@pytest.fixture(scope="module")
def fitted(study):
    """{'coupled': the seed's network (all joint velocities in, one hidden layer of 36), 'per_joint': ...}."""
    _, problem, _ = study
    return {
        "coupled": SemiparametricEstimator(**FAST).fit(problem),
        "per_joint": SemiparametricEstimator(**FAST, per_joint=True).fit(problem),
    }


def rms(a, b) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


# -------------------------------------------------------------------------------------------- contract
@parametrize_with_checks([SemiparametricEstimator])
def test_semiparametric_passes_the_contract(estimator, check):
    """Including exact recovery on noise-free data: the rigid-body part is exact there, the residual is
    rounding error and so is the correction, which is scaled by it (no ``biased`` exemption needed)."""
    check(estimator)


def test_registered_under_its_name_with_the_seed_defaults():
    assert plugins.get_estimator("semiparametric") is SemiparametricEstimator
    params = SemiparametricEstimator().get_params()
    assert params["rigid_body"] == {"name": "wls", "options": {}}
    assert params["inputs"] == ["qd"] and params["hidden"] == [36] and params["activation"] == "tanh"
    assert params["per_joint"] is False and params["seed"] == 0
    assert SemiparametricEstimator(rigid_body="irls").get_params()["rigid_body"] == {"name": "irls", "options": {}}


# -------------------------------------------------------------------------------------------- accuracy
@pytest.mark.parametrize("kind, at_most", [("coupled", 0.8), ("per_joint", 0.5)])
def test_correction_lowers_the_torque_error_on_another_trajectory(study, fitted, kind, at_most):
    """The rigid-body model alone cannot express the velocity effect; with the learned correction the torque
    RMS on a different (noise-free) trajectory drops clearly, by 34 % (coupled) and 73 % (per joint) here."""
    _, _, validation = study
    model = fitted[kind]
    assert isinstance(model, ResidualModel) and model.base.estimator == "wls"
    truth = validation.truth.tau
    rigid = rms(model.base.predict_torque(validation.q, validation.qd, validation.qdd), truth)
    semi = rms(model.predict_torque(validation.q, validation.qd, validation.qdd), truth)
    assert rigid > 0.1  # the effect is there and the rigid-body model misses it
    assert semi < at_most * rigid, (semi, rigid)
    d = model.diagnostics
    assert np.all(np.array(d["residual_rms_after"]) < 0.6 * np.array(d["residual_rms_before"]))


def test_diagnostics_describe_both_parts_and_the_training(study, fitted):
    _, problem, _ = study
    d = fitted["coupled"].diagnostics
    assert d["rigid_body"]["estimator"] == "wls"
    assert d["rigid_body"]["diagnostics"]["condition_number"] > 1
    assert d["network_parameters"] == (1 * 3 + 1) * 36 + (36 + 1) * 3  # 3 velocities -> 36 -> 3 torques
    assert fitted["per_joint"].diagnostics["network_parameters"] == 3 * ((1 + 1) * 36 + 36 + 1)
    assert d["training_samples"] + d["validation_samples"] == problem.n_samples
    assert d["validation_samples"] == round(0.2 * problem.n_samples)
    assert 1 <= d["best_epoch"] <= d["epochs_run"] <= FAST["epochs"]
    assert d["validation_loss"] == pytest.approx(min(d["validation_loss_curve"]))
    assert len(d["train_loss_curve"]) == d["epochs_run"] and d["loss_curve_every"] == 1
    assert d["train_loss_curve"][-1] < 0.5 * d["train_loss_curve"][0]
    assert len(d["residual_rms_before"]) == len(d["residual_scale"]) == 3
    assert d["deadband_rows_removed"] == [0, 0, 0] and "fit_time_s" in d
    json.dumps(d)


# ------------------------------------------------------------------------------------------ persistence
def test_save_load_gives_identical_predictions_without_pickle(study, fitted, tmp_path):
    _, _, validation = study
    model = fitted["per_joint"]
    path = model.save(tmp_path / "models" / "semi.json")
    assert sorted(p.name for p in path.parent.iterdir()) == ["semi.json", "semi.npz"]
    with np.load(path.with_suffix(".npz"), allow_pickle=False) as arrays:  # plain numeric arrays only
        assert all(arrays[k].dtype.kind == "f" for k in arrays.files)
        assert {"correction/W0", "correction/W1", "correction/x_std", "base/values"} <= set(arrays.files)
    saved = json.loads(path.read_text())
    assert saved["kind"] == "residual" and saved["estimator"] == "semiparametric"
    assert saved["options"]["per_joint"] is True and saved["correction"]["inputs"] == ["qd"]
    loaded = load_model(path)
    assert isinstance(loaded, ResidualModel) and loaded == model
    args = (validation.q, validation.qd, validation.qdd)
    assert np.array_equal(loaded.predict_torque(*args), model.predict_torque(*args))
    tau = validation.truth.tau[::10]
    qdd = loaded.forward_dynamics(validation.q[::10], validation.qd[::10], tau)
    assert np.all(np.isfinite(qdd)) and np.array_equal(
        qdd, model.forward_dynamics(validation.q[::10], validation.qd[::10], tau)
    )
    # forward dynamics inverts the model's own inverse dynamics, the correction included
    assert np.allclose(loaded.predict_torque(validation.q[::10], validation.qd[::10], qdd), tau, atol=1e-9)


# ---------------------------------------------------------------------------------- network structure
def test_per_joint_correction_reads_only_its_own_joint(fitted):
    rng = np.random.default_rng(0)
    q, qd = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    for kind, coupled in (("per_joint", False), ("coupled", True)):
        correction = fitted[kind].correction
        assert isinstance(correction, MLPCorrection)
        moved = qd.copy()
        moved[:, 0] += 0.5
        change = np.abs(correction(q, moved, q) - correction(q, qd, q)).max(axis=0)
        assert change[0] > 1e-3
        if coupled:
            assert change[1:].max() > 1e-6  # one network: every output sees every velocity
        else:
            assert np.all(change[1:] == 0.0)  # block diagonal: exactly no cross-talk


@pytest.mark.parametrize("per_joint", [False, True])
def test_the_saved_numpy_network_is_the_trained_torch_network(study, per_joint):
    """The training loss torch reports equals the loss of the numpy MLPCorrection the weights were copied
    into, recomputed from the residual: the layers (block-diagonal ones too, with two signals per joint)
    are laid out right."""
    _, problem, _ = study
    options = {**QUICK, "inputs": ["q", "qd"], "per_joint": per_joint, "validation_fraction": 0}
    model = SemiparametricEstimator(**options).fit(problem)
    ds = problem.dataset
    residual = ds.tau - model.base.predict_torque(ds.q, ds.qd, ds.qdd)
    scaled = (residual - model.correction(ds.q, ds.qd, ds.qdd)) / model.correction.y_scale
    assert model.diagnostics["train_loss"] == pytest.approx(np.mean(scaled**2), rel=1e-10)
    assert model.correction.y_scale == pytest.approx(residual.std(axis=0))
    assert model.correction.x_mean == pytest.approx(np.concatenate([ds.q.mean(axis=0), ds.qd.mean(axis=0)]))


def test_inputs_activation_and_layers_are_honoured(study):
    _, problem, validation = study
    model = SemiparametricEstimator(
        epochs=15, inputs=["q", "qd", "qdd"], hidden=[6, 5], activation="relu", validation_fraction=0
    ).fit(problem)
    c = model.correction
    assert c.inputs == ("q", "qd", "qdd") and c.activation == "relu"
    assert [W.shape for W in c.weights] == [(6, 9), (5, 6), (3, 5)]
    assert model.diagnostics["validation_samples"] == 0 and model.diagnostics["validation_loss"] is None
    assert model.diagnostics["epochs_run"] == model.diagnostics["best_epoch"] == 15
    qdd = model.forward_dynamics(validation.q[:20], validation.qd[:20], validation.truth.tau[:20])
    assert np.all(np.isfinite(qdd))  # reads qdd: the generic forward dynamics (n + 1 torque predictions)


def test_rigid_body_estimator_and_its_options_are_used(study):
    _, problem, _ = study
    model = SemiparametricEstimator(rigid_body={"name": "irls", "options": {"k_sigma": 4.0}}, **QUICK).fit(problem)
    assert model.base.estimator == "irls" and model.base.options["k_sigma"] == 4.0
    assert model.diagnostics["rigid_body"]["estimator"] == "irls"
    assert "iterations" in model.diagnostics["rigid_body"]["diagnostics"]


# -------------------------------------------------------------------------------------- determinism
def test_same_seed_same_weights_other_seed_other_weights(study):
    import torch

    _, problem, _ = study
    threads, state = torch.get_num_threads(), torch.get_rng_state()
    first = SemiparametricEstimator(**QUICK).fit(problem).correction
    again = SemiparametricEstimator(**QUICK).fit(problem).correction
    other = SemiparametricEstimator(**QUICK, seed=1).fit(problem).correction
    assert all(
        np.array_equal(a, b) for a, b in zip(first.weights + first.biases, again.weights + again.biases, strict=True)
    )
    assert not np.array_equal(first.weights[0], other.weights[0])
    assert torch.get_num_threads() == threads  # the caller's torch settings are left as they were
    assert torch.equal(torch.get_rng_state(), state)


# ------------------------------------------------------------------------------------------- dead-band
def test_deadband_rows_do_not_count(study):
    """Rows the velocity dead-band removes do not enter the loss: spoiling their torque changes nothing,
    while without the dead-band the same spoiled rows distort the model."""
    robot, problem, validation = study
    ds = problem.dataset
    threshold = 0.05
    slow = np.abs(ds.qd) < threshold
    assert 0 < slow.sum() < slow.size
    spoiled = Dataset(ds.t, ds.q, ds.qd, ds.qdd, np.where(slow, ds.tau + 30.0, ds.tau), joint_names=ds.joint_names)
    estimator = SemiparametricEstimator(**QUICK)
    clean = estimator.fit(IdentificationProblem(robot.structure(), ds, velocity_deadband=threshold))
    masked = estimator.fit(IdentificationProblem(robot.structure(), spoiled, velocity_deadband=threshold))
    unmasked = estimator.fit(IdentificationProblem(robot.structure(), spoiled))
    assert masked.diagnostics["deadband_rows_removed"] == slow.sum(axis=0).tolist()
    args = (validation.q, validation.qd, validation.qdd)
    reference = clean.predict_torque(*args)
    assert np.allclose(masked.predict_torque(*args), reference, rtol=0, atol=1e-9)
    assert rms(unmasked.predict_torque(*args), reference) > 0.1
    assert rms(masked.predict_torque(*args), validation.truth.tau) < 0.3


# ---------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "options, option, message",
    [
        ({"rigid_body": {"name": "no_such_estimator"}}, "rigid_body", "no_such_estimator"),
        ({"rigid_body": {"name": "semiparametric"}}, "rigid_body", "cannot be 'semiparametric' itself"),
        ({"rigid_body": "semiparametric"}, "rigid_body", "cannot be 'semiparametric' itself"),
        ({"rigid_body": {"name": "wls", "options": {"bogus": 1}}}, "rigid_body", "bogus"),
        ({"rigid_body": {"name": "irls", "options": {"k_sigma": -1}}}, "rigid_body", "k_sigma"),
        ({"inputs": ["x"]}, "inputs.0", "'q', 'qd' or 'qdd'"),
        ({"inputs": []}, "inputs", "at least 1"),
        ({"inputs": ["qd", "qd"]}, "inputs", "['qd'] is repeated"),
        ({"hidden": [0]}, "hidden.0", "greater than or equal to 1"),
        ({"hidden": []}, "hidden", "at least 1"),
        ({"hidden": [4] * 9}, "hidden", "at most 8"),
        ({"activation": "sigmoid"}, "activation", "'tanh' or 'relu'"),
        ({"epochs": 0}, "epochs", "greater than or equal to 1"),
        ({"learning_rate": 0}, "learning_rate", "greater than 0"),
        ({"validation_fraction": 0.9}, "validation_fraction", "less than or equal to 0.5"),
        ({"patience": 0}, "patience", "greater than or equal to 1"),
        ({"seed": -1}, "seed", "greater than or equal to 0"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(options, option, message):
    for build in (SemiparametricEstimator, SemiparametricEstimator.from_options):
        with pytest.raises(ConfigError) as info:
            build(**options)
        text = str(info.value)
        assert f"option '{option}'" in text and message in text and "semiparametric" in text


def test_too_few_samples_for_the_validation_split_says_what_to_change(study):
    robot, problem, _ = study
    short = IdentificationProblem(robot.structure(), problem.dataset.slice(0, 60))
    with pytest.raises(IdentificationError, match=r"60 samples are too few .*validation_fraction = 0.2.*set it to 0"):
        SemiparametricEstimator(**QUICK).fit(short)
    model = SemiparametricEstimator(**QUICK, validation_fraction=0).fit(short)  # without a hold-out it trains
    assert model.diagnostics["training_samples"] == 60


def test_a_network_too_large_to_save_is_refused_before_any_work(study):
    _, problem, _ = study
    with pytest.raises(ConfigError, match=r"options 'hidden' \[4096, 4096, 4096\] and 'per_joint' True on 3 joints"):
        SemiparametricEstimator(hidden=[4096] * 3, per_joint=True).fit(problem)


def test_measurement_outliers_are_left_out_of_the_loss(study):
    """The network learned torque spikes (current-measurement outliers) as a function of the velocity, which no
    other trajectory repeats: on hyper9_seed001 it came out worse than its rigid-body model. Residuals beyond
    ``outlier_k_sigma`` robust standard deviations no longer count."""
    robot, problem, validation = study
    ds = problem.dataset
    rng = np.random.default_rng(5)
    spikes = rng.random(ds.tau.shape) < 0.02
    spoiled = Dataset(
        ds.t, ds.q, ds.qd, ds.qdd, ds.tau + spikes * rng.choice([-20.0, 20.0], ds.tau.shape), joint_names=ds.joint_names
    )
    options = {**QUICK, "rigid_body": "irls"}  # the rigid-body part rejects the spikes itself
    clean = SemiparametricEstimator(**options).fit(problem)
    robust = SemiparametricEstimator(**options).fit(IdentificationProblem(robot.structure(), spoiled))
    naive = SemiparametricEstimator(**options, outlier_k_sigma=None).fit(
        IdentificationProblem(robot.structure(), spoiled)
    )
    assert robust.diagnostics["outliers_left_out"] >= spikes.sum() and naive.diagnostics["outliers_left_out"] == 0
    args = (validation.q, validation.qd, validation.qdd)
    reference = clean.predict_torque(*args)
    assert rms(robust.predict_torque(*args), reference) < 0.2 * rms(naive.predict_torque(*args), reference)
