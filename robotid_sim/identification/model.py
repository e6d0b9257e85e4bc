"""Identified models: what an estimator returns (SPEC §8), as in statsmodels' model/results split.

:class:`IdentifiedModel` is the abstract base every model kind derives from. A model predicts
motor torque, gives its mass matrix and forward dynamics, says which estimator made it with
which options, carries its ``diagnostics`` (everything the runner and the report show: fit
time, iterations, outliers, condition number, ...) and, for online and iterative methods, its
parameter ``history``. The concrete kinds are in :mod:`robotid_sim.identification.models`, one per module.

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
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from robotid_sim._json import jsonable
from robotid_sim.dynamics.forward import forward_dynamics_from_inverse, mass_matrix_from_inverse
from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import ConfigError, DataError, ModelError
from robotid_sim.hookspecs import Registrable
from robotid_sim.safety import atomic_write, inside, read_npz

FORMAT = "robotid_sim.identified_model"
FORMAT_VERSION = 2
#: largest ``NAME.npz`` :func:`load_model` reads (it is hashed whole before its arrays are read)
MAX_MODEL_ARRAY_BYTES = 1024**3


@dataclass(frozen=True, eq=False)
class History:
    """How the parameters evolved during the fit (online filters, iterative methods).

    Attributes:
        t: (K,) time in seconds (online methods) or iteration number (iterative ones).
        values: (K, m) the parameter vector at each step.
        names: the m parameter names.
        unit: ``"s"`` or ``"iteration"``, what ``t`` counts.
        std: (K, m) standard deviation of each parameter at each step where the method tracks one (the
            EKF's parameter covariance), else None.
    """

    t: np.ndarray
    values: np.ndarray
    names: list[str]
    unit: str = "iteration"
    std: np.ndarray | None = None

    def __post_init__(self):
        t = np.asarray(self.t, float)
        values = np.asarray(self.values, float)
        if t.ndim != 1 or values.ndim != 2 or values.shape != (t.shape[0], len(self.names)):
            raise ModelError(
                f"history: t must be (K,) and values (K, {len(self.names)}), got {t.shape} and {values.shape}"
            )
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "values", values)
        if self.std is not None:
            std = np.asarray(self.std, float)
            if std.shape != values.shape:
                raise ModelError(f"history: std must have the shape of values {values.shape}, got {std.shape}")
            object.__setattr__(self, "std", std)


class IdentifiedModel(Registrable, ABC):
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
    # registered through register_model_kinds under ``kind`` (robotid_sim.hookspecs.Registrable)
    registry_hook = "register_model_kinds"
    registry_base = "robotid_sim.identification.IdentifiedModel"
    registry_name_attribute = "kind"

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

    @property
    def has_forward_dynamics(self) -> bool:
        """Whether :meth:`forward_dynamics` exists (a model whose torque is not linear in qdd has none)."""
        return True

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
            if self.history.std is not None:
                arrays["history_std"] = self.history.std
        return {**head, **jsonable(data)}, arrays

    @classmethod
    def from_state(cls, data: dict, arrays: dict[str, np.ndarray]) -> IdentifiedModel:
        """Inverse of :meth:`to_state` for this kind.

        Raises:
            ModelError: a missing or malformed field or array, naming it.
        """
        if not isinstance(data, dict):
            raise ModelError(f"a model state must be a JSON object, got {type(data).__name__}")
        joint_names = state_field(data, "joint_names", list, "a list of joint names")
        if not joint_names or not all(isinstance(j, str) and j for j in joint_names):
            raise ModelError(f"field 'joint_names' must be a list of non-empty strings, got {joint_names!r}")
        estimator = state_field(data, "estimator", str, "a string", default="")
        options = state_field(data, "options", dict, "a JSON object", default={})
        diagnostics = state_field(data, "diagnostics", dict, "a JSON object", default={})
        hist = state_field(data, "history", dict, "a JSON object or null", default=None)
        model = cls._from_state(data, arrays)
        if len(joint_names) != model.n_dof:
            raise ModelError(
                f"field 'joint_names' lists {len(joint_names)} joints ({', '.join(joint_names)}) but the model has "
                f"{model.n_dof} ({', '.join(model.joint_names)})"
            )
        structure = getattr(model, "structure", None)
        if structure is not None and list(structure.joint_names) != joint_names:
            raise ModelError(
                f"field 'joint_names' ({', '.join(joint_names)}) differs from the joints of the embedded robot "
                f"({', '.join(structure.joint_names)})"
            )
        history = None
        if hist is not None:
            names = state_field(hist, "names", list, "a list of parameter names", where="history")
            if not all(isinstance(n, str) for n in names):
                raise ModelError(f"field 'history.names' must be a list of strings, got {names!r}")
            unit = state_field(hist, "unit", str, "a string", default="iteration", where="history")
            t = state_array(arrays, "history_t", ndim=1)
            values = state_array(arrays, "history_values", shape=(t.shape[0], len(names)))
            std = state_array(arrays, "history_std", shape=values.shape) if "history_std" in arrays else None
            history = History(t, values, list(names), unit, std)
        model._init_common(joint_names, estimator, options, diagnostics, history)
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
        """Write the model's JSON and its arrays beside it (``.npz``), both named by :func:`model_files`
        (``m``, ``m.json`` and ``m.npz`` all write ``m.json`` and ``m.npz``).

        Both files are written to temporary names first and renamed, so a crash never leaves a
        JSON that points at a missing or older array file. Refuses to overwrite either file
        unless ``overwrite``. Returns the JSON path.
        """
        path, npz = model_files(path)
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
        atomic_write(npz, lambda fh: fh.write(blob))
        atomic_write(path, lambda fh: fh.write(text.encode()))
        return path


def readonly_array(x, what: str = "values") -> np.ndarray:
    """``x`` as a read-only float array, for a model's values and coefficients.

    Raises:
        ModelError: ``x`` is not real numbers (boolean, complex, text), naming ``what``.
    """
    raw = np.asarray(x)
    if raw.dtype.kind not in "iuf" and not (raw.dtype == object and raw.size == 0):
        raise ModelError(f"{what} must be real numbers, got dtype {raw.dtype}")
    arr = np.array(raw, dtype=float)
    arr.flags.writeable = False
    return arr


def short_repr(value, limit: int = 120) -> str:
    """``repr(value)``, cut to ``limit`` characters (ending in ``...``) for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_MISSING = object()


def state_field(data: dict, key: str, types, what: str, *, default=_MISSING, where: str = ""):
    """``data[key]`` checked against ``types`` (bool is never a number), or ModelError naming the field.

    A ``default`` makes the field optional (a missing or null value gives the default).
    """
    name = f"{where}.{key}" if where else key
    if not isinstance(data, dict):
        raise ModelError(f"field '{where or key}' must be a JSON object, got {type(data).__name__}")
    value = data.get(key, _MISSING)
    if value is _MISSING or (value is None and default is not _MISSING):
        if default is _MISSING:
            raise ModelError(f"missing field '{name}' ({what})")
        return default
    number = types in (int, float) or (isinstance(types, tuple) and set(types) <= {int, float})
    if not isinstance(value, types) or (number and isinstance(value, bool)):
        raise ModelError(f"field '{name}' must be {what}, got {type(value).__name__} {value!r:.80}")
    return value


def state_array(
    arrays: dict[str, np.ndarray],
    key: str,
    *,
    ndim: int | None = None,
    shape: tuple[int, ...] | None = None,
    finite: bool = True,
    integer: bool = False,
) -> np.ndarray:
    """Array ``key`` of a model's .npz as float (or int) after checking dtype, shape and finiteness.

    Raises:
        ModelError: the array is missing, not real numbers (boolean, complex, text), of the
            wrong shape, or holds NaN/inf, naming it.
    """
    if key not in arrays:
        raise ModelError(f"array '{key}' is missing from the model's .npz file")
    arr = np.asarray(arrays[key])
    kinds = "iu" if integer else "iuf"
    if arr.dtype.kind not in kinds:
        what = "whole numbers" if integer else "real numbers"
        raise ModelError(f"array '{key}' must hold {what}, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ModelError(f"array '{key}' must have {ndim} dimension(s), got shape {arr.shape}")
    if shape is not None and arr.shape != tuple(shape):
        raise ModelError(f"array '{key}' must have shape {tuple(shape)}, got {arr.shape}")
    if finite and arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ModelError(f"array '{key}' contains NaN or inf")
    return arr.astype(int if integer else float)


def prefixed(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The arrays whose names start with ``prefix``, with the prefix removed (nested models)."""
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


def model_from_state(data: dict, arrays: dict[str, np.ndarray], where: str = "model") -> IdentifiedModel:
    """Rebuild any model kind from its state, looking the kind up in the plugin registry."""
    from robotid_sim.plugins import get_model_kind

    if not isinstance(data, dict):
        raise ModelError(f"{where}: a model must be a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise ConfigError(f"{where}: missing or malformed field 'kind' (the model kind, e.g. 'base_linear')")
    try:
        cls = get_model_kind(kind)
    except LookupError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    try:
        return cls.from_state(data, arrays)
    except (ConfigError, ModelError, DataError) as exc:
        if str(exc).startswith(where):
            raise
        raise type(exc)(f"{where}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ModelError(f"{where}: malformed '{kind}' model ({type(exc).__name__}: {exc})") from None


def model_files(path: str | Path) -> tuple[Path, Path]:
    """The (JSON, array file) pair of a model named ``path``: ``m.json``, ``m.npz`` or ``m`` all name
    ``m.json`` and ``m.npz`` (the suffix in any case); any other suffix is kept and ``.json`` added
    (``m.v2`` names ``m.v2.json`` and ``m.v2.npz``)."""
    path = Path(path)
    if path.suffix.lower() not in (".json", ".npz"):
        path = path.with_name(path.name + ".json")
    return path.with_suffix(".json"), path.with_suffix(".npz")


def load_model(path: str | Path, robot=None) -> IdentifiedModel:
    """Load a model saved with :meth:`IdentifiedModel.save`.

    Args:
        path: the model's JSON file (or its ``.npz``, or the name without suffix: :func:`model_files`);
            its ``.npz`` must lie beside it.
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
    if path.suffix.lower() == ".npz" or (path.suffix == "" and not path.is_file()):
        path = model_files(path)[0]
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise DataError(f"model file not found: {path}") from None
    except OSError as exc:
        raise DataError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not a robotid_sim model (not valid JSON: {exc})") from None
    except RecursionError:
        raise ConfigError(f"{path} is not a robotid_sim model (JSON nested too deeply)") from None
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
    npz = inside(path.parent, name, f"{path}: array file")  # a symbolic link may not lead out of the folder
    try:
        size = npz.stat().st_size
        if size > MAX_MODEL_ARRAY_BYTES:
            raise DataError(
                f"{npz} is {size / 1e9:.3g} GB, more than a model's array file may be "
                f"({MAX_MODEL_ARRAY_BYTES / 1e9:.3g} GB); it is not the file {path} was saved with"
            )
        blob = npz.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: its array file {npz} is missing (copy the .npz together with the .json)") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read its array file {npz}: {exc.strerror or exc}") from None
    if hashlib.sha256(blob).hexdigest() != spec.get("sha256"):
        raise DataError(
            f"{npz} does not match the SHA-256 recorded in {path}: the two files belong to different models"
        )
    names = spec.get("names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise ConfigError(f"{path}: field 'arrays.names' must be a list of array names, got {names!r:.80}")

    arrays = read_npz(blob, str(npz), keys=names)
    missing = [n for n in names or () if n not in arrays]
    if missing:
        raise DataError(f"{npz} lacks the array(s) {missing} that {path} lists; the model files are damaged")
    return arrays


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "History",
    "IdentifiedModel",
    "load_model",
    "model_from_state",
    "prefixed",
    "readonly_array",
    "short_repr",
    "state_array",
    "state_field",
]
