"""Issue 31: the particle filter ``pf`` (Rao–Blackwellised: each particle samples the joint states and carries a
Gaussian over the parameters, updated by the exact Kalman step on the torque) on the bundled PRRRP arm with the
data of the default scenario ``prrrp_seed004``. Short cases; the whole record is ``benchmarks/filters_prrrp.py``."""

from __future__ import annotations

import numpy as np
import pytest
from filterpy.kalman import KalmanFilter

from robotid_sim import plugins
from robotid_sim.errors import ConfigError
from robotid_sim.identification import IdentificationProblem
from robotid_sim.identification.online import stream_estimates


@pytest.fixture(scope="module")
def study(prrrp_study):
    """(true base parameters, noisy identification problem, noise-free one) of the default scenario."""
    robot, ds, clean = prrrp_study
    structure = robot.structure()
    return robot.base_parameters().true_values(), IdentificationProblem(structure, ds), structure, clean


def test_particle_filter_does_not_collapse_from_the_default_start(study):
    """Before the Rao–Blackwellised form the cloud collapsed within 1–2 s onto parameters 70–110 % off (one
    sample's likelihood far narrower than the prior): from λ0 = 0.1, 2 s of noise-free data now put the masses
    within 2 % and half the parameters within 5 %."""
    truth, _, structure, clean = study
    model = plugins.get_estimator("pf")(particles=20).fit(IdentificationProblem(structure, clean.slice(0, 400)))
    names = list(model.parameter_names)
    masses = [names.index("M1"), names.index("M5")]
    assert np.all(np.abs(model.values[masses] - truth[masses]) < 0.02 * truth[masses])
    nonzero = truth != 0
    assert np.median(np.abs(model.values[nonzero] - truth[nonzero]) / np.abs(truth[nonzero])) < 0.05


def test_update_sample_by_sample_gives_the_numbers_of_fit(study):
    problem = IdentificationProblem(study[2], study[1].dataset.slice(0, 100))
    estimator = plugins.get_estimator("pf")(particles=20, seed=5)
    streamed = list(stream_estimates(problem, estimator, reports=2))
    np.testing.assert_array_equal(streamed[-1][1], estimator.fit(problem).values)


def test_each_particle_takes_the_exact_kalman_update_of_the_parameters(study):
    """The batched update of every particle's Gaussian over λ by the torque equals filterpy's ``KalmanFilter``
    on that particle alone (mean, covariance and predictive log-likelihood, the latter up to a constant)."""
    from robotid_sim_plugins.ekf.particle import regressors
    from robotid_sim_plugins.ekf.stream import mass_matrix

    problem = IdentificationProblem(study[2], study[1].dataset.slice(0, 30))
    flt = plugins.get_estimator("pf")(particles=12).stream(problem)
    ds = problem.dataset
    for k in range(29):
        flt.update(ds.t[k], ds.q[k], ds.qd[k], ds.qdd[k], ds.tau[k])
    flt.sample = (ds.q[29], ds.qd[29], ds.qdd[29])
    n, t = flt.process.n, ds.t[29] - ds.t[0]
    means, covariances = flt.means.copy(), flt.covariances.copy()
    Y = regressors(flt.process, flt.states[:, :n], flt.states[:, n:], np.broadcast_to(ds.qdd[29], (12, n)))
    M = mass_matrix(flt.process, np.concatenate([ds.q[29], ds.qd[29], flt.w @ means]), ds.tau[29])[0]
    R = flt.schedule.update_noise(M, np.arange(2 * n, 3 * n), t)
    log_like = flt.update_parameters(ds.tau[29], t)
    expected = []
    for i in (0, 7):
        kf = KalmanFilter(dim_x=means.shape[1], dim_z=n)
        kf.x, kf.P, kf.H, kf.R = means[i][:, None].copy(), covariances[i].copy(), Y[i], R
        kf.update(ds.tau[29][:, None])
        np.testing.assert_allclose(flt.means[i], kf.x[:, 0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(flt.covariances[i], kf.P, rtol=1e-7, atol=1e-9 * np.abs(kf.P).max())
        expected.append(kf.log_likelihood)
    np.testing.assert_allclose(log_like[0] - log_like[7], expected[0] - expected[1], rtol=1e-8, atol=1e-8)


def test_particle_filter_refuses_a_record_without_measured_accelerations(study):
    with pytest.raises(ConfigError, match="'pf' needs the measured accelerations: add 'qdd' to measurements"):
        plugins.get_estimator("pf")(measurements=["q", "qd"]).fit(study[1])
