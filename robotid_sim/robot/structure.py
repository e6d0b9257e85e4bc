"""What an estimator may know about a robot: its structure, never its true parameters (SPEC §8).

A :class:`RobotStructure` holds the kinematics (joint kinds, axes, origins, limits), gravity,
the friction *law* (its kind and the constants that enter non-linearly, such as the exponent of
seed 001 Eq. 5 or the Stribeck velocity of seed 000 Eq. 34, but not its linear coefficients),
whether rotor inertia is modelled, and so which standard parameters exist. That is everything
needed to form the regressor and the base parameters, and everything an identified model needs
to predict torque. It holds no inertial value and no friction coefficient: the runner keeps the
:class:`~robotid_sim.robot.Robot` with its truth for metrics, and gives estimators only this.

It is plain data: :meth:`RobotStructure.to_dict` is a canonical JSON-able description that
identified models embed in their saved files, :attr:`RobotStructure.sha256` fingerprints it, and
:meth:`RobotStructure.differences` names what differs between two structures (how a saved
model refuses a robot that changed). The joints a robot was loaded with locked
(``lock_joints``) are part of it: ``to_dict`` writes them under ``locked_joints`` only when
there are some, so a structure without locks (and every file saved before locks existed) keeps
its layout and fingerprint, and a model identified on a locked robot refuses a robot with other
locks or none. Likewise, each joint of a tree (:attr:`~robotid_sim.dynamics.chain.Joint.parent`)
gets a ``parent`` entry, the name of its parent joint (None for the base); a serial chain's joints
have none. Coupled drives (:mod:`robotid_sim.dynamics.coupling`) are written under ``coupling`` (their joints
and whether a rotor inertia is modelled, no values) only for a robot that has some.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from robotid_sim._json import jsonable
from robotid_sim.dynamics.base_parameters import BaseParameters, compute_base_parameters
from robotid_sim.dynamics.chain import Joint, chain_parents
from robotid_sim.dynamics.coupling import Coupling, coupling_from_list
from robotid_sim.dynamics.friction import FrictionModel, friction_from_dict, linear_fields
from robotid_sim.dynamics.regressor import RegressorChain
from robotid_sim.errors import ConfigError, ModelError

#: version of :meth:`RobotStructure.to_dict`'s layout
STRUCTURE_VERSION = 1


def _finite_or_none(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _float_or_inf(x, sign: float) -> float:
    return sign * np.inf if x is None else float(x)


def locked_suffix(locked: dict[str, float]) -> str:
    """What a robot's name gets for its locked joints: ``" (locked j1=0.02, j2=0.02)"``, or ``""``."""
    if not locked:
        return ""
    return " (locked " + ", ".join(f"{name}={float(v)!r}" for name, v in locked.items()) + ")"


def _locks_from(data) -> dict[str, float]:
    if not isinstance(data, dict):
        raise ModelError(f"'locked_joints' must map joint names to positions, got {type(data).__name__}")
    locks = {str(k): float(v) for k, v in data.items()}
    bad = [k for k, v in locks.items() if not np.isfinite(v)]
    if bad:
        raise ModelError(f"'locked_joints': the positions of {bad} are not finite")
    return locks


def _coupling_from(data, n: int) -> Coupling:
    """The coupled drives of :meth:`RobotStructure.to_dict`'s ``coupling`` (values zero); ModelError if malformed."""
    try:
        return coupling_from_list(data, n, layout=True)
    except ConfigError as exc:
        raise ModelError(f"robot structure: {exc}") from None


def _parents_from(joints: list) -> list[int]:
    """The parent index of each joint of :meth:`RobotStructure.to_dict`'s ``joints``: by the ``parent`` names of a
    tree, else the previous joint."""
    index = {str(j["name"]): i for i, j in enumerate(joints)}
    parents = []
    for i, j in enumerate(joints):
        if "parent" not in j:
            parents.append(i - 1)
        elif j["parent"] is None:
            parents.append(-1)
        elif str(j["parent"]) in index:
            parents.append(index[str(j["parent"])])
        else:
            raise ModelError(f"joint '{j['name']}': its parent '{j['parent']}' is not a joint of the robot structure")
    return parents


def _friction_law(friction: FrictionModel) -> dict:
    """The friction model's dict without its linear coefficients (they are identified)."""
    linear = set(linear_fields(friction.kind))
    return {k: v for k, v in friction.to_dict().items() if k not in linear}


def _with_zero_coefficients(law: dict, n: int) -> dict:
    """A friction law with its linear coefficients set to zero: a complete sidecar mapping."""
    return {**law, **{name: [0.0] * n for name in linear_fields(law.get("model"))}}


@dataclass(frozen=True, eq=False)
class RobotStructure(RegressorChain):
    """Kinematics, gravity, friction law and parameter layout of a robot, without its parameters.

    Build one with :meth:`Robot.structure() <robotid_sim.robot.Robot.structure>` or
    :meth:`from_dict`. Dynamics are batched over samples: ``q, qd, qdd`` are (N, n). The parameter
    layout, the regressor and random states are :class:`~robotid_sim.dynamics.regressor.RegressorChain`'s;
    :meth:`Robot.from_structure(structure, theta) <robotid_sim.robot.Robot.from_structure>` is a robot
    of this structure with parameter values.

    Attributes:
        name: robot name.
        joints: the moving joints; their ``inertial`` entries are all zero.
        gravity: (3,) gravity in the base frame.
        friction_law: ``{"model": ..., "sign_smoothing": ...}`` plus the constants that enter
            non-linearly (``alpha``, ``vs``), as in a sidecar, without linear coefficients.
        rotor_inertia: whether each joint has a rotor-inertia parameter ``Ia``.
        gear_ratio, velocity_limit, acceleration_limit: (n,) as in the sidecar.
        locked_joints: the URDF joints the robot was loaded with fixed, ``{name: position}``
            (empty for none); they are not in ``joints``, their pose is in the origins.
        coupling: the coupled drives, their values zero (:class:`~robotid_sim.dynamics.coupling.Coupling`;
            empty for none).
    """

    name: str
    joints: tuple[Joint, ...]
    gravity: np.ndarray
    friction_law: dict
    rotor_inertia: bool
    gear_ratio: np.ndarray
    velocity_limit: np.ndarray
    acceleration_limit: np.ndarray
    locked_joints: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    coupling: Coupling = Coupling()

    @classmethod
    def of(cls, robot) -> RobotStructure:
        """The structure of a :class:`~robotid_sim.robot.Robot` (its values are left behind)."""
        zero = np.zeros(10)
        return cls(
            name=robot.name,
            joints=tuple(replace(j, inertial=zero.copy()) for j in robot.joints),
            gravity=np.array(robot.gravity, float),
            friction_law=_friction_law(robot.friction),
            rotor_inertia=robot.rotor_inertia is not None,
            gear_ratio=np.array(robot.gear_ratio, float),
            velocity_limit=np.array(robot.velocity_limit, float),
            acceleration_limit=np.array(robot.acceleration_limit, float),
            locked_joints=dict(getattr(robot, "locked_joints", {})),
            coupling=robot.coupling.with_values(np.zeros(len(robot.coupling.parameter_names))),
        )

    # ----------------------------------------------------------------- description
    @property
    def has_rotor_inertia(self) -> bool:
        """Whether each joint has a rotor-inertia parameter ``Ia``."""
        return bool(self.rotor_inertia)

    @cached_property
    def friction(self) -> FrictionModel:
        """The friction law as a model whose linear coefficients are zero: its regressor columns and names."""
        n = self.n_dof
        return friction_from_dict(_with_zero_coefficients(self.friction_law, n), n)

    def with_friction_law(self, law: dict) -> RobotStructure:
        """This structure with another friction law (``{"model": ..., "alpha": [...], ...}`` as in a sidecar,
        without linear coefficients; a scalar constant applies to every joint).

        How a scenario states the law its models assume, and how ``two_loop`` carries the exponents it fitted.

        Raises:
            ConfigError: a malformed law (unknown model or field, a constant of the wrong length or out of range).
        """
        n = self.n_dof
        law = dict(law)
        law = {k: v for k, v in law.items() if k not in linear_fields(law.get("model"))}
        for key in ("alpha", "vs"):
            if key in law and np.ndim(law[key]) == 0:
                law[key] = [float(law[key])] * n
        model = friction_from_dict(_with_zero_coefficients(law, n), n)
        structure = replace(self, friction_law=_friction_law(model), _cache={})
        if "base" in self._cache and model.kind == self.friction_law.get("model"):
            # the same law with other constants: its columns stay independent of each other and of the rigid
            # body's, so the reduction is the same; only its regressor is the new law's
            structure._cache["base"] = self._cache["base"].with_regressor(structure.regressor)
        return structure

    # ----------------------------------------------------------------- base parameters
    def base_parameters(self) -> BaseParameters:
        """The base-parameter reduction (:class:`BaseParameters`), with no true values."""
        if "base" not in self._cache:
            self._cache["base"] = compute_base_parameters(
                self.regressor,
                self.random_states,
                self.parameter_names,
                None,
                n_samples=max(200, 4 * self.n_parameters // self.n_dof),
            )
        return self._cache["base"]

    # ----------------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        """Canonical plain data: every float exact (JSON writes the shortest round-trip repr).

        ``locked_joints`` is written only for a robot with locked joints, each joint's ``parent`` only for a
        tree, ``coupling`` only for a robot with coupled drives (older files have none of them).
        """
        locks = {"locked_joints": {k: float(v) for k, v in self.locked_joints.items()}} if self.locked_joints else {}
        names = self.joint_names
        parents = [{"parent": names[k] if k >= 0 else None} for k in self.parents]
        if self.is_serial:
            parents = [{} for _ in names]
        return {
            "version": STRUCTURE_VERSION,
            "name": self.name,
            **locks,
            "joints": [
                {
                    "name": j.name,
                    "kind": j.kind,
                    "axis": np.asarray(j.axis, float).tolist(),
                    "origin_rotation": np.asarray(j.origin_rotation, float).tolist(),
                    "origin_translation": np.asarray(j.origin_translation, float).tolist(),
                    "lower": _finite_or_none(j.lower),
                    "upper": _finite_or_none(j.upper),
                    "velocity_limit": _finite_or_none(j.velocity_limit),
                    "effort_limit": _finite_or_none(j.effort_limit),
                    "link": j.link_name,
                    **parent,
                }
                for j, parent in zip(self.joints, parents, strict=True)
            ],
            "gravity": self.gravity.tolist(),
            "friction": jsonable(self.friction_law),
            "rotor_inertia": bool(self.rotor_inertia),
            "gear_ratio": self.gear_ratio.tolist(),
            "velocity_limit": self.velocity_limit.tolist(),
            "acceleration_limit": self.acceleration_limit.tolist(),
            **({"coupling": self.coupling.layout()} if self.coupling else {}),
        }

    @classmethod
    def from_dict(cls, data: dict) -> RobotStructure:
        """Rebuild a structure written by :meth:`to_dict`.

        Raises:
            ModelError: a missing or malformed field, named.
        """
        try:
            if data.get("version") != STRUCTURE_VERSION:
                raise ModelError(f"robot structure version {data.get('version')!r} is not {STRUCTURE_VERSION}")
            parents = _parents_from(data["joints"])
            joints = tuple(
                Joint(
                    name=str(j["name"]),
                    kind=str(j["kind"]),
                    axis=np.array(j["axis"], float),
                    origin_rotation=np.array(j["origin_rotation"], float).reshape(3, 3),
                    origin_translation=np.array(j["origin_translation"], float).reshape(3),
                    lower=_float_or_inf(j["lower"], -1.0),
                    upper=_float_or_inf(j["upper"], 1.0),
                    velocity_limit=_float_or_inf(j["velocity_limit"], 1.0),
                    effort_limit=_float_or_inf(j["effort_limit"], 1.0),
                    link_name=str(j["link"]),
                    inertial=np.zeros(10),
                    parent=parent,
                )
                for j, parent in zip(data["joints"], parents, strict=True)
            )
            chain_parents(joints)  # validates the order now: each parent before its child
            if any(j.kind not in ("revolute", "prismatic") for j in joints):
                raise ModelError("joint kinds must be 'revolute' or 'prismatic'")
            structure = cls(
                name=str(data["name"]),
                joints=joints,
                gravity=np.array(data["gravity"], float).reshape(3),
                friction_law=dict(data["friction"]),
                rotor_inertia=bool(data["rotor_inertia"]),
                gear_ratio=np.array(data["gear_ratio"], float),
                velocity_limit=np.array(data["velocity_limit"], float),
                acceleration_limit=np.array(data["acceleration_limit"], float),
                locked_joints=_locks_from(data.get("locked_joints", {})),
                coupling=_coupling_from(data.get("coupling", []), len(joints)),
            )
            structure.friction  # noqa: B018 - validates the friction law now
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ModelError):
                raise
            raise ModelError(f"malformed robot structure: {type(exc).__name__}: {exc}") from None
        return structure

    @cached_property
    def sha256(self) -> str:
        """Fingerprint of :meth:`to_dict` (canonical JSON, sorted keys)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    def differences(self, other: RobotStructure) -> list[str]:
        """What differs between this structure and ``other``, one readable item each (empty if none)."""
        return _diff(self.to_dict(), other.to_dict(), "")

    def __eq__(self, other) -> bool:
        return isinstance(other, RobotStructure) and self.sha256 == other.sha256

    __hash__ = None  # type: ignore[assignment]


def _diff(a, b, where: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in list(dict.fromkeys([*a, *b])):
            if key not in a or key not in b:
                out.append(f"{where}{key}: only in the {'model' if key in a else 'robot'}")
            else:
                out += _diff(a[key], b[key], f"{where}{key}.")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and a and isinstance(a[0], dict):
        out = []
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            label = x.get("name", k) if isinstance(x, dict) else k
            out += _diff(x, y, f"{where}{label}.")
        return out
    if a != b:
        return [f"{where.rstrip('.')}: {a!r} in the model, {b!r} in the robot"]
    return []
