"""Built-in estimator ``irls``: iteratively re-weighted least squares with outlier rejection
(seed 001 Eq. 25–29, the inner loop of its two-loop method)."""

from __future__ import annotations

import numpy as np

from robotid_sim.errors import ConfigError, IdentificationError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import Estimator, IdentifiedModel, per_joint_variance, weighted_least_squares


class IRLSEstimator(Estimator):
    """Gautier-weighted least squares in which samples whose residual exceeds a threshold get
    zero weight (seed 001 Eq. 28–29); re-solve until the set of rejected samples stops changing.

    Args:
        threshold: absolute residual threshold (N·m); the seed uses 8 N·m. ``None`` (default)
            uses ``k_sigma`` robust standard deviations per joint instead, which adapts to each
            joint's noise level.
        k_sigma: multiple of the per-joint robust residual std (1.4826·MAD) used when
            ``threshold`` is None.
        max_iterations: inner-loop limit.
        check_excitation: refuse rank-deficient data with an error naming the parameters.
    """

    name = "irls"

    def __init__(self, threshold: float | None = None, k_sigma: float = 3.0, max_iterations: int = 50,
                 check_excitation: bool = True):
        if threshold is not None and threshold <= 0:
            raise ConfigError(f"irls: threshold must be > 0 (N·m), got {threshold}")
        if k_sigma <= 0:
            raise ConfigError(f"irls: k_sigma must be > 0, got {k_sigma}")
        self.threshold = threshold
        self.k_sigma = k_sigma
        self.max_iterations = max_iterations
        self.check_excitation = check_excitation

    def _limits(self, residual: np.ndarray, keep: np.ndarray, n: int) -> np.ndarray:
        if self.threshold is not None:
            return np.full(n, float(self.threshold))
        r = residual.reshape(-1, n)
        k = keep.reshape(-1, n)
        limits = np.empty(n)
        for j in range(n):
            rj = r[k[:, j], j]
            limits[j] = self.k_sigma * 1.4826 * np.median(np.abs(rj - np.median(rj)))
        return np.maximum(limits, 1e-12)

    def _fit(self, problem) -> IdentifiedModel:
        cond = problem.check_excitation() if self.check_excitation else None
        W, y, n, N = problem.base_regressor(), problem.torque_vector(), problem.n_dof, problem.n_samples
        fit = weighted_least_squares(W, y)  # Eq. 25: residual of the first LS
        keep = np.ones_like(y, dtype=bool)
        history = [fit.beta]
        iterations = 0
        while iterations < self.max_iterations:
            iterations += 1
            variance = per_joint_variance(fit.residual, W, n, keep)
            limits = self._limits(fit.residual, keep, n)
            new_keep = (np.abs(fit.residual).reshape(-1, n) < limits).reshape(-1)  # Eq. 28
            if new_keep.sum() <= W.shape[1]:
                raise IdentificationError(
                    "irls rejected almost every sample as an outlier; raise 'threshold' or 'k_sigma'"
                )
            weights = np.tile(1.0 / variance, N) * new_keep  # Eq. 29, with Gautier weights
            fit = weighted_least_squares(W, y, weights)
            history.append(fit.beta)
            changed = int(np.count_nonzero(new_keep != keep))
            keep = new_keep
            if changed == 0:
                break
        return IdentifiedModel.from_base_parameters(
            problem, fit.beta, estimator=self.name, covariance=fit.covariance, options=self.get_params(),
            history=np.array(history), history_t=np.arange(len(history), dtype=float),
            info={"condition_number": cond, "iterations": iterations,
                  "outliers_rejected": int(np.count_nonzero(~keep)),
                  "outlier_fraction": float(np.mean(~keep))},
        )


@hookimpl
def register_estimators(register):
    register("irls", IRLSEstimator)
