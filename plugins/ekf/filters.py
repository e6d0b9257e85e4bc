"""Built-in estimators ``ukf``, ``cdkf``, ``sr_ukf``, ``sr_cdkf``, ``sr_ekf`` and ``pf``: BIRDy's Kalman family
on the EKF's process model, noise schedule and presets (:class:`~robotid_sim_plugins.ekf.estimator.EKFEstimator`).

Each is the ``ekf`` estimator with another filter over the same stream: the options of ``ekf`` (preset,
measurements, initial parameters, prior, process-noise annealing, tempered start, engine) and the filter's own.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field
from robotid_sim_plugins.ekf.estimator import AUTO_COMPILED_SAMPLES, EKFEstimator

from robotid_sim.errors import ConfigError


class _StreamEstimator(EKFEstimator):
    """An ``ekf``-like estimator whose filter is a :class:`~robotid_sim_plugins.ekf.stream.StreamFilter`.

    The ``auto`` preset of the sampling filters (sigma points, particles) differs from the EKF's in two values:
    the prior std of each parameter is the size of λ0 (0.1, not 1: the points spread λ by a multiple of it, and
    at std 1 most of them leave the physical parameters, where M(q, λ) is indefinite and the forward dynamics
    meaningless) and the tempering is 1e6 (at 1e5 the CDKFs' estimate on prrrp_seed004 with the scenario noise
    crosses a singular mass matrix at 2.2 s, in the first seconds' transient).
    """

    auto_overrides: ClassVar[dict] = {"parameter_std": 0.1, "tempering": 1e6}
    #: ``engine: auto`` compiles their process model (not the EKF's step) on any record: it compiles in about 20 s
    #: and they call it 2·(2d + 1) times a sample
    compile_from: ClassVar[int] = 0

    def make_filter(self, process, schedule, lam0, samples: int):
        """The filter on the process model, noise schedule and λ0 for a record of ``samples``."""
        raise NotImplementedError

    def one_call(self, samples: int) -> bool:
        """Whether the sigma-point filters' sample runs as compiled calls on a compiled chain
        (:func:`~robotid_sim_plugins.ekf.sigma_step.sigma_step`, :mod:`~robotid_sim_plugins.ekf.square_root_step`;
        the same numbers to rounding): with ``engine: compiled``, or ``auto`` from
        :data:`~robotid_sim_plugins.ekf.estimator.AUTO_COMPILED_SAMPLES` samples on (its first compilation, about
        30 s, is more than a short record's fit); otherwise the Python sequence of the compiled process model's
        pieces."""
        return self.engine == "compiled" or (self.engine == "auto" and samples >= AUTO_COMPILED_SAMPLES)

    def stream(self, problem):
        process, schedule, lam0, *_ = self.setup(problem)
        return self.make_filter(process, schedule, lam0, problem.n_samples)

    def run(self, process, schedule, signals, t, starts, lam0):
        from robotid_sim_plugins.ekf.stream import run_stream

        return run_stream(self.make_filter(process, schedule, lam0, t.shape[0]), signals, t, starts)

    def evaluations_per_sample(self, process) -> int:
        """2 (2d + 1) sigma points (predict and update) and n for M⁻¹ at the mean."""
        return 2 * (2 * process.dim_x + 1) + process.n


class UKFEstimator(_StreamEstimator):
    """Unscented Kalman filter (Julier and Uhlmann; Wan and van der Merwe 2000) on the EKF's augmented state
    [q, qd, λ], process model and noise (see ``ekf``), for additive noise: the 2d + 1 points of filterpy's
    ``MerweScaledSigmaPoints`` (``alpha``, ``beta``, ``kappa``; BIRDy's defaults 0.1, 2, 0) drawn from P before
    the predict and from the predicted P before the update (:mod:`~robotid_sim_plugins.ekf.sigma`). No Jacobian:
    the transform sees the model's curvature to second order. The points that move λ only share one basis of
    the model (it is linear in λ), so a sample costs 8n full forward dynamics plus small solves, not 2(2d + 1).
    A mean whose mass matrix stops being positive definite is reported as a singular mass matrix (the filter
    left the physical parameters).

    Diagnostics as ``ekf``'s, with ``iterations`` (samples), ``model_evaluations`` (states the forward dynamics
    was evaluated at) and ``converged`` (the estimate moved less than 1 % over the last 10 % of the stream).
    """

    name = "ukf"
    biased = True  # the Euler step, as the EKF's (see ekf)

    class Options(EKFEstimator.Options):
        alpha: float = Field(0.1, gt=0, le=1, description="spread of the sigma points (Merwe's α; BIRDy: 0.1)")
        beta: float = Field(2.0, ge=0, description="prior knowledge of the distribution (β = 2: Gaussian)")
        kappa: float = Field(0.0, description="secondary scaling (κ; BIRDy: 0)")

    def make_filter(self, process, schedule, lam0, samples: int):
        from robotid_sim_plugins.ekf.sigma import SigmaPointFilter

        return SigmaPointFilter.ukf(process, schedule, lam0, self.alpha, self.beta, self.kappa, self.one_call(samples))


class CDKFEstimator(_StreamEstimator):
    """Central-difference Kalman filter (Nørgaard, Poulsen and Ravn 2000) on the EKF's model and noise (see
    ``ekf``): Stirling's interpolation with h² = 3 instead of the unscented transform, the points drawn as the
    ``ukf``'s (:class:`~robotid_sim_plugins.ekf.sigma.SigmaRule`). Diagnostics as ``ukf``'s."""

    name = "cdkf"
    biased = True  # the Euler step, as the EKF's (see ekf)
    #: the points sit at h = √3 standard deviations, the UKF's at α·√d (0.54 on a 5-joint arm): a prior std of
    #: 0.03 spreads λ by about as much as the UKF's 0.1 (at 0.1 most points leave the physical parameters)
    auto_overrides: ClassVar[dict] = {**_StreamEstimator.auto_overrides, "parameter_std": 0.03}

    def make_filter(self, process, schedule, lam0, samples: int):
        from robotid_sim_plugins.ekf.sigma import SigmaPointFilter

        return SigmaPointFilter.cdkf(process, schedule, lam0, one_call=self.one_call(samples))


class SRUKFEstimator(UKFEstimator):
    """Square-root UKF (van der Merwe and Wan 2001): the ``ukf`` with the covariance kept as its Cholesky factor,
    updated by QR and rank-one updates, never re-factorised (:mod:`~robotid_sim_plugins.ekf.square_root`): P
    stays positive semi-definite where the plain form can lose it to rounding. Diagnostics as ``ukf``'s."""

    name = "sr_ukf"

    def make_filter(self, process, schedule, lam0, samples: int):
        from robotid_sim_plugins.ekf.sigma import SigmaRule
        from robotid_sim_plugins.ekf.square_root import SquareRootSigmaFilter

        rule = SigmaRule.unscented(process.dim_x, self.alpha, self.beta, self.kappa)
        return SquareRootSigmaFilter(process, schedule, lam0, rule, self.name, self.one_call(samples))


class SRCDKFEstimator(CDKFEstimator):
    """Square-root CDKF (van der Merwe and Wan 2001): the ``cdkf`` with the covariance kept as its Cholesky
    factor (:mod:`~robotid_sim_plugins.ekf.square_root`). Diagnostics as ``ukf``'s."""

    name = "sr_cdkf"

    def make_filter(self, process, schedule, lam0, samples: int):
        from robotid_sim_plugins.ekf.sigma import SigmaRule
        from robotid_sim_plugins.ekf.square_root import SquareRootSigmaFilter

        rule = SigmaRule.central_difference(process.dim_x)
        return SquareRootSigmaFilter(process, schedule, lam0, rule, self.name, self.one_call(samples))


class SREKFEstimator(_StreamEstimator):
    """Square-root EKF: the ``ekf`` (its linearisation, compiled for a chain) with the covariance kept as its
    Cholesky factor: predict by the QR of [F S, √Q], update by Carlson's triangular square-root update of the
    whitened measurement rows (:mod:`~robotid_sim_plugins.ekf.square_root`). Diagnostics as ``ekf``'s."""

    name = "sr_ekf"
    biased = True  # the Euler step, as the EKF's (see ekf)
    auto_overrides: ClassVar[dict] = {}  # the EKF's preset: it linearises, no points leave the physical parameters

    def make_filter(self, process, schedule, lam0, samples: int):
        from robotid_sim_plugins.ekf.square_root import SquareRootEKF

        return SquareRootEKF(process, schedule, lam0)

    def evaluations_per_sample(self, process) -> int:
        return EKFEstimator.evaluations_per_sample(self, process)


class PFEstimator(_StreamEstimator):
    """Particle filter on the EKF's model and noise (see ``ekf``), Rao–Blackwellised (Schön, Gustafsson and
    Nordlund 2005): the parameters enter the torque linearly and are static, so each of the ``particles`` samples
    only the joint states [q, qd] and carries a Gaussian over λ (from the prior N(λ0, P0_λ)), updated by the exact
    Kalman step on the measured torque τ = Y(q, qd, qdd) λ at its states (the EKF's torque form). The states move
    by the Euler step with the recorded acceleration; their process noise is drawn from its optimal proposal given
    the measured q and qd; the weights are the predictive likelihoods of q, qd and τ (only a share of them where
    all would leave fewer than half the particles effective: progressive correction); resampled with filterpy's
    ``systematic_resample`` when the effective sample size falls below half, then the particles' means of λ
    roughened (Gordon et al.: a jitter of ``roughening``·N^(−1/b) times their spread, with Liu and West's
    shrinkage so that the spread does not grow) (:mod:`~robotid_sim_plugins.ekf.particle`). The estimate is the
    weighted mean; the covariance the mixture's. Draws come from ``seed``. The accelerations must be measured
    (``measurements`` with ``qdd``, as the ``auto`` preset has). Diagnostics as ``ekf``'s.
    """

    name = "pf"
    biased = True  # a Monte-Carlo estimate: within the particles' spread, not exact

    class Options(EKFEstimator.Options):
        particles: int = Field(500, ge=10, le=1_000_000, description="number of particles")
        roughening: float = Field(0.2, ge=0, description="roughening jitter K of Gordon et al. (0: none)")
        seed: int = Field(0, ge=0, description="seed of the particles' draws")

    def make_filter(self, process, schedule, lam0, samples: int):
        """The filter; raises :class:`~robotid_sim.errors.ConfigError` where the accelerations are not measured."""
        from robotid_sim_plugins.ekf.particle import ParticleFilter

        if "qdd" not in process.measurements:
            raise ConfigError(
                "estimator 'pf' needs the measured accelerations: add 'qdd' to measurements (the auto preset has it)"
            )
        return ParticleFilter(
            process, schedule, lam0, self.particles, self.roughening, np.random.default_rng(self.seed)
        )

    def evaluations_per_sample(self, process) -> int:
        """One regressor per particle."""
        return self.particles
