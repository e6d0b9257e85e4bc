"""Built-in estimator ``ols``: ordinary least squares on the base regressor (seed 001 Eq. 14, seed 004 §4.1)."""

from __future__ import annotations

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import Estimator, IdentifiedModel, weighted_least_squares


class OLSEstimator(Estimator):
    """beta = (WᵀW)⁻¹ Wᵀ tau, solved by QR on the column-scaled stacked base regressor.

    Args:
        check_excitation: refuse rank-deficient data with an error naming the parameters.
    """

    name = "ols"

    def __init__(self, check_excitation: bool = True):
        self.check_excitation = check_excitation

    def _fit(self, problem) -> IdentifiedModel:
        cond = problem.check_excitation() if self.check_excitation else None
        fit = weighted_least_squares(problem.base_regressor(), problem.torque_vector())
        return IdentifiedModel.from_base_parameters(
            problem, fit.beta, estimator=self.name, covariance=fit.covariance, options=self.get_params(),
            info={"condition_number": cond},
        )


@hookimpl
def register_estimators(register):
    register("ols", OLSEstimator)
