"""Forward dynamics from any inverse model linear in qdd (SPEC §4, seed 003 §3.3).

M(q) column j = tau(q, 0, e_j) - tau(q, 0, 0); h(q, qd) = tau(q, qd, 0); qdd = M^-1 (tau - h).
Works for base-parameter models, SINDy models and semiparametric models alike: all it needs
is a batched ``inverse(q, qd, qdd) -> (N, n)``.

:func:`semi_implicit_euler` integrates a forward model the way PyBullet's multibody world steps
(velocity first, then position with the new velocity), batched over copies, and
:func:`robust_forward` tells the copies whose dynamics fail from the rest: the identified-model
envs and the open-loop validation (:func:`robotid_sim.identification.validation.rollout`) step
with them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from robotid_sim.errors import DataError

InverseFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
ForwardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def mass_matrix_from_inverse(inverse: InverseFn, q: np.ndarray) -> np.ndarray:
    """M(q) (N, n, n) from n + 1 batched calls folded into one of N·(n + 1) samples."""
    N, n = q.shape
    q_rep = np.tile(q, (n + 1, 1))
    qdd = np.concatenate([np.zeros((N, n)), np.repeat(np.eye(n), N, axis=0)])
    tau = inverse(q_rep, np.zeros_like(q_rep), qdd).reshape(n + 1, N, n)
    return (tau[1:] - tau[0]).transpose(1, 2, 0)


def forward_dynamics_from_inverse(inverse: InverseFn, q: np.ndarray, qd: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """qdd (N, n) solving inverse(q, qd, qdd) = tau for a model linear in qdd."""
    M = mass_matrix_from_inverse(inverse, q)
    return solve_forward(M, inverse(q, qd, np.zeros_like(q)), tau)


def solve_forward(M: np.ndarray, h: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """qdd (N, n) = M⁻¹ (tau − h) for mass matrices M (N, n, n) and bias h (N, n).

    Raises:
        DataError: M is singular at some state (physically inconsistent parameters).
    """
    try:
        return np.linalg.solve(M, (tau - h)[..., None])[..., 0]
    except np.linalg.LinAlgError as exc:
        raise DataError(
            "the model's mass matrix is singular at some state: the identified inertial "
            "parameters are not physically consistent there (try lmi_wls)"
        ) from exc


def robust_forward(forward: ForwardFn, q: np.ndarray, qd: np.ndarray, tau: np.ndarray):
    """``(qdd, ok)``: ``forward(q, qd, tau)`` (B, n), and ok (B,) False for the copies where it fails.

    One batched call; only if it raises (a singular mass matrix of an inconsistent identified
    model) are the copies called one by one to find which fail (their qdd is 0).
    """
    try:
        return forward(q, qd, tau), np.ones(q.shape[0], bool)
    except (DataError, np.linalg.LinAlgError):
        qdd, ok = np.zeros_like(q), np.ones(q.shape[0], bool)
        for i in range(q.shape[0]):
            try:
                qdd[i] = forward(q[i : i + 1], qd[i : i + 1], tau[i : i + 1])[0]
            except (DataError, np.linalg.LinAlgError):
                ok[i] = False
        return qdd, ok


def semi_implicit_euler(
    forward: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    q: np.ndarray,
    qd: np.ndarray,
    tau: np.ndarray,
    h: float,
    substeps: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``substeps`` steps of qd ← qd + h·qdd(q, qd, tau), q ← q + h·qd, for B copies at once.

    Args:
        forward: ``(q, qd, tau) -> (qdd, ok)``, batched (B, n) (see :func:`robust_forward`).
        q, qd: (B, n) state at the start; not modified.
        tau: (B, n) motor torque, held over the substeps.
        h: physics step (s).
        substeps: number of steps.

    Returns:
        ``(q, qd, ok)``: the new state (B, n) and ok (B,) False for copies whose dynamics failed
        or whose state stopped being finite; those keep their starting state (the env terminates them).
    """
    q0, qd0 = q, qd
    q, qd = q.copy(), qd.copy()
    ok = np.ones(q.shape[0], bool)
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is detected, not warned about
        for _ in range(substeps):
            qdd, fine = forward(q, qd, tau)
            qd = qd + h * qdd
            q = q + h * qd
            fine &= np.isfinite(q).all(axis=-1) & np.isfinite(qd).all(axis=-1)
            if not fine.all():
                ok &= fine
                q[~ok], qd[~ok] = q0[~ok], qd0[~ok]  # frozen: keep feeding finite states
    return q, qd, ok
