"""The least-squares fit of a :class:`~robotid_sim.identification.lagrangian_basis.LagrangianBasis` (seed 002)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robotid_sim.identification.lagrangian_basis import LagrangianBasis


@dataclass(frozen=True, eq=False)
class LeastSquaresResult:
    """θ of :func:`fit_basis` and the facts of the fit."""

    theta: np.ndarray
    rank: int
    condition_number: float
    residual_rms: np.ndarray


def fit_basis(
    basis: LagrangianBasis, q, qd, qdd, tau, *, weights=None, friction_qd=None, rcond: float = 1e-10
) -> LeastSquaresResult:
    """Least squares θ = argmin Σ w ‖Φ(q, qd, qdd) θ − τ‖² over every joint's equation (columns scaled to unit RMS).

    ``weights``: (N, n) 0/1 row weights (a velocity dead-band leaves rows out), default all 1.

    Raises:
        IdentificationError: fewer equations than parameters, or a rank-deficient feature matrix.
    """
    from robotid_sim.errors import IdentificationError

    Phi = basis.regressor(q, qd, qdd, friction_qd=friction_qd)
    N, n, P = Phi.shape
    if N * n < P:
        raise IdentificationError(
            f"auto_features: {N} samples give {N * n} equations for {P} coefficients; record at least "
            f"{int(np.ceil(P / n))} samples (many more for a useful fit)"
        )
    W = Phi.reshape(N * n, P)
    target = np.asarray(tau, float).reshape(-1)
    if weights is not None:
        keep = np.asarray(weights).reshape(-1) > 0
        W, target = W[keep], target[keep]
    scale = np.sqrt(np.mean(W**2, axis=0))
    scale[scale == 0] = 1.0
    Ws = W / scale
    theta_s, _, rank, sv = np.linalg.lstsq(Ws, target, rcond=rcond)
    theta = theta_s / scale
    residual = tau - (Phi.reshape(N * n, P) @ theta).reshape(N, n)
    cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")
    if rank < P:
        raise IdentificationError(
            f"auto_features: the data excite only {rank} of the {P} coefficients (the features are linearly "
            "dependent on this trajectory); record a richer excitation that moves every joint in both directions, "
            "or use fewer features (features='planar', a lower order, friction='viscous')"
        )
    return LeastSquaresResult(theta, int(rank), cond, np.sqrt(np.mean(residual**2, axis=0)))
