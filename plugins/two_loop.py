"""Built-in estimator ``two_loop``: the two-loop iterative identification of seed 001 §4.3 — an outer loop
fitting the nonlinear friction law (Eq. 5, 31–32) around an inner IRLS with LMI constraints (Eq. 25–30)."""

from __future__ import annotations

import numpy as np
from pydantic import Field, field_validator
from robotid_sim_plugins.irls import MAX_REJECTED_FRACTION, SIGMA_FLOOR, IRLSEstimator

from robotid_sim.dynamics.friction import smooth_sign
from robotid_sim.errors import ConfigError, IdentificationError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import Estimator, History, IdentificationProblem, StandardParameterModel
from robotid_sim.identification.lmi import PhysicalLeastSquares, PhysicalOptions, physical_options, standard_consistency
from robotid_sim.robot.model import Robot

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

#: friction laws whose coefficients are those of seed 001 Eq. 5 (fc, fv, S)
FRICTION_LAWS = ("nonlinear", "coulomb_viscous")
#: ``diagnostics['stop_reason']`` values
STOP_SETTLED = "every exponent changed less than 'tolerance'"
STOP_LIMIT = "max_outer reached"


class TwoLoopEstimator(Estimator):
    """Seed 001's two-loop identification with the nonlinear friction law τ_f = fc·sign(q̇) + fv·|q̇|^α·sign(q̇) + S.

    The exponent α enters non-linearly, so it is held fixed while the rest is linear:

    - **inner loop** (α fixed): ``irls`` with every solve the LMI least squares of ``lmi_wls`` (outliers
      rejected, Gautier weights, every link physically consistent, fc, fv ≥ 0) over the rigid-body and the
      linear friction parameters (seed 001 Eq. 25–30);
    - **outer loop**: the friction torque of each joint, F = τ − Y·[θ_rigid, 0] with the friction
      coefficients set to zero (Eq. 31), on the rows the inner loop kept; per joint (fc, fv, S, α) is fitted
      to it by bounded least squares (Eq. 32: fc, fv ≥ 0, α in ``alpha_bounds``) — for each α the
      coefficients are a bounded linear least squares (``scipy.optimize.lsq_linear``), and α minimises the
      remaining residual (``minimize_scalar``), which is the joint fit without its local minima;
    - stop when no α changes by more than ``tolerance`` (Δα, seed 001 Fig. 12), or after ``max_outer``.

    It starts from ``alpha0`` (seed 001: 1, the linear law), whatever exponents the robot's law states, and
    works on a robot whose friction law is ``nonlinear`` or ``coulomb_viscous`` (the same coefficients). The
    model is a physically consistent standard parameter set whose structure carries the fitted law (its α),
    so its torque, mass matrix and forward dynamics use it. Its history is α per outer iteration.

    Diagnostics: ``alpha`` (final), ``alpha_history`` (outer iterations × n), ``outer_iterations``,
    ``converged``, ``stop_reason``, ``inner_iterations`` (per outer iteration), ``friction_fit`` (per joint
    the outer fit's fc, fv, S, α and RMS of the friction residual, N·m), ``outliers_rejected``,
    ``outlier_fraction``, ``rejection_stopped_per_joint`` (the last inner loop's), ``consistent``,
    ``link_min_eigenvalue``, ``solver_status``.

    On exact or nearly exact data (a simulation without noise) the residual of the inner loop is the model
    error of the current α, not noise: the inner loop's ``sigma_floor`` and ``max_rejected_fraction`` (see
    ``irls``) keep it from rejecting that error as outliers, which would remove most rows of a joint and
    push α to its bound.
    """

    name = "two_loop"
    streams_regressor = True

    class Options(PhysicalOptions):
        alpha0: float | list[float] = Field(1.0, description="starting exponent(s) α, one or one per joint (seed: 1)")
        alpha_bounds: tuple[float, float] = Field(
            (0.1, 3.0), description="range of α in the outer fit (seed 001 Eq. 32: α > 0)"
        )
        tolerance: float = Field(1e-3, gt=0, description="stop when every |Δα| is below it")
        max_outer: int = Field(20, ge=1, description="outer-loop limit")
        threshold: float | None = Field(
            None, gt=0, description="inner loop: absolute outlier threshold in N·m (seed: 8); None: k_sigma"
        )
        k_sigma: float = Field(3.0, gt=0, description="inner loop: multiple of the per-joint robust residual std")
        sigma_floor: float = Field(
            SIGMA_FLOOR,
            ge=0,
            description="inner loop: the per-joint residual std is at least this fraction of the RMS of the joint's "
            "torque (irls 'sigma_floor')",
        )
        max_rejected_fraction: float = Field(
            MAX_REJECTED_FRACTION,
            gt=0,
            le=1,
            description="inner loop: a joint whose rows would be rejected beyond this fraction keeps them all "
            "(irls 'max_rejected_fraction')",
        )
        max_inner: int = Field(50, ge=1, description="inner-loop limit per outer iteration")
        min_speed: float = Field(
            0.0,
            ge=0,
            description="both loops leave out samples slower than this (rad/s or m/s), as a velocity dead-band on "
            "top of the problem's: the pre-sliding and Stribeck regime, where the friction torque is not Eq. 5's",
        )

        @field_validator("alpha0")
        @classmethod
        def _positive(cls, value):
            if np.any(np.asarray(value, float) <= 0) or not np.all(np.isfinite(value)):
                raise ValueError("every starting exponent must be finite and > 0")
            return value

        @field_validator("alpha_bounds")
        @classmethod
        def _ordered(cls, value):
            lo, hi = value
            if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
                raise ValueError(f"alpha_bounds must be finite with 0 < min < max, got {list(value)}")
            return value

    def _start(self, structure) -> np.ndarray:
        law = structure.friction_law.get("model")
        if law not in FRICTION_LAWS:
            raise ConfigError(
                f"two_loop fits the friction law fc·sign(qd) + fv·|qd|^α·sign(qd) + S (seed 001 Eq. 5); robot "
                f"'{structure.name}' has friction law '{law}': give it a 'nonlinear' or 'coulomb_viscous' law "
                "(the sidecar, or the scenario's identification.friction_model)"
            )
        n = structure.n_dof
        alpha = np.asarray(self.alpha0, float)
        if alpha.ndim == 0:
            alpha = np.full(n, float(alpha))
        if alpha.shape != (n,):
            raise ConfigError(f"two_loop option 'alpha0' has {alpha.size} values for {n} joints: give one or {n}")
        lo, hi = self.alpha_bounds
        return np.clip(alpha, lo, hi)

    def check_structure(self, structure) -> None:
        self._start(structure)

    def _fit(self, problem) -> StandardParameterModel:
        alpha = self._start(problem.structure)
        n = problem.n_dof
        smoothing = float(problem.structure.friction_law.get("sign_smoothing", 0.0))
        inner = IRLSEstimator(
            threshold=self.threshold,
            k_sigma=self.k_sigma,
            sigma_floor=self.sigma_floor,
            max_rejected_fraction=self.max_rejected_fraction,
            max_iterations=self.max_inner,
            check_excitation=False,
        )
        physical, program = physical_options(self), None
        ds = problem.dataset
        qd = np.asarray(ds.qd, float)
        deadband = problem.velocity_deadband
        if self.min_speed > 0:
            deadband = np.maximum(self.min_speed, deadband or 0.0).tolist()
        alphas, inner_iterations, stop_reason = [alpha], [], STOP_LIMIT
        for _ in range(self.max_outer):
            structure = problem.structure.with_friction_law(
                {"model": "nonlinear", "alpha": alpha.tolist(), "sign_smoothing": smoothing}
            )
            current = IdentificationProblem(structure, ds, velocity_deadband=deadband)
            constrained = PhysicalLeastSquares(current, physical, program)
            program = constrained.program
            result = inner.iterate(current, constrained)
            inner_iterations.append(result.iterations)
            theta = result.theta
            # Eq. 31: friction torque = measured torque less the rigid-body (and rotor) part
            rigid = theta.copy()
            rigid[structure.parameter_slices()["friction"]] = 0.0
            friction = np.asarray(ds.tau, float) - Robot.from_structure(structure, rigid).inverse_dynamics(
                ds.q, ds.qd, ds.qdd
            )
            use = np.zeros(friction.size, dtype=bool)
            use[current.row_index()[result.keep]] = True
            use = use.reshape(friction.shape)
            fits = [
                _fit_friction(qd[use[:, j], j], friction[use[:, j], j], self.alpha_bounds, smoothing) for j in range(n)
            ]
            new_alpha = np.array([f["alpha"] for f in fits])
            alphas.append(new_alpha)
            settled = np.max(np.abs(new_alpha - alpha)) < self.tolerance
            if settled:
                stop_reason = STOP_SETTLED
                break
            alpha = new_alpha
        check = standard_consistency(structure, theta)
        keep = result.keep
        history = np.array(alphas)
        return StandardParameterModel(
            structure,
            theta,
            history=History(np.arange(len(history), dtype=float), history, [f"alpha{j + 1}" for j in range(n)]),
            diagnostics={
                "alpha": alpha.tolist(),
                "alpha_history": history.tolist(),
                "outer_iterations": len(inner_iterations),
                "converged": stop_reason == STOP_SETTLED,
                "stop_reason": stop_reason,
                "inner_iterations": inner_iterations,
                "friction_fit": fits,
                "outliers_rejected": int(np.count_nonzero(~keep)),
                "outlier_fraction": float(np.mean(~keep)),
                "rejection_stopped_per_joint": [bool(x) for x in result.stopped],
                "consistent": check.consistent,
                "link_min_eigenvalue": check.link_min_eigenvalue.tolist(),
                "solver_status": program.status,
                **current.diagnostics(),
            },
        )


def _fit_friction(v: np.ndarray, f: np.ndarray, bounds: tuple[float, float], smoothing: float) -> dict:
    """(fc, fv, S, α) of one joint: min ‖f − fc·s − fv·|v|^α·s − S‖ with fc, fv ≥ 0, α in ``bounds`` (Eq. 32).

    Variable projection: for each α the coefficients are a bounded linear least squares; α minimises what is left.
    """
    from scipy.optimize import lsq_linear, minimize_scalar

    if v.size < 4:
        raise IdentificationError(
            "two_loop: fewer than 4 samples fast enough for the friction fit of a joint; lower 'min_speed' or the "
            "velocity_deadband"
        )
    s = smooth_sign(v, smoothing)
    speed = np.abs(v)
    lower, upper = np.array([0.0, 0.0, -np.inf]), np.full(3, np.inf)

    def solve(alpha: float):
        A = np.column_stack([s, speed**alpha * s, np.ones_like(v)])
        return lsq_linear(A, f, bounds=(lower, upper), method="bvls")

    best = minimize_scalar(lambda a: solve(a).cost, bounds=bounds, method="bounded", options={"xatol": 1e-7})
    alpha = float(best.x)
    coef = solve(alpha)
    fc, fv, offset = (float(x) for x in coef.x)
    return {"fc": fc, "fv": fv, "S": offset, "alpha": alpha, "rms": float(np.sqrt(2.0 * coef.cost / v.size))}


@hookimpl
def register_estimators(register):
    register("two_loop", TwoLoopEstimator)
