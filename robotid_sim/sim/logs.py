"""Real-robot logs: recordings written by other tools, loaded as a :class:`Dataset`, and experiments.

A :class:`LogSource` describes one recording in the layout another tool wrote (its YAML/JSON form is
the same mapping): the file, its array names or CSV column prefixes (``keys``; default: the native
layout of :mod:`robotid_sim.sim.recordings`, which reads every file), the names of its joint columns,
its units, the joints it counts the other way than the robot (``signs``), an optional trim and
decimation, and the experiment name. :func:`load_log` turns it into a :class:`Dataset` in SI units
with t starting at 0, the joints matched to the robot's by name; :func:`load_logs` loads several and
stacks them as separate experiments (:func:`stack_experiments`). A ROS bag (ROS 1 ``.bag``, rosbag2
folder, ``.db3`` or ``.mcap``) is read from its ``sensor_msgs/JointState`` ``topic`` (one, several
merged, or one per signal) by :mod:`robotid_sim.sim.rosbag`, its joints named by the messages and timed by
their header stamps.

A stacked dataset keeps its experiments in ``metadata["experiments"]``: a list of
``{"name": str, "start": int, "stop": int, "file": str | None}`` sample ranges (``stop``
exclusive) covering all samples in order; an entry also holds ``"t_shift"`` (seconds added to that
recording's times) and ``"metadata"`` (what that recording's metadata says that the others' does
not) when it was stacked. Each next experiment starts :data:`STACK_GAP_PERIODS` sample periods after
the previous one ends, so t stays strictly increasing and the join shows as a time gap.
:func:`experiments` reads the ranges back (or splits a record at its time gaps), and
:func:`per_experiment` applies a function to each experiment on its own
(:func:`robotid_sim.signal.preprocess.preprocess` filters and differentiates through it): nothing is ever
filtered or differentiated across a join.

Example (three recordings of another tool: angles in degrees, unix time)::

    layout = {"keys": {"t": "times", "q": "positions", "qd": "velocities", "tau": "torques"},
              "units": {"t": "unix", "q": "deg"}}
    ds = load_logs([{**layout, "path": f"run{k}.npz"} for k in (1, 2, 3)], robot)
    ds, notes = preprocess(ds, per_experiment=per_experiment, experiments=experiments, lowpass_hz=20.0,
                           differentiate=True)  # robotid_sim.signal.preprocess
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from robotid_sim.errors import ConfigError, DataError, format_validation_error
from robotid_sim.safety import safe_name
from robotid_sim.signal import (
    decimate,
    decimation_min_samples,
    downsample,
    is_uniform,
    lowpass_on_stamps,
    stamp_order_error,
)
from robotid_sim.sim.dataset import Dataset, Signals, experiment_entries
from robotid_sim.sim.drives import DriveModel
from robotid_sim.sim.recordings import (
    DERIVED_NOTE,
    NATIVE_KEYS,
    SUFFIX_FORMAT,
    CsvFile,
    derive,
    generic_joint_names,
    orient_signal,
    orient_time,
    read_arrays,
    read_csv,
    read_sidecar,
    real_array,
    stored_joint_names,
    stored_metadata,
)
from robotid_sim.sim.rosbag import JOINT_STATE_FIELDS, ROSBAG_SUFFIXES, is_rosbag2_folder, read_joint_states

__all__ = [
    "GAP_FACTOR",
    "GAP_FLOOR_S",
    "GAP_QUANTILE",
    "GAP_QUANTILE_FACTOR",
    "STACK_GAP_PERIODS",
    "LogSource",
    "experiments",
    "load_log",
    "load_logs",
    "parse_log_source",
    "per_experiment",
    "stack_experiments",
]

# A time step is a gap that starts a new experiment (:func:`experiments`, :func:`load_log`) when it is longer
# than each of GAP_FACTOR median steps, GAP_QUANTILE_FACTOR times the GAP_QUANTILE quantile of the record's
# steps, and GAP_FLOOR_S, or longer than half of STACK_GAP_PERIODS median steps whatever the three say. So a
# late or dropped sample or a jittery clock does not split a log (100 Hz with steps of 2 to 30 ms is one
# experiment: nothing below 100 ms splits it), a pause of seconds between two recordings does, and so does
# every join of :func:`stack_experiments`, at any rate.
#: a gap is longer than this many median steps (a late sample or a few dropped ones are not a gap)
GAP_FACTOR = 10.0
#: ... and longer than GAP_QUANTILE_FACTOR times this quantile of the steps (the slowest steps of a jittery clock)
GAP_QUANTILE = 0.99
#: see :data:`GAP_QUANTILE`
GAP_QUANTILE_FACTOR = 3.0
#: ... and longer than this many seconds (a high-rate log's late sample is not a gap)
GAP_FLOOR_S = 0.05
#: the anti-aliasing cut-off of ``decimate`` on a jittery clock, as a fraction of the new Nyquist frequency
DECIMATION_CUTOFF = 0.8
#: :func:`stack_experiments` leaves this many sample periods between two experiments; a step longer than half of
#: it is always a gap
STACK_GAP_PERIODS = 100

#: our signal names, the keys of :attr:`LogSource.keys`
SIGNALS = ("t", "q", "qd", "qdd", "tau")
_JOINT_SIGNALS = ("q", "qd", "qdd", "tau")
_REQUIRED = ("t", "q", "tau")
_DESCRIPTION = {
    "t": "time",
    "q": "joint position",
    "qd": "joint velocity",
    "qdd": "joint acceleration",
    "tau": "joint torque",
    "i": "motor current",
}
#: the key of the motor currents (``keys.i``, read with ``drives``) by file format: CSV prefix ``i_``, else ``i``
_CURRENT_KEYS = {"csv": "i_"}
#: the keys a LogSource defaults to: the native layout's (robotid_sim.sim.recordings)
_DEFAULT_KEYS = {fmt: {signal: keys[signal] for signal in SIGNALS} for fmt, keys in NATIVE_KEYS.items()}

#: time units: seconds per unit, and whether the clock is absolute (unix time)
TIME_UNITS: dict[str, tuple[float, bool]] = {
    "s": (1.0, False),
    "ms": (1e-3, False),
    "us": (1e-6, False),
    "ns": (1e-9, False),
    "unix": (1.0, True),
    "unix_ms": (1e-3, True),
    "unix_us": (1e-6, True),
    "unix_ns": (1e-9, True),
}
_DEG = math.pi / 180.0
#: angle units of revolute joints: SI per unit
ANGLE_UNITS: dict[str, dict[str, float]] = {
    "q": {"rad": 1.0, "deg": _DEG},
    "qd": {"rad/s": 1.0, "deg/s": _DEG},
    "qdd": {"rad/s^2": 1.0, "deg/s^2": _DEG},
}
#: length units of prismatic joints (positions, velocities and accelerations): m per unit
LENGTH_UNITS: dict[str, float] = {"m": 1.0, "mm": 1e-3}
#: torque units: only SI (N*m for revolute joints, N for prismatic ones)
TORQUE_UNITS = ("N*m",)
_UNIT_CHOICES: dict[str, tuple[str, ...]] = {
    "t": tuple(TIME_UNITS),
    **{name: tuple(choices) for name, choices in ANGLE_UNITS.items()},
    "length": tuple(LENGTH_UNITS),
    "tau": TORQUE_UNITS,
}


# ---------------------------------------------------------------------------------------------
# the layout of one recording


class LogSource(BaseModel):
    """One recording written by another tool, and how to read it (the YAML/JSON form is the same mapping).

    Example (YAML)::

        path: run1.npz
        keys: {t: times, q: positions, qd: velocities, tau: torques}
        joint_names: [joint3, finger, joint1, joint2]
        units: {t: unix, q: deg}
        trim: [0.5, null]
        decimate: 2

    A ROS bag (:mod:`robotid_sim.sim.rosbag`: its ``sensor_msgs/JointState`` topics, joints named by the messages)::

        path: run.mcap
        topic: [/joint_states, /joint_efforts]
        signs: {joint2: -1}
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    path: str = Field(
        min_length=1,
        description="the file; a relative path is resolved against the loader's base_dir (default: the current folder)",
    )
    format: Literal["auto", "npz", "csv", "mat", "rosbag"] = Field(
        "auto",
        description="file format; 'auto' takes it from the suffix (.npz, .csv, .mat; a ROS bag: .bag, .mcap, .db3) "
        "or a rosbag2 folder (one holding metadata.yaml)",
    )
    keys: dict[str, str] = Field(
        default_factory=dict,
        description="our signal name (t, q, qd, qdd, tau) -> its name in the file. NPZ/MAT: an array name ((N,) for "
        "t, (N, n) or (n, N) for the joint signals). CSV: the column name of t, and for the joint signals the column "
        "prefix (columns '<prefix><joint>' or '<prefix><index>', 0- or 1-based). Default: t, q, qd, qdd, tau (CSV: "
        "t, q_, qd_, qdd_, tau_). qd and qdd are optional: when absent they are derived from q by central "
        "differences",
    )
    topic: str | list[str] | dict[str, str] | None = Field(
        None,
        description="ROS bags only: the sensor_msgs/JointState topic, a list of topics to merge (each signal from the "
        "first that carries it), or a mapping per signal, e.g. {q: /joint_states, tau: /joint_efforts}; default: the "
        "bag's one JointState topic (robotid_sim.sim.rosbag)",
    )
    joint_names: list[str] | None = Field(
        None,
        description="names of the file's joint columns, in file order; matched to the robot's joints by name, in "
        "any order (extra joints, e.g. gripper fingers, are ignored). Default: the names the file has (CSV column "
        "suffixes, an NPZ/MAT 'joint_names' array), else the columns are the robot's joints in its order",
    )
    units: dict[str, str] = Field(
        default_factory=dict,
        description="units in the file: t: s (default), ms, us, ns, or unix, unix_ms, unix_us, unix_ns (absolute "
        "time); q: rad (default) or deg; qd: rad/s or deg/s, qdd: rad/s^2 or deg/s^2 (default: the angle unit of "
        "q); angles apply to revolute joints only; length: m (default) or mm, for prismatic joints (q, qd, qdd); "
        "tau: N*m (SI only)",
    )
    signs: dict[str, Literal[-1, 1]] = Field(
        default_factory=dict,
        description="robot joint name -> -1 where the file counts that joint the other way than the robot "
        "description (its q, qd, qdd and tau are negated); the others keep +1",
    )
    trim: tuple[float | None, float | None] | None = Field(
        None, description="[start, end] in seconds from the file's first sample; either may be null (no limit)"
    )
    decimate: int = Field(
        1,
        ge=1,
        description="keep every k-th sample after a zero-phase anti-aliasing low-pass (1: keep all); each experiment "
        "needs at least 10 k + 1 samples",
    )
    drives: DriveModel | None = Field(
        None,
        description="the file logs motor currents (keys.i; default i, CSV i_<joint>), not joint torques: their "
        "drive gains and transmission (robotid_sim.sim.drives.DriveModel)",
    )
    name: str | None = Field(
        None,
        description="experiment name (letters, digits, '_ . + -'); default: the file's stem, its other characters "
        "replaced by '_'",
    )

    @field_validator("path", mode="before")
    @classmethod
    def _path_text(cls, value):
        return str(value) if isinstance(value, Path) else value

    @field_validator("keys")
    @classmethod
    def _known_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for signal, key in value.items():
            if signal not in (*SIGNALS, "i"):
                raise ValueError(
                    f"unknown signal {signal!r}: 'keys' maps our signal names ({', '.join(SIGNALS)}, i) to the names "
                    "in the file, e.g. {q: positions}"
                )
            if not key.strip():
                raise ValueError(f"keys.{signal} is empty; give the name of the {_DESCRIPTION[signal]} in the file")
        return value

    @field_validator("units")
    @classmethod
    def _known_units(cls, value: dict[str, str]) -> dict[str, str]:
        for what, unit in value.items():
            if what not in _UNIT_CHOICES:
                raise ValueError(f"unknown unit field {what!r}; 'units' accepts {', '.join(_UNIT_CHOICES)}")
            choices = _UNIT_CHOICES[what]
            if unit not in choices:
                if what == "tau":
                    raise ValueError(
                        f"units.tau {unit!r} is not accepted: torques must be SI (N*m for revolute joints, N for "
                        f"prismatic ones); accepted: {', '.join(choices)}; convert the torques before loading"
                    )
                raise ValueError(f"units.{what} {unit!r} is not accepted; accepted: {', '.join(choices)}")
        return value

    @field_validator("topic")
    @classmethod
    def _known_topic(cls, value: str | list[str] | dict[str, str] | None):
        if isinstance(value, dict):
            for signal in value:
                if signal not in JOINT_STATE_FIELDS:
                    fields = ", ".join(f"{s} ({f})" for s, f in JOINT_STATE_FIELDS.items())
                    raise ValueError(f"unknown signal {signal!r} in 'topic': a JointState message carries {fields}")
            if "q" not in value:
                raise ValueError("'topic' names no topic for q; e.g. {q: /joint_states, tau: /joint_efforts}")
        names = [value] if isinstance(value, str) else list(value.values() if isinstance(value, dict) else value or [])
        if isinstance(value, list) and not value:
            raise ValueError("'topic' is an empty list; name at least one sensor_msgs/JointState topic")
        if any(not name.strip() for name in names):
            raise ValueError("a topic name in 'topic' is empty; give the topic, e.g. /joint_states")
        return value

    @field_validator("joint_names")
    @classmethod
    def _unique_joint_names(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError("joint_names is empty; name every joint column of the file, in file order")
        for name in value:
            if not name or name != name.strip():
                raise ValueError(f"joint name {name!r} must be a non-empty string without surrounding spaces")
        repeated = sorted({name for name in value if value.count(name) > 1})
        if repeated:
            raise ValueError(f"joint_names repeats {', '.join(repeated)}; each file column has its own name")
        return value

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str | None) -> str | None:
        return None if value is None else safe_name(value, "experiment name")

    @model_validator(mode="after")
    def _ordered_trim(self):
        if self.trim is not None:
            start, end = self.trim
            if start is not None and start < 0:
                raise ValueError(f"trim start {start} s is negative; it counts seconds from the file's first sample")
            if start is not None and end is not None and end <= start:
                raise ValueError(f"trim [{start}, {end}]: the end must come after the start")
        if "i" in self.keys and self.drives is None:
            raise ValueError("keys.i names motor currents: give 'drives' (their gains, or gains: unknown) with it")
        return self

    def resolve(self, base_dir: str | Path | None = None) -> Path:
        """The file's path, a relative one resolved against ``base_dir`` (default: the current folder)."""
        path = Path(self.path).expanduser()
        return path if path.is_absolute() or base_dir is None else Path(base_dir) / path

    def file_format(self, path: Path) -> str:
        """``npz``, ``csv``, ``mat`` or ``rosbag``: :attr:`format`, or when it is ``auto`` from the suffix (a ROS bag:
        .bag, .mcap, .db3) or a rosbag2 folder (one holding metadata.yaml).

        Raises:
            DataError: ``auto`` and an unknown suffix, or a folder that is not a rosbag2 one.
        """
        if self.format != "auto":
            return self.format
        if path.is_dir():
            if is_rosbag2_folder(path):
                return "rosbag"
            raise DataError(
                f"cannot load log '{path}': it is a folder, not a file (nor a rosbag2 folder: no metadata.yaml)"
            )
        suffix = path.suffix.lower()
        fmt = "rosbag" if suffix in ROSBAG_SUFFIXES else SUFFIX_FORMAT.get(suffix)
        if fmt is None:
            raise DataError(
                f"cannot tell the format of '{path}' from its suffix '{path.suffix}'; name it .npz, .csv or .mat "
                "(a ROS bag: .bag, .mcap, .db3), or set 'format' (npz, csv, mat, rosbag)"
            )
        return fmt

    def file_keys(self, fmt: str) -> dict[str, str]:
        """Our signal name -> its array name (NPZ/MAT) or column name / prefix (CSV), defaults applied; with
        ``drives``, ``tau`` names the motor currents (``keys.i``, default ``i``, CSV ``i_``)."""
        keys = {**_DEFAULT_KEYS[fmt], **self.keys}
        current = keys.pop("i", _CURRENT_KEYS.get(fmt, "i"))
        return {**keys, "tau": current} if self.drives is not None else keys

    def file_units(self) -> dict[str, str]:
        """The file's units, defaults applied (qd and qdd follow the angle unit of q)."""
        q = self.units.get("q", "rad")
        return {
            "t": "s",
            "q": q,
            "qd": f"{q}/s",
            "qdd": f"{q}/s^2",
            "length": "m",
            "tau": "N*m",
            **self.units,
        }


def parse_log_source(data: Any, where: str = "log source") -> LogSource:
    """A :class:`LogSource` from a LogSource, a mapping, or a path (str or Path).

    Raises:
        ConfigError: naming ``where`` and each bad field (unknown unit, unsafe name, ...).
    """
    if isinstance(data, LogSource):
        return data
    if isinstance(data, str | Path):
        data = {"path": str(data)}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: must be a path or a mapping of LogSource fields, got {type(data).__name__}")
    try:
        return LogSource.model_validate(dict(data))
    except ValidationError as exc:
        path = data.get("path")
        at = f" ({path})" if isinstance(path, str | Path) else ""
        raise ConfigError(format_validation_error(exc, f"{where}{at}")) from None


# ---------------------------------------------------------------------------------------------
# reading a file into columns (the files themselves are read by robotid_sim.sim.recordings)

#: added to the message of a file that is not what its suffix or ``format`` says
_FORMAT_HINT = " If it is a CSV or another format, set 'format' (npz, csv, mat, rosbag)"


@dataclass
class _Columns:
    """A file's time and joint columns, before the joints are matched to the robot's.

    ``matrix[s][:, cols[s][j]]`` is signal ``s`` of file joint ``j`` (None: no such column);
    ``labels[s][j]`` names it in messages; ``lines`` maps a sample to its file line (CSV).
    """

    where: str
    t: np.ndarray
    t_label: str
    n_columns: int
    names: list[str] | None
    explicit_names: bool
    q_label: str
    matrix: dict[str, np.ndarray] = field(default_factory=dict)
    cols: dict[str, list[int | None]] = field(default_factory=dict)
    labels: dict[str, list[str]] = field(default_factory=dict)
    lines: Callable[[int], int] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def _vector_time(key: str, value, where: str) -> np.ndarray:
    """The time array as a vector (N,): float, or int64 for an integer clock (kept exact)."""
    t = real_array(key, value, "(N,)", f" in {where}")
    raw = np.asarray(value)
    if raw.dtype.kind in "iu":
        t = raw.astype(np.int64)
    t = orient_time(t)
    if t.ndim != 1:
        raise DataError(f"time array '{key}' in {where} must be a vector (N,), got shape {t.shape}")
    return t


def _oriented(key: str, value, n_samples: int, where: str) -> np.ndarray:
    """A joint signal as (N, m) (:func:`~robotid_sim.sim.recordings.orient_signal`), or a DataError."""
    arr = orient_signal(real_array(key, value, "(N, n)", f" in {where}"), n_samples)
    if arr.ndim == 2 and arr.shape[0] == n_samples:
        return arr
    raise DataError(
        f"array '{key}' in {where} has shape {arr.shape} but the time has {n_samples} samples; expected (N, n) = "
        f"({n_samples}, n) or (n, {n_samples})"
    )


def _required_arrays(arrays: dict[str, Any], present: list[str], keys: dict[str, str], explicit: set[str], path: Path):
    """A DataError when the file lacks an array the layout needs (the arrays it has listed)."""
    where = f"'{path}'"
    listing = ", ".join(present) if present else "(none)"
    if not any(keys[s] in arrays for s in _REQUIRED):
        kind = "an .npz archive" if path.suffix.lower() == ".npz" else "a file"
        raise DataError(
            f"{where} holds none of the dataset arrays {', '.join(repr(keys[s]) for s in _REQUIRED)} (it is empty, or "
            f"{kind} of something else); its arrays are: {listing}; set 'keys' (t, q, qd, qdd, tau) to the names of "
            "the file's time, position, velocity, acceleration and torque arrays"
        )
    for signal in SIGNALS:
        key = keys[signal]
        if key not in arrays and (signal in _REQUIRED or signal in explicit):
            raise DataError(
                f"{where} has no array '{key}' (the {_DESCRIPTION[signal]}, keys.{signal}); its arrays are: {listing}; "
                f"set keys.{signal} to the name of the {_DESCRIPTION[signal]} array"
            )


def _array_joint_names(arrays: dict[str, Any], keys: dict[str, str], m: int, src: LogSource, where: str):
    """The names of an NPZ/MAT file's joint columns: the LogSource's, else the file's own, else None."""
    names = src.joint_names
    stored = arrays.get("joint_names") if "joint_names" not in keys.values() else None
    if names is None and stored is not None:
        names = stored_joint_names(stored, where)
        if len(names) != m:
            raise DataError(
                f"{where} stores {len(names)} joint names ({', '.join(names)}) but '{keys['q']}' has {m} columns; "
                "give 'joint_names' (the names of the file's columns, in file order)"
            )
    elif names is not None and len(names) != m:
        raise DataError(
            f"'joint_names' has {len(names)} names but '{keys['q']}' in {where} has {m} columns; name every column "
            "of the file, in file order"
        )
    return names


def _array_columns(path: Path, fmt: str, keys: dict[str, str], explicit: set[str], src: LogSource) -> _Columns:
    """:class:`_Columns` of an NPZ or MAT file (only the arrays named in ``keys`` are read)."""
    where = f"'{path}'"
    arrays, present = read_arrays(path, fmt, {*keys.values(), "joint_names", "metadata"}, _FORMAT_HINT)
    _required_arrays(arrays, present, keys, explicit, path)
    t = _vector_time(keys["t"], arrays[keys["t"]], where)
    signals = {s: _oriented(keys[s], arrays[keys[s]], t.shape[0], where) for s in _JOINT_SIGNALS if keys[s] in arrays}
    m = signals["q"].shape[1]
    for signal, arr in signals.items():
        if arr.shape[1] != m:
            raise DataError(
                f"array '{keys[signal]}' in {where} has {arr.shape[1]} joint columns but '{keys['q']}' has {m}; every "
                "joint signal needs the same columns"
            )
    names = _array_joint_names(arrays, keys, m, src, where)
    metadata: dict[str, Any] = {}
    if "metadata" in arrays and "metadata" not in keys.values():
        try:
            metadata = stored_metadata(arrays["metadata"], where)
        except DataError:
            metadata = {}  # a foreign 'metadata' array: not ours, not needed
    columns = _Columns(
        where=where,
        t=t,
        t_label=f"array '{keys['t']}'",
        n_columns=m,
        names=names,
        explicit_names=src.joint_names is not None,
        q_label=f"'{keys['q']}'",
        metadata=metadata,
    )
    for signal, arr in signals.items():
        columns.matrix[signal] = arr
        columns.cols[signal] = list(range(m))
        columns.labels[signal] = [f"array '{keys[signal]}' column {j}" for j in range(m)]
    return columns


def _csv_owned(csv: CsvFile, keys: dict[str, str], explicit: set[str]) -> dict[str, dict[str, int]]:
    """Signal -> {joint suffix: header position} of a CSV's columns; a DataError when a needed one is missing."""
    shown = ", ".join(csv.header[:30]) + (", ..." if len(csv.header) > 30 else "")
    if keys["t"] not in csv.header:
        raise DataError(
            f"{csv.where} has no time column '{keys['t']}' (keys.t); its columns are: {shown}; set keys.t to the "
            "name of the time column"
        )
    prefixes = {s: keys[s] for s in _JOINT_SIGNALS}
    owned = csv.by_prefix(keys["t"], prefixes)
    for signal in SIGNALS[1:]:
        if not owned[signal] and (signal in _REQUIRED or signal in explicit):
            raise DataError(
                f"{csv.where} has no {_DESCRIPTION[signal]} column '{prefixes[signal]}<joint>' (keys.{signal} = "
                f"'{prefixes[signal]}'); its columns are: {shown}; set keys.{signal} to the prefix of those columns"
            )
    return owned


def _csv_joints(csv: CsvFile, suffixes: list[str], q_prefix: str, src: LogSource) -> list[str] | None:
    """The names of a CSV's joint columns (``suffixes`` sorted in place when they are indices), or None."""
    m = len(suffixes)
    indexed = all(s.isdigit() for s in suffixes)
    if indexed:  # '<prefix><index>': file order is the index order
        suffixes.sort(key=int)
        first = int(suffixes[0])
        if first not in (0, 1) or [int(s) for s in suffixes] != list(range(first, first + m)):
            raise DataError(
                f"{csv.where}: the '{q_prefix}<index>' columns are numbered {', '.join(suffixes)}; number them "
                f"0..{m - 1} or 1..{m}, or name them after the joints"
            )
    if src.joint_names is not None and len(src.joint_names) != m:
        raise DataError(
            f"'joint_names' has {len(src.joint_names)} names but {csv.where} has {m} '{q_prefix}' columns "
            f"({', '.join(q_prefix + s for s in suffixes)}); name every one, in file order"
        )
    return src.joint_names if src.joint_names is not None else (None if indexed else list(suffixes))


def _csv_columns(path: Path, keys: dict[str, str], explicit: set[str], src: LogSource) -> _Columns:
    """:class:`_Columns` of a CSV file (only the time and joint columns are parsed)."""
    csv = read_csv(path)
    owned = _csv_owned(csv, keys, explicit)
    suffixes = list(owned["q"])
    names = _csv_joints(csv, suffixes, keys["q"], src)
    used_signals = [s for s in _JOINT_SIGNALS if owned[s]]
    positions = [csv.header.index(keys["t"])] + [owned[s][j] for s in used_signals for j in suffixes if j in owned[s]]
    index = {p: i for i, p in enumerate(positions)}
    data = csv.numbers(positions)
    columns = _Columns(
        where=csv.where,
        t=data[:, 0],
        t_label=f"column '{keys['t']}'",
        n_columns=len(suffixes),
        names=names,
        explicit_names=src.joint_names is not None,
        q_label=f"'{keys['q']}<joint>'",
        lines=csv.line_of,
    )
    for signal in used_signals:
        columns.matrix[signal] = data
        columns.cols[signal] = [
            index[owned[signal][s]] if s in owned[signal] else None for s in suffixes
        ]  # None: reported only if that joint is used
        columns.labels[signal] = [f"column '{keys[signal]}{s}'" for s in suffixes]
    used = {csv.header[p] for p in positions}
    columns.ignored = [c for c in csv.header if c not in used]
    columns.metadata = read_sidecar(path, strict=False)  # our own CSVs keep their metadata there
    return columns


# ---------------------------------------------------------------------------------------------
# loading


def _as_robot(robot):
    if isinstance(robot, str | Path):
        from robotid_sim.robot import load_robot

        robot = load_robot(robot)
    missing = [a for a in ("name", "joint_names", "joint_kinds") if not hasattr(robot, a)]
    if missing:
        raise ConfigError(
            f"robot must be a Robot or RobotStructure (with name, joint_names, joint_kinds), got "
            f"{type(robot).__name__} without {', '.join(missing)}"
        )
    return robot


def _default_name(stem: str) -> str:
    """A file stem made into an experiment name: characters other than letters, digits and ``_ . + -`` become ``_``."""
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", stem)[:60].replace("..", "__")
    if not name[:1].isalnum():
        name = f"log_{name}"
    return safe_name(name, "experiment name")


def _match_joints(columns: _Columns, robot) -> tuple[list[int], list[str]]:
    """For each robot joint, the file joint (column index) that holds it; and the file joints left out.

    The joints are matched by name only where the names say which joint a column is: names the
    LogSource gives, or the file's own names unless they are the generic ``joint1`` … ``jointm``
    (:func:`~robotid_sim.sim.recordings.generic_joint_names`), which every unnamed recording has.
    Generic or no names are the robot's joints in its order, so their count must be the robot's.
    """
    joints, n, m = list(robot.joint_names), len(robot.joint_names), columns.n_columns
    names = columns.names
    generic = names is None or (not columns.explicit_names and names == generic_joint_names(m))
    _check_recorded_robot(columns, robot, m)
    if generic and m != n:
        raise DataError(
            f"{columns.where} has {m} joint columns in {columns.q_label} but robot '{robot.name}' has {n} joints "
            f"({', '.join(joints)}); identify it with the robot it was recorded on, or give 'joint_names' (the "
            "names of the file's columns, in file order, e.g. in --layout): the joints are then matched by name and "
            "extra columns are ignored"
        )
    if names is not None and set(joints) <= set(names):
        return [names.index(j) for j in joints], [name for name in names if name not in joints]
    if generic:
        return list(range(n)), []
    missing = ", ".join(j for j in joints if j not in names)
    if columns.explicit_names:
        raise DataError(
            f"{columns.where}: 'joint_names' ({', '.join(names)}) does not name joint(s) {missing} of robot "
            f"'{robot.name}' (joints {', '.join(joints)}); the joints are matched by name: name the file's columns, in "
            "file order, after the robot's joints"
        )
    raise DataError(
        f"{columns.where} has joint columns for {', '.join(names)} but robot '{robot.name}' has joints "
        f"{', '.join(joints)} ({missing} missing); the joints are matched by name: give 'joint_names' (the file's "
        "columns in file order) using the robot's names"
    )


def _check_recorded_robot(columns: _Columns, robot, m: int) -> None:
    """A DataError when the file says it was recorded on another robot with another joint count."""
    recorded = columns.metadata.get("robot")
    if not isinstance(recorded, str) or recorded == robot.name or m == len(robot.joint_names):
        return  # a robot of the same joint count is left to the identification problem's checks
    raise DataError(
        f"{columns.where} was recorded on robot '{recorded}' ({m} joint columns in {columns.q_label}) but robot "
        f"'{robot.name}' has {len(robot.joint_names)} joints ({', '.join(robot.joint_names)}); identify it with "
        f"robot '{recorded}' (--robot {recorded}), or record the data on '{robot.name}'"
    )


def _checked_time(columns: _Columns) -> None:
    """NaN and order of the file's time column, named by column, sample and line; repeated and backward stamps
    counted, the first few named (:func:`~robotid_sim.signal.stamp_order_error`)."""
    t, where, label = columns.t, columns.where, columns.t_label

    def at(i: int) -> str:
        return f"sample {i}" + (f" (line {columns.lines(i)})" if columns.lines is not None else "")

    if t.shape[0] < 2:
        raise DataError(f"{where} has {t.shape[0]} sample(s); a log needs at least 2")
    bad = ~np.isfinite(t)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise DataError(f"{label} of {where} has {t[i]} at {at(i)}; remove or interpolate that sample")
    problem = stamp_order_error(t, at)
    if problem is not None:
        raise DataError(f"{label} of {where} must be strictly increasing; {problem}")


def _take(columns: _Columns, signal: str, joints: list[int], rows: slice, robot) -> np.ndarray:
    """Signal ``signal`` of the robot's joints (file joints ``joints``) on ``rows``, as (N, n), NaN-checked."""
    cols = columns.cols[signal]
    absent = [robot.joint_names[k] for k, j in enumerate(joints) if cols[j] is None]
    if absent:
        missing = [columns.labels[signal][j] for j in joints if cols[j] is None]
        raise DataError(
            f"{columns.where} has no {missing[0]} for joint '{absent[0]}': the {_DESCRIPTION[signal]} columns must "
            f"cover every joint of the robot ({', '.join(robot.joint_names)})"
        )
    block = columns.matrix[signal][rows][:, [cols[j] for j in joints]]
    bad = ~np.isfinite(block)
    if np.any(bad):
        row, k = (int(i) for i in np.argwhere(bad)[0])
        sample = (rows.start or 0) + row
        line = f" (line {columns.lines(sample)})" if columns.lines is not None else ""
        label = columns.labels[signal][joints[k]]
        raise DataError(
            f"{label} of {columns.where} has {block[row, k]} at sample {sample}{line} (joint "
            f"'{robot.joint_names[k]}'); remove or interpolate that sample, or trim it away"
        )
    return block


def _parts(n_samples: int, starts: Sequence[int]) -> list[slice]:
    bounds = [*starts, n_samples]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _gap_starts(t: np.ndarray) -> list[int]:
    """Sample indices where an experiment starts: 0, and after every gap (the rule above :data:`GAP_FACTOR`)."""
    steps = np.diff(t)
    median = float(np.median(steps))
    longest = max(GAP_FACTOR * median, GAP_QUANTILE_FACTOR * float(np.quantile(steps, GAP_QUANTILE)), GAP_FLOOR_S)
    cuts = np.flatnonzero(steps > min(longest, STACK_GAP_PERIODS / 2 * median)) + 1
    return [0, *(int(c) for c in cuts)]


def _part_names(name: str, count: int) -> list[str]:
    return [name] if count == 1 else [f"{name[:60]}_{k + 1}" for k in range(count)]


def load_log(source: LogSource | Mapping | str | Path, robot, base_dir: str | Path | None = None) -> Dataset:
    """Load one recording written by another tool as a :class:`Dataset` for ``robot``.

    The file is read through the safe readers (an .npz is never unpickled and only the arrays
    named in ``keys`` are read). Its joint columns are matched to the robot's joints by name, its
    units converted to SI (angles for revolute joints only, lengths for prismatic ones), motor currents and
    motor-side motion made joint torque and motion (``drives``, :mod:`robotid_sim.sim.drives`), t shifted
    to start at 0, the ``trim`` applied, missing qd / qdd derived from q by central differences, and
    the ``decimate`` applied. A file holding several recordings separated by time gaps (a pause: the
    rule at :data:`GAP_FACTOR`; a late sample or a jittery clock is not one) gives several experiments;
    derivation and decimation run within each.

    Args:
        source: a :class:`LogSource`, its mapping (YAML/JSON form), or a path (our layout, SI units).
        robot: anything with ``name``, ``joint_names`` and ``joint_kinds`` (a Robot or a
            RobotStructure), or a bundled robot name / URDF path.
        base_dir: folder a relative ``path`` is resolved against (default: the current folder).

    Returns:
        The dataset, with the robot's joint names, ``truth=None``, and ``metadata``: ``source``,
        ``file`` (the path as given when relative, else the file's name: no absolute path of the machine),
        ``format``, ``log_source`` (the LogSource, its ``path`` as ``file``), ``keys``, ``units`` (the file's),
        ``joint_columns`` (robot joint -> file column), ``rate_hz``, ``experiments``, and when
        they apply ``robot`` (only when the file itself names its robot), ``t0_unix`` (unix time
        of t = 0) or ``t_offset_s`` (the file's time of t = 0), ``trim``, ``decimation``,
        ``derived_signals``, ``ignored_joints``, ``ignored_columns``, ``file_metadata``.

    Raises:
        ConfigError: a bad LogSource field (unknown unit or signal, non-SI torque, unsafe name, drive gains or a
            transmission that do not fit the robot's joint count).
        DataError: a missing, unreadable or mislabelled file; a missing array or column (the ones
            present listed); NaN (column and row named); time not strictly increasing; a joint
            count or joint names that do not match the robot; too few samples left by trim or
            for derivation or decimation.
    """
    src = parse_log_source(source)
    robot = _as_robot(robot)
    if src.drives is not None:  # its gain count and transmission against the robot, before the file is read
        src.drives.transmission_matrix(len(robot.joint_names))
    path = src.resolve(base_dir)
    columns, fmt, keys = _read_columns(src, path)
    _checked_time(columns)
    joints, ignored_joints = _match_joints(columns, robot)
    units = src.file_units()
    scale, _ = TIME_UNITS[units["t"]]
    t_file = (columns.t - columns.t[0]) * scale  # integers subtracted exactly: unix_ms, ns clocks
    rows = _trimmed_rows(src, t_file, columns.where)
    t = t_file[rows] - t_file[rows.start]
    t_file_start = columns.t[0] * scale + t_file[rows.start]  # the file's own time of the new t = 0
    signals = _signed(_si_signals(columns, joints, rows, robot, units), src, robot)
    if src.drives is not None:  # motor currents (and motor-side motion) to joint torque (and motion)
        signals = src.drives.joint_signals(signals)
    parts = _parts(t.shape[0], _gap_starts(t))
    names = _part_names(src.name or _default_name(path.stem), len(parts))
    derived = {s: DERIVED_NOTE[s] for s in ("qd", "qdd") if s not in signals}
    pieces = _experiment_pieces(src, t, signals, zip(names, parts, strict=True), columns.where, rows.start)
    t_out = np.concatenate([p["t"] for p in pieces])
    bounds = np.cumsum([0, *(p["t"].shape[0] for p in pieces)]).tolist()
    metadata = _log_metadata(src, path, fmt, keys, columns, robot, joints, signals, t_out)
    metadata.update(_processing_metadata(src, columns, rows, t, units, derived, len(parts)))
    if ignored_joints:
        metadata["ignored_joints"] = ignored_joints
    if columns.ignored:
        metadata["ignored_columns"] = columns.ignored
    if columns.metadata:
        metadata["file_metadata"] = columns.metadata
    loop = columns.metadata.get("closed_loop") if isinstance(columns.metadata, dict) else None
    if isinstance(loop, dict):  # a closed-loop record saved by Dataset.save: its loop time at the new t = 0
        metadata["closed_loop"] = {**loop, "t_offset_s": float(loop.get("t_offset_s", 0.0)) + float(t_file_start)}
    metadata["experiments"] = [
        {"name": part_name, "start": a, "stop": b, "file": _file_label(src)}
        for part_name, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)
    ]
    return Dataset(
        t_out,
        *(np.concatenate([p[s] for p in pieces]) for s in _JOINT_SIGNALS),
        truth=None,
        joint_names=list(robot.joint_names),
        metadata=metadata,
    )


def _read_columns(src: LogSource, path: Path) -> tuple[_Columns, str, dict[str, str]]:
    """The file's columns, its format and its keys (defaults applied; a bag's keys: its clock, topics, fields)."""
    if not path.exists():
        raise DataError(f"cannot load log '{path}': no such file")
    fmt = src.file_format(path)
    if fmt != "rosbag" and src.topic is not None:
        raise ConfigError(f"'topic' applies to ROS bags only, and '{path}' is read as {fmt}; leave 'topic' out")
    if fmt != "rosbag" and path.is_dir():
        raise DataError(f"cannot load log '{path}': it is a folder, not a file")
    keys = src.file_keys(fmt) if fmt != "rosbag" else {}
    try:
        if fmt == "rosbag":
            columns, keys = _bag_columns(path, src)
            return columns, fmt, keys
        if fmt == "csv":
            return _csv_columns(path, keys, set(src.keys), src), fmt, keys
        return _array_columns(path, fmt, keys, set(src.keys), src), fmt, keys
    except OSError as exc:
        raise DataError(f"cannot read '{path}': {exc.strerror or exc}") from None


def _trimmed_rows(src: LogSource, t_file: np.ndarray, where: str) -> slice:
    """The samples the ``trim`` keeps (all without one); ``t_file`` is in s from the file's first sample."""
    n_file = t_file.shape[0]
    first, last = 0, n_file
    if src.trim is not None:
        start, end = src.trim
        tol = 1e-6 * float(np.median(np.diff(t_file)))
        first = 0 if start is None else int(np.searchsorted(t_file, start - tol, side="left"))
        last = n_file if end is None else int(np.searchsorted(t_file, end + tol, side="right"))
        if last - first < 2:
            raise DataError(
                f"trim {json.dumps(list(src.trim))} keeps {max(last - first, 0)} sample(s) of {where}, which spans "
                f"{t_file[-1]:.6g} s from its first sample; widen the trim"
            )
    return slice(first, last)


def _bag_columns(path: Path, src: LogSource) -> tuple[_Columns, dict[str, str]]:
    """:class:`_Columns` of a ROS bag's JointState messages (:mod:`robotid_sim.sim.rosbag`), and its keys: the clock,
    and the topic and field of each signal. t counts seconds from the first sample (``file_metadata.rosbag.t0_ns``
    keeps its stamp)."""
    where = f"'{path}'"
    if src.keys or "t" in src.units:
        given = "keys" if src.keys else "units.t"
        raise ConfigError(
            f"'{given}' does not apply to the ROS bag {where}: its signals are the JointState fields (position, "
            "velocity, effort) of the topics in 'topic', timed in sec + nanosec; leave it out"
        )
    states = read_joint_states(path, src.topic)
    m = states.signals["q"].shape[1]
    names = states.names
    if src.joint_names is not None:
        if len(src.joint_names) != m:
            raise DataError(
                f"'joint_names' has {len(src.joint_names)} names but the JointState messages of {states.fields['q']} "
                f"in {where} hold {m} joints; name every one, in message order"
            )
        names = list(src.joint_names)
    clock = states.metadata["clock"]
    columns = _Columns(
        where=where,
        t=(states.t_ns - states.t_ns[0]) / 1e9,  # integer ns subtracted exactly
        t_label=f"the {clock} of {states.fields['q'].rsplit(' ', 1)[0]}",
        n_columns=m,
        names=names,
        explicit_names=src.joint_names is not None,
        q_label=states.fields["q"],
        metadata={"rosbag": states.metadata},
    )
    for signal, matrix in states.signals.items():
        columns.matrix[signal] = matrix
        columns.cols[signal] = list(range(m))
        columns.labels[signal] = [
            f"{states.fields[signal]} of '{name}'" if names is not None else f"{states.fields[signal]} entry {j}"
            for j, name in enumerate(names or [None] * m)
        ]
    return columns, {"t": clock, **states.fields}


def _signed(signals: dict[str, np.ndarray], src: LogSource, robot) -> dict[str, np.ndarray]:
    """The robot's joint signals with the joints of ``src.signs`` negated (the file counts them the other way).

    Raises:
        ConfigError: ``signs`` names a joint the robot does not have.
    """
    if not src.signs:
        return signals
    unknown = [joint for joint in src.signs if joint not in robot.joint_names]
    if unknown:
        raise ConfigError(
            f"'signs' names {', '.join(unknown)}, not a joint of robot '{robot.name}' "
            f"({', '.join(robot.joint_names)}); key it by the robot's joint names"
        )
    sign = np.array([float(src.signs.get(joint, 1)) for joint in robot.joint_names])
    return {name: x * sign for name, x in signals.items()}


def _si_signals(columns: _Columns, joints: list[int], rows: slice, robot, units: dict[str, str]):
    """The robot's joint signals in the file, on ``rows``, in SI units (angles on revolute joints only)."""
    angular = np.array([kind != "prismatic" for kind in robot.joint_kinds])
    signals: dict[str, np.ndarray] = {}
    for signal in _JOINT_SIGNALS:
        if signal not in columns.matrix:
            continue
        x = _take(columns, signal, joints, rows, robot)
        if signal != "tau":
            factor = np.where(angular, ANGLE_UNITS[signal][units[signal]], LENGTH_UNITS[units["length"]])
            x = x * factor if np.any(factor != 1.0) else x
        signals[signal] = x
    return signals


def _experiment_pieces(src: LogSource, t, signals, parts, where: str, first: int) -> list[dict[str, np.ndarray]]:
    """Each experiment ``(name, samples)`` of ``parts`` on its own: missing qd / qdd derived, then decimated."""
    pieces: list[dict[str, np.ndarray]] = []
    for part_name, part in parts:
        piece = {"t": t[part], **{s: x[part] for s, x in signals.items()}}
        context = f"{where}, experiment '{part_name}' (samples {first + part.start}:{first + part.stop} of the file)"
        try:
            if "qd" not in signals:
                piece["qd"] = derive(piece["t"], piece["q"])
            if "qdd" not in signals:
                piece["qdd"] = derive(piece["t"], piece["qd"])
            if src.decimate > 1:
                _check_decimation(src.decimate, piece["t"].shape[0])
                piece = _decimated(piece, src.decimate)
        except DataError as exc:
            raise DataError(f"{context}: {exc}") from None
        pieces.append(piece)
    return pieces


def _decimated(piece: dict[str, np.ndarray], factor: int) -> dict[str, np.ndarray]:
    """Every ``factor``-th sample of ``piece`` after an anti-aliasing low-pass: :func:`~robotid_sim.signal.decimate`'s
    FIR on an even clock; on a jittery one (a filter that counts samples would smear time) a zero-phase Butterworth
    on the stamps (:func:`~robotid_sim.signal.lowpass_on_stamps`) at 0.8 × the new Nyquist frequency."""
    t = piece["t"]
    if is_uniform(t):
        return {s: downsample(x, factor) if s == "t" else decimate(x, factor) for s, x in piece.items()}
    cutoff = DECIMATION_CUTOFF / (2.0 * factor * float(np.median(np.diff(t))))
    return {s: downsample(x if s == "t" else lowpass_on_stamps(x, t, cutoff), factor) for s, x in piece.items()}


def _file_label(src: LogSource) -> str:
    """The recording's path as metadata keeps it: as given when relative (to the loader's ``base_dir``), else its
    name only, so that no absolute path of the machine reaches a saved dataset or a run folder."""
    given = Path(src.path).expanduser()
    return given.name if given.is_absolute() else src.path


def _check_decimation(factor: int, n_samples: int) -> None:
    """A DataError naming the ``decimate`` field when an experiment of ``n_samples`` is too short for it."""
    needed = decimation_min_samples(factor)
    if n_samples < needed:
        most = (n_samples - 1) // 10
        fix = f"lower 'decimate' to at most {most}" if most >= 2 else "leave 'decimate' out"
        raise DataError(
            f"decimate: {factor} needs at least {needed} samples per experiment (10 x decimate + 1: its anti-aliasing "
            f"filter reaches 10 x decimate samples past each end) but this one has {n_samples}; {fix}"
        )


def _log_metadata(src: LogSource, path: Path, fmt: str, keys, columns: _Columns, robot, joints, signals, t_out):
    """What a loaded log's metadata says of its file: robot (when the file names one), layout, joint columns, rate."""
    metadata: dict[str, Any] = {}
    stored = columns.metadata
    if isinstance(stored.get("robot"), str):
        metadata["robot"] = stored["robot"]  # only what the file says: a real log carries no robot name
    units = src.file_units()
    metadata.update(
        {
            "source": "recorded log",
            "file": _file_label(src),
            "format": fmt,
            "log_source": {**src.model_dump(mode="json"), "path": _file_label(src)},
            "keys": {s: keys[s] for s in SIGNALS if s == "t" or s in signals},
            "units": {k: v for k, v in units.items() if k == "t" or k == "length" or k in signals},
            "joint_columns": {j: columns.labels["q"][c] for j, c in zip(robot.joint_names, joints, strict=True)},
            "rate_hz": 1.0 / float(np.median(np.diff(t_out))),
        }
    )
    return metadata


def _processing_metadata(src: LogSource, columns: _Columns, rows: slice, t, units, derived, n_parts: int):
    """What a loaded log's metadata says of its processing: time origin, trim, decimation, derived signals."""
    metadata: dict[str, Any] = {}
    scale, absolute = TIME_UNITS[units["t"]]
    raw, first = columns.t, rows.start
    if absolute:
        metadata["t0_unix"] = float(raw[first]) * scale
    elif raw[first] != 0:
        metadata["t_offset_s"] = float(raw[first]) * scale
    if src.trim is not None:
        metadata["trim"] = {
            "start": src.trim[0],
            "end": src.trim[1],
            "samples": [first, rows.stop],
            "file_samples": raw.shape[0],
        }
    if src.decimate > 1:
        metadata["decimation"] = {
            "factor": src.decimate,
            "rate_hz_before": 1.0 / float(np.median(np.diff(t))),
            "method": "zero-phase FIR low-pass at the new Nyquist frequency, then every k-th sample "
            "(robotid_sim.signal.decimate), within each experiment"
            if is_uniform(t)
            else f"jittery clock: zero-phase Butterworth low-pass on the stamps at {DECIMATION_CUTOFF:g} x the new "
            "Nyquist frequency (robotid_sim.signal.lowpass_on_stamps), then every k-th sample, within each experiment",
        }
    if derived:
        metadata["derived_signals"] = {
            s: note + (", within each experiment" if n_parts > 1 else "") for s, note in derived.items()
        }
    return metadata


def load_logs(
    sources: Sequence[LogSource | Mapping | str | Path], robot, base_dir: str | Path | None = None
) -> Dataset:
    """Load several recordings (:func:`load_log`) and stack them as separate experiments.

    Experiment names default to the file stems; two files with the same stem and no explicit
    ``name`` get ``-2``, ``-3``, ... appended.

    Args:
        sources: LogSources, their mappings, or paths (one alone is accepted too).
        robot: as :func:`load_log`.
        base_dir: folder relative paths are resolved against.

    Returns:
        The stacked dataset (:func:`stack_experiments`).

    Raises:
        ConfigError: no source, a bad LogSource field, or one experiment name given to two files.
        DataError: as :func:`load_log`.
    """
    if isinstance(sources, LogSource | Mapping | str | Path):
        sources = [sources]
    parsed = [parse_log_source(s, f"log source {k}") for k, s in enumerate(sources)]
    if not parsed:
        raise ConfigError("no log file given; list at least one recording")
    robot = _as_robot(robot)
    names: list[str] = []
    for src in parsed:
        name = src.name or _default_name(src.resolve(base_dir).stem)
        if src.name is None:
            base, k = name, 1
            while name in names:
                k += 1
                name = f"{base[:60]}-{k}"
        elif name in names:
            raise ConfigError(
                f"experiment name '{name}' is given to two log files ({parsed[names.index(name)].path} and "
                f"{src.path}); give each its own 'name'"
            )
        names.append(name)
    datasets = [
        load_log(src.model_copy(update={"name": name}), robot, base_dir)
        for src, name in zip(parsed, names, strict=True)
    ]
    return stack_experiments(datasets, names)


# ---------------------------------------------------------------------------------------------
# experiments


def experiments(ds: Dataset) -> list[tuple[str, slice]]:
    """The experiments of a record: ``[(name, slice of samples), ...]`` in order, covering every sample.

    From ``metadata["experiments"]`` when present (checked); otherwise the record is split at its
    time gaps (one file holding two recordings separated by a pause is two experiments:
    ``experiment1``, ``experiment2``, ...; a gap is a step longer than GAP_FACTOR median steps, GAP_QUANTILE_FACTOR
    times the GAP_QUANTILE quantile step and GAP_FLOOR_S, or than half of STACK_GAP_PERIODS median steps, so a
    late sample or a jittery clock splits nothing); otherwise it is one experiment named ``all``.

    Raises:
        DataError: ``metadata["experiments"]`` that is malformed, has unsafe or repeated names, or
            does not cover the samples 0..N in order.
    """
    entries = experiment_entries(ds)
    if entries is not None:
        return [(e["name"], slice(e["start"], e["stop"])) for e in entries]
    t = getattr(ds, "t", None)
    if t is None:  # a duck-typed record of q, qd, qdd, tau only
        return [("all", slice(0, len(ds.q)))]
    parts = _parts(len(t), _gap_starts(np.asarray(t, float)))
    if len(parts) == 1:
        return [("all", parts[0])]
    return [(f"experiment{k + 1}", part) for k, part in enumerate(parts)]


def _segments(ds: Dataset, shift: float) -> list[dict[str, Any]]:
    """The time segments of ``ds`` (one 'excitation' segment if none), clipped to its time span, shifted."""
    lo, hi = float(ds.t[0]), float(ds.t[-1]) + ds.dt
    stored = ds.metadata.get("segments") or [{"label": "excitation", "start": lo, "end": hi, "joint": None}]
    out = []
    for seg in stored:
        start, end = max(float(seg["start"]), lo), min(float(seg["end"]), hi)
        if end > start:
            out.append({**seg, "start": start + shift, "end": end + shift})
    return out


def stack_experiments(datasets: Sequence[Dataset], names: Sequence[str] | None = None) -> Dataset:
    """Stack recordings as separate experiments of one dataset.

    Each next recording is shifted in time to start :data:`STACK_GAP_PERIODS` sample periods (of
    the slower of the two recordings) after the previous one ends, so t stays strictly increasing
    and the join shows as a time gap. A recording that holds several experiments keeps them.

    Args:
        datasets: the recordings, in order; their joint names must be the same.
        names: one name per recording (default: each recording's experiment names, else
            ``experiment<k>``); a recording of several experiments gets ``<name>_1``, ``<name>_2``, ...

    Returns:
        The dataset. ``metadata``: what every recording's metadata shares; ``robot`` when the
        recordings that name one agree; ``segments`` (shifted, clipped to each recording) when any
        has them; and ``experiments``: ``{name, start, stop, file, t_shift, metadata}`` per
        experiment, ``metadata`` holding what that recording's metadata does not share with the
        others. ``truth`` is kept only when every recording has one.

    Raises:
        DataError: no recording, joint names that differ (both lists named), recordings of two
            different robots, or a repeated experiment name.
        ConfigError: ``names`` of the wrong length or an unsafe name.
    """
    datasets = list(datasets)
    names = _stack_names(datasets, names)
    joint_names = list(datasets[0].joint_names)
    for k, ds in enumerate(datasets[1:], start=1):
        if list(ds.joint_names) != joint_names:
            raise DataError(
                f"cannot stack recording {k} with joints [{', '.join(ds.joint_names)}] onto recordings with joints "
                f"[{', '.join(joint_names)}]; load every recording for the same robot (load_logs matches the joints "
                "by name)"
            )
    robots = {ds.metadata["robot"] for ds in datasets if isinstance(ds.metadata.get("robot"), str)}
    if len(robots) > 1:
        raise DataError(
            f"the recordings were made on different robots ({', '.join(sorted(robots))}); stack recordings of one robot"
        )
    private = ("experiments", "segments")
    metas = [{k: v for k, v in ds.metadata.items() if k not in private} for ds in datasets]
    common = {k: v for k, v in metas[0].items() if all(k in m and m[k] == v for m in metas[1:])}
    if robots:
        common["robot"] = next(iter(robots))
    times, segments, entries = _stacked(
        datasets, names, [{k: v for k, v in m.items() if k not in common} for m in metas]
    )
    metadata = {**common, "experiments": entries}
    if any(ds.metadata.get("segments") for ds in datasets):
        metadata["segments"] = segments
    truth = None
    if all(ds.truth is not None for ds in datasets):
        truth = Signals(*(np.concatenate([getattr(ds.truth, s) for ds in datasets]) for s in _JOINT_SIGNALS))
    return Dataset(
        np.concatenate(times),
        *(np.concatenate([getattr(ds, s) for ds in datasets]) for s in _JOINT_SIGNALS),
        truth=truth,
        joint_names=joint_names,
        metadata=metadata,
    )


def _stack_names(datasets: list[Dataset], names: Sequence[str] | None) -> list[str] | None:
    """The names given to :func:`stack_experiments` as a list, checked (one safe name per recording)."""
    if not datasets:
        raise DataError("stack_experiments needs at least one dataset")
    if names is None:
        return None
    names = list(names)
    if len(names) != len(datasets):
        raise ConfigError(f"stack_experiments got {len(names)} names for {len(datasets)} datasets; give one each")
    for name in names:
        safe_name(name, "experiment name")
    return names


def _named_entries(ds: Dataset, k: int, names: list[str] | None) -> list[dict[str, Any]]:
    """The experiment entries of recording ``k`` (stored, or from its time gaps), named after ``names[k]``."""
    stored = experiment_entries(ds)
    if stored is None:
        stored = [{"name": name, "start": s.start, "stop": s.stop, "file": None} for name, s in experiments(ds)]
        if names is None:
            base = f"experiment{k + 1}"
            for entry, name in zip(stored, _part_names(base, len(stored)), strict=True):
                entry["name"] = name
    if names is not None:
        for entry, name in zip(stored, _part_names(names[k], len(stored)), strict=True):
            entry["name"] = name
    return stored


def _stacked(datasets: list[Dataset], names: list[str] | None, owns: list[dict[str, Any]]):
    """The shifted times, segments and experiment entries of the recordings stacked one after the other.

    ``owns[k]`` is what recording k's metadata does not share with the others (kept in its entries).
    """
    entries: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    times, segments = [], []
    start, previous = 0, None
    for k, ds in enumerate(datasets):
        shift = 0.0
        if previous is not None:
            gap = STACK_GAP_PERIODS * max(previous.dt, ds.dt)
            shift = float(times[-1][-1] + gap - ds.t[0])
        times.append(ds.t + shift)
        segments += _segments(ds, shift)
        for entry in _named_entries(ds, k, names):
            item = {key: v for key, v in entry.items() if key != "metadata"}
            item.update(
                start=start + entry["start"],
                stop=start + entry["stop"],
                file=entry.get("file") or ds.metadata.get("file"),
                t_shift=float(entry.get("t_shift", 0.0)) + shift,
            )
            entry_meta = {**owns[k], **entry.get("metadata", {})}
            if entry_meta:
                item["metadata"] = entry_meta
            if item["name"] in seen:
                raise DataError(
                    f"experiment name '{item['name']}' appears twice in the stack ({seen[item['name']]} and recording "
                    f"{k}{'' if item['file'] is None else ' ' + repr(item['file'])}); give each recording its own name"
                )
            seen[item["name"]] = f"recording {k}" + ("" if item["file"] is None else f" {item['file']!r}")
            entries.append(item)
        start += ds.n_samples
        previous = ds
    return times, segments, entries


def _piece(ds: Dataset, part: slice, metadata: dict[str, Any]) -> Dataset:
    truth = None if ds.truth is None else Signals(*(getattr(ds.truth, s)[part] for s in _JOINT_SIGNALS))
    return Dataset(
        ds.t[part],
        *(getattr(ds, s)[part] for s in _JOINT_SIGNALS),
        truth=truth,
        joint_names=list(ds.joint_names),
        metadata=metadata,
    )


def per_experiment(ds: Dataset, func: Callable[[Dataset], Dataset]) -> Dataset:
    """Apply ``func`` to each experiment of ``ds`` on its own and stack the results again.

    Each experiment is passed as a Dataset of its samples (metadata without ``experiments``).
    ``func`` may change an experiment's length (decimation, trimming); the ranges in
    ``metadata["experiments"]`` are updated, and its entries otherwise kept. It must keep each
    experiment's times inside its own span (so t stays increasing). A record of one experiment
    without ``metadata["experiments"]`` is passed whole.

    Returns:
        The restacked dataset: the first result's metadata with the updated ``experiments``; a
        truth only when every result has one.

    Raises:
        DataError / ConfigError: from ``func`` or an experiment too short for it, with the
            experiment's name and sample range; results with other joints or overlapping times.
    """
    parts = experiments(ds)
    stored = experiment_entries(ds)
    if stored is None and len(parts) == 1:
        return func(ds)
    base = {k: v for k, v in ds.metadata.items() if k != "experiments"}
    results = []
    for name, part in parts:
        try:
            out = func(_piece(ds, part, base))
        except (DataError, ConfigError) as exc:
            raise type(exc)(f"experiment '{name}' (samples {part.start}:{part.stop}): {exc}") from None
        if not isinstance(out, Dataset):
            raise TypeError(f"per_experiment: func must return a Dataset, got {type(out).__name__} for '{name}'")
        if list(out.joint_names) != list(ds.joint_names):
            raise DataError(f"per_experiment: func changed the joints of experiment '{name}' to {out.joint_names}")
        if results and out.t[0] <= results[-1].t[-1]:
            raise DataError(
                f"per_experiment: experiment '{name}' starts at t = {out.t[0]} before the previous one ends "
                f"(t = {results[-1].t[-1]}); func must keep each experiment's times"
            )
        results.append(out)
    bounds = np.cumsum([0, *(r.n_samples for r in results)]).tolist()
    if stored is None:
        stored = [{"name": name, "file": None} for name, _ in parts]
    entries = [{**e, "start": a, "stop": b} for e, a, b in zip(stored, bounds[:-1], bounds[1:], strict=True)]
    metadata = {**{k: v for k, v in results[0].metadata.items() if k != "experiments"}, "experiments": entries}
    truth = None
    if all(r.truth is not None for r in results):
        truth = Signals(*(np.concatenate([getattr(r.truth, s) for r in results]) for s in _JOINT_SIGNALS))
    return Dataset(
        np.concatenate([r.t for r in results]),
        *(np.concatenate([getattr(r, s) for r in results]) for s in _JOINT_SIGNALS),
        truth=truth,
        joint_names=list(ds.joint_names),
        metadata=metadata,
    )
