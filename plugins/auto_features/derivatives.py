"""The data side of ``auto_features`` (seed 002): LOOCV smoothing, Savitzky–Golay derivatives and the
cross-validated choice of the differentiator's window."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robotid_sim.errors import DataError
from robotid_sim.identification.lagrangian_basis import LagrangianBasis

#: polynomial order of the Savitzky–Golay differentiator (a local cubic: qd and qdd from one fit)
DERIVATIVE_POLYORDER = 3
#: number of candidate differentiator windows tried by the cross-validation
N_WINDOWS = 12
#: longest candidate differentiator window, in seconds (and at most a quarter of the shortest experiment)
MAX_WINDOW_S = 1.0
#: contiguous blocks of the cross-validation of the torque fit
CV_FOLDS = 5
#: most samples the cross-validation fits on (evenly strided)
CV_MAX_SAMPLES = 6000


def _smooth(t: np.ndarray, y: np.ndarray, smoothing: str, max_order: int, criterion: str | None) -> tuple:
    """(fitted (N, n), description) of one signal of one experiment by the LOOCV smoother ``smoothing``."""
    from robotid_sim.signal.smoothing import loocv_lowess, loocv_polynomial, smooth_auto

    if smoothing == "none":
        return y, {"method": "none"}
    if smoothing == "polynomial":
        r = loocv_polynomial(t, y, max_order=max_order, criterion=criterion or "gap")
        return r.fitted, {"method": ["polynomial"] * y.shape[1], "order": r.order.tolist()}
    if smoothing == "lowess":
        r = loocv_lowess(t, y, criterion=criterion or "loocv")
        return r.fitted, {"method": ["lowess"] * y.shape[1], "bandwidth_s": r.bandwidth.tolist()}
    r = smooth_auto(t, y, max_order=max_order, criterion=criterion)
    return r.fitted, {
        "method": list(r.method),
        "order": r.polynomial.order.tolist(),
        "bandwidth_s": r.lowess.bandwidth.tolist(),
    }


@dataclass(frozen=True, eq=False)
class LoocvSmoothed:
    """Per experiment, the LOOCV-smoothed q and measured qd (:func:`loocv_smooth`), before differentiation."""

    q: np.ndarray
    qd: np.ndarray | None
    dt: float
    experiments: list[tuple[str, slice]]
    choices: list[dict]


def loocv_smooth(
    t,
    q,
    qd,
    experiments: list[tuple[str, slice]],
    *,
    smoothing: str = "auto",
    max_order: int = 10,
    criterion: str | None = None,
    min_samples: int = 8,
) -> LoocvSmoothed:
    """Smooth q (and the measured qd, when given) by LOOCV, each experiment on its own (seed 002, SPEC §7).

    ``smoothing``: ``"auto"`` (per joint, the better of polynomial and local regression by LOOCV error),
    ``"polynomial"``, ``"lowess"`` or ``"none"``. The noise of the measured signals is white, which LOOCV
    needs; a derivative's is not (it is correlated from sample to sample), so derivatives are not chosen by
    LOOCV but by :func:`differentiate`'s cross-validation of the torque fit.

    Raises:
        DataError: NaN/inf in a signal, fewer than ``min_samples`` in an experiment, or non-uniform sampling.
    """
    from robotid_sim.signal.filters import as_time_series

    t = as_time_series(t, "t")
    q = as_time_series(q, "q")
    qd = None if qd is None else as_time_series(qd, "qd")
    out_q = np.empty_like(q)
    out_qd = None if qd is None else np.empty_like(qd)
    choices, dts = [], []
    for name, sl in experiments:
        te = t[sl]
        if te.shape[0] < min_samples:
            raise DataError(
                f"auto_features: experiment '{name}' has {te.shape[0]} samples; at least {min_samples} are needed "
                "to smooth and differentiate it and fit the features"
            )
        steps = np.diff(te)
        dt = float(np.mean(steps))
        if np.any(np.abs(steps - dt) > 1e-6 * dt):
            raise DataError(
                f"auto_features: experiment '{name}' is not uniformly sampled (steps {steps.min():g} … "
                f"{steps.max():g} s); resample it first"
            )
        dts.append(dt)
        out_q[sl], choice = _smooth(te, q[sl], smoothing, max_order, criterion)
        choices.append({"experiment": name, "q": choice})
        if qd is not None:
            out_qd[sl], choices[-1]["qd"] = _smooth(te, qd[sl], smoothing, max_order, criterion)
    if max(dts) - min(dts) > 1e-6 * max(dts):
        raise DataError(f"auto_features: the experiments are sampled at different rates ({sorted(set(dts))} s)")
    return LoocvSmoothed(out_q, out_qd, dts[0], list(experiments), choices)


def differentiate(smoothed: LoocvSmoothed, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(qd, qdd) (N, n): a Savitzky–Golay local cubic of ``window`` samples, per experiment.

    From the smoothed q (qd and qdd both), or, when :class:`LoocvSmoothed` holds a measured qd, qd is that
    one and qdd its derivative (local quadratic).
    """
    from robotid_sim.signal.filters import savgol

    qd = np.empty_like(smoothed.q)
    qdd = np.empty_like(smoothed.q)
    for _, sl in smoothed.experiments:
        w = min(window, _largest_odd(sl.stop - sl.start))
        if smoothed.qd is None:
            qd[sl] = savgol(smoothed.q[sl], w, DERIVATIVE_POLYORDER, deriv=1, dt=smoothed.dt)
            qdd[sl] = savgol(smoothed.q[sl], w, DERIVATIVE_POLYORDER, deriv=2, dt=smoothed.dt)
        else:
            qd[sl] = smoothed.qd[sl]
            qdd[sl] = savgol(smoothed.qd[sl], w, DERIVATIVE_POLYORDER - 1, deriv=1, dt=smoothed.dt)
    return qd, qdd


def _largest_odd(n: int) -> int:
    return n if n % 2 else n - 1


def candidate_windows(smoothed: LoocvSmoothed) -> np.ndarray:
    """Odd differentiator windows (samples), geometrically spaced from 5 samples to the smaller of
    :data:`MAX_WINDOW_S` and a quarter of the shortest experiment."""
    shortest = min(sl.stop - sl.start for _, sl in smoothed.experiments)
    largest = max(5, min(int(MAX_WINDOW_S / smoothed.dt), shortest // 4))
    windows = np.unique(np.geomspace(5, largest, N_WINDOWS).astype(int) // 2 * 2 + 1)
    return windows[windows <= _largest_odd(shortest)]


def cross_validated_window(
    basis: LagrangianBasis, smoothed: LoocvSmoothed, tau: np.ndarray, weights: np.ndarray | None = None
) -> tuple[int, dict]:
    """The differentiator window whose torque fit predicts held-out data best.

    For each candidate (:func:`candidate_windows`), the features are built from :func:`differentiate`'s
    qd, qdd and fitted by least squares on all but one of :data:`CV_FOLDS` contiguous blocks of samples
    (time blocks: neighbouring samples share their noise through the smoother), then scored on the
    block left out. Too short a window leaves noise in qdd (errors in the features), too long a one
    flattens the motion; the held-out torque error is smallest in between.

    Returns:
        (window, {"windows": candidates, "cv_rms": held-out torque RMS per candidate}).
    """
    N = smoothed.q.shape[0]
    rows = np.arange(N)
    if N > CV_MAX_SAMPLES:
        rows = np.linspace(0, N - 1, CV_MAX_SAMPLES).round().astype(int)
    fold = np.minimum((rows * CV_FOLDS) // N, CV_FOLDS - 1)
    keep = np.ones((rows.size, basis.n_dof)) if weights is None else np.asarray(weights)[rows]
    windows = candidate_windows(smoothed)
    scores = []
    for w in windows:
        qd, qdd = differentiate(smoothed, int(w))
        Phi = basis.regressor(smoothed.q[rows], qd[rows], qdd[rows]) * keep[:, :, None]
        target = tau[rows] * keep
        scale = np.sqrt(np.mean(Phi**2, axis=(0, 1)))
        scale[scale == 0] = 1.0
        Phi = Phi / scale
        grams = np.stack([np.einsum("nip,niq->pq", Phi[fold == k], Phi[fold == k]) for k in range(CV_FOLDS)])
        moments = np.stack([np.einsum("nip,ni->p", Phi[fold == k], target[fold == k]) for k in range(CV_FOLDS)])
        G, b = grams.sum(0), moments.sum(0)
        sq, count = 0.0, 0.0
        for k in range(CV_FOLDS):
            theta = np.linalg.lstsq(G - grams[k], b - moments[k], rcond=1e-12)[0]
            held = fold == k
            sq += float(np.sum((Phi[held] @ theta - target[held]) ** 2))
            count += float(keep[held].sum())
        scores.append(np.sqrt(sq / count))
    best = int(np.argmin(scores))
    return int(windows[best]), {"windows": windows.tolist(), "cv_rms": scores}
