"""Build any excitation from a YAML-style mapping (scenarios, robot sidecars, ``describe()``).

Every mapping has a ``type``; the other keys depend on it. Recipes need the robot (its limits
and, to optimise, its base regressor); fully explicit descriptions — what
:meth:`~robotid_sim.excitation.base.Excitation.describe` writes — rebuild the same trajectory.

==================  =========================================================================
type                keys
==================  =========================================================================
fourier             recipe: harmonics, base_frequency (Hz), periods, seed, margin, optimize
                    (true or a mapping of :func:`optimize_fourier` options: maxiter, popsize,
                    sample_rate_hz, tol, mutation, recombination, max_time_s); explicit: q0,
                    a, b, omega_f (rad/s), periods
sequential_sine     amplitudes, frequencies ('auto' or rad/s), order, hold, dwell, cycles,
                    ramp_cycles, margin
single_joint_sine   hold, joint, amplitude, frequency, cycles, ramp_cycles
polynomial          waypoints (K, n) | q_start, q_end, via | random_waypoints (count, with
                    seed, margin); durations ('auto', seconds or a list); back_and_forth;
                    sine_amplitude, sine_frequency | prismatic_sine {amplitude, frequency};
                    ramp_fraction
stepwise            the keyword options of :class:`StepwiseExcitation`
constant_velocity   start, velocity, cruise_time, ramp_time, cruise_label, ramp_label
hold                pose, duration, label
sequence            parts (list of mappings), labels
==================  =========================================================================

Example: ``{"type": "fourier", "harmonics": 5, "base_frequency": 0.04, "periods": 2,
"optimize": {"maxiter": 30}, "seed": 0}``. An unknown type or key raises
:class:`~robotid_sim.errors.ConfigError` naming it and listing the valid ones.

The ``type`` is looked up in the plugin registry (:func:`robotid_sim.plugins.get_excitation`):
the types above are registered by the built-in plugin ``core`` (``plugins/core.py``), whose
factories call the ``build_<type>(config, robot)`` functions of this module, and a plugin's
``register_excitations`` hook adds its own types, usable here, in ``simulate`` and in
scenarios exactly like the built-in ones (``sequence`` parts included).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from robotid_sim.errors import ConfigError, PluginError, RobotIdError
from robotid_sim.excitation import options as eo
from robotid_sim.excitation.base import Concatenation, Excitation, Hold, JointLimits
from robotid_sim.excitation.fourier import FourierExcitation
from robotid_sim.excitation.polynomial import QuinticPolynomial, prismatic_sines
from robotid_sim.excitation.sequential import SequentialSine, SingleJointSine
from robotid_sim.excitation.stepwise import ConstantVelocity, StepwiseExcitation
from robotid_sim.options import OptionsT, option_values, validate_options

logger = logging.getLogger(__name__)

Builder = Callable[[dict, Any], Excitation]


def _validate(kind: str, cfg: Mapping, model: type[OptionsT]) -> OptionsT:
    """``cfg`` (without its ``type``) checked against the type's options (one ConfigError line if not)."""
    return validate_options("excitation", kind, model, {k: v for k, v in cfg.items() if k != "type"})


def _vector(kind: str, cfg: Mapping, key: str, n: int | None) -> np.ndarray:
    """``cfg[key]`` as a (n,) vector (n = the robot's joint count when known), or ConfigError."""
    value = np.asarray(cfg[key], dtype=float)
    if value.ndim != 1 or (n is not None and value.shape[0] != n):
        want = f"({n},), one value per joint" if n is not None else "(n,), one value per joint"
        raise ConfigError(f"excitation '{kind}': '{key}' must have shape {want}, got shape {value.shape}")
    return value


def _need_robot(kind: str, robot) -> None:
    if robot is None:
        raise ConfigError(f"excitation type '{kind}' needs the robot (its joint limits)")


def build_fourier(cfg: dict, robot) -> Excitation:
    if any(k in cfg for k in ("q0", "a", "b")):
        explicit = _validate("fourier", cfg, eo.FourierExplicitOptions)
        periods = int(explicit.periods)
        return FourierExcitation(explicit.q0, explicit.a, explicit.b, float(explicit.omega_f), periods, explicit.seed)
    recipe = _validate("fourier", cfg, eo.FourierRecipeOptions)
    _need_robot("fourier", robot)
    harmonics = int(recipe.harmonics)
    base_frequency = float(recipe.base_frequency)
    periods = int(recipe.periods)
    seed = recipe.seed
    margin = float(recipe.margin)
    opt = recipe.optimize
    if opt is False or opt is None:
        return FourierExcitation.random(robot, harmonics, base_frequency, seed=seed, periods=periods, margin=margin)
    opt = {} if opt is True else opt
    if not isinstance(opt, Mapping):
        raise ConfigError(f"'optimize' must be true, false or a mapping of options, got {opt!r}")
    validate_options("excitation", "fourier.optimize", eo.FourierOptimizeOptions, opt)
    from robotid_sim.excitation.optimize import optimize_fourier  # SciPy: only when optimising

    result = optimize_fourier(robot, harmonics, base_frequency, periods=periods, margin=margin, seed=seed, **opt)
    return dataclasses.replace(result.excitation, seed=seed)


def build_sequential_sine(cfg: dict, robot) -> Excitation:
    options = option_values(_validate("sequential_sine", cfg, eo.SequentialSineOptions), given_only=True)
    _need_robot("sequential_sine", robot)
    return SequentialSine(robot, **options)


def build_single_joint_sine(cfg: dict, robot) -> Excitation:
    options = option_values(_validate("single_joint_sine", cfg, eo.SingleJointSineOptions), given_only=True)
    return SingleJointSine(**options)


def _polynomial_sines(cfg: dict, robot) -> tuple[Any, Any]:
    """(sine_amplitude, sine_frequency) per joint: as given, or from ``prismatic_sine`` on the prismatic joints."""
    if "prismatic_sine" not in cfg:
        return cfg.get("sine_amplitude"), cfg.get("sine_frequency")
    _need_robot("polynomial", robot)
    ps = cfg["prismatic_sine"]
    if not isinstance(ps, Mapping):
        raise ConfigError("'prismatic_sine' must be a mapping with 'amplitude' and 'frequency'")
    validate_options("excitation", "polynomial.prismatic_sine", eo.PrismaticSineOptions, ps)
    return prismatic_sines(robot.joint_kinds, ps.get("amplitude", 0.0), ps.get("frequency", 1.0))


def _polynomial_chain(cfg: dict, options: eo.PolynomialOptions, robot, amp) -> np.ndarray:
    """The waypoints (K, n): given, from q_start/via/q_end, or drawn at random inside the limits."""
    n = robot.n_dof if robot is not None else None
    if "waypoints" in cfg:
        chain = np.atleast_2d(np.asarray(cfg["waypoints"], float))
        if chain.ndim != 2 or (n is not None and chain.shape[1] != n):
            raise ConfigError(
                f"excitation 'polynomial': 'waypoints' must be a list of poses, each with one value per joint "
                f"(shape (K, {n if n is not None else 'n'})), got shape {chain.shape}"
            )
        return chain
    if "q_start" in cfg or "q_end" in cfg:
        if "q_start" not in cfg or "q_end" not in cfg:
            raise ConfigError("give both 'q_start' and 'q_end'")
        start = _vector("polynomial", cfg, "q_start", n)
        end = _vector("polynomial", cfg, "q_end", start.shape[0])
        via = np.asarray(cfg.get("via", np.zeros((0, start.shape[0]))), float)
        if via.size % start.shape[0]:
            raise ConfigError(
                f"excitation 'polynomial': 'via' must be a list of poses with {start.shape[0]} values each, "
                f"got shape {via.shape}"
            )
        return np.vstack([start[None, :], via.reshape(-1, start.shape[0]), end[None, :]])
    _need_robot("polynomial", robot)
    count = int(options.random_waypoints)
    lim = JointLimits.of(robot).shrunk(float(options.margin))
    spread = np.zeros(n) if amp is None else np.abs(np.asarray(amp, float).reshape(n, -1)).sum(1)
    lower = np.where(np.isfinite(lim.lower), lim.lower, -np.pi) + spread
    upper = np.where(np.isfinite(lim.upper), lim.upper, np.pi) - spread
    if np.any(upper < lower):
        raise ConfigError("the sine amplitudes leave no room for waypoints inside the limits")
    rng = np.random.default_rng(options.seed)
    return rng.uniform(lower, upper, size=(count, n))


def build_polynomial(cfg: dict, robot) -> Excitation:
    options = _validate("polynomial", cfg, eo.PolynomialOptions)
    if "durations" in cfg and "duration" in cfg:
        raise ConfigError("give 'durations' or 'duration' for a polynomial excitation, not both")
    duration = cfg.get("durations", cfg.get("duration", "auto"))
    amp, freq = _polynomial_sines(cfg, robot)
    chain = _polynomial_chain(cfg, options, robot, amp)
    if chain.shape[0] < 2:
        raise ConfigError("a polynomial excitation needs at least two waypoints")
    if isinstance(duration, str) and duration == "auto":
        _need_robot("polynomial", robot)
    return QuinticPolynomial(
        chain[0],
        chain[-1],
        duration,
        via=chain[1:-1],
        back_and_forth=bool(options.back_and_forth),
        sine_amplitude=amp,
        sine_frequency=freq,
        ramp_fraction=float(options.ramp_fraction),
        limits=robot,
        seed=options.seed if _draws_waypoints(cfg) or "seed" in cfg else None,  # the record of a drawn chain
    )


def _draws_waypoints(cfg: dict) -> bool:
    """Whether a polynomial excitation's waypoints are drawn at random (none given)."""
    return not any(key in cfg for key in ("waypoints", "q_start", "q_end"))


def build_stepwise(cfg: dict, robot) -> Excitation:
    options = option_values(_validate("stepwise", cfg, eo.StepwiseOptions), given_only=True)
    _need_robot("stepwise", robot)
    return StepwiseExcitation(robot, **options)


def build_constant_velocity(cfg: dict, robot) -> Excitation:
    options = option_values(_validate("constant_velocity", cfg, eo.ConstantVelocityOptions), given_only=True)
    return ConstantVelocity(**options)


def build_hold(cfg: dict, robot) -> Excitation:
    options = _validate("hold", cfg, eo.HoldOptions)
    return Hold(options.pose, float(options.duration), options.label)


def build_sequence(cfg: dict, robot) -> Excitation:
    options = _validate("sequence", cfg, eo.SequenceOptions)
    parts = []
    for position, part in enumerate(options.parts):
        try:
            parts.append(excitation_from_config(part, robot))
        except ConfigError as exc:
            raise ConfigError(f"excitation 'sequence', parts[{position}]: {exc}") from None
    labels = options.labels
    return Concatenation(tuple(parts), tuple(labels) if labels is not None else ())


def excitation_from_config(mapping: Mapping[str, Any], robot=None) -> Excitation:
    """Build an excitation from a YAML-style mapping (see the module docstring for the keys).

    Args:
        mapping: ``{"type": ..., ...}``.
        robot: the Robot (or :class:`JointLimits` for types that need no regressor); needed
            for recipes, optional for explicit descriptions.

    Returns:
        The excitation. With a robot, its joint count is checked against the robot's.

    Raises:
        ConfigError: unknown type or field (naming it and listing the valid ones), a missing
            or invalid value, or a joint-count mismatch.
    """
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"an excitation config must be a mapping with a 'type', got {type(mapping).__name__}")
    from robotid_sim import plugins

    kind = mapping.get("type")
    try:
        if not isinstance(kind, str):
            raise PluginError(f"excitation type must be a string, got {kind!r}")
        builder = plugins.get_excitation(kind)
    except PluginError as exc:
        if isinstance(kind, str) and kind in plugins.rejected("register_excitations"):  # refused: say why
            raise ConfigError(str(exc)) from None
        known = plugins.excitations()
        raise ConfigError(
            f"unknown excitation type {kind!r}; valid types: {', '.join(sorted(known))}"
            f"{plugins.unknown_name_hint(kind, known)}"
        ) from None
    try:
        excitation = builder(dict(mapping), robot)
    except RobotIdError:
        raise
    except (TypeError, KeyError, ValueError, IndexError) as exc:  # a value the checks above did not foresee
        raise ConfigError(f"bad excitation config for type '{kind}': {type(exc).__name__}: {exc}") from None
    if robot is not None and excitation.n_dof != JointLimits.of(robot).n_dof:
        raise ConfigError(
            f"excitation '{kind}' has {excitation.n_dof} joints but the robot has {JointLimits.of(robot).n_dof}"
        )
    logger.debug("built excitation '%s' (%.2f s)", kind, excitation.duration)
    return excitation
