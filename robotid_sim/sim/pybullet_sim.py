"""PyBullet backend made exact (SPEC §5).

The simulator is the model: for every robot that loads, PyBullet simulates exactly what
:class:`~robotid_sim.robot.Robot` computes, or :class:`PyBulletSimulator` refuses to start.

**What PyBullet loads.** Not the user's URDF but a copy written by
:func:`~robotid_sim.robot.urdf.pybullet_urdf` (in a temporary folder, deleted once loaded): the
file's kinematics with the *model's* inertia — each moving body (a link carried by a moving
joint, its fixed children merged) as one explicit inertial in principal form, every other link
an explicit zero inertial — and no ``<collision>``, no ``<visual>`` whose mesh file is missing,
no URDF joint damping/friction, no joint-limit constraints; the robot's locked joints
(``robot.locked_joints``) are written as fixed joints with the lock folded into their origin, so
PyBullet simulates exactly the locked model. PyBullet's own conventions thus never
apply: a link without ``<inertial>`` (a ROS ``tool0`` frame) is massless as in the model, not
1 kg with a unit inertia; missing mesh files do not matter; and ``robot.with_parameters(theta)``
is simulated with its own parameters.

**What is refused, and where.** An inertia that no rigid body has (negative principal moment of
inertia about the COM, or a broken triangle inequality; PyBullet would silently set it to zero)
is refused when the URDF is loaded (:func:`~robotid_sim.robot.load_robot`, naming the link and
the fix) and, for parameters set in Python, here before loading. A negative mass, a link with two
parents, a joint without parent are refused at load time.

**The parity gate.** After loading, :class:`PyBulletSimulator` compares what PyBullet actually
uses with the model and raises :class:`~robotid_sim.errors.ModelError` naming the first link or
joint that differs (with PyBullet's own warnings) beyond a relative :data:`PARITY_RTOL` = 1e-9:

- per link, ``getDynamicsInfo``: mass, centre of mass and inertia about the COM (principal
  moments and inertial frame);
- at :data:`PARITY_STATES` random states inside the limits: ``calculateMassMatrix`` against
  the model's mass matrix (rigid body, no rotor inertia) and ``calculateInverseDynamics``
  against :meth:`~robotid_sim.robot.Robot.rigid_body_torque` (gravity included);
- the mass matrix must be regular: a joint that moves no mass or inertia (e.g. a massless link
  at the end of the chain) cannot be simulated, since Bullet's forward dynamics divides by zero.

Nothing is ever adopted from PyBullet silently: PyBullet is made to load the model, then checked.

**Trees.** A robot whose links form a tree (:mod:`robotid_sim.robot.urdf`) loads the same way:
PyBullet numbers its links depth-first in the order of the URDF's joints, as the model orders its
moving joints (checked on loading), and the parity gate compares the tree's mass matrix and inverse
dynamics like a chain's.

**Console output.** PyBullet writes at C level (the import banner ``pybullet build time: ...`` on
stderr, ``b3Warning``/``b3Printf`` on stdout). Both file descriptors are redirected to a temporary
file around ``import pybullet`` (done on first use), connect, loadURDF and the parity check, and
the text is logged at DEBUG level and quoted in the parity gate's errors. :func:`set_verbose`
(the CLI's ``--verbose``) turns this off: nothing is redirected.

Other exactness traps and what this module does about each:

- inertia recomputed from collision shapes -> loaded with ``URDF_USE_INERTIA_FROM_FILE``;
- default link linear/angular damping and URDF joint damping -> all set to zero with
  ``changeDynamics``;
- default velocity motors resist motion -> disabled (VELOCITY_CONTROL with force 0) before
  TORQUE_CONTROL;
- joint limits -> not enforced by Bullet (its limit constraint would add forces the model does
  not have); the reference is checked against the limits before running, and the simulated
  positions after (:meth:`PyBulletSimulator.check_positions`);
- no joint friction or rotor inertia in torque mode -> injected: the *measured* motor torque is
  rigid-body torque + rotor inertia term + the robot's friction law (the sidecar's, or the one
  made from the URDF's ``<dynamics>`` tags) + the coupled drives' torque (``robot.coupling``:
  their friction on Σ qd and their rotor inertia), while Bullet only receives the rigid-body part.

Two ways to step the arm:

- :meth:`PyBulletSimulator.step_acceleration`: computed torque on the true model. Bullet
  receives ``calculateInverseDynamics(q, qd, qdd_cmd)`` and realises ``qdd_cmd`` exactly; the
  motor torque is that plus ``Ia·qdd_cmd + friction(qd)`` (computed afterwards, batched).
- :meth:`PyBulletSimulator.step_torque`: any motor torque. The joint acceleration of the arm
  with rotor inertia and friction, qdd = (M + Ia)^-1 (tau - h - friction), is computed from
  Bullet's own mass matrix and bias, and Bullet receives ``tau - friction - Ia·qdd`` (with coupled
  drives, their rotor inertia matrix is part of Ia and their friction part of the friction).

:meth:`PyBulletSimulator.track` follows a reference under any controller of
:mod:`robotid_sim.control` in one loop: an
:class:`~robotid_sim.control.AccelerationController` on the true model (the default
:class:`~robotid_sim.control.ComputedTorquePD`) is stepped with ``step_acceleration``, any other
controller's motor torque with ``step_torque``. Either way the recorded torque is the motor
torque and the recorded acceleration the one Bullet realised, so the recorded data satisfy the
robot's inverse dynamics exactly.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from math import isfinite
from pathlib import Path
from types import ModuleType

import numpy as np

from robotid_sim.dynamics import crba
from robotid_sim.dynamics.chain import split_inertial
from robotid_sim.errors import DataError, ModelError
from robotid_sim.robot import physical
from robotid_sim.robot.model import Robot
from robotid_sim.robot.urdf import pybullet_urdf
from robotid_sim.sim.tracking import AccelerationController, ComputedTorquePD, Controller, Plant, Reference

log = logging.getLogger(__name__)

#: default physics step (s), SPEC §5
DEFAULT_DT = 1e-3

#: relative tolerance of the parity gate between PyBullet and the model
PARITY_RTOL = 1e-9

#: random states (inside the limits, fixed seed) at which the parity gate compares the dynamics
PARITY_STATES = 3

#: a mass matrix whose diagonal-scaled form has an eigenvalue below this is singular
SINGULAR_RTOL = 1e-10

#: the pybullet module, imported on first use by :func:`pybullet_module` (with its banner silenced)
p: ModuleType | None = None

_verbose = False
_redirect_lock = threading.RLock()
_redirect_depth = 0


def set_verbose(flag: bool) -> None:
    """Let PyBullet print to the console (True), or silence and capture it (False, the default)."""
    global _verbose
    _verbose = bool(flag)


def is_verbose() -> bool:
    """Whether PyBullet's console output is let through (see :func:`set_verbose`)."""
    return _verbose


class CapturedOutput:
    """What PyBullet printed inside :func:`pybullet_output` (filled in when the block exits)."""

    def __init__(self) -> None:
        self.text = ""

    def messages(self) -> list[str]:
        """The printed lines without PyBullet's ``b3Warning[file,line]:`` prefixes, blank lines dropped."""
        text = re.sub(r"b3(Warning|Error|Printf)\[[^\]]*\]:\s*", "\n", self.text)
        return [line.strip() for line in text.splitlines() if line.strip()]


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C library to flush (not POSIX)
        pass


@contextlib.contextmanager
def pybullet_output() -> Iterator[CapturedOutput]:
    """Silence and capture the C-level stdout and stderr (file descriptors 1 and 2) inside the block.

    Yields a :class:`CapturedOutput` whose ``text`` is set when the block exits. Python's own
    streams are flushed before and after, the descriptors are always restored, and the text is
    logged at DEBUG level. With :func:`set_verbose` (True) nothing is redirected. Nested blocks
    capture into the outermost one; the redirection is process-wide, so other threads' output
    during the block is captured too.
    """
    global _redirect_depth
    captured = CapturedOutput()
    if _verbose:
        yield captured
        return
    with _redirect_lock:
        if _redirect_depth:
            yield captured
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        _flush_c_stdio()
        sink = tempfile.TemporaryFile()
        saved: list[tuple[int, int]] = []
        _redirect_depth += 1
        try:
            for fd in (1, 2):
                try:
                    saved.append((fd, os.dup(fd)))
                except OSError:  # descriptor not open: nothing to silence
                    continue
                os.dup2(sink.fileno(), fd)
            yield captured
        finally:
            _redirect_depth -= 1
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            _flush_c_stdio()
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            captured.text = sink.read().decode(errors="replace")
            sink.close()
            if captured.text.strip():
                log.debug("PyBullet printed: %s", " | ".join(captured.messages()))


def pybullet_module() -> ModuleType:
    """The ``pybullet`` module, imported on first use inside :func:`pybullet_output` (no banner)."""
    global p
    if p is None:
        with pybullet_output():
            import pybullet

        p = pybullet
    return p


class PyBulletSimulator:
    """A headless (DIRECT) PyBullet world holding one fixed-base arm, checked equal to the model.

    Args:
        robot: the robot; PyBullet loads its URDF's kinematics with the robot's inertial
            parameters (see the module docstring).
        dt: physics step in seconds.

    Raises:
        ModelError: the robot has no URDF file, a link's inertia is not one a rigid body has,
            PyBullet cannot load the URDF, or the parity gate finds a difference between PyBullet
            and the model (naming the link or joint, with PyBullet's warnings).
    """

    def __init__(self, robot: Robot, dt: float = DEFAULT_DT):
        self.client = None
        if robot.urdf_path is None:
            raise ModelError("the robot has no URDF file on disk; PyBullet needs one (save the URDF text first)")
        if not dt > 0:
            raise DataError(f"dt must be > 0, got {dt}")
        self.robot = robot
        self.dt = float(dt)
        _refuse_inconsistent_bodies(robot)
        text = pybullet_urdf(robot.urdf_path, robot.inertials, lock_joints=robot.locked_joints)
        pb = pybullet_module()
        problem = None
        try:
            with pybullet_output() as output:
                problem = self._load(pb, text)
                if problem is None:
                    problem = self._check_parity(pb)
        except BaseException:
            self.close()
            raise
        if problem is not None:
            self.close()
            said = output.messages()
            quoted = f" PyBullet said: {' | '.join(said[:12])}" if said else ""
            raise ModelError(f"{problem}{quoted}")
        self.t = 0.0

    def _load(self, pb: ModuleType, text: str) -> str | None:
        """Connect, load the URDF copy, map the joints, remove damping and motors; a problem or None."""
        robot = self.robot
        self.client = c = pb.connect(pb.DIRECT)
        pb.setGravity(*map(float, robot.gravity), physicsClientId=c)
        pb.setTimeStep(self.dt, physicsClientId=c)
        with tempfile.TemporaryDirectory(prefix="robotid_sim_") as folder:
            path = Path(folder) / f"{Path(robot.urdf_path).stem}.urdf"
            path.write_text(text, encoding="utf-8")
            try:
                self.body = pb.loadURDF(
                    str(path), useFixedBase=True, flags=pb.URDF_USE_INERTIA_FROM_FILE, physicsClientId=c
                )
            except pb.error as exc:
                return f"PyBullet cannot load the URDF of robot '{robot.name}' ({robot.urdf_path}): {exc}."
        names = {}
        self.link_names: dict[int, str] = {}
        for i in range(pb.getNumJoints(self.body, physicsClientId=c)):
            info = pb.getJointInfo(self.body, i, physicsClientId=c)
            self.link_names[i] = info[12].decode()
            if info[2] != pb.JOINT_FIXED:
                names[info[1].decode()] = i
        missing = [nm for nm in robot.joint_names if nm not in names]
        if missing:
            return f"PyBullet did not find the moving joints {missing} in {robot.urdf_path}"
        self.joint_ids = [names[nm] for nm in robot.joint_names]
        if sorted(self.joint_ids) != self.joint_ids:
            return "PyBullet orders the moving joints differently from the URDF chain"
        for link in range(-1, pb.getNumJoints(self.body, physicsClientId=c)):
            pb.changeDynamics(
                self.body,
                link,
                linearDamping=0.0,
                angularDamping=0.0,
                jointDamping=0.0,
                maxJointVelocity=1e4,
                physicsClientId=c,
            )
        n = robot.n_dof
        pb.setJointMotorControlArray(
            self.body, self.joint_ids, pb.VELOCITY_CONTROL, forces=[0.0] * n, physicsClientId=c
        )
        return None

    # ------------------------------------------------------------------ parity gate
    def _check_parity(self, pb: ModuleType) -> str | None:
        """Compare what PyBullet uses with the model (module docstring); the first difference or None."""
        robot, c = self.robot, self.client
        where = f"robot '{robot.name}' ({robot.urdf_path})"
        expected = {j.link_name: j.inertial for j in robot.joints}
        for i, link in self.link_names.items():
            info = pb.getDynamicsInfo(self.body, i, physicsClientId=c)
            mass, diagonal, position, orientation = info[0], info[2], info[3], info[4]
            R = np.array(pb.getMatrixFromQuaternion(orientation)).reshape(3, 3)
            used = (float(mass), np.asarray(position, float), R @ np.diag(diagonal) @ R.T)
            difference = _inertial_difference(expected.get(link, np.zeros(10)), used)
            if difference:
                return (
                    f"PyBullet does not simulate link '{link}' of {where} as the model has it: {difference}. "
                    "The simulation would not be the model; fix the link's <inertial> (or the parameters given "
                    "to with_parameters)"
                )
        q, qd, qdd = robot.random_states(np.random.default_rng(0), PARITY_STATES)
        M_model = crba.mass_matrix(robot.joints, robot.inertials, q, None)
        tau_model = robot.rigid_body_torque(q, qd, qdd)
        names = robot.joint_names
        for k in range(PARITY_STATES):
            qk, qdk, qddk = q[k].tolist(), qd[k].tolist(), qdd[k].tolist()
            try:
                M = np.array(pb.calculateMassMatrix(self.body, qk, physicsClientId=c))
                tau = np.array(pb.calculateInverseDynamics(self.body, qk, qdk, qddk, physicsClientId=c))
            except (pb.error, SystemError) as exc:
                return f"PyBullet cannot compute the dynamics of {where}: {exc}"
            for what, ours, theirs in (
                ("mass matrix", M_model[k], M),
                ("inverse dynamics torque", tau_model[k], tau),
            ):
                scale = max(np.abs(ours).max(), np.abs(theirs).max(), np.finfo(float).tiny)
                off = np.abs(ours - theirs) > PARITY_RTOL * scale
                if off.any() or not np.all(np.isfinite(theirs)):
                    idx = tuple(np.argwhere(off | ~np.isfinite(theirs))[0])
                    at = (
                        f"entry ('{names[idx[0]]}', '{names[idx[1]]}')" if len(idx) == 2 else f"joint '{names[idx[0]]}'"
                    )
                    return (
                        f"PyBullet's {what} of {where} differs from the model's at {at} "
                        f"(model {ours[idx]:.10g}, PyBullet {theirs[idx]:.10g}, relative difference "
                        f"{abs(ours[idx] - theirs[idx]) / scale:.3g} > {PARITY_RTOL:g}) "
                        f"at q = {np.round(q[k], 4).tolist()}"
                    )
            singular = _singular_joint(M)
            if singular is not None:
                j = robot.joints[singular]
                return (
                    f"joint '{j.name}' of {where} moves (almost) no mass or inertia: the mass matrix is singular at "
                    f"q = {np.round(q[k], 4).tolist()}, and PyBullet's forward dynamics would divide by zero. Give "
                    f"link '{j.link_name}' (or the links it carries) a mass and an inertia about the joint axis, "
                    "or make the joint fixed"
                )
        log.debug("parity gate passed for %s: PyBullet equals the model to %g", where, PARITY_RTOL)
        return None

    # ------------------------------------------------------------------ state
    def reset(self, q, qd=None) -> None:
        """Put the arm at ``q`` (n,) with velocity ``qd`` (n,, default zero) and time 0."""
        qd = np.zeros(self.robot.n_dof) if qd is None else qd
        for k, j in enumerate(self.joint_ids):
            p.resetJointState(self.body, j, float(q[k]), float(qd[k]), physicsClientId=self.client)
        self.t = 0.0

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """Current (q, qd), each (n,)."""
        states = p.getJointStates(self.body, self.joint_ids, physicsClientId=self.client)
        return np.array([s[0] for s in states]), np.array([s[1] for s in states])

    def _state_lists(self) -> tuple[list[float], list[float]]:
        states = p.getJointStates(self.body, self.joint_ids, physicsClientId=self.client)
        return [s[0] for s in states], [s[1] for s in states]

    # ------------------------------------------------------------------ stepping
    def step_acceleration(self, qdd_cmd: list[float], q: list[float], qd: list[float]) -> list[float]:
        """One step realising ``qdd_cmd`` exactly at the state (q, qd); returns the rigid-body
        torque Bullet received (the motor torque adds ``Ia·qdd_cmd + friction(qd)``).

        All three should be lists of n floats (the tracking loop's fast path); anything else is
        converted first, since PyBullet's inverse dynamics crashes the interpreter on numpy arrays.
        """
        if type(qdd_cmd) is not list or type(q) is not list or type(qd) is not list:
            qdd_cmd, q, qd = (np.asarray(x, float).tolist() for x in (qdd_cmd, q, qd))
        tau_rb = p.calculateInverseDynamics(self.body, q, qd, qdd_cmd, physicsClientId=self.client)
        p.setJointMotorControlArray(
            self.body, self.joint_ids, p.TORQUE_CONTROL, forces=tau_rb, physicsClientId=self.client
        )
        p.stepSimulation(physicsClientId=self.client)
        self.t += self.dt
        return tau_rb

    def step_torque(self, tau_motor: np.ndarray) -> np.ndarray:
        """One step under motor torque ``tau_motor`` (n,) with rotor inertia and friction acting;
        returns the joint acceleration (n,) realised during the step."""
        q, qd = self._state_lists()
        return self._step_torque(np.asarray(tau_motor, float), q, qd)[0]

    def step_controlled(self, control) -> tuple[list[float], list[float], list[float], np.ndarray]:
        """One step under the motor torque ``control(q, qd)`` (n floats) at the state read from Bullet (lists of
        n floats, a control loop's fast path); returns (q, qd, that torque, the joint acceleration (n,) realised)."""
        q, qd = self._state_lists()
        tau = control(q, qd)
        return q, qd, tau, self._step_torque(np.asarray(tau, float), q, qd)[0]

    def _step_torque(self, tau_motor: np.ndarray, q: list[float], qd: list[float]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`step_torque` at the known state (q, qd); returns (qdd, rigid-body torque Bullet received)."""
        c = self.client
        M = np.array(p.calculateMassMatrix(self.body, q, physicsClientId=c))
        h = np.array(p.calculateInverseDynamics(self.body, q, qd, [0.0] * len(q), physicsClientId=c))
        robot = self.robot
        rhs = tau_motor - h - robot.friction.torque(np.asarray(qd)[None])[0]
        rotor = robot.rotor_inertia
        M_total = M + np.diag(rotor) if rotor is not None else M
        if robot.coupling:
            rhs = rhs - robot.coupling.torque(np.asarray(qd)[None], None, robot.friction.sign_smoothing)[0]
            M_total = M_total + robot.coupling.inertia(robot.n_dof)
        qdd = np.linalg.solve(M_total, rhs)
        tau_rb = M @ qdd + h
        p.setJointMotorControlArray(
            self.body, self.joint_ids, p.TORQUE_CONTROL, forces=tau_rb.tolist(), physicsClientId=c
        )
        p.stepSimulation(physicsClientId=c)
        self.t += self.dt
        return qdd, tau_rb

    def motor_torque(self, tau_rb: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """Motor torque (N, n) from Bullet's rigid-body torque: + rotor inertia + friction + coupled drives."""
        robot = self.robot
        tau = np.asarray(tau_rb, float)
        if robot.rotor_inertia is not None:
            tau = tau + robot.rotor_inertia * qdd
        tau = tau + robot.friction.torque(qd)
        if robot.coupling:
            tau = tau + robot.coupling.torque(qd, qdd, robot.friction.sign_smoothing)
        return tau

    # ------------------------------------------------------------------ tracking
    def track(
        self,
        q_ref: np.ndarray,
        qd_ref: np.ndarray,
        qdd_ref: np.ndarray,
        decimation: int = 1,
        controller: Controller | None = None,
        progress=None,
    ) -> dict[str, np.ndarray]:
        """Follow a reference sampled at every physics step under ``controller``.

        The controller is reset with ``Plant(robot, dt)`` (the true model) and the arm with the
        reference's first state. At every step it sees the state read from Bullet and the
        reference row. An :class:`~robotid_sim.control.AccelerationController` whose model is
        this robot has its commanded acceleration realised exactly by
        :meth:`step_acceleration` (computed torque on the true model); any other controller's
        motor torque goes through :meth:`step_torque`.

        Args:
            q_ref, qd_ref, qdd_ref: (S, n) reference at the S physics steps.
            decimation: record every ``decimation``-th step.
            controller: a :class:`~robotid_sim.control.Controller`; default
                :class:`~robotid_sim.control.ComputedTorquePD` (kp = 400 1/s², kd = 40 1/s).
            progress: optional ``progress("simulate", steps_done, steps_total)``, called every 1000 steps.

        Returns:
            dict of recorded arrays: ``t`` (N,), ``q``, ``qd``, ``qdd`` (the acceleration Bullet
            realised), ``tau`` (motor torque), ``tau_rigid`` (what Bullet received), each
            (N, n), N = ceil(S / decimation).

        Raises:
            DataError: the reference does not have shape (S, n); the controller returned a
                torque or acceleration of the wrong shape or not finite (naming it and the
                step); a joint left its limits.
        """
        n = self.robot.n_dof
        self._check_reference(q_ref, qd_ref, qdd_ref)
        S = len(q_ref)
        controller = ComputedTorquePD() if controller is None else controller
        controller.reset(Plant(self.robot, self.dt))
        exact = isinstance(controller, AccelerationController) and controller.model is self.robot
        self.reset(q_ref[0], qd_ref[0])
        N = (S + decimation - 1) // decimation
        rec_q, rec_qd, rec_qdd, rec_rigid = (np.empty((N, n)) for _ in range(4))
        rec_t = np.empty(N)
        if exact:  # the motor torque is computed afterwards, batched; the loop works on lists
            rec_tau = None
            qr, qdr, qddr = q_ref.tolist(), qd_ref.tolist(), qdd_ref.tolist()
            acceleration = controller.acceleration_lists
        else:
            rec_tau = np.empty((N, n))
        dt = self.dt
        k = 0
        for s in range(S):
            q, qd = self._state_lists()
            t = s * dt
            if exact:
                qdd = self._checked_acceleration(acceleration(t, q, qd, qr[s], qdr[s], qddr[s]), controller, s)
                tau_rb = self.step_acceleration(qdd, q, qd)
            else:
                tau = self._controller_torque(controller, t, q, qd, Reference(q_ref[s], qd_ref[s], qdd_ref[s]), s)
                qdd, tau_rb = self._step_torque(tau, q, qd)
            if s % decimation == 0:
                rec_t[k] = t
                rec_q[k], rec_qd[k], rec_qdd[k], rec_rigid[k] = q, qd, qdd, tau_rb
                if not exact:
                    rec_tau[k] = tau
                k += 1
            if progress is not None and s % 1000 == 0:
                progress("simulate", s, S)
        if progress is not None:
            progress("simulate", S, S)
        self.check_positions(rec_q, q_ref=q_ref[::decimation], controller=controller.label)
        motor = self.motor_torque(rec_rigid, rec_qd, rec_qdd) if exact else rec_tau
        return {"t": rec_t, "q": rec_q, "qd": rec_qd, "qdd": rec_qdd, "tau": motor, "tau_rigid": rec_rigid}

    def _check_reference(self, q_ref, qd_ref, qdd_ref) -> None:
        """A DataError unless the three references are (S, n) arrays of the same S."""
        n = self.robot.n_dof
        for name, ref in (("q_ref", q_ref), ("qd_ref", qd_ref), ("qdd_ref", qdd_ref)):
            if np.ndim(ref) != 2 or np.shape(ref) != (len(q_ref), n):
                raise DataError(f"'{name}' must have shape (S, {n}) like q_ref, got {np.shape(ref)}")

    def _checked_acceleration(self, qdd, controller: Controller, step: int) -> list[float]:
        """An acceleration controller's output at ``step`` as a list of n finite floats (a quick check of the
        list it should be first; anything else through :meth:`_controller_output`)."""
        try:
            valid = type(qdd) is list and len(qdd) == self.robot.n_dof and isfinite(sum(qdd))
        except TypeError:
            valid = False
        return qdd if valid else self._controller_output(qdd, controller, "acceleration", step).tolist()

    def _controller_torque(self, controller: Controller, t: float, q, qd, reference: Reference, step: int):
        """A torque controller's motor torque (n,) at ``step``, checked; its DataError names it and the step."""
        try:
            tau = controller(t, np.array(q), np.array(qd), reference)
        except DataError as exc:
            raise DataError(f"controller '{controller.label}' failed at step {step} (t = {t:.6g} s): {exc}") from exc
        return self._controller_output(tau, controller, "torque", step)

    def _controller_output(self, value, controller: Controller, what: str, step: int) -> np.ndarray:
        """``value`` as (n,) floats, or a :class:`DataError` naming the controller and the step."""
        n = self.robot.n_dof
        where = f"controller '{controller.label}' returned"
        when = f"at step {step} (t = {step * self.dt:.6g} s)"
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{where} a {what} that is not {n} numbers {when}: {value!r}") from exc
        if arr.shape != (n,):
            raise DataError(f"{where} a {what} of shape {arr.shape} {when}; expected ({n},), one value per joint")
        if not np.all(np.isfinite(arr)):
            raise DataError(f"{where} a non-finite {what} {when}: {arr.tolist()}")
        return arr

    def check_positions(
        self, q: np.ndarray, tolerance: float = 1e-6, q_ref: np.ndarray | None = None, controller: str = ""
    ) -> None:
        """Raise :class:`DataError` naming the joint if any position left its limits.

        With the reference ``q_ref`` (same rows as ``q``) inside the limits, the message blames the tracking
        controller ``controller`` (its gains), not the excitation.
        """
        lo, hi = self.robot.position_limits
        below = q < lo - tolerance
        above = q > hi + tolerance
        if below.any() or above.any():
            j = int(np.argwhere(below | above)[0][1])
            reference_inside = q_ref is not None and bool(
                np.all((q_ref[:, j] >= lo[j] - tolerance) & (q_ref[:, j] <= hi[j] + tolerance))
            )
            fix = (
                f"the reference stayed inside them, so the controller '{controller}' did not track it (unstable or "
                "too weak gains?): change its gains"
                if reference_inside
                else "reduce the excitation amplitude"
            )
            raise DataError(
                f"joint '{self.robot.joint_names[j]}' left its limits [{lo[j]:.4g}, {hi[j]:.4g}] during "
                f"simulation (range reached {q[:, j].min():.4g} .. {q[:, j].max():.4g}); {fix}"
            )

    # ------------------------------------------------------------------ rendering
    def render(self, width: int = 320, height: int = 240, distance: float | None = None) -> np.ndarray:
        """An RGB frame (height, width, 3) uint8 from the TinyRenderer camera."""
        reach = sum(float(np.linalg.norm(j.origin_translation)) for j in self.robot.joints) or 1.0
        distance = distance or 2.2 * reach
        view = p.computeViewMatrixFromYawPitchRoll(
            cameraTargetPosition=[0, 0, 0.4 * reach],
            distance=distance,
            yaw=45,
            pitch=-25,
            roll=0,
            upAxisIndex=2,
            physicsClientId=self.client,
        )
        proj = p.computeProjectionMatrixFOV(
            fov=60, aspect=width / height, nearVal=0.01, farVal=20, physicsClientId=self.client
        )
        img = p.getCameraImage(width, height, view, proj, renderer=p.ER_TINY_RENDERER, physicsClientId=self.client)
        return np.reshape(np.asarray(img[2], dtype=np.uint8), (height, width, 4))[..., :3]

    def close(self) -> None:
        if self.client is not None and p.isConnected(self.client):
            p.disconnect(self.client)
        self.client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _refuse_inconsistent_bodies(robot: Robot) -> None:
    """Refuse moving bodies whose inertia PyBullet would silently zero (semidefinite conditions)."""
    consistent = physical.physically_consistent(robot.inertials, strict=False)
    for j, ok in zip(robot.joints, consistent, strict=True):
        if not ok:
            problems = physical.link_violations(j.inertial, name=f"link '{j.link_name}'", strict=False)
            raise ModelError(
                f"PyBullet cannot simulate robot '{robot.name}' as modelled: {'; '.join(problems)}. PyBullet would "
                f"silently change this link; fix the <inertial> of link '{j.link_name}' in {robot.urdf_path} (or "
                "the parameters given to with_parameters)"
            )


def _inertial_difference(phi: np.ndarray, used: tuple[float, np.ndarray, np.ndarray]) -> str | None:
    """How PyBullet's (mass, COM, inertia about the COM) differs from ``phi`` (10,) beyond PARITY_RTOL, or None."""
    m, c, I_C = split_inertial(phi)
    m_pb, c_pb, I_pb = used
    if abs(m - m_pb) > PARITY_RTOL * max(abs(m), abs(m_pb)):
        return f"mass {m:.10g} kg in the model, {m_pb:.10g} kg in PyBullet"
    if m != 0 and np.abs(c - c_pb).max() > PARITY_RTOL * max(1.0, np.abs(c).max()):
        return f"centre of mass {np.round(c, 6).tolist()} m in the model, {np.round(c_pb, 6).tolist()} m in PyBullet"
    scale = max(np.trace(I_C), np.trace(I_pb), 0.0)
    if np.abs(I_C - I_pb).max() > PARITY_RTOL * scale or (scale == 0 and np.any(I_C != I_pb)):
        lam, lam_pb = np.linalg.eigvalsh(I_C), np.linalg.eigvalsh(I_pb)
        return (
            f"principal moments of inertia about the COM {np.round(lam, 9).tolist()} kg·m² in the model, "
            f"{np.round(lam_pb, 9).tolist()} kg·m² in PyBullet"
        )
    return None


def _singular_joint(M: np.ndarray) -> int | None:
    """Index of a joint that makes the mass matrix (n, n) singular, or None if it is regular."""
    d = np.diag(M)
    if not np.all(d > SINGULAR_RTOL * max(d.max(), np.finfo(float).tiny)):
        return int(np.argmin(d))
    scaled = M / np.sqrt(np.outer(d, d))
    w, V = np.linalg.eigh(scaled)
    if w[0] > SINGULAR_RTOL:
        return None
    return int(np.argmax(np.abs(V[:, 0])))
