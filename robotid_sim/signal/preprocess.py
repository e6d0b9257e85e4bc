"""Preprocessing of a recorded or simulated dataset before identification (SPEC §7).

In this order: period averaging (seed 001 §5), zero-phase low-pass, differentiation; the last two within each
experiment, never across the join of two recordings, and on the samples' own time stamps: a log on a jittery
clock keeps its samples and stamps, differentiated by central differences on the stamps and low-passed on an
even grid read back at them (:func:`robotid_sim.signal.lowpass_on_stamps`); nothing is resampled for good.

The dataset is duck-typed: any record with ``t``, ``q``, ``qd``, ``qdd``, ``tau`` (each (N, n); ``t`` (N,)),
``dt``, ``n_samples``, ``truth`` (None or a record of ``q``, ``qd``, ``qdd``, ``tau``), ``joint_names``,
``metadata`` and ``slice(start, stop)``, built again by calling its type with those fields
(:class:`robotid_sim.sim.dataset.Dataset` is one). How a dataset splits into experiments is the dataset's file
layer's business (:func:`robotid_sim.sim.logs.experiments` and :func:`robotid_sim.sim.logs.per_experiment`):
:func:`preprocess` takes the two functions as arguments, so that this module imports no other stage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.signal.filters import (
    GRID_OVERSAMPLING,
    check_cutoff,
    is_uniform,
    lowpass_derivatives,
    lowpass_on_stamps,
    period_average,
    time_derivative,
)

#: how the low-pass cut-off is named in messages: the scenario field and the CLI flag
LOWPASS_NAME = "preprocessing.lowpass_hz (--lowpass)"

#: ``per_experiment(ds, func)``: ``func`` applied to each experiment of ``ds`` on its own, the results restacked
PerExperiment = Callable[[Any, Callable[[Any], Any]], Any]
#: ``experiments(ds)``: ``[(name, slice of samples), ...]``, the experiments of ``ds`` in order
Experiments = Callable[[Any], list[tuple[str, slice]]]


def preprocess(
    ds,
    *,
    per_experiment: PerExperiment,
    experiments: Experiments,
    lowpass_hz: float | None = None,
    differentiate: bool = False,
    period_average: int | None = None,
) -> tuple[Any, list[str]]:
    """Period averaging, then zero-phase low-pass and central-difference differentiation within each experiment,
    on the samples' time stamps (even or jittery: :func:`lowpass_and_differentiate`).

    Args:
        ds: the measured dataset (module docstring).
        per_experiment, experiments: how ``ds`` splits into experiments (module docstring).
        lowpass_hz: cut-off in Hz, or None for no filter.
        differentiate: recompute qd and qdd from q.
        period_average: average this many periods of a Fourier excitation into one (:func:`average_periods`),
            or None.

    Returns:
        ``(dataset, notes)``: the preprocessed dataset (``ds`` itself when nothing is asked) and one line per
        step for the report.

    Raises:
        ConfigError: a cut-off at or above an experiment's Nyquist frequency or below one cycle per experiment
            (:func:`~robotid_sim.signal.filters.check_cutoff`); a ``period_average`` that does not fit the data
            (:func:`period_samples`).
        DataError: an experiment too short for the filter or the differences (named, with its sample range);
            period averaging of samples on uneven time stamps.
    """
    notes = []
    if period_average is not None:
        ds = average_periods(ds, period_average)
        notes.append(f"{period_average} periods averaged into one (seed 001 §5)")
    if lowpass_hz is None and not differentiate:
        return ds, notes

    def one(part):
        return lowpass_and_differentiate(part, lowpass_hz=lowpass_hz, differentiate=differentiate)

    jittery = [name for name, part in experiments(ds) if not is_uniform(ds.t[part])]
    out = per_experiment(ds, one)
    if lowpass_hz is not None:
        notes.append(f"zero-phase Butterworth low-pass at {lowpass_hz} Hz on q, qd, tau")
        if jittery:
            notes.append(
                f"the time stamps of {', '.join(jittery)} are uneven: filtered on an even grid {GRID_OVERSAMPLING} "
                "times finer than the median step and read back at the samples' own stamps (cubic spline)"
            )
        derived = [] if differentiate else list(ds.metadata.get("derived_signals", {}))
        if derived:
            source = "q" if "qd" in derived else "qd"
            notes.append(f"{' and '.join(derived)} (not in the file) derived again from the filtered {source}")
    if differentiate:
        notes.append("qd and qdd recomputed from q by central differences on the time stamps (seed 001 Eq. 24)")
    parts = experiments(out)
    if len(parts) > 1:
        done = " and ".join(
            w for w, on in (("filtered", lowpass_hz is not None), ("differentiated", differentiate)) if on
        )
        notes.append(
            f"{done} within each of the {len(parts)} experiments ({', '.join(name for name, _ in parts)}), never "
            "across a join"
        )
    return out, notes


def lowpass_and_differentiate(part, *, lowpass_hz: float | None = None, differentiate: bool = False):
    """One experiment, on its own time stamps: a 4th-order zero-phase Butterworth low-pass
    (:func:`~robotid_sim.signal.lowpass_on_stamps`) on q, qd and tau, and on qdd unless it is recomputed; with
    ``differentiate``, qd and qdd recomputed from q by central differences on the stamps (seed 001 Eq. 24,
    :func:`~robotid_sim.signal.time_derivative`), of the filtered q when there is a low-pass
    (:func:`~robotid_sim.signal.lowpass_derivatives`). On even stamps the filter runs on the samples at their
    rate; on a jittery clock on an even grid, read back at the samples' own stamps (documented in
    :func:`~robotid_sim.signal.lowpass_on_stamps`). t and the truth are unchanged.

    With the low-pass, a qd or qdd that the file did not hold (``metadata["derived_signals"]``: derived from the
    raw q or qd when loaded, :func:`robotid_sim.sim.logs.load_log`) is derived again from the filtered signal
    rather than filtered: differences of raw q amplify its noise (on a jittery clock by the ratio of a sample's
    two steps too, up to 15 for steps of 2 and 30 ms), and the filter's start and end transients on that noise
    reach far into the record."""
    t, q, qd, qdd, tau = part.t, part.q, part.qd, part.qdd, part.tau
    if lowpass_hz is None:
        if differentiate:
            qd = time_derivative(q, t)
            qdd = time_derivative(qd, t)
        return type(part)(t, q, qd, qdd, tau, truth=part.truth, joint_names=part.joint_names, metadata=part.metadata)
    check_cutoff(lowpass_hz, 1.0 / part.dt, part.n_samples, LOWPASS_NAME)
    derived = set(part.metadata.get("derived_signals", {}))
    tau = lowpass_on_stamps(tau, t, lowpass_hz)
    if differentiate or "qd" in derived:
        q, qd, qdd_of_q = lowpass_derivatives(q, t, lowpass_hz)
        qdd = qdd_of_q if differentiate or "qdd" in derived else lowpass_on_stamps(qdd, t, lowpass_hz)
    else:
        q = lowpass_on_stamps(q, t, lowpass_hz)
        if "qdd" in derived:
            qd, qdd, _ = lowpass_derivatives(qd, t, lowpass_hz)
        else:
            qd, qdd = (lowpass_on_stamps(x, t, lowpass_hz) for x in (qd, qdd))
    return type(part)(t, q, qd, qdd, tau, truth=part.truth, joint_names=part.joint_names, metadata=part.metadata)


def period_samples(excitation: dict, sample_dt: float, n_samples: int, periods: int) -> int:
    """Samples per period for ``preprocessing.period_average``; ConfigError unless ``periods`` whole periods fit.

    Args:
        excitation: the excitation's description (a ``fourier`` one with ``omega_f``, rad/s).
        sample_dt: the sample interval (s).
        n_samples: samples in the data.
        periods: periods to average.
    """
    if excitation.get("type") != "fourier" or "omega_f" not in excitation:
        raise ConfigError(
            f"preprocessing.period_average needs a periodic (fourier) excitation, got '{excitation.get('type')}'"
        )
    samples = 2 * np.pi / float(excitation["omega_f"]) / sample_dt
    if abs(samples - round(samples)) > 1e-6 * samples:
        raise ConfigError(
            f"preprocessing.period_average: the period ({samples:.4g} samples) is not a whole number of "
            "samples; choose rate_hz so that rate_hz / base_frequency is an integer"
        )
    samples = int(round(samples))
    if n_samples < periods * samples:
        raise ConfigError(
            f"preprocessing.period_average = {periods} but the data holds {n_samples / samples:.2f} periods; "
            "set excitation.periods (or simulation.duration) to cover them"
        )
    return samples


def average_periods(ds, periods: int):
    """The mean of the first ``periods`` periods of a dataset recorded on a Fourier excitation (seed 001 §5);
    ``metadata["excitation"]`` describes the excitation, ``metadata["period_averaged"]`` records ``periods``."""
    samples = period_samples(ds.metadata.get("excitation", {}), ds.dt, ds.n_samples, periods)
    part = ds.slice(0, periods * samples)
    if not is_uniform(part.t):
        steps = np.diff(part.t)
        raise DataError(
            f"preprocessing.period_average averages samples period by period, which needs even time stamps, but "
            f"the steps of the first {periods} periods range from {steps.min():.6g} to {steps.max():.6g} s; leave "
            "period_average out for a recording on a jittery clock"
        )

    def mean(x):
        return period_average(x, samples)

    truth = (
        None
        if part.truth is None
        else type(part.truth)(*(mean(getattr(part.truth, k)) for k in ("q", "qd", "qdd", "tau")))
    )
    return type(ds)(
        part.t[:samples],
        mean(part.q),
        mean(part.qd),
        mean(part.qdd),
        mean(part.tau),
        truth=truth,
        joint_names=list(ds.joint_names),
        metadata={**ds.metadata, "period_averaged": periods},
    )
