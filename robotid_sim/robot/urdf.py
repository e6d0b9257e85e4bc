"""Read a fixed-base URDF, serial or a tree, into a :class:`~robotid_sim.dynamics.chain.Joint` list.

Supported joints: revolute, continuous, prismatic (moving) and fixed (its child link is merged
into the parent body, and its transform into the next moving joint's origin). Any other type
(floating, planar, spherical, ...) raises :class:`ModelError` naming the joint: floating bases
are not supported.

**Trees.** A body may carry several moving joints (a gripper's fingers, the arms of a torso): the
moving joints are listed depth-first from the root (links in the order of their joints in the
file), so each joint comes after its parent joint, and :attr:`Joint.parent
<robotid_sim.dynamics.chain.Joint>` is the index of the joint carrying it (-1 for the fixed base).
A serial chain is the tree in which each joint's parent is the previous joint.

**Locked joints.** ``lock_joints={"name": position}`` (rad for revolute and continuous joints,
m for prismatic ones) makes each named moving joint a fixed joint at that position: its child
link is merged into the parent body at the locked pose, like any fixed link, so a tree whose
extra branches (a gripper's fingers) are locked is a serial chain. An unknown name (the message
lists the moving joints), a fixed joint, a position that is not a finite number or is outside the
joint's ``<limit lower upper>`` raise :class:`ModelError`.

How the file is read, where URDF or PyBullet leave a choice:

- a link without ``<inertial>`` (a ROS ``tool0`` or ``flange`` frame) has no mass; an
  ``<inertial>`` without ``<mass>`` or ``<inertia>`` has zero mass or a zero inertia tensor;
- a prismatic joint with ``lower > upper``, or ``lower == upper == 0`` (also when both are
  left out), has no position limit (PyBullet's "no limit" convention), like a continuous joint;
  a revolute joint needs ``lower < upper`` (use ``continuous`` for an unlimited one);
- ``<dynamics damping friction>`` of the moving joints is read (:attr:`UrdfRobot.damping`,
  :attr:`UrdfRobot.friction`; absent = 0): the robot makes a Coulomb + viscous friction model
  of it when no sidecar gives one (:func:`~robotid_sim.robot.robot_from_urdf`); the simulator
  never lets Bullet apply it;
- ``<visual>``, ``<collision>``, ``<transmission>``, ``<mimic>`` and ``<gazebo>`` are not part
  of the model; mesh files are never needed.

What is refused, with a :class:`ModelError` naming the link or joint and the fix: a link or joint
without a name or with a duplicate name; a joint without ``<parent>`` or ``<child>``, or naming
an unknown link; a link with two parent joints; a cycle or links not connected to the root; a
number that cannot be read (or is not finite); a negative mass;
and a moving body (a link carried by a moving joint, with its fixed children merged) whose
inertia no rigid body has (:mod:`robotid_sim.robot.physical`, semidefinite form: a negative
principal moment of inertia about the COM or a broken triangle inequality). PyBullet would
silently set such an inertia to zero, so the simulation would not be the model.

:func:`pybullet_urdf` writes the copy of a URDF that :class:`~robotid_sim.sim.PyBulletSimulator`
loads, so that PyBullet simulates exactly the model (see there).
"""

from __future__ import annotations

import copy
import logging
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from robotid_sim.dynamics.chain import (
    Joint,
    inertial_parameters,
    matrix_to_rpy,
    rpy_to_matrix,
    split_inertial,
    transform_inertial,
)
from robotid_sim.errors import ModelError
from robotid_sim.robot import physical

log = logging.getLogger(__name__)

_MOVING = {"revolute", "continuous", "prismatic"}
_PRIMITIVES = {"box", "cylinder", "sphere", "capsule"}


# ----------------------------------------------------------------------------- reading numbers
def _floats(text: str | None, default, what: str, count: int | None = None, finite: bool = True) -> np.ndarray:
    """Numbers of an attribute (``default`` when absent); :class:`ModelError` naming ``what``."""
    if text is None:
        return np.asarray(default, dtype=float)
    try:
        values = np.array([float(v) for v in text.replace(",", " ").split()])
    except ValueError as exc:
        raise ModelError(f"URDF: cannot read numbers in {what}: {text!r}") from exc
    if count is not None and values.shape != (count,):
        raise ModelError(f"URDF: {what} must have {count} numbers, got {text!r}")
    if finite and not np.all(np.isfinite(values)):
        raise ModelError(f"URDF: {what} must be finite numbers, got {text!r}")
    return values


def _number(elem, attr: str, default: float, what: str, finite: bool = True) -> float:
    return float(_floats(elem.get(attr), [default], what, count=1, finite=finite)[0])


def _origin(elem, what: str) -> tuple[np.ndarray, np.ndarray]:
    o = elem.find("origin") if elem is not None else None
    if o is None:
        return np.eye(3), np.zeros(3)
    xyz = _floats(o.get("xyz"), [0, 0, 0], f"the <origin xyz> of {what}", count=3)
    rpy = _floats(o.get("rpy"), [0, 0, 0], f"the <origin rpy> of {what}", count=3)
    return rpy_to_matrix(rpy), xyz


def _link_inertial(link, where: str) -> np.ndarray:
    """Standard parameters (10,) of a URDF link about its own frame origin (zero if no inertial)."""
    name = link.get("name")
    inertial = link.find("inertial")
    if inertial is None:
        return np.zeros(10)
    what = f"link '{name}'"
    mass_el = inertial.find("mass")
    mass = _number(mass_el, "value", 0.0, f"the <mass value> of {what}") if mass_el is not None else 0.0
    if mass < 0:
        raise ModelError(
            f"URDF link '{name}' in {where} has a negative mass ({mass:g} kg): fix its <inertial><mass value=...> "
            "(a mass is >= 0; leave out <inertial> for a massless frame)"
        )
    R, p = _origin(inertial, f"the <inertial> of {what}")
    ie = inertial.find("inertia")
    values = {k: 0.0 for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    if ie is not None:
        values = {k: _number(ie, k, 0.0, f"the <inertia {k}> of {what}") for k in values}
    I_frame = np.array(
        [
            [values["ixx"], values["ixy"], values["ixz"]],
            [values["ixy"], values["iyy"], values["iyz"]],
            [values["ixz"], values["iyz"], values["izz"]],
        ]
    )
    return inertial_parameters(mass, p, R @ I_frame @ R.T)


# ----------------------------------------------------------------------------- the tree
def _read_root(source: str | Path) -> tuple[ET.Element, Path | None]:
    text = str(source)
    path = None
    try:
        if text.lstrip().startswith("<"):
            root = ET.fromstring(text)
        else:
            path = Path(source)
            if not path.is_file():
                raise ModelError(f"URDF file not found: {path}")
            root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ModelError(f"URDF is not valid XML: {exc}") from exc
    if root.tag != "robot":
        raise ModelError(f"URDF root element must be <robot>, got <{root.tag}>")
    return root, path


@dataclass
class _Parsed:
    """Everything :func:`parse_urdf` and :func:`pybullet_urdf` need from one URDF."""

    root: ET.Element
    path: Path | None
    name: str
    links: dict[str, ET.Element]
    chain: list[Joint]  # moving joints in chain order (depth-first), inertial = merged body, parent set
    moving: list[ET.Element]  # their <joint> elements, same order
    base_inertial: np.ndarray
    body_links: list[list[str]]  # body 0 = fixed base, body j = carried by moving joint j (1-based)
    locked: dict[str, float]  # locked joint -> position, in URDF order
    locked_origins: dict[str, tuple[np.ndarray, np.ndarray]]  # locked joint -> (R, p) of its child in its parent
    all_moving: list[str]  # every moving joint's name, the locked ones too, in chain order

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else "the URDF text"


def _link_of(j, tag: str, where: str) -> str:
    el = j.find(tag)
    name = el.get("link") if el is not None else None
    if not name:
        raise ModelError(
            f"URDF joint '{j.get('name')}' in {where} has no <{tag} link=\"...\"/>: every joint needs a "
            "<parent> and a <child> link"
        )
    return name


def _check_locks(joints: list, lock_joints, where: str) -> dict[str, float]:
    """``lock_joints`` as {name: position} in URDF order; :class:`ModelError` for a bad name or value."""
    if not lock_joints:
        return {}
    if not hasattr(lock_joints, "items"):
        raise ModelError(f"lock_joints must be a mapping of joint name to position, got {type(lock_joints).__name__}")
    moving = [j.get("name") for j in joints if j.get("type") in _MOVING]
    fixed = {j.get("name") for j in joints if j.get("type") == "fixed"}
    locks: dict[str, float] = {}
    for name, value in lock_joints.items():
        if name not in moving:
            what = "is a fixed joint already" if name in fixed else "is not a joint of"
            raise ModelError(
                f"cannot lock joint {name!r}: it {what} {where}; the moving joints that can be locked are "
                f"{', '.join(moving) or '(none)'}"
            )
        try:
            position = float(value)
            if isinstance(value, bool | str):
                raise TypeError
        except (TypeError, ValueError):
            raise ModelError(f"lock_joints: the position of joint {name!r} must be a number, got {value!r}") from None
        if not np.isfinite(position):
            raise ModelError(f"lock_joints: the position of joint {name!r} must be finite, got {position}")
        locks[name] = position
    return {name: locks[name] for name in moving if name in locks}


def _lock_motion(joint: Joint, position: float) -> tuple[np.ndarray, np.ndarray]:
    """(R, p) of a joint's child frame in its joint frame at ``position`` (the joint's own motion)."""
    if joint.kind == "prismatic":
        return np.eye(3), joint.axis * position
    a = joint.axis
    K = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    c, s = np.cos(position), np.sin(position)
    return np.eye(3) * c + np.outer(a, a) * (1.0 - c) + K * s, np.zeros(3)


def _check_lock_limits(joint: Joint, position: float) -> None:
    if not joint.lower <= position <= joint.upper:
        unit = "m" if joint.kind == "prismatic" else "rad"
        raise ModelError(
            f"lock_joints: joint '{joint.name}' cannot be locked at {position:g} {unit}: its limits are "
            f"[{joint.lower:g}, {joint.upper:g}] {unit}"
        )


def _parse(source: str | Path, check_bodies: bool = True, lock_joints=None) -> _Parsed:
    root, path = _read_root(source)
    where = str(path) if path is not None else "the URDF text"
    links = _links_by_name(root, where)
    joints = root.findall("joint")
    children, parent_joint = _joint_tree(joints, links, where)
    locks = _check_locks(joints, lock_joints, where)
    roots = [name for name in links if name not in parent_joint]
    if not roots:
        raise ModelError(f"URDF {where} has no root link: its joints form a cycle (every link has a parent)")
    if len(roots) != 1:
        raise ModelError(f"URDF must have exactly one root link, found {roots}")
    walked = _walk(roots[0], links, children, locks, where)
    chain, moving, inertials, body_links, locked_origins, visited, order = walked
    unreached = [name for name in links if name not in visited]
    if unreached:
        raise ModelError(
            f"URDF {where}: links {unreached} are not connected to the root link '{roots[0]}' "
            "(their joints form a cycle); every link must hang from the root through one chain of joints"
        )
    if not chain:
        locked = f" that is not locked ({', '.join(locks)} are)" if locks else ""
        raise ModelError(f"URDF has no moving joint (revolute, continuous or prismatic){locked}")
    chain = [Joint(**{**jt.__dict__, "inertial": inertials[i + 1]}) for i, jt in enumerate(chain)]
    parsed = _Parsed(
        root,
        path,
        root.get("name", "robot"),
        links,
        chain,
        moving,
        inertials[0],
        body_links,
        locks,
        locked_origins,
        order,
    )
    if check_bodies:
        _check_bodies(parsed)
    return parsed


def _links_by_name(root: ET.Element, where: str) -> dict[str, ET.Element]:
    """The ``<link>`` elements by name; a link without a name or a name used twice is a ModelError."""
    links: dict[str, ET.Element] = {}
    for link in root.findall("link"):
        name = link.get("name")
        if not name:
            raise ModelError(f"URDF {where}: a <link> has no name attribute")
        if name in links:
            raise ModelError(f"URDF {where}: link name '{name}' is used twice; link names must be unique")
        links[name] = link
    return links


def _joint_tree(
    joints: list[ET.Element], links: dict[str, ET.Element], where: str
) -> tuple[dict[str, list[ET.Element]], dict[str, ET.Element]]:
    """The child joints of every link and the parent joint of every child link, each joint checked.

    Raises:
        ModelError: a joint without a name, a name used twice, an unsupported type, an unknown link, a link
            with two parent joints, or a joint connecting a link to itself.
    """
    seen: set[str] = set()
    children: dict[str, list] = {name: [] for name in links}
    parent_joint: dict[str, ET.Element] = {}
    for j in joints:
        jname = j.get("name")
        if not jname:
            raise ModelError(f"URDF {where}: a <joint> has no name attribute")
        if jname in seen:
            raise ModelError(f"URDF {where}: joint name '{jname}' is used twice; joint names must be unique")
        seen.add(jname)
        jtype = j.get("type")
        if jtype not in _MOVING | {"fixed"}:
            raise ModelError(
                f"URDF joint '{jname}' has type '{jtype}': only revolute, continuous, "
                "prismatic and fixed joints are supported (fixed-base arms and trees; floating bases are not "
                "supported). Model a floating or planar base as a chain of prismatic/revolute joints."
            )
        parent, child = _link_of(j, "parent", where), _link_of(j, "child", where)
        for name in (parent, child):
            if name not in links:
                raise ModelError(f"URDF joint '{jname}' refers to unknown link '{name}'")
        if child in parent_joint:
            raise ModelError(
                f"URDF {where}: link '{child}' is the child of two joints, '{parent_joint[child].get('name')}' "
                f"and '{jname}'; a link has at most one parent joint (a URDF is a tree): remove or re-parent one"
            )
        if child == parent:
            raise ModelError(f"URDF joint '{jname}' connects link '{child}' to itself")
        parent_joint[child] = j
        children[parent].append(j)
    return children, parent_joint


def _walk(root_link: str, links: dict[str, ET.Element], children: dict[str, list], locks: dict, where: str):
    """Depth-first walk from the root link, merging fixed and locked links into the body of their moving joint.

    Iterative (a deep chain must not hit Python's recursion limit). A moving joint enters the chain when
    its child link is reached, so the chain is in depth-first order and each joint's parent joint (the
    one whose body it hangs from) comes before it.

    Returns:
        ``(chain, moving, inertials, body_links, locked_origins, visited, order)``: the moving joints (their
        ``inertial`` not yet set, their ``parent`` set), their ``<joint>`` elements, the standard parameters
        (10,) of each body (index 0: the base body), the links merged into each body, each locked joint's
        origin, the links reached, and the names of the moving and locked joints in the order they were met.

    Raises:
        ModelError: a lock outside its joint's limits.
    """
    chain: list[Joint] = []
    moving: list[ET.Element] = []
    inertials: list[np.ndarray] = [np.zeros(10)]  # index 0: base body
    body_links: list[list[str]] = [[]]
    visited: set[str] = set()
    locked_origins: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    order: list[str] = []
    # (link, its pose in the body frame, body, the moving or locked joint reaching it or None)
    stack: list[tuple[str, np.ndarray, np.ndarray, int, ET.Element | None]] = [
        (root_link, np.eye(3), np.zeros(3), 0, None)
    ]
    while stack:
        link_name, R, p, body, reached_by = stack.pop()
        if reached_by is not None:
            order.append(reached_by.get("name"))
            if reached_by.get("name") not in locks:  # a moving joint: (R, p) is its origin; a new body
                chain.append(replace(_make_joint(reached_by, R, p, link_name), parent=body - 1))
                moving.append(reached_by)
                inertials.append(np.zeros(10))
                body_links.append([])
                R, p, body = np.eye(3), np.zeros(3), len(chain)
        visited.add(link_name)
        body_links[body].append(link_name)
        # merge this link's inertia into the current body, expressed in the body frame
        inertials[body] = inertials[body] + transform_inertial(_link_inertial(links[link_name], where), R, p)
        pending = []
        for j in children[link_name]:
            Rj, pj = _origin(j, f"joint '{j.get('name')}'")
            R_new, p_new = R @ Rj, R @ pj + p
            child = _link_of(j, "child", where)
            if j.get("type") == "fixed":
                pending.append((child, R_new, p_new, body, None))
            elif j.get("name") in locks:  # a fixed joint at the locked position
                joint = _make_joint(j, R_new, p_new, child)
                _check_lock_limits(joint, locks[joint.name])
                Rm, pm = _lock_motion(joint, locks[joint.name])
                locked_origins[joint.name] = (Rj @ Rm, pj + Rj @ pm)
                pending.append((child, R_new @ Rm, p_new + R_new @ pm, body, j))
            else:
                pending.append((child, R_new, p_new, body, j))
        stack.extend(reversed(pending))
    return chain, moving, inertials, body_links, locked_origins, visited, order


def _body_name(parsed: _Parsed, body: int) -> str:
    names = parsed.body_links[body]
    others = ", ".join(repr(n) for n in names[1:])
    merged = f" (with the fixed or locked link(s) {others} merged into it)" if others else ""
    return f"'{names[0]}'{merged}"


def _check_bodies(parsed: _Parsed) -> None:
    """Refuse a moving body whose inertia no rigid body has (PyBullet would zero it); see the module docstring."""
    where = parsed.where
    names = [name for links in parsed.body_links[1:] for name in links]
    parts = np.array([_link_inertial(parsed.links[name], where) for name in names])
    bad_part = dict(zip(names, ~physical.physically_consistent(parts, strict=False), strict=True))
    bodies_ok = physical.physically_consistent(np.array([j.inertial for j in parsed.chain]), strict=False)
    for body, (joint, ok) in enumerate(zip(parsed.chain, bodies_ok, strict=True), start=1):
        culprits = [name for name in parsed.body_links[body] if bad_part[name]]
        if not ok:
            if culprits:
                problems = [
                    v
                    for name in culprits
                    for v in physical.link_violations(parts[names.index(name)], f"link '{name}'", strict=False)
                ]
            else:
                problems = physical.link_violations(joint.inertial, f"link {_body_name(parsed, body)}", strict=False)
            first = culprits[0] if culprits else parsed.body_links[body][0]
            raise ModelError(
                f"fix the <inertial> of link '{first}' in {where}: {'; '.join(problems)}. "
                "No rigid body has such an inertia, and PyBullet would silently set it to zero, so the simulation "
                "would not be the model. Give the link's real inertia about its COM (e.g. from CAD): principal "
                "moments >= 0, each at most the sum of the other two."
            )
        for name in culprits:
            log.warning(
                "URDF %s: %s; it is used merged into the moving body %s, which is physically consistent",
                where,
                "; ".join(physical.link_violations(parts[names.index(name)], f"link '{name}'", strict=False)),
                _body_name(parsed, body),
            )


@dataclass(frozen=True)
class UrdfRobot:
    """What :func:`read_urdf` reads from a URDF: the model's kinematics and inertia, and the joints' friction tags.

    Attributes:
        name: the ``<robot name>``.
        joints: the moving (not locked) joints in chain order, each with its merged body's inertial.
        base_inertial: (10,) standard parameters of the fixed base body with its fixed children
            merged (unused by fixed-base dynamics, kept for reports).
        damping, friction: (n,) ``<dynamics damping friction>`` of each moving joint (0 where absent).
        has_dynamics: whether any moving joint carries a ``<dynamics>`` element.
        locked_joints: the locked joints and their positions, in URDF order.
        all_moving: the names of every moving joint, the locked ones too, in chain order (the joints a
            sidecar written for the unlocked robot has one value per).
    """

    name: str
    joints: list[Joint]
    base_inertial: np.ndarray
    damping: np.ndarray
    friction: np.ndarray
    has_dynamics: bool
    locked_joints: dict[str, float]
    all_moving: list[str]


def _joint_dynamics(parsed: _Parsed) -> tuple[np.ndarray, np.ndarray, bool]:
    damping, friction, found = [], [], False
    for j in parsed.moving:
        el = j.find("dynamics")
        found = found or el is not None
        for attr, out in (("damping", damping), ("friction", friction)):
            what = f"the <dynamics {attr}> of joint '{j.get('name')}'"
            out.append(_number(el, attr, 0.0, what) if el is not None else 0.0)
    return np.array(damping), np.array(friction), found


def read_urdf(source: str | Path, lock_joints: Mapping[str, float] | None = None) -> UrdfRobot:
    """Read a URDF file (path) or URDF text, with the joints in ``lock_joints`` locked.

    Raises:
        ModelError: what the module docstring lists, naming the link or joint and the fix.
    """
    parsed = _parse(source, lock_joints=lock_joints)
    damping, friction, found = _joint_dynamics(parsed)
    return UrdfRobot(
        parsed.name,
        parsed.chain,
        parsed.base_inertial,
        damping,
        friction,
        found,
        dict(parsed.locked),
        list(parsed.all_moving),
    )


def parse_urdf(
    source: str | Path, lock_joints: Mapping[str, float] | None = None
) -> tuple[str, list[Joint], np.ndarray]:
    """Parse a URDF file (path) or URDF text (see :func:`read_urdf` for everything it reads).

    Returns:
        (robot name, moving joints in chain order, standard parameters (10,) of the fixed base
        body with its fixed children merged — unused by fixed-base dynamics, kept for reports).

    Raises:
        ModelError: what the module docstring lists, naming the link or joint and the fix.
    """
    parsed = _parse(source, lock_joints=lock_joints)
    return parsed.name, parsed.chain, parsed.base_inertial


def _make_joint(j, R: np.ndarray, p: np.ndarray, child: str) -> Joint:
    name = j.get("name")
    jtype = j.get("type")
    axis_el = j.find("axis")
    axis = _floats(axis_el.get("xyz") if axis_el is not None else None, [1, 0, 0], f"joint '{name}' axis")
    norm = np.linalg.norm(axis)
    if axis.shape != (3,) or norm == 0:
        raise ModelError(f"URDF joint '{name}' has an invalid axis {axis.tolist()}")
    limit = j.find("limit")
    lower, upper = -np.inf, np.inf
    velocity, effort = np.inf, np.inf
    what = f"the <limit> of joint '{name}'"
    if limit is not None:
        velocity = _number(limit, "velocity", np.inf, f"{what} (velocity)", finite=False)
        effort = _number(limit, "effort", np.inf, f"{what} (effort)", finite=False)
        if velocity <= 0:  # URDF writers use 0 for "not given"
            velocity = np.inf
        if jtype != "continuous":
            lower = _number(limit, "lower", 0.0, f"{what} (lower)", finite=False)
            upper = _number(limit, "upper", 0.0, f"{what} (upper)", finite=False)
            if jtype == "prismatic" and (lower > upper or lower == upper == 0.0):
                lower, upper = -np.inf, np.inf  # PyBullet's "no limit" convention
            elif not lower < upper:
                hint = (
                    "use type='continuous' for an unlimited revolute joint"
                    if jtype == "revolute"
                    else "give lower < upper, or lower > upper for an unlimited prismatic joint"
                )
                raise ModelError(f"URDF joint '{name}' has limits lower={lower} >= upper={upper}; {hint}")
    elif jtype == "revolute":
        raise ModelError(
            f"URDF joint '{name}' (revolute) needs a <limit lower upper effort velocity>; "
            "use type='continuous' for an unlimited revolute joint"
        )
    return Joint(
        name=name,
        kind="prismatic" if jtype == "prismatic" else "revolute",
        axis=axis / norm,
        origin_rotation=R,
        origin_translation=p,
        lower=lower,
        upper=upper,
        velocity_limit=velocity,
        effort_limit=effort,
        link_name=child,
        inertial=np.zeros(10),
    )


# ----------------------------------------------------------------------------- the copy PyBullet loads
def _num(x: float) -> str:
    return repr(float(x))


def principal_inertial(
    phi: np.ndarray, rtol: float = physical.DEFAULT_RTOL
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """A link's inertial as URDF writes it in principal form: (mass, COM (3,), rpy (3,), principal moments (3,)).

    ``R(rpy) diag(moments) R(rpy)ᵀ`` is the inertia about the COM in the link frame. Moments
    within ``rtol · tr(I_O)`` of the semidefinite boundary (a tiny negative moment, a triangle
    inequality broken by round-off) are put exactly on it, so that PyBullet keeps them.
    """
    m, c, I_C = split_inertial(np.asarray(phi, float))
    if np.count_nonzero(I_C - np.diag(np.diag(I_C))) == 0:  # already principal: keep the link's axes
        lam, V = np.diag(I_C).copy(), np.eye(3)
    else:
        lam, V = np.linalg.eigh(I_C)
        if np.linalg.det(V) < 0:
            V[:, 0] = -V[:, 0]
    tol = rtol * (abs(phi[0]) + abs(phi[3]) + abs(phi[5]))
    lam = np.where((lam < 0) & (lam >= -tol), 0.0, lam)
    for i in range(3):
        j, k = (x for x in range(3) if x != i)
        if lam[j] + lam[k] < lam[i] <= lam[j] + lam[k] + tol:
            lam[i] = lam[j] + lam[k]
    return float(m), c, matrix_to_rpy(V), lam


def _inertial_element(phi: np.ndarray) -> ET.Element:
    m, c, rpy, lam = principal_inertial(phi)
    el = ET.Element("inertial")
    ET.SubElement(el, "origin", xyz=" ".join(map(_num, c)), rpy=" ".join(map(_num, rpy)))
    ET.SubElement(el, "mass", value=_num(m))
    ET.SubElement(el, "inertia", ixx=_num(lam[0]), ixy="0", ixz="0", iyy=_num(lam[1]), iyz="0", izz=_num(lam[2]))
    return el


def _resolve_mesh(filename: str, base: Path | None) -> Path | None:
    """The mesh file a URDF names (relative, ``file://`` or ``package://``), or None if not found."""
    name = filename.removeprefix("file://")
    candidates: list[Path] = []
    if name.startswith("package://"):
        package, _, rest = name.removeprefix("package://").partition("/")
        for folder in [base, *base.parents] if base is not None else []:
            candidates += [folder / package / rest, folder / rest]
            if folder.name == package:
                candidates.append(folder / rest)
    elif Path(name).is_absolute():
        candidates.append(Path(name))
    elif base is not None:
        candidates.append(base / name)
    return next((c.resolve() for c in candidates if c.is_file()), None)


def _keep_visual(visual, base: Path | None) -> bool:
    """Keep a <visual> whose geometry PyBullet can build (primitives, existing meshes made absolute)."""
    geometry = visual.find("geometry")
    shape = geometry[0] if geometry is not None and len(geometry) else None
    if shape is None:
        return False
    if shape.tag in _PRIMITIVES:
        return True
    if shape.tag == "mesh" and shape.get("filename"):
        found = _resolve_mesh(shape.get("filename"), base)
        if found is not None:
            shape.set("filename", str(found))
            return True
    return False


def pybullet_urdf(
    source: str | Path,
    body_inertials: Sequence[np.ndarray] | np.ndarray | None = None,
    lock_joints: Mapping[str, float] | None = None,
) -> str:
    """The URDF text PyBullet loads for a robot: the file's kinematics, the model's inertia.

    Starting from the URDF ``source`` (path or text), the copy:

    - gives the child link of moving joint j (chain order) the inertial ``body_inertials[j]``
      (10,) — the moving body with its fixed children merged, what the model uses (default: as
      read from the file) — in principal form (:func:`principal_inertial`), and every other
      link an explicit zero inertial (PyBullet would give a link without ``<inertial>`` 1 kg and
      a unit inertia, and it ignores the base's inertia anyway). (PyBullet would diagonalise a
      full tensor itself, by Jacobi iterations accurate to about 1e-9 only);
    - removes every ``<collision>`` (no contacts are simulated), every ``<visual>`` whose mesh
      file cannot be found (the others keep an absolute path, for rendering) and textures, so
      missing mesh files never matter;
    - removes the moving joints' ``<dynamics>`` (the model's friction is injected by the
      simulator, never applied by Bullet) and their position limits (``lower > upper``: PyBullet
      would hold a joint at its limit with a constraint force the model does not have; the
      simulator checks the positions instead);
    - writes each joint of ``lock_joints`` (see the module docstring) as a ``fixed`` joint whose
      ``<origin>`` is its origin composed with its motion at the locked position, with no
      ``<axis>``, ``<limit>``, ``<dynamics>`` or ``<mimic>``: its child link is then a
      zero-inertia link whose inertia is in the moving body it is merged into, as in the model.

    Raises:
        ModelError: the URDF cannot be read or a lock is invalid (see :func:`read_urdf`), or
            ``body_inertials`` does not have one (10,) row per moving joint.
    """
    # the bodies written are checked by PyBullet and the parity gate
    parsed = _parse(source, check_bodies=False, lock_joints=lock_joints)
    n = len(parsed.chain)
    phis = np.array([j.inertial for j in parsed.chain]) if body_inertials is None else np.asarray(body_inertials, float)
    if phis.shape != (n, 10):
        raise ModelError(f"body_inertials must have shape ({n}, 10) (one row per moving joint), got {phis.shape}")
    root = copy.deepcopy(parsed.root)
    base = parsed.path.parent.resolve() if parsed.path is not None else None
    body_of = {j.link_name: phis[k] for k, j in enumerate(parsed.chain)}
    for link in root.findall("link"):
        for el in link.findall("collision"):
            link.remove(el)
        for visual in link.findall("visual"):
            if not _keep_visual(visual, base):
                link.remove(visual)
        for el in link.findall("inertial"):
            link.remove(el)
        link.insert(0, _inertial_element(body_of.get(link.get("name"), np.zeros(10))))
    for parent in root.iter():
        for texture in parent.findall("texture"):
            parent.remove(texture)
    moving = {j.get("name") for j in parsed.moving}
    for joint in root.findall("joint"):
        name = joint.get("name")
        if name in parsed.locked_origins:
            R, p = parsed.locked_origins[name]
            joint.set("type", "fixed")
            for el in list(joint):
                if el.tag not in ("parent", "child"):
                    joint.remove(el)
            ET.SubElement(joint, "origin", xyz=" ".join(map(_num, p)), rpy=" ".join(map(_num, matrix_to_rpy(R))))
            continue
        if name not in moving:
            continue
        for el in joint.findall("dynamics"):
            joint.remove(el)
        limit = joint.find("limit")
        if limit is None:
            limit = ET.SubElement(joint, "limit")
        limit.set("lower", "0")
        limit.set("upper", "-1")
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode")
