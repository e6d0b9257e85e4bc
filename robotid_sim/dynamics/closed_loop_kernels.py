"""Compiled closed-loop simulation of a robot model under a joint PID, many parameter copies at once (numba).

Imported lazily by :mod:`robotid_sim.identification.closed_loop_model` (through :func:`kernels`), so that
``import robotid_sim`` never imports numba. The loop is the one BIRDy generates its data with (issue 30's
interfaces), run noise-free: at each control step k = 0 … K−1 (dt = 1 / control rate), from the reference's
first state (q_ref[0], qd_ref[0]),

- velocity estimate w_k = (q_k − q_{k−1}) / dt for k ≥ 1, w_0 = qd_ref[0];
- e_k = q_ref[k] − q_k, ed_k = qd_ref[k] − w_k, I_k = clip(I_{k−1} + e_k·dt, ±anti_windup), I_{−1} = 0;
- u_k = kp·e_k + kd·ed_k + ki·I_k (diagonal gains, no feedforward);
- ``substeps`` physics steps of h = dt / substeps under u_k, each qdd solving
  (M(q) + diag(Ia)) qdd = u_k − h(q, qd) − friction(qd), then qd ← qd + h·qdd, q ← q + h·qd (semi-implicit
  Euler, PyBullet's step; :class:`robotid_sim.sim.closed_loop_data.PIDLoop`'s ``physics_substeps``: one step
  of 0.2 ms is unstable on the TX40's wrist friction);
- recorded at a control step: q_k, qd_k, the acceleration of its first physics step and u_k.

The per-sample building blocks are those of :mod:`robotid_sim.dynamics.crba_kernels` (``_kinematics``,
``_crba``, ``_rnea``, ``_friction``, ``_solve``, as its ``_step_one`` uses them), so a copy with a robot's
true parameters follows the same arithmetic as the env stepping and PyBullet's trajectory to rounding.

Every copy b has its own standard parameters (``inert[b]`` (n, 10), ``rotor[b]`` (n,), ``fvals[b]`` (n, k));
the copies are spread over numba's threads (``prange``), each with its work arrays allocated once. A copy whose
mass matrix is singular or whose state stops being finite is flagged (``ok[b] = False``) and its samples from
there on are NaN; nothing is raised.

numba's disk cache keys a compiled function on the source file it lives in only: after an edit of
``crba_kernels.py``, the cached kernels of this file still hold the old building blocks until this file
changes too (or ``__pycache__``/``NUMBA_CACHE_DIR`` is cleared).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from robotid_sim.dynamics import crba_kernels as per_sample  # its per-sample blocks, as its _step_one uses them


@njit(cache=True)
def pid_torque(k, q_ref, qd_ref, gains, dt, q, previous, integral, u):
    """The PID's torque ``u`` (n,) at control step k from the position q (module docstring): w from ``previous``
    (the last control step's q; qd_ref[0] at k = 0), the clipped ``integral``; ``previous`` and ``integral`` move
    on. ``gains`` = (kp, kd, ki (n,), anti_windup)."""
    kp, kd, ki, anti_windup = gains
    for j in range(q.shape[0]):
        e = q_ref[k, j] - q[j]
        w = qd_ref[0, j] if k == 0 else (q[j] - previous[j]) / dt
        integral[j] = min(max(integral[j] + e * dt, -anti_windup), anti_windup)
        u[j] = kp[j] * e + kd[j] * (qd_ref[k, j] - w) + ki[j] * integral[j]
        previous[j] = q[j]


@njit(cache=True)
def physics_work(n):
    """The work arrays (E, P, C, W, DW, A, h, zero) of :func:`physics_acceleration` for n joints."""
    return (np.empty((n, 3, 3)), np.empty((n, 3)), np.empty((n, 10)), np.empty((n, 3)), np.empty((n, 3)),
            np.empty((n, 3)), np.empty(n), np.zeros(n))  # fmt: skip


@njit(cache=True)
def physics_acceleration(chain, g, inert, rotor, law, q, qd, u, work, M, LU, x):
    """x (n,) ← the acceleration of one physics step under the torque u (n,): (M(q) + diag(Ia)) qdd =
    u − h(q, qd) − friction(qd) (module docstring), M (n, n) left as M(q) + diag(Ia), LU its factorised copy.
    ``work`` = (E, P, C, W, DW, A, h, zero) of the per-sample blocks. Returns False where M is singular or qdd
    not finite."""
    kind, parent, axis, R0, p0 = chain
    fkind, fvals, alpha, vs, smoothing = law
    E, P, C, W, DW, A, h, zero = work
    per_sample._kinematics(kind, axis, R0, p0, q, E, P)
    per_sample._crba(kind, parent, axis, inert, rotor, E, P, M, C)
    per_sample._rnea(kind, parent, axis, inert, g, E, P, qd, zero, h, W, DW, A)
    per_sample._friction(fkind, fvals, alpha, vs, smoothing, qd, x)
    for j in range(x.shape[0]):
        x[j] = (u[j] - x[j]) - h[j]
    LU[:] = M
    fine = per_sample._solve(LU, x)
    for j in range(x.shape[0]):
        fine = fine and np.isfinite(x[j])
    return fine


@njit(cache=True)
def _loop_one(chain, g, inert, rotor, law, q_ref, qd_ref, gains, timing, steps, q_out, qd_out, qdd_out, u_out):
    """The closed loop of one copy up to the last recorded step; records ``steps`` (N,) ascending.

    Returns False (the unrecorded samples NaN) where M is singular or the state stops being finite.
    """
    dt, substeps, h_step = timing
    n = chain[0].shape[0]
    N = steps.shape[0]
    work = physics_work(n)
    M, LU, x = np.empty((n, n)), np.empty((n, n)), np.empty(n)
    q = q_ref[0].copy()
    qd = qd_ref[0].copy()
    previous = q_ref[0].copy()
    integral = np.zeros(n)
    u = np.empty(n)
    r = 0
    for k in range(steps[N - 1] + 1):
        pid_torque(k, q_ref, qd_ref, gains, dt, q, previous, integral, u)
        for sub in range(substeps):
            if not physics_acceleration(chain, g, inert, rotor, law, q, qd, u, work, M, LU, x):
                for s in range(r, N):
                    for j in range(n):
                        q_out[s, j] = qd_out[s, j] = qdd_out[s, j] = u_out[s, j] = np.nan
                return False
            while sub == 0 and r < N and steps[r] == k:
                for j in range(n):
                    q_out[r, j] = q[j]
                    qd_out[r, j] = qd[j]
                    qdd_out[r, j] = x[j]
                    u_out[r, j] = u[j]
                r += 1
            for j in range(n):
                qd[j] = qd[j] + h_step * x[j]
            for j in range(n):
                q[j] = q[j] + h_step * qd[j]
    return True


@njit(cache=True, parallel=True)
def closed_loop_copies(
    chain, g, inert, rotor, law, q_ref, qd_ref, gains, timing, steps, q_out, qd_out, qdd_out, u_out, ok
):
    """The closed loop (module docstring) of B copies, each with its own parameters, threads over the copies.

    Args:
        chain: ``(kind, parent, axis, R0, p0)`` (:attr:`robotid_sim.dynamics.crba.ChainArrays.kernel_arrays`).
        g: (3,) gravity in the base frame.
        inert: (B, n, 10) standard inertial parameters of each copy; rotor: (B, n) rotor inertia (zeros for none).
        law: ``(fkind, fvals (B, n, k), alpha (n,), vs (n,), smoothing)``, the friction law of
            ``crba_kernels._friction`` with each copy's coefficients.
        q_ref, qd_ref: (K, n) the reference at every control step k·dt, K > ``steps[-1]``.
        gains: ``(kp, kd, ki (n,), anti_windup)``.
        timing: ``(dt, substeps, h)``: the control step dt (s), and the ``substeps`` physics steps of h (s) per
            control step under the same torque (h = 1 / (control rate · substeps)).
        steps: (N,) int64 ascending control steps to record.
        q_out, qd_out, qdd_out, u_out: (B, N, n), written: the state, acceleration (of the control step's first
            physics step) and control torque at each recorded step.
        ok: (B,) bool, written: False for a copy that diverged (singular M or a non-finite state).
    """
    fkind, fvals, alpha, vs, smoothing = law
    for b in prange(inert.shape[0]):
        own = (fkind, fvals[b], alpha, vs, smoothing)
        ok[b] = _loop_one(
            chain,
            g,
            inert[b],
            rotor[b],
            own,
            q_ref,
            qd_ref,
            gains,
            timing,
            steps,
            q_out[b],
            qd_out[b],
            qdd_out[b],
            u_out[b],
        )
