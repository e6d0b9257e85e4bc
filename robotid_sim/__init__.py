"""robotid_sim: simulation-first robot dynamic-parameter identification.

Signals, everywhere: ``t`` time (N,), ``q`` joint positions (rad, or m for prismatic joints),
``qd`` velocities, ``qdd`` accelerations, ``tau`` joint torques (N·m) or forces (N), each an
array (N, n) for N samples of an n-joint arm. Parameters: ``theta`` the standard parameters
(10 per link, then rotor inertia and friction), ``beta`` the base parameters (SPEC §4).

``import robotid_sim`` is cheap: only the error classes and ``hookimpl`` are imported with it; every
other public name (``load_robot``, ``simulate``, ``identify``, ...) and every sub-package is imported
the first time it is used (PEP 562), so worker processes that need one stage never pay for the rest.

The Gymnasium environments (``robotid_sim/IdentifiedArm-v0``, ``robotid_sim/PyBulletArm-v0``,
:mod:`robotid_sim.envs`) are registered without importing gymnasium here: if gymnasium is already
imported, :mod:`robotid_sim.envs` is imported (it registers them; cheap, with gymnasium loaded);
otherwise a one-shot import hook imports it right after gymnasium's own import, so that
``gymnasium.make("robotid_sim/IdentifiedArm-v0", ...)`` works after ``import robotid_sim`` in either
order. ``gymnasium.make("robotid_sim:robotid_sim/IdentifiedArm-v0", ...)`` works too (it imports this
package).
"""

from __future__ import annotations

import importlib
import sys
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
    "run_closed_loop": "robotid_sim.control.closed_loop",
    "Estimator": "robotid_sim.identification",
    "IdentificationProblem": "robotid_sim.identification",
    "IdentifiedModel": "robotid_sim.identification",
    "load_model": "robotid_sim.identification",
    "Robot": "robotid_sim.robot",
    "bundled_robots": "robotid_sim.robot",
    "dh_to_urdf": "robotid_sim.robot",
    "load_robot": "robotid_sim.robot",
    "load_scenario": "robotid_sim.scenario",
    "run_scenario": "robotid_sim.studies",
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
        "control",
        "dynamics",
        "envs",
        "excitation",
        "identification",
        "plugins",
        "report",
        "robot",
        "scenario",
        "signal",
        "sim",
        "studies",
        "sweep",
    }
)

if TYPE_CHECKING:  # static tools and IDEs see the names; nothing is imported at run time
    from robotid_sim.api import identify
    from robotid_sim.control.closed_loop import run_closed_loop
    from robotid_sim.identification import Estimator, IdentificationProblem, IdentifiedModel, load_model
    from robotid_sim.robot import Robot, bundled_robots, dh_to_urdf, load_robot
    from robotid_sim.scenario import load_scenario
    from robotid_sim.sim import Dataset, PyBulletSimulator, Signals, load_dataset, simulate
    from robotid_sim.studies import run_scenario

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
    "run_closed_loop",
    "run_scenario",
    "simulate",
]


__getattr__, __dir__ = lazy_attributes(__name__, _LAZY_ATTRIBUTES, _LAZY_SUBMODULES)


def _register_gymnasium_envs() -> None:
    """Import :mod:`robotid_sim.envs` (which registers the envs); never breaks the import that triggered it."""
    try:
        importlib.import_module("robotid_sim.envs")
    except Exception as exc:  # a broken registration must not break ``import gymnasium``
        import logging

        logging.getLogger(__name__).warning("robotid_sim could not register its Gymnasium envs: %s", exc)


class _AfterGymnasiumImport:
    """One-shot ``sys.meta_path`` finder: when gymnasium is first imported, register the envs right after it.

    It finds nothing itself: it removes itself, lets the other finders find gymnasium, and wraps
    the found loader's ``exec_module`` (on that loader only, the spec is otherwise unchanged) so
    that :func:`_register_gymnasium_envs` runs once gymnasium's ``__init__`` has finished. (A plain
    class with ``find_spec``: subclassing ``importlib.abc.MetaPathFinder`` would import
    ``importlib.resources`` with robotid_sim, about 8 ms.)
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "gymnasium":
            return None
        import importlib.util

        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_register(module):
            try:
                exec_module(module)
            finally:
                vars(loader).pop("exec_module", None)
            _register_gymnasium_envs()

        try:
            loader.exec_module = exec_then_register
        except (AttributeError, TypeError):  # a loader without instance attributes: register on demand only
            pass
        return spec


if "gymnasium" in sys.modules:
    _register_gymnasium_envs()
elif not any(isinstance(finder, _AfterGymnasiumImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AfterGymnasiumImport())
