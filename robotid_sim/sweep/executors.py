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
:func:`limit_threads` has run.
"""

from __future__ import annotations

import contextlib
import logging
import os
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


def limit_threads() -> None:
    """Worker initialiser: one thread per numerical thread pool (effective for the pools not yet started,
    which in a fresh worker process is all of them)."""
    os.environ.update(SINGLE_THREAD_SETTINGS)


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
        ConfigError: an unknown executor, ``address`` without ``dask``, Dask not installed, a scheduler that
            cannot be reached.
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor '{executor}'; choose one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    if address is not None and executor != "dask":
        raise ConfigError("a scheduler address is for the dask executor; add --executor dask")
    if not cells:
        return iter(())
    if executor == "local":
        return _run_local(work, cells, workers or min(default_workers(), len(cells)))
    import_dask()  # a missing extra is said now, before anything runs
    return _run_dask(work, cells, workers, address)


def _run_local(work, cells: Sequence[Cell], workers: int) -> Iterator[tuple[Cell, Outcome]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")
    with _single_thread_environment():  # the processes are spawned while tasks are submitted
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=limit_threads)
        futures = {pool.submit(work, cell): cell for cell in cells}
    try:
        for future in as_completed(futures):
            cell = futures[future]
            try:
                yield cell, future.result()
            except Exception as exc:  # a worker killed (BrokenProcessPool) or a result that cannot be pickled
                yield cell, exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


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
    distributed = import_dask()
    with contextlib.ExitStack() as stack:
        if address is None:
            with _single_thread_environment():
                cluster = stack.enter_context(
                    distributed.LocalCluster(
                        n_workers=workers or min(default_workers(), len(cells)),
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=logging.ERROR,
                    )
                )
            client = stack.enter_context(distributed.Client(cluster))
        else:
            try:
                client = stack.enter_context(distributed.Client(address, timeout="20s"))
            except OSError as exc:
                raise ConfigError(f"cannot reach the Dask scheduler at {address!r}: {exc}") from None
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
