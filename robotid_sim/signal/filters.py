"""Filtering, differentiation, resampling and period averaging of measured signals (SPEC §7).

Every function takes an array ``x`` whose axis ``axis`` (default 0) is time, e.g. a signal
(N,) or the joint signals (N, n) of a :class:`~robotid_sim.sim.dataset.Dataset`, and returns a
new array; inputs are never modified. Most take evenly spaced samples (a rate ``fs`` or a step
``dt``); :func:`lowpass_on_stamps` and :func:`time_derivative` take the time stamps themselves,
even or jittery (a real robot's clock). Bad inputs (NaN or inf, too few samples, a missing time
axis) raise :class:`~robotid_sim.errors.DataError`; bad options (a cut-off above Nyquist, an
even Savitzky–Golay window, ...) raise :class:`~robotid_sim.errors.ConfigError`.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Callable

import numpy as np

from robotid_sim.errors import ConfigError, DataError

logger = logging.getLogger(__name__)

#: the highest Butterworth order :func:`butterworth_filtfilt` designs (higher ones only add round-off and edge effects)
MAX_BUTTERWORTH_ORDER = 20
#: time stamps whose steps all lie within this fraction of their mean step are even (:func:`is_uniform`)
UNIFORM_TOLERANCE = 1e-6
#: a jittery record is filtered on an even grid this many times finer than its median step
#: (:func:`lowpass_on_stamps`), so that the grid takes in every sample, even where the stamps crowd together
GRID_OVERSAMPLING = 4
#: how many offending samples of each kind :func:`stamp_order_error` names
SHOWN_SAMPLES = 3

__all__ = [
    "GRID_OVERSAMPLING",
    "MAX_BUTTERWORTH_ORDER",
    "UNIFORM_TOLERANCE",
    "butterworth_filtfilt",
    "central_difference",
    "check_cutoff",
    "decimate",
    "decimation_min_samples",
    "downsample",
    "is_uniform",
    "lowpass_derivatives",
    "lowpass_on_stamps",
    "period_average",
    "savgol",
    "stamp_order_error",
    "time_derivative",
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


def _butterworth(order: int, cutoff: float, fs: float) -> tuple[np.ndarray, int]:
    """The Butterworth low-pass ``(sos, padlen)``: its second-order sections and the samples ``sosfiltfilt`` pads
    each end with (a signal must be longer than that); ConfigError for a bad ``fs``, ``cutoff`` or ``order``."""
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
    return sos, padlen


def butterworth_filtfilt(x, fs: float, cutoff: float, order: int = 4, axis: int = 0) -> np.ndarray:
    """Zero-phase Butterworth low-pass filter (SPEC §7; seed 001 §4.3 uses a 4th-order one).

    The filter runs forwards and backwards (``scipy.signal.sosfiltfilt``), so the result has no
    phase lag and the magnitude response is the square of the Butterworth one (attenuation
    6 dB at ``cutoff`` instead of 3 dB). It counts samples, not seconds: for a record on a jittery
    clock use :func:`lowpass_on_stamps`.

    Args:
        x: signal, time along ``axis``, e.g. (N,) or (N, n), sampled evenly.
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
    sos, padlen = _butterworth(order, cutoff, fs)
    arr = as_time_series(x, "x", axis, min_samples=padlen + 1)
    check_cutoff(cutoff, fs, arr.shape[axis])
    import scipy.signal

    return scipy.signal.sosfiltfilt(sos, arr, axis=axis)


def as_time_stamps(t, n_samples: int) -> np.ndarray:
    """``t`` as finite, strictly increasing float time stamps (N,), N = ``n_samples`` (the signal's length).

    Raises:
        DataError: ``t`` is not (n_samples,), holds NaN/inf, or does not increase (:func:`stamp_order_error`).
    """
    stamps = as_time_series(t, "t", 0, min_samples=2)
    if stamps.shape != (n_samples,):
        raise DataError(f"'t' must have shape ({n_samples},), one stamp per sample of the signal, got {stamps.shape}")
    problem = stamp_order_error(stamps)
    if problem is not None:
        raise DataError(f"'t' must be strictly increasing; {problem}")
    return stamps


def stamp_order_error(t: np.ndarray, at: Callable[[int], str] = "sample {}".format) -> str | None:
    """Why the finite time stamps ``t`` (N,) are not strictly increasing, as the end of a one-line message, or None.

    The clause names the first offending sample and its stamps, how many samples repeat the stamp before them
    and how many go back in time, the first :data:`SHOWN_SAMPLES` of each, and the fix (sort the samples by
    time, drop the repeated ones), e.g. ``sample 5 has t = 0.05 after t = 0.05; in all, 2 samples repeat the
    stamp before them (sample 5, sample 9) and 1 goes back in time (sample 12); sort the samples by time and
    drop the repeated ones``.

    Args:
        t: the time stamps.
        at: how sample i is named (e.g. with its file line).
    """
    steps = np.diff(t)
    repeated, backwards = np.flatnonzero(steps == 0) + 1, np.flatnonzero(steps < 0) + 1
    if repeated.size == 0 and backwards.size == 0:
        return None
    first = int(min(np.r_[repeated, backwards]))
    counts, fixes = [], []
    for rows, one, many, fix in (
        (
            repeated,
            "sample repeats the stamp before it",
            "samples repeat the stamp before them",
            "drop the repeated ones",
        ),
        (backwards, "sample goes back in time", "samples go back in time", "sort the samples by time"),
    ):
        if rows.size:
            shown = ", ".join(at(int(i)) for i in rows[:SHOWN_SAMPLES]) + (", ..." if rows.size > SHOWN_SAMPLES else "")
            counts.append(f"{rows.size} {one if rows.size == 1 else many} ({shown})")
            fixes.insert(0, fix)
    return (
        f"{at(first)} has t = {float(t[first])!r} after t = {float(t[first - 1])!r}; in all, "
        f"{' and '.join(counts)}; {' and '.join(fixes)}"
    )


def is_uniform(t) -> bool:
    """Whether the increasing time stamps ``t`` (N,) are even: every step within :data:`UNIFORM_TOLERANCE` of the
    mean step (a simulator's grid with its float round-off is even; a real robot's jittery clock is not)."""
    t = np.asarray(t, dtype=float)
    if t.shape[0] < 3:
        return True
    mean = (t[-1] - t[0]) / (t.shape[0] - 1)
    return bool(np.all(np.abs(np.diff(t) - mean) <= UNIFORM_TOLERANCE * mean))


def lowpass_on_stamps(x, t, cutoff: float, order: int = 4, axis: int = 0) -> np.ndarray:
    """Zero-phase Butterworth low-pass of a signal sampled at the time stamps ``t``, even or jittery.

    On even stamps (:func:`is_uniform`) this is :func:`butterworth_filtfilt` at fs = 1 / step. A digital filter
    counts samples, so on a jittery clock (a real robot's log: e.g. 100 Hz with steps of 2 to 30 ms) it would
    smear time; there the record is resampled for the filter only: the signal is interpolated onto an even grid
    over its time span, :data:`GRID_OVERSAMPLING` times finer than its median step (so that every sample takes
    part, even where the stamps crowd together), by the modified Akima interpolant
    (``scipy.interpolate.Akima1DInterpolator``, ``method="makima"``: piecewise cubic, local, without the
    overshoot of a global spline on noisy samples), filtered on the grid by the same Butterworth filter, and read
    back at its own stamps through a cubic spline of the filtered grid (``scipy.interpolate.CubicSpline``). The
    samples keep their stamps; only their values are smoothed. The interpolation passes a signal well below the
    grid's Nyquist frequency (to O(step³) on a smooth one, against O(step²) for straight segments), and the
    spline reads the band-limited result back to O(grid step⁴).

    Args:
        x: signal, time along ``axis``, e.g. (N,) or (N, n).
        t: its time stamps in s (N,), strictly increasing.
        cutoff: cut-off frequency in Hz, between one cycle per record and the Nyquist frequency of the median
            rate (:func:`check_cutoff`).
        order: order of the Butterworth prototype (:func:`butterworth_filtfilt`).
        axis: time axis.

    Returns:
        The filtered signal at the stamps ``t``, same shape as ``x``.

    Raises:
        ConfigError: ``cutoff`` or ``order`` out of range.
        DataError: ``x`` or ``t`` has NaN/inf, ``t`` does not increase or does not match ``x``, or ``x`` is
            shorter than the filter's edge padding.
    """
    arr = as_time_series(x, "x", axis, min_samples=2)
    stamps = as_time_stamps(t, arr.shape[axis])
    if is_uniform(stamps):
        return butterworth_filtfilt(arr, 1.0 / float(np.mean(np.diff(stamps))), cutoff, order, axis)
    return _filtered_on_grid(arr, stamps, cutoff, order, axis)(stamps)


def lowpass_derivatives(x, t, cutoff: float, order: int = 4, axis: int = 0) -> tuple[np.ndarray, ...]:
    """A signal low-passed on its time stamps (:func:`lowpass_on_stamps`) and its first two time derivatives.

    On even stamps the derivatives are central differences of the filtered signal (:func:`time_derivative`,
    seed 001 Eq. 24); on jittery ones the derivatives of the cubic spline through the filtered even grid, at the
    stamps: differences over uneven steps of the filtered signal would add an error of the order of the step
    difference times the next derivative.

    Args:
        x, t, cutoff, order, axis: as :func:`lowpass_on_stamps`.

    Returns:
        ``(filtered, first derivative, second derivative)``, each the shape of ``x``.

    Raises:
        ConfigError, DataError: as :func:`lowpass_on_stamps`; DataError for fewer than 3 samples.
    """
    arr = as_time_series(x, "x", axis, min_samples=3)
    stamps = as_time_stamps(t, arr.shape[axis])
    if is_uniform(stamps):
        filtered = butterworth_filtfilt(arr, 1.0 / float(np.mean(np.diff(stamps))), cutoff, order, axis)
        first = time_derivative(filtered, stamps, axis)
        return filtered, first, time_derivative(first, stamps, axis)
    spline = _filtered_on_grid(arr, stamps, cutoff, order, axis)
    return spline(stamps), spline(stamps, 1), spline(stamps, 2)


def _filtered_on_grid(arr: np.ndarray, stamps: np.ndarray, cutoff: float, order: int, axis: int):
    """The cubic spline through ``arr`` on jittery ``stamps`` low-passed on an even grid (:func:`lowpass_on_stamps`)."""
    fs = 1.0 / float(np.median(np.diff(stamps)))
    _, padlen = _butterworth(order, cutoff, fs)
    as_time_series(arr, "x", axis, min_samples=padlen + 1)
    check_cutoff(cutoff, fs, arr.shape[axis])
    import scipy.interpolate

    span = stamps[-1] - stamps[0]
    grid = np.linspace(stamps[0], stamps[-1], int(np.ceil(span * fs * GRID_OVERSAMPLING)) + 1)
    on_grid = scipy.interpolate.Akima1DInterpolator(stamps, arr, axis=axis, method="makima")(grid)
    filtered = butterworth_filtfilt(on_grid, (grid.shape[0] - 1) / span, cutoff, order, axis)
    return scipy.interpolate.CubicSpline(grid, filtered, axis=axis)


def central_difference(x, dt: float, axis: int = 0, deriv: int = 1) -> np.ndarray:
    """Derivative by central differences (seed 001 Eq. 24).

    ``deriv=1``: qd(t) ≈ (q(t+Δt) − q(t−Δt)) / (2Δt) inside, second-order one-sided
    differences at both ends (``numpy.gradient`` with ``edge_order=2``).

    ``deriv=2``: qdd(t) ≈ (q(t+Δt) − 2q(t) + q(t−Δt)) / Δt² inside, and the second-order
    one-sided stencil (2q0 − 5q1 + 4q2 − q3) / Δt² at both ends.

    Differentiation amplifies noise (by about 1/Δt per derivative): filter first, e.g. with
    :func:`butterworth_filtfilt` or :func:`savgol`. For samples on a jittery clock use :func:`time_derivative`.

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


def time_derivative(x, t, axis: int = 0) -> np.ndarray:
    """Derivative of a signal sampled at the time stamps ``t``, even or jittery (``numpy.gradient(x, t)``).

    Inside, the second-order central difference on each sample's two neighbours: on even stamps
    (x(t+Δt) − x(t−Δt)) / (2Δt) (seed 001 Eq. 24), on uneven ones its form for the steps h₋, h₊ before and
    after the sample (exact on parabolas); second-order one-sided differences at both ends (``edge_order=2``).
    Differentiation amplifies noise by about one over the shorter step: low-pass first
    (:func:`lowpass_on_stamps`).

    Args:
        x: signal, time along ``axis``, e.g. q (N, n).
        t: its time stamps in s (N,), strictly increasing.
        axis: time axis.

    Returns:
        The derivative, same shape as ``x``.

    Raises:
        DataError: ``x`` or ``t`` has NaN/inf, fewer than 3 samples, or ``t`` does not increase or does not
            match ``x``.
    """
    arr = as_time_series(x, "x", axis, min_samples=3)
    return np.gradient(arr, as_time_stamps(t, arr.shape[axis]), axis=axis, edge_order=2)


def savgol(x, window: int, polyorder: int, deriv: int = 0, dt: float = 1.0, axis: int = 0) -> np.ndarray:
    """Savitzky–Golay smoothing or differentiation (``scipy.signal.savgol_filter``).

    A polynomial of order ``polyorder`` is fitted by least squares to each window of
    ``window`` samples; the result is its value (``deriv=0``) or derivative at the window
    centre. The ends use ``mode='interp'`` (a fit to the first / last window). The window counts samples:
    evenly sampled signals only (on a jittery clock, :func:`lowpass_on_stamps` and :func:`time_derivative`).

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
