"""N copies of an identified arm stepped together: the vector entry point of ``IdentifiedArm-v0``.

``gymnasium.make_vec("robotid_sim/IdentifiedArm-v0", num_envs=1024, model=...)`` (or
``vectorization_mode="vector_entry_point"``) makes an :class:`IdentifiedArmVectorEnv`: the state
of all copies lives in (B, n) arrays and every physics substep is **one** batched
forward-dynamics call for all of them (the model's own ``forward_dynamics``, through the compiled
CRBA/RNEA kernels for linear models; with ``parameter_draws`` each copy has its own drawn
parameters and :class:`~robotid_sim.envs.dynamics.CopyParameters` does the same in one compiled
call). No Python loop over copies runs in ``step`` except to draw new episodes for the copies that
reset.

Copy i computes exactly what a single :class:`~robotid_sim.envs.identified.IdentifiedArmEnv`
reset with seed ``s + i`` computes (the same functions of :mod:`robotid_sim.envs.base`, its own
random generator), so this env steps like
``gymnasium.vector.SyncVectorEnv`` over ``gymnasium.make("robotid_sim/IdentifiedArm-v0", ...)``
copies, only faster; the tests check that.

**Autoreset** (``metadata["autoreset_mode"]``, Gymnasium 1.x): ``autoreset_mode`` chooses
``AutoresetMode.NEXT_STEP`` (default, as Gymnasium's own vector envs: a copy that ended is reset
by the next ``step``, which returns its first observation with reward 0 and
terminated = truncated = False), ``SAME_STEP`` (reset within the step that ended the episode;
its last observation and info are in ``info["final_obs"]``, ``info["final_info"]``; what
Stable-Baselines3 expects, see :mod:`robotid_sim.envs.sb3`), or ``DISABLED`` (reset ended copies
yourself with ``reset(options={"reset_mask": mask})``). Episodes are truncated after
``max_episode_steps`` control steps.

**Rendering** shows copy 0 (``render()`` returns a one-frame tuple).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from pydantic import Field

from robotid_sim.dynamics.forward import robust_forward, semi_implicit_euler
from robotid_sim.envs import DEFAULT_MAX_EPISODE_STEPS
from robotid_sim.envs.base import (
    checked_reset_options,
    checked_seed,
    episode_generators,
    joint_error,
    observe,
    render_fps,
)
from robotid_sim.envs.dynamics import CopyParameters
from robotid_sim.envs.identified import ARGUMENTS, IdentifiedArm, IdentifiedArmOptions
from robotid_sim.envs.render import KinematicRenderer
from robotid_sim.envs.spec import CONTROL_DT, checked_actions, validated_options
from robotid_sim.envs.tasks import make_task
from robotid_sim.errors import ConfigError
from robotid_sim.safety import memory_limit_bytes
from robotid_sim.sim.pybullet_sim import DEFAULT_DT

ENV_NAME = "IdentifiedArm-v0 (vector)"

#: bytes per copy of a vector env's state, estimated as RNG_BYTES (its random generator, measured about
#: 0.9 kB) plus (STATE_FLOATS_PER_JOINT · n)² + 4 · (task row) + 2 · (parameters) float64 values: the state,
#: task and parameter rows and the step's (B, n, n) temporaries, with margin (hyper9's reach measured
#: about 5 kB per copy at its peak; the estimate gives 16 kB)
RNG_BYTES = 2048
STATE_FLOATS_PER_JOINT = 4


class IdentifiedArmVectorOptions(IdentifiedArmOptions):
    """The single env's options plus the copies, the episode length and the autoreset mode."""

    num_envs: int = Field(default=1, ge=1)
    max_episode_steps: int = Field(default=DEFAULT_MAX_EPISODE_STEPS, ge=1)
    autoreset_mode: AutoresetMode = AutoresetMode.NEXT_STEP


def check_copies_fit(copies: int, n_dof: int, task_size: int, n_parameters: int) -> None:
    """Refuse (ConfigError, with the estimate) ``copies`` whose state would exceed the memory a run may use
    (:func:`~robotid_sim.safety.memory_limit_bytes`), before anything is allocated."""
    floats = (STATE_FLOATS_PER_JOINT * n_dof) ** 2 + 4 * task_size + 2 * n_parameters
    need = copies * (RNG_BYTES + 8 * floats)
    limit = memory_limit_bytes()
    if need > limit:
        most = limit // (need // copies)
        raise ConfigError(
            f"{ENV_NAME}: num_envs = {copies:,} copies of a {n_dof}-joint arm need about {need / 1024**3:,.1f} GiB, "
            f"more than the {limit / 1024**3:.1f} GiB a run may use: give num_envs <= {most:,}"
        )


class IdentifiedArmVectorEnv(VectorEnv):
    """``num_envs`` copies of an identified arm in one batched step (module docstring).

    Args:
        model: an :class:`~robotid_sim.identification.IdentifiedModel` or a saved model's path.
        num_envs: number of copies B.
        robot, task, parameter_draws, parameter_draw_scale, torque_limit, control_dt,
            physics_dt, render_mode: as for :class:`~robotid_sim.envs.identified.IdentifiedArmEnv`.
        max_episode_steps: control steps before an episode is truncated.
        autoreset_mode: an ``AutoresetMode`` (or its value, ``"NextStep"``, ``"SameStep"``, ``"Disabled"``).
        **unknown: refused (ConfigError naming them and the valid options).

    Attributes:
        q, qd: (B, n) the copies' joint states.
        steps: (B,) control steps since each copy's reset.
        episode_parameters: with parameter draws, (B, p) each copy's standard parameters; else None.

    Raises:
        ConfigError: as :class:`~robotid_sim.envs.identified.IdentifiedArmEnv`, and ``num_envs`` copies
            whose state would not fit in the memory a run may use.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 100, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        model=None,
        num_envs: int = 1,
        robot=None,
        task: str = "reach",
        parameter_draws: str | None = None,
        parameter_draw_scale: float = 1.0,
        torque_limit=None,
        control_dt: float = CONTROL_DT,
        physics_dt: float = DEFAULT_DT,
        max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        **unknown,
    ):
        options = validated_options(
            IdentifiedArmVectorOptions,
            ENV_NAME,
            ARGUMENTS,
            num_envs=num_envs,
            task=task,
            parameter_draws=parameter_draws,
            parameter_draw_scale=parameter_draw_scale,
            torque_limit=torque_limit,
            control_dt=control_dt,
            physics_dt=physics_dt,
            max_episode_steps=max_episode_steps,
            autoreset_mode=autoreset_mode,
            render_mode=render_mode,
            **unknown,
        )
        built = IdentifiedArm.build(model, robot, options, ENV_NAME)
        self.model, self.robot, self.arm, self._draws = built.model, built.robot, built.arm, built.draws
        self.task = make_task(self.arm)
        self.num_envs = B = options.num_envs
        check_copies_fit(B, self.arm.n_dof, self.task.size, self.model.structure.n_parameters)
        n = self.arm.n_dof
        self.single_action_space = self.arm.action_space()
        self._action_layout = f"one row per copy, {self.arm.action_layout}"
        self.action_space = batch_space(self.single_action_space, B)
        self.single_observation_space = self.arm.observation_space()
        self.observation_space = batch_space(self.single_observation_space, B)
        self.render_mode = options.render_mode
        self.metadata = {
            **type(self).metadata,
            "render_fps": render_fps(options.control_dt),
            "autoreset_mode": options.autoreset_mode,
        }
        self.max_episode_steps = options.max_episode_steps
        self._copies = CopyParameters(self.model, B) if self._draws is not None else None
        self.episode_parameters = np.zeros((B, self.model.structure.n_parameters)) if self._draws else None
        self.q, self.qd = np.zeros((B, n)), np.zeros((B, n))
        self.steps = np.zeros(B, dtype=np.int64)
        self._params = np.zeros((B, self.task.size))
        self._done = np.zeros(B, dtype=bool)
        self._rngs: list[np.random.Generator | None] = [None] * B
        self._renderer = KinematicRenderer(self.robot) if self.robot is not None else None

    # ----------------------------------------------------------------- episodes
    def _reset_copy(self, i: int) -> None:
        """Draw a new episode for copy ``i`` from its generator (as a single env's reset does)."""
        task_rng, draw_rng = episode_generators(self._rngs[i])
        self.q[i], self.qd[i], self._params[i] = self.task.sample(task_rng)
        self.steps[i] = 0
        if self._draws is not None:
            self.episode_parameters[i] = self._draws.draw(draw_rng)
            self._copies.set(i, self.episode_parameters[i])

    def _forward(self, q, qd, tau):
        if self._copies is None:
            return robust_forward(self.model.forward_dynamics, q, qd, tau)
        return self._copies.forward(q, qd, tau)

    def _infos(self, q, q_target, mask) -> dict:
        """Gymnasium's vector info: per-copy arrays (0 where ``mask`` is False) and their ``_key`` masks."""
        t = np.where(mask, self.steps * self.arm.options.control_dt, 0.0)
        error = np.where(mask, joint_error(q, q_target), 0.0)
        return {"t": t, "_t": mask.copy(), "joint_error": error, "_joint_error": mask.copy()}

    def _seeds(self, seed) -> list[int | None]:
        """One seed per copy from ``reset``'s ``seed`` (None, s: s + i, or a list of num_envs), or ConfigError."""
        B = self.num_envs
        if seed is None or isinstance(seed, int | np.integer):
            first = checked_seed(seed, ENV_NAME)
            return [None if first is None else first + i for i in range(B)]
        if not isinstance(seed, list | tuple | np.ndarray) or len(seed) != B:
            raise ConfigError(
                f"{ENV_NAME}: reset(seed=...) takes None, an integer >= 0 or a list of num_envs = {B} of them, "
                f"got {seed!r:.60}"
            )
        return [checked_seed(s, ENV_NAME) for s in seed]

    # ----------------------------------------------------------------- Gymnasium API
    def reset(self, *, seed: int | list[int | None] | None = None, options: dict | None = None):
        """Reset every copy (or those of ``options["reset_mask"]``); ``seed`` s seeds copy i with s + i
        (a list gives one seed per copy), as ``SyncVectorEnv`` does."""
        B = self.num_envs
        seeds = self._seeds(seed)
        options = checked_reset_options(options, ENV_NAME, ("reset_mask",))
        mask = options.get("reset_mask", np.ones(B, dtype=bool))
        if not isinstance(mask, np.ndarray) or mask.shape != (B,) or mask.dtype != np.bool_ or not mask.any():
            raise ConfigError(
                f"{ENV_NAME}: options['reset_mask'] must be a bool numpy array of shape ({B},) with a True entry"
            )
        super().reset(seed=seeds[0] if isinstance(seed, int | np.integer) else None)
        for i in np.flatnonzero(mask):
            if seeds[i] is not None or self._rngs[i] is None:
                self._rngs[i] = seeding.np_random(seeds[i])[0]
            self._reset_copy(i)
        self._done[mask] = False
        obs, q_target = observe(self.arm, self.task, self.q, self.qd, self._params, self.steps)
        return obs, self._infos(self.q, q_target, mask)

    def step(self, actions):
        if all(rng is None for rng in self._rngs):
            raise gym.error.ResetNeeded("call reset() before step()")
        actions = checked_actions(actions, self.action_space.shape, ENV_NAME, self._action_layout)
        mode = self.metadata["autoreset_mode"]
        if mode == AutoresetMode.DISABLED and self._done.any():
            raise gym.error.ResetNeeded(
                f"copies {np.flatnonzero(self._done).tolist()} ended: reset them with "
                "reset(options={'reset_mask': mask}) before stepping (autoreset_mode DISABLED)"
            )
        resetting = self._done.copy() if mode == AutoresetMode.NEXT_STEP else np.zeros(self.num_envs, bool)
        a, tau = self.arm.torque(actions)
        options = self.arm.options
        self.q, self.qd, ok = semi_implicit_euler(
            self._forward, self.q, self.qd, tau, options.physics_dt, options.substeps
        )
        self.steps += 1
        for i in np.flatnonzero(resetting):
            self._reset_copy(i)
        obs, q_target = observe(self.arm, self.task, self.q, self.qd, self._params, self.steps)
        reward = self.arm.reward(self.q, self.qd, q_target, a)
        terminated = self.arm.terminated(self.q, self.qd, ok)
        truncated = self.steps >= self.max_episode_steps
        reward[resetting], terminated[resetting], truncated[resetting] = 0.0, False, False
        everyone = np.ones(self.num_envs, dtype=bool)
        infos = self._infos(self.q, q_target, everyone)
        done = terminated | truncated
        if mode == AutoresetMode.SAME_STEP and done.any():
            ended = np.flatnonzero(done)
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in ended:
                final_obs[i] = obs[i].copy()
            final_info = self._infos(self.q, q_target, done)
            for i in ended:
                self._reset_copy(i)
            obs_new, q_target_new = observe(self.arm, self.task, self.q, self.qd, self._params, self.steps)
            obs[done] = obs_new[done]
            infos = self._infos(self.q, q_target_new, everyone)
            infos.update({"final_obs": final_obs, "_final_obs": done.copy()})
            infos.update({"final_info": final_info, "_final_info": done.copy()})
            done[:] = False
        self._done = done
        return obs, reward, terminated, truncated, infos

    def render(self) -> tuple[np.ndarray, ...] | None:
        """A one-frame tuple: copy 0 posed in the PyBullet renderer (``render_mode="rgb_array"``)."""
        if self.render_mode is None:
            gym.logger.warn('render() called without a render_mode; make the env with render_mode="rgb_array"')
            return None
        if self._renderer is None:
            raise ConfigError(
                f"rendering needs the robot the '{self.model.kind}' model was identified on: make the env with "
                "robot=<name or URDF path>"
            )
        return (self._renderer.frame(self.q[0]),)

    def close_extras(self, **kwargs) -> None:
        if self._renderer is not None:
            self._renderer.close()
