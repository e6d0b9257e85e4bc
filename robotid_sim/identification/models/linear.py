"""Models linear in inertial parameters: the shared base and its two kinds, ``base_linear`` and ``standard_linear``.

:class:`LinearParameterModel` is the base of every model linear in a parameter vector over a robot
structure's regressor; :class:`BaseParameterModel` (``base_linear``: OLS, WLS, IRLS, Adaline, Hopfield,
EKF, sequential) holds base parameters, :class:`StandardParameterModel` (``standard_linear``: LMI-WLS,
two-loop) the full standard set. The two kinds live with their base in one module because each is a
few lines over it and both build their saved state with the base's persistence helpers
(``_linear_state``, ``_structure_from``, ``_arrays_from``, ``_check_parameter_names``).

They get their mass matrix and bias from the recursive algorithms of :class:`~robotid_sim.robot.Robot`
applied to an *equivalent standard parameter vector* (for base parameters: the base values on their own
columns, zeros elsewhere, which has the same base values since ``K`` is the identity on those columns).
"""

from __future__ import annotations

import copy
from abc import abstractmethod
from functools import cached_property

import numpy as np

from robotid_sim.errors import ConfigError, ModelError
from robotid_sim.identification.model import (
    History,
    IdentifiedModel,
    readonly_array,
    short_repr,
    state_array,
    state_field,
)
from robotid_sim.robot.model import Robot
from robotid_sim.robot.structure import RobotStructure


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
        self.values = readonly_array(values)
        m = len(self.parameter_names)
        if self.values.shape != (m,):
            raise ModelError(
                f"{self.kind} model of '{structure.name}': expected {m} parameter values, got shape {self.values.shape}"
            )
        if not np.all(np.isfinite(self.values)):
            raise ModelError(f"{self.kind} model: parameter values contain NaN or inf")
        self.covariance = None if covariance is None else readonly_array(covariance, "covariance")
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
        return Robot.from_structure(self.structure, self.standard_equivalent())

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
        values = readonly_array(values)
        if values.shape != self.values.shape:
            raise ModelError(f"expected {self.values.shape[0]} parameter values, got shape {values.shape}")
        clone = copy.copy(self)
        clone.__dict__.pop("equivalent_robot", None)
        clone.values, clone.covariance = values, None
        return clone

    def parameter_table(self):
        return list(self.parameter_names), np.array(self.values), self.std

    def to_urdf(self, path, *, robot=None, sidecar=None, overwrite: bool = False) -> list:
        """Write the model as URDF ``path`` (``.urdf``) and its sidecar ``<stem>.yaml`` beside it.

        A physically consistent standard set (a base-parameter model: the one closest to the CAD values of
        ``robot``, default the registered robot of the model's robot name), see
        :mod:`robotid_sim.identification.export`. ``load_robot(path)`` gives the same torque back. Returns
        the paths written; an existing file is refused unless ``overwrite``.
        """
        from robotid_sim.identification.export import export_model

        return export_model(self, urdf=path, robot=robot, sidecar=sidecar, overwrite=overwrite).paths

    def to_mjcf(self, path, *, robot=None, sidecar=None, overwrite: bool = False):
        """Write the model as MuJoCo MJCF ``path`` (``.xml``); as :meth:`to_urdf` otherwise. Returns the path."""
        from robotid_sim.identification.export import export_model

        return export_model(self, mjcf=path, robot=robot, sidecar=sidecar, overwrite=overwrite).paths[0]

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
                f"columns must be a non-empty list of whole-number indices below {p}, got {short_repr(columns)}"
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
            raise ModelError(f"field 'columns' must be a non-empty list of whole numbers, got {short_repr(columns)}")
        p = structure.n_parameters
        if any(c < 0 or c >= p for c in columns) or any(b <= a for a, b in zip(columns, columns[1:], strict=False)):
            raise ModelError(
                f"field 'columns' must be strictly increasing indices in 0..{p - 1} (robot '{structure.name}' has "
                f"{p} standard parameters), got {short_repr(columns)}"
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
