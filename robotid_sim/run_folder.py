"""Run folders: built atomically, owned, cleaned up on interruption (used by every command that writes one).

A run (``robotid-sim run``, ``identify --validate``, ``closed-loop``, ``rl-demo``) is built in a hidden
``.partial-*`` folder and renamed to its final name only when everything is written
(:func:`build_run_folder`), so a failed run never leaves a folder that looks complete, and a run never
overwrites an earlier one. An interrupted run (Ctrl-C, or SIGTERM as sent by ``timeout``, CI runners and
``kill``) removes its partial folder before exiting (SIGTERM exits with status 143). A run killed outright
(SIGKILL, out of memory) cannot; each partial folder therefore records its owner (process id, process start
time, host) in a ``.owner`` file, and every run first removes the partial folders under its output folder whose
owner process on this host is no longer running, saying so in a warning (:func:`remove_stale_partials`; those
of a live run, or of another host, are left alone; one without an owner record is removed once untouched for
24 hours).

This module imports no stage of the package: it sits at the bottom with :mod:`robotid_sim.safety`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from robotid_sim.errors import ConfigError
from robotid_sim.safety import safe_name

log = logging.getLogger(__name__)

#: the parent of run folders when none is given
DEFAULT_RUNS_DIR = Path("runs")

#: prefix of the folder a run is built in
PARTIAL_PREFIX = ".partial-"
#: file in a partial folder naming the process that builds it
OWNER_FILE = ".owner"
#: a partial folder without a readable owner record is stale once untouched this long (seconds)
UNOWNED_STALE_AFTER_S = 24 * 3600.0


def process_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of process ``pid`` from Linux ``/proc``, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        fields = text[text.rindex(")") + 2 :].split()
        return fields[0], int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux), or None if unknown."""
    stat = process_stat(pid)
    return None if stat is None else stat[1]


def _owner_record() -> dict[str, Any]:
    pid = os.getpid()
    return {
        "pid": pid,
        "start": process_start(pid),
        "host": socket.gethostname(),
        "created": datetime.now().isoformat(timespec="seconds"),
    }


def _alive(pid: int, start: int | None) -> bool:
    """Whether process ``pid`` (started at ``start`` ticks, when known) still runs on this host."""
    if os.name == "nt":
        return True  # os.kill(pid, 0) would terminate the process there: never probe, never remove
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # exists but belongs to another user (PermissionError), or cannot tell: assume alive
    stat = process_stat(pid)
    if stat is not None:
        state, started = stat
        if state in ("Z", "X"):
            return False  # killed, not yet reaped by its parent
        if start is not None and started != start:
            return False  # the id was reused by a newer process
    return True


def _stale_reason(partial: Path) -> str | None:
    """Why ``partial`` is a leftover of a run that no longer runs, or None to leave it."""
    try:
        with open(partial / OWNER_FILE, "rb") as fh:
            owner = json.loads(fh.read(4096))
    except (OSError, ValueError):
        owner = None
    pid = owner.get("pid") if isinstance(owner, dict) else None
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        try:
            idle = time.time() - partial.stat().st_mtime
        except OSError:
            return None
        if idle > UNOWNED_STALE_AFTER_S:
            return f"no owner record, untouched for {idle / 3600:.0f} h"
        return None
    if owner.get("host") != socket.gethostname():
        return None  # another machine's run (shared folder): we cannot tell whether it still runs
    start = owner.get("start")
    if _alive(pid, start if isinstance(start, int) and not isinstance(start, bool) else None):
        return None
    return f"its run, process {pid}, is no longer running"


def remove_stale_partials(root: str | Path) -> list[Path]:
    """Remove the ``.partial-*`` folders under ``root`` left by runs that were killed (module docstring).

    A folder whose owner process (``.owner``: pid, start time, host) still runs on this host, or that belongs
    to another host, is left alone. Each removal is logged as a warning naming the folder.

    Returns:
        The folders removed.
    """
    root = Path(root)
    try:
        entries = sorted(root.iterdir())
    except OSError:
        return []
    removed = []
    for path in entries:
        if not path.name.startswith(PARTIAL_PREFIX) or path.is_symlink() or not path.is_dir():
            continue
        reason = _stale_reason(path)
        if reason is None:
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            log.warning("removed the partial run folder %s left by an interrupted run (%s)", path, reason)
            removed.append(path)
    return removed


def new_run_dir(root: Path, name: str) -> tuple[Path, Path]:
    """(partial dir created now with its owner record, final dir name reserved); never an existing folder.

    Raises:
        ConfigError: ``name`` is not a safe file name, or the folder cannot be created.
    """
    safe_name(name, "scenario name")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the output folder {root}: {exc.strerror or exc}") from None
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for k in range(1000):
        final = root / (f"{name}-{stamp}" if k == 0 else f"{name}-{stamp}-{k}")
        partial = root / f"{PARTIAL_PREFIX}{final.name}"
        if final.exists() or partial.exists():
            continue
        try:
            partial.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"cannot create a run folder in {root}: {exc.strerror or exc}") from None
        try:
            (partial / OWNER_FILE).write_text(json.dumps(_owner_record()) + "\n")
        except BaseException as exc:
            shutil.rmtree(partial, ignore_errors=True)
            if isinstance(exc, OSError):
                raise ConfigError(f"cannot write into the run folder {partial}: {exc.strerror or exc}") from None
            raise
        return partial, final
    raise ConfigError(f"could not find a free run folder name under {root}")


@contextlib.contextmanager
def sigterm_raises_system_exit() -> Iterator[None]:
    """While inside, SIGTERM raises ``SystemExit(143)`` so that clean-up code runs (main thread only).

    Installed only where SIGTERM has its default action (which would kill the process without clean-up);
    an application's own handler, or an ignored SIGTERM, is left as it is. The previous handler is
    restored on exit. After the first SIGTERM further ones are ignored, so they cannot cut the clean-up.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) not in (
        signal.SIG_DFL,
        None,
    ):
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def terminate(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def existing_ancestor(path: Path) -> Path:
    """The nearest folder above ``path`` (or ``path`` itself) that exists, for a free-space check."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_writable_folder(folder: str | Path, what: str) -> None:
    """Refuse a folder that cannot be created, or written in, now; nothing is created.

    The nearest existing folder at or above ``folder`` must be a folder that accepts a new file (tried with an
    unnamed temporary file, removed at once), so that a read-only, virtual (``/proc``) or forbidden place is
    named as such before any work starts, not later as a missing file or as "0 B free".

    Raises:
        ConfigError: naming ``what``, the folder, the place that refuses and the fix.
    """
    folder = Path(folder)
    base = existing_ancestor(folder)
    if not base.is_dir():
        raise ConfigError(f"{what} '{folder}': '{base}' is a file, not a folder; choose another folder")
    try:
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as exc:
        head = f"{what}:" if base == folder.absolute() else f"{what} '{folder}' cannot be created:"
        raise ConfigError(
            f"{head} cannot write in folder '{base}' ({exc.strerror or exc}); choose a writable folder"
        ) from None


def output_root(out_dir: str | Path | None, default: Path = DEFAULT_RUNS_DIR) -> Path:
    """The parent folder of run folders (``default`` when None), checked by :func:`check_writable_folder`.

    Raises:
        ConfigError: it is a file, or it cannot be created or written in.
    """
    root = Path(out_dir) if out_dir is not None else default
    if root.exists() and not root.is_dir():
        raise ConfigError(f"the output folder {root} exists and is not a folder")
    check_writable_folder(root, "output folder")
    return root


def _missing_folders(root: Path) -> list[Path]:
    """``root`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    while not root.exists() and root != root.parent:
        missing.append(root)
        root = root.parent
    return missing


def build_run_folder(root: Path, name: str, write: Callable[[Path], None]) -> Path:
    """Remove stale partial folders under ``root``, let ``write`` fill a new ``.partial-*`` folder, and rename it
    to its final name (module docstring); on any failure or interruption the partial folder is removed, and
    ``root`` too when this call created it and it is empty again."""
    remove_stale_partials(root)
    made = _missing_folders(root)  # made here: removed again if the run fails (nothing left behind)
    with sigterm_raises_system_exit():
        partial, final = new_run_dir(root, name)
        try:
            write(partial)
            (partial / OWNER_FILE).unlink()
            partial.rename(final)
        except BaseException as exc:
            shutil.rmtree(partial, ignore_errors=True)
            for folder in made:
                with contextlib.suppress(OSError):  # not empty: another run wrote there meanwhile
                    folder.rmdir()
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                log.warning("run interrupted: removed its partial folder %s", partial)
            raise
    log.info("run written to %s", final)
    return final
