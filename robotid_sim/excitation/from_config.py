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

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from robotid_sim.errors import ConfigError, PluginError, RobotIdError
from robotid_sim.excitation.base import Concatenation, Excitation, Hold, JointLimits
from robotid_sim.excitation.fourier import FourierExcitation
from robotid_sim.excitation.polynomial import QuinticPolynomial, prismatic_sines
from robotid_sim.excitation.sequential import SequentialSine, SingleJointSine
from robotid_sim.excitation.stepwise import ConstantVelocity, StepwiseExcitation

logger = logging.getLogger(__name__)

Builder = Callable[[dict, Any], Excitation]

_OPTIMIZE_KEYS = ("maxiter", "popsize", "sample_rate_hz", "tol", "mutation", "recombination", "max_time_s")


def _check_keys(kind: str, mapping: Mapping, allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(mapping) - set(allowed) - {"type"})
    if unknown:
        raise ConfigError(
            f"unknown field(s) {', '.join(repr(k) for k in unknown)} for excitation "
            f"type '{kind}'; valid fields: {', '.join(sorted(allowed))}"
        )


#: largest value of a whole-number option: beyond these a config is a typo or an attack (``harmonics: 1e8``
#: would allocate terabytes, ``random_waypoints: 1e8`` would never finish), not a study
MOST = {
    "harmonics": 100,
    "periods": 1000,
    "fourier_periods": 1000,
    "fourier_segments": 1000,
    "random_waypoints": 1000,
    "n_poses": 1000,
    "cycles": 10_000,
    "ramp_cycles": 10_000,
    "maxiter": 100_000,
    "popsize": 1000,
}


def _is_number(value) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool | np.bool_)


def _is_numeric_array(value) -> bool:
    """A number, or (nested) lists of numbers, or a real numeric numpy array; booleans are not numbers."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "iuf" and value.size > 0
    if isinstance(value, list | tuple):
        return len(value) > 0 and all(_is_numeric_array(v) for v in value)
    return _is_number(value)


def _check_values(
    kind: str,
    cfg: Mapping,
    *,
    ints: Mapping[str, int] | None = None,
    floats: Mapping[str, tuple[float, bool]] | None = None,
    arrays: tuple[str, ...] = (),
    words: Mapping[str, tuple[str, ...]] | None = None,
    bools: tuple[str, ...] = (),
    strings: tuple[str, ...] = (),
    nullable: tuple[str, ...] = (),
) -> None:
    """Check the type (and simple range) of each present field, naming the field on failure.

    Args:
        kind: the excitation type, for messages.
        cfg: the config mapping.
        ints: field -> smallest allowed value (whole numbers only; the largest is :data:`MOST`, where given).
        floats: field -> (bound, exclusive): a finite number > bound (exclusive) or >= bound.
        arrays: fields holding a number or (nested) lists of numbers, all finite.
        words: array fields that may instead be one of the given words (e.g. ``'auto'``).
        bools: fields that must be true or false.
        strings: fields that must be text.
        nullable: fields that may also be null (None).
    """
    words = dict(words or {})
    for key, minimum in (ints or {}).items():
        value = cfg.get(key)
        if key not in cfg or (value is None and key in nullable):
            continue
        if isinstance(value, float | np.floating) and float(value).is_integer():
            value = int(value)
        if not _is_number(value) or not float(value).is_integer() or value < minimum:
            raise ConfigError(f"excitation '{kind}': '{key}' must be a whole number >= {minimum}, got {cfg[key]!r}")
        if key in MOST and value > MOST[key]:
            raise ConfigError(
                f"excitation '{kind}': '{key}' = {cfg[key]!r} is beyond the limit of {MOST[key]:,}; give a value "
                f"between {minimum} and {MOST[key]:,}"
            )
    for key, (bound, exclusive) in (floats or {}).items():
        value = cfg.get(key)
        if key not in cfg or (value is None and key in nullable):
            continue
        relation = ">" if exclusive else ">="
        if not _is_number(value) or not np.isfinite(value) or (value <= bound if exclusive else value < bound):
            raise ConfigError(f"excitation '{kind}': '{key}' must be a number {relation} {bound:g}, got {value!r}")
    for key in tuple(arrays) + tuple(words):
        value = cfg.get(key)
        if key not in cfg or (value is None and key in nullable):
            continue
        if isinstance(value, str) and value in words.get(key, ()):
            continue
        if not _is_numeric_array(value):
            choices = "".join(f" or '{w}'" for w in words.get(key, ()))
            raise ConfigError(
                f"excitation '{kind}': '{key}' must be a number or a list of numbers{choices}, got {value!r}"
            )
        try:
            finite = bool(np.all(np.isfinite(np.asarray(value, dtype=float))))
        except (TypeError, ValueError):  # ragged lists
            raise ConfigError(
                f"excitation '{kind}': '{key}' must be a rectangular list of numbers, got {value!r}"
            ) from None
        if not finite:
            raise ConfigError(f"excitation '{kind}': '{key}' must be finite (no NaN or inf), got {value!r}")
    for key in bools:
        if key in cfg and not isinstance(cfg[key], bool | np.bool_):
            raise ConfigError(f"excitation '{kind}': '{key}' must be true or false, got {cfg[key]!r}")
    for key in strings:
        if key in cfg and not isinstance(cfg[key], str):
            raise ConfigError(f"excitation '{kind}': '{key}' must be text, got {cfg[key]!r}")


def _vector(kind: str, cfg: Mapping, key: str, n: int | None) -> np.ndarray:
    """``cfg[key]`` as a (n,) vector (n = the robot's joint count when known), or ConfigError."""
    value = np.asarray(cfg[key], dtype=float)
    if value.ndim != 1 or (n is not None and value.shape[0] != n):
        want = f"({n},), one value per joint" if n is not None else "(n,), one value per joint"
        raise ConfigError(f"excitation '{kind}': '{key}' must have shape {want}, got shape {value.shape}")
    return value


def _options(kind: str, cfg: Mapping, allowed: tuple[str, ...]) -> dict:
    """The keyword options of ``cfg`` after :func:`_check_keys`: the allowed keys it sets."""
    _check_keys(kind, cfg, allowed)
    return {k: cfg[k] for k in allowed if k in cfg}


def _need_robot(kind: str, robot) -> None:
    if robot is None:
        raise ConfigError(f"excitation type '{kind}' needs the robot (its joint limits)")


def build_fourier(cfg: dict, robot) -> Excitation:
    explicit = ("q0", "a", "b", "omega_f", "periods")
    recipe = ("harmonics", "base_frequency", "periods", "seed", "margin", "optimize")
    if any(k in cfg for k in ("q0", "a", "b")):
        _check_keys("fourier", cfg, explicit)
        missing = [k for k in ("q0", "a", "b", "omega_f") if k not in cfg]
        if missing:
            raise ConfigError(f"explicit Fourier excitation misses {missing}; give q0, a, b, omega_f")
        _check_values("fourier", cfg, ints={"periods": 1}, floats={"omega_f": (0.0, True)}, arrays=("q0", "a", "b"))
        return FourierExcitation(cfg["q0"], cfg["a"], cfg["b"], float(cfg["omega_f"]), int(cfg.get("periods", 1)))
    _check_keys("fourier", cfg, recipe)
    _check_values(
        "fourier",
        cfg,
        ints={"harmonics": 1, "periods": 1, "seed": 0},
        floats={"base_frequency": (0.0, True), "margin": (0.0, False)},
        nullable=("seed",),
    )
    _need_robot("fourier", robot)
    harmonics = int(cfg.get("harmonics", 5))
    base_frequency = float(cfg.get("base_frequency", 0.04))
    periods = int(cfg.get("periods", 1))
    seed = cfg.get("seed", 0)
    margin = float(cfg.get("margin", 0.0))
    opt = cfg.get("optimize", False)
    if opt is False or opt is None:
        return FourierExcitation.random(robot, harmonics, base_frequency, seed=seed, periods=periods, margin=margin)
    opt = {} if opt is True else opt
    if not isinstance(opt, Mapping):
        raise ConfigError(f"'optimize' must be true, false or a mapping of options, got {opt!r}")
    _check_keys("fourier.optimize", opt, _OPTIMIZE_KEYS)
    _check_values(
        "fourier.optimize",
        opt,
        ints={"maxiter": 1, "popsize": 1},
        floats={
            "sample_rate_hz": (0.0, True),
            "tol": (0.0, False),
            "recombination": (0.0, False),
            "max_time_s": (0.0, True),
        },
        arrays=("mutation",),
        nullable=("max_time_s",),
    )
    from robotid_sim.excitation.optimize import optimize_fourier  # SciPy: only when optimising

    result = optimize_fourier(robot, harmonics, base_frequency, periods=periods, margin=margin, seed=seed, **opt)
    return result.excitation


def build_sequential_sine(cfg: dict, robot) -> Excitation:
    keys = ("amplitudes", "frequencies", "order", "hold", "dwell", "cycles", "ramp_cycles", "margin", "frequency_steps")
    options = _options("sequential_sine", cfg, keys)
    _check_values(
        "sequential_sine",
        cfg,
        ints={"cycles": 0, "ramp_cycles": 1},
        floats={"dwell": (0.0, False), "margin": (0.0, False)},
        arrays=("amplitudes", "hold", "frequency_steps"),
        words={"frequencies": ("auto",)},
        nullable=("amplitudes", "hold"),
    )
    _need_robot("sequential_sine", robot)
    return SequentialSine(robot, **options)


def build_single_joint_sine(cfg: dict, robot) -> Excitation:
    keys = ("hold", "joint", "amplitude", "frequency", "cycles", "ramp_cycles")
    options = _options("single_joint_sine", cfg, keys)
    _check_values(
        "single_joint_sine",
        cfg,
        ints={"joint": 0, "cycles": 0, "ramp_cycles": 1},
        floats={"amplitude": (-np.inf, True), "frequency": (0.0, True)},
        arrays=("hold",),
    )
    return SingleJointSine(**options)


def build_polynomial(cfg: dict, robot) -> Excitation:
    keys = (
        "waypoints",
        "q_start",
        "q_end",
        "via",
        "random_waypoints",
        "seed",
        "margin",
        "durations",
        "duration",
        "back_and_forth",
        "sine_amplitude",
        "sine_frequency",
        "prismatic_sine",
        "ramp_fraction",
    )
    _check_keys("polynomial", cfg, keys)
    _check_values(
        "polynomial",
        cfg,
        ints={"random_waypoints": 2, "seed": 0},
        floats={"margin": (0.0, False), "ramp_fraction": (0.0, False)},
        arrays=("waypoints", "q_start", "q_end", "via", "sine_amplitude", "sine_frequency"),
        words={"durations": ("auto",), "duration": ("auto",)},
        bools=("back_and_forth",),
        nullable=("seed", "sine_amplitude", "sine_frequency"),
    )
    if isinstance(cfg.get("prismatic_sine"), Mapping):
        _check_values("polynomial.prismatic_sine", cfg["prismatic_sine"], arrays=("amplitude", "frequency"))
    if "durations" in cfg and "duration" in cfg:
        raise ConfigError("give 'durations' or 'duration' for a polynomial excitation, not both")
    duration = cfg.get("durations", cfg.get("duration", "auto"))
    n = robot.n_dof if robot is not None else None
    amp, freq = cfg.get("sine_amplitude"), cfg.get("sine_frequency")
    if "prismatic_sine" in cfg:
        _need_robot("polynomial", robot)
        ps = cfg["prismatic_sine"]
        if not isinstance(ps, Mapping) or set(ps) - {"amplitude", "frequency"}:
            raise ConfigError("'prismatic_sine' must be a mapping with 'amplitude' and 'frequency'")
        amp, freq = prismatic_sines(robot.joint_kinds, ps.get("amplitude", 0.0), ps.get("frequency", 1.0))
    if "waypoints" in cfg:
        chain = np.atleast_2d(np.asarray(cfg["waypoints"], float))
        if chain.ndim != 2 or (n is not None and chain.shape[1] != n):
            raise ConfigError(
                f"excitation 'polynomial': 'waypoints' must be a list of poses, each with one value per joint "
                f"(shape (K, {n if n is not None else 'n'})), got shape {chain.shape}"
            )
    elif "q_start" in cfg or "q_end" in cfg:
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
        chain = np.vstack([start[None, :], via.reshape(-1, start.shape[0]), end[None, :]])
    else:
        _need_robot("polynomial", robot)
        count = int(cfg.get("random_waypoints", 3))
        lim = JointLimits.of(robot).shrunk(float(cfg.get("margin", 0.0)))
        spread = np.zeros(n) if amp is None else np.abs(np.asarray(amp, float).reshape(n, -1)).sum(1)
        lower = np.where(np.isfinite(lim.lower), lim.lower, -np.pi) + spread
        upper = np.where(np.isfinite(lim.upper), lim.upper, np.pi) - spread
        if np.any(upper < lower):
            raise ConfigError("the sine amplitudes leave no room for waypoints inside the limits")
        rng = np.random.default_rng(cfg.get("seed", 0))
        chain = rng.uniform(lower, upper, size=(count, n))
    if chain.shape[0] < 2:
        raise ConfigError("a polynomial excitation needs at least two waypoints")
    if isinstance(duration, str) and duration == "auto":
        _need_robot("polynomial", robot)
    return QuinticPolynomial(
        chain[0],
        chain[-1],
        duration,
        via=chain[1:-1],
        back_and_forth=bool(cfg.get("back_and_forth", False)),
        sine_amplitude=amp,
        sine_frequency=freq,
        ramp_fraction=float(cfg.get("ramp_fraction", 0.25)),
        limits=robot,
    )


def build_stepwise(cfg: dict, robot) -> Excitation:
    keys = (
        "n_poses",
        "poses",
        "static_duration",
        "slow_speed",
        "speeds",
        "cruise_time",
        "min_cruise_time",
        "fourier_segments",
        "harmonics",
        "base_frequency",
        "fourier_periods",
        "pose_spread",
        "margin",
        "n_sweeps",
        "sweep_time",
        "sweep_speeds",
        "seed",
    )
    options = _options("stepwise", cfg, keys)
    _check_values(
        "stepwise",
        cfg,
        ints={"n_poses": 1, "fourier_segments": 0, "harmonics": 1, "fourier_periods": 1, "n_sweeps": 0, "seed": 0},
        floats={
            "sweep_time": (0.0, True),
            "static_duration": (0.0, False),
            "slow_speed": (0.0, True),
            "cruise_time": (0.0, False),
            "min_cruise_time": (0.0, False),
            "base_frequency": (0.0, True),
            "pose_spread": (0.0, False),
            "margin": (0.0, False),
        },
        arrays=("poses", "speeds", "sweep_speeds"),
        nullable=("poses", "seed"),
    )
    _need_robot("stepwise", robot)
    return StepwiseExcitation(robot, **options)


def build_constant_velocity(cfg: dict, robot) -> Excitation:
    keys = ("start", "velocity", "cruise_time", "ramp_time", "cruise_label", "ramp_label")
    options = _options("constant_velocity", cfg, keys)
    _check_values(
        "constant_velocity",
        cfg,
        floats={"cruise_time": (0.0, False), "ramp_time": (0.0, False)},
        arrays=("start", "velocity"),
        strings=("cruise_label", "ramp_label"),
    )
    return ConstantVelocity(**options)


def build_hold(cfg: dict, robot) -> Excitation:
    _check_keys("hold", cfg, ("pose", "duration", "label"))
    if "pose" not in cfg:
        raise ConfigError("a 'hold' excitation needs 'pose'")
    _check_values("hold", cfg, floats={"duration": (0.0, False)}, arrays=("pose",), strings=("label",))
    return Hold(cfg["pose"], float(cfg.get("duration", 1.0)), cfg.get("label", "static"))


def build_sequence(cfg: dict, robot) -> Excitation:
    _check_keys("sequence", cfg, ("parts", "labels"))
    items = cfg.get("parts", ())
    if not isinstance(items, list | tuple) or not items:
        raise ConfigError(f"excitation 'sequence': 'parts' must be a non-empty list of excitations, got {items!r}")
    parts = []
    for position, part in enumerate(items):
        try:
            parts.append(excitation_from_config(part, robot))
        except ConfigError as exc:
            raise ConfigError(f"excitation 'sequence', parts[{position}]: {exc}") from None
    labels = cfg.get("labels")
    if labels is not None and (
        not isinstance(labels, list | tuple) or not all(isinstance(label, str) for label in labels)
    ):
        raise ConfigError(f"excitation 'sequence': 'labels' must be a list of text labels, got {labels!r}")
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
