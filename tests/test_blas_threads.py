"""Carried over to issue 27: the BLAS thread limit of the streamed least-squares pass.

OpenBLAS keeps one thread count per process, so the limit cannot be scoped to a thread (see
:func:`robotid_sim.threads.one_blas_thread`); it is held only during the pass, and overlapping passes in two
threads used to leave BLAS on one thread for the rest of the process (each restored what it found on entry).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from robotid_sim.identification import JointWeightedLeastSquares
from robotid_sim.identification.least_squares import RowBlock
from robotid_sim.threads import one_blas_thread

#: BLAS libraries built for one thread, whose count no limit changes: the OpenBLAS that importing cvxpy loads (its
#: SCS/ECOS wheels' ``libopenblas-r0``) sits at 1 whatever is asked, so a process that imported cvxpy has one
_SINGLE_THREADED: set[str] = set()


def _blas_threads() -> list[int]:
    return [
        pool["num_threads"]
        for pool in threadpool_info()
        if pool["user_api"] == "blas" and pool["filepath"] not in _SINGLE_THREADED
    ]


@pytest.fixture()
def two_blas_threads():
    with threadpool_limits(limits=2, user_api="blas"):
        pools = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
        _SINGLE_THREADED.update(pool["filepath"] for pool in pools if pool["num_threads"] == 1)
        if not _blas_threads():
            pytest.skip("no BLAS thread pool that runs two threads found by threadpoolctl")
        assert set(_blas_threads()) == {2}
        yield


@dataclass
class _Rows:
    """Rows of a 2-joint problem read by two threads; each block notes the BLAS threads it runs with."""

    seen: list
    n_dof: int = 2
    n_cells: int = 2
    parts: int = 2

    def __post_init__(self):
        rng = np.random.default_rng(0)
        self.W = rng.normal(size=(40, 3))
        self.y = rng.normal(size=40)
        self.row_cell = np.arange(40) % 2

    def blocks(self, part: int = 0, parts: int = 1):
        self.seen.append(_blas_threads())
        rows = np.flatnonzero(self.row_cell == part)
        yield RowBlock(part, rows, self.W[rows], self.y[rows])


def test_a_streamed_pass_holds_one_blas_thread_and_restores_the_count(two_blas_threads):
    seen = []
    solver = JointWeightedLeastSquares(_Rows(seen))
    assert len(seen) == 2 and all(set(threads) == {1} for threads in seen)
    assert set(_blas_threads()) == {2}
    rows = _Rows([])
    np.testing.assert_allclose(solver.gram_matrix(), rows.W.T @ rows.W)


def test_overlapping_holders_restore_the_count_when_the_last_one_leaves(two_blas_threads):
    """Two passes in two threads that overlap: A enters, B enters, A leaves, B leaves (run in this order here)."""
    first, second = one_blas_thread(), one_blas_thread()
    first.__enter__()
    second.__enter__()
    assert set(_blas_threads()) == {1}
    first.__exit__(None, None, None)
    assert set(_blas_threads()) == {1}  # the second still holds it
    second.__exit__(None, None, None)
    assert set(_blas_threads()) == {2}  # threadpoolctl's own nesting left 1 here: B restored what it found, 1
