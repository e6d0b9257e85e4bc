"""robotid_sim: simulation-first robot dynamic-parameter identification.

Signals, everywhere: ``t`` time (N,), ``q`` joint positions (rad, or m for prismatic joints),
``qd`` velocities, ``qdd`` accelerations, ``tau`` joint torques (N·m) or forces (N), each an
array (N, n) for N samples of an n-joint arm. Parameters: ``theta`` the standard parameters
(10 per link, then rotor inertia and friction), ``beta`` the base parameters (SPEC §4).
"""

from robotid_sim.api import identify
from robotid_sim.errors import (
    ConfigError,
    DataError,
    IdentificationError,
    ModelError,
    PluginError,
    RobotIdError,
)
from robotid_sim.hookspecs import hookimpl
from robotid_sim.identification import Estimator, IdentificationProblem, IdentifiedModel, load_model
from robotid_sim.robot import Robot, bundled_robots, dh_to_urdf, load_robot
from robotid_sim.scenario import load_scenario, run_scenario
from robotid_sim.sim import Dataset, PyBulletSimulator, Signals, load_dataset, simulate

__version__ = "0.1.0"

__all__ = [
    "ConfigError", "DataError", "Dataset", "Estimator", "IdentificationError", "IdentificationProblem",
    "IdentifiedModel", "ModelError", "PluginError", "PyBulletSimulator", "Robot", "RobotIdError", "Signals",
    "bundled_robots", "dh_to_urdf", "hookimpl", "identify", "load_dataset", "load_model", "load_robot",
    "load_scenario", "run_scenario", "simulate",
]
