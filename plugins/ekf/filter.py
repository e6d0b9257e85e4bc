"""The EKF's runs: filterpy's ``ExtendedKalmanFilter`` for the process model (:class:`EulerEKF`, stepped by
:class:`~robotid_sim_plugins.ekf.stream.PythonEKF`), the compiled step (:class:`CompiledEKF`,
:func:`run_compiled`), and what a run of any filter records (:class:`Trace`, :class:`FilterRun`).

Imported when a fit starts (filterpy and scipy are not needed before). Symbols as in
:mod:`robotid_sim_plugins.ekf.process`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from filterpy.kalman import ExtendedKalmanFilter
from robotid_sim_plugins.ekf.noise import NoiseSchedule
from robotid_sim_plugins.ekf.process import EulerProcessModel

from robotid_sim.errors import IdentificationError
from robotid_sim.identification.online import history_stride

#: the covariance's smallest eigenvalue is computed at this many evenly spaced steps
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
        cpu_seconds_per_step: the thread's CPU time per sample (the same loop; less inflated than the wall-clock
            time by other processes on a loaded machine).
        non_physical_samples: the EKF's samples whose posterior had a mass matrix not positive definite (predicted
            with the recorded acceleration); 0 for the other filters.
    """

    parameters: np.ndarray
    covariance: np.ndarray
    history: np.ndarray
    history_std: np.ndarray
    recorded_at: np.ndarray
    min_eigenvalues: list[float]
    seconds_per_step: float
    cpu_seconds_per_step: float
    non_physical_samples: int = 0


class Trace:
    """Records λ and its std every ``stride`` samples and P's smallest eigenvalue every ``check_every``."""

    def __init__(self, samples: int, b: int):
        self.last, self.b = samples - 1, b
        self.stride = history_stride(samples, 1)
        self.check_every = max(1, samples // EIGEN_CHECKS)
        self.values, self.std, self.at, self.eigen = [], [], [], []

    def due(self, k: int) -> bool:
        """Whether sample k is recorded (then :meth:`record` wants the covariance)."""
        return k % self.stride == 0 or k % self.check_every == 0 or k == self.last

    def record(self, k: int, flt) -> None:
        """Record the filter ``flt``'s state at sample k where due (its ``x``, ``parameter_variance()`` and, at the
        eigenvalue checks only, its covariance ``P``: a square-root filter forms P from its factor)."""
        b = self.b
        if k % self.stride == 0 or k == self.last:
            self.values.append(flt.x[-b:].copy())
            self.std.append(np.sqrt(np.clip(flt.parameter_variance(), 0, None)))
            self.at.append(k)
        if k % self.check_every == 0 or k == self.last:
            self.eigen.append(smallest_eigenvalue(flt.P))


def smallest_eigenvalue(P: np.ndarray) -> float:
    """The smallest eigenvalue of the symmetric P (d, d) alone (LAPACK's dsyevx on one index: about half the time
    of every eigenvalue on the hyper9 filters' 118 states)."""
    from scipy.linalg import eigh

    return float(eigh(P, eigvals_only=True, subset_by_index=[0, 0], driver="evx", check_finite=False)[0])


def diverged(name: str, t: float, k: int) -> IdentificationError:
    """The error of filter ``name`` whose state covariance lost positive definiteness at sample k, time t."""
    return IdentificationError(
        f"estimator '{name}': the state covariance lost positive definiteness at t = {t:.4g} s "
        f"(sample {k}): the filter diverged. Try preset 'auto', a smaller 'parameter_std' or better "
        "'initial_parameters'"
    )


def singular(name: str, t: float, k: int) -> IdentificationError:
    """The error of filter ``name`` whose estimate has a singular mass matrix at sample k, time t."""
    return IdentificationError(
        f"estimator '{name}': the mass matrix of the estimate is singular at t = {t:.4g} s (sample {k}); "
        "the filter left the physical parameters. Start from better 'initial_parameters' (e.g. CAD "
        "values) or use preset 'auto' with a larger 'tempering'"
    )


class CompiledEKF:
    """The EKF's compiled step (:mod:`~robotid_sim_plugins.ekf.ekf_kernel`) for a streaming run: one
    :meth:`update` per sample, the numbers of :func:`run_compiled` (which runs the same step in one compiled loop).

    Args:
        chain: the :class:`~robotid_sim_plugins.ekf.compiled.CompiledChain`.
        process: the process model (its measured rows and Δt).
        schedule: the noise schedule.
        lam0: (b,) the initial parameters λ0.
    """

    def __init__(self, chain, process: EulerProcessModel, schedule: NoiseSchedule, lam0: np.ndarray):
        from robotid_sim_plugins.ekf.ekf_kernel import EKFState

        self.chain, self.process = chain, process
        self.noise = schedule.kernel_noise(process.rows, process.dt, lam0)
        self.state = EKFState(process.n, process.dim_x)
        self.samples = 0
        self._arrays = (chain.arrays, *self.state.arrays)  # the kernel's leading arguments, built once per stream

    def update(self, t: float, q, qd, qdd, tau, restart: bool = False) -> np.ndarray:
        """Consume one sample (t (s), q, qd, qdd, τ (n,) each; ``restart``: it starts a new recording, the first
        sample always does) and return the estimate λ (b,).

        Raises:
            IdentificationError: the mass matrix became singular or P lost positive definiteness.
        """
        from robotid_sim_plugins.ekf.ekf_kernel import OK, SINGULAR, ekf_sample

        q, qd, qdd, tau = (np.ascontiguousarray(v, dtype=float) for v in (q, qd, qdd, tau))
        z = np.concatenate((q, qd, qdd))[self.process.rows]  # the measured rows (process.measurement of one sample)
        restart = restart or self.samples == 0
        code = ekf_sample(*self._arrays, q, qd, qdd, z, tau, float(t), restart, self.noise)
        if code != OK:
            raise (singular if code == SINGULAR else diverged)("ekf", t - self.state.t[1], self.samples)
        self.samples += 1
        return self.state.x[2 * self.process.n :].copy()


def run_compiled(
    chain, process: EulerProcessModel, schedule: NoiseSchedule, signals: dict, t: np.ndarray, starts: set, lam0
) -> FilterRun:
    """The EKF over the stream on the compiled step (:class:`CompiledEKF`), the loop over samples compiled too:
    the numbers of :class:`~robotid_sim_plugins.ekf.stream.PythonEKF` (filterpy's filter) to rounding."""
    from robotid_sim_plugins.ekf.ekf_kernel import OK, SINGULAR, ekf_run

    stream = CompiledEKF(chain, process, schedule, lam0)
    N, b = t.shape[0], lam0.shape[0]
    trace = Trace(N, b)
    records, checks = _count(N, trace.stride), _count(N, trace.check_every)
    hist, hist_std = np.empty((records, b)), np.empty((records, b))
    at = np.empty(records, dtype=np.int64)
    eigen = np.empty(checks)
    z = np.ascontiguousarray(process.measurement(signals["q"], signals["qd"], signals["qdd"]))
    first = np.zeros(N, dtype=np.bool_)
    first[sorted(starts)] = True
    q, qd, qdd, tau = (np.ascontiguousarray(signals[k], dtype=float) for k in ("q", "qd", "qdd", "tau"))
    t0, cpu0 = time.perf_counter(), time.thread_time()
    code, k = ekf_run(
        chain.arrays, stream.state.arrays, q, qd, qdd, z, tau, np.ascontiguousarray(t, dtype=float), first,
        stream.noise, trace.stride, trace.check_every, hist, hist_std, at, eigen,
    )  # fmt: skip
    seconds, cpu = (time.perf_counter() - t0) / N, (time.thread_time() - cpu0) / N
    if code != OK:
        raise (singular if code == SINGULAR else diverged)("ekf", t[k] - t[0], k)
    x, P = stream.state.x, stream.state.P
    non_physical = int(stream.state.flags[4])
    return FilterRun(x[-b:].copy(), P[-b:, -b:].copy(), hist, hist_std, at, eigen.tolist(), seconds, cpu, non_physical)


def _count(N: int, every: int) -> int:
    """Records of a trace every ``every`` samples and at the last one, over N samples."""
    return len(range(0, N, every)) + (0 if (N - 1) % every == 0 else 1)
