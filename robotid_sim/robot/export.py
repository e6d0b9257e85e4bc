"""Write a :class:`~robotid_sim.robot.Robot` for other simulators: URDF with its sidecar, and MJCF (MuJoCo).

The writers take a robot with its parameter values (an identified model's physically consistent standard set
becomes one with :meth:`Robot.from_structure <robotid_sim.robot.Robot.from_structure>`) and write its
kinematics as a clean chain or tree: a base link, then per moving joint its joint (origin, axis, limits) and
the link it carries, in the joint's frame, hanging from its parent joint's link (the base link for a joint on
the base; fixed and locked links of the source URDF are already merged into the moving bodies and their
poses into the joint origins). Written in chain order, a tree reads back with the same joint order.

**URDF** (:func:`urdf_text`): per link ``<inertial>`` (mass, COM, inertia tensor about the COM, every number
written as its shortest exact ``repr``), per joint ``<limit>`` (position, velocity and effort limits where
finite; a revolute joint without position limits is ``continuous``; a prismatic one gets ``lower = upper =
0``, the project's and PyBullet's "no limit") and ``<dynamics friction= damping=>`` with the Coulomb and
viscous coefficients of the friction law (:func:`~robotid_sim.robot.model.urdf_friction_tags`: ``fc``, and
``fv`` where it is viscous, i.e. the law has no exponent ``alpha``). What URDF cannot hold goes into the
**sidecar** written beside it, ``<stem>.yaml`` (:func:`sidecar_data`): gravity, the whole friction law
(offsets, Stribeck and exponent terms), rotor inertia, coupled drives, gear ratios and velocity/acceleration
limits, so that
``load_robot("<stem>.urdf")``, which finds ``<stem>.yaml`` beside the file, gives back the same dynamics
(without a warning: the tags agree with the sidecar's law).

**MJCF** (:func:`mjcf_text`, for MuJoCo): nested bodies with their inertial in principal form, ``hinge`` or
``slide`` joints with ``armature`` = rotor inertia, ``damping`` = viscous coefficient ``fv`` and
``frictionloss`` = Coulomb coefficient ``fc`` (MuJoCo's frictionloss is a dry-friction constraint solved with
the dynamics: its approximation of Coulomb friction, not the sign law itself), position ranges where
finite, a ``motor`` per joint (gear 1: the torque acts at the joint, as the project's torques do; its
control range the effort limit where there is one), gravity, no geoms (no contacts). MJCF has no sidecar:
what it cannot hold (coupled drives among it) is returned as notes (:class:`RobotExport`).

:func:`write_robot` checks every target before anything is computed or written (suffix, folder, an existing
file is refused unless ``overwrite``) and writes each file atomically (temporary file, then rename). No name
from the robot becomes a path: the files are the ones given, and names only enter the XML as escaped
attribute values.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from robotid_sim.dynamics.chain import matrix_to_rpy, rpy_to_matrix, split_inertial
from robotid_sim.errors import ConfigError, ModelError
from robotid_sim.robot.model import Robot, urdf_friction_tags
from robotid_sim.robot.urdf import principal_inertial
from robotid_sim.safety import atomic_write

#: the suffix of each output format (the sidecar is the URDF path with ``.yaml``)
URDF_SUFFIX = ".urdf"
MJCF_SUFFIX = ".xml"
SIDECAR_SUFFIX = ".yaml"


@dataclass(frozen=True)
class RobotExport:
    """What :func:`write_robot` wrote.

    Attributes:
        paths: the files written (URDF, its sidecar, MJCF), in that order.
        notes: what a format could not carry, one sentence each.
    """

    paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _num(x: float) -> str:
    return repr(float(x))


def _nums(values) -> str:
    return " ".join(_num(v) for v in np.asarray(values, float).ravel())


def _checked_names(robot: Robot) -> tuple[str, list[str]]:
    """(base link name, link names) after checking that joint and link names are non-empty and unique."""
    joints = robot.joint_names
    links = [j.link_name for j in robot.joints]
    for what, names in (("joint", joints), ("link", links)):
        if not all(isinstance(n, str) and n.strip() for n in names) or len(set(names)) != len(names):
            raise ModelError(
                f"robot '{robot.name}': its {what} names {names} must be non-empty and distinct to be written as "
                "URDF/MJCF; rename them in the URDF the model was identified on"
            )
    base = "base_link"
    while base in links:
        base = "_" + base
    return base, links


# ----------------------------------------------------------------------------- URDF
def _urdf_inertial(link: ET.Element, phi: np.ndarray) -> None:
    m, c, I = split_inertial(phi)
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "origin", xyz=_nums(c), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_num(m))
    ET.SubElement(
        inertial,
        "inertia",
        ixx=_num(I[0, 0]),
        ixy=_num(I[0, 1]),
        ixz=_num(I[0, 2]),
        iyy=_num(I[1, 1]),
        iyz=_num(I[1, 2]),
        izz=_num(I[2, 2]),
    )


def _urdf_joint(root: ET.Element, joint, parent: str, fc: float, fv: float) -> None:
    limited = bool(np.isfinite(joint.lower) and np.isfinite(joint.upper))
    kind = joint.kind if joint.kind == "prismatic" or limited else "continuous"
    el = ET.SubElement(root, "joint", name=joint.name, type=kind)
    ET.SubElement(el, "parent", link=parent)
    ET.SubElement(el, "child", link=joint.link_name)
    ET.SubElement(el, "origin", xyz=_nums(joint.origin_translation), rpy=_nums(matrix_to_rpy(joint.origin_rotation)))
    ET.SubElement(el, "axis", xyz=_nums(joint.axis))
    limit = {}
    if kind != "continuous":
        limit = {"lower": _num(joint.lower), "upper": _num(joint.upper)} if limited else {"lower": "0", "upper": "0"}
    for attr in ("effort", "velocity"):
        value = getattr(joint, f"{attr}_limit")
        if np.isfinite(value):
            limit[attr] = _num(value)
    if limit:
        ET.SubElement(el, "limit", **limit)
    ET.SubElement(el, "dynamics", damping=_num(fv), friction=_num(fc))


def urdf_text(robot: Robot) -> str:
    """The URDF of ``robot`` (module docstring): its kinematics, inertials and Coulomb/viscous friction."""
    base, _ = _checked_names(robot)
    fc, fv = urdf_friction_tags(robot.friction)
    root = ET.Element("robot", name=robot.name)
    root.append(ET.Comment(" written by robotid_sim; its sidecar (same name, .yaml) holds what URDF cannot "))
    ET.SubElement(root, "link", name=base)
    for k, (joint, parent) in enumerate(zip(robot.joints, robot.parents, strict=True)):
        link = ET.SubElement(root, "link", name=joint.link_name)
        _urdf_inertial(link, robot.inertials[k])
        _urdf_joint(root, joint, base if parent < 0 else robot.joints[parent].link_name, fc[k], fv[k])
    ET.indent(root)
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def sidecar_data(robot: Robot) -> dict:
    """The sidecar mapping (:mod:`robotid_sim.robot.sidecar`) of what URDF cannot hold."""
    return {
        "notes": f"written by robotid_sim with the URDF beside it: robot '{robot.name}'",
        "gravity": [float(g) for g in robot.gravity],
        "friction": robot.friction.to_dict(),
        "rotor_inertia": None if robot.rotor_inertia is None else [float(v) for v in robot.rotor_inertia],
        "gear_ratio": [float(v) for v in robot.gear_ratio],
        "limits": {
            "velocity": [float(v) for v in robot.velocity_limit],
            "acceleration": [float(v) for v in robot.acceleration_limit],
        },
        **({"coupling": robot.coupling.to_list()} if robot.coupling else {}),
    }


# ----------------------------------------------------------------------------- MJCF
def _quaternion(R: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of a rotation matrix, as MJCF's ``quat``."""
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(R).as_quat()
    return np.array([w, x, y, z])


def _mjcf_body(parent: ET.Element, robot: Robot, k: int, fc: float, fv: float) -> ET.Element:
    joint = robot.joints[k]
    body = ET.SubElement(
        parent,
        "body",
        name=joint.link_name,
        pos=_nums(joint.origin_translation),
        quat=_nums(_quaternion(joint.origin_rotation)),
    )
    m, c, rpy, moments = principal_inertial(robot.inertials[k])
    ET.SubElement(
        body,
        "inertial",
        pos=_nums(c),
        quat=_nums(_quaternion(rpy_to_matrix(rpy))),
        mass=_num(m),
        diaginertia=_nums(moments),
    )
    attrs = {
        "name": joint.name,
        "type": "slide" if joint.kind == "prismatic" else "hinge",
        "pos": "0 0 0",
        "axis": _nums(joint.axis),
        "armature": _num(0.0 if robot.rotor_inertia is None else robot.rotor_inertia[k]),
        "damping": _num(fv),
        "frictionloss": _num(fc),
    }
    if np.isfinite(joint.lower) and np.isfinite(joint.upper):
        attrs.update(limited="true", range=f"{_num(joint.lower)} {_num(joint.upper)}")
    ET.SubElement(body, "joint", **attrs)
    return body


def mjcf_text(robot: Robot) -> tuple[str, list[str]]:
    """The MJCF of ``robot`` (module docstring) and what it leaves out, one note each."""
    _checked_names(robot)
    fc, fv = urdf_friction_tags(robot.friction)
    root = ET.Element("mujoco", model=robot.name)
    root.append(ET.Comment(" written by robotid_sim "))
    ET.SubElement(root, "compiler", angle="radian", autolimits="true")
    ET.SubElement(root, "option", gravity=_nums(robot.gravity))
    world = ET.SubElement(root, "worldbody")
    bodies: list[ET.Element] = []
    for k, parent in enumerate(robot.parents):
        bodies.append(_mjcf_body(world if parent < 0 else bodies[parent], robot, k, fc[k], fv[k]))
    actuators = ET.SubElement(root, "actuator")
    for joint in robot.joints:
        attrs = {"name": joint.name, "joint": joint.name, "gear": "1"}
        if np.isfinite(joint.effort_limit):
            attrs.update(ctrllimited="true", ctrlrange=f"{_num(-joint.effort_limit)} {_num(joint.effort_limit)}")
        ET.SubElement(actuators, "motor", **attrs)
    ET.indent(root)
    law = robot.friction.to_dict()
    notes = []
    left_out = [name for name in ("offset", "fs", "vs", "alpha") if name in law]
    if left_out:
        notes.append(
            f"MJCF: the friction law '{law['model']}' is written as frictionloss = fc"
            + (", damping = fv" if "alpha" not in law else "")
            + f"; its {', '.join(left_out)} are left out (MuJoCo has no such joint terms)"
        )
    if robot.coupling:
        notes.append(
            f"MJCF: the coupled drives ({', '.join(robot.coupling.parameter_names)}) are left out (MuJoCo's joints "
            "have no friction or rotor inertia acting on a sum of joint velocities)"
        )
    if np.any(np.asarray(robot.gear_ratio) != 1):
        notes.append("MJCF: the gear ratios are left out (the motors act at the joints, gear 1, as the model's torque)")
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n", notes


# ----------------------------------------------------------------------------- files
def export_targets(urdf: str | Path | None, mjcf: str | Path | None, overwrite: bool = False) -> list[Path]:
    """The files :func:`write_robot` would write (URDF, its sidecar, MJCF), checked before any work.

    Raises:
        ConfigError: no target, a wrong suffix, a missing or unwritable folder, a folder given as a file, or
            an existing file without ``overwrite`` (each naming the path and the fix).
    """
    if urdf is None and mjcf is None:
        raise ConfigError("nothing to export: give a URDF path (.urdf, --urdf) and/or an MJCF path (.xml, --mjcf)")
    targets = []
    for value, suffix, what in ((urdf, URDF_SUFFIX, "URDF"), (mjcf, MJCF_SUFFIX, "MJCF")):
        if value is None:
            continue
        path = Path(value)
        if path.suffix != suffix:
            raise ConfigError(f"{what} path '{path}' must end in '{suffix}'")
        targets.append(path)
        if suffix == URDF_SUFFIX:
            targets.append(path.with_suffix(SIDECAR_SUFFIX))
    for path in targets:
        folder = path.parent
        if path.is_dir():
            raise ConfigError(f"'{path}' is a folder; give a file name inside it")
        if not folder.is_dir():
            raise ConfigError(f"'{path}': folder '{folder}' does not exist; create it first or choose another path")
        if (path.exists() or path.is_symlink()) and not overwrite:
            raise ConfigError(
                f"'{path}' already exists; refusing to overwrite it: choose another name, delete it, or pass "
                "overwrite=True (--overwrite)"
            )
    return targets


def write_robot(
    robot: Robot, urdf: str | Path | None = None, mjcf: str | Path | None = None, overwrite: bool = False
) -> RobotExport:
    """Write ``robot`` as URDF (with its sidecar ``<stem>.yaml``) and/or MJCF, each file atomically.

    Raises:
        ConfigError: see :func:`export_targets` (checked before anything is written).
        ModelError: joint or link names that cannot be written (empty or repeated).
    """
    targets = export_targets(urdf, mjcf, overwrite)
    texts: list[tuple[Path, str]] = []
    notes: list[str] = []
    if urdf is not None:
        texts.append((targets[0], urdf_text(robot)))
        texts.append((targets[1], yaml.safe_dump(sidecar_data(robot), sort_keys=False)))
    if mjcf is not None:
        text, notes = mjcf_text(robot)
        texts.append((targets[-1], text))
    written: list[Path] = []
    try:
        for path, text in texts:
            atomic_write(path, lambda fh, text=text: fh.write(text), binary=False)
            written.append(path)
    except BaseException:
        if not overwrite:  # nothing of a refused or failed export is left behind
            for path in written:
                path.unlink(missing_ok=True)
        raise
    return RobotExport(written, notes)


__all__ = [
    "MJCF_SUFFIX",
    "SIDECAR_SUFFIX",
    "URDF_SUFFIX",
    "RobotExport",
    "export_targets",
    "mjcf_text",
    "sidecar_data",
    "urdf_text",
    "write_robot",
]
