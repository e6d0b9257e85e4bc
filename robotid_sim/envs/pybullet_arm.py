"""``robotid_sim/PyBulletArm-v0``: the robot in PyBullet, the truth an identified env is compared with (SPEC §11).

The same spaces, tasks, reward and termination as ``IdentifiedArm-v0``
(:mod:`robotid_sim.envs.spec`); the physics is :class:`~robotid_sim.sim.pybullet_sim.PyBulletSimulator`
stepped with :meth:`~robotid_sim.sim.pybullet_sim.PyBulletSimulator.step_torque` at every
physics substep: Bullet's rigid body with the robot's rotor inertia and friction law acting on
the motor torque (PyBullet has no joint friction in torque mode; the simulator injects the
sidecar's). ``friction=False`` sets every friction coefficient to zero (rotor inertia stays): the
rigid body and rotors alone, for comparing with a friction-free identified model.

The PyBullet world is created at the first reset (not in ``__init__``) and is left out when the
env is pickled; an unpickled env creates it again, at its current state, on its next step.
"""

from __future__ import annotations

import numpy as np

from robotid_sim.envs.base import ArmEnv
from robotid_sim.envs.spec import CONTROL_DT, ArmEnvOptions, arm_spec, validated_options
from robotid_sim.errors import ConfigError
from robotid_sim.robot.model import Robot
from robotid_sim.sim.pybullet_sim import DEFAULT_DT

ENV_NAME = "PyBulletArm-v0"


class PyBulletArmOptions(ArmEnvOptions):
    """:class:`~robotid_sim.envs.spec.ArmEnvOptions` plus ``friction`` (the robot's friction law on or off)."""

    friction: bool = True


def without_friction(robot: Robot) -> Robot:
    """A copy of ``robot`` with every friction coefficient zero (same friction law, rotor inertia kept)."""
    theta = robot.true_parameters()
    theta[robot.parameter_slices()["friction"]] = 0.0
    return robot.with_parameters(theta)


class PyBulletArmEnv(ArmEnv):
    """The robot in PyBullet as a Gymnasium env (module docstring; spaces and reward in :mod:`robotid_sim.envs.spec`).

    Args:
        robot: a :class:`~robotid_sim.robot.Robot`, registered name or URDF path (an exported model's URDF,
            ``model.to_urdf``, loads with the sidecar found beside it).
        task: ``"reach"`` or ``"track"``.
        friction: apply the robot's friction law (True) or none (False).
        torque_limit: torque (N·m or N) of action ±1; default the URDF effort limits.
        control_dt: seconds per env step.
        physics_dt: PyBullet's time step (s).
        render_mode: ``None`` or ``"rgb_array"``.
        sidecar: the YAML sidecar of a ``robot`` given by name or path, instead of the one found beside it.
        **unknown: refused (ConfigError naming them and the valid options).

    Attributes:
        robot: the robot as loaded (its friction law intact).
        simulated_robot: the robot PyBullet simulates (without friction if ``friction=False``).

    Raises:
        ConfigError: a missing robot, an unknown or bad option (named).
        ModelError: an unknown robot name or a URDF that cannot be loaded.
    """

    env_name = ENV_NAME

    def __init__(
        self,
        robot=None,
        task: str = "reach",
        friction: bool = True,
        torque_limit=None,
        control_dt: float = CONTROL_DT,
        physics_dt: float = DEFAULT_DT,
        render_mode: str | None = None,
        sidecar=None,
        **unknown,
    ):
        from robotid_sim.robot import load_robot

        options = validated_options(
            PyBulletArmOptions,
            ENV_NAME,
            ("robot", "sidecar"),
            task=task,
            friction=friction,
            torque_limit=torque_limit,
            control_dt=control_dt,
            physics_dt=physics_dt,
            render_mode=render_mode,
            **unknown,
        )
        if robot is None:
            raise ConfigError(f"{ENV_NAME}: robot= is required: give a Robot, a registered robot's name or a URDF path")
        if sidecar is not None and isinstance(robot, Robot):
            raise ConfigError(f"{ENV_NAME}: sidecar= applies to a robot given by name or URDF path, not a Robot")
        self.robot = robot if isinstance(robot, Robot) else load_robot(robot, sidecar)
        super().__init__(arm_spec(self.robot, options, self.robot.inverse_dynamics))
        self.simulated_robot = self.robot if options.friction else without_friction(self.robot)
        self._sim = None

    def _simulator(self):
        """The PyBullet world, created on first use at the current state."""
        if self._sim is None:
            from robotid_sim.sim.pybullet_sim import PyBulletSimulator

            self._sim = PyBulletSimulator(self.simulated_robot, dt=self.arm.options.physics_dt)
            if self.q is not None:
                self._sim.reset(self.q, self.qd)
        return self._sim

    def _begin(self, q, qd, draw_rng):
        self._simulator().reset(q, qd)

    def _advance(self, tau):
        sim = self._simulator()
        ok = True
        for _ in range(self.arm.options.substeps):
            if not np.all(np.isfinite(sim.step_torque(tau))):
                ok = False
                break
        q, qd = sim.state()
        if not (ok and np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
            sim.reset(self.q, self.qd)  # the state before the step; the episode terminates
            return self.q, self.qd, False
        return q, qd, True

    def _frame(self):
        return self._simulator().render()

    def close(self):
        if self._sim is not None:
            self._sim.close()
            self._sim = None
        super().close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_sim"] = None  # a live PyBullet client does not pickle; created again on the next step
        return state
