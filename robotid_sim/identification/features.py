"""The feature grammar: factors, features and feature libraries of (q, qd, qdd) (seed 000; SPEC §8).

A :class:`Factor` is ``function(signal_joint)^power`` (``sin(q2)``, ``qd1^2``, ``exp(-(qd1/0.1)^2)``), a
:class:`Feature` a product of factors (the empty product is ``1``), a :class:`FeatureLibrary` an ordered
list of features for an n-joint robot. Shared by the ``feature_library`` model kind
(:class:`~robotid_sim.identification.models.feature_library.FeatureLibraryModel`, which predicts with it)
and the SINDy estimators (``robotid_sim_plugins.sindy``, which build libraries with it).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import ConfigError, ModelError
from robotid_sim.identification.model import short_repr, state_field


def _forward(x: np.ndarray) -> np.ndarray:
    """1 where x > 0, else 0: the forward-motion indicator of seed 000 §4's direction split."""
    return (x > 0).astype(float)


def _backward(x: np.ndarray) -> np.ndarray:
    """1 where x < 0, else 0: the backward-motion indicator of seed 000 §4's direction split."""
    return (x < 0).astype(float)


#: elementwise functions a feature factor may apply (``fwd``/``bwd``: 1 for motion forward/backward,
#: else 0, the direction split of seed 000 §4)
FUNCTIONS = {
    "": None,
    "sin": np.sin,
    "cos": np.cos,
    "sign": np.sign,
    "abs": np.abs,
    "tanh": np.tanh,
    "exp": np.exp,
    "fwd": _forward,
    "bwd": _backward,
}
#: the factor ``exp(-(x/s)^2)`` (a Stribeck candidate of seed 000 §4 for x = qd), written with its scale s
GAUSSIAN = "gauss"
#: the signals a factor may read
SIGNALS = ("q", "qd", "qdd")
_NAMED = "|".join(sorted((f for f in FUNCTIONS if f), key=len, reverse=True))
_FACTOR = re.compile(rf"^(?:({_NAMED})\((qdd|qd|q)(\d+)\)|(qdd|qd|q)(\d+))(?:\^(\d+))?$")
_NUMBER = r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_GAUSSIAN_FACTOR = re.compile(rf"^exp\(-\((qdd|qd|q)(\d+)/({_NUMBER})\)\^2\)(?:\^(\d+))?$")
#: canonical order of factors in a product: by signal, joint, function, scale
_SIGNAL_ORDER = {s: k for k, s in enumerate(SIGNALS)}
#: values (samples x features) of one block of feature products in :meth:`FeatureLibrary.evaluate`
_PRODUCT_BLOCK = 1 << 18


@dataclass(frozen=True)
class Factor:
    """``function(signal_joint)^power``, e.g. ``sin(q2)``, ``qd1^2`` or ``exp(-(qd1/0.1)^2)``; joint is 0-based.

    ``function`` is a key of :data:`FUNCTIONS`, or :data:`GAUSSIAN` for ``exp(-(x/scale)^2)``, the only
    factor with a ``scale`` (> 0; 0 for every other factor).
    """

    function: str
    signal: str
    joint: int
    power: int = 1
    scale: float = 0.0

    def __str__(self) -> str:
        core = f"{self.signal}{self.joint + 1}"
        if self.function == GAUSSIAN:
            core = f"exp(-({core}/{float(self.scale)!r})^2)"
        elif self.function:
            core = f"{self.function}({core})"
        return core + (f"^{self.power}" if self.power != 1 else "")

    def sort_key(self) -> tuple:
        """Canonical order in a product: q before qd before qdd, then joint, function and scale."""
        return (_SIGNAL_ORDER[self.signal], self.joint, self.function, self.scale)

    def evaluate(self, signals: dict[str, np.ndarray]) -> np.ndarray:
        x = signals[self.signal][:, self.joint]
        if self.function == GAUSSIAN:
            x = np.exp(-((x / self.scale) ** 2))
        else:
            fn = FUNCTIONS[self.function]
            x = fn(x) if fn is not None else x
        return x**self.power if self.power != 1 else x


@dataclass(frozen=True)
class Feature:
    """A product of factors; the empty product is the constant ``1``."""

    factors: tuple[Factor, ...] = ()

    def __str__(self) -> str:
        return "*".join(str(f) for f in self.factors) or "1"

    def __mul__(self, other: Feature) -> Feature:
        """The product in canonical form: equal factors merged into one power, factors in canonical order.

        So ``sin(q1) * sin(q1)*qd2`` is ``sin(q1)^2*qd2`` whichever way it was built, and a library
        deduplicated by name holds each monomial once.
        """
        if not isinstance(other, Feature):
            return NotImplemented
        powers: dict[tuple, int] = {}
        for f in (*self.factors, *other.factors):
            key = (f.function, f.signal, f.joint, f.scale)
            powers[key] = powers.get(key, 0) + f.power
        merged = [Factor(fn, signal, joint, power, scale) for (fn, signal, joint, scale), power in powers.items()]
        return Feature(tuple(sorted(merged, key=Factor.sort_key)))

    @classmethod
    def parse(cls, text: str, n_dof: int) -> Feature:
        """Parse ``"1"`` or factors joined by ``*`` (``"sin(q1)*qdd2"``, ``"qd3^2"``, ``"exp(-(qd1/0.1)^2)"``,
        ``"fwd(qd2)"``); never evaluates code.

        Raises:
            ConfigError: a malformed factor or a joint outside 1..n_dof, naming it.
        """
        text = str(text).replace(" ", "")
        if text == "1":
            return cls()
        factors = []
        for part in text.split("*"):
            m = _FACTOR.match(part)
            g = _GAUSSIAN_FACTOR.match(part) if m is None else None
            if m is None and g is None:
                raise ConfigError(
                    f"feature {text!r}: cannot read factor {part!r}; a factor is SIGNALj, FUNC(SIGNALj) or "
                    f"exp(-(SIGNALj/SCALE)^2), optionally ^k, with SIGNAL in {SIGNALS} and FUNC in "
                    f"{sorted(f for f in FUNCTIONS if f)}"
                )
            scale = 0.0
            if g is not None:
                function, signal, joint, power = GAUSSIAN, g.group(1), g.group(2), g.group(4)
                scale = float(g.group(3))
                if not (np.isfinite(scale) and scale > 0):
                    raise ConfigError(f"feature {text!r}: the scale of {part!r} must be a finite number > 0")
            elif m.group(2):
                function, signal, joint, power = m.group(1), m.group(2), m.group(3), m.group(6)
            else:
                function, signal, joint, power = "", m.group(4), m.group(5), m.group(6)
            joint = int(joint)
            if not 1 <= joint <= n_dof:
                raise ConfigError(f"feature {text!r}: joint {joint} is outside 1..{n_dof}")
            power = int(power or 1)
            if power < 1:
                raise ConfigError(f"feature {text!r}: the power must be >= 1")
            factors.append(Factor(function, signal, joint - 1, power, scale))
        return cls(tuple(factors))

    def evaluate(self, signals: dict[str, np.ndarray], N: int) -> np.ndarray:
        out = np.ones(N)
        for f in self.factors:
            out = out * f.evaluate(signals)
        return out

    def qdd_degree(self) -> int:
        """Total degree in the accelerations (plain ``qddj`` factors count their power)."""
        return sum(f.power if not f.function else 99 for f in self.factors if f.signal == "qdd")


@dataclass(frozen=True)
class FeatureLibrary:
    """An ordered library of features of (q, qd, qdd) for an n-joint robot."""

    n_dof: int
    features: tuple[Feature, ...]

    @classmethod
    def parse(cls, texts, n_dof: int) -> FeatureLibrary:
        features = tuple(Feature.parse(t, n_dof) for t in texts)
        counts = Counter(str(f) for f in features)
        duplicates = sorted(n for n, c in counts.items() if c > 1)
        if duplicates:
            raise ConfigError(f"feature library: duplicate features {duplicates}")
        return cls(int(n_dof), features)

    @property
    def names(self) -> list[str]:
        return [str(f) for f in self.features]

    def __len__(self) -> int:
        return len(self.features)

    @functools.cached_property
    def _products(self) -> tuple[tuple[Factor, ...], np.ndarray]:
        """(the distinct factors of the library, (F, k) int array: feature i is the product of the factors at
        row i, left to right, padded with ``len(factors)``, the index of a column of ones)."""
        factors = tuple(dict.fromkeys(f for feature in self.features for f in feature.factors))
        position = {f: k for k, f in enumerate(factors)}
        width = max([len(feature.factors) for feature in self.features] + [1])
        index = np.full((len(self.features), width), len(factors), dtype=np.intp)
        for i, feature in enumerate(self.features):
            index[i, : len(feature.factors)] = [position[f] for f in feature.factors]
        return factors, index

    def evaluate(self, q, qd, qdd) -> np.ndarray:
        """Feature matrix Φ (N, F); each distinct factor is computed once, whatever the number of features, and
        the products are taken for a block of features at a time (a model in a control loop evaluates one
        sample per step: a loop over features would cost more than the arithmetic)."""
        q, qd, qdd = as_states(self.n_dof, q=q, qd=qd, qdd=qdd)
        signals = {"q": q, "qd": qd, "qdd": qdd}
        N = q.shape[0]
        factors, index = self._products
        columns = np.empty((N, len(factors) + 1))
        columns[:, -1] = 1.0
        for k, f in enumerate(factors):
            columns[:, k] = f.evaluate(signals)
        out = np.empty((N, len(self.features)))
        block = max(1, _PRODUCT_BLOCK // max(N, 1))
        for start in range(0, len(self.features), block):
            rows = index[start : start + block]
            part = columns[:, rows[:, 0]]
            for j in range(1, rows.shape[1]):
                part *= columns[:, rows[:, j]]
            out[:, start : start + block] = part
        return out

    def linear_in_qdd(self) -> bool:
        """True when every feature is at most linear in qdd with a factor of q alone beside it."""
        for f in self.features:
            degree = f.qdd_degree()
            if degree > 1 or (degree == 1 and any(x.signal == "qd" for x in f.factors)):
                return False
        return True

    def to_dict(self) -> dict:
        return {"n_dof": self.n_dof, "features": self.names}

    @classmethod
    def from_dict(cls, data: dict) -> FeatureLibrary:
        n_dof = state_field(data, "n_dof", int, "a whole number of joints", where="library")
        features = state_field(data, "features", list, "a list of feature strings", where="library")
        if n_dof < 1 or not features or not all(isinstance(f, str) for f in features):
            raise ModelError(
                f"field 'library' must have n_dof >= 1 and a non-empty list of feature strings, got n_dof={n_dof!r}, "
                f"features={short_repr(features)}"
            )
        return cls.parse(features, n_dof)
