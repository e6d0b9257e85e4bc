"""The estimator contract: every built-in estimator and a ridge estimator written as a plugin would write it pass
``robotid_sim.testing``'s checks; deliberately broken estimators fail them readably."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import Field

from robotid_sim import plugins
from robotid_sim.errors import ConfigError
from robotid_sim.identification import (
    BaseParameterModel,
    Estimator,
    EstimatorOptions,
    EstimatorSpec,
    IdentificationProblem,
)
from robotid_sim.testing import EstimatorCheckError, check_estimator, parametrize_with_checks


class RidgeEstimator(Estimator):
    """Ridge-regularised least squares on the column-scaled base regressor: a third-party-style estimator that is
    biased by design (it shrinks), which ``biased = True`` declares to ``robotid_sim.testing``."""

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


BUILTIN = [plugins.get_estimator(name) for name in ("ols", "wls", "irls")]


@parametrize_with_checks([*BUILTIN, RidgeEstimator])
def test_estimator_passes_the_contract(estimator, check):
    check(estimator)


# ------------------------------------------------------------------ deliberately broken estimators
class _LeastSquares(Estimator):
    """A correct least-squares core the broken estimators below spoil one way each."""

    name = "broken"

    class Options(EstimatorOptions):
        gain: float = 1.0

    def _solve(self, problem):
        W, y = problem.base_regressor(), problem.torque_vector()
        return np.linalg.lstsq(W, y, rcond=None)[0] * self.gain


class _FlatModel(BaseParameterModel):
    def predict_torque(self, q, qd, qdd):
        return super().predict_torque(q, qd, qdd).reshape(-1)  # (N·n,) instead of (N, n)


class WrongShape(_LeastSquares):
    def _fit(self, problem):
        return _FlatModel(problem.structure, problem.base.independent, self._solve(problem))


class MutatesProblem(_LeastSquares):
    def _fit(self, problem):
        problem.dataset.tau[0, 0] += 1.0  # in place: the caller's data is changed
        return BaseParameterModel.from_problem(problem, self._solve(problem))


class ReadsOptionsInFit(_LeastSquares):
    def _fit(self, problem):
        self.gain = 1.0 + 1e-3 * getattr(self, "fits", 0)  # an option chosen at fit time, not in the constructor
        self.fits = getattr(self, "fits", 0) + 1
        return BaseParameterModel.from_problem(problem, self._solve(problem))


class WritesItsOwnInit(Estimator):
    name = "own_init"

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha

    def _fit(self, problem):  # pragma: no cover - never reached
        raise AssertionError


@pytest.mark.parametrize(
    ("cls", "check", "why"),
    [
        (WrongShape, "predictions_have_shape_n_by_dof", r"shape \(1800,\), expected \(N, n\) = \(600, 3\)"),
        (MutatesProblem, "fit_does_not_mutate_the_problem", r"modified the problem's data \['tau'\]"),
        (
            ReadsOptionsInFit,
            "options_only_from_the_constructor",
            r"changed the estimator's attributes \['fits'\]",
        ),
        (WritesItsOwnInit, "default_constructible", "WritesItsOwnInit defines __init__; declare the options"),
    ],
)
def test_a_broken_estimator_fails_with_a_readable_message(cls, check, why):
    with pytest.raises(EstimatorCheckError, match=rf"check_estimator\({cls.__name__}\): '{check}' failed: .*{why}"):
        check_estimator(cls)


def test_a_non_estimator_class_fails_the_first_check():
    with pytest.raises(EstimatorCheckError, match="not a subclass of robotid_sim.identification.Estimator"):
        check_estimator(dict)


# ------------------------------------------------------------------ options: one mechanism, one formatter
def test_option_errors_name_the_option_and_the_valid_ones():
    irls = plugins.get_estimator("irls")
    with pytest.raises(
        ConfigError,
        match=r"estimator 'irls': option 'k_sigma': Input should be greater than 0 "
        r"\(got -1\); valid options: \['essential', 'essential_threshold', 'threshold', 'k_sigma'",
    ):
        irls.from_options(k_sigma=-1)
    with pytest.raises(ConfigError, match=r"option 'max_iterations': Input should be a valid integer"):
        irls(max_iterations="many")


def test_a_plugin_estimators_options_are_validated_by_its_options_class():
    ridge = RidgeEstimator.from_options(alpha=0.5)
    assert ridge.get_params() == {"alpha": 0.5}
    with pytest.raises(ConfigError, match=r"estimator 'ridge': option 'alpha': Input should be a valid number"):
        RidgeEstimator.from_options(alpha="big")


def test_a_nested_estimator_option_has_one_shape():
    class Wrapper(Estimator):
        name = "wrapper"

        class Options(EstimatorOptions):
            inner: EstimatorSpec = EstimatorSpec(name="irls", options={"k_sigma": 4.0})

        def _fit(self, problem):
            return self.inner.build().fit(problem)

    wrapper = Wrapper.from_options(inner={"name": "wls"})
    assert wrapper.get_params() == {"inner": {"name": "wls", "options": {}}}
    assert Wrapper().inner.build().get_params()["k_sigma"] == 4.0
    check_estimator(Wrapper)
    with pytest.raises(ConfigError, match=r"option 'inner.name' is required"):
        Wrapper.from_options(inner={"options": {}})
