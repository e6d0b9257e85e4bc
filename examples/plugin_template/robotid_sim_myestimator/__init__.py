"""A robotid_sim plugin: the ``ridge`` estimator, ridge-regularised least squares.

beta = argmin ‖W beta − y‖² + alpha ‖D beta‖², solved on the column-scaled base regressor
(D = diag of the column norms of W, so ``alpha`` is dimensionless and the same for every
parameter whatever its unit). It shrinks poorly excited base-parameter combinations towards 0
instead of letting them blow up, at the price of a small bias (alpha → 0 gives OLS).

The plugin is this module: robotid_sim finds it through the entry point declared in
``pyproject.toml`` and calls :func:`register_estimators`.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions, IdentificationProblem

__version__ = "0.1.0"


class RidgeEstimator(Estimator):
    """Ridge-regularised least squares on the stacked base regressor.

    Like every robotid_sim estimator, it declares its options as a nested pydantic ``Options``
    class and writes no ``__init__``: the base constructor validates the keyword options
    (``alpha >= 0`` here) and stores each as an attribute; the work is in ``fit(problem)`` (the
    base class's ``fit`` validates the options again, times ``_fit`` and stamps the model with the
    name and options). Ridge is biased by design (it shrinks), which ``biased = True`` declares
    to ``robotid_sim.testing``.
    """

    name = "ridge"
    biased = True

    class Options(EstimatorOptions):
        """The options of ``ridge``."""

        alpha: float = Field(
            1e-6, ge=0, description="regularisation strength, relative to the squared column norms of W"
        )

    def _fit(self, problem: IdentificationProblem) -> BaseParameterModel:
        W = problem.base_regressor()  # (m, b): the rows in use, stacked sample-major (m = N·n without a dead-band)
        y = problem.torque_vector()  # (m,); problem.row_joint() gives each row's joint
        m, b = W.shape
        scale = np.linalg.norm(W, axis=0)
        scale[scale == 0] = 1.0
        Ws = W / scale
        # augmented system [Ws; sqrt(alpha) I] z = [y; 0], beta = z / scale
        A = np.vstack([Ws, np.sqrt(self.alpha) * np.eye(b)])
        z, *_ = np.linalg.lstsq(A, np.concatenate([y, np.zeros(b)]), rcond=None)
        beta = z / scale
        residual = y - W @ beta
        sigma2 = float(residual @ residual) / max(m - b, 1)
        # cov(z) = sigma² H⁻¹ WsᵀWs H⁻¹ with H = WsᵀWs + alpha I
        H_inv = np.linalg.pinv(Ws.T @ Ws + self.alpha * np.eye(b))
        covariance = sigma2 * (H_inv @ (Ws.T @ Ws) @ H_inv) / np.outer(scale, scale)
        return BaseParameterModel.from_problem(
            problem, beta, covariance, diagnostics={"residual_rms": float(np.sqrt(np.mean(residual**2)))}
        )


@hookimpl
def register_estimators(register):
    """Make ``ridge`` available to scenarios, the CLI and ``robotid_sim.identify``."""
    register("ridge", RidgeEstimator)
