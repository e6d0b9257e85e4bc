"""Preprocessing of measured signals (SPEC §7): filters, differentiation, automatic smoothing, and the
dataset preprocessing a run applies (:func:`robotid_sim.signal.preprocess.preprocess`).

Zero-phase Butterworth filtering, central differences (seed 001 Eq. 24), both also on jittery time
stamps (:func:`lowpass_on_stamps`, :func:`time_derivative`), Savitzky–Golay, decimation, period
averaging, and smoothing whose order or bandwidth is chosen by leave-one-out cross-validation
(seed 002). Time is axis 0 unless ``axis`` says otherwise; signals are (N,) or
(N, n).
"""

from robotid_sim.signal.filters import (
    butterworth_filtfilt,
    central_difference,
    check_cutoff,
    decimate,
    decimation_min_samples,
    downsample,
    is_uniform,
    lowpass_derivatives,
    lowpass_on_stamps,
    period_average,
    savgol,
    stamp_order_error,
    time_derivative,
)
from robotid_sim.signal.preprocess import average_periods, lowpass_and_differentiate, period_samples
from robotid_sim.signal.smoothing import (
    AutoSmoothing,
    LowessSmoothing,
    PolynomialSmoothing,
    loocv_lowess,
    loocv_polynomial,
    smooth_auto,
)

__all__ = [
    "AutoSmoothing",
    "LowessSmoothing",
    "PolynomialSmoothing",
    "average_periods",
    "butterworth_filtfilt",
    "central_difference",
    "check_cutoff",
    "decimate",
    "decimation_min_samples",
    "downsample",
    "is_uniform",
    "loocv_lowess",
    "loocv_polynomial",
    "lowpass_and_differentiate",
    "lowpass_derivatives",
    "lowpass_on_stamps",
    "period_average",
    "period_samples",
    "savgol",
    "smooth_auto",
    "stamp_order_error",
    "time_derivative",
]
