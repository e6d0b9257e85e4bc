"""Identified models: what an estimator returns (SPEC §8), as in statsmodels' model/results split.

:class:`IdentifiedModel` is the abstract base every model kind derives from. A model predicts
motor torque, gives its mass matrix and forward dynamics, says which estimator made it with
which options, carries its ``diagnostics`` (everything the runner and the report show: fit
time, iterations, outliers, condition number, ...) and, for online and iterative methods, its
parameter ``history``. The concrete kinds are in :mod:`robotid_sim.identification.kinds`.

Saved models are self-contained and safe to load:

- ``NAME.json``, human-readable: kind, estimator, options, diagnostics, parameters with names
  and values, the embedded robot structure (kinematics and friction law, see
  :class:`~robotid_sim.robot.structure.RobotStructure`) or the feature library's definition,
  and the name and SHA-256 of the array file;
- ``NAME.npz`` beside it: every array (values, covariance, history, network weights), read
  with ``allow_pickle=False``.

A model loads after its folder is moved, needs no robot file, and refuses a robot given at
load time whose structure differs, naming the difference. Nothing in a model file is
unpickled or executed.

Model kinds are looked up through the plugin manager (hook ``register_model_kinds``), so a
plugin's model kind loads in a fresh process like a built-in one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from robotid_sim._json import jsonable
from robotid_sim.dynamics.forward import forward_dynamics_from_inverse, mass_matrix_from_inverse
from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import ConfigError, DataError, ModelError

FORMAT = "robotid_sim.identified_model"
FORMAT_VERSION = 2


@dataclass(frozen=True, eq=False)
class History:
    """How the parameters evolved during the fit (online filters, iterative methods).

    Attributes:
        t: (K,) time in seconds (online methods) or iteration number (iterative ones).
        values: (K, m) the parameter vector at each step.
        names: the m parameter names.
        unit: ``"s"`` or ``"iteration"``, what ``t`` counts.
    """

    t: np.ndarray
    values: np.ndarray
    names: list[str]
    unit: str = "iteration"

    def __post_init__(self):
        t = np.asarray(self.t, float)
        values = np.asarray(self.values, float)
        if t.ndim != 1 or values.ndim != 2 or values.shape != (t.shape[0], len(self.names)):
            raise ModelError(
                f"history: t must be (K,) and values (K, {len(self.names)}), got {t.shape} and {values.shape}"
            )
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "values", values)


class IdentifiedModel(ABC):
    """Abstract identified model. Subclasses set ``kind`` and implement the abstract methods.

    Common attributes (set by :meth:`_init_common`):
        joint_names: (n,) joint names.
        estimator: name of the estimator that made it.
        options: the estimator's options (``estimator.get_params()``).
        diagnostics: JSON-able facts shown by the runner and the report.
        history: a :class:`History`, or None.

    Equality is by value: same kind, same plain data and identical arrays.
    """

    kind: ClassVar[str] = ""

    joint_names: list[str]
    estimator: str
    options: dict
    diagnostics: dict
    history: History | None

    def _init_common(
        self,
        joint_names,
        estimator: str = "",
        options: dict | None = None,
        diagnostics: dict | None = None,
        history: History | None = None,
    ) -> None:
        self.joint_names = [str(j) for j in joint_names]
        self.estimator = str(estimator)
        self.options = dict(options or {})
        self.diagnostics = dict(diagnostics or {})
        if history is not None and not isinstance(history, History):
            raise ModelError(f"history must be a History or None, got {type(history).__name__}")
        self.history = history

    @property
    def n_dof(self) -> int:
        return len(self.joint_names)

    # ----------------------------------------------------------------- dynamics
    @abstractmethod
    def predict_torque(self, q, qd, qdd) -> np.ndarray:
        """Predicted motor torque (N, n) at the states ``q, qd, qdd`` (each (N, n))."""

    def mass_matrix(self, q) -> np.ndarray:
        """M(q) (N, n, n). Generic fallback: n + 1 torque predictions (a model linear in qdd)."""
        (q,) = as_states(self.n_dof, q=q)
        return mass_matrix_from_inverse(self.predict_torque, q)

    def bias_torque(self, q, qd) -> np.ndarray:
        """h(q, qd) (N, n): the torque at zero acceleration (Coriolis, gravity, friction)."""
        q, qd = as_states(self.n_dof, q=q, qd=qd)
        return self.predict_torque(q, qd, np.zeros_like(q))

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """qdd (N, n) of the model under motor torque ``tau`` (SPEC §4, seed 003 §3.3)."""
        q, qd, tau = as_states(self.n_dof, q=q, qd=qd, tau=tau)
        return forward_dynamics_from_inverse(self.predict_torque, q, qd, tau)

    # ----------------------------------------------------------------- parameters for reports
    def parameter_table(self) -> tuple[list[str], np.ndarray, np.ndarray | None]:
        """(names, values, std or None) of the identified quantities, for tables and plots."""
        return [], np.zeros(0), None

    def check_structure(self, structure) -> None:
        """Refuse a robot whose structure differs from the model's (no-op for models without one).

        Raises:
            ModelError: naming each difference.
        """
        return None

    # ----------------------------------------------------------------- persistence
    @abstractmethod
    def _state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """(JSON-able fields, arrays) of this kind; see :meth:`_from_state`."""

    @classmethod
    @abstractmethod
    def _from_state(cls, data: dict, arrays: dict[str, np.ndarray]) -> IdentifiedModel:
        """Rebuild a model from what :meth:`_state` gave (``data`` also holds the common fields)."""

    def to_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """Everything saved: (JSON-able dict, arrays by name). Nested models use key prefixes."""
        data, arrays = self._state()
        arrays = dict(arrays)
        head = {
            "kind": self.kind,
            "estimator": self.estimator,
            "options": jsonable(self.options),
            "joint_names": list(self.joint_names),
            "diagnostics": jsonable(self.diagnostics),
        }
        if self.history is not None:
            head["history"] = {"names": list(self.history.names), "unit": self.history.unit}
            arrays["history_t"] = self.history.t
            arrays["history_values"] = self.history.values
        return {**head, **jsonable(data)}, arrays

    @classmethod
    def from_state(cls, data: dict, arrays: dict[str, np.ndarray]) -> IdentifiedModel:
        """Inverse of :meth:`to_state` for this kind."""
        model = cls._from_state(data, arrays)
        hist = data.get("history")
        history = None
        if hist is not None:
            history = History(
                arrays["history_t"], arrays["history_values"], list(hist["names"]), hist.get("unit", "iteration")
            )
        model._init_common(
            data["joint_names"], data.get("estimator", ""), data.get("options"), data.get("diagnostics"), history
        )
        return model

    def __eq__(self, other) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        a, arrays_a = self.to_state()
        b, arrays_b = other.to_state()
        return (
            a == b
            and arrays_a.keys() == arrays_b.keys()
            and all(np.array_equal(arrays_a[k], arrays_b[k], equal_nan=True) for k in arrays_a)
        )

    __hash__ = None  # type: ignore[assignment]

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write ``path`` (JSON, ``.json`` added if missing) and the arrays beside it (``.npz``).

        Both files are written to temporary names first and renamed, so a crash never leaves a
        JSON that points at a missing or older array file. Refuses to overwrite either file
        unless ``overwrite``. Returns the JSON path.
        """
        path = Path(path)
        if path.suffix != ".json":
            path = path.with_name(path.name + ".json")
        npz = path.with_suffix(".npz")
        for target in (path, npz):
            if target.exists() and not overwrite:
                raise DataError(f"{target} exists; refusing to overwrite it (pass overwrite=True or pick a new name)")
        data, arrays = self.to_state()
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        blob = buffer.getvalue()
        document = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            **data,
            "arrays": {"file": npz.name, "sha256": hashlib.sha256(blob).hexdigest(), "names": sorted(arrays)},
        }
        text = json.dumps(document, indent=2, allow_nan=True) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(npz, blob)
        _atomic_write(path, text.encode())
        return path


def _atomic_write(path: Path, blob: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def prefixed(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The arrays whose names start with ``prefix``, with the prefix removed (nested models)."""
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


def model_from_state(data: dict, arrays: dict[str, np.ndarray], where: str = "model") -> IdentifiedModel:
    """Rebuild any model kind from its state, looking the kind up in the plugin registry."""
    from robotid_sim.plugins import get_model_kind

    kind = data.get("kind")
    try:
        cls = get_model_kind(str(kind))
    except LookupError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    try:
        return cls.from_state(data, arrays)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError | ModelError | DataError):
            raise
        raise ModelError(f"{where}: malformed '{kind}' model ({type(exc).__name__}: {exc})") from None


def load_model(path: str | Path, robot=None) -> IdentifiedModel:
    """Load a model saved with :meth:`IdentifiedModel.save`.

    Args:
        path: the model's JSON file; its ``.npz`` must lie beside it.
        robot: optional robot (a :class:`~robotid_sim.robot.Robot`, a bundled name or a URDF
            path) the model will be used with; a robot whose structure differs from the one the
            model embeds is refused.

    Raises:
        DataError: the file or its array file is missing, or the array file does not match
            the hash the JSON records.
        ConfigError: not a robotid_sim model, or an unknown model kind.
        ModelError: the given robot differs from the model's (each difference named).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"model file not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not a robotid_sim model (not valid JSON: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"{path} is not a robotid_sim identified model (no 'format: {FORMAT}')")
    if data.get("version") != FORMAT_VERSION:
        raise ConfigError(
            f"{path} is a version {data.get('version')} model file; this robotid_sim reads version "
            f"{FORMAT_VERSION}: identify again with this version"
        )
    arrays = _load_arrays(path, data.get("arrays"))
    model = model_from_state(data, arrays, where=str(path))
    if robot is not None:
        from robotid_sim.robot import Robot, load_robot

        robot = robot if isinstance(robot, Robot) else load_robot(robot)
        model.check_structure(robot.structure())
    return model


def _load_arrays(path: Path, spec) -> dict[str, np.ndarray]:
    if not isinstance(spec, dict) or not isinstance(spec.get("file"), str):
        raise ConfigError(f"{path}: no 'arrays' entry naming the model's .npz file")
    name = spec["file"]
    if Path(name).name != name or not name.endswith(".npz"):
        raise ConfigError(f"{path}: the array file must be a plain .npz file name beside the model, got {name!r}")
    npz = path.parent / name
    try:
        blob = npz.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: its array file {npz} is missing (copy the .npz together with the .json)") from None
    if hashlib.sha256(blob).hexdigest() != spec.get("sha256"):
        raise DataError(
            f"{npz} does not match the SHA-256 recorded in {path}: the two files belong to different models"
        )
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError) as exc:
        raise DataError(f"{npz} is not a valid array file: {exc}") from None


__all__ = ["FORMAT", "FORMAT_VERSION", "History", "IdentifiedModel", "load_model", "model_from_state", "prefixed"]
