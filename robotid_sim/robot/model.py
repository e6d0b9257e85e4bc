"""The :class:`Robot`: a fixed-base serial arm with its true parameters (SPEC §3–4).

Signals: ``q`` joint positions (rad or m), ``qd`` velocities, ``qdd`` accelerations, ``tau``
joint torques/forces, all arrays (N, n) for N samples of an n-joint arm.

Parameter vector theta, per joint j (1-based in names), in this order:
``XXj XYj XZj YYj YZj ZZj MXj MYj MZj Mj`` (standard inertial parameters of link j about its
frame origin, SPEC §4), then ``Iaj`` if the sidecar gives rotor inertia, then the linear
friction parameters of the friction model (the sidecar's, or one made from the URDF's
``<dynamics>`` tags; e.g. ``fcj fvj Sj``), as in seed 001 Eq. 8. Joints are the moving joints
that are not locked (``lock_joints``): a locked joint is a fixed joint of the model.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from robotid_sim.dynamics import crba
from robotid_sim.dynamics.base_parameters import BaseParameters, compute_base_parameters
from robotid_sim.dynamics.chain import INERTIAL_NAMES, Joint, JointChain
from robotid_sim.dynamics.friction import CoulombViscous, FrictionModel, NoFriction, friction_from_dict
from robotid_sim.dynamics.newton_euler import inertial_regressor
from robotid_sim.dynamics.states import as_states
from robotid_sim.errors import ConfigError, DataError, ModelError
from robotid_sim.robot.sidecar import Sidecar, load_sidecar
from robotid_sim.robot.structure import RobotStructure, locked_suffix
from robotid_sim.robot.urdf import UrdfRobot, read_urdf

log = logging.getLogger(__name__)

#: velocity and acceleration bounds used for random states when a robot has no sidecar limits
DEFAULT_VELOCITY_LIMIT = 2.0
DEFAULT_ACCELERATION_LIMIT = 5.0

#: half-width of the position range a default excitation uses on a joint without position limits:
#: continuous revolute joints (rad) and prismatic joints without limits (m)
DEFAULT_REVOLUTE_RANGE = float(np.pi)
DEFAULT_PRISMATIC_RANGE = 0.2

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
class Robot(JointChain):
    """A robot model with its exact, known parameters.

    Build one with :func:`load_robot`. Every dynamics method is batched over samples.

    Attributes beyond the dynamics: ``urdf_path`` and ``sidecar`` (the parsed
    :class:`~robotid_sim.robot.sidecar.Sidecar` or None) it was loaded from; ``locked_joints``,
    the URDF joints made fixed, ``{name: position}`` in URDF order (they are part of
    :meth:`structure` and of ``name``); ``friction_source``, where the friction model comes from
    (:data:`FRICTION_FROM_SIDECAR`, :data:`FRICTION_FROM_URDF`, :data:`FRICTION_NONE`, or
    ``"given"`` for a robot built in Python).
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
    def _block(self) -> int:
        return 10 + (self.rotor_inertia is not None) + len(self.friction.suffixes)

    @cached_property
    def parameter_names(self) -> list[str]:
        names = []
        for j in range(self.n_dof):
            names += [f"{k}{j + 1}" for k in INERTIAL_NAMES]
            if self.rotor_inertia is not None:
                names.append(f"Ia{j + 1}")
            names += self.friction.parameter_names(j)
        return names

    @property
    def n_parameters(self) -> int:
        return self.n_dof * self._block

    def true_parameters(self) -> np.ndarray:
        """Standard parameters theta (p,) including rotor inertia and linear friction."""
        fv = self.friction.values()
        blocks = []
        for j in range(self.n_dof):
            blocks.append(self.joints[j].inertial)
            if self.rotor_inertia is not None:
                blocks.append([self.rotor_inertia[j]])
            blocks.append(fv[j])
        return np.concatenate(blocks)

    def parameter_slices(self) -> dict[str, np.ndarray]:
        """Indices into theta of each parameter group: 'inertial', 'rotor', 'friction'."""
        idx = np.arange(self.n_parameters).reshape(self.n_dof, self._block)
        has_ia = self.rotor_inertia is not None
        return {
            "inertial": idx[:, :10].ravel(),
            "rotor": idx[:, 10 : 10 + has_ia].ravel(),
            "friction": idx[:, 10 + has_ia :].ravel(),
        }

    # ----------------------------------------------------------------- dynamics
    def regressor(self, q, qd, qdd, columns=None) -> np.ndarray:
        """Regressor Y (N, n, p) with Y @ theta = inverse dynamics incl. rotor and friction.

        Computed per sample by compiled Newton–Euler kernels
        (:mod:`robotid_sim.dynamics.crba_kernels`; serial for small batches, threaded over
        samples from :data:`robotid_sim.dynamics.crba.PARALLEL_MIN_SAMPLES` on), or by the
        batched numpy :func:`reference_regressor` without numba.

        Args:
            q, qd, qdd: joint states (N, n).
            columns: increasing indices into theta; only those columns are computed, giving
                (N, n, len(columns)) (how the base regressor is made). Default: all p.
        """
        n, p, b = self.n_dof, self.n_parameters, self._block
        q, qd, qdd = as_states(n, q=q, qd=qd, qdd=qdd)
        if columns is None:
            colmap, P = np.arange(p, dtype=np.int64).reshape(n, b), p
        else:
            selected = np.asarray(columns)
            if selected.ndim != 1 or (selected.size and selected.dtype.kind not in "iu"):
                raise DataError(
                    f"columns must be a 1-D array of indices, got dtype {selected.dtype}, shape {selected.shape}"
                )
            if selected.size and (selected[0] < 0 or selected[-1] >= p or np.any(np.diff(selected) <= 0)):
                raise DataError(f"columns must be increasing indices in [0, {p}), got {selected.tolist()}")
            colmap, P = np.full(p, -1, dtype=np.int64), len(selected)
            colmap[selected.astype(np.int64, copy=False)] = np.arange(P)
            colmap = colmap.reshape(n, b)
        kernels = crba.kernels()
        if kernels is None:  # no numba
            return reference_regressor(self, q, qd, qdd, columns)
        chain = crba.pack_chain(self.joints)
        q, qd, qdd = crba.kernel_states(n, q, qd, qdd)  # C-contiguous and writable, as numba wants them
        N = q.shape[0]
        friction = self.friction.columns(qd) if self.friction.suffixes else np.empty((N, n, 0))
        friction = crba.kernel_array(friction, (N, n, len(self.friction.suffixes)), "friction columns")
        Y = np.empty((N, n, P))
        kernel = kernels.regressor_parallel if N >= crba.PARALLEL_MIN_SAMPLES else kernels.regressor_serial
        kernel(
            chain.kind,
            chain.axis,
            chain.origin_rotation,
            chain.origin_translation,
            crba.kernel_array(self.gravity, (3,), "gravity"),
            q,
            qd,
            qdd,
            friction,
            colmap,
            int(self.rotor_inertia is not None),
            Y,
        )
        return Y

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
        return tau + self.friction.torque(qd)

    def mass_matrix(self, q) -> np.ndarray:
        """Joint-space mass matrix (N, n, n), rotor inertia on the diagonal included.

        Composite-rigid-body algorithm (:func:`robotid_sim.dynamics.crba.mass_matrix`).
        """
        (q,) = as_states(self.n_dof, q=q)
        return crba.mass_matrix(self.joints, self.inertials, q, self.rotor_inertia)

    def bias_torque(self, q, qd) -> np.ndarray:
        """h(q, qd) (N, n): Coriolis, centrifugal, gravity and friction torque at qdd = 0."""
        q, qd = as_states(self.n_dof, q=q, qd=qd)
        h = crba.inverse_dynamics(self.joints, self.inertials, self.gravity, q, qd, np.zeros_like(q))
        return h + self.friction.torque(qd)

    def forward_dynamics(self, q, qd, tau) -> np.ndarray:
        """qdd (N, n) = M(q)^-1 (tau - h(q, qd)) for this model (rotor inertia and friction included).

        CRBA + RNEA + LU per sample (:func:`robotid_sim.dynamics.crba.forward_dynamics`); the
        parameters may be physically inconsistent. Raises
        :class:`~robotid_sim.dynamics.crba.SingularMassMatrixError` (a ``DataError`` and a
        ``numpy.linalg.LinAlgError``) where M is exactly singular.
        """
        q, qd, tau = as_states(self.n_dof, q=q, qd=qd, tau=tau)
        return crba.forward_dynamics(
            self.joints, self.inertials, self.gravity, q, qd, tau - self.friction.torque(qd), self.rotor_inertia
        )

    # ----------------------------------------------------------------- base parameters
    def random_states(self, rng: np.random.Generator, N: int) -> tuple[np.ndarray, ...]:
        """Random (q, qd, qdd), each (N, n), inside the position, velocity, acceleration limits."""
        lo, hi = self.position_limits
        lo = np.where(np.isfinite(lo), lo, -np.pi)
        hi = np.where(np.isfinite(hi), hi, np.pi)
        q = rng.uniform(lo, hi, size=(N, self.n_dof))
        qd = rng.uniform(-1, 1, size=(N, self.n_dof)) * self.velocity_limit
        qdd = rng.uniform(-1, 1, size=(N, self.n_dof)) * self.acceleration_limit
        return q, qd, qdd

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

    def with_parameters(self, theta: np.ndarray) -> Robot:
        """A copy of this robot whose standard parameters are ``theta`` (p,)."""
        theta = np.asarray(theta, float)
        if theta.shape != (self.n_parameters,):
            raise ModelError(f"theta must have {self.n_parameters} values, got {theta.shape}")
        blocks = theta.reshape(self.n_dof, self._block)
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
        )


def reference_regressor(robot: Robot, q, qd, qdd, columns=None) -> np.ndarray:
    """Batched numpy regressor of ``robot``: what :meth:`Robot.regressor` computes, same arguments and result.

    ``Robot.regressor`` runs compiled kernels (:mod:`robotid_sim.dynamics.crba_kernels`);
    this is the reference they are tested against, and their fallback where numba is missing.
    :func:`~robotid_sim.dynamics.newton_euler.inertial_regressor` gives the inertial columns, then the
    rotor (qdd) and friction (``robot.friction.columns(qd)``) columns are written in. ``columns``:
    increasing indices into theta, as for ``Robot.regressor``.
    """
    n = robot.n_dof
    q, qd, qdd = as_states(n, q=q, qd=qd, qdd=qdd)
    N, b = q.shape[0], robot._block
    selected = np.arange(robot.n_parameters) if columns is None else np.asarray(columns)
    position = {int(c): k for k, c in enumerate(selected)}
    link_columns = []
    for j in range(n):
        local = selected[(selected >= j * b) & (selected < j * b + 10)] - j * b
        link_columns.append((local, position[j * b + int(local[0])] if len(local) else 0))
    Y = np.zeros((N, n, len(selected)))
    inertial_regressor(
        robot.joints, q.T.copy(), qd.T.copy(), qdd.T.copy(), robot.gravity, out=Y, link_columns=link_columns
    )
    has_ia = robot.rotor_inertia is not None
    friction = robot.friction.columns(qd) if robot.friction.suffixes else None
    for j in range(n):
        if has_ia and j * b + 10 in position:
            Y[:, j, position[j * b + 10]] = qdd[:, j]
        for c in range(len(robot.friction.suffixes)):
            k = position.get(j * b + 10 + has_ia + c)
            if k is not None:
                Y[:, j, k] = friction[:, j, c]
    return Y


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


def _same_friction(a: FrictionModel, b: FrictionModel) -> bool:
    da, db = a.to_dict(), b.to_dict()
    return da.keys() == db.keys() and all(np.array_equal(np.asarray(da[k]), np.asarray(db[k])) for k in da)


def _locks_note(locked: Mapping[str, float]) -> str:
    """How per-joint lists count joints when some are locked (in a length error)."""
    if not locked:
        return ""
    return f" that is not locked; the locked joint(s) {', '.join(locked)} are not counted"


def _robot_friction(parsed: UrdfRobot, sc: Sidecar | None, n: int, locks: str, where: str) -> tuple[FrictionModel, str]:
    """The friction model of :func:`robot_from_urdf` and where it comes from (:attr:`Robot.friction_source`).

    The sidecar's ``friction`` if it has one (a warning is logged when the URDF's ``<dynamics>`` tags
    differ from it), else the tags' Coulomb + viscous model, else no friction.
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
    if tag_friction is not None and not _same_friction(friction, tag_friction):
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
        ConfigError: the sidecar is malformed, or a per-joint list has the wrong length.
    """
    parsed = read_urdf(urdf, lock_joints)
    joints, locked = parsed.joints, parsed.locked_joints
    n = len(joints)
    sc = load_sidecar(sidecar) if isinstance(sidecar, str | Path) else sidecar
    urdf_path = Path(urdf) if not str(urdf).lstrip().startswith("<") else None
    locks = _locks_note(locked)
    where = f" (sidecar {sidecar})" if isinstance(sidecar, str | Path) else ""

    friction, source = _robot_friction(parsed, sc, n, locks, where)
    rotor, gear, vel, acc = _per_joint_arrays(joints, sc, locks, where)
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
    )
