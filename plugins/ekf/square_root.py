"""Square-root forms of the filters: the covariance kept as its lower Cholesky factor S (P = S Sᵀ).

S is never re-factorised from a covariance: each predict builds the new factor from the old one by a QR
decomposition of the stacked square roots (a compound matrix whose Gram matrix is the new covariance), each update
by Carlson's triangular square-root update (:func:`carlson_update`), so P stays symmetric and positive
semi-definite by construction where the plain form's P − K S Kᵀ can lose it to rounding (van der Merwe and Wan
2001).

- SR-UKF, SR-CDKF: the points and transform of the plain forms (:mod:`~robotid_sim_plugins.ekf.sigma`, drawn from S
  directly, again from S⁻ for the update). Predict: S⁻ = qr([S + Δt·Fᵀ on the rows of q and qd, the second-order
  root, Q's [q, qd] block and the SR-UKF's centre term, Q's λ block]) (F the first-order root of g = [qd, qdd]; the
  rows that only have [q, qd] columns first reduced to one (2n, 2n) triangle; Q block-diagonal between the states
  and λ, as the schedule's, so that its λ block's root enters by a QR of the others' triangle's λ block only). The
  centre term is one more row, √c·v, its weight c = β − α² ≥ 0: the transform is taken about the centre point
  (:mod:`~robotid_sim_plugins.ekf.sigma`), so no downdate by the usual negative Wc₀. Update: P_xz = S⁻ F (F the
  measurements' first-order root over the points of S⁻) and P_zz = Fᵀ F + R_z (R_z = R + the second-order root's
  and the centre term's Gram), which is the linear update of rows h with S⁻ S⁻ᵀ hᵀ = S⁻ F and noise R_z: whitened
  by R_z's Cholesky factor L, those rows seen through S⁻ are F L⁻ᵀ, and Carlson's update takes them with the
  residuals L⁻¹ (z − z_p) (no S⁻¹ needed). The same P − K P_zz Kᵀ as the Joseph form's sum of squares (BIRDy's and
  ReBEL's SR-CDKF, a QR of d + m + 1 rows, which this replaced: 0.3 ms of a step on hyper9), not a downdate.
- SR-EKF (it draws no points: its factor lower-triangular in the order [λ, q, qd], :class:`SquareRootEKF`):
  predict S⁻ = qr([F S, √Q]) as the QR of a (2n, 2n) corner and the parameters' noise by the triangular-pentagonal
  QR; update by Carlson's: the measurement whitened by R's Cholesky factor, then its rows one at a time
  (:func:`carlson_update`, O(d²) a row: each row's factor triangular again from ratios of sums of squares that
  never fall below the row's unit variance), instead of the QR of the (m + d)² array [[√R, H S], [0, S]]
  (O((m + d)³): 0.6 of the 1.8 ms a step took on hyper9).

On well-conditioned data the square-root forms give the plain forms' numbers to rounding; where the plain form's
P − K P_zz Kᵀ loses positive definiteness to rounding (a near-singular P), the factor stays valid: every predict is
a QR (a sum of squares), every update Carlson's, never a subtraction of covariances.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numba
import numpy as np
from robotid_sim_plugins.ekf.process import Linearization, SingularMassMatrix
from robotid_sim_plugins.ekf.sigma import CompiledSteps, SigmaRule, cholesky
from robotid_sim_plugins.ekf.stream import (
    StreamFilter,
    mass_matrix,
    parameter_noise_where_physical,
    positive_definite,
    posterior_linearization,
    torque_form,
)
from scipy.linalg.lapack import dgeqrf, dgeqrf_lwork, dtpqrt


@numba.njit(cache=True)
def signed_lower(R, S):  # pragma: no cover - compiled
    """S (k, k) ← Rᵀ of the upper triangle of R (k, k), R's rows signed so that S's diagonal is positive (the
    Cholesky factor of Rᵀ R; zeros above the diagonal)."""
    k = S.shape[0]
    for j in range(k):
        sign = -1.0 if R[j, j] < 0 else 1.0
        for i in range(k):
            S[i, j] = sign * R[j, i] if i >= j else 0.0


def qr_triangle(A: np.ndarray) -> np.ndarray:
    """The (k, k) view of R in the upper triangle of A (N, k), N ≥ k, after LAPACK's QR of A (Fortran-ordered:
    overwritten; else a copy is factored); below the diagonal the reflectors. With LAPACK's optimal workspace
    (:func:`qr_workspace`): scipy's default, 3k, leaves ``dgeqrf`` blocks of 3 columns (the same R on the
    SR-UKF's 136 × 118 compound, a few µs slower)."""
    factored, _, _, info = dgeqrf(A, lwork=qr_workspace(*A.shape), overwrite_a=1)
    if info:
        raise np.linalg.LinAlgError("QR")
    return factored[: A.shape[1]]


@lru_cache(maxsize=32)
def qr_workspace(rows: int, columns: int) -> int:
    """LAPACK's optimal workspace for ``dgeqrf`` of a (rows, columns) matrix (its workspace query)."""
    return max(int(dgeqrf_lwork(rows, columns)[0]), 3 * columns, 1)


def lower_factor(R: np.ndarray) -> np.ndarray:
    """The lower-triangular S (k, k) of R's upper triangle (k, k): Rᵀ with R's rows signed so that S's diagonal is
    positive (:func:`signed_lower`)."""
    S = np.empty(R.shape, order="F")  # the layout the update works in
    signed_lower(R, S)
    return S


def qr_factor(A: np.ndarray) -> np.ndarray:
    """The lower-triangular S (k, k) with S Sᵀ = Aᵀ A for A (N, k), N ≥ k: Rᵀ of A's QR, columns signed so that
    S's diagonal is positive (the Cholesky factor). A Fortran-ordered A is overwritten."""
    return lower_factor(qr_triangle(A))


def psd_sqrt(Q: np.ndarray) -> np.ndarray:
    """A lower-triangular square root of the positive semi-definite Q (d, d): Cholesky on the rows and columns
    with a non-zero diagonal (a zero-variance state, e.g. no parameter process noise, gets a zero column); a
    diagonal Q the square roots of its diagonal. A Q that rounding left slightly indefinite (the EKF's torque
    noise of the velocity is a difference, M⁻¹ Σ M⁻ᵀ − G Cᵀ: −3.5e-13 on hyper9 at 7.3 s, where Cholesky failed
    and the SR-EKF stopped) is taken with its negative eigenvalues as zero (the nearest positive semi-definite
    matrix), its root made lower-triangular by a QR."""
    Q = np.ascontiguousarray(Q)  # a block of a larger matrix: its zeros are counted faster in a copy
    diagonal = np.diag(Q)
    if np.count_nonzero(Q) == np.count_nonzero(diagonal):  # diagonal (seed 004's Q = I on the states)
        return np.diag(np.sqrt(diagonal))
    keep = diagonal > 0
    kept = (slice(None), slice(None)) if keep.all() else np.ix_(keep, keep)
    root = np.zeros_like(Q)
    try:
        root[kept] = cholesky(Q[kept])
    except np.linalg.LinAlgError:
        w, V = np.linalg.eigh(Q[kept])
        root[kept] = qr_factor(np.sqrt(np.clip(w, 0.0, None))[:, None] * V.T)
    return root


def noisy_factor(compound: np.ndarray, q_lambda: np.ndarray, n2: int) -> np.ndarray:
    """The lower factor S (d, d) of compoundᵀ compound + diag(0, q_lambda): Rᵀ of :func:`noisy_triangle`'s R."""
    return lower_factor(noisy_triangle(compound, q_lambda, n2))


def noisy_triangle(compound: np.ndarray, q_lambda: np.ndarray, n2: int) -> np.ndarray:
    """The (d, d) view of the upper triangle R with Rᵀ R = compoundᵀ compound + diag(0, q_lambda) for the
    Fortran-ordered compound (N, d) (overwritten; the view is of it) and the parameters' process noise q_lambda
    (b,) (the diagonal of Q's λ block, b = d − n2; Q is block-diagonal between the first n2 states and λ,
    :class:`~robotid_sim_plugins.ekf.noise.ProcessNoise`). That root, upper-triangular under the compound's
    triangle R, only meets R's λ block: the QR of that block over it (LAPACK's triangular-pentagonal QR)."""
    b = compound.shape[1] - n2
    R = qr_triangle(compound)
    noise = np.zeros((b, b), order="F")
    np.fill_diagonal(noise, np.sqrt(np.clip(q_lambda, 0.0, None)))
    block, _, _, info = dtpqrt(b, min(b, 8), R[n2:, n2:], noise, overwrite_a=1, overwrite_b=1)
    if info:
        raise np.linalg.LinAlgError("QR")
    R[n2:, n2:] = block
    return R


@numba.njit(cache=True)
def carlson_update(S, F, residual, dx):  # pragma: no cover - compiled
    """The measurement update, in place, of the lower-triangular factor S (d, d, Fortran-ordered; P = S Sᵀ) by m
    scalar measurements of unit-variance independent noise taken one at a time (N. A. Carlson, "Fast triangular
    formulation of the square root filter", AIAA J. 11(9), 1973), given as F (d, m) = Sᵀ Hᵀ (their rows h seen
    through S) and their residuals (m,) z − H x̄ at the prior mean; fills dx (d,) with the mean's correction. F and
    ``residual`` are overwritten.

    Each step's factor is triangular again, S⁺ = S U with U triangular from ratios of the sums of squares
    α = 1 + Σ fᵢ² (f = Sᵀ hᵀ), which never fall below 1: the covariance stays S Sᵀ, positive semi-definite
    whatever the rounding, and the diagonal keeps its sign. The rows still to come are carried through the same
    U (F ← Uᵀ F) and their residuals through the step's correction (h' P hᵀ = f'ᵀ f), so H itself, or S⁻¹ where
    only S F is known (the sigma-point filters' P_xz), is never needed. O(d²) a measurement, O(d·k) where its f
    has k non-zero entries (the sigma-point filters' q and qd rows: the points that move λ only do not move them,
    so their f is zero on S's last b columns; a zero entry leaves U's column the identity's, exactly)."""
    d, m = F.shape
    St = S.T  # row-major: S's columns as contiguous rows
    w, carried, dots = np.empty(d), np.empty(m), np.empty(m)
    dx[:] = 0.0
    for j in range(m):
        dots[:] = 0.0  # h' P hᵀ = f'ᵀ f for the rows still to come
        for c in range(d):
            if F[c, j] != 0.0:
                for k in range(j + 1, m):
                    dots[k] += F[c, k] * F[c, j]
        w[:] = 0.0
        carried[:] = 0.0
        alpha = 1.0
        for c in range(d - 1, -1, -1):  # the columns of S, last first (an upper factor's in the reverse order)
            sigma = F[c, j]
            if sigma == 0.0:  # a column the row does not see: η = 1, ζ = 0 exactly, nothing changes
                continue
            beta = alpha
            alpha = beta + sigma * sigma
            gamma = math.sqrt(alpha * beta)
            eta, zeta = beta / gamma, sigma / gamma
            column, partial = St[c, c:], w[c:]  # slices: indices from 0, which the compiler vectorises
            for i in range(column.shape[0]):
                tau = column[i]
                column[i] = eta * tau - zeta * partial[i]
                partial[i] += tau * sigma
            row = F[c]
            for k in range(j + 1, m):
                f = row[k]
                row[k] = eta * f - zeta * carried[k]
                carried[k] += sigma * f
        gain = residual[j] / alpha  # w = P hᵀ, α = h P hᵀ + 1
        for i in range(d):
            dx[i] += gain * w[i]
        for k in range(j + 1, m):
            residual[k] -= gain * dots[k]


@numba.njit(cache=True)
def whitened_carlson(S, F, residual, L, dx):  # pragma: no cover - compiled
    """:func:`carlson_update` of S (d, d, Fortran-ordered) by rows of correlated noise: F (d, m) = Sᵀ Hᵀ and the
    residuals (m,) whitened by the lower Cholesky factor L (m, m) of their noise first (F ← F L⁻ᵀ, residual ←
    L⁻¹ residual, a forward substitution over the rows of Fᵀ), then taken one at a time; fills dx (d,). F and
    ``residual`` are overwritten."""
    d, m = F.shape
    G = np.ascontiguousarray(F.T)  # (m, d): each step of the substitution a whole row
    for r in range(m):
        pivot = L[r, r]
        for i in range(d):
            G[r, i] /= pivot
        residual[r] /= pivot
        for k in range(r + 1, m):
            f = L[k, r]
            for i in range(d):
                G[k, i] -= f * G[r, i]
            residual[k] -= f * residual[r]
    F[:] = G.T
    carlson_update(S, F, residual, dx)


def whitened_update(S: np.ndarray, F: np.ndarray, residual: np.ndarray, L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(S⁺, the mean's correction (d,)) of the measurement update of the lower factor S (d, d) by the rows
    F = Sᵀ Hᵀ (d, m) (the measurement's rows seen through S), the residuals z − z_p (m,) and the lower Cholesky
    factor L (m, m, Fortran-ordered: :func:`~robotid_sim_plugins.ekf.sigma.cholesky`'s) of their noise
    (:func:`whitened_carlson`, in one call; F and the residuals are overwritten, S where it is Fortran-ordered)."""
    S, dx = np.asfortranarray(S), np.empty(S.shape[0])  # the kernel's layouts (no copies on the filters' path)
    whitened_carlson(S, np.ascontiguousarray(F), np.ascontiguousarray(residual), L, dx)
    return S, dx


class _CholeskyState(StreamFilter):
    """The state of a square-root filter: the mean x and the lower Cholesky factor S of P = S Sᵀ, which is kept
    (only a restart factors a given P)."""

    def _init_state(self, d: int) -> None:
        self._x, self.S = np.zeros(d), np.eye(d, order="F")

    @property
    def x(self):
        return self._x

    @property
    def P(self):
        return self.S @ self.S.T

    def parameter_variance(self):
        """(b,) P's last diagonal entries: the squared norms of S's last rows (P = S Sᵀ never formed)."""
        rows = self.S[-self.lam0.shape[0] :]
        return np.einsum("ij,ij->i", rows, rows)

    def restart(self, x, P):
        self._x = x.copy()
        self.S = cholesky(P)


class SquareRootSigmaFilter(CompiledSteps, _CholeskyState):
    """SR-UKF or SR-CDKF (``rule``; module docstring): the points and transform of
    :class:`~robotid_sim_plugins.ekf.sigma.SigmaPointFilter` from the factor S.

    Args:
        process, schedule, lam0: as :class:`~robotid_sim_plugins.ekf.stream.StreamFilter`.
        rule: the transform (:class:`~robotid_sim_plugins.ekf.sigma.SigmaRule`).
        name: the estimator's name.
        one_call: on a compiled chain, each sample as two compiled calls around LAPACK's QR (:meth:`update`);
            else the Python sequence.
    """

    def __init__(self, process, schedule, lam0, rule: SigmaRule, name: str, one_call: bool = False):
        super().__init__(process, schedule, lam0)
        self.rule, self.name = rule, name
        self._init_state(process.dim_x)
        self._init_steps(process, schedule, one_call)

    def propagate(self, L: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The transform's :meth:`~SigmaRule.roots` of g = [qd, qdd] (2n) over the points of the mean and its
        factor L (d, d), with torque τ (n,): the Euler step's change of the points, divided by Δt."""
        n = self.process.n
        states, qdd, _ = self.process.sigma_dynamics(self._x, L, self.rule.gamma, tau)
        return self.rule.roots(np.hstack([states[:, n:], qdd]))

    def measure(self, L: np.ndarray, tau: np.ndarray, t: float):
        """(the measurement's mean (m,), first-order root (d, m), second-order root (d, m), centre deviation (m,),
        qdd (n,) at the mean, R (m, m), R_τ (n, n)) over the points of the mean and its factor L (d, d), with
        torque τ (n,) at time t."""
        process, n = self.process, self.process.n
        states, qdd, Minv = process.sigma_dynamics(self._x, L, self.rule.gamma, tau)
        self.check_physical(Minv)
        R, tau_noise = self.measurement_noise(Minv, t)
        return (*self.rule.roots(process.measurement(states[:, :n], states[:, n:], qdd)), qdd[0], R, tau_noise)

    def predict(self, tau, qdd, Q):
        n2, d, dt = 2 * self.process.n, self.process.dim_x, self.process.dt
        g, first, second, centre = self.propagate(self.S, tau)
        # the rows with [q, qd] columns only: the second-order root, Q's [q, qd] block and the centre term, whose
        # Gram matrix one (2n, 2n) triangle keeps
        rows = np.empty((d + n2 + 1, n2), order="F")
        np.multiply(dt, second, out=rows[:d])
        rows[d:-1] = psd_sqrt(Q.states).T
        np.multiply(dt * math.sqrt(self.rule.centre), centre, out=rows[-1])
        # the rows of the compound: the first-order root of the Euler step's points (the factor's columns moved
        # in q and qd), that triangle, then Q's λ block
        compound = np.empty((d + n2, d), order="F")
        compound[:d] = self.S.T
        compound[:d, :n2] += dt * first
        compound[d:, :n2] = qr_factor(rows).T
        compound[d:, n2:] = 0.0
        self.S = noisy_factor(compound, Q.parameters, n2)
        self._x = self._x.copy()
        self._x[:n2] += dt * g

    def correct(self, z, tau, t):
        zp, first, second, centre, qdd_mean, R, tau_noise = self.measure(self.S, tau, t)
        # P_xz = S F (F the measurements' first-order root over the points of S) and P_zz = Fᵀ F + R_z, R_z = R +
        # the second-order root's and the centre term's Gram: the linear update of rows h with S Sᵀ hᵀ = S F and
        # noise R_z. Whitened by R_z = L Lᵀ, its rows seen through S are F L⁻ᵀ and their residuals L⁻¹ (z − z_p):
        # Carlson's update takes those (no S⁻¹), P − K P_zz Kᵀ as a triangular update, never a difference
        Rz = R + second.T @ second + self.rule.centre * np.outer(centre, centre)
        self.S, dx = whitened_update(self.S, first, z - zp, cholesky(Rz))
        self._x = self._x + dx
        return qdd_mean, tau_noise

    def update(self, t, q, qd, qdd, tau, restart=False):
        """:meth:`~robotid_sim_plugins.ekf.stream.StreamFilter.update`; with ``one_call`` on a compiled chain two
        compiled calls around LAPACK's QR (:mod:`~robotid_sim_plugins.ekf.square_root_step`: the same numbers to
        rounding)."""
        if self._noise is None:
            return super().update(t, q, qd, qdd, tau, restart)
        return self.compiled_update(t, q, qd, qdd, tau, restart, self._step)

    def _step(self, sample: np.ndarray, tau: np.ndarray, t_rel: float) -> int:
        from robotid_sim_plugins.ekf.compiled import sigma_dynamics
        from robotid_sim_plugins.ekf.square_root_step import SINGULAR, sr_correct, sr_predict

        rule, chain, n, d = self.rule, self.process.chain.arrays, self.process.n, self.process.dim_x
        states, qdd, Minv = np.empty((2 * d + 1, 2 * n)), np.empty((2 * d + 1, n)), np.empty((n, n))
        head = (self._noise, rule.Wm, rule.gamma, rule.second, rule.centre, self._x, self.S, states, qdd)
        pending = (self._step_pending, self._step_noise)
        if self._flags[0]:
            if not sigma_dynamics(chain, self._x, self.S, rule.gamma, self._step_pending[0], states, qdd, Minv):
                return SINGULAR
            compound = np.empty((d + 2 * n, d), order="F")
            q_lambda = sr_predict(*head, *pending, self._step_previous, self._flags, compound)
            signed_lower(noisy_triangle(compound, q_lambda, 2 * n), self.S)  # the predicted factor, in place
        if not sigma_dynamics(chain, self._x, self.S, rule.gamma, tau, states, qdd, Minv):
            return SINGULAR
        return sr_correct(*head, Minv, *pending, self._flags, sample, tau, t_rel)


class SquareRootEKF(_CholeskyState):
    """SR-EKF: the EKF of :class:`~robotid_sim_plugins.ekf.stream.PythonEKF` (its torque-form update,
    :func:`~robotid_sim_plugins.ekf.stream.torque_form`, and its linearisation at the posterior,
    :func:`~robotid_sim_plugins.ekf.stream.posterior_linearization`) with the factor S propagated by QR and
    updated by Carlson's sequential square-root update (module docstring; :func:`carlson_update`).

    It draws no points, so its factor may be triangular in any order of the states: S is lower-triangular in the
    order [λ, q, qd] (:attr:`order`), P = Π S Sᵀ Πᵀ. There F = I + Δt·[[0, I, 0], [A], [0]] only changes the last
    2n rows of S, and (F S)ᵀ is upper-triangular but for its last 2n rows and columns: the predict's QR is that
    (2n, 2n) corner's with Q's state block's root, then the parameters' noise by LAPACK's triangular-pentagonal
    QR, instead of a QR of all d columns.
    """

    name = "sr_ekf"

    def __init__(self, process, schedule, lam0):
        super().__init__(process, schedule, lam0)
        n2, d = 2 * process.n, process.dim_x
        #: the states in the factor's order: λ, then q and qd
        self.order = np.r_[n2:d, :n2]
        self._unorder = np.argsort(self.order)
        self._init_state(d)
        self._lin = None  # the linearisation at the last posterior (None: a restart)
        self._mass = None  # M(q, λ) at the prior where positive definite, for the update's noise
        # the compiled linearisation's noise and flags (:meth:`linearize`)
        self._noise = schedule.kernel_noise(process.rows, process.dt, lam0)
        self._flags = np.zeros(5, dtype=np.int64)

    @property
    def P(self):
        return (self.S @ self.S.T)[np.ix_(self._unorder, self._unorder)]

    def parameter_variance(self):
        """(b,) P's last diagonal entries: the squared norms of S's first rows (λ first)."""
        rows = self.S[: self.lam0.shape[0]]
        return np.einsum("ij,ij->i", rows, rows)

    def restart(self, x, P):
        self._x = x.copy()
        self.S = cholesky(P[np.ix_(self.order, self.order)])
        self._lin = None

    def predict(self, tau, qdd, Q):
        lin, n, d, dt = self._lin, self.process.n, self.process.dim_x, self.process.dt
        b, n2 = d - 2 * n, 2 * n
        self._x = self.process.fx(self._x[:, None], lin.qdd)[:, 0]
        Q = parameter_noise_where_physical(Q, self._mass)
        # (F S)ᵀ, Fortran-ordered: S's rows of q += Δt·its rows of qd, its rows of qd += Δt·A S (A's columns in
        # the factor's order); the rows of λ are S's, zero in the columns of q and qd
        S = self.S
        R = np.empty((d, d), order="F")
        R[:] = S.T
        R[:, b : b + n] += dt * S[b + n :].T
        R[:, b + n :] += dt * (lin.jacobian[:, self.order] @ S).T
        # the corner [(F S)ᵀ's last 2n rows; Q's state block's root] to one (2n, 2n) triangle (zero in the columns
        # of λ, as those rows are)
        corner = np.empty((2 * n2, n2), order="F")
        corner[:n2] = R[b:, b:]
        corner[n2:] = psd_sqrt(Q.states).T
        R[b:, b:] = np.triu(qr_triangle(corner))
        noise = np.sqrt(np.clip(Q.parameters, 0.0, None))
        if noise.any():  # the parameters' noise rows [σ I, 0] under the triangle: trapezoidal, l = b
            B = np.zeros((b, d), order="F")
            np.fill_diagonal(B, noise)
            R, _, _, info = dtpqrt(b, min(b, 8), R, B, overwrite_a=1, overwrite_b=1)
            if info:
                raise np.linalg.LinAlgError("QR")
        self.S = lower_factor(R)

    def correct(self, z, tau, t):
        process = self.process
        if self._lin is None:  # a restart: M at the prior
            M = mass_matrix(process, self._x, tau)[0]
            self._mass = M if positive_definite(M) else None
        H, z, R = torque_form(process, self.schedule, self.sample, z, tau, self._mass, t)
        # H's columns in the factor's order; the correction back in the states'
        self.S, dx = whitened_update(self.S, self.S.T @ H[:, self.order].T, z - H @ self._x, cholesky(R))
        self._x = self._x + dx[self._unorder]
        self._lin, M, tau_noise, physical = self.linearize(tau)
        self._mass = M if physical else None
        self.non_physical_samples += not physical
        return self._lin.qdd, tau_noise

    def linearize(self, tau: np.ndarray) -> tuple[Linearization, np.ndarray, np.ndarray, bool]:
        """:func:`~robotid_sim_plugins.ekf.stream.posterior_linearization` at the posterior with torque τ (n,),
        for a compiled chain the compiled EKF step's
        (:func:`~robotid_sim_plugins.ekf.ekf_kernel.linearize_posterior`: the same numbers in one call)."""
        process, x, qdd = self.process, self._x.copy(), self.sample[2]
        if process.chain is None:
            return posterior_linearization(process, self.schedule, x, tau, qdd)
        from robotid_sim_plugins.ekf.ekf_kernel import linearize_posterior

        n = process.n
        acc, A, M, tau_noise = np.empty(n), np.empty((n, x.size)), np.empty((n, n)), np.empty((n, n))
        args = (np.ascontiguousarray(tau, dtype=float), np.ascontiguousarray(qdd, dtype=float))
        if not linearize_posterior(process.chain.arrays, x, *args, acc, A, M, tau_noise, self._flags, self._noise):
            raise SingularMassMatrix
        return Linearization(x, acc, A), M, tau_noise, bool(self._flags[3])
