"""The small compiled pieces of the sampling filters (numba, cached on disk): many n × n solves at once.

The sigma points of a filter that differ from the mean only in the parameters λ share its q and qd, so their
mass matrices and bias torques are linear combinations of one basis (``EulerProcessModel.sigma_dynamics``); what
remains per point is the solve M qdd = τ − h of a few joints, which this kernel does for all of them in one
call instead of one LAPACK call (and its Python overhead) each.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def solve_many(M, rhs, out, ok):  # pragma: no cover - compiled
    """out (S, n) = M_s⁻¹ rhs_s for S matrices M (S, n, n) and right-hand sides rhs (S, n), by LU with partial
    pivoting (M and rhs are overwritten); ``ok`` (S,) False where a pivot is exactly zero or the result is not
    finite (M_s singular)."""
    S, n = rhs.shape
    for s in range(S):
        A, x = M[s], rhs[s]
        good = True
        for k in range(n):
            piv = k
            big = abs(A[k, k])
            for i in range(k + 1, n):
                if abs(A[i, k]) > big:
                    big, piv = abs(A[i, k]), i
            if big == 0.0:
                good = False
                break
            if piv != k:
                for c in range(n):
                    A[k, c], A[piv, c] = A[piv, c], A[k, c]
                x[k], x[piv] = x[piv], x[k]
            for i in range(k + 1, n):
                f = A[i, k] / A[k, k]
                for c in range(k + 1, n):
                    A[i, c] -= f * A[k, c]
                x[i] -= f * x[k]
        if good:
            for k in range(n - 1, -1, -1):
                v = x[k]
                for c in range(k + 1, n):
                    v -= A[k, c] * out[s, c]
                out[s, k] = v / A[k, k]
                good = good and np.isfinite(out[s, k])
        ok[s] = good
