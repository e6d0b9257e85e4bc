"""The particle filter on the EKF's model: a Rao–Blackwellised (marginalised) particle filter.

The parameters λ enter the torque linearly, τ = Y(q, qd, qdd) λ, and are static, so they need not be sampled:
each particle i carries joint states s_i = [q_i, qd_i] (the sampled part) and a Gaussian N(m_i, C_i) over λ
(the marginalised part; Schön, Gustafsson and Nordlund 2005). The accelerations are measured (the torque form of
the EKF), so the states move by the Euler step with the recorded acceleration, independent of λ, and given a
particle's states the torque is a linear Gaussian measurement of λ: its Kalman update is exact.

Per sample: each particle's states move by the Euler step with the previous sample's recorded acceleration, C_i
gains the parameters' process noise. The states' process noise is drawn from its optimal proposal (Doucet,
Godsill and Andrieu 2000): q and qd are measured directly, so the draw is the Kalman update of the moved states by
the measured q and qd (one gain for all particles, the noise's covariance Q as its prior), and the weight takes
their predictive likelihood N(z_q,qd; H s̄, H Q Hᵀ + R). Then each particle's λ takes the Kalman update by the
measured torque, Y_i = Y(q_i, qd_i, qdd) at its drawn states and the recorded acceleration, with the EKF's noise
R_τ = diag(σ_τ²) + M diag(σ_qdd²) Mᵀ (M at the measured states and the cloud's mean λ; :meth:`~robotid_sim_plugins.
ekf.noise.NoiseSchedule.update_noise`), and the weight its predictive likelihood N(τ; Y_i m_i, Y_i C_i Y_iᵀ + R_τ).
Where one sample's likelihood would leave fewer than half the particles effective, the weights take only the
share β of its log-likelihood that leaves half (progressive correction; Musso, Oudjane and Le Gland 2001) and the
cloud is resampled. Resampling (filterpy's ``systematic_resample``, also whenever the effective sample size 1/Σw²
falls below half the particles) is followed by roughening of the parameters' means: each gets a normal jitter of
h = K·N^(−1/b) times the weighted cloud's covariance of the means (its square root by eigendecomposition, BIRDy's
kernel), with the cloud shrunk towards its mean by √(1 − h²) (Liu and West 2001) so that the jitter keeps the
covariance instead of inflating it at every resampling.

The estimate is the weighted mean of [s_i, m_i]; its covariance the mixture's, Σ w_i (C_i on the λ block + the
spread of the particles' means). filterpy's resampling draws from numpy's global generator: it is seeded from the
filter's own generator for each resampling and restored afterwards, so a fit is reproducible from ``seed`` and
leaves the global state as it found it.
"""

from __future__ import annotations

import numpy as np
from filterpy.monte_carlo import systematic_resample
from robotid_sim_plugins.ekf.process import SingularMassMatrix
from robotid_sim_plugins.ekf.square_root import psd_sqrt
from robotid_sim_plugins.ekf.stream import StreamFilter, mass_matrix, positive_definite
from scipy.linalg import cho_factor, cho_solve


class ParticleFilter(StreamFilter):
    """Rao–Blackwellised particle filter with roughening (module docstring); the accelerations must be measured.

    Args:
        process, schedule, lam0: as :class:`~robotid_sim_plugins.ekf.stream.StreamFilter`.
        particles: N.
        roughening: K (0: none).
        rng: the generator of every draw.
    """

    name = "pf"

    def __init__(self, process, schedule, lam0, particles: int, roughening: float, rng: np.random.Generator):
        super().__init__(process, schedule, lam0)
        n2, b = 2 * process.n, process.b
        self.N, self.roughening, self.rng = particles, roughening, rng
        self.states = np.zeros((particles, n2))  # s_i = [q_i, qd_i]
        self.means = np.zeros((particles, b))  # m_i
        self.covariances = np.zeros((particles, b, b))  # C_i
        self.w = np.full(particles, 1.0 / particles)
        self.resamplings = 0
        self.state_covariance = np.zeros((n2, n2))  # the states' prior covariance

    @property
    def x(self):
        return np.concatenate([self.w @ self.states, self.w @ self.means])

    @property
    def P(self):
        D = np.hstack([self.states, self.means]) - self.x
        P = (self.w[:, None] * D).T @ D
        P[2 * self.process.n :, 2 * self.process.n :] += np.tensordot(self.w, self.covariances, axes=1)
        return P

    def restart(self, x, P):
        n2 = 2 * self.process.n
        if not self.samples:  # every particle's λ from the prior; a new recording carries them on
            self.means[:] = x[n2:]
            self.covariances[:] = P[n2:, n2:]
        self.states[:] = x[:n2]  # the states: drawn by the correction from N(x, P's block)
        self.state_covariance = P[:n2, :n2]

    def predict(self, tau, qdd, Q):
        n = self.process.n
        self.states[:, :n] += self.process.dt * self.states[:, n:]
        self.states[:, n:] += self.process.dt * qdd  # the recorded acceleration: the same for every particle
        self.covariances += np.diag(Q.parameters)
        self.state_covariance = Q.states  # the states' noise: drawn by the correction

    def draw_states(self, z: np.ndarray, t: float) -> np.ndarray:
        """Draw the particles' states from their optimal proposal given the measured q and qd and return those
        measurements' log predictive likelihood (N,) (module docstring)."""
        process, n2 = self.process, 2 * self.process.n
        direct = process.rows < n2
        H = np.eye(n2)[process.rows[direct]]
        R = self.schedule.update_noise(None, process.rows[direct], t)
        C = self.state_covariance
        S = cho_factor(H @ C @ H.T + R)
        gain = cho_solve(S, H @ C).T  # (2n, m_direct)
        innovation = z[direct] - self.states @ H.T
        posterior = C - gain @ H @ C
        self.states += innovation @ gain.T
        self.states += self.rng.standard_normal((self.N, n2)) @ psd_sqrt(0.5 * (posterior + posterior.T)).T
        return -0.5 * np.einsum("ij,ij->i", innovation, cho_solve(S, innovation.T).T)

    def update_parameters(self, tau: np.ndarray, t: float) -> np.ndarray:
        """Each particle's Kalman update of λ by the measured torque τ (n,) at its states (module docstring);
        returns the torque's log predictive likelihood (N,).

        Raises:
            LinAlgError: a particle's innovation covariance is not positive definite.
        """
        process, n = self.process, self.process.n
        q, qd, qdd = self.sample
        joints = process.rows[process.rows >= 2 * n] - 2 * n
        Y = regressors(process, self.states[:, :n], self.states[:, n:], np.broadcast_to(qdd, (self.N, n)))[:, joints]
        lam = self.w @ self.means
        try:
            M = mass_matrix(process, np.concatenate([q, qd, lam]), tau)[0]
        except SingularMassMatrix:
            M = None
        R = self.schedule.update_noise(M if M is not None and positive_definite(M) else None, joints + 2 * n, t)
        YC = Y @ self.covariances  # (N, mt, b)
        L = np.linalg.cholesky(YC @ Y.transpose(0, 2, 1) + R)  # the innovation covariances' factors (batched)
        innovation = tau[joints] - np.einsum("nib,nb->ni", Y, self.means)
        Z = forward_substitution(L, np.concatenate([YC, innovation[:, :, None]], axis=2))  # L⁻¹ [Y C, e]
        W, v = Z[:, :, :-1], Z[:, :, -1]
        self.means += np.einsum("nib,ni->nb", W, v)
        self.covariances -= W.transpose(0, 2, 1) @ W  # C − C Yᵀ S⁻¹ Y C, symmetric as computed
        log_det = 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
        return -0.5 * (np.einsum("ni,ni->n", v, v) + log_det)

    def correct(self, z, tau, t):
        log_like = self.draw_states(z, t) + self.update_parameters(tau, t)
        if not np.all(np.isfinite(log_like)):
            raise np.linalg.LinAlgError("a particle's likelihood is not finite")
        log_w = np.log(np.maximum(self.w, 1e-300))
        beta = self.correction(log_w, log_like)
        w = np.exp(log_w + beta * (log_like - log_like.max()) - log_w.max())
        self.w = w / w.sum()
        if beta < 1.0 or 1.0 / np.sum(self.w**2) < 0.5 * self.N:
            self.resample()
        # the recorded acceleration moves the states (predict): its noise is the velocity's
        return self.sample[2], np.diag(self.schedule.measurement_std["qdd"] ** 2)

    def correction(self, log_w: np.ndarray, log_like: np.ndarray) -> float:
        """β ∈ (0, 1], the share of this sample's likelihood the weights take: 1, or where all of it would leave
        fewer than half the particles effective, the β (bisection) that leaves half (progressive correction)."""

        def effective(beta):
            w = np.exp(log_w - log_w.max() + beta * (log_like - log_like.max()))
            return w.sum() ** 2 / np.sum(w**2)

        if effective(1.0) >= 0.5 * self.N:
            return 1.0
        lo, hi = 0.0, 1.0
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if effective(mid) >= 0.5 * self.N else (lo, mid)
        return max(lo, 1e-12)

    def resample(self) -> None:
        """filterpy's systematic resampling, then the parameters' means roughened (module docstring)."""
        mean = self.w @ self.means
        spread = (self.w[:, None] * (self.means - mean)).T @ (self.means - mean)  # the weighted means' covariance
        state = np.random.get_state()
        np.random.seed(int(self.rng.integers(2**32)))
        try:
            index = systematic_resample(self.w)
        finally:
            np.random.set_state(state)
        self.states, self.means, self.covariances = self.states[index], self.means[index], self.covariances[index]
        self.w = np.full(self.N, 1.0 / self.N)
        self.resamplings += 1
        if self.roughening:
            h = min(self.roughening * self.N ** (-1.0 / self.means.shape[1]), 1.0)
            values, vectors = np.linalg.eigh(spread)
            root = vectors * np.sqrt(np.clip(values, 0.0, None))
            jitter = self.rng.standard_normal(self.means.shape) @ root.T
            self.means = mean + np.sqrt(1.0 - h * h) * (self.means - mean) + h * jitter


def regressors(process, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
    """(N, n, b) the base regressor at N states q, qd, qdd (N, n) each: the compiled chain's where there is one."""
    if process.chain is None:
        return process.regressor(q, qd, qdd)
    from robotid_sim_plugins.ekf.compiled import base_regressor

    Y = np.empty((q.shape[0], process.n, process.b))
    base_regressor(process.chain.arrays, *(np.ascontiguousarray(v) for v in (q, qd, qdd)), Y)
    return Y


# numpy's batched linalg calls LAPACK once per matrix, about as slow as the filter's other work together for the
# particles' n × n innovation covariances: these loop over the n columns instead, vectorised over the particles


def forward_substitution(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """(N, n, c) L⁻¹ B for N lower-triangular L (N, n, n) and right-hand sides B (N, n, c)."""
    Z = np.empty_like(B)
    for j in range(L.shape[1]):
        Z[:, j] = (B[:, j] - np.einsum("nk,nkc->nc", L[:, j, :j], Z[:, :j])) / L[:, j, j, None]
    return Z
