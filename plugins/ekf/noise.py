"""The EKF's noise schedule: the prior covariance, the measurement noise R(t) and the process noise Q(t).

Symbols as in :mod:`robotid_sim_plugins.ekf.process` (n joints, b base parameters, d = 2n + b); t is the time
since the stream's first sample (s). Every value is resolved (no preset or ``None`` left) when the schedule
is built, so the schedule says exactly what ran.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from robotid_sim_plugins.ekf.process import SIGNALS

from robotid_sim.identification.online import noise_std

#: seed 004 Eq. 44: the variance of every measurement, R = 10·I
SEED004_MEASUREMENT_VARIANCE = 10.0


@dataclass(frozen=True)
class ProcessNoise:
    """The process noise Q (d, d) of one Euler step by its blocks: every filter's Q is block-diagonal between the
    states [q, qd] and the parameters λ, its λ block diagonal (:meth:`NoiseSchedule.process_noise`), so the
    filters take the blocks (the sigma-point and square-root forms never form the (d, d) matrix).

    Attributes:
        states: (2n, 2n) the block of q and qd.
        parameters: (b,) the λ block's diagonal.
    """

    states: np.ndarray
    parameters: np.ndarray

    def dense(self) -> np.ndarray:
        """(d, d) Q."""
        n2 = self.states.shape[0]
        Q = np.zeros((n2 + self.parameters.shape[0],) * 2)
        Q[:n2, :n2] = self.states
        np.fill_diagonal(Q[n2:, n2:], self.parameters)
        return Q

    def without_parameters(self) -> ProcessNoise:
        """The same with no parameter noise."""
        return ProcessNoise(self.states, np.zeros_like(self.parameters))


@dataclass(frozen=True)
class NoiseSchedule:
    """Prior, measurement and process noise of the filter, with tempering and annealing.

    Attributes:
        measurement_std: {"q", "qd", "qdd": (n,)} σ of each measured signal; R_0 = diag(σ_q², σ_qd², σ_qdd²).
        torque_std: (n,) σ_τ of the torque, the input noise, mapped through M⁻¹ into R and Q.
        initial_covariance: (d, d) P0.
        parameter_noise: q_λ, the parameter process noise variance at t = 0.
        annealing_s: T_a: the parameter process noise is q_λ·e^(−t/T_a); None: constant q_λ.
        tempering: c: R(t) = (R_0 + R_τ)·(1 + c·e^(−t/T_w)); 0: no tempering.
        warmup_s: T_w (s), the tempering's time constant.
        unit_state_noise: True for seed 004's Q = I on the states (Eq. 44); False for the noise model of
            :meth:`process_noise`.
    """

    measurement_std: dict[str, np.ndarray]
    torque_std: np.ndarray
    initial_covariance: np.ndarray
    parameter_noise: float
    annealing_s: float | None
    tempering: float
    warmup_s: float
    unit_state_noise: bool

    @classmethod
    def seed004(cls, n: int, b: int, parameter_noise: float, annealing_s, tempering: float, warmup_s: float):
        """Seed 004 Eq. 44: R = 10·I, no torque noise, P0 with every entry 1, Q = I on the states."""
        return cls(
            {k: np.full(n, math.sqrt(SEED004_MEASUREMENT_VARIANCE)) for k in SIGNALS},
            np.zeros(n),
            np.ones((2 * n + b, 2 * n + b)),
            parameter_noise,
            annealing_s,
            tempering,
            warmup_s,
            unit_state_noise=True,
        )

    @classmethod
    def from_data(
        cls,
        signals: dict[str, np.ndarray],
        noise_floor: float,
        parameter_variance: np.ndarray,
        parameter_noise: float,
        annealing_s,
        tempering: float,
        warmup_s: float,
    ):
        """Noise estimated from the recorded signals, P0 = diag(σ_q², σ_qd², ``parameter_variance``).

        Args:
            signals: {"q", "qd", "qdd", "tau": (N, n)} the recorded signals. Each σ is the white-noise std of
                the signal (:func:`~robotid_sim.identification.online.noise_std`, third differences), at least
                ``noise_floor`` times the signal's spread (the Euler step's own error), and 1e-12 where zero.
            noise_floor: that floor, relative to each signal's spread.
            parameter_variance: (b,) the prior variance of each parameter λ_i.
            parameter_noise, annealing_s, tempering, warmup_s: as the attributes.
        """
        sigma = {k: np.maximum(noise_std(v), noise_floor * np.std(v, axis=0)) for k, v in signals.items()}
        sigma = {k: np.where(v > 0, v, 1e-12) for k, v in sigma.items()}
        torque_std = sigma.pop("tau")
        P0 = np.diag(np.concatenate([sigma["q"] ** 2, sigma["qd"] ** 2, parameter_variance]))
        return cls(sigma, torque_std, P0, parameter_noise, annealing_s, tempering, warmup_s, unit_state_noise=False)

    @property
    def n(self) -> int:
        """Joints."""
        return self.torque_std.shape[0]

    @cached_property
    def measurement_variance(self) -> np.ndarray:
        """(3n,) R_0's diagonal: σ² of [q, qd, qdd]."""
        return np.concatenate([self.measurement_std[k] ** 2 for k in SIGNALS])

    @cached_property
    def torque_variance(self) -> np.ndarray:
        """(n,) σ_τ²."""
        return self.torque_std**2

    def torque_noise(self, Minv: np.ndarray) -> np.ndarray:
        """(n, n) R_τ = M⁻¹ diag(σ_τ²) M⁻ᵀ: the torque noise seen in the acceleration (M⁻¹ (n, n))."""
        return (Minv * self.torque_variance) @ Minv.T

    def measurement_noise(self, torque_noise: np.ndarray, t: float, rows: np.ndarray | None = None) -> np.ndarray:
        """(m, m) R(t) of the measured ``rows`` (m,, ascending; None: all 3n) of [q, qd, qdd]: (R_0 + R_τ on the
        qdd block)·(1 + c·e^(−t/T_w))."""
        n = self.n
        R = np.diag(self.measurement_variance if rows is None else self.measurement_variance[rows])
        if rows is None or rows[-1] >= 2 * n:  # qdd measured: its rows are the last n
            R[-n:, -n:] += torque_noise
        if self.tempering:
            R *= 1.0 + self.tempering * math.exp(-t / self.warmup_s)
        return R

    def update_noise(self, M: np.ndarray | None, rows: np.ndarray, t: float, temper_torque: bool = True) -> np.ndarray:
        """(m, m) R(t) of the EKF's measured ``rows`` (m,) of [q, qd, qdd], the accelerations in the torque form
        τ − Y(q, qd, qdd) λ: diag(σ_q², σ_qd²) and, on the rows of qdd, diag(σ_τ²) + M diag(σ_qdd²) Mᵀ (what the
        torque's noise and the acceleration's make in that residual; M (n, n) the mass matrix at the prior, None
        where it is not positive definite: no physical model to map the acceleration's noise), times
        1 + c·e^(−t/T_w): all rows, or without ``temper_torque`` the rows of q and qd only (the torque rows are
        linear in λ, exact wherever the estimate is: the EKF's, whose tempering is for its linearisation)."""
        n, variance = self.n, self.measurement_variance
        R = np.zeros((3 * n, 3 * n))
        R[: 2 * n, : 2 * n] = np.diag(variance[: 2 * n])
        R[2 * n :, 2 * n :] = np.diag(self.torque_variance)
        if M is not None:
            R[2 * n :, 2 * n :] += (M * variance[2 * n :]) @ M.T
        if self.tempering:
            factor = 1.0 + self.tempering * math.exp(-t / self.warmup_s)
            R[: 2 * n, : 2 * n] *= factor
            if temper_torque:
                R[2 * n :, 2 * n :] *= factor
        return R[np.ix_(rows, rows)]

    def process_noise(
        self, qdd: np.ndarray, previous_qdd: np.ndarray | None, torque_noise: np.ndarray, t: float, dt: float
    ) -> ProcessNoise:
        """Q(t) of the Euler step from a sample with acceleration qdd (n,) (Eq. 24), by its blocks
        (:class:`ProcessNoise`: the states' (2n, 2n) and the parameters' diagonal; zero between them).

        States: I (seed 004), or the Euler step's error on q, (½Δt²·qdd)², on qd, Δt²·R_τ plus (½Δt·Δqdd)²
        (½Δt²·jerk, from the previous sample's ``previous_qdd``; none at a recording's first sample), each with
        1e-6·σ² so Q stays positive. Parameters: q_λ·e^(−t/T_a) I (annealed), or q_λ I without annealing.
        """
        n = self.n
        states = np.zeros((2 * n, 2 * n))
        diagonal = np.empty(2 * n)
        if self.unit_state_noise:  # Eq. 44: Q = I on the states
            diagonal[:] = 1.0
        else:
            sigma = self.measurement_std
            states[n:, n:] = dt**2 * torque_noise
            diagonal[:n] = (0.5 * dt**2 * qdd) ** 2 + 1e-6 * sigma["q"] ** 2
            diagonal[n:] = states.diagonal()[n:] + 1e-6 * sigma["qd"] ** 2
            if previous_qdd is not None:  # the Euler step's own error, ½Δt²·jerk
                diagonal[n:] += (0.5 * dt * (qdd - previous_qdd)) ** 2
        np.fill_diagonal(states, diagonal)
        decay = 1.0 if self.annealing_s is None else math.exp(-t / self.annealing_s)
        b = self.initial_covariance.shape[0] - 2 * n
        return ProcessNoise(states, np.full(b, self.parameter_noise * decay))

    def kernel_noise(self, rows: np.ndarray, dt: float, lam0: np.ndarray) -> tuple:
        """The schedule as the compiled step's ``noise`` tuple (:mod:`~robotid_sim_plugins.ekf.ekf_kernel`) for
        the measured ``rows`` (m,) of [q, qd, qdd], the sample interval ``dt`` and λ0 (b,)."""
        return (
            self.measurement_variance,
            self.torque_variance,
            float(self.tempering),
            float(self.warmup_s),
            bool(self.unit_state_noise),
            1e-6 * self.measurement_variance[: 2 * self.n],
            float(self.parameter_noise),
            math.inf if self.annealing_s is None else float(self.annealing_s),
            float(dt),
            np.ascontiguousarray(rows, dtype=np.int64),
            np.ascontiguousarray(self.initial_covariance, dtype=float),
            np.ascontiguousarray(lam0, dtype=float),
        )

    def noise_std_by_signal(self) -> dict[str, list[float]]:
        """σ of each measured signal and of the torque, as plain JSON-able data: {"q", "qd", "qdd", "tau": [n]}."""
        return {s: self.measurement_std[s].tolist() for s in SIGNALS} | {"tau": self.torque_std.tolist()}
