"""Built-in estimators ``ekf`` (the augmented-state extended Kalman filter of seed 004, §2.4, §4.4, Eq. 21–29,
41–44) and, on its process model and noise, ``ukf``, ``cdkf``, ``sr_ukf``, ``sr_cdkf``, ``sr_ekf`` and ``pf``
(BIRDy's Kalman family).

Written in filterpy's shape, one concept per module:

- :mod:`~robotid_sim_plugins.ekf.process`: the process model (fx, hx and their Jacobians F, H on the state
  [q, qd, λ], the torque as input);
- :mod:`~robotid_sim_plugins.ekf.noise`: the noise schedule (P0, R with tempering, Q with annealing);
- :mod:`~robotid_sim_plugins.ekf.stream`: the per-sample sequence every filter shares (restart, predict,
  correct; ``update(sample)`` for streaming use) and the EKF on filterpy's ``ExtendedKalmanFilter``;
- :mod:`~robotid_sim_plugins.ekf.filter`: the EKF's compiled run and what a run records;
- :mod:`~robotid_sim_plugins.ekf.compiled`, :mod:`~robotid_sim_plugins.ekf.ekf_kernel`: the process model of a
  kinematic chain and the EKF's step, compiled (numba, cached on disk);
- :mod:`~robotid_sim_plugins.ekf.sigma`, :mod:`~robotid_sim_plugins.ekf.square_root`,
  :mod:`~robotid_sim_plugins.ekf.particle`: the UKF and CDKF on filterpy's ``UnscentedKalmanFilter``, the
  square-root forms, the particle filter;
- :mod:`~robotid_sim_plugins.ekf.estimator`, :mod:`~robotid_sim_plugins.ekf.filters`: the options and presets,
  resolved into the objects above.
"""

from __future__ import annotations

from robotid_sim_plugins.ekf.estimator import EKFEstimator
from robotid_sim_plugins.ekf.filters import (
    CDKFEstimator,
    PFEstimator,
    SRCDKFEstimator,
    SREKFEstimator,
    SRUKFEstimator,
    UKFEstimator,
)

from robotid_sim.hookspecs import hookimpl

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

__all__ = [
    "CDKFEstimator",
    "EKFEstimator",
    "PFEstimator",
    "SRCDKFEstimator",
    "SREKFEstimator",
    "SRUKFEstimator",
    "UKFEstimator",
]


@hookimpl
def register_estimators(register):
    for estimator in (
        EKFEstimator,
        UKFEstimator,
        CDKFEstimator,
        SRUKFEstimator,
        SRCDKFEstimator,
        SREKFEstimator,
        PFEstimator,
    ):
        register(estimator.name, estimator)
