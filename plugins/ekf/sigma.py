"""Sigma-point filters on the EKF's process model: UKF and CDKF on filterpy's ``UnscentedKalmanFilter``.

- UKF: filterpy's ``MerweScaledSigmaPoints`` (α, β, κ; BIRDy's defaults α = 0.1, β = 2, κ = 0) and its
  unscented transform.
- CDKF (central-difference Kalman filter, Nørgaard, Poulsen and Ravn 2000): the points x ± h·√P columns with
  h² = 3 (the value for a Gaussian prior), mean weights (h² − d)/h² and 1/(2h²), and the transform of Stirling's
  interpolation: P = Σᵢ w₁ (χᵢ − χ_{d+i})(…)ᵀ + w₂ (χᵢ + χ_{d+i} − 2χ₀)(…)ᵀ, w₁ = 1/(4h²), w₂ = (h² − 1)/(4h⁴),
  cross-covariance Σᵢ w₁ (χᵢ − χ_{d+i})(zᵢ − z_{d+i})ᵀ: :class:`CentralDifferencePoints`, a points class
  filterpy's filter takes, with its transform passed as filterpy's ``UT``.

Both run filterpy's predict and update unchanged; the sigma points go through the process model in one batched
call each (:meth:`~robotid_sim_plugins.ekf.process.EulerProcessModel.forward_many`, compiled for a chain)
instead of one Python call per point, and the cross-covariance is one product instead of a loop of outer
products (:class:`BatchedUKF`).
"""

from __future__ import annotations

import math

import numpy as np
from filterpy.kalman import MerweScaledSigmaPoints, UnscentedKalmanFilter
from robotid_sim_plugins.ekf.stream import StreamFilter
from scipy.linalg import cholesky

#: h² of the central-difference points: 3, optimal for a Gaussian prior (Nørgaard et al. 2000)
CDKF_H2 = 3.0


class CentralDifferencePoints:
    """The central-difference sigma points of dimension ``n`` in filterpy's points interface (``n``,
    ``num_sigmas()``, ``sigma_points(x, P)``, ``Wm``, ``Wc``), with the CDKF's transform and cross-covariance.

    Args:
        n: the state dimension.
        h2: h², the square of the half step (:data:`CDKF_H2`).
    """

    def __init__(self, n: int, h2: float = CDKF_H2):
        self.n, self.h2 = n, float(h2)
        self.Wm = np.full(2 * n + 1, 0.5 / self.h2)
        self.Wm[0] = (self.h2 - n) / self.h2
        self.Wc = self.Wm.copy()  # filterpy reads it; the transform below uses w1, w2
        self.w1, self.w2 = 0.25 / self.h2, (self.h2 - 1.0) / (4.0 * self.h2**2)

    def num_sigmas(self) -> int:
        return 2 * self.n + 1

    def sigma_points(self, x: np.ndarray, P: np.ndarray) -> np.ndarray:
        """(2n + 1, n): x, then x + h·Uₖ, then x − h·Uₖ, Uₖ the rows of P's upper Cholesky factor (filterpy's order)."""
        U = cholesky(self.h2 * P)
        return np.vstack([x, x + U, x - U])

    def split(self, sigmas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first-order, second-order) differences (n, k) of propagated points (2n + 1, k): χᵢ − χ_{n+i} and
        χᵢ + χ_{n+i} − 2χ₀."""
        n = self.n
        plus, minus = sigmas[1 : n + 1], sigmas[n + 1 :]
        return plus - minus, plus + minus - 2.0 * sigmas[0]

    def transform(self, sigmas, Wm, Wc, noise_cov=None, mean_fn=None, residual_fn=None):
        """filterpy's ``UT`` signature: (mean, covariance) of the propagated points by Stirling's interpolation."""
        first, second = self.split(sigmas)
        cov = self.w1 * first.T @ first + self.w2 * second.T @ second
        return Wm @ sigmas, cov if noise_cov is None else cov + noise_cov

    def cross_variance(self, sigmas_f: np.ndarray, sigmas_h: np.ndarray) -> np.ndarray:
        """(n, m) Σᵢ w₁ (χᵢ − χ_{n+i})(zᵢ − z_{n+i})ᵀ of the points (2n + 1, n) and their measurements (2n + 1, m)."""
        return self.w1 * self.split(sigmas_f)[0].T @ self.split(sigmas_h)[0]


class BatchedUKF(UnscentedKalmanFilter):
    """filterpy's UKF whose ``fx`` takes all sigma points at once ((S, d) -> (S, d)) and whose cross-covariance
    is one product (the CDKF's with :class:`CentralDifferencePoints`); predict and update are filterpy's."""

    def compute_process_sigmas(self, dt, fx=None, **fx_args):
        self.sigmas_f = (fx or self.fx)(self.points_fn.sigma_points(self.x, self.P), dt, **fx_args)

    def cross_variance(self, x, z, sigmas_f, sigmas_h):
        if isinstance(self.points_fn, CentralDifferencePoints):
            return self.points_fn.cross_variance(sigmas_f, sigmas_h)
        return (self.residual_x(sigmas_f, x) * self.Wc[:, None]).T @ self.residual_z(sigmas_h, z)


class SigmaPointFilter(StreamFilter):
    """UKF (``points`` Merwe's) or CDKF (``points`` :class:`CentralDifferencePoints`) on filterpy's filter.

    Args:
        process, schedule, lam0: as :class:`~robotid_sim_plugins.ekf.stream.StreamFilter`.
        points: the sigma points.
        name: the estimator's name.
    """

    def __init__(self, process, schedule, lam0, points, name: str):
        super().__init__(process, schedule, lam0)
        self.name = name
        self.points = points
        self.kf = BatchedUKF(process.dim_x, process.dim_z, process.dt, None, self._fx, points)
        self._ut = points.transform if isinstance(points, CentralDifferencePoints) else None

    @classmethod
    def ukf(cls, process, schedule, lam0, alpha: float, beta: float, kappa: float):
        """The UKF with Merwe's scaled points."""
        return cls(process, schedule, lam0, MerweScaledSigmaPoints(process.dim_x, alpha, beta, kappa), "ukf")

    @classmethod
    def cdkf(cls, process, schedule, lam0, h2: float = CDKF_H2):
        """The CDKF."""
        return cls(process, schedule, lam0, CentralDifferencePoints(process.dim_x, h2), "cdkf")

    @property
    def x(self):
        return self.kf.x

    @property
    def P(self):
        return self.kf.P

    def _fx(self, sigmas, dt, tau):
        return self.process.step_many(sigmas, self.process.forward_many(sigmas, tau))

    def restart(self, x, P):
        self.kf.x, self.kf.P = x.copy(), P.copy()
        self.kf.sigmas_f = self.points.sigma_points(self.kf.x, self.kf.P)

    def predict(self, tau, qdd, Q):
        self.kf.Q = Q
        self.kf.predict(UT=self._ut, tau=tau)
        self.kf.P = 0.5 * (self.kf.P + self.kf.P.T)

    def correct(self, z, tau, t):
        sigmas = self.kf.sigmas_f
        qdd, qdd_mean, Minv = self.process.mean_dynamics(sigmas, tau)
        R, tau_noise = self.measurement_noise(Minv, t)
        rows = iter(self.process.measure_many(sigmas, qdd))
        self.kf.update(z, R=R, UT=self._ut, hx=lambda _x: next(rows))
        self.kf.P = 0.5 * (self.kf.P + self.kf.P.T)
        return qdd_mean, tau_noise


def merwe_weights(d: int, alpha: float, beta: float, kappa: float) -> tuple[float, np.ndarray, np.ndarray]:
    """(γ = √(d + λ), Wm, Wc) of Merwe's scaled points, as filterpy's ``MerweScaledSigmaPoints``."""
    points = MerweScaledSigmaPoints(d, alpha, beta, kappa)
    lam = alpha**2 * (d + kappa) - d
    return math.sqrt(d + lam), points.Wm, points.Wc
