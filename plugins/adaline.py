"""Built-in estimator ``adaline``: a single linear layer trained by the delta rule (seed 004 §2.2, Eq. 5–11)."""

from __future__ import annotations

from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import BaseParameterModel, Estimator
from robotid_sim.identification.online import ReplayOptions, problem_stream, replay

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)


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

    Options = ReplayOptions

    def _fit(self, problem) -> BaseParameterModel:
        cond = problem.check_excitation() if self.check_excitation else None
        values, history, epochs = replay(problem, problem_stream(problem), self)
        return BaseParameterModel.from_problem(
            problem,
            values,
            history=history,
            diagnostics={"condition_number": cond, "epochs": epochs, **problem.diagnostics()},
        )


@hookimpl
def register_estimators(register):
    register("adaline", AdalineEstimator)
