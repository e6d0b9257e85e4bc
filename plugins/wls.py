"""Built-in estimator ``wls``: Gautier-weighted least squares (seed 001 Eq. 15–16, 25–27)."""

from __future__ import annotations

import numpy as np

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import Estimator, IdentifiedModel, per_joint_variance, weighted_least_squares


class WLSEstimator(Estimator):
    """Weighted least squares with per-joint weights 1/Λ_j, Λ_j = ‖r_j‖²/(M − n_j) from the OLS
    residual r (seed 001 Eq. 26), then beta = (Wᵀ G⁻¹ W)⁻¹ Wᵀ G⁻¹ tau (Eq. 27).

    Args:
        check_excitation: refuse rank-deficient data with an error naming the parameters.
    """

    name = "wls"

    def __init__(self, check_excitation: bool = True):
        self.check_excitation = check_excitation

    def _fit(self, problem) -> IdentifiedModel:
        cond = problem.check_excitation() if self.check_excitation else None
        W, y, n = problem.base_regressor(), problem.torque_vector(), problem.n_dof
        ols = weighted_least_squares(W, y)
        variance = per_joint_variance(ols.residual, W, n)
        fit = weighted_least_squares(W, y, np.tile(1.0 / variance, problem.n_samples))
        return IdentifiedModel.from_base_parameters(
            problem, fit.beta, estimator=self.name, covariance=fit.covariance, options=self.get_params(),
            info={"condition_number": cond, "joint_noise_std": np.sqrt(variance).tolist()},
        )


@hookimpl
def register_estimators(register):
    register("wls", WLSEstimator)
