"""``simulate``: excitation → PyBullet under a tracking controller → noisy dataset (SPEC §5)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from robotid_sim.errors import ConfigError
from robotid_sim.progress import Progress
from robotid_sim.robot.model import Robot
from robotid_sim.sim.cost import check_simulation, simulation_cost
from robotid_sim.sim.dataset import Dataset, Signals
from robotid_sim.sim.noise import NoiseChain, NoiseModel, noise_from_config
from robotid_sim.sim.pybullet_sim import DEFAULT_DT, PyBulletSimulator
from robotid_sim.sim.tracking import COMPUTED_TORQUE_KD, COMPUTED_TORQUE_KP, ComputedTorquePD, Controller

log = logging.getLogger(__name__)


#: recipe of the excitation ``"default"`` for a robot whose sidecar gives none (or that has no
#: sidecar): a random 5-harmonic Fourier series (SPEC §6) of 10 s, scaled into the limits of
#: :func:`generic_excitation_limits` with 5 % of each kept free
GENERIC_EXCITATION = {"type": "fourier", "harmonics": 5, "base_frequency": 0.1, "periods": 1, "seed": 0, "margin": 0.05}


def generic_excitation_limits(robot: Robot):
    """The :class:`~robotid_sim.excitation.base.JointLimits` the generic default excitation stays inside.

    Position: the URDF limits; a joint without limits (continuous, or prismatic without limits)
    gets ±:data:`~robotid_sim.robot.model.DEFAULT_REVOLUTE_RANGE` rad or
    ±:data:`~robotid_sim.robot.model.DEFAULT_PRISMATIC_RANGE` m. Velocity and acceleration: the
    sidecar's limits, or where the sidecar gives none the robot's (URDF velocity limits, else the
    defaults) capped at :data:`~robotid_sim.robot.model.DEFAULT_VELOCITY_LIMIT` and
    :data:`~robotid_sim.robot.model.DEFAULT_ACCELERATION_LIMIT`.
    """
    from robotid_sim.excitation.base import JointLimits
    from robotid_sim.robot.model import (
        DEFAULT_ACCELERATION_LIMIT,
        DEFAULT_PRISMATIC_RANGE,
        DEFAULT_REVOLUTE_RANGE,
        DEFAULT_VELOCITY_LIMIT,
    )

    lower, upper = robot.position_limits
    half = np.where(np.array(robot.joint_kinds) == "prismatic", DEFAULT_PRISMATIC_RANGE, DEFAULT_REVOLUTE_RANGE)
    velocity, acceleration = np.asarray(robot.velocity_limit, float), np.asarray(robot.acceleration_limit, float)
    limits = robot.sidecar.limits if robot.sidecar is not None else None
    if limits is None or limits.velocity is None:
        velocity = np.minimum(velocity, DEFAULT_VELOCITY_LIMIT)
    if limits is None or limits.acceleration is None:
        acceleration = np.minimum(acceleration, DEFAULT_ACCELERATION_LIMIT)
    return JointLimits(
        np.where(np.isfinite(lower), lower, -half),
        np.where(np.isfinite(upper), upper, half),
        velocity,
        acceleration,
        tuple(robot.joint_names),
    )


def generic_excitation_note(robot: Robot) -> dict | None:
    """What ``"default"`` means for ``robot`` when its sidecar gives no default excitation, else None.

    A JSON-able mapping for the dataset metadata (``metadata["excitation_default"]``): why the
    generic excitation is used, its recipe, the limits it stays inside and a one-line summary.
    """
    if robot.sidecar is not None and robot.sidecar.default_excitation is not None:
        return None
    limits = generic_excitation_limits(robot)
    lower, upper = robot.position_limits
    unlimited = [
        f"'{name}' ({'m' if kind == 'prismatic' else 'rad'}: ±{hi:g})"
        for name, kind, hi, a, b in zip(robot.joint_names, robot.joint_kinds, limits.upper, lower, upper, strict=True)
        if not (np.isfinite(a) and np.isfinite(b))
    ]
    reason = "robot has no sidecar" if robot.sidecar is None else "sidecar has no default_excitation"
    source = "the robot's capped at the defaults" if robot.sidecar is None else "the sidecar's"
    summary = (
        f"{reason}: 'default' is a {GENERIC_EXCITATION['harmonics']}-harmonic Fourier series at "
        f"{GENERIC_EXCITATION['base_frequency']:g} Hz (seed {GENERIC_EXCITATION['seed']}, margin "
        f"{GENERIC_EXCITATION['margin']:g}) inside the URDF position limits"
        + (f", unlimited joints bounded to {', '.join(unlimited)}" if unlimited else "")
        + f"; velocity and acceleration limits: {source} (|qd| <= {np.round(limits.velocity, 4).tolist()}, "
        f"|qdd| <= {np.round(limits.acceleration, 4).tolist()})"
    )
    return {
        "reason": reason,
        "recipe": dict(GENERIC_EXCITATION),
        "position_lower": limits.lower.tolist(),
        "position_upper": limits.upper.tolist(),
        "velocity_limit": limits.velocity.tolist(),
        "acceleration_limit": limits.acceleration.tolist(),
        "summary": summary,
    }


def resolve_excitation(robot: Robot, excitation) -> Any:
    """An excitation object from an object, a config mapping, or ``"default"``.

    ``"default"`` is the sidecar's ``default_excitation``; for a robot without one (a URDF without
    a sidecar, such as any pybullet_data arm) it is :data:`GENERIC_EXCITATION` inside
    :func:`generic_excitation_limits`, described by :func:`generic_excitation_note`.
    """
    from robotid_sim.excitation import Excitation, excitation_from_config

    if isinstance(excitation, Excitation):
        return excitation
    if isinstance(excitation, str):
        if excitation != "default":
            raise ConfigError(f"excitation must be an Excitation, a mapping, or 'default', got {excitation!r}")
        config = robot.sidecar.default_excitation if robot.sidecar is not None else None
        if config is None:
            note = generic_excitation_note(robot)
            log.info("robot '%s': %s", robot.name, note["summary"])
            return excitation_from_config(dict(GENERIC_EXCITATION), generic_excitation_limits(robot))
        return excitation_from_config(config, robot)
    if isinstance(excitation, Mapping):
        return excitation_from_config(dict(excitation), robot)
    raise ConfigError(f"excitation must be an Excitation, a mapping, or 'default', got {type(excitation).__name__}")


def resolve_noise(robot: Robot, noise) -> NoiseChain:
    """A noise chain from None, a mapping (scenario YAML form), a model, or a list of models.

    In a mapping, ``current`` takes its ``gear_ratio`` and ``torque_constant`` from the robot's
    sidecar when they are not given (seed 001 Eq. 1).
    """
    if noise is None:
        return NoiseChain([])
    if isinstance(noise, NoiseChain):
        return noise
    if isinstance(noise, NoiseModel):
        return NoiseChain([noise])
    if isinstance(noise, Mapping):
        noise = dict(noise)
        if isinstance(noise.get("current"), Mapping):
            current = dict(noise["current"])
            current.setdefault("gear_ratio", robot.gear_ratio.tolist())
            tm = robot.sidecar.torque_measurement if robot.sidecar is not None else None
            if tm is not None and tm.torque_constant is not None:
                current.setdefault("torque_constant", tm.torque_constant)
            noise["current"] = current
        return noise_from_config(noise)
    if isinstance(noise, list | tuple) and all(isinstance(m, NoiseModel) for m in noise):
        return NoiseChain(list(noise))
    raise ConfigError(f"noise must be None, a mapping, a noise model or a list of them, got {type(noise).__name__}")


def simulate(
    robot: Robot | str,
    excitation="default",
    duration: float | None = None,
    noise=None,
    seed: int = 0,
    rate_hz: float = 200.0,
    dt: float = DEFAULT_DT,
    kp: float | None = None,
    kd: float | None = None,
    controller: Controller | None = None,
    progress: Progress | None = None,
    allow_large: bool = False,
) -> Dataset:
    """Simulate ``robot`` following ``excitation`` and return the measured dataset.

    Args:
        robot: a :class:`Robot` or a name/path for :func:`load_robot`.
        excitation: an excitation object, a config mapping, or ``"default"`` (the sidecar's).
        duration: seconds to simulate (default: the excitation's duration).
        noise: None, a mapping like ``{"q": {"snr_db": 60}, "tau": {"std": 0.5},
            "outliers": {"fraction": 0.005, "magnitude": 10.0}}``, or noise model objects.
        seed: seeds the noise (the simulation itself is deterministic).
        rate_hz: recording rate; must divide the physics rate 1/dt.
        dt: physics step (s), 1 ms by default.
        kp, kd: gains of the default controller (1/s², 1/s; default 400 and 40); only without
            ``controller``.
        controller: the tracking controller (any :class:`~robotid_sim.control.Controller`);
            default :class:`~robotid_sim.control.ComputedTorquePD` with ``kp``, ``kd``, i.e.
            computed torque on the true model + PD.
        progress: ``progress("simulate", steps_done, steps_total)`` for progress bars (:mod:`robotid_sim.progress`).
        allow_large: run a simulation above the time limit, or above half of this machine's RAM but within it
            (:func:`~robotid_sim.sim.cost.check_simulation`).

    Returns:
        A :class:`Dataset` with the measured signals, the noise-free ``truth`` and metadata
        (``metadata["controller"]`` is ``controller.describe()``). The recorded ``qdd`` is the
        acceleration Bullet realised at each step, and the recorded torque is the motor torque
        (rigid body + rotor inertia + friction).

    Raises:
        ConfigError: ``kp`` or ``kd`` given together with ``controller``; a bad duration, rate or seed; a
            simulation above the memory or time limit (stating the estimate), refused before anything is
            evaluated.
    """
    from robotid_sim.robot import load_robot

    check_seed(seed)
    controller = _tracking_controller(controller, kp, kd)
    if not isinstance(robot, Robot):
        robot = load_robot(robot)
    exc = resolve_excitation(robot, excitation)
    chain = resolve_noise(robot, noise)
    duration = exc.duration if duration is None else duration
    cost = simulation_cost(robot.n_dof, duration, dt, rate_hz)
    check_simulation(cost, allow_large, SIMULATION_HINT)
    duration, decimation = float(duration), _decimation(rate_hz, dt)
    exc.check_limits(robot, duration=min(duration, exc.duration))
    steps = cost.steps
    t_steps = np.arange(steps) * dt
    q_ref, qd_ref, qdd_ref = exc.evaluate(t_steps)
    with PyBulletSimulator(robot, dt=dt) as sim:
        rec = sim.track(q_ref, qd_ref, qdd_ref, decimation=decimation, controller=controller, progress=progress)
    truth = Signals(rec["q"], rec["qd"], rec["qdd"], rec["tau"])
    measured = chain.apply(truth.as_dict(), np.random.default_rng(seed))
    metadata = _metadata(robot, exc, chain, controller, seed, rate_hz, dt, duration, isinstance(excitation, str))
    metadata["tracking_error_max"] = float(np.abs(rec["q"] - q_ref[::decimation]).max())
    log.info("simulated %s for %.1f s: %d samples", robot.name, duration, len(rec["t"]))
    return Dataset(
        rec["t"],
        measured["q"],
        measured["qd"],
        measured["qdd"],
        measured["tau"],
        truth=truth,
        joint_names=list(robot.joint_names),
        metadata=metadata,
    )


#: how to shrink a simulation refused by :func:`~robotid_sim.sim.cost.check_simulation`
SIMULATION_HINT = (
    "give a shorter duration (robotid-sim simulate: --duration), an excitation that lasts less (a higher "
    "base_frequency, fewer periods), a lower rate_hz (--rate), or allow_large=True (--allow-large) to run it anyway"
)


def check_seed(seed, what: str = "seed") -> None:
    """Refuse a seed NumPy's generators do not take: anything but a whole number >= 0 (None is fresh entropy).

    Raises:
        ConfigError: naming ``what`` and the value.
    """
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"{what} must be a whole number >= 0, got {seed!r}")


def excitation_cut_note(exc, duration: float, joint_names) -> str | None:
    """Why a simulation of ``duration`` s cannot identify every joint: it stops before the excitation moves some
    (a sequential excitation moves one joint at a time), else None.

    Only excitations with per-joint segments (:attr:`~robotid_sim.excitation.base.Segment.joint`) can leave a
    joint unmoved this way; the others move every joint from the start.
    """
    by_joint: dict[int, float] = {}
    for segment in exc.segments:
        if segment.joint is not None:
            by_joint[segment.joint] = min(by_joint.get(segment.joint, np.inf), segment.start)
    unmoved = [joint_names[j] for j, start in sorted(by_joint.items()) if start >= duration]
    if not unmoved:
        return None
    return (
        f"the excitation '{exc.type_name}' lasts {exc.duration:.4g} s and moves the joints in turn; the duration "
        f"{duration:.4g} s cuts it before joint(s) {unmoved} move, so their parameters cannot be identified from "
        f"this data: leave the duration out (or give at least {exc.duration:.4g} s), or use an excitation that "
        "moves every joint within it (e.g. {'type': 'fourier', 'harmonics': 5, 'base_frequency': 0.2})"
    )


def _tracking_controller(controller: Controller | None, kp: float | None, kd: float | None) -> Controller:
    """``controller``, or the default :class:`~robotid_sim.sim.tracking.ComputedTorquePD` with ``kp``, ``kd``.

    Raises:
        ConfigError: ``kp`` or ``kd`` given together with ``controller``.
    """
    if controller is None:
        return ComputedTorquePD(
            kp=COMPUTED_TORQUE_KP if kp is None else kp, kd=COMPUTED_TORQUE_KD if kd is None else kd
        )
    if kp is not None or kd is not None:
        raise ConfigError(
            "kp and kd are the gains of the default controller; give them to the controller "
            f"'{controller.label}' instead"
        )
    return controller


def _decimation(rate_hz: float, dt: float) -> int:
    """Physics steps per recorded sample; a ConfigError when ``rate_hz`` does not divide ``1 / dt``."""
    decimation = round(1.0 / (rate_hz * dt))
    if decimation < 1 or abs(decimation * rate_hz * dt - 1.0) > 1e-9:
        raise ConfigError(f"rate_hz = {rate_hz} must divide the physics rate {1 / dt:g} Hz (e.g. 100, 200, 500, 1000)")
    return decimation


def _metadata(
    robot: Robot, exc, chain: NoiseChain, controller: Controller, seed, rate_hz, dt, duration, by_name: bool
) -> dict:
    """A simulated dataset's metadata, up to its tracking error; ``by_name``: the excitation was ``"default"``
    (what it means for a robot without one: ``excitation_default``). An excitation cut short by ``duration``
    is logged as a warning and recorded (``excitation_cut``, :func:`excitation_cut_note`)."""
    metadata = {
        "robot": robot.name,
        "source": "simulation (PyBullet)",
        "excitation": exc.describe(),
        "segments": [{"label": g.label, "start": g.start, "end": g.end, "joint": g.joint} for g in exc.segments],
        "noise": chain.to_dict(),
        "seed": int(seed),
        "rate_hz": float(rate_hz),
        "physics_dt": float(dt),
        "duration_s": float(duration),
        "controller": controller.describe(),
    }
    note = generic_excitation_note(robot) if by_name else None
    if note is not None:
        metadata["excitation_default"] = note
    cut = excitation_cut_note(exc, duration, robot.joint_names)
    if cut is not None:
        log.warning("robot '%s': %s", robot.name, cut)
        metadata["excitation_cut"] = cut
    return metadata
