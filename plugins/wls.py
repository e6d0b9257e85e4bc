"""Built-in estimator ``wls``: Gautier-weighted least squares (seed 001 Eq. 15–16, 25–27)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import (
    BaseParameterModel,
    Estimator,
    EstimatorOptions,
    per_joint_variance,
    weighted_least_squares,
)


class WLSEstimator(Estimator):
    """Weighted least squares with per-joint weights 1/Λ_j, Λ_j = ‖r_j‖²/(M − n_j) from the OLS
    residual r (seed 001 Eq. 26), then beta = (Wᵀ G⁻¹ W)⁻¹ Wᵀ G⁻¹ tau (Eq. 27)."""

    name = "wls"

    class Options(EstimatorOptions):
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")

    def _fit(self, problem) -> BaseParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        W, y, n = problem.base_regressor(), problem.torque_vector(), problem.n_dof
        ols = weighted_least_squares(W, y)
        variance = per_joint_variance(ols.residual, W, n)
        fit = weighted_least_squares(W, y, np.tile(1.0 / variance, problem.n_samples))
        return BaseParameterModel.from_problem(
            problem,
            fit.beta,
            fit.covariance,
            diagnostics={"condition_number": cond, "joint_noise_std": np.sqrt(variance).tolist()},
        )


@hookimpl
def register_estimators(register):
    register("wls", WLSEstimator)
