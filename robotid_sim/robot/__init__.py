"""Robot descriptions: URDF loading, DH/MDH → URDF, the YAML sidecar and :class:`Robot`."""

from __future__ import annotations

from pathlib import Path

from robotid_sim.errors import ModelError
from robotid_sim.robot.dh import DHRow, DHTable, dh_to_urdf, write_dh_urdf
from robotid_sim.robot.model import Robot, robot_from_urdf

__all__ = [
    "DHRow",
    "DHTable",
    "Robot",
    "bundled_robots",
    "dh_to_urdf",
    "load_robot",
    "robot_from_urdf",
    "write_dh_urdf",
]


def bundled_robots() -> dict[str, Path]:
    """Every robot directory known, by name, from the robots registry.

    The bundled robots (registered by the built-in plugin ``core``) come first, then those of
    robot plugins (``register_robots`` hook); the first registration of a name wins, so a
    plugin cannot replace a bundled robot (see :func:`robotid_sim.plugins.robots`).
    """
    from robotid_sim.plugins import robots

    return robots()


def load_robot(name_or_path: str | Path, sidecar: str | Path | None = None) -> Robot:
    """Load a registered robot by name (bundled or from a plugin), or any fixed-base serial URDF by path.

    For a path, the sidecar is ``sidecar`` if given, else ``<urdf stem>.yaml`` or
    ``robot.yaml`` next to the URDF if present, else none (no friction, no rotor inertia).
    """
    text = str(name_or_path)
    path = Path(text)
    if not text.endswith(".urdf") and not path.is_file():
        robots = bundled_robots()
        if text not in robots:
            raise ModelError(
                f"unknown robot '{text}': give a bundled name ({', '.join(sorted(robots))}) or a path to a .urdf file"
            )
        d = robots[text]
        return robot_from_urdf(d / "robot.urdf", d / "robot.yaml")
    if not path.is_file():
        raise ModelError(f"URDF file not found: {path}")
    if sidecar is None:
        for candidate in (path.with_suffix(".yaml"), path.parent / "robot.yaml"):
            if candidate.is_file():
                sidecar = candidate
                break
    return robot_from_urdf(path, sidecar)
