"""The SR-UKF's and SR-CDKF's per-sample step on a compiled chain: compiled calls around LAPACK's QR.

:class:`~robotid_sim_plugins.ekf.square_root.SquareRootSigmaFilter` runs, for each sample of a chain
:class:`~robotid_sim_plugins.ekf.compiled.CompiledChain` accepts (``one_call``): the points' dynamics
(:func:`~robotid_sim_plugins.ekf.compiled.sigma_dynamics`), :func:`sr_predict` (the pending sample's predict up to
the compound matrix whose QR is the predicted factor), :func:`~robotid_sim_plugins.ekf.square_root.noisy_triangle`
(LAPACK's QR of the compound and the triangular-pentagonal QR of the parameters' noise, which numba's LAPACK does not
offer without forming Q), the points' dynamics again and :func:`sr_correct` (the correction): what
:meth:`~robotid_sim_plugins.ekf.stream.StreamFilter.update` sequences in Python (the same numbers to rounding:
``tests/test_sigma_step.py``). The points' dynamics are called between the kernels rather than inside them, so that
their compiled code is not compiled again into each kernel (numba optimises a kernel with its callees: about 20 s
each). Statuses and the noise tuple as :func:`~robotid_sim_plugins.ekf.sigma_step.sigma_step`'s.
"""

from __future__ import annotations

import numba
import numpy as np
from robotid_sim_plugins.ekf.sigma_kernel import lower_cholesky, measured_rows, sigma_roots
from robotid_sim_plugins.ekf.sigma_step import (
    NOT_POSITIVE_DEFINITE,
    SINGULAR,
    correction_noise,
    hold,
    process_noise,
)
from robotid_sim_plugins.ekf.square_root import whitened_carlson


@numba.njit(cache=True)
def semidefinite_root(Q):  # pragma: no cover - compiled
    """(k, k) an upper-triangular Wᵀ with W Wᵀ = Q (k, k) positive semi-definite: the Cholesky factor's transpose,
    a pivot that rounding left at or below zero taken as zero with its column (``psd_sqrt``'s nearest positive
    semi-definite matrix, to rounding: such a pivot is of the order of the rounding of Q's entries)."""
    root = Q.copy()
    lower_cholesky(root, True)
    return np.tril(root).T.copy()


@numba.njit(cache=True)
def qr_rows(A):  # pragma: no cover - compiled
    """(k, k) the upper triangle R of A (N, k)'s QR (Householder's, as LAPACK's), its rows signed so that its
    diagonal is positive (``qr_factor``'s transpose); A is not changed."""
    N, k = A.shape
    C = A.copy()  # by rows: each reflector's products with the columns to its right as contiguous row updates
    dots, R = np.empty(k), np.zeros((k, k))
    for j in range(k):
        norm = 0.0
        for i in range(j, N):
            norm += C[i, j] * C[i, j]
        norm = np.sqrt(norm)
        beta = -norm if C[j, j] >= 0 else norm
        if norm > 0.0:
            C[j, j] -= beta  # v = x − β e₁, |v|² = 2 (|x|² − β x₀)
            scale = 1.0 / (norm * norm - beta * (C[j, j] + beta))
            dots[j + 1 :] = 0.0
            for i in range(j, N):
                v = C[i, j]
                for c in range(j + 1, k):
                    dots[c] += v * C[i, c]
            for c in range(j + 1, k):
                dots[c] *= scale
            for i in range(j, N):
                v = C[i, j]
                for c in range(j + 1, k):
                    C[i, c] -= dots[c] * v
        sign = -1.0 if beta < 0 else 1.0
        R[j, j] = sign * beta
        for c in range(j + 1, k):
            R[j, c] = sign * C[j, c]
    return R


@numba.njit(cache=True)
def sr_predict(
    noise, Wm, gamma, second, centre, x, S, states, qdd, pending, pending_noise, previous_qdd, flags, compound
):  # pragma: no cover - compiled
    """The pending sample's predict (``SquareRootSigmaFilter.predict``) up to its QR, in place, from its points'
    ``states`` (2d + 1, 2n) and ``qdd`` (2d + 1, n) (``sigma_dynamics`` of x (d,) and the lower factor S (d, d)
    before the predict, with the pending sample's torque): x moved by the Euler step, ``compound`` (d + 2n, d,
    Fortran-ordered) filled (Sᵀ with the first-order root of the points' step on the columns of q and qd, then the
    triangle of the rows with those columns only); returns the λ block's process noise (b,). The other arguments
    as :func:`~robotid_sim_plugins.ekf.sigma_step.sigma_step`'s."""
    dt = noise[8]
    d, n = x.shape[0], pending.shape[1]
    n2 = 2 * n
    Q, q_lambda = process_noise(noise, pending, pending_noise, previous_qdd, flags, d)
    V = np.empty((2 * d + 1, n2))  # g = [qd, qdd] at the points
    V[:, :n] = states[:, n:]
    V[:, n:] = qdd
    g, first, second_root, deviation = np.empty(n2), np.empty((d, n2)), np.empty((d, n2)), np.empty(n2)
    sigma_roots(V, Wm, gamma, second, g, first, second_root, deviation)
    # the rows with [q, qd] columns only (the second-order root, a root of Q's [q, qd] block, the centre term) to
    # one (2n, 2n) triangle by their QR, its rows signed as ``qr_factor``'s
    rows = np.empty((d + n2 + 1, n2))
    rows[:d] = dt * second_root
    rows[d : d + n2] = semidefinite_root(Q)
    rows[d + n2] = dt * np.sqrt(centre) * deviation
    compound[:d] = S.T
    compound[:d, :n2] += dt * first
    compound[d:, :n2] = qr_rows(rows)
    compound[d:, n2:] = 0.0
    for i in range(n2):
        x[i] += dt * g[i]
    previous_qdd[:] = pending[1]
    flags[1] = 1
    return q_lambda


@numba.njit(cache=True)
def sr_correct(
    noise, Wm, gamma, second, centre, x, S, states, qdd, Minv, pending, pending_noise, flags, sample, tau, t
):  # pragma: no cover - compiled
    """This sample's correction (``SquareRootSigmaFilter.correct``), in place, from the points' ``states``,
    ``qdd`` and the mean's ``Minv`` (n, n) (``sigma_dynamics`` of x and the predicted factor S (d, d,
    Fortran-ordered), with this sample's torque): the measurement's roots, R_z's Cholesky factor and Carlson's
    update of S; the sample kept for the next predict. Returns the status; t is the sample's time since the first
    (``sigma_step``'s ``t_rel``), the other arguments as :func:`~robotid_sim_plugins.ekf.sigma_step.sigma_step`'s."""
    d = x.shape[0]
    physical, tau_noise, z, R = correction_noise(Minv, flags, noise, sample, t)
    if not physical:
        return SINGULAR
    m = z.shape[0]
    zp, first, second_root, deviation = np.empty(m), np.empty((d, m)), np.empty((d, m)), np.empty(m)
    sigma_roots(measured_rows(states, qdd, noise[9]), Wm, gamma, second, zp, first, second_root, deviation)
    Rz = R + np.dot(second_root.T, second_root) + centre * np.outer(deviation, deviation)
    if not lower_cholesky(Rz):
        return NOT_POSITIVE_DEFINITE
    dx = np.empty(d)
    whitened_carlson(S, first, z - zp, Rz, dx)
    x += dx
    return hold(x, pending, pending_noise, flags, tau, qdd[0], tau_noise, t)
