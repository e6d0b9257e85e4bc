"""Robot descriptions: URDF loading, DH/MDH → URDF, the YAML sidecar and :class:`Robot`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from robotid_sim.errors import ConfigError, ModelError
from robotid_sim.robot.dh import DHRow, DHTable, dh_to_urdf, write_dh_urdf
from robotid_sim.robot.model import Robot, robot_from_urdf
from robotid_sim.robot.sidecar import Sidecar, load_found_sidecar

__all__ = [
    "NO_SIDECAR",
    "DHRow",
    "DHTable",
    "Robot",
    "bundled_robots",
    "dh_to_urdf",
    "load_robot",
    "robot_from_urdf",
    "write_dh_urdf",
]


#: the ``sidecar`` value (CLI ``--sidecar none``, scenario ``sidecar: none``) that loads a robot without any sidecar
NO_SIDECAR = "none"


def bundled_robots() -> dict[str, Path]:
    """Every robot directory known, by name, from the robots registry.

    The bundled robots (registered by the built-in plugin ``core``) come first, then those of
    robot plugins (``register_robots`` hook); the first registration of a name wins, so a
    plugin cannot replace a bundled robot (see :func:`robotid_sim.plugins.robots`).
    """
    from robotid_sim.plugins import robots

    return robots()


def load_robot(
    name_or_path: str | Path,
    sidecar: str | Path | Sidecar | Literal[False] | None = None,
    lock_joints: Mapping[str, float] | None = None,
) -> Robot:
    """Load a registered robot by name (bundled or from a plugin), or any fixed-base URDF (serial or a tree) by path.

    Args:
        name_or_path: a registered robot's name, or a path to a ``.urdf`` file.
        sidecar: the YAML sidecar (path or :class:`~robotid_sim.robot.sidecar.Sidecar`) to use
            instead of the robot's own; every field is optional (see
            :mod:`robotid_sim.robot.sidecar`), and a malformed one raises. Without it a
            registered robot uses its ``robot.yaml``, and a URDF path uses ``<urdf stem>.yaml``
            or ``robot.yaml`` beside the file if present, else none (no friction but the URDF's
            ``<dynamics>`` tags, no rotor inertia). A file found beside the URDF that is plainly
            not a sidecar (a scenario, say) is ignored with a warning
            (:func:`~robotid_sim.robot.sidecar.load_found_sidecar`). ``False`` or :data:`NO_SIDECAR`
            (``"none"``: CLI ``--sidecar none``, scenario ``sidecar: none``) loads the URDF without any
            sidecar, not even the robot's own.
        lock_joints: ``{joint name: position}`` (rad, or m for prismatic joints): those joints
            become fixed at that position, e.g. a gripper's fingers, so a tree whose extra
            branches are locked loads as a serial chain (see :func:`robot_from_urdf`).

    Raises:
        ModelError: unknown robot name, URDF not found or not loadable, a bad lock.
        ConfigError: a malformed sidecar, or ``sidecar=True``.
    """
    if sidecar is True:
        raise ConfigError(f"sidecar=True names no sidecar: give its path, or False (or {NO_SIDECAR!r}) for none")
    found = sidecar is None  # look for the robot's own sidecar
    if sidecar is False or sidecar == NO_SIDECAR:
        sidecar = None
    text = str(name_or_path)
    path = Path(text)
    if not text.endswith(".urdf") and not path.is_file():
        robots = bundled_robots()
        if text not in robots:
            raise ModelError(
                f"unknown robot '{text}': give a bundled name ({', '.join(sorted(robots))}) or a path to a .urdf file"
            )
        d = robots[text]
        if found and (d / "robot.yaml").is_file():
            sidecar = d / "robot.yaml"
        return robot_from_urdf(d / "robot.urdf", sidecar, lock_joints)
    if not path.is_file():
        raise ModelError(f"URDF file not found: {path}")
    if found:
        for candidate in dict.fromkeys((path.with_suffix(".yaml"), path.parent / "robot.yaml")):
            if candidate.is_file() and load_found_sidecar(candidate, path) is not None:
                sidecar = candidate  # a path, so that errors about its values name the file
                break
    return robot_from_urdf(path, sidecar, lock_joints)
