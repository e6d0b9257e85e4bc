"""The EKF's per-sample step compiled (numba, cached on disk): filterpy's update and predict on the chain's
compiled process model, for a chain :class:`~robotid_sim_plugins.ekf.compiled.CompiledChain` accepts.

The same filter as :class:`~robotid_sim_plugins.ekf.stream.PythonEKF` on filterpy's ``ExtendedKalmanFilter``
(equal to rounding, ``tests/test_filters.py``), written for the structure of the model (d = 2n + b states, m
measured rows) so that a step costs O(d²·(n + m)) in a few BLAS products instead of O(d³):

- the update's Joseph form (I − KH) P (I − KH)ᵀ + K R Kᵀ as P − ½ (X + Xᵀ), X = K (2 H P − S Kᵀ), S = H P Hᵀ + R:
  H's rows are unit rows (q, qd) or, for the accelerations, [0, 0, Y(q, qd, qdd)] of the recorded sample (the
  torque form), so H P is rows of P and one (n, b) × (b, d) product, and the update one (d, m) × (m, d) product
  (:func:`joseph`);
- F P Fᵀ only changes the rows and columns of q and qd (F = I + Δt·[[0, I, 0], [A], [0]]).

A sample's predict is made when the next sample arrives (then it is known whether that one starts a new
recording, where the states restart instead): the step state :class:`EKFState` carries the linearisation at the
posterior until then. ``fit`` runs :func:`ekf_run` (the loop compiled); ``update(sample)`` calls
:func:`ekf_sample` once per sample: the same numbers.

Noise tuple ``noise`` (see :class:`~robotid_sim_plugins.ekf.noise.NoiseSchedule`): ``(r0 (3n,) σ² of
[q, qd, qdd], torque variance (n,), tempering c, warmup T_w, unit state noise (bool), state-noise floor
(2n,) 1e-6·σ² of q and qd, q_λ, T_a (inf: no annealing), Δt, measured rows (m,), P0 (d, d), λ0 (b,))``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from robotid_sim_plugins.ekf.compiled import acceleration_jacobian, base_regressor, forward_one
from robotid_sim_plugins.ekf.sigma_kernel import positive_definite  # of M, symmetric as the CRBA writes it

#: what :func:`ekf_sample` returns
OK, SINGULAR, NOT_POSITIVE_DEFINITE = 0, 1, 2


class EKFState:
    """The filter between two samples (arrays the kernel updates in place).

    Attributes:
        x: (d,) the posterior state; P: (d, d) its covariance.
        lin: (qdd (n,), A (n, d), M (n, n), torque noise of the velocity (n, n)) at the last posterior, for its
            predict (and M for the next update's noise).
        previous_qdd: (n,) the sample before's qdd (Q's jerk term).
        flags: int64 [a predict is pending, ``previous_qdd`` holds one, samples seen, ``lin`` is the model's (1) or
            the recorded acceleration's (0, a mass matrix not positive definite), samples of the latter].
        t: float [the last sample's time since the first sample, the first sample's time].
    """

    def __init__(self, n: int, d: int):
        self.x, self.P = np.zeros(d), np.zeros((d, d))
        self.lin = (np.zeros(n), np.zeros((n, d)), np.zeros((n, n)), np.zeros((n, n)))
        self.previous_qdd = np.zeros(n)
        self.flags = np.zeros(5, dtype=np.int64)
        self.t = np.zeros(2)

    @property
    def arrays(self) -> tuple:
        """The arguments :func:`ekf_sample` takes after the chain."""
        return (self.x, self.P, *self.lin, self.previous_qdd, self.flags, self.t)


@numba.njit(cache=True)
def linearize_posterior(chain, x, tau, acc, qdd, A, M, noise_q, flags, noise):  # pragma: no cover - compiled
    """The linearisation at the posterior x (d,) with torque τ (n,) for the next predict
    (:func:`~robotid_sim_plugins.ekf.stream.posterior_linearization`): qdd, A, M and the torque noise of the
    velocity, for correlated noise where the torque rows are measured; where M is not positive definite and the
    accelerations are measured, the recorded acceleration ``acc`` (n,) with A = 0 and its noise diag(σ_qdd²)
    instead. False: M is singular."""
    r0, tau_var, rows = noise[0], noise[1], noise[9]
    n = qdd.shape[0]
    Minv = np.empty((n, n))
    if not forward_one(chain, x, tau, qdd, M, Minv):
        return False
    if rows[rows.shape[0] - 1] >= 2 * n and not positive_definite(M):
        qdd[:] = acc
        A[:] = 0.0
        noise_q[:] = 0.0
        for i in range(n):
            noise_q[i, i] = r0[2 * n + i]
        flags[3] = 0
        flags[4] += 1
        return True
    noise_q[:] = (Minv * tau_var[None, :]) @ Minv.T
    m = rows.shape[0]
    first = 0  # the first torque row
    while first < m and rows[first] < 2 * n:
        first += 1
    mt = m - first
    G = np.zeros((n, mt))
    Y = np.empty((1, n, x.shape[0] - 2 * n))
    if mt:  # the torque's noise is in the predict's input and in the update's residual: correlated noise
        qs, qds = np.ascontiguousarray(x[:n]).reshape(1, n), np.ascontiguousarray(x[n : 2 * n]).reshape(1, n)
        base_regressor(chain, qs, qds, np.ascontiguousarray(acc).reshape(1, n), Y)
        MR = (M * r0[2 * n :][None, :]) @ M.T
        RT = np.empty((mt, mt))
        C = np.empty((n, mt))
        resid = np.empty(mt)
        for a in range(mt):
            i = rows[first + a] - 2 * n
            for c in range(mt):
                RT[a, c] = MR[i, rows[first + c] - 2 * n]
            RT[a, a] += tau_var[i]
            C[:, a] = Minv[:, i] * tau_var[i]
            resid[a] = tau[i] - np.dot(Y[0, i], x[2 * n :])
        G = C @ np.linalg.inv(RT)
        qdd -= G @ resid
        noise_q -= G @ C.T
    acceleration_jacobian(chain, x, qdd, Minv, A)
    for a in range(mt):
        i = rows[first + a] - 2 * n
        for r in range(n):
            A[r, 2 * n :] += G[r, a] * Y[0, i]
    flags[3] = 1
    return True


@numba.njit(cache=True)
def _predict(x, P, qdd, A, noise_q, previous_qdd, flags, t_rel, noise):  # pragma: no cover - compiled
    """filterpy's predict from the posterior: x ← fx(x, qdd), P ← F P Fᵀ + Q, F = I + Δt·[[0, I, 0], [A], [0]] (its
    A-rows and Q's parameter block only where ``lin`` is the model's); P's q and qd rows and columns symmetrised
    (the rest is P's)."""
    unit_state, floor, q_lam, annealing, dt = noise[4], noise[5], noise[6], noise[7], noise[8]
    n = qdd.shape[0]
    d = x.shape[0]
    model = flags[3] == 1
    for i in range(n):
        x[i] += dt * x[n + i]
        x[n + i] += dt * qdd[i]
    # F P: rows q += Δt·rows qd, rows qd += Δt·A P. Then (F P) Fᵀ on the columns, with (F P) Aᵀ = B + the same rows
    # of B changed, B = P Aᵀ = (A P)ᵀ (P symmetric): no second (d, d) product
    AP = A @ P if model else np.zeros((1, 1))
    B = np.ascontiguousarray(AP.T) if model else np.zeros((1, 1))
    for i in range(n):
        for j in range(d):
            P[i, j] += dt * P[n + i, j]
    if model:
        ABt = A @ B  # (F P) Aᵀ on the rows of qd: B's plus Δt·A P Aᵀ
        for i in range(n):
            for j in range(d):
                P[n + i, j] += dt * AP[i, j]
            for j in range(n):
                B[i, j] += dt * B[n + i, j]
                B[n + i, j] += dt * ABt[i, j]
    for r in range(d):
        for i in range(n):
            P[r, i] += dt * P[r, n + i]
            if model:
                P[r, n + i] += dt * B[r, i]
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
                P[n + i, n + j] += dt * dt * noise_q[i, j]
    if model:  # the parameters' process noise only where the model predicts (stream.parameter_noise_where_physical)
        decay = 1.0 if math.isinf(annealing) else math.exp(-t_rel / annealing)
        for i in range(2 * n, d):
            P[i, i] += q_lam * decay
    for i in range(2 * n):
        for j in range(d):
            if j < i or j >= 2 * n:
                s = 0.5 * (P[i, j] + P[j, i])
                P[i, j] = s
                P[j, i] = s


@numba.njit(cache=True)
def scaled_inverse(S, out):  # pragma: no cover - compiled
    """out (m, m) ← S⁻¹ for the symmetric S (m, m), from the Cholesky factor L of S scaled to unit diagonal: S⁻¹ =
    D L⁻ᵀ L⁻¹ D, D = diag(S)^(-1/2). S's rows differ by orders (q's σ² beside τ's); the scaled matrix's condition
    number is much smaller, and its inverse as exact as that allows. False: S is not positive definite."""
    m = S.shape[0]
    scale = np.empty(m)
    for i in range(m):
        if not S[i, i] > 0.0:
            return False
        scale[i] = 1.0 / math.sqrt(S[i, i])
    try:
        L = np.linalg.cholesky(S * scale[:, None] * scale[None, :])
    except Exception:  # noqa: BLE001 - numba catches no narrower class: S is not positive definite
        return False
    X = np.zeros((m, m))  # L⁻¹ by rows: forward substitution on the identity
    for i in range(m):
        X[i, i] = 1.0
        for k in range(i):
            c = L[i, k]
            for j in range(k + 1):
                X[i, j] -= c * X[k, j]
        c = 1.0 / L[i, i]
        for j in range(i + 1):
            X[i, j] *= c
    out[:] = X.T @ X
    for i in range(m):
        for j in range(m):
            out[i, j] *= scale[i] * scale[j]
    return True


@numba.njit(cache=True)
def joseph(P, Kt, HP, S):  # pragma: no cover - compiled
    """P ← (I − KH) P (I − KH)ᵀ + K R Kᵀ for P (d, d), the gain K = Ktᵀ (d, m), H P (m, d) and S = H P Hᵀ + R (m, m):
    P − K H P − P Hᵀ Kᵀ + K S Kᵀ (for any K: the form stays a covariance however the gain is rounded) = P − ½ (X +
    Xᵀ), X = Ktᵀ V, V = 2 H P − S Kt: one (d, m) × (m, d) product, symmetric by construction."""
    d = P.shape[0]
    X = Kt.T @ (2.0 * HP - S @ Kt)
    for i in range(d):
        for j in range(i + 1):
            s = P[i, j] - 0.5 * (X[i, j] + X[j, i])
            P[i, j] = s
            P[j, i] = s


@numba.njit(cache=True)
def _update(chain, x, P, M, physical, q, qd, acc, z, tau, t_rel, noise):  # pragma: no cover - compiled
    """filterpy's update (Joseph form) with the measured rows: q and qd rows z − x, accelerations in the torque
    form τ − Y(q, qd, qdd) λ of the recorded sample with noise diag(σ_τ²) + M diag(σ_qdd²) Mᵀ (M at the prior; the
    second term only where M is ``physical``, positive definite); the rows of q and qd tempered, the torque rows not
    (``NoiseSchedule.update_noise`` without ``temper_torque``). False: S is singular (P no longer a covariance)."""
    r0, tau_var, tempering, warmup, rows = noise[0], noise[1], noise[2], noise[3], noise[9]
    n = q.shape[0]
    d = x.shape[0]
    b = d - 2 * n
    m = rows.shape[0]
    first = 0  # the first torque row
    while first < m and rows[first] < 2 * n:
        first += 1
    mt = m - first
    H = np.empty((mt, b))  # the torque rows' λ-block
    if mt:
        Y = np.empty((1, n, b))
        base_regressor(chain, q.reshape(1, n), qd.reshape(1, n), acc.reshape(1, n), Y)
        for a in range(mt):
            H[a] = Y[0, rows[first + a] - 2 * n]
    HP = np.empty((m, d))
    y = np.empty(m)
    for a in range(first):
        HP[a] = P[rows[a]]
        y[a] = z[a] - x[rows[a]]
    HP[first:] = H @ np.ascontiguousarray(P[2 * n :])
    lam = x[2 * n :]
    for a in range(mt):
        y[first + a] = tau[rows[first + a] - 2 * n] - np.dot(H[a], lam)
    scale = 1.0 + tempering * math.exp(-t_rel / warmup) if tempering else 1.0
    R = np.zeros((m, m))
    for a in range(first):
        R[a, a] = r0[rows[a]] * scale
    if mt:
        MR = (M * r0[2 * n :][None, :]) @ M.T if physical else np.zeros((n, n))
        for a in range(mt):
            i = rows[first + a] - 2 * n
            for c in range(mt):
                R[first + a, first + c] = MR[i, rows[first + c] - 2 * n]
            R[first + a, first + a] += tau_var[i]
    S = R.copy()
    for c in range(first):
        S[:, c] += HP[:, rows[c]]
    S[:, first:] += np.ascontiguousarray(HP[:, 2 * n :]) @ H.T
    for a in range(m):
        for c in range(a):
            s = 0.5 * (S[a, c] + S[c, a])
            S[a, c] = s
            S[c, a] = s
    S_inv = np.empty((m, m))
    if not scaled_inverse(S, S_inv):  # S not positive definite: P no longer a covariance
        return False
    Kt = S_inv @ HP
    x += Kt.T @ y
    joseph(P, Kt, HP, S)
    return True


@numba.njit(cache=True)
def ekf_sample(
    chain, x, P, qdd, A, M, noise_q, previous_qdd, flags, t, q, qd, acc, z, tau, t_k, restart, noise
):  # pragma: no cover  # noqa: E501
    """One sample: the previous sample's predict (or, at a restart, the states from this sample's q, qd
    with P0's blocks, λ and its covariance carried on), the update with the measurement z (m,), the recorded
    acceleration ``acc`` and torque τ (n,), then the linearisation at the posterior for the next predict.
    Returns :data:`OK`, :data:`SINGULAR` or :data:`NOT_POSITIVE_DEFINITE` (after an update other than the first, a
    diagonal entry of P not positive; a Cholesky factorisation, O(d³), is checked by :func:`ekf_run` at its
    eigenvalue checks only)."""
    P0, lam0 = noise[10], noise[11]
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
        if not forward_one(chain, x, tau, qdd, M, np.empty((n, n))):  # M at the prior, for R
            return SINGULAR
        flags[3] = positive_definite(M)
    elif flags[0]:
        _predict(x, P, qdd, A, noise_q, previous_qdd, flags, t[0], noise)
        previous_qdd[:] = qdd
        flags[1] = 1
    if not _update(chain, x, P, M, flags[3] == 1, q, qd, acc, z, tau, t_rel, noise):
        return NOT_POSITIVE_DEFINITE
    t[0] = t_rel
    flags[0] = 1
    flags[2] += 1
    if flags[2] > 1:
        for i in range(d):
            if not P[i, i] > 0.0:
                return NOT_POSITIVE_DEFINITE
    if not linearize_posterior(chain, x, tau, acc, qdd, A, M, noise_q, flags, noise):
        return SINGULAR
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
    chain, state, qs, qds, accs, z, tau, t, starts, noise, stride, check_every, hist, hist_std, at, eigen
):  # pragma: no cover  # noqa: E501
    """:func:`ekf_sample` over the stream: q, qd, qdd (N, n), z (N, m), τ (N, n), t (N,), ``starts`` (N,) True at
    each recording's first sample. Records λ and its std every ``stride`` samples and at the last (``hist``,
    ``hist_std`` (K, b), ``at`` (K,)), P's smallest eigenvalue every ``check_every`` and at the last (``eigen``).

    Returns:
        (:data:`OK` or the failure's code, the sample it happened at).
    """
    x, P, qdd, A, M, noise_q, previous_qdd, flags, tt = state
    N, n = qs.shape
    b = x.shape[0] - 2 * n
    r = 0
    e = 0
    for k in range(N):
        code = ekf_sample(
            chain, x, P, qdd, A, M, noise_q, previous_qdd, flags, tt, qs[k], qds[k], accs[k], z[k], tau[k], t[k],
            starts[k], noise,
        )  # fmt: skip
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
