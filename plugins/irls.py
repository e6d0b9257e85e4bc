"""Built-in estimator ``irls``: iteratively re-weighted least squares with outlier rejection
(seed 001 Eq. 25–29, the inner loop of its two-loop method)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

import numpy as np
from pydantic import Field, field_validator, model_validator

from robotid_sim.errors import IdentificationError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import (
    BaseParameterModel,
    Estimator,
    History,
    LeastSquaresFit,
    StandardParameterModel,
    per_joint_variance,
)
from robotid_sim.identification.essential import EssentialOptions, essential_refit
from robotid_sim.identification.lmi import PhysicalLeastSquares, PhysicalOptions, standard_consistency
from robotid_sim.identification.metrics import robust_std

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

#: ``diagnostics['stop_reason']`` values
STOP_SETTLED = "the rejected set did not change"
STOP_CYCLE = "the rejected set repeated an earlier one (a cycle)"
STOP_LIMIT = "max_iterations reached"
#: default ``sigma_floor``: a joint's residual standard deviation is taken as at least this fraction of the RMS of its
#: measured torque (rows in use), in its outlier limit and in its Gautier weight. No torque measurement resolves its
#: signal to 1e-4; a residual below that is round-off, solver tolerance or the model error of exact (simulated) data,
#: whose MAD would otherwise make every row an "outlier" and the joint's weight 1/Λ_j unbounded.
SIGMA_FLOOR = 1e-4
#: default ``max_rejected_fraction``: when the outlier rule would reject more than this fraction of a joint's rows in
#: use, the rejected rows are the model's error, not outliers: that joint's rejection stops (all its rows kept).
MAX_REJECTED_FRACTION = 0.25


class IRLSEstimator(Estimator):
    """Gautier-weighted least squares in which samples whose residual exceeds a threshold get
    zero weight (seed 001 Eq. 28–29); re-solve until the set of rejected samples stops changing.

    Works on the problem's rows in use (a velocity dead-band's rows are never counted as
    rejected). Each re-solve is exact but cheap: the per-joint Gram matrices are formed once and a
    solve subtracts only the rejected rows (:meth:`IdentificationProblem.least_squares`). The loop stops
    when the rejected set does not change, or repeats an earlier set (it would cycle).

    The outlier rule presumes that a joint's residual is measurement noise plus a few outliers. It
    is kept from rejecting model error, which on exact or nearly exact (simulated) data is all the
    residual there is, in two ways:

    - ``sigma_floor``: the robust σ of joint j in its k_sigma limit (and the σ² of its Gautier
      variance Λ_j, with ``threshold`` too) is at least ``sigma_floor`` × the RMS of its measured
      torque on the rows in use (default :data:`SIGMA_FLOOR`, 1e-4). Without
      it, a joint that the model fits to round-off gets a limit of ~1e-12 N·m, rejects rows that
      are only round-off, and a weight 1/Λ_j so large that the other joints stop counting in the
      solve (which then misfits them, and rejects their rows in turn).
    - ``max_rejected_fraction``: when the rule would reject more than this fraction of a joint's
      rows in use (default :data:`MAX_REJECTED_FRACTION`, 0.25; a few % is what noise with
      outliers gives), the "outliers" are the model's error: rejection stops on that joint for the
      rest of the loop and all its rows are kept. ``rejection_stopped_per_joint`` says which.

    Diagnostics: ``iterations``, ``converged``, ``stop_reason``, ``rejected_per_joint`` (rows of
    each joint rejected), ``rejected_fraction_per_joint`` (of that joint's rows in use),
    ``rejected_fraction``, ``rejection_limit_per_joint`` (the last residual limits, N·m or N),
    ``rejection_stopped_per_joint`` (where ``max_rejected_fraction`` stopped the rejection),
    ``sigma_floor_per_joint`` (N·m or N), ``deadband_rows_removed``, and ``outliers_rejected`` /
    ``outlier_fraction`` (totals).

    With ``physical``, every solve is the LMI least squares of ``lmi_wls`` (seed 001 Eq. 30: the
    inner loop of its two-loop method), the result a full physically consistent standard parameter
    set (:class:`StandardParameterModel`), and the diagnostics add ``consistent``,
    ``link_min_eigenvalue`` and ``solver_status``.
    """

    name = "irls"
    streams_regressor = True

    class Options(EssentialOptions):
        threshold: float | None = Field(
            None,
            gt=0,
            description="absolute residual threshold (N·m; the seed uses 8). None: k_sigma robust "
            "standard deviations per joint, which adapts to each joint's noise level",
        )
        k_sigma: float = Field(3.0, gt=0, description="multiple of the per-joint robust residual std (1.4826·MAD)")
        sigma_floor: float = Field(
            SIGMA_FLOOR,
            ge=0,
            description="the per-joint residual std (in the k_sigma limit and the Gautier weight) is at least this "
            "fraction of the RMS of the joint's measured torque: a residual below it is round-off or the model error "
            "of exact data, not noise",
        )
        max_rejected_fraction: float = Field(
            MAX_REJECTED_FRACTION,
            gt=0,
            le=1,
            description="a joint whose rows the rule would reject beyond this fraction keeps all its rows from then on "
            "(the 'outliers' are the model's error); 1: no limit",
        )
        max_iterations: int = Field(50, ge=1, description="inner-loop limit")
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")
        physical: PhysicalOptions | None = Field(
            None,
            description="solve every step subject to physical consistency (seed 001 Eq. 30): true, or the "
            "constraint options of 'lmi_wls' (margin, mass_bounds, com_box, regularization, ...); the model is "
            "then a full standard parameter set",
        )

        @field_validator("physical", mode="before")
        @classmethod
        def _switch(cls, value):
            if isinstance(value, bool):
                return {} if value else None
            return value

        @model_validator(mode="after")
        def _essential_is_unconstrained(self):
            if self.essential and self.physical is not None:
                raise ValueError(
                    "'essential' refits a subset of the base parameters, 'physical' solves for the standard ones: "
                    "use one of them"
                )
            return self

    def _limits(
        self, residual: np.ndarray, keep: np.ndarray, rows_of: list[np.ndarray], floor: np.ndarray
    ) -> np.ndarray:
        n = len(rows_of)
        if self.threshold is not None:
            return np.full(n, float(self.threshold))
        limits = np.empty(n)
        for j, rows in enumerate(rows_of):
            rj = residual[rows[keep[rows]]]
            limits[j] = self.k_sigma * max(robust_std(rj), floor[j]) if rj.size else np.inf
        return np.maximum(limits, 1e-12)

    def iterate(self, problem, constrained: PhysicalLeastSquares | None = None) -> IRLSResult:
        """The inner loop on ``problem``: unconstrained, or each solve by ``constrained`` (θ kept)."""
        n, joint = problem.n_dof, problem.row_joint()
        rows_of = [np.flatnonzero(joint == j) for j in range(n)]
        solver = problem.least_squares()
        theta = None

        def solve(weights, keep=None):
            nonlocal theta
            if constrained is None:
                return solver.solve(weights, keep, covariance=False)
            theta, fit = constrained.solve(weights, keep)
            return fit

        b = problem.base.count
        tau = problem.torque_vector()
        scale = np.array([np.sqrt(np.mean(tau[rows] ** 2)) if rows.size else 0.0 for rows in rows_of])
        floor = self.sigma_floor * scale  # the least residual std of each joint (N·m or N)
        in_use = np.array([rows.size for rows in rows_of])
        stopped = np.zeros(n, dtype=bool)  # joints whose rejection max_rejected_fraction stopped
        weights = np.ones(n)
        fit = solve(weights)  # Eq. 25: residual of the first LS
        keep = np.ones(problem.n_rows, dtype=bool)
        n_params = solver.n_params(keep, per_joint=True)
        history = [fit.beta]
        seen = {_digest(keep)}
        iterations, stop_reason = 0, STOP_LIMIT
        limits = np.full(n, np.inf)
        while iterations < self.max_iterations:
            iterations += 1
            variance = per_joint_variance(fit.residual, None, n, keep, row_joint=joint, n_params=n_params)
            variance = np.maximum(variance, floor**2)
            limits = self._limits(fit.residual, keep, rows_of, floor)
            new_keep = np.abs(fit.residual) < limits[joint]  # Eq. 28
            stopped |= np.bincount(joint[~new_keep], minlength=n) > self.max_rejected_fraction * in_use
            new_keep |= stopped[joint]
            if new_keep.sum() <= b:
                raise IdentificationError(
                    "irls rejected almost every sample as an outlier; raise 'threshold' or 'k_sigma'"
                )
            weights = 1.0 / variance
            fit = solve(weights, new_keep)  # Eq. 29 (Eq. 30 when constrained), with Gautier weights
            history.append(fit.beta)
            changed = bool(np.any(new_keep != keep))
            keep = new_keep
            if not changed:
                stop_reason = STOP_SETTLED
                break
            digest = _digest(keep)
            if digest in seen:
                stop_reason = STOP_CYCLE
                break
            seen.add(digest)
            n_params = solver.n_params(keep, per_joint=True)
        return IRLSResult(fit, theta, weights, keep, np.array(history), iterations, stop_reason, limits, stopped, floor)

    def _fit(self, problem) -> BaseParameterModel | StandardParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        constrained = None if self.physical is None else PhysicalLeastSquares(problem, self.physical)
        result = self.iterate(problem, constrained)
        fit, keep, n, joint = result.fit, result.keep, problem.n_dof, problem.row_joint()
        rejected = np.bincount(joint[~keep], minlength=n)
        in_use = np.maximum(np.bincount(joint, minlength=n), 1)
        history = History(np.arange(len(result.history), dtype=float), result.history, problem.base_parameter_names)
        if constrained is None:
            kept = None if keep.all() else keep
            fit = replace(fit, covariance=problem.least_squares().covariance(result.weights, kept, fit))
            beta, covariance, extra = essential_refit(self, problem, fit, result.weights, kept)
            model, args = BaseParameterModel, (beta, covariance)
        else:
            model, args = StandardParameterModel, (result.theta,)
            check = standard_consistency(problem.structure, result.theta)
            extra = {
                "consistent": check.consistent,
                "link_min_eigenvalue": check.link_min_eigenvalue.tolist(),
                "solver_status": constrained.program.status,
            }
        return model.from_problem(
            problem,
            *args,
            history=history,
            diagnostics={
                **extra,
                "condition_number": cond,
                "iterations": result.iterations,
                "converged": result.stop_reason == STOP_SETTLED,
                "stop_reason": result.stop_reason,
                "rejected_per_joint": [int(x) for x in rejected],
                "rejected_fraction_per_joint": [float(x) for x in rejected / in_use],
                "rejected_fraction": float(np.mean(~keep)),
                "rejection_limit_per_joint": [float(x) if np.isfinite(x) else None for x in result.limits],
                "rejection_stopped_per_joint": [bool(x) for x in result.stopped],
                "sigma_floor_per_joint": [float(x) for x in result.floor],
                "outliers_rejected": int(np.count_nonzero(~keep)),
                "outlier_fraction": float(np.mean(~keep)),
                **problem.diagnostics(),
            },
        )


@dataclass(frozen=True)
class IRLSResult:
    """What the inner loop ends with (:meth:`IRLSEstimator.iterate`).

    Attributes:
        fit: the last solve (base values, residual of the rows in use).
        theta: its standard parameters (p,) when constrained, else None.
        weights: (n,) the last Gautier weights 1/Λ_j.
        keep: (rows in use,) the rows not rejected as outliers.
        history: (iterations + 1, b) base values after each solve.
        iterations, stop_reason: how the loop ended; limits: (n,) the last residual limits.
        stopped: (n,) joints whose rejection ``max_rejected_fraction`` stopped (all their rows kept).
        floor: (n,) the floor of each joint's residual std, ``sigma_floor`` × RMS of its torque.
    """

    fit: LeastSquaresFit
    theta: np.ndarray | None
    weights: np.ndarray
    keep: np.ndarray
    history: np.ndarray
    iterations: int
    stop_reason: str
    limits: np.ndarray
    stopped: np.ndarray
    floor: np.ndarray


def _digest(keep: np.ndarray) -> bytes:
    return hashlib.blake2b(np.packbits(keep).tobytes(), digest_size=16).digest()


@hookimpl
def register_estimators(register):
    register("irls", IRLSEstimator)
