"""Compiled sample-by-sample loops of the online estimators (numba, cached on disk).

The delta rule and the Hopfield network update their parameters after every sample, so the
loop over samples is inherently sequential; it runs here, compiled, instead of in Python.
Both work in the *normalised* coordinates ``w̃_i = w_i · s_i`` (``s_i`` the RMS of base-regressor
column i over a sample's rows), in which every input has unit power: the normalised LMS step
is then well scaled for parameters whose magnitudes differ by orders (a 4 kg mass beside a
0.006 kg·m² inertia).
"""

from __future__ import annotations

import numba
import numpy as np

#: |u| is kept below this, so that the Hopfield estimate c·tanh(u) stays strictly inside (−c, c) with a margin
#: (tanh(15) = 1 − 1.9e-13) that no rounding of the product or of the epoch average can cross
TANH_LIMIT = 15.0


@numba.njit(cache=True, nogil=True)
def delta_rule(Y, tau, w0, scale, bound, steps, stride, tol):  # pragma: no cover - compiled
    """Normalised delta rule (NLMS) or Hopfield network over the stream, epoch after epoch.

    One compiled kernel, not split: a numba loop over epochs and samples whose state (the iterate, the
    Hopfield state, the epoch average) lives in local arrays; a call per piece would cost more than the work.

    Args:
        Y: (N, n, b) base-regressor rows of each sample (rows out of use set to zero).
        tau: (N, n) torque (zero on the rows out of use).
        w0: (b,) initial parameters, inside (−bound, bound) for the Hopfield network.
        scale: (b,) column RMS s_i (> 0).
        bound: (b,) the Hopfield bound c_i, or an empty array for the delta rule.
        steps: (E,) step size μ of each epoch.
        stride: record the parameters every ``stride`` samples.
        tol: stop after an epoch whose average moved less than ``tol`` (relative, normalised coordinates).

    Returns:
        (average of the last epoch's iterates (b,), recorded parameters (K, b), sample index of each record (K,),
        epochs run).
    """
    N, n, b = Y.shape
    E = steps.shape[0]
    hopfield = bound.shape[0] == b
    w = w0.copy()
    u = np.zeros(b)
    inner = np.empty(b)  # the largest |λ_i| allowed: c_i·tanh(TANH_LIMIT) < c_i
    if hopfield:
        for i in range(b):
            inner[i] = bound[i] * np.tanh(TANH_LIMIT)
        for i in range(b):
            u[i] = np.arctanh(w[i] / bound[i])
    records = (E * N + stride - 1) // stride
    hist = np.empty((records, b))
    at = np.empty(records, dtype=np.int64)
    avg = np.zeros(b)
    previous = np.zeros(b)
    g = np.empty(b)
    count = 0
    epochs = 0
    for ep in range(E):
        mu = steps[ep]
        avg[:] = 0.0
        for k in range(N):
            energy = 1e-300
            g[:] = 0.0
            for j in range(n):
                e = tau[k, j]
                for i in range(b):
                    e -= Y[k, j, i] * w[i]
                for i in range(b):
                    x = Y[k, j, i] / scale[i]
                    energy += x * x
                    g[i] += x * e
            step = mu / energy
            if hopfield:
                # Eq. 19 with λ = c·tanh(u): dλ = (1/c)(c² − λ²) du; the step du = μ g̃ / (c̃ ‖φ̃‖²) makes the
                # interior step the normalised delta rule's, and λ never reaches ±c
                for i in range(b):
                    u[i] += step * g[i] / (scale[i] * bound[i])
                    u[i] = min(max(u[i], -TANH_LIMIT), TANH_LIMIT)
                    w[i] = min(max(bound[i] * np.tanh(u[i]), -inner[i]), inner[i])
            else:
                for i in range(b):
                    w[i] += step * g[i] / scale[i]
            for i in range(b):
                avg[i] += w[i]
            t = ep * N + k
            if t % stride == 0:
                hist[count] = w
                at[count] = t
                count += 1
        epochs = ep + 1
        change = 0.0
        size = 1e-300
        for i in range(b):
            avg[i] /= N
            if hopfield:
                avg[i] = min(max(avg[i], -inner[i]), inner[i])
            change += ((avg[i] - previous[i]) * scale[i]) ** 2
            size += (avg[i] * scale[i]) ** 2
            previous[i] = avg[i]
        if ep > 0 and change <= tol * tol * size:
            break
    return avg, hist[:count], at[:count], epochs
