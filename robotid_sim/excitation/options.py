"""The options of the built-in excitation types, one :class:`~robotid_sim.options.Options` class per type.

:func:`~robotid_sim.excitation.from_config.excitation_from_config` validates a config mapping (without its
``type``) against the type's class with :func:`robotid_sim.options.validate_options`, so an unknown, missing
or invalid option is one :class:`~robotid_sim.errors.ConfigError` line naming the excitation type, the
option and what is allowed. The checks only accept or refuse: every value passes through unchanged, so the
built excitation is the same as from the raw mapping.

An option declared with :func:`given` has no default here: when the config does not set it, the
excitation class's own default applies (the builders pass on only the options the config sets).
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, Field

from robotid_sim.options import Options

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


def given(description: str = "") -> Any:
    """A field without a default of its own: absent unless the config sets it (its default is the class's)."""
    return Field(None, validate_default=False, description=description)


def _is_number(value) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool | np.bool_)


def _is_numeric_array(value) -> bool:
    """A number, or (nested) lists of numbers, or a real numeric numpy array; booleans are not numbers."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "iuf" and value.size > 0
    if isinstance(value, list | tuple):
        return len(value) > 0 and all(_is_numeric_array(v) for v in value)
    return _is_number(value)


def _whole(value, minimum: int, most: int | None, nullable: bool):
    if value is None and nullable:
        return value
    number = int(value) if isinstance(value, float | np.floating) and float(value).is_integer() else value
    if not _is_number(number) or not float(number).is_integer() or number < minimum:
        raise ValueError(f"must be a whole number >= {minimum}, got {value!r}")
    if most is not None and number > most:
        raise ValueError(f"must be between {minimum} and {most:,}, got {value!r} (beyond the limit of {most:,})")
    return value


def _real(value, bound: float, exclusive: bool, nullable: bool):
    if value is None and nullable:
        return value
    relation = ">" if exclusive else ">="
    if not _is_number(value) or not np.isfinite(value) or (value <= bound if exclusive else value < bound):
        raise ValueError(f"must be a number {relation} {bound:g}, got {value!r}")
    return value


def _array(value, words: tuple[str, ...], nullable: bool):
    if (value is None and nullable) or (isinstance(value, str) and value in words):
        return value
    if not _is_numeric_array(value):
        choices = "".join(f" or '{w}'" for w in words)
        raise ValueError(f"must be a number or a list of numbers{choices}, got {value!r}")
    try:
        finite = bool(np.all(np.isfinite(np.asarray(value, dtype=float))))
    except (TypeError, ValueError):  # ragged lists
        raise ValueError(f"must be a rectangular list of numbers, got {value!r}") from None
    if not finite:
        raise ValueError(f"must be finite (no NaN or inf), got {value!r}")
    return value


def _flag(value):
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"must be true or false, got {value!r}")
    return value


def _text(value):
    if not isinstance(value, str):
        raise ValueError(f"must be text, got {value!r}")
    return value


def whole(minimum: int, most: int | None = None, nullable: bool = False) -> Any:
    """A whole number >= ``minimum`` (a float like 3.0 counts) and <= ``most``; the value passes unchanged."""
    return Annotated[Any, BeforeValidator(lambda v: _whole(v, minimum, most, nullable))]


def real(bound: float, exclusive: bool = False, nullable: bool = False) -> Any:
    """A finite number > ``bound`` (``exclusive``) or >= ``bound``; the value passes unchanged."""
    return Annotated[Any, BeforeValidator(lambda v: _real(v, bound, exclusive, nullable))]


def numbers(words: tuple[str, ...] = (), nullable: bool = False) -> Any:
    """A number or (nested, rectangular) lists of finite numbers, or one of ``words``; passes unchanged."""
    return Annotated[Any, BeforeValidator(lambda v: _array(v, words, nullable))]


#: true or false
Flag = Annotated[Any, BeforeValidator(_flag)]
#: a text label
Text = Annotated[Any, BeforeValidator(_text)]


class FourierExplicitOptions(Options):
    """``fourier`` as :meth:`FourierExcitation.describe` writes it: the coefficients themselves."""

    q0: numbers() = Field(description="offset per joint (n,)")
    a: numbers() = Field(description="sine coefficients (n, harmonics)")
    b: numbers() = Field(description="cosine coefficients (n, harmonics)")
    omega_f: real(0.0, exclusive=True) = Field(description="base angular frequency (rad/s)")
    periods: whole(1, MOST["periods"]) = Field(1, description="periods played")
    seed: whole(0, nullable=True) = Field(None, description="the seed it was drawn with (a record only)")


class FourierRecipeOptions(Options):
    """``fourier`` as a recipe: random coefficients inside the limits, optionally optimised."""

    harmonics: whole(1, MOST["harmonics"]) = Field(5, description="harmonics per joint")
    base_frequency: real(0.0, exclusive=True) = Field(0.04, description="base frequency (Hz)")
    periods: whole(1, MOST["periods"]) = Field(1, description="periods played")
    seed: whole(0, nullable=True) = Field(0, description="random seed (None: fresh entropy)")
    margin: real(0.0) = Field(0.0, description="fraction of each joint range kept free at both ends")
    optimize: Any = Field(False, description="true, false or a mapping of optimize_fourier options")


class FourierOptimizeOptions(Options):
    """``fourier.optimize``: the options of :func:`~robotid_sim.excitation.optimize.optimize_fourier`."""

    maxiter: whole(1, MOST["maxiter"]) = given("differential-evolution generations")
    popsize: whole(1, MOST["popsize"]) = given("population size multiplier")
    sample_rate_hz: real(0.0, exclusive=True) = given("rate of the samples the condition number is computed on")
    tol: real(0.0) = given("relative convergence tolerance")
    mutation: numbers() = given("mutation constant or (min, max) dithering range")
    recombination: real(0.0) = given("crossover probability")
    max_time_s: real(0.0, exclusive=True, nullable=True) = given("wall-clock budget (s), None for none")


class SequentialSineOptions(Options):
    """``sequential_sine``: the keyword options of :class:`~robotid_sim.excitation.SequentialSine`."""

    amplitudes: numbers(nullable=True) = given("amplitude per joint")
    frequencies: numbers(words=("auto",)) = given("'auto' or angular frequency per joint (rad/s)")
    order: Any = given("joint order")
    hold: numbers(nullable=True) = given("pose held by the joints not moving")
    dwell: real(0.0) = given("rest between joints (s)")
    cycles: whole(0, MOST["cycles"]) = given("full cycles per joint")
    ramp_cycles: whole(1, MOST["ramp_cycles"]) = given("cycles of the amplitude ramp")
    margin: real(0.0) = given("fraction of each joint range kept free")
    frequency_steps: numbers() = given("frequency multipliers played in turn")


class SingleJointSineOptions(Options):
    """``single_joint_sine``: the keyword options of :class:`~robotid_sim.excitation.SingleJointSine`."""

    hold: numbers() = given("pose held by every joint")
    joint: whole(0) = given("the moving joint")
    amplitude: real(-np.inf, exclusive=True) = given("sine amplitude")
    frequency: real(0.0, exclusive=True) = given("angular frequency (rad/s)")
    cycles: whole(0, MOST["cycles"]) = given("full cycles")
    ramp_cycles: whole(1, MOST["ramp_cycles"]) = given("cycles of the amplitude ramp")


class PrismaticSineOptions(Options):
    """``polynomial.prismatic_sine``: sinusoids on the prismatic joints only."""

    amplitude: numbers() = given("amplitude (m)")
    frequency: numbers() = given("frequency (Hz)")


class PolynomialOptions(Options):
    """``polynomial``: quintic rest-to-rest moves through waypoints (given, start/end/via, or random)."""

    waypoints: numbers() = given("poses (K, n)")
    q_start: numbers() = given("first pose (n,)")
    q_end: numbers() = given("last pose (n,)")
    via: numbers() = given("poses between (K, n)")
    random_waypoints: whole(2, MOST["random_waypoints"]) = Field(3, description="number of random poses")
    seed: whole(0, nullable=True) = Field(0, description="random seed of the random poses")
    margin: real(0.0) = Field(0.0, description="fraction of each joint range kept free")
    durations: numbers(words=("auto",)) = given("'auto', seconds or a list of seconds per move")
    duration: numbers(words=("auto",)) = given("the same as durations")
    back_and_forth: Flag = Field(False, description="play the moves forwards then backwards")
    sine_amplitude: numbers(nullable=True) = given("sinusoid amplitude per joint")
    sine_frequency: numbers(nullable=True) = given("sinusoid frequency per joint")
    prismatic_sine: Any = given("{amplitude, frequency} of sinusoids on the prismatic joints")
    ramp_fraction: real(0.0) = Field(0.25, description="fraction of each move the sinusoid ramps over")


class StepwiseOptions(Options):
    """``stepwise``: the keyword options of :class:`~robotid_sim.excitation.StepwiseExcitation`."""

    n_poses: whole(1, MOST["n_poses"]) = given("static poses")
    poses: numbers(nullable=True) = given("explicit static poses (K, n)")
    static_duration: real(0.0) = given("time held at each pose (s)")
    slow_speed: real(0.0, exclusive=True) = given("speed of the moves between poses")
    speeds: numbers() = given("constant-velocity sweep speeds")
    cruise_time: real(0.0) = given("cruise time of a constant-velocity sweep (s)")
    min_cruise_time: real(0.0) = given("shortest cruise time (s)")
    fourier_segments: whole(0, MOST["fourier_segments"]) = given("variable-velocity (Fourier) segments")
    harmonics: whole(1, MOST["harmonics"]) = given("harmonics of the Fourier segments")
    base_frequency: real(0.0, exclusive=True) = given("base frequency of the Fourier segments (Hz)")
    fourier_periods: whole(1, MOST["fourier_periods"]) = given("periods per Fourier segment")
    pose_spread: real(0.0) = given("spread of the random poses")
    margin: real(0.0) = given("fraction of each joint range kept free")
    n_sweeps: whole(0) = given("joint sweeps")
    sweep_time: real(0.0, exclusive=True) = given("time per sweep (s)")
    sweep_speeds: numbers() = given("speeds of the sweeps")
    seed: whole(0, nullable=True) = given("random seed")


class ConstantVelocityOptions(Options):
    """``constant_velocity``: the keyword options of :class:`~robotid_sim.excitation.ConstantVelocity`."""

    start: numbers() = given("start pose (n,)")
    velocity: numbers() = given("cruise velocity per joint")
    cruise_time: real(0.0) = given("cruise time (s)")
    ramp_time: real(0.0) = given("ramp time (s)")
    cruise_label: Text = given("segment label of the cruise")
    ramp_label: Text = given("segment label of the ramps")


class HoldOptions(Options):
    """``hold``: a pose held still."""

    pose: numbers() = Field(description="the pose (n,)")
    duration: real(0.0) = Field(1.0, description="seconds held")
    label: Text = Field("static", description="segment label")


def _parts(value):
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(f"must be a non-empty list of excitations, got {value!r}")
    return value


def _labels(value):
    if value is not None and (not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value)):
        raise ValueError(f"must be a list of text labels, got {value!r}")
    return value


class SequenceOptions(Options):
    """``sequence``: excitations played one after the other."""

    parts: Annotated[Any, BeforeValidator(_parts)] = Field(description="the excitations, as config mappings")
    labels: Annotated[Any, BeforeValidator(_labels)] = Field(None, description="segment label per part")
