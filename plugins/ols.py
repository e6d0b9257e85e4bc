"""Built-in estimator ``ols``: ordinary least squares on the base regressor (seed 001 Eq. 14, seed 004 §4.1)."""

from __future__ import annotations

from pydantic import Field

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator
from robotid_sim.identification.essential import EssentialOptions, essential_refit

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)


class OLSEstimator(Estimator):
    """beta = (WᵀW)⁻¹ Wᵀ tau, from the problem's streamed normal equations (column-scaled Cholesky,
    refined against the exact residual when ill-conditioned; the stacked regressor is not formed).

    Uses the problem's rows in use (a velocity dead-band's rows left out); diagnostics
    ``condition_number`` and ``deadband_rows_removed``. With ``essential``, the refit on the essential
    parameters (:mod:`robotid_sim.identification.essential`), its ``essential_*`` diagnostics.
    """

    name = "ols"
    streams_regressor = True

    class Options(EssentialOptions):
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")

    def _fit(self, problem) -> BaseParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        fit = problem.least_squares().solve()
        beta, covariance, essential = essential_refit(self, problem, fit)
        return BaseParameterModel.from_problem(
            problem, beta, covariance, diagnostics={"condition_number": cond, **essential, **problem.diagnostics()}
        )


@hookimpl
def register_estimators(register):
    register("ols", OLSEstimator)
