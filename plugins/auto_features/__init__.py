"""Built-in estimator ``auto_features`` (seed 002, Petersen; SPEC §8): model-free dynamics of a revolute arm.

From q, qd and τ alone — no URDF, no inertial parameter, no regressor of the robot; only its joint count and
that every joint is revolute — it smooths the positions by LOOCV, differentiates them, builds the structured
trigonometric features of A(q), B(q), C(q), G(q) and fits them by least squares. The model
(:class:`~robotid_sim.identification.LagrangianFeatureModel`) gives the four matrices as functions and a forward
model A⁻¹(τ − h), so it serves controllers and Gymnasium envs like any other model. What the model predicts
with (the basis) is :mod:`robotid_sim.identification.lagrangian_basis`; the estimator's own steps are here:
:mod:`.derivatives` (smoothing, derivatives, the window's cross-validation), :mod:`.fit` (the least squares)
and :mod:`.estimator`.
"""

from robotid_sim_plugins.auto_features.estimator import AutoFeaturesEstimator

from robotid_sim.hookspecs import hookimpl

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

__all__ = ["AutoFeaturesEstimator"]


@hookimpl
def register_estimators(register):
    register("auto_features", AutoFeaturesEstimator)
