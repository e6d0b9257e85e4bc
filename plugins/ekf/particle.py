"""The particle filter on the EKF's process model: sequential importance resampling with roughening.

Particles are states [q, qd, λ] (N, d). Per sample: each moves by the Euler step of its own forward dynamics with
the previous torque plus a draw of the process noise Q (one whose M(q, λ) is singular gets weight 0); each is
weighted by the Gaussian likelihood of the
measurement with R(t); when the effective sample size 1/Σw² falls below half the particles, filterpy's
``systematic_resample`` draws N of them by weight, and the parameters, the particles' static state, are
roughened (Gordon, Salmond and Smith 1993) so that the cloud keeps exploring around the survivors instead of
collapsing onto a few copies: each gets a normal jitter of h = K·N^(−1/b) times the parameter's spread over the
particles (b the parameters), with the cloud shrunk towards its mean by √(1 − h²) (Liu and West 2001) so that
the jitter keeps its variance instead of inflating it at every resampling (Gordon's jitter alone grows the
spread without bound when the likelihood is flat and resampling frequent).

filterpy's resampling draws from numpy's global generator: it is seeded from the filter's own generator for
each resampling and restored afterwards, so a fit is reproducible from ``seed`` and leaves the global state as
it found it.
"""

from __future__ import annotations

import numpy as np
from filterpy.monte_carlo import systematic_resample
from robotid_sim_plugins.ekf.square_root import psd_sqrt
from robotid_sim_plugins.ekf.stream import StreamFilter
from scipy.linalg import cho_factor, cho_solve


class ParticleFilter(StreamFilter):
    """SIR particle filter with roughening (module docstring).

    Args:
        process, schedule, lam0: as :class:`~robotid_sim_plugins.ekf.stream.StreamFilter`.
        particles: N.
        roughening: K (0: none).
        rng: the generator of every draw.
    """

    name = "pf"

    def __init__(self, process, schedule, lam0, particles: int, roughening: float, rng: np.random.Generator):
        super().__init__(process, schedule, lam0)
        self.N, self.roughening, self.rng = particles, roughening, rng
        self.X = np.zeros((particles, process.dim_x))
        self.w = np.full(particles, 1.0 / particles)
        self.resamplings = 0

    @property
    def x(self):
        return self.w @ self.X

    @property
    def P(self):
        D = self.X - self.x
        return (self.w[:, None] * D).T @ D

    def restart(self, x, P):
        n2 = 2 * self.process.n
        draws = x + self.rng.standard_normal((self.N, x.size)) @ psd_sqrt(P).T
        if self.samples:  # a new recording: the states restart, the parameters' cloud carries on
            self.X[:, :n2] = draws[:, :n2]
        else:
            self.X = draws

    def predict(self, tau, qdd, Q):
        process = self.process
        qdd = process.forward_many(self.X, tau, singular_nan=True)
        moved = process.step_many(self.X, np.nan_to_num(qdd))  # a singular particle stays: its weight is 0
        self.X = moved + self.rng.standard_normal(self.X.shape) @ psd_sqrt(Q).T

    def correct(self, z, tau, t):
        process = self.process
        qdd = process.forward_many(self.X, tau, singular_nan=True)
        singular = ~np.isfinite(qdd).all(axis=1)  # a particle whose M(q, λ) is singular: weight 0
        if singular.all():
            raise np.linalg.LinAlgError("every particle's mass matrix is singular")
        # the noise at the heaviest regular particle (the weighted mean of the cloud may have a singular M)
        _, qdd_mean, Minv = process.mean_dynamics(self.X[np.argmax(np.where(singular, -1.0, self.w))][None], tau)
        R, tau_noise = self.measurement_noise(Minv, t)
        e = z - process.measure_many(self.X, np.where(singular[:, None], 0.0, qdd))
        log_w = np.log(np.maximum(self.w, 1e-300)) - 0.5 * np.einsum("ij,ij->i", e, cho_solve(cho_factor(R), e.T).T)
        log_w[singular | ~np.isfinite(log_w)] = -np.inf
        if not np.isfinite(log_w.max()):  # no particle explains the measurement: the cloud lost the state
            raise np.linalg.LinAlgError("every particle's likelihood is 0")
        w = np.exp(log_w - log_w.max())
        self.w = w / w.sum()
        if 1.0 / np.sum(self.w**2) < 0.5 * self.N:
            self.resample()
        return qdd_mean, tau_noise

    def resample(self) -> None:
        """filterpy's systematic resampling, then the parameters roughened (module docstring)."""
        state = np.random.get_state()
        np.random.seed(int(self.rng.integers(2**32)))
        try:
            index = systematic_resample(self.w)
        finally:
            np.random.set_state(state)
        self.X, self.w = self.X[index], np.full(self.N, 1.0 / self.N)
        self.resamplings += 1
        if self.roughening:
            lam = self.X[:, 2 * self.process.n :]
            h = min(self.roughening * self.N ** (-1.0 / lam.shape[1]), 1.0)
            mean, std = lam.mean(axis=0), lam.std(axis=0)
            lam[:] = mean + np.sqrt(1.0 - h * h) * (lam - mean) + h * std * self.rng.standard_normal(lam.shape)
