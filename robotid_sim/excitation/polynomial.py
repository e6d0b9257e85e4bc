"""Fifth-order polynomial excitation through waypoints (seed 004 Eq. 39; SPEC §6).

Seed 004 plans its excitation with q_i(t) = a0 + a1 t + … + a5 t⁵ (Eq. 39) and drives the
prismatic joints with sinusoidal references. Between two waypoints w_k → w_{k+1} over T_k
seconds, the fifth-order polynomial with zero velocity and acceleration at both ends is

    q(t) = w_k + (w_{k+1} − w_k) · S(t/T_k),   S(x) = 10x³ − 15x⁴ + 6x⁵,

(a0 = w_k, a1 = a2 = 0, a3 = 10Δ/T³, a4 = −15Δ/T⁴, a5 = 6Δ/T⁵), peak |qd| = 15/8·|Δ|/T and peak
|qdd| = 10/√3·|Δ|/T². A chain of waypoints (optionally played back and forth) strings such
moves together, each stopping at rest.

Optional sinusoids (a sum per joint, typically on the prismatic joints as in seed 004 §5) are
added inside each move with a C² plateau window W that rises with S over the first
``ramp_fraction`` of the move and falls symmetrically at its end, so every waypoint is still
reached at rest: q += W(τ) · Σ_m A_m sin(ω_m τ), τ the time since the move started.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.excitation.base import (
    SMOOTHSTEP_PEAK_ACCELERATION,
    SMOOTHSTEP_PEAK_VELOCITY,
    Excitation,
    JointLimits,
    Segment,
    as_float_list,
    smoothstep,
)

logger = logging.getLogger(__name__)


def _sine_arrays(amplitude, frequency, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Sine amplitudes and pulsations as (n, S) arrays (S = 0 when none are given)."""
    if amplitude is None and frequency is None:
        return np.zeros((n, 0)), np.zeros((n, 0))
    if amplitude is None or frequency is None:
        raise ConfigError("give both sine_amplitude and sine_frequency, or neither")
    amp = np.asarray(amplitude, float)
    freq = np.asarray(frequency, float)
    if amp.ndim == 1:
        amp = amp[:, None]
    if freq.ndim == 1:
        freq = freq[:, None]
    if freq.ndim == 0:
        freq = np.broadcast_to(freq, amp.shape)
    if amp.ndim != 2 or amp.shape[0] != n or freq.shape != amp.shape:
        raise ConfigError(
            f"sine_amplitude and sine_frequency must be (n,) or (n, S) with n = {n}; "
            f"got {np.shape(amplitude)} and {np.shape(frequency)}"
        )
    if not (np.isfinite(amp).all() and np.isfinite(freq).all()) or np.any(freq < 0):
        raise ConfigError("sine amplitudes and frequencies must be finite, frequencies >= 0")
    return amp.copy(), np.ascontiguousarray(freq, dtype=float)


def _plateau(tau: np.ndarray, T: np.ndarray, ramp: np.ndarray):
    """C² plateau window W(τ) on [0, T] and its first two time derivatives (shapes of tau)."""
    up, dup, ddup = smoothstep(tau / ramp)
    dn, ddn, dddn = smoothstep((T - tau) / ramp)
    first = tau < T - tau
    W = np.where(first, up, dn)
    dW = np.where(first, dup / ramp, -ddn / ramp)
    ddW = np.where(first, ddup / ramp**2, dddn / ramp**2)
    return W, dW, ddW


@dataclass(frozen=True, eq=False, init=False)
class QuinticPolynomial(Excitation):
    """Rest-to-rest fifth-order polynomial moves through waypoints (seed 004 Eq. 39).

    Attributes:
        waypoints: poses (K, n) visited in order, K >= 2 (back-and-forth already expanded).
        durations: time of each move (K−1,), s.
        sine_amplitude: (n, S) amplitudes of the added sinusoids (zeros where none).
        sine_frequency: (n, S) pulsations ω (rad/s).
        ramp_fraction: fraction of each move over which the sinusoids fade in and out.
        seed: the seed random waypoints were drawn with (a record for :meth:`describe`), or None.
    """

    waypoints: np.ndarray
    durations: np.ndarray
    sine_amplitude: np.ndarray
    sine_frequency: np.ndarray
    ramp_fraction: float
    seed: int | None
    type_name = "polynomial"

    def __init__(
        self,
        q_start,
        q_end,
        duration,
        *,
        via=None,
        back_and_forth: bool = False,
        sine_amplitude=None,
        sine_frequency=None,
        ramp_fraction: float = 0.25,
        limits=None,
        seed: int | None = None,
    ):
        """Moves q_start → via… → q_end (→ back again if ``back_and_forth``).

        Args:
            q_start: start pose (n,).
            q_end: end pose (n,).
            duration: seconds per move (scalar), one per forward move (sequence, mirrored for the
                way back), or ``'auto'``: the shortest that keeps the limits of ``limits``
                (:func:`minimum_durations`).
            via: intermediate waypoints (V, n).
            back_and_forth: append the way back to q_start (the chain reversed).
            sine_amplitude: amplitudes (n,) or (n, S) of sinusoids added in each move; zero
                rows for joints without (use :func:`prismatic_sines` for seed 004's choice).
            sine_frequency: pulsations (rad/s), same shape as ``sine_amplitude`` or a scalar.
            ramp_fraction: fade-in/out share of each move for the sinusoids, in (0, 0.5].
            limits: Robot or :class:`JointLimits`, needed for ``duration='auto'``.
            seed: the seed the waypoints were drawn with, recorded by :meth:`describe` (None: not drawn).
        """
        q_start = np.atleast_1d(np.asarray(q_start, float))
        n = q_start.shape[0]
        chain = [q_start]
        if via is not None:
            chain += list(np.asarray(via, float).reshape(-1, n))
        chain.append(np.asarray(q_end, float).reshape(n))
        forward = len(chain) - 1
        if back_and_forth:
            chain += chain[-2::-1]
        waypoints = np.array(chain)
        amp, freq = _sine_arrays(sine_amplitude, sine_frequency, n)
        if isinstance(duration, str):
            if duration != "auto" or limits is None:
                raise ConfigError("duration must be seconds, a list of seconds, or 'auto' together with limits=robot")
            durations = minimum_durations(waypoints, limits, amp, freq, ramp_fraction)
        else:
            d = np.atleast_1d(np.asarray(duration, float))
            if d.size == 1:
                durations = np.full(len(chain) - 1, float(d[0]))
            elif d.size == forward:
                durations = np.concatenate([d, d[::-1]]) if back_and_forth else d
            elif d.size == len(chain) - 1:
                durations = d
            else:
                raise ConfigError(f"{d.size} durations for {len(chain) - 1} moves")
        self._set(waypoints, durations, amp, freq, ramp_fraction, seed)

    def _set(self, waypoints, durations, amp, freq, ramp_fraction, seed=None):
        waypoints = np.atleast_2d(np.asarray(waypoints, float))
        durations = np.atleast_1d(np.asarray(durations, float))
        if waypoints.shape[0] < 2 or durations.shape != (waypoints.shape[0] - 1,):
            raise ConfigError(
                f"need K >= 2 waypoints (K, n) and K−1 durations; got {waypoints.shape} and {durations.shape}"
            )
        if not np.isfinite(waypoints).all():
            raise ConfigError("waypoints contain NaN or inf")
        if not np.all(durations > 0):
            raise ConfigError(f"every move needs a positive duration, got {durations.tolist()}")
        if not 0 < ramp_fraction <= 0.5:
            raise ConfigError(f"ramp_fraction must be in (0, 0.5], got {ramp_fraction}")
        amp, freq = _sine_arrays(amp, freq, waypoints.shape[1])
        object.__setattr__(self, "waypoints", waypoints)
        object.__setattr__(self, "durations", durations)
        object.__setattr__(self, "sine_amplitude", amp)
        object.__setattr__(self, "sine_frequency", freq)
        object.__setattr__(self, "ramp_fraction", float(ramp_fraction))
        object.__setattr__(self, "seed", None if seed is None else int(seed))

    @classmethod
    def through(
        cls, waypoints, durations, *, sine_amplitude=None, sine_frequency=None, ramp_fraction: float = 0.25
    ) -> QuinticPolynomial:
        """Moves through ``waypoints`` (K, n) with ``durations`` (K−1,) exactly as given."""
        self = cls.__new__(cls)
        n = np.atleast_2d(np.asarray(waypoints, float)).shape[1]
        amp, freq = _sine_arrays(sine_amplitude, sine_frequency, n)
        self._set(waypoints, durations, amp, freq, ramp_fraction)
        return self

    @property
    def n_dof(self) -> int:
        return self.waypoints.shape[1]

    @property
    def starts(self) -> np.ndarray:
        """Start time of each move (K−1,)."""
        return np.concatenate([[0.0], np.cumsum(self.durations)[:-1]])

    @property
    def duration(self) -> float:
        return float(self.durations.sum())

    def _evaluate(self, t):
        starts = self.starts
        k = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, len(self.durations) - 1)
        T = self.durations[k][:, None]
        tau = np.clip(t - starts[k], 0.0, self.durations[k])[:, None]
        delta = self.waypoints[k + 1] - self.waypoints[k]
        S, dS, ddS = smoothstep(tau / T)
        q = self.waypoints[k] + delta * S
        qd = delta * dS / T
        qdd = delta * ddS / T**2
        if self.sine_amplitude.shape[1]:
            W, dW, ddW = _plateau(tau, T, self.ramp_fraction * T)
            phase = tau[:, :, None] * self.sine_frequency  # (N, n, S)
            A, w = self.sine_amplitude, self.sine_frequency
            s = (A * np.sin(phase)).sum(-1)
            ds = (A * w * np.cos(phase)).sum(-1)
            dds = -(A * w**2 * np.sin(phase)).sum(-1)
            q = q + W * s
            qd = qd + dW * s + W * ds
            qdd = qdd + ddW * s + 2 * dW * ds + W * dds
        outside = (t < 0) | (t > self.duration)
        qd[outside] = 0.0
        qdd[outside] = 0.0
        return q, qd, qdd

    @property
    def segments(self):
        return tuple(Segment("move", float(s), float(s + d)) for s, d in zip(self.starts, self.durations, strict=True))

    def describe(self) -> dict:
        out = {
            "type": "polynomial",
            "waypoints": as_float_list(self.waypoints),
            "durations": as_float_list(self.durations),
        }
        if self.sine_amplitude.shape[1]:
            out["sine_amplitude"] = as_float_list(self.sine_amplitude)
            out["sine_frequency"] = as_float_list(self.sine_frequency)
            out["ramp_fraction"] = self.ramp_fraction
        if self.seed is not None:
            out["seed"] = self.seed
        return out


def prismatic_sines(kinds, amplitude, frequency) -> tuple[np.ndarray, np.ndarray]:
    """Sine arrays (n, S) with the given sum of sinusoids on the prismatic joints only.

    Args:
        kinds: joint kinds (n,), e.g. ``robot.joint_kinds``.
        amplitude: amplitudes (S,) or a scalar (m).
        frequency: pulsations (S,) or a scalar (rad/s).
    """
    amp = np.atleast_1d(np.asarray(amplitude, float))
    freq = np.broadcast_to(np.atleast_1d(np.asarray(frequency, float)), amp.shape)
    mask = np.array([k == "prismatic" for k in kinds], float)[:, None]
    return mask * amp, np.broadcast_to(freq, (len(kinds), amp.size)).copy()


def minimum_durations(
    waypoints,
    robot_or_limits,
    sine_amplitude=None,
    sine_frequency=None,
    ramp_fraction: float = 0.25,
    resolution: float = 1e-3,
) -> np.ndarray:
    """Shortest move times (K−1,) that keep |qd|, |qdd| within the limits, rounded up.

    With Δ = |w_{k+1} − w_k| and, for the sinusoids, ΣA = Σ_m |A_m|, ΣAω, ΣAω², and ρ the
    ramp fraction, triangle-inequality bounds of each joint's peaks give

        |qd|  <= 15/8·(Δ + ΣA/ρ)/T + ΣAω
        |qdd| <= 10/√3·(Δ + ΣA/ρ²)/T² + 2·15/8·ΣAω/(ρT) + ΣAω²

    and T is the smallest value making both <= the limits, for every joint.

    Raises:
        ConfigError: if the sinusoids alone exceed a joint's velocity or acceleration limit,
            or a waypoint is closer than ΣA to a position limit.
    """
    limits = JointLimits.of(robot_or_limits)
    waypoints = np.atleast_2d(np.asarray(waypoints, float))
    n = waypoints.shape[1]
    amp, freq = _sine_arrays(sine_amplitude, sine_frequency, n)
    sA = np.abs(amp).sum(1)
    sAw = (np.abs(amp) * freq).sum(1)
    sAw2 = (np.abs(amp) * freq**2).sum(1)
    rho = float(ramp_fraction)
    for j in range(n):
        if sAw[j] >= limits.velocity[j] or sAw2[j] >= limits.acceleration[j]:
            raise ConfigError(
                f"joint {j + 1} ('{limits.names[j]}'): the sinusoids alone reach "
                f"|qd| {sAw[j]:.4g} / |qdd| {sAw2[j]:.4g}, limits "
                f"{limits.velocity[j]:.4g} / {limits.acceleration[j]:.4g}; lower the "
                "sine amplitudes or frequencies"
            )
    low = waypoints.min(0) - sA
    high = waypoints.max(0) + sA
    bad = (low < limits.lower - 1e-12) | (high > limits.upper + 1e-12)
    if bad.any():
        j = int(np.argmax(bad))
        raise ConfigError(
            f"joint {j + 1} ('{limits.names[j]}'): waypoints ± sine amplitude span "
            f"[{low[j]:.4g}, {high[j]:.4g}], outside the position range "
            f"[{limits.lower[j]:.4g}, {limits.upper[j]:.4g}]"
        )
    delta = np.abs(np.diff(waypoints, axis=0))  # (K-1, n)
    t_v = SMOOTHSTEP_PEAK_VELOCITY * (delta + sA / rho) / (limits.velocity - sAw)
    c2 = SMOOTHSTEP_PEAK_ACCELERATION * (delta + sA / rho**2)
    c1 = 2 * SMOOTHSTEP_PEAK_VELOCITY * sAw / rho
    c0 = sAw2 - limits.acceleration  # < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        x = (-c1 + np.sqrt(c1**2 - 4 * c2 * c0)) / (2 * c2)  # largest admissible 1/T
        t_a = np.where(c2 > 0, 1.0 / x, 0.0)
    T = np.maximum(t_v, t_a).max(1)
    T = np.ceil(T / resolution) * resolution
    return np.maximum(T, resolution)
