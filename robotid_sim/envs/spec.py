"""The contract every arm environment shares: options, limits, spaces, reward and termination.

Signals are batched over copies of the arm: ``q``, ``qd``, ``tau`` are (B, n) (B = 1 for a
single env), ``action`` (B, n) in [-1, 1].

**Actions.** ``Box(-1, 1, (n,), float32)``; the motor torque is ``tau = clip(action, -1, 1) ·
torque_limit``, held for one control step (zero-order hold over the physics substeps). A finite
action outside [-1, 1] is clipped; an action of another shape, or with a NaN or an infinity, is
refused with :class:`~robotid_sim.errors.DataError` naming the expected shape
(:func:`checked_actions`), before the arm moves. The
torque limit of each joint comes from, in this order: the ``torque_limit`` option (one value or
one per joint, N·m or N); the URDF ``<limit effort>`` (kept in the robot's structure, so a saved
model knows it); for a joint without one, :data:`TORQUE_LIMIT_FACTOR` times the largest |tau| the
arm's inverse dynamics needs over :data:`FALLBACK_STATES` random states inside its position,
velocity and acceleration limits (seed 0) — computed on the true robot when the env knows it,
else on the model, so give ``torque_limit`` where an identified env and a PyBullet env of a URDF
without effort limits must scale actions identically. :attr:`ArmSpec.torque_limit_source`
says which.

**Observations.** float32 ``[q, qd, q_target, qd_target]`` (4n): the joint state and the task's
target (for ``reach`` the goal pose and zero velocity, for ``track`` the reference position and
velocity at the current time). Bounds: positions within the joint limits (joints without
limits: ±:data:`~robotid_sim.robot.model.DEFAULT_REVOLUTE_RANGE` rad,
±:data:`~robotid_sim.robot.model.DEFAULT_PRISMATIC_RANGE` m, the ranges the default excitation
uses), velocities within ±:data:`VELOCITY_BOUND_FACTOR` × the robot's velocity limits, target
velocities within the velocity limits. The state is clipped into these bounds for the
observation, which only ever changes the last observation of a terminated episode: leaving a
bound terminates it.

**Reward** (both tasks), with e_j = (q_j − q*_j) / (upper_j − lower_j), the error as a fraction of
the joint's range (q clipped into its bounds first), so revolute and prismatic joints weigh alike, and
v_j = qd_j / velocity_limit_j (qd clipped into its bound)::

    r = 1 − mean_j(|e_j|) + mean_s(mean_j(exp(−|e_j| / s))), s in PRECISION_SCALES
          − VELOCITY_COST · mean_j(v_j²) − ACTION_COST · mean_j(a_j²)

The first term pulls from anywhere in the range (a constant gradient); the second pays for precision
(it rises from 0 to 1 near the target at two scales: on a 6.2 rad range 0.19 at 0.3 rad, 0.53 at
0.05 rad, 0.85 at 0.01 rad), and the velocity term for settling there. r lies in [−VELOCITY_COST ·
VELOCITY_BOUND_FACTOR² − ACTION_COST, 2] (2 at the target at rest), whatever the state: a run-away
state gives a finite reward. The error enters by its absolute value, not its square: near the
target a squared error gives a policy almost no gradient (PPO on planar3r's reach reached a median
final error of 2.3 rad with e², 1.1 rad with |e| at the same budget, ``robotid-sim rl-demo``); with the
precision and velocity terms and the recipe of :mod:`robotid_sim.studies.rl_training`, PPO reaches 0.004 rad
(docs/benchmarks.md).

**Termination** (``terminated``), checked at the end of each control step: a joint outside its
position bounds; a joint faster than its velocity bound (the arm is running away); or the
dynamics failed (non-finite state, or an identified model's mass matrix singular: the
identified parameters need not be physically consistent). **Truncation** (``truncated``) is the
time limit only: ``max_episode_steps`` control steps (``TimeLimit`` for single envs made with
``gymnasium.make``, built into the vector env).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from robotid_sim.errors import ConfigError, DataError, format_validation_error
from robotid_sim.robot.model import DEFAULT_PRISMATIC_RANGE, DEFAULT_REVOLUTE_RANGE
from robotid_sim.sim.pybullet_sim import DEFAULT_DT

#: control step (s): one env step; the physics advances in substeps of ``physics_dt``
CONTROL_DT = 0.01

#: most physics substeps per env step (``control_dt / physics_dt``): 100 s of control step at 1 ms
MAX_SUBSTEPS = 100_000

#: observation bound on |qd| as a multiple of the robot's velocity limit; beyond it the episode terminates
VELOCITY_BOUND_FACTOR = 10.0

#: weight of the mean squared normalised action in the reward
ACTION_COST = 1e-3
#: the precision term's scales, as fractions of each joint's range (0.31 and 0.031 rad on planar3r's 6.2 rad)
PRECISION_SCALES = (0.05, 0.005)
#: weight of the mean squared velocity (in units of each joint's velocity limit) in the reward
VELOCITY_COST = 0.01

#: torque limit of a joint without a URDF effort limit: this factor times the largest |tau| the
#: inverse dynamics needs over FALLBACK_STATES random states inside the limits
TORQUE_LIMIT_FACTOR = 2.0
FALLBACK_STATES = 1000

#: what ``torque_limit_source`` says for each source
TORQUE_FROM_OPTION = "the torque_limit option"
TORQUE_FROM_URDF = "URDF <limit effort>"
TORQUE_FROM_DYNAMICS = (
    f"URDF <limit effort> where given, else {TORQUE_LIMIT_FACTOR:g} x the largest |tau| over "
    f"{FALLBACK_STATES} random states inside the limits"
)

PerJoint = float | list[float]


class ArmEnvOptions(BaseModel):
    """Options common to the arm environments, validated once (an unknown or bad one raises ConfigError).

    Attributes:
        task: ``"reach"`` (a joint target drawn at reset) or ``"track"`` (a random Fourier
            reference drawn at reset), see :mod:`robotid_sim.envs.tasks`.
        control_dt: seconds per env step.
        physics_dt: integration / PyBullet step (s); ``control_dt`` must be a whole multiple of it, at most
            :data:`MAX_SUBSTEPS` times it.
        torque_limit: action scale, one value or one per joint (N·m or N); default: see the module docstring.
        render_mode: ``None`` or ``"rgb_array"``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    task: Literal["reach", "track"] = "reach"
    control_dt: float = Field(default=CONTROL_DT, gt=0, allow_inf_nan=False)
    physics_dt: float = Field(default=DEFAULT_DT, gt=0, allow_inf_nan=False, validate_default=True)
    torque_limit: PerJoint | None = None
    render_mode: Literal["rgb_array"] | None = None

    @field_validator("physics_dt")
    @classmethod
    def _whole_substeps(cls, physics_dt: float, info: ValidationInfo) -> float:
        control_dt = info.data.get("control_dt")
        if control_dt is None:  # control_dt itself is invalid, and reported
            return physics_dt
        ratio = control_dt / physics_dt
        if not ratio <= MAX_SUBSTEPS:  # inf too
            raise ValueError(
                f"control_dt / physics_dt = {ratio:,.0f} physics steps per env step, more than {MAX_SUBSTEPS:,}: "
                "give a shorter control_dt or a longer physics_dt"
            )
        if ratio < 1 - 1e-9 or abs(ratio - round(ratio)) > 1e-9 * ratio:
            raise ValueError(f"control_dt = {control_dt:g} s must be a whole multiple of physics_dt = {physics_dt:g} s")
        return physics_dt

    @property
    def substeps(self) -> int:
        """Physics steps per control step."""
        return round(self.control_dt / self.physics_dt)


def validated_options(
    options_class: type[ArmEnvOptions], where: str, arguments: tuple[str, ...] = (), **options
) -> ArmEnvOptions:
    """``options_class`` (:class:`ArmEnvOptions` or an env's subclass of it) from keyword arguments, or one
    ConfigError line naming ``where``, each unknown or bad option, and the valid ones.

    Args:
        options_class: the env's options.
        where: the env's name, put first in the message.
        arguments: the env's keyword arguments that are not options (``model``, ``robot``), listed among the
            valid ones.
        **options: the keyword arguments the env was given, unknown ones included.
    """
    try:
        return options_class(**options)
    except ValidationError as exc:
        valid = [*arguments, *options_class.model_fields]
        raise ConfigError(format_validation_error(exc, where, noun="option", valid=valid)) from None


def checked_actions(actions, shape: tuple[int, ...], where: str, layout: str) -> np.ndarray:
    """``actions`` as an array of exactly ``shape`` with finite values, or DataError (the check of every step:
    one shape compare and one ``np.isfinite`` on the actions).

    Args:
        actions: what the caller passed to ``step``.
        shape: the action space's shape, ``(n,)`` or ``(B, n)``.
        where: the env's name, put first in the message.
        layout: what the shape holds (``"one value per joint: joint1, joint2"``), for the message.

    Raises:
        DataError: ``actions`` is not numeric, has another shape, or holds a NaN or an infinity.
    """
    try:
        a = np.asarray(actions)
    except ValueError:  # a ragged sequence
        a = np.asarray(None)
    if a.shape != shape or a.dtype.kind not in "biuf":
        got = f"shape {a.shape}" if a.dtype.kind in "biuf" else f"{actions!r:.60}"
        raise DataError(f"{where}: actions must be numbers of shape {shape} ({layout}), got {got}")
    if not np.isfinite(a).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
        raise DataError(
            f"{where}: actions must be finite (in [-1, 1]; finite values outside are clipped), got "
            f"{a[bad]} at index {bad[0] if len(bad) == 1 else bad}: check the policy's output"
        )
    return a


@dataclass(frozen=True, eq=False)
class ArmSpec:
    """Limits, spaces, action scaling, reward and termination of one arm (see the module docstring).

    Attributes:
        joint_names: the n joint names.
        lower, upper: (n,) finite position bounds (rad or m).
        velocity_limit: (n,) the robot's velocity limits (|qd| of the references).
        acceleration_limit: (n,) the robot's acceleration limits (|qdd| of the references).
        torque_limit: (n,) the torque of action ±1.
        torque_limit_source: where ``torque_limit`` comes from.
        options: the validated :class:`ArmEnvOptions`.
    """

    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity_limit: np.ndarray
    acceleration_limit: np.ndarray
    torque_limit: np.ndarray
    torque_limit_source: str
    options: ArmEnvOptions

    @property
    def n_dof(self) -> int:
        return len(self.joint_names)

    @property
    def velocity_bound(self) -> np.ndarray:
        """(n,) the |qd| bound of the observation (terminates beyond it)."""
        return VELOCITY_BOUND_FACTOR * self.velocity_limit

    @property
    def position_range(self) -> np.ndarray:
        """(n,) upper − lower, the scale of the reward's joint errors."""
        return self.upper - self.lower

    # ----------------------------------------------------------------- spaces
    @functools.cached_property
    def action_layout(self) -> str:
        """What one action holds, for messages (built once: :func:`checked_actions` takes it at every step)."""
        return f"one value in [-1, 1] per joint: {', '.join(self.joint_names)}"

    def action_space(self):
        from gymnasium import spaces

        return spaces.Box(-1.0, 1.0, (self.n_dof,), dtype=np.float32)

    def observation_space(self):
        """``Box`` of ``[q, qd, q_target, qd_target]`` (4n,) float32."""
        from gymnasium import spaces

        vb, v = self.velocity_bound, self.velocity_limit
        low = np.concatenate([self.lower, -vb, self.lower, -v]).astype(np.float32)
        high = np.concatenate([self.upper, vb, self.upper, v]).astype(np.float32)
        return spaces.Box(low, high, dtype=np.float32)

    # ----------------------------------------------------------------- stepping
    def torque(self, action) -> tuple[np.ndarray, np.ndarray]:
        """(clipped action, motor torque), each (B, n) float64, from finite actions (B, n) or (n,)
        (:func:`checked_actions`)."""
        a = np.clip(np.asarray(action, dtype=float).reshape(-1, self.n_dof), -1.0, 1.0)
        return a, a * self.torque_limit

    def observation(self, q, qd, q_target, qd_target) -> np.ndarray:
        """float32 (B, 4n) observations, each part clipped into its bounds."""
        vb, v = self.velocity_bound, self.velocity_limit
        parts = (
            np.clip(q, self.lower, self.upper),
            np.clip(qd, -vb, vb),
            np.clip(q_target, self.lower, self.upper),
            np.clip(qd_target, -v, v),
        )
        return np.concatenate(parts, axis=-1).astype(np.float32)

    def reward(self, q, qd, q_target, action) -> np.ndarray:
        """(B,) the reward of the module docstring: ``1 − mean(|e|) + mean_s(mean(exp(−|e|/s)))
        − VELOCITY_COST·mean(v²) − ACTION_COST·mean(a²)``, e the joint error as a fraction of the range."""
        q = np.clip(q, self.lower, self.upper)
        v = np.clip(qd, -self.velocity_bound, self.velocity_bound) / self.velocity_limit
        e = np.abs(q - q_target) / self.position_range
        return (
            1.0
            - np.mean(e, axis=-1)
            + sum(np.mean(np.exp(-e / scale), axis=-1) for scale in PRECISION_SCALES) / len(PRECISION_SCALES)
            - VELOCITY_COST * np.mean(v * v, axis=-1)
            - ACTION_COST * np.mean(action * action, axis=-1)
        )

    def terminated(self, q, qd, ok) -> np.ndarray:
        """(B,) bool: the dynamics failed (``ok`` False), a joint left its bounds or outran its velocity bound."""
        out = (q < self.lower) | (q > self.upper) | (np.abs(qd) > self.velocity_bound)
        return ~np.asarray(ok, bool) | out.any(axis=-1)


def arm_spec(chain, options: ArmEnvOptions, inverse_dynamics: Callable | None = None) -> ArmSpec:
    """The :class:`ArmSpec` of a robot or robot structure (anything with ``joints``, limits and ``random_states``).

    Args:
        chain: a :class:`~robotid_sim.robot.Robot` or :class:`~robotid_sim.robot.structure.RobotStructure`.
        options: validated options (``torque_limit`` among them).
        inverse_dynamics: ``(q, qd, qdd) -> tau`` (N, n) for the torque-limit fallback of joints
            without an effort limit (the true robot's where known, else the model's).

    Raises:
        ConfigError: a bad ``torque_limit``, or a joint without an effort limit and no dynamics to derive one.
    """
    names = tuple(chain.joint_names)
    lower, upper = (np.asarray(x, float) for x in chain.position_limits)
    half = np.where(np.array(chain.joint_kinds) == "prismatic", DEFAULT_PRISMATIC_RANGE, DEFAULT_REVOLUTE_RANGE)
    lower = np.where(np.isfinite(lower), lower, -half)
    upper = np.where(np.isfinite(upper), upper, half)
    if np.any(~(upper > lower)):
        j = int(np.argmax(~(upper > lower)))
        raise ConfigError(f"joint '{names[j]}' has no position range ([{lower[j]:g}, {upper[j]:g}]): it cannot move")
    torque, source = _torque_limit(chain, options.torque_limit, inverse_dynamics)
    return ArmSpec(
        joint_names=names,
        lower=lower,
        upper=upper,
        velocity_limit=np.asarray(chain.velocity_limit, float).copy(),
        acceleration_limit=np.asarray(chain.acceleration_limit, float).copy(),
        torque_limit=torque,
        torque_limit_source=source,
        options=options,
    )


def _torque_limit(chain, given, inverse_dynamics) -> tuple[np.ndarray, str]:
    n = chain.n_dof
    if given is not None:
        torque = np.asarray(given, float)
        torque = np.full(n, float(torque)) if torque.ndim == 0 else torque
        if torque.shape != (n,) or not np.all(np.isfinite(torque) & (torque > 0)):
            raise ConfigError(
                f"torque_limit must be one positive number or {n} (one per joint: {', '.join(chain.joint_names)}), "
                f"got {given!r}"
            )
        return torque, TORQUE_FROM_OPTION
    effort = np.array([j.effort_limit for j in chain.joints], float)
    known = np.isfinite(effort) & (effort > 0)
    if known.all():
        return effort, TORQUE_FROM_URDF
    if inverse_dynamics is None:
        missing = [name for name, ok in zip(chain.joint_names, known, strict=True) if not ok]
        raise ConfigError(
            f"joints {missing} have no effort limit in the URDF and no dynamics is known to derive one: "
            "give torque_limit=[...] (N·m or N per joint)"
        )
    q, qd, qdd = chain.random_states(np.random.default_rng(0), FALLBACK_STATES)
    need = TORQUE_LIMIT_FACTOR * np.abs(inverse_dynamics(q, qd, qdd)).max(axis=0)
    return np.where(known, effort, np.maximum(need, np.finfo(float).tiny)), TORQUE_FROM_DYNAMICS
