"""The measured dataset and its file formats: NPZ (+ JSON), CSV (+ JSON) and MATLAB .mat (SPEC §5).

A :class:`Dataset` holds the measured signals t (N,), q, qd, qdd, tau (N, n) in SI units, the
noise-free truth when it is known (a simulation) or None (a real-robot log), the joint names
and JSON-able metadata (robot, noise configuration, excitation, seed, rate, ...).

File layouts (``Dataset.save`` chooses by suffix; :func:`load_dataset` reads them back, bit for
bit):

* ``.npz`` — arrays ``t, q, qd, qdd, tau``, ``true_q, true_qd, true_qdd, true_tau`` when there
  is a truth, ``joint_names`` (strings) and ``metadata`` (a JSON string, so a lone .npz is
  complete). A sidecar ``<stem>.json`` next to it repeats the metadata for people to read; the
  loader uses the copy inside the .npz.
* ``.csv`` — one header line ``t,q_<joint>…,qd_<joint>…,qdd_<joint>…,tau_<joint>…`` followed
  by ``true_q_<joint>…,true_qd_<joint>…,true_qdd_<joint>…,true_tau_<joint>…`` when there is a
  truth; one row per sample, every number written with 17 significant digits (``%.17g``), which
  float64 reads back exactly. Metadata in the sidecar ``<stem>.json``.
* ``.mat`` — the same variables as the .npz (t as an N×1 column), ``joint_names`` and
  ``metadata`` as JSON strings (MATLAB: ``jsondecode``).

Files recorded elsewhere load too: only ``t``, ``q`` and ``tau`` are required (columns
``t, q_<joint>, tau_<joint>`` in a CSV). When ``qd`` or ``qdd`` is missing it is derived by
central differences — qd from q, qdd from qd (seed 001 Eq. 24 via ``numpy.gradient`` on the
sample times, second-order one-sided at the ends) — and ``metadata["derived_signals"]`` says
so. Derivatives of raw encoder data are noisy: filter them (``robotid_sim.signal``) before
identification. Extra CSV columns are ignored and listed in ``metadata["ignored_columns"]``.

A CSV's joint columns are found by name: ``load_dataset(path, joint_names=...)`` reads the columns
of those joints whatever their order, and :func:`load_dataset_for_robot` does so with a robot's
joint names (the CLI's ``identify``). Bad files are :class:`~robotid_sim.errors.DataError` errors
naming the file and the column or array: a binary or non-UTF-8 "CSV", an empty or foreign
.npz/.mat, complex, boolean or text values. Only the arrays a dataset uses are read from an .npz
(never unpickled, refusing absurd sizes: :func:`robotid_sim.safety.read_npz`) or a .mat.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from robotid_sim.errors import DataError
from robotid_sim.safety import atomic_write, read_npz

__all__ = [
    "FORMATS",
    "Dataset",
    "Signals",
    "csv_joint_names",
    "generic_joint_names",
    "load_dataset",
    "load_dataset_for_robot",
]

#: file suffixes understood by :meth:`Dataset.save` and :func:`load_dataset`
FORMATS = (".npz", ".csv", ".mat")
#: measured signals, in file order
SIGNAL_NAMES = ("q", "qd", "qdd", "tau")
#: prefix of the noise-free signals in files
TRUE_PREFIX = "true_"
#: characters a joint name may not contain (they would break the CSV header)
_FORBIDDEN_IN_NAMES = (",", '"', "'", "\n", "\r")

_DERIVED_NOTE = {
    "qd": "central differences of q (seed 001 Eq. 24, numpy.gradient on t, second-order ends)",
    "qdd": "central differences of qd (numpy.gradient on t, second-order ends)",
}


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def _metadata_json(metadata: Mapping[str, Any], indent: int | None = None) -> str:
    try:
        return json.dumps(dict(metadata), default=_json_default, allow_nan=False, indent=indent)
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"metadata must be JSON-able (str, numbers, lists, dicts, None; numpy values are converted): {exc}"
        ) from None


def _real_array(name: str, value, layout: str, source: str = "") -> np.ndarray:
    """``value`` as a float array copy; complex, boolean, text or object values are a DataError.

    Integers are accepted (and converted); booleans are not numbers here, and a complex array
    would silently lose its imaginary part.
    """
    raw = value if isinstance(value, np.ndarray) else None
    if raw is None:
        try:
            raw = np.asarray(value)
        except (TypeError, ValueError):  # ragged nested lists
            raise DataError(f"'{name}'{source} must be a numeric array {layout}, got ragged lists") from None
    kind = raw.dtype.kind
    if kind not in "iuf":
        what = {
            "b": "boolean",
            "c": "complex",
            "U": "text",
            "S": "bytes",
            "O": "Python object",
            "M": "datetime",
            "m": "timedelta",
            "V": "structured",
        }.get(kind, str(raw.dtype))
        fix = "keep only the real part" if kind == "c" else "store real numbers (float64)"
        raise DataError(f"'{name}'{source} must hold real numbers {layout}, got {what} values ({raw.dtype}); {fix}")
    return np.array(raw, dtype=float)


def _signal(name: str, value, n_samples: int, n_dof: int | None, source: str = "") -> np.ndarray:
    """``value`` as a finite float (N, n) copy, or DataError naming ``name``."""
    arr = _real_array(name, value, "(N, n)", source)
    if arr.ndim != 2:
        raise DataError(
            f"'{name}' must have shape (N, n) = ({n_samples}, n), got {arr.shape}; for a single joint use x[:, None]"
        )
    expected = (n_samples, arr.shape[1] if n_dof is None else n_dof)
    if arr.shape != expected:
        raise DataError(f"'{name}' must have shape {expected} like t and q, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        sample, joint = np.argwhere(~np.isfinite(arr))[0]
        raise DataError(
            f"'{name}' contains NaN or inf (first at sample {sample}, joint {joint}); remove or "
            "interpolate those samples"
        )
    return arr


def _time(value, source: str = "", first_line: int | None = None) -> np.ndarray:
    """``value`` as a finite, strictly increasing float (N,) copy, N >= 2, or DataError.

    ``source`` (e.g. " of 'log.csv'") and ``first_line`` (the file line of sample 0) make the
    message point into a file.
    """
    t = _real_array("t", value, "(N,)", source)
    if t.ndim != 1:
        raise DataError(f"'t' must have shape (N,), got {t.shape}")
    if t.shape[0] < 2:
        raise DataError(f"a dataset needs at least 2 samples, 't' has {t.shape[0]}")
    if not np.all(np.isfinite(t)):
        raise DataError(f"'t' contains NaN or inf (first at sample {np.argmax(~np.isfinite(t))})")
    steps = np.diff(t)
    if np.any(steps <= 0):
        i = int(np.argmax(steps <= 0)) + 1
        line = "" if first_line is None else f" (line {first_line + i})"
        raise DataError(
            f"'t'{source} must be strictly increasing; sample {i}{line} has t = {t[i]!r} after t = {t[i - 1]!r}"
        )
    return t


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
            object.__setattr__(self, name, _signal(name, getattr(self, name), n_samples, n_dof))

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
        t = _time(self.t)
        object.__setattr__(self, "t", t)
        q = _signal("q", self.q, t.shape[0], None)
        n_dof = q.shape[1]
        object.__setattr__(self, "q", q)
        for name in SIGNAL_NAMES[1:]:
            object.__setattr__(self, name, _signal(name, getattr(self, name), t.shape[0], n_dof))
        if self.truth is not None:
            if not isinstance(self.truth, Signals):
                raise DataError(f"'truth' must be a Signals or None, got {type(self.truth).__name__}")
            for name in SIGNAL_NAMES:
                _signal(f"truth.{name}", getattr(self.truth, name), t.shape[0], n_dof)
        object.__setattr__(self, "joint_names", _joint_names(self.joint_names, n_dof))
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
            from robotid_sim.sim.logs import experiments  # logs imports this module

            try:
                experiments(self)  # checks the entries cover the samples in order
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
        """Write the dataset, the format chosen by the suffix (module docstring).

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
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in FORMATS:
            raise DataError(f"cannot save '{path}': unknown suffix '{path.suffix}'; use one of {', '.join(FORMATS)}")
        if not path.parent.is_dir():
            raise DataError(f"cannot save '{path}': folder '{path.parent}' does not exist")
        meta_text = _metadata_json(self.metadata)
        sidecar = path.with_suffix(".json") if suffix in (".npz", ".csv") else None
        sidecar_text = _metadata_json(self.metadata, indent=2) + "\n"
        if sidecar is not None and sidecar.is_file() and (sidecar.read_text(encoding="utf-8") == sidecar_text):
            sidecar = None  # the same metadata is already there (e.g. d.npz saved before d.csv)
        if not overwrite:
            for target in (path, sidecar):
                if target is not None and target.exists():
                    raise DataError(
                        f"'{target}' already exists; refusing to overwrite it (pass "
                        "overwrite=True or choose another name)"
                    )
        if suffix == ".npz":
            atomic_write(path, lambda fh: np.savez(fh, **self._arrays(meta_text)))
        elif suffix == ".csv":
            atomic_write(path, self._write_csv, binary=False)
        else:
            arrays = self._arrays(meta_text)
            arrays["t"] = self.t[:, None]
            arrays["joint_names"] = json.dumps(self.joint_names)
            arrays["metadata"] = meta_text
            import scipy.io  # only for .mat files

            atomic_write(path, lambda fh: scipy.io.savemat(fh, arrays, oned_as="column"))
        if sidecar is not None:
            atomic_write(sidecar, lambda fh: fh.write(sidecar_text), binary=False)
        return path

    def _arrays(self, meta_text: str) -> dict[str, Any]:
        arrays: dict[str, Any] = {name: getattr(self, name) for name in ("t",) + SIGNAL_NAMES}
        if self.truth is not None:
            for name in SIGNAL_NAMES:
                arrays[TRUE_PREFIX + name] = getattr(self.truth, name)
        arrays["joint_names"] = np.array(self.joint_names, dtype=str)
        arrays["metadata"] = np.array(meta_text)
        return arrays

    def csv_columns(self) -> list[str]:
        """The CSV header of this dataset, in file order."""
        return _csv_columns(self.joint_names, self.truth is not None)

    def _write_csv(self, fh) -> None:
        blocks = [self.t[:, None]] + [getattr(self, name) for name in SIGNAL_NAMES]
        if self.truth is not None:
            blocks += [getattr(self.truth, name) for name in SIGNAL_NAMES]
        np.savetxt(
            fh,
            np.hstack(blocks),
            fmt="%.17g",
            delimiter=",",
            header=",".join(self.csv_columns()),
            comments="",
        )


def _joint_names(names, n_dof: int) -> list[str]:
    if names is None:
        return generic_joint_names(n_dof)
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise DataError(f"'joint_names' must be a list of {n_dof} strings, got {names!r}")
    names = list(names)
    if len(names) != n_dof:
        raise DataError(f"'joint_names' has {len(names)} names but the signals have {n_dof} joints")
    for name in names:
        if not isinstance(name, str) or not name or name != name.strip():
            raise DataError(f"joint name {name!r} must be a non-empty string without surrounding spaces")
        if any(ch in name for ch in _FORBIDDEN_IN_NAMES):
            raise DataError(f"joint name {name!r} must not contain commas, quotes or newlines")
    if len(set(names)) != len(names):
        duplicates = sorted({name for name in names if names.count(name) > 1})
        raise DataError(f"joint names must be unique, repeated: {', '.join(duplicates)}")
    return names


def _csv_columns(joint_names: list[str], with_truth: bool) -> list[str]:
    prefixes = [f"{name}_" for name in SIGNAL_NAMES]
    if with_truth:
        prefixes += [f"{TRUE_PREFIX}{name}_" for name in SIGNAL_NAMES]
    return ["t"] + [prefix + joint for prefix in prefixes for joint in joint_names]


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
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise DataError(f"cannot load '{path}': unknown suffix '{path.suffix}'; use one of {', '.join(FORMATS)}")
    if not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "no such file"
        raise DataError(f"cannot load '{path}': {what}")
    if joint_names is not None:
        if isinstance(joint_names, str) or not isinstance(joint_names, Iterable):
            raise DataError(f"'joint_names' must be a list of strings, got {joint_names!r}")
        joint_names = _joint_names(list(joint_names), len(list(joint_names)))
    try:
        return _load(path, suffix, joint_names)
    except DataError as exc:
        if str(path) in str(exc):
            raise
        raise DataError(f"'{path}': {exc}") from None
    except OSError as exc:
        raise DataError(f"cannot read '{path}': {exc.strerror or exc}") from None


#: every array a dataset file may hold (others are ignored, and never read)
_FILE_KEYS = ("t", *SIGNAL_NAMES, *(TRUE_PREFIX + name for name in SIGNAL_NAMES), "joint_names", "metadata")
_EXPECTED_ARRAYS = "t, q, tau (required) and qd, qdd, true_q, true_qd, true_qdd, true_tau (optional)"


def _load(path: Path, suffix: str, joint_names: list[str] | None) -> Dataset:
    if suffix == ".csv":
        return _load_csv(path, joint_names)
    if suffix == ".npz":
        arrays = read_npz(path, f"'{path}'", keys=list(_FILE_KEYS))
    else:
        arrays = _read_mat(path)
    if not any(key in arrays for key in ("t", "q", "tau")):
        kind = "an .npz archive" if suffix == ".npz" else "a .mat file"
        raise DataError(
            f"'{path}' holds none of the dataset arrays (it is empty, or {kind} of something else); "
            f"expected {_EXPECTED_ARRAYS}"
        )
    stored_names = _stored_joint_names(arrays.pop("joint_names", None), path)
    metadata = _stored_metadata(arrays.pop("metadata", None), path)
    if stored_names is not None and joint_names is not None and list(joint_names) != stored_names:
        raise DataError(
            f"'{path}' stores joint names {stored_names}, which differ from the expected {list(joint_names)}"
        )
    names = stored_names if stored_names is not None else joint_names
    return _dataset_from_arrays(arrays, names, metadata, f"'{path}'")


def _read_mat(path: Path) -> dict[str, np.ndarray]:
    """The dataset variables of a MATLAB file (others are not read), oriented (N,) and (N, n)."""
    try:
        import scipy.io  # only for .mat files

        raw = scipy.io.loadmat(path, variable_names=list(_FILE_KEYS))
    except NotImplementedError as exc:  # MATLAB v7.3 (HDF5) files
        raise DataError(f"cannot read '{path}' as .mat: {exc}; save it with MATLAB's '-v7' option") from None
    except MemoryError:
        raise DataError(f"cannot read '{path}' as .mat: it does not fit in memory") from None
    except Exception as exc:  # scipy's parser meets arbitrary bytes: any failure means "not a .mat file"
        raise DataError(f"cannot read '{path}' as .mat ({type(exc).__name__}: {exc}); is it a MATLAB file?") from None
    arrays = {key: value for key, value in raw.items() if not key.startswith("__")}
    return _orient_mat_arrays(arrays)


def _string_value(value) -> str | None:
    """A string stored in an .npz (0-d str array) or a .mat (1-element str array)."""
    arr = np.asarray(value)
    if arr.dtype.kind == "U" and arr.size == 1:
        return str(arr.reshape(()))
    return None


def _stored_joint_names(value, path: Path) -> list[str] | None:
    if value is None:
        return None
    arr = np.asarray(value)
    text = _string_value(arr)
    if text is not None and text.startswith("["):  # .mat: JSON list
        try:
            names = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"'{path}': 'joint_names' is not valid JSON: {exc}") from None
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise DataError(f"'{path}': 'joint_names' must be a JSON list of strings, got {text[:80]!r}")
        return names
    if arr.dtype.kind == "U":  # .npz: array of str; MATLAB char matrix: one padded row per name
        return [str(name).strip() for name in arr.ravel()]
    if arr.dtype == object:  # MATLAB cell array of char
        return [str(np.asarray(item).ravel()[0]).strip() for item in arr.ravel()]
    raise DataError(f"'{path}': 'joint_names' must hold strings, got dtype {arr.dtype}")


def _stored_metadata(value, path: Path) -> dict[str, Any]:
    if value is None:
        return {}
    text = _string_value(value)
    try:
        metadata = json.loads(text) if text is not None else None
    except json.JSONDecodeError as exc:
        raise DataError(f"'{path}': 'metadata' is not valid JSON: {exc}") from None
    if not isinstance(metadata, dict):
        raise DataError(f"'{path}': 'metadata' must be a JSON object string")
    return metadata


def _orient_mat_arrays(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """MATLAB stores t as N×1 or 1×N and may store signals n×N: bring them to (N,) and (N, n)."""
    out = dict(arrays)
    if "t" in out and np.asarray(out["t"]).dtype.kind in "iuf" and np.asarray(out["t"]).ndim >= 1:
        t = np.asarray(out["t"])
        if t.ndim == 2 and 1 in t.shape:
            out["t"] = t.ravel()
        n_samples = out["t"].shape[0]
        for key, value in arrays.items():
            arr = np.asarray(value)
            if key in _all_signal_keys() and arr.ndim == 2 and arr.shape[0] != n_samples and arr.shape[1] == n_samples:
                out[key] = arr.T
    return out


def _all_signal_keys() -> tuple[str, ...]:
    return SIGNAL_NAMES + tuple(TRUE_PREFIX + name for name in SIGNAL_NAMES)


def _derive(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Central-difference derivative along time (seed 001 Eq. 24), second-order ends."""
    if t.shape[0] < 3:
        raise DataError(f"deriving a velocity needs at least 3 samples, got {t.shape[0]}")
    return np.gradient(x, t, axis=0, edge_order=2)


def _dataset_from_arrays(arrays: dict[str, np.ndarray], joint_names, metadata: dict[str, Any], source: str) -> Dataset:
    expected = _EXPECTED_ARRAYS
    for key in ("t", "q", "tau"):
        if key not in arrays:
            raise DataError(f"missing array '{key}' in {source}; expected {expected}")
    true_present = [k for k in _all_signal_keys()[4:] if k in arrays]
    if true_present and len(true_present) != 4:
        missing = [k for k in _all_signal_keys()[4:] if k not in arrays]
        raise DataError(
            f"missing array '{missing[0]}' in {source}: the truth needs all of true_q, true_qd, "
            "true_qdd, true_tau, or none"
        )
    t = _time(arrays["t"], source=f" in {source}")
    signals = {"q": _signal("q", arrays["q"], t.shape[0], None)}
    if joint_names is not None and len(joint_names) != signals["q"].shape[1]:
        raise DataError(
            f"{source} has {signals['q'].shape[1]} joints in 'q' but {len(joint_names)} joint names were given "
            f"({', '.join(joint_names)})"
        )
    n_dof = signals["q"].shape[1]
    derived = {}
    for name, below in (("qd", "q"), ("qdd", "qd")):
        if name in arrays:
            signals[name] = _signal(name, arrays[name], t.shape[0], n_dof)
        else:
            signals[name] = _derive(t, signals[below])
            derived[name] = _DERIVED_NOTE[name]
    if derived:
        metadata = dict(metadata)
        metadata["derived_signals"] = {**metadata.get("derived_signals", {}), **derived}
    truth = None
    if true_present:
        truth = Signals(*(arrays[TRUE_PREFIX + name] for name in SIGNAL_NAMES))
    return Dataset(
        t,
        signals["q"],
        signals["qd"],
        signals["qdd"],
        arrays["tau"],
        truth=truth,
        joint_names=joint_names,
        metadata=metadata,
    )


def _csv_text(path: Path) -> str:
    """The text of a CSV file, refusing binary and non-UTF-8 files with a clear DataError."""
    raw = path.read_bytes()
    if b"\x00" in raw:
        raise DataError(
            f"'{path}' is not a CSV text file (it contains NUL bytes: binary data); export the log as "
            "comma-separated UTF-8 text with a header line like 't,q_joint1,tau_joint1'"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"'{path}' is not UTF-8 text (undecodable byte 0x{raw[exc.start]:02x} on line {line}); export the log "
            "as comma-separated UTF-8 text"
        ) from None


def csv_joint_names(path) -> list[str]:
    """The joint names of a CSV dataset's ``q_<joint>`` columns, in file order (header only read).

    Raises:
        DataError: not a UTF-8 text CSV, or an empty file.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.readline(1_000_000)
    except OSError as exc:
        raise DataError(f"cannot read '{path}': {exc.strerror or exc}") from None
    if b"\x00" in head:
        raise DataError(
            f"'{path}' is not a CSV text file (it contains NUL bytes: binary data); export the log as "
            "comma-separated UTF-8 text with a header line like 't,q_joint1,tau_joint1'"
        )
    try:
        header = head.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(
            f"'{path}' is not UTF-8 text (its header line cannot be decoded); export the log as comma-separated "
            "UTF-8 text"
        ) from None
    columns = [name.strip().strip('"') for name in header.strip().lstrip("#").split(",")]
    return [c[2:] for c in columns if c.startswith("q_")]


def generic_joint_names(n_dof: int) -> list[str]:
    """The names a dataset gets when none are given: ``joint1`` … ``jointn``."""
    return [f"joint{i + 1}" for i in range(n_dof)]


def load_dataset_for_robot(path, robot) -> Dataset:
    """Load a data file to identify ``robot`` with: joints are matched by name, never by position.

    Args:
        path: ``*.npz``, ``*.csv`` or ``*.mat``.
        robot: anything with ``name`` and ``joint_names`` (a Robot or a RobotStructure).

    A CSV's joint columns (``q_<joint>``, ``tau_<joint>``, ...) are looked up by the robot's
    joint names when the header has them all, in any column order (extra joints are ignored);
    otherwise by the generic names ``joint1`` … ``jointn``, read as the robot's joints in its
    order (a log written without the robot's names). Files that store their joint names
    (.npz, .mat) load as they are: :class:`~robotid_sim.identification.IdentificationProblem`
    compares their robot and joint names with the robot's.

    Raises:
        DataError: as :func:`load_dataset`; or a CSV whose joint columns are neither the
            robot's joints nor ``joint1`` … ``jointn``, naming both lists and the header expected.
    """
    path = Path(path)
    names = list(robot.joint_names)
    if path.suffix.lower() != ".csv" or not path.is_file():
        return load_dataset(path)
    in_file = csv_joint_names(path)
    if set(names) <= set(in_file):
        return load_dataset(path, joint_names=names)
    generic = generic_joint_names(len(names))
    if set(generic) <= set(in_file):
        return load_dataset(path, joint_names=generic)
    if not in_file:
        return load_dataset(path)  # its own message: no q_<joint> column
    header = ",".join(_csv_columns(names, False)[: 1 + len(names)]) + ",...," + f"tau_{names[-1]}"
    raise DataError(
        f"'{path}' has joint columns for {', '.join(in_file)} but robot '{robot.name}' has joints "
        f"{', '.join(names)}; the columns are matched by name: name them after the robot's joints "
        f"(header {header}), or joint1..joint{len(names)} in the robot's joint order"
    )


def _load_csv(path: Path, joint_names) -> Dataset:
    lines = _csv_text(path).splitlines()
    header = lines[0] if lines else ""
    if not header.strip():
        raise DataError(f"'{path}' is empty; expected a header line like 't,q_joint1,tau_joint1'")
    columns = [name.strip().strip('"') for name in header.strip().lstrip("#").split(",")]
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise DataError(f"'{path}': repeated column(s) {', '.join(duplicates)}")
    if joint_names is None:
        joint_names = [c[2:] for c in columns if c.startswith("q_")]
        if not joint_names:
            raise DataError(
                f"'{path}' has no position column 'q_<joint>'; expected a header like "
                "t,q_joint1,...,tau_joint1,... (qd_*, qdd_*, true_* optional)"
            )
    joint_names = list(joint_names)
    required = ["t"] + [f"{s}_{j}" for s in ("q", "tau") for j in joint_names]
    expected = ",".join(required)
    for column in required:
        if column not in columns:
            raise DataError(
                f"missing column '{column}' in '{path}'; expected header {expected} "
                "(qd_*, qdd_* and true_* columns optional)"
            )
    groups = {"t": ["t"]}
    for name in _all_signal_keys():
        group = [f"{name}_{j}" for j in joint_names]
        present = [c for c in group if c in columns]
        if present and len(present) != len(group):
            missing = next(c for c in group if c not in columns)
            raise DataError(
                f"missing column '{missing}' in '{path}': the '{name}_*' columns must cover "
                f"every joint ({', '.join(group)})"
            )
        if present:
            groups[name] = group
    true_groups = [name for name in _all_signal_keys()[4:] if name in groups]
    if true_groups and len(true_groups) != 4:
        missing = next(f"{n}_{joint_names[0]}" for n in _all_signal_keys()[4:] if n not in groups)
        raise DataError(
            f"missing column '{missing}' in '{path}': the truth needs all true_q_*, true_qd_*, "
            "true_qdd_*, true_tau_* columns, or none"
        )
    data = _read_csv_numbers(path, columns, lines)
    position = {c: i for i, c in enumerate(columns)}
    for group in groups.values():
        for column in group:
            values = data[:, position[column]]
            bad = ~np.isfinite(values)
            if np.any(bad):
                row = int(np.argmax(bad))
                raise DataError(
                    f"column '{column}' of '{path}' has {values[row]} at sample {row} "
                    f"(line {row + 2}); remove or interpolate that sample"
                )
    _time(data[:, position["t"]], source=f" of '{path}'", first_line=2)
    arrays = {
        name: (data[:, position["t"]] if name == "t" else data[:, [position[c] for c in group]])
        for name, group in groups.items()
    }
    metadata: dict[str, Any] = {}
    sidecar = path.with_suffix(".json")
    if sidecar.is_file():
        try:
            metadata = json.loads(sidecar.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(
                f"metadata sidecar '{sidecar}' is not valid JSON ({exc}); fix or delete it (the CSV loads without it)"
            ) from None
        if not isinstance(metadata, dict):
            raise DataError(f"metadata sidecar '{sidecar}' must hold a JSON object")
    used = {c for group in groups.values() for c in group}
    ignored = [c for c in columns if c not in used]
    if ignored:
        metadata = {**metadata, "ignored_columns": ignored}
    return _dataset_from_arrays(arrays, joint_names, metadata, f"'{path}'")


def _read_csv_numbers(path: Path, columns: list[str], lines: list[str]) -> np.ndarray:
    """All data rows as floats (rows, columns); a bad cell is reported by column and line."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": see below
            data = np.loadtxt(lines[1:], delimiter=",", ndmin=2, dtype=float)
    except ValueError:
        data = None
    if data is not None and data.shape[1:] == (len(columns),) and data.shape[0] > 0:
        return data
    # find the first offending cell for the message
    n_rows = 0
    for line_no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        n_rows += 1
        cells = line.split(",")
        if len(cells) != len(columns):
            raise DataError(
                f"line {line_no} of '{path}' has {len(cells)} values but the header has {len(columns)} columns"
            )
        for column, cell in zip(columns, cells, strict=True):
            try:
                float(cell)
            except ValueError:
                what = "an empty value" if not cell.strip() else f"the non-number {cell.strip()!r}"
                raise DataError(
                    f"column '{column}' of '{path}' has {what} at sample {n_rows - 1} (line {line_no})"
                ) from None
    if n_rows == 0:
        raise DataError(f"'{path}' has a header but no data rows")
    raise DataError(f"cannot parse '{path}' as comma-separated numbers")
