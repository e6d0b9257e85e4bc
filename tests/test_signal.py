"""Preprocessing (SPEC §7): filters, central differences, decimation, period averaging, LOOCV."""

from __future__ import annotations

import numpy as np
import pytest

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.signal import (
    butterworth_filtfilt,
    central_difference,
    decimate,
    downsample,
    loocv_lowess,
    loocv_polynomial,
    period_average,
    savgol,
    smooth_auto,
)

FS = 1000.0


def _time(seconds: float = 4.0, fs: float = FS) -> np.ndarray:
    return np.arange(int(seconds * fs)) / fs


def _cubic(t: np.ndarray) -> np.ndarray:
    return 0.5 * t**3 - t**2 + 0.3 * t + 1.0


# -- Butterworth --------------------------------------------------------------------------------


def test_butterworth_removes_high_frequency_noise_and_keeps_low_frequency_sine(rng):
    t = _time()
    clean = np.sin(2 * np.pi * 1.0 * t)
    noisy = clean + 0.2 * np.sin(2 * np.pi * 150.0 * t) + 0.1 * rng.standard_normal(t.size)
    filtered = butterworth_filtfilt(noisy, FS, cutoff=10.0)
    interior = slice(200, -200)
    # white noise left in the 10 Hz band: 0.1 * sqrt(10 / 500) = 0.014
    assert np.sqrt(np.mean((filtered - clean)[interior] ** 2)) < 0.03
    assert np.sqrt(np.mean((noisy - clean)[interior] ** 2)) > 0.14


def test_butterworth_filtfilt_has_zero_phase_shift():
    t = _time()
    x = np.sin(2 * np.pi * 3.0 * t)
    y = butterworth_filtfilt(x, FS, cutoff=20.0)
    interior = slice(500, -500)
    # phase of y relative to x from its projections on sin and cos over whole periods
    s = np.sum(y[interior] * np.sin(2 * np.pi * 3.0 * t[interior]))
    c = np.sum(y[interior] * np.cos(2 * np.pi * 3.0 * t[interior]))
    assert abs(np.arctan2(c, s)) < 1e-4


def test_butterworth_filters_each_column_along_time_axis(rng):
    x = rng.standard_normal((2000, 3))
    y = butterworth_filtfilt(x, FS, cutoff=50.0)
    assert y.shape == x.shape
    np.testing.assert_allclose(y[:, 1], butterworth_filtfilt(x[:, 1], FS, cutoff=50.0))
    np.testing.assert_allclose(y.T, butterworth_filtfilt(x.T, FS, cutoff=50.0, axis=1))


def test_butterworth_rejects_cutoff_above_nyquist():
    with pytest.raises(ConfigError, match="Nyquist"):
        butterworth_filtfilt(np.zeros(100), FS, cutoff=600.0)


def test_butterworth_rejects_nan_naming_its_index():
    x = np.zeros(100)
    x[17] = np.nan
    with pytest.raises(DataError, match=r"NaN or inf \(first at index \(17,\)\)"):
        butterworth_filtfilt(x, FS, cutoff=10.0)


def test_butterworth_rejects_too_short_signal():
    with pytest.raises(DataError, match="too short"):
        butterworth_filtfilt(np.zeros(10), FS, cutoff=10.0)


# -- differences and Savitzky-Golay -------------------------------------------------------------


def test_central_difference_of_sin_matches_cos():
    dt = 1e-3
    t = np.arange(0.0, 2.0, dt)
    qd = central_difference(np.sin(t), dt)
    np.testing.assert_allclose(qd, np.cos(t), atol=1e-6)


def test_central_difference_second_derivative_of_sin_matches_minus_sin():
    dt = 1e-3
    t = np.arange(0.0, 2.0, dt)
    x = np.column_stack([np.sin(t), np.sin(2 * t)])
    qdd = central_difference(x, dt, deriv=2)  # seed 001 Eq. 24, second line
    np.testing.assert_allclose(qdd, -np.column_stack([np.sin(t), 4 * np.sin(2 * t)]), atol=2e-5)


def test_central_difference_rejects_two_samples():
    with pytest.raises(DataError, match="at least 3"):
        central_difference(np.zeros(2), 0.1)


def test_savgol_derivative_of_quadratic_is_exact():
    dt = 0.01
    t = np.arange(0.0, 1.0, dt)
    x = 3.0 * t**2 - t
    np.testing.assert_allclose(savgol(x, 11, 2, deriv=1, dt=dt), 6.0 * t - 1.0, atol=1e-9)


def test_savgol_rejects_even_window():
    with pytest.raises(ConfigError, match="odd"):
        savgol(np.zeros(50), 10, 2)


# -- decimation ---------------------------------------------------------------------------------


def test_decimate_keeps_slow_signal_aligned_with_downsampled_time():
    t = _time()
    x = np.column_stack([1.5 + np.sin(2 * np.pi * 0.5 * t), np.cos(2 * np.pi * 1.0 * t)])
    y = decimate(x, 10)
    t10 = downsample(t, 10)
    expected = np.column_stack([1.5 + np.sin(2 * np.pi * 0.5 * t10), np.cos(2 * np.pi * t10)])
    assert y.shape == (400, 2)
    np.testing.assert_allclose(y, expected, atol=2e-3)


def test_decimate_removes_content_above_the_new_nyquist_frequency():
    t = _time()
    x = np.sin(2 * np.pi * 210.0 * t)  # new Nyquist: 1000 / 10 / 2 = 50 Hz
    # away from the ends, where the reflected padding turns the end value into an offset
    assert np.max(np.abs(decimate(x, 10)[10:-10])) < 0.01
    assert np.max(np.abs(downsample(x, 10))) > 0.5  # plain downsampling aliases it


def test_downsample_keeps_every_factor_th_sample():
    x = np.arange(10.0)
    np.testing.assert_array_equal(downsample(x, 3), [0.0, 3.0, 6.0, 9.0])


# -- period averaging ---------------------------------------------------------------------------


def test_period_average_reduces_white_noise_std_by_sqrt_k(rng):
    period, k = 1000, 5
    t = np.arange(period * k) / FS
    clean = np.column_stack([np.sin(2 * np.pi * t), np.cos(4 * np.pi * t), 0.3 + 0 * t])
    noise = rng.standard_normal(clean.shape)
    averaged = period_average(clean + noise, period)
    residual = averaged - clean[:period]
    ratio = noise.std() / residual.std()
    assert abs(ratio / np.sqrt(k) - 1.0) < 0.10


def test_period_average_drops_the_incomplete_tail():
    one = np.arange(4.0)
    x = np.concatenate([one, one + 2.0, [100.0, 100.0]])  # 2 periods + 2 extra samples
    np.testing.assert_array_equal(period_average(x, 4), one + 1.0)


def test_period_average_requires_two_complete_periods():
    with pytest.raises(DataError, match="at least 2 complete periods"):
        period_average(np.zeros(150), 100)


def test_period_average_rejects_a_non_integer_period():
    with pytest.raises(DataError, match="whole number"):
        period_average(np.zeros(1000), 250.5)


# -- LOOCV smoothing (seed 002) -----------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_loocv_polynomial_picks_order_3_for_noisy_cubic(seed):
    noise = np.random.default_rng(seed)
    t = np.linspace(-2.0, 2.0, 100)
    y = _cubic(t) + noise.normal(0.0, 0.5, t.size)
    result = loocv_polynomial(t, y)
    assert result.order.tolist() == [3]
    assert result.fitted.shape == y.shape
    assert np.sqrt(np.mean((result.fitted - _cubic(t)) ** 2)) < 0.25


def test_loocv_polynomial_errors_match_brute_force_leave_one_out(rng):
    t = np.sort(rng.uniform(0.0, 3.0, 25))
    y = np.sin(2.0 * t) + rng.normal(0.0, 0.1, t.size)
    result = loocv_polynomial(t, y, max_order=5)
    m = t.size
    for order in range(6):
        test, train = 0.0, 0.0
        for i in range(m):
            keep = np.arange(m) != i
            fit = np.polynomial.Polynomial.fit(t[keep], y[keep], order)
            test += (y[i] - fit(t[i])) ** 2 / m
            train += np.sum((y[keep] - fit(t[keep])) ** 2) / (m * (m - 1))
        assert result.test_error[order, 0] == pytest.approx(test, rel=1e-8)
        assert result.train_error[order, 0] == pytest.approx(train, rel=1e-8)


def test_loocv_polynomial_chooses_an_order_per_column(rng):
    t = np.linspace(-2.0, 2.0, 100)
    y = np.column_stack([_cubic(t), 2.0 * t + 1.0]) + rng.normal(0.0, 0.5, (t.size, 2))
    assert loocv_polynomial(t, y).order.tolist() == [3, 1]


def _local_linear_reference(t, y, h, at, skip=None):
    keep = np.ones(t.size, bool) if skip is None else np.arange(t.size) != skip
    w = np.clip(1.0 - np.abs((t[keep] - at) / h) ** 3, 0.0, None) ** 3
    X = np.column_stack([np.ones(keep.sum()), t[keep] - at])
    beta = np.linalg.solve(X.T @ (w[:, None] * X), X.T @ (w * y[keep]))
    return beta[0]


@pytest.mark.parametrize("uniform", [True, False])
def test_loocv_lowess_error_matches_brute_force_leave_one_out(rng, uniform):
    t = np.linspace(0.0, 1.0, 40) if uniform else np.sort(rng.uniform(0.0, 1.0, 40))
    y = np.sin(5.0 * t) + rng.normal(0.0, 0.1, t.size)
    h = 0.2
    result = loocv_lowess(t, y, bandwidths=[h])
    fitted = [_local_linear_reference(t, y, h, t[i]) for i in range(t.size)]
    loo = [(y[i] - _local_linear_reference(t, y, h, t[i], skip=i)) ** 2 for i in range(t.size)]
    np.testing.assert_allclose(result.fitted, fitted, atol=1e-12)
    assert result.test_error[0, 0] == pytest.approx(np.mean(loo), rel=1e-9)


def test_loocv_lowess_reduces_noise_on_a_long_sine(rng):
    t = np.arange(5000) / FS
    clean = np.column_stack([np.sin(2 * np.pi * t), 1.0 + 0.3 * np.cos(2 * np.pi * 1.3 * t)])
    result = loocv_lowess(t, clean + rng.normal(0.0, 0.05, clean.shape))
    assert result.bandwidth.shape == (2,)
    assert np.all(np.sqrt(np.mean((result.fitted - clean) ** 2, axis=0)) < 0.02)


def test_smooth_auto_prefers_polynomial_for_a_cubic_and_lowess_for_an_oscillation(rng):
    t = np.linspace(0.0, 10.0, 2000)
    y = np.column_stack([_cubic(t / 2.5 - 2.0), np.sin(2 * np.pi * 0.8 * t)])
    result = smooth_auto(t, y + rng.normal(0.0, [0.5, 0.1], y.shape))
    assert result.method == ("polynomial", "lowess")
    assert result.polynomial.order[0] == 3
    np.testing.assert_array_equal(result.fitted[:, 0], result.polynomial.fitted[:, 0])
    np.testing.assert_array_equal(result.fitted[:, 1], result.lowess.fitted[:, 1])


def test_smoothing_rejects_time_that_does_not_increase():
    t = np.array([0.0, 0.1, 0.1, 0.3, 0.4, 0.5])
    with pytest.raises(DataError, match=r"strictly increasing; t\[2\]"):
        loocv_polynomial(t, np.zeros(6), max_order=2)


def test_smoothing_rejects_too_few_samples_for_the_highest_order():
    with pytest.raises(DataError, match="at least 12"):
        loocv_polynomial(np.arange(8.0), np.zeros(8), max_order=10)


def test_smoothing_rejects_length_mismatch():
    with pytest.raises(DataError, match="'y' has 5 samples but 't' has 6"):
        loocv_lowess(np.arange(6.0), np.zeros(5))


def test_lowess_rejects_a_bandwidth_too_small_for_three_points():
    with pytest.raises(ConfigError, match="greater than 2"):
        loocv_lowess(np.arange(10.0), np.zeros(10), bandwidths=[1.5])
