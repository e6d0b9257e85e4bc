"""Weighted linear least squares shared by the OLS / WLS / IRLS estimators (seed 001 Eq. 14–16)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robotid_sim.errors import DataError


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


def per_joint_variance(
    residual: np.ndarray,
    W: np.ndarray,
    n_dof: int,
    mask: np.ndarray | None = None,
    *,
    row_joint: np.ndarray | None = None,
    n_params: np.ndarray | None = None,
) -> np.ndarray:
    """Gautier weighting (seed 001 Eq. 26): Λ_j = ‖r_j‖² / (M_j − n_j) per joint j, (n,).

    ``M_j`` is the number of joint j's rows used, ``n_j`` the number of base parameters present
    in them (non-zero columns of those rows of ``W``).

    Args:
        residual: (m,) residual of the rows of ``W``.
        W: (m, b) the regressor rows (those of :meth:`IdentificationProblem.base_regressor`).
        n_dof: joint count n.
        mask: (m,) rows in use (an outlier rejection), default all.
        row_joint: (m,) joint of each row (:meth:`IdentificationProblem.row_joint`); default
            ``arange(m) % n``, the full sample-major stacking of N whole samples.
        n_params: (n,) ``n_j`` already known (an iterative estimator updates it cheaply).
    """
    return per_group_joint_variance(residual, W, n_dof, mask, row_joint=row_joint, n_params=n_params)[0]


def per_group_joint_variance(
    residual: np.ndarray,
    W: np.ndarray,
    n_dof: int,
    mask: np.ndarray | None = None,
    *,
    row_joint: np.ndarray | None = None,
    row_group: np.ndarray | None = None,
    n_groups: int = 1,
    n_params: np.ndarray | None = None,
) -> np.ndarray:
    """Λ_gj = ‖r_gj‖² / (M_gj − n_gj) per group g (an experiment) and joint j, (n_groups, n).

    As :func:`per_joint_variance` with the rows split by ``row_group`` (m,) in ``0 … n_groups-1``.
    A (group, joint) without a row in use gets the joint's variance over all groups.
    ``n_params`` (n_groups, n) or (n,) when known.
    """
    residual = np.asarray(residual, float)
    m = residual.shape[0]
    if row_joint is None:
        if m % n_dof:
            raise DataError(
                f"{m} residual rows are not whole samples of {n_dof} joints (a velocity dead-band removed some): "
                "pass row_joint=problem.row_joint()"
            )
        row_joint = np.arange(m) % n_dof
    group = np.zeros(m, dtype=np.intp) if row_group is None else np.asarray(row_group, dtype=np.intp)
    use = np.ones(m, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    cell = group * n_dof + row_joint
    size = n_groups * n_dof
    ss = np.bincount(cell[use], weights=residual[use] ** 2, minlength=size).reshape(n_groups, n_dof)
    M = np.bincount(cell[use], minlength=size).reshape(n_groups, n_dof)
    if n_params is None:
        nz = np.zeros((n_groups, n_dof))
        rows_by_cell = np.argsort(cell[use], kind="stable")
        used = np.flatnonzero(use)[rows_by_cell]
        bounds = np.concatenate([[0], np.cumsum(M.reshape(-1))])
        for c in range(size):
            rows = used[bounds[c] : bounds[c + 1]]
            if rows.size:
                nz.reshape(-1)[c] = np.count_nonzero(np.any(W[rows] != 0, axis=0))
    else:
        nz = np.broadcast_to(np.asarray(n_params, float), (n_groups, n_dof))
    var = ss / np.maximum(M - nz, 1)
    empty = M == 0
    if empty.any():
        pooled = ss.sum(axis=0) / np.maximum(M.sum(axis=0) - nz.max(axis=0), 1)
        var = np.where(empty, pooled[None, :], var)
    tiny = 1e-12 * max(float(var.max()), 1e-300)
    return np.maximum(var, tiny)


class JointWeightedLeastSquares:
    """Repeated exact solves of min Σ_rows w_r (y_r − W_r β)² with w_r = λ_joint(r) · keep_r.

    For an iterative estimator (IRLS) whose weights are one value per joint times a 0/1 row mask
    that changes a little each time. The per-joint Gram matrices of the column-scaled regressor
    are formed once (one pass over W); a solve subtracts the Gram of the dropped rows only (or
    forms the kept rows' Gram when most rows are dropped), factors the b×b system by Cholesky and
    refines the solution with the exact residual (semi-normal equations with iterative
    refinement), so the estimate agrees with the QR of :func:`weighted_least_squares` to rounding
    while a solve costs a few matrix-vector products over W instead of a QR of it.

    Args:
        W: (m, b) regressor rows.
        y: (m,) measurements.
        row_joint: (m,) joint of each row in ``0 … n_dof-1``.
        n_dof: joint count n.
    """

    def __init__(self, W: np.ndarray, y: np.ndarray, row_joint: np.ndarray, n_dof: int):
        self.W = np.asarray(W, float)
        self.y = np.asarray(y, float)
        self.row_joint = np.asarray(row_joint, dtype=np.intp)
        self.n_dof = n_dof
        b = self.W.shape[1]
        self.gram = np.empty((n_dof, b, b))
        self.rhs = np.empty((n_dof, b))
        self.nonzero = np.empty((n_dof, b), dtype=np.int64)
        self.rows_per_joint = np.bincount(self.row_joint, minlength=n_dof)
        for j in range(n_dof):
            rows = np.flatnonzero(self.row_joint == j)
            Wj = self.W[rows]
            self.gram[j] = Wj.T @ Wj
            self.rhs[j] = Wj.T @ self.y[rows]
            self.nonzero[j] = np.count_nonzero(Wj, axis=0)
        scale = np.sqrt(np.einsum("jii->i", self.gram))  # column norms of W
        scale[scale == 0] = 1.0
        self.scale = scale
        self.gram /= np.outer(scale, scale)
        self.rhs /= scale

    def n_params(self, keep: np.ndarray | None = None) -> np.ndarray:
        """(n,) number of base parameters present in each joint's kept rows (``n_j`` of Eq. 26)."""
        counts = self.nonzero.copy()
        if keep is not None:
            dropped = np.flatnonzero(~keep)
            for j in range(self.n_dof):
                rows = dropped[self.row_joint[dropped] == j]
                if rows.size:
                    counts[j] -= np.count_nonzero(self.W[rows], axis=0)
        return np.count_nonzero(counts > 0, axis=1)

    def _factor(self, w: np.ndarray, lam: np.ndarray, keep: np.ndarray | None):
        """Cholesky factor of the scaled weighted Gram matrix and the scaled right-hand side."""
        import scipy.linalg

        W, y, scale = self.W, self.y, self.scale
        m = W.shape[0]
        dropped = np.flatnonzero(w == 0) if keep is not None else np.empty(0, dtype=np.intp)
        if dropped.size <= m // 2:
            G = np.tensordot(lam, self.gram, axes=1)
            c = lam @ self.rhs
            if dropped.size:
                sd = np.sqrt(lam[self.row_joint[dropped]])
                A = W[dropped] * (sd[:, None] / scale)
                G -= A.T @ A
                c -= A.T @ (y[dropped] * sd)
        else:
            kept = np.flatnonzero(w > 0)
            sk = np.sqrt(w[kept])
            A = W[kept] * (sk[:, None] / scale)
            G = A.T @ A
            c = A.T @ (y[kept] * sk)
        return scipy.linalg.cho_factor(G, check_finite=False), c

    def _weights(self, joint_weights, keep) -> tuple[np.ndarray, np.ndarray]:
        lam = np.asarray(joint_weights, float)
        w = lam[self.row_joint]
        return lam, (w if keep is None else w * keep)

    def solve(
        self, joint_weights: np.ndarray, keep: np.ndarray | None = None, covariance: bool = True
    ) -> LeastSquaresFit:
        """The fit with row weights ``joint_weights[row_joint] * keep`` (as :func:`weighted_least_squares`).

        ``covariance=False`` leaves ``covariance`` None (an intermediate iterate; see :meth:`covariance`).
        """
        import scipy.linalg

        W, y, scale = self.W, self.y, self.scale
        lam, w = self._weights(joint_weights, keep)
        try:
            factor, c = self._factor(w, lam, keep)
        except np.linalg.LinAlgError:
            return weighted_least_squares(W, y, w)
        z = scipy.linalg.cho_solve(factor, c, check_finite=False)
        residual = y - W @ (z / scale)
        for _ in range(4):  # iterative refinement: the exact residual corrects the normal equations' rounding
            dz = scipy.linalg.cho_solve(factor, (W.T @ (w * residual)) / scale, check_finite=False)
            z = z + dz
            residual = y - W @ (z / scale)
            # the error left is about (|dz| / |z|)² |z|: done once that is below rounding
            if np.linalg.norm(dz) <= 1e-9 * np.linalg.norm(z):
                break
        else:  # too ill-conditioned for the normal equations to converge: the QR
            return weighted_least_squares(W, y, w)
        beta = z / scale
        cov = self._covariance(factor, w, residual) if covariance else None
        return LeastSquaresFit(beta=beta, covariance=cov, residual=residual)

    def covariance(self, joint_weights: np.ndarray, keep: np.ndarray | None, fit: LeastSquaresFit) -> np.ndarray:
        """The covariance of ``fit``, solved with the same weights (as :func:`weighted_least_squares`'s)."""
        lam, w = self._weights(joint_weights, keep)
        try:
            factor, _ = self._factor(w, lam, keep)
        except np.linalg.LinAlgError:
            return weighted_least_squares(self.W, self.y, w).covariance
        return self._covariance(factor, w, fit.residual)

    def _covariance(self, factor, w: np.ndarray, residual: np.ndarray) -> np.ndarray:
        import scipy.linalg

        b = self.W.shape[1]
        sigma2 = float(w @ residual**2) / max(int(np.count_nonzero(w > 0)) - b, 1)
        inverse = scipy.linalg.cho_solve(factor, np.eye(b), check_finite=False)
        return sigma2 * inverse / np.outer(self.scale, self.scale)
