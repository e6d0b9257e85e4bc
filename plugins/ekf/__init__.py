"""Built-in estimator ``ekf``: the augmented-state extended Kalman filter of seed 004 (§2.4, §4.4, Eq. 21–29, 41–44).

Written in filterpy's shape, one concept per module:

- :mod:`~robotid_sim_plugins.ekf.process`: the process model (fx, hx and their Jacobians F, H on the state
  [q, qd, λ], the torque as input);
- :mod:`~robotid_sim_plugins.ekf.noise`: the noise schedule (P0, R with tempering, Q with annealing);
- :mod:`~robotid_sim_plugins.ekf.filter`: the loop, one update and one predict per sample on filterpy's
  ``ExtendedKalmanFilter`` (imported when a fit starts);
- :mod:`~robotid_sim_plugins.ekf.estimator`: the options and presets, resolved into the two objects above.
"""

from __future__ import annotations

from robotid_sim_plugins.ekf.estimator import EKFEstimator

from robotid_sim.hookspecs import hookimpl

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

__all__ = ["EKFEstimator"]


@hookimpl
def register_estimators(register):
    register("ekf", EKFEstimator)
