"""Compiled forward sensitivities of the closed loop to the base parameters β (numba).

Imported lazily by :meth:`robotid_sim.identification.closed_loop_model.ClosedLoopSimulation.sensitivities`, so
that ``import robotid_sim`` never imports numba. One nominal copy runs the loop of
``closed_loop_kernels._loop_one`` (the same per-sample blocks of :mod:`robotid_sim.dynamics.crba_kernels` in
the same order: its signals equal the batched loop's bit for bit) and, alongside, the derivatives of its discrete
state with respect to β (θ = pinv(K)·β): S_q = ∂q/∂β, S_qd = ∂qd/∂β (n × b), and the controller's memory S_prev
(of the previous control step's q) and S_I (of the integral; zero while the integral is clipped). At control
step k

- ∂u = −kp·S_q − kd·(S_q − S_prev)/dt + ki·S_I (the velocity estimate's term from k ≥ 1), S_prev ← S_q;
- each physics step: ∂qdd = (M + diag(Ia))⁻¹ [∂u − A_q·S_q − A_qd·S_qd − Y_b(q, qd, qdd)], then
  S_qd ← S_qd + h·∂qdd, S_q ← S_q + h·S_qd (the state's semi-implicit Euler step), where τ(q, qd, qdd) =
  RNEA + Ia·qdd + friction(qd) = Y(q, qd, qdd)·θ, A_q = ∂τ/∂q, A_qd = ∂τ/∂qd at the step's (q, qd, qdd), and
  ∂τ/∂β = Y·pinv(K) = Y_b, the base regressor (Y = Y_b·K, K of full row rank): the independent columns of Y.

A_q and the rigid-body part of A_qd come from forward differences of ``_kinematics`` / ``_rnea`` (relative step
:data:`STEP`; the rotor term depends on neither q nor qd); with ``hold`` they are evaluated at a control step's
first physics step and held over its others (they vary with q and qd, slowly). The friction slope (each joint's
friction depends on its own velocity only: central differences of ``_friction``, one pair of calls) and Y_b
(``_regressor_block`` on the base columns, the friction columns from ``_friction`` of unit coefficients: the
laws are linear in them) are evaluated at every physics step: on the TX40 the tanh(qd / 0.01) Coulomb law moves
them within a control step (holding Y_b too was measured 5e-4 off, holding the slope as well 1e-2).

numba's disk cache keys a compiled function on its own source file only: after an edit of
``crba_kernels.py`` or ``closed_loop_kernels.py`` (the PID and physics step) clear ``__pycache__`` (or
``NUMBA_CACHE_DIR``) so this file's kernel picks it up.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from robotid_sim.dynamics import closed_loop_kernels  # the PID and the physics step of _loop_one
from robotid_sim.dynamics import crba_kernels as per_sample  # its per-sample blocks, as _loop_one uses them

#: relative step of the finite differences of A_q, A_qd (of max(|x|, 1))
STEP = 1e-7


@njit(cache=True)
def _solve_many(M, X):
    """Solve M Y = X in place (X <- Y, X (n, b)) by LU with partial pivoting; M is overwritten."""
    n = M.shape[0]
    b = X.shape[1]
    for k in range(n):
        piv = k
        big = abs(M[k, k])
        for i in range(k + 1, n):
            if abs(M[i, k]) > big:
                big = abs(M[i, k])
                piv = i
        if piv != k:
            for c in range(n):
                t = M[k, c]
                M[k, c] = M[piv, c]
                M[piv, c] = t
            for c in range(b):
                t = X[k, c]
                X[k, c] = X[piv, c]
                X[piv, c] = t
        inv = 1.0 / M[k, k]
        for i in range(k + 1, n):
            f = M[i, k] * inv
            if f != 0.0:
                for c in range(k + 1, n):
                    M[i, c] -= f * M[k, c]
                for c in range(b):
                    X[i, c] -= f * X[k, c]
    for k in range(n - 1, -1, -1):
        inv = 1.0 / M[k, k]
        for c in range(k + 1, n):
            f = M[k, c]
            for col in range(b):
                X[k, col] -= f * X[c, col]
        for col in range(b):
            X[k, col] *= inv


@njit(cache=True)
def _rigid_derivatives(chain, g, inert, q, qd, qdd, Aq, Aqd, work):
    """A_q, A_qd (n, n) of the rigid-body torque RNEA(q, qd, qdd), forward differences (module docstring)."""
    kind, parent, axis, R0, p0 = chain
    E, P, W, DW, A, tau0, tau = work
    n = kind.shape[0]
    per_sample._kinematics(kind, axis, R0, p0, q, E, P)
    per_sample._rnea(kind, parent, axis, inert, g, E, P, qd, qdd, tau0, W, DW, A)
    for i in range(n):
        step = STEP * max(abs(qd[i]), 1.0)
        keep = qd[i]
        qd[i] = keep + step
        per_sample._rnea(kind, parent, axis, inert, g, E, P, qd, qdd, tau, W, DW, A)
        qd[i] = keep
        for j in range(n):
            Aqd[j, i] = (tau[j] - tau0[j]) / step
    for i in range(n):
        step = STEP * max(abs(q[i]), 1.0)
        keep = q[i]
        q[i] = keep + step
        per_sample._kinematics(kind, axis, R0, p0, q, E, P)
        per_sample._rnea(kind, parent, axis, inert, g, E, P, qd, qdd, tau, W, DW, A)
        q[i] = keep
        for j in range(n):
            Aq[j, i] = (tau[j] - tau0[j]) / step


@njit(cache=True)
def _parameter_derivatives(chain, g, law, units, colmap, nrot, q, qd, qdd, slope, Yb, work):
    """The friction slope (n,) ∂friction_j/∂qd_j (central differences) and the base regressor Y_b (1, n, b)."""
    kind, parent, axis, R0, p0 = chain
    fkind, fvals, alpha, vs, smoothing = law
    qs, fric, plus, minus, Y_work = work
    n = kind.shape[0]
    for j in range(n):
        qs[0, j] = qd[j] + STEP * max(abs(qd[j]), 1.0)
        qs[1, j] = qd[j] - STEP * max(abs(qd[j]), 1.0)
    per_sample._friction(fkind, fvals, alpha, vs, smoothing, qs[0], plus)
    per_sample._friction(fkind, fvals, alpha, vs, smoothing, qs[1], minus)
    for j in range(n):
        slope[j] = (plus[j] - minus[j]) / (qs[0, j] - qs[1, j])
    for c in range(units.shape[0]):  # the friction columns: the laws are linear in their coefficients
        per_sample._friction(fkind, units[c], alpha, vs, smoothing, qd, plus)
        for j in range(n):
            fric[0, j, c] = plus[j]
    for j in range(n):
        qs[0, j] = q[j]
        qs[1, j] = qd[j]
        qs[2, j] = qdd[j]
    per_sample._regressor_block(
        kind, parent, axis, R0, p0, g, qs[0:1], qs[1:2], qs[2:3], fric, colmap, nrot, Yb, 0, 1, Y_work
    )


@njit(cache=True)
def _control(k, q_ref, qd_ref, gains, dt, q, previous, integral, u, S):
    """The PID's torque ``u`` at control step k and its sensitivity S[4] = ∂u (module docstring); ``previous``,
    ``integral`` and their sensitivities S[2], S[3] move on. S = (S_q, S_qd, S_prev, S_I, ∂u, ·) (6, n, b)."""
    kp, kd, ki, anti_windup = gains
    Sq, Sprev, SI, Su = S[0], S[2], S[3], S[4]
    for j in range(q.shape[0]):  # the sensitivities first: they need the integral before this step's
        free = abs(integral[j] + (q_ref[k, j] - q[j]) * dt) < anti_windup  # the clipped integral does not move
        for c in range(Sq.shape[1]):
            SI[j, c] = SI[j, c] - Sq[j, c] * dt if free else 0.0
            dw = 0.0 if k == 0 else (Sq[j, c] - Sprev[j, c]) / dt
            Su[j, c] = -kp[j] * Sq[j, c] - kd[j] * dw + ki[j] * SI[j, c]
            Sprev[j, c] = Sq[j, c]
    closed_loop_kernels.pid_torque(k, q_ref, qd_ref, gains, dt, q, previous, integral, u)


@njit(cache=True)
def _propagate(h_step, LU, Aq, Aqd, slope, Yb, S):
    """One physics step of S_q, S_qd (S[0], S[1]) under ∂u (S[4]): ∂qdd = LU⁻¹ [∂u − A_q S_q − A_qd S_qd − Y_b]
    in S[5] (LU the step's M + diag(Ia), overwritten; A_qd's friction part ``slope`` (n,) on its diagonal)."""
    Sq, Sqd, Su, X = S[0], S[1], S[4], S[5]
    n, b = Sq.shape
    for j in range(n):
        for c in range(b):
            X[j, c] = Su[j, c] - Yb[0, j, c] - slope[j] * Sqd[j, c]
        for i in range(n):
            aq = Aq[j, i]
            aqd = Aqd[j, i]
            for c in range(b):
                X[j, c] -= aq * Sq[i, c] + aqd * Sqd[i, c]
    _solve_many(LU, X)
    for j in range(n):
        for c in range(b):
            Sqd[j, c] += h_step * X[j, c]
            Sq[j, c] += h_step * Sqd[j, c]


@njit(cache=True)
def loop_sensitivity(
    chain, g, inert, rotor, law, units, colmap, nrot, q_ref, qd_ref, gains, timing, hold, steps, out, dq, du
):
    """The closed loop of one copy and its sensitivities ∂q/∂β, ∂u/∂β up to the last recorded step.

    Args:
        chain, g, inert (n, 10), rotor (n,), law ``(fkind, fvals (n, k), alpha, vs, smoothing)``, q_ref, qd_ref,
            gains, timing, steps: as one copy of ``closed_loop_kernels.closed_loop_copies``.
        units: (k, n, k) unit friction coefficients (``units[c][:, c] = 1``), for the friction columns.
        colmap: (n, 10 + nrot + k) int64, the base regressor's column of each joint-block parameter (-1: not a
            base column); nrot: 1 with rotor inertia, else 0.
        hold: evaluate A_q and the rigid-body part of A_qd once per control step (True) or at every physics
            step (False); the friction slope and Y_b are evaluated at every physics step (module docstring).
        out: (4, N, n) written: q, qd, qdd, u at the recorded steps (as ``closed_loop_copies``).
        dq, du: (N, n, b) written: ∂q/∂β and ∂u/∂β at the recorded steps.

    Returns:
        False (the unrecorded samples NaN) where M is singular or the state stops being finite.
    """
    dt, substeps, h_step = timing
    n = chain[0].shape[0]
    N = steps.shape[0]
    b = dq.shape[2]
    work = closed_loop_kernels.physics_work(n)
    M, LU, x = np.empty((n, n)), np.empty((n, n)), np.empty(n)
    rigid_work = (np.empty((n, 3, 3)), np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 3)),
                  np.empty(n), np.empty(n))  # fmt: skip
    fric = np.zeros((1, n, units.shape[0]))
    base_work = (np.empty((3, n)), fric, np.empty(n), np.empty(n), per_sample._regressor_work(n))
    Aq, Aqd, slope, Yb = np.empty((n, n)), np.empty((n, n)), np.empty(n), np.empty((1, n, b))
    S = np.zeros((6, n, b))  # S_q, S_qd, S_prev, S_I, ∂u, and ∂qdd's work array
    q, qd, previous, integral, u = q_ref[0].copy(), qd_ref[0].copy(), q_ref[0].copy(), np.zeros(n), np.empty(n)
    r = 0
    for k in range(steps[N - 1] + 1):
        _control(k, q_ref, qd_ref, gains, dt, q, previous, integral, u, S)
        for sub in range(substeps):
            if not closed_loop_kernels.physics_acceleration(chain, g, inert, rotor, law, q, qd, u, work, M, LU, x):
                out[:, r:] = np.nan
                dq[r:] = np.nan
                du[r:] = np.nan
                return False
            while sub == 0 and r < N and steps[r] == k:
                for j in range(n):
                    out[0, r, j] = q[j]
                    out[1, r, j] = qd[j]
                    out[2, r, j] = x[j]
                    out[3, r, j] = u[j]
                    for c in range(b):
                        dq[r, j, c] = S[0, j, c]
                        du[r, j, c] = S[4, j, c]
                r += 1
            if sub == 0 or not hold:
                _rigid_derivatives(chain, g, inert, q, qd, x, Aq, Aqd, rigid_work)
            _parameter_derivatives(chain, g, law, units, colmap, nrot, q, qd, x, slope, Yb, base_work)
            _propagate(h_step, M, Aq, Aqd, slope, Yb, S)
            for j in range(n):
                qd[j] = qd[j] + h_step * x[j]
            for j in range(n):
                q[j] = q[j] + h_step * qd[j]
    return True
