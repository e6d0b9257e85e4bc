"""Forward dynamics from any inverse model linear in qdd (SPEC §4, seed 003 §3.3).

M(q) column j = tau(q, 0, e_j) - tau(q, 0, 0); h(q, qd) = tau(q, qd, 0); qdd = M^-1 (tau - h).
Works for base-parameter models, SINDy models and semiparametric models alike: all it needs
is a batched ``inverse(q, qd, qdd) -> (N, n)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from robotid_sim.errors import DataError

InverseFn = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


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
