"""Built-in estimators ``cloe`` and ``clie``: closed-loop output error and closed-loop input error (Landau &
Karimi 1997's closed-loop output error; Gautier, Janot & Vandanjon 2013 for robots), the controller in the loop."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions
from robotid_sim.identification.closed_loop_model import ClosedLoopSimulation, starting_point

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

#: a diverged simulation's residual, in units of the largest measured value: large, finite, so the
#: Levenberg–Marquardt step shrinks instead of failing
DIVERGED_RESIDUAL = 1e3


class ClosedLoopErrorOptions(EstimatorOptions):
    tol: float = Field(
        1e-10, gt=0, lt=1, description="Levenberg–Marquardt's relative tolerance (cost, parameters, gradient)"
    )
    max_evaluations: int = Field(
        100, ge=2, description="residual evaluations at most (each a closed-loop simulation; Jacobians not counted)"
    )
    fd_step: float = Field(
        1e-6,
        gt=0,
        lt=0.1,
        description="forward-difference step of the Jacobian (finite_difference, and sensitivity's fallback), "
        "relative to each parameter",
    )
    jacobian: Literal["sensitivity", "finite_difference"] = Field(
        "sensitivity",
        description="the Jacobian: forward sensitivities carried along one simulated loop, or forward differences "
        "of b + 1 simulated copies",
    )


class CLOEEstimator(Estimator):
    """CLOE: min over the base parameters β of ‖q − q_s(β)‖² over every joint and sample, q the measured
    positions and q_s the closed loop (the data's controller and reference) simulated on the model with β.

    Levenberg–Marquardt (:func:`scipy.optimize.least_squares`, ``method="lm"``) in the coordinates β / |β₀|.
    The Jacobian (option ``jacobian``): ``"sensitivity"`` (default) carries ∂q/∂β and ∂u/∂β along ONE simulation
    of the discrete loop (forward sensitivities,
    :meth:`~robotid_sim.identification.closed_loop_model.ClosedLoopSimulation.sensitivities`; about 2–3 copies'
    cost, and closer to the exact derivative than forward differences; without numba, or for a friction law the
    compiled loop does not know, it falls back to the forward differences); ``"finite_difference"``: forward
    differences of step ``fd_step``, all b perturbed copies and the unperturbed one in ONE batched simulation
    (:func:`~robotid_sim.identification.closed_loop_model.simulate_closed_loop`, threads over the copies). The
    residuals are simulated either way, so both reach the same minimum. A simulation that diverges gives a large
    finite residual (the step shrinks). Starts from the problem's ``initial`` estimate, else from OLS. Needs
    closed-loop data (``metadata['closed_loop']``).

    Covariance: σ² (Jᵀ J)⁻¹ at the solution, σ² = ‖r‖² / (m − b). Diagnostics: ``iterations`` (Jacobians),
    ``model_evaluations`` (closed-loop simulations, one per copy; a sensitivity Jacobian counts one),
    ``converged`` (a tolerance was met),
    ``status`` (scipy's message), ``cost`` (½‖r‖²).
    """

    name = "cloe"
    needs_closed_loop = True
    Options = ClosedLoopErrorOptions
    #: the compared signal: "q" (output error) or "u" (input error: the control torque)
    signal: ClassVar[str] = "q"

    def _fit(self, problem) -> BaseParameterModel:
        from scipy.optimize import least_squares

        simulation = ClosedLoopSimulation(problem, f"estimator '{self.name}'")
        if self.signal == "q":
            measured = np.asarray(problem.dataset.q, float).reshape(-1)

            def stacked(signal):
                """A simulated (…, N, n) signal as (…, m) rows, like ``measured``."""
                return signal.reshape(*signal.shape[:-2], -1)
        else:
            measured = problem.torque_vector()
            stacked = simulation.rows
        derivative = {"q": 1, "u": 2}[self.signal]  # the index of ∂signal/∂β in sensitivities' answer

        start = starting_point(problem)
        typical = np.maximum(np.abs(start), 1e-6 * np.abs(start).max())
        penalty = DIVERGED_RESIDUAL * max(float(np.abs(measured).max()), 1.0)

        def outputs(x: np.ndarray) -> np.ndarray:
            """(B, m) simulated signal of the scaled parameter sets x (B, b); a diverged copy's rows NaN."""
            return stacked(simulation.run(x * typical)[self.signal])

        def residual(x: np.ndarray) -> np.ndarray:
            return np.nan_to_num(measured - outputs(x[None])[0], nan=penalty, posinf=penalty, neginf=-penalty)

        def jacobian(x: np.ndarray) -> np.ndarray:
            h = self.fd_step * np.maximum(np.abs(x), 1.0)
            if self.jacobian == "sensitivity":  # ∂signal/∂x = ∂signal/∂β · typical
                ds = simulation.sensitivities(x * typical, h * typical)[derivative]
                J = -stacked(np.moveaxis(ds, -1, 0)).T * typical
            else:
                s = outputs(np.vstack([x, x + np.diag(h)]))
                J = -(s[1:] - s[0]).T / h
            return np.nan_to_num(J, nan=0.0, posinf=0.0, neginf=0.0)

        fit = least_squares(
            residual,
            start / typical,
            jac=jacobian,
            method="lm",
            xtol=self.tol,
            ftol=self.tol,
            gtol=self.tol,
            max_nfev=self.max_evaluations,
        )
        beta = fit.x * typical
        return BaseParameterModel.from_problem(
            problem,
            beta,
            _covariance(fit, typical),
            diagnostics={
                "iterations": int(fit.njev or 0),
                "model_evaluations": simulation.evaluations,
                "converged": bool(fit.status > 0),
                "status": str(fit.message),
                "cost": float(fit.cost),
                **problem.diagnostics(),
            },
        )


class CLIEEstimator(CLOEEstimator):
    """CLIE: min over the base parameters β of ‖τ − u_s(β)‖², τ the measured torque and u_s the control torque
    of the closed loop simulated on the model with β (the data's controller and reference), on the problem's
    rows in use. Otherwise as ``cloe``: Levenberg–Marquardt, the Jacobian from forward sensitivities (∂u/∂β) or
    forward differences (option ``jacobian``), the same options and diagnostics.
    """

    name = "clie"
    signal = "u"


def _covariance(fit, typical: np.ndarray) -> np.ndarray | None:
    """σ² (Jᵀ J)⁻¹ of the base parameters (β = x·typical), σ² = ‖r‖² / (m − b); None where Jᵀ J is singular."""
    J = fit.jac
    m, b = J.shape
    sigma2 = 2.0 * float(fit.cost) / max(m - b, 1)
    try:
        inverse = np.linalg.inv(J.T @ J)
    except np.linalg.LinAlgError:
        return None
    covariance = sigma2 * inverse * np.outer(typical, typical)
    return 0.5 * (covariance + covariance.T)


@hookimpl
def register_estimators(register):
    register("cloe", CLOEEstimator)
    register("clie", CLIEEstimator)
