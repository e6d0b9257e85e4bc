"""Weighted linear least squares shared by the OLS / WLS / IRLS estimators (seed 001 Eq. 14–16)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LeastSquaresFit:
    """Solution of min ‖sqrt(w) (W beta - y)‖².

    Attributes:
        beta: (b,) estimate.
        covariance: (b, b) covariance of beta, (Wᵀ G⁻¹ W)⁻¹ scaled by the residual variance
            of the weighted problem (seed 001 Eq. 16).
        residual: (N·n,) unweighted residual y - W beta.
    """

    beta: np.ndarray
    covariance: np.ndarray
    residual: np.ndarray


def weighted_least_squares(W: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> LeastSquaresFit:
    """Solve the (weighted) least-squares problem by QR on the weighted, column-scaled system.

    Args:
        W: (m, b) stacked regressor.
        y: (m,) stacked measurement.
        weights: (m,) non-negative row weights (1/variance; 0 drops a row), default all 1.
    """
    import scipy.linalg  # SciPy loads only when this runs (start-up of workers)

    w = np.ones(len(y)) if weights is None else np.asarray(weights, float)
    keep = w > 0
    sw = np.sqrt(w[keep])
    A = W[keep] * sw[:, None]
    b = y[keep] * sw
    scale = np.linalg.norm(A, axis=0)
    scale[scale == 0] = 1.0
    Q, R = scipy.linalg.qr(A / scale, mode="economic")
    beta = scipy.linalg.solve_triangular(R, Q.T @ b) / scale
    r_weighted = b - A @ beta
    dof = max(A.shape[0] - A.shape[1], 1)
    sigma2 = float(r_weighted @ r_weighted) / dof
    Rinv = scipy.linalg.solve_triangular(R, np.eye(R.shape[0]))
    cov = sigma2 * (Rinv @ Rinv.T) / np.outer(scale, scale)
    return LeastSquaresFit(beta=beta, covariance=cov, residual=y - W @ beta)


def per_joint_variance(residual: np.ndarray, W: np.ndarray, n_dof: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Gautier weighting (seed 001 Eq. 26): Λ_j = ‖r_j‖² / (M − n_j) per joint j.

    ``n_j`` is the number of base parameters present in joint j's equation (non-zero columns of
    its rows), M the number of samples used (``mask`` selects rows in use).
    """
    r = residual.reshape(-1, n_dof)
    Wj = W.reshape(-1, n_dof, W.shape[1])
    use = np.ones_like(r, dtype=bool) if mask is None else mask.reshape(-1, n_dof)
    var = np.empty(n_dof)
    for j in range(n_dof):
        rows = use[:, j]
        n_j = int(np.count_nonzero(np.abs(Wj[rows, j]).max(axis=0) > 0)) if rows.any() else 0
        M = int(rows.sum())
        var[j] = float(r[rows, j] @ r[rows, j]) / max(M - n_j, 1)
    tiny = 1e-12 * max(var.max(), 1e-300)
    return np.maximum(var, tiny)
