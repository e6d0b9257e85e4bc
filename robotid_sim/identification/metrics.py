"""Validation metrics (SPEC §9): plain numpy functions of observed and predicted signals.

Symbols used throughout:

- ``o`` observed (measured) signal, ``p`` predicted signal: arrays (N, n), N samples of n
  joints (a 1-D array (N,) is taken as one joint, (N, 1)). Per-joint metrics return (n,).
- ``W`` the stacked base regressor (N·n, b) (or unstacked (N, n, b)), ``b`` base parameters.
- ``q_ref``, ``q`` reference and actual joint trajectories (N, n), rad.

Every function checks its inputs and raises :class:`~robotid_sim.errors.DataError` naming the
argument and what is wrong (shape mismatch, NaN/inf, empty).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from robotid_sim.errors import DataError

#: default floor, relative to max |true value|, for :func:`per_parameter_relative_error`
RELATIVE_ERROR_FLOOR = 1e-3


# ----------------------------------------------------------------------------------- checks
def _finite_array(name: str, value, ndim: tuple[int, ...]) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must be a numeric array, got {type(value).__name__}") from exc
    if a.ndim not in ndim:
        raise DataError(f"{name} must have {' or '.join(str(d) for d in ndim)} dimension(s), got shape {a.shape}")
    if a.size == 0:
        raise DataError(f"{name} is empty (shape {a.shape}); at least one sample is needed")
    bad = ~np.isfinite(a)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise DataError(
            f"{name} holds {int(bad.sum())} NaN/inf value(s), the first at index {first}; "
            "clean or drop those samples first"
        )
    return a


def _signals(name: str, value) -> np.ndarray:
    a = _finite_array(name, value, (1, 2))
    return a[:, None] if a.ndim == 1 else a


def _pair(o, p, names: tuple[str, str] = ("observed", "predicted")) -> tuple[np.ndarray, np.ndarray]:
    o, p = _signals(names[0], o), _signals(names[1], p)
    if o.shape != p.shape:
        raise DataError(
            f"{names[0]} has shape {o.shape} but {names[1]} has shape {p.shape}; "
            "both must be (N, n) over the same samples and joints"
        )
    return o, p


def _stacked_regressor(W) -> np.ndarray:
    W = _finite_array("W", W, (2, 3))
    return W.reshape(-1, W.shape[-1])


# --------------------------------------------------------------------------- signal errors
def rms_index(o, p) -> np.ndarray:
    """Residual root mean square per joint: RMS_j = sqrt(Σ_k (o_kj − p_kj)² / N) (seed 004 Eq. 45).

    Args:
        o: observed signal (N, n).
        p: predicted signal (N, n).

    Returns:
        (n,) RMS in the signal's unit.
    """
    o, p = _pair(o, p)
    return np.sqrt(np.mean((o - p) ** 2, axis=0))


def torque_rms(o, p) -> np.ndarray:
    """Torque residual RMS per joint (seed 001 Table 5), i.e. :func:`rms_index` of torques.

    Seed 001 compares estimators by the *sum* of these per-joint values
    (``torque_rms(o, p).sum()``); :func:`torque_rms_total` is the RMS over all joints instead.

    Args:
        o: measured torque (N, n), N·m (N for prismatic joints).
        p: predicted torque (N, n).

    Returns:
        (n,) RMS per joint.
    """
    return rms_index(o, p)


def torque_rms_total(o, p) -> float:
    """RMS over every sample and joint: sqrt(Σ_kj (o_kj − p_kj)² / (N·n)).

    Args:
        o: measured torque (N, n).
        p: predicted torque (N, n).
    """
    o, p = _pair(o, p)
    return float(np.sqrt(np.mean((o - p) ** 2)))


def rsd(o, p) -> np.ndarray:
    """Residual standard deviation per joint: RSD_j = sqrt(Σ_k (o−p)² / Σ_k o²) (seed 004 Eq. 46).

    A joint whose observed signal is identically zero has RSD 0 if the prediction is exact too,
    else inf.

    Args:
        o: observed signal (N, n).
        p: predicted signal (N, n).

    Returns:
        (n,) dimensionless; 0 is a perfect prediction.
    """
    o, p = _pair(o, p)
    residual = np.sum((o - p) ** 2, axis=0)
    energy = np.sum(o**2, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sqrt(residual / energy)
    out[(energy == 0) & (residual == 0)] = 0.0
    out[(energy == 0) & (residual > 0)] = np.inf
    return out


def agreement_index(o, p) -> np.ndarray:
    """Willmott's index of agreement per joint (seed 004 Eq. 47, in the reading of SPEC §9).

    AI_j = 1 − Σ_k (o_kj − p_kj)² / Σ_k (|p_kj − ō_j| + |o_kj − ō_j|)², ō_j the mean of the
    observed signal of joint j. (The extracted seed writes p' = p − p_m; SPEC §9 and Willmott
    (1981) centre both series on the observed mean, which is what is used here.)

    A joint where the denominator is 0 (observed constant and predicted equal to it) has AI 1; one
    where a sum overflows (signals beyond about 1e150, a diverged simulation) has AI NaN.

    Args:
        o: observed signal (N, n).
        p: predicted signal (N, n).

    Returns:
        (n,) in [0, 1]; 1 is perfect agreement, 0 none.
    """
    o, p = _pair(o, p)
    o_mean = o.mean(axis=0)
    residual = np.sum((o - p) ** 2, axis=0)
    potential = np.sum((np.abs(p - o_mean) + np.abs(o - o_mean)) ** 2, axis=0)
    out = np.ones(o.shape[1])
    finite = np.isfinite(residual) & np.isfinite(potential)
    nonzero = finite & (potential > 0)
    out[nonzero] = 1.0 - residual[nonzero] / potential[nonzero]
    out[~finite] = np.nan
    return out


def tracking_error_deg(q_ref, q) -> np.ndarray:
    """Mean absolute tracking error per joint in degrees: η_j = mean_k |q_ref,kj − q_kj|.

    The controller comparison index of SPEC §10 (seed 000, discussion of Fig. 15: PID
    η = 1.10/1.21/1.23°).

    Args:
        q_ref: reference joint positions (N, n), rad.
        q: actual joint positions (N, n), rad. (For a prismatic joint the value is the error
            in metres multiplied by 180/π, which is not meaningful; report those separately.)

    Returns:
        (n,) η in degrees.
    """
    q_ref, q = _pair(q_ref, q, ("q_ref", "q"))
    return np.degrees(np.mean(np.abs(q_ref - q), axis=0))


# ----------------------------------------------------------------------- parameter errors
def relative_parameter_error(estimated, true) -> float:
    """‖estimated − true‖₂ / ‖true‖₂ over the parameter vector (b,).

    Args:
        estimated: identified values (b,).
        true: true values (b,) of the same parameters, same order.

    Raises:
        DataError: shapes differ, NaN/inf, or ``true`` is all zeros (relative error undefined).
    """
    estimated, true = _parameter_pair(estimated, true)
    scale = np.linalg.norm(true)
    if scale == 0:
        raise DataError(
            "the true parameter vector is all zeros, so a relative error is undefined; compare absolute errors instead"
        )
    return float(np.linalg.norm(estimated - true) / scale)


def per_parameter_relative_error(estimated, true, floor: float | None = None) -> np.ndarray:
    """|estimated_i − true_i| / max(|true_i|, floor) for each parameter.

    The floor keeps parameters whose true value is zero (or tiny) from producing inf: their
    error is measured relative to ``floor`` instead.

    Args:
        estimated: identified values (b,).
        true: true values (b,).
        floor: smallest denominator; default :data:`RELATIVE_ERROR_FLOOR` × max_i |true_i|
            (and 1 if every true value is zero, so the result is the absolute error).

    Returns:
        (b,) relative errors (0.1 = 10 %).
    """
    estimated, true = _parameter_pair(estimated, true)
    if floor is None:
        largest = float(np.max(np.abs(true)))
        floor = RELATIVE_ERROR_FLOOR * largest if largest > 0 else 1.0
    if not np.isfinite(floor) or floor <= 0:
        raise DataError(f"floor must be a positive number, got {floor}")
    return np.abs(estimated - true) / np.maximum(np.abs(true), floor)


def _parameter_pair(estimated, true) -> tuple[np.ndarray, np.ndarray]:
    estimated = _finite_array("estimated", estimated, (1,))
    true = _finite_array("true", true, (1,))
    if estimated.shape != true.shape:
        raise DataError(
            f"estimated has {estimated.shape[0]} parameters but true has {true.shape[0]}; "
            "compare the same parameter set in the same order"
        )
    return estimated, true


# ------------------------------------------------------------------------- regressor stats
#: the median absolute deviation of Gaussian data times this is its standard deviation
MAD_TO_STD = 1.4826


def robust_std(x, axis: int | None = None) -> np.ndarray:
    """1.4826 × the median absolute deviation of ``x`` around its median (along ``axis``): the standard deviation
    of Gaussian data, unmoved by a minority of outliers."""
    x = np.asarray(x, float)
    return MAD_TO_STD * np.median(np.abs(x - np.median(x, axis=axis, keepdims=True)), axis=axis)


def condition_number(W) -> float:
    """cond(W) = σ_max / σ_min of the stacked regressor (seed 001 Eq. 12): the excitation quality.

    Args:
        W: regressor (N·n, b), or (N, n, b) which is stacked first.

    Returns:
        The 2-norm condition number; inf if W is rank deficient.
    """
    W = _stacked_regressor(W)
    s = np.linalg.svd(W, compute_uv=False)
    if s.size == 0 or s[-1] <= np.finfo(float).eps * s[0] * max(W.shape) or s[0] == 0:
        return float("inf")
    return float(s[0] / s[-1])


def parameter_std(W, residuals, dof: int | None = None) -> np.ndarray:
    """Standard deviation of least-squares parameters: σ_i = sqrt(σ² [(WᵀW)⁻¹]_ii), σ² = ‖r‖²/dof.

    The classical estimate for OLS on the stacked regressor (Gautier; seed 001 Eq. 16 with
    G = σ² I).

    Args:
        W: regressor (N·n, b), or (N, n, b).
        residuals: y − W·β, (N·n,) or (N, n).
        dof: degrees of freedom of the residual; default N·n − b.

    Returns:
        (b,) standard deviations in the parameters' units.

    Raises:
        DataError: shapes disagree, dof ≤ 0, or W is rank deficient (some parameter combination
            is not excited, so its variance is unbounded).
    """
    W = _stacked_regressor(W)
    r = _finite_array("residuals", residuals, (1, 2)).reshape(-1)
    if r.shape[0] != W.shape[0]:
        raise DataError(
            f"residuals has {r.shape[0]} entries but W has {W.shape[0]} rows; stack both the same way (sample-major)"
        )
    m, b = W.shape
    dof = m - b if dof is None else int(dof)
    if dof <= 0:
        raise DataError(
            f"degrees of freedom must be > 0 (got {dof} for {m} rows and {b} parameters); "
            "use more samples than parameters"
        )
    scale = np.linalg.norm(W, axis=0)
    if np.any(scale == 0):
        raise DataError(
            f"W has all-zero column(s) {np.flatnonzero(scale == 0).tolist()}: those parameters "
            "are not excited and have no finite standard deviation"
        )
    _, s, Vt = np.linalg.svd(W / scale, full_matrices=False)
    if s[-1] <= np.finfo(float).eps * s[0] * max(m, b):
        raise DataError(
            "W is rank deficient: some parameter combination is not excited, so the "
            "parameter standard deviations are unbounded; use a richer excitation"
        )
    sigma2 = float(r @ r) / dof
    diag = np.sum((Vt / s[:, None]) ** 2, axis=0) / scale**2  # diag of (WᵀW)⁻¹ = D⁻¹ V S⁻² Vᵀ D⁻¹
    return np.sqrt(sigma2 * diag)


# ----------------------------------------------------------------------------- sensitivity
@dataclass(frozen=True)
class SensitivityTable:
    """Result of :func:`sensitivity` (seed 004 Table 6, Fig. 8).

    Attributes:
        parameter_names: the P parameters varied, in order.
        values: (P,) their nominal values.
        factors: (F,) the scale factors applied (0.5, 1.5 for ±50 %).
        rms: (P, F, n) trajectory RMS per joint against the nominal trajectory; inf where the
            scaled model's trajectory diverged (NaN/inf, or too large to square).
        rms_total: (P, F) RMS over all joints and samples; inf where it diverged.
    """

    parameter_names: tuple[str, ...]
    values: np.ndarray
    factors: tuple[float, ...]
    rms: np.ndarray
    rms_total: np.ndarray

    def ranking(self) -> list[str]:
        """Parameter names, most sensitive first (by the largest ``rms_total`` over the factors)."""
        order = np.argsort(-np.max(self.rms_total, axis=1), kind="stable")
        return [self.parameter_names[i] for i in order]


def sensitivity(
    simulate_fn: Callable[[np.ndarray], np.ndarray], values, names: Sequence[str], factors: Sequence[float] = (0.5, 1.5)
) -> SensitivityTable:
    """±50 % parameter sensitivity of a simulated trajectory (seed 004 §5.2, Table 6, Fig. 8).

    For each parameter i and factor f, parameter i alone is scaled by f, the trajectory is
    simulated, and its RMS against the nominal trajectory is recorded:
    RMS_ij = sqrt(mean_k (q_k(values with λ_i·f) − q_k(values))²) per joint. A parameter whose
    nominal value is 0 stays 0 and shows RMS 0; a factor of 1 is the nominal trajectory itself, RMS 0
    without a simulation. ``simulate_fn`` runs once per parameter and other factor, plus once nominal.

    Args:
        simulate_fn: ``simulate_fn(values) -> q`` (N, n), the joint trajectory of the model with
            parameter vector ``values`` (b,), always under the same input.
        values: nominal parameter values (P,).
        names: their names (P,).
        factors: scale factors, default (0.5, 1.5).

    Returns:
        The :class:`SensitivityTable`.

    Raises:
        DataError: names and values differ in length, a factor is not finite, or the nominal
            trajectory is not a finite (N, n) array, or a scaled one has another shape.
    """
    values = _finite_array("values", values, (1,))
    names = tuple(str(n) for n in names)
    if len(names) != values.shape[0]:
        raise DataError(f"{len(names)} names for {values.shape[0]} parameter values; give one name per value")
    factors = tuple(float(f) for f in factors)
    if not factors or not np.all(np.isfinite(factors)):
        raise DataError(f"factors must be a non-empty list of finite numbers, got {factors}")
    nominal = _signals("nominal trajectory simulate_fn(values)", simulate_fn(values.copy()))
    rms = np.zeros((len(names), len(factors), nominal.shape[1]))
    for i in range(len(names)):
        for j, factor in enumerate(factors):
            if factor == 1.0:
                continue  # the nominal trajectory: RMS 0
            scaled = values.copy()
            scaled[i] *= factor
            q = np.asarray(simulate_fn(scaled), dtype=float)
            q = q[:, None] if q.ndim == 1 else q
            if q.shape != nominal.shape:
                raise DataError(
                    f"simulate_fn returned shape {q.shape} with '{names[i]}' × {factor}, but "
                    f"{nominal.shape} for the nominal values; it must always return (N, n)"
                )
            with np.errstate(over="ignore", invalid="ignore"):  # NaN, or so far off that the square overflows
                deviation = np.sqrt(np.mean((q - nominal) ** 2, axis=0))
            rms[i, j] = np.where(np.isfinite(deviation), deviation, np.inf)
    with np.errstate(invalid="ignore"):
        rms_total = np.sqrt(np.mean(rms**2, axis=2))
    return SensitivityTable(parameter_names=names, values=values, factors=factors, rms=rms, rms_total=rms_total)


def sensitivity_to_dict(table: SensitivityTable) -> dict:
    """JSON-able form of a :class:`SensitivityTable`; a diverged (inf) RMS becomes None.

    Returns:
        ``{"factors": [...], "ranking": [...], "parameters": [{"name", "value", "rms_total": (F,),
        "rms": (F, n)}, ...]}``.
    """

    def clean(a: np.ndarray):
        return [clean(x) for x in a] if np.ndim(a) else (float(a) if np.isfinite(a) else None)

    return {
        "factors": list(table.factors),
        "ranking": table.ranking(),
        "parameters": [
            {
                "name": name,
                "value": float(table.values[i]),
                "rms_total": clean(table.rms_total[i]),
                "rms": clean(table.rms[i]),
            }
            for i, name in enumerate(table.parameter_names)
        ],
    }
