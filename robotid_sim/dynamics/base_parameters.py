"""Base (minimal) parameters: QR with column pivoting on a stacked random regressor (SPEC §4).

Gautier & Khalil (1990); seed 001 §2.2 (91 of 126 for the 9-DoF arm); seed 003 §3.2 and Table 3
for the readable expressions.

The count r is the numerical rank of the stacked, column-normalised regressor, found by QR with
column pivoting. Which columns are kept is then decided in the canonical parameter order (link
1 first, within a link XX, XY, XZ, YY, YZ, ZZ, MX, MY, MZ, M, then Ia and friction): a column is
kept when it is independent of the columns kept before it. Parameters of distal links are thus
regrouped into proximal ones (``ZZ1 + 0.1296*M2 + ...``), and the choice does not depend on the
random samples, only on the structure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from robotid_sim.errors import ModelError

if TYPE_CHECKING:
    import sympy

#: ``regressor(q, qd, qdd, columns=None) -> (N, n, p or len(columns))``
RegressorFn = Callable[..., np.ndarray]

#: relative tolerance on |R_ii| of the normalised QR to call a column dependent
RANK_TOLERANCE = 1e-9
#: coefficients of K below this (relative to 1) are structural zeros
COEFFICIENT_ZERO = 1e-9


@dataclass(frozen=True)
class BaseParameters:
    """Result of the base-parameter reduction.

    Attributes:
        names: names of the base parameters (the name of the standard parameter each is
            built on, as in seed 003 Table 3, e.g. ``ZZ1`` stands for ``ZZ1 + 0.1296*M2``).
        independent: indices (b,) of the kept standard-parameter columns.
        K: (b, p) map, beta = K @ theta; ``Y @ theta == Y[..., independent] @ (K @ theta)``.
        standard_names: names of the p standard parameters.
        theta: true standard parameters (p,) of the model, for :meth:`true_values`; None for
            the reduction of a :class:`~robotid_sim.robot.structure.RobotStructure`, which knows
            no parameter values.
    """

    names: list[str]
    independent: np.ndarray
    K: np.ndarray
    standard_names: list[str]
    theta: np.ndarray | None
    _regressor: RegressorFn = field(repr=False)

    @property
    def count(self) -> int:
        return len(self.independent)

    @property
    def expressions(self) -> list[sympy.Expr]:
        """Each base parameter as a sympy linear combination of standard parameters.

        Coefficients carry 10 significant digits; :meth:`table` prints them in their shortest
        form (``ZZ1 + 0.1296*M2``).
        """
        import sympy  # here, not at module level: it takes ~0.3 s and only these expressions use it

        symbols = sympy.symbols(self.standard_names)
        out = []
        for row in self.K:
            expr = sympy.Integer(0)
            for c, s in zip(row, symbols, strict=True):
                if c == 0:
                    continue
                if abs(c - 1.0) < 1e-12:
                    expr += s
                else:
                    expr += sympy.Float(f"{c:.10g}") * s
            out.append(expr)
        return out

    def true_values(self) -> np.ndarray:
        """Base parameters (b,) of the true model: K @ theta.

        Raises:
            ModelError: this reduction was made from a robot structure, which has no values.
        """
        if self.theta is None:
            raise ModelError("these base parameters come from a robot structure, which holds no true values")
        return self.K @ self.theta

    def regressor(self, q, qd, qdd) -> np.ndarray:
        """Base regressor (N, n, b): the independent columns of the full regressor."""
        return self._regressor(q, qd, qdd, columns=self.independent)

    def with_regressor(self, regressor: RegressorFn) -> BaseParameters:
        """The same reduction over another full regressor with the same columns (e.g. other friction constants)."""
        return replace(self, _regressor=regressor)

    def table(self) -> list[tuple[str, str, float]]:
        """Rows (name, expression, true value) for reports; the value is NaN without a truth."""
        import sympy

        values = self.true_values() if self.theta is not None else np.full(self.count, np.nan)
        return [
            (name, sympy.sstr(expr, full_prec=False), float(v))
            for name, expr, v in zip(self.names, self.expressions, values, strict=True)
        ]


def compute_base_parameters(
    regressor: RegressorFn,
    sampler: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray, np.ndarray]],
    names: list[str],
    theta: np.ndarray,
    n_samples: int = 200,
    seed: int = 0,
) -> BaseParameters:
    """Reduce the standard parameters to base parameters.

    Args:
        regressor: full regressor function (q, qd, qdd) -> (N, n, p).
        sampler: ``sampler(rng, N) -> (q, qd, qdd)`` random states inside the joint limits.
        names: the p standard parameter names.
        theta: true standard parameters (p,), or None when unknown.
        n_samples: random samples stacked (each gives n rows).
        seed: seed of the random samples; the result does not depend on it.
    """
    import scipy.linalg  # SciPy loads only when this runs (start-up of workers)

    rng = np.random.default_rng(seed)
    W = regressor(*sampler(rng, n_samples))
    W = W.reshape(-1, W.shape[-1])
    p = W.shape[1]
    scale = np.linalg.norm(W, axis=0)
    nonzero = scale > 1e-12 * max(scale.max(), 1.0)
    Wn = np.zeros_like(W)
    Wn[:, nonzero] = W[:, nonzero] / scale[nonzero]

    # rank from QR with column pivoting (the count)
    R_piv, pivots = scipy.linalg.qr(Wn, mode="r", pivoting=True)
    diag = np.abs(np.diag(R_piv))
    rank = int(np.sum(diag > RANK_TOLERANCE * diag[0]))

    # canonical choice: keep a column if independent of the kept ones (QR in canonical order)
    R = scipy.linalg.qr(Wn, mode="r")[0]
    d = np.abs(np.diag(R))
    independent = np.flatnonzero((d > RANK_TOLERANCE * diag[0]) & nonzero)
    if len(independent) != rank:
        # fall back to the pivoted choice if the canonical order is numerically ambiguous
        independent = np.sort(pivots[:rank])
    dependent = np.setdiff1d(np.arange(p), independent)

    # W_dep = W_ind @ B  ->  beta = theta_ind + B @ theta_dep
    B = np.linalg.lstsq(W[:, independent], W[:, dependent], rcond=None)[0]
    B[np.abs(B) < COEFFICIENT_ZERO * max(1.0, np.abs(B).max())] = 0.0
    K = np.zeros((rank, p))
    K[np.arange(rank), independent] = 1.0
    K[:, dependent] = B
    return BaseParameters(
        names=[names[i] for i in independent],
        independent=independent,
        K=K,
        standard_names=list(names),
        theta=None if theta is None else np.asarray(theta, float),
        _regressor=regressor,
    )
