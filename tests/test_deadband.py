"""Velocity dead-band for the Coulomb terms, stacked experiments, and IRLS diagnostics and speed (issue 9)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from robotid_sim_plugins.irls import STOP_LIMIT, STOP_SETTLED, IRLSEstimator
from robotid_sim_plugins.ols import OLSEstimator
from robotid_sim_plugins.wls import WLSEstimator

import robotid_sim as rid
from robotid_sim.errors import ConfigError, DataError, IdentificationError
from robotid_sim.identification import (
    BaseParameterModel,
    Estimator,
    IdentificationProblem,
    per_joint_variance,
    weighted_least_squares,
)
from robotid_sim.sim.dataset import Dataset
from robotid_sim.testing import check_estimator, exact_multisine


def _exact(robot, seed: int = 0, duration: float = 12.0, rate_hz: float = 50.0, **metadata) -> Dataset:
    """Noise-free multi-sine data of ``robot`` (no PyBullet run)."""
    t, q, qd, qdd = exact_multisine(robot, seed, duration, rate_hz)
    tau = robot.inverse_dynamics(q, qd, qdd)
    return Dataset(t, q, qd, qdd, tau, joint_names=robot.joint_names, metadata=metadata)


def _with(ds: Dataset, **signals) -> Dataset:
    return dataclasses.replace(ds, **signals)


@pytest.fixture(scope="module")
def planar(robots):
    return robots["planar3r"]


@pytest.fixture(scope="module")
def sequential_sine_qd_noise(planar):
    """planar3r's default excitation (sequential sine: each joint rests ~70 % of the time) with velocity noise."""
    return rid.simulate(planar, "default", noise={"qd": {"snr_db": 30}}, seed=0)


def _coulomb_errors(robot, model) -> np.ndarray:
    truth = dict(zip(robot.base_parameters().names, robot.base_parameters().true_values(), strict=True))
    values = dict(zip(model.parameter_names, model.values, strict=True))
    return np.array([abs(values[k] - truth[k]) for k in sorted(truth) if k.startswith("fc")])


# ------------------------------------------------------------------------------- dead-band evidence
def test_deadband_reduces_the_coulomb_error_of_ols(planar, sequential_sine_qd_noise):
    """At rest sign(qd) is the sign of the velocity noise: without a dead-band OLS loses ~90 % of fc;
    above 5 noise std (0.1 rad/s for a ~0.02 rad/s noise) the error is below 1 % (benchmarks/deadband.py)."""
    ds = sequential_sine_qd_noise
    plain = OLSEstimator().fit(IdentificationProblem(planar, ds))
    banded = OLSEstimator().fit(IdentificationProblem(planar, ds, velocity_deadband=0.1))
    e_plain, e_banded = _coulomb_errors(planar, plain), _coulomb_errors(planar, banded)
    assert np.all(e_plain > 0.3), e_plain
    assert np.all(e_banded < 0.1 * e_plain), (e_banded, e_plain)
    assert np.all(e_banded < 0.02), e_banded
    removed = banded.diagnostics["deadband_rows_removed"]
    assert plain.diagnostics["deadband_rows_removed"] == [0, 0, 0]
    assert all(0.5 * ds.n_samples < r < ds.n_samples for r in removed)  # the resting ~70 %
    assert removed == [int(np.sum(np.abs(ds.qd[:, j]) < 0.1)) for j in range(3)]


# ----------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "value, words",
    [
        (-0.1, "negative"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        ([0.1, 0.1], "has 2 values but the robot has 3"),
        ([0.1, -1.0, 0.1], "negative"),
        ([0.1, float("nan"), 0.1], "finite"),
        ("fast", "one number"),
        (True, "one number"),
        ({"joint1": 0.1}, "one number"),
    ],
)
def test_velocity_deadband_is_validated(planar, value, words):
    ds = _exact(planar)
    with pytest.raises(ConfigError, match="velocity_deadband") as err:
        IdentificationProblem(planar, ds, velocity_deadband=value)
    assert words in str(err.value)


@pytest.mark.parametrize("value", [None, 0.0, 0.05, [0.05, 0.0, 0.1], (0.05, 0.05, 0.05), np.array([0.1, 0.1, 0.1])])
def test_valid_velocity_deadbands_are_accepted(planar, value):
    problem = IdentificationProblem(planar, _exact(planar), velocity_deadband=value)
    assert problem.velocity_deadband is None or len(problem.velocity_deadband) == 3


@pytest.mark.parametrize(
    ("value", "words"), [([1.0, 2.0], "shape"), ("x", "numbers"), (np.full(99, np.nan), "shape"), ("nan", "NaN")]
)
def test_a_bad_initial_estimate_is_one_config_error(planar, value, words):
    p = len(planar.structure().parameter_names)
    value = np.full(p, np.nan) if isinstance(value, str) and value == "nan" else value
    with pytest.raises(ConfigError, match="'initial'") as err:
        IdentificationProblem(planar, _exact(planar), initial=value)
    assert words in str(err.value)


def test_the_initial_estimate_is_kept_with_its_base_parameters(planar):
    theta = planar.true_parameters() * 1.1
    problem = IdentificationProblem(planar, _exact(planar), initial=theta.tolist())
    np.testing.assert_array_equal(problem.initial, theta)
    np.testing.assert_allclose(problem.initial_base, 1.1 * planar.base_parameters().true_values(), rtol=1e-12)
    assert IdentificationProblem(planar, _exact(planar)).initial_base is None


def test_a_deadband_removing_every_sample_of_a_joint_is_refused(planar):
    ds = _exact(planar)
    with pytest.raises(IdentificationError, match="velocity_deadband .* removes every sample of joint") as err:
        IdentificationProblem(planar, ds, velocity_deadband=[0.0, 0.0, 10.0])
    assert planar.joint_names[2] in str(err.value)


def test_a_deadband_making_the_problem_rank_deficient_is_refused(planar, rng):
    """Joint 3 moves backwards only slowly: the dead-band keeps only its forward motion, where
    sign(qd3) = 1 and fc3 cannot be told from the offset S3."""
    q, qd, qdd = planar.random_states(rng, 600)
    qd[:, 2] = np.where(qd[:, 2] < 0, 0.01 * qd[:, 2], qd[:, 2] + 0.2)
    tau = planar.inverse_dynamics(q, qd, qdd)
    ds = Dataset(np.arange(600) * 0.01, q, qd, qdd, tau, joint_names=planar.joint_names)
    OLSEstimator().fit(IdentificationProblem(planar, ds))  # full rank without the dead-band
    problem = IdentificationProblem(planar, ds, velocity_deadband=0.1)
    with pytest.raises(IdentificationError, match="velocity_deadband .* makes the problem rank-deficient") as err:
        OLSEstimator(check_excitation=False).fit(problem)
    assert "fc3" in str(err.value) and "S3" in str(err.value)
    with pytest.raises(IdentificationError, match="rank-deficient"):
        problem.check_excitation()


# ------------------------------------------------------------------------------- third parties
class LstsqEstimator(Estimator):
    """A third-party estimator that knows nothing of dead-bands: base_regressor, torque_vector, lstsq."""

    name = "plain_lstsq"

    def __init__(self):
        pass

    def _fit(self, problem):
        beta = np.linalg.lstsq(problem.base_regressor(), problem.torque_vector(), rcond=None)[0]
        return BaseParameterModel.from_problem(problem, beta)


def test_a_third_party_lstsq_estimator_honours_the_deadband(planar, sequential_sine_qd_noise):
    ds = sequential_sine_qd_noise
    threshold = [0.1, 0.08, 0.12]
    problem = IdentificationProblem(planar, ds, velocity_deadband=threshold)
    ours = LstsqEstimator().fit(problem).values
    # by hand: every (sample, joint) row with |qd| below the joint's threshold dropped
    Y = planar.base_parameters().regressor(ds.q, ds.qd, ds.qdd)
    keep = np.abs(ds.qd) >= np.array(threshold)
    expected = np.linalg.lstsq(Y[keep], ds.tau[keep], rcond=None)[0]
    assert np.allclose(ours, expected, rtol=1e-9, atol=1e-12)
    assert np.allclose(ours, OLSEstimator().fit(problem).values, rtol=1e-9, atol=1e-12)
    assert not np.allclose(ours, LstsqEstimator().fit(IdentificationProblem(planar, ds)).values, rtol=1e-3)
    # the (N, n, b) layout has the removed rows zeroed: least squares on it gives the same estimate
    Yz = problem.base_regressor(stacked=False)
    zeroed = np.linalg.lstsq(Yz.reshape(-1, Yz.shape[-1]), ds.tau.reshape(-1), rcond=None)[0]
    assert np.allclose(zeroed, expected, rtol=1e-9, atol=1e-12)


def test_rows_in_use_are_described_row_by_row(planar, sequential_sine_qd_noise):
    ds = sequential_sine_qd_noise
    problem = IdentificationProblem(planar, ds, velocity_deadband=0.1)
    W, y = problem.base_regressor(), problem.torque_vector()
    full = problem.base_regressor(all_rows=True)
    m, n = problem.n_rows, 3
    assert W.shape == (m, full.shape[1]) and y.shape == (m,) and m < ds.n_samples * n
    index = problem.row_index()
    assert np.array_equal(W, full[index]) and np.array_equal(y, problem.torque_vector(all_rows=True)[index])
    assert np.array_equal(problem.row_joint(), index % n) and np.array_equal(problem.row_sample(), index // n)
    assert np.array_equal(ds.tau[problem.row_sample(), problem.row_joint()], y)
    assert np.all(np.abs(ds.qd[problem.row_sample(), problem.row_joint()]) >= 0.1)
    weights = problem.row_weights()
    assert (
        weights.shape == (ds.n_samples * n,) and weights.sum() == m and np.array_equal(np.flatnonzero(weights), index)
    )
    assert sum(problem.deadband_rows_removed) == ds.n_samples * n - m
    # without a dead-band nothing changes: every row, in the sample-major order of before
    plain = IdentificationProblem(planar, ds)
    assert plain.n_rows == ds.n_samples * n and np.array_equal(plain.row_weights(), np.ones(ds.n_samples * n))
    assert np.array_equal(plain.base_regressor(), full) and np.array_equal(
        plain.row_joint(), np.arange(m + sum(problem.deadband_rows_removed)) % n
    )


def test_wls_and_irls_use_only_the_rows_in_use(planar, sequential_sine_qd_noise):
    ds = sequential_sine_qd_noise
    problem = IdentificationProblem(planar, ds, velocity_deadband=0.1)
    W, y, joint = problem.base_regressor(), problem.torque_vector(), problem.row_joint()
    ols = weighted_least_squares(W, y)
    variance = per_joint_variance(ols.residual, W, 3, row_joint=joint)
    for j in range(3):  # Λ_j over joint j's kept rows only
        r = ols.residual[joint == j]
        n_j = np.count_nonzero(np.any(W[joint == j] != 0, axis=0))
        assert variance[j] == pytest.approx(r @ r / (r.size - n_j), rel=1e-12)
    wls = WLSEstimator().fit(problem)
    expected = weighted_least_squares(W, y, 1.0 / variance[joint])
    assert np.allclose(wls.values, expected.beta, rtol=1e-10, atol=1e-14)
    assert wls.diagnostics["joint_noise_std"] == pytest.approx(np.sqrt(variance).tolist(), rel=1e-12)
    irls = IRLSEstimator().fit(problem)
    assert irls.diagnostics["deadband_rows_removed"] == problem.deadband_rows_removed
    assert wls.diagnostics["deadband_rows_removed"] == problem.deadband_rows_removed
    kept_per_joint = np.bincount(joint, minlength=3)
    assert irls.diagnostics["rejected_fraction_per_joint"] == pytest.approx(
        (np.array(irls.diagnostics["rejected_per_joint"]) / kept_per_joint).tolist()
    )


# ----------------------------------------------------------------------------------- experiments
def _two_experiments(robot, stds: tuple[float, float], seed: int = 0) -> tuple[Dataset, int]:
    a, b = _exact(robot, seed=1), _exact(robot, seed=2)
    rng = np.random.default_rng(seed)
    parts = [ds.tau + std * rng.standard_normal(ds.tau.shape) for ds, std in zip((a, b), stds, strict=True)]
    N = a.n_samples
    t = np.concatenate([a.t, b.t + a.t[-1] + a.dt])
    stack = {k: np.concatenate([getattr(a, k), getattr(b, k)]) for k in ("q", "qd", "qdd")}
    experiments = [
        {"name": "quiet", "start": 0, "stop": N},
        {"name": "noisy", "start": N, "stop": 2 * N, "file": "b.csv"},
    ]
    ds = Dataset(
        t, tau=np.concatenate(parts), joint_names=robot.joint_names, metadata={"experiments": experiments}, **stack
    )
    return ds, N


def test_problem_experiments_come_from_the_metadata(planar):
    ds, N = _two_experiments(planar, (0.0, 0.0))
    problem = IdentificationProblem(planar, ds)
    assert problem.experiments == [("quiet", slice(0, N)), ("noisy", slice(N, 2 * N))]
    assert [(s.label, s.start, s.end) for s in problem.segments] == [
        ("excitation", ds.t[0], ds.t[N]),
        ("excitation", ds.t[N], pytest.approx(ds.t[-1] + ds.dt)),
    ]
    assert np.array_equal(problem.row_experiment(), np.repeat([0, 1], N * 3))
    single = IdentificationProblem(planar, _exact(planar))
    assert single.experiments == [("all", slice(0, single.n_samples))] and len(single.segments) == 1


@pytest.mark.parametrize(
    "experiments, words",
    [
        ([], "non-empty list"),
        ("a", "non-empty list"),
        (
            [{"name": "a", "start": 0, "stop": 300}, {"name": "b", "start": 310, "stop": 600}],
            "covers samples 310:600 but must start at 300",
        ),
        (
            [{"name": "a", "start": 0, "stop": 300}, {"name": "b", "start": 290, "stop": 600}],
            "covers samples 290:600 but must start at 300",
        ),
        ([{"name": "a", "start": 0, "stop": 300}], "covers samples 0:300 but the dataset has 600"),
        ([{"name": "a", "start": 0, "stop": 700}], "covers samples 0:700 but the dataset has 600"),
        ([{"name": "", "start": 0, "stop": 600}], "experiment name '' cannot be used as a file name"),
        ([{"name": "a", "start": 0, "stop": 600.0}], "start and stop must be sample indices"),
        ([{"name": "a", "start": False, "stop": 600}], "start and stop must be sample indices"),
        (
            [{"name": "a", "start": 0, "stop": 0}, {"name": "b", "start": 0, "stop": 600}],
            "covers samples 0:0 but must start at 0 and end after it",
        ),
        (["a"], "must be a mapping"),
        ([{"name": "a", "start": 0, "stop": 300}, {"name": "a", "start": 300, "stop": 600}], "names 'a' twice"),
    ],
)
def test_malformed_experiments_are_refused(planar, experiments, words):
    ds = _exact(planar, experiments=experiments)
    assert ds.n_samples == 600
    with pytest.raises(DataError, match=r"metadata\['experiments'\]") as err:
        IdentificationProblem(planar, ds)
    assert words in str(err.value)


def test_wls_per_experiment_weights_the_noisier_experiment_less(planar):
    ds, N = _two_experiments(planar, (0.01, 0.1), seed=3)
    problem = IdentificationProblem(planar, ds)
    model = WLSEstimator(per_experiment=True).fit(problem)
    assert model.options["per_experiment"] is True
    stds = model.diagnostics["experiment_noise_std"]
    assert [s["name"] for s in stds] == ["quiet", "noisy"]
    ratio = np.array(stds[1]["joint_noise_std"]) / np.array(stds[0]["joint_noise_std"])
    assert np.all((ratio > 8) & (ratio < 12)), ratio  # the noise is 10× larger in the second recording
    # the weights align with the rows: 1/Λ of the row's experiment and joint
    W, y, joint, group = (
        problem.base_regressor(),
        problem.torque_vector(),
        problem.row_joint(),
        problem.row_experiment(),
    )
    var = np.array([s["joint_noise_std"] for s in stds]) ** 2
    expected = weighted_least_squares(W, y, 1.0 / var[group, joint])
    # two solvers (the streamed normal equations, a QR of the stacked rows): ~1e-10 apart, by platform
    assert np.allclose(model.values, expected.beta, rtol=1e-8, atol=1e-14)
    pooled = WLSEstimator().fit(problem)
    assert "experiment_noise_std" not in pooled.diagnostics
    assert np.all(model.std < 0.5 * pooled.std)
    # and it helps: over 8 noise draws each parameter's RMS error is smaller than with one variance
    # per joint over both recordings (typically 4× smaller)
    truth = planar.base_parameters().true_values()
    errors = {True: [], False: []}
    for seed in range(8):
        p = IdentificationProblem(planar, _two_experiments(planar, (0.01, 0.1), seed=seed)[0])
        for flag in errors:
            errors[flag].append(WLSEstimator(per_experiment=flag).fit(p).values - truth)
    rms = {flag: np.sqrt(np.mean(np.square(e), axis=0)) for flag, e in errors.items()}
    ratio = rms[True] / rms[False]
    assert np.median(ratio) < 0.5 and np.all(ratio < 0.9), ratio


# ----------------------------------------------------------------------------------------- IRLS
def _outlier_data(robot, seed: int = 0):
    ds = _exact(robot, seed=seed)
    rng = np.random.default_rng(seed)
    outliers = np.zeros(ds.tau.shape, bool)
    outliers[rng.choice(ds.n_samples, 12, replace=False), 0] = True
    outliers[rng.choice(ds.n_samples, 5, replace=False), 2] = True
    tau = ds.tau + 0.002 * rng.standard_normal(ds.tau.shape) + 5.0 * outliers
    return _with(ds, tau=tau), outliers


def test_irls_reports_the_samples_it_rejected_per_joint(planar):
    ds, outliers = _outlier_data(planar)
    model = IRLSEstimator(threshold=1.0).fit(IdentificationProblem(planar, ds))
    d = model.diagnostics
    assert d["rejected_per_joint"] == [12, 0, 5]
    assert d["rejected_fraction_per_joint"] == pytest.approx([12 / ds.n_samples, 0.0, 5 / ds.n_samples])
    assert d["rejected_fraction"] == pytest.approx(17 / (3 * ds.n_samples))
    assert d["outliers_rejected"] == 17 and d["converged"] and d["stop_reason"] == STOP_SETTLED
    assert d["iterations"] >= 1 and model.history.values.shape[0] == d["iterations"] + 1
    assert d["rejection_limit_per_joint"] == [1.0, 1.0, 1.0]
    # with a dead-band, fractions are of each joint's rows in use
    problem = IdentificationProblem(planar, ds, velocity_deadband=0.05)
    banded = IRLSEstimator(threshold=1.0).fit(problem).diagnostics
    kept = np.bincount(problem.row_joint(), minlength=3)
    assert banded["rejected_fraction_per_joint"] == pytest.approx(
        (np.array(banded["rejected_per_joint"]) / kept).tolist()
    )
    assert banded["deadband_rows_removed"] == problem.deadband_rows_removed and sum(problem.deadband_rows_removed) > 0
    one = IRLSEstimator(max_iterations=1).fit(IdentificationProblem(planar, ds)).diagnostics
    assert one["iterations"] == 1 and not one["converged"] and one["stop_reason"] == STOP_LIMIT


def _irls_before_issue_9(problem, k_sigma: float = 3.0, max_iterations: int = 50):
    """The IRLS loop as it was: a full QR of the stacked regressor per iteration."""
    W, y, n, N = problem.base_regressor(), problem.torque_vector(), problem.n_dof, problem.n_samples

    def variance(residual, keep):
        r, Wj, use = residual.reshape(-1, n), W.reshape(-1, n, W.shape[1]), keep.reshape(-1, n)
        out = np.empty(n)
        for j in range(n):
            rows = use[:, j]
            n_j = int(np.count_nonzero(np.abs(Wj[rows, j]).max(axis=0) > 0))
            out[j] = float(r[rows, j] @ r[rows, j]) / max(int(rows.sum()) - n_j, 1)
        return np.maximum(out, 1e-12 * max(out.max(), 1e-300))

    fit = weighted_least_squares(W, y)
    keep, history = np.ones_like(y, dtype=bool), [fit.beta]
    for _ in range(max_iterations):
        var = variance(fit.residual, keep)
        r, k = fit.residual.reshape(-1, n), keep.reshape(-1, n)
        limits = np.array(
            [k_sigma * 1.4826 * np.median(np.abs(r[k[:, j], j] - np.median(r[k[:, j], j]))) for j in range(n)]
        )
        new_keep = (np.abs(fit.residual).reshape(-1, n) < np.maximum(limits, 1e-12)).reshape(-1)
        fit = weighted_least_squares(W, y, np.tile(1.0 / var, N) * new_keep)
        history.append(fit.beta)
        changed = np.count_nonzero(new_keep != keep)
        keep = new_keep
        if changed == 0:
            break
    return fit, keep, np.array(history)


@pytest.mark.parametrize("name", ["planar3r", "hyper9"])
def test_irls_gives_the_result_of_the_previous_implementation(robots, name):
    robot = robots[name]
    ds = _exact(robot, seed=4, duration=20.0 if name == "hyper9" else 12.0)
    rng = np.random.default_rng(4)
    scale = np.std(ds.tau, axis=0)
    tau = ds.tau + 0.03 * scale * rng.standard_normal(ds.tau.shape) + 8 * scale * (rng.random(ds.tau.shape) < 0.01)
    problem = IdentificationProblem(robot, _with(ds, tau=tau))
    old, keep, history = _irls_before_issue_9(problem)
    new = IRLSEstimator().fit(problem)
    rel = np.max(np.abs(new.values - old.beta)) / np.max(np.abs(old.beta))
    assert rel < 1e-10, rel
    assert np.allclose(new.covariance, old.covariance, rtol=1e-7, atol=1e-10 * np.abs(old.covariance).max())
    assert new.diagnostics["outliers_rejected"] == int(np.count_nonzero(~keep))
    assert new.history.values.shape == history.shape
    assert np.allclose(new.history.values, history, rtol=1e-9, atol=1e-10 * np.abs(history).max())


@pytest.mark.parametrize("cls", [OLSEstimator, WLSEstimator, IRLSEstimator])
def test_builtin_estimators_still_pass_check_estimator(cls):
    check_estimator(cls)


@pytest.mark.parametrize("collinearity", [1.0, 1e-5, 1e-9])
def test_the_gram_update_solve_equals_the_qr_solve(rng, collinearity):
    """JointWeightedLeastSquares (IRLS's solver) against weighted_least_squares, also when ill-conditioned
    (where it falls back to the QR) and when most rows are dropped."""
    from robotid_sim.identification.least_squares import JointWeightedLeastSquares

    m, b, n = 3000, 8, 3
    W = rng.standard_normal((m, b)) * np.logspace(-3, 2, b)
    W[:, -1] = W[:, -2] + collinearity * rng.standard_normal(m) * np.abs(W[:, -2]).mean()
    y = W @ rng.standard_normal(b) + 0.1 * rng.standard_normal(m)
    joint = np.arange(m) % n
    solver = JointWeightedLeastSquares.from_matrix(W, y, joint, n)
    lam = rng.uniform(0.5, 20, n)
    for keep in (None, rng.random(m) > 0.05, rng.random(m) > 0.8):
        weights = lam[joint] if keep is None else lam[joint] * keep
        expected = weighted_least_squares(W, y, weights)
        fit = solver.solve(lam, keep)
        scale = np.abs(expected.beta).max()
        assert np.allclose(fit.beta, expected.beta, rtol=0, atol=(1e-10 if collinearity == 1.0 else 1e-8) * scale)
        assert np.allclose(fit.residual, y - W @ fit.beta)
        if collinearity == 1.0:
            assert np.allclose(fit.covariance, expected.covariance, rtol=1e-8, atol=1e-14)
            assert np.allclose(solver.covariance(lam, keep, fit), fit.covariance, rtol=1e-12)
        kept = np.ones(m, bool) if keep is None else keep
        assert np.array_equal(
            solver.n_params(keep), [np.count_nonzero(np.any(W[kept & (joint == j)] != 0, axis=0)) for j in range(n)]
        )
