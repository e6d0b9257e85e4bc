"""Validation metrics (SPEC §9), checked against values computed by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robotid_sim.errors import DataError
from robotid_sim.identification import metrics as M

# o: observed, p: predicted, 2 samples x 2 joints; errors o - p = [[1, 0], [3, -4]]
O = np.array([[1.0, 0.0], [3.0, 0.0]])
P = np.array([[0.0, 0.0], [0.0, 4.0]])


# ------------------------------------------------------------------------------ RMS
def test_torque_rms_is_per_joint_root_mean_square_of_the_residual():
    assert np.allclose(M.torque_rms(O, P), [np.sqrt((1 + 9) / 2), np.sqrt(16 / 2)])


def test_torque_rms_total_is_the_rms_over_all_samples_and_joints():
    assert M.torque_rms_total(O, P) == pytest.approx(np.sqrt((1 + 9 + 0 + 16) / 4))


def test_rms_index_is_seed_004_eq_45_and_equals_torque_rms():
    assert np.array_equal(M.rms_index(O, P), M.torque_rms(O, P))


def test_rms_of_a_perfect_prediction_is_zero(rng):
    o = rng.normal(size=(50, 3))
    assert np.array_equal(M.torque_rms(o, o), np.zeros(3))


def test_one_dimensional_signals_are_one_joint():
    assert M.torque_rms([1.0, 3.0], [0.0, 0.0]).shape == (1,)


# ------------------------------------------------------------------------------ RSD
def test_rsd_of_a_constant_offset():
    o = np.array([[3.0], [4.0]])
    # Σ(o-p)² = 1 + 1 = 2, Σo² = 9 + 16 = 25
    assert M.rsd(o, o + 1.0) == pytest.approx([np.sqrt(2 / 25)])


def test_rsd_of_a_perfect_prediction_is_zero(rng):
    o = rng.normal(size=(20, 2))
    assert np.array_equal(M.rsd(o, o), [0.0, 0.0])


def test_rsd_of_an_all_zero_observation_is_zero_if_exact_else_inf():
    o = np.zeros((3, 2))
    p = np.array([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    assert M.rsd(o, p).tolist() == [0.0, np.inf]


# ------------------------------------------------------------------------------- AI
def test_agreement_index_of_a_perfect_prediction_is_one(rng):
    o = rng.normal(size=(30, 4))
    assert np.allclose(M.agreement_index(o, o), 1.0)


def test_agreement_index_by_hand():
    o = np.array([1.0, 2.0, 3.0])
    p = np.array([1.0, 2.0, 4.0])
    # ō = 2; Σ(o-p)² = 1; |p-ō| + |o-ō| = [1+1, 0+0, 2+1] -> Σ² = 4 + 0 + 9 = 13
    assert M.agreement_index(o, p) == pytest.approx([1 - 1 / 13])


def test_predicting_the_observed_mean_has_agreement_zero():
    o = np.array([1.0, 3.0])
    assert M.agreement_index(o, [2.0, 2.0]) == pytest.approx([0.0])


def test_agreement_index_of_a_constant_signal_predicted_exactly_is_one():
    assert M.agreement_index(np.full(5, 2.0), np.full(5, 2.0)).tolist() == [1.0]


def test_agreement_index_lies_between_zero_and_one(rng):
    ai = M.agreement_index(rng.normal(size=(40, 6)), rng.normal(size=(40, 6)) * 3 + 1)
    assert np.all((ai >= 0) & (ai <= 1))


# ------------------------------------------------------------------ parameter errors
def test_relative_parameter_error_is_norm_of_difference_over_norm_of_truth():
    assert M.relative_parameter_error([3.0, 5.0], [3.0, 4.0]) == pytest.approx(1 / 5)


def test_relative_parameter_error_refuses_an_all_zero_truth():
    with pytest.raises(DataError, match="all zeros"):
        M.relative_parameter_error([1.0, 0.0], [0.0, 0.0])


def test_per_parameter_relative_error_uses_a_floor_for_zero_true_values():
    est = [3.0, 0.001, -4.0]
    true = [2.0, 0.0, -4.0]
    # floor = 1e-3 * max|true| = 0.004 -> [1/2, 0.001/0.004, 0]
    assert M.per_parameter_relative_error(est, true) == pytest.approx([0.5, 0.25, 0.0])
    assert M.per_parameter_relative_error(est, true, floor=0.1) == pytest.approx([0.5, 0.01, 0.0])


def test_parameter_errors_need_the_same_number_of_parameters():
    with pytest.raises(DataError, match="estimated has 2 parameters but true has 3"):
        M.relative_parameter_error([1.0, 2.0], [1.0, 2.0, 3.0])


# --------------------------------------------------------------------- regressor stats
def test_condition_number_of_a_diagonal_regressor():
    assert M.condition_number(np.diag([3.0, 1.0])) == pytest.approx(3.0)


def test_condition_number_stacks_an_unstacked_regressor(rng):
    Y = rng.normal(size=(10, 2, 3))
    assert M.condition_number(Y) == pytest.approx(np.linalg.cond(Y.reshape(-1, 3)))


def test_condition_number_of_a_rank_deficient_regressor_is_inf():
    W = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    assert M.condition_number(W) == np.inf


def test_parameter_std_of_a_mean_is_its_standard_error():
    W = np.ones((4, 1))
    r = np.array([1.0, -1.0, 1.0, -1.0])
    # σ² = 4 / (4 - 1), (WᵀW)⁻¹ = 1/4
    assert M.parameter_std(W, r) == pytest.approx([np.sqrt(1 / 3)])


def test_parameter_std_matches_the_textbook_formula(rng):
    W = rng.normal(size=(60, 4)) * [1.0, 10.0, 0.1, 100.0]
    r = rng.normal(size=60)
    expected = np.sqrt(r @ r / 56 * np.diag(np.linalg.inv(W.T @ W)))
    assert M.parameter_std(W, r) == pytest.approx(expected, rel=1e-10)
    assert M.parameter_std(W, r, dof=28) == pytest.approx(expected * np.sqrt(2), rel=1e-10)


def test_parameter_std_refuses_a_rank_deficient_regressor():
    W = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    with pytest.raises(DataError, match="rank deficient"):
        M.parameter_std(W, np.zeros(3))


def test_parameter_std_needs_matching_residuals():
    with pytest.raises(DataError, match="residuals has 3 entries but W has 4 rows"):
        M.parameter_std(np.ones((4, 1)), np.zeros(3))


# --------------------------------------------------------------------------- tracking
def test_tracking_error_is_mean_absolute_error_in_degrees():
    q_ref = np.zeros((2, 2))
    q = np.radians([[1.0, -2.0], [3.0, 2.0]])
    assert M.tracking_error_deg(q_ref, q) == pytest.approx([2.0, 2.0])


# --------------------------------------------------------------------------- checks
def test_shape_mismatch_names_both_shapes():
    with pytest.raises(DataError, match=r"observed has shape \(2, 2\) but predicted has shape \(2, 1\)"):
        M.torque_rms(O, P[:, :1])


def test_nan_is_refused_naming_the_argument_and_index():
    p = P.copy()
    p[1, 0] = np.nan
    with pytest.raises(DataError, match=r"predicted holds 1 NaN/inf value\(s\), the first at index \(1, 0\)"):
        M.rsd(O, p)


def test_empty_signals_are_refused():
    with pytest.raises(DataError, match="observed is empty"):
        M.agreement_index(np.zeros((0, 2)), np.zeros((0, 2)))


# ------------------------------------------------------------------------ sensitivity
T = np.array([0.0, 1.0, 2.0])


def linear_trajectory(values):
    """q_kj = t_k · v_j: scaling v_i by f moves joint i by (f − 1)·v_i·t."""
    return np.outer(T, values)


def test_sensitivity_reports_the_trajectory_rms_against_the_nominal():
    table = M.sensitivity(linear_trajectory, [2.0, 4.0], ["m1", "m2"])
    rms_t = np.sqrt(np.mean(T**2))  # sqrt(5/3)
    assert table.factors == (0.5, 1.5)
    assert table.rms.shape == (2, 2, 2)
    # m1 × 0.5 -> joint 1 off by 1·t, joint 2 untouched
    assert table.rms[0, 0] == pytest.approx([1.0 * rms_t, 0.0])
    assert table.rms[1, 1] == pytest.approx([0.0, 2.0 * rms_t])
    assert table.rms_total[1, 1] == pytest.approx(np.sqrt((2.0 * rms_t) ** 2 / 2))
    assert table.ranking() == ["m2", "m1"]


def test_sensitivity_marks_a_diverged_simulation_as_inf_and_none_in_json():
    def simulate(values):
        q = linear_trajectory(values)
        return q if values[0] < 2.5 else np.full_like(q, np.nan)

    table = M.sensitivity(simulate, [2.0, 4.0], ["m1", "m2"])
    assert np.isinf(table.rms_total[0, 1]) and np.isfinite(table.rms_total[0, 0])
    data = M.sensitivity_to_dict(table)
    json.dumps(data, allow_nan=False)
    assert data["parameters"][0]["rms_total"][1] is None
    assert data["parameters"][0]["name"] == "m1" and data["factors"] == [0.5, 1.5]


def test_sensitivity_needs_one_name_per_value():
    with pytest.raises(DataError, match="2 names for 3 parameter values"):
        M.sensitivity(linear_trajectory, [1.0, 2.0, 3.0], ["a", "b"])


def test_sensitivity_needs_a_finite_nominal_trajectory():
    with pytest.raises(DataError, match="nominal trajectory"):
        M.sensitivity(lambda v: np.full((3, 2), np.nan), [1.0, 2.0], ["a", "b"])


def test_sensitivity_at_factor_one_is_zero_without_a_simulation():
    calls = []

    def simulate(values):
        calls.append(np.array(values))
        return linear_trajectory(values)

    table = M.sensitivity(simulate, [2.0, 4.0], ["m1", "m2"], factors=(0.5, 1.0, 1.5))
    assert len(calls) == 1 + 2 * 2  # the nominal, then each parameter at 0.5 and 1.5
    assert np.array_equal(table.rms_total[:, 1], [0.0, 0.0])
    assert np.all(table.rms_total[:, [0, 2]] > 0)


def test_sensitivity_of_a_huge_but_finite_trajectory_is_inf_without_an_overflow_warning():
    import warnings

    def simulate(values):
        return linear_trajectory(values) * (1e200 if values[0] > 2.5 else 1.0)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = M.sensitivity(simulate, [2.0, 4.0], ["m1", "m2"])
    assert np.isinf(table.rms_total[0, 1]) and np.isfinite(table.rms_total[0, 0])


def test_agreement_index_is_nan_where_its_sums_overflow():
    o = np.array([[0.0, 0.0], [1.0, 1.0]])
    p = np.array([[0.0, 0.0], [1.0, 1e160]])
    with np.errstate(over="ignore"):
        ai = M.agreement_index(o, p)
    assert ai[0] == 1.0 and np.isnan(ai[1])
