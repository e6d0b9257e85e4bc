"""Trajectory-level validation: forward-simulate a model under a recorded torque (SPEC §9,
seed 004 §5.1, seed 003 Fig. 12–14)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from robotid_sim.dynamics.forward import robust_forward, semi_implicit_euler

ForwardFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


def rollout(
    forward: ForwardFn, q0: np.ndarray, qd0: np.ndarray, tau: np.ndarray, dt: float, substeps: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Open-loop semi-implicit Euler integration of ``qdd = forward(q, qd, tau)``.

    Args:
        forward: batched forward dynamics (N, n) x3 -> (N, n); called with N = 1.
        q0, qd0: (n,) initial state.
        tau: (K, n) torque held constant over each interval ``dt`` (zero-order hold).
        dt: sample interval (s); each is split into ``substeps`` integration steps.

    Returns:
        (q, qd), each (K, n): the state at the start of each interval; NaN from the point where
        the integration diverged (an identified model can be physically inconsistent).
    """
    K, n = tau.shape
    q, qd = np.array(q0, float)[None], np.array(qd0, float)[None]
    out_q, out_qd = np.full((K, n), np.nan), np.full((K, n), np.nan)

    def checked(q, qd, tau):  # a singular identified mass matrix stops the rollout like a divergence
        return robust_forward(forward, q, qd, tau)

    for k in range(K):
        out_q[k], out_qd[k] = q[0], qd[0]
        q, qd, ok = semi_implicit_euler(checked, q, qd, tau[k][None], dt / substeps, substeps)
        if not ok[0]:
            return out_q, out_qd  # diverged: the rest stays NaN
    return out_q, out_qd


def trajectory_error(model_forward: ForwardFn, q_reference: np.ndarray, q0, qd0, tau, dt) -> np.ndarray:
    """RMS (n,) of the joint-position difference between a model's open-loop response to ``tau``
    and ``q_reference`` (K, n), the true model's :func:`rollout` under the same torque, so that
    only the model differs, not the integrator. A joint is inf where the model diverged."""
    q_model, _ = rollout(model_forward, q0, qd0, tau, dt)
    with np.errstate(over="ignore", invalid="ignore"):  # a finite but huge divergence overflows the square
        rms = np.sqrt(np.mean((q_model - q_reference) ** 2, axis=0))
    return np.where(np.isfinite(rms), rms, np.inf)  # inf: the model's simulation diverged
