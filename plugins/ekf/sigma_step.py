"""The UKF's and CDKF's per-sample step on a compiled chain, as one compiled call (numba, cached on disk).

:class:`~robotid_sim_plugins.ekf.sigma.SigmaPointFilter` runs :func:`sigma_step` for each sample of a chain
:class:`~robotid_sim_plugins.ekf.compiled.CompiledChain` accepts: the last sample's predict and this sample's
correction, with their noise from the schedule's tuple (:meth:`~robotid_sim_plugins.ekf.noise.NoiseSchedule.
kernel_noise`), what :meth:`~robotid_sim_plugins.ekf.stream.StreamFilter.update` sequences in Python for any
model (the same numbers to rounding: ``tests/test_sigma_step.py``). On hyper9 the Python sequence's glue and
noise cost about 0.2 ms of a 1 ms sample.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from robotid_sim_plugins.ekf.compiled import sigma_dynamics
from robotid_sim_plugins.ekf.sigma_kernel import sigma_correct, sigma_predict, still_physical

#: what :func:`sigma_step` returns: done; a singular mass matrix at a point, or the mean's stopped being
#: positive definite (the estimate left the physical parameters); a covariance that is not positive definite
OK, SINGULAR, NOT_POSITIVE_DEFINITE = 0, 1, 2


@numba.njit(cache=True)
def _lower_factor(P):  # pragma: no cover - compiled
    """The lower Cholesky factor of P's lower triangle, Fortran-ordered (the layout ``sigma_dynamics`` is
    compiled for); raises LinAlgError where P is not positive definite."""
    return np.asfortranarray(np.linalg.cholesky(P))


@numba.njit(cache=True)
def process_noise(noise, pending, pending_noise, previous_qdd, flags, d):  # pragma: no cover - compiled
    """(Q's (2n, 2n) block of the states, its λ block's diagonal (b,)) of the pending sample's Euler step, the
    noise of ``NoiseSchedule.process_noise`` from the schedule's tuple (arguments as :func:`sigma_step`'s)."""
    tempering, warmup, unit_state, floor, q_lam, annealing, dt = noise[2:9]
    n = pending.shape[1]
    n2 = 2 * n
    Q = np.zeros((n2, n2))
    if unit_state:
        for i in range(n2):
            Q[i, i] = 1.0
    else:
        for i in range(n):
            for j in range(n):
                Q[n + i, n + j] = dt**2 * pending_noise[i, j]
            Q[i, i] = (0.5 * dt**2 * pending[1, i]) ** 2 + floor[i]
            Q[n + i, n + i] += floor[n + i]
            if flags[1]:
                Q[n + i, n + i] += (0.5 * dt * (pending[1, i] - previous_qdd[i])) ** 2
    decay = 1.0 if math.isinf(annealing) else math.exp(-pending[2, 0] / annealing)
    return Q, np.full(d - n2, q_lam * decay)


@numba.njit(cache=True)
def measurement_noise(noise, sample, tau_noise, t_rel):  # pragma: no cover - compiled
    """(the measured rows z (m,) of the sample (3, n), their noise R (m, m)): ``NoiseSchedule.measurement_noise``
    with the torque noise R_τ (n, n) at time t_rel, from the schedule's tuple."""
    r0, tempering, warmup, rows = noise[0], noise[2], noise[3], noise[9]
    n, m = sample.shape[1], rows.shape[0]
    z, R = np.empty(m), np.zeros((m, m))
    for r in range(m):
        z[r] = sample[rows[r] // n, rows[r] % n]
        R[r, r] = r0[rows[r]]
    if rows[m - 1] >= 2 * n:  # the accelerations measured: their rows are the last n
        for i in range(n):
            for j in range(n):
                R[m - n + i, m - n + j] += tau_noise[i, j]
    if tempering:
        R *= 1.0 + tempering * math.exp(-t_rel / warmup)
    return z, R


@numba.njit(cache=True)
def sigma_step(
    chain, noise, Wm, gamma, second, centre, x, P, pending, pending_noise, previous_qdd, flags, sample, tau, t_rel
):  # pragma: no cover - compiled
    """One sample of the plain UKF or CDKF, in place: the predict of the pending sample (where ``flags[0]``), then
    the correction with this one.

    Args:
        chain: the compiled chain's arrays; noise: the schedule's tuple (module docstring).
        Wm, gamma, second, centre: the sigma rule (``SigmaRule``).
        x (d,), P (d, d, Fortran-ordered, its lower triangle): the state and covariance.
        pending: (3, n) the pending sample's torque, its mean's acceleration, and [its time, 0, …];
            pending_noise (n, n) its torque noise R_τ; previous_qdd (n,) the acceleration of the sample before it.
        flags: int64 [a predict is pending, ``previous_qdd`` holds one, the mean has been a physical model].
        sample: (3, n) this sample's q, qd, qdd; tau (n,) its torque; t_rel its time since the first sample.

    Returns :data:`OK`, :data:`SINGULAR` or :data:`NOT_POSITIVE_DEFINITE` (x and P then mean nothing); raises
    LinAlgError where P has no Cholesky factor.
    """
    dt = noise[8]
    d, n = x.shape[0], tau.shape[0]
    n2 = 2 * n
    states, qdd, Minv = np.empty((2 * d + 1, n2)), np.empty((2 * d + 1, n)), np.empty((n, n))
    if flags[0]:
        Q, q_lambda = process_noise(noise, pending, pending_noise, previous_qdd, flags, d)
        L = _lower_factor(P)
        if not sigma_dynamics(chain, x, L, gamma, pending[0], states, qdd, Minv):
            return SINGULAR
        sigma_predict(x, P, L, states, qdd, Wm, gamma, second, centre, dt, Q, q_lambda)
        previous_qdd[:] = pending[1]
        flags[1] = 1
    L = _lower_factor(P)
    if not sigma_dynamics(chain, x, L, gamma, tau, states, qdd, Minv):
        return SINGULAR
    physical, tau_noise, z, R = correction_noise(Minv, flags, noise, sample, t_rel)
    if not physical:
        return SINGULAR
    if not sigma_correct(x, P, L, states, qdd, noise[9], z, R, Wm, gamma, second, centre):
        return NOT_POSITIVE_DEFINITE
    return hold(x, pending, pending_noise, flags, tau, qdd[0], tau_noise, t_rel)


@numba.njit(cache=True)
def correction_noise(Minv, flags, noise, sample, t_rel):  # pragma: no cover - compiled
    """(whether the mean is still a physical model (``sigma_kernel.still_physical``), its torque noise R_τ (n, n), the
    measured rows z (m,) and their noise R (m, m) (:func:`measurement_noise`)) of a correction at the mean's M⁻¹."""
    physical = still_physical(Minv, flags)
    tau_noise = (Minv * noise[1]) @ Minv.T
    z, R = measurement_noise(noise, sample, tau_noise, t_rel)
    return physical, tau_noise, z, R


@numba.njit(cache=True)
def hold(x, pending, pending_noise, flags, tau, qdd, tau_noise, t_rel):  # pragma: no cover - compiled
    """The end of a step: :data:`NOT_POSITIVE_DEFINITE` where the mean x is not finite, else the sample (its
    torque τ, the mean's acceleration qdd (n,), its torque noise, its time) kept for the next predict, :data:`OK`."""
    if not np.all(np.isfinite(x)):
        return NOT_POSITIVE_DEFINITE
    pending[0] = tau
    pending[1] = qdd
    pending[2, 0] = t_rel
    pending_noise[:] = tau_noise
    flags[0] = 1
    return OK
