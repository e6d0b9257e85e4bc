"""The measured dataset: a :class:`Dataset` of signals, its truth, joint names and metadata (SPEC §5).

A :class:`Dataset` holds the measured signals t (N,), q, qd, qdd, tau (N, n) in SI units, the
noise-free truth when it is known (a simulation) or None (a real-robot log), the joint names
and JSON-able metadata (robot, noise configuration, excitation, seed, rate, ...).

Its file formats live in :mod:`robotid_sim.sim.recordings`: :meth:`Dataset.save` writes the native
layout (``.npz``, ``.csv`` with a ``.json`` sidecar, ``.mat``) and :func:`load_dataset` reads it back,
bit for bit, or a recording in the same layout written elsewhere (only ``t``, ``q`` and ``tau``
required; a missing ``qd`` or ``qdd`` is derived by central differences and
``metadata["derived_signals"]`` says so; extra CSV columns are listed in
``metadata["ignored_columns"]``). Derivatives of raw encoder data are noisy: filter them
(``robotid_sim.signal``) before identification. Recordings in other layouts load with
:func:`robotid_sim.sim.logs.load_log`.

A CSV's joint columns are found by name: ``load_dataset(path, joint_names=...)`` reads the columns
of those joints whatever their order, and :func:`load_dataset_for_robot` does so with a robot's
joint names. Bad files are :class:`~robotid_sim.errors.DataError` errors naming the file and the
column or array.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robotid_sim._json import jsonable
from robotid_sim.errors import ConfigError, DataError
from robotid_sim.safety import safe_name
from robotid_sim.sim.recordings import (
    FORMATS,
    SIGNAL_NAMES,
    TRUE_PREFIX,
    check_joint_names,
    check_signal,
    check_time,
    csv_joint_names,
    generic_joint_names,
    native_csv_header,
    read_native,
    write_native,
)

__all__ = [
    "Dataset",
    "Signals",
    "experiment_entries",
    "load_dataset",
    "load_dataset_for_robot",
]


def _metadata_json(metadata: Mapping[str, Any], indent: int | None = None) -> str:
    try:
        return json.dumps(jsonable(dict(metadata)), allow_nan=False, indent=indent)
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"metadata must be JSON-able (str, numbers, lists, dicts, None; numpy values are converted): {exc}"
        ) from None


@dataclass(frozen=True, eq=False)
class Signals:
    """Joint signals of one record, each (N, n): positions, velocities, accelerations, torques.

    Attributes:
        q: joint positions (rad or m).
        qd: joint velocities (rad/s or m/s).
        qdd: joint accelerations (rad/s² or m/s²).
        tau: joint torques (N·m) or forces (N).
    """

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray

    def __post_init__(self) -> None:
        q = np.asarray(self.q)
        n_samples = q.shape[0] if q.ndim >= 1 else 0
        n_dof = q.shape[1] if q.ndim == 2 else None
        for name in SIGNAL_NAMES:
            object.__setattr__(self, name, check_signal(name, getattr(self, name), n_samples, n_dof))

    def as_dict(self) -> dict[str, np.ndarray]:
        """``{"q": q, "qd": qd, "qdd": qdd, "tau": tau}`` (the arrays themselves, not copies)."""
        return {name: getattr(self, name) for name in SIGNAL_NAMES}


@dataclass(frozen=True, eq=False)
class Dataset:
    """A measured record: time, joint signals, the truth if known, joint names and metadata.

    Attributes:
        t: sample times (N,) in s, strictly increasing.
        q: measured joint positions (N, n).
        qd: measured or derived joint velocities (N, n).
        qdd: measured or derived joint accelerations (N, n).
        tau: measured joint torques / forces (N, n).
        truth: the noise-free :class:`Signals` of a simulation, or None for a real-robot log.
        joint_names: n unique names (default ``joint1`` … ``jointn``); used in CSV headers.
        metadata: JSON-able dict (robot, noise config, excitation, seed, rate_hz, ...). It is
            stored in its JSON form: numpy scalars become Python numbers, tuples lists.

    Raises:
        DataError: on construction, naming the field: wrong shape, NaN/inf, t not strictly
            increasing, fewer than 2 samples, bad joint names, metadata not JSON-able.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    truth: Signals | None = None
    joint_names: list[str] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        t = check_time(self.t)
        object.__setattr__(self, "t", t)
        q = check_signal("q", self.q, t.shape[0], None)
        n_dof = q.shape[1]
        object.__setattr__(self, "q", q)
        for name in SIGNAL_NAMES[1:]:
            object.__setattr__(self, name, check_signal(name, getattr(self, name), t.shape[0], n_dof))
        if self.truth is not None:
            if not isinstance(self.truth, Signals):
                raise DataError(f"'truth' must be a Signals or None, got {type(self.truth).__name__}")
            for name in SIGNAL_NAMES:
                check_signal(f"truth.{name}", getattr(self.truth, name), t.shape[0], n_dof)
        object.__setattr__(self, "joint_names", check_joint_names(self.joint_names, n_dof))
        if not isinstance(self.metadata, Mapping):
            raise DataError(f"'metadata' must be a dict, got {type(self.metadata).__name__}")
        object.__setattr__(self, "metadata", json.loads(_metadata_json(self.metadata)))

    # -- shape -------------------------------------------------------------------------------

    @property
    def n_samples(self) -> int:
        """Number of samples N."""
        return int(self.t.shape[0])

    @property
    def n_dof(self) -> int:
        """Number of joints n."""
        return int(self.q.shape[1])

    @property
    def dt(self) -> float:
        """Sampling interval in s: the median of the time steps."""
        return float(np.median(np.diff(self.t)))

    @property
    def measured(self) -> Signals:
        """The measured q, qd, qdd, tau as :class:`Signals`."""
        return Signals(self.q, self.qd, self.qdd, self.tau)

    # -- selection ---------------------------------------------------------------------------

    def _take(self, index) -> Dataset:
        truth = None
        if self.truth is not None:
            truth = Signals(*(getattr(self.truth, name)[index] for name in SIGNAL_NAMES))
        return Dataset(
            self.t[index],
            self.q[index],
            self.qd[index],
            self.qdd[index],
            self.tau[index],
            truth=truth,
            joint_names=list(self.joint_names),
            metadata=self._metadata_of(index),
        )

    def _metadata_of(self, index) -> dict[str, Any]:
        """The metadata of the samples ``index``: ``experiments`` (sample ranges) counted again over the kept
        samples, an experiment left with none dropped; ``segments`` (time ranges) clipped to the kept time span,
        one outside it dropped; everything else copied. A malformed ``experiments`` is copied as it is (the
        identification problem names it)."""
        keep = np.zeros(self.n_samples, bool)
        keep[index] = True
        metadata = dict(self.metadata)
        if keep.all():
            return metadata
        stored = metadata.get("experiments")
        if stored is not None:
            try:
                experiment_entries(self)  # checks the entries cover the samples in order
            except DataError:
                pass
            else:
                before = np.concatenate([[0], np.cumsum(keep)])  # kept samples before each index
                metadata["experiments"] = [
                    {**entry, "start": int(before[entry["start"]]), "stop": int(before[entry["stop"]])}
                    for entry in stored
                    if before[entry["stop"]] > before[entry["start"]]
                ]
        segments = metadata.get("segments")
        if isinstance(segments, list) and all(isinstance(seg, Mapping) for seg in segments):
            kept_t = self.t[keep]
            lo, hi = float(kept_t[0]), float(kept_t[-1]) + self.dt
            clipped = []
            for seg in segments:
                try:
                    start, end = max(float(seg["start"]), lo), min(float(seg["end"]), hi)
                except (KeyError, TypeError, ValueError):
                    clipped.append(seg)  # malformed: left for the problem to name
                    continue
                if end > start:
                    clipped.append({**seg, "start": start, "end": end})
            metadata["segments"] = clipped
        return metadata

    def slice(self, start: int | None = None, stop: int | None = None) -> Dataset:
        """Samples ``start:stop`` (Python slice semantics) as a new dataset; its metadata's experiment ranges and
        segments follow the samples kept (:meth:`_metadata_of`)."""
        return self._take(slice(start, stop))

    def subset(self, mask) -> Dataset:
        """Samples selected by a boolean mask (N,) or increasing integer indices, as a new dataset (metadata as
        :meth:`slice`).

        Raises:
            DataError: a mask of the wrong length or dtype, or indices that are not increasing.
        """
        index = np.asarray(mask)
        if index.dtype == bool:
            if index.shape != (self.n_samples,):
                raise DataError(f"boolean mask must have shape ({self.n_samples},), got {index.shape}")
        elif not np.issubdtype(index.dtype, np.integer) or index.ndim != 1:
            raise DataError(f"subset takes a boolean mask (N,) or integer indices, got {index.dtype} {index.shape}")
        return self._take(index)

    # -- files -------------------------------------------------------------------------------

    def save(self, path, overwrite: bool = False) -> Path:
        """Write the dataset in the native layout, the format chosen by the suffix (:mod:`robotid_sim.sim.recordings`).

        Files are written to a temporary file in the same folder, then moved into place
        (``os.replace``), so a crash never leaves a half-written file under the final name.

        Args:
            path: ``*.npz``, ``*.csv`` or ``*.mat``.
            overwrite: replace existing files (the data file and its ``.json`` sidecar). A
                sidecar already holding exactly this metadata is left as it is, so one dataset
                can be saved as ``d.npz`` and ``d.csv`` side by side (they share ``d.json``).

        Returns:
            The path written.

        Raises:
            DataError: unknown suffix, or the file (or its sidecar) exists and ``overwrite`` is
                False.
        """
        arrays = {name: getattr(self, name) for name in ("t",) + SIGNAL_NAMES}
        if self.truth is not None:
            arrays.update({TRUE_PREFIX + name: getattr(self.truth, name) for name in SIGNAL_NAMES})
        return write_native(
            Path(path),
            arrays,
            list(self.joint_names),
            _metadata_json(self.metadata),
            _metadata_json(self.metadata, indent=2) + "\n",
            overwrite,
        )

    def csv_columns(self) -> list[str]:
        """The CSV header of this dataset, in file order."""
        return native_csv_header(self.joint_names, self.truth is not None)


# ---------------------------------------------------------------------------------------------
# experiments


def experiment_entries(ds: Dataset) -> list[dict[str, Any]] | None:
    """``metadata["experiments"]`` of ``ds``, checked, or None when it has none.

    Each entry is ``{"name", "start", "stop", ...}``: a safe, unique name and a sample range (``stop``
    exclusive); the ranges cover the samples 0..N in order (:func:`robotid_sim.sim.logs.experiments`
    reads them, or splits a record without them at its time gaps).

    Raises:
        DataError: naming the problem: not a non-empty list, a bad or repeated name, ranges that do not
            cover the samples in order.
    """
    metadata = getattr(ds, "metadata", None)  # any record with t, q, ... (a duck-typed one has none)
    stored = metadata.get("experiments") if isinstance(metadata, dict) else None
    if stored is None:
        return None
    fix = "fix or remove metadata['experiments'] (without it a record is split at its time gaps)"
    if not isinstance(stored, list) or not stored:
        raise DataError(f"metadata['experiments'] must be a non-empty list of {{name, start, stop}}; {fix}")
    expected, seen = 0, set()
    for k, entry in enumerate(stored):
        if not isinstance(entry, Mapping):
            raise DataError(f"metadata['experiments'][{k}] must be a mapping {{name, start, stop}}; {fix}")
        name, start, stop = entry.get("name"), entry.get("start"), entry.get("stop")
        try:
            safe_name(name, "experiment name")
        except ConfigError as exc:
            raise DataError(f"metadata['experiments'][{k}]: {exc}") from None
        if name in seen:
            raise DataError(f"metadata['experiments'] names '{name}' twice; {fix}")
        seen.add(name)
        if any(isinstance(v, bool) or not isinstance(v, int) for v in (start, stop)):
            raise DataError(f"metadata['experiments'][{k}] ('{name}'): start and stop must be sample indices; {fix}")
        if start != expected or stop <= start:
            raise DataError(
                f"metadata['experiments'][{k}] ('{name}') covers samples {start}:{stop} but must start at {expected} "
                f"and end after it: the experiments cover the {ds.n_samples} samples in order; {fix}"
            )
        expected = stop
    if expected != ds.n_samples:
        raise DataError(
            f"metadata['experiments'] covers samples 0:{expected} but the dataset has {ds.n_samples} (its arrays were "
            f"cut without the metadata: Dataset.slice and subset keep the two in step); {fix}"
        )
    return [dict(entry) for entry in stored]


# ---------------------------------------------------------------------------------------------
# loading


def load_dataset(path, joint_names: list[str] | None = None) -> Dataset:
    """Load a dataset written by :meth:`Dataset.save`, or a recording in the same layout.

    Args:
        path: ``*.npz``, ``*.csv`` or ``*.mat``.
        joint_names: the joints to expect. For a CSV the columns are looked up by these names
            (default: the names of the ``q_<joint>`` columns, in order); for a file that stores
            its names they must match; for a .npz/.mat without names they are used as given.

    Returns:
        The :class:`Dataset`. When qd or qdd was not in the file it is derived by central
        differences and ``metadata["derived_signals"]`` says how.

    Raises:
        DataError: the file is missing or has an unknown suffix; a required array or column is
            missing (named, with the expected layout); a value is NaN or not a number (column
            and row named); t is not strictly increasing (row named); shapes disagree.
    """
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise DataError(f"cannot load '{path}': unknown suffix '{path.suffix}'; use one of {', '.join(FORMATS)}")
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "no such file"
        raise DataError(f"cannot load '{path}': {what}")
    if joint_names is not None:
        if isinstance(joint_names, str) or not isinstance(joint_names, Iterable):
            raise DataError(f"'joint_names' must be a list of strings, got {joint_names!r}")
        joint_names = check_joint_names(list(joint_names), len(list(joint_names)))
    try:
        fields = read_native(path, joint_names)
        truth = fields.pop("truth")
        return Dataset(**fields, truth=None if truth is None else Signals(**truth))
    except DataError as exc:
        if str(path) in str(exc):
            raise
        raise DataError(f"'{path}': {exc}") from None
    except OSError as exc:
        raise DataError(f"cannot read '{path}': {exc.strerror or exc}") from None


def load_dataset_for_robot(path, robot) -> Dataset:
    """Load a data file to identify ``robot`` with: joints are matched by name, never by position.

    Args:
        path: ``*.npz``, ``*.csv`` or ``*.mat``.
        robot: anything with ``name`` and ``joint_names`` (a Robot or a RobotStructure).

    A CSV's joint columns (``q_<joint>``, ``tau_<joint>``, ...) are looked up by the robot's
    joint names when the header has them all, in any column order (extra joints are ignored);
    otherwise by the generic names ``joint1`` … ``jointn``, read as the robot's joints in its
    order (a log written without the robot's names). A header of generic names is never matched by
    name: it must have exactly the robot's joint count. Files that store their joint names
    (.npz, .mat) load as they are: :class:`~robotid_sim.identification.IdentificationProblem`
    compares their robot and joint names with the robot's.

    Raises:
        DataError: as :func:`load_dataset`; or a CSV whose joint columns are neither the
            robot's joints nor ``joint1`` … ``jointn``, naming both lists and the header expected; or
            a CSV of generic columns for another joint count, naming both counts.
    """
    path = Path(path)
    names = list(robot.joint_names)
    if path.suffix.lower() != ".csv" or not path.is_file():
        return load_dataset(path)
    in_file = csv_joint_names(path)
    header = ",".join(native_csv_header(names, False)[: 1 + len(names)]) + ",...," + f"tau_{names[-1]}"
    if in_file and in_file == generic_joint_names(len(in_file)) and len(in_file) != len(names):
        raise DataError(
            f"'{path}' has {len(in_file)} joint columns (q_joint1 ... q_joint{len(in_file)}) but robot '{robot.name}' "
            f"has {len(names)} joints ({', '.join(names)}); identify it with the robot it was recorded on, or name "
            f"the columns after the robot's joints (header {header}; other columns are then ignored)"
        )
    if set(names) <= set(in_file):
        return load_dataset(path, joint_names=names)
    generic = generic_joint_names(len(names))
    if set(generic) <= set(in_file):
        return load_dataset(path, joint_names=generic)
    if not in_file:
        return load_dataset(path)  # its own message: no q_<joint> column
    raise DataError(
        f"'{path}' has joint columns for {', '.join(in_file)} but robot '{robot.name}' has joints "
        f"{', '.join(names)}; the columns are matched by name: name them after the robot's joints "
        f"(header {header}), or joint1..joint{len(names)} in the robot's joint order"
    )
