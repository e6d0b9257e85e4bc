"""Stable-Baselines3 on the vector env: SB3's ``VecEnv`` interface over a Gymnasium vector env.

Stable-Baselines3 (2.x) trains on its own ``VecEnv`` interface and rejects Gymnasium's
``VectorEnv``. :class:`SB3VecEnvAdapter` implements that interface (``reset``, ``step_async``,
``step_wait``, ``get_attr``, ``set_attr``, ``env_method``, ``env_is_wrapped``, ``seed``,
``set_options``, ``close``) over a Gymnasium vector env whose autoreset mode is
``AutoresetMode.SAME_STEP``, which is SB3's semantics: a copy whose episode ends is reset within
the same step; its info then holds ``"terminal_observation"`` (the last observation of the ended
episode) and ``"TimeLimit.truncated"`` (True when the time limit, not a termination, ended it),
and ``reset_infos[i]`` the info of its new episode. Rewards come back as float32, ``dones`` as
``terminated | truncated``.

The adapter imports nothing of Stable-Baselines3 (an optional extra: ``pip install
'robotid-sim[rl]'``); :func:`to_sb3` imports it and returns the adapter as a subclass of SB3's
``VecEnv``, which SB3's algorithms check for::

    import gymnasium
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    import robotid_sim
    from robotid_sim.envs import to_sb3

    venv = gymnasium.make_vec(
        "robotid_sim/IdentifiedArm-v0", num_envs=64, model="planar3r_ols.json", autoreset_mode="SameStep"
    )
    policy = PPO("MlpPolicy", VecMonitor(to_sb3(venv))).learn(200_000)

The copies of a vector env are one Python object: ``get_attr``, ``set_attr`` and ``env_method``
act on the vector env itself and give the same answer for every index; ``env_is_wrapped`` is
False (the copies are not Gymnasium-wrapped: use SB3's ``VecMonitor`` for episode statistics).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from robotid_sim.envs.spec import checked_actions
from robotid_sim.errors import ConfigError

#: the adapter's name in messages
ADAPTER_NAME = "SB3VecEnvAdapter"

#: keys of a SAME_STEP vector env's info that are not per-copy values
_FINAL_KEYS = ("final_obs", "final_info")


def _per_copy(info: dict, num_envs: int) -> list[dict]:
    """A Gymnasium vector info (arrays with ``_key`` masks) as one dict per copy (SB3's form)."""
    out: list[dict] = [{} for _ in range(num_envs)]
    for key, value in info.items():
        if key.startswith("_") or key in _FINAL_KEYS:
            continue
        mask = info.get(f"_{key}", np.ones(num_envs, bool))
        for i in np.flatnonzero(mask):
            out[i][key] = _per_copy(value, num_envs)[i] if isinstance(value, dict) else value[i]
    return out


class SB3VecEnvAdapter:
    """Stable-Baselines3's ``VecEnv`` interface over a SAME_STEP Gymnasium vector env (module docstring).

    Args:
        venv: a Gymnasium ``VectorEnv`` with ``metadata["autoreset_mode"] == AutoresetMode.SAME_STEP``
            (e.g. ``gymnasium.make_vec("robotid_sim/IdentifiedArm-v0", ..., autoreset_mode="SameStep")``).

    Raises:
        ConfigError: the vector env does not reset in the same step.
    """

    def __init__(self, venv):
        mode = getattr(venv, "metadata", {}).get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ConfigError(
                f"Stable-Baselines3 needs a vector env that resets ended copies in the same step; this one's "
                f"autoreset_mode is {mode}: make it with autoreset_mode='SameStep'"
            )
        self.venv = venv
        self.num_envs = venv.num_envs
        self.observation_space = venv.single_observation_space
        self.action_space = venv.single_action_space
        self.render_mode = venv.render_mode
        self.metadata = {"render_modes": ["rgb_array"] if self.render_mode == "rgb_array" else []}
        self.reset_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._seeds: list[int | None] = [None] * self.num_envs
        self._options: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._actions: np.ndarray | None = None

    # ----------------------------------------------------------------- stepping
    def reset(self) -> np.ndarray:
        """Reset every copy (with the seeds and options set by :meth:`seed`, :meth:`set_options`, used once)."""
        seeds = self._seeds if any(s is not None for s in self._seeds) else None
        options = self._options[0] or None
        obs, info = self.venv.reset(seed=seeds, options=options)
        self.reset_infos = _per_copy(info, self.num_envs)
        self._seeds = [None] * self.num_envs
        self._options = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Keep ``actions`` (num_envs, n) for :meth:`step_wait`; DataError for another shape, a NaN or an infinity."""
        self._actions = checked_actions(actions, self.venv.action_space.shape, ADAPTER_NAME, "one row per copy")

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        """``(obs, rewards, dones, infos)`` in SB3's form (module docstring)."""
        obs, reward, terminated, truncated, info = self.venv.step(self._actions)
        dones = np.asarray(terminated) | np.asarray(truncated)
        infos = _per_copy(info, self.num_envs)
        if dones.any():
            final = _per_copy(info.get("final_info", {}), self.num_envs)
            for i in np.flatnonzero(dones):
                self.reset_infos[i] = infos[i]
                infos[i] = {
                    **final[i],
                    "terminal_observation": info["final_obs"][i],
                    "TimeLimit.truncated": bool(truncated[i] and not terminated[i]),
                }
        return obs, np.asarray(reward, dtype=np.float32), dones, infos

    def step(self, actions: np.ndarray):
        self.step_async(actions)
        return self.step_wait()

    def close(self) -> None:
        self.venv.close()

    # ----------------------------------------------------------------- seeding and options
    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seeds s, s + 1, ... for the copies at the next :meth:`reset` (a random s if None)."""
        if seed is None:
            seed = int(np.random.default_rng().integers(0, 2**32 - self.num_envs))
        self._seeds = [seed + i for i in range(self.num_envs)]
        return self._seeds

    def set_options(self, options: dict | list[dict] | None = None) -> None:
        """Options for the next :meth:`reset` (one dict: the vector env takes one for all copies)."""
        if isinstance(options, list):
            if any(o != options[0] for o in options):
                raise ConfigError("the copies of a vector env are reset with one options dict; give one")
            options = options[0] if options else None
        self._options = [dict(options or {}) for _ in range(self.num_envs)]

    # ----------------------------------------------------------------- attributes
    def _get_indices(self, indices: None | int | Iterable[int]) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        value = getattr(self.venv, attr_name)
        return [value for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        if len(self._get_indices(indices)) != self.num_envs:
            raise ConfigError(f"'{attr_name}' is an attribute of the whole vector env: set it for every copy")
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        result = getattr(self.venv, method_name)(*method_args, **method_kwargs)
        return [result for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        frames = self.venv.render()
        return list(frames) if frames is not None else []

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """The vector env's first frame (copy 0), or None without a render mode."""
        frames = self.get_images()
        return frames[0] if frames else None

    @property
    def unwrapped(self) -> SB3VecEnvAdapter:
        return self

    def getattr_depth_check(self, name: str, already_found: bool) -> str | None:
        """SB3's wrapper look-up: this class's name if it has ``name`` and a wrapper above has it too."""
        return f"{type(self).__module__}.{type(self).__name__}" if hasattr(self, name) and already_found else None


def to_sb3(venv) -> SB3VecEnvAdapter:
    """``venv`` as a Stable-Baselines3 ``VecEnv`` (an :class:`SB3VecEnvAdapter` that is also SB3's ``VecEnv``).

    Raises:
        ConfigError: Stable-Baselines3 is not installed, or ``venv`` does not reset in the same step.
    """
    try:
        from stable_baselines3.common.vec_env import VecEnv
    except ImportError:
        raise ConfigError(
            "Stable-Baselines3 is not installed: pip install 'robotid-sim[rl]' (stable-baselines3>=2.3)"
        ) from None
    return _sb3_class(VecEnv)(venv)


@functools.cache
def _sb3_class(vec_env_base: type) -> type:
    """The adapter made a subclass of SB3's ``VecEnv`` (its methods first, so none stays abstract)."""
    return type("SB3IdentifiedArmVecEnv", (SB3VecEnvAdapter, vec_env_base), {"__module__": __name__})
