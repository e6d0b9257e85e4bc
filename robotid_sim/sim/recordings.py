"""Recording files: the one reader of CSV, NPZ and MAT files through a layout, and the native layout (SPEC §5).

A *layout* says where a file keeps each signal: its format (``npz``, ``csv``, ``mat``) and, per signal
(``t``, ``q``, ``qd``, ``qdd``, ``tau``, and for our own files ``true_q`` … ``true_tau``), an array name
(NPZ/MAT) or, in a CSV, the name of the time column and the column *prefix* of each joint signal
(columns ``<prefix><joint>``). The native layout (:data:`NATIVE_KEYS`) is what
:meth:`~robotid_sim.sim.dataset.Dataset.save` writes and :func:`~robotid_sim.sim.dataset.load_dataset`
reads; a :class:`~robotid_sim.sim.logs.LogSource` describes any other layout and defaults to the native
one.

The native files:

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

Files recorded elsewhere load too: only ``t``, ``q`` and ``tau`` are required. When ``qd`` or ``qdd``
is missing it is derived by central differences (:func:`derive`). Only the arrays a layout names are
read from an .npz (never unpickled, refusing absurd sizes: :func:`robotid_sim.safety.read_npz`) or a
.mat. Bad files are :class:`~robotid_sim.errors.DataError` errors naming the file and the column or
array: a binary or non-UTF-8 "CSV", an empty or foreign .npz/.mat, complex, boolean or text values.

This module also holds the checks every recorded array passes (:func:`real_array`,
:func:`check_time`, :func:`check_signal`, :func:`check_joint_names`), shared by the container
(:class:`~robotid_sim.sim.dataset.Dataset`) and the readers.
"""

from __future__ import annotations

import json
import warnings
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from robotid_sim.errors import DataError
from robotid_sim.safety import atomic_write, read_npz
from robotid_sim.signal import stamp_order_error, time_derivative

__all__ = [
    "DERIVED_NOTE",
    "FORMATS",
    "NATIVE_KEYS",
    "NATIVE_SIGNALS",
    "SIGNAL_NAMES",
    "SUFFIX_FORMAT",
    "TRUE_PREFIX",
    "CsvFile",
    "check_joint_names",
    "check_signal",
    "check_time",
    "csv_joint_names",
    "derive",
    "generic_joint_names",
    "native_csv_header",
    "orient_signal",
    "orient_time",
    "read_arrays",
    "read_csv",
    "read_native",
    "read_sidecar",
    "real_array",
    "stored_joint_names",
    "stored_metadata",
    "write_native",
]

#: file suffixes of the native layout (:meth:`Dataset.save`, :func:`load_dataset`)
FORMATS = (".npz", ".csv", ".mat")
#: file suffix -> format name
SUFFIX_FORMAT = {".npz": "npz", ".csv": "csv", ".mat": "mat"}
#: measured signals, in file order
SIGNAL_NAMES = ("q", "qd", "qdd", "tau")
#: prefix of the noise-free signals in files
TRUE_PREFIX = "true_"
#: every signal of a native file, in file order
NATIVE_SIGNALS = ("t", *SIGNAL_NAMES, *(TRUE_PREFIX + name for name in SIGNAL_NAMES))
#: the native layout: signal -> array name (NPZ/MAT) or time column / joint column prefix (CSV)
NATIVE_KEYS: dict[str, dict[str, str]] = {
    "npz": {name: name for name in NATIVE_SIGNALS},
    "mat": {name: name for name in NATIVE_SIGNALS},
    "csv": {"t": "t", **{name: f"{name}_" for name in NATIVE_SIGNALS[1:]}},
}
#: how a missing qd or qdd is derived (the note a loaded dataset's ``metadata["derived_signals"]`` keeps)
DERIVED_NOTE = {
    "qd": "central differences of q (seed 001 Eq. 24, numpy.gradient on t, second-order ends)",
    "qdd": "central differences of qd (numpy.gradient on t, second-order ends)",
}
#: characters a joint name may not contain (they would break the CSV header)
_FORBIDDEN_IN_NAMES = (",", '"', "'", "\n", "\r")
#: every array a native file may hold (others are ignored, and never read)
_NATIVE_ARRAYS = (*NATIVE_SIGNALS, "joint_names", "metadata")
_EXPECTED_ARRAYS = "t, q, tau (required) and qd, qdd, true_q, true_qd, true_qdd, true_tau (optional)"
_EXPECTED_HEADER = "a header line like 't,q_joint1,tau_joint1'"


# ---------------------------------------------------------------------------------------------
# checks of recorded arrays


def real_array(name: str, value, layout: str, source: str = "") -> np.ndarray:
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


def check_signal(name: str, value, n_samples: int, n_dof: int | None, source: str = "") -> np.ndarray:
    """``value`` as a finite float (N, n) copy, or DataError naming ``name``."""
    arr = real_array(name, value, "(N, n)", source)
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


def check_time(value, source: str = "", first_line: int | None = None) -> np.ndarray:
    """``value`` as a finite, strictly increasing float (N,) copy, N >= 2, or DataError.

    ``source`` (e.g. " of 'log.csv'") and ``first_line`` (the file line of sample 0) make the
    message point into a file; repeated and backward stamps are counted and the first few named
    (:func:`~robotid_sim.signal.stamp_order_error`).
    """
    t = real_array("t", value, "(N,)", source)
    if t.ndim != 1:
        raise DataError(f"'t' must have shape (N,), got {t.shape}")
    if t.shape[0] < 2:
        raise DataError(f"a dataset needs at least 2 samples, 't' has {t.shape[0]}")
    if not np.all(np.isfinite(t)):
        raise DataError(f"'t' contains NaN or inf (first at sample {np.argmax(~np.isfinite(t))})")
    problem = stamp_order_error(
        t, "sample {}".format if first_line is None else lambda i: f"sample {i} (line {first_line + i})"
    )
    if problem is not None:
        raise DataError(f"'t'{source} must be strictly increasing; {problem}")
    return t


def generic_joint_names(n_dof: int) -> list[str]:
    """The names a dataset gets when none are given: ``joint1`` … ``jointn``."""
    return [f"joint{i + 1}" for i in range(n_dof)]


def check_joint_names(names, n_dof: int) -> list[str]:
    """``names`` as a list of ``n_dof`` unique joint names fit for a CSV header (default: generic names)."""
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


def derive(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Central-difference derivative of ``x`` (N, n) on its time stamps ``t`` (N,), even or jittery (seed 001
    Eq. 24 and its uneven-step form, second-order ends: :func:`~robotid_sim.signal.time_derivative`)."""
    if t.shape[0] < 3:
        raise DataError(f"deriving a velocity needs at least 3 samples, got {t.shape[0]}")
    return time_derivative(x, t)


# ---------------------------------------------------------------------------------------------
# orientation: MATLAB and other tools store t as N×1 or 1×N, and joint signals n×N or (N,)


def orient_time(value):
    """A time array as a vector: an N×1 or 1×N array is flattened; anything else is returned as it is."""
    arr = np.asarray(value)
    return arr.ravel() if arr.ndim == 2 and 1 in arr.shape else value


def orient_signal(value, n_samples: int):
    """A joint signal as (N, m): (N,) is one joint, (m, N) is transposed when that is unambiguous.

    Anything else is returned as it is, for the caller's shape check to name.
    """
    arr = np.asarray(value)
    if arr.ndim == 1 and arr.shape[0] == n_samples:
        return arr[:, None]
    if arr.ndim == 2 and arr.shape[0] != n_samples and arr.shape[1] == n_samples:
        return arr.T
    return value


# ---------------------------------------------------------------------------------------------
# NPZ and MAT files


def _not_a(fmt: str, path: Path, why: str, hint: str) -> DataError:
    """The file is not what its suffix (or a layout's ``format``) says."""
    what = f"'{path}' is not an .npz file" if fmt == "npz" else f"cannot read '{path}' as .mat"
    kind = "a NumPy archive (numpy.savez)" if fmt == "npz" else "a MATLAB file (-v7 or older)"
    return DataError(f"{what} ({why}); is it {kind}?{hint}")


def read_arrays(path: Path, fmt: str, names: Iterable[str], hint: str = "") -> tuple[dict[str, Any], list[str]]:
    """The arrays ``names`` of an NPZ or MAT file (others are never read), and the names of all its arrays.

    Args:
        path: the file.
        fmt: ``npz`` or ``mat``.
        names: the arrays to read; those the file lacks are absent from the result.
        hint: a sentence added to the message when the file is not of format ``fmt``.

    Raises:
        DataError: the file is not an .npz (a zip archive) or a MATLAB (-v7 or older) file, an array
            cannot be read without unpickling, is damaged or absurdly large.
    """
    wanted = sorted(set(names))
    if fmt == "npz":
        if not zipfile.is_zipfile(path):
            raise _not_a("npz", path, "it is not a zip archive", hint)
        with zipfile.ZipFile(path) as archive:
            present = [name[:-4] for name in archive.namelist() if name.endswith(".npy")]
        return read_npz(path, f"'{path}'", keys=wanted), present
    import scipy.io  # only for .mat files

    try:
        present = [name for name, _, _ in scipy.io.whosmat(path)]
        raw = scipy.io.loadmat(path, variable_names=wanted)
    except NotImplementedError as exc:  # MATLAB v7.3 (HDF5) files
        raise DataError(f"cannot read '{path}' as .mat: {exc}; save it with MATLAB's '-v7' option") from None
    except MemoryError:
        raise DataError(f"cannot read '{path}' as .mat: it does not fit in memory") from None
    except Exception as exc:  # scipy's parser meets arbitrary bytes: any failure means "not a .mat file"
        raise _not_a("mat", path, f"{type(exc).__name__}: {exc}", hint) from None
    return {key: value for key, value in raw.items() if not key.startswith("__")}, present


def _string_value(value) -> str | None:
    """A string stored in an .npz (0-d str array) or a .mat (1-element str array)."""
    arr = np.asarray(value)
    if arr.dtype.kind == "U" and arr.size == 1:
        return str(arr.reshape(()))
    return None


def stored_joint_names(value, where: str) -> list[str] | None:
    """The joint names an NPZ or MAT file stores (str or bytes array, JSON list, MATLAB char matrix or cell array).

    Raises:
        DataError: ``value`` is not one of those forms (``where`` names the file).
    """
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.dtype.kind == "S":
        arr = np.char.decode(arr, "utf-8")
    text = _string_value(arr)
    if text is not None and text.startswith("["):  # .mat: JSON list
        try:
            names = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: 'joint_names' is not valid JSON: {exc}") from None
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise DataError(f"{where}: 'joint_names' must be a JSON list of strings, got {text[:80]!r}")
        return names
    if arr.dtype.kind == "U":  # .npz: array of str; MATLAB char matrix: one padded row per name
        return [str(name).strip() for name in arr.ravel()]
    if arr.dtype == object:  # MATLAB cell array of char
        return [str(np.asarray(item).ravel()[0]).strip() for item in arr.ravel()]
    raise DataError(f"{where}: 'joint_names' must hold strings, got dtype {arr.dtype}")


def stored_metadata(value, where: str) -> dict[str, Any]:
    """The metadata an NPZ or MAT file stores as a JSON object string ({} when there is none).

    Raises:
        DataError: not a JSON object string (``where`` names the file).
    """
    if value is None:
        return {}
    text = _string_value(value)
    try:
        metadata = json.loads(text) if text is not None else None
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: 'metadata' is not valid JSON: {exc}") from None
    if not isinstance(metadata, dict):
        raise DataError(f"{where}: 'metadata' must be a JSON object string")
    return metadata


# ---------------------------------------------------------------------------------------------
# CSV files


def _csv_decoded(raw: bytes, path: Path) -> str:
    """``raw`` as text, refusing binary and non-UTF-8 bytes with a clear DataError."""
    if b"\x00" in raw:
        raise DataError(
            f"'{path}' is not a CSV text file (it contains NUL bytes: binary data); export the log as "
            f"comma-separated UTF-8 text with {_EXPECTED_HEADER}"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"'{path}' is not UTF-8 text (undecodable byte 0x{raw[exc.start]:02x} on line {line}); export the log "
            "as comma-separated UTF-8 text"
        ) from None


def _header_columns(line: str) -> list[str]:
    """The column names of a CSV header line (a leading '#', spaces and double quotes removed)."""
    return [name.strip().strip('"') for name in line.strip().lstrip("#").split(",")]


@dataclass(frozen=True)
class CsvFile:
    """A CSV file's header and lines; its numbers are parsed on demand, only in the columns asked for.

    Attributes:
        path: the file.
        header: the column names, in file order.
        lines: every line of the file, the header first.
    """

    path: Path
    header: list[str]
    lines: list[str]

    @property
    def where(self) -> str:
        """The file, quoted, for messages."""
        return f"'{self.path}'"

    @cached_property
    def _data_lines(self) -> list[int]:
        return [k for k, text in enumerate(self.lines[1:], 2) if text.strip() and not text.startswith("#")]

    def line_of(self, sample: int) -> int:
        """The file line (1-based) of data row ``sample`` (0-based; blank and '#' lines skipped)."""
        return self._data_lines[sample]

    def by_prefix(self, t_column: str, prefixes: Mapping[str, str]) -> dict[str, dict[str, int]]:
        """Signal -> {column suffix: header position} for the columns ``<prefix><suffix>`` of each signal.

        The longest prefix owns a column (``qd_`` over ``q`` when both match); the time column
        ``t_column`` belongs to no signal.
        """
        owned: dict[str, dict[str, int]] = {signal: {} for signal in prefixes}
        for position, column in enumerate(self.header):
            if column == t_column:
                continue
            matching = [s for s, p in prefixes.items() if column.startswith(p) and len(column) > len(p)]
            if matching:
                signal = max(matching, key=lambda s: len(prefixes[s]))
                owned[signal][column[len(prefixes[signal]) :]] = position
        return owned

    def numbers(self, positions: list[int]) -> np.ndarray:
        """The columns ``positions`` of every data row as floats (rows, len(positions)).

        Parsed by ``numpy.loadtxt`` (the same float64 value a ``%.17g`` writer wrote); on failure
        the first bad row or cell is found again for the message.

        Raises:
            DataError: a row with another number of values than the header, an empty or non-number
                cell (column and line named), or no data rows.
        """
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "input contained no data": reported below
                data = np.loadtxt(self.lines[1:], delimiter=",", ndmin=2, usecols=positions, dtype=float)
        except ValueError:
            data = None
        if data is not None and data.shape[0] > 0:
            return data
        self._raise_first_bad_cell(positions)
        raise DataError(f"cannot parse '{self.path}' as comma-separated numbers")

    def _raise_first_bad_cell(self, positions: list[int]) -> None:
        """The DataError naming the first offending row or cell (only called on failure)."""
        sample = -1
        for line_no, text in enumerate(self.lines[1:], start=2):
            if not text.strip() or text.startswith("#"):
                continue
            sample += 1
            cells = text.split(",")
            if len(cells) != len(self.header):
                raise DataError(
                    f"line {line_no} of '{self.path}' has {len(cells)} values but the header has "
                    f"{len(self.header)} columns"
                )
            for position in positions:
                try:
                    float(cells[position])
                except ValueError:
                    cell = cells[position].strip()
                    what = "an empty value" if not cell else f"the non-number {cell!r}"
                    raise DataError(
                        f"column '{self.header[position]}' of '{self.path}' has {what} at sample {sample} (line "
                        f"{line_no}); remove or interpolate that sample"
                    ) from None
        if sample < 0:
            raise DataError(f"'{self.path}' has a header but no data rows")


def read_csv(path: Path) -> CsvFile:
    """A CSV file's text, split into its header and lines (the numbers are parsed by :meth:`CsvFile.numbers`).

    Raises:
        DataError: a binary or non-UTF-8 file, an empty file, or a repeated column name.
    """
    lines = _csv_decoded(path.read_bytes(), path).splitlines()
    if not lines or not lines[0].strip():
        raise DataError(f"'{path}' is empty; expected {_EXPECTED_HEADER}")
    header = _header_columns(lines[0])
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise DataError(f"'{path}': repeated column(s) {', '.join(repeated)}; each column needs its own name")
    return CsvFile(path, header, lines)


def read_sidecar(path: Path, strict: bool) -> dict[str, Any]:
    """The metadata in the sidecar ``<stem>.json`` of a CSV file ({} when there is none).

    Args:
        path: the CSV file.
        strict: a sidecar that is not a JSON object is a DataError (our own files); otherwise it is
            ignored (a foreign JSON next to a recording is not needed).
    """
    sidecar = path.with_suffix(".json")
    if not sidecar.is_file():
        return {}
    try:
        metadata = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        if not strict:
            return {}
        raise DataError(
            f"metadata sidecar '{sidecar}' is not valid JSON ({exc}); fix or delete it (the CSV loads without it)"
        ) from None
    if not isinstance(metadata, dict):
        if not strict:
            return {}
        raise DataError(f"metadata sidecar '{sidecar}' must hold a JSON object")
    return metadata


def csv_joint_names(path) -> list[str]:
    """The joint names of a native CSV's ``q_<joint>`` columns, in file order (header only read).

    Raises:
        DataError: not a UTF-8 text CSV, or an empty file.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.readline(1_000_000)
    except OSError as exc:
        raise DataError(f"cannot read '{path}': {exc.strerror or exc}") from None
    prefix = NATIVE_KEYS["csv"]["q"]
    return [c[len(prefix) :] for c in _header_columns(_csv_decoded(head, path)) if c.startswith(prefix)]


def native_csv_header(joint_names: list[str], with_truth: bool) -> list[str]:
    """The native CSV header of a dataset with these joints (and its truth), in file order."""
    signals = NATIVE_SIGNALS[1:] if with_truth else SIGNAL_NAMES
    keys = NATIVE_KEYS["csv"]
    return [keys["t"]] + [keys[signal] + joint for signal in signals for joint in joint_names]


# ---------------------------------------------------------------------------------------------
# the native layout: writing


def write_native(
    path: Path,
    arrays: dict[str, np.ndarray],
    joint_names: list[str],
    meta_text: str,
    sidecar_text: str,
    overwrite: bool,
) -> Path:
    """Write a dataset in the native layout, the format chosen by the suffix (module docstring).

    Files are written to a temporary file in the same folder, then moved into place
    (``os.replace``), so a crash never leaves a half-written file under the final name.

    Args:
        path: ``*.npz``, ``*.csv`` or ``*.mat``.
        arrays: ``t`` (N,), ``q, qd, qdd, tau`` and, with a truth, ``true_q`` … ``true_tau`` (N, n), in
            file order.
        joint_names: the n joint names.
        meta_text: the metadata as compact JSON (stored in an .npz / .mat).
        sidecar_text: the metadata as indented JSON, for the sidecar ``<stem>.json`` of an .npz / .csv.
        overwrite: replace existing files (the data file and its sidecar). A sidecar already holding
            exactly ``sidecar_text`` is left as it is, so one dataset can be saved as ``d.npz`` and
            ``d.csv`` side by side (they share ``d.json``).

    Returns:
        The path written.

    Raises:
        DataError: unknown suffix, a missing folder, or the file (or its sidecar) exists and
            ``overwrite`` is False.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise DataError(f"cannot save '{path}': unknown suffix '{path.suffix}'; use one of {', '.join(FORMATS)}")
    if not path.parent.is_dir():
        raise DataError(f"cannot save '{path}': folder '{path.parent}' does not exist")
    sidecar = path.with_suffix(".json") if suffix in (".npz", ".csv") else None
    if sidecar is not None and sidecar.is_file() and (sidecar.read_text(encoding="utf-8") == sidecar_text):
        sidecar = None  # the same metadata is already there (e.g. d.npz saved before d.csv)
    if not overwrite:
        for target in (path, sidecar):
            if target is not None and target.exists():
                raise DataError(
                    f"'{target}' already exists; refusing to overwrite it (pass overwrite=True or choose another name)"
                )
    if suffix == ".npz":
        stored = {**arrays, "joint_names": np.array(joint_names, dtype=str), "metadata": np.array(meta_text)}
        atomic_write(path, lambda fh: np.savez(fh, **stored))
    elif suffix == ".csv":
        header = native_csv_header(joint_names, TRUE_PREFIX + "q" in arrays)
        table = np.hstack([arrays["t"][:, None], *(arrays[name] for name in NATIVE_SIGNALS[1:] if name in arrays)])
        atomic_write(
            path,
            lambda fh: np.savetxt(fh, table, fmt="%.17g", delimiter=",", header=",".join(header), comments=""),
            binary=False,
        )
    else:
        stored = {**arrays, "t": arrays["t"][:, None], "joint_names": json.dumps(joint_names), "metadata": meta_text}
        import scipy.io  # only for .mat files

        atomic_write(path, lambda fh: scipy.io.savemat(fh, stored, oned_as="column"))
    if sidecar is not None:
        atomic_write(sidecar, lambda fh: fh.write(sidecar_text), binary=False)
    return path


# ---------------------------------------------------------------------------------------------
# the native layout: reading


def read_native(path: Path, joint_names: list[str] | None) -> dict[str, Any]:
    """The fields of a dataset stored in the native layout (module docstring), checked.

    Args:
        path: an existing ``*.npz``, ``*.csv`` or ``*.mat`` file.
        joint_names: the joints to expect (checked names). For a CSV the columns are looked up by
            these names (default: the names of the ``q_<joint>`` columns, in order); for a file that
            stores its names they must match; for a .npz/.mat without names they are used as given.

    Returns:
        ``{"t", "q", "qd", "qdd", "tau", "truth", "joint_names", "metadata"}``: ``truth`` is None
        or ``{"q", "qd", "qdd", "tau"}``; a missing qd or qdd is derived (:func:`derive`) and
        ``metadata["derived_signals"]`` says how.

    Raises:
        DataError: as :func:`~robotid_sim.sim.dataset.load_dataset`.
    """
    if path.suffix.lower() == ".csv":
        arrays, names, metadata = _native_csv(path, joint_names)
    else:
        arrays, names, metadata = _native_arrays(path, joint_names)
    return _native_fields(arrays, names, metadata, f"'{path}'")


def _native_arrays(path: Path, joint_names: list[str] | None) -> tuple[dict[str, Any], list[str] | None, dict]:
    """The signal arrays (oriented), joint names and metadata of a native .npz or .mat file."""
    fmt = SUFFIX_FORMAT[path.suffix.lower()]
    keys = NATIVE_KEYS[fmt]
    arrays, _ = read_arrays(path, fmt, _NATIVE_ARRAYS)
    if not any(keys[key] in arrays for key in ("t", "q", "tau")):
        kind = "an .npz archive" if fmt == "npz" else "a .mat file"
        raise DataError(
            f"'{path}' holds none of the dataset arrays (it is empty, or {kind} of something else); "
            f"expected {_EXPECTED_ARRAYS}"
        )
    stored_names = stored_joint_names(arrays.pop("joint_names", None), f"'{path}'")
    metadata = stored_metadata(arrays.pop("metadata", None), f"'{path}'")
    if stored_names is not None and joint_names is not None and list(joint_names) != stored_names:
        raise DataError(
            f"'{path}' stores joint names {stored_names}, which differ from the expected {list(joint_names)}"
        )
    signals = {name: arrays[keys[name]] for name in NATIVE_SIGNALS if keys[name] in arrays}
    if "t" in signals and np.asarray(signals["t"]).dtype.kind in "iuf" and np.asarray(signals["t"]).ndim >= 1:
        signals["t"] = orient_time(signals["t"])
        n_samples = np.asarray(signals["t"]).shape[0]
        signals.update({name: orient_signal(value, n_samples) for name, value in signals.items() if name != "t"})
    return signals, stored_names if stored_names is not None else joint_names, metadata


def _native_csv(path: Path, joint_names: list[str] | None) -> tuple[dict[str, Any], list[str], dict]:
    """The signal arrays, joint names and metadata of a native CSV file (columns found by joint name)."""
    csv = read_csv(path)
    keys = NATIVE_KEYS["csv"]
    columns = csv.header
    if joint_names is None:
        joint_names = list(csv.by_prefix(keys["t"], {"q": keys["q"]})["q"])
        if not joint_names:
            raise DataError(
                f"'{path}' has no position column 'q_<joint>'; expected a header like "
                "t,q_joint1,...,tau_joint1,... (qd_*, qdd_*, true_* optional)"
            )
    joint_names = list(joint_names)
    groups = _native_csv_groups(path, columns, joint_names)
    position = {c: i for i, c in enumerate(columns)}
    used = [c for group in groups.values() for c in group]
    data = csv.numbers([position[c] for c in used])
    index = {c: i for i, c in enumerate(used)}
    for column in used:
        values = data[:, index[column]]
        bad = ~np.isfinite(values)
        if np.any(bad):
            row = int(np.argmax(bad))
            raise DataError(
                f"column '{column}' of '{path}' has {values[row]} at sample {row} "
                f"(line {csv.line_of(row)}); remove or interpolate that sample"
            )
    check_time(data[:, index[keys["t"]]], source=f" of '{path}'", first_line=2)
    arrays = {
        name: (data[:, index[keys["t"]]] if name == "t" else data[:, [index[c] for c in group]])
        for name, group in groups.items()
    }
    metadata = read_sidecar(path, strict=True)
    ignored = [c for c in columns if c not in index]
    if ignored:
        metadata = {**metadata, "ignored_columns": ignored}
    return arrays, joint_names, metadata


def _native_csv_groups(path: Path, columns: list[str], joint_names: list[str]) -> dict[str, list[str]]:
    """Signal -> its columns (one per joint) in a native CSV header: t, q, tau required, the others whole or absent."""
    keys = NATIVE_KEYS["csv"]
    required = [keys["t"]] + [keys[s] + j for s in ("q", "tau") for j in joint_names]
    for column in required:
        if column not in columns:
            raise DataError(
                f"missing column '{column}' in '{path}'; expected header {','.join(required)} "
                "(qd_*, qdd_* and true_* columns optional)"
            )
    groups = {"t": [keys["t"]]}
    for name in NATIVE_SIGNALS[1:]:
        group = [keys[name] + j for j in joint_names]
        present = [c for c in group if c in columns]
        if present and len(present) != len(group):
            missing = next(c for c in group if c not in columns)
            raise DataError(
                f"missing column '{missing}' in '{path}': the '{keys[name]}*' columns must cover "
                f"every joint ({', '.join(group)})"
            )
        if present:
            groups[name] = group
    true_names = NATIVE_SIGNALS[5:]
    if any(name in groups for name in true_names) and not all(name in groups for name in true_names):
        missing = next(keys[n] + joint_names[0] for n in true_names if n not in groups)
        raise DataError(
            f"missing column '{missing}' in '{path}': the truth needs all true_q_*, true_qd_*, "
            "true_qdd_*, true_tau_* columns, or none"
        )
    return groups


def _native_fields(arrays: dict[str, Any], joint_names, metadata: dict[str, Any], source: str) -> dict[str, Any]:
    """The checked fields of a dataset from its file's arrays: required ones present, missing qd / qdd derived."""
    for key in ("t", "q", "tau"):
        if key not in arrays:
            raise DataError(f"missing array '{key}' in {source}; expected {_EXPECTED_ARRAYS}")
    true_names = NATIVE_SIGNALS[5:]
    true_present = [k for k in true_names if k in arrays]
    if true_present and len(true_present) != len(true_names):
        missing = [k for k in true_names if k not in arrays]
        raise DataError(
            f"missing array '{missing[0]}' in {source}: the truth needs all of true_q, true_qd, "
            "true_qdd, true_tau, or none"
        )
    t = check_time(arrays["t"], source=f" in {source}")
    signals = {"q": check_signal("q", arrays["q"], t.shape[0], None)}
    if joint_names is not None and len(joint_names) != signals["q"].shape[1]:
        raise DataError(
            f"{source} has {signals['q'].shape[1]} joints in 'q' but {len(joint_names)} joint names were given "
            f"({', '.join(joint_names)})"
        )
    n_dof = signals["q"].shape[1]
    derived = {}
    for name, below in (("qd", "q"), ("qdd", "qd")):
        if name in arrays:
            signals[name] = check_signal(name, arrays[name], t.shape[0], n_dof)
        else:
            signals[name] = derive(t, signals[below])
            derived[name] = DERIVED_NOTE[name]
    if derived:
        metadata = dict(metadata)
        metadata["derived_signals"] = {**metadata.get("derived_signals", {}), **derived}
    truth = {name: arrays[TRUE_PREFIX + name] for name in SIGNAL_NAMES} if true_present else None
    return {
        "t": t,
        **signals,
        "tau": arrays["tau"],
        "truth": truth,
        "joint_names": joint_names,
        "metadata": metadata,
    }
