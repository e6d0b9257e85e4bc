"""Weighted linear least squares shared by the OLS / WLS / IRLS estimators (seed 001 Eq. 14–16).

:func:`weighted_least_squares` is the dense QR on a stacked matrix (the reference, and the fallback
of ill-conditioned problems); :class:`JointWeightedLeastSquares` solves the same problems from Gram
matrices accumulated over blocks of rows, so an identification problem's regressor is never stacked
(:meth:`IdentificationProblem.least_squares`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from robotid_sim.errors import DataError
from robotid_sim.threads import one_blas_thread


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
    W: np.ndarray | None,
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
        W: (m, b) the regressor rows (those of :meth:`IdentificationProblem.base_regressor`), used
            only to count ``n_j`` when ``n_params`` is not given (None then).
        n_dof: joint count n.
        mask: (m,) rows in use (an outlier rejection), default all.
        row_joint: (m,) joint of each row (:meth:`IdentificationProblem.row_joint`); default
            ``arange(m) % n``, the full sample-major stacking of N whole samples.
        n_params: (n,) ``n_j`` already known (an iterative estimator updates it cheaply).
    """
    return per_group_joint_variance(residual, W, n_dof, mask, row_joint=row_joint, n_params=n_params)[0]


def per_group_joint_variance(
    residual: np.ndarray,
    W: np.ndarray | None,
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
        if W is None:
            raise DataError("per_group_joint_variance needs the regressor rows W or the counts n_params")
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


#: scaled condition number of the regressor above which a normal-equations solve is refined
#: against the exact residual (the normal equations lose about cond² · eps of relative accuracy)
REFINE_CONDITION = 1e3
#: refinement steps before a solve gives up on the normal equations and takes the dense QR
REFINE_STEPS = 4
#: a column whose sum of squares over the kept rows is below this fraction of its sum over all the
#: cell's rows is absent from them (:meth:`JointWeightedLeastSquares.n_params`; rounding of the subtraction)
ABSENT_FRACTION = 1e-10


@dataclass(frozen=True)
class RowBlock:
    """Rows of one cell (a joint, or an experiment and joint) of a least-squares problem.

    Attributes:
        cell: the cell index in ``0 … n_cells-1``.
        rows: (r,) positions of the rows among the problem's m rows.
        W: (r, b - start) their regressor rows from column ``start`` on (any row stride).
        y: (r,) their measurements.
        start: the columns before it are exactly zero in every row of the cell (a joint's row
            of a serial chain's regressor holds nothing of the links before it), so the Gram
            matrix of the block is the trailing (b - start)² corner only.
    """

    cell: int
    rows: np.ndarray
    W: np.ndarray
    y: np.ndarray
    start: int = 0


class RowSource(Protocol):
    """The rows of a least-squares problem, as :class:`JointWeightedLeastSquares` reads them.

    ``IdentificationProblem`` is one (the base regressor computed chunk by chunk, never stacked);
    :class:`MatrixRows` wraps an already formed matrix.
    """

    n_cells: int  # a multiple of n_dof: cell = group * n_dof + joint
    n_dof: int
    row_cell: np.ndarray  # (m,) cell of every row
    y: np.ndarray  # (m,)
    parts: int  # how many threads may read disjoint parts of the rows at once (1: no threads)

    def blocks(self, part: int = 0, parts: int = 1) -> Iterator[RowBlock]:
        """Every row once, in blocks of one cell each; ``part`` of ``parts`` gives a disjoint share."""

    def rows(self, index: np.ndarray) -> np.ndarray:
        """The regressor rows (len(index), b) at the given row positions."""

    def predict(self, beta: np.ndarray) -> np.ndarray:
        """W @ beta (m,) for every row."""

    def matrix(self) -> np.ndarray:
        """The stacked regressor (m, b): the dense fallback of an ill-conditioned solve."""


@dataclass(frozen=True)
class MatrixRows:
    """A :class:`RowSource` over a formed regressor ``W`` (m, b), ``y`` (m,) and ``row_cell`` (m,)."""

    W: np.ndarray
    y: np.ndarray
    row_cell: np.ndarray
    n_cells: int
    n_dof: int
    parts: int = 1  # the blocks are large: BLAS's own threads serve them

    def blocks(self, part: int = 0, parts: int = 1) -> Iterator[RowBlock]:
        for c in range(part, self.n_cells, parts):
            rows = np.flatnonzero(self.row_cell == c)
            yield RowBlock(c, rows, self.W[rows], self.y[rows])

    def rows(self, index: np.ndarray) -> np.ndarray:
        return self.W[index]

    def predict(self, beta: np.ndarray) -> np.ndarray:
        return self.W @ beta

    def matrix(self) -> np.ndarray:
        return self.W


class JointWeightedLeastSquares:
    """Exact solves of min Σ_rows w_r (y_r − W_r β)² with w_r = λ_cell(r) · keep_r, W never stacked.

    One pass over the rows (:meth:`RowSource.blocks`) accumulates, per cell (a joint, or an
    experiment and joint), the Gram matrix WᵀW and Wᵀy (only the trailing corner of the columns a
    block can hold, :attr:`RowBlock.start`). A solve sums the cells' Gram matrices with their weights, subtracts the
    rows the 0/1 mask ``keep`` drops (their regressor rows only are recomputed), factors the
    column-scaled b×b system by Cholesky and, when the regressor's scaled condition number
    exceeds :data:`REFINE_CONDITION`, refines the solution with the exact residual (semi-normal
    equations with iterative refinement: one more pass over the rows per step). The estimate
    agrees with the QR of :func:`weighted_least_squares` on the stacked rows to rounding; where
    the normal equations cannot reach that (an ill-conditioned or rank-deficient problem) the
    solve takes that QR on :meth:`RowSource.matrix`. The residual of every row comes from
    :meth:`RowSource.predict` (for a problem, the batched torque of the compiled Newton–Euler
    kernels, no regressor formed).

    Use :meth:`IdentificationProblem.least_squares` for a problem (built once, shared by every
    estimator fitting it) or :meth:`from_matrix` for a formed matrix.
    """

    def __init__(self, source: RowSource):
        self.source = source
        self.row_cell = np.asarray(source.row_cell, dtype=np.intp)
        self.n_cells = int(source.n_cells)
        parts = max(1, int(source.parts))
        if parts == 1:
            sums = [self._accumulate(0, 1)]
        else:  # disjoint parts in threads (the kernels and BLAS release the GIL), one BLAS thread each
            from concurrent.futures import ThreadPoolExecutor

            with one_blas_thread(), ThreadPoolExecutor(parts) as pool:
                sums = list(pool.map(self._accumulate, range(parts), [parts] * parts))
        sums = [part for part in sums if part is not None]
        if not sums:
            raise DataError("a least-squares problem without rows")
        gram, rhs = sum(g for g, _ in sums), sum(r for _, r in sums)
        self.sumsq = np.einsum("cii->ci", gram).copy()  # (n_cells, b): Σ W² per cell and column
        scale = np.sqrt(self.sumsq.sum(axis=0))  # column norms of W
        scale[scale == 0] = 1.0
        self.scale = scale
        self.gram = gram / np.outer(scale, scale)
        self.rhs = rhs / scale

    def _accumulate(self, part: int, parts: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Σ WᵀW (n_cells, b, b) and Σ Wᵀy (n_cells, b) over ``part`` of ``parts`` of the blocks."""
        gram = rhs = None
        for block in self.source.blocks(part, parts):
            if gram is None:
                b = block.start + block.W.shape[1]
                gram = np.zeros((self.n_cells, b, b))
                rhs = np.zeros((self.n_cells, b))
            k, W = block.start, block.W
            gram[block.cell, k:, k:] += W.T @ W  # numpy calls BLAS syrk for this product
            rhs[block.cell, k:] += W.T @ block.y
        return None if gram is None else (gram, rhs)

    @classmethod
    def from_matrix(cls, W: np.ndarray, y: np.ndarray, row_joint: np.ndarray, n_dof: int) -> JointWeightedLeastSquares:
        """The solver of a formed regressor ``W`` (m, b) whose cells are the joints of ``row_joint`` (m,)."""
        W, y = np.asarray(W, float), np.asarray(y, float)
        return cls(MatrixRows(W, y, np.asarray(row_joint, dtype=np.intp), n_dof, n_dof))

    @property
    def y(self) -> np.ndarray:
        return self.source.y

    def gram_matrix(self) -> np.ndarray:
        """WᵀW (b, b) of every row, unweighted (the excitation checks use it)."""
        return self.gram.sum(axis=0) * np.outer(self.scale, self.scale)

    def n_params(self, keep: np.ndarray | None = None, *, per_joint: bool = False) -> np.ndarray:
        """Number of parameters present in each cell's kept rows (``n_j`` of Eq. 26): (n_cells,), or
        (n_dof,) over all groups of a joint with ``per_joint``.

        A column is present where its sum of squares over the kept rows is not zero; with rows
        dropped, that is the cell's sum less the dropped rows' sum, and a column whose whole sum
        was dropped (to rounding, :data:`ABSENT_FRACTION`) is absent.
        """
        total = self.sumsq
        kept = total
        if keep is not None:
            dropped = np.flatnonzero(~np.asarray(keep, bool))
            if dropped.size:
                rows = self.source.rows(dropped)
                cells = self.row_cell[dropped]
                kept = total.copy()
                for c in np.unique(cells):
                    kept[c] -= np.einsum("rk,rk->k", rows[cells == c], rows[cells == c])
        if per_joint:
            n, b = self.source.n_dof, total.shape[1]
            total, kept = total.reshape(-1, n, b).sum(axis=0), kept.reshape(-1, n, b).sum(axis=0)
        return np.count_nonzero((total > 0) & (kept > ABSENT_FRACTION * total), axis=1)

    def _cell_weights(self, weights) -> np.ndarray:
        lam = np.asarray(weights, float).reshape(-1)
        if lam.size != self.n_cells:
            if self.n_cells % lam.size:
                raise DataError(f"{lam.size} weights for {self.n_cells} cells of rows")
            lam = np.tile(lam, self.n_cells // lam.size)  # one weight per joint, for every experiment
        return lam

    def _system(self, lam: np.ndarray, keep: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The scaled weighted Gram matrix and right-hand side of the kept rows."""
        dropped = np.empty(0, dtype=np.intp) if keep is None else np.flatnonzero(~keep)
        m = self.row_cell.size
        if dropped.size <= m // 2:
            G = np.tensordot(lam, self.gram, axes=1)
            c = lam @ self.rhs
            if dropped.size:
                sd = np.sqrt(lam[self.row_cell[dropped]])
                A = self.source.rows(dropped) * (sd[:, None] / self.scale)
                G -= A.T @ A
                c -= A.T @ (self.y[dropped] * sd)
            return G, c
        b = self.scale.size
        G, c = np.zeros((b, b)), np.zeros(b)
        for block in self.source.blocks():
            k, kept = block.start, keep[block.rows]
            A = block.W[kept] / self.scale[k:]
            G[k:, k:] += lam[block.cell] * (A.T @ A)
            c[k:] += lam[block.cell] * (A.T @ block.y[kept])
        return G, c

    def _gradient(self, w: np.ndarray, residual: np.ndarray) -> np.ndarray:
        """Wᵀ (w ⊙ residual) / scale, one pass over the rows."""
        g = np.zeros(self.scale.size)
        for block in self.source.blocks():
            g[block.start :] += block.W.T @ (w[block.rows] * residual[block.rows])
        return g / self.scale

    def _row_weights(self, weights, keep) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        lam = self._cell_weights(weights)
        keep = None if keep is None else np.asarray(keep, bool)
        w = lam[self.row_cell]
        return lam, (w if keep is None else w * keep), keep

    def solve(self, weights=None, keep: np.ndarray | None = None, covariance: bool = True) -> LeastSquaresFit:
        """The fit with row weights ``weights[row_cell] * keep`` (as :func:`weighted_least_squares`).

        Args:
            weights: (n_cells,) one per cell, or one per joint (for every experiment); default 1.
            keep: (m,) bool, the rows in use; default all.
            covariance: False leaves ``covariance`` None (an intermediate iterate; see :meth:`covariance`).
        """
        lam, w, keep = self._row_weights(np.ones(self.n_cells) if weights is None else weights, keep)
        G, c = self._system(lam, keep)
        system = _Cholesky.of(G)
        if system is None:
            return self._dense(w)
        z = system.solve(c)
        residual = self.y - self.source.predict(z / self.scale)
        if system.condition > REFINE_CONDITION:
            for _ in range(REFINE_STEPS):  # the exact residual corrects the normal equations' rounding
                dz = system.solve(self._gradient(w, residual))
                z = z + dz
                residual = self.y - self.source.predict(z / self.scale)
                # the error left is about (|dz| / |z|)² |z|: done once that is below rounding
                if np.linalg.norm(dz) <= 1e-9 * np.linalg.norm(z):
                    break
            else:  # too ill-conditioned for the normal equations to converge: the QR
                return self._dense(w)
        fit = LeastSquaresFit(beta=z / self.scale, covariance=None, residual=residual)
        return replace(fit, covariance=self._covariance(system, w, residual)) if covariance else fit

    def normal_equations(self, weights=None, keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The column-scaled weighted normal equations (G, c) of the kept rows: G z = c, z = :attr:`scale` · β.

        For a solver of its own (the LMI least squares of :mod:`robotid_sim.identification.lmi`):
        Σ w (y − W β)² = zᵀ G z − 2 cᵀ z + Σ w y².
        """
        lam, _, keep = self._row_weights(np.ones(self.n_cells) if weights is None else weights, keep)
        return self._system(lam, keep)

    def weighted_square_sum(self, weights=None, keep: np.ndarray | None = None) -> tuple[float, int]:
        """(Σ w y², rows with w > 0) of the kept rows: with :meth:`normal_equations`, the weighted residual
        of any β, Σ w (y − W β)² = zᵀ G z − 2 cᵀ z + Σ w y², and its degrees of freedom."""
        _, w, _ = self._row_weights(np.ones(self.n_cells) if weights is None else weights, keep)
        return float(w @ self.y**2), int(np.count_nonzero(w > 0))

    def _dense(self, w: np.ndarray) -> LeastSquaresFit:
        return weighted_least_squares(self.source.matrix(), self.y, w)

    def covariance(self, weights, keep: np.ndarray | None, fit: LeastSquaresFit) -> np.ndarray:
        """The covariance of ``fit``, solved with the same weights (as :func:`weighted_least_squares`'s)."""
        lam, w, keep = self._row_weights(weights, keep)
        system = _Cholesky.of(self._system(lam, keep)[0])
        if system is None:
            return self._dense(w).covariance
        return self._covariance(system, w, fit.residual)

    def _covariance(self, system: _Cholesky, w: np.ndarray, residual: np.ndarray) -> np.ndarray:
        b = self.scale.size
        sigma2 = float(w @ residual**2) / max(int(np.count_nonzero(w > 0)) - b, 1)
        return sigma2 * system.inverse() / np.outer(self.scale, self.scale)


@dataclass(frozen=True)
class _Cholesky:
    """A symmetric positive definite b×b system G, equilibrated (unit diagonal) and factored."""

    factor: tuple
    d: np.ndarray  # sqrt(diag G)
    condition: float  # cond(A) of any A with AᵀA = G, after equilibration

    @classmethod
    def of(cls, G: np.ndarray) -> _Cholesky | None:
        """The factored system, or None where G is not numerically positive definite."""
        import scipy.linalg

        d = np.sqrt(np.diag(G))
        if not np.all(d > 0):
            return None
        Gs = G / np.outer(d, d)
        ev = np.linalg.eigvalsh(Gs)
        if ev[0] <= 0:
            return None
        try:
            factor = scipy.linalg.cho_factor(Gs, check_finite=False)
        except np.linalg.LinAlgError:
            return None
        return cls(factor, d, float(np.sqrt(ev[-1] / ev[0])))

    def solve(self, c: np.ndarray) -> np.ndarray:
        import scipy.linalg

        return scipy.linalg.cho_solve(self.factor, c / self.d, check_finite=False) / self.d

    def inverse(self) -> np.ndarray:
        import scipy.linalg

        inverse = scipy.linalg.cho_solve(self.factor, np.eye(self.d.size), check_finite=False)
        return inverse / np.outer(self.d, self.d)
