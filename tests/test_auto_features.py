"""auto_features (seed 002, Petersen; issue 15): model-free A(q), B(q), C(q), G(q) of a revolute arm.

Data: PyBullet simulations of a planar 2R arm (planar3r with its last joint locked) and of planar3r, each
identified on one multi-sine trajectory and validated on another, with the noise of planar3r_seed002.
The estimator is imported directly (its entry point ``auto_features`` is registered in pyproject).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from robotid_sim_plugins.auto_features import AutoFeaturesEstimator
from robotid_sim_plugins.ols import OLSEstimator

import robotid_sim as rid
from robotid_sim.errors import ConfigError, DataError
from robotid_sim.identification import IdentificationProblem, LagrangianFeatureModel, load_model
from robotid_sim.identification.lagrangian_basis import LagrangianBasis, planar_terms
from robotid_sim.testing import check_estimator, exact_datasets

ROBOTS = Path(__file__).resolve().parents[1] / "robots"
#: the noise of scenarios/planar3r_seed002.yaml
NOISE = {"q": {"snr_db": 70}, "quantization": {"q": 4.8e-05}, "tau": {"std": 0.1}}
IDENTIFICATION = {"type": "fourier", "harmonics": 5, "base_frequency": 0.1, "periods": 1, "seed": 1}
VALIDATION = {"type": "fourier", "harmonics": 4, "base_frequency": 0.2, "periods": 1, "seed": 3}
#: a sidecar for the 2R arm: planar3r's friction and limits on its first two joints
SIDECAR_2R = """
gravity: [0.0, 0.0, -9.81]
friction: {model: coulomb_viscous, fc: [1.2, 0.8], fv: [0.8, 0.5], offset: [0.05, -0.03]}
limits: {velocity: [2.0, 2.0], acceleration: [8.0, 8.0]}
"""


def arm_2r(folder: Path, urdf: Path = ROBOTS / "planar3r" / "robot.urdf"):
    """A planar 2R arm in the vertical plane: planar3r with joint 3 locked at 0 (link 3 rides on link 2)."""
    sidecar = folder / "arm2r.yaml"
    sidecar.write_text(SIDECAR_2R)
    return rid.load_robot(urdf, sidecar=sidecar, lock_joints={"joint3": 0.0})


def rms(model, ds) -> float:
    """Torque RMS over every joint of ``model`` on ``ds`` (against the measured torque, as the runner's metric)."""
    return float(np.sqrt(np.mean((model.predict_torque(ds.q, ds.qd, ds.qdd) - ds.tau) ** 2)))


@dataclasses.dataclass
class Study:
    robot: object
    ds: object
    val: object
    ols: object
    model: LagrangianFeatureModel


def study(robot, periods: int) -> Study:
    ds = rid.simulate(robot, {**IDENTIFICATION, "periods": periods}, noise=NOISE, seed=0, rate_hz=200)
    val = rid.simulate(robot, VALIDATION, noise=NOISE, seed=1, rate_hz=200)
    problem = IdentificationProblem(robot, ds)
    return Study(robot, ds, val, OLSEstimator().fit(problem), AutoFeaturesEstimator().fit(problem))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("auto_features")


@pytest.fixture(scope="module")
def study_2r(folder) -> Study:
    return study(arm_2r(folder), periods=1)


@pytest.fixture(scope="module")
def study_3r() -> Study:
    return study(rid.load_robot("planar3r"), periods=2)


@pytest.fixture(params=["2r", "3r"])
def any_study(request, study_2r, study_3r) -> Study:
    return study_2r if request.param == "2r" else study_3r


# ------------------------------------------------------------------------------------ accuracy
def test_validation_torque_rms_is_within_10_percent_of_ols_on_the_full_regressor(any_study):
    s = any_study
    assert rms(s.model, s.val) <= 1.10 * rms(s.ols, s.val), (rms(s.model, s.val), rms(s.ols, s.val))


def test_mass_matrix_is_symmetric_and_positive_definite_along_the_validation_trajectory(any_study):
    A = any_study.model.A(any_study.val.q)
    assert np.array_equal(A, np.swapaxes(A, 1, 2))
    assert np.linalg.eigvalsh(A)[:, 0].min() > 0
    assert any_study.model.diagnostics["positive_definite"]
    assert any_study.model.diagnostics["max_asymmetry"] == 0.0


def test_the_fit_reports_its_loocv_smoothing_and_derivative_window(study_3r):
    d = study_3r.model.diagnostics
    (choice,) = d["smoothing"]
    assert set(choice) == {"experiment", "q", "qd"}
    assert all(m in ("polynomial", "lowess") for m in choice["q"]["method"])
    assert d["derivative_window"] in d["derivative_cv"]["windows"]
    assert d["derivative_cv"]["cv_rms"][d["derivative_cv"]["windows"].index(d["derivative_window"])] == min(
        d["derivative_cv"]["cv_rms"]
    )


def test_exact_data_give_the_true_mass_matrix():
    """On noise-free data with the exact accelerations the planar basis holds the true A(q), G(q)."""
    robot, ds, val = exact_datasets("planar3r")
    model = AutoFeaturesEstimator(smoothing="none", acceleration="dataset").fit(IdentificationProblem(robot, ds))
    np.testing.assert_allclose(model.A(val.q), robot.mass_matrix(val.q), atol=1e-9)
    np.testing.assert_allclose(model.predict_torque(val.q, val.qd, val.qdd), val.tau, atol=1e-8)


def test_the_planar_basis_of_a_3r_arm_holds_the_terms_the_seed_misses():
    mass, potential = planar_terms(3)
    a11 = {str(t) for t in mass[0, 0]}
    assert a11 == {"1", "cos(q2)", "sin(q2)", "cos(q2+q3)", "sin(q2+q3)", "cos(q3)", "sin(q3)"}
    assert {str(t) for t in mass[2, 2]} == {"1"}
    assert {str(t) for t in potential} == {f"{f}({a})" for f in ("cos", "sin") for a in ("q1", "q1+q2", "q1+q2+q3")}


# ------------------------------------------------------------------------------------ the model
def test_torque_is_a_qdd_plus_b_qdqd_plus_c_qd2_plus_g_plus_friction(study_3r):
    m, v = study_3r.model, study_3r.val
    n = m.n_dof
    pairs = np.stack([v.qd[:, j] * v.qd[:, k] for j in range(n) for k in range(j + 1, n)], axis=1)
    tau = (
        np.einsum("nij,nj->ni", m.A(v.q), v.qdd)
        + np.einsum("nip,np->ni", m.B(v.q), pairs)
        + np.einsum("nij,nj->ni", m.C(v.q), v.qd**2)
        + m.G(v.q)
        + m.friction_torque(v.qd)
    )
    np.testing.assert_allclose(tau, m.predict_torque(v.q, v.qd, v.qdd), atol=1e-9)


def test_forward_dynamics_invert_predict_torque(any_study):
    m, v = any_study.model, any_study.val
    tau = m.predict_torque(v.q, v.qd, v.qdd)
    np.testing.assert_allclose(m.forward_dynamics(v.q, v.qd, tau), v.qdd, atol=1e-8)


def test_save_load_round_trip(study_3r, tmp_path):
    m, v = study_3r.model, study_3r.val
    loaded = load_model(m.save(tmp_path / "auto_features"))
    assert isinstance(loaded, LagrangianFeatureModel) and loaded == m
    assert loaded.diagnostics["derivative_window"] == m.diagnostics["derivative_window"]
    for f in ("A", "B", "C", "G"):
        np.testing.assert_array_equal(getattr(loaded, f)(v.q), getattr(m, f)(v.q))
    np.testing.assert_array_equal(loaded.predict_torque(v.q, v.qd, v.qdd), m.predict_torque(v.q, v.qd, v.qdd))


def test_a_damaged_basis_is_refused_on_load(study_2r, tmp_path):
    path = study_2r.model.save(tmp_path / "m")
    path.write_text(path.read_text().replace('"cos"', '"tan"', 1))
    with pytest.raises(Exception, match="function in"):
        load_model(path)


def test_the_model_drives_the_identified_arm_env(study_2r):
    gymnasium = pytest.importorskip("gymnasium")
    env = gymnasium.make("robotid_sim/IdentifiedArm-v0", model=study_2r.model, robot=study_2r.robot)
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        obs, reward, *_ = env.step(env.action_space.sample())
    assert np.all(np.isfinite(obs)) and np.isfinite(reward)


# ------------------------------------------------------------------------------------ no URDF
def test_the_fit_uses_no_urdf_parameter(study_2r, folder):
    """Identifying the same data with a robot whose URDF masses and inertias are scrambled gives the same model."""
    text = (ROBOTS / "planar3r" / "robot.urdf").read_text()
    rng = np.random.default_rng(0)
    scrambled = re.sub(r'mass value="([0-9.e-]+)"', lambda m: f'mass value="{rng.uniform(0.1, 9):.4f}"', text)
    scrambled = re.sub(r'(i[xyz]{2})="([0-9.e-]+)"', lambda m: f'{m[1]}="{3.7 * float(m[2]):.6g}"', scrambled)
    scrambled = re.sub(r'(<origin xyz=")0\.17 0\.012 0\.02', r"\g<1>0.31 -0.2 0.1", scrambled)
    urdf = folder / "scrambled" / "robot.urdf"
    urdf.parent.mkdir()
    urdf.write_text(scrambled)
    other = arm_2r(urdf.parent, urdf)
    assert not np.allclose(other.true_parameters(), study_2r.robot.true_parameters())
    model = AutoFeaturesEstimator().fit(IdentificationProblem(other, study_2r.ds))
    np.testing.assert_array_equal(model.coefficients, study_2r.model.coefficients)


# ------------------------------------------------------------------------------------ bad input
def test_a_prismatic_joint_is_a_clear_config_error():
    robot = rid.load_robot("scara")
    ds = rid.simulate(robot, duration=1.0, rate_hz=50)
    with pytest.raises(ConfigError, match=r"revolute.*prismatic|prismatic.*revolute"):
        AutoFeaturesEstimator().fit(IdentificationProblem(robot, ds))


def test_nan_in_the_positions_is_a_clear_data_error(study_2r):
    ds = study_2r.ds
    q = ds.q.copy()
    q[7, 1] = np.nan
    broken = dataclasses.replace(ds, q=ds.q.copy())
    object.__setattr__(broken, "q", q)  # the Dataset refuses NaN on construction; a caller's object may not
    with pytest.raises(DataError, match=r"'q' contains NaN.*sample 7"):
        AutoFeaturesEstimator().fit(IdentificationProblem(study_2r.robot, broken))


def test_too_few_samples_is_a_clear_data_error(study_2r):
    ds = study_2r.ds
    short = dataclasses.replace(
        ds, t=ds.t[:6], q=ds.q[:6], qd=ds.qd[:6], qdd=ds.qdd[:6], tau=ds.tau[:6], truth=None, metadata={}
    )
    with pytest.raises(DataError, match="6 samples; at least 12"):
        AutoFeaturesEstimator().fit(IdentificationProblem(study_2r.robot, short))


def test_data_that_do_not_excite_every_coefficient_is_an_identification_error(study_2r):
    from robotid_sim.errors import IdentificationError

    ds = study_2r.ds
    short = dataclasses.replace(
        ds, t=ds.t[:14], q=ds.q[:14], qd=ds.qd[:14], qdd=ds.qdd[:14], tau=ds.tau[:14], truth=None, metadata={}
    )
    with pytest.raises(IdentificationError, match="excite only 14 of the 25 coefficients"):
        AutoFeaturesEstimator(friction="coulomb_viscous", features="general", order=4).fit(
            IdentificationProblem(study_2r.robot, short)
        )


def test_a_bad_option_names_it():
    with pytest.raises(ConfigError, match="features"):
        AutoFeaturesEstimator(features="spatial")


def test_the_basis_round_trips_through_its_dict():
    basis = LagrangianBasis.build(3, "general", order=3, friction="viscous")
    assert LagrangianBasis.from_dict(basis.to_dict()).names == basis.names


def test_the_estimator_passes_the_contract_checks():
    check_estimator(AutoFeaturesEstimator)
