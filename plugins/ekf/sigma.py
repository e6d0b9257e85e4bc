"""Sigma-point filters on the EKF's process model: the UKF and the CDKF, for additive noise.

Both draw the 2d + 1 points x, x ± γ·Lₖ (Lₖ the columns of P's lower Cholesky factor) before the predict and
again, from the predicted mean and covariance, before the update (the additive-noise form of Wan and van der
Merwe 2000, and BIRDy's and ReBEL's CDKF): the update's points then carry the process noise Q, and the
cross-covariance is the exact (1/2γ)·L (Z₊ − Z₋) of the points' measurements Z instead of an approximation from
the propagated points.

- UKF (Julier and Uhlmann; Wan and van der Merwe 2000): γ and the weights of filterpy's
  ``MerweScaledSigmaPoints`` (α, β, κ; BIRDy's defaults α = 0.1, β = 2, κ = 0).
- CDKF (central-difference Kalman filter, Nørgaard, Poulsen and Ravn 2000): γ = h = √3 (h² = 3, the value for a
  Gaussian prior), mean weights (h² − d)/h² and 1/(2h²), covariance by Stirling's interpolation
  w₁ Σ (χᵢ − χ_{d+i})(…)ᵀ + w₂ Σ (χᵢ + χ_{d+i} − 2χ₀)(…)ᵀ, w₁ = 1/(4h²), w₂ = (h² − 1)/(4h⁴).

Both transforms are one :class:`SigmaRule`: for propagated values V of the points, the covariance is
FᵀF + SᵀS + c·vvᵀ with the first-order root F = (V₊ − V₋)/(2γ) (both rules: 2Wᵢγ² = 4w₁h² = 1), the
second-order root S = √w (V₊ + V₋ − 2V₀) (UKF: w = Wᵢ/2; CDKF: w = w₂) and the centre
term (UKF: c = β − α², v = V₀ − mean; CDKF: none). The UKF's usual form Σ Wcᵢ (Vᵢ − mean)(…)ᵀ has a negative
Wc₀ (α = 0.1, d = 29: Wc₀ ≈ −96); taken about V₀ instead of the mean, the same sum is Σᵢ₍≥₁₎ Wᵢ (Vᵢ − V₀)(…)ᵀ +
(Wc₀ − 1 − Wm₀)·vvᵀ and Wc₀ − Wm₀ = 1 − α² + β, so every weight is ≥ 0 for β ≥ α²: the square-root UKF then
needs no Cholesky downdate (:mod:`~robotid_sim_plugins.ekf.square_root`).

The Euler step f(χ) = χ + Δt·[qd, qdd, 0] only changes q and qd, so the predicted covariance is P + the first-order
cross terms on the rows and columns of q and qd plus Δt² times the transform of g = [qd, qdd] (the 2n × 2n block)
and Q: O(d²·n) instead of O(d³). The points' dynamics come from
:meth:`~robotid_sim_plugins.ekf.process.EulerProcessModel.sigma_dynamics` (the points that move only λ share one
basis of the model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from filterpy.kalman import MerweScaledSigmaPoints
from robotid_sim_plugins.ekf.filter import diverged, singular
from robotid_sim_plugins.ekf.process import SingularMassMatrix
from robotid_sim_plugins.ekf.sigma_kernel import sigma_correct, sigma_predict, sigma_roots, still_physical
from robotid_sim_plugins.ekf.stream import StreamFilter
from scipy.linalg.lapack import dpotrf

#: h² of the central-difference points: 3, optimal for a Gaussian prior (Nørgaard et al. 2000)
CDKF_H2 = 3.0


@dataclass(frozen=True)
class SigmaRule:
    """The spread and weights of a sigma-point transform over the points x, x ± γ·Lₖ (module docstring).

    Attributes:
        gamma: γ, the points' spread in units of the factor's columns.
        Wm: (2d + 1,) the mean weights.
        second: w of the second-order root √w (V₊ + V₋ − 2V₀).
        centre: c, the weight of the centre term (0: none).
    """

    gamma: float
    Wm: np.ndarray
    second: float
    centre: float

    @classmethod
    def unscented(cls, d: int, alpha: float, beta: float, kappa: float) -> SigmaRule:
        """The UKF's: filterpy's ``MerweScaledSigmaPoints`` of dimension d, its covariance taken about the centre
        point (module docstring: the centre weight β − α² instead of Wc₀, ≥ 0 for β ≥ α²)."""
        points = MerweScaledSigmaPoints(d, alpha, beta, kappa)
        gamma = math.sqrt(d + alpha**2 * (d + kappa) - d)
        centre = float(points.Wc[0] - 1.0 - points.Wm[0])  # = β − α²
        return cls(gamma, points.Wm, 0.5 * points.Wc[1], centre)

    @classmethod
    def central_difference(cls, d: int, h2: float = CDKF_H2) -> SigmaRule:
        """The CDKF's with h² (:data:`CDKF_H2`)."""
        Wm = np.full(2 * d + 1, 0.5 / h2)
        Wm[0] = (h2 - d) / h2
        return cls(math.sqrt(h2), Wm, (h2 - 1.0) / (4.0 * h2**2), 0.0)

    def roots(self, V: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(mean (k,), first-order root (d, k), second-order root (d, k), centre deviation (k,)) of the values
        V (2d + 1, k) at the points."""
        d, k = (V.shape[0] - 1) // 2, V.shape[1]
        mean, first, second, centre = np.empty(k), np.empty((d, k)), np.empty((d, k)), np.empty(k)
        sigma_roots(V, self.Wm, self.gamma, self.second, mean, first, second, centre)
        return mean, first, second, centre


def cholesky(P: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor (d, d) of the symmetric P (d, d) from its lower triangle, LAPACK's (numpy's
    numbers, without its wrapping; a Fortran-ordered P is read without a transposed copy).

    Raises:
        LinAlgError: P is not positive definite.
    """
    L, info = dpotrf(P, lower=1, clean=1)
    if info:
        raise np.linalg.LinAlgError("Cholesky")
    return L


def full_symmetric(P: np.ndarray) -> np.ndarray:
    """(d, d) the symmetric matrix of P's lower triangle (its upper triangle ignored)."""
    lower = np.tril(P)
    return lower + np.tril(lower, -1).T


class CompiledSteps:
    """What a sigma-point filter needs to run each sample as compiled calls on a compiled chain (``one_call``):
    the step's small state and :meth:`compiled_update`, which sequences the sample as
    :meth:`~robotid_sim_plugins.ekf.stream.StreamFilter.update` does (the same numbers to rounding). Mixed into
    :class:`~robotid_sim_plugins.ekf.stream.StreamFilter` subclasses."""

    def _init_steps(self, process, schedule, one_call: bool) -> None:
        """The step's state: the pending sample (its torque, its mean's acceleration, [its time, 0, …]), its torque
        noise, the acceleration before it and the flags [predict pending, acceleration before it, physical]; the
        schedule's tuple where the compiled calls run (else None: the Python sequence)."""
        n = process.n
        self._step_pending, self._step_noise = np.zeros((3, n)), np.zeros((n, n))
        self._step_previous, self._flags = np.zeros(n), np.zeros(3, dtype=np.int64)
        chained = one_call and process.chain is not None
        self._noise = schedule.kernel_noise(process.rows, process.dt, self.lam0) if chained else None

    @property
    def physical(self) -> bool:
        """Whether the mean's mass matrix has been positive definite (:meth:`check_physical`)."""
        return bool(self._flags[2])

    @physical.setter
    def physical(self, value: bool) -> None:
        self._flags[2] = value

    def check_physical(self, Minv: np.ndarray) -> None:
        """Raise :class:`~robotid_sim_plugins.ekf.process.SingularMassMatrix` where the mass matrix at the mean
        (its inverse Minv (n, n)) stopped being positive definite: the estimate left the physical parameters, and
        its forward dynamics mean nothing (the filter diverged, however finite its numbers). A start whose mass
        matrix is not positive definite (λ0 = 0.1 on a large robot) is left to reach one first."""
        if not still_physical(Minv, self._flags):  # the compiled steps' check, on M's symmetric part
            raise SingularMassMatrix

    def compiled_update(self, t, q, qd, qdd, tau, restart, step) -> np.ndarray:
        """:meth:`~robotid_sim_plugins.ekf.stream.StreamFilter.update` with the sample's predict and correction
        by ``step(sample (3, n), τ (n,), t_rel)``, which returns ``sigma_step``'s status
        (:mod:`~robotid_sim_plugins.ekf.sigma_step`) or raises LinAlgError (a covariance that is not positive
        definite)."""
        from robotid_sim_plugins.ekf.sigma_step import OK, SINGULAR

        sample, tau = np.array((q, qd, qdd), dtype=float), np.array(tau, dtype=float)
        if self.samples == 0:
            self.t0, restart = float(t), True
        t_rel = float(t) - self.t0
        if restart:
            self.restart_at(sample[0], sample[1])
            self._flags[:2] = 0
        try:
            status = step(sample, tau, t_rel)
        except np.linalg.LinAlgError:  # P lost positive definiteness
            status = None
        if status != OK:
            error = singular if status == SINGULAR else diverged
            raise error(self.name, t_rel, self.samples)
        self.samples += 1
        return self.x[-self.lam0.shape[0] :].copy()


class SigmaPointFilter(CompiledSteps, StreamFilter):
    """UKF or CDKF (``rule``) on the process model, mean x and covariance P (module docstring).

    Args:
        process, schedule, lam0: as :class:`~robotid_sim_plugins.ekf.stream.StreamFilter`.
        rule: the transform (:class:`SigmaRule`).
        name: the estimator's name.
        one_call: on a compiled chain, each sample as one compiled call (:meth:`update`); else the Python sequence.
    """

    def __init__(self, process, schedule, lam0, rule: SigmaRule, name: str, one_call: bool = False):
        super().__init__(process, schedule, lam0)
        self.rule, self.name = rule, name
        # P's lower triangle, Fortran-ordered (what LAPACK's Cholesky reads): the upper one is not kept
        self._x, self._P = np.zeros(process.dim_x), np.eye(process.dim_x, order="F")
        self._init_steps(process, schedule, one_call)

    @classmethod
    def ukf(cls, process, schedule, lam0, alpha: float, beta: float, kappa: float, one_call: bool = False):
        """The UKF with Merwe's scaled points."""
        return cls(process, schedule, lam0, SigmaRule.unscented(process.dim_x, alpha, beta, kappa), "ukf", one_call)

    @classmethod
    def cdkf(cls, process, schedule, lam0, h2: float = CDKF_H2, one_call: bool = False):
        """The CDKF."""
        return cls(process, schedule, lam0, SigmaRule.central_difference(process.dim_x, h2), "cdkf", one_call)

    @property
    def x(self):
        return self._x

    @property
    def P(self):
        return full_symmetric(self._P)

    def parameter_variance(self):
        """(b,) P's last diagonal entries (without forming the symmetric P)."""
        return self._P.diagonal()[-self.lam0.shape[0] :].copy()

    def restart(self, x, P):
        self._x, self._P = x.copy(), np.array(P, dtype=float, order="F")

    def update(self, t, q, qd, qdd, tau, restart=False):
        """:meth:`~robotid_sim_plugins.ekf.stream.StreamFilter.update`; with ``one_call`` on a compiled chain one
        compiled call (:func:`~robotid_sim_plugins.ekf.sigma_step.sigma_step`: the same numbers to rounding)."""
        if self._noise is None:
            return super().update(t, q, qd, qdd, tau, restart)
        return self.compiled_update(t, q, qd, qdd, tau, restart, self._step)

    def _step(self, sample: np.ndarray, tau: np.ndarray, t_rel: float) -> int:
        from robotid_sim_plugins.ekf.sigma_step import sigma_step

        rule = self.rule
        return sigma_step(
            self.process.chain.arrays,
            self._noise,
            rule.Wm,
            rule.gamma,
            rule.second,
            rule.centre,
            self._x,
            self._P,
            self._step_pending,
            self._step_noise,
            self._step_previous,
            self._flags,
            sample,
            tau,
            t_rel,
        )

    def predict(self, tau, qdd, Q):
        rule = self.rule
        L = cholesky(self._P)  # LinAlgError: P lost positive definiteness, the filter diverged
        states, qdd_points, _ = self.process.sigma_dynamics(self._x, L, rule.gamma, tau)
        self._x = self._x.copy()
        args = (rule.Wm, rule.gamma, rule.second, rule.centre, self.process.dt, Q.states, Q.parameters)
        sigma_predict(self._x, self._P, L, states, qdd_points, *args)

    def correct(self, z, tau, t):
        rule = self.rule
        L = cholesky(self._P)
        states, qdd_points, Minv = self.process.sigma_dynamics(self._x, L, rule.gamma, tau)
        self.check_physical(Minv)
        R, tau_noise = self.measurement_noise(Minv, t)
        self._x = self._x.copy()
        args = (rule.Wm, rule.gamma, rule.second, rule.centre)
        if not sigma_correct(self._x, self._P, L, states, qdd_points, self.process.rows, z, R, *args):
            raise np.linalg.LinAlgError("Cholesky")  # P_zz is not positive definite: the filter diverged
        return qdd_points[0], tau_noise
