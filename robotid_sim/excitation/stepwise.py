"""Stepwise data collection for stepwise SINDy (seed 000 §3; SPEC §6 and §8 ``stepwise_sindy``).

Seed 000 sorts the arm's motion into three states that activate, in turn, the gravity terms
(static), the velocity terms (constant velocity) and the inertia terms (variable velocity), and
collects data in each. "Static" data are taken while the joints creep at a very low constant
speed, 0.1°/s, to overcome Coulomb dry friction (seed 000 §3, the paragraph after Eq. 34).

:class:`StepwiseExcitation` plays, with smooth rest-to-rest transitions (fifth-order
polynomials, seed 004 Eq. 39) in between:

1. ``static``: at each of ``n_poses`` seeded random feasible poses (default 30, spread over the
   whole range), all joints creep at ``slow_speed`` for ``static_duration`` seconds (default 0.5);
2. ``constant_velocity``:

   - ``n_sweeps`` sweeps (default 30) that each start from a seeded random pose and cruise for
     ``sweep_time`` seconds (default 1) at per-joint speeds drawn from ``sweep_speeds`` (fractions
     of the velocity limit, default 0.2 … 0.9) in random directions, each joint's speed lowered
     where its range is too short for the travel;
   - optionally, for each level of ``speeds`` (default: none), a sweep through the centre of
     the range and back at the same speeds — both directions, as seed 000 separates forward and
     backward data for the sign function;
3. ``variable_velocity``: ``fourier_segments`` random feasible Fourier segments (seed 001
   Eq. 10; default 2).

The defaults give stepwise SINDy well-determined Steps I and II: gravity seen at 30 poses over the
whole workspace, the velocity terms at 30 velocity vectors in all directions from everywhere in it
(the earlier defaults — 4 poses, 3 centred sweeps — left both steps under-determined: stepwise
validation errors of 50–800 %). About 100–150 s of motion on the bundled arms.

Every sample stays inside the position, velocity and acceleration limits shrunk by ``margin``,
and the labels are exact: a cruise is ``constant_velocity`` (qdd = 0, qd constant) from its first
to its last sample.

:attr:`~robotid_sim.excitation.base.Excitation.segments` labels every time range with one of
``'static' | 'constant_velocity' | 'variable_velocity' | 'transition'``: a creep with its tiny
ramps counts as ``static``, and the moves into and out of the designed states (the rest-to-rest
moves between them and the speed ramps of the sweeps) as ``transition``. Seed 000 collects each state
in its own experiment, so its data have no such moves; they are variable-velocity motion (stepwise
SINDy's Step III uses them so), but they begin and end at rest, where no sample-wise criterion can
tell them from a static pose.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.excitation.base import (
    SMOOTHSTEP_PEAK_ACCELERATION,
    SMOOTHSTEP_PEAK_VELOCITY,
    STEPWISE_TRANSITION,
    Concatenation,
    Excitation,
    Hold,
    JointLimits,
    Segment,
    SequenceBacked,
    as_float_list,
    rest_to_rest_duration,
    smoothstep,
)
from robotid_sim.excitation.fourier import FourierExcitation
from robotid_sim.excitation.polynomial import QuinticPolynomial

logger = logging.getLogger(__name__)

#: 0.1°/s, the creep speed of seed 000 §3 (rad/s)
SLOW_SPEED = np.deg2rad(0.1)
#: times are rounded up to this resolution (s)
_RESOLUTION = 1e-3


def _ceil(x: float) -> float:
    return float(np.ceil(x / _RESOLUTION - 1e-9) * _RESOLUTION)


def _ramp_integral(x: np.ndarray) -> np.ndarray:
    """∫_0^x S(u) du for the quintic smoothstep S (0.5 at x = 1)."""
    x = np.clip(x, 0.0, 1.0)
    return x**4 * (2.5 - 3 * x + x**2)


@dataclass(frozen=True, eq=False)
class ConstantVelocity(Excitation):
    """Ramp up to a constant velocity, cruise, ramp down to rest (all joints together).

    The velocity follows qd = v·S(τ/T_r) up, v during the cruise, v·(1 − S(·)) down, with S the
    quintic smoothstep, so qdd is continuous and peaks at 15/8·|v|/T_r.

    Attributes:
        start: start pose (n,).
        velocity: cruise velocity v (n,).
        cruise_time: T_c (s).
        ramp_time: T_r (s) of each ramp.
        cruise_label: segment label of the cruise.
        ramp_label: segment label of the ramps.
    """

    start: np.ndarray
    velocity: np.ndarray
    cruise_time: float
    ramp_time: float
    cruise_label: str = "constant_velocity"
    ramp_label: str = "variable_velocity"
    type_name = "constant_velocity"

    def __post_init__(self):
        object.__setattr__(self, "start", np.atleast_1d(np.asarray(self.start, float)))
        object.__setattr__(self, "velocity", np.broadcast_to(np.asarray(self.velocity, float), self.start.shape).copy())
        if not (self.cruise_time >= 0 and self.ramp_time > 0):
            raise ConfigError(
                f"constant-velocity segment needs cruise_time >= 0 and ramp_time > 0, "
                f"got {self.cruise_time} and {self.ramp_time}"
            )
        object.__setattr__(self, "cruise_time", float(self.cruise_time))
        object.__setattr__(self, "ramp_time", float(self.ramp_time))

    @property
    def n_dof(self) -> int:
        return self.start.shape[0]

    @property
    def duration(self) -> float:
        return self.cruise_time + 2 * self.ramp_time

    @property
    def travel(self) -> np.ndarray:
        """Displacement over the segment (n,): v·(T_c + T_r)."""
        return self.velocity * (self.cruise_time + self.ramp_time)

    def _evaluate(self, t):
        Tr, Tc = self.ramp_time, self.cruise_time
        tau = np.clip(t, 0.0, self.duration)[:, None]
        x_up = tau / Tr
        x_dn = (tau - Tr - Tc) / Tr
        S_up, dS_up, _ = smoothstep(x_up)
        S_dn, dS_dn, _ = smoothstep(x_dn)
        # displacement in units of v: ramp-up integral + cruise + ramp-down integral
        pos = (
            Tr * _ramp_integral(x_up)
            + np.clip(tau - Tr, 0.0, Tc)
            + Tr * (np.clip(x_dn, 0.0, 1.0) - _ramp_integral(x_dn))
        )
        vel = np.where(tau < Tr, S_up, 1.0 - S_dn)
        acc = np.where(tau < Tr, dS_up / Tr, np.where(tau > Tr + Tc, -dS_dn / Tr, 0.0))
        v = self.velocity
        qd = v * vel
        qdd = v * acc
        outside = (t < 0) | (t > self.duration)
        qd[outside] = 0.0
        qdd[outside] = 0.0
        return self.start + v * pos, qd, qdd

    @property
    def segments(self):
        Tr, Tc = self.ramp_time, self.cruise_time
        parts = [
            Segment(self.ramp_label, 0.0, Tr),
            Segment(self.cruise_label, Tr, Tr + Tc),
            Segment(self.ramp_label, Tr + Tc, self.duration),
        ]
        out: list[Segment] = []
        for s in parts:
            if s.end <= s.start:
                continue
            if out and out[-1].label == s.label:
                out[-1] = Segment(s.label, out[-1].start, s.end)
            else:
                out.append(s)
        return tuple(out)

    def describe(self) -> dict:
        return {
            "type": "constant_velocity",
            "start": as_float_list(self.start),
            "velocity": as_float_list(self.velocity),
            "cruise_time": self.cruise_time,
            "ramp_time": self.ramp_time,
            "cruise_label": self.cruise_label,
            "ramp_label": self.ramp_label,
        }


def _ramp_time(velocity: np.ndarray, limits: JointLimits) -> float:
    """Shortest common ramp time with peak |qdd| = 15/8·|v|/T_r within the limits."""
    return _ceil(max(float(np.max(SMOOTHSTEP_PEAK_VELOCITY * np.abs(velocity) / limits.acceleration)), _RESOLUTION))


@dataclass(frozen=True, eq=False, init=False)
class StepwiseExcitation(SequenceBacked):
    """Static, constant-velocity and variable-velocity data in one trajectory (seed 000 §3).

    The options are stored as given (:meth:`describe` returns them); the trajectory is
    rebuilt deterministically from them and the robot's limits. See the module docstring.
    """

    options: dict
    type_name = "stepwise"

    def __init__(
        self,
        robot,
        *,
        n_poses: int = 30,
        poses=None,
        static_duration: float = 0.5,
        slow_speed: float = SLOW_SPEED,
        speeds=(),
        cruise_time: float = 4.0,
        min_cruise_time: float = 0.5,
        fourier_segments: int = 2,
        harmonics: int = 3,
        base_frequency: float = 0.1,
        fourier_periods: int = 1,
        pose_spread: float = 1.0,
        margin: float = 0.02,
        seed: int = 0,
        n_sweeps: int = 30,
        sweep_time: float = 1.0,
        sweep_speeds=(0.2, 0.9),
    ):
        """Build the trajectory.

        Args:
            robot: a Robot or :class:`JointLimits`.
            n_poses: number of random static poses (ignored when ``poses`` is given).
            poses: explicit static poses (K, n).
            static_duration: creep time at each pose (s).
            slow_speed: creep speed (rad/s or m/s); seed 000: 0.1°/s. 0 holds still.
            speeds: levels of the centred sweeps (there and back) as fractions of each joint's
                velocity limit; empty (default): none.
            cruise_time: wished cruise time per centred sweep (s); shortened so the sweep fits the range.
            min_cruise_time: shortest acceptable centred cruise (s); speeds are lowered to allow it.
            fourier_segments: number of variable-velocity Fourier segments.
            harmonics: harmonics of each Fourier segment.
            base_frequency: base frequency of the Fourier segments (Hz).
            fourier_periods: periods per Fourier segment.
            pose_spread: random poses are drawn from this central fraction of each range.
            margin: fraction of every limit kept free.
            seed: random seed (poses, sweep directions, Fourier coefficients).
            n_sweeps: number of constant-velocity sweeps from random poses (0: none).
            sweep_time: cruise time of each of them (s).
            sweep_speeds: (low, high): their per-joint speeds are drawn uniformly from this range
                of fractions of each joint's velocity limit.
        """
        options = dict(
            n_poses=int(n_poses),
            poses=None if poses is None else as_float_list(poses),
            static_duration=float(static_duration),
            slow_speed=float(slow_speed),
            speeds=[float(s) for s in np.atleast_1d(speeds)],
            cruise_time=float(cruise_time),
            min_cruise_time=float(min_cruise_time),
            fourier_segments=int(fourier_segments),
            harmonics=int(harmonics),
            base_frequency=float(base_frequency),
            fourier_periods=int(fourier_periods),
            pose_spread=float(pose_spread),
            margin=float(margin),
            seed=int(seed),
            n_sweeps=int(n_sweeps),
            sweep_time=float(sweep_time),
            sweep_speeds=[float(s) for s in np.atleast_1d(sweep_speeds)],
        )
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "_sequence", _build_stepwise(JointLimits.of(robot), **options))

    def describe(self) -> dict:
        """The options as given, less ``poses`` when None and the options of :data:`_OMITTED_AT_DEFAULT` at their
        defaults (so a default collection round-trips through configs that predate them)."""
        out = {"type": "stepwise", **self.options}
        if out["poses"] is None:
            del out["poses"]
        for key, default in _OMITTED_AT_DEFAULT.items():
            if out[key] == default:
                del out[key]
        return out


#: defaults of the options that :meth:`StepwiseExcitation.describe` leaves out when unchanged
_OMITTED_AT_DEFAULT = {"speeds": [], "n_sweeps": 30, "sweep_time": 1.0, "sweep_speeds": [0.2, 0.9]}


def _check_stepwise(
    pose_spread, speeds, static_duration, slow_speed, min_cruise_time, cruise_time, n_sweeps, sweep_time, sweep_speeds
) -> None:
    """Refuse (ConfigError) stepwise options out of range."""
    if not 0 < pose_spread <= 1:
        raise ConfigError(f"pose_spread must be in (0, 1], got {pose_spread}")
    if any(not 0 < s <= 1 for s in speeds):
        raise ConfigError(f"speeds are fractions of the velocity limit in (0, 1], got {speeds}")
    if static_duration < 0 or slow_speed < 0 or min_cruise_time < 0 or cruise_time < min_cruise_time:
        raise ConfigError(
            "static_duration, slow_speed, min_cruise_time must be >= 0 and cruise_time >= min_cruise_time"
        )
    if n_sweeps < 0 or not sweep_time > 0:
        raise ConfigError(f"n_sweeps must be >= 0 and sweep_time > 0, got {n_sweeps} and {sweep_time}")
    if len(sweep_speeds) != 2 or not 0 < sweep_speeds[0] <= sweep_speeds[1] <= 1:
        raise ConfigError(
            f"sweep_speeds is a range (low, high) of fractions of the velocity limit, 0 < low <= high <= 1, "
            f"got {sweep_speeds}"
        )


class _Plan:
    """The pieces of a stepwise excitation as they are appended, and the pose the last one ends at.

    Attributes:
        lim: the (margin-shrunk) limits.
        lower, upper: the position range (n,), ±π where a limit is infinite.
        width, centre: ``upper - lower`` and the middle of the range (n,).
        parts, labels: the pieces and their labels (None keeps the piece's own segments).
        current: the pose (n,) the last piece ends at.
    """

    def __init__(self, lim: JointLimits):
        self.lim = lim
        self.lower = np.where(np.isfinite(lim.lower), lim.lower, -np.pi)
        self.upper = np.where(np.isfinite(lim.upper), lim.upper, np.pi)
        self.width = self.upper - self.lower
        self.centre = 0.5 * (self.lower + self.upper)
        self.parts: list[Excitation] = []
        self.labels: list[str | None] = []
        self.current = self.centre.copy()

    def move_to(self, target: np.ndarray) -> None:
        """Append a rest-to-rest transition from :attr:`current` to ``target`` (none if already there)."""
        T = rest_to_rest_duration(target - self.current, self.lim.velocity, self.lim.acceleration)
        if T > 0:
            self.parts.append(QuinticPolynomial(self.current, target, _ceil(T)))
            self.labels.append(STEPWISE_TRANSITION)
        self.current = np.asarray(target, float).copy()


def _static_poses(plan: _Plan, n_poses, poses, static_duration, slow_speed, pose_spread, rng) -> None:
    """1. static poses, crept through at slow_speed (seed 000 §3)."""
    n, lim = plan.lim.n_dof, plan.lim
    creep = np.full(n, float(slow_speed))
    creep_ramp = _ramp_time(creep, lim) if slow_speed > 0 else 0.0
    creep_travel = creep * (static_duration + creep_ramp)
    if poses is None:
        half = 0.5 * pose_spread * np.maximum(plan.width - creep_travel, 0.0)
        pose_list = plan.centre - creep_travel / 2 + rng.uniform(-1, 1, size=(int(n_poses), n)) * half
        # visited nearest first (same poses, shorter transitions)
        pose_list = pose_list[_greedy_order(plan.current, pose_list, pose_list + creep_travel, lim)]
    else:
        pose_list = np.atleast_2d(np.asarray(poses, float))
        if pose_list.shape[1] != n:
            raise ConfigError(f"static poses must be (K, {n}), got {pose_list.shape}")
        bad = (pose_list < plan.lower) | (pose_list + creep_travel > plan.upper)
        if bad.any():
            k, j = np.argwhere(bad)[0]
            raise ConfigError(
                f"static pose {k + 1}, joint {j + 1}: {pose_list[k, j]:.4g} leaves no "
                f"room in [{plan.lower[j]:.4g}, {plan.upper[j]:.4g}] for the creep"
            )
    for pose in pose_list:
        plan.move_to(pose)
        if slow_speed > 0:
            piece = ConstantVelocity(pose, creep, static_duration, creep_ramp, "static", "static")
            plan.parts.append(piece)
            plan.labels.append("static")
            plan.current = pose + piece.travel
        elif static_duration > 0:
            plan.parts.append(Hold(pose, static_duration, "static"))
            plan.labels.append("static")


def _speed_sweeps(plan: _Plan, speeds, cruise_time, min_cruise_time, rng) -> None:
    """2. constant-velocity sweeps, forward and back, at each speed level."""
    n, lim, width = plan.lim.n_dof, plan.lim, plan.width
    for level in speeds:
        signs = rng.choice([-1.0, 1.0], size=n)
        ratio = rng.uniform(0.5, 1.0, size=n)
        speed = level * ratio * lim.velocity
        # cap so that the sweep fits: |v|·T_c_min + 15/8·v²/a <= width
        k2 = SMOOTHSTEP_PEAK_VELOCITY / lim.acceleration
        cap = (-min_cruise_time + np.sqrt(min_cruise_time**2 + 4 * k2 * width)) / (2 * k2)
        speed = np.minimum(speed, cap)
        ramp = _ramp_time(speed, lim)
        speed = np.minimum(speed, width / (min_cruise_time + ramp))
        Tc = min(cruise_time, float(np.min(width / speed)) - ramp)
        Tc = max(np.floor(Tc / _RESOLUTION) * _RESOLUTION, 0.0)
        v = signs * speed
        travel = v * (Tc + ramp)
        start = plan.centre - travel / 2
        plan.move_to(start)
        forward = ConstantVelocity(start, v, Tc, ramp, ramp_label=STEPWISE_TRANSITION)
        back = ConstantVelocity(start + forward.travel, -v, Tc, ramp, ramp_label=STEPWISE_TRANSITION)
        plan.parts += [forward, back]
        plan.labels += [None, None]
        plan.current = start + forward.travel + back.travel


def _random_sweeps(plan: _Plan, n_sweeps, sweep_time, sweep_speeds, rng) -> None:
    """2b. constant-velocity sweeps from random poses in random directions."""
    lim = plan.lim
    sweeps = [_draw_sweep(lim, plan.lower, plan.upper, sweep_time, sweep_speeds, rng) for _ in range(int(n_sweeps))]
    if sweeps:
        starts = np.array([w.start for w in sweeps])
        for k in _greedy_order(plan.current, starts, starts + np.array([w.travel for w in sweeps]), lim):
            plan.move_to(sweeps[k].start)
            plan.parts.append(sweeps[k])
            plan.labels.append(None)
            plan.current = sweeps[k].start + sweeps[k].travel


def _fourier_segments(plan: _Plan, fourier_segments, harmonics, base_frequency, fourier_periods, seed) -> None:
    """3. variable-velocity Fourier segments (seed 001 Eq. 10)."""
    for k in range(int(fourier_segments)):
        fourier = FourierExcitation.random(
            plan.lim, harmonics=harmonics, base_frequency=base_frequency, seed=seed + 1000 + k, periods=fourier_periods
        )
        plan.move_to(fourier.q0)
        plan.parts.append(fourier)
        plan.labels.append("variable_velocity")
        plan.current = fourier.q0.copy()


def _build_stepwise(
    limits: JointLimits,
    *,
    n_poses,
    poses,
    static_duration,
    slow_speed,
    speeds,
    cruise_time,
    min_cruise_time,
    fourier_segments,
    harmonics,
    base_frequency,
    fourier_periods,
    pose_spread,
    margin,
    seed,
    n_sweeps,
    sweep_time,
    sweep_speeds,
) -> Concatenation:
    lim = limits.shrunk(margin)
    rng = np.random.default_rng(seed)
    _check_stepwise(
        pose_spread,
        speeds,
        static_duration,
        slow_speed,
        min_cruise_time,
        cruise_time,
        n_sweeps,
        sweep_time,
        sweep_speeds,
    )
    plan = _Plan(lim)
    _static_poses(plan, n_poses, poses, static_duration, slow_speed, pose_spread, rng)
    _speed_sweeps(plan, speeds, cruise_time, min_cruise_time, rng)
    _random_sweeps(plan, n_sweeps, sweep_time, sweep_speeds, rng)
    _fourier_segments(plan, fourier_segments, harmonics, base_frequency, fourier_periods, seed)
    if not plan.parts:
        raise ConfigError("the stepwise excitation is empty: give poses, sweeps, speeds or Fourier segments")
    sequence = Concatenation(tuple(plan.parts), tuple(plan.labels))
    logger.info("stepwise excitation: %d parts, %.1f s", len(plan.parts), sequence.duration)
    return sequence


#: a random sweep travels at most this fraction of each joint's range
_SWEEP_FILL = 0.95


def _draw_sweep(lim, lower, upper, sweep_time, sweep_speeds, rng) -> ConstantVelocity:
    """A constant-velocity sweep from a random start pose, inside ``[lower, upper]``.

    Per-joint speeds are drawn from ``sweep_speeds`` (fractions of the velocity limit) in random
    directions; a joint whose range cannot hold the travel v·(T_c + T_r) is slowed to fit it. Lowering
    speeds only shortens the common ramp T_r, so the travel still fits after the ramp is recomputed.
    """
    n = lim.n_dof
    width = upper - lower
    speed = rng.uniform(sweep_speeds[0], sweep_speeds[1], size=n) * lim.velocity
    signs = rng.choice([-1.0, 1.0], size=n)
    ramp = _ramp_time(speed, lim)
    speed = np.minimum(speed, _SWEEP_FILL * width / (sweep_time + ramp))
    ramp = _ramp_time(speed, lim)
    v = signs * speed
    travel = v * (sweep_time + ramp)
    room = np.maximum(width - np.abs(travel), 0.0)
    start = lower + rng.uniform(0.0, 1.0, size=n) * room + np.maximum(-travel, 0.0)
    return ConstantVelocity(start, v, sweep_time, ramp, ramp_label=STEPWISE_TRANSITION)


def _move_times(current: np.ndarray, targets: np.ndarray, lim: JointLimits) -> np.ndarray:
    """Rest-to-rest move time (s) from ``current`` to each row of ``targets``."""
    d = np.abs(targets - current)
    t_v = SMOOTHSTEP_PEAK_VELOCITY * d / lim.velocity
    t_a = np.sqrt(SMOOTHSTEP_PEAK_ACCELERATION * d / lim.acceleration)
    return np.max(np.maximum(t_v, t_a), axis=1)


def _greedy_order(current: np.ndarray, starts: np.ndarray, ends: np.ndarray, lim: JointLimits) -> list[int]:
    """Visit order of pieces (start and end poses, (K, n) each): always the nearest start in move time.

    The data are the same in any order; the nearest-neighbour tour only shortens the transitions.
    """
    left = list(range(len(starts)))
    order: list[int] = []
    here = np.asarray(current, float)
    while left:
        k = left[int(np.argmin(_move_times(here, starts[left], lim)))]
        order.append(k)
        left.remove(k)
        here = ends[k]
    return order
