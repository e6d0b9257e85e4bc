"""Built-in estimator ``ols``: ordinary least squares on the base regressor (seed 001 Eq. 14, seed 004 §4.1)."""

from __future__ import annotations

from pydantic import Field

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)


class OLSEstimator(Estimator):
    """beta = (WᵀW)⁻¹ Wᵀ tau, from the problem's streamed normal equations (column-scaled Cholesky,
    refined against the exact residual when ill-conditioned; the stacked regressor is not formed).

    Uses the problem's rows in use (a velocity dead-band's rows left out); diagnostics
    ``condition_number`` and ``deadband_rows_removed``.
    """

    name = "ols"
    streams_regressor = True

    class Options(EstimatorOptions):
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")

    def _fit(self, problem) -> BaseParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        fit = problem.least_squares().solve()
        return BaseParameterModel.from_problem(
            problem, fit.beta, fit.covariance, diagnostics={"condition_number": cond, **problem.diagnostics()}
        )


@hookimpl
def register_estimators(register):
    register("ols", OLSEstimator)
