"""Automatic smoothing chosen by leave-one-out cross-validation (seed 002, SPEC §7).

Seed 002 smooths noisy joint signals with either a polynomial of order 0–10 or a locally
weighted linear regression, and chooses the order (or the bandwidth) by leave-one-out
cross-validation (LOOCV), "picking the fit where the test and the training error meet":

    ε_test  = 1/m Σ_i (y_i − ŷ^(−i)(t_i))²                 (left-out point i)
    ε_train = 1/(m(m−1)) Σ_i Σ_{j≠i} (y_j − ŷ^(−i)(t_j))²    (the m−1 points kept)
    chosen  = argmin |ε_test − ε_train|                    (seed 002: "min |ε_Test − ε_Train|")

where ŷ^(−i) is the fit computed without sample i. ``criterion="loocv"`` instead takes the
usual argmin ε_test.

Defaults differ by smoother, on evidence: for polynomials the seed's "gap" criterion is the
robust one (on seed 002's example, a noisy cubic — 0.5t³ − t² + 0.3t + 1 on [−2, 2], N = 100,
σ = 0.5 — it picked order 3 for 200 of 200 noise seeds, argmin ε_test for only 145, the others
going to orders 4–10). For the local regression the gap criterion over-smooths:
|ε_test − ε_train| ≈ 2·tr(L)/m·(σ² + bias²) is smallest where the bias is already of the order
of the noise (on a noisy sine, N = 20000, σ = 0.05, its fit error was 0.023 against 0.006 for
argmin ε_test), so :func:`loocv_lowess` defaults to ``"loocv"``.

Both smoothers are linear: ŷ = H y with a hat matrix H that depends on t only. No loop over
left-out points is needed:

* the LOOCV residual is e_i / (1 − H_ii), with e = y − H y (exact for least squares, and for
  a local regression because the local fit at t_i without point i is the local weighted least
  squares problem minus one row: Sherman–Morrison);
* for least squares (H a projection, H e = 0, H² = H), deleting point i moves the fit by
  −H[:, i] e_i / (1 − H_ii), which gives the closed form
  ε_train = (m·RSS − Σ_i e_i² / (1 − H_ii)) / (m(m − 1)), RSS = Σ e_i².
  The local regression is not a projection; its ``train_error`` is the in-sample mean
  squared residual 1/m Σ e_i², a stand-in for the seed's ε_train (for least squares the two
  differ by a relative O(p/m²)).

Every function accepts ``y`` of shape (N,) or (N, n) and treats each column separately; the
chosen order / bandwidth is reported per column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial import legendre

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.signal.filters import as_time_series, is_uniform

__all__ = [
    "AutoSmoothing",
    "LowessSmoothing",
    "PolynomialSmoothing",
    "loocv_lowess",
    "loocv_polynomial",
    "smooth_auto",
]

CRITERIA = ("gap", "loocv")

#: default number of candidate bandwidths of :func:`loocv_lowess`
N_BANDWIDTHS = 20
#: default largest bandwidth of :func:`loocv_lowess`, in samples (and at most half the record)
MAX_BANDWIDTH_SAMPLES = 500


@dataclass(frozen=True, eq=False)
class PolynomialSmoothing:
    """Result of :func:`loocv_polynomial`.

    Attributes:
        orders: candidate polynomial orders (K,), 0 … max_order.
        test_error: LOOCV error ε_test per order and column (K, n).
        train_error: seed 002 training error ε_train per order and column (K, n).
        order: chosen order per column (n,).
        fitted: the fit of the chosen order, same shape as ``y``.
        criterion: ``"gap"`` (min |ε_test − ε_train|, seed 002) or ``"loocv"`` (min ε_test).
    """

    orders: np.ndarray
    test_error: np.ndarray
    train_error: np.ndarray
    order: np.ndarray
    fitted: np.ndarray
    criterion: str

    @property
    def chosen_test_error(self) -> np.ndarray:
        """LOOCV error of the chosen order, per column (n,)."""
        return self.test_error[self.order, np.arange(self.order.size)]


@dataclass(frozen=True, eq=False)
class LowessSmoothing:
    """Result of :func:`loocv_lowess`.

    Attributes:
        bandwidths: candidate half-widths h of the tricube window, in units of t (K,).
        test_error: LOOCV error ε_test per bandwidth and column (K, n).
        train_error: in-sample mean squared residual per bandwidth and column (K, n).
        bandwidth: chosen bandwidth per column (n,).
        fitted: the fit with the chosen bandwidth, same shape as ``y``.
        criterion: ``"gap"`` (min |ε_test − ε_train|, seed 002) or ``"loocv"`` (min ε_test).
    """

    bandwidths: np.ndarray
    test_error: np.ndarray
    train_error: np.ndarray
    bandwidth: np.ndarray
    fitted: np.ndarray
    criterion: str

    @property
    def chosen_test_error(self) -> np.ndarray:
        """LOOCV error of the chosen bandwidth, per column (n,)."""
        index = np.searchsorted(self.bandwidths, self.bandwidth)
        return self.test_error[index, np.arange(self.bandwidth.size)]


@dataclass(frozen=True, eq=False)
class AutoSmoothing:
    """Result of :func:`smooth_auto`.

    Attributes:
        fitted: per column, the fit of the method with the smaller LOOCV error; shape of ``y``.
        method: ``"polynomial"`` or ``"lowess"`` per column (n,).
        polynomial: the full polynomial result.
        lowess: the full local-regression result.
    """

    fitted: np.ndarray
    method: tuple[str, ...]
    polynomial: PolynomialSmoothing
    lowess: LowessSmoothing


def _time_and_columns(t, y, min_samples: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Validate t (N,) strictly increasing and y (N,) or (N, n); return t, Y (N, n), y was 1-D."""
    t = as_time_series(t, "t", 0, min_samples=min_samples)
    if t.ndim != 1:
        raise DataError(f"'t' must be 1-D (N,), got shape {t.shape}")
    steps = np.diff(t)
    if np.any(steps <= 0):
        row = int(np.argmax(steps <= 0)) + 1
        raise DataError(f"'t' must be strictly increasing; t[{row}] = {t[row]!r} follows t[{row - 1}] = {t[row - 1]!r}")
    y = as_time_series(y, "y", 0)
    if y.ndim not in (1, 2):
        raise DataError(f"'y' must have shape (N,) or (N, n), got {y.shape}")
    if y.shape[0] != t.shape[0]:
        raise DataError(f"'y' has {y.shape[0]} samples but 't' has {t.shape[0]}")
    return t, (y[:, None] if y.ndim == 1 else y), y.ndim == 1


def _check_criterion(criterion: str) -> None:
    if criterion not in CRITERIA:
        raise ConfigError(f"unknown criterion {criterion!r}; expected one of {', '.join(CRITERIA)}")


def _select(test: np.ndarray, train: np.ndarray, criterion: str) -> np.ndarray:
    """Index of the chosen candidate per column (n,); ties go to the first (simplest) one."""
    score = np.abs(test - train) if criterion == "gap" else test  # seed 002: min |ε_test − ε_train|
    score = np.where(np.isfinite(score), score, np.inf)
    return np.argmin(score, axis=0)


def loocv_polynomial(t, y, max_order: int = 10, criterion: str = "gap") -> PolynomialSmoothing:
    """Fit polynomials of order 0 … ``max_order`` and choose the order by LOOCV (seed 002).

    t is mapped onto [−1, 1] and the fit uses a Legendre basis (``numpy.polynomial``), which
    stays well conditioned up to high orders. One QR factorisation of the Vandermonde matrix
    serves all orders, because the first p columns of Q span the polynomials of order < p; the
    hat-matrix diagonal of order p − 1 is then Σ_{k<p} Q_ik².

    Args:
        t: sample times (N,), strictly increasing.
        y: samples (N,) or (N, n); each column is smoothed separately.
        max_order: the highest order tried, 0 <= max_order; N must be at least max_order + 2.
        criterion: ``"gap"`` (seed 002: min |ε_test − ε_train|) or ``"loocv"`` (min ε_test).

    Returns:
        A :class:`PolynomialSmoothing` with the per-order errors, the chosen order per column
        and the fitted values (shape of ``y``).

    Raises:
        ConfigError: ``max_order`` negative or ``criterion`` unknown.
        DataError: NaN/inf, mismatched lengths, t not increasing, or too few samples.
    """
    _check_criterion(criterion)
    if isinstance(max_order, bool) or not isinstance(max_order, int | np.integer) or max_order < 0:
        raise ConfigError(f"'max_order' must be an integer >= 0, got {max_order!r}")
    t, Y, one_d = _time_and_columns(t, y, min_samples=max_order + 2)
    m = t.shape[0]
    u = 2.0 * (t - t[0]) / (t[-1] - t[0]) - 1.0  # scaled time in [-1, 1] for conditioning
    Q, _ = np.linalg.qr(legendre.legvander(u, max_order))  # (N, P), P = max_order + 1
    coef = Q.T @ Y  # (P, n)
    # fit of order p - 1: Σ_{k<p} Q[:, k] coef[k]  -> (P, N, n)
    fits = np.cumsum(Q.T[:, :, None] * coef[:, None, :], axis=0)
    hat = np.cumsum(Q.T**2, axis=0)  # H_ii of each order (P, N)
    resid = Y[None] - fits
    with np.errstate(divide="ignore", invalid="ignore"):
        leave = 1.0 / (1.0 - hat)[:, :, None]
        test = np.mean((resid * leave) ** 2, axis=1)  # ε_test via e_i / (1 - H_ii)
        rss = np.sum(resid**2, axis=1)
        # seed 002 ε_train in closed form for a projection smoother (module docstring)
        train = (m * rss - np.sum(resid**2 * leave, axis=1)) / (m * (m - 1))
    chosen = _select(test, train, criterion)
    fitted = fits[chosen, :, np.arange(Y.shape[1])].T  # (N, n)
    return PolynomialSmoothing(
        orders=np.arange(max_order + 1),
        test_error=test,
        train_error=train,
        order=chosen,
        fitted=fitted[:, 0] if one_d else fitted,
        criterion=criterion,
    )


def _tricube(u: np.ndarray) -> np.ndarray:
    """Tricube weight (1 − |u|³)³ for |u| < 1, else 0."""
    a = np.clip(1.0 - np.abs(u) ** 3, 0.0, None)
    return a**3


def _window_sums_uniform(Y: np.ndarray, dt: float, h: float) -> tuple[np.ndarray, ...]:
    """Weighted sums S0, S1, S2 (N,) and T0, T1 (N, n) on a uniform grid, as convolutions."""
    import scipy.signal  # here, not at module level: it takes ~0.5 s to import

    m = Y.shape[0]
    half = min(int(np.floor(h / dt)), m - 1)
    d = dt * np.arange(-half, half + 1)
    w = _tricube(d / h)
    kernels = np.stack([w, w * d, w * d**2], axis=1)[::-1]  # reversed: correlation as convolution
    ones = np.ones(m)
    # T(i) = Σ_k g_k y_{i+k} = (y * reversed g)[i + half]: keep 'full' rows half … half + m - 1
    sums = np.stack([scipy.signal.convolve(ones, kernels[:, c], mode="full") for c in range(3)], axis=1)[
        half : half + m
    ]
    t0 = scipy.signal.convolve(Y, kernels[:, 0:1], mode="full")[half : half + m]
    t1 = scipy.signal.convolve(Y, kernels[:, 1:2], mode="full")[half : half + m]
    return sums[:, 0], sums[:, 1], sums[:, 2], t0, t1


def _window_sums_banded(t: np.ndarray, Y: np.ndarray, h: float) -> tuple[np.ndarray, ...]:
    """Weighted sums S0, S1, S2 (N,) and T0, T1 (N, n) for any increasing t, by offsets.

    Loops over the offset k between a sample and its neighbours (up to the widest window),
    each step vectorised over all samples: cost O(N · samples per window).
    """
    m = Y.shape[0]
    reach = np.searchsorted(t, t + h, side="left") - np.arange(m) - 1
    s0, s1, s2 = np.ones(m), np.zeros(m), np.zeros(m)  # the sample itself: weight 1, d = 0
    t0, t1 = Y.copy(), np.zeros_like(Y)
    for k in range(1, int(reach.max()) + 1):
        d = t[k:] - t[:-k]  # t_j - t_i for j = i + k
        w = _tricube(d / h)
        wd, wdd = w * d, w * d * d
        s0[:-k] += w
        s0[k:] += w
        s1[:-k] += wd
        s1[k:] -= wd
        s2[:-k] += wdd
        s2[k:] += wdd
        t0[:-k] += w[:, None] * Y[k:]
        t0[k:] += w[:, None] * Y[:-k]
        t1[:-k] += wd[:, None] * Y[k:]
        t1[k:] -= wd[:, None] * Y[:-k]
    return s0, s1, s2, t0, t1


def _local_linear(t: np.ndarray, Y: np.ndarray, h: float, uniform: bool):
    """Tricube local linear fit at every t_i and the hat-matrix diagonal L_ii (N,)."""
    if uniform:
        s0, s1, s2, t0, t1 = _window_sums_uniform(Y, (t[-1] - t[0]) / (t.shape[0] - 1), h)
    else:
        s0, s1, s2, t0, t1 = _window_sums_banded(t, Y, h)
    det = s0 * s2 - s1**2
    # local model y ≈ a + b (t_j − t_i); fit value a = e1ᵀ (XᵀWX)⁻¹ XᵀW y
    fitted = (s2[:, None] * t0 - s1[:, None] * t1) / det[:, None]
    hat = s2 / det  # own weight 1 at d = 0: L_ii = [(XᵀWX)⁻¹]_00
    return fitted, hat


def loocv_lowess(t, y, bandwidths=None, criterion: str = "loocv") -> LowessSmoothing:
    """Locally weighted (tricube) linear regression with the bandwidth chosen by LOOCV (seed 002).

    At every t_i a straight line is fitted by weighted least squares to the samples within
    ``h`` of t_i, with tricube weights w_j = (1 − |t_j − t_i|³/h³)³; the smoothed value is the
    line at t_i. The fit is linear in y, so the LOOCV residuals come from the hat-matrix
    diagonal (module docstring). On a uniform grid the weighted sums are convolutions (cost
    O(N log N) per bandwidth); otherwise they are accumulated offset by offset (cost
    O(N · samples per window)).

    Args:
        t: sample times (N,), strictly increasing, N >= 4.
        y: samples (N,) or (N, n); each column is smoothed separately.
        bandwidths: candidate half-widths h in units of t, each greater than 2·max(Δt) so that
            every local fit has at least 3 points. Default: 20 values spaced geometrically from
            2.5·max(Δt) to the smaller of half the record and 500 median sample intervals.
        criterion: ``"loocv"`` (min ε_test, the default: see the module docstring) or
            ``"gap"`` (seed 002: min |ε_test − ε_train|, which over-smooths here).

    Returns:
        A :class:`LowessSmoothing` with the per-bandwidth errors, the chosen bandwidth per
        column and the fitted values (shape of ``y``).

    Raises:
        ConfigError: a bandwidth too small or not finite, or ``criterion`` unknown.
        DataError: NaN/inf, mismatched lengths, t not increasing, or fewer than 4 samples.
    """
    _check_criterion(criterion)
    t, Y, one_d = _time_and_columns(t, y, min_samples=4)
    smallest = 2.0 * float(np.max(np.diff(t)))
    if bandwidths is None:
        largest = min((t[-1] - t[0]) / 2.0, MAX_BANDWIDTH_SAMPLES * float(np.median(np.diff(t))))
        largest = max(largest, 1.25 * smallest * 1.01)
        bandwidths = np.geomspace(1.25 * smallest, largest, N_BANDWIDTHS)
    h_all = np.unique(np.asarray(bandwidths, dtype=float).ravel())
    if h_all.size == 0 or not np.all(np.isfinite(h_all)) or h_all[0] <= smallest:
        raise ConfigError(
            f"every bandwidth must be finite and greater than 2 * max(dt) = {smallest:g} "
            f"(units of t) so that each local fit has 3 points; got {np.asarray(bandwidths)!r}"
        )
    uniform = is_uniform(t)
    fits, test, train = [], [], []
    for h in h_all:
        fitted, hat = _local_linear(t, Y, h, uniform)
        resid = Y - fitted
        with np.errstate(divide="ignore", invalid="ignore"):
            test.append(np.mean((resid / (1.0 - hat)[:, None]) ** 2, axis=0))
        train.append(np.mean(resid**2, axis=0))
        fits.append(fitted)
    test_arr, train_arr = np.array(test), np.array(train)
    chosen = _select(test_arr, train_arr, criterion)
    fitted = np.stack([fits[k][:, j] for j, k in enumerate(chosen)], axis=1)
    return LowessSmoothing(
        bandwidths=h_all,
        test_error=test_arr,
        train_error=train_arr,
        bandwidth=h_all[chosen],
        fitted=fitted[:, 0] if one_d else fitted,
        criterion=criterion,
    )


def smooth_auto(t, y, max_order: int = 10, bandwidths=None, criterion: str | None = None) -> AutoSmoothing:
    """Smooth each column with the better of :func:`loocv_polynomial` and :func:`loocv_lowess`.

    Each smoother chooses its own order / bandwidth with ``criterion``; then, per column, the
    method whose chosen fit has the smaller LOOCV error ε_test wins (seed 002 compares the two
    and finds the polynomial better on short records; a long record with many oscillations
    needs the local regression).

    Args:
        t: sample times (N,), strictly increasing.
        y: samples (N,) or (N, n).
        max_order: passed to :func:`loocv_polynomial`.
        bandwidths: passed to :func:`loocv_lowess`.
        criterion: passed to both; None keeps each smoother's default (``"gap"`` for the
            polynomial, ``"loocv"`` for the local regression).

    Returns:
        An :class:`AutoSmoothing` holding the chosen fit, the method per column and both
        full results.

    Raises:
        ConfigError, DataError: as the two smoothers.
    """
    poly = loocv_polynomial(t, y, max_order=max_order, criterion=criterion or "gap")
    local = loocv_lowess(t, y, bandwidths=bandwidths, criterion=criterion or "loocv")
    use_poly = poly.chosen_test_error <= local.chosen_test_error  # (n,)
    n_rows = poly.fitted.shape[0]
    fitted = np.where(use_poly, poly.fitted.reshape(n_rows, -1), local.fitted.reshape(n_rows, -1)).reshape(
        poly.fitted.shape
    )
    method = tuple("polynomial" if p else "lowess" for p in use_poly)
    return AutoSmoothing(fitted=fitted, method=method, polynomial=poly, lowess=local)
