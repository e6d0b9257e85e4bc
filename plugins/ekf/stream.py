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
from robotid_sim_plugins.ekf.noise import NoiseSchedule, ProcessNoise
from robotid_sim_plugins.ekf.process import EulerProcessModel, Linearization, SingularMassMatrix


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
        self.sample = None  # the recorded (q, qd, qdd) (n,) each of the sample being corrected
        self.non_physical_samples = 0  # the EKF's: see FilterRun

    @property
    @abstractmethod
    def x(self) -> np.ndarray:
        """(d,) the state estimate."""

    @property
    @abstractmethod
    def P(self) -> np.ndarray:
        """(d, d) its covariance."""

    def parameter_variance(self) -> np.ndarray:
        """(b,) the variance of each parameter, P's last diagonal entries."""
        return np.diag(self.P)[-self.lam0.shape[0] :]

    @abstractmethod
    def restart(self, x: np.ndarray, P: np.ndarray) -> None:
        """Set the state x (d,) and its covariance P (d, d)."""

    @abstractmethod
    def predict(self, tau: np.ndarray, qdd: np.ndarray, Q: ProcessNoise) -> None:
        """The Euler step with torque τ (n,), the process noise Q (by its blocks); qdd (n,) is the prior mean's."""

    @abstractmethod
    def correct(self, z: np.ndarray, tau: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """The update with the measurement z (m,) and torque τ (n,) at time t (s since the first sample), the
        noise R from :meth:`measurement_noise`; returns (qdd (n,), R_τ (n, n)) at the prior mean."""

    def measurement_noise(self, Minv: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(R (m, m) on the measured rows, R_τ (n, n)) at time t for the prior mean's M⁻¹ (n, n)."""
        tau_noise = self.schedule.torque_noise(Minv)
        return self.schedule.measurement_noise(tau_noise, t, self.process.rows), tau_noise

    def restart_at(self, q: np.ndarray, qd: np.ndarray) -> None:
        """Restart the states at the measured q, qd (n,) each (a new recording): λ carries on with its covariance
        (λ0 and the prior at the first sample), the rest of P from the prior."""
        n = self.process.n
        lam = self.lam0 if self.samples == 0 else self.x[2 * n :]
        P = self.schedule.initial_covariance.copy()
        if self.samples:
            P[2 * n :, 2 * n :] = self.P[2 * n :, 2 * n :]
        self.restart(np.concatenate([q, qd, lam]), P)
        self._previous_qdd = None

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
                self.restart_at(q, qd)
            elif self._pending is not None:
                tau_k, qdd_k, tau_noise, t_k = self._pending
                Q = self.schedule.process_noise(qdd_k, self._previous_qdd, tau_noise, t_k, process.dt)
                self.predict(tau_k, qdd_k, Q)
                self._previous_qdd = qdd_k
            z = process.measurement(q[None], qd[None], qdd[None])[0]
            self.sample = (q, qd, qdd)
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
    t0, cpu0 = time.perf_counter(), time.thread_time()
    for k in range(N):
        flt.update(t[k], q[k], qd[k], qdd[k], tau[k], restart=k in starts)
        if trace.due(k):
            trace.record(k, flt)
    seconds, cpu = (time.perf_counter() - t0) / N, (time.thread_time() - cpu0) / N
    return FilterRun(
        flt.x[-b:].copy(),
        flt.P[-b:, -b:].copy(),
        np.array(trace.values),
        np.array(trace.std),
        np.array(trace.at),
        trace.eigen,
        seconds,
        cpu,
        flt.non_physical_samples,
    )


class PythonEKF(StreamFilter):
    """The EKF on filterpy's ``ExtendedKalmanFilter`` (:class:`~robotid_sim_plugins.ekf.filter.EulerEKF`), a
    Python step per sample, for any model.

    Update (Eq. 25–27): q and qd measured directly; the accelerations in the torque form, the residual
    τ − Y(q, qd, qdd) λ of the recorded sample (the acceleration's innovation times M(q, λ): M (qdd − M⁻¹ (τ − h))
    = M qdd + h − τ), linear in λ, so the update does not depend on the model's forward dynamics and is exact in λ
    wherever the estimate is (a mass matrix not positive definite included); its noise
    :meth:`~robotid_sim_plugins.ekf.noise.NoiseSchedule.update_noise`. Predict (Eq. 23–24, 43): the Euler step of
    the forward dynamics linearised at the posterior, for correlated noise (:func:`posterior_linearization`), or,
    while the posterior's M(q, λ) is not positive definite
    and the accelerations are measured (the estimate is not a physical model: λ0 = 0.1 on hyper9), the recorded
    acceleration with no λ coupling (A = 0) and its noise. P symmetrised after each step and checked positive
    definite (Cholesky) after every update but the first.
    """

    name = "ekf"

    def __init__(self, process, schedule, lam0):
        super().__init__(process, schedule, lam0)
        self.kf = EulerEKF(process)
        self._lin = None  # the linearisation at the last posterior (None: a restart)
        self._mass = None  # M(q, λ) at the prior where positive definite, for the update's noise

    @property
    def x(self):
        return self.kf.x[:, 0]

    @property
    def P(self):
        return self.kf.P

    def restart(self, x, P):
        self.kf.x, self.kf.P = x[:, None].copy(), P
        self._lin = None

    def predict(self, tau, qdd, Q):
        self.kf.F = self.process.F_jacobian(self._lin)
        self.kf.Q = parameter_noise_where_physical(Q, self._mass).dense()
        self.kf.predict(self._lin.qdd)
        self.kf.P = 0.5 * (self.kf.P + self.kf.P.T)

    def correct(self, z, tau, t):
        kf = self.kf
        if self._lin is None:  # a restart: M at the prior
            M = mass_matrix(self.process, kf.x[:, 0], tau)[0]
            self._mass = M if positive_definite(M) else None
        H, z, R = torque_form(self.process, self.schedule, self.sample, z, tau, self._mass, t)
        hx = H @ kf.x
        kf.update(z[:, None], lambda _x: H, lambda _x: hx, R=R)
        kf.P = 0.5 * (kf.P + kf.P.T)
        if self.samples:
            np.linalg.cholesky(kf.P)  # LinAlgError: the filter diverged
        self._lin, M, tau_noise, physical = posterior_linearization(
            self.process, self.schedule, kf.x[:, 0].copy(), tau, self.sample[2]
        )
        self._mass = M if physical else None
        self.non_physical_samples += not physical
        return self._lin.qdd, tau_noise


def parameter_noise_where_physical(Q: ProcessNoise, M) -> ProcessNoise:
    """Q as the EKF's predict takes it: without the parameters' process noise where the posterior is not a
    physical model (M None: the predict takes the recorded acceleration and leaves λ out of F, the filter is a
    recursive least squares in λ, exact, and that noise would only make it forget the data)."""
    return Q if M is not None else Q.without_parameters()


def torque_form(
    process: EulerProcessModel, schedule: NoiseSchedule, sample: tuple, z: np.ndarray, tau: np.ndarray, M, t: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The EKF's update in the torque form (see :class:`PythonEKF`): (H (m, d), the measurement (m,), R (m, m)) for
    the recorded ``sample`` (q, qd, qdd (n,) each), its measured rows z (m,) and torque τ (n,), M (n, n) at the
    prior (None: not positive definite), time t: q and qd rows H's unit rows, qdd rows [0, 0, Y(q, qd, qdd)]
    measuring τ. The predicted measurement is H x (linear)."""
    n, rows = process.n, process.rows
    torque = rows >= 2 * n
    H = np.zeros((rows.size, process.dim_x))
    H[np.flatnonzero(~torque), rows[~torque]] = 1.0
    H[torque, 2 * n :] = base_regressor(process, *sample)[rows[torque] - 2 * n]
    z = np.where(torque, tau[np.where(torque, rows - 2 * n, 0)], z)
    return H, z, schedule.update_noise(M, rows, t, temper_torque=False)


def posterior_linearization(
    process: EulerProcessModel, schedule: NoiseSchedule, x: np.ndarray, tau: np.ndarray, qdd: np.ndarray
) -> tuple[Linearization, np.ndarray, np.ndarray, bool]:
    """The EKF's linearisation at the posterior x (d,) with torque τ (n,) and the recorded acceleration qdd (n,)
    for the next predict (see :class:`PythonEKF`): (the linearisation, M (n, n), the torque noise of the velocity
    (n, n), whether it is the model's).

    Where M is not positive definite and the accelerations are measured: the recorded acceleration with A = 0 and
    the noise diag(σ_qdd²). Else the model's, for correlated noise where the accelerations are measured: the
    measured torque's noise ε_τ is the predict's input noise (on qd, w = −Δt M⁻¹ ε_τ) and in the torque rows'
    residual v = τ − Y(q, qd, qdd) λ = ε_τ + M ε_qdd, so C = E[w vᵀ] = −Δt M⁻¹ diag(σ_τ²). The filter for correlated
    noise (Simon, Optimal State Estimation, 2006, §7.1) predicts with w less its part explained by v, G v with
    G = M⁻¹ diag(σ_τ²) R_v⁻¹, R_v = diag(σ_τ²) + M diag(σ_qdd²) Mᵀ (the measured joints' rows; v and M at the
    posterior): the acceleration qdd(x, τ) − G v (the model's at the torque's conditional mean: the recorded one
    where ε_qdd is negligible), A at that acceleration with G Y added to its λ-columns, the torque noise
    M⁻¹ diag(σ_τ²) M⁻ᵀ − G diag(σ_τ²) M⁻ᵀ. The torque's noise, already in the update, does not move λ twice.

    Raises:
        SingularMassMatrix: M(q, λ) is singular.
    """
    n = process.n
    acc, M, Minv = forward_dynamics(process, x, tau)
    joints = process.rows[process.rows >= 2 * n] - 2 * n
    if joints.size and not positive_definite(M):
        lin = Linearization(x, np.array(qdd, dtype=float), np.zeros((n, process.dim_x)))
        return lin, M, np.diag(schedule.measurement_std["qdd"] ** 2), False
    tau_noise = schedule.torque_noise(Minv)
    G, Y = np.zeros((n, joints.size)), np.zeros((joints.size, process.b))
    if joints.size:
        Y = base_regressor(process, x[:n], x[n : 2 * n], np.asarray(qdd, dtype=float))[joints]
        variance = schedule.torque_std[joints] ** 2
        R = (M * schedule.measurement_std["qdd"] ** 2) @ M.T
        C = Minv[:, joints] * variance
        G = C @ np.linalg.inv(R[np.ix_(joints, joints)] + np.diag(variance))
        acc = acc - G @ (tau[joints] - Y @ x[2 * n :])
        tau_noise = tau_noise - G @ C.T
    A = acceleration_jacobian(process, x, acc, Minv)
    A[:, 2 * n :] += G @ Y
    return Linearization(x, acc, A), M, tau_noise, True


def acceleration_jacobian(process: EulerProcessModel, x: np.ndarray, qdd: np.ndarray, Minv: np.ndarray) -> np.ndarray:
    """(n, d) A = ∂qdd/∂x at state x (d,) and acceleration qdd (n,): the compiled chain's where there is one."""
    if process.chain is None:
        return process.acceleration_jacobian(x, qdd, Minv)
    from robotid_sim_plugins.ekf.compiled import acceleration_jacobian as compiled

    A = np.empty((process.n, process.dim_x))
    compiled(process.chain.arrays, np.ascontiguousarray(x), np.ascontiguousarray(qdd), np.ascontiguousarray(Minv), A)
    return A


def mass_matrix(process: EulerProcessModel, x: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M, M⁻¹) (n, n) at state x (d,) (τ (n,) the torque; M does not depend on it): :func:`forward_dynamics`'s.

    Raises:
        SingularMassMatrix: M(q, λ) is singular.
    """
    return forward_dynamics(process, x, tau)[1:]


def forward_dynamics(process: EulerProcessModel, x: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, ...]:
    """(qdd (n,), M, M⁻¹ (n, n)) at state x (d,) with torque τ (n,): the compiled chain's CRBA and RNEA where there
    is one, as the compiled step, else the regressor's.

    Raises:
        SingularMassMatrix: M(q, λ) is singular.
    """
    n = process.n
    if process.chain is None:
        qdd, Minv = process.forward_dynamics(x, tau)
        return qdd, np.linalg.inv(Minv), Minv
    from robotid_sim_plugins.ekf.compiled import forward_one

    qdd, M, Minv = np.empty(n), np.empty((n, n)), np.empty((n, n))
    if not forward_one(process.chain.arrays, np.ascontiguousarray(x), np.ascontiguousarray(tau), qdd, M, Minv):
        raise SingularMassMatrix
    return qdd, M, Minv


def base_regressor(process: EulerProcessModel, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """(n, b) the base regressor at one recorded sample q, qd, qdd (n,): the compiled chain's where there is one."""
    if process.chain is None:
        return process.regressor(q[None], qd[None], qdd[None])[0]
    from robotid_sim_plugins.ekf.compiled import base_regressor as compiled

    Y = np.empty((1, process.n, process.b))
    compiled(process.chain.arrays, *(np.ascontiguousarray(v[None]) for v in (q, qd, qdd)), Y)
    return Y[0]


def positive_definite(M: np.ndarray) -> bool:
    """Whether the symmetric M (its lower triangle) has a Cholesky factor."""
    try:
        np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        return False
    return True
