"""Preprocessing of a recorded or simulated dataset before identification (SPEC §7).

In this order: period averaging (seed 001 §5), zero-phase low-pass, differentiation; the last two within each
experiment, never across the join of two recordings.

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

from robotid_sim.errors import ConfigError
from robotid_sim.signal.filters import butterworth_filtfilt, central_difference, check_cutoff, period_average

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
    """Period averaging, then zero-phase low-pass and central-difference differentiation within each experiment.

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
        DataError: an experiment too short for the filter or the differences (named, with its sample range).
    """
    notes = []
    if period_average is not None:
        ds = average_periods(ds, period_average)
        notes.append(f"{period_average} periods averaged into one (seed 001 §5)")
    if lowpass_hz is None and not differentiate:
        return ds, notes

    def one(part):
        return lowpass_and_differentiate(part, lowpass_hz=lowpass_hz, differentiate=differentiate)

    out = per_experiment(ds, one)
    if lowpass_hz is not None:
        notes.append(f"zero-phase Butterworth low-pass at {lowpass_hz} Hz on q, qd, tau")
    if differentiate:
        notes.append("qd and qdd recomputed from q by central differences (seed 001 Eq. 24)")
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
    """One experiment, at its own sampling rate: a 4th-order zero-phase Butterworth low-pass
    (:func:`~robotid_sim.signal.butterworth_filtfilt`) on q, qd and tau, and on qdd unless it is recomputed; with
    ``differentiate``, qd and qdd recomputed from q by central differences (seed 001 Eq. 24,
    :func:`~robotid_sim.signal.central_difference`). t and the truth are unchanged."""
    q, qd, qdd, tau = part.q, part.qd, part.qdd, part.tau
    fs = 1.0 / part.dt
    if lowpass_hz is not None:
        check_cutoff(lowpass_hz, fs, part.n_samples, LOWPASS_NAME)
        q, qd, tau = (butterworth_filtfilt(x, fs, lowpass_hz) for x in (q, qd, tau))
    if differentiate:
        qd = central_difference(q, part.dt)
        qdd = central_difference(qd, part.dt)
    elif lowpass_hz is not None:
        qdd = butterworth_filtfilt(qdd, fs, lowpass_hz)
    return type(part)(part.t, q, qd, qdd, tau, truth=part.truth, joint_names=part.joint_names, metadata=part.metadata)


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
