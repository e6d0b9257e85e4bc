"""robotid_sim: simulation-first robot dynamic-parameter identification.

Signals, everywhere: ``t`` time (N,), ``q`` joint positions (rad, or m for prismatic joints),
``qd`` velocities, ``qdd`` accelerations, ``tau`` joint torques (N·m) or forces (N), each an
array (N, n) for N samples of an n-joint arm. Parameters: ``theta`` the standard parameters
(10 per link, then rotor inertia and friction), ``beta`` the base parameters (SPEC §4).
"""

from robotid_sim.errors import (
    ConfigError,
    DataError,
    IdentificationError,
    ModelError,
    PluginError,
    RobotIdError,
)
from robotid_sim.robot import Robot, bundled_robots, dh_to_urdf, load_robot

__version__ = "0.1.0"

__all__ = [
    "ConfigError", "DataError", "IdentificationError", "ModelError", "PluginError", "Robot",
    "RobotIdError", "bundled_robots", "dh_to_urdf", "load_robot",
]
