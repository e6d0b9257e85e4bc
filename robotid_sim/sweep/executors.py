"""Where the cells of a sweep run: local processes (default) or a Dask cluster. Nothing home-made.

- ``local``: :class:`concurrent.futures.ProcessPoolExecutor` with one process per core (``spawn`` start
  method: no fork of a process that holds threads), each limited to one BLAS/OpenMP/numba thread
  (:data:`SINGLE_THREAD_SETTINGS`), so N workers use N cores and never oversubscribe them.
- ``dask``: :class:`dask.distributed.Client` on a :class:`~dask.distributed.LocalCluster` (one single-threaded
  worker process per core) or on the scheduler at a given address (``tcp://host:8786``, e.g. one started by
  dask-jobqueue on a SLURM cluster). Dask's nanny already starts its workers with ``OMP_NUM_THREADS=1`` and
  friends; :func:`limit_threads` is run on every worker too. Dask is an optional extra
  (``pip install 'robotid-sim[dask]'``), imported only here, only when asked for.

Both yield ``(cell, records or exception)`` pairs as cells finish, in completion order; the caller persists
each result at once (:mod:`robotid_sim.sweep.store`). An exception is an infrastructure failure (a worker
process killed, a lost connection): the cell is not recorded and runs again on resume. This module imports
only the standard library, so a worker process that unpickles it loads nothing else before
:func:`start_worker` has run.

Stopping: a Ctrl-C reaches every process of the terminal's process group, but only the main process acts on it.
Worker processes are spawned with SIGINT blocked (local ones then ignore it, :func:`start_worker`), so they never
print a traceback or hang half-interrupted; when the caller stops (an exception, Ctrl-C or SIGTERM turned into one, or
closing the generator) the local workers are terminated at once, and a Dask cluster started here is closed with
its scratch folder (a temporary folder, never ``dask-scratch-space`` in the working folder). A local worker
also dies with the main process if that is killed outright (Linux ``PR_SET_PDEATHSIG``). Dask's own log lines
are shown only with ``--verbose``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from robotid_sim.errors import ConfigError

log = logging.getLogger(__name__)

EXECUTORS = ("local", "dask")
#: environment settings of a worker: one thread per BLAS/OpenMP/numba pool (one worker per core instead)
SINGLE_THREAD_SETTINGS = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "OMP_WAIT_POLICY": "PASSIVE",
}
DASK_INSTALL_HINT = "pip install 'robotid-sim[dask]'"

Cell = dict[str, Any]
Outcome = list[dict[str, Any]] | BaseException


#: seconds a terminated local worker is given to exit before it is killed
STOP_GRACE_S = 2.0
#: ``prctl`` option: the signal a process gets when its parent dies (linux/prctl.h)
_PR_SET_PDEATHSIG = 1


def limit_threads() -> None:
    """One thread per numerical thread pool (effective for the pools not yet started, which in a fresh worker
    process is all of them)."""
    os.environ.update(SINGLE_THREAD_SETTINGS)


def start_worker(parent_pid: int | None = None) -> None:
    """Initialiser of a local worker process: :func:`limit_threads`, SIGINT ignored (the main process stops the
    sweep; see the module docstring) and, on Linux, killed when the main process ``parent_pid`` dies."""
    limit_threads()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux") and parent_pid is not None:
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the main process died before the request took effect
            os._exit(1)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Within: SIGINT blocked in this thread, so the processes (and threads) started meanwhile start with it
    blocked; a Ctrl-C that came meanwhile is delivered on exit. multiprocessing's resource tracker is started
    first: starting it unblocks SIGINT in the thread that does."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def _single_thread_environment() -> Iterator[None]:
    """Within: :data:`SINGLE_THREAD_SETTINGS` in this process's environment, which the worker processes
    started meanwhile inherit; restored afterwards."""
    saved = {k: os.environ.get(k) for k in SINGLE_THREAD_SETTINGS}
    os.environ.update(SINGLE_THREAD_SETTINGS)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return max(os.cpu_count() or 1, 1)


def run_cells(
    work: Callable[[Cell], list[dict[str, Any]]],
    cells: Sequence[Cell],
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
) -> Iterator[tuple[Cell, Outcome]]:
    """Run ``work`` on every cell with the chosen executor; yield ``(cell, outcome)`` as each finishes.

    Args:
        work: a module-level function (it is pickled by reference).
        cells: plain-data cells.
        executor: ``local`` or ``dask``.
        workers: worker processes (default: one per core); ignored with a Dask ``address``.
        address: a running Dask scheduler (``dask`` only); default: a local cluster started here.

    Raises:
        ConfigError: the arguments refused by :func:`check_executor`, a scheduler that cannot be reached.
    """
    check_executor(executor, workers, address)
    if not cells:
        return iter(())
    if executor == "local":
        return _run_local(work, cells, workers or min(default_workers(), len(cells)))
    return _run_dask(work, cells, workers, address)


def check_executor(executor: str, workers: int | None = None, address: str | None = None) -> None:
    """Refuse executor arguments that cannot work, before anything is started or written.

    Raises:
        ConfigError: an unknown executor, fewer than one worker, ``address`` without ``dask``, Dask not
            installed, an ``address`` that is no scheduler address (``tcp://host:8786``).
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor '{executor}'; choose one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}; leave it out for one per core")
    if address is not None and executor != "dask":
        raise ConfigError("--address is a Dask scheduler's address; add --executor dask, or leave --address out")
    if executor != "dask":
        return
    import_dask()
    if address is not None:
        from distributed.comm import get_address_host_port

        try:
            get_address_host_port(address)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"--address {address!r} is not a Dask scheduler address ({exc}); give one like tcp://host:8786, "
                "or leave --address out for a local cluster"
            ) from None


def _run_local(work, cells: Sequence[Cell], workers: int) -> Iterator[tuple[Cell, Outcome]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")
    others = set(multiprocessing.active_children())  # the caller's own child processes, left alone
    pool = None
    try:
        # the processes are spawned while tasks are submitted: with one thread per pool, without SIGINT
        with _single_thread_environment(), _sigint_blocked():
            pool = ProcessPoolExecutor(
                max_workers=workers, mp_context=context, initializer=start_worker, initargs=(os.getpid(),)
            )
            futures = {pool.submit(work, cell): cell for cell in cells}
        for future in as_completed(futures):
            cell = futures[future]
            try:
                yield cell, future.result()
            except Exception as exc:  # a worker killed (BrokenProcessPool) or a result that cannot be pickled
                yield cell, exc
        pool.shutdown(wait=True)
    finally:
        if pool is not None:
            _stop_pool(pool, [p for p in multiprocessing.active_children() if p not in others])


def _stop_pool(pool, processes) -> None:
    """Cancel what has not started and end the pool's worker ``processes`` now (a stopped sweep)."""
    pool.shutdown(wait=False, cancel_futures=True)
    _end_processes(processes)


def _end_processes(processes) -> None:
    """Terminate ``processes`` (multiprocessing processes), killing those still alive after :data:`STOP_GRACE_S`."""
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(STOP_GRACE_S)
        if process.is_alive():
            process.kill()
            process.join(STOP_GRACE_S)


def import_dask():
    """``dask.distributed``; ConfigError naming the extra to install when Dask is missing."""
    try:
        import dask.distributed as distributed
    except ImportError as exc:
        raise ConfigError(
            f"the dask executor needs Dask distributed, which is not installed ({exc}); {DASK_INSTALL_HINT}, "
            "or use --executor local"
        ) from None
    return distributed


def _run_dask(work, cells: Sequence[Cell], workers: int | None, address: str | None) -> Iterator[tuple[Cell, Outcome]]:
    import multiprocessing

    distributed = import_dask()
    others = set(multiprocessing.active_children())
    with contextlib.ExitStack() as stack:
        client = _dask_client(distributed, stack, workers or min(default_workers(), len(cells)), address)
        try:
            client.run(limit_threads)
            futures = client.map(work, list(cells), pure=False)
            by_key = {f.key: cell for f, cell in zip(futures, cells, strict=True)}
            for future in distributed.as_completed(futures):
                cell = by_key[future.key]
                try:
                    yield cell, future.result()
                except Exception as exc:
                    yield cell, exc
                future.release()
        except BaseException:  # stopped: a local cluster would give its busy workers seconds to finish; end them
            client.close()
            _end_processes([p for p in multiprocessing.active_children() if p not in others])
            raise


def _dask_client(distributed, stack: contextlib.ExitStack, workers: int, address: str | None):
    """A Dask client on a local cluster of ``workers`` processes, or on the scheduler at ``address``; the
    cluster, its scratch folder and the client are closed by ``stack``."""
    stack.enter_context(_quiet_dask())
    if address is not None:
        try:
            return stack.enter_context(distributed.Client(address, timeout="20s"))
        except OSError as exc:
            raise ConfigError(
                f"cannot reach the Dask scheduler at {address!r}: {exc}; start it, or check the address"
            ) from None
    import dask

    scratch = tempfile.mkdtemp(prefix="robotid-sim-dask-")
    stack.callback(shutil.rmtree, scratch, ignore_errors=True)
    # every scratch folder of the cluster (scheduler's and workers') in it, removed on the way out
    stack.enter_context(dask.config.set({"temporary-directory": scratch}))
    with _single_thread_environment(), _starting_cluster():
        cluster = stack.enter_context(
            distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                # its HTTP server (health checks) on a free local port, not 8787 with a warning when taken
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                silence_logs=_dask_log_level(),
            )
        )
    return stack.enter_context(distributed.Client(cluster))


@contextlib.contextmanager
def _starting_cluster() -> Iterator[None]:
    """Within (main thread only): SIGINT blocked (:func:`_sigint_blocked`: the Dask threads and worker processes
    started meanwhile keep it blocked), and a SIGINT or SIGTERM that comes meanwhile held and delivered on exit,
    once the cluster is whole and will be closed (a native thread of this process may still receive a signal:
    the Python handlers hold it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    previous = {s: handler for s, handler in previous.items() if callable(handler)}
    for signum in previous:
        signal.signal(signum, lambda signum, frame: held.append(signum))
    try:
        with _sigint_blocked():
            yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            previous[held[0]](held[0], None)


def _dask_log_level() -> int:
    """The level of Dask's own log lines: INFO with ``--verbose`` (the root logger at INFO), else ERROR."""
    return logging.INFO if logging.getLogger().isEnabledFor(logging.INFO) else logging.ERROR


@contextlib.contextmanager
def _quiet_dask() -> Iterator[None]:
    """Within: Dask's loggers in this process at :func:`_dask_log_level` (Dask sets them to INFO on import)."""
    level = _dask_log_level()
    loggers = [logging.getLogger(name) for name in ("distributed", "dask")]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(level, logger.level))
    try:
        yield
    finally:
        for logger, previous in zip(loggers, saved, strict=True):
            logger.setLevel(previous)
