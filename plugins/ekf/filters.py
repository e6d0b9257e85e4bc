"""Built-in estimators ``ukf``, ``cdkf``, ``sr_ukf``, ``sr_cdkf``, ``sr_ekf`` and ``pf``: BIRDy's Kalman family
on the EKF's process model, noise schedule and presets (:class:`~robotid_sim_plugins.ekf.estimator.EKFEstimator`).

Each is the ``ekf`` estimator with another filter over the same stream: the options of ``ekf`` (preset,
measurements, initial parameters, prior, process-noise annealing, tempered start, engine) and the filter's own.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field
from robotid_sim_plugins.ekf.estimator import EKFEstimator


class _StreamEstimator(EKFEstimator):
    """An ``ekf``-like estimator whose filter is a :class:`~robotid_sim_plugins.ekf.stream.StreamFilter`.

    The ``auto`` preset of the sampling filters (sigma points, particles) differs from the EKF's in two values:
    the prior std of each parameter is the size of λ0 (0.1, not 1: the points spread λ by a multiple of it, and
    at std 1 most of them leave the physical parameters, where M(q, λ) is indefinite and the forward dynamics
    meaningless) and the tempering is 1e5.
    """

    auto_overrides: ClassVar[dict] = {"parameter_std": 0.1, "tempering": 1e5}
    #: ``engine: auto`` compiles their process model (not the EKF's step) on any record: it compiles in about 7 s
    #: and they call it 2·(2d + 1) times a sample
    compile_from: ClassVar[int] = 0

    def make_filter(self, process, schedule, lam0):
        """The filter on the process model, noise schedule and λ0."""
        raise NotImplementedError

    def stream(self, problem):
        process, schedule, lam0, *_ = self.setup(problem)
        return self.make_filter(process, schedule, lam0)

    def run(self, process, schedule, signals, t, starts, lam0):
        from robotid_sim_plugins.ekf.stream import run_stream

        return run_stream(self.make_filter(process, schedule, lam0), signals, t, starts)

    def evaluations_per_sample(self, process) -> int:
        """2 (2d + 1) sigma points (predict and update) and n for M⁻¹ at the mean."""
        return 2 * (2 * process.dim_x + 1) + process.n


class UKFEstimator(_StreamEstimator):
    """Unscented Kalman filter (Julan and Uhlmann; Wan and van der Merwe 2000) on the EKF's augmented state
    [q, qd, λ], process model and noise (see ``ekf``): filterpy's ``UnscentedKalmanFilter`` with
    ``MerweScaledSigmaPoints`` (``alpha``, ``beta``, ``kappa``; BIRDy's defaults 0.1, 2, 0), the 2d + 1 sigma
    points through the forward dynamics in one batched (compiled, for a chain) call per step
    (:mod:`~robotid_sim_plugins.ekf.sigma`). No Jacobian: the transform sees the model's curvature to second
    order.

    Diagnostics as ``ekf``'s, with ``iterations`` (samples), ``model_evaluations`` (states the forward dynamics
    was evaluated at) and ``converged`` (the estimate moved less than 1 % over the last 10 % of the stream).
    """

    name = "ukf"
    biased = True  # the Euler step, as the EKF's (see ekf)

    class Options(EKFEstimator.Options):
        alpha: float = Field(0.1, gt=0, le=1, description="spread of the sigma points (Merwe's α; BIRDy: 0.1)")
        beta: float = Field(2.0, ge=0, description="prior knowledge of the distribution (β = 2: Gaussian)")
        kappa: float = Field(0.0, description="secondary scaling (κ; BIRDy: 0)")

    def make_filter(self, process, schedule, lam0):
        from robotid_sim_plugins.ekf.sigma import SigmaPointFilter

        return SigmaPointFilter.ukf(process, schedule, lam0, self.alpha, self.beta, self.kappa)


class CDKFEstimator(_StreamEstimator):
    """Central-difference Kalman filter (Nørgaard, Poulsen and Ravn 2000) on the EKF's model and noise (see
    ``ekf``): Stirling's interpolation with h² = 3 instead of the unscented transform, on filterpy's
    ``UnscentedKalmanFilter`` with the central-difference points and transform
    (:class:`~robotid_sim_plugins.ekf.sigma.CentralDifferencePoints`). Diagnostics as ``ukf``'s."""

    name = "cdkf"
    biased = True  # the Euler step, as the EKF's (see ekf)

    def make_filter(self, process, schedule, lam0):
        from robotid_sim_plugins.ekf.sigma import SigmaPointFilter

        return SigmaPointFilter.cdkf(process, schedule, lam0)


class SRUKFEstimator(UKFEstimator):
    """Square-root UKF (van der Merwe and Wan 2001): the ``ukf`` with the covariance kept as its Cholesky factor,
    updated by QR and rank-one updates, never re-factorised (:mod:`~robotid_sim_plugins.ekf.square_root`): P
    stays positive semi-definite where the plain form can lose it to rounding. Diagnostics as ``ukf``'s."""

    name = "sr_ukf"

    def make_filter(self, process, schedule, lam0):
        from robotid_sim_plugins.ekf.square_root import SquareRootSigmaFilter

        return SquareRootSigmaFilter(process, schedule, lam0, "ukf", self.alpha, self.beta, self.kappa)


class SRCDKFEstimator(CDKFEstimator):
    """Square-root CDKF (van der Merwe and Wan 2001): the ``cdkf`` with the covariance kept as its Cholesky
    factor (:mod:`~robotid_sim_plugins.ekf.square_root`). Diagnostics as ``ukf``'s."""

    name = "sr_cdkf"

    def make_filter(self, process, schedule, lam0):
        from robotid_sim_plugins.ekf.square_root import SquareRootSigmaFilter

        return SquareRootSigmaFilter(process, schedule, lam0, "cdkf")


class SREKFEstimator(_StreamEstimator):
    """Square-root EKF: the ``ekf`` (its linearisation, compiled for a chain) with the covariance kept as its
    Cholesky factor: predict by the QR of [F S, √Q], update by the array algorithm (the QR of
    [[√R, H S], [0, S]]) (:mod:`~robotid_sim_plugins.ekf.square_root`). Diagnostics as ``ekf``'s."""

    name = "sr_ekf"
    biased = True  # the Euler step, as the EKF's (see ekf)
    auto_overrides: ClassVar[dict] = {}  # the EKF's preset: it linearises, no points leave the physical parameters

    def make_filter(self, process, schedule, lam0):
        from robotid_sim_plugins.ekf.square_root import SquareRootEKF

        return SquareRootEKF(process, schedule, lam0)

    def evaluations_per_sample(self, process) -> int:
        return EKFEstimator.evaluations_per_sample(self, process)


class PFEstimator(_StreamEstimator):
    """Particle filter (sequential importance resampling; Gordon, Salmond and Smith 1993) on the EKF's model
    and noise (see ``ekf``): ``particles`` states [q, qd, λ] drawn from the prior N(x0, P0), each moved by the
    Euler step of its own forward dynamics (one batched call per sample) plus the process noise, weighted by the
    Gaussian likelihood of the measurement with R(t); resampled with filterpy's ``systematic_resample`` when the
    effective sample size falls below half. The parameters are the particles' static state: after each
    resampling they are roughened (Gordon et al.: a jitter of ``roughening``·N^(−1/b) times each parameter's
    spread over the particles, with Liu and West's shrinkage so that the spread does not grow) so that the cloud
    keeps exploring
    (:mod:`~robotid_sim_plugins.ekf.particle`). The estimate is the weighted mean; the covariance the particles'.
    Draws come from ``seed``. Diagnostics as ``ekf``'s.
    """

    name = "pf"
    biased = True  # a Monte-Carlo estimate: within the particles' spread, not exact

    class Options(EKFEstimator.Options):
        particles: int = Field(500, ge=10, le=1_000_000, description="number of particles")
        roughening: float = Field(0.2, ge=0, description="roughening jitter K of Gordon et al. (0: none)")
        seed: int = Field(0, ge=0, description="seed of the particles' draws")

    def make_filter(self, process, schedule, lam0):
        from robotid_sim_plugins.ekf.particle import ParticleFilter

        return ParticleFilter(
            process, schedule, lam0, self.particles, self.roughening, np.random.default_rng(self.seed)
        )

    def evaluations_per_sample(self, process) -> int:
        return self.particles
