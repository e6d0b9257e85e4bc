"""Kinematic chain of a fixed-base arm or tree: the data the dynamics core works on.

The moving joints are listed in a topological order: each joint's parent joint (the joint that
carries the link it is attached to; -1 for the fixed base) comes before it. A serial chain is the
tree whose joint j has parent j - 1; :func:`chain_parents` gives the parents of any chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from robotid_sim.errors import ModelError

#: names of the 10 standard inertial parameters of a link, in regressor order (SPEC §4).
#: XX..ZZ are the inertia tensor about the link frame origin, MX, MY, MZ the first moments.
INERTIAL_NAMES = ("XX", "XY", "XZ", "YY", "YZ", "ZZ", "MX", "MY", "MZ", "M")


@dataclass(frozen=True)
class Joint:
    """One moving joint and the link it carries.

    Attributes:
        name: joint name (URDF).
        kind: ``"revolute"`` (also URDF ``continuous``) or ``"prismatic"``.
        axis: unit axis (3,) in the joint frame (= the child link frame).
        origin_rotation: (3, 3) rotation of the joint frame at q = 0 in the parent link frame.
        origin_translation: (3,) origin of the joint frame in the parent link frame.
        lower, upper: position limits (rad or m); -inf / inf for continuous joints.
        velocity_limit, effort_limit: from the URDF ``<limit>`` (inf when absent).
        link_name: name of the carried link (after merging fixed children into it).
        inertial: (10,) standard parameters of the carried link about the joint frame origin.
        parent: index in the chain of the joint whose link this joint is attached to (-1: the
            fixed base); None means the previous joint (-1 for the first), as in a serial chain.
    """

    name: str
    kind: str
    axis: np.ndarray
    origin_rotation: np.ndarray
    origin_translation: np.ndarray
    lower: float
    upper: float
    velocity_limit: float
    effort_limit: float
    link_name: str
    inertial: np.ndarray
    parent: int | None = None

    @property
    def continuous(self) -> bool:
        return not (np.isfinite(self.lower) and np.isfinite(self.upper))


class JointChain:
    """What a robot and its structure both say about their ``joints`` (a sequence of :class:`Joint`)."""

    joints: Sequence[Joint]

    @property
    def n_dof(self) -> int:
        return len(self.joints)

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    @property
    def joint_kinds(self) -> list[str]:
        return [j.kind for j in self.joints]

    @property
    def parents(self) -> np.ndarray:
        """Parent joint index of each joint (n,), -1 for the base (:func:`chain_parents`)."""
        return chain_parents(self.joints)

    @property
    def is_serial(self) -> bool:
        """Whether every joint is carried by the previous one (no branches)."""
        return is_serial(chain_parents(self.joints))

    @property
    def position_limits(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper position limits (n,); ±inf for continuous joints."""
        return np.array([j.lower for j in self.joints]), np.array([j.upper for j in self.joints])


def chain_parents(joints: Sequence[Joint]) -> np.ndarray:
    """Parent joint index (n,) int64 of each joint of ``joints``, -1 for the base.

    Raises:
        ModelError: a parent that is not an earlier joint of the chain (or -1).
    """
    parents = np.array([i - 1 if j.parent is None else j.parent for i, j in enumerate(joints)], dtype=np.int64)
    bad = np.flatnonzero((parents < -1) | (parents >= np.arange(len(parents))))
    if len(bad):
        i = int(bad[0])
        raise ModelError(
            f"joint '{joints[i].name}' (index {i}) has parent {int(parents[i])}: a parent must be an earlier joint "
            "of the chain, or -1 for the base"
        )
    return parents


def is_serial(parents: np.ndarray) -> bool:
    """Whether ``parents`` (n,) is a serial chain: joint j carried by joint j - 1."""
    return bool(np.array_equal(parents, np.arange(-1, len(parents) - 1)))


def inertial_parameters(mass: float, com: np.ndarray, inertia_com: np.ndarray) -> np.ndarray:
    """Standard parameters (10,) from mass, COM (3,) and inertia (3, 3) about the COM.

    Both ``com`` and ``inertia_com`` are expressed in the link frame; the inertia is moved to the
    frame origin with the parallel-axis theorem: I_O = I_C + m (c·c E - c cᵀ).
    """
    c = np.asarray(com, dtype=float)
    I = np.asarray(inertia_com, dtype=float) + mass * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([I[0, 0], I[0, 1], I[0, 2], I[1, 1], I[1, 2], I[2, 2], *(mass * c), mass])


def split_inertial(phi: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Inverse of :func:`inertial_parameters`: (mass, com (3,), inertia about COM (3, 3))."""
    XX, XY, XZ, YY, YZ, ZZ, MX, MY, MZ, M = phi
    I_O = np.array([[XX, XY, XZ], [XY, YY, YZ], [XZ, YZ, ZZ]])
    c = np.array([MX, MY, MZ]) / M if M != 0 else np.zeros(3)
    return M, c, I_O - M * (c @ c * np.eye(3) - np.outer(c, c))


def transform_inertial(phi: np.ndarray, R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Standard parameters of a body given in frame B, re-expressed about the origin of frame A.

    ``R``, ``p``: rotation and origin of frame B in frame A.
    """
    m, c, I_c = split_inertial(phi)
    return inertial_parameters(m, R @ c + p, R @ I_c @ R.T)


def rpy_to_matrix(rpy) -> np.ndarray:
    """URDF roll-pitch-yaw (fixed axes X, Y, Z) to a rotation matrix."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def matrix_to_rpy(R: np.ndarray) -> np.ndarray:
    """Rotation matrix to URDF roll-pitch-yaw."""
    sp = -R[2, 0]
    if abs(sp) < 1.0 - 1e-12:
        p = np.arcsin(sp)
        r = np.arctan2(R[2, 1], R[2, 2])
        y = np.arctan2(R[1, 0], R[0, 0])
    else:  # gimbal lock: put everything in yaw
        p = np.pi / 2 * np.sign(sp)
        r = 0.0
        y = np.arctan2(-R[0, 1], R[1, 1])
    return np.array([r, p, y])
