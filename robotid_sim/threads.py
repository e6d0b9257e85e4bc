"""Thread pools that sleep when their work is done, and one BLAS thread while our own threads call BLAS.

NumPy's OpenBLAS and numba's OpenMP layer keep their worker threads spinning for a while after each
parallel call (OpenBLAS about 0.1 s per call on the 2-core machine: `benchmarks/idle_threads.py`), so
on a small machine whatever runs next (the simulator, the next Python step) competes with idle workers
for the cores. :data:`QUIET_THREAD_SETTINGS` are the environment settings that stop it; they must be
in the environment before NumPy and numba load their thread pools, which is why ``robotid-sim`` applies
them first thing (:func:`quiet_thread_pools`) and a script that imports :mod:`robotid_sim` sets them
in its shell (``export OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4``). A value already in the
environment is kept.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, MutableMapping
from typing import Any

#: environment variables (and values) that make idle OpenBLAS and OpenMP workers sleep at once
QUIET_THREAD_SETTINGS = {
    "OMP_WAIT_POLICY": "PASSIVE",  # OpenMP (numba's threading layer): no spinning between parallel regions
    "OPENBLAS_THREAD_TIMEOUT": "4",  # OpenBLAS: spin 2**4 cycles, not 2**28, before a worker sleeps
}


def quiet_thread_pools(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put :data:`QUIET_THREAD_SETTINGS` into ``environ`` (default ``os.environ``) where unset.

    Returns the settings it added. Effective only before NumPy (OpenBLAS) and numba start their
    thread pools, i.e. before they are imported.
    """
    env = os.environ if environ is None else environ
    added = {k: v for k, v in QUIET_THREAD_SETTINGS.items() if k not in env}
    env.update(added)
    return added


class _SharedBlasLimit:
    """The one BLAS thread limit of the process, held by a count of users (:func:`one_blas_thread`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.limiter: Any = None

    def enter(self) -> None:
        with self.lock:
            if self.users == 0:
                from threadpoolctl import threadpool_limits

                self.limiter = threadpool_limits(limits=1, user_api="blas")
            self.users += 1

    def exit(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0:
                self.limiter.restore_original_limits()
                self.limiter = None


_BLAS_LIMIT = _SharedBlasLimit()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """While inside, BLAS (OpenBLAS, MKL) runs on one thread: for code that calls BLAS from threads of its own.

    The limit is process-wide, not per thread, and cannot be made narrower: OpenBLAS keeps one thread count per
    process (``openblas_set_num_threads`` has no per-thread form; threadpoolctl documents its limits as
    process-wide), so while any caller is inside, every thread's BLAS calls run on one thread. It is therefore
    held only for the parallel section and shared: the first caller sets it, the last one out restores the count
    found then. (threadpoolctl's own context manager restores what it found on entry, so two overlapping
    sections in two threads left BLAS on one thread for the rest of the process.)
    """
    _BLAS_LIMIT.enter()
    try:
        yield
    finally:
        _BLAS_LIMIT.exit()
