"""Read a fixed-base serial URDF into a :class:`~robotid_sim.robot.chain.Joint` list.

Supported joints: revolute, continuous, prismatic (moving) and fixed (its child link is merged
into the parent body, and its transform into the next moving joint's origin). Any other type
(floating, planar, spherical, ...) raises :class:`ModelError` naming the joint.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from robotid_sim.errors import ModelError
from robotid_sim.robot.chain import Joint, inertial_parameters, rpy_to_matrix, transform_inertial

_MOVING = {"revolute", "continuous", "prismatic"}


def _floats(text: str | None, default, what: str) -> np.ndarray:
    if text is None:
        return np.asarray(default, dtype=float)
    try:
        return np.array([float(v) for v in text.split()])
    except ValueError as exc:
        raise ModelError(f"URDF: cannot read numbers in {what}: {text!r}") from exc


def _origin(elem) -> tuple[np.ndarray, np.ndarray]:
    o = elem.find("origin") if elem is not None else None
    if o is None:
        return np.eye(3), np.zeros(3)
    xyz = _floats(o.get("xyz"), [0, 0, 0], "origin xyz")
    rpy = _floats(o.get("rpy"), [0, 0, 0], "origin rpy")
    return rpy_to_matrix(rpy), xyz


def _link_inertial(link) -> np.ndarray:
    """Standard parameters (10,) of a URDF link about its own frame origin (zero if no inertial)."""
    inertial = link.find("inertial")
    if inertial is None:
        return np.zeros(10)
    mass_el = inertial.find("mass")
    mass = float(mass_el.get("value")) if mass_el is not None else 0.0
    R, p = _origin(inertial)
    ie = inertial.find("inertia")
    get = (lambda k: float(ie.get(k, 0.0))) if ie is not None else (lambda k: 0.0)
    I_frame = np.array(
        [
            [get("ixx"), get("ixy"), get("ixz")],
            [get("ixy"), get("iyy"), get("iyz")],
            [get("ixz"), get("iyz"), get("izz")],
        ]
    )
    return inertial_parameters(mass, p, R @ I_frame @ R.T)


def parse_urdf(source: str | Path) -> tuple[str, list[Joint], np.ndarray]:
    """Parse a URDF file (path) or URDF text.

    Returns:
        (robot name, moving joints in chain order, standard parameters (10,) of the fixed base
        body with its fixed children merged — unused by fixed-base dynamics, kept for reports).
    """
    text = str(source)
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

    links = {l.get("name"): l for l in root.findall("link")}
    joints = root.findall("joint")
    children: dict[str, list] = {name: [] for name in links}
    child_links = set()
    for j in joints:
        jtype = j.get("type")
        if jtype not in _MOVING | {"fixed"}:
            raise ModelError(
                f"URDF joint '{j.get('name')}' has type '{jtype}': only revolute, continuous, "
                "prismatic and fixed joints are supported (fixed-base serial arms). "
                "Model a floating or planar base as a chain of prismatic/revolute joints."
            )
        parent = j.find("parent").get("link")
        child = j.find("child").get("link")
        for name in (parent, child):
            if name not in links:
                raise ModelError(f"URDF joint '{j.get('name')}' refers to unknown link '{name}'")
        children[parent].append(j)
        child_links.add(child)
    roots = [name for name in links if name not in child_links]
    if len(roots) != 1:
        raise ModelError(f"URDF must have exactly one root link, found {roots}")

    chain: list[Joint] = []
    inertials: list[np.ndarray] = [np.zeros(10)]  # index 0: base body
    moving_children = [0]

    def walk(link_name: str, R: np.ndarray, p: np.ndarray, body: int) -> None:
        # merge this link's inertia into the current body, expressed in the body frame
        inertials[body] = inertials[body] + transform_inertial(_link_inertial(links[link_name]), R, p)
        for j in children[link_name]:
            Rj, pj = _origin(j)
            R_new, p_new = R @ Rj, R @ pj + p
            child = j.find("child").get("link")
            if j.get("type") == "fixed":
                walk(child, R_new, p_new, body)
                continue
            moving_children[body] += 1
            if moving_children[body] > 1:
                raise ModelError(
                    f"URDF is not a serial chain: link '{link_name}' has more than one moving "
                    f"child joint (second one: '{j.get('name')}')"
                )
            chain.append(_make_joint(j, R_new, p_new, child))
            inertials.append(np.zeros(10))
            moving_children.append(0)
            walk(child, np.eye(3), np.zeros(3), len(chain))

    walk(roots[0], np.eye(3), np.zeros(3), 0)
    if not chain:
        raise ModelError("URDF has no moving joint (revolute, continuous or prismatic)")
    chain = [Joint(**{**jt.__dict__, "inertial": inertials[i + 1]}) for i, jt in enumerate(chain)]
    return root.get("name", "robot"), chain, inertials[0]


def _make_joint(j, R: np.ndarray, p: np.ndarray, child: str) -> Joint:
    name = j.get("name")
    jtype = j.get("type")
    axis_el = j.find("axis")
    axis = _floats(axis_el.get("xyz") if axis_el is not None else None, [1, 0, 0], f"joint {name} axis")
    norm = np.linalg.norm(axis)
    if axis.shape != (3,) or norm == 0:
        raise ModelError(f"URDF joint '{name}' has an invalid axis {axis.tolist()}")
    limit = j.find("limit")
    lower, upper = -np.inf, np.inf
    velocity, effort = np.inf, np.inf
    if limit is not None:
        velocity = float(limit.get("velocity", np.inf))
        effort = float(limit.get("effort", np.inf))
        if jtype != "continuous":
            lower = float(limit.get("lower", 0.0))
            upper = float(limit.get("upper", 0.0))
            if not lower < upper:
                raise ModelError(
                    f"URDF joint '{name}' has limits lower={lower} >= upper={upper}; "
                    "use type='continuous' for an unlimited revolute joint"
                )
    elif jtype in ("revolute", "prismatic"):
        raise ModelError(f"URDF joint '{name}' ({jtype}) needs a <limit lower upper effort velocity>")
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
