"""Built-in estimator ``idim_ml``: maximum likelihood on the inverse dynamic model with errors in the variables
(IDIM-ML; Olsen, Swevers and Verdonck 2002; BIRDy's IDIM-ML, Leboutet et al. 2021)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from robotid_sim.errors import ConfigError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions, per_joint_variance
from robotid_sim.robot.model import Robot
from robotid_sim.signal.filters import butterworth_filtfilt, central_difference

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

#: finite-difference step of the state derivatives (forward differences), relative to each signal's RMS
RELATIVE_STEP = 1e-6
#: tolerance of the continuation's stages before the last (which stops at the option ``tolerance``)
STAGE_TOLERANCE = 1e-4
#: a joint's torque-noise variance estimated from the OLS residual is at least this fraction of that residual's
FLOOR_FRACTION = 1e-4
#: every row's residual standard deviation is at least this fraction of the RMS of its joint's measured torque (no
#: sensor resolves less; noise-free data, σ_q = σ_τ = 0, would otherwise divide by zero)
SIGMA_FLOOR = 1e-9


def _noise_std(value, name: str):
    """``value`` (None, one number or a list) checked finite and ≥ 0."""
    if value is None:
        return None
    values = [value] if isinstance(value, int | float) else list(value)
    if not values or not all(np.isfinite(v) and v >= 0 for v in values):
        raise ValueError(f"{name} must be one finite standard deviation ≥ 0 or one per joint, got {value!r}")
    return value


@dataclass(frozen=True)
class Preprocessing:
    """How the data's q, qd and qdd were made from the encoder's samples: what :class:`IDIMMLEstimator` propagates
    the position noise through.

    Attributes:
        derivatives: ``"gradient"`` (central first differences twice, ``numpy.gradient``: ``birdy_dataset``'s
            ``"central"`` and ``preprocessing.differentiate``), ``"second_difference"`` (the 3-point stencils of
            :func:`~robotid_sim.signal.central_difference`) or ``"exact"`` (qd, qdd noise-free).
        rate_hz: the rate the encoder was sampled and differentiated at.
        lowpass_hz: the zero-phase 4th-order Butterworth applied to q first (the "_f" variants), or None.
        decimation: the factor of the zero-phase Butterworth anti-alias filter and down-sampling that followed
            (``birdy_dataset``'s; 1: none).
    """

    derivatives: str
    rate_hz: float
    lowpass_hz: float | None = None
    decimation: int = 1

    @classmethod
    def of(cls, dataset, derivatives: str, lowpass_hz: float | None) -> Preprocessing:
        """From the options, or with ``derivatives="auto"`` from the data's ``metadata["preprocessing"]``
        (:func:`~robotid_sim.sim.closed_loop_data.birdy_dataset`), else central differences twice at its rate."""
        rate = 1.0 / dataset.dt
        if derivatives != "auto":
            return cls(derivatives, rate, lowpass_hz)
        metadata = dataset.metadata if isinstance(dataset.metadata, dict) else {}
        done = metadata.get("preprocessing")
        if not isinstance(done, dict):
            return cls("gradient", rate, lowpass_hz)
        decimation = int(done.get("decimation") or 1)
        raw = (metadata.get("closed_loop") or {}).get("sample_rate_hz") or rate * decimation
        return cls(
            "exact" if done.get("derivatives") == "exact" else "gradient",
            float(raw),
            float(done["cutoff_hz"]) if done.get("filtered") else lowpass_hz,
            decimation,
        )

    def noise_gram(self) -> np.ndarray:
        """(3, 3) covariance of the noise in (q, qd, qdd) of one joint whose encoder has white noise of unit variance.

        The preprocessing is linear in q, so its three outputs are the encoder noise convolved with three kernels,
        read off by running the preprocessing on a unit impulse; a sample of the output (decimated or not) has the
        variance Σ kernel². Unfiltered 3-point differences at step h give
        [[1, 0, −2/h²], [0, 1/(2h²), 0], [−2/h², 0, 6/h⁴]].
        """
        import scipy.signal

        fs, dt = self.rate_hz, 1.0 / self.rate_hz
        slowest = min(self.lowpass_hz or fs, 0.4 * fs / self.decimation if self.decimation > 1 else fs)
        half = int(20 * fs / slowest) + 10
        impulse = np.zeros(2 * half + 1)
        impulse[half] = 1.0
        q = impulse if self.lowpass_hz is None else butterworth_filtfilt(impulse, fs, self.lowpass_hz)
        if self.derivatives == "second_difference":
            qd, qdd = central_difference(q, dt), central_difference(q, dt, deriv=2)
        elif self.derivatives == "gradient":
            qd = np.gradient(q, dt)
            qdd = np.gradient(qd, dt)
        else:
            qd = qdd = np.zeros_like(q)
        K = np.stack([q, qd, qdd])
        if self.decimation > 1:
            from robotid_sim.sim.closed_loop_data import DECIMATION_ORDER

            b, a = scipy.signal.butter(DECIMATION_ORDER, 0.8 / self.decimation)
            K = scipy.signal.filtfilt(b, a, K, axis=1)
        K = K[:, 5:-5]  # away from the ends' one-sided stencils
        return K @ K.T


class IDIMMLEstimator(Estimator):
    """Maximum likelihood with errors in the variables: the measured q is noisy, and so are the qd, qdd derived
    from it, so each row of the inverse dynamic model τ_i = Y_i(q, qd, qdd) β has the residual variance

        s_i² = σ_τ,j² + B_i Σ_x B_iᵀ,   B_i = ∂τ_i/∂(q, qd, qdd) at the measured states and the estimate,

    with Σ_x the covariance of the noise in (q, qd, qdd): σ_q,j² per joint times the (3, 3) covariance that the
    preprocessing gives unit white noise in q (:meth:`Preprocessing.noise_gram`; with ``derivatives="auto"``
    read from the data's ``metadata["preprocessing"]``, which ``birdy_dataset`` writes: differences at the
    raw rate, the optional Butterworth prefilter, the decimation). The estimate minimises Σ_i r_i² / s_i²
    (the likelihood of the measured q and τ maximised over the true states, to first order: the
    effective-variance form of orthogonal distance regression; a log s_i² term would shrink the inertial
    parameters toward zero, so there is none) with :func:`scipy.optimize.least_squares` on the whitened
    residuals r_i / s_i and their exact Jacobian. The likelihood is not convex: from a biased start (OLS
    at high position noise) it can stop in a spurious minimum, so σ_q is raised in ``continuation``
    stages, each started from the last one's estimate (planar3r, σ_q = 5e-4 rad at 50 Hz: a minimum of
    cost 5081 at once, 2491 by four stages). B is the mass matrix in qdd and the forward finite
    difference of the batched inverse dynamics in q and qd (2n directions), ∂s_i²/∂β the directional
    finite difference of the base regressor along Σ_x B_iᵀ (n directions): batched over samples.
    Correlations between the rows of one sample and between samples (neighbouring samples share q
    values), and in closed loop between the torque and the encoder noise fed back, are neglected. s_i is
    at least :data:`SIGMA_FLOOR` × the RMS of the joint's torque (noise-free data).

    Noise levels: ``sd_q`` and ``sd_tau`` from the options; else from the data's
    ``metadata["closed_loop"]["noise"]`` (closed-loop data, :func:`robotid_sim.sim.closed_loop_data.birdy_dataset`);
    else σ_q = 0 (the estimate is then ``wls``'s) and σ_τ,j² from the OLS residual, less the position
    noise's share B Σ_x Bᵀ at the OLS estimate (at least :data:`FLOOR_FRACTION` of it). Starts from
    ``problem.initial_base`` when given, else from OLS. On exact data the truth is a zero-residual minimum.

    Diagnostics: ``iterations`` (Jacobian evaluations), ``model_evaluations`` (evaluations of the inverse
    dynamic model over the data), ``converged``, ``stop_reason``, ``position_noise_std`` and
    ``joint_noise_std`` (σ_q, σ_τ used), ``noise_source``, ``noise_propagation`` (the :class:`Preprocessing`),
    ``start`` (``"initial"`` or ``"ols"``), ``condition_number``, ``deadband_rows_removed``.
    """

    name = "idim_ml"

    class Options(EstimatorOptions):
        sd_q: float | list[float] | None = Field(
            None,
            description="standard deviation of the measured q (rad, or m for a prismatic joint), one or one per "
            "joint; None: the data's metadata['closed_loop']['noise']['sd_q'], else 0",
        )
        sd_tau: float | list[float] | None = Field(
            None,
            description="standard deviation of the measured torque (N·m or N), one or one per joint; None: the "
            "data's metadata['closed_loop']['noise']['sd_tau'], else from the OLS residual",
        )
        derivatives: Literal["auto", "gradient", "second_difference", "exact"] = Field(
            "auto",
            description="how the data's qd, qdd were derived from q (Preprocessing): 'auto' from the data's "
            "metadata['preprocessing'] (birdy_dataset), else 'gradient'; 'gradient' central differences twice "
            "(numpy.gradient), 'second_difference' the 3-point stencils, 'exact' noise-free qd, qdd",
        )
        lowpass_hz: float | None = Field(
            None,
            gt=0,
            description="cut-off of the zero-phase Butterworth applied to q before differentiating (the '_f' "
            "variants: 50), or None; with 'auto' the data's metadata decides",
        )
        max_iterations: int = Field(100, ge=1, description="most evaluations of the likelihood per stage")
        continuation: int = Field(
            4,
            ge=1,
            description="stages of σ_q (k/continuation · σ_q, k = 1 … continuation), each started from the last: "
            "the minimum followed from the weighted least squares, not a spurious one of the non-convex "
            "likelihood; 1: σ_q at once",
        )
        tolerance: float = Field(
            1e-8, gt=0, description="relative change of the cost and of β at which the last stage stops"
        )
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")

        @field_validator("sd_q", "sd_tau")
        @classmethod
        def _finite(cls, value, info):
            return _noise_std(value, info.field_name)

    def _noise(self, problem) -> tuple[np.ndarray, np.ndarray | None, dict]:
        """(σ_q (n,), σ_τ (n,) or None to estimate, where each came from)."""
        n = problem.n_dof
        metadata = problem.dataset.metadata if isinstance(problem.dataset.metadata, dict) else {}
        noise = (metadata.get("closed_loop") or {}).get("noise") or {}
        out, source = [], {}
        for name, option in (("sd_q", self.sd_q), ("sd_tau", self.sd_tau)):
            value, source[name] = option, "option"
            if value is None and noise.get(name) is not None:
                value, source[name] = noise[name], "metadata"
            if value is None:
                out.append(None)
                continue
            arr = np.broadcast_to(np.asarray(value, float), (n,)) if np.ndim(value) == 0 else np.asarray(value, float)
            if arr.shape != (n,) or not np.all(np.isfinite(arr) & (arr >= 0)):
                raise ConfigError(
                    f"estimator 'idim_ml': {name} ({source[name]}) must be one finite value ≥ 0 or {n}, one per "
                    f"joint, got {value!r}"
                )
            out.append(arr)
        if out[0] is None:
            out[0], source["sd_q"] = np.zeros(n), "none (0: the estimate is wls's)"
        if out[1] is None:
            source["sd_tau"] = "ols residual"
        return out[0], out[1], source

    def _minimise(self, likelihood: _Likelihood, beta0: np.ndarray, scale: np.ndarray):
        """(the last stage's ``least_squares`` result, Jacobian and likelihood evaluations of all stages)."""
        from scipy.optimize import least_squares

        z, iterations, evaluations = beta0 * scale, 0, 0
        stages = self.continuation if likelihood.noisy else 1
        for k in range(1, stages + 1):
            likelihood.stage(k / stages)
            tolerance = self.tolerance if k == stages else max(self.tolerance, STAGE_TOLERANCE)
            result = least_squares(
                lambda z: likelihood.residual(z / scale),
                z,
                jac=lambda z: likelihood.jacobian(z / scale) / scale,
                method="trf",
                ftol=tolerance,
                xtol=tolerance,
                gtol=tolerance,
                max_nfev=self.max_iterations,
            )
            z, iterations, evaluations = result.x, iterations + int(result.njev), evaluations + int(result.nfev)
        return result, iterations, evaluations

    def _fit(self, problem) -> BaseParameterModel:
        sd_q, sd_tau, source = self._noise(problem)
        preprocessing = Preprocessing.of(problem.dataset, self.derivatives, self.lowpass_hz)
        cond = problem.check_excitation() if self.check_excitation else None
        solver = problem.least_squares()
        likelihood = _Likelihood(problem, sd_q, preprocessing.noise_gram())
        ols = solver.solve(covariance=False)
        if sd_tau is None:
            n, joint = problem.n_dof, problem.row_joint()
            residual_var = per_joint_variance(
                ols.residual, None, n, row_joint=joint, n_params=solver.n_params(per_joint=True)
            )
            position_var = np.bincount(joint, weights=likelihood.position_variance(ols.beta), minlength=n)
            position_var /= np.maximum(np.bincount(joint, minlength=n), 1)
            sd_tau = np.sqrt(np.maximum(residual_var - position_var, FLOOR_FRACTION * residual_var))
        likelihood.sd_tau = sd_tau
        start = problem.initial_base
        result, iterations, evaluations = self._minimise(likelihood, ols.beta if start is None else start, solver.scale)
        scale = solver.scale
        beta = result.x / scale
        J = result.jac
        chi2 = float(result.fun @ result.fun) / max(J.shape[0] - J.shape[1], 1)
        covariance = chi2 * np.linalg.pinv(J.T @ J) / np.outer(scale, scale)
        diagnostics = {
            "condition_number": cond,
            "iterations": iterations,
            "model_evaluations": evaluations,
            "converged": bool(result.status > 0),
            "stop_reason": str(result.message),
            "position_noise_std": sd_q.tolist(),
            "joint_noise_std": np.asarray(sd_tau, float).tolist(),
            "noise_source": source,
            "noise_propagation": dataclasses.asdict(preprocessing),
            "start": "ols" if start is None else "initial",
        }
        return BaseParameterModel.from_problem(
            problem, beta, covariance, diagnostics={**diagnostics, **problem.diagnostics()}
        )


class _Likelihood:
    """The whitened residuals r_i / s_i of :class:`IDIMMLEstimator` on a problem's rows in use, and their Jacobian."""

    def __init__(self, problem, sd_q: np.ndarray, noise_gram: np.ndarray):
        ds = problem.dataset
        self.problem, self.structure, self.base = problem, problem.structure, problem.base
        self.x = np.stack([np.asarray(ds.q, float), np.asarray(ds.qd, float), np.asarray(ds.qdd, float)])
        n = problem.n_dof
        self.full_sigma_x = np.kron(
            noise_gram, np.diag(np.asarray(sd_q, float) ** 2)
        )  # (3n, 3n), coordinate c·n + joint
        self.sigma_x = self.full_sigma_x
        self.noisy = bool(np.any(sd_q > 0))
        rms = np.sqrt(np.mean(self.x**2, axis=1))  # (3, n)
        self.step = RELATIVE_STEP * np.maximum(rms, 1e-3).reshape(-1)  # (3n,)
        self.rows = problem.row_index()
        self.tau = problem.torque_vector()
        self.joint = joint = problem.row_joint()
        count = np.maximum(np.bincount(joint, minlength=n), 1)
        torque_rms = np.sqrt(np.bincount(joint, weights=self.tau**2, minlength=n) / count)
        self.floor = (SIGMA_FLOOR * np.maximum(torque_rms, 1e-300))[joint] ** 2
        self.W = problem.base_regressor()
        self.Y = problem.base_regressor(stacked=False, all_rows=True)  # (N, n, b), every row
        self.sd_tau = np.ones(n)
        self._cache: tuple[bytes, np.ndarray, np.ndarray] | None = None

    def stage(self, fraction: float) -> None:
        """Position noise ``fraction`` · σ_q from now on."""
        self.sigma_x, self._cache = fraction**2 * self.full_sigma_x, None

    def _state(self, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Σ_x B_iᵀ (N, n, 3n) with B = ∂τ/∂x at the measured states, s² of every row in use)."""
        key = beta.tobytes()
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1], self._cache[2]
        N, n = self.x.shape[1:]
        B = np.zeros((N, n, 3 * n))
        if self.noisy:
            theta = np.zeros(self.structure.n_parameters)
            theta[self.base.independent] = beta
            robot = Robot.from_structure(self.structure, theta)
            B[:, :, 2 * n :] = robot.mass_matrix(self.x[0])  # τ is linear in qdd: ∂τ/∂qdd = M(q) exactly
            tau = robot.inverse_dynamics(*self.x)
            for a in range(2 * n):  # q and qd: forward differences, each batched over every sample
                c, j, h = a // n, a % n, self.step[a]
                moved = self.x.copy()
                moved[c, :, j] += h
                B[:, :, a] = (robot.inverse_dynamics(*moved) - tau) / h
        w = B @ self.sigma_x  # (N, n, 3n): Σ_x B_iᵀ, the direction of each row in x
        var = self._in_use(np.einsum("kja,kja->kj", w, B).reshape(-1))
        var = np.maximum(var + self.sd_tau[self.joint] ** 2, self.floor)
        self._cache = (key, w, var)
        return w, var

    def _in_use(self, stacked: np.ndarray) -> np.ndarray:
        """The rows in use of an (N·n, ...) array (itself without a velocity dead-band)."""
        return stacked if len(self.rows) == len(stacked) else stacked[self.rows]

    def position_variance(self, beta: np.ndarray) -> np.ndarray:
        """B_i Σ_x B_iᵀ (rows in use) at ``beta``: the position noise's share of each row's residual variance."""
        saved, self.sd_tau = self.sd_tau, np.zeros_like(self.sd_tau)
        try:
            self._cache = None
            return self._state(beta)[1]
        finally:
            self.sd_tau, self._cache = saved, None

    def residual(self, beta: np.ndarray) -> np.ndarray:
        _, var = self._state(beta)
        return (self.tau - self.W @ beta) / np.sqrt(var)

    def jacobian(self, beta: np.ndarray) -> np.ndarray:
        """∂(r_i/s_i)/∂β = −Y_i/s_i − r_i g_i / s_i³, g_i = ½ ∂s_i²/∂β = Σ_a ∂Y_i/∂x_a (Σ_x B_iᵀ)_a."""
        w, var = self._state(beta)
        s = np.sqrt(var)
        r = self.tau - self.W @ beta
        if not self.noisy:
            return -self.W / s[:, None]
        N, n = self.x.shape[1:]
        g = np.empty((N, n, self.W.shape[1]))
        for j in range(n):  # the directional derivative of joint j's rows along their own directions
            d = w[:, j, :]
            size = np.max(np.abs(d) / self.step, axis=1)  # 1 / the step that moves each coordinate ≤ its step
            shift = (d / np.where(size > 0, size, 1.0)[:, None]).reshape(N, 3, n).transpose(1, 0, 2)
            g[:, j, :] = self.base.regressor(*(self.x + shift))[:, j, :]
            g[:, j, :] -= self.Y[:, j, :]
            g[:, j, :] *= size[:, None]
        J = self._in_use(g.reshape(-1, self.W.shape[1]))
        J *= (r / var)[:, None]
        J += self.W
        J /= -s[:, None]
        return J


@hookimpl
def register_estimators(register):
    register("idim_ml", IDIMMLEstimator)
