"""The EKF's loop: filterpy's ``ExtendedKalmanFilter`` over the stream, one update and one predict per sample.

Imported when an ``ekf`` fit starts (filterpy and scipy are not needed before). Symbols as in
:mod:`robotid_sim_plugins.ekf.process`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from filterpy.kalman import ExtendedKalmanFilter
from robotid_sim_plugins.ekf.noise import NoiseSchedule
from robotid_sim_plugins.ekf.process import EulerProcessModel, SingularMassMatrix

from robotid_sim.errors import IdentificationError
from robotid_sim.identification.online import history_stride

#: the covariance's smallest eigenvalue is computed at this many evenly spaced steps (Cholesky checks every step)
EIGEN_CHECKS = 200


class EulerEKF(ExtendedKalmanFilter):
    """filterpy's EKF whose state prediction is the process model's ``fx(x, u)`` (seed 004 Eq. 42–43), the
    acceleration u (n,) passed to ``predict(u)``; the covariance prediction is filterpy's F P Fᵀ + Q."""

    def __init__(self, process: EulerProcessModel):
        super().__init__(process.dim_x, process.dim_z)
        self.process = process

    def predict_x(self, u=0):
        self.x = self.process.fx(self.x, u)


@dataclass(frozen=True)
class FilterRun:
    """What one pass of the filter produced.

    Attributes:
        parameters: (b,) the final λ.
        covariance: (b, b) the filter's final covariance of λ.
        history: (K, b) λ at the recorded samples; ``history_std`` (K, b) its standard deviation.
        history_std: see ``history``.
        recorded_at: (K,) the recorded sample indices.
        min_eigenvalues: the smallest eigenvalue of P at :data:`EIGEN_CHECKS` evenly spaced samples and the last.
        seconds_per_step: wall-clock time per sample.
    """

    parameters: np.ndarray
    covariance: np.ndarray
    history: np.ndarray
    history_std: np.ndarray
    recorded_at: np.ndarray
    min_eigenvalues: list[float]
    seconds_per_step: float


class _Trace:
    """Records λ and its std every ``stride`` samples and P's smallest eigenvalue every ``check_every``."""

    def __init__(self, samples: int, b: int):
        self.last, self.b = samples - 1, b
        self.stride = history_stride(samples, 1)
        self.check_every = max(1, samples // EIGEN_CHECKS)
        self.values, self.std, self.at, self.eigen = [], [], [], []

    def record(self, k: int, x: np.ndarray, P: np.ndarray) -> None:
        b = self.b
        if k % self.stride == 0 or k == self.last:
            self.values.append(x[-b:].copy())
            self.std.append(np.sqrt(np.clip(np.diag(P)[-b:], 0, None)))
            self.at.append(k)
        if k % self.check_every == 0 or k == self.last:
            self.eigen.append(float(np.linalg.eigvalsh(P)[0]))


def _restart(kf: EulerEKF, schedule: NoiseSchedule, k: int, q0, qd0, lam0) -> None:
    """A new recording at sample k: the states restart from its first measurement (q0, qd0 (n,)), with P0's
    blocks; λ and its covariance carry on (from ``lam0`` (b,) and P0 at k = 0)."""
    n2 = q0.shape[0] * 2
    lam = lam0 if k == 0 else kf.x[n2:, 0]
    kf.x = np.concatenate([q0, qd0, lam])[:, None]
    P = schedule.initial_covariance.copy()
    if k:  # λ and its covariance carry on
        P[n2:, n2:] = kf.P[n2:, n2:]
    kf.P = P


def _check_positive_definite(P: np.ndarray, t: float, k: int) -> None:
    try:
        np.linalg.cholesky(P)
    except np.linalg.LinAlgError:
        raise IdentificationError(
            f"estimator 'ekf': the state covariance lost positive definiteness at t = {t:.4g} s "
            f"(sample {k}): the filter diverged. Try preset 'auto', a smaller 'parameter_std' or better "
            "'initial_parameters'"
        ) from None


def _linearize(process: EulerProcessModel, x: np.ndarray, tau: np.ndarray, t: float, k: int):
    try:
        return process.linearize(x, tau)
    except SingularMassMatrix:
        raise IdentificationError(
            f"estimator 'ekf': the mass matrix of the estimate is singular at t = {t:.4g} s (sample {k}); "
            "the filter left the physical parameters. Start from better 'initial_parameters' (e.g. CAD "
            "values) or use preset 'auto' with a larger 'tempering'"
        ) from None


def run_filter(
    process: EulerProcessModel, schedule: NoiseSchedule, signals: dict, t: np.ndarray, starts: set, lam0: np.ndarray
) -> FilterRun:
    """One pass over the stream in time order: per sample k, update with z_k (Eq. 25–27), then predict to k + 1
    with τ_k (Eq. 23–24, 43), the dynamics linearised at the prior; P is symmetrised after each.

    Args:
        process: the process and measurement model.
        schedule: the noise schedule.
        signals: {"q", "qd", "qdd", "tau": (N, n)} the recorded signals.
        t: (N,) sample times (s).
        starts: the first sample of each recording (the states restart there, λ carries on).
        lam0: (b,) the initial parameters λ0.

    Raises:
        IdentificationError: the mass matrix became singular or P lost positive definiteness.
    """
    kf, N, dt = EulerEKF(process), t.shape[0], process.dt
    z = process.measurement(signals["q"], signals["qd"], signals["qdd"])
    trace = _Trace(N, lam0.shape[0])
    t0 = time.perf_counter()
    previous_qdd = None
    for k in range(N):
        if k in starts:  # a new recording
            _restart(kf, schedule, k, signals["q"][k], signals["qd"][k], lam0)
            previous_qdd = None
        lin = _linearize(process, kf.x[:, 0].copy(), signals["tau"][k], t[k], k)
        tau_noise = schedule.torque_noise(lin.mass_matrix_inverse)
        R = schedule.measurement_noise(tau_noise, t[k] - t[0])[np.ix_(process.rows, process.rows)]
        H, hx = process.H_jacobian(lin), process.hx(lin)
        kf.update(z[k][:, None], lambda _x, H=H: H, lambda _x, hx=hx: hx, R=R)
        kf.P = 0.5 * (kf.P + kf.P.T)
        if k > 0:
            _check_positive_definite(kf.P, t[k], k)
        trace.record(k, kf.x[:, 0], kf.P)
        if k == N - 1 or (k + 1) in starts:
            continue
        kf.F = process.F_jacobian(lin)
        kf.Q = schedule.process_noise(lin.qdd, previous_qdd, tau_noise, t[k] - t[0], dt)
        previous_qdd = lin.qdd
        kf.predict(lin.acceleration_at(kf.x[:, 0]))
        kf.P = 0.5 * (kf.P + kf.P.T)
    b = lam0.shape[0]
    return FilterRun(
        np.array(trace.values[-1]),
        np.array(kf.P[-b:, -b:]),
        np.array(trace.values),
        np.array(trace.std),
        np.array(trace.at),
        trace.eigen,
        (time.perf_counter() - t0) / N,
    )
