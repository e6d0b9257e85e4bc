"""Built-in estimator ``semiparametric``: a rigid-body model plus a neural-network correction
trained on its residual (seed 001 §4.4, Eq. 33).

The model it returns (:class:`~robotid_sim.identification.ResidualModel` with its
:class:`~robotid_sim.identification.MLPCorrection`) is the library's; the estimator is :mod:`.estimator`, the
torch training of the network :mod:`.training`.
"""

from robotid_sim_plugins.semiparametric.estimator import SemiparametricEstimator

from robotid_sim.hookspecs import hookimpl

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

__all__ = ["SemiparametricEstimator"]


@hookimpl
def register_estimators(register):
    register("semiparametric", SemiparametricEstimator)
