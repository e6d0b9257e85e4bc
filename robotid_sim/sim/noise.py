"""Composable, seeded measurement-noise models (SPEC §5).

A noise model perturbs one entry of a dict of signals ``{"q", "qd", "qdd", "tau"}``, each an
array (N, n), and returns a new dict holding new arrays for those four keys (other entries,
such as ``t``, are passed through); the input is never modified. Models are frozen dataclasses
whose per-joint options are a float (all joints) or a tuple with one value per joint.
:class:`NoiseChain` applies several in order, drawing every random number from the one
``numpy.random.Generator`` it is given, so a seed reproduces the whole measurement.

Models:

* :class:`GaussianSNR` — white Gaussian noise at a signal-to-noise ratio in dB per joint,
  SNR_dB = 10·log10(P_signal / P_noise) with P_signal = mean(x²) over the record (as MATLAB's
  ``awgn(x, snr, 'measured')``). Seed 000 uses 60/40/20 dB on q/qd/qdd (70/50/30 milder).
* :class:`GaussianStd` — white Gaussian noise of a given absolute standard deviation.
* :class:`Outliers` — spikes on a fraction of the samples (seed 001 rejects torque residuals
  above 8 N·m). Each joint gets exactly round(fraction·N) spikes at distinct random samples;
  a spike *adds* s·u·magnitude to the sample, with a random sign s = ±1 (equally likely) and
  u uniform in [0.5, 1], so every spike is at least half the magnitude.
* :class:`Quantization` — encoder quantisation: x is rounded to the nearest multiple of the
  resolution (e.g. 2π / 2**17 rad for a 17-bit encoder).
* :class:`CurrentMeasurement` — torque measured through the motor current (seed 001 Eq. 1).

:func:`noise_from_config` builds a chain from the YAML mapping of a scenario; every model and
chain has ``to_dict()`` and ``noise_from_config(chain.to_dict())`` rebuilds an equal chain.

The models are registered by ``type`` (their ``kind``) through the ``register_noise_models``
hook: the five above by the built-in plugin ``core`` (``plugins/core.py``), others by plugins
(:func:`robotid_sim.plugins.noise_models`). This module keeps no table of names.
"""

from __future__ import annotations

import dataclasses
import typing
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, create_model

from robotid_sim._json import jsonable
from robotid_sim.errors import ConfigError, DataError, PluginError, format_validation_error
from robotid_sim.hookspecs import Registrable
from robotid_sim.options import Options as OptionsBase
from robotid_sim.options import option_values, validate_options

__all__ = [
    "SIGNALS",
    "CurrentMeasurement",
    "GaussianSNR",
    "GaussianStd",
    "NoiseChain",
    "NoiseModel",
    "Outliers",
    "Quantization",
    "Signal",
    "measured_snr_db",
    "noise_from_config",
    "per_joint_option",
]

#: the signals a noise model may act on
SIGNALS = ("q", "qd", "qdd", "tau")

PerJoint = float | tuple[float, ...]


# ---------------------------------------------------------------------------------------------
# helpers


def _per_joint_value(value, minimum: float | None, exclusive: bool, maximum: float | None) -> PerJoint:
    """A scalar or per-joint option as float / tuple of floats, checking its range (``ValueError`` if not)."""
    arr = None
    flat = list(value) if isinstance(value, list | tuple) else [value]
    if all(isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_) for v in flat):
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            arr = None
    if arr is None or arr.ndim > 1 or arr.size == 0:
        raise ValueError(f"must be a number or a list with one number per joint, got {value!r}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"must be finite, got {value!r}")
    if minimum is not None:
        bad = arr <= minimum if exclusive else arr < minimum
        if np.any(bad):
            relation = ">" if exclusive else ">="
            raise ValueError(f"must be {relation} {minimum}, got {value!r}")
    if maximum is not None and np.any(arr > maximum):
        raise ValueError(f"must be in ({minimum:g}, {maximum:g}], got {value!r}")
    return float(arr) if arr.ndim == 0 else tuple(float(v) for v in arr)


def per_joint_option(minimum: float | None = None, exclusive: bool = False, maximum: float | None = None) -> Any:
    """The type of a per-joint option in a noise model's ``Options``: a number for all joints or one per joint.

    Validated to a float or a tuple of floats, finite, ``> minimum`` (``exclusive``) or ``>= minimum``, and
    ``<= maximum`` where given. Booleans are not numbers here.
    """
    return Annotated[Any, BeforeValidator(lambda value: _per_joint_value(value, minimum, exclusive, maximum))]


def _signal_name(value) -> str:
    if value not in SIGNALS:
        raise ValueError(f"must be one of {', '.join(SIGNALS)}, got {value!r}")
    return value


def _fraction(value) -> float:
    fraction = _per_joint_value(value, 0.0, False, None)
    if not isinstance(fraction, float) or fraction > 1.0:
        raise ValueError(f"must be one number in [0, 1], got {value!r}")
    return fraction


#: the type of a noise model's ``signal`` option: one of :data:`SIGNALS`
Signal = Annotated[Any, BeforeValidator(_signal_name)]
_AnyPerJoint = per_joint_option()
_NonNegative = per_joint_option(0.0)
_Positive = per_joint_option(0.0, exclusive=True)
_Fraction = Annotated[Any, BeforeValidator(_fraction)]
_Efficiency = per_joint_option(0.0, exclusive=True, maximum=1.0)


def _broadcast(value: PerJoint, n: int, model: str, name: str) -> np.ndarray:
    """Per-joint option as an array (n,); a tuple must have exactly n values."""
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        return np.full(n, float(arr))
    if arr.shape != (n,):
        raise ConfigError(
            f"{model} '{name}' has {arr.size} values but the signal has {n} joints; give one "
            "value per joint or a single number"
        )
    return arr


def _copy_signals(signals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    if not isinstance(signals, Mapping):
        raise DataError(f"signals must be a dict like {{'q': (N, n), 'tau': (N, n)}}, got {type(signals).__name__}")
    out = dict(signals)  # other entries (e.g. "t") pass through untouched
    for key in SIGNALS:
        if key in out:
            try:
                out[key] = np.array(out[key], dtype=float, copy=True)
            except (TypeError, ValueError):
                raise DataError(f"signal '{key}' must be a numeric array (N, n)") from None
    return out


def _target(signals: dict[str, np.ndarray], signal: str, model: str) -> np.ndarray:
    """The (N, n) array a model acts on, validated."""
    if signal not in signals:
        raise DataError(
            f"noise model {model} acts on '{signal}' but the signals given are {', '.join(sorted(signals)) or 'none'}"
        )
    x = signals[signal]
    if x.ndim != 2:
        raise DataError(f"signal '{signal}' must have shape (N, n), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise DataError(f"signal '{signal}' contains NaN or inf before noise is added")
    return x


def _on_signal(model) -> str:
    signal = getattr(model, "signal", None)
    return f" on '{signal}'" if isinstance(signal, str) else ""


# ---------------------------------------------------------------------------------------------
# models

_FIELD_OPTIONS: dict[type, type[OptionsBase]] = {}


class NoiseModel(Registrable, ABC):
    """Base class: a seeded perturbation of one signal.

    Subclasses are frozen dataclasses; ``kind`` names them in ``to_dict()`` output. Their options are
    the dataclass fields, declared with their types and constraints in a nested ``Options`` class
    (:class:`robotid_sim.options.Options`, the one option mechanism): every model built, from Python or
    from a config, is validated against it (unknown, missing or invalid options are one
    :class:`ConfigError` line) and stores the validated values. A model that declares no ``Options``
    is validated against its dataclass fields' type hints (:meth:`options_class`).
    """

    kind: ClassVar[str] = ""
    Options: ClassVar[type[OptionsBase] | None] = None

    def __post_init__(self) -> None:
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}  # type: ignore[arg-type]
        options = type(self).options_class()
        validated = validate_options("noise model", self.kind or type(self).__name__, options, fields)
        for name, value in option_values(validated).items():
            object.__setattr__(self, name, value)

    @classmethod
    def options_class(cls) -> type[OptionsBase]:
        """``Options``, or for a model that declares none, one field per dataclass field (its hint and default)."""
        if cls.Options is not None:
            return cls.Options
        if cls not in _FIELD_OPTIONS:
            try:
                hints = typing.get_type_hints(cls)
            except Exception:  # unresolvable annotations: check the names only
                hints = {}
            fields: dict[str, Any] = {
                f.name: (hints.get(f.name, Any), ... if f.default is dataclasses.MISSING else f.default)
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
            }
            _FIELD_OPTIONS[cls] = create_model(f"{cls.__name__}Options", __base__=OptionsBase, **fields)
        return _FIELD_OPTIONS[cls]

    def apply(self, signals: Mapping[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Return a copy of ``signals`` with this model's perturbation applied.

        Args:
            signals: arrays (N, n) keyed by signal name (``q``, ``qd``, ``qdd``, ``tau``; other
                keys are passed through unchanged).
            rng: the random generator to draw from.

        Returns:
            A new dict, with new arrays for q, qd, qdd, tau.

        Raises:
            DataError: the signal is missing, not (N, n), or holds NaN/inf.
            ConfigError: a per-joint option does not match n, or ``rng`` is not a Generator.
        """
        _check_rng(rng)
        out = _copy_signals(signals)
        self._perturb(out, rng)
        return out

    @abstractmethod
    def _perturb(self, signals: dict[str, np.ndarray], rng: np.random.Generator) -> None:
        """Replace the affected entries of ``signals`` (already copies) in place."""

    # registered through register_noise_models under ``kind`` (robotid_sim.hookspecs.Registrable)
    registry_hook = "register_noise_models"
    registry_base = "robotid_sim.sim.noise.NoiseModel"
    registry_name_attribute = "kind"

    @classmethod
    def registration_problem(cls, name: str) -> str | None:
        """What the noise-model registry expects instead of this class registered as ``name``; None when it is fine.

        A concrete frozen dataclass whose ``kind`` is ``name`` (so that ``to_dict()`` round-trips).
        """
        problems = []
        if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:  # type: ignore[attr-defined]
            problems.append("not a frozen dataclass")
        if getattr(cls, "__abstractmethods__", None):  # an ABC with abstract methods left
            problems.append(f"abstract: implement {', '.join(sorted(cls.__abstractmethods__))}")
        if cls.kind != name:
            problems.append(f"kind = {cls.kind!r}")
        if not problems:
            return None
        expected = f"a subclass of robotid_sim.sim.noise.NoiseModel that is a frozen dataclass with kind = '{name}'"
        return f"{expected} (it is {'; '.join(problems)})"

    def check_joints(self, n_dof: int) -> None:
        """Refuse (:class:`ConfigError`) a per-joint option whose length is not ``n_dof``.

        The per-joint options are the dataclass fields annotated ``PerJoint`` (a number for all
        joints, or a tuple with one number per joint). A plugin model with other per-joint
        options overrides this method.
        """
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            if field.type not in ("PerJoint", PerJoint):
                continue
            value = getattr(self, field.name)
            if isinstance(value, tuple | list) and len(value) != n_dof:
                raise ConfigError(
                    f"noise model '{self.kind}'{_on_signal(self)}: '{field.name}' has {len(value)} values but the "
                    f"robot has {n_dof} joints; give one value per joint or a single number for all joints"
                )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description, ``{"type": kind, <field>: value, ...}``."""
        out: dict[str, Any] = {"type": self.kind}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            out[field.name] = jsonable(getattr(self, field.name))
        return out


@dataclass(frozen=True)
class GaussianSNR(NoiseModel):
    """White Gaussian noise at a given SNR per joint (SPEC §5; seed 000 §5: 60/40/20 dB).

    Noise std per joint σ_j = sqrt(P_j / 10^(SNR_j/10)) with P_j = mean over samples of x_j²,
    so that 10·log10(P_j / σ_j²) = SNR_j.

    Attributes:
        signal: ``q``, ``qd``, ``qdd`` or ``tau``.
        snr_db: SNR in dB, one value or one per joint.
    """

    kind: ClassVar[str] = "gaussian_snr"
    signal: str
    snr_db: PerJoint

    class Options(OptionsBase):
        signal: Signal
        snr_db: _AnyPerJoint

    def _perturb(self, signals, rng) -> None:
        x = _target(signals, self.signal, self.kind)
        snr = _broadcast(self.snr_db, x.shape[1], "GaussianSNR", "snr_db")
        power = np.mean(x**2, axis=0)
        std = np.sqrt(power / 10.0 ** (snr / 10.0))  # SNR_dB = 10 log10(P_signal / P_noise)
        signals[self.signal] = x + std * rng.standard_normal(x.shape)


@dataclass(frozen=True)
class GaussianStd(NoiseModel):
    """White Gaussian noise of absolute standard deviation ``std`` (units of the signal).

    Attributes:
        signal: ``q``, ``qd``, ``qdd`` or ``tau``.
        std: standard deviation, >= 0, one value or one per joint.
    """

    kind: ClassVar[str] = "gaussian_std"
    signal: str
    std: PerJoint

    class Options(OptionsBase):
        signal: Signal
        std: _NonNegative

    def _perturb(self, signals, rng) -> None:
        x = _target(signals, self.signal, self.kind)
        std = _broadcast(self.std, x.shape[1], "GaussianStd", "std")
        signals[self.signal] = x + std * rng.standard_normal(x.shape)


@dataclass(frozen=True)
class Outliers(NoiseModel):
    """Spikes added to a fraction of the samples of each joint.

    Per joint, k = round(fraction · N) distinct samples are drawn uniformly; each gets
    s·u·magnitude added, s = ±1 with equal probability and u ~ U[0.5, 1] (so a spike is
    between half and the full magnitude). The count is exact, not binomial.

    Attributes:
        fraction: fraction of samples hit per joint, 0 <= fraction <= 1.
        magnitude: largest spike, > 0 (units of the signal), one value or one per joint.
        signal: the signal hit, ``tau`` by default.
    """

    kind: ClassVar[str] = "outliers"
    fraction: float
    magnitude: PerJoint
    signal: str = "tau"

    class Options(OptionsBase):
        fraction: _Fraction
        magnitude: _Positive
        signal: Signal

    def _perturb(self, signals, rng) -> None:
        x = _target(signals, self.signal, self.kind)
        n_samples, n = x.shape
        magnitude = _broadcast(self.magnitude, n, "Outliers", "magnitude")
        k = int(round(self.fraction * n_samples))
        if k == 0:
            return
        # k distinct samples per joint: the k smallest of N uniform keys
        rows = np.argpartition(rng.random((n_samples, n)), k - 1, axis=0)[:k]  # (k, n)
        sign = rng.choice(np.array([-1.0, 1.0]), size=(k, n))
        size = rng.uniform(0.5, 1.0, size=(k, n)) * magnitude
        out = x.copy()
        out[rows, np.arange(n)] += sign * size
        signals[self.signal] = out


@dataclass(frozen=True)
class Quantization(NoiseModel):
    """Encoder quantisation: round to the nearest multiple of ``resolution``.

    Attributes:
        resolution: quantisation step, > 0, e.g. 2π / 2**17 rad; one value or one per joint.
        signal: the signal quantised, ``q`` by default.
    """

    kind: ClassVar[str] = "quantization"
    resolution: PerJoint
    signal: str = "q"

    class Options(OptionsBase):
        resolution: _Positive
        signal: Signal

    def _perturb(self, signals, rng) -> None:
        x = _target(signals, self.signal, self.kind)
        step = _broadcast(self.resolution, x.shape[1], "Quantization", "resolution")
        signals[self.signal] = np.round(x / step) * step


@dataclass(frozen=True)
class CurrentMeasurement(NoiseModel):
    """Joint torque measured through the motor current (seed 001 Eq. 1).

    Seed 001 has no torque sensor: τ = η K i_q, where (its §2.1 and Table 2) η is the reduction
    ratio of the harmonic drive (160) and K the motor torque coefficient in N·m/A. Here the
    reduction ratio is ``gear_ratio`` (N), the torque constant ``torque_constant`` (K), and an
    optional drive ``efficiency`` (e, not in the seed; the default 1 gives Eq. 1 exactly):

        i_q = τ / (e·N·K);   i_q,meas = i_q + ε,  ε ~ N(0, current_std²);   τ_meas = e·N·K·i_q,meas

    so the torque noise std is e·N·K·current_std per joint (e.g. 160 · 0.21 N·m/A · 5 mA =
    0.17 N·m).

    Attributes:
        gear_ratio: reduction ratio N (> 0), one value or one per joint.
        torque_constant: motor torque constant K in N·m/A (> 0), one value or one per joint.
        current_std: standard deviation of the current noise in A (>= 0).
        efficiency: drive efficiency e in (0, 1], default 1.
    """

    kind: ClassVar[str] = "current"
    gear_ratio: PerJoint
    torque_constant: PerJoint
    current_std: PerJoint
    efficiency: PerJoint = 1.0

    class Options(OptionsBase):
        gear_ratio: _Positive
        torque_constant: _Positive
        current_std: _NonNegative
        efficiency: _Efficiency

    def _perturb(self, signals, rng) -> None:
        tau = _target(signals, "tau", self.kind)
        n = tau.shape[1]
        name = "CurrentMeasurement"
        ratio = (
            _broadcast(self.efficiency, n, name, "efficiency")
            * _broadcast(self.gear_ratio, n, name, "gear_ratio")
            * _broadcast(self.torque_constant, n, name, "torque_constant")
        )  # N·m of joint torque per A of motor current
        current = tau / ratio  # seed 001 Eq. 1 solved for i_q
        current = current + _broadcast(self.current_std, n, name, "current_std") * (rng.standard_normal(tau.shape))
        signals["tau"] = ratio * current  # seed 001 Eq. 1


def _check_rng(rng) -> None:
    if not isinstance(rng, np.random.Generator):
        raise ConfigError(
            f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}"
        )


@dataclass(frozen=True)
class NoiseChain:
    """Noise models applied in order, drawing from one generator.

    Attributes:
        models: the models, applied first to last.
    """

    models: tuple[NoiseModel, ...] = ()

    def __post_init__(self) -> None:
        models = tuple(self.models)
        for model in models:
            if not isinstance(model, NoiseModel):
                raise ConfigError(f"NoiseChain takes noise models, got {type(model).__name__}")
        object.__setattr__(self, "models", models)

    def __len__(self) -> int:
        return len(self.models)

    def apply(self, signals: Mapping[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Apply every model in order; return a new dict of new arrays.

        Args:
            signals: arrays (N, n) keyed by ``q``, ``qd``, ``qdd``, ``tau`` (other keys are
                passed through unchanged).
            rng: the generator, e.g. ``np.random.default_rng(seed)``; seed it once per dataset.

        Returns:
            The measured signals, same keys and shapes.

        Raises:
            DataError, ConfigError: as :meth:`NoiseModel.apply`.
        """
        _check_rng(rng)
        out = _copy_signals(signals)
        for model in self.models:
            model._perturb(out, rng)
        return out

    def check_joints(self, n_dof: int) -> None:
        """Check every model's per-joint options against an ``n_dof``-joint robot, before simulating.

        Raises:
            ConfigError: naming the model, the option and both lengths, when a per-joint option
                (a list) does not have exactly ``n_dof`` values; or ``n_dof`` is not a positive int.
        """
        if isinstance(n_dof, bool) or not isinstance(n_dof, int | np.integer) or n_dof < 1:
            raise ConfigError(f"n_dof must be a positive integer, got {n_dof!r}")
        for model in self.models:
            check = getattr(model, "check_joints", None)
            if callable(check):
                check(int(n_dof))

    def to_dict(self) -> dict[str, Any]:
        """``{"models": [model.to_dict(), ...]}``, accepted back by :func:`noise_from_config`."""
        return {"models": [model.to_dict() for model in self.models]}


# ---------------------------------------------------------------------------------------------
# configuration


class _Section(BaseModel):
    """A section of the noise table: unknown keys are errors; the values are checked by the noise models."""

    model_config = ConfigDict(extra="forbid")


class _SignalSection(_Section):
    snr_db: Any = None
    std: Any = None


class _OutliersSection(_Section):
    fraction: Any = None
    magnitude: Any = None
    signal: Any = None


class _QuantizationSection(_Section):
    q: Any = None
    qd: Any = None
    qdd: Any = None
    tau: Any = None


class _CurrentSection(_Section):
    gear_ratio: Any = None
    torque_constant: Any = None
    current_std: Any = None
    efficiency: Any = None


class _NoiseTable(_Section):
    q: dict[str, Any] | None = None
    qd: dict[str, Any] | None = None
    qdd: dict[str, Any] | None = None
    tau: dict[str, Any] | None = None
    outliers: dict[str, Any] | None = None
    quantization: dict[str, Any] | None = None
    current: dict[str, Any] | None = None


_SECTIONS: dict[str, type[_Section]] = {
    **{s: _SignalSection for s in SIGNALS},
    "outliers": _OutliersSection,
    "quantization": _QuantizationSection,
    "current": _CurrentSection,
}


def _validated(model: type[_Section], mapping: Mapping, where: str) -> dict[str, Any]:
    """The keys ``mapping`` sets, after checking them against ``model`` (one :class:`ConfigError` line)."""
    try:
        section = model.model_validate(dict(mapping))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, where, noun="key", valid=list(model.model_fields))) from None
    return {k: getattr(section, k) for k in model.model_fields if k in section.model_fields_set}


def _build(where: str, cls: type[NoiseModel], options: Mapping[str, Any]) -> NoiseModel:
    """``cls`` built from ``options`` (its dataclass defaults for the others), validated by ``cls.Options``."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}  # type: ignore[arg-type]
    try:
        validated = validate_options("noise model", cls.kind, cls.options_class(), {**defaults, **options})
        model = cls(**option_values(validated))
    except (TypeError, ValueError) as exc:  # ConfigError included: say which entry
        raise ConfigError(f"{where}: {exc}") from None
    if not isinstance(model, NoiseModel):  # a plugin class whose __new__ returns something else
        raise ConfigError(f"{where} did not build a NoiseModel")
    return model


def _model_class(position: int, item: Any) -> type[NoiseModel]:
    """The class for ``noise.models[position]``, looked up in the plugin registry by ``type``."""
    from robotid_sim import plugins

    kind = item.get("type") if isinstance(item, Mapping) else None
    if isinstance(kind, str):
        try:
            return plugins.get_noise_model(kind)
        except PluginError as exc:
            if kind in plugins.rejected("register_noise_models"):  # registered, but refused: say why
                raise ConfigError(f"'noise.models[{position}]': {exc}") from None
    known = plugins.noise_models()
    raise ConfigError(
        f"'noise.models[{position}]' must be a mapping whose 'type' is one of "
        f"{', '.join(known)}; got {item!r}{plugins.unknown_name_hint(kind, known) if kind else ''}"
    )


def _from_model_list(items) -> NoiseChain:
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise ConfigError(f"'noise.models' must be a list of models, got {items!r}")
    models = []
    for position, item in enumerate(items):
        cls = _model_class(position, item)
        options = {k: v for k, v in item.items() if k != "type"}
        models.append(_build(f"'noise.models[{position}]' ({item['type']})", cls, options))
    return NoiseChain(tuple(models))


def _table_entries(table: dict[str, Any]) -> list[tuple[str, type[NoiseModel], dict[str, Any]]]:
    """The noise table as (section, model class, options), in the fixed order of :func:`noise_from_config`."""
    sections = {name: _validated(_SECTIONS[name], value, f"'noise.{name}'") for name, value in table.items()}
    entries: list[tuple[str, type[NoiseModel], dict[str, Any]]] = []
    if "current" in sections:
        entries.append(("current", CurrentMeasurement, sections["current"]))
    for signal in SIGNALS:
        section = sections.get(signal, {})
        for key, cls in (("snr_db", GaussianSNR), ("std", GaussianStd)):
            if section.get(key) is not None:
                entries.append((signal, cls, {"signal": signal, key: section[key]}))
    for signal, resolution in sections.get("quantization", {}).items():
        if resolution is not None:
            entries.append(("quantization", Quantization, {"signal": signal, "resolution": resolution}))
    if "outliers" in sections:
        entries.append(("outliers", Outliers, sections["outliers"]))
    return entries


def noise_from_config(mapping: Mapping[str, Any] | None) -> NoiseChain:
    """Build a :class:`NoiseChain` from a scenario's ``noise`` mapping.

    The mapping (every key optional)::

        q:   {snr_db: 60}                 # also qd, qdd, tau; snr_db and/or std, each a
        qd:  {snr_db: 40}                 #   number or a list with one number per joint
        tau: {std: 0.5}
        current: {gear_ratio: 160, torque_constant: 0.21, current_std: 0.005, efficiency: 1.0}
        quantization: {q: 1.0e-4}         # resolution per signal
        outliers: {fraction: 0.005, magnitude: 10.0, signal: tau}

    The models are applied in a fixed order, whatever the order of the keys: ``current``; then
    for q, qd, qdd, tau in turn ``snr_db`` and ``std``; then ``quantization``; then
    ``outliers`` last (spikes hit the final measurement). The form ``{"models": [...]}``
    written by :meth:`NoiseChain.to_dict` is accepted too and keeps its order; each entry is
    ``{type: NAME, <field>: value, ...}`` where NAME is looked up in the plugin registry
    (:func:`robotid_sim.plugins.get_noise_model`), so a noise model registered by a plugin's
    ``register_noise_models`` hook is usable there like the built-in ones. None or {} gives an
    empty chain.

    Raises:
        ConfigError: an unknown key (naming it and the allowed ones), a wrong type, or a value
            out of range (naming the field).
    """
    if mapping is None:
        return NoiseChain()
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"'noise' must be a mapping, got {type(mapping).__name__}: {mapping!r}")
    if "models" in mapping:
        if len(mapping) != 1:
            others = ", ".join(sorted(k for k in mapping if k != "models"))
            raise ConfigError(f"'noise.models' cannot be combined with other keys ({others})")
        return _from_model_list(mapping["models"])
    table = _validated(_NoiseTable, mapping, "'noise'")
    entries = _table_entries({k: v for k, v in table.items() if v is not None})
    return NoiseChain(tuple(_build(f"'noise.{section}'", cls, options) for section, cls, options in entries))


def measured_snr_db(clean, noisy) -> np.ndarray:
    """SNR actually reached, per joint: 10·log10(mean(clean²) / mean((noisy − clean)²)).

    Args:
        clean: noise-free signal (N, n) or (N,).
        noisy: the same signal with noise, same shape.

    Returns:
        SNR in dB per joint (n,) (a 0-d array for 1-D input); +inf where no noise was added.

    Raises:
        DataError: shapes differ or arrays hold NaN/inf.
    """
    clean = np.asarray(clean, dtype=float)
    noisy = np.asarray(noisy, dtype=float)
    if clean.shape != noisy.shape or clean.ndim not in (1, 2):
        raise DataError(f"clean and noisy must have the same shape (N,) or (N, n), got {clean.shape} and {noisy.shape}")
    if not (np.all(np.isfinite(clean)) and np.all(np.isfinite(noisy))):
        raise DataError("clean or noisy contains NaN or inf")
    signal_power = np.mean(clean**2, axis=0)
    noise_power = np.mean((noisy - clean) ** 2, axis=0)
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(signal_power / noise_power)
