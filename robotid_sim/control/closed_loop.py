"""Closed-loop runs: a controller drives a plant along a reference; the tracking error is the
metric (SPEC §10, seed 000 Fig. 15).

The plant is either the PyBullet truth (friction and rotor inertia included, stepped by
:meth:`~robotid_sim.sim.PyBulletSimulator.track`) or a model, an identified one or a
:class:`~robotid_sim.robot.Robot`, integrated by :func:`integrate_closed_loop` with the integrator
Bullet uses: semi-implicit Euler at the control period dt (qd += dt·qdd, then q += dt·qd), one
batched ``forward_dynamics`` call with N = 1 per step, the torque held over the step. Both start at
the reference's first state, so a perfect controller on a perfect model leaves no error.

The metric, per joint: η_i = mean |e_i| over the run, e = q_ref - q, in degrees for a revolute
joint (millimetres for a prismatic one). Seed 000 reports η = 1.10/1.21/1.23° for PID,
0.73/0.50/0.81° for its Step I model + PID and 0.25/0.25/0.27° for its Step III model + PID on
its three-axis arm.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from robotid_sim.errors import ConfigError, DataError, RobotIdError
from robotid_sim.progress import Progress
from robotid_sim.sim.cost import check_closed_loop
from robotid_sim.sim.tracking import Controller, Plant, Reference

log = logging.getLogger(__name__)

#: the ``plant`` that is the PyBullet simulation of the robot
PYBULLET = "pybullet"

#: default control period and physics step (s), as the simulator's
DEFAULT_DT = 1e-3


def controller_from_config(spec: Controller | str | Mapping, where: str = "controller") -> Controller:
    """A controller from an instance, a registered name, or ``{"name": ..., "options": {...}}``.

    Raises:
        PluginError: an unknown controller name (the message lists the known ones).
        ConfigError: a malformed mapping or an unknown option, naming the controller.
    """
    if isinstance(spec, Controller):
        return spec
    from robotid_sim.plugins import get_controller

    if isinstance(spec, str):
        return get_controller(spec).from_options()
    if isinstance(spec, Mapping) and isinstance(spec.get("name"), str) and set(spec) <= {"name", "options"}:
        options = spec.get("options") or {}
        if not isinstance(options, Mapping):
            raise ConfigError(f"{where}: 'options' must be a mapping of option names to values, got {options!r:.80}")
        return get_controller(spec["name"]).from_options(**options)
    raise ConfigError(
        f"{where} must be a Controller, a registered name (e.g. 'pid') or a mapping "
        f"{{'name': ..., 'options': {{...}}}}, got {spec!r:.80}"
    )


@dataclass(frozen=True, eq=False)
class ClosedLoopResult:
    """One closed-loop run, recorded at every control step.

    Attributes:
        controller: the controller's :meth:`~robotid_sim.control.Controller.describe`.
        plant: ``"pybullet"`` (the true robot, with its friction unless it was switched off), or what
            the model plant was (its kind and estimator, or a robot's name).
        joint_names: (n,) joint names.
        joint_kinds: (n,) ``"revolute"`` or ``"prismatic"``, for the units of the error.
        t: (N,) time (s).
        q, qd: (N, n) the plant's state at each step.
        q_ref, qd_ref: (N, n) the reference at each step.
        tau: (N, n) the controller's motor torque at each step.
        friction: whether the PyBullet plant had its friction (always True for a model plant).
        diverged_at: time (s) at which a model plant's integration left the finite numbers (the rows
            from there on are NaN), else None.
    """

    controller: dict
    plant: str
    joint_names: list[str]
    joint_kinds: list[str]
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    q_ref: np.ndarray
    qd_ref: np.ndarray
    tau: np.ndarray
    friction: bool = True
    diverged_at: float | None = None

    @property
    def error(self) -> np.ndarray:
        """e = q_ref - q (N, n), rad or m."""
        return self.q_ref - self.q

    @property
    def units(self) -> list[str]:
        """The unit of each joint's :attr:`eta`: ``"deg"`` (revolute) or ``"mm"`` (prismatic)."""
        return ["mm" if kind == "prismatic" else "deg" for kind in self.joint_kinds]

    @property
    def scale(self) -> np.ndarray:
        """(n,) from rad to degrees (revolute) or m to millimetres (prismatic)."""
        return np.array([1e3 if kind == "prismatic" else 180.0 / np.pi for kind in self.joint_kinds])

    @property
    def error_display(self) -> np.ndarray:
        """:attr:`error` (N, n) in :attr:`units`."""
        return self.error * self.scale

    @property
    def eta(self) -> np.ndarray:
        """η_i = mean |e_i| (n,) in :attr:`units` (seed 000 Fig. 15); inf for a diverged run."""
        if self.diverged_at is not None:
            return np.full(len(self.joint_names), np.inf)
        return np.mean(np.abs(self.error_display), axis=0)

    @property
    def max_error(self) -> np.ndarray:
        """max |e_i| (n,) in :attr:`units`; inf for a diverged run."""
        if self.diverged_at is not None:
            return np.full(len(self.joint_names), np.inf)
        return np.max(np.abs(self.error_display), axis=0)

    def metrics(self) -> dict:
        """The JSON-able summary: ``eta`` and ``max_error`` per joint, ``eta_mean`` over the joints,
        ``units``, ``joints`` (names), ``plant``, ``friction``, ``duration_s``, ``diverged_at``."""
        eta, worst = self.eta, self.max_error
        return {
            "eta": eta.tolist(),
            "eta_mean": float(np.mean(eta)),
            "max_error": worst.tolist(),
            "units": self.units,
            "joints": list(self.joint_names),
            "plant": self.plant,
            "friction": self.friction,
            "duration_s": float(len(self.t) * (self.t[1] - self.t[0])) if len(self.t) > 1 else 0.0,
            "diverged_at": self.diverged_at,
        }


def run_closed_loop(
    robot,
    controller: Controller | str | Mapping,
    reference="default",
    duration: float | None = None,
    plant: Any = PYBULLET,
    *,
    dt: float = DEFAULT_DT,
    friction: bool = True,
    progress: Progress | None = None,
    allow_large: bool = False,
) -> ClosedLoopResult:
    """Drive ``plant`` along ``reference`` under ``controller`` and record the tracking.

    Args:
        robot: a :class:`~robotid_sim.robot.Robot` or a name/path for :func:`~robotid_sim.load_robot`:
            what is simulated for ``plant="pybullet"``, and the joints, limits and default excitation.
        controller: a :class:`~robotid_sim.control.Controller`, a registered name (``"pid"``), or
            ``{"name": ..., "options": {...}}``; reset at the start of the run.
        reference: an excitation object, an excitation mapping (``{"type": "fourier", ...}``), or
            ``"default"`` (the robot's, as :func:`~robotid_sim.simulate` resolves it).
        duration: seconds (default: the reference's duration).
        plant: ``"pybullet"`` (the PyBullet truth), an identified model, a Robot, or a saved model's
            path (loaded with :func:`~robotid_sim.load_model`, checked against ``robot``).
        dt: control period and integration step (s).
        friction: with ``plant="pybullet"``, False simulates the robot without its friction law (an
            identified model given to a controller is then refused: its friction law is not the plant's).
        progress: optional ``progress(label, steps_done, steps_total)`` (:mod:`robotid_sim.progress`).
        allow_large: lift the limits of :func:`~robotid_sim.sim.cost.check_closed_loop` (RAM: all, not half).

    Returns:
        A :class:`ClosedLoopResult` with the state, reference and torque at every step.

    Raises:
        ConfigError: a bad controller, option, reference, duration or plant, or a run above the limits.
        PluginError: an unknown controller name.
        DataError: the controller returned a torque of the wrong shape or not finite; in PyBullet, a
            joint left its limits.
    """
    from robotid_sim.robot import Robot, load_robot
    from robotid_sim.sim.simulate import resolve_excitation

    if not isinstance(robot, Robot):
        robot = load_robot(robot)
    controller = controller_from_config(controller)
    if not (isinstance(dt, int | float) and np.isfinite(dt) and dt > 0):
        raise ConfigError(f"dt must be a finite number > 0 s, got {dt!r}")
    model = resolve_plant(plant, robot)
    if model is not None and not friction:
        raise ConfigError(
            "friction=False switches off the friction of the PyBullet plant; a model plant has the friction it "
            "was identified with"
        )
    simulated = robot if friction else _without_friction(robot)
    controller.reset(Plant(simulated if model is None else model, dt))  # its options are checked here, early
    excitation = resolve_excitation(robot, reference)
    duration = excitation.duration if duration is None else duration
    hint = "give a shorter duration or a longer dt, or allow_large=True to run it anyway"
    steps = check_closed_loop(robot.n_dof, duration, dt, 1, allow_large, hint).steps
    duration = float(duration)
    excitation.check_limits(robot, duration=min(duration, excitation.duration))
    t = np.arange(steps) * dt
    q_ref, qd_ref, qdd_ref = excitation.evaluate(t)
    q, qd, tau, diverged_at, plant_text = _drive(model, simulated, controller, (q_ref, qd_ref, qdd_ref), dt, progress)
    log.info("closed loop: %s on %s for %.3g s", controller.label, plant_text, duration)
    return ClosedLoopResult(
        controller=controller.describe(),
        plant=plant_text,
        joint_names=list(robot.joint_names),
        joint_kinds=list(robot.joint_kinds),
        t=t,
        q=q,
        qd=qd,
        q_ref=q_ref,
        qd_ref=qd_ref,
        tau=tau,
        friction=bool(friction),
        diverged_at=diverged_at,
    )


def _drive(model, simulated, controller: Controller, reference: tuple, dt: float, progress):
    """(q, qd, tau, diverged_at, plant text) of ``controller`` tracking ``reference`` (q_ref, qd_ref, qdd_ref):
    on the PyBullet robot ``simulated`` when ``model`` is None, else on the model plant."""
    if model is None:
        from robotid_sim.sim.pybullet_sim import PyBulletSimulator

        with PyBulletSimulator(simulated, dt=dt) as sim:
            rec = sim.track(*reference, controller=controller, progress=progress)
        return rec["q"], rec["qd"], rec["tau"], None, PYBULLET
    q, qd, tau, diverged_at = integrate_closed_loop(model, controller, *reference, dt, progress)
    return q, qd, tau, diverged_at, describe_plant(model)


def resolve_plant(plant: Any, robot) -> Any:
    """None for the PyBullet plant (``"pybullet"``), else the model to integrate: a model object as
    given, or a saved model's path loaded; either checked against ``robot``'s structure.

    Raises:
        ConfigError: a path that does not hold a model of ``robot``, something that is not a model, or a
            model identified on a robot of another structure.
    """
    if isinstance(plant, str) and plant == PYBULLET:
        return None
    if isinstance(plant, str | os.PathLike):
        from robotid_sim.identification import load_model

        try:
            return load_model(plant, robot=robot)
        except RobotIdError as exc:
            raise ConfigError(
                f"plant: '{os.fspath(plant)}' is neither '{PYBULLET}' nor a usable model: {exc}"
            ) from None
    if not callable(getattr(plant, "forward_dynamics", None)) or getattr(plant, "n_dof", None) != robot.n_dof:
        raise ConfigError(
            f"plant must be '{PYBULLET}', a model of the {robot.n_dof} joints of '{robot.name}' (with "
            f"forward_dynamics) or a saved model's path, got {type(plant).__name__}"
        )
    if callable(getattr(plant, "check_structure", None)):
        try:
            plant.check_structure(robot.structure())
        except RobotIdError as exc:
            raise ConfigError(f"plant: {exc}") from None
    return plant


def integrate_closed_loop(
    model,
    controller: Controller,
    q_ref: np.ndarray,
    qd_ref: np.ndarray,
    qdd_ref: np.ndarray,
    dt: float,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float | None]:
    """Close the loop around a model: semi-implicit Euler of ``model.forward_dynamics`` at ``dt``.

    The controller is reset with ``Plant(model, dt)``; the state starts at the reference's first
    row. Each step: tau = controller(t, q, qd, reference row), qdd = forward_dynamics(q, qd, tau)
    (N = 1), qd += dt·qdd, q += dt·qd, the scheme Bullet steps with (and that
    :func:`~robotid_sim.identification.validation.rollout` uses open loop).

    Args:
        model: anything with ``n_dof`` and batched ``forward_dynamics(q, qd, tau)`` (N, n) -> (N, n).
        controller: the controller.
        q_ref, qd_ref, qdd_ref: (S, n) reference at the S steps.
        dt: step (s).
        progress: optional ``progress("closed loop", steps_done, steps_total)``, called every 1000 steps.

    Returns:
        ``(q, qd, tau, diverged_at)``: (S, n) each, and the time at which the state stopped being
        finite (a model whose mass matrix is not positive definite somewhere; the remaining rows are
        NaN), else None.

    Raises:
        DataError: the controller returned a torque that is not n finite numbers, naming it and the step.
    """
    S, n = q_ref.shape
    controller.reset(Plant(model, dt))
    out_q, out_qd, out_tau = (np.full((S, n), np.nan) for _ in range(3))
    q, qd = np.array(q_ref[0], float), np.array(qd_ref[0], float)
    forward = model.forward_dynamics
    with np.errstate(over="ignore", invalid="ignore"):  # divergence is detected, not warned about
        for s in range(S):
            out_q[s], out_qd[s] = q, qd
            tau = controller(s * dt, q, qd, Reference(q_ref[s], qd_ref[s], qdd_ref[s]))
            try:
                tau = np.asarray(tau, dtype=float)
            except (TypeError, ValueError):
                tau = np.full(n + 1, np.nan)  # reported below
            if tau.shape != (n,) or not np.all(np.isfinite(tau)):
                raise DataError(
                    f"controller '{controller.label}' returned a torque that is not {n} finite numbers at step {s} "
                    f"(t = {s * dt:.6g} s): {tau.tolist() if tau.size < 20 else tau.shape}"
                )
            out_tau[s] = tau
            try:
                qdd = forward(q[None], qd[None], tau[None])[0]
            except DataError:  # a singular identified mass matrix
                return out_q, out_qd, out_tau, s * dt
            qd = qd + dt * qdd
            q = q + dt * qd
            if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qd))):
                return out_q, out_qd, out_tau, (s + 1) * dt
            if progress is not None and s % 1000 == 0:
                progress("closed loop", s, S)
    if progress is not None:
        progress("closed loop", S, S)
    return out_q, out_qd, out_tau, None


def _without_friction(robot):
    """A copy of ``robot`` without its friction law."""
    from robotid_sim.dynamics.friction import NoFriction
    from robotid_sim.robot.model import FRICTION_NONE

    return dataclasses.replace(robot, friction=NoFriction(robot.n_dof), friction_source=FRICTION_NONE, _structure=None)


def describe_plant(model) -> str:
    """A model plant in words: ``"model base_linear (ols)"``, ``"robot three_axis"``."""
    from robotid_sim.control.model_based import describe_model

    what = describe_model(model)
    if isinstance(what, dict) and "kind" in what:
        return f"model {what['kind']}" + (f" ({what['estimator']})" if what["estimator"] else "")
    if isinstance(what, dict):
        return f"robot {what['robot']}"
    return str(what)
