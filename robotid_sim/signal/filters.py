"""Filtering, differentiation, resampling and period averaging of measured signals (SPEC §7).

Every function takes an array ``x`` whose axis ``axis`` (default 0) is time, e.g. a signal
(N,) or the joint signals (N, n) of a :class:`~robotid_sim.sim.dataset.Dataset`, and returns a
new array; inputs are never modified. Bad inputs (NaN or inf, too few samples, a missing time
axis) raise :class:`~robotid_sim.errors.DataError`; bad options (a cut-off above Nyquist, an
even Savitzky–Golay window, ...) raise :class:`~robotid_sim.errors.ConfigError`.
"""

from __future__ import annotations

import logging
import numbers

import numpy as np

from robotid_sim.errors import ConfigError, DataError

logger = logging.getLogger(__name__)

#: the highest Butterworth order :func:`butterworth_filtfilt` designs (higher ones only add round-off and edge effects)
MAX_BUTTERWORTH_ORDER = 20

__all__ = [
    "MAX_BUTTERWORTH_ORDER",
    "butterworth_filtfilt",
    "central_difference",
    "check_cutoff",
    "decimate",
    "decimation_min_samples",
    "downsample",
    "period_average",
    "savgol",
]


def as_time_series(x, name: str = "x", axis: int = 0, min_samples: int = 1) -> np.ndarray:
    """Return ``x`` as a finite float array with at least ``min_samples`` samples along ``axis``.

    Args:
        x: array-like, time along ``axis``.
        name: how the array is called in error messages.
        axis: the time axis.
        min_samples: the fewest samples the caller can work with.

    Returns:
        A float64 array (a copy only when a conversion was needed).

    Raises:
        DataError: ``x`` is not numeric, has no axis ``axis``, holds NaN or inf, or is shorter
            than ``min_samples``.
    """
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"'{name}' must be a numeric array, got {type(x).__name__}: {exc}") from None
    if arr.ndim == 0 or not -arr.ndim <= axis < arr.ndim:
        raise DataError(
            f"'{name}' has shape {arr.shape}, which has no time axis {axis}; pass an array (N,) "
            "or (N, n) with time along axis 0, or set axis="
        )
    length = arr.shape[axis]
    if length < min_samples:
        raise DataError(
            f"'{name}' has {length} samples along axis {axis}, too short: at least {min_samples} are needed"
        )
    finite = np.isfinite(arr)
    if not np.all(finite):
        first = tuple(int(i) for i in np.argwhere(~finite)[0])
        raise DataError(
            f"'{name}' contains NaN or inf (first at index {first}); remove or interpolate "
            "those samples before preprocessing"
        )
    return arr


def _positive_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ConfigError(f"'{name}' must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _positive_float(value, name: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"'{name}' must be a positive number, got {value!r}") from None
    if not np.isfinite(out) or out <= 0.0:
        raise ConfigError(f"'{name}' must be a positive finite number, got {value!r}")
    return out


def check_cutoff(cutoff, fs: float, n_samples: int | None, name: str = "cutoff") -> float:
    """``cutoff`` (Hz) as a float, checked against the record it filters; ConfigError naming ``name`` and the limit.

    A low-pass cut-off must lie between one cycle per record and the Nyquist frequency: below 1 / T (T = the
    record's length, ``n_samples / fs``) the record holds less than one cycle of the cut-off, so the result
    is the filter's start-up transient (and far below, the filter design itself is singular); at or above
    fs / 2 there is nothing to filter.

    Args:
        cutoff: the cut-off frequency in Hz.
        fs: sampling rate in Hz.
        n_samples: samples in the record (one experiment); None checks only the Nyquist limit.
        name: how the cut-off is called in the message (e.g. ``preprocessing.lowpass_hz (--lowpass)``).

    Raises:
        ConfigError: not a positive finite number, or outside [1 / T, fs / 2).
    """
    cutoff = _positive_float(cutoff, name)
    fs = _positive_float(fs, "fs")
    if cutoff >= fs / 2.0:
        raise ConfigError(
            f"{name} = {cutoff:g} Hz must be below the Nyquist frequency fs/2 = {fs / 2.0:g} Hz of the data "
            f"({fs:g} Hz); lower it, or leave the low-pass out"
        )
    lowest = None if n_samples is None else fs / max(int(n_samples), 1)
    if lowest is not None and cutoff < lowest:
        raise ConfigError(
            f"{name} = {cutoff:g} Hz is below {lowest:.4g} Hz, one cycle per record ({n_samples} samples at {fs:g} Hz "
            f"= {n_samples / fs:.4g} s): such a low-pass keeps less than one cycle and returns its own start-up "
            f"transient; give a cut-off between {lowest:.4g} and {fs / 2.0:g} Hz (a few times the excitation's "
            "highest frequency), or leave the low-pass out"
        )
    return cutoff


def butterworth_filtfilt(x, fs: float, cutoff: float, order: int = 4, axis: int = 0) -> np.ndarray:
    """Zero-phase Butterworth low-pass filter (SPEC §7; seed 001 §4.3 uses a 4th-order one).

    The filter runs forwards and backwards (``scipy.signal.sosfiltfilt``), so the result has no
    phase lag and the magnitude response is the square of the Butterworth one (attenuation
    6 dB at ``cutoff`` instead of 3 dB).

    Args:
        x: signal, time along ``axis``, e.g. (N,) or (N, n).
        fs: sampling rate in Hz.
        cutoff: cut-off frequency in Hz, 1 / T <= cutoff < fs / 2 (:func:`check_cutoff`).
        order: order of the Butterworth prototype, 1 to :data:`MAX_BUTTERWORTH_ORDER` (the effective order is
            doubled by the forward-backward pass).
        axis: time axis.

    Returns:
        The filtered signal, same shape as ``x``.

    Raises:
        ConfigError: ``fs``, ``cutoff`` or ``order`` is out of range.
        DataError: ``x`` has NaN/inf or is shorter than the filter's edge padding.
    """
    fs = _positive_float(fs, "fs")
    order = _positive_int(order, "order")
    if order > MAX_BUTTERWORTH_ORDER:
        raise ConfigError(
            f"Butterworth 'order' must be at most {MAX_BUTTERWORTH_ORDER}, got {order}: a higher order adds only "
            "round-off and edge effects (the forward-backward pass already doubles it)"
        )
    cutoff = check_cutoff(cutoff, fs, None)
    import scipy.signal  # here, not at module level: it takes ~0.5 s to import

    sos = scipy.signal.butter(order, cutoff, btype="low", fs=fs, output="sos")
    # sosfiltfilt pads each end by 3 * (2 * n_sections + 1) - ... samples; it needs more than that
    padlen = 3 * (2 * len(sos) + 1 - min((sos[:, 2] == 0).sum(), (sos[:, 5] == 0).sum()))
    arr = as_time_series(x, "x", axis, min_samples=padlen + 1)
    check_cutoff(cutoff, fs, arr.shape[axis])
    return scipy.signal.sosfiltfilt(sos, arr, axis=axis)


def central_difference(x, dt: float, axis: int = 0, deriv: int = 1) -> np.ndarray:
    """Derivative by central differences (seed 001 Eq. 24).

    ``deriv=1``: qd(t) ≈ (q(t+Δt) − q(t−Δt)) / (2Δt) inside, second-order one-sided
    differences at both ends (``numpy.gradient`` with ``edge_order=2``).

    ``deriv=2``: qdd(t) ≈ (q(t+Δt) − 2q(t) + q(t−Δt)) / Δt² inside, and the second-order
    one-sided stencil (2q0 − 5q1 + 4q2 − q3) / Δt² at both ends.

    Differentiation amplifies noise (by about 1/Δt per derivative): filter first, e.g. with
    :func:`butterworth_filtfilt` or :func:`savgol`.

    Args:
        x: signal sampled every ``dt`` seconds, time along ``axis``, e.g. q (N, n).
        dt: sampling interval in seconds.
        axis: time axis.
        deriv: 1 (velocity from position) or 2 (acceleration from position).

    Returns:
        The derivative, same shape as ``x``.

    Raises:
        ConfigError: ``dt`` not positive or ``deriv`` not 1 or 2.
        DataError: ``x`` has NaN/inf, or fewer than 3 (``deriv=1``) or 4 (``deriv=2``) samples.
    """
    dt = _positive_float(dt, "dt")
    if deriv not in (1, 2):
        raise ConfigError(f"'deriv' must be 1 or 2, got {deriv!r}")
    arr = as_time_series(x, "x", axis, min_samples=2 + deriv)
    if deriv == 1:
        return np.gradient(arr, dt, axis=axis, edge_order=2)
    moved = np.moveaxis(arr, axis, 0)
    out = np.empty_like(moved)
    out[1:-1] = (moved[2:] - 2.0 * moved[1:-1] + moved[:-2]) / dt**2  # seed 001 Eq. 24
    out[0] = (2.0 * moved[0] - 5.0 * moved[1] + 4.0 * moved[2] - moved[3]) / dt**2
    out[-1] = (2.0 * moved[-1] - 5.0 * moved[-2] + 4.0 * moved[-3] - moved[-4]) / dt**2
    return np.moveaxis(out, 0, axis)


def savgol(x, window: int, polyorder: int, deriv: int = 0, dt: float = 1.0, axis: int = 0) -> np.ndarray:
    """Savitzky–Golay smoothing or differentiation (``scipy.signal.savgol_filter``).

    A polynomial of order ``polyorder`` is fitted by least squares to each window of
    ``window`` samples; the result is its value (``deriv=0``) or derivative at the window
    centre. The ends use ``mode='interp'`` (a fit to the first / last window).

    Args:
        x: signal sampled every ``dt`` seconds, time along ``axis``.
        window: window length in samples, odd, greater than ``polyorder``.
        polyorder: order of the local polynomial, >= 0.
        deriv: derivative order, 0 <= deriv <= polyorder.
        dt: sampling interval in seconds (scales derivatives).
        axis: time axis.

    Returns:
        The smoothed signal or its ``deriv``-th derivative, same shape as ``x``.

    Raises:
        ConfigError: inconsistent ``window`` / ``polyorder`` / ``deriv`` or ``dt`` not positive.
        DataError: ``x`` has NaN/inf or fewer than ``window`` samples.
    """
    window = _positive_int(window, "window")
    polyorder = _positive_int(polyorder, "polyorder", minimum=0)
    deriv = _positive_int(deriv, "deriv", minimum=0)
    dt = _positive_float(dt, "dt")
    if window % 2 == 0:
        raise ConfigError(f"Savitzky-Golay 'window' must be odd, got {window}")
    if polyorder >= window:
        raise ConfigError(f"'polyorder' ({polyorder}) must be smaller than 'window' ({window})")
    if deriv > polyorder:
        raise ConfigError(f"'deriv' ({deriv}) must not exceed 'polyorder' ({polyorder})")
    import scipy.signal

    arr = as_time_series(x, "x", axis, min_samples=window)
    return scipy.signal.savgol_filter(arr, window, polyorder, deriv=deriv, delta=dt, axis=axis, mode="interp")


def downsample(x, factor: int, axis: int = 0) -> np.ndarray:
    """Keep every ``factor``-th sample (samples 0, factor, 2·factor, ...), without filtering.

    Use it for the time vector ``t`` and for signals already band-limited; otherwise use
    :func:`decimate`, which low-passes first. Output length is ceil(N / factor).

    Raises:
        ConfigError: ``factor`` is not a positive integer.
        DataError: ``x`` has no axis ``axis`` or holds NaN/inf.
    """
    factor = _positive_int(factor, "factor")
    arr = as_time_series(x, "x", axis)
    index = [slice(None)] * arr.ndim
    index[axis] = slice(None, None, factor)
    return arr[tuple(index)].copy()


def decimation_min_samples(factor: int) -> int:
    """The fewest samples :func:`decimate` by ``factor`` (>= 2) takes: its reflected padding, 10·factor, plus one."""
    return 10 * factor + 1


def decimate(x, factor: int, axis: int = 0) -> np.ndarray:
    """Anti-aliased, zero-phase decimation by an integer ``factor``.

    The filter is that of ``scipy.signal.decimate(x, factor, ftype='fir', zero_phase=True)``:
    a Hamming-window FIR low-pass of 20·factor + 1 taps with its cut-off at the new Nyquist
    frequency, applied without delay by ``scipy.signal.resample_poly``. Unlike
    ``scipy.signal.decimate``, which pads the ends with zeros (pulling a signal with an offset,
    such as a joint angle, towards 0 over the first and last 10 output samples), both ends are
    first extended by their odd reflection (x[0] − (x[k] − x[0]), as ``filtfilt`` does), which
    continues the value and slope of the signal.

    Output sample k corresponds to input sample k·factor, so the matching time vector is
    ``downsample(t, factor)``; output length is ceil(N / factor).

    Args:
        x: signal, time along ``axis``.
        factor: decimation factor, >= 1 (1 returns a copy).
        axis: time axis.

    Returns:
        The decimated signal.

    Raises:
        ConfigError: ``factor`` is not a positive integer.
        DataError: ``x`` has NaN/inf or is not longer than the reflected padding
            (10·factor samples: :func:`decimation_min_samples`).
    """
    factor = _positive_int(factor, "factor")
    if factor == 1:
        return as_time_series(x, "x", axis).copy()
    half = 10 * factor  # half the FIR length
    pad = decimation_min_samples(factor) - 1  # a multiple of factor, so the sample grid is kept
    arr = as_time_series(x, "x", axis, min_samples=pad + 1)
    moved = np.moveaxis(arr, axis, 0)
    head = 2.0 * moved[0] - moved[pad:0:-1]  # odd reflection about the first sample
    tail = 2.0 * moved[-1] - moved[-2 : -pad - 2 : -1]  # ... and about the last
    padded = np.concatenate([head, moved, tail], axis=0)
    import scipy.signal

    taps = scipy.signal.firwin(2 * half + 1, 1.0 / factor, window="hamming")
    out = scipy.signal.resample_poly(padded, 1, factor, axis=0, window=taps)
    first = pad // factor
    out = out[first : first + -(-moved.shape[0] // factor)]
    return np.moveaxis(out, 0, axis)


def period_average(x, samples_per_period: int, axis: int = 0) -> np.ndarray:
    """Average a periodic signal over its complete periods (seed 001 §5 averages 5 periods).

    The signal is cut into K = N // samples_per_period complete periods; the incomplete tail
    (the last N − K·samples_per_period samples, if any) is dropped, and the K periods are
    averaged sample by sample. Averaging K periods divides the standard deviation of white
    noise by √K while keeping the periodic signal.

    ``samples_per_period`` must be a whole number: when the period times the sampling rate is
    not an integer, resample or choose the excitation period so that it is.

    Args:
        x: signal, time along ``axis``, starting at the beginning of a period.
        samples_per_period: samples in one period (an int, or a float with an integer value).
        axis: time axis.

    Returns:
        The mean period, shape of ``x`` with ``samples_per_period`` samples along ``axis``.

    Raises:
        DataError: ``samples_per_period`` is not a positive whole number, or ``x`` holds
            fewer than 2 complete periods or NaN/inf.
    """
    if isinstance(samples_per_period, bool):
        samples_per_period = None  # reported below
    try:
        period = float(samples_per_period)
    except (TypeError, ValueError):
        period = float("nan")
    if not np.isfinite(period) or period < 1 or period != round(period):
        raise DataError(
            f"samples_per_period must be a positive whole number, got {samples_per_period!r}: "
            "the period must span an integer number of samples (choose the excitation period "
            "or the sampling rate so that period * rate is an integer)"
        )
    period_int = int(round(period))
    arr = as_time_series(x, "x", axis)
    n_total = arr.shape[axis]
    n_periods = n_total // period_int
    if n_periods < 2:
        raise DataError(
            f"'x' holds {n_total} samples, i.e. {n_total / period_int:.3g} periods of "
            f"{period_int} samples: at least 2 complete periods are needed to average"
        )
    tail = n_total - n_periods * period_int
    if tail:
        logger.debug("period_average: dropping the incomplete last period (%d samples)", tail)
    moved = np.moveaxis(arr, axis, 0)[: n_periods * period_int]
    mean = moved.reshape((n_periods, period_int) + moved.shape[1:]).mean(axis=0)
    return np.moveaxis(mean, 0, axis)
