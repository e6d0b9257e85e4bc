"""Issue 31: the UKF's and CDKF's compiled step (``sigma_step``: a sample's predict and correction with their
noise in one compiled call on a compiled chain) gives the numbers of the Python sequence of
``StreamFilter.update`` on the same chain, restarts included, and fails as it does."""

from __future__ import annotations

import numpy as np
import pytest

from robotid_sim import plugins
from robotid_sim.errors import IdentificationError
from robotid_sim.identification import IdentificationProblem


@pytest.fixture(scope="module")
def problem(prrrp_study):
    """The default scenario's noisy record, its first 160 samples."""
    robot, noisy, _ = prrrp_study
    return IdentificationProblem(robot.structure(), noisy.slice(0, 160))


def _stream(problem, name, python: bool, restart_at: int = 80, **options):
    """The filter ``name`` over the record, the states restarting at ``restart_at`` (a second recording); with
    ``python`` the sequence of StreamFilter.update instead of the compiled step. (λ (b,), P (d, d)) at the end and
    after the restart's sample."""
    from robotid_sim_plugins.ekf.stream import StreamFilter

    flt = plugins.get_estimator(name)(**options).stream(problem)
    assert flt.process.chain is not None  # prrrp's chain compiles: the compiled step runs
    update = (lambda *a, **k: StreamFilter.update(flt, *a, **k)) if python else flt.update
    ds, out = problem.dataset, []
    for k in range(ds.n_samples):
        update(ds.t[k], ds.q[k], ds.qd[k], ds.qdd[k], ds.tau[k], restart=k == restart_at)
        if k in (restart_at, ds.n_samples - 1):
            out.append((flt.x.copy(), flt.P.copy()))
    return out, flt


@pytest.mark.parametrize("name", ["ukf", "cdkf"])
def test_the_compiled_step_gives_the_numbers_of_the_python_sequence(problem, name):
    compiled, flt = _stream(problem, name, python=False)
    python, _ = _stream(problem, name, python=True)
    assert flt.physical  # the mean's mass matrix became positive definite on the way
    for (x, P), (x_py, P_py) in zip(compiled, python, strict=True):
        np.testing.assert_allclose(x, x_py, rtol=1e-10, atol=1e-12 * np.abs(x_py).max())
        np.testing.assert_allclose(P, P_py, rtol=1e-8, atol=1e-10 * np.abs(P_py).max())
    assert not np.array_equal(compiled[0][0], compiled[1][0])  # the filter moved after the restart


@pytest.mark.parametrize("python", [False, True])
def test_a_covariance_that_is_not_positive_definite_is_the_filters_divergence(problem, python):
    """P made indefinite after the first sample: the next predict's Cholesky factorisation fails, in the compiled
    step as in the Python sequence: the error names the filter, the time and the sample."""
    from robotid_sim_plugins.ekf.stream import StreamFilter

    flt = plugins.get_estimator("ukf")().stream(problem)
    update = (lambda *a: StreamFilter.update(flt, *a)) if python else flt.update
    ds = problem.dataset
    update(ds.t[0], ds.q[0], ds.qd[0], ds.qdd[0], ds.tau[0])
    flt._P[:] = -np.eye(flt._P.shape[0])
    with pytest.raises(IdentificationError, match=r"'ukf': the state covariance lost positive definiteness at t = "):
        update(ds.t[1], ds.q[1], ds.qd[1], ds.qdd[1], ds.tau[1])
