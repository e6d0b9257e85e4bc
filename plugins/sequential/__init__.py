"""Built-in estimator ``sequential``: the minimal parameter set identified joint by joint (seed 003 §3.2, §4, §5.1).

Seed 003 excites one joint at a time, from the distal joint to the base, the others held at a safe pose
(:class:`~robotid_sim.excitation.sequential.SequentialSine`), and identifies by least squares, in each trial,
"only the relevant subset of parameters": those the newly moving joint excites. Every joint's torque is
recorded in every trial (single input, multiple outputs: the held joints feel the moving one through the
coupling), and the parameters of the earlier trials are kept at their values.

The estimator is :mod:`.estimator`; the linear algebra of one step (the structural rank test, the step's
least squares with the held pose's terms, the covariance update, the rank check) is :mod:`.steps`.
"""

from robotid_sim_plugins.sequential.estimator import SequentialEstimator

from robotid_sim.hookspecs import hookimpl

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

__all__ = ["SequentialEstimator"]


@hookimpl
def register_estimators(register):
    register("sequential", SequentialEstimator)
