"""Gymnasium environments from identified models, and the PyBullet truth beside them (SPEC §11).

Three environments share one contract (:mod:`robotid_sim.envs.spec`: spaces, tasks, reward,
termination), so a policy moves between them unchanged:

==================================  ===========================================================
id / class                          what it steps
==================================  ===========================================================
``robotid_sim/IdentifiedArm-v0``    an identified model's forward dynamics, semi-implicit Euler
:class:`IdentifiedArmEnv`           at the physics step (optionally with parameters drawn from
                                    the model's covariance at every reset)
``robotid_sim/PyBulletArm-v0``      the robot in PyBullet (the truth), friction on or off
:class:`PyBulletArmEnv`
vector entry point of               N copies of the identified arm in one batched forward-dynamics
``IdentifiedArm-v0``                call per physics step (``gymnasium.make_vec(...,
:class:`IdentifiedArmVectorEnv`     vectorization_mode="vector_entry_point")``)
:class:`SB3VecEnvAdapter`           the vector env behind Stable-Baselines3's ``VecEnv`` interface
==================================  ===========================================================

**Registration.** Importing this module registers both ids with ``gymnasium.register`` (string
entry points: nothing heavy is imported until an env is made). Two ways reach it:

- ``gymnasium.make("robotid_sim/IdentifiedArm-v0", model=...)`` after ``import robotid_sim``.
  ``import robotid_sim`` itself does not import gymnasium (start-up cost): if gymnasium is
  already imported it imports this module at once; otherwise it leaves a one-shot import hook
  that imports this module right after gymnasium's own import finishes.
- ``gymnasium.make("robotid_sim:robotid_sim/IdentifiedArm-v0", model=...)`` with nothing imported:
  Gymnasium imports ``robotid_sim`` first (Gymnasium 1.0 removed entry-point discovery of envs,
  so this module-prefix form is the way to name an env of a package not imported yet).

``import robotid_sim.envs`` also works, explicitly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robotid_sim._lazy import lazy_attributes

#: Gymnasium ids of the two environments
IDENTIFIED_ARM_ID = "robotid_sim/IdentifiedArm-v0"
PYBULLET_ARM_ID = "robotid_sim/PyBulletArm-v0"

#: episode length of both registered ids (control steps: 2 s at the default 10 ms control step);
#: ``gymnasium.make`` wraps the env in ``TimeLimit`` with it, the vector env truncates itself
DEFAULT_MAX_EPISODE_STEPS = 200

_LAZY_ATTRIBUTES = {
    "IdentifiedArmEnv": "robotid_sim.envs.identified",
    "PyBulletArmEnv": "robotid_sim.envs.pybullet_arm",
    "IdentifiedArmVectorEnv": "robotid_sim.envs.vector",
    "SB3VecEnvAdapter": "robotid_sim.envs.sb3",
    "to_sb3": "robotid_sim.envs.sb3",
}

if TYPE_CHECKING:
    from robotid_sim.envs.identified import IdentifiedArmEnv
    from robotid_sim.envs.pybullet_arm import PyBulletArmEnv
    from robotid_sim.envs.sb3 import SB3VecEnvAdapter, to_sb3
    from robotid_sim.envs.vector import IdentifiedArmVectorEnv


def register_envs() -> None:
    """Register ``robotid_sim/IdentifiedArm-v0`` and ``robotid_sim/PyBulletArm-v0`` (idempotent)."""
    import gymnasium

    if IDENTIFIED_ARM_ID not in gymnasium.registry:
        gymnasium.register(
            id=IDENTIFIED_ARM_ID,
            entry_point="robotid_sim.envs.identified:IdentifiedArmEnv",
            vector_entry_point="robotid_sim.envs.vector:IdentifiedArmVectorEnv",
            max_episode_steps=DEFAULT_MAX_EPISODE_STEPS,
        )
    if PYBULLET_ARM_ID not in gymnasium.registry:
        gymnasium.register(
            id=PYBULLET_ARM_ID,
            entry_point="robotid_sim.envs.pybullet_arm:PyBulletArmEnv",
            max_episode_steps=DEFAULT_MAX_EPISODE_STEPS,
        )


register_envs()

__all__ = [
    "DEFAULT_MAX_EPISODE_STEPS",
    "IDENTIFIED_ARM_ID",
    "PYBULLET_ARM_ID",
    "IdentifiedArmEnv",
    "IdentifiedArmVectorEnv",
    "PyBulletArmEnv",
    "SB3VecEnvAdapter",
    "register_envs",
    "to_sb3",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY_ATTRIBUTES)
