"""Denavit–Hartenberg (standard or modified) table → URDF (SPEC §3).

A row describes one moving joint: ``type`` (revolute | prismatic), ``alpha``, ``a``, ``d``,
``theta`` (the offset), limits, and the carried link's inertia: ``mass``, ``com`` (3,) and
``inertia`` (6: ixx, ixy, ixz, iyy, iyz, izz about the COM), all in the DH frame of that link.
For a revolute joint q adds to theta; for a prismatic joint q adds to d.

Conventions:
- ``modified`` (Craig): T_{i-1,i} = RotX(alpha_{i-1}) TransX(a_{i-1}) RotZ(theta_i) TransZ(d_i);
  row i holds alpha_{i-1}, a_{i-1}, theta_i, d_i (as seed 001 Table 1 does). The joint frame is
  the DH frame i, the joint axis is its z axis.
- ``standard``: T_{i-1,i} = RotZ(theta_i) TransZ(d_i) TransX(a_i) RotX(alpha_i); the joint
  moves frame i-1's z axis, so the URDF joint is placed at frame i-1 and the link's inertial
  data, given in DH frame i, is moved into that joint frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robotid_sim.dynamics.chain import (
    inertial_parameters,
    matrix_to_rpy,
    split_inertial,
    transform_inertial,
)
from robotid_sim.errors import ConfigError


def _rot_x(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _rot_z(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _hom(R=None, p=None):
    T = np.eye(4)
    if R is not None:
        T[:3, :3] = R
    if p is not None:
        T[:3, 3] = p
    return T


@dataclass
class DHRow:
    """One DH row; see the module docstring for the meaning of each field."""

    type: str = "revolute"
    alpha: float = 0.0
    a: float = 0.0
    d: float = 0.0
    theta: float = 0.0
    lower: float = -np.pi
    upper: float = np.pi
    velocity: float = 10.0
    effort: float = 1000.0
    mass: float = 1.0
    com: Sequence[float] = (0.0, 0.0, 0.0)
    inertia: Sequence[float] = (1e-3, 0.0, 0.0, 1e-3, 0.0, 1e-3)
    name: str | None = None

    def __post_init__(self):
        if self.type not in ("revolute", "prismatic", "continuous"):
            raise ConfigError(f"DH row type must be revolute, continuous or prismatic, got {self.type!r}")
        if len(self.com) != 3 or len(self.inertia) != 6:
            raise ConfigError("DH row needs com (3 values) and inertia (6 values: ixx ixy ixz iyy iyz izz)")


@dataclass
class DHTable:
    """A DH table with its convention and robot name."""

    name: str
    rows: list[DHRow]
    convention: str = "modified"
    base_mass: float = 1.0
    extras: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict) -> DHTable:
        try:
            rows = [DHRow(**r) for r in data["rows"]]
        except TypeError as exc:
            raise ConfigError(f"DH table row has an unknown or bad field: {exc}") from exc
        except KeyError as exc:
            raise ConfigError("DH table needs 'rows'") from exc
        conv = data.get("convention", "modified")
        if conv not in ("modified", "standard"):
            raise ConfigError(f"DH convention must be 'modified' or 'standard', got {conv!r}")
        return cls(
            name=data.get("name", "robot"), rows=rows, convention=conv, base_mass=float(data.get("base_mass", 1.0))
        )


def _fmt(x) -> str:
    return " ".join(f"{float(v):.12g}" for v in np.atleast_1d(x))


def _inertial_xml(phi: np.ndarray) -> str:
    m, c, I = split_inertial(phi)
    return (
        "    <inertial>\n"
        f'      <origin xyz="{_fmt(c)}" rpy="0 0 0"/>\n'
        f'      <mass value="{m:.12g}"/>\n'
        f'      <inertia ixx="{I[0, 0]:.12g}" ixy="{I[0, 1]:.12g}" ixz="{I[0, 2]:.12g}" '
        f'iyy="{I[1, 1]:.12g}" iyz="{I[1, 2]:.12g}" izz="{I[2, 2]:.12g}"/>\n'
        "    </inertial>\n"
    )


def _link_xml(name: str, phi: np.ndarray) -> str:
    radius = 0.03
    visual = f'    <visual>\n      <geometry><sphere radius="{radius}"/></geometry>\n    </visual>\n'
    return f'  <link name="{name}">\n{_inertial_xml(phi)}{visual}  </link>\n'


def dh_to_urdf(table: DHTable | dict) -> str:
    """URDF text for a DH table (the bundled robots are made with this)."""
    if isinstance(table, dict):
        table = DHTable.from_dict(table)
    parts = [f'<?xml version="1.0"?>\n<robot name="{table.name}">\n']
    base_phi = np.array([1e-3, 0, 0, 1e-3, 0, 1e-3, 0, 0, 0, table.base_mass])
    parts.append(_link_xml("base_link", base_phi))
    parent = "base_link"
    T_prev_joint = np.eye(4)  # standard DH: pose of frame i-1 in the previous joint frame
    for i, row in enumerate(table.rows):
        link = f"link{i + 1}"
        jname = row.name or f"joint{i + 1}"
        phi_dh = _inertia_to_origin(row)
        if table.convention == "modified":
            T_origin = _hom(_rot_x(row.alpha)) @ _hom(p=[row.a, 0, 0]) @ _hom(_rot_z(row.theta)) @ _hom(p=[0, 0, row.d])
            phi = phi_dh
            T_next = np.eye(4)
        else:
            # joint i sits at frame i-1 (its z axis); the link data is given in frame i.
            # frame i = Rot/TransZ(q) · T_fixed, so the joint frame is frame i-1 and the link is T_fixed.
            T_origin = T_prev_joint
            T_fixed = _hom(_rot_z(row.theta)) @ _hom(p=[0, 0, row.d]) @ _hom(p=[row.a, 0, 0]) @ _hom(_rot_x(row.alpha))
            phi = transform_inertial(phi_dh, T_fixed[:3, :3], T_fixed[:3, 3])
            T_next = T_fixed
        jtype = "continuous" if row.type == "continuous" else row.type
        limit = (
            f'    <limit effort="{row.effort:.12g}" velocity="{row.velocity:.12g}"/>\n'
            if jtype == "continuous"
            else f'    <limit lower="{row.lower:.12g}" upper="{row.upper:.12g}" '
            f'effort="{row.effort:.12g}" velocity="{row.velocity:.12g}"/>\n'
        )
        parts.append(
            f'  <joint name="{jname}" type="{jtype}">\n'
            f'    <parent link="{parent}"/>\n    <child link="{link}"/>\n'
            f'    <origin xyz="{_fmt(T_origin[:3, 3])}" rpy="{_fmt(matrix_to_rpy(T_origin[:3, :3]))}"/>\n'
            '    <axis xyz="0 0 1"/>\n'
            f"{limit}"
            '    <dynamics damping="0" friction="0"/>\n'
            "  </joint>\n"
        )
        parts.append(_link_xml(link, phi))
        parent = link
        T_prev_joint = T_next
    parts.append("</robot>\n")
    return "".join(parts)


def _inertia_to_origin(row: DHRow) -> np.ndarray:
    ixx, ixy, ixz, iyy, iyz, izz = row.inertia
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    return inertial_parameters(row.mass, np.asarray(row.com, float), I)


def write_dh_urdf(table: DHTable | dict, path: str | Path) -> Path:
    """Write :func:`dh_to_urdf` to ``path`` and return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dh_to_urdf(table))
    return path
