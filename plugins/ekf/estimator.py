"""The ``ekf`` estimator: its options and presets, resolved into a process model and a noise schedule."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator
from robotid_sim_plugins.ekf.noise import NoiseSchedule
from robotid_sim_plugins.ekf.process import SIGNALS, EulerProcessModel

from robotid_sim.errors import ConfigError
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions
from robotid_sim.identification.online import stream_history
from robotid_sim.threads import one_blas_thread

#: what each preset sets (an option given explicitly overrides it)
PRESETS: dict[str, dict] = {
    # noise from the data, the accelerations measured (torque form), a tempered start and annealed parameter noise:
    # converges from λ0 = 0.1 (hyper9 included, whose M(q, λ0) is indefinite)
    "auto": {
        "measurements": ["q", "qd", "qdd"],
        "parameter_std": 1.0,
        "parameter_noise": 1e-6,
        "annealing_s": 2.0,
        "tempering": 1e4,
        "noise_floor": 1e-3,
    },
    # seed 004 Eq. 44: x0 = 0.1, P0 all ones, Q = I, R = 10·I, positions and velocities measured
    "seed004": {
        "measurements": ["q", "qd"],
        "parameter_std": None,
        "parameter_noise": 1.0,
        "annealing_s": None,
        "tempering": 0.0,
        "noise_floor": 1e-4,  # unused: R = 10·I
    },
    # BIRDy: P0_λ = 0.15·diag(|β0| + 1e-3), parameter process noise 1e-6 with annealing
    "birdy": {
        "measurements": ["q", "qd"],
        "parameter_std": None,
        "parameter_noise": 1e-6,
        "annealing_s": 2.0,
        "tempering": 0.0,
        "noise_floor": 1e-4,
    },
}
#: ``converged``: the estimate moved less than SETTLED_CHANGE (relative) over the last SETTLED_FRACTION of the stream
SETTLED_FRACTION, SETTLED_CHANGE = 0.1, 0.01
#: λ0 when ``initial_parameters`` is not given (seed 004 Eq. 44)
DEFAULT_INITIAL_PARAMETER = 0.1
#: ``engine: auto`` runs the compiled step from this many samples on (about 20–60 s of filterpy's loop, more than
#: the step's first compilation, about 40 s on a fresh install; a record this long pays for it the first time)
AUTO_COMPILED_SAMPLES = 50_000


class EKFEstimator(Estimator):
    """Extended Kalman filter on the augmented state x = [q, qd, λ] (seed 004 Eq. 41), λ the base
    parameters, with constant-parameter dynamics (Eq. 42) and an Euler step Δt = the sample
    interval (Eq. 43), built on filterpy's ``ExtendedKalmanFilter`` (Eq. 23–27). The options resolve
    into a process model (:class:`~robotid_sim_plugins.ekf.process.EulerProcessModel`: fx, hx, F, H) and
    a noise schedule (:class:`~robotid_sim_plugins.ekf.noise.NoiseSchedule`: P0, R(t), Q(t)), which
    :meth:`run` runs over the stream.

    The measured torque τ_k is the input. The model is the identified one: qdd =
    M(q, λ)⁻¹ (τ − h(q, qd, λ)) (M's columns and h are the base regressor at unit and zero accelerations,
    times λ; for a compiled chain one CRBA and RNEA with λ on its standard columns). The Jacobians (Eq. 28–29)
    come from the model, for any robot: ∂qdd/∂λ = −M⁻¹ Y(q, qd, qdd) exactly, ∂qdd/∂q and ∂qdd/∂qd by
    finite differences of the inverse dynamics. The predict linearises at the posterior (x_k|k, Eq. 23), for
    correlated noise where the accelerations are measured (the measured torque's noise is the predict's input
    and in the update's torque residual: Simon 2006, §7.1; see
    :func:`~robotid_sim_plugins.ekf.stream.posterior_linearization`).

    Measurements (``measurements``): the joint positions and velocities, and in the ``auto``
    preset the measured accelerations too — with them the filter sees the dynamics at every sample
    instead of only through their double integral, which is what leaves seed 004's EKF far off on
    the small parameters (Table 4: λ3* = −0.0114 for 0.0677). The accelerations enter in the torque
    form: the innovation M(q, λ)·(qdd − qdd(x, τ)) = Y(q, qd, qdd) λ − τ of the recorded sample (the
    same measurement, premultiplied by M), linear in λ, so the update is exact in λ whatever the
    estimate, with the noise diag(σ_τ²) + M diag(σ_qdd²) Mᵀ it carries. While the estimate is not a
    physical model (M(q, λ) not positive definite: λ0 = 0.1 on hyper9 is, for its first 2.5 s), its
    forward dynamics mean nothing: the predict then takes the recorded acceleration (noise σ_qdd) and
    leaves λ out of F, and the filter is a recursive least squares in λ until M turns positive
    definite (``non_physical_samples`` counts those samples). Without measured accelerations (seed004,
    birdy) the model always predicts.

    Presets (``preset``; any option given explicitly overrides the preset's value):

    - ``auto``: q, qd and qdd measured; measurement noise estimated from the data (third differences, robust), with a
      floor of ``noise_floor`` (1e-3; birdy's 1e-4) times each signal's spread for the Euler step's own error
      (below it, on exact data, the filter is chaotic: on seed 004's noise-free PRRRP record a
      floor of 1e-4 ended within 3e-5 of the truth or, from a λ0 changed by 1e-9, in a singular
      mass matrix at 4.5 s; at 1e-3 it ends within 0.11 % either way); torque
      noise mapped through M⁻¹ into the velocity process noise and through M into the torque form's;
      parameter prior λ0 = 0.1 with std 1; a tempered start (R inflated by
      1 + tempering·e^(−t/warmup_s), so the first steps, far from the parameters,
      move gently: on hyper9 the estimate turns physical at 2.5 s with it, at 8 s without) and
      parameter process noise 1e-6 annealed as e^(−t/annealing_s).
    - ``seed004``: the seed's Eq. 44: λ0 = 0.1, P0 with every entry 1, Q = I, R = 10·I, positions
      and velocities measured (the states start at the first measurement rather than 0.1).
    - ``birdy``: BIRDy's choice: P0_λ = 0.15·diag(|λ0| + 1e-3), parameter process noise 1e-6
      annealed, noise of the measurements from the data.

    The stream is read once, in time order; at the start of each further experiment of a
    multi-recording dataset the states restart from its first measurement while λ and its
    covariance carry on. The velocity dead-band does not apply (the filter uses whole samples).

    Torque noise enters as input noise and in the torque form's residual (correlated, see above); the
    acceleration's noise enters the regressor of the torque form, so it biases the estimate like errors
    in variables, as it does least squares on the same data.

    Engine (``engine``): ``compiled`` runs the step compiled (numba, cached on disk:
    :mod:`~robotid_sim_plugins.ekf.ekf_kernel`, the loop over samples too) where the robot's chain
    compiles, otherwise and with ``filterpy`` filterpy's filter in a Python loop; ``auto`` (the default) is
    ``compiled`` from :data:`AUTO_COMPILED_SAMPLES` samples on: the first compilation takes about 40 s (a
    fresh install's first EKF run, the default scenario's included, would wait that long for a fit of a few
    seconds); the same numbers
    to rounding (on well-conditioned data; on exact data both can part where the filter is
    sensitive to rounding). ``stream(problem)`` gives the same filter for streaming use, one
    ``update(t, q, qd, qdd, tau)`` per sample (``robotid-sim identify --online``).

    The covariance is symmetrised after every step and checked positive definite (filterpy path:
    Cholesky after every update; compiled: its diagonal after every update, Cholesky at the 200
    eigenvalue checks); the run stops with an error if it is not. Result: the final λ with the filter's parameter
    covariance; the history holds λ and its standard deviation over time.

    Diagnostics: ``condition_number`` (of the base regressor on the data), ``preset``,
    ``measurements``, ``noise_std`` (the R used, per signal), ``covariance_min_eigenvalue``
    (smallest eigenvalue of P at 200 evenly spaced steps and the last), ``seconds_per_step`` (wall-clock) and
    ``cpu_seconds_per_step`` (the thread's CPU time) of the filter's loop per sample,
    ``iterations`` (samples), ``model_evaluations`` (states the model is evaluated at: 2n + 4 per sample, the
    forward dynamics, 2n + 1 for the Jacobian, the regressor there and at the recorded sample),
    ``converged`` (the estimate moved less than 1 % over the last 10 % of the stream), ``compiled``,
    ``non_physical_samples`` (samples whose estimate had a mass matrix not positive definite, see above),
    ``resolved_options`` (every option with the value that ran, presets resolved: see
    :meth:`resolved_options`).

    Before ``fit``, ``get_params()`` returns the options as given (``None``: the preset's value); after it, each
    preset option shows the value that ran (:meth:`resolved_params`), and the fitted model keeps them all in
    ``model.diagnostics["resolved_options"]``.
    """

    name = "ekf"
    #: the Euler step (Eq. 43) is an approximation of the continuous motion, so noise-free data is not fitted
    #: exactly: about 1e-4 relative on seed 004's 200 Hz PRRRP study, worse at coarser steps (the contract's
    #: 12 s at 50 Hz is too short and too coarse for it)
    biased = True

    class Options(EstimatorOptions):
        preset: Literal["auto", "seed004", "birdy"] = Field("auto", description="initialisation and noise model")
        measurements: list[Literal["q", "qd", "qdd"]] | None = Field(
            None, min_length=1, description="measured signals used in the update (default: the preset's)"
        )
        initial_parameters: float | list[float] | None = Field(
            None, description="λ0: one value for all, or one per base parameter (default 0.1, seed 004 Eq. 44)"
        )
        parameter_std: float | None = Field(None, gt=0, description="prior std of each parameter (auto: 1)")
        parameter_noise: float | None = Field(None, ge=0, description="parameter process noise variance at t = 0")
        annealing_s: float | None = Field(None, gt=0, description="parameter process noise decays as e^(-t/this)")
        tempering: float | None = Field(None, ge=0, description="R inflated by 1 + tempering·e^(-t/warmup_s)")
        warmup_s: float = Field(2.0, gt=0, description="time constant of the tempered start (s)")
        noise_floor: float | None = Field(
            None,
            ge=0,
            lt=1,
            description="floor of each measurement noise std, relative to the signal's spread (auto: 1e-3, birdy: "
            "1e-4)",
        )
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")
        engine: Literal["auto", "compiled", "filterpy"] = Field(
            "auto",
            description=f"compiled: the compiled step where the robot's chain compiles (the same numbers; numba "
            f"compiles it on first use, about 40 s, then loads it from its disk cache); filterpy: filterpy's "
            f"ExtendedKalmanFilter in a Python loop (any model); auto: the EKF compiled from "
            f"{AUTO_COMPILED_SAMPLES:,} samples on, where it saves more than its first compilation costs, else "
            "filterpy; the sampling filters' process model compiled always (its first compilation about 20 s), the "
            "UKF's and CDKF's whole sample as one compiled call with compiled, or auto from as many samples",
        )

        @model_validator(mode="after")
        def _seed_fixes_p0(self):
            if self.preset == "seed004" and self.parameter_std is not None:
                raise ValueError(
                    "preset 'seed004' sets P0 with every entry 1 (Eq. 44), so 'parameter_std' would be ignored; "
                    "remove it or choose preset 'auto' or 'birdy'"
                )
            return self

    #: what this filter's ``auto`` preset sets unlike the EKF's (the sigma-point filters' tighter prior)
    auto_overrides: ClassVar[dict] = {}
    #: ``engine: auto`` compiles from this many samples on (the EKF's step: :data:`AUTO_COMPILED_SAMPLES`)
    compile_from: ClassVar[int] = AUTO_COMPILED_SAMPLES

    def preset_value(self, key: str):
        """The value of option ``key`` that runs: the one given, else the preset's."""
        value = getattr(self, key)
        if value is not None:
            return value
        return (
            self.auto_overrides.get(key, PRESETS["auto"][key]) if self.preset == "auto" else PRESETS[self.preset][key]
        )

    def _initial_parameters(self, names: list[str]) -> np.ndarray:
        b = len(names)
        value = DEFAULT_INITIAL_PARAMETER if self.initial_parameters is None else self.initial_parameters
        lam = np.full(b, float(value)) if np.ndim(value) == 0 else np.asarray(value, float)
        if lam.shape != (b,) or not np.all(np.isfinite(lam)):
            raise ConfigError(
                f"estimator 'ekf': option 'initial_parameters' must be one number or {b} (one per base parameter "
                f"{names}), got {self.initial_parameters!r}"
            )
        return lam

    def check_structure(self, structure) -> None:
        self._initial_parameters(structure.base_parameters().names)

    def noise_schedule(self, signals: dict[str, np.ndarray], lam0: np.ndarray) -> NoiseSchedule:
        """The resolved :class:`NoiseSchedule` for the recorded ``signals`` ({"q", "qd", "qdd", "tau": (N, n)})
        and the initial parameters λ0 (b,)."""
        noise = [self.preset_value(k) for k in ("parameter_noise", "annealing_s", "tempering")]
        if self.preset == "seed004":
            return NoiseSchedule.seed004(signals["q"].shape[1], lam0.shape[0], *noise, self.warmup_s)
        parameter_std = self.preset_value("parameter_std")
        p_lam = 0.15 * (np.abs(lam0) + 1e-3) if self.preset == "birdy" and parameter_std is None else parameter_std**2
        variance = np.broadcast_to(p_lam, lam0.shape)
        return NoiseSchedule.from_data(signals, self.preset_value("noise_floor"), variance, *noise, self.warmup_s)

    def resolved_options(self, process: EulerProcessModel, schedule: NoiseSchedule, lam0: np.ndarray) -> dict:
        """Every option with the value that ran (``diagnostics['resolved_options']`` of the fitted model).

        ``get_params()`` keeps the options as given (``None``: the preset's); here each is concrete:
        ``measurements`` the signals used, ``initial_parameters`` λ0 (b values), ``parameter_std`` the prior
        std of each parameter (√ of P0's diagonal; seed 004's P0 has every entry 1), ``parameter_noise``,
        ``annealing_s`` (``None``: not annealed) and ``tempering`` (0: none) the preset's or the given values.
        """
        b = lam0.shape[0]
        return {
            "preset": self.preset,
            "measurements": list(process.measurements),
            "initial_parameters": lam0.tolist(),
            "parameter_std": np.sqrt(np.diag(schedule.initial_covariance)[-b:]).tolist(),
            "parameter_noise": float(schedule.parameter_noise),
            "annealing_s": None if schedule.annealing_s is None else float(schedule.annealing_s),
            "tempering": float(schedule.tempering),
            "warmup_s": self.warmup_s,
            "noise_floor": self.preset_value("noise_floor"),
            "check_excitation": self.check_excitation,
            "engine": self.engine,
        } | {k: getattr(self, k) for k in type(self).Options.model_fields if k not in EKFEstimator.Options.model_fields}

    def resolved_params(self, model) -> dict:
        """The preset options as they ran (from ``model.diagnostics['resolved_options']``), as option values.

        ``parameter_std`` only where one value is an option's value: seed 004 fixes P0 (the option stays unset) and
        birdy's prior std differs per parameter (it is in the diagnostics).
        """
        ran = model.diagnostics["resolved_options"]
        keys = ("measurements", "initial_parameters", "parameter_noise", "tempering", "noise_floor")
        resolved = {k: ran[k] for k in keys}
        if self.preset != "seed004" and len(set(ran["parameter_std"])) == 1:
            resolved["parameter_std"] = ran["parameter_std"][0]
        if ran["annealing_s"] is not None:
            resolved["annealing_s"] = ran["annealing_s"]
        return resolved

    def setup(self, problem) -> tuple[EulerProcessModel, NoiseSchedule, np.ndarray, dict, np.ndarray, set]:
        """What a run on ``problem`` needs: (process model, noise schedule, λ0, the signals {"q", "qd", "qdd",
        "tau": (N, n)}, sample times (N,), the first sample of each recording). The process model carries the
        compiled chain where ``engine`` is auto and the chain compiles."""
        from robotid_sim_plugins.ekf.compiled import CompiledChain  # numba kernels: on first use

        ds = problem.dataset
        signals = {k: np.asarray(getattr(ds, k), float) for k in (*SIGNALS, "tau")}
        lam0 = self._initial_parameters(problem.base_parameter_names)
        compiled = self.engine == "compiled" or (self.engine == "auto" and problem.n_samples >= self.compile_from)
        chain = CompiledChain.from_problem(problem) if compiled else None
        measurements = self.preset_value("measurements")
        process = EulerProcessModel(
            problem.base.regressor, problem.n_dof, problem.base.count, float(ds.dt), measurements, chain
        )
        starts = {sl.start for _, sl in problem.experiments}
        return process, self.noise_schedule(signals, lam0), lam0, signals, np.asarray(ds.t, float), starts

    def stream(self, problem):
        """A streaming run on ``problem``'s model and noise: an object whose ``update(t, q, qd, qdd, tau,
        restart=False)`` consumes one sample and returns the estimate λ (b,); over the recorded samples it gives
        ``fit``'s numbers. The noise schedule is resolved from ``problem``'s data (a calibration record)."""
        from robotid_sim_plugins.ekf.filter import CompiledEKF  # numba kernels: on first use
        from robotid_sim_plugins.ekf.stream import PythonEKF  # filterpy and scipy: on first use

        process, schedule, lam0, *_ = self.setup(problem)
        if process.chain is None:
            return PythonEKF(process, schedule, lam0)
        return CompiledEKF(process.chain, process, schedule, lam0)

    def run(self, process: EulerProcessModel, schedule: NoiseSchedule, signals, t, starts, lam0):
        """The :class:`~robotid_sim_plugins.ekf.filter.FilterRun` of the filter over the stream."""
        from robotid_sim_plugins.ekf.filter import run_compiled  # numba kernels: on first use
        from robotid_sim_plugins.ekf.stream import PythonEKF, run_stream  # filterpy and scipy: on first use

        if process.chain is None:
            return run_stream(PythonEKF(process, schedule, lam0), signals, t, starts)
        return run_compiled(process.chain, process, schedule, signals, t, starts, lam0)

    def evaluations_per_sample(self, process: EulerProcessModel) -> int:
        """States at which one sample evaluates the model: the EKF's 2n + 4 (see the class docstring)."""
        return 2 * process.n + 4

    def _fit(self, problem) -> BaseParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        with one_blas_thread():  # (2n + b)-sized products: BLAS threads only add overhead
            process, schedule, lam0, signals, t, starts = self.setup(problem)
            run = self.run(process, schedule, signals, t, starts, lam0)
        dt = process.dt
        history = stream_history(problem, run.history, run.recorded_at, t, dt, std=run.history_std)
        diagnostics = {
            "condition_number": cond,
            "preset": self.preset,
            "measurements": list(process.measurements),
            "noise_std": schedule.noise_std_by_signal(),
            "covariance_min_eigenvalue": min(run.min_eigenvalues),
            "seconds_per_step": run.seconds_per_step,
            "cpu_seconds_per_step": run.cpu_seconds_per_step,
            "iterations": int(t.shape[0]),
            "model_evaluations": int(t.shape[0]) * self.evaluations_per_sample(process),
            "converged": converged(run.history),
            "compiled": process.chain is not None,
            "non_physical_samples": run.non_physical_samples,
            "resolved_options": self.resolved_options(process, schedule, lam0),
            **problem.diagnostics(),
        }
        return BaseParameterModel.from_problem(
            problem, run.parameters, run.covariance, history=history, diagnostics=diagnostics
        )


def converged(history: np.ndarray) -> bool:
    """Whether the estimate settled: over the last :data:`SETTLED_FRACTION` of the recorded history (K, b) it moved
    less than :data:`SETTLED_CHANGE` relative to its norm."""
    last = history[-1]
    before = history[min(len(history) - 1, int((1.0 - SETTLED_FRACTION) * len(history)))]
    scale = np.linalg.norm(last)
    return bool(np.all(np.isfinite(last)) and np.linalg.norm(last - before) <= SETTLED_CHANGE * max(scale, 1e-300))
