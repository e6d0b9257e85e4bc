"""The :class:`Robot`: a fixed-base arm (a serial chain or a tree) with its true parameters (SPEC §3–4).

Signals: ``q`` joint positions (rad or m), ``qd`` velocities, ``qdd`` accelerations, ``tau``
joint torques/forces, all arrays (N, n) for N samples of an n-joint arm.

Parameter vector theta, per joint j (1-based in names), in this order:
``XXj XYj XZj YYj YZj ZZj MXj MYj MZj Mj`` (standard inertial parameters of link j about its
frame origin, SPEC §4), then ``Iaj`` if the sidecar gives rotor inertia, then the linear
friction parameters of the friction model (the sidecar's, or one made from the URDF's
``<dynamics>`` tags; e.g. ``fcj fvj Sj``), as in seed 001 Eq. 8; then, for a robot whose sidecar has coupled
drives (``coupling``, :mod:`robotid_sim.dynamics.coupling`), their parameters (``Fvm6 Fcm6``). Joints are the
moving joints that are not locked (``lock_joints``): a locked joint is a fixed joint of the model.

The layout, the regressor and random states come from
:class:`~robotid_sim.dynamics.regressor.RegressorChain`, shared with the robot's
:class:`~robotid_sim.robot.structure.RobotStructure`; :meth:`Robot.from_structure` builds a
robot of a structure with given parameter values.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from robotid_sim.dynamics import crba
from robotid_sim.dynamics.base_parameters import BaseParameters, compute_base_parameters
from robotid_sim.dynamics.chain import Joint
from robotid_sim.dynamics.coupling import Coupling, coupling_from_list
from robotid_sim.dynamics.friction import CoulombViscous, FrictionModel, NoFriction, friction_from_dict
from robotid_sim.dynamics.regressor import UNLIMITED_PRISMATIC_RANGE, UNLIMITED_REVOLUTE_RANGE, RegressorChain
from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import ConfigError, ModelError
from robotid_sim.robot.sidecar import Sidecar, load_sidecar
from robotid_sim.robot.structure import RobotStructure, locked_suffix
from robotid_sim.robot.urdf import UrdfRobot, read_urdf

log = logging.getLogger(__name__)

#: velocity and acceleration bounds used for random states when a robot has no sidecar limits
DEFAULT_VELOCITY_LIMIT = 2.0
DEFAULT_ACCELERATION_LIMIT = 5.0

#: half-width of the position range a default excitation uses on a joint without position limits:
#: continuous revolute joints (rad) and prismatic joints without limits (m)
DEFAULT_REVOLUTE_RANGE = UNLIMITED_REVOLUTE_RANGE
DEFAULT_PRISMATIC_RANGE = UNLIMITED_PRISMATIC_RANGE

#: :attr:`Robot.friction_source` of each origin of the friction model
FRICTION_FROM_SIDECAR = "sidecar"
FRICTION_FROM_URDF = "URDF <dynamics> tags (friction → Coulomb fc, damping → viscous fv)"
FRICTION_NONE = "none"


def _per_joint(value, n: int, what: str, locks: str = "", where: str = "") -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ConfigError(f"sidecar field '{what}' must have {n} values (one per joint{locks}), got {arr.shape}{where}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"sidecar field '{what}' contains NaN or inf: {arr.tolist()}{where}")
    return arr


@dataclass
class Robot(RegressorChain):
    """A robot model with its exact, known parameters.

    Build one with :func:`load_robot`. Every dynamics method is batched over samples.

    Attributes beyond the dynamics: ``urdf_path`` and ``sidecar`` (the parsed
    :class:`~robotid_sim.robot.sidecar.Sidecar` or None) it was loaded from; ``locked_joints``,
    the URDF joints made fixed, ``{name: position}`` in URDF order (they are part of
    :meth:`structure` and of ``name``); ``friction_source``, where the friction model comes from
    (:data:`FRICTION_FROM_SIDECAR`, :data:`FRICTION_FROM_URDF`, :data:`FRICTION_NONE`, or
    ``"given"`` for a robot built in Python); ``coupling``, its coupled drives with their true values
    (:class:`~robotid_sim.dynamics.coupling.Coupling`, empty for none): their torque is part of every dynamics
    method, their parameters end theta.
    """

    name: str
    joints: list[Joint]
    gravity: np.ndarray
    friction: FrictionModel
    rotor_inertia: np.ndarray | None
    gear_ratio: np.ndarray
    velocity_limit: np.ndarray
    acceleration_limit: np.ndarray
    urdf_path: Path | None = None
    sidecar: Sidecar | None = None
    locked_joints: dict[str, float] = field(default_factory=dict)
    friction_source: str | None = None
    _structure: RobotStructure | None = field(default=None, repr=False)
    coupling: Coupling = Coupling()

    def __post_init__(self):
        self.locked_joints = {str(k): float(v) for k, v in self.locked_joints.items()}
        if self.friction_source is None:
            self.friction_source = FRICTION_NONE if self.friction.kind == "none" else "given"

    # ----------------------------------------------------------------- description
    @property
    def inertials(self) -> np.ndarray:
        """True standard inertial parameters (n, 10)."""
        return np.array([j.inertial for j in self.joints])

    @property
    def has_rotor_inertia(self) -> bool:
        """Whether each joint has a rotor-inertia parameter ``Ia`` (``rotor_inertia`` is not None)."""
        return self.rotor_inertia is not None

    def true_parameters(self) -> np.ndarray:
        """Standard parameters theta (p,) including rotor inertia and linear friction."""
        fv = self.friction.values()
        blocks = []
        for j in range(self.n_dof):
            blocks.append(self.joints[j].inertial)
            if self.rotor_inertia is not None:
                blocks.append([self.rotor_inertia[j]])
            blocks.append(fv[j])
        return np.concatenate([*blocks, self.coupling.values()])

    def rigid_body_torque(self, q, qd, qdd, gravity: bool = True) -> np.ndarray:
        """Rigid-body torque (N, n) by the RNEA (no rotor inertia, no friction).

        Compiled per-sample kernels (:mod:`robotid_sim.dynamics.crba`), fast at N = 1 too.
        """
        q, qd, qdd = as_states(self.n_dof, q=q, qd=qd, qdd=qdd)
        g = self.gravity if gravity else np.zeros(3)
        return crba.inverse_dynamics(self.joints, self.inertials, g, q, qd, qdd)

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        """True motor torque (N, n): rigid body + rotor inertia + friction (any friction model)."""
        q, qd, qdd = as_states(self.n_dof, q=q, qd=qd, qdd=qdd)
        tau = self.rigid_body_torque(q, qd, qdd)
        if self.rotor_inertia is not None:
            tau = tau + self.rotor_inertia * qdd
        tau = tau + self.friction.torque(qd)
        if self.coupling:
            tau = tau + self.coupling.torque(qd, qdd, self.friction.sign_smoothing)
        return tau

    def mass_matrix(self, q) -> np.ndarray:
        """Joint-space mass matrix (N, n, n), rotor inertia on the diagonal (and coupled drives' rotors) included.

        Composite-rigid-body algorithm (:func:`robotid_sim.dynamics.crba.mass_matrix`).
        """
        (q,) = as_states(self.n_dof, q=q)
        M = crba.mass_matrix(self.joints, self.inertials, q, self.rotor_inertia)
        return M + self.coupling.inertia(self.n_dof) if self.coupling.has_rotor_inertia else M

    def bias_torque(self, q, qd) -> np.ndarray:
        """h(q, qd) (N, n): Coriolis, centrifugal, gravity and friction torque at qdd = 0."""
        q, qd = as_states(self.n_dof, q=q, qd=qd)
        h = crba.inverse_dynamics(self.joints, self.inertials, self.gravity, q, qd, np.zeros_like(q))
        h = h + self.friction.torque(qd)
        return h + self.coupling.torque(qd, None, self.friction.sign_smoothing) if self.coupling else h

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """qdd (N, n) = M(q)^-1 (tau - h(q, qd)) for this model (rotor inertia, friction, coupled drives included).

        CRBA + RNEA + LU per sample (:func:`robotid_sim.dynamics.crba.forward_dynamics`); the
        parameters may be physically inconsistent. Coupled drives with a rotor inertia add a full matrix to M:
        then M and h are solved with numpy. Raises
        :class:`~robotid_sim.dynamics.crba.SingularMassMatrixError` (a ``DataError`` and a
        ``numpy.linalg.LinAlgError``) where M is exactly singular.
        """
        q, qd, tau = as_states(self.n_dof, q=q, qd=qd, tau=tau)
        if self.coupling.has_rotor_inertia:
            try:
                return np.linalg.solve(self.mass_matrix(q), (tau - self.bias_torque(q, qd))[..., None])[..., 0]
            except np.linalg.LinAlgError as exc:
                raise crba.SingularMassMatrixError(
                    "Singular matrix: the mass matrix (coupled drives included) is singular at some sample; the "
                    "inertial parameters are not physically consistent there"
                ) from exc
        rhs = tau - self.friction.torque(qd)
        if self.coupling:
            rhs = rhs - self.coupling.torque(qd, None, self.friction.sign_smoothing)
        return crba.forward_dynamics(self.joints, self.inertials, self.gravity, q, qd, rhs, self.rotor_inertia)

    # ----------------------------------------------------------------- base parameters
    def base_parameters(self, n_samples: int | None = None, seed: int = 0) -> BaseParameters:
        """Base parameters with the true values (the reduction of :meth:`structure` for the defaults)."""
        if n_samples is None and seed == 0:
            return replace(self.structure().base_parameters(), theta=self.true_parameters())
        return compute_base_parameters(
            self.regressor,
            self.random_states,
            self.parameter_names,
            self.true_parameters(),
            n_samples=n_samples or max(200, 4 * self.n_parameters // self.n_dof),
            seed=seed,
        )

    def structure(self) -> RobotStructure:
        """What an estimator may know of this robot: kinematics, friction law, parameter layout."""
        if self._structure is None:
            self._structure = RobotStructure.of(self)
        return self._structure

    @classmethod
    def from_structure(cls, structure: RobotStructure, theta: np.ndarray) -> Robot:
        """A robot of ``structure`` whose standard parameters are ``theta`` (p,).

        The parameters need not be physically consistent; the robot's recursive dynamics
        (mass matrix, bias, forward dynamics) are linear in them.

        Raises:
            ModelError: ``theta`` does not have one value per standard parameter of ``structure``.
        """
        n = structure.n_dof
        zero = cls(
            name=structure.name,
            joints=list(structure.joints),
            gravity=structure.gravity,
            friction=structure.friction,
            rotor_inertia=np.zeros(n) if structure.rotor_inertia else None,
            gear_ratio=structure.gear_ratio,
            velocity_limit=structure.velocity_limit,
            acceleration_limit=structure.acceleration_limit,
            locked_joints=dict(structure.locked_joints),
            coupling=structure.coupling,
        )
        return zero.with_parameters(theta)

    def with_parameters(self, theta: np.ndarray) -> Robot:
        """A copy of this robot whose standard parameters are ``theta`` (p,)."""
        theta = np.asarray(theta, float)
        if theta.shape != (self.n_parameters,):
            raise ModelError(f"theta must have {self.n_parameters} values, got {theta.shape}")
        blocks = theta[: self.n_dof * self.parameter_block].reshape(self.n_dof, self.parameter_block)
        joints = [Joint(**{**j.__dict__, "inertial": blocks[i, :10].copy()}) for i, j in enumerate(self.joints)]
        has_ia = self.rotor_inertia is not None
        friction = self.friction
        if friction.suffixes:
            friction = friction.with_values(blocks[:, 10 + has_ia :])
        return Robot(
            name=self.name,
            joints=joints,
            gravity=self.gravity,
            friction=friction,
            rotor_inertia=blocks[:, 10].copy() if has_ia else None,
            gear_ratio=self.gear_ratio,
            velocity_limit=self.velocity_limit,
            acceleration_limit=self.acceleration_limit,
            urdf_path=self.urdf_path,
            sidecar=self.sidecar,
            locked_joints=dict(self.locked_joints),
            friction_source=self.friction_source,
            coupling=self.coupling.with_values(theta[self.n_dof * self.parameter_block :]),
        )


def _urdf_friction(urdf: UrdfRobot, used: bool = True) -> FrictionModel | None:
    """Coulomb + viscous friction from the ``<dynamics friction damping>`` tags, or None if all are zero.

    A negative tag raises :class:`ModelError` when the model is ``used`` (not replaced by a sidecar's).
    """
    if not urdf.has_dynamics or not (np.any(urdf.friction) or np.any(urdf.damping)):
        return None
    for attr in ("damping", "friction") if used else ():
        values = getattr(urdf, attr)
        if np.any(values < 0):
            j = int(np.argmax(values < 0))
            raise ModelError(
                f"URDF robot '{urdf.name}': the <dynamics {attr}> of joint '{urdf.joints[j].name}' is negative "
                f"({values[j]:g}); a friction or damping coefficient is >= 0 (fix it, or give the friction in a "
                "sidecar, which replaces the tags)"
            )
    n = len(urdf.joints)
    return CoulombViscous(fc=urdf.friction.copy(), fv=urdf.damping.copy(), offset=np.zeros(n))


def urdf_friction_tags(friction: FrictionModel) -> tuple[np.ndarray, np.ndarray]:
    """(friction, damping) (n,): what a law's URDF ``<dynamics friction damping>`` tags can hold of it.

    The Coulomb coefficient ``fc`` where the law has one, and the viscous ``fv`` where its term is linear
    in qd (no exponent ``alpha``); zeros otherwise. Offsets, Stribeck and exponent terms have no tag.
    """
    law = friction.to_dict()
    zeros = np.zeros(friction.n)
    fc = np.asarray(law.get("fc", zeros), float)
    fv = np.asarray(law.get("fv", zeros), float) if "alpha" not in law else zeros
    return fc, fv


def _locks_note(locked: Mapping[str, float], n_urdf: int) -> str:
    """How per-joint lists count joints when some are locked (in a length error)."""
    if not locked:
        return ""
    return (
        f" that is not locked, or {n_urdf} with the locked joint(s) {', '.join(locked)}: one per moving joint of "
        "the URDF"
    )


def _robot_friction(parsed: UrdfRobot, sc: Sidecar | None, n: int, locks: str, where: str) -> tuple[FrictionModel, str]:
    """The friction model of :func:`robot_from_urdf` and where it comes from (:attr:`Robot.friction_source`).

    The sidecar's ``friction`` if it has one (a warning is logged when the URDF's ``<dynamics>`` tags
    differ from its Coulomb and viscous part, :func:`urdf_friction_tags`), else the tags' Coulomb + viscous
    model, else no friction.
    """
    from_sidecar = sc is not None and sc.friction is not None
    tag_friction = _urdf_friction(parsed, used=not from_sidecar)
    if not from_sidecar:
        if tag_friction is not None:
            return tag_friction, FRICTION_FROM_URDF
        return NoFriction(n), FRICTION_NONE
    try:
        friction = friction_from_dict(sc.friction, n)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("(one per joint)", f"(one per joint{locks})") + where) from None
    fc, fv = urdf_friction_tags(friction)  # a law the tags cannot hold all of agrees with tags holding its part
    if tag_friction is not None and not (np.array_equal(fc, parsed.friction) and np.array_equal(fv, parsed.damping)):
        log.warning(
            "robot '%s': the sidecar's friction (%s) replaces the URDF's <dynamics> tags "
            "(friction %s, damping %s), which differ from it",
            parsed.name,
            friction.kind,
            parsed.friction.tolist(),
            parsed.damping.tolist(),
        )
    return friction, FRICTION_FROM_SIDECAR


def _per_joint_arrays(joints, sc: Sidecar | None, locks: str, where: str):
    """Rotor inertia (or None), gear ratio, velocity and acceleration limits (n,) of :func:`robot_from_urdf`.

    The sidecar's values where it gives them, else: no rotor inertia, gear ratio 1, the URDF's velocity
    limits (:data:`DEFAULT_VELOCITY_LIMIT` where there is none) and :data:`DEFAULT_ACCELERATION_LIMIT`.
    """
    n = len(joints)
    vel = np.array([j.velocity_limit for j in joints])
    vel = np.where(np.isfinite(vel), vel, DEFAULT_VELOCITY_LIMIT)
    acc = np.full(n, DEFAULT_ACCELERATION_LIMIT)
    rotor, gear = None, np.ones(n)
    if sc is not None:
        if sc.rotor_inertia is not None:
            rotor = _per_joint(sc.rotor_inertia, n, "rotor_inertia", locks, where)
        gear = _per_joint(sc.gear_ratio, n, "gear_ratio", locks, where)
        if sc.limits is not None and sc.limits.velocity is not None:
            vel = _per_joint(sc.limits.velocity, n, "limits.velocity", locks, where)
        if sc.limits is not None and sc.limits.acceleration is not None:
            acc = _per_joint(sc.limits.acceleration, n, "limits.acceleration", locks, where)
        if sc.torque_measurement.torque_constant is not None:
            _per_joint(sc.torque_measurement.torque_constant, n, "torque_measurement.torque_constant", locks, where)
    return rotor, gear, vel, acc


def _robot_coupling(sc: Sidecar | None, n: int, where: str) -> Coupling:
    """The coupled drives of the sidecar's ``coupling`` (none without), checked against the n joints."""
    if sc is None or sc.coupling is None:
        return Coupling()
    try:
        return coupling_from_list(sc.coupling, n)
    except ConfigError as exc:
        raise ConfigError(f"sidecar field {exc}{where}") from None


def robot_from_urdf(
    urdf: str | Path,
    sidecar: str | Path | Sidecar | None = None,
    lock_joints: Mapping[str, float] | None = None,
) -> Robot:
    """Build a :class:`Robot` from a URDF (path or text), an optional sidecar (path or object) and joint locks.

    Args:
        urdf: the URDF file, or its text (such a robot cannot be simulated: PyBullet needs a file).
        sidecar: a sidecar file or :class:`~robotid_sim.robot.sidecar.Sidecar`; every field is
            optional (see :mod:`robotid_sim.robot.sidecar`). Per-joint lists have one value per
            moving, unlocked joint.
        lock_joints: ``{joint name: position}`` (rad, or m for a prismatic joint): each named
            joint becomes a fixed joint at that position, its child links merged into the parent
            body at that pose (see :mod:`robotid_sim.robot.urdf`). The locks are kept in
            :attr:`Robot.locked_joints`, in the robot's :meth:`~Robot.structure` and in its name
            (``"<urdf name> (locked j=0.02, ...)"``), and the simulator simulates exactly the
            locked model.

    What is not in the sidecar: gravity -9.81 along z; no rotor inertia; gear ratio 1; velocity
    limits from the URDF ``<limit velocity>`` (or :data:`DEFAULT_VELOCITY_LIMIT`) and
    acceleration limits :data:`DEFAULT_ACCELERATION_LIMIT`; friction from the URDF's
    ``<dynamics friction damping>`` tags of the moving joints as a ``coulomb_viscous`` model
    (``friction`` → Coulomb ``fc``, ``damping`` → viscous ``fv``, offset 0, 0 for a joint without
    tags; identified like any friction; a negative tag raises ModelError), or no friction where
    there are no tags or all are 0. A sidecar ``friction`` replaces the tags (a warning is logged
    when they differ).
    :attr:`Robot.friction_source` says which.

    Raises:
        ModelError: the URDF cannot be read or describes no robot the simulator can be exact for
            (see :mod:`robotid_sim.robot.urdf`: the message names the link or joint and the fix),
            or a lock names no moving joint (the message lists them), is not finite or is
            outside the joint's limits.
        ConfigError: the sidecar is malformed, a per-joint list has the wrong length, or a coupled drive is
            malformed (a joint out of range or repeated, a negative coefficient, an unknown field).
    """
    parsed = read_urdf(urdf, lock_joints)
    joints, locked = parsed.joints, parsed.locked_joints
    n = len(joints)
    sc = load_sidecar(sidecar) if isinstance(sidecar, str | Path) else sidecar
    if sc is not None:
        sc = sc.for_joints([name not in locked for name in parsed.all_moving])
    urdf_path = Path(urdf) if not str(urdf).lstrip().startswith("<") else None
    locks = _locks_note(locked, len(parsed.all_moving))
    where = f" (sidecar {sidecar})" if isinstance(sidecar, str | Path) else ""

    friction, source = _robot_friction(parsed, sc, n, locks, where)
    rotor, gear, vel, acc = _per_joint_arrays(joints, sc, locks, where)
    coupling = _robot_coupling(sc, n, where)
    return Robot(
        name=parsed.name + locked_suffix(locked),
        joints=joints,
        gravity=np.array([0.0, 0.0, -9.81]) if sc is None else np.asarray(sc.gravity, float),
        friction=friction,
        rotor_inertia=rotor,
        gear_ratio=gear,
        velocity_limit=vel,
        acceleration_limit=acc,
        urdf_path=urdf_path,
        sidecar=sc,
        locked_joints=locked,
        friction_source=source,
        coupling=coupling,
    )
