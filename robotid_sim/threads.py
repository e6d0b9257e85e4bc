"""Thread pools that sleep when their work is done.

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

import os
from collections.abc import MutableMapping

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
