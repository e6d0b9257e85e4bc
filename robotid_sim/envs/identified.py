"""``robotid_sim/IdentifiedArm-v0``: an identified model as a Gymnasium environment (SPEC §11).

The arm moves as the model says: its forward dynamics (friction and rotor inertia included, as
identified) integrated by semi-implicit Euler at ``physics_dt``, PyBullet's own scheme and step,
so that a model equal to the truth follows ``PyBulletArm-v0`` to rounding. Spaces, tasks,
reward and termination are those of :mod:`robotid_sim.envs.spec`. A model linear in its parameters
(with or without parameter draws) steps in one compiled call per control step
(:meth:`robotid_sim.envs.dynamics.CopyParameters.step`); other models step through their
``forward_dynamics`` from Python.

``model`` is an :class:`~robotid_sim.identification.IdentifiedModel` or the path of a saved one;
``robot`` (a :class:`~robotid_sim.robot.Robot`, a registered name or a URDF path) is optional
for models that embed their robot's structure (the limits come from it): it is needed for
rendering, and then checked against the model. Without it, the registered robot of the same name
is used when its structure equals the model's.

Pickling keeps the model, the robot and the episode's state; the PyBullet renderer (a live
client) is left out and created again on the next frame, so the env works in
``gymnasium.vector.AsyncVectorEnv`` workers.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from robotid_sim.dynamics.forward import robust_forward, semi_implicit_euler
from robotid_sim.envs.base import ArmEnv
from robotid_sim.envs.dynamics import CopyParameters, CovarianceDraws
from robotid_sim.envs.render import KinematicRenderer
from robotid_sim.envs.spec import CONTROL_DT, ArmEnvOptions, ArmSpec, arm_spec, validated_options
from robotid_sim.errors import ConfigError
from robotid_sim.robot.model import Robot
from robotid_sim.sim.pybullet_sim import DEFAULT_DT

ENV_NAME = "IdentifiedArm-v0"
#: random states inside the joint limits at which :func:`indefinite_mass_fraction` checks the mass matrix
MASS_CHECK_STATES = 1000
#: the keyword arguments of the identified envs that are not options (listed with the valid options in messages)
ARGUMENTS = ("model", "robot")


class IdentifiedArmOptions(ArmEnvOptions):
    """:class:`~robotid_sim.envs.spec.ArmEnvOptions` plus the parameter draws.

    Attributes:
        parameter_draws: ``None`` (the model as identified) or ``"covariance"``: at every reset
            the parameters are drawn from N(θ̂, parameter_draw_scale²·Σ), Σ the model's covariance.
        parameter_draw_scale: s, the standard deviations' multiplier (1: the identification's own).
    """

    parameter_draws: Literal["covariance"] | None = None
    parameter_draw_scale: float = Field(default=1.0, gt=0, allow_inf_nan=False)


@dataclass(frozen=True, eq=False)
class IdentifiedArm:
    """What an identified env is made of (shared by the single and the vector env).

    Attributes:
        model: the identified model.
        robot: the robot for rendering and limits, or None.
        arm: the :class:`~robotid_sim.envs.spec.ArmSpec`.
        draws: the :class:`~robotid_sim.envs.dynamics.CovarianceDraws`, or None.
    """

    model: object
    robot: object
    arm: ArmSpec
    draws: CovarianceDraws | None

    @classmethod
    def build(cls, model, robot, options: IdentifiedArmOptions, where: str = ENV_NAME) -> IdentifiedArm:
        """Resolve ``model`` (object or path) and ``robot`` (object, name, path or None) and check they agree.

        Raises:
            ConfigError: ``model`` is missing or neither a model nor a path, no robot structure is known
                to take the limits from, or the draws are impossible (no covariance).
            ModelError: the robot differs from the one the model was identified on.
        """
        from robotid_sim.identification import IdentifiedModel, load_model
        from robotid_sim.robot import load_robot

        if not isinstance(model, IdentifiedModel | str | Path):
            got = "nothing" if model is None else type(model).__name__
            raise ConfigError(
                f"{where}: model= must be an IdentifiedModel or the path of a saved model (.json), got {got}: "
                "give model=..."
            )
        if robot is not None and not isinstance(robot, Robot):
            robot = load_robot(robot)
        if isinstance(model, str | Path):
            model = load_model(model, robot=robot)
        elif robot is not None:
            model.check_structure(robot.structure())
        structure = getattr(model, "structure", None)
        if robot is None:
            robot = _registered_robot_like(structure)
        if robot is not None and list(robot.joint_names) != list(model.joint_names):
            raise ConfigError(
                f"the model's joints {model.joint_names} are not the robot's {robot.joint_names}: give the robot "
                "the model was identified on"
            )
        chain = robot if robot is not None else structure
        if chain is None:
            raise ConfigError(
                f"a '{model.kind}' model carries no robot structure to take joint limits from: give robot=..."
            )
        inverse = robot.inverse_dynamics if robot is not None else model.predict_torque
        arm = arm_spec(chain, options, inverse)
        draws = CovarianceDraws(model, options.parameter_draw_scale) if options.parameter_draws else None
        bad = indefinite_mass_fraction(model, chain) if model.has_forward_dynamics else 0.0
        if bad > 0:
            warnings.warn(
                f"{where}: {mass_matrix_message(bad, model.estimator)}; such episodes end at once (terminated)",
                UserWarning,
                stacklevel=2,
            )
        return cls(model, robot, arm, draws)


def indefinite_mass_fraction(model, chain) -> float:
    """The fraction of :data:`MASS_CHECK_STATES` random positions inside ``chain``'s limits (seed 0) at which
    ``model``'s mass matrix is not positive definite, so that its forward dynamics fails or runs away (0 for a
    physically consistent model, e.g. ``lmi_wls``'s)."""
    q, _, _ = chain.random_states(np.random.default_rng(0), MASS_CHECK_STATES)
    M = model.mass_matrix(q)
    M = 0.5 * (M + np.swapaxes(M, -1, -2))
    with np.errstate(all="ignore"):
        smallest = np.linalg.eigvalsh(M)[:, 0] if np.isfinite(M).all() else np.full(len(q), np.nan)
    return float(np.mean(~(smallest > 0)))


def mass_matrix_message(fraction: float, estimator: str) -> str:
    """What :func:`indefinite_mass_fraction` found, and the fix."""
    return (
        f"the '{estimator}' model's mass matrix is not positive definite at {fraction:.0%} of random states inside the "
        "joint limits (its parameters are not physically consistent): identify with a physically consistent "
        "estimator (lmi_wls)"
    )


def _registered_robot_like(structure):
    """The registered robot named like ``structure`` if its structure is that one, else None."""
    if structure is None:
        return None
    from robotid_sim.robot import bundled_robots, load_robot

    if structure.name not in bundled_robots():
        return None
    robot = load_robot(structure.name)
    return robot if not robot.structure().differences(structure) else None


class IdentifiedArmEnv(ArmEnv):
    """An identified model as a Gymnasium env (module docstring; spaces and reward in :mod:`robotid_sim.envs.spec`).

    Args:
        model: an :class:`~robotid_sim.identification.IdentifiedModel` or a saved model's path.
        robot: a :class:`~robotid_sim.robot.Robot`, registered name or URDF path (for rendering;
            optional when the model embeds its robot's structure).
        task: ``"reach"`` or ``"track"`` (:mod:`robotid_sim.envs.tasks`).
        parameter_draws: ``None`` or ``"covariance"`` (draws at every reset, reproducible under
            the reset seed; :mod:`robotid_sim.envs.dynamics`).
        parameter_draw_scale: multiplier of the drawn standard deviations.
        torque_limit: torque (N·m or N) of action ±1, one value or one per joint; default the
            URDF effort limits (:mod:`robotid_sim.envs.spec`).
        control_dt: seconds per env step.
        physics_dt: integration step (s), PyBullet's by default.
        render_mode: ``None`` or ``"rgb_array"``.
        **unknown: refused (ConfigError naming them and the valid options).

    Attributes:
        model: the identified model.
        robot: the robot or None.
        episode_parameters: with parameter draws, the standard parameters (p,) of this episode; else None.

    Raises:
        ConfigError: a missing model, an unknown or bad option (named), a model without covariance for
            ``parameter_draws``.
    """

    env_name = ENV_NAME

    def __init__(
        self,
        model=None,
        robot=None,
        task: str = "reach",
        parameter_draws: str | None = None,
        parameter_draw_scale: float = 1.0,
        torque_limit=None,
        control_dt: float = CONTROL_DT,
        physics_dt: float = DEFAULT_DT,
        render_mode: str | None = None,
        **unknown,
    ):
        options = validated_options(
            IdentifiedArmOptions,
            ENV_NAME,
            ARGUMENTS,
            task=task,
            parameter_draws=parameter_draws,
            parameter_draw_scale=parameter_draw_scale,
            torque_limit=torque_limit,
            control_dt=control_dt,
            physics_dt=physics_dt,
            render_mode=render_mode,
            **unknown,
        )
        built = IdentifiedArm.build(model, robot, options)
        super().__init__(built.arm)
        self.model, self.robot, self._draws = built.model, built.robot, built.draws
        from robotid_sim.identification.models import LinearParameterModel

        linear = isinstance(self.model, LinearParameterModel)
        self._copy = CopyParameters(self.model, 1) if self._draws is not None or linear else None
        n = len(self.model.joint_names)
        self._state = np.zeros((2, 1, n))  # the compiled step's q, qd buffers
        self._tau = np.zeros((1, n))
        self.episode_parameters: np.ndarray | None = None
        self._renderer = KinematicRenderer(self.robot) if self.robot is not None else None

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """qdd (N, n) of this episode's dynamics: the model's, or with ``parameter_draws`` the drawn parameters'."""
        if self.episode_parameters is None:
            return self.model.forward_dynamics(q, qd, tau)
        return Robot.from_structure(self.model.structure, self.episode_parameters).forward_dynamics(q, qd, tau)

    def _forward(self, q, qd, tau):
        if self._copy is None:
            return robust_forward(self.model.forward_dynamics, q, qd, tau)
        return self._copy.forward(q, qd, tau)

    def _begin(self, q, qd, draw_rng):
        if self._draws is not None:
            self.episode_parameters = self._draws.draw(draw_rng)
            self._copy.set(0, self.episode_parameters)

    def _advance(self, tau):
        options = self.arm.options
        if self._copy is not None and self._copy.compiled:
            q, qd = self._state
            q[0], qd[0], self._tau[0] = self.q, self.qd, tau
            ok = self._copy.step(q, qd, self._tau, options.physics_dt, options.substeps)
            return q[0].copy(), qd[0].copy(), bool(ok[0])
        q, qd, ok = semi_implicit_euler(
            self._forward, self.q[None], self.qd[None], tau[None], options.physics_dt, options.substeps
        )
        return q[0], qd[0], bool(ok[0])

    def _frame(self):
        if self._renderer is None:
            raise ConfigError(
                f"rendering needs the robot the '{self.model.kind}' model was identified on: make the env with "
                "robot=<name or URDF path>"
            )
        return self._renderer.frame(self.q)

    def close(self):
        if self._renderer is not None:
            self._renderer.close()
        super().close()
