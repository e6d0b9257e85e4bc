"""Joint friction models (SPEC §4).

Each model is a small object holding per-joint values. It evaluates the friction torque
``torque(qd) -> (N, n)`` and, for the parameters that enter linearly, the regressor columns
``columns(qd) -> (N, n, k)`` where ``columns[:, i, c]`` multiplies parameter ``c`` of joint ``i``
(a friction parameter of joint i only acts on row i). Parameters that enter non-linearly (the
exponent ``alpha`` of seed 001 Eq. 5, the Stribeck velocity ``vs`` of seed 000 Eq. 34) are held
fixed at their stored value when the columns are formed.

``sign_smoothing`` (a velocity in rad/s or m/s) replaces sign(v) by tanh(v / eps) in *both* the
torque and the columns, so a simulator and a regressor built from the same object always agree.
The default 0 is the exact sign used for identification.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from robotid_sim.errors import ConfigError


def smooth_sign(v: np.ndarray, smoothing: float) -> np.ndarray:
    """sign(v), or tanh(v / smoothing) when ``smoothing > 0``."""
    if smoothing > 0.0:
        return np.tanh(v / smoothing)
    return np.sign(v)


def _per_joint(values, n: int, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ConfigError(f"friction field '{name}' must have {n} values (one per joint), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"friction field '{name}' contains NaN or inf: {arr.tolist()}")
    return arr


class FrictionModel(ABC):
    """Base class: per-joint friction law with linear parameters ``suffixes``."""

    #: model name as written in a sidecar (``friction.model``)
    kind: str = ""
    #: names of the linear parameters, per joint, in regressor order (``fc`` -> ``fc1``, ``fc2`` ...)
    suffixes: tuple[str, ...] = ()

    n: int
    sign_smoothing: float

    def torque(self, qd: np.ndarray) -> np.ndarray:
        """Friction torque (N, n) for joint velocities ``qd`` (N, n): the columns times the values."""
        return np.einsum("nik,ik->ni", self.columns(qd), self.values())

    @abstractmethod
    def columns(self, qd: np.ndarray) -> np.ndarray:
        """Regressor columns (N, n, k) of the linear parameters, k = len(suffixes)."""

    @abstractmethod
    def values(self) -> np.ndarray:
        """Linear parameter values (n, k), same order as ``columns``."""

    def to_dict(self) -> dict:
        """Plain-data form, as written in a sidecar: the law, its fields in sidecar order, ``sign_smoothing``."""
        fields = _MODELS[self.kind][1]
        return {
            "model": self.kind,
            **{name: getattr(self, name).tolist() for name in fields},
            "sign_smoothing": self.sign_smoothing,
        }

    def with_values(self, values: np.ndarray) -> FrictionModel:
        """A copy whose linear parameters are ``values`` (n, k); non-linear ones are kept."""
        d = self.to_dict()
        for c, s in enumerate(self.suffixes):
            d[_FIELD_OF_SUFFIX.get(s, s)] = np.asarray(values)[:, c].tolist()
        return friction_from_dict(d, self.n)

    def parameter_names(self, joint: int) -> list[str]:
        """Names of joint ``joint``'s (0-based) linear friction parameters, e.g. ``['fc1', 'fv1', 'S1']``."""
        return [f"{s}{joint + 1}" for s in self.suffixes]


@dataclass(frozen=True)
class NoFriction(FrictionModel):
    """No friction: zero torque and no regressor columns."""

    n: int
    sign_smoothing: float = 0.0
    kind = "none"
    suffixes = ()

    def torque(self, qd):
        return np.zeros_like(qd)

    def columns(self, qd):
        return np.zeros(qd.shape + (0,))

    def values(self):
        return np.zeros((self.n, 0))

    def to_dict(self):
        return {"model": "none"}


@dataclass(frozen=True)
class CoulombViscous(FrictionModel):
    """tau_f = fc·sign(qd) + fv·qd + S (seed 001 Eq. 4)."""

    fc: np.ndarray
    fv: np.ndarray
    offset: np.ndarray
    sign_smoothing: float = 0.0
    n: int = field(init=False)
    kind = "coulomb_viscous"
    suffixes = ("fc", "fv", "S")

    def __post_init__(self):
        object.__setattr__(self, "n", len(self.fc))

    def torque(self, qd):
        return self.fc * smooth_sign(qd, self.sign_smoothing) + self.fv * qd + self.offset

    def columns(self, qd):
        return np.stack([smooth_sign(qd, self.sign_smoothing), qd, np.ones_like(qd)], axis=-1)

    def values(self):
        return np.stack([self.fc, self.fv, self.offset], axis=-1)


@dataclass(frozen=True)
class CoulombViscousNoOffset(FrictionModel):
    """tau_f = fc·sign(qd) + fv·qd, no offset: BIRDy's ``ViscousCoulomb`` (its TX40's data-generation and
    identification law); :class:`CoulombViscous` is BIRDy's ``ViscousCoulombOff``."""

    fc: np.ndarray
    fv: np.ndarray
    sign_smoothing: float = 0.0
    n: int = field(init=False)
    kind = "coulomb_viscous_no_offset"
    suffixes = ("fc", "fv")

    def __post_init__(self):
        object.__setattr__(self, "n", len(self.fc))

    def torque(self, qd):
        return self.fc * smooth_sign(qd, self.sign_smoothing) + self.fv * qd

    def columns(self, qd):
        return np.stack([smooth_sign(qd, self.sign_smoothing), qd], axis=-1)

    def values(self):
        return np.stack([self.fc, self.fv], axis=-1)


@dataclass(frozen=True)
class NonlinearExponent(FrictionModel):
    """tau_f = fc·sign(qd) + fv·|qd|^alpha·sign(qd) + S (seed 001 Eq. 5); alpha enters non-linearly."""

    fc: np.ndarray
    fv: np.ndarray
    offset: np.ndarray
    alpha: np.ndarray
    sign_smoothing: float = 0.0
    n: int = field(init=False)
    kind = "nonlinear"
    suffixes = ("fc", "fv", "S")

    def __post_init__(self):
        object.__setattr__(self, "n", len(self.fc))
        if np.any(self.alpha <= 0):
            raise ConfigError(f"friction 'alpha' must be > 0 (seed 001 Eq. 32), got {self.alpha.tolist()}")

    def columns(self, qd):
        s = smooth_sign(qd, self.sign_smoothing)
        return np.stack([s, np.abs(qd) ** self.alpha * s, np.ones_like(qd)], axis=-1)

    def values(self):
        return np.stack([self.fc, self.fv, self.offset], axis=-1)


@dataclass(frozen=True)
class Stribeck(FrictionModel):
    """tau_f = [fc + (fs - fc)·exp(-(qd/vs)^2)]·sign(qd) + fv·qd (seed 000 Eq. 34).

    Linear in (fc, fs, fv) for a fixed Stribeck velocity vs: the columns are
    sign·(1 - e), sign·e and qd with e = exp(-(qd/vs)^2).
    """

    fc: np.ndarray
    fs: np.ndarray
    fv: np.ndarray
    vs: np.ndarray
    sign_smoothing: float = 0.0
    n: int = field(init=False)
    kind = "stribeck"
    suffixes = ("fc", "fs", "fv")

    def __post_init__(self):
        object.__setattr__(self, "n", len(self.fc))
        if np.any(self.vs <= 0):
            raise ConfigError(f"friction 'vs' (Stribeck velocity) must be > 0, got {self.vs.tolist()}")

    def columns(self, qd):
        s = smooth_sign(qd, self.sign_smoothing)
        e = np.exp(-((qd / self.vs) ** 2))
        return np.stack([s * (1.0 - e), s * e, qd], axis=-1)

    def values(self):
        return np.stack([self.fc, self.fs, self.fv], axis=-1)


@dataclass(frozen=True)
class NonlinearStribeck(FrictionModel):
    """tau_f = [fc + (fs - fc)·exp(-(qd/vs)^2)]·sign(qd) + fv·|qd|^alpha·sign(qd) + S.

    Seed 001's Eq. 5 with the low-speed Stribeck regime of seed 000 Eq. 34: seed 001 §1 and §5.2 note that the
    friction of the pre-sliding, low-speed region is what Eq. 5 cannot fit. Above a few vs it is Eq. 5, towards
    rest the dry friction rises to fs. Linear in (fc, fs, fv, S) for fixed alpha and vs.
    """

    fc: np.ndarray
    fs: np.ndarray
    fv: np.ndarray
    offset: np.ndarray
    alpha: np.ndarray
    vs: np.ndarray
    sign_smoothing: float = 0.0
    n: int = field(init=False)
    kind = "nonlinear_stribeck"
    suffixes = ("fc", "fs", "fv", "S")

    def __post_init__(self):
        object.__setattr__(self, "n", len(self.fc))
        if np.any(self.alpha <= 0):
            raise ConfigError(f"friction 'alpha' must be > 0 (seed 001 Eq. 32), got {self.alpha.tolist()}")
        if np.any(self.vs <= 0):
            raise ConfigError(f"friction 'vs' (Stribeck velocity) must be > 0, got {self.vs.tolist()}")

    def columns(self, qd):
        s = smooth_sign(qd, self.sign_smoothing)
        e = np.exp(-((qd / self.vs) ** 2))
        return np.stack([s * (1.0 - e), s * e, np.abs(qd) ** self.alpha * s, np.ones_like(qd)], axis=-1)

    def values(self):
        return np.stack([self.fc, self.fs, self.fv, self.offset], axis=-1)


# sidecar field holding each linear parameter (the offset S is written 'offset' in files)
_FIELD_OF_SUFFIX = {"S": "offset"}

_MODELS: dict[str, tuple[type[FrictionModel], tuple[str, ...]]] = {
    "none": (NoFriction, ()),
    "coulomb_viscous": (CoulombViscous, ("fc", "fv", "offset")),
    "coulomb_viscous_no_offset": (CoulombViscousNoOffset, ("fc", "fv")),
    "nonlinear": (NonlinearExponent, ("fc", "fv", "offset", "alpha")),
    "stribeck": (Stribeck, ("fc", "fs", "fv", "vs")),
    "nonlinear_stribeck": (NonlinearStribeck, ("fc", "fs", "fv", "offset", "alpha", "vs")),
}


def linear_fields(kind: str) -> tuple[str, ...]:
    """The sidecar fields of a friction law's linear coefficients, in regressor order (``()`` for an unknown law)."""
    cls = _MODELS.get(kind, (NoFriction,))[0]
    return tuple(_FIELD_OF_SUFFIX.get(s, s) for s in cls.suffixes)


def friction_from_dict(spec: dict | None, n: int) -> FrictionModel:
    """Build a friction model from its sidecar mapping ``{'model': ..., <fields>}``.

    Missing and unknown fields raise :class:`ConfigError` naming the field.
    """
    if spec is None:
        return NoFriction(n)
    spec = dict(spec)
    kind = spec.pop("model", None)
    if kind not in _MODELS:
        raise ConfigError(f"friction.model must be one of {sorted(_MODELS)}, got {kind!r}")
    cls, fields = _MODELS[kind]
    smoothing = float(spec.pop("sign_smoothing", 0.0))
    if smoothing < 0:
        raise ConfigError(f"friction.sign_smoothing must be >= 0, got {smoothing}")
    unknown = sorted(set(spec) - set(fields))
    if unknown:
        raise ConfigError(f"friction: unknown field(s) {unknown} for model '{kind}'; expected {list(fields)}")
    missing = [f for f in fields if f not in spec and f != "offset"]
    if missing:
        raise ConfigError(f"friction: missing field(s) {missing} for model '{kind}'")
    if kind == "none":
        return NoFriction(n, smoothing)
    args = {f: _per_joint(spec.get(f, 0.0), n, f) for f in fields}
    return cls(**args, sign_smoothing=smoothing)
