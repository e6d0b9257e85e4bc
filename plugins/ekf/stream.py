"""What every filter of this package does per sample, whatever its algebra: restart, predict, correct.

A filter consumes the stream one sample at a time (:meth:`StreamFilter.update`): the previous sample's
predict (Eq. 23–24, 43, with that sample's torque), or at the start of a recording the states from its first
measurement (λ and its covariance carry on), then the correction with this sample's measurement. The noise
of both comes from the :class:`~robotid_sim_plugins.ekf.noise.NoiseSchedule` at the prior mean: its forward
dynamics (qdd, M⁻¹) give the torque noise R_τ of the acceleration measurement and the Euler step's process
noise, as in the EKF. :func:`run_stream` is ``fit``: :meth:`~StreamFilter.update` over the recorded samples.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

import numpy as np
from robotid_sim_plugins.ekf.filter import EulerEKF, FilterRun, Trace, diverged, singular
from robotid_sim_plugins.ekf.noise import NoiseSchedule
from robotid_sim_plugins.ekf.process import EulerProcessModel, SingularMassMatrix


class StreamFilter(ABC):
    """A filter on the augmented state [q, qd, λ] of ``process`` with the noise ``schedule``.

    Subclasses keep the state x (d,) and covariance P (d, d) (or its factor) and define :meth:`restart`,
    :meth:`predict` and :meth:`correct`; :meth:`update` sequences them and turns numerical failures into
    :class:`~robotid_sim.errors.IdentificationError` naming the estimator.
    """

    #: the estimator's name, in error messages
    name = ""

    def __init__(self, process: EulerProcessModel, schedule: NoiseSchedule, lam0: np.ndarray):
        self.process, self.schedule, self.lam0 = process, schedule, np.asarray(lam0, float)
        self.samples = 0
        self.t0 = 0.0
        self._pending = None  # (τ, qdd at the mean, R_τ, t) of the last sample, for its predict
        self._previous_qdd = None

    @property
    @abstractmethod
    def x(self) -> np.ndarray:
        """(d,) the state estimate."""

    @property
    @abstractmethod
    def P(self) -> np.ndarray:
        """(d, d) its covariance."""

    @abstractmethod
    def restart(self, x: np.ndarray, P: np.ndarray) -> None:
        """Set the state x (d,) and its covariance P (d, d)."""

    @abstractmethod
    def predict(self, tau: np.ndarray, qdd: np.ndarray, Q: np.ndarray) -> None:
        """The Euler step with torque τ (n,), the process noise Q (d, d); qdd (n,) is the prior mean's."""

    @abstractmethod
    def correct(self, z: np.ndarray, tau: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """The update with the measurement z (m,) and torque τ (n,) at time t (s since the first sample), the
        noise R from :meth:`measurement_noise`; returns (qdd (n,), R_τ (n, n)) at the prior mean."""

    def measurement_noise(self, Minv: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(R (m, m) on the measured rows, R_τ (n, n)) at time t for the prior mean's M⁻¹ (n, n)."""
        tau_noise = self.schedule.torque_noise(Minv)
        rows = self.process.rows
        return self.schedule.measurement_noise(tau_noise, t)[np.ix_(rows, rows)], tau_noise

    def update(self, t: float, q, qd, qdd, tau, restart: bool = False) -> np.ndarray:
        """Consume one sample (t (s), q, qd, qdd, τ (n,) each; ``restart``: it starts a new recording, the first
        sample always does) and return the estimate λ (b,).

        Raises:
            IdentificationError: the mass matrix became singular or the covariance lost positive definiteness.
        """
        process, n = self.process, self.process.n
        q, qd, qdd, tau = (np.asarray(v, dtype=float) for v in (q, qd, qdd, tau))
        if self.samples == 0:
            self.t0, restart = float(t), True
        t_rel = float(t) - self.t0
        try:
            if restart:
                lam = self.lam0 if self.samples == 0 else self.x[2 * n :]
                P = self.schedule.initial_covariance.copy()
                if self.samples:
                    P[2 * n :, 2 * n :] = self.P[2 * n :, 2 * n :]
                self.restart(np.concatenate([q, qd, lam]), P)
                self._previous_qdd = None
            elif self._pending is not None:
                tau_k, qdd_k, tau_noise, t_k = self._pending
                Q = self.schedule.process_noise(qdd_k, self._previous_qdd, tau_noise, t_k, process.dt)
                self.predict(tau_k, qdd_k, Q)
                self._previous_qdd = qdd_k
            z = process.measurement(q[None], qd[None], qdd[None])[0]
            qdd_mean, tau_noise = self.correct(z, tau, t_rel)
        except SingularMassMatrix:
            raise singular(self.name, t_rel, self.samples) from None
        except np.linalg.LinAlgError:
            raise diverged(self.name, t_rel, self.samples) from None
        if not np.all(np.isfinite(self.x)):
            raise diverged(self.name, t_rel, self.samples)
        self._pending = (tau, qdd_mean, tau_noise, t_rel)
        self.samples += 1
        return self.x[2 * n :].copy()


def run_stream(flt: StreamFilter, signals: dict, t: np.ndarray, starts: set) -> FilterRun:
    """``fit``: :meth:`StreamFilter.update` over the recorded ``signals`` ({"q", "qd", "qdd", "tau": (N, n)})
    at times t (N,), the states restarting at each sample of ``starts``; λ and its std recorded as the EKF does.

    Raises:
        IdentificationError: the filter failed (see :meth:`StreamFilter.update`).
    """
    N, b = t.shape[0], flt.lam0.shape[0]
    trace = Trace(N, b)
    q, qd, qdd, tau = (signals[k] for k in ("q", "qd", "qdd", "tau"))
    t0 = time.perf_counter()
    for k in range(N):
        flt.update(t[k], q[k], qd[k], qdd[k], tau[k], restart=k in starts)
        if trace.due(k):
            trace.record(k, flt.x, flt.P)
    seconds = (time.perf_counter() - t0) / N
    return FilterRun(
        flt.x[-b:].copy(),
        flt.P[-b:, -b:].copy(),
        np.array(trace.values),
        np.array(trace.std),
        np.array(trace.at),
        trace.eigen,
        seconds,
    )


class PythonEKF(StreamFilter):
    """The EKF on filterpy's ``ExtendedKalmanFilter`` (:class:`~robotid_sim_plugins.ekf.filter.EulerEKF`), a
    Python step per sample, for any model: update with the dynamics linearised at the prior (Eq. 25–27),
    predict with that linearisation (Eq. 23–24, 43); P symmetrised after each and checked positive definite
    (Cholesky) after every update but the first."""

    name = "ekf"

    def __init__(self, process, schedule, lam0):
        super().__init__(process, schedule, lam0)
        self.kf = EulerEKF(process)
        self._lin = None

    @property
    def x(self):
        return self.kf.x[:, 0]

    @property
    def P(self):
        return self.kf.P

    def restart(self, x, P):
        self.kf.x, self.kf.P = x[:, None].copy(), P

    def predict(self, tau, qdd, Q):
        lin = self._lin
        self.kf.F, self.kf.Q = self.process.F_jacobian(lin), Q
        self.kf.predict(lin.acceleration_at(self.kf.x[:, 0]))
        self.kf.P = 0.5 * (self.kf.P + self.kf.P.T)

    def correct(self, z, tau, t):
        process, kf = self.process, self.kf
        lin = self._lin = process.linearize(kf.x[:, 0].copy(), tau)
        R, tau_noise = self.measurement_noise(lin.mass_matrix_inverse, t)
        H, hx = process.H_jacobian(lin), process.hx(lin)
        kf.update(z[:, None], lambda _x: H, lambda _x: hx, R=R)
        kf.P = 0.5 * (kf.P + kf.P.T)
        if self.samples:
            np.linalg.cholesky(kf.P)  # LinAlgError: the filter diverged
        return lin.qdd, tau_noise
