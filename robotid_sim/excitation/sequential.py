"""Sequential single-joint sine excitation, distal to base (seed 003 §4).

Seed 003 excites one joint at a time with θ_i(t) = a_i·sin(w_i t), starting from the distal joint
and moving towards the base, the other joints held at safe positions; the amplitude a_i follows
the joint's range of motion and the frequency w_i is raised until the joint velocity limit is
reached (its Table 2: 5π/9, 2π/3, π/2 rad at 15, 15, 14 rad/s for the planar 3R arm).

Here each joint's motion is made smooth at its ends by a raised-cosine envelope spanning whole
sine cycles (``ramp_cycles`` in, ``cycles`` at full amplitude, ``ramp_cycles`` out). With the
phase u = w·τ (τ the time since the segment started) and total phase Φ = 2π(2R + C):

    q_i(τ) = hold_i + A_i · e(u) · sin(u),
    e(u) = (1 − cos(u/2R))/2 on [0, 2πR],  1 in the middle,  e(Φ − u) on the last 2πR.

Because the ramps span whole cycles, q, qd and qdd are all continuous (sin u = 0 where e''
jumps) and the joint starts and stops at rest at ``hold_i``, so segments simply follow each
other with ``dwell`` seconds of rest in between. For R ≥ 1 the envelope never raises the peak
velocity above A·w (reached on the plateau), so 'auto' frequencies w = qd_max/A meet the
velocity limit exactly; the acceleration peak A·w²·C_a (C_a ≥ 1, computed numerically for the
envelope) caps w where the acceleration limit binds first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.excitation.base import (
    Concatenation,
    Excitation,
    Hold,
    JointLimits,
    Segment,
    SequenceBacked,
    as_float_list,
)

logger = logging.getLogger(__name__)

#: phase grid points per cycle for the numerical envelope peaks
_PEAK_POINTS_PER_CYCLE = 8192


def _envelope(u: np.ndarray, ramp_cycles: int, total_phase: float):
    """Raised-cosine envelope e(u) and its derivatives de/du, d²e/du² (all shaped like u)."""
    r = 2.0 * np.pi * ramp_cycles
    k = 1.0 / (2.0 * ramp_cycles)
    e = np.ones_like(u)
    de = np.zeros_like(u)
    dde = np.zeros_like(u)
    up = u < r
    down = u > total_phase - r
    for sel, x, sign in ((up, u, 1.0), (down, total_phase - u, -1.0)):
        xs = np.clip(x[sel], 0.0, r)
        e[sel] = 0.5 * (1.0 - np.cos(k * xs))
        de[sel] = sign * 0.5 * k * np.sin(k * xs)
        dde[sel] = 0.5 * k * k * np.cos(k * xs)
    return e, de, dde


def _shape(u: np.ndarray, ramp_cycles: int, total_phase: float):
    """Normalised q, dq/du, d²q/du² of e(u)·sin(u)."""
    e, de, dde = _envelope(u, ramp_cycles, total_phase)
    s, c = np.sin(u), np.cos(u)
    return e * s, de * s + e * c, dde * s + 2 * de * c - e * s


@lru_cache(maxsize=64)
def envelope_peaks(ramp_cycles: int, cycles: int) -> tuple[float, float]:
    """(C_v, C_a): peak |qd| = A·w·C_v and peak |qdd| = A·w²·C_a of one segment.

    Computed on a dense phase grid plus a relative safety of 1e-6 (C_v is exactly 1 for
    ``ramp_cycles >= 1`` and ``cycles >= 1``).
    """
    total = 2 * np.pi * (2 * ramp_cycles + cycles)
    u = np.linspace(0.0, total, _PEAK_POINTS_PER_CYCLE * (2 * ramp_cycles + cycles) + 1)
    _, d1, d2 = _shape(u, ramp_cycles, total)
    cv = float(np.abs(d1).max())
    ca = float(np.abs(d2).max()) * (1 + 1e-6)
    if cycles >= 1 and ramp_cycles >= 1:
        cv = max(cv, 1.0)
    return cv, ca


@dataclass(frozen=True, eq=False)
class SingleJointSine(Excitation):
    """One joint swinging around a held pose, the others at rest (one segment of seed 003 §4).

    Attributes:
        hold: pose of every joint (n,); the moving joint oscillates around its entry.
        joint: 0-based index of the moving joint.
        amplitude: A (rad or m).
        frequency: w (rad/s).
        cycles: full-amplitude cycles C.
        ramp_cycles: cycles R of each raised-cosine ramp (>= 1).
    """

    hold: np.ndarray
    joint: int
    amplitude: float
    frequency: float
    cycles: int = 2
    ramp_cycles: int = 1
    type_name = "single_joint_sine"

    def __post_init__(self):
        object.__setattr__(self, "hold", np.atleast_1d(np.asarray(self.hold, float)))
        if not 0 <= self.joint < self.hold.shape[0]:
            raise ConfigError(f"joint index {self.joint} out of range for {self.hold.shape[0]} joints")
        if not (self.frequency > 0 and np.isfinite(self.frequency)):
            raise ConfigError(f"joint {self.joint + 1}: sine frequency must be positive, got {self.frequency}")
        if int(self.cycles) != self.cycles or self.cycles < 0:
            raise ConfigError(f"cycles must be a whole number >= 0, got {self.cycles}")
        if int(self.ramp_cycles) != self.ramp_cycles or self.ramp_cycles < 1:
            raise ConfigError(f"ramp_cycles must be a whole number >= 1 (smooth start), got {self.ramp_cycles}")
        object.__setattr__(self, "joint", int(self.joint))
        object.__setattr__(self, "cycles", int(self.cycles))
        object.__setattr__(self, "ramp_cycles", int(self.ramp_cycles))
        object.__setattr__(self, "amplitude", float(self.amplitude))
        object.__setattr__(self, "frequency", float(self.frequency))

    @property
    def n_dof(self) -> int:
        return self.hold.shape[0]

    @property
    def total_phase(self) -> float:
        return 2 * np.pi * (2 * self.ramp_cycles + self.cycles)

    @property
    def duration(self) -> float:
        return self.total_phase / self.frequency

    def _evaluate(self, t):
        w = self.frequency
        u = np.clip(t * w, 0.0, self.total_phase)
        s0, s1, s2 = _shape(u, self.ramp_cycles, self.total_phase)
        q = np.broadcast_to(self.hold, (t.shape[0], self.n_dof)).copy()
        qd = np.zeros_like(q)
        qdd = np.zeros_like(q)
        j, A = self.joint, self.amplitude
        q[:, j] += A * s0
        qd[:, j] = A * w * s1
        qdd[:, j] = A * w * w * s2
        return q, qd, qdd

    @property
    def segments(self):
        return (Segment("joint", 0.0, self.duration, self.joint),)

    def describe(self) -> dict:
        return {
            "type": "single_joint_sine",
            "hold": as_float_list(self.hold),
            "joint": self.joint,
            "amplitude": self.amplitude,
            "frequency": self.frequency,
            "cycles": self.cycles,
            "ramp_cycles": self.ramp_cycles,
        }


def _resolve_order(order, n: int) -> tuple[int, ...]:
    if isinstance(order, str):
        if order == "distal_to_base":
            return tuple(range(n - 1, -1, -1))
        if order == "base_to_distal":
            return tuple(range(n))
        raise ConfigError(
            f"unknown order '{order}': use 'distal_to_base', 'base_to_distal' or a list of 0-based joint indices"
        )
    idx = tuple(int(i) for i in order)
    if not idx or any(not 0 <= i < n for i in idx) or len(set(idx)) != len(idx):
        raise ConfigError(f"order must list distinct 0-based joint indices in [0, {n - 1}], got {list(order)}")
    return idx


def _hold_pose(lim: JointLimits, hold, n: int) -> np.ndarray:
    """The held pose (n,): given, or the middle of each (margin-shrunk) range; refused outside it."""
    hold = lim.centre() if hold is None else np.asarray(hold, float).reshape(-1)
    if hold.shape != (n,):
        raise ConfigError(f"hold pose must have {n} values, got {hold.shape}")
    outside = (hold < lim.lower) | (hold > lim.upper)
    if outside.any():
        j = int(np.argmax(outside))
        raise ConfigError(
            f"hold pose of joint {j + 1} ({hold[j]:.4g}) is outside its position "
            f"range [{lim.lower[j]:.4g}, {lim.upper[j]:.4g}]"
        )
    return hold


def _amplitudes(lim: JointLimits, hold: np.ndarray, amplitudes, n: int) -> np.ndarray:
    """A (n,): given (or the whole room around ``hold``), clipped so that hold ± A stays in the range."""
    room = np.minimum(hold - lim.lower, lim.upper - hold)
    room = np.where(np.isfinite(room), room, np.pi)
    amp = room.copy() if amplitudes is None else np.broadcast_to(np.abs(np.asarray(amplitudes, float)), (n,)).copy()
    clipped = amp > room
    if clipped.any():
        logger.info(
            "sequential sine: amplitudes of joints %s clipped to the position range",
            (np.flatnonzero(clipped) + 1).tolist(),
        )
    return np.minimum(amp, room)


def _frequencies(lim: JointLimits, amp: np.ndarray, frequencies, ramp_cycles: int, cycles: int, n: int) -> np.ndarray:
    """w (n,) in rad/s: given, or for ``'auto'`` the largest with A·w·C_v <= qd_max and A·w²·C_a <= qdd_max."""
    cv, ca = envelope_peaks(ramp_cycles, cycles)
    if isinstance(frequencies, str):
        if frequencies != "auto":
            raise ConfigError(f"frequencies must be numbers (rad/s) or 'auto', got '{frequencies}'")
        with np.errstate(divide="ignore"):
            return np.minimum(lim.velocity / (amp * cv), np.sqrt(lim.acceleration / (amp * ca)))
    return np.broadcast_to(np.asarray(frequencies, float), (n,)).copy()


def _frequency_steps(frequency_steps) -> tuple[float, ...]:
    """The fractions in (0, 1] of each joint's frequency, as floats; ConfigError otherwise."""
    try:
        fractions = np.atleast_1d(np.asarray(frequency_steps, float))
    except (TypeError, ValueError):
        fractions = np.zeros(0)
    steps = tuple(as_float_list(fractions)) if fractions.ndim == 1 else ()
    if not steps or not all(0.0 < f <= 1.0 for f in steps):
        raise ConfigError(
            f"frequency_steps must be fractions in (0, 1] of each joint's frequency, e.g. [0.5, 1.0]; got "
            f"{list(steps) if steps else frequency_steps}"
        )
    return steps


@dataclass(frozen=True, eq=False, init=False)
class SequentialSine(SequenceBacked):
    """Seed 003 §4: one joint at a time, distal to base, the others held.

    Sequence: ``dwell`` s at the hold pose, then for each joint in ``order`` its
    :class:`SingleJointSine` followed by ``dwell`` s of rest. :attr:`segments` labels each
    joint's range ``'joint'`` (with :attr:`Segment.joint` set) and the rests ``'dwell'``.

    Attributes (resolved values, what :meth:`describe` reports):
        hold: pose (n,) of the joints that are not moving.
        amplitudes: A (n,) after clipping into the position range around ``hold``.
        frequencies: w (n,) in rad/s.
        order: the joints excited, in order.
        dwell: rest between segments (s).
        cycles: full-amplitude cycles per joint and frequency step.
        ramp_cycles: cycles of each ramp.
        frequency_steps: fractions of ``frequencies`` each joint is excited at, one sine after the other.
    """

    hold: np.ndarray
    amplitudes: np.ndarray
    frequencies: np.ndarray
    order: tuple[int, ...]
    dwell: float
    cycles: int
    ramp_cycles: int
    frequency_steps: tuple[float, ...]
    type_name = "sequential_sine"

    def __init__(
        self,
        robot_or_limits,
        amplitudes=None,
        frequencies="auto",
        order="distal_to_base",
        hold=None,
        dwell: float = 1.0,
        cycles: int = 1,
        ramp_cycles: int = 1,
        margin: float = 0.0,
        frequency_steps=(1.0,),
    ):
        """Build the excitation.

        Args:
            robot_or_limits: a Robot or :class:`JointLimits`.
            amplitudes: A (n,) or a scalar; None uses each joint's whole room around ``hold``.
                Clipped so that hold ± A stays inside the (margin-shrunk) position range.
            frequencies: w (n,) or scalar in rad/s, or ``'auto'``: per joint the largest w with
                A·w·C_v <= qd_max and A·w²·C_a <= qdd_max (seed 003 §4: raise the frequency
                until the velocity limit is reached).
            order: ``'distal_to_base'`` (seed 003), ``'base_to_distal'`` or a list of 0-based
                joint indices; joints with zero amplitude are skipped.
            hold: pose (n,) of the held joints; default the middle of each range.
            dwell: rest at the hold pose before, between and after the segments (s).
            cycles: full-amplitude cycles per joint and frequency step.
            ramp_cycles: cycles of each raised-cosine ramp (>= 1).
            margin: fraction of each limit kept free.
            frequency_steps: fractions in (0, 1] of each joint's frequency: the joint runs one sine per
                fraction, in this order, with ``dwell`` s of rest between them (seed 003 §5.1 raises the
                frequency gradually; e.g. ``[0.5, 1.0]``). With a single frequency the inertial torque
                −A·w²·sin(wt) is proportional to the position, so only the nonlinearity of gravity separates
                the inertia from the gravity parameters; two frequencies separate them directly.
        """
        limits = JointLimits.of(robot_or_limits)
        n = limits.n_dof
        lim = limits.shrunk(margin)
        hold = _hold_pose(lim, hold, n)
        amp = _amplitudes(lim, hold, amplitudes, n)
        if int(ramp_cycles) != ramp_cycles or ramp_cycles < 1:
            raise ConfigError(f"ramp_cycles must be a whole number >= 1, got {ramp_cycles}")
        if int(cycles) != cycles or cycles < 0:
            raise ConfigError(f"cycles must be a whole number >= 0, got {cycles}")
        freq = _frequencies(lim, amp, frequencies, int(ramp_cycles), int(cycles), n)
        order_idx = tuple(j for j in _resolve_order(order, n) if amp[j] > 0)
        if not order_idx:
            raise ConfigError("sequential sine has nothing to move: every amplitude is zero")
        freq = np.where(amp > 0, freq, 0.0)
        if not np.all(freq[list(order_idx)] > 0):
            raise ConfigError("sequential sine frequencies must be positive for the moving joints")
        if dwell < 0:
            raise ConfigError(f"dwell must be >= 0 s, got {dwell}")
        steps = _frequency_steps(frequency_steps)
        object.__setattr__(self, "hold", hold)
        object.__setattr__(self, "amplitudes", amp)
        object.__setattr__(self, "frequencies", freq)
        object.__setattr__(self, "order", order_idx)
        object.__setattr__(self, "dwell", float(dwell))
        object.__setattr__(self, "cycles", int(cycles))
        object.__setattr__(self, "ramp_cycles", int(ramp_cycles))
        object.__setattr__(self, "frequency_steps", steps)
        parts: list[Excitation] = [Hold(hold, self.dwell, "dwell")]
        for j in order_idx:
            for f in steps:
                parts.append(SingleJointSine(hold, j, amp[j], f * freq[j], self.cycles, self.ramp_cycles))
                parts.append(Hold(hold, self.dwell, "dwell"))
        object.__setattr__(self, "_sequence", Concatenation(tuple(parts)))

    @property
    def n_dof(self) -> int:
        return self.hold.shape[0]

    def describe(self) -> dict:
        return {
            "type": "sequential_sine",
            "amplitudes": as_float_list(self.amplitudes),
            "frequencies": as_float_list(self.frequencies),
            "order": list(self.order),
            "hold": as_float_list(self.hold),
            "dwell": self.dwell,
            "cycles": self.cycles,
            "ramp_cycles": self.ramp_cycles,
            "frequency_steps": list(self.frequency_steps),
        }
