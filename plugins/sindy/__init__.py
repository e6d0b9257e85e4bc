"""Built-in estimators ``sindy`` and ``stepwise_sindy`` (seed 000, Guo et al. 2025; SPEC §8).

Both return a :class:`~robotid_sim.identification.FeatureLibraryModel` holding only the active terms: a
symbolic model (``model.equations()``) that predicts torque and, when linear in qdd, gives forward
dynamics, so it serves controllers and Gymnasium envs like any other model. The building blocks, each usable
on its own: :mod:`.libraries` (DLG libraries and friction candidates), :mod:`.segmentation` (RAI + k-means,
or the data's labels), :mod:`.sparse` (the Lasso per joint and the model of its active terms); the
estimators are in :mod:`.estimators`. The feature grammar they build with is shared with the model kind
(:mod:`robotid_sim.identification.features`).
"""

from robotid_sim_plugins.sindy.estimators import SINDyEstimator, StepwiseSINDyEstimator

from robotid_sim.hookspecs import hookimpl

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

__all__ = ["SINDyEstimator", "StepwiseSINDyEstimator"]


@hookimpl
def register_estimators(register):
    register("sindy", SINDyEstimator)
    register("stepwise_sindy", StepwiseSINDyEstimator)
