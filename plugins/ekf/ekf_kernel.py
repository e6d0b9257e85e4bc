"""The EKF's per-sample step compiled (numba, cached on disk): filterpy's update and predict on the chain's
compiled process model, for a chain :class:`~robotid_sim_plugins.ekf.compiled.CompiledChain` accepts.

The same filter as :class:`~robotid_sim_plugins.ekf.stream.PythonEKF` on filterpy's ``ExtendedKalmanFilter``
(equal to rounding, ``tests/test_filters.py``): the update's Joseph form (I − KH) P (I − KH)ᵀ + K R Kᵀ with
(I − KH) P = P − K (P Hᵀ)ᵀ, and F P Fᵀ only changes the rows and columns of q and qd
(F = I + Δt·[[0, I, 0], [A], [0]]), so a step costs O(d²·m) instead of O(d³).

A sample's predict is made when the next sample arrives (then it is known whether that one starts a new
recording, where the states restart instead): the step state :class:`EKFState` carries the previous sample's
linearisation until then. ``fit`` runs :func:`ekf_run` (the loop compiled); ``update(sample)`` calls
:func:`ekf_sample` once per sample: the same numbers.

Noise tuple ``noise`` (see :class:`~robotid_sim_plugins.ekf.noise.NoiseSchedule`): ``(r0 (3n,) σ² of
[q, qd, qdd], torque variance (n,), tempering c, warmup T_w, unit state noise (bool), state-noise floor
(2n,) 1e-6·σ² of q and qd, q_λ, T_a (inf: no annealing), Δt, measured rows (m,), P0 (d, d), λ0 (b,))``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from robotid_sim_plugins.ekf.compiled import linearize

#: what :func:`ekf_sample` returns
OK, SINGULAR, NOT_POSITIVE_DEFINITE = 0, 1, 2


class EKFState:
    """The filter between two samples (arrays the kernel updates in place).

    Attributes:
        x: (d,) the posterior state; P: (d, d) its covariance.
        lin: (qdd (n,), A (n, d), x_prior (d,), torque noise R_τ (n, n)) of the last sample, for its predict.
        previous_qdd: (n,) the sample before's qdd (Q's jerk term).
        flags: int64 [a predict is pending, ``previous_qdd`` holds one, samples seen].
        t: float [the last sample's time since the first sample, the first sample's time].
    """

    def __init__(self, n: int, d: int):
        self.x, self.P = np.zeros(d), np.zeros((d, d))
        self.lin = (np.zeros(n), np.zeros((n, d)), np.zeros(d), np.zeros((n, n)))
        self.previous_qdd = np.zeros(n)
        self.flags = np.zeros(3, dtype=np.int64)
        self.t = np.zeros(2)

    @property
    def arrays(self) -> tuple:
        """The arguments :func:`ekf_sample` takes after the chain."""
        return (self.x, self.P, *self.lin, self.previous_qdd, self.flags, self.t)


@numba.njit(cache=True)
def _predict(x, P, qdd, A, x_prior, tau_noise, previous_qdd, flags, t_rel, noise):  # pragma: no cover - compiled
    """filterpy's predict: x ← fx(x, qdd + A (x − x_prior)), P ← F P Fᵀ + Q, P symmetrised."""
    unit_state, floor, q_lam, annealing, dt = noise[4], noise[5], noise[6], noise[7], noise[8]
    n = qdd.shape[0]
    d = x.shape[0]
    u = qdd + A @ (x - x_prior)
    for i in range(n):
        x[i] += dt * x[n + i]
    for i in range(n):
        x[n + i] += dt * u[i]
    # F P Fᵀ, F = I + Δt G: rows q += Δt·rows qd, rows qd += Δt·A P; then the same on the columns
    AP = A @ P
    for j in range(d):
        for i in range(n):
            P[i, j] += dt * P[n + i, j]
        for i in range(n):
            P[n + i, j] += dt * AP[i, j]
    PA = P @ A.T
    for r in range(d):
        for i in range(n):
            P[r, i] += dt * P[r, n + i]
        for i in range(n):
            P[r, n + i] += dt * PA[r, i]
    if unit_state:
        for i in range(2 * n):
            P[i, i] += 1.0
    else:
        for i in range(n):
            P[i, i] += (0.5 * dt * dt * qdd[i]) ** 2 + floor[i]
            P[n + i, n + i] += floor[n + i]
            if flags[1]:
                P[n + i, n + i] += (0.5 * dt * (qdd[i] - previous_qdd[i])) ** 2
            for j in range(n):
                P[n + i, n + j] += dt * dt * tau_noise[i, j]
    decay = 1.0 if math.isinf(annealing) else math.exp(-t_rel / annealing)
    for i in range(2 * n, d):
        P[i, i] += q_lam * decay
    for i in range(d):
        for j in range(i):
            s = 0.5 * (P[i, j] + P[j, i])
            P[i, j] = s
            P[j, i] = s


@numba.njit(cache=True)
def _times_ht(P, A, rows):  # pragma: no cover - compiled
    """P Hᵀ (d, m) for H's ``rows`` (m,) of [[I, 0], [A]] (rows < 2n unit rows, the others rows of A (n, d))."""
    n2 = 2 * A.shape[0]
    PA = P @ A.T
    out = np.empty((P.shape[0], rows.shape[0]))
    for a in range(rows.shape[0]):
        ra = rows[a]
        out[:, a] = P[:, ra] if ra < n2 else PA[:, ra - n2]
    return out


@numba.njit(cache=True)
def _h_times(B, A, rows):  # pragma: no cover - compiled
    """H B (m, k) of B (d, k) for H's ``rows`` (m,), as :func:`_times_ht`."""
    n2 = 2 * A.shape[0]
    AB = A @ B
    out = np.empty((rows.shape[0], B.shape[1]))
    for a in range(rows.shape[0]):
        ra = rows[a]
        out[a] = B[ra] if ra < n2 else AB[ra - n2]
    return out


@numba.njit(cache=True)
def ekf_sample(
    chain, x, P, qdd, A, x_prior, tau_noise, previous_qdd, flags, t, q, qd, z, tau, t_k, restart, noise
):  # pragma: no cover  # noqa: E501
    """One sample: the previous sample's predict (or, at a restart, the states from this sample's q, qd
    with P0's blocks, λ and its covariance carried on), then the update with the measurement z (m,) and
    torque τ (n,). Returns :data:`OK`, :data:`SINGULAR` or :data:`NOT_POSITIVE_DEFINITE` (after an update other
    than the first, a diagonal entry of P not positive; a Cholesky factorisation, O(d³), is checked by
    :func:`ekf_run` at its eigenvalue checks only)."""
    r0, tau_var, tempering, warmup = noise[0], noise[1], noise[2], noise[3]
    rows, P0, lam0 = noise[9], noise[10], noise[11]
    n = q.shape[0]
    d = x.shape[0]
    if flags[2] == 0:
        t[1] = t_k
    t_rel = t_k - t[1]
    if restart:
        first = flags[2] == 0
        for i in range(n):
            x[i] = q[i]
            x[n + i] = qd[i]
        for i in range(d):
            for j in range(d):
                if first or i < 2 * n or j < 2 * n:
                    P[i, j] = P0[i, j]
        if first:
            x[2 * n :] = lam0
        flags[1] = 0
    elif flags[0]:
        _predict(x, P, qdd, A, x_prior, tau_noise, previous_qdd, flags, t[0], noise)
        previous_qdd[:] = qdd
        flags[1] = 1
    x_prior[:] = x
    if not linearize(chain, x, tau, qdd, tau_noise, A):
        return SINGULAR
    Minv = tau_noise.copy()
    tau_noise[:] = Minv @ np.diag(tau_var) @ Minv.T
    # R(t) on the measured rows and the innovation y = z − h(x); H's rows are unit rows (q, qd) or A's (qdd)
    m = rows.shape[0]
    scale = 1.0 + tempering * math.exp(-t_rel / warmup) if tempering else 1.0
    R = np.zeros((m, m))
    y = np.empty(m)
    for a in range(m):
        ra = rows[a]
        R[a, a] = r0[ra]
        for c in range(m):
            rc = rows[c]
            if ra >= 2 * n and rc >= 2 * n:
                R[a, c] += tau_noise[ra - 2 * n, rc - 2 * n]
        y[a] = z[a] - (x[ra] if ra < 2 * n else qdd[ra - 2 * n])
    R *= scale
    PHT = _times_ht(P, A, rows)
    S = _h_times(PHT, A, rows) + R
    # K = P Hᵀ S⁻¹ with S scaled to unit diagonal first: S's rows differ by orders (q's σ² beside qdd's), and the
    # inverse of the scaled matrix is as exact as its much smaller condition number allows
    scale_s = 1.0 / np.sqrt(np.diag(S))
    try:
        S_inv = scale_s[:, None] * np.linalg.inv(scale_s[:, None] * S * scale_s[None, :]) * scale_s[None, :]
    except Exception:  # noqa: BLE001 - numba catches no narrower class: S singular, P no longer a covariance
        return NOT_POSITIVE_DEFINITE
    K = PHT @ S_inv
    x += K @ y
    W = P - K @ PHT.T  # (I − KH) P; then the Joseph form (I − KH) P (I − KH)ᵀ + K R Kᵀ, as filterpy
    P[:] = W + (K @ R - _times_ht(W, A, rows)) @ K.T
    for i in range(d):
        for j in range(i):
            s = 0.5 * (P[i, j] + P[j, i])
            P[i, j] = s
            P[j, i] = s
    t[0] = t_rel
    flags[0] = 1
    flags[2] += 1
    if flags[2] > 1:
        for i in range(d):
            if not P[i, i] > 0.0:
                return NOT_POSITIVE_DEFINITE
    return OK


@numba.njit(cache=True)
def _cholesky_ok(P):  # pragma: no cover - compiled
    """Whether P has a Cholesky factor (is positive definite to rounding)."""
    try:
        np.linalg.cholesky(P)
    except Exception:  # noqa: BLE001 - numba catches no narrower class
        return False
    return True


@numba.njit(cache=True)
def ekf_run(
    chain, state, qs, qds, z, tau, t, starts, noise, stride, check_every, hist, hist_std, at, eigen
):  # pragma: no cover  # noqa: E501
    """:func:`ekf_sample` over the stream: q, qd (N, n), z (N, m), τ (N, n), t (N,), ``starts`` (N,) True at
    each recording's first sample. Records λ and its std every ``stride`` samples and at the last (``hist``,
    ``hist_std`` (K, b), ``at`` (K,)), P's smallest eigenvalue every ``check_every`` and at the last (``eigen``).

    Returns:
        (:data:`OK` or the failure's code, the sample it happened at).
    """
    x, P, qdd, A, x_prior, tau_noise, previous_qdd, flags, tt = state
    N, n = qs.shape
    b = x.shape[0] - 2 * n
    r = 0
    e = 0
    for k in range(N):
        code = ekf_sample(
            chain,
            x,
            P,
            qdd,
            A,
            x_prior,
            tau_noise,
            previous_qdd,
            flags,
            tt,
            qs[k],
            qds[k],
            z[k],
            tau[k],
            t[k],
            starts[k],
            noise,
        )
        if code != OK:
            return code, k
        if k % stride == 0 or k == N - 1:
            for i in range(b):
                hist[r, i] = x[2 * n + i]
                hist_std[r, i] = math.sqrt(max(P[2 * n + i, 2 * n + i], 0.0))
            at[r] = k
            r += 1
        if k % check_every == 0 or k == N - 1:
            eigen[e] = np.linalg.eigvalsh(P)[0]
            e += 1
            if k and not _cholesky_ok(P):
                return NOT_POSITIVE_DEFINITE, k
    return OK, N
