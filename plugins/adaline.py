"""Built-in estimator ``adaline``: a single linear layer trained by the delta rule (seed 004 §2.2, Eq. 5–11)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator, EstimatorOptions
from robotid_sim.identification.online import epoch_steps, history_stride, problem_stream, stream_history


class AdalineEstimator(Estimator):
    """Adaline: inputs are the base regressor's entries, outputs the joint torques, and the
    weights, trained sample after sample by the delta rule Δw = γ δ x (Eq. 11), are the base
    parameters (seed 004 Eq. 40, Fig. 4).

    The rule is normalised (NLMS): each sample's step is divided by the power of its inputs, in
    coordinates where every regressor column has unit RMS, so that one step size μ in (0, 2)
    is stable whatever the scale of the data and of the parameters. The samples are read in
    time order; the stream is replayed for up to ``epochs`` epochs with a step decaying as
    μ / (1 + e / decay_epochs), and the result is the average of the last epoch's weights
    (which removes the jitter a constant step leaves on noisy data). Training stops early
    once an epoch's average moves less than ``tol``.

    Diagnostics: ``condition_number``, ``epochs`` (run), ``deadband_rows_removed``.
    """

    name = "adaline"

    class Options(EstimatorOptions):
        step: float = Field(0.5, gt=0, lt=2, description="normalised step size μ of the delta rule, in (0, 2)")
        epochs: int = Field(100, ge=1, le=100_000, description="most passes over the stream")
        decay_epochs: float | None = Field(
            5.0, gt=0, description="the step halves after this many epochs (μ / (1 + e / decay_epochs)); null: constant"
        )
        tol: float = Field(
            1e-12, ge=0, description="stop when an epoch's average weights move less than this (relative)"
        )
        check_excitation: bool = Field(True, description="refuse rank-deficient data, naming the parameters")

    def _fit(self, problem) -> BaseParameterModel:
        from robotid_sim.identification._online_kernels import delta_rule  # numba: on first use

        cond = problem.check_excitation() if self.check_excitation else None
        stream = problem_stream(problem)
        N, _, b = stream.Y.shape
        steps = epoch_steps(self.step, self.epochs, self.decay_epochs)
        values, hist, at, epochs = delta_rule(
            stream.Y,
            stream.tau,
            np.zeros(b),
            stream.scale,
            np.zeros(0),
            steps,
            history_stride(N, self.epochs),
            self.tol,
        )
        return BaseParameterModel.from_problem(
            problem,
            values,
            history=stream_history(problem, hist, at, stream.t, stream.dt),
            diagnostics={"condition_number": cond, "epochs": int(epochs), **problem.diagnostics()},
        )


@hookimpl
def register_estimators(register):
    register("adaline", AdalineEstimator)
