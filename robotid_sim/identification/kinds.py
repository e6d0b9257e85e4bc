"""The built-in kinds of identified model (SPEC §8).

============================  ==================  ==============================================
class                         ``kind``            what it is
============================  ==================  ==============================================
:class:`BaseParameterModel`   ``base_linear``     linear in the base parameters (OLS, WLS, IRLS,
                                                  Adaline, Hopfield, EKF)
:class:`StandardParameterModel` ``standard_linear`` linear in the full standard parameters (a
                                                  physically consistent set from LMI-WLS); its
                                                  base values ``K θ`` serve the metrics
:class:`FeatureLibraryModel`  ``feature_library`` linear in a library of features of q, qd, qdd
                                                  (SINDy): no URDF needed
:class:`ResidualModel`        ``residual``        any model plus a learned correction (a small
                                                  MLP; the semiparametric model)
:class:`LagrangianFeatureModel` ``lagrangian_features`` A(q) (symmetric by construction), B and C
                                                  from its Christoffel symbols, G from a
                                                  potential, friction (seed 002, auto_features)
============================  ==================  ==============================================

Models linear in inertial parameters get their mass matrix and bias from the recursive
algorithms of :class:`~robotid_sim.robot.Robot` applied to an *equivalent standard parameter
vector* (for base parameters: the base values on their own columns, zeros elsewhere, which has
the same base values since ``K`` is the identity on those columns). The generic construction
from n + 1 torque predictions remains only for models that are merely linear in qdd.
"""

from __future__ import annotations

import copy
import re
from abc import abstractmethod
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from robotid_sim.dynamics.forward import solve_forward
from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import ConfigError, ModelError
from robotid_sim.identification.model import (
    History,
    IdentifiedModel,
    model_from_state,
    prefixed,
    state_array,
    state_field,
)
from robotid_sim.robot.structure import RobotStructure


def _readonly(x, what: str = "values") -> np.ndarray:
    raw = np.asarray(x)
    if raw.dtype.kind not in "iuf" and not (raw.dtype == object and raw.size == 0):
        raise ModelError(f"{what} must be real numbers, got dtype {raw.dtype}")
    arr = np.array(raw, dtype=float)
    arr.flags.writeable = False
    return arr


def _short(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ===================================================================================== linear
class LinearParameterModel(IdentifiedModel):
    """A model linear in a parameter vector over a robot structure's regressor.

    Attributes:
        structure: the :class:`RobotStructure` (kinematics and friction law) it predicts with.
        values: (m,) identified values (read-only).
        covariance: (m, m) covariance where the method gives one, else None.
    """

    def __init__(
        self,
        structure: RobotStructure,
        values,
        covariance=None,
        *,
        estimator: str = "",
        options: dict | None = None,
        diagnostics: dict | None = None,
        history: History | None = None,
    ):
        if not isinstance(structure, RobotStructure):
            raise ModelError(f"structure must be a RobotStructure, got {type(structure).__name__}")
        self.structure = structure
        self.values = _readonly(values)
        m = len(self.parameter_names)
        if self.values.shape != (m,):
            raise ModelError(
                f"{self.kind} model of '{structure.name}': expected {m} parameter values, got shape {self.values.shape}"
            )
        if not np.all(np.isfinite(self.values)):
            raise ModelError(f"{self.kind} model: parameter values contain NaN or inf")
        self.covariance = None if covariance is None else _readonly(covariance, "covariance")
        if self.covariance is not None and self.covariance.shape != (m, m):
            raise ModelError(f"covariance must be ({m}, {m}), got {self.covariance.shape}")
        self._init_common(structure.joint_names, estimator, options, diagnostics, history)

    @property
    @abstractmethod
    def parameter_names(self) -> list[str]:
        """Names of the m parameters."""

    @abstractmethod
    def regressor(self, q, qd, qdd) -> np.ndarray:
        """The model's regressor (N, n, m): ``regressor @ values`` is the predicted torque."""

    @abstractmethod
    def standard_equivalent(self) -> np.ndarray:
        """A standard parameter vector (p,) with the same torque for every state."""

    @abstractmethod
    def base_values(self) -> np.ndarray:
        """The base parameters (b,) of this model (``K @ standard_equivalent()``)."""

    @property
    def std(self) -> np.ndarray | None:
        """Standard deviations (m,) of the parameters, where a covariance is known."""
        return None if self.covariance is None else np.sqrt(np.clip(np.diag(self.covariance), 0, None))

    @cached_property
    def equivalent_robot(self):
        """A :class:`~robotid_sim.robot.Robot` with :meth:`standard_equivalent` as parameters."""
        return self.structure.robot_with_parameters(self.standard_equivalent())

    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        """Motor torque (N, n) by the compiled Newton–Euler kernels on :meth:`standard_equivalent`
        (the batched torque: no regressor formed; equal to ``regressor @ values`` to rounding)."""
        return self.equivalent_robot.inverse_dynamics(q, qd, qdd)

    def mass_matrix(self, q) -> np.ndarray:
        """M(q) (N, n, n) by the recursive algorithm on the equivalent standard parameters."""
        return self.equivalent_robot.mass_matrix(q)

    def bias_torque(self, q, qd) -> np.ndarray:
        return self.equivalent_robot.bias_torque(q, qd)

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """qdd (N, n): CRBA, RNEA and an LU solve per sample on the equivalent standard parameters."""
        return self.equivalent_robot.forward_dynamics(q, qd, tau)

    def with_values(self, values) -> LinearParameterModel:
        """A copy with other parameter values and no covariance (for sensitivity studies)."""
        values = _readonly(values)
        if values.shape != self.values.shape:
            raise ModelError(f"expected {self.values.shape[0]} parameter values, got shape {values.shape}")
        clone = copy.copy(self)
        clone.__dict__.pop("equivalent_robot", None)
        clone.values, clone.covariance = values, None
        return clone

    def parameter_table(self):
        return list(self.parameter_names), np.array(self.values), self.std

    def check_structure(self, structure: RobotStructure) -> None:
        """Refuse a robot whose kinematics, gravity, limits or parameter layout differ from the model's.

        The model carries its friction law (the law a scenario assumed, or the exponents ``two_loop``
        fitted), so a robot whose law differs in kind or non-linear constants is accepted when every
        friction parameter of the model is one of the robot's (the same law, or a simpler one): the model
        predicts with its own law.
        """
        if structure.friction_law != self.structure.friction_law and structure.n_dof == self.structure.n_dof:
            own = structure.with_friction_law(self.structure.friction_law)
            if set(own.parameter_names) <= set(structure.parameter_names):
                structure = own
        differences = self.structure.differences(structure)
        if differences:
            shown = "; ".join(differences[:5]) + (f"; and {len(differences) - 5} more" if len(differences) > 5 else "")
            raise ModelError(
                f"the robot differs from the one this {self.estimator or self.kind} model was identified on: "
                f"{shown}. Identify again on this robot, or load the model without a robot"
            )

    def _linear_state(self, extra: dict) -> tuple[dict, dict[str, np.ndarray]]:
        std = self.std
        data = {
            "robot": self.structure.to_dict(),
            "robot_sha256": self.structure.sha256,
            **extra,
            "parameters": [
                {"name": n, "value": float(v), "std": None if std is None else float(std[k])}
                for k, (n, v) in enumerate(zip(self.parameter_names, self.values, strict=True))
            ],
        }
        arrays = {"values": np.array(self.values)}
        if self.covariance is not None:
            arrays["covariance"] = np.array(self.covariance)
        return data, arrays

    @staticmethod
    def _structure_from(data: dict) -> RobotStructure:
        robot = state_field(data, "robot", dict, "the embedded robot structure (a JSON object)")
        try:
            structure = RobotStructure.from_dict(robot)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            if isinstance(exc, ConfigError | ModelError):
                raise ModelError(f"field 'robot': {exc}") from None
            raise ModelError(f"field 'robot' is not a valid robot structure ({type(exc).__name__}: {exc})") from None
        if structure.sha256 != data.get("robot_sha256"):
            raise ModelError("the embedded robot structure does not match its recorded SHA-256 (edited by hand?)")
        return structure

    @staticmethod
    def _arrays_from(arrays: dict, m: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The (m,) values and the (m, m) covariance or None, checked (finite, real, right shape)."""
        values = state_array(arrays, "values", shape=(m,))
        covariance = state_array(arrays, "covariance", shape=(m, m)) if "covariance" in arrays else None
        return values, covariance

    def _check_parameter_names(self, data: dict) -> None:
        """The names the JSON lists under 'parameters' must be this model's (a hand edit would shift them)."""
        rows = data.get("parameters")
        if rows is None:
            return
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ModelError("field 'parameters' must be a list of {name, value, std} objects")
        listed = [r.get("name") for r in rows]
        expected = list(self.parameter_names)
        if listed != expected:
            first = next(
                (i for i, (a, b) in enumerate(zip(listed, expected, strict=False)) if a != b),
                min(len(listed), len(expected)),
            )
            found = repr(listed[first]) if first < len(listed) else "nothing"
            wanted = repr(expected[first]) if first < len(expected) else "nothing"
            raise ModelError(
                f"field 'parameters' does not match the model's columns and robot: parameter {first} is {found} in "
                f"the file but {wanted} from the columns ({len(listed)} listed, {len(expected)} expected); the file "
                "was edited or damaged: identify again"
            )


class BaseParameterModel(LinearParameterModel):
    """Linear in the base parameters: torque = Y[..., columns] @ values (SPEC §4).

    Attributes:
        columns: (b,) indices of the base columns in the structure's full regressor.
    """

    kind = "base_linear"

    def __init__(self, structure: RobotStructure, columns, values, covariance=None, **common):
        raw = np.asarray(columns)
        p = structure.n_parameters
        if raw.dtype.kind not in "iu" or raw.size == 0:
            raise ModelError(
                f"columns must be a non-empty list of whole-number indices below {p}, got {_short(columns)}"
            )
        self.columns = raw.astype(int)
        if (
            self.columns.ndim != 1
            or np.any(self.columns < 0)
            or np.any(self.columns >= p)
            or np.any(np.diff(self.columns) <= 0)
        ):
            raise ModelError(f"columns must be increasing indices below {p}, got {self.columns.tolist()}")
        super().__init__(structure, values, covariance, **common)

    @classmethod
    def from_problem(cls, problem, values, covariance=None, **common) -> BaseParameterModel:
        """A model of ``problem``'s robot structure with identified base ``values`` (b,).

        ``common``: ``estimator``, ``options``, ``diagnostics``, ``history``.
        """
        values = np.asarray(values, float)
        if values.shape != (problem.base.count,):
            raise ModelError(f"expected {problem.base.count} base parameter values, got shape {values.shape}")
        return cls(problem.structure, problem.base.independent, values, covariance, **common)

    @property
    def parameter_names(self) -> list[str]:
        names = self.structure.parameter_names
        return [names[c] for c in self.columns]

    def regressor(self, q, qd, qdd) -> np.ndarray:
        return self.structure.regressor(q, qd, qdd, columns=self.columns)

    def standard_equivalent(self) -> np.ndarray:
        theta = np.zeros(self.structure.n_parameters)
        theta[self.columns] = self.values
        return theta

    def base_values(self) -> np.ndarray:
        base = self.structure.base_parameters()
        if not np.array_equal(base.independent, self.columns):
            return base.K @ self.standard_equivalent()
        return np.array(self.values)

    def _state(self):
        return self._linear_state({"columns": self.columns.tolist()})

    @classmethod
    def _from_state(cls, data, arrays):
        structure = cls._structure_from(data)
        columns = state_field(data, "columns", list, "a list of regressor column indices")
        if not columns or not all(isinstance(c, int) and not isinstance(c, bool) for c in columns):
            raise ModelError(f"field 'columns' must be a non-empty list of whole numbers, got {_short(columns)}")
        p = structure.n_parameters
        if any(c < 0 or c >= p for c in columns) or any(b <= a for a, b in zip(columns, columns[1:], strict=False)):
            raise ModelError(
                f"field 'columns' must be strictly increasing indices in 0..{p - 1} (robot '{structure.name}' has "
                f"{p} standard parameters), got {_short(columns)}"
            )
        values, covariance = cls._arrays_from(arrays, len(columns))
        model = cls(structure, columns, values, covariance)
        model._check_parameter_names(data)
        return model


class StandardParameterModel(LinearParameterModel):
    """Linear in the full standard parameters θ (p,): a physically consistent set, say.

    Its base values ``K θ`` are what metrics compare with the truth.
    """

    kind = "standard_linear"

    @classmethod
    def from_problem(cls, problem, values, covariance=None, **common) -> StandardParameterModel:
        return cls(problem.structure, values, covariance, **common)

    @property
    def parameter_names(self) -> list[str]:
        return self.structure.parameter_names

    def regressor(self, q, qd, qdd) -> np.ndarray:
        return self.structure.regressor(q, qd, qdd)

    def standard_equivalent(self) -> np.ndarray:
        return np.array(self.values)

    def base_values(self) -> np.ndarray:
        return self.structure.base_parameters().K @ self.values

    def _state(self):
        return self._linear_state({})

    @classmethod
    def _from_state(cls, data, arrays):
        structure = cls._structure_from(data)
        values, covariance = cls._arrays_from(arrays, structure.n_parameters)
        model = cls(structure, values, covariance)
        model._check_parameter_names(data)
        return model


# ============================================================================ feature library
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

    def evaluate(self, q, qd, qdd) -> np.ndarray:
        """Feature matrix Φ (N, F); each distinct factor is computed once, whatever the number of features."""
        q, qd, qdd = as_states(self.n_dof, q=q, qd=qd, qdd=qdd)
        signals = {"q": q, "qd": qd, "qdd": qdd}
        N = q.shape[0]
        cache: dict[Factor, np.ndarray] = {}
        out = np.empty((N, len(self.features)))
        for k, feature in enumerate(self.features):
            column = np.ones(N)
            for f in feature.factors:
                if f not in cache:
                    cache[f] = f.evaluate(signals)
                column *= cache[f]
            out[:, k] = column
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
                f"features={_short(features)}"
            )
        return cls.parse(features, n_dof)


class FeatureLibraryModel(IdentifiedModel):
    """tau_i = Σ_f C[i, f] φ_f(q, qd, qdd): a model in a feature library (SINDy, seed 000; seed 002).

    Needs no robot description. Printable as equations (:meth:`equations`).

    Attributes:
        library: the :class:`FeatureLibrary`.
        coefficients: (n, F) coefficient matrix; zeros are features a sparse method dropped.
    """

    kind = "feature_library"

    def __init__(self, library: FeatureLibrary, coefficients, joint_names=None, **common):
        self.library = library
        self.coefficients = _readonly(coefficients, "coefficients")
        if self.coefficients.shape != (library.n_dof, len(library)):
            raise ModelError(f"coefficients must be ({library.n_dof}, {len(library)}), got {self.coefficients.shape}")
        if not np.all(np.isfinite(self.coefficients)):
            raise ModelError("feature_library model: coefficients contain NaN or inf")
        names = joint_names if joint_names is not None else [f"joint{j + 1}" for j in range(library.n_dof)]
        self._init_common(names, **common)

    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        return self.library.evaluate(q, qd, qdd) @ self.coefficients.T

    @property
    def has_forward_dynamics(self) -> bool:
        return self.library.linear_in_qdd()

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        if not self.has_forward_dynamics:
            raise ModelError(
                "this feature-library model is not linear in qdd with q-only inertia terms, so it "
                "has no forward dynamics; restrict the library's qdd features"
            )
        return super().forward_dynamics(q, qd, tau)

    def equations(self, precision: int = 4) -> list[str]:
        """One readable equation per joint, e.g. ``tau1 = 0.5213*qdd1 + 9.81*cos(q1)``."""
        out = []
        for i, row in enumerate(self.coefficients):
            terms = [
                f"{c:.{precision}g}*{name}" if name != "1" else f"{c:.{precision}g}"
                for c, name in zip(row, self.library.names, strict=True)
                if c != 0
            ]
            out.append(f"tau{i + 1} = " + (" + ".join(terms).replace("+ -", "- ") if terms else "0"))
        return out

    def parameter_table(self):
        names, values = [], []
        for i, row in enumerate(self.coefficients):
            for c, name in zip(row, self.library.names, strict=True):
                if c != 0:
                    names.append(f"tau{i + 1}:{name}")
                    values.append(c)
        return names, np.array(values), None

    def _state(self):
        return {"library": self.library.to_dict(), "equations": self.equations()}, {
            "coefficients": np.array(self.coefficients)
        }

    @classmethod
    def _from_state(cls, data, arrays):
        library = FeatureLibrary.from_dict(state_field(data, "library", dict, "the feature library (a JSON object)"))
        coefficients = state_array(arrays, "coefficients", shape=(library.n_dof, len(library)))
        names = state_field(data, "joint_names", list, "a list of joint names")
        if len(names) != library.n_dof:
            raise ModelError(
                f"field 'joint_names' lists {len(names)} joints but the feature library has n_dof = {library.n_dof}"
            )
        return cls(library, coefficients, names)


# ================================================================================== residual
ACTIVATIONS = {"tanh": np.tanh, "relu": lambda x: np.maximum(x, 0.0)}


@dataclass(frozen=True, eq=False)
class MLPCorrection:
    """A small multilayer perceptron evaluated with numpy: the learned part of a residual model.

    ``x = concat(signals in inputs)``, normalised by ``x_mean``, ``x_std``; hidden layers
    ``h = act(W h + b)``; linear output, times ``y_scale``. Weights come from any trainer
    (the semiparametric estimator trains with torch and stores them here).

    Attributes:
        inputs: which signals feed it, in order, from ``("q", "qd", "qdd")``.
        weights: per layer (out, in) matrices; biases: per layer (out,).
        activation: ``"tanh"`` or ``"relu"`` for the hidden layers.
        x_mean, x_std: (len(inputs)·n,) input normalisation; y_scale: (n,) output scale.
    """

    inputs: tuple[str, ...]
    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    activation: str
    x_mean: np.ndarray
    x_std: np.ndarray
    y_scale: np.ndarray

    def __post_init__(self):
        if not self.inputs or any(s not in SIGNALS for s in self.inputs):
            raise ModelError(f"MLP inputs must be a non-empty subset of {SIGNALS}, got {self.inputs}")
        if self.activation not in ACTIVATIONS:
            raise ModelError(f"MLP activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        if len(self.weights) != len(self.biases) or not self.weights:
            raise ModelError("MLP needs as many bias vectors as weight matrices, at least one")
        width = len(self.x_mean)
        for W, b in zip(self.weights, self.biases, strict=True):
            if W.ndim != 2 or W.shape[1] != width or b.shape != (W.shape[0],):
                raise ModelError(f"MLP layer shapes do not chain: weight {W.shape}, bias {b.shape}, input {width}")
            width = W.shape[0]
        if width != len(self.y_scale) or len(self.x_std) != len(self.x_mean):
            raise ModelError("MLP output width must equal n (len(y_scale)) and x_std match x_mean")

    def __call__(self, q, qd, qdd) -> np.ndarray:
        signals = {"q": q, "qd": qd, "qdd": qdd}
        h = (np.concatenate([signals[s] for s in self.inputs], axis=1) - self.x_mean) / self.x_std
        act = ACTIVATIONS[self.activation]
        for k, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ W.T + b
            if k < len(self.weights) - 1:
                h = act(h)
        return h * self.y_scale

    def to_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        arrays = {"x_mean": self.x_mean, "x_std": self.x_std, "y_scale": self.y_scale}
        for k, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            arrays[f"W{k}"], arrays[f"b{k}"] = W, b
        return {
            "inputs": list(self.inputs),
            "activation": self.activation,
            "layers": len(self.weights),
            "shapes": [list(W.shape) for W in self.weights],
        }, arrays

    @classmethod
    def from_state(cls, data: dict, arrays: dict[str, np.ndarray]) -> MLPCorrection:
        layers = state_field(data, "layers", int, "a whole number of layers", where="correction")
        if not 1 <= layers <= 1000:
            raise ModelError(f"field 'correction.layers' must be between 1 and 1000, got {layers}")
        inputs = state_field(data, "inputs", list, "a list of signal names", where="correction")
        if not all(isinstance(i, str) for i in inputs):
            raise ModelError(f"field 'correction.inputs' must list signal names from {SIGNALS}, got {_short(inputs)}")
        activation = state_field(data, "activation", str, "'tanh' or 'relu'", where="correction")
        x_std = state_array(arrays, "x_std", ndim=1)
        if np.any(x_std <= 0):
            raise ModelError("array 'x_std' (input normalisation) must be > 0")
        return cls(
            tuple(inputs),
            tuple(state_array(arrays, f"W{k}", ndim=2) for k in range(layers)),
            tuple(state_array(arrays, f"b{k}", ndim=1) for k in range(layers)),
            activation,
            state_array(arrays, "x_mean", ndim=1),
            x_std,
            state_array(arrays, "y_scale", ndim=1),
        )


class ResidualModel(IdentifiedModel):
    """Any identified model plus a learned correction: tau = base(q, qd, qdd) + MLP (semiparametric).

    When the correction does not read qdd, the mass matrix is the base model's and the
    correction joins the bias, so forward dynamics stay as fast as the base model's.

    Attributes:
        base: the rigid-body (or any) :class:`IdentifiedModel`.
        correction: the :class:`MLPCorrection`.
    """

    kind = "residual"

    def __init__(self, base: IdentifiedModel, correction: MLPCorrection, **common):
        if not isinstance(base, IdentifiedModel):
            raise ModelError(f"base must be an IdentifiedModel, got {type(base).__name__}")
        if len(correction.y_scale) != base.n_dof:
            raise ModelError(f"the correction outputs {len(correction.y_scale)} torques, the base model {base.n_dof}")
        self.base = base
        self.correction = correction
        self._init_common(base.joint_names, **common)

    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        q, qd, qdd = as_states(self.n_dof, q=q, qd=qd, qdd=qdd)
        return self.base.predict_torque(q, qd, qdd) + self.correction(q, qd, qdd)

    def _qdd_free(self) -> bool:
        return "qdd" not in self.correction.inputs

    def mass_matrix(self, q) -> np.ndarray:
        return self.base.mass_matrix(q) if self._qdd_free() else super().mass_matrix(q)

    def bias_torque(self, q, qd) -> np.ndarray:
        q, qd = as_states(self.n_dof, q=q, qd=qd)
        return self.base.bias_torque(q, qd) + self.correction(q, qd, np.zeros_like(q))

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        if not self._qdd_free():
            return super().forward_dynamics(q, qd, tau)
        q, qd, tau = as_states(self.n_dof, q=q, qd=qd, tau=tau)
        return solve_forward(self.base.mass_matrix(q), self.bias_torque(q, qd), tau)

    def parameter_table(self):
        return self.base.parameter_table()

    def check_structure(self, structure) -> None:
        self.base.check_structure(structure)

    def _state(self):
        base_data, base_arrays = self.base.to_state()
        corr_data, corr_arrays = self.correction.to_state()
        arrays = {
            **{f"base/{k}": v for k, v in base_arrays.items()},
            **{f"correction/{k}": v for k, v in corr_arrays.items()},
        }
        return {"base": base_data, "correction": corr_data}, arrays

    @classmethod
    def _from_state(cls, data, arrays):
        base_data = state_field(data, "base", dict, "the base model (a JSON object)")
        correction = state_field(data, "correction", dict, "the learned correction (a JSON object)")
        base = model_from_state(base_data, prefixed(arrays, "base/"), where="residual model's base")
        try:
            mlp = MLPCorrection.from_state(correction, prefixed(arrays, "correction/"))
        except ModelError as exc:
            raise ModelError(f"residual model's correction: {exc}") from None
        return cls(base, mlp)


#: the built-in model kinds, registered by the built-in plugin ``robotid_sim_plugins.core``
BUILTIN_MODEL_KINDS: tuple[type[IdentifiedModel], ...] = (
    BaseParameterModel,
    StandardParameterModel,
    FeatureLibraryModel,
    ResidualModel,
)


# ================================================================================ lagrangian
class LagrangianFeatureModel(IdentifiedModel):
    """τ = A(q) qdd + B(q)[qd qd] + C(q)[qd²] + G(q) + friction, from trigonometric features (seed 002).

    A(q) is parameterised once per upper-triangle entry (symmetric by construction), B and C are its
    Christoffel symbols and G the gradient of a potential (:mod:`robotid_sim.identification.auto_features`).
    Needs no robot description; forward dynamics solve A(q) qdd = τ − h(q, qd).

    ``A``, ``B``, ``C``, ``G`` are seed 002's names of :meth:`mass_matrix`, :meth:`coriolis_matrix`,
    :meth:`centrifugal_matrix` and :meth:`gravity_torque`.

    Attributes:
        basis: the :class:`~robotid_sim.identification.auto_features.LagrangianBasis`.
        coefficients: (P,) θ in the basis' layout (mass, potential, friction).
    """

    kind = "lagrangian_features"

    def __init__(self, basis, coefficients, joint_names=None, **common):
        from robotid_sim.identification.auto_features import LagrangianBasis

        if not isinstance(basis, LagrangianBasis):
            raise ModelError(f"basis must be a LagrangianBasis, got {type(basis).__name__}")
        self.basis = basis
        self.coefficients = _readonly(coefficients, "coefficients")
        if self.coefficients.shape != (len(basis),):
            raise ModelError(f"coefficients must be ({len(basis)},), got {self.coefficients.shape}")
        if not np.all(np.isfinite(self.coefficients)):
            raise ModelError("lagrangian_features model: coefficients contain NaN or inf")
        names = joint_names if joint_names is not None else [f"joint{j + 1}" for j in range(basis.n_dof)]
        if len(names) != basis.n_dof:
            raise ModelError(f"{len(names)} joint names for a {basis.n_dof}-joint basis")
        self._init_common(names, **common)

    def _parts(self):
        return self.basis.split(np.asarray(self.coefficients))

    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        q, qd, qdd = as_states(self.n_dof, q=q, qd=qd, qdd=qdd)
        return self.basis.regressor(q, qd, qdd) @ self.coefficients

    def mass_matrix(self, q) -> np.ndarray:
        """A(q) (N, n, n), symmetric by construction."""
        (q,) = as_states(self.n_dof, q=q)
        return self.basis.mass_matrix(self._parts()[0], q)

    def christoffel(self, q) -> np.ndarray:
        """b_ijk (N, n, n, n) of A(q) (seed 002, p. 2)."""
        (q,) = as_states(self.n_dof, q=q)
        return self.basis.christoffel(self._parts()[0], q)

    def coriolis_matrix(self, q) -> np.ndarray:
        """B(q) (N, n, n(n−1)/2): column (j, k), j < k in row-major order, is 2 b_ijk (seed 002)."""
        b = self.christoffel(q)
        pairs = [(j, k) for j in range(self.n_dof) for k in range(j + 1, self.n_dof)]
        return np.stack([2.0 * b[:, :, j, k] for j, k in pairs], axis=2) if pairs else b[:, :, 0, :0]

    def centrifugal_matrix(self, q) -> np.ndarray:
        """C(q) (N, n, n): C[i, j] = b_ijj (seed 002)."""
        return np.einsum("nijj->nij", self.christoffel(q))

    def gravity_torque(self, q) -> np.ndarray:
        """G(q) = ∂U/∂q (N, n)."""
        (q,) = as_states(self.n_dof, q=q)
        return self.basis.gravity(self._parts()[1], q)

    def friction_torque(self, qd) -> np.ndarray:
        """The identified friction torque (N, n) at velocities qd."""
        (qd,) = as_states(self.n_dof, qd=qd)
        return self.basis.friction_columns(qd) @ self._parts()[2]

    A = mass_matrix
    B = coriolis_matrix
    C = centrifugal_matrix
    G = gravity_torque

    def bias_torque(self, q, qd) -> np.ndarray:
        """B(q)[qd qd] + C(q)[qd²] + G(q) + friction (N, n)."""
        q, qd = as_states(self.n_dof, q=q, qd=qd)
        theta_mass, theta_potential, _ = self._parts()
        return (
            self.basis.coriolis_torque(theta_mass, q, qd)
            + self.basis.gravity(theta_potential, q)
            + self.friction_torque(qd)
        )

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """qdd = A(q)⁻¹ (τ − h(q, qd)) (N, n)."""
        q, qd, tau = as_states(self.n_dof, q=q, qd=qd, tau=tau)
        return solve_forward(self.mass_matrix(q), self.bias_torque(q, qd), tau)

    def min_mass_eigenvalue(self, q) -> np.ndarray:
        """The smallest eigenvalue of A(q) at each sample (N,): positive where A is positive definite."""
        return np.linalg.eigvalsh(self.mass_matrix(q))[:, 0]

    def parameter_table(self):
        return list(self.basis.names), np.array(self.coefficients), None

    def _state(self):
        return {
            "basis": self.basis.to_dict(),
            "parameters": [
                {"name": n, "value": float(v)} for n, v in zip(self.basis.names, self.coefficients, strict=True)
            ],
        }, {"coefficients": np.array(self.coefficients)}

    @classmethod
    def _from_state(cls, data, arrays):
        from robotid_sim.identification.auto_features import LagrangianBasis

        basis = LagrangianBasis.from_dict(state_field(data, "basis", dict, "the feature basis (a JSON object)"))
        coefficients = state_array(arrays, "coefficients", shape=(len(basis),))
        names = state_field(data, "joint_names", list, "a list of joint names")
        if len(names) != basis.n_dof:
            raise ModelError(f"field 'joint_names' lists {len(names)} joints but the basis has n_dof = {basis.n_dof}")
        return cls(basis, coefficients, names)


BUILTIN_MODEL_KINDS = (*BUILTIN_MODEL_KINDS, LagrangianFeatureModel)
