"""Identified models out to simulators: a physically consistent standard set, written as URDF and MJCF.

A model linear in inertial parameters is exported as the :class:`~robotid_sim.robot.Robot` of its
structure with a *physically consistent full standard parameter set* (every link a rigid body: its
pseudo-inertia positive definite; rotor inertias and friction coefficients ≥ 0):

- a model of the full standard parameters (``standard_linear``: ``lmi_wls``, ``two_loop``) writes its own
  values, refused (naming the link) if they are not consistent;
- a base-parameter model (``base_linear``: ``ols``, ``wls``, ``irls``, ...) gets the consistent standard set
  closest to the robot's CAD values that reproduces its base parameters
  (:func:`~robotid_sim.identification.lmi.closest_consistent_standard`, a semidefinite program); refused,
  naming the link, when no consistent set has these base values. The CAD values are those of ``robot``
  (a :class:`~robotid_sim.robot.Robot`, a registered name or a URDF path), by default the registered robot
  of the model's robot name; parameters the CAD robot lacks (another friction law) count as 0.

Other kinds (SINDy, Lagrangian features, a residual model's network) have no rigid-body parameters and are
refused. The files are written by :func:`robotid_sim.robot.export.write_robot` (URDF with its sidecar,
MJCF), after every target is checked and before anything is written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robotid_sim.errors import ConfigError, ModelError
from robotid_sim.identification.lmi import closest_consistent_standard, standard_consistency
from robotid_sim.identification.model import IdentifiedModel
from robotid_sim.robot import Robot, bundled_robots, load_robot
from robotid_sim.robot.export import RobotExport, export_targets, write_robot


def _linear_parts(model):
    """(structure, parameter names) of a model linear in its robot's standard or base parameters, or ModelError."""
    structure = getattr(model, "structure", None)
    names = getattr(model, "parameter_names", None)
    if not isinstance(model, IdentifiedModel) or structure is None or names is None or not hasattr(model, "values"):
        kind = getattr(model, "kind", type(model).__name__)
        raise ModelError(
            f"a '{kind}' model has no rigid-body parameters to write as URDF or MJCF; export a model linear in the "
            "inertial parameters (ols, wls, irls, lmi_wls, ...)"
        )
    return structure, list(names)


def cad_parameters(model, robot=None, sidecar=None) -> np.ndarray:
    """The CAD standard parameters (p,) in the layout of ``model``'s structure.

    Args:
        model: a base-parameter model.
        robot: a :class:`~robotid_sim.robot.Robot`, registered name or URDF path; default the registered
            robot named like the model's robot.
        sidecar: the sidecar of a ``robot`` given by name or path.

    Raises:
        ConfigError: no robot given and none registered under the model's robot name.
        ModelError: the robot's kinematics differ from the model's (named).
    """
    structure, _ = _linear_parts(model)
    if robot is None:
        if structure.name not in bundled_robots():
            raise ConfigError(
                f"a base-parameter model of robot '{structure.name}' needs the robot's CAD values to pick the "
                "consistent standard set closest to them: give robot= (--robot) a registered name or the URDF"
            )
        robot = structure.name
    if not isinstance(robot, Robot):
        robot = load_robot(robot, sidecar)
    model.check_structure(robot.structure())
    values = dict(zip(robot.parameter_names, robot.true_parameters(), strict=True))
    return np.array([values.get(name, 0.0) for name in structure.parameter_names])


def consistent_standard_parameters(model, robot=None, sidecar=None) -> np.ndarray:
    """The physically consistent standard set (p,) that stands for ``model`` (module docstring).

    Raises:
        ModelError: a model without rigid-body parameters, or no consistent set (naming the link).
        ConfigError: a base-parameter model without a CAD robot (see :func:`cad_parameters`).
    """
    structure, names = _linear_parts(model)
    if names == list(structure.parameter_names):  # its values are a full standard set: written as they are
        theta = np.array(model.values, float)
        check = standard_consistency(structure, theta)
        if not check.consistent:
            bad = [
                f"'{j.link_name}'" for j, e in zip(structure.joints, check.link_min_eigenvalue, strict=True) if e <= 0
            ]
            links = f" (link(s) {', '.join(bad)})" if bad else ""
            raise ModelError(
                f"the model's standard parameters are not physically consistent: {check.note}{links}; identify with "
                "lmi_wls for a consistent set"
            )
        return theta
    base = structure.base_parameters()
    return closest_consistent_standard(structure, base.K, model.base_values(), cad_parameters(model, robot, sidecar))


def export_model(
    model,
    urdf: str | Path | None = None,
    mjcf: str | Path | None = None,
    *,
    robot=None,
    sidecar=None,
    overwrite: bool = False,
) -> RobotExport:
    """Write ``model`` as URDF (with its sidecar beside it) and/or MJCF (module docstring).

    The targets are checked first (:func:`~robotid_sim.robot.export.export_targets`), then the consistent
    standard set is found, then the files are written atomically; nothing is written on a refusal.

    Raises:
        ConfigError: a bad or existing target (without ``overwrite``), or no CAD robot for a base model.
        ModelError: a model without rigid-body parameters, or no consistent set (naming the link).
    """
    _linear_parts(model)
    export_targets(urdf, mjcf, overwrite)
    theta = consistent_standard_parameters(model, robot, sidecar)
    return write_robot(Robot.from_structure(model.structure, theta), urdf, mjcf, overwrite)


__all__ = ["cad_parameters", "consistent_standard_parameters", "export_model"]
