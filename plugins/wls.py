"""Built-in estimator ``wls``: Gautier-weighted least squares (seed 001 Eq. 15–16, 25–27)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, per_joint_variance
from robotid_sim.identification.essential import EssentialOptions, essential_refit
from robotid_sim.identification.least_squares import per_group_joint_variance

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)


class WLSEstimator(Estimator):
    """Weighted least squares with per-joint weights 1/Λ_j, Λ_j = ‖r_j‖²/(M − n_j) from the OLS
    residual r (seed 001 Eq. 26), then beta = (Wᵀ G⁻¹ W)⁻¹ Wᵀ G⁻¹ tau (Eq. 27).

    Uses the problem's rows in use (a velocity dead-band's rows left out of the fit and of Λ_j).
    With ``per_experiment``, Λ is estimated per experiment and joint (the recordings stacked in
    the data, :attr:`IdentificationProblem.experiments`), so a noisier recording weighs less.

    Diagnostics: ``condition_number``, ``joint_noise_std`` (√Λ_j over all the data),
    ``deadband_rows_removed``, and with ``per_experiment`` ``experiment_noise_std``: a list of
    ``{"name", "joint_noise_std"}``, one per experiment. With ``essential``, the weighted refit on the essential
    parameters (:mod:`robotid_sim.identification.essential`), its ``essential_*`` diagnostics.
    """

    name = "wls"
    streams_regressor = True

    class Options(EssentialOptions):
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")
        per_experiment: bool = Field(
            False,
            description="estimate the noise variance per experiment and joint, so each stacked recording is "
            "weighted by its own noise (one experiment without metadata['experiments'])",
        )

    def _fit(self, problem) -> BaseParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        n, joint = problem.n_dof, problem.row_joint()
        solver = problem.least_squares()
        ols = solver.solve()
        variance = per_joint_variance(ols.residual, None, n, row_joint=joint, n_params=solver.n_params(per_joint=True))
        diagnostics = {"condition_number": cond, "joint_noise_std": np.sqrt(variance).tolist()}
        if self.per_experiment:
            experiments = problem.experiments
            group = problem.row_experiment()
            cell_variance = per_group_joint_variance(
                ols.residual,
                None,
                n,
                row_joint=joint,
                row_group=group,
                n_groups=len(experiments),
                n_params=solver.n_params().reshape(len(experiments), n),
            )
            weights = 1.0 / cell_variance
            diagnostics["experiment_noise_std"] = [
                {"name": name, "joint_noise_std": np.sqrt(v).tolist()}
                for (name, _), v in zip(experiments, cell_variance, strict=True)
            ]
        else:
            weights = 1.0 / variance
        fit = solver.solve(weights)
        beta, covariance, essential = essential_refit(self, problem, fit, weights)
        return BaseParameterModel.from_problem(
            problem, beta, covariance, diagnostics={**diagnostics, **essential, **problem.diagnostics()}
        )


@hookimpl
def register_estimators(register):
    register("wls", WLSEstimator)
