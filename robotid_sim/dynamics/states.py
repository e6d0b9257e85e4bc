"""Validation of joint-state arrays: shapes, dtypes and NaNs, with errors that name the problem."""

from __future__ import annotations

import numpy as np

from robotid_sim.errors import DataError


def as_states(n: int, **arrays) -> list[np.ndarray]:
    """Return the given arrays as float (N, n), all with the same N.

    A 1-D array of length n is taken as one sample. Raises :class:`DataError` naming the array
    on a wrong shape, mismatched N, or non-finite values.
    """
    out = []
    N = None
    for name, x in arrays.items():
        arr = np.asarray(x, dtype=float)
        if arr.ndim == 1 and arr.shape[0] == n:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[1] != n:
            raise DataError(f"'{name}' must have shape (N, {n}) for this {n}-joint robot, got {np.shape(x)}")
        if N is None:
            N = arr.shape[0]
        elif arr.shape[0] != N:
            raise DataError(f"'{name}' has {arr.shape[0]} samples but the other inputs have {N}")
        if not np.isfinite(arr).all():
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise DataError(
                f"'{name}' contains NaN or inf (first at sample {bad[0]}, joint {bad[1] + 1}); "
                "remove or interpolate those samples first"
            )
        out.append(arr)
    return out
