"""Square-root forms of the filters: the covariance kept as its lower Cholesky factor S (P = S Sᵀ).

S is never re-factorised from a covariance: each step builds the new factor from the old one by a QR
decomposition of the stacked square roots (a compound matrix whose Gram matrix is the new covariance) and
rank-one Cholesky updates or downdates (:func:`cholupdate`), so P stays symmetric and positive semi-definite by
construction where the plain form's P − K S Kᵀ can lose it to rounding (van der Merwe and Wan 2001).

- SR-UKF: predict S⁻ = qr([√Wc₁ (χᵢ − x̄), √Q]) then a rank-one update (or downdate, Wc₀ < 0) by χ₀ − x̄; update
  likewise for the measurement's S_z, then S ← S downdated by the m columns of K S_z.
- SR-CDKF: S⁻ = qr([√w₁ (χᵢ − χ_{d+i}), √w₂ (χᵢ + χ_{d+i} − 2χ₀), √Q]), no update needed; the update as the SR-UKF's.
- SR-EKF: predict S⁻ = qr([F S, √Q]); update by the array algorithm: the QR of [[√R, H S], [0, S]] gives S_z, the
  gain and the new S at once (the Joseph form's covariance).

The sigma points are those of the plain forms (:mod:`~robotid_sim_plugins.ekf.sigma`), from S directly: on
well-conditioned data the square-root forms give the plain forms' numbers to rounding.
"""

from __future__ import annotations

import numba
import numpy as np
from robotid_sim_plugins.ekf.sigma import CDKF_H2, merwe_weights
from robotid_sim_plugins.ekf.stream import StreamFilter


@numba.njit(cache=True)
def cholupdate(S, V, sign):  # pragma: no cover - compiled
    """In place: S (d, d) lower-triangular ← the Cholesky factor of S Sᵀ + sign·Σⱼ vⱼ vⱼᵀ, the columns vⱼ of V
    (d, k) one after the other (rank-one updates, sign 1, or downdates, sign −1). Returns False where a downdate
    would leave the matrix not positive definite."""
    d = S.shape[0]
    for c in range(V.shape[1]):
        v = V[:, c].copy()
        for k in range(d):
            r2 = S[k, k] ** 2 + sign * v[k] ** 2
            if not r2 > 0.0:
                return False
            r = np.sqrt(r2)
            cos, sin = r / S[k, k], v[k] / S[k, k]
            S[k, k] = r
            for i in range(k + 1, d):
                S[i, k] = (S[i, k] + sign * sin * v[i]) / cos
                v[i] = cos * v[i] - sin * S[i, k]
    return True


def qr_factor(A: np.ndarray) -> np.ndarray:
    """The lower-triangular S (k, k) with S Sᵀ = Aᵀ A for A (N, k), N ≥ k: Rᵀ of A's QR, columns signed so that
    S's diagonal is positive (the Cholesky factor)."""
    R = np.linalg.qr(A, mode="r")
    signs = np.where(np.diag(R) < 0, -1.0, 1.0)
    return (R * signs[:, None]).T


def psd_sqrt(Q: np.ndarray) -> np.ndarray:
    """A lower-triangular square root of the positive semi-definite Q (d, d): Cholesky on the rows and columns
    with a non-zero diagonal (a zero-variance state, e.g. no parameter process noise, gets a zero column)."""
    keep = np.diag(Q) > 0
    root = np.zeros_like(Q)
    root[np.ix_(keep, keep)] = np.linalg.cholesky(Q[np.ix_(keep, keep)])
    return root


class _CholeskyState(StreamFilter):
    """The state of a square-root filter: the mean x and the lower Cholesky factor S of P = S Sᵀ, which is kept
    (only a restart factors a given P)."""

    def _init_state(self, d: int) -> None:
        self._x, self.S = np.zeros(d), np.eye(d)

    @property
    def x(self):
        return self._x

    @property
    def P(self):
        return self.S @ self.S.T

    def restart(self, x, P):
        self._x = x.copy()
        self.S = np.linalg.cholesky(P)


class SquareRootSigmaFilter(_CholeskyState):
    """SR-UKF (``kind`` "ukf", Merwe's points α, β, κ) or SR-CDKF (``kind`` "cdkf", h² = 3) (module docstring).

    Args:
        process, schedule, lam0: as :class:`~robotid_sim_plugins.ekf.stream.StreamFilter`.
        kind: "ukf" or "cdkf".
        alpha, beta, kappa: Merwe's parameters (SR-UKF).
    """

    def __init__(self, process, schedule, lam0, kind: str, alpha=0.1, beta=2.0, kappa=0.0):
        super().__init__(process, schedule, lam0)
        self.kind, self.name = kind, f"sr_{kind}"
        d = process.dim_x
        if kind == "ukf":
            self.gamma, self.Wm, self.Wc = merwe_weights(d, alpha, beta, kappa)
        else:
            self.gamma = np.sqrt(CDKF_H2)
            self.Wm = np.full(2 * d + 1, 0.5 / CDKF_H2)
            self.Wm[0] = (CDKF_H2 - d) / CDKF_H2
            self.w1, self.w2 = 0.25 / CDKF_H2, (CDKF_H2 - 1.0) / (4.0 * CDKF_H2**2)
        self._init_state(d)

    def _sigmas(self) -> np.ndarray:
        U = self.gamma * self.S.T  # rows: the columns of S, as filterpy's points take the rows of cholesky(P)ᵀ
        return np.vstack([self._x, self._x + U, self._x - U])

    def _factor(self, sigmas: np.ndarray, mean: np.ndarray, noise_root: np.ndarray) -> np.ndarray:
        """The factor of the propagated points' covariance plus the noise's (module docstring)."""
        d = self.process.dim_x
        if self.kind == "cdkf":
            plus, minus = sigmas[1 : d + 1], sigmas[d + 1 :]
            stacked = [np.sqrt(self.w1) * (plus - minus), np.sqrt(self.w2) * (plus + minus - 2.0 * sigmas[0])]
            return qr_factor(np.vstack([*stacked, noise_root.T]))
        S = qr_factor(np.vstack([np.sqrt(self.Wc[1]) * (sigmas[1:] - mean), noise_root.T]))
        sign = 1.0 if self.Wc[0] >= 0 else -1.0
        if not cholupdate(S, (np.sqrt(abs(self.Wc[0])) * (sigmas[0] - mean))[:, None], sign):
            raise np.linalg.LinAlgError("downdate")
        return S

    def predict(self, tau, qdd, Q):
        sigmas = self._sigmas()
        sigmas = self.process.step_many(sigmas, self.process.forward_many(sigmas, tau))
        self._x = self.Wm @ sigmas
        self.S = self._factor(sigmas, self._x, psd_sqrt(Q))

    def correct(self, z, tau, t):
        d = self.process.dim_x
        sigmas = self._sigmas()
        qdd, qdd_mean, Minv = self.process.mean_dynamics(sigmas, tau)
        R, tau_noise = self.measurement_noise(Minv, t)
        Z = self.process.measure_many(sigmas, qdd)
        zp = self.Wm @ Z
        Sz = self._factor(Z, zp, np.linalg.cholesky(R))
        if self.kind == "cdkf":
            Pxz = self.w1 * (sigmas[1 : d + 1] - sigmas[d + 1 :]).T @ (Z[1 : d + 1] - Z[d + 1 :])
        else:
            Pxz = (self.Wc[:, None] * (sigmas - self._x)).T @ (Z - zp)
        K = np.linalg.solve(Sz.T, np.linalg.solve(Sz, Pxz.T)).T  # Pxz (Sz Szᵀ)⁻¹
        self._x = self._x + K @ (z - zp)
        if not cholupdate(self.S, K @ Sz, -1.0):
            raise np.linalg.LinAlgError("downdate")
        return qdd_mean, tau_noise


class SquareRootEKF(_CholeskyState):
    """SR-EKF: the EKF's linearisation (:meth:`~robotid_sim_plugins.ekf.process.EulerProcessModel.linearize`)
    with the factor S propagated by QR (module docstring)."""

    name = "sr_ekf"

    def __init__(self, process, schedule, lam0):
        super().__init__(process, schedule, lam0)
        d = process.dim_x
        self._init_state(d)
        self._lin = None

    def predict(self, tau, qdd, Q):
        lin = self._lin
        F = self.process.F_jacobian(lin)
        self._x = self.process.fx(self._x[:, None], lin.acceleration_at(self._x))[:, 0]
        self.S = qr_factor(np.vstack([(F @ self.S).T, psd_sqrt(Q).T]))

    def correct(self, z, tau, t):
        process, d = self.process, self.process.dim_x
        lin = self._lin = process.linearize(self._x.copy(), tau)
        R, tau_noise = self.measurement_noise(lin.mass_matrix_inverse, t)
        H, m = process.H_jacobian(lin), R.shape[0]
        pre = np.zeros((m + d, m + d))
        pre[:m, :m] = np.linalg.cholesky(R)
        pre[:m, m:] = H @ self.S
        pre[m:, m:] = self.S
        post = qr_factor(pre.T)  # [[S_z, 0], [K̄, S⁺]], K = K̄ S_z⁻¹
        Sz, Kbar = post[:m, :m], post[m:, :m]
        K = np.linalg.solve(Sz.T, Kbar.T).T
        self._x = self._x + K @ (z - process.hx(lin)[:, 0])
        self.S = post[m:, m:].copy()
        return lin.qdd, tau_noise
