"""The :class:`Excitation` contract and the pieces every trajectory is built from (SPEC §6).

An excitation is a reference trajectory t ↦ (q, qd, qdd) for all n joints over
``[0, duration]``, given in closed form so that qd and qdd are exact derivatives of q (no
numerical differentiation anywhere). Every excitation

- evaluates on any time vector: ``evaluate(t)`` with ``t`` (N,) → ``q, qd, qdd`` each (N, n);
- describes itself as plain JSON-able data: ``describe()`` round-trips through
  :func:`robotid_sim.excitation.excitation_from_config`;
- checks itself against the joint position, velocity and acceleration limits of a robot on a
  dense grid (1 kHz by default): :meth:`Excitation.check_limits`;
- labels its time ranges (:attr:`Excitation.segments`), which the stepwise data collection of
  seed 000 §3 and the sequential single-joint excitation of seed 003 §4 rely on.

This module also holds the two building blocks shared by the composite excitations:
:class:`Hold` (a constant pose) and :class:`Concatenation` (pieces played one after another,
each starting where the previous one stopped).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from robotid_sim.errors import ConfigError, DataError

logger = logging.getLogger(__name__)

#: grid rate (Hz) at which :meth:`Excitation.check_limits` evaluates a trajectory
CHECK_RATE_HZ = 1000.0
#: absolute slack (rad, rad/s, rad/s²) allowed by :meth:`Excitation.check_limits` for round-off
LIMIT_TOLERANCE = 1e-9
#: samples evaluated at once when scanning a trajectory for its peaks
_CHUNK = 100_000
#: the labels used by the stepwise data collection (seed 000 §3)
STEPWISE_LABELS = ("static", "constant_velocity", "variable_velocity")
#: the stepwise excitation's rest-to-rest moves between those states (variable-velocity motion)
STEPWISE_TRANSITION = "transition"

Trajectory = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Segment:
    """A labelled time range ``[start, end)`` of an excitation.

    Attributes:
        label: what happens in the range, e.g. ``'static'``, ``'constant_velocity'``,
            ``'variable_velocity'`` (stepwise, seed 000 §3), ``'joint'`` or ``'dwell'``
            (sequential sine, seed 003 §4), ``'excitation'`` (a single-piece trajectory).
        start: start time (s).
        end: end time (s).
        joint: 0-based index of the only moving joint, for single-joint segments; else None.
    """

    label: str
    start: float
    end: float
    joint: int | None = None

    def mask(self, t: np.ndarray) -> np.ndarray:
        """Boolean mask (N,) of the times ``t`` (N,) inside ``[start, end)``."""
        t = np.asarray(t, float)
        return (t >= self.start) & (t < self.end)


@dataclass(frozen=True, eq=False)
class JointLimits:
    """Joint limits an excitation must respect, each (n,) in SI units.

    Attributes:
        lower: lower position limits (rad or m); ``-inf`` for continuous joints.
        upper: upper position limits; ``+inf`` for continuous joints.
        velocity: |qd| bounds.
        acceleration: |qdd| bounds.
        names: joint names, for error messages.
    """

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    names: tuple[str, ...] = ()

    def __post_init__(self):
        arrays = [
            np.atleast_1d(np.asarray(getattr(self, k), float)) for k in ("lower", "upper", "velocity", "acceleration")
        ]
        n = arrays[0].shape[0]
        for key, arr in zip(("lower", "upper", "velocity", "acceleration"), arrays, strict=True):
            if arr.shape != (n,):
                raise ConfigError(f"joint limits '{key}' must have {n} values, got shape {arr.shape}")
            object.__setattr__(self, key, arr)
        if np.any(self.upper < self.lower):
            j = int(np.argmax(self.upper < self.lower))
            raise ConfigError(
                f"joint {j + 1}: upper position limit {self.upper[j]} is below the lower limit {self.lower[j]}"
            )
        if np.any(~(self.velocity > 0)) or np.any(~(self.acceleration > 0)):
            raise ConfigError("velocity and acceleration limits must be positive for every joint")
        names = tuple(self.names) or tuple(f"joint{j + 1}" for j in range(n))
        if len(names) != n:
            raise ConfigError(f"joint limits have {n} joints but {len(names)} names")
        object.__setattr__(self, "names", names)

    @property
    def n_dof(self) -> int:
        return self.lower.shape[0]

    @classmethod
    def of(cls, robot_or_limits: Any) -> JointLimits:
        """The limits of a :class:`~robotid_sim.robot.Robot` (or pass :class:`JointLimits` through)."""
        if isinstance(robot_or_limits, JointLimits):
            return robot_or_limits
        try:
            lower, upper = robot_or_limits.position_limits
            return cls(
                lower,
                upper,
                robot_or_limits.velocity_limit,
                robot_or_limits.acceleration_limit,
                tuple(robot_or_limits.joint_names),
            )
        except AttributeError as exc:
            raise ConfigError(f"expected a Robot or JointLimits, got {type(robot_or_limits).__name__}") from exc

    def shrunk(self, margin: float) -> JointLimits:
        """Limits with a safety ``margin`` (fraction in [0, 1)) kept free.

        Velocity and acceleration bounds become ``(1 - margin)`` times the limit; a finite
        position range [lower, upper] loses ``margin/2`` of its width at each end.
        """
        if not 0.0 <= margin < 1.0:
            raise ConfigError(f"margin must be a fraction in [0, 1), got {margin}")
        if margin == 0.0:
            return self
        width = np.where(np.isfinite(self.upper - self.lower), self.upper - self.lower, 0.0)
        return JointLimits(
            self.lower + 0.5 * margin * width,
            self.upper - 0.5 * margin * width,
            (1 - margin) * self.velocity,
            (1 - margin) * self.acceleration,
            self.names,
        )

    def centre(self) -> np.ndarray:
        """Middle of each position range (n,); 0 for continuous joints."""
        finite = np.isfinite(self.lower) & np.isfinite(self.upper)
        return np.where(finite, 0.5 * (np.where(finite, self.lower, 0) + np.where(finite, self.upper, 0)), 0.0)


def time_grid(duration: float, rate_hz: float) -> np.ndarray:
    """Sample times (N,) at ``rate_hz`` from 0 to ``duration`` inclusive.

    The last sample is ``duration`` itself (the grid step is shortened slightly if needed), so
    that end-point conditions are always sampled.
    """
    if rate_hz <= 0:
        raise ConfigError(f"sample rate must be positive, got {rate_hz} Hz")
    n = max(int(np.ceil(duration * rate_hz - 1e-9)), 1)
    return np.linspace(0.0, duration, n + 1)


class Excitation(ABC):
    """Base class of every excitation trajectory (SPEC §6).

    Subclasses are frozen dataclasses: build a changed copy instead of mutating one. They
    implement :meth:`_evaluate` (times already validated) and :meth:`describe`.
    """

    #: name used in configs (``{"type": ...}``) and in :meth:`describe`
    type_name: str = ""

    @property
    @abstractmethod
    def n_dof(self) -> int:
        """Number of joints n."""

    @property
    @abstractmethod
    def duration(self) -> float:
        """Length of the trajectory (s); it is defined on ``[0, duration]``."""

    @abstractmethod
    def _evaluate(self, t: np.ndarray) -> Trajectory:
        """q, qd, qdd (N, n) at the times t (N,), a float array."""

    @abstractmethod
    def describe(self) -> dict:
        """Plain JSON-able description; ``excitation_from_config(e.describe(), robot)``
        rebuilds an identical excitation."""

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Labelled time ranges covering ``[0, duration]``; one ``'excitation'`` by default."""
        return (Segment("excitation", 0.0, self.duration),)

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, t) -> Trajectory:
        """Joint positions, velocities and accelerations at the times ``t``.

        Args:
            t: times (N,) in seconds (a scalar is one sample). Times outside
                ``[0, duration]`` are allowed; each excitation extends itself naturally
                (periodic ones repeat, composite ones hold their end poses).

        Returns:
            ``(q, qd, qdd)``, each (N, n); qd and qdd are the analytic derivatives of q.
        """
        t = np.atleast_1d(np.asarray(t, dtype=float))
        if t.ndim != 1:
            raise DataError(f"times must be a 1-D array (N,), got shape {t.shape}")
        if not np.all(np.isfinite(t)):
            raise DataError("times contain NaN or inf")
        return self._evaluate(t)

    def sample(self, rate_hz: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(t, q, qd, qdd)`` on :func:`time_grid` at ``rate_hz``: t (N,), the rest (N, n)."""
        t = time_grid(self.duration, rate_hz)
        return (t, *self.evaluate(t))

    def start_pose(self) -> np.ndarray:
        """Joint positions (n,) at t = 0."""
        return self.evaluate([0.0])[0][0]

    def end_pose(self) -> np.ndarray:
        """Joint positions (n,) at t = duration."""
        return self.evaluate([self.duration])[0][0]

    # ------------------------------------------------------------------ limits
    def _chunks(self, rate_hz: float, duration: float | None = None):
        """``(t, q, qd, qdd)`` on the :func:`time_grid` of ``[0, duration]`` (default the excitation's) at
        ``rate_hz``, in chunks of bounded memory: the grid itself is made one chunk at a time."""
        end = self.duration if duration is None else duration
        if rate_hz <= 0:
            raise ConfigError(f"sample rate must be positive, got {rate_hz} Hz")
        n = max(int(np.ceil(end * rate_hz - 1e-9)), 1)
        step = end / n  # np.linspace(0, end, n + 1), whose last sample is exactly ``end``
        for start in range(0, n + 1, _CHUNK):
            tc = np.arange(start, min(start + _CHUNK, n + 1)) * step
            if start + _CHUNK >= n + 1:
                tc[-1] = end
            yield (tc, *self.evaluate(tc))

    def peak_values(self, rate_hz: float = CHECK_RATE_HZ) -> tuple[np.ndarray, ...]:
        """Extremes on a dense grid: ``(q_min, q_max, |qd|_max, |qdd|_max)``, each (n,)."""
        peaks = [np.full(self.n_dof, np.inf), np.full(self.n_dof, -np.inf), np.zeros(self.n_dof), np.zeros(self.n_dof)]
        for _, q, qd, qdd in self._chunks(rate_hz):
            peaks[0] = np.minimum(peaks[0], q.min(0))
            peaks[1] = np.maximum(peaks[1], q.max(0))
            peaks[2] = np.maximum(peaks[2], np.abs(qd).max(0))
            peaks[3] = np.maximum(peaks[3], np.abs(qdd).max(0))
        return tuple(peaks)

    def check_limits(
        self, robot, margin: float = 0.0, rate_hz: float = CHECK_RATE_HZ, duration: float | None = None
    ) -> None:
        """Raise :class:`ConfigError` if the trajectory leaves the joint limits.

        The trajectory is evaluated on a grid at ``rate_hz`` (1 kHz by default, the simulator
        step) over ``[0, duration]`` (default: the whole excitation; a simulation that plays only its
        start checks only that, and never pays for the rest) and compared with the position, velocity
        and acceleration limits of ``robot`` (a Robot or :class:`JointLimits`) shrunk by ``margin``
        (see :meth:`JointLimits.shrunk`). A slack of :data:`LIMIT_TOLERANCE` absorbs round-off.

        Raises:
            ConfigError: naming the first violating joint, the quantity, the value and the time.
        """
        limits = JointLimits.of(robot)
        if limits.n_dof != self.n_dof:
            raise ConfigError(f"excitation has {self.n_dof} joints but the robot has {limits.n_dof}")
        lim = limits.shrunk(margin)
        tol = LIMIT_TOLERANCE
        n_samples = 0
        for t, q, qd, qdd in self._chunks(rate_hz, duration):
            n_samples += t.shape[0]
            checks = (
                ("position", q, q < lim.lower - tol, "below the lower limit", lim.lower),
                ("position", q, q > lim.upper + tol, "above the upper limit", lim.upper),
                ("velocity", np.abs(qd), np.abs(qd) > lim.velocity + tol, "above the limit", lim.velocity),
                (
                    "acceleration",
                    np.abs(qdd),
                    np.abs(qdd) > lim.acceleration + tol,
                    "above the limit",
                    lim.acceleration,
                ),
            )
            for quantity, values, bad, words, bound in checks:
                if not bad.any():
                    continue
                j = int(np.argwhere(bad)[0][1])
                worst = int(np.argmax(np.where(bad[:, j], np.abs(values[:, j] - bound[j]), -1)))
                raise ConfigError(
                    f"excitation '{self.type_name}' leaves the {quantity} limits of joint {j + 1} "
                    f"('{lim.names[j]}'): value {values[worst, j]:.6g} at t = {t[worst]:.4g} s is "
                    f"{words} {bound[j]:.6g} (margin {margin:g}); reduce amplitudes or "
                    "frequencies, or raise the limits"
                )
        logger.debug("excitation '%s' is inside the limits on %d samples", self.type_name, n_samples)


# ---------------------------------------------------------------------- building blocks
@dataclass(frozen=True, eq=False)
class Hold(Excitation):
    """Hold a constant pose for a while: q = pose, qd = qdd = 0.

    Attributes:
        pose: joint positions (n,).
        hold_duration: how long (s), >= 0.
        label: segment label (default ``'static'``).
    """

    pose: np.ndarray
    hold_duration: float
    label: str = "static"
    type_name = "hold"

    def __post_init__(self):
        object.__setattr__(self, "pose", np.atleast_1d(np.asarray(self.pose, float)))
        if self.pose.ndim != 1:
            raise ConfigError(f"hold pose must be (n,), got shape {self.pose.shape}")
        if not self.hold_duration >= 0:
            raise ConfigError(f"hold duration must be >= 0, got {self.hold_duration}")

    @property
    def n_dof(self) -> int:
        return self.pose.shape[0]

    @property
    def duration(self) -> float:
        return float(self.hold_duration)

    def _evaluate(self, t):
        q = np.broadcast_to(self.pose, (t.shape[0], self.n_dof)).copy()
        return q, np.zeros_like(q), np.zeros_like(q)

    @property
    def segments(self):
        return (Segment(self.label, 0.0, self.duration),)

    def describe(self) -> dict:
        return {"type": "hold", "pose": self.pose.tolist(), "duration": self.duration, "label": self.label}


@dataclass(frozen=True, eq=False)
class Concatenation(Excitation):
    """Pieces played one after another: piece k runs on ``[T_k, T_k + duration_k)``.

    Pieces are expected to join continuously (each starting at rest where the previous one
    stopped); :meth:`check_continuity` verifies it. Before 0 the first piece's start is held,
    after the end the last piece's end pose.

    Attributes:
        parts: the pieces, all with the same n.
        labels: one label per piece, or None to keep that piece's own :attr:`segments`.
    """

    parts: tuple[Excitation, ...]
    labels: tuple[str | None, ...] = ()
    type_name = "sequence"

    def __post_init__(self):
        parts = tuple(self.parts)
        if not parts:
            raise ConfigError("a sequence of excitations needs at least one part")
        if len({p.n_dof for p in parts}) != 1:
            raise ConfigError(f"all parts must have the same number of joints, got {[p.n_dof for p in parts]}")
        labels = tuple(self.labels) or (None,) * len(parts)
        if len(labels) != len(parts):
            raise ConfigError(f"{len(parts)} parts but {len(labels)} labels")
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "labels", labels)

    @property
    def n_dof(self) -> int:
        return self.parts[0].n_dof

    @cached_property
    def starts(self) -> np.ndarray:
        """Start time (s) of each part (K,)."""
        return np.concatenate([[0.0], np.cumsum([p.duration for p in self.parts])[:-1]])

    @property
    def duration(self) -> float:
        return float(sum(p.duration for p in self.parts))

    def _evaluate(self, t):
        n = self.n_dof
        q, qd, qdd = (np.empty((t.shape[0], n)) for _ in range(3))
        idx = np.searchsorted(self.starts, t, side="right") - 1
        idx = np.clip(idx, 0, len(self.parts) - 1)
        for k, part in enumerate(self.parts):
            sel = idx == k
            if not sel.any():
                continue
            local = np.clip(t[sel] - self.starts[k], 0.0, part.duration)
            q[sel], qd[sel], qdd[sel] = part.evaluate(local)
            outside = (t[sel] < self.starts[k]) | (t[sel] > self.starts[k] + part.duration)
            if outside.any():  # held before the start and after the end
                rows = np.flatnonzero(sel)[outside]
                qd[rows] = 0.0
                qdd[rows] = 0.0
        return q, qd, qdd

    @property
    def segments(self) -> tuple[Segment, ...]:
        out: list[Segment] = []
        for start, part, label in zip(self.starts, self.parts, self.labels, strict=True):
            if part.duration <= 0:
                continue
            inner = (Segment(label, 0.0, part.duration),) if label else part.segments
            for s in inner:
                seg = Segment(s.label, float(start + s.start), float(start + s.end), s.joint)
                if out and out[-1].label == seg.label and out[-1].joint == seg.joint:
                    out[-1] = Segment(seg.label, out[-1].start, seg.end, seg.joint)
                else:
                    out.append(seg)
        return tuple(out)

    def check_continuity(self, atol: float = 1e-9) -> None:
        """Raise :class:`ConfigError` if q, qd or qdd jumps where two parts meet."""
        for k in range(1, len(self.parts)):
            before = self.parts[k - 1].evaluate([self.parts[k - 1].duration])
            after = self.parts[k].evaluate([0.0])
            for name, x, y in zip(("q", "qd", "qdd"), before, after, strict=True):
                if not np.allclose(x, y, atol=atol, rtol=0):
                    raise ConfigError(
                        f"{name} jumps by {np.abs(x - y).max():.3g} between parts {k} and {k + 1} of the sequence"
                    )

    def describe(self) -> dict:
        return {"type": "sequence", "parts": [p.describe() for p in self.parts], "labels": list(self.labels)}


def concatenate(parts: Sequence[Excitation], labels: Sequence[str | None] | None = None) -> Concatenation:
    """Play ``parts`` one after another (see :class:`Concatenation`)."""
    return Concatenation(tuple(parts), tuple(labels) if labels is not None else ())


def smoothstep(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quintic smoothstep S(x) = 10x³ − 15x⁴ + 6x⁵ on [0, 1] (clipped outside), and S', S''.

    S(0) = 0, S(1) = 1 with S' = S'' = 0 at both ends: the normalised fifth-order
    rest-to-rest polynomial of seed 004 Eq. 39. Peaks: max S' = 15/8, max |S''| = 10/√3.
    """
    x = np.clip(np.asarray(x, float), 0.0, 1.0)
    s = x**3 * (10 - 15 * x + 6 * x**2)
    ds = 30 * x**2 * (1 - x) ** 2
    dds = 60 * x * (1 - x) * (1 - 2 * x)
    return s, ds, dds


#: max |S'| and max |S''| of :func:`smoothstep`
SMOOTHSTEP_PEAK_VELOCITY = 15.0 / 8.0
SMOOTHSTEP_PEAK_ACCELERATION = 10.0 / np.sqrt(3.0)


def rest_to_rest_duration(distance, velocity, acceleration) -> float:
    """Shortest duration (s) of a quintic rest-to-rest move that respects the bounds.

    Args:
        distance: |q_end − q_start| per joint (n,).
        velocity: velocity bound per joint (n,).
        acceleration: acceleration bound per joint (n,).

    Returns:
        ``max_j max(15/8·d_j/v_j, sqrt(10/√3·d_j/a_j))`` (0 if nothing moves).
    """
    d = np.abs(np.asarray(distance, float))
    t_v = SMOOTHSTEP_PEAK_VELOCITY * d / np.asarray(velocity, float)
    t_a = np.sqrt(SMOOTHSTEP_PEAK_ACCELERATION * d / np.asarray(acceleration, float))
    return float(np.max(np.maximum(t_v, t_a), initial=0.0))


def as_float_list(x) -> Any:
    """numpy array or scalar → nested lists of Python floats (JSON-able)."""
    return np.asarray(x, float).tolist()


class SequenceBacked(Excitation):
    """An excitation defined by an inner :class:`Concatenation` stored as ``self._sequence``.

    Subclasses build ``_sequence`` in ``__init__`` and write :meth:`describe`; time, evaluation
    and segment labels are the sequence's.
    """

    _sequence: Concatenation

    @property
    def n_dof(self) -> int:
        return self._sequence.n_dof

    @property
    def duration(self) -> float:
        return self._sequence.duration

    def _evaluate(self, t):
        return self._sequence.evaluate(t)

    @property
    def segments(self):
        return self._sequence.segments
