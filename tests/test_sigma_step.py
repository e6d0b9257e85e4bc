"""Issue 31: the sigma-point filters' compiled steps on a compiled chain (``engine: compiled``) — the UKF's and
CDKF's sample as one compiled call (``sigma_step``), the SR-UKF's and SR-CDKF's as two around LAPACK's QR
(``square_root_step``) — give the numbers of the Python sequence of ``StreamFilter.update`` on the same chain,
restarts included, and fail as it does. One test: numba compiles the steps in about 50 s (in the test worker that
needs them)."""

from __future__ import annotations

import numpy as np
import pytest

from robotid_sim import plugins
from robotid_sim.errors import IdentificationError
from robotid_sim.identification import IdentificationProblem


def _stream(problem, name, python: bool, restart_at: int = 80):
    """The filter ``name`` (engine compiled) over the record, the states restarting at ``restart_at`` (a second
    recording); with ``python`` the sequence of StreamFilter.update instead of the compiled step. (x (d,), P (d, d))
    after the restart's sample and at the end, and the filter."""
    from robotid_sim_plugins.ekf.stream import StreamFilter

    flt = plugins.get_estimator(name)(engine="compiled").stream(problem)
    assert flt.process.chain is not None and flt._noise is not None  # prrrp's chain compiles: the step runs
    update = (lambda *a, **k: StreamFilter.update(flt, *a, **k)) if python else flt.update
    ds, out = problem.dataset, []
    for k in range(ds.n_samples):
        update(ds.t[k], ds.q[k], ds.qd[k], ds.qdd[k], ds.tau[k], restart=k == restart_at)
        if k in (restart_at, ds.n_samples - 1):
            out.append((flt.x.copy(), flt.P.copy()))
    return out, flt


def test_the_compiled_steps_give_the_numbers_of_the_python_sequence_and_fail_as_it_does(prrrp_study):
    robot, noisy, _ = prrrp_study
    problem = IdentificationProblem(robot.structure(), noisy.slice(0, 160))
    for name in ("ukf", "cdkf", "sr_ukf", "sr_cdkf"):
        compiled, flt = _stream(problem, name, python=False)
        python, _ = _stream(problem, name, python=True)
        assert flt.physical  # the mean's mass matrix became positive definite on the way
        for (x, P), (x_py, P_py) in zip(compiled, python, strict=True):
            np.testing.assert_allclose(x, x_py, rtol=1e-10, atol=1e-12 * np.abs(x_py).max())
            np.testing.assert_allclose(P, P_py, rtol=1e-8, atol=1e-10 * np.abs(P_py).max())
        assert not np.array_equal(compiled[0][0], compiled[1][0])  # the filter moved after the restart
    # engine auto on a short record: the Python sequence (the step's first compilation would cost more)
    assert plugins.get_estimator("ukf")().stream(problem)._noise is None
    assert plugins.get_estimator("sr_ukf")().stream(problem)._noise is None
    # P made indefinite after the first sample: the next predict's Cholesky factorisation fails, in the compiled
    # step as in the Python sequence; the error names the filter, the time and the sample
    from robotid_sim_plugins.ekf.stream import StreamFilter

    ds = problem.dataset
    for python in (False, True):
        flt = plugins.get_estimator("ukf")(engine="compiled").stream(problem)
        update = (lambda *a, flt=flt: StreamFilter.update(flt, *a)) if python else flt.update
        update(ds.t[0], ds.q[0], ds.qd[0], ds.qdd[0], ds.tau[0])
        flt._P[:] = -np.eye(flt._P.shape[0])
        with pytest.raises(IdentificationError, match=r"'ukf': the state covariance lost positive definiteness at t"):
            update(ds.t[1], ds.q[1], ds.qd[1], ds.qdd[1], ds.tau[1])
    # the SR-UKF's factor not a number after the first sample: the predict's points have no finite dynamics, a
    # singular mass matrix both ways
    for python in (False, True):
        flt = plugins.get_estimator("sr_ukf")(engine="compiled").stream(problem)
        update = (lambda *a, flt=flt: StreamFilter.update(flt, *a)) if python else flt.update
        update(ds.t[0], ds.q[0], ds.qd[0], ds.qdd[0], ds.tau[0])
        flt.S[:] = np.nan
        with pytest.raises(IdentificationError, match=r"'sr_ukf': the mass matrix of the estimate is singular at t"):
            update(ds.t[1], ds.q[1], ds.qd[1], ds.qdd[1], ds.tau[1])
