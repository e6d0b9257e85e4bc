"""The small compiled pieces of the sampling filters (numba, cached on disk): the solves of the λ-only points.

The sigma points of a filter that differ from the mean only in the parameters λ share its q and qd, so their
mass matrices and bias torques are the mean's plus ± a linear combination of one basis
(``EulerProcessModel.sigma_dynamics``); what remains per point is the solve M qdd = τ − h of a few joints.
:func:`lambda_points` does all of them in one call, the points side by side in the innermost loop so that the
elimination runs in SIMD lanes across them: by Cholesky factors where the mean's M is positive definite, else (an
estimate off the physical parameters) and for the points whose M is not, by LU with partial pivoting.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, error_model="numpy")
def solve_points(A, rhs, out, ok):  # pragma: no cover - compiled
    """out (n, S) = A_s⁻¹ rhs_s for S matrices A (n, n, S) and right-hand sides rhs (n, S), the point s last, by
    LU with partial pivoting (A and rhs are overwritten); ``ok`` (S,) False where a pivot is exactly zero or the
    result is not finite (A_s singular)."""
    n, S = rhs.shape
    f, big = np.empty(S), np.empty(S)
    piv = np.empty(S, dtype=np.int64)
    ok[:] = True
    for k in range(n):
        for s in range(S):  # each point's pivot row
            big[s], piv[s] = abs(A[k, k, s]), k
        for i in range(k + 1, n):
            for s in range(S):
                v = abs(A[i, k, s])
                if v > big[s]:
                    big[s], piv[s] = v, i
        for s in range(S):
            p = piv[s]
            if big[s] == 0.0:
                ok[s] = False
            elif p != k:
                for c in range(k, n):
                    A[k, c, s], A[p, c, s] = A[p, c, s], A[k, c, s]
                rhs[k, s], rhs[p, s] = rhs[p, s], rhs[k, s]
        for i in range(k + 1, n):
            for s in range(S):
                f[s] = A[i, k, s] / A[k, k, s]
            for c in range(k + 1, n):
                for s in range(S):
                    A[i, c, s] -= f[s] * A[k, c, s]
            for s in range(S):
                rhs[i, s] -= f[s] * rhs[k, s]
    for k in range(n - 1, -1, -1):
        for s in range(S):
            f[s] = rhs[k, s]
        for c in range(k + 1, n):
            for s in range(S):
                f[s] -= A[k, c, s] * out[c, s]
        for s in range(S):
            out[k, s] = f[s] / A[k, k, s]
    for s in range(S):
        for k in range(n):
            ok[s] = ok[s] and np.isfinite(out[k, s])


@numba.njit(cache=True, error_model="numpy")
def cholesky_points(A, rhs, out, ok):  # pragma: no cover - compiled
    """out (n, S) = A_s⁻¹ rhs_s for S symmetric matrices A (n, n, S) and right-hand sides rhs (n, S), the point s
    last, by Cholesky factors (A's lower triangle and diagonal are overwritten by them, its upper triangle kept;
    rhs is overwritten); ``ok`` (S,) False where A_s is not positive definite (its ``out`` meaningless)."""
    n, S = rhs.shape
    f = np.empty(S)
    ok[:] = True
    for j in range(n):
        for c in range(j):
            for s in range(S):
                A[j, j, s] -= A[j, c, s] * A[j, c, s]
        for s in range(S):
            if not A[j, j, s] > 0.0:
                ok[s] = False
            A[j, j, s] = np.sqrt(A[j, j, s])
        for i in range(j + 1, n):
            for c in range(j):
                for s in range(S):
                    A[i, j, s] -= A[i, c, s] * A[j, c, s]
            for s in range(S):
                A[i, j, s] /= A[j, j, s]
    for i in range(n):  # L y = rhs
        for c in range(i):
            for s in range(S):
                rhs[i, s] -= A[i, c, s] * rhs[c, s]
        for s in range(S):
            rhs[i, s] /= A[i, i, s]
    for i in range(n - 1, -1, -1):  # Lᵀ x = y
        for s in range(S):
            f[s] = rhs[i, s]
        for c in range(i + 1, n):
            for s in range(S):
                f[s] -= A[c, i, s] * out[c, s]
        for s in range(S):
            out[i, s] = f[s] / A[i, i, s]


@numba.njit(cache=True)
def solve_symmetric(A, rhs, out, ok):  # pragma: no cover - compiled
    """out (n, S) = A_s⁻¹ rhs_s for S symmetric matrices A (n, n, S) and right-hand sides rhs (n, S) (both
    overwritten): where the first is positive definite (a physical estimate's mean), by Cholesky factors
    (:func:`cholesky_points`) and LU (:func:`solve_points`) for those that are not; else by LU. ``ok`` (S,) False
    where A_s is singular or the result not finite."""
    n, S = rhs.shape
    if not positive_definite(A[:, :, 0]):
        solve_points(A, rhs, out, ok)
        return
    diagonal, given = np.empty((n, S)), rhs.copy()
    for i in range(n):
        diagonal[i] = A[i, i]
    cholesky_points(A, rhs, out, ok)
    for s in range(S):
        for k in range(n):
            ok[s] = ok[s] and np.isfinite(out[k, s])
    bad = np.flatnonzero(~ok)
    m = bad.size  # not positive definite (or not finite): LU, from the kept upper triangle and the diagonal
    Ab, rb, ob, okb = np.empty((n, n, m)), np.empty((n, m)), np.empty((n, m)), np.empty(m, dtype=np.bool_)
    for t in range(m):
        for i in range(n):
            rb[i, t] = given[i, bad[t]]
            Ab[i, i, t] = diagonal[i, bad[t]]
            for j in range(i + 1, n):
                Ab[i, j, t] = Ab[j, i, t] = A[i, j, bad[t]]
    solve_points(Ab, rb, ob, okb)
    for t in range(m):
        out[:, bad[t]] = ob[:, t]
        ok[bad[t]] = okb[t]


@numba.njit(cache=True)
def lambda_points(mean, change, tau, qdd, plus, minus, Minv):  # pragma: no cover - compiled
    """The forward dynamics of the mean and of the b pairs of points that move only λ, from the basis of the
    mean's q, qd.

    ``mean`` (T + n,) is the mean's [M's lower triangle (its rows in order, T = n(n + 1)/2), h], ``change``
    (T + n, b) the same for each column's step in λ (column k for the points k). Fills qdd (n,) = M⁻¹ (τ − h) with
    τ (n,), M⁻¹ (n, n) and plus, minus (b, n) the points' (M ± ΔMₖ)⁻¹ (τ − h ∓ Δhₖ) by :func:`solve_symmetric`
    (the mean's M⁻¹ as its solves of n unit right-hand sides). Returns False where one of them is singular.
    """
    n, b = tau.shape[0], change.shape[1]
    T = mean.shape[0] - n
    S = 2 * b + 1 + n  # the mean, the points plus, minus, the mean's unit right-hand sides
    A = np.empty((n, n, S))
    rhs = np.zeros((n, S))
    t = 0
    for i in range(n):
        for j in range(i + 1):
            m, row, col = mean[t], A[i, j], A[j, i]
            row[0] = m
            for k in range(b):
                row[1 + k] = m + change[t, k]
                row[1 + b + k] = m - change[t, k]
            row[2 * b + 1 :] = m
            col[:] = row
            t += 1
    for i in range(n):
        r0 = tau[i] - mean[T + i]
        rhs[i, 0] = r0
        for k in range(b):
            rhs[i, 1 + k] = r0 - change[T + i, k]
            rhs[i, 1 + b + k] = r0 + change[T + i, k]
        rhs[i, 2 * b + 1 + i] = 1.0
    out = np.empty((n, S))
    ok = np.empty(S, dtype=np.bool_)
    solve_symmetric(A, rhs, out, ok)
    qdd[:] = out[:, 0]
    plus[:] = out[:, 1 : b + 1].T
    minus[:] = out[:, b + 1 : 2 * b + 1].T
    Minv[:] = out[:, 2 * b + 1 :]
    return ok.all()


@numba.njit(cache=True)
def positive_definite(A):  # pragma: no cover - compiled
    """Whether the symmetric part of A (n, n) has a Cholesky factor."""
    return lower_cholesky(0.5 * (A + A.T))


@numba.njit(cache=True)
def still_physical(Minv, flags):  # pragma: no cover - compiled
    """Whether the mean is still a physical model, from its M⁻¹ (n, n): ``flags[2]`` (int64) ← 1 where M is
    positive definite; False where it is not and has been (the estimate left the physical parameters)."""
    if positive_definite(Minv):
        flags[2] = 1
        return True
    return not flags[2]


@numba.njit(cache=True)
def lower_cholesky(A, semidefinite=False):  # pragma: no cover - compiled
    """A's lower triangle (k, k) ← its Cholesky factor, in place (the upper triangle untouched); False where A is
    not positive definite (A then means nothing). ``semidefinite``: a pivot at or below zero (rounding's, for a
    positive semi-definite A) is taken as zero with its column, and the factor is always completed."""
    k = A.shape[0]
    for j in range(k):
        for c in range(j):
            A[j, j] -= A[j, c] * A[j, c]
        if not A[j, j] > 0.0:
            if not semidefinite:
                return False
            A[j:, j] = 0.0
            continue
        A[j, j] = np.sqrt(A[j, j])
        for i in range(j + 1, k):
            for c in range(j):
                A[i, j] -= A[i, c] * A[j, c]
            A[i, j] /= A[j, j]
    return True


@numba.njit(cache=True)
def measured_rows(states, qdd, rows):  # pragma: no cover - compiled
    """(2d + 1, m) the measured ``rows`` (m,) of [q, qd, qdd] at the points: their ``states`` (2d + 1, 2n) and
    ``qdd`` (2d + 1, n)."""
    n2, m = states.shape[1], rows.shape[0]
    V = np.empty((states.shape[0], m))
    for s in range(states.shape[0]):
        for r in range(m):
            V[s, r] = states[s, rows[r]] if rows[r] < n2 else qdd[s, rows[r] - n2]
    return V


@numba.njit(cache=True)
def sigma_states(x, L, gamma, n, states, moving):  # pragma: no cover - compiled
    """The sigma points x, x + γ·Lₖ, x − γ·Lₖ of x (d,) and the columns Lₖ of L (d, d), as the dynamics need them:
    fills ``states`` (2d + 1, 2n) all points' [q, qd] and ``moving`` (4n, d) the whole points of the first 2n
    columns (+ then −; they move q and qd)."""
    d, n2 = x.shape[0], 2 * n
    for i in range(n2):
        states[0, i] = x[i]
    for k in range(d):
        for i in range(n2):
            states[1 + k, i] = x[i] + gamma * L[i, k]
            states[1 + d + k, i] = x[i] - gamma * L[i, k]
    for k in range(n2):
        for i in range(d):
            moving[k, i] = x[i] + gamma * L[i, k]
            moving[n2 + k, i] = x[i] - gamma * L[i, k]


@numba.njit(cache=True)
def packed_basis(Y, lam, basis, mean):  # pragma: no cover - compiled
    """From the base regressor Y (n + 1, n, b) at zero and then unit accelerations of one q, qd: fills ``basis``
    (T + n, b) the rows of [M's lower triangle (its rows in order, T = n(n + 1)/2), h] per base parameter and
    ``mean`` (T + n,) = basis λ for λ (b,)."""
    n, b = Y.shape[1], Y.shape[2]
    t = 0
    for i in range(n):
        for j in range(i + 1):  # M[i, j]: the torque of joint i at a unit acceleration of joint j
            for c in range(b):
                basis[t, c] = Y[1 + j, i, c] - Y[0, i, c]
            t += 1
    for i in range(n):
        basis[t + i] = Y[0, i]
    for r in range(basis.shape[0]):
        s = 0.0
        for c in range(b):
            s += basis[r, c] * lam[c]
        mean[r] = s


@numba.njit(cache=True)
def sigma_roots(V, Wm, gamma, weight, mean, first, second, centre):  # pragma: no cover - compiled
    """The roots of a sigma-point transform (``SigmaRule.roots``) of the values V (2d + 1, k) at the points, with
    the mean weights Wm (2d + 1,), spread γ and second-order weight w: fills mean (k,) = Wm V, first (d, k) =
    (V₊ − V₋)/(2γ), second (d, k) = √w (V₊ + V₋ − 2·V₀) and
    centre (k,) = V₀ − mean."""
    d, k = first.shape
    mean[:] = 0.0
    for i in range(V.shape[0]):
        for c in range(k):
            mean[c] += Wm[i] * V[i, c]
    root = np.sqrt(weight)
    for i in range(d):
        for c in range(k):
            plus, minus = V[1 + i, c], V[1 + d + i, c]
            first[i, c] = (plus - minus) / (2.0 * gamma)
            second[i, c] = root * (plus + minus - 2.0 * V[0, c])
    for c in range(k):
        centre[c] = V[0, c] - mean[c]


@numba.njit(cache=True)
def sigma_moments(V, Wm, gamma, weight, centre_weight, mean, first, covariance):  # pragma: no cover - compiled
    """The transform of the values V (2d + 1, k) at the points (``SigmaRule``: mean weights Wm, spread γ,
    second-order weight w, centre weight c): fills mean (k,) = Wm V, first (d, k) = (V₊ − V₋)/(2γ) and covariance
    (k, k) = firstᵀ first + w·Σ (V₊ + V₋ − 2V₀)(…)ᵀ + c·(V₀ − mean)(…)ᵀ, from :func:`sigma_roots`."""
    d, k = first.shape
    second, centre = np.empty((d, k)), np.empty(k)
    sigma_roots(V, Wm, gamma, weight, mean, first, second, centre)
    covariance[:] = np.dot(first.T, first) + np.dot(second.T, second)
    if centre_weight:
        for a in range(k):
            for c in range(k):
                covariance[a, c] += centre_weight * centre[a] * centre[c]


@numba.njit(cache=True)
def sigma_predict(x, P, L, states, qdd, Wm, gamma, weight, centre_weight, dt, Q, q_lambda):  # pragma: no cover
    """The plain UKF's or CDKF's predict (``SigmaPointFilter.predict``), in place: the Euler step of the points
    of x (d,) and L (d, d) (P's lower Cholesky factor) with their [q, qd] ``states`` (2d + 1, 2n) and forward
    dynamics ``qdd`` (2d + 1, n) (``EulerProcessModel.sigma_dynamics``), its transform (:func:`sigma_moments` of
    g = [qd, qdd]) and the process noise by its blocks (``noise.ProcessNoise``): Q (2n, 2n, symmetric) of q and
    qd, q_lambda (b,) the diagonal of λ's. Only P's lower triangle is read and written: P + the noise + Δt·(L F on
    the columns of q and qd, and its transpose on their rows) + Δt²·the transform's covariance."""
    d, n = x.shape[0], qdd.shape[1]
    n2 = 2 * n
    V = np.empty((2 * d + 1, n2))
    V[:, :n] = states[:, n:]
    V[:, n:] = qdd
    g, first, covariance = np.empty(n2), np.empty((d, n2)), np.empty((n2, n2))
    sigma_moments(V, Wm, gamma, weight, centre_weight, g, first, covariance)
    cross = np.dot(L, first)  # (d, 2n): the first-order change of the columns of q and qd, over Δt
    for j in range(n2):
        for i in range(j, n2):
            P[i, j] += Q[j, i]
    for k in range(q_lambda.shape[0]):
        P[n2 + k, n2 + k] += q_lambda[k]
    for j in range(n2):
        for i in range(j, d):
            P[i, j] += dt * cross[i, j]
        for i in range(j, n2):
            P[i, j] += dt * cross[j, i] + dt * dt * covariance[i, j]
    for i in range(n2):
        x[i] += dt * g[i]


@numba.njit(cache=True)
def sigma_correct(x, P, L, states, qdd, rows, z, R, Wm, gamma, weight, centre_weight):  # pragma: no cover - compiled
    """The plain UKF's or CDKF's update (``SigmaPointFilter.correct``), in place: the measured ``rows`` (m,) of
    [q, qd, qdd] at the points of x (d,) and L (d, d) (``states``, ``qdd`` as :func:`sigma_predict`'s), their
    transform (:func:`sigma_moments`) plus R (m, m): P_zz = S_z S_zᵀ, K = P_xz P_zz⁻¹ = W S_z⁻¹ with
    W = L F S_z⁻ᵀ, x + W S_z⁻¹ (z − z_p) and P − W Wᵀ on P's lower triangle. False where P_zz is not positive
    definite (the filter diverged; nothing changed)."""
    d, m = x.shape[0], rows.shape[0]
    zp, first, Sz = np.empty(m), np.empty((d, m)), np.empty((m, m))
    sigma_moments(measured_rows(states, qdd, rows), Wm, gamma, weight, centre_weight, zp, first, Sz)
    Sz += R
    if not lower_cholesky(Sz):
        return False
    # Wᵀ = S_z⁻¹ P_xzᵀ (m, d), P_xz = L F: by rows, each step a whole row (no reduction along a row, which the
    # compiler cannot vectorise)
    Wt = np.dot(first.T, L.T)
    y = z - zp  # then S_z⁻¹ (z − z_p)
    for c in range(m):
        Wt[c] /= Sz[c, c]
        y[c] /= Sz[c, c]
        for r in range(c + 1, m):
            f = Sz[r, c]
            y[r] -= f * y[c]
            for i in range(d):
                Wt[r, i] -= f * Wt[c, i]
    for c in range(m):
        for i in range(d):
            x[i] += Wt[c, i] * y[c]
    WW = np.dot(Wt.T, Wt)
    for j in range(d):
        for i in range(j, d):
            P[i, j] -= WW[j, i]
    return True
