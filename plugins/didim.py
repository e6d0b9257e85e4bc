"""Built-in estimators ``didim`` and ``pc_didim``: the direct and inverse dynamic identification model
(Gautier, Janot & Vandanjon, "A new closed-loop output error method for parameter identification of robot
dynamics", IEEE TCST 21(2), 2013), and its physically consistent variant."""

from __future__ import annotations

import numpy as np
from robotid_sim_plugins.idim_iv import IterationOptions, consistent_iteration

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, StandardParameterModel
from robotid_sim.identification.closed_loop_model import (
    ClosedLoopSimulation,
    consistent_solve,
    scaled_solve,
    starting_point,
)
from robotid_sim.identification.lmi import (
    PhysicalOptions,
)

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)


class DIDIMEstimator(Estimator):
    """DIDIM: the closed loop simulated with the current estimate gives W_s = W(q_s, qd_s, qdd_s), and
    β = argmin ‖τ − W_s β‖ (the Gauss–Newton step of the closed-loop input error with DIDIM's Jacobian
    approximation, the derivative of W_s with β left out: Gautier et al. 2013), iterated until an update
    changes β by less than ``tol``; one closed-loop simulation per iteration. A step that raises the input error
    ‖τ − u_s‖² (u_s the simulated control torque) or whose simulation diverges is halved
    (:meth:`ClosedLoopSimulation.fixed_point`), so the iteration does not run away from a poor start.

    Only the measured torque τ enters: the measured q, qd, qdd do not (the simulated ones stand for them), so
    the position noise does not bias it. Starts from the problem's ``initial`` estimate, else from OLS. Needs
    closed-loop data (``metadata['closed_loop']``).

    Covariance: σ² (W_sᵀ W_s)⁻¹ at β, σ² = ‖τ − W_s β‖² / (m − b). Diagnostics: ``iterations``,
    ``model_evaluations`` (closed-loop simulations), ``converged`` (False also where no shortened step lowered
    the input error), ``diverged``, ``relative_change``.
    """

    name = "didim"
    needs_closed_loop = True
    Options = IterationOptions

    def _fit(self, problem) -> BaseParameterModel:
        simulation = ClosedLoopSimulation(problem, f"estimator '{self.name}'")
        y = problem.torque_vector()

        def update(result) -> np.ndarray:
            return scaled_solve(simulation.base_regressor(result), y)

        beta, last, info = simulation.fixed_point(
            starting_point(problem), update, self.tol, self.max_iterations, cost=simulation.input_error
        )
        return BaseParameterModel.from_problem(
            problem,
            beta,
            _ls_covariance(simulation.base_regressor(last), y, beta),
            diagnostics={**info, "model_evaluations": simulation.evaluations, **problem.diagnostics()},
        )


class PCDIDIMEstimator(Estimator):
    """PC-DIDIM: the iteration of ``didim`` with each least-squares step replaced by the physically consistent
    one: min over the full standard parameters θ of ‖τ − W_s K θ‖², every link's pseudo-inertia ⪰ ``margin``,
    rotor inertias and friction coefficients ≥ 0 (:mod:`robotid_sim.identification.lmi`; the options of
    ``lmi_wls``). Each simulation runs with the consistent θ itself, so its mass matrix is positive definite.

    Starts from the problem's ``initial`` estimate, else from the constrained least squares on the measured
    data. Returns a :class:`StandardParameterModel`; diagnostics as ``didim``'s plus ``consistent`` and
    ``link_min_eigenvalue``.
    """

    name = "pc_didim"
    needs_closed_loop = True

    class Options(PhysicalOptions, IterationOptions):
        pass

    def _fit(self, problem) -> StandardParameterModel:
        y = problem.torque_vector()

        def step(simulation, program, result) -> np.ndarray:
            return consistent_solve(program, simulation.base_regressor(result), y)

        return consistent_iteration(self, problem, step, input_error=True)


def _ls_covariance(W: np.ndarray, y: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """σ² (Wᵀ W)⁻¹ of the least squares ‖y − W β‖, σ² from the residual."""
    m, b = W.shape
    sigma2 = float(np.sum((y - W @ beta) ** 2)) / max(m - b, 1)
    covariance = sigma2 * np.linalg.inv(W.T @ W)
    return 0.5 * (covariance + covariance.T)


@hookimpl
def register_estimators(register):
    register("didim", DIDIMEstimator)
    register("pc_didim", PCDIDIMEstimator)
