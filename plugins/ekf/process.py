"""The EKF's process and measurement model: the identified rigid-body model on the augmented state.

Symbols (seed 004 §2.4, §4.4):

- n joints, b base parameters, state dimension d = 2n + b, m measured signals' rows (m = n · measured signals).
- x = [q, qd, λ] (d,): the augmented state (Eq. 41), λ the base parameters.
- τ (n,): the measured torque of the sample, the model's input.
- Y(q, qd, qdd) (n, b): the base regressor, τ = Y λ.
- M(q, λ) (n, n) and h(q, qd, λ) (n,): the mass matrix and the bias torque of the model, Y at unit and zero
  accelerations times λ.
- qdd = M⁻¹ (τ − h) (n,): the model's forward dynamics at x with input τ.
- A = ∂qdd/∂x (n, d): [∂qdd/∂q, ∂qdd/∂qd, ∂qdd/∂λ] = −M⁻¹ [∂τ/∂q, ∂τ/∂qd, Y] at fixed qdd (Eq. 28–29).
- fx(x, u) (d,) -> (d,): the Euler step x + Δt·[qd, u, 0] (Eq. 42–43), u the acceleration (n,).
- F = ∂fx/∂x (d, d): I + Δt·[[0, I, 0], [A], [0]] (Eq. 23, 43).
- hx(x) (m,): the measured rows of [q, qd, qdd(x, τ)]; H = ∂hx/∂x (m, d) the same rows of [[I, 0], A].
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: the signals the filter can measure, in the order of the measurement vector
SIGNALS = ("q", "qd", "qdd")
#: where a velocity is exactly zero, the Jacobian's differences start from it (the +0 side of sign(qd)): a step
#: across sign(qd)'s jump would read fc / step (~1e6·fc) as a slope, and the EKF's predict would blow up
TINY = float(np.finfo(float).tiny)


class SingularMassMatrix(ArithmeticError):
    """The mass matrix M(q, λ) of the current estimate cannot be inverted (the filter left physical λ)."""


@dataclass(frozen=True)
class Linearization:
    """The model's forward dynamics and their Jacobian at one prior state.

    Attributes:
        x: (d,) the prior state [q, qd, λ] they are evaluated at.
        qdd: (n,) forward dynamics M⁻¹ (τ − h) at x.
        jacobian: (n, d) A = ∂qdd/∂x at x (Eq. 28–29).
    """

    x: np.ndarray
    qdd: np.ndarray
    jacobian: np.ndarray

    def acceleration_at(self, x: np.ndarray) -> np.ndarray:
        """(n,) first-order expansion of qdd about the prior, at state ``x`` (d,): qdd + A (x − x_prior)."""
        return self.qdd + self.jacobian @ (x - self.x)


class EulerProcessModel:
    """The rigid-body model with an Euler step of one sample interval (seed 004 Eq. 41–43), λ constant (Eq. 42).

    Args:
        regressor: the base regressor ``Y(q, qd, qdd)`` of batches (K, n) each -> (K, n, b).
        n: joints.
        b: base parameters.
        dt: the sample interval Δt (s).
        measurements: the measured signals, a subset of :data:`SIGNALS`.
        chain: the model compiled (:class:`~robotid_sim_plugins.ekf.compiled.CompiledChain`), for
            :meth:`forward_many`; None: one Python evaluation per state.
    """

    def __init__(self, regressor: Callable, n: int, b: int, dt: float, measurements: Sequence[str], chain=None) -> None:
        self.regressor, self.n, self.b, self.dt, self.chain = regressor, n, b, dt, chain
        self.dim_x = 2 * n + b
        self.measurements = [s for s in SIGNALS if s in measurements]
        #: (m,) rows of [q, qd, qdd] that are measured
        self.rows = np.concatenate([np.arange(n) + n * SIGNALS.index(s) for s in self.measurements])
        self.dim_z = self.rows.size
        self._zero_acc = np.vstack([np.zeros((1, n)), np.eye(n)])

    def measurement(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """(N, m) the measured rows z of the recorded [q, qd, qdd], each (N, n)."""
        values = np.concatenate([q, qd, qdd], axis=1)
        return values if self.dim_z == values.shape[1] else values[:, self.rows]

    def forward_dynamics(self, x: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(qdd (n,), M⁻¹ (n, n)) at state x (d,) with torque τ (n,): qdd = M⁻¹ (τ − h).

        Raises:
            SingularMassMatrix: M(q, λ) is singular or its inverse not finite.
        """
        n = self.n
        q, qd, lam = x[:n], x[n : 2 * n], x[2 * n :]
        # M and h at the state: the regressor at zero and unit accelerations, times λ
        Y = self.regressor(np.repeat(q[None], n + 1, 0), np.repeat(qd[None], n + 1, 0), self._zero_acc)
        h = Y[0] @ lam
        M = (Y[1:] @ lam).T - h[:, None]
        try:
            Minv = np.linalg.inv(M)
        except np.linalg.LinAlgError:
            Minv = None
        if Minv is None or not np.all(np.isfinite(Minv)):
            raise SingularMassMatrix
        return Minv @ (tau - h), Minv

    def forward_many(self, X: np.ndarray, tau: np.ndarray, singular_nan: bool = False) -> np.ndarray:
        """(S, n) the forward dynamics of S states X (S, d) (sigma points, particles) with torques τ (n,) or (S, n);
        with ``singular_nan`` NaN rows where M(q, λ) is singular.

        Raises:
            SingularMassMatrix: M(q, λ) is singular at one of them (without ``singular_nan``).
        """
        taus, qdd = np.empty((X.shape[0], self.n)), np.empty((X.shape[0], self.n))
        taus[:] = tau
        ok = np.ones(X.shape[0], dtype=np.bool_)
        if self.chain is None:
            for s, (x, u) in enumerate(zip(X, taus, strict=True)):
                try:
                    qdd[s] = self.forward_dynamics(x, u)[0]
                except SingularMassMatrix:
                    ok[s] = False
        else:
            from robotid_sim_plugins.ekf.compiled import forward_batch

            forward_batch(self.chain.arrays, np.ascontiguousarray(X), taus, qdd, ok)
        if not (ok.all() and np.isfinite(qdd).all()):
            ok &= np.isfinite(qdd).all(axis=1)
            if not singular_nan:
                raise SingularMassMatrix
            qdd[~ok] = np.nan
        return qdd

    def mean_dynamics(self, X: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(qdd (S, n), qdd of X[0] (n,), M⁻¹ at X[0] (n, n)) of S states X (S, d) with torque τ (n,), in one
        :meth:`forward_many` call: M⁻¹'s columns are the change of X[0]'s qdd under unit torque steps (qdd is
        affine in τ).

        Raises:
            SingularMassMatrix: M(q, λ) is singular at one of them.
        """
        n = self.n
        taus = np.vstack([np.broadcast_to(tau, X.shape[:1] + (n,)), tau + np.eye(n)])
        qdd = self.forward_many(np.vstack([X, np.broadcast_to(X[0], (n, X.shape[1]))]), taus)
        return qdd[:-n], qdd[0], (qdd[-n:] - qdd[0]).T

    def dynamics_basis(self, q: np.ndarray, qd: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(basis (b, T + n), [M, h] at λ (T + n,)) at q, qd (n,): [M(q, λ)'s lower triangle (its rows in order,
        T = n(n + 1)/2), h(q, qd, λ)] = λ @ basis for any λ (b,) (the model is linear in λ, M symmetric), and at
        the given λ (b,): the base regressor at zero and unit accelerations
        (:func:`~robotid_sim_plugins.ekf.sigma_kernel.packed_basis`; the basis Fortran-ordered)."""
        from robotid_sim_plugins.ekf.sigma_kernel import packed_basis

        n, b = self.n, self.b
        Q, QD = np.repeat(q[None], n + 1, 0), np.repeat(qd[None], n + 1, 0)
        Y = np.ascontiguousarray(self.regressor(Q, QD, self._zero_acc), dtype=float)
        basis, mean = np.empty((n * (n + 3) // 2, b)), np.empty(n * (n + 3) // 2)
        packed_basis(Y, np.ascontiguousarray(lam), basis, mean)
        return basis.T, mean

    def sigma_dynamics(
        self, x: np.ndarray, L: np.ndarray, gamma: float, tau: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the points' [q, qd] (2d + 1, 2n), their forward dynamics (2d + 1, n), M⁻¹ (n, n) at x) of the sigma
        points x, x + γ·Lₖ, x − γ·Lₖ (Lₖ the columns of L (d, d), in that order) with torque τ (n,).

        L is lower-triangular (a Cholesky factor), so the points of its last b columns move λ only (the state is
        [q, qd, λ]): they and x share q and qd, and as the model is linear in λ their M and h are x's plus
        ±γ times those of the columns, from one :meth:`dynamics_basis` and one triangular (b, b) × (b, T + n)
        product; their solves and M⁻¹ are one compiled call
        (:func:`~robotid_sim_plugins.ekf.sigma_kernel.lambda_points`). Only the 4n points that move q or qd take a
        full forward dynamics (:meth:`forward_many`). For a compiled chain all of it is one compiled call
        (:func:`~robotid_sim_plugins.ekf.compiled.sigma_dynamics`). The same numbers as :meth:`forward_many` on
        every point, to rounding.

        Raises:
            SingularMassMatrix: M(q, λ) is singular at one of the points.
        """
        n, d = self.n, self.dim_x
        n2 = 2 * n
        states, qdd, Minv = np.empty((2 * d + 1, n2)), np.empty((2 * d + 1, n)), np.empty((n, n))
        if self.chain is not None:
            from robotid_sim_plugins.ekf.compiled import sigma_dynamics

            # one layout of L compiled: the plain forms' factor is LAPACK's (Fortran-ordered)
            if not sigma_dynamics(self.chain.arrays, x, np.asfortranarray(L), gamma, tau, states, qdd, Minv):
                raise SingularMassMatrix
            return states, qdd, Minv
        from robotid_sim_plugins.ekf.sigma_kernel import lambda_points, sigma_states
        from scipy.linalg.blas import dtrmm

        # L and the λ block's change in the layouts the compiled path passes (one compilation of each kernel)
        L = np.asfortranarray(L)
        moving = np.empty((2 * n2, d))
        sigma_states(x, L, gamma, n, states, moving)
        moved = self.forward_many(moving, tau)
        qdd[1 : n2 + 1], qdd[d + 1 : d + n2 + 1] = moved[:n2], moved[n2:]
        basis, mean = self.dynamics_basis(x[:n], x[n:n2], x[n2:])
        # (b, T + n): γ·(L's λ block)ᵀ @ basis, the columns' change
        change = np.ascontiguousarray(dtrmm(gamma, L[n2:, n2:], basis, lower=1, trans_a=1))
        if not lambda_points(mean, change.T, tau, qdd[0], qdd[n2 + 1 : d + 1], qdd[d + n2 + 1 :], Minv):
            raise SingularMassMatrix
        return states, qdd, Minv

    def step_many(self, X: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """(S, d) the Euler step x + Δt·[qd, qdd, 0] (Eq. 43) of S states X (S, d) with their accelerations (S, n)."""
        n, out = self.n, X.copy()
        out[:, :n] += self.dt * X[:, n : 2 * n]
        out[:, n : 2 * n] += self.dt * qdd
        return out

    def measure_many(self, X: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """(S, m) the predicted measurements of S states X (S, d) with their accelerations qdd (S, n)."""
        n = self.n
        return np.concatenate([X[:, : 2 * n], qdd], axis=1)[:, self.rows]

    def acceleration_jacobian(self, x: np.ndarray, qdd: np.ndarray, Minv: np.ndarray) -> np.ndarray:
        """(n, d) A = ∂qdd/∂x = −M⁻¹ [∂τ/∂q, ∂τ/∂qd, Y(q, qd, qdd)] at state x (d,) (Eq. 28–29).

        ∂τ/∂q and ∂τ/∂qd at fixed qdd are forward differences of the inverse dynamics (steps 1e-6 · max(1, |·|), a
        velocity's away from zero and from +0 at zero: no difference across Coulomb's sign, as
        :data:`TINY` says); they and Y come from one batched regressor call.
        """
        n = self.n
        q, qd, lam = x[:n], np.where(x[n : 2 * n] == 0.0, TINY, x[n : 2 * n]), x[2 * n :]
        eps_q = 1e-6 * np.maximum(1.0, np.abs(q))
        eps_qd = np.copysign(1e-6 * np.maximum(1.0, np.abs(qd)), qd)
        Qp = np.repeat(q[None], 2 * n + 1, 0)
        QDp = np.repeat(qd[None], 2 * n + 1, 0)
        Qp[1 : n + 1] += np.diag(eps_q)
        QDp[n + 1 :] += np.diag(eps_qd)
        Yp = self.regressor(Qp, QDp, np.repeat(qdd[None], 2 * n + 1, 0))
        tq = Yp @ lam
        dtau = ((tq[1:] - tq[0]) / np.concatenate([eps_q, eps_qd])[:, None]).T
        return -Minv @ np.hstack([dtau, Yp[0]])

    def linearize(self, x: np.ndarray, tau: np.ndarray) -> Linearization:
        """The forward dynamics and their Jacobian at the prior state x (d,) with torque τ (n,).

        Raises:
            SingularMassMatrix: M(q, λ) is singular at x.
        """
        if self.chain is not None:  # the same numbers, compiled
            from robotid_sim_plugins.ekf.compiled import linearize

            n, d = self.n, self.dim_x
            qdd, Minv, A = np.empty(n), np.empty((n, n)), np.empty((n, d))
            if not linearize(self.chain.arrays, np.ascontiguousarray(x), np.ascontiguousarray(tau), qdd, Minv, A):
                raise SingularMassMatrix
            return Linearization(x, qdd, A)
        qdd, Minv = self.forward_dynamics(x, tau)
        return Linearization(x, qdd, self.acceleration_jacobian(x, qdd, Minv))

    def fx(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """(d, 1) the Euler step x + Δt·[qd, u, 0] (Eq. 43) of the state x (d, 1) with acceleration u (n,)."""
        n, x = self.n, x[:, 0]
        step = np.concatenate([x[n : 2 * n], u, np.zeros(x.shape[0] - 2 * n)])
        return (x + self.dt * step)[:, None]

    def F_jacobian(self, linearization: Linearization) -> np.ndarray:
        """(d, d) F = ∂fx/∂x = I + Δt·[[0, I, 0], [A], [0]] (Eq. 23, 43), A from ``linearization``."""
        n, dt = self.n, self.dt
        F = np.eye(self.dim_x)
        F[:n, n : 2 * n] += dt * np.eye(n)
        F[n : 2 * n] += dt * linearization.jacobian
        return F

    def hx(self, linearization: Linearization) -> np.ndarray:
        """(m, 1) the predicted measurement: the measured rows of [q, qd, qdd(x, τ)] at the linearisation's x."""
        n, x = self.n, linearization.x
        return np.concatenate([x[:n], x[n : 2 * n], linearization.qdd])[self.rows][:, None]

    def H_jacobian(self, linearization: Linearization) -> np.ndarray:
        """(m, d) H = ∂hx/∂x: the measured rows of [[I, 0], A] (q and qd measured directly, qdd through A)."""
        n = self.n
        H = np.zeros((3 * n, self.dim_x))
        H[: 2 * n, : 2 * n] = np.eye(2 * n)
        H[2 * n :] = linearization.jacobian
        return H[self.rows]
