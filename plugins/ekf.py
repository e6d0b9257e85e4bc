"""Built-in estimator ``ekf``: the augmented-state extended Kalman filter of seed 004 (§2.4, §4.4, Eq. 21–29, 41–44)."""

from __future__ import annotations

import math
import time
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from robotid_sim.errors import ConfigError, IdentificationError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions
from robotid_sim.identification.online import history_stride, noise_std, stream_history

ROBOTID_SIM_PLUGIN_API = "1.1"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

SIGNALS = ("q", "qd", "qdd")
#: the covariance's smallest eigenvalue is computed at this many evenly spaced steps (Cholesky checks every step)
EIGEN_CHECKS = 200

#: what each preset sets (an option given explicitly overrides it)
PRESETS: dict[str, dict] = {
    # noise from the data, a tempered start and annealed parameter noise: converges from λ0 = 0.1
    "auto": {
        "measurements": ["q", "qd", "qdd"],
        "parameter_std": 1.0,
        "parameter_noise": 1e-6,
        "annealing_s": 2.0,
        "tempering": 1e4,
    },
    # seed 004 Eq. 44: x0 = 0.1, P0 all ones, Q = I, R = 10·I, positions and velocities measured
    "seed004": {
        "measurements": ["q", "qd"],
        "parameter_std": None,
        "parameter_noise": 1.0,
        "annealing_s": None,
        "tempering": 0.0,
    },
    # BIRDy: P0_λ = 0.15·diag(|β0| + 1e-3), parameter process noise 1e-6 with annealing
    "birdy": {
        "measurements": ["q", "qd"],
        "parameter_std": None,
        "parameter_noise": 1e-6,
        "annealing_s": 2.0,
        "tempering": 0.0,
    },
}


class EKFEstimator(Estimator):
    """Extended Kalman filter on the augmented state x = [q, qd, λ] (seed 004 Eq. 41), λ the base
    parameters, with constant-parameter dynamics (Eq. 42) and an Euler step Δt = the sample
    interval (Eq. 43), built on filterpy's ``ExtendedKalmanFilter`` (Eq. 23–27).

    The measured torque τ_k is the input. The model is the identified one: qdd =
    M(q, λ)⁻¹ (τ − h(q, qd, λ)) from the base regressor (M's columns and h are the regressor at
    unit and zero accelerations, times λ). The Jacobians (Eq. 28–29) come from the model, for
    any robot: ∂qdd/∂λ = −M⁻¹ Y(q, qd, qdd) exactly, ∂qdd/∂q and ∂qdd/∂qd by finite differences
    of the inverse dynamics, all from two batched regressor evaluations per sample.

    Measurements (``measurements``): the joint positions and velocities, and in the ``auto``
    preset the measured accelerations too, through h = qdd(x, τ_k) — with them the filter sees
    the dynamics at every sample instead of only through their double integral, which is what
    leaves seed 004's EKF far off on the small parameters (Table 4: λ3* = −0.0114 for 0.0677).

    Presets (``preset``; any option given explicitly overrides the preset's value):

    - ``auto``: measurement noise estimated from the data (third differences, robust), with a
      floor of ``noise_floor`` times each signal's spread for the Euler step's own error; torque
      noise mapped through M⁻¹ into the velocity process noise and the acceleration
      measurement; parameter prior λ0 = 0.1 with std 1; a tempered start (R inflated by
      1 + tempering·e^(−t/warmup_s), so the first steps, linearised far from the parameters,
      move gently) and parameter process noise 1e-6 annealed as e^(−t/annealing_s).
    - ``seed004``: the seed's Eq. 44: λ0 = 0.1, P0 with every entry 1, Q = I, R = 10·I, positions
      and velocities measured (the states start at the first measurement rather than 0.1).
    - ``birdy``: BIRDy's choice: P0_λ = 0.15·diag(|λ0| + 1e-3), parameter process noise 1e-6
      annealed, noise of the measurements from the data.

    The stream is read once, in time order; at the start of each further experiment of a
    multi-recording dataset the states restart from its first measurement while λ and its
    covariance carry on. The velocity dead-band does not apply (the filter uses whole samples).

    Torque noise enters as input noise: the prediction and the acceleration measurement both
    see it, so it biases the estimate like errors in variables (about (σ_τ/(M·rms qdd))² in
    relative terms); measurement noise on q, qd, qdd does not.

    The covariance is symmetrised after every step and checked positive definite (Cholesky);
    the run stops with an error if it is not. Result: the final λ with the filter's parameter
    covariance; the history holds λ and its standard deviation over time.

    Diagnostics: ``condition_number`` (of the base regressor on the data), ``preset``,
    ``measurements``, ``noise_std`` (the R used, per signal), ``covariance_min_eigenvalue``
    (smallest eigenvalue of P at 200 evenly spaced steps and the last), ``seconds_per_step``.
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
        noise_floor: float = Field(
            1e-4, ge=0, lt=1, description="floor of each measurement noise std, relative to the signal's spread"
        )
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")

        @model_validator(mode="after")
        def _seed_fixes_p0(self):
            if self.preset == "seed004" and self.parameter_std is not None:
                raise ValueError(
                    "preset 'seed004' sets P0 with every entry 1 (Eq. 44), so 'parameter_std' would be ignored; "
                    "remove it or choose preset 'auto' or 'birdy'"
                )
            return self

    def _setting(self, key: str):
        value = getattr(self, key)
        return PRESETS[self.preset][key] if value is None else value

    def _initial_parameters(self, names: list[str]) -> np.ndarray:
        b = len(names)
        value = 0.1 if self.initial_parameters is None else self.initial_parameters
        lam = np.full(b, float(value)) if np.ndim(value) == 0 else np.asarray(value, float)
        if lam.shape != (b,) or not np.all(np.isfinite(lam)):
            raise ConfigError(
                f"estimator 'ekf': option 'initial_parameters' must be one number or {b} (one per base parameter "
                f"{names}), got {self.initial_parameters!r}"
            )
        return lam

    def check_structure(self, structure) -> None:
        self._initial_parameters(structure.base_parameters().names)

    def _fit(self, problem) -> BaseParameterModel:
        from threadpoolctl import threadpool_limits

        cond = problem.check_excitation() if self.check_excitation else None
        with threadpool_limits(limits=1, user_api="blas"):  # (2n + b)-sized products: BLAS threads only add overhead
            return self._filter(problem, cond)

    def _filter(self, problem, cond) -> BaseParameterModel:
        ds = problem.dataset
        n, b, dt = problem.n_dof, problem.base.count, float(ds.dt)
        dim = 2 * n + b
        signals = {k: np.asarray(getattr(ds, k), float) for k in (*SIGNALS, "tau")}
        t = np.asarray(ds.t, float)
        N = t.shape[0]
        measured = list(self._setting("measurements"))
        rows = np.concatenate([np.arange(n) + n * SIGNALS.index(s) for s in SIGNALS if s in measured])
        lam0 = self._initial_parameters(problem.base_parameter_names)
        seed = self.preset == "seed004"
        if seed:
            sigma = {k: np.full(n, math.sqrt(10.0)) for k in SIGNALS}
            sigma_tau = np.zeros(n)
            P0 = np.ones((dim, dim))
        else:
            sigma = {k: np.maximum(noise_std(v), self.noise_floor * np.std(v, axis=0)) for k, v in signals.items()}
            sigma = {k: np.where(v > 0, v, 1e-12) for k, v in sigma.items()}
            sigma_tau = sigma.pop("tau")
            parameter_std = self._setting("parameter_std")
            p_lam = (
                0.15 * (np.abs(lam0) + 1e-3) if self.preset == "birdy" and parameter_std is None else parameter_std**2
            )
            P0 = np.diag(np.concatenate([sigma["q"] ** 2, sigma["qd"] ** 2, np.broadcast_to(p_lam, (b,))]))
        q_lam, annealing = self._setting("parameter_noise"), self._setting("annealing_s")
        tempering = self._setting("tempering")

        from robotid_sim.identification._euler_ekf import EulerEKF  # filterpy and scipy: on first use

        kf = EulerEKF(dim, rows.size, n, dt)
        starts = {sl.start for _, sl in problem.experiments}
        eye_n = np.eye(n)
        zero_acc = np.vstack([np.zeros((1, n)), eye_n])
        stride = history_stride(N, 1)
        check_every = max(1, N // EIGEN_CHECKS)
        hist, hist_std, at, eigen = [], [], [], []
        H = np.zeros((3 * n, dim))  # q and qd measured directly; the qdd rows are the dynamics' Jacobian A
        H[: 2 * n, : 2 * n] = np.eye(2 * n)
        R_measured = np.diag(np.concatenate([sigma["q"] ** 2, sigma["qd"] ** 2, sigma["qdd"] ** 2]))
        regressor = problem.base.regressor
        t0 = time.perf_counter()
        previous_qdd = None
        for k in range(N):
            if k in starts:  # a new recording: the states restart from its first measurement
                lam = lam0 if k == 0 else kf.x[2 * n :, 0]
                kf.x = np.concatenate([signals["q"][k], signals["qd"][k], lam])[:, None]
                P = P0.copy()
                if k:  # λ and its covariance carry on
                    P[2 * n :, 2 * n :] = kf.P[2 * n :, 2 * n :]
                kf.P = P
                previous_qdd = None
            x = kf.x[:, 0].copy()
            q, qd, lam = x[:n], x[n : 2 * n], x[2 * n :]
            tau = signals["tau"][k]
            # M and h at the prior state: the regressor at zero and unit accelerations, times λ
            Y = regressor(np.repeat(q[None], n + 1, 0), np.repeat(qd[None], n + 1, 0), zero_acc)
            h = Y[0] @ lam
            M = (Y[1:] @ lam).T - h[:, None]
            try:
                Minv = np.linalg.inv(M)
            except np.linalg.LinAlgError:
                Minv = None
            if Minv is None or not np.all(np.isfinite(Minv)):
                raise IdentificationError(
                    f"estimator 'ekf': the mass matrix of the estimate is singular at t = {t[k]:.4g} s (sample {k}); "
                    "the filter left the physical parameters. Start from better 'initial_parameters' (e.g. CAD "
                    "values) or use preset 'auto' with a larger 'tempering'"
                )
            qdd = Minv @ (tau - h)
            # ∂τ/∂q and ∂τ/∂qd at fixed qdd by forward differences, and Y(q, qd, qdd) for ∂qdd/∂λ: one batched call
            eps_q = 1e-6 * np.maximum(1.0, np.abs(q))
            eps_qd = 1e-6 * np.maximum(1.0, np.abs(qd))
            Qp = np.repeat(q[None], 2 * n + 1, 0)
            QDp = np.repeat(qd[None], 2 * n + 1, 0)
            Qp[1 : n + 1] += np.diag(eps_q)
            QDp[n + 1 :] += np.diag(eps_qd)
            Yp = regressor(Qp, QDp, np.repeat(qdd[None], 2 * n + 1, 0))
            tq = Yp @ lam
            dtau = ((tq[1:] - tq[0]) / np.concatenate([eps_q, eps_qd])[:, None]).T
            A = -Minv @ np.hstack([dtau, Yp[0]])  # ∂qdd/∂[q, qd, λ]
            tau_noise = Minv @ np.diag(sigma_tau**2) @ Minv.T
            # update with the measurement of sample k (Eq. 25–27): h = [q, qd, qdd(q, qd, τ_k; λ)]
            H[2 * n :] = A
            R = R_measured.copy()
            R[2 * n :, 2 * n :] += tau_noise
            if tempering:
                R *= 1.0 + tempering * math.exp(-(t[k] - t[0]) / self.warmup_s)
            z = np.concatenate([signals["q"][k], signals["qd"][k], signals["qdd"][k]])[rows]
            predicted = np.concatenate([q, qd, qdd])[rows]
            H_used = H[rows]
            kf.update(z[:, None], lambda _x, H=H_used: H, lambda _x, p=predicted: p[:, None], R=R[np.ix_(rows, rows)])
            kf.P = 0.5 * (kf.P + kf.P.T)
            posterior = kf.x[:, 0]
            if k > 0:
                try:
                    np.linalg.cholesky(kf.P)
                except np.linalg.LinAlgError:
                    raise IdentificationError(
                        f"estimator 'ekf': the state covariance lost positive definiteness at t = {t[k]:.4g} s "
                        f"(sample {k}): the filter diverged. Try preset 'auto', a smaller 'parameter_std' or better "
                        "'initial_parameters'"
                    ) from None
            if k % stride == 0 or k == N - 1:
                hist.append(posterior[2 * n :].copy())
                hist_std.append(np.sqrt(np.clip(np.diag(kf.P)[2 * n :], 0, None)))
                at.append(k)
            if k % check_every == 0 or k == N - 1:
                eigen.append(float(np.linalg.eigvalsh(kf.P)[0]))
            if k == N - 1 or (k + 1) in starts:
                continue
            # predict to sample k + 1 with τ_k (Eq. 23–24, 43), the dynamics linearised at the prior
            kf.qdd = qdd + A @ (posterior - x)
            F = np.eye(dim)
            F[:n, n : 2 * n] += dt * eye_n
            F[n : 2 * n] += dt * A
            if seed:  # Eq. 44: Q = I on the states
                Q = np.eye(dim)
            else:
                Q = np.zeros((dim, dim))
                Q[:n, :n] = np.diag((0.5 * dt**2 * qdd) ** 2 + 1e-6 * sigma["q"] ** 2)
                Q[n : 2 * n, n : 2 * n] = dt**2 * tau_noise + np.diag(1e-6 * sigma["qd"] ** 2)
                if previous_qdd is not None:  # the Euler step's own error, ½Δt²·jerk
                    Q[n : 2 * n, n : 2 * n] += np.diag((0.5 * dt * (qdd - previous_qdd)) ** 2)
            decay = 1.0 if annealing is None else math.exp(-(t[k] - t[0]) / annealing)
            Q[2 * n :, 2 * n :] = np.eye(b) * (q_lam * decay)
            previous_qdd = qdd
            kf.F, kf.Q = F, Q
            kf.predict()
            kf.P = 0.5 * (kf.P + kf.P.T)
        elapsed = time.perf_counter() - t0
        values = np.array(hist[-1])
        P_lam = np.array(kf.P[2 * n :, 2 * n :])
        history = stream_history(problem, np.array(hist), np.array(at), t, dt, std=np.array(hist_std))
        diagnostics = {
            "condition_number": cond,
            "preset": self.preset,
            "measurements": [s for s in SIGNALS if s in measured],
            "noise_std": {s: sigma[s].tolist() for s in SIGNALS} | {"tau": sigma_tau.tolist()},
            "covariance_min_eigenvalue": min(eigen),
            "seconds_per_step": elapsed / N,
            **problem.diagnostics(),
        }
        return BaseParameterModel.from_problem(problem, values, P_lam, history=history, diagnostics=diagnostics)


@hookimpl
def register_estimators(register):
    register("ekf", EKFEstimator)
