"""BIRDy's inverse-dynamic-model estimators that need no simulation (issue 30): ``idim_tls``, ``idim_ml``, and the
constant-pullback regulariser of the physically consistent least squares."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from robotid_sim_plugins.idim_ml import IDIMMLEstimator, Preprocessing
from robotid_sim_plugins.idim_tls import TLSEstimator

from robotid_sim import plugins
from robotid_sim.errors import ConfigError
from robotid_sim.identification import IdentificationProblem
from robotid_sim.sim.dataset import Dataset
from robotid_sim.testing import exact_datasets, exact_multisine, parametrize_with_checks

RATE_HZ = 50.0


@parametrize_with_checks([TLSEstimator, IDIMMLEstimator])
def test_the_estimator_contract(estimator, check):
    check(estimator)


def _measured(robot, seed, sd_q, sd_tau, metadata=True):
    """The exact multi-sine of :mod:`robotid_sim.testing` (12 s at 50 Hz) measured with white noise ``sd_q`` on q and
    ``sd_tau`` on τ, qd and qdd by central differences of the noisy q, twice (``numpy.gradient``, as
    ``birdy_dataset``; errors in the variables); without position noise, the exact qd and qdd."""
    t, q, qd, qdd = exact_multisine(robot, 0, 12.0, RATE_HZ)
    tau = robot.inverse_dynamics(q, qd, qdd)
    rng = np.random.default_rng(seed)
    q = q + sd_q * rng.standard_normal(q.shape)
    tau = tau + sd_tau * rng.standard_normal(tau.shape)
    dt = 1.0 / RATE_HZ
    meta = {"robot": robot.name}
    if metadata:
        noise = {"preset": None, "sd_q": [sd_q] * robot.n_dof, "sd_tau": [sd_tau] * robot.n_dof}
        meta["closed_loop"] = {"noise": noise}
    if sd_q > 0:
        qd = np.gradient(q, dt, axis=0)
        qdd = np.gradient(qd, dt, axis=0)
    return Dataset(t, q, qd, qdd, tau, joint_names=robot.joint_names, metadata=meta)


def _torque_error(model, validation) -> float:
    """‖τ̂ − τ‖ / ‖τ‖ on noise-free validation data (another trajectory)."""
    tau = model.predict_torque(validation.q, validation.qd, validation.qdd)
    return float(np.linalg.norm(tau - validation.tau) / np.linalg.norm(validation.tau))


def test_with_torque_noise_only_tls_tends_to_least_squares(robots):
    """TLS − WLS is O(σ²), WLS's error O(σ): their ratio falls tenfold with the noise (measured 0.24, 0.024)."""
    robot = robots["planar3r"]
    truth = robot.base_parameters().true_values()
    ratios = []
    for sd_tau in (1e-3, 1e-4):
        problem = IdentificationProblem(robot.structure(), _measured(robot, 0, 0.0, sd_tau, metadata=False))
        wls = plugins.get_estimator("wls")().fit(problem).values
        tls = plugins.get_estimator("idim_tls")().fit(problem).values
        scale = np.linalg.norm(problem.base_regressor(), axis=0)  # in the column-scaled coordinates
        ratios.append(np.linalg.norm((tls - wls) * scale) / np.linalg.norm((wls - truth) * scale))
    assert ratios[1] < 0.05 and ratios[1] < 0.2 * ratios[0], ratios


def test_with_noise_in_q_least_squares_is_biased_ml_is_not_and_tls_is_worse(robots):
    """σ_q = 5e-4 rad at 50 Hz, differentiated twice by numpy.gradient: qdd noise √(3/8)·σ_q/h² = 0.77 rad/s², so
    OLS's inertial terms shrink (errors in the variables). Measured torque errors on clean validation data, 3
    seeds: OLS 1.7–2.0 %, idim_ml 0.24–0.38 %, idim_tls 15–17 % (its equal-noise-per-column assumption does not
    hold: the noise is in the qdd columns)."""
    robot = robots["planar3r"]
    _, _, validation = exact_datasets("planar3r")
    errors = {"ols": [], "idim_ml": [], "idim_tls": []}
    for seed in range(3):
        problem = IdentificationProblem(robot.structure(), _measured(robot, seed, 5e-4, 0.05))
        for name, found in errors.items():
            found.append(_torque_error(plugins.get_estimator(name)().fit(problem), validation))
    ols, ml, tls = (np.mean(errors[k]) for k in ("ols", "idim_ml", "idim_tls"))
    assert ols > 0.01, errors  # the case: least squares is visibly biased
    assert ml < 0.3 * ols, errors
    assert tls > 3 * ols, errors


def test_ml_reads_the_noise_from_the_closed_loop_metadata_or_estimates_sd_tau(robots):
    robot = robots["planar3r"]
    noisy = IdentificationProblem(robot.structure(), _measured(robot, 1, 1e-4, 0.05))
    model = plugins.get_estimator("idim_ml")(continuation=1).fit(noisy)
    assert model.diagnostics["noise_source"] == {"sd_q": "metadata", "sd_tau": "metadata"}
    assert model.diagnostics["position_noise_std"] == [1e-4] * 3 and model.diagnostics["converged"]
    torque_only = IdentificationProblem(robot.structure(), _measured(robot, 1, 0.0, 0.05, metadata=False))
    model = plugins.get_estimator("idim_ml")().fit(torque_only)
    assert model.diagnostics["noise_source"] == {"sd_q": "none (0: the estimate is wls's)", "sd_tau": "ols residual"}
    np.testing.assert_allclose(model.diagnostics["joint_noise_std"], 0.05, rtol=0.1)
    wls = plugins.get_estimator("wls")().fit(torque_only)
    np.testing.assert_allclose(model.values, wls.values, rtol=1e-6)


def test_ml_starts_from_the_initial_estimate_and_recovers_exact_data_with_its_noise_model_on(robots):
    robot, ds, _ = exact_datasets("planar3r")
    truth = robot.base_parameters().true_values()
    problem = IdentificationProblem(robot.structure(), ds, initial=1.2 * robot.true_parameters())
    model = plugins.get_estimator("idim_ml")(sd_q=1e-3, sd_tau=0.01).fit(problem)
    d = model.diagnostics
    assert d["start"] == "initial" and d["converged"] and d["iterations"] >= 2
    assert d["model_evaluations"] >= d["iterations"]
    big = np.abs(truth) > 1e-9
    assert np.max(np.abs(model.values - truth)[big] / np.abs(truth)[big]) < 1e-6
    from_ols = plugins.get_estimator("idim_ml")(sd_q=1e-3, sd_tau=0.01).fit(
        IdentificationProblem(robot.structure(), ds)
    )
    assert from_ols.diagnostics["start"] == "ols"


def test_ml_on_noise_free_closed_loop_data_recovers_the_truth(robots):
    """birdy_dataset's noise-free data say σ_q = σ_τ = 0: every row's variance is then the floor, not zero."""
    robot, ds, _ = exact_datasets("planar3r")
    zero = [0.0] * robot.n_dof
    ds = dataclasses.replace(ds, metadata={"closed_loop": {"noise": {"preset": None, "sd_q": zero, "sd_tau": zero}}})
    model = plugins.get_estimator("idim_ml")().fit(IdentificationProblem(robot.structure(), ds))
    truth = robot.base_parameters().true_values()
    big = np.abs(truth) > 1e-9
    assert np.max(np.abs(model.values - truth)[big] / np.abs(truth)[big]) < 1e-6
    assert model.diagnostics["noise_source"] == {"sd_q": "metadata", "sd_tau": "metadata"}


def test_the_noise_of_the_derivatives_is_propagated_through_the_preprocessing():
    h = 0.002
    expected = np.array([[1, 0, -2 / h**2], [0, 1 / (2 * h**2), 0], [-2 / h**2, 0, 6 / h**4]])
    np.testing.assert_allclose(Preprocessing("second_difference", 1 / h).noise_gram(), expected, rtol=1e-12)
    # numpy.gradient twice: qdd = (q[k+2] − 2 q[k] + q[k−2]) / (4h²), variance 6/(16 h⁴)
    gradient = Preprocessing("gradient", 1 / h).noise_gram()
    assert gradient[2, 2] == pytest.approx(6 / (16 * h**4))
    # a 50 Hz prefilter at 500 Hz, or a decimation by 4 after the differences, leaves a fraction of it
    assert Preprocessing("gradient", 1 / h, 50.0).noise_gram()[2, 2] < 0.02 * gradient[2, 2]
    assert Preprocessing("gradient", 1 / h, None, 4).noise_gram()[2, 2] < 0.1 * gradient[2, 2]
    np.testing.assert_array_equal(Preprocessing("exact", 1 / h).noise_gram(), np.diag([1.0, 0.0, 0.0]))


def test_auto_reads_birdy_datasets_preprocessing(robots):
    robot = robots["planar3r"]
    ds = _measured(robot, 0, 1e-4, 0.05)
    found = Preprocessing.of(ds, "auto", None)
    assert found == Preprocessing("gradient", found.rate_hz) and found.rate_hz == pytest.approx(RATE_HZ)
    ds.metadata["closed_loop"]["sample_rate_hz"] = 1000.0
    ds.metadata["preprocessing"] = {"derivatives": "central", "filtered": True, "cutoff_hz": 50.0, "decimation": 20}
    assert Preprocessing.of(ds, "auto", None) == Preprocessing("gradient", 1000.0, 50.0, 20)
    ds.metadata["preprocessing"].update(derivatives="exact", filtered=False)
    assert Preprocessing.of(ds, "auto", None) == Preprocessing("exact", 1000.0, None, 20)
    found = Preprocessing.of(ds, "second_difference", 10.0)
    assert found == Preprocessing("second_difference", found.rate_hz, 10.0) and found.rate_hz == pytest.approx(RATE_HZ)


@pytest.mark.parametrize(
    ("options", "field"),
    [({"sd_q": -1e-3}, "sd_q"), ({"sd_tau": float("nan")}, "sd_tau"), ({"lowpass_hz": 0}, "lowpass_hz")],
)
def test_bad_ml_options_are_one_config_error_line(options, field):
    with pytest.raises(ConfigError, match=field) as err:
        IDIMMLEstimator(**options)
    assert "\n" not in str(err.value)


def test_ml_noise_of_the_wrong_length_is_refused_before_any_work(robots):
    robot = robots["planar3r"]
    problem = IdentificationProblem(robot.structure(), _measured(robot, 0, 1e-4, 0.05))
    with pytest.raises(ConfigError, match=r"sd_q \(option\) must be one finite value ≥ 0 or 3") as err:
        IDIMMLEstimator(sd_q=[1e-4, 1e-4]).fit(problem)
    assert "\n" not in str(err.value)
    ds = _measured(robot, 0, 1e-4, 0.05)
    ds.metadata["closed_loop"]["noise"]["sd_tau"] = [0.05, -1.0, 0.05]
    with pytest.raises(ConfigError, match=r"sd_tau \(metadata\)"):
        IDIMMLEstimator().fit(IdentificationProblem(robot.structure(), ds))


# ------------------------------------------------------------------------------ the constant-pullback regulariser
def _random_data(robot, n, seed, noise=0.0):
    rng = np.random.default_rng(seed)
    q, qd, qdd = robot.structure().random_states(rng, n)
    tau = robot.inverse_dynamics(q, qd, qdd)
    tau = tau + noise * np.abs(tau).mean(axis=0) * rng.standard_normal(tau.shape)
    return Dataset(np.arange(n) * 0.005, q, qd, qdd, tau, joint_names=robot.joint_names, metadata={"robot": robot.name})


def test_constant_pullback_with_a_large_weight_gives_the_prior_and_with_weight_zero_changes_nothing(robots):
    robot = robots["planar3r"]
    problem = IdentificationProblem(robot.structure(), _random_data(robot, 40, seed=5, noise=0.2))
    prior = robot.true_parameters()
    inertial = robot.structure().parameter_slices()["inertial"]
    lmi = plugins.get_estimator("lmi_wls")
    free = lmi().fit(problem)
    pulled = lmi(regularization="constant_pullback", regularization_weight=1e6, prior="planar3r").fit(problem)
    assert np.linalg.norm((pulled.values - prior)[inertial]) < 0.05 * np.linalg.norm((free.values - prior)[inertial])
    off = lmi(regularization="constant_pullback", regularization_weight=0.0, prior="planar3r").fit(problem)
    np.testing.assert_array_equal(off.values, free.values)


def test_on_rank_deficient_data_constant_pullback_takes_the_priors_unidentified_combinations(robots):
    """4 samples of planar3r: 12 equations for 18 base parameters. Exact data and the truth as prior: the
    regularised estimates keep the truth where the data are silent, the unregularised one does not."""
    robot = robots["planar3r"]
    problem = IdentificationProblem(robot.structure(), _random_data(robot, 4, seed=3))
    truth, lmi = robot.true_parameters(), plugins.get_estimator("lmi_wls")
    inertial = robot.structure().parameter_slices()["inertial"]
    error = {}
    for kind in ("none", "euclidean", "constant_pullback"):
        model = lmi(weighted=False, regularization=kind, regularization_weight=1e-3, prior="planar3r").fit(problem)
        error[kind] = np.abs(model.values - truth)[inertial].max()
    assert error["none"] > 1.0, error
    assert error["euclidean"] < 1e-2 and error["constant_pullback"] < 1e-2, error


def test_irls_physical_offers_constant_pullback():
    irls = plugins.get_estimator("irls")(
        physical={"regularization": "constant_pullback", "regularization_weight": 1.0, "prior": "planar3r"}
    )
    assert irls.get_params()["physical"]["regularization"] == "constant_pullback"
    with pytest.raises(ConfigError, match="regularization"):
        plugins.get_estimator("lmi_wls")(regularization="pullback")
