"""Built-in estimator ``irls``: iteratively re-weighted least squares with outlier rejection
(seed 001 Eq. 25–29, the inner loop of its two-loop method)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from robotid_sim.errors import IdentificationError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import (
    BaseParameterModel,
    Estimator,
    EstimatorOptions,
    History,
    per_joint_variance,
    weighted_least_squares,
)


class IRLSEstimator(Estimator):
    """Gautier-weighted least squares in which samples whose residual exceeds a threshold get
    zero weight (seed 001 Eq. 28–29); re-solve until the set of rejected samples stops changing."""

    name = "irls"

    class Options(EstimatorOptions):
        threshold: float | None = Field(
            None,
            gt=0,
            description="absolute residual threshold (N·m; the seed uses 8). None: k_sigma robust "
            "standard deviations per joint, which adapts to each joint's noise level",
        )
        k_sigma: float = Field(3.0, gt=0, description="multiple of the per-joint robust residual std (1.4826·MAD)")
        max_iterations: int = Field(50, ge=1, description="inner-loop limit")
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")

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

    def _fit(self, problem) -> BaseParameterModel:
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
        return BaseParameterModel.from_problem(
            problem,
            fit.beta,
            fit.covariance,
            history=History(np.arange(len(history), dtype=float), np.array(history), problem.base_parameter_names),
            diagnostics={
                "condition_number": cond,
                "iterations": iterations,
                "outliers_rejected": int(np.count_nonzero(~keep)),
                "outlier_fraction": float(np.mean(~keep)),
            },
        )


@hookimpl
def register_estimators(register):
    register("irls", IRLSEstimator)
