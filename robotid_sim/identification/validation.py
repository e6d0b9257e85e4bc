"""Trajectory-level validation: forward-simulate a model under a recorded torque (SPEC §9,
seed 004 §5.1, seed 003 Fig. 12–14)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robotid_sim.dynamics.forward import robust_forward, semi_implicit_euler
from robotid_sim.identification import metrics as M

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


@dataclass(frozen=True)
class TrajectoryError:
    """How far a model's open-loop joint trajectory is from the reference (seed 004 Table 5, Eq. 45–47).

    Each is (n,), per joint, with the reference as the observed signal o and the model's trajectory as
    the predicted one p (:mod:`robotid_sim.identification.metrics`). A joint where the model's simulation
    diverged (NaN, or positions so large that their squared error overflows) has RMS and RSD inf and
    agreement index 0, the limit of Willmott's index as the prediction runs away. (RSD is inf as well on a
    joint whose reference stays at 0 while the model moves: :func:`~robotid_sim.identification.metrics.rsd`.)

    Attributes:
        rms: residual RMS sqrt(Σ(o − p)² / K), in the joint's unit (rad or m).
        rsd: residual standard deviation sqrt(Σ(o − p)² / Σo²), dimensionless.
        agreement_index: Willmott's agreement index in [0, 1], 1 a perfect match.
    """

    rms: np.ndarray
    rsd: np.ndarray
    agreement_index: np.ndarray

    @classmethod
    def between(cls, q_model, q_reference) -> TrajectoryError:
        """The error of a model's open-loop motion ``q_model`` (K, n; NaN after a divergence, as
        :func:`rollout` leaves it) against ``q_reference`` (K, n)."""
        q_model, q_reference = np.asarray(q_model, float), np.asarray(q_reference, float)
        n = q_reference.shape[1]
        rsd, agreement = np.full(n, np.inf), np.zeros(n)
        with np.errstate(over="ignore", invalid="ignore"):  # a finite but huge divergence overflows the square
            rms = np.sqrt(np.mean((q_model - q_reference) ** 2, axis=0))
            ok = np.isfinite(rms)
            if ok.any():
                rsd[ok] = M.rsd(q_reference[:, ok], q_model[:, ok])
                agreement[ok] = M.agreement_index(q_reference[:, ok], q_model[:, ok])
        diverged = ~ok | np.isnan(agreement)  # NaN: the agreement index's sums overflowed
        rms[diverged], rsd[diverged], agreement[diverged] = np.inf, np.inf, 0.0
        return cls(rms, rsd, agreement)


def trajectory_error(model_forward: ForwardFn, q_reference: np.ndarray, q0, qd0, tau, dt) -> TrajectoryError:
    """RMS, RSD and agreement index per joint of the difference between a model's open-loop response to
    ``tau`` and ``q_reference`` (K, n), the true model's :func:`rollout` under the same torque (so that only
    the model differs, not the integrator) or a measured trajectory; one rollout serves all three."""
    q_model, _ = rollout(model_forward, q0, qd0, tau, dt)
    return TrajectoryError.between(q_model, q_reference)
