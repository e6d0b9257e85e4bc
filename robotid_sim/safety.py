"""Guards on what users and files hand us (SPEC §13: bad input never harms the machine).

- :func:`safe_name`: a label or estimator name that becomes a file name must be a plain name
  (letters, digits, ``_ . + -``; no separator, no leading dot), so it can never leave its folder.
- :func:`inside`: a path read from a file (``metrics.json``, a model's array file) must resolve
  inside the folder it belongs to.
- :func:`load_yaml` / :func:`load_yaml_file`: YAML is loaded safely, and a document whose
  aliases would expand to more than :data:`MAX_YAML_NODES` nodes (an alias bomb) is refused
  before it is expanded. Binary files are refused as "not a YAML text file".
- :func:`read_npz`: reads only the keys asked for, refuses an array whose uncompressed size
  exceeds :data:`MAX_ARRAY_BYTES` before decompressing it, never unpickles.
- :func:`atomic_write`: a file appears whole or not at all, with the permissions ``open`` gives
  (the process umask applied to 0o666), like every other file of a run folder.
- :func:`memory_limit_bytes`: the memory a single run may plan to use (half the machine's RAM).
"""

from __future__ import annotations

import io
import os
import re
import tempfile
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from robotid_sim.errors import ConfigError, DataError

#: a name that may become a file name: 1–64 characters, no path separator, no leading dot
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
#: most YAML nodes a document may expand to (aliases counted as often as they are used)
MAX_YAML_NODES = 200_000
#: largest uncompressed array :func:`read_npz` accepts (bytes)
MAX_ARRAY_BYTES = 4 * 1024**3


def safe_name(name: Any, what: str) -> str:
    """``name`` if it is safe as a file name, else :class:`ConfigError` naming ``what`` and the rule."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or ".." in name:
        raise ConfigError(
            f"{what} {name!r} cannot be used as a file name: use 1-64 letters, digits, '_', '.', '+' or '-', "
            "starting with a letter or digit (no '/', '\\' or '..')"
        )
    return name


def inside(root: str | Path, relative: str | Path, what: str) -> Path:
    """``root / relative`` resolved, refusing (:class:`DataError`) anything that leaves ``root``."""
    root = Path(root).resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise DataError(f"{what} {str(relative)!r} points outside {root}; refusing to read or write it")
    return path


def _expanded_size(node, memo: dict[int, int]) -> int:
    import yaml

    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a recursive alias counts once: PyYAML builds it as a self-reference
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        size = 1
    memo[key] = size
    return size


def load_yaml(text: str, where: str) -> Any:
    """Parse YAML text safely (no Python objects), refusing alias bombs and malformed YAML.

    Raises:
        ConfigError: naming ``where`` and the problem (line and column for syntax errors).
    """
    import yaml

    if "\x00" in text:
        raise ConfigError(f"{where} is not a YAML text file (it contains NUL bytes)")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_YAML_NODES:
            raise ConfigError(
                f"{where}: its aliases expand to {size:,} YAML nodes (limit {MAX_YAML_NODES:,}); write the values out "
                "instead of nesting anchors"
            )
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        context = f" ({exc.context})" if exc.context else ""
        raise ConfigError(f"{where} is not valid YAML{at}: {exc.problem}{context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where} is not valid YAML: {exc}".replace("\n", " ")) from None
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path, what: str = "file") -> Any:
    """:func:`load_yaml` of a file; a missing, unreadable or binary file is a :class:`ConfigError`."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not a YAML text file (not UTF-8 text)") from None
    return load_yaml(text, f"{what} {path}")


def read_npz(
    source: str | Path | bytes,
    where: str,
    keys: list[str] | None = None,
    max_bytes: int = MAX_ARRAY_BYTES,
) -> dict[str, Any]:
    """The arrays of an ``.npz`` (all of them, or only ``keys``), never unpickled.

    Each array's uncompressed size is read from its header first; one above ``max_bytes`` is
    refused before any decompression. Missing ``keys`` are simply absent from the result.

    Raises:
        DataError: not an .npz file, a damaged member, an object array, or an absurd size.
    """
    import numpy as np

    try:
        archive = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else Path(source))
    except FileNotFoundError:
        raise DataError(f"{where}: file not found") from None
    except (zipfile.BadZipFile, OSError) as exc:
        raise DataError(f"{where} is not an .npz file ({exc})") from None
    out: dict[str, Any] = {}
    with archive:
        members = {name[:-4]: name for name in archive.namelist() if name.endswith(".npy")}
        for key in members if keys is None else [k for k in keys if k in members]:
            info = archive.getinfo(members[key])
            if info.file_size > max_bytes:
                raise DataError(
                    f"{where}: array '{key}' would take {info.file_size / 1e9:.3g} GB uncompressed "
                    f"(limit {max_bytes / 1e9:.3g} GB); refusing to read it"
                )
            try:
                with archive.open(info) as fh:
                    out[key] = np.lib.format.read_array(fh, allow_pickle=False)
            except ValueError as exc:
                raise DataError(
                    f"{where}: array '{key}' cannot be read without unpickling or is damaged ({exc})"
                ) from None
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                raise DataError(f"{where}: array '{key}' is damaged ({exc})") from None
    return out


_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process umask, read without changing it where /proc tells it (Linux), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def atomic_write(path: str | Path, write: Callable[[IO], Any], *, binary: bool = True) -> None:
    """Write ``path`` through ``write(file handle)`` into a temporary file beside it, then move it in place.

    A reader never sees a half-written file, and an interrupted write leaves no temporary file. The
    file gets the mode a plain ``open(path, "w")`` would give (``0o666`` less the umask), not the
    ``0o600`` of :func:`tempfile.mkstemp`. Text is written as UTF-8 with ``\\n`` line ends.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        kwargs = {} if binary else {"encoding": "utf-8", "newline": "\n"}
        with os.fdopen(fd, "wb" if binary else "w", **kwargs) as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def memory_limit_bytes() -> int:
    """The memory one run may plan to use: half of this machine's physical memory (8 GiB if unknown)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        total = 16 * 1024**3
    return int(total // 2)
