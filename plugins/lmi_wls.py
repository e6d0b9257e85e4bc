"""Built-in estimator ``lmi_wls``: weighted least squares subject to physical consistency
(seed 001 Eq. 17–23, 30; the pseudo-inertia LMI of Wensing et al. 2017)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import Estimator, StandardParameterModel, per_joint_variance
from robotid_sim.identification.lmi import PhysicalLeastSquares, PhysicalOptions, physical_options, standard_consistency

ROBOTID_SIM_PLUGIN_API = "2.0"
#: the normal equations' smallest eigenvalue over their largest below which the data count as rank-deficient
RANK_TOLERANCE = 1e-12  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)


class LMIWLSEstimator(Estimator):
    """Gautier-weighted least squares over the full standard parameters, every link physically consistent.

    First the constrained least squares with unit weights; its residual gives the per-joint variances
    Λ_j = ‖r_j‖²/(M − n_j) (seed 001 Eq. 26); then the constrained solve with weights 1/Λ_j. The
    constraints (:mod:`robotid_sim.identification.lmi`): per link pseudo-inertia ⪰ ``margin``·E, rotor
    inertia and friction coefficients ≥ 0, optional mass ranges and COM boxes, an optional regulariser
    toward a prior (CAD) parameter set. It returns a full standard parameter set (a
    :class:`StandardParameterModel`), so its forward dynamics have a positive-definite mass matrix on
    any state. It also works on data too poor for ``ols`` (rank-deficient): the constraints choose
    among the parameter sets the data cannot tell apart.

    Covariance: the (weighted) least-squares covariance of the base parameters β = K θ at the constrained
    solution, the constraints left out, lifted to the standard parameters by K⁺ (Σ_θ = K⁺ Σ_β K⁺ᵀ, rank b):
    draws from it (``IdentifiedArm-v0``'s ``parameter_draws="covariance"``) move only the combinations the
    data identified, and leave the rest at the constrained solution. None on rank-deficient data.

    Diagnostics: ``condition_number`` (None without ``check_excitation``), ``joint_noise_std``,
    ``consistent``, ``link_min_eigenvalue`` (per link), ``solver_status`` (cvxpy's), ``deadband_rows_removed``.
    """

    name = "lmi_wls"
    streams_regressor = True

    class Options(PhysicalOptions):
        weighted: bool = Field(True, description="Gautier weights 1/Λ_j (False: ordinary least squares under the LMIs)")
        check_excitation: bool = Field(
            False, description="refuse rank-deficient data like 'ols' (default: the constraints regularise it)"
        )

    def _fit(self, problem) -> StandardParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        solver = PhysicalLeastSquares(problem, physical_options(self))
        theta, fit = solver.solve()
        weights = None
        diagnostics: dict = {"condition_number": cond}
        if self.weighted:
            n, joint = problem.n_dof, problem.row_joint()
            variance = per_joint_variance(
                fit.residual, None, n, row_joint=joint, n_params=solver.ls.n_params(per_joint=True)
            )
            variance = np.maximum(variance, 1e-300)
            weights = 1.0 / variance
            theta, fit = solver.solve(weights)
            diagnostics["joint_noise_std"] = np.sqrt(variance).tolist()
        covariance = _standard_covariance(problem, solver, weights, fit)
        check = standard_consistency(problem.structure, theta)
        return StandardParameterModel.from_problem(
            problem,
            theta,
            covariance=covariance,
            diagnostics={
                **diagnostics,
                "consistent": check.consistent,
                "link_min_eigenvalue": check.link_min_eigenvalue.tolist(),
                "solver_status": solver.program.status,
                **problem.diagnostics(),
            },
        )


def _standard_covariance(problem, solver, weights, fit) -> np.ndarray | None:
    """Σ_θ = K⁺ Σ_β K⁺ᵀ (class docstring), or None when the data do not determine the base parameters (a
    rank-deficient regressor, which the constraints regularise but no covariance describes)."""
    unit = np.ones(solver.ls.n_cells)
    G, _ = solver.ls.normal_equations(unit if weights is None else weights)  # equilibrated: b × b
    eigenvalues = np.linalg.eigvalsh(G)
    if not eigenvalues[0] > RANK_TOLERANCE * eigenvalues[-1]:
        return None
    lift = np.linalg.pinv(problem.base.K)
    covariance = lift @ solver.ls.covariance(unit if weights is None else weights, None, fit) @ lift.T
    return 0.5 * (covariance + covariance.T)


@hookimpl
def register_estimators(register):
    register("lmi_wls", LMIWLSEstimator)
