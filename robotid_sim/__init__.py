"""robotid_sim: simulation-first robot dynamic-parameter identification.

Signals, everywhere: ``t`` time (N,), ``q`` joint positions (rad, or m for prismatic joints),
``qd`` velocities, ``qdd`` accelerations, ``tau`` joint torques (N·m) or forces (N), each an
array (N, n) for N samples of an n-joint arm. Parameters: ``theta`` the standard parameters
(10 per link, then rotor inertia and friction), ``beta`` the base parameters (SPEC §4).

``import robotid_sim`` is cheap: only the error classes and ``hookimpl`` are imported with it; every
other public name (``load_robot``, ``simulate``, ``identify``, ...) and every sub-package is imported
the first time it is used (PEP 562), so worker processes that need one stage never pay for the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robotid_sim._lazy import lazy_attributes
from robotid_sim.errors import (
    ConfigError,
    DataError,
    IdentificationError,
    ModelError,
    PluginError,
    RobotIdError,
)
from robotid_sim.hookspecs import hookimpl

# A literal, so that setuptools reads it statically (pyproject: version = {attr = ...}) without importing.
__version__ = "0.1.0"

#: public name -> module defining it, imported on first access
_LAZY_ATTRIBUTES: dict[str, str] = {
    "identify": "robotid_sim.api",
    "Estimator": "robotid_sim.identification",
    "IdentificationProblem": "robotid_sim.identification",
    "IdentifiedModel": "robotid_sim.identification",
    "load_model": "robotid_sim.identification",
    "Robot": "robotid_sim.robot",
    "bundled_robots": "robotid_sim.robot",
    "dh_to_urdf": "robotid_sim.robot",
    "load_robot": "robotid_sim.robot",
    "load_scenario": "robotid_sim.scenario",
    "run_scenario": "robotid_sim.scenario",
    "Dataset": "robotid_sim.sim",
    "PyBulletSimulator": "robotid_sim.sim",
    "Signals": "robotid_sim.sim",
    "load_dataset": "robotid_sim.sim",
    "simulate": "robotid_sim.sim",
}

#: sub-modules reachable as attributes (``robotid_sim.plugins``) without an explicit import
_LAZY_SUBMODULES = frozenset(
    {
        "api",
        "cli",
        "dynamics",
        "excitation",
        "identification",
        "plugins",
        "report",
        "robot",
        "scenario",
        "signal",
        "sim",
    }
)

if TYPE_CHECKING:  # static tools and IDEs see the names; nothing is imported at run time
    from robotid_sim.api import identify
    from robotid_sim.identification import Estimator, IdentificationProblem, IdentifiedModel, load_model
    from robotid_sim.robot import Robot, bundled_robots, dh_to_urdf, load_robot
    from robotid_sim.scenario import load_scenario, run_scenario
    from robotid_sim.sim import Dataset, PyBulletSimulator, Signals, load_dataset, simulate

__all__ = [
    "ConfigError",
    "DataError",
    "Dataset",
    "Estimator",
    "IdentificationError",
    "IdentificationProblem",
    "IdentifiedModel",
    "ModelError",
    "PluginError",
    "PyBulletSimulator",
    "Robot",
    "RobotIdError",
    "Signals",
    "bundled_robots",
    "dh_to_urdf",
    "hookimpl",
    "identify",
    "load_dataset",
    "load_model",
    "load_robot",
    "load_scenario",
    "run_scenario",
    "simulate",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY_ATTRIBUTES, _LAZY_SUBMODULES)
