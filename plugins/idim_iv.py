"""Built-in estimators ``idim_iv`` and ``pc_idim_iv``: instrumental variables from the simulated closed loop
(Janot, Vandanjon & Gautier, "A generic instrumental variable approach for industrial robot identification",
IEEE TCST 22(1), 2014), and their physically consistent variant."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions, StandardParameterModel
from robotid_sim.identification.closed_loop_model import (
    ClosedLoopSimulation,
    consistent_solve,
    instrumented,
    scaled_solve,
    starting_point,
)
from robotid_sim.identification.lmi import (
    ConsistentLeastSquares,
    PhysicalLeastSquares,
    PhysicalOptions,
    physical_options,
    standard_consistency,
)

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)


class IterationOptions(EstimatorOptions):
    """The iteration of the closed-loop fixed-point estimators (IDIM-IV, DIDIM and their PC variants)."""

    tol: float = Field(
        1e-8, gt=0, lt=1, description="stop once an update changes the base parameters less than this (relative)"
    )
    max_iterations: int = Field(
        30, ge=1, description="iterations at most (one closed-loop simulation each, one more per halved step)"
    )


class IDIMIVEstimator(Estimator):
    """IDIM-IV: least squares on the measured regressor W with the instruments V = W(q_s, qd_s, qdd_s), the
    base regressor of the closed loop simulated with the current estimate (the same controller and reference
    as the data), β = (Vᵀ W)⁻¹ Vᵀ τ, iterated until an update changes β by less than ``tol`` (Janot et al. 2014).

    The simulated states carry no measurement noise, so V is uncorrelated with the noise of W (noisy q and its
    differentiated qd, qdd) and the estimate is consistent where ordinary least squares is biased. Starts from
    the problem's ``initial`` estimate, else from OLS. Needs closed-loop data (``metadata['closed_loop']``).

    A step whose simulation diverges is halved (:meth:`ClosedLoopSimulation.fixed_point`).

    Covariance: σ² (Vᵀ W)⁻¹ Vᵀ V (Wᵀ V)⁻¹ with the instruments at β and σ² = ‖τ − W β‖² / (m − b).
    Diagnostics: ``iterations``, ``model_evaluations`` (closed-loop simulations), ``converged``, ``diverged`` (no
    shortened step avoided a diverging simulation: the last estimate is returned), ``relative_change``.
    """

    name = "idim_iv"
    needs_closed_loop = True
    Options = IterationOptions

    def _fit(self, problem) -> BaseParameterModel:
        simulation = ClosedLoopSimulation(problem, f"estimator '{self.name}'")
        W, y = problem.base_regressor(), problem.torque_vector()

        def update(result) -> np.ndarray:
            return scaled_solve(*instrumented(simulation.base_regressor(result), W, y))

        beta, last, info = simulation.fixed_point(starting_point(problem), update, self.tol, self.max_iterations)
        return BaseParameterModel.from_problem(
            problem,
            beta,
            _iv_covariance(simulation.base_regressor(last), W, y, beta),
            diagnostics={**info, "model_evaluations": simulation.evaluations, **problem.diagnostics()},
        )


class PCIDIMIVEstimator(Estimator):
    """PC-IDIM-IV: the iteration of ``idim_iv`` with each instrumental step replaced by the physically consistent
    one: min over the full standard parameters θ of ‖Qᵀ (τ − W K θ)‖² (V = Q R, the two-stage least squares on
    the instruments' span), every link's pseudo-inertia ⪰ ``margin``, rotor inertias and friction coefficients
    ≥ 0 (:mod:`robotid_sim.identification.lmi`; the options of ``lmi_wls``). Each simulation runs with the
    consistent θ itself.

    Starts from the problem's ``initial`` estimate, else from the constrained least squares on the measured
    data. Returns a :class:`StandardParameterModel`; diagnostics as ``idim_iv``'s plus ``consistent`` and
    ``link_min_eigenvalue``.
    """

    name = "pc_idim_iv"
    needs_closed_loop = True

    class Options(PhysicalOptions, IterationOptions):
        pass

    def _fit(self, problem) -> StandardParameterModel:
        W, y = problem.base_regressor(), problem.torque_vector()

        def step(simulation, program, result) -> np.ndarray:
            return consistent_solve(program, *instrumented(simulation.base_regressor(result), W, y))

        return consistent_iteration(self, problem, step)


def consistent_iteration(estimator, problem, step, input_error: bool = False) -> StandardParameterModel:
    """The loop of the physically consistent variants (``pc_idim_iv``, ``pc_didim``) over the standard parameters.

    ``step(simulation, program, result)`` is one constrained solve (``program``, the
    :class:`~robotid_sim.identification.lmi.ConsistentLeastSquares` of the estimator's options) from the closed
    loop simulated at the current estimate (``result``). Starts from the problem's ``initial`` estimate, else
    from the constrained least squares on the measured data; with ``input_error`` a step is kept only where it
    does not raise ‖τ − u_s‖ (DIDIM's cost). Diagnostics: the iteration's, ``model_evaluations``,
    ``consistent``, ``link_min_eigenvalue`` and ``solver_status``.
    """
    simulation = ClosedLoopSimulation(problem, f"estimator '{estimator.name}'")
    program = ConsistentLeastSquares(problem.structure, problem.base.K, physical_options(estimator))
    start = starting_point(problem, lambda: PhysicalLeastSquares(problem, program.options, program).solve()[0])
    theta, _, info = simulation.fixed_point(
        start,
        lambda result: step(simulation, program, result),
        estimator.tol,
        estimator.max_iterations,
        standard=True,
        cost=simulation.input_error if input_error else None,
    )
    check = standard_consistency(problem.structure, theta)
    return StandardParameterModel.from_problem(
        problem,
        theta,
        diagnostics={
            **info,
            "model_evaluations": simulation.evaluations,
            "consistent": check.consistent,
            "link_min_eigenvalue": check.link_min_eigenvalue.tolist(),
            "solver_status": program.status,
            **problem.diagnostics(),
        },
    )


def _iv_covariance(V: np.ndarray, W: np.ndarray, y: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """σ² (Vᵀ W)⁻¹ Vᵀ V (Wᵀ V)⁻¹ (the IV estimate's covariance), σ² from the residual."""
    m, b = W.shape
    sigma2 = float(np.sum((y - W @ beta) ** 2)) / max(m - b, 1)
    inverse = np.linalg.inv(V.T @ W)
    covariance = sigma2 * inverse @ (V.T @ V) @ inverse.T
    return 0.5 * (covariance + covariance.T)


@hookimpl
def register_estimators(register):
    register("idim_iv", IDIMIVEstimator)
    register("pc_idim_iv", PCIDIMIVEstimator)
