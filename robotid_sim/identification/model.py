"""The identified model: a value that predicts torque, runs forward dynamics, and saves as JSON."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from robotid_sim.dynamics.forward import forward_dynamics_from_inverse, mass_matrix_from_inverse
from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import ConfigError, DataError, ModelError, RobotIdError

FORMAT = "robotid_sim.identified_model"
FORMAT_VERSION = 1

#: model kinds by name, for :func:`load_model`; estimators with their own model classes add to it
MODEL_KINDS: dict[str, type[IdentifiedModel]] = {}


def register_model_kind(cls: type[IdentifiedModel]) -> type[IdentifiedModel]:
    """Class decorator: make a model class loadable by :func:`load_model` under ``cls.kind``."""
    MODEL_KINDS[cls.kind] = cls
    return cls


def _robot_source(robot) -> str:
    """How to find the robot again: its bundled name if it is one, else its URDF path."""
    from robotid_sim.robot import bundled_robots

    bundled = bundled_robots().get(robot.name)
    if bundled is not None and robot.urdf_path is not None and Path(robot.urdf_path).resolve() == (
        bundled / "robot.urdf"
    ).resolve():
        return robot.name
    return str(Path(robot.urdf_path).resolve()) if robot.urdf_path is not None else robot.name


@dataclass
class IdentifiedModel:
    """An identified model linear in its parameters over the robot's base regressor.

    Attributes:
        robot_source: bundled robot name or URDF path (used to rebuild the regressor on load).
        joint_names: (n,) joint names.
        parameter_names: (b,) names of the identified parameters.
        values: (b,) identified values.
        covariance: (b, b) covariance where the method gives one, else None.
        estimator: name of the estimator that made it.
        options: the estimator's options.
        history: parameter evolution (K, b) for online methods, else None.
        history_t: (K,) time or iteration of each history row.
        info: JSON-able extra facts (iterations, outliers rejected, fit time, ...).
        columns: (b,) indices of the base columns in the robot's full regressor.
    """

    kind: ClassVar[str] = "base_linear"

    robot_source: str
    joint_names: list[str]
    parameter_names: list[str]
    values: np.ndarray
    covariance: np.ndarray | None = None
    estimator: str = ""
    options: dict = field(default_factory=dict)
    history: np.ndarray | None = None
    history_t: np.ndarray | None = None
    info: dict = field(default_factory=dict)
    columns: np.ndarray | None = None
    _robot: Any = field(default=None, repr=False)

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_base_parameters(cls, problem, values, estimator: str = "", covariance=None, options=None,
                             history=None, history_t=None, info=None) -> IdentifiedModel:
        """A base-parameter model for ``problem``'s robot with identified ``values`` (b,)."""
        values = np.asarray(values, float)
        if values.shape != (problem.base.count,):
            raise ModelError(f"expected {problem.base.count} base parameter values, got {values.shape}")
        return cls(
            robot_source=_robot_source(problem.robot), joint_names=list(problem.robot.joint_names),
            parameter_names=list(problem.base.names), values=values,
            covariance=None if covariance is None else np.asarray(covariance, float),
            estimator=estimator, options=dict(options or {}), history=history, history_t=history_t,
            info=dict(info or {}), columns=np.asarray(problem.base.independent), _robot=problem.robot,
        )

    @property
    def robot(self):
        """The robot model this was identified on (loaded lazily after :func:`load_model`)."""
        if self._robot is None:
            from robotid_sim.robot import load_robot

            self._robot = load_robot(self.robot_source)
            if list(self._robot.joint_names) != list(self.joint_names):
                raise ModelError(
                    f"robot '{self.robot_source}' now has joints {self._robot.joint_names}, the model was "
                    f"identified on {self.joint_names}"
                )
        return self._robot

    @property
    def n_dof(self) -> int:
        return len(self.joint_names)

    @property
    def std(self) -> np.ndarray | None:
        """Standard deviations (b,) of the parameters, where a covariance is known."""
        return None if self.covariance is None else np.sqrt(np.clip(np.diag(self.covariance), 0, None))

    # ----------------------------------------------------------------- dynamics
    def regressor(self, q, qd, qdd) -> np.ndarray:
        """The model's regressor (N, n, b)."""
        return self.robot.regressor(q, qd, qdd, columns=self.columns)

    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        """Predicted motor torque (N, n)."""
        q, qd, qdd = as_states(self.n_dof, q=q, qd=qd, qdd=qdd)
        return self.regressor(q, qd, qdd) @ self.values

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """qdd (N, n) of the identified model under torque ``tau`` (SPEC §4, seed 003 §3.3)."""
        q, qd, tau = as_states(self.n_dof, q=q, qd=qd, tau=tau)
        return forward_dynamics_from_inverse(self.predict_torque, q, qd, tau)

    def mass_matrix(self, q) -> np.ndarray:
        """M(q) (N, n, n) of the identified model."""
        (q,) = as_states(self.n_dof, q=q)
        return mass_matrix_from_inverse(self.predict_torque, q)

    def with_values(self, values: np.ndarray) -> IdentifiedModel:
        """A copy with other parameter values (for sensitivity studies)."""
        return replace(self, values=np.asarray(values, float), covariance=None)

    # ----------------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        """Human-readable plain data (what :meth:`save` writes)."""
        std = self.std
        try:
            expressions = {n: e for n, e, _ in self.robot.base_parameters().table()}
        except RobotIdError:  # the robot cannot be loaded here: the model is still worth saving
            expressions = {}
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "estimator": self.estimator,
            "options": self.options,
            "robot": self.robot_source,
            "joint_names": self.joint_names,
            "parameters": [
                {"name": n, "value": float(v), "std": None if std is None else float(s),
                 **({"expression": expressions[n]} if n in expressions else {})}
                for n, v, s in zip(self.parameter_names, self.values,
                                   std if std is not None else [None] * len(self.values), strict=True)
            ],
            "columns": None if self.columns is None else [int(c) for c in self.columns],
            "covariance": None if self.covariance is None else self.covariance.tolist(),
            "history": None if self.history is None else {
                "t": np.asarray(self.history_t).tolist(), "values": np.asarray(self.history).tolist()},
            "info": _jsonable(self.info),
        }

    @classmethod
    def from_dict(cls, data: dict) -> IdentifiedModel:
        params = data["parameters"]
        hist = data.get("history")
        return cls(
            robot_source=data["robot"], joint_names=list(data["joint_names"]),
            parameter_names=[p["name"] for p in params], values=np.array([p["value"] for p in params], float),
            covariance=None if data.get("covariance") is None else np.array(data["covariance"], float),
            estimator=data.get("estimator", ""), options=data.get("options", {}),
            history=None if hist is None else np.array(hist["values"], float),
            history_t=None if hist is None else np.array(hist["t"], float),
            info=data.get("info", {}),
            columns=None if data.get("columns") is None else np.array(data["columns"], int),
        )

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the model as indented JSON (atomically; refuses to overwrite unless asked)."""
        path = Path(path)
        if path.exists() and not overwrite:
            raise DataError(f"{path} exists; refusing to overwrite it (pass overwrite=True or pick a new name)")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2)
            fh.write("\n")
        os.replace(tmp, path)
        return path


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


register_model_kind(IdentifiedModel)


def load_model(path: str | Path) -> IdentifiedModel:
    """Load a model saved with :meth:`IdentifiedModel.save`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"model file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a robotid_sim identified model (no 'format: {FORMAT}')")
    kind = data.get("kind")
    if kind not in MODEL_KINDS:
        raise ConfigError(f"{path}: unknown model kind {kind!r}; known: {sorted(MODEL_KINDS)}")
    return MODEL_KINDS[kind].from_dict(data)
