"""The single arm environment both ``IdentifiedArm-v0`` and ``PyBulletArm-v0`` are.

:class:`ArmEnv` holds what the two share — spaces, task, reward, termination, seeding (see
:mod:`robotid_sim.envs.spec` and :mod:`robotid_sim.envs.tasks`) — and leaves the physics to its
subclasses: :meth:`ArmEnv._begin` puts the arm at the start of an episode, :meth:`ArmEnv._advance`
applies a torque for one control step, :meth:`ArmEnv._frame` renders.

The functions here are batched over copies and shared with the vector env, so that copy i of
``IdentifiedArmVectorEnv`` computes exactly what an ``IdentifiedArmEnv`` reset with seed ``s + i``
does.

**Seeding.** ``reset(seed=s)`` seeds the env's generator (Gymnasium's ``np_random``). Each
reset then draws two seeds from it, one for the task (start pose, goal or reference) and one for
the parameter draws of an identified env, so the task of an episode depends only on the seed and
the number of resets before it: an identified env (with or without parameter draws) and a
PyBullet env reset with the same seed get the same start state and target.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from robotid_sim.envs.spec import ArmSpec, checked_actions
from robotid_sim.envs.tasks import Task, make_task
from robotid_sim.errors import ConfigError


def episode_generators(rng: np.random.Generator) -> tuple[np.random.Generator, np.random.Generator]:
    """(task generator, parameter-draw generator) of one episode, seeded from two draws of ``rng``."""
    task_seed, draw_seed = rng.integers(0, 2**63, size=2)
    return np.random.default_rng(int(task_seed)), np.random.default_rng(int(draw_seed))


def checked_seed(seed, where: str) -> int | None:
    """``seed`` as a Python int (numpy integers too) or None, or ConfigError: a seed is None or an integer >= 0."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"{where}: reset(seed=...) takes None or an integer >= 0, got {seed!r:.60}")
    return int(seed)


def checked_reset_options(options: dict | None, where: str, valid: tuple[str, ...] = ()) -> dict:
    """``reset``'s ``options`` (a dict of ``valid`` keys; None gives ``{}``), or ConfigError naming unknown keys."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ConfigError(f"{where}: reset(options=...) takes a dict or None, got {type(options).__name__}")
    unknown = sorted(str(key) for key in options if key not in valid)
    if unknown:
        accepted = f"valid keys: {list(valid)}" if valid else "this env takes no reset options: pass options=None"
        raise ConfigError(f"{where}: unknown reset option(s) {unknown}; {accepted}")
    return options


def observe(arm: ArmSpec, task: Task, q, qd, params, steps) -> tuple[np.ndarray, np.ndarray]:
    """(observations (B, 4n) float32, target positions (B, n)) of B copies after ``steps`` (B,) control steps."""
    q_target, qd_target = task.target(params, np.asarray(steps, float) * arm.options.control_dt)
    return arm.observation(q, qd, q_target, qd_target), q_target


def joint_error(q, q_target) -> np.ndarray:
    """(B,) Euclidean norm of q − q_target (rad for revolute joints, m for prismatic ones): ``info["joint_error"]``
    (infinite, without a warning, for a state that ran away beyond 1e154)."""
    with np.errstate(over="ignore"):
        return np.linalg.norm(q - q_target, axis=-1)


def render_fps(control_dt: float) -> int | float:
    """Frames per second of one frame per control step (an int where it is one)."""
    fps = 1.0 / control_dt
    return round(fps) if abs(fps - round(fps)) < 1e-9 * fps else fps


class ArmEnv(gym.Env[np.ndarray, np.ndarray]):
    """Base of the arm environments (the module docstring, :mod:`robotid_sim.envs.spec`).

    Attributes:
        arm: the :class:`~robotid_sim.envs.spec.ArmSpec` (limits, torque scale, options).
        task: the :class:`~robotid_sim.envs.tasks.Task`.
        q, qd: (n,) the current joint state (None before the first reset).
        steps: control steps since the last reset.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 100}
    #: the env's name in messages (its Gymnasium id without the namespace)
    env_name: ClassVar[str]

    def __init__(self, arm: ArmSpec):
        self.arm = arm
        self.task = make_task(arm)
        self.action_space = arm.action_space()
        self.observation_space = arm.observation_space()
        self.render_mode = arm.options.render_mode
        self.metadata = {**type(self).metadata, "render_fps": render_fps(arm.options.control_dt)}
        self.q: np.ndarray | None = None
        self.qd: np.ndarray | None = None
        self.steps = 0
        self._params: np.ndarray | None = None

    # ----------------------------------------------------------------- physics (subclasses)
    @abstractmethod
    def _begin(self, q: np.ndarray, qd: np.ndarray, draw_rng: np.random.Generator) -> None:
        """Put the arm at (q, qd), each (n,), for a new episode; ``draw_rng`` serves parameter draws."""

    @abstractmethod
    def _advance(self, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Apply motor torque ``tau`` (n,) for one control step: ``(q, qd, ok)``, ok False if the dynamics failed
        (then q, qd are the state before the step)."""

    @abstractmethod
    def _frame(self) -> np.ndarray:
        """RGB frame (height, width, 3) uint8 of the arm at :attr:`q`."""

    # ----------------------------------------------------------------- Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        checked_reset_options(options, self.env_name)
        super().reset(seed=checked_seed(seed, self.env_name))
        task_rng, draw_rng = episode_generators(self.np_random)
        q, qd, self._params = self.task.sample(task_rng)
        self._begin(q, qd, draw_rng)
        self.q, self.qd, self.steps = q, qd, 0
        obs, q_target = observe(self.arm, self.task, q[None], qd[None], self._params[None], [0])
        return obs[0], {"t": 0.0, "joint_error": float(joint_error(q[None], q_target)[0])}

    def step(self, action) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.q is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        action = checked_actions(action, self.action_space.shape, self.env_name, self.arm.action_layout)
        a, tau = self.arm.torque(action)
        q, qd, ok = self._advance(tau[0])
        self.q, self.qd = q, qd
        self.steps += 1
        obs, q_target = observe(self.arm, self.task, q[None], qd[None], self._params[None], [self.steps])
        reward = self.arm.reward(q[None], qd[None], q_target, a)[0]
        terminated = self.arm.terminated(q[None], qd[None], [ok])[0]
        info = {"t": self.steps * self.arm.options.control_dt, "joint_error": float(joint_error(q[None], q_target)[0])}
        return obs[0], float(reward), bool(terminated), False, info

    def render(self) -> np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn('render() called without a render_mode; make the env with render_mode="rgb_array"')
            return None
        if self.q is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        return self._frame()
