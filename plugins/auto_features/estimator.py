"""The ``auto_features`` estimator (seed 002): LOOCV smoothing, derivatives, structured features, least squares."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field
from robotid_sim_plugins.auto_features.derivatives import cross_validated_window, differentiate, loocv_smooth
from robotid_sim_plugins.auto_features.fit import fit_basis

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.identification import Estimator, EstimatorOptions, LagrangianFeatureModel
from robotid_sim.identification.lagrangian_basis import FRICTION_SETS, LagrangianBasis


class AutoFeaturesEstimator(Estimator):
    """Seed 002's automated parameterisation: LOOCV smoothing, derivatives, structured features, least squares.

    1. Each experiment's q is smoothed by LOOCV (``smoothing``; seed 002: polynomial of order 0–10 or
       locally weighted regression, the fit "where the test and training errors meet"), and so is the
       measured qd with ``velocity="measured"``. qd and qdd are then the derivatives of a Savitzky–Golay
       local cubic of the smoothed q (or qdd that of a local quadratic of the smoothed measured qd), with
       ``acceleration="dataset"`` the dataset's qdd as given. The differentiator's window is chosen by
       5-fold (time-block) cross-validation of the torque fit (``derivative_window=None``): LOOCV cannot
       choose it, because a derivative's noise is correlated from sample to sample.
    2. Features (``features``): ``"planar"``, the exact basis of an arm with parallel revolute axes;
       ``"general"``, every frequency up to ``order`` for any revolute arm (a few joints only).
    3. One least-squares fit over every joint's equation (columns scaled to unit RMS) gives the coefficients
       of A (its upper triangle), of the potential U (G = ∂U/∂q) and of the friction terms (``friction``).
       A velocity dead-band of the problem leaves its rows out of the fit.

    Diagnostics: ``smoothing`` (per experiment and signal: method, order / bandwidth per joint),
    ``derivative_window`` (samples), ``derivative_window_s``, ``derivative_cv`` (candidate windows and their
    held-out torque RMS, or None when the window was given),
    ``n_coefficients`` (mass, potential, friction), ``rank``, ``condition_number`` (of the scaled features),
    ``residual_rms`` per joint, ``min_mass_eigenvalue`` and ``max_asymmetry`` of A(q) over the identification
    samples, ``positive_definite`` (A positive definite at every identification sample).

    Raises:
        ConfigError: a prismatic (or any non-revolute) joint.
        DataError: NaN/inf in the data, too few samples, non-uniform sampling.
        IdentificationError: fewer equations than coefficients.
    """

    name = "auto_features"
    biased = True  # smoothing and differentiation bias the fit on noisy data (exact with acceleration="dataset")
    streams_regressor = True

    class Options(EstimatorOptions):
        features: Literal["planar", "general"] = Field(
            "planar", description="'planar': parallel revolute axes (exact); 'general': any revolute arm up to order"
        )
        order: int = Field(2, ge=1, le=8, description="features='general': largest Σ|k| of a frequency k")
        friction: Literal["none", "viscous", "coulomb_viscous"] = Field(
            "coulomb_viscous", description="friction terms per joint: viscous qd, Coulomb sign(qd), offset"
        )
        smoothing: Literal["auto", "polynomial", "lowess", "none"] = Field(
            "auto", description="LOOCV smoother of q, qd, qdd ('auto': the smaller LOOCV error per joint)"
        )
        criterion: Literal["gap", "loocv"] | None = Field(
            None, description="LOOCV choice ('gap': seed 002's min |ε_test − ε_train|); None: each smoother's default"
        )
        max_order: int = Field(10, ge=0, le=30, description="highest polynomial order tried (seed 002: 10)")
        velocity: Literal["measured", "derived"] = Field(
            "measured",
            description="the measured qd smoothed by LOOCV (seed 002 takes q, qd, τ), or qd from the smoothed q",
        )
        acceleration: Literal["derived", "dataset"] = Field(
            "derived", description="qdd differentiated ('derived') or the dataset's qdd as given ('dataset')"
        )
        derivative_window: int | None = Field(
            None, ge=5, description="Savitzky–Golay differentiator window (odd, samples); None: cross-validated"
        )
        rcond: float = Field(1e-10, gt=0, lt=1, description="relative singular-value cut-off of the least squares")

    def basis(self, n_dof: int) -> LagrangianBasis:
        """The :class:`LagrangianBasis` this estimator fits on an ``n_dof``-joint arm."""
        return LagrangianBasis.build(n_dof, self.features, self.order, self.friction)

    def check_structure(self, structure) -> None:
        kinds = list(structure.joint_kinds)
        other = [(name, kind) for name, kind in zip(structure.joint_names, kinds, strict=True) if kind != "revolute"]
        if other:
            raise ConfigError(
                f"auto_features: seed 002's features are for revolute arms, but joint(s) "
                f"{', '.join(f'{n} ({k})' for n, k in other)} are not revolute; use ols or sindy for this robot"
            )

    def _fit(self, problem) -> LagrangianFeatureModel:
        structure = problem.structure
        ds = problem.dataset
        tau = np.asarray(ds.tau, float)
        if not np.all(np.isfinite(tau)):
            row = int(np.argwhere(~np.isfinite(tau))[0, 0])
            raise DataError(f"auto_features: 'tau' contains NaN or inf (first at sample {row}); remove those samples")
        basis = self.basis(structure.n_dof)
        smoothed = loocv_smooth(
            ds.t,
            ds.q,
            ds.qd if self.velocity == "measured" else None,
            problem.experiments,
            smoothing=self.smoothing,
            max_order=self.max_order,
            criterion=self.criterion,
            min_samples=max(self.max_order + 2, 8),
        )
        weights = problem.row_weights().reshape(problem.n_samples, problem.n_dof)  # a velocity dead-band: 0
        window, cv = self.derivative_window, None
        if window is None:
            window, cv = cross_validated_window(basis, smoothed, tau, weights)
        qd, qdd = differentiate(smoothed, window)
        if self.acceleration == "dataset":
            qdd = np.asarray(ds.qdd, float)
        fit = fit_basis(basis, smoothed.q, qd, qdd, tau, weights=weights, rcond=self.rcond)
        model = LagrangianFeatureModel(basis, fit.theta, structure.joint_names)
        A = model.mass_matrix(smoothed.q)
        eig = np.linalg.eigvalsh(A)[:, 0]
        model.diagnostics.update(
            smoothing=smoothed.choices,
            derivative_window=window,
            derivative_window_s=window * smoothed.dt,
            derivative_cv=cv,
            n_coefficients=dict(zip(("mass", "potential", "friction"), basis.sizes, strict=True)),
            friction_terms=list(FRICTION_SETS[self.friction]),
            rank=fit.rank,
            condition_number=fit.condition_number,
            residual_rms=fit.residual_rms.tolist(),
            min_mass_eigenvalue=float(eig.min()),
            max_asymmetry=float(np.abs(A - np.swapaxes(A, 1, 2)).max()),
            positive_definite=bool(eig.min() > 0),
            samples=problem.n_samples,
        )
        return model
