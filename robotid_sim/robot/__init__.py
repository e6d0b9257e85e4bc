"""Robot descriptions: URDF loading, DH/MDH → URDF, the YAML sidecar and :class:`Robot`."""

from __future__ import annotations

from pathlib import Path

from robotid_sim.errors import ModelError
from robotid_sim.robot.dh import DHRow, DHTable, dh_to_urdf, write_dh_urdf
from robotid_sim.robot.model import Robot, robot_from_urdf

__all__ = [
    "DHRow", "DHTable", "Robot", "bundled_robot_dir", "bundled_robots", "dh_to_urdf",
    "load_robot", "robot_from_urdf", "write_dh_urdf",
]


def bundled_robot_dir() -> Path:
    """Directory holding the bundled robots (``robots/<name>/robot.urdf`` + ``robot.yaml``)."""
    import robotid_sim_robots

    return Path(robotid_sim_robots.__file__).parent


def bundled_robots() -> dict[str, Path]:
    """Every robot directory known: bundled ones and those added by robot plugins."""
    dirs = {p.name: p for p in sorted(bundled_robot_dir().iterdir()) if (p / "robot.urdf").is_file()}
    try:
        from robotid_sim.plugins import plugin_robot_dirs
    except ImportError:
        return dirs
    return {**dirs, **plugin_robot_dirs()}


def load_robot(name_or_path: str | Path, sidecar: str | Path | None = None) -> Robot:
    """Load a bundled robot by name, or any fixed-base serial URDF by path.

    For a path, the sidecar is ``sidecar`` if given, else ``<urdf stem>.yaml`` or
    ``robot.yaml`` next to the URDF if present, else none (no friction, no rotor inertia).
    """
    text = str(name_or_path)
    path = Path(text)
    if not text.endswith(".urdf") and not path.is_file():
        robots = bundled_robots()
        if text not in robots:
            raise ModelError(
                f"unknown robot '{text}': give a bundled name ({', '.join(sorted(robots))}) "
                "or a path to a .urdf file"
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
