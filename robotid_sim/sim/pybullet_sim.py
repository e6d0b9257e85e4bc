"""PyBullet backend made exact (SPEC §5).

The exactness traps and what this module does about each:

- inertia recomputed from collision shapes -> loaded with ``URDF_USE_INERTIA_FROM_FILE``;
- default link linear/angular damping and URDF joint damping -> all set to zero with
  ``changeDynamics``;
- default velocity motors resist motion -> disabled (VELOCITY_CONTROL with force 0) before
  TORQUE_CONTROL;
- joint limits are enforced by Bullet -> the reference is checked against the limits before
  running, and the simulated positions after;
- no joint friction or rotor inertia in torque mode -> injected: the *measured* motor torque is
  rigid-body torque + rotor inertia term + the sidecar friction law, while Bullet only receives
  the rigid-body part.

Two ways to step the arm:

- :meth:`PyBulletSimulator.step_acceleration`: computed torque on the true model. Bullet
  receives ``calculateInverseDynamics(q, qd, qdd_cmd)`` and realises ``qdd_cmd`` exactly; the
  motor torque is that plus ``Ia·qdd_cmd + friction(qd)`` (computed afterwards, batched).
- :meth:`PyBulletSimulator.step_torque`: any motor torque. The joint acceleration of the arm
  with rotor inertia and friction, qdd = (M + Ia)^-1 (tau - h - friction), is computed from
  Bullet's own mass matrix and bias, and Bullet receives ``tau - friction - Ia·qdd``.

:meth:`PyBulletSimulator.track` follows a reference under any controller of
:mod:`robotid_sim.control` in one loop: an
:class:`~robotid_sim.control.AccelerationController` on the true model (the default
:class:`~robotid_sim.control.ComputedTorquePD`) is stepped with ``step_acceleration``, any other
controller's motor torque with ``step_torque``. Either way the recorded torque is the motor
torque and the recorded acceleration the one Bullet realised, so the recorded data satisfy the
robot's inverse dynamics exactly.
"""

from __future__ import annotations

import logging
from math import isfinite

import numpy as np
import pybullet as p

from robotid_sim.control import AccelerationController, ComputedTorquePD, Controller, Plant, Reference
from robotid_sim.errors import DataError, ModelError
from robotid_sim.robot.model import Robot

log = logging.getLogger(__name__)

#: default physics step (s), SPEC §5
DEFAULT_DT = 1e-3


class PyBulletSimulator:
    """A headless (DIRECT) PyBullet world holding one fixed-base arm.

    Args:
        robot: the robot; its URDF is what Bullet loads.
        dt: physics step in seconds.
    """

    def __init__(self, robot: Robot, dt: float = DEFAULT_DT):
        if robot.urdf_path is None:
            raise ModelError("the robot has no URDF file on disk; PyBullet needs one (save the URDF text first)")
        if not dt > 0:
            raise DataError(f"dt must be > 0, got {dt}")
        self.robot = robot
        self.dt = float(dt)
        self.client = p.connect(p.DIRECT)
        c = self.client
        p.setGravity(*map(float, robot.gravity), physicsClientId=c)
        p.setTimeStep(self.dt, physicsClientId=c)
        self.body = p.loadURDF(
            str(robot.urdf_path), useFixedBase=True, flags=p.URDF_USE_INERTIA_FROM_FILE, physicsClientId=c
        )
        names = {}
        for i in range(p.getNumJoints(self.body, physicsClientId=c)):
            info = p.getJointInfo(self.body, i, physicsClientId=c)
            if info[2] != p.JOINT_FIXED:
                names[info[1].decode()] = i
        missing = [nm for nm in robot.joint_names if nm not in names]
        if missing:
            raise ModelError(f"PyBullet did not find the moving joints {missing} in {robot.urdf_path}")
        self.joint_ids = [names[nm] for nm in robot.joint_names]
        if sorted(self.joint_ids) != self.joint_ids:
            raise ModelError("PyBullet orders the moving joints differently from the URDF chain")
        for link in range(-1, p.getNumJoints(self.body, physicsClientId=c)):
            p.changeDynamics(
                self.body,
                link,
                linearDamping=0.0,
                angularDamping=0.0,
                jointDamping=0.0,
                maxJointVelocity=1e4,
                physicsClientId=c,
            )
        n = robot.n_dof
        p.setJointMotorControlArray(self.body, self.joint_ids, p.VELOCITY_CONTROL, forces=[0.0] * n, physicsClientId=c)
        self.t = 0.0

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

    def _step_torque(self, tau_motor: np.ndarray, q: list[float], qd: list[float]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`step_torque` at the known state (q, qd); returns (qdd, rigid-body torque Bullet received)."""
        c = self.client
        M = np.array(p.calculateMassMatrix(self.body, q, physicsClientId=c))
        h = np.array(p.calculateInverseDynamics(self.body, q, qd, [0.0] * len(q), physicsClientId=c))
        rhs = tau_motor - h - self.robot.friction.torque(np.asarray(qd)[None])[0]
        rotor = self.robot.rotor_inertia
        M_total = M + np.diag(rotor) if rotor is not None else M
        qdd = np.linalg.solve(M_total, rhs)
        tau_rb = M @ qdd + h
        p.setJointMotorControlArray(
            self.body, self.joint_ids, p.TORQUE_CONTROL, forces=tau_rb.tolist(), physicsClientId=c
        )
        p.stepSimulation(physicsClientId=c)
        self.t += self.dt
        return qdd, tau_rb

    def motor_torque(self, tau_rb: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> np.ndarray:
        """Motor torque (N, n) from Bullet's rigid-body torque: + rotor inertia + friction."""
        tau = np.asarray(tau_rb, float)
        if self.robot.rotor_inertia is not None:
            tau = tau + self.robot.rotor_inertia * qdd
        return tau + self.robot.friction.torque(qd)

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
            progress: optional callable(steps_done, steps_total) called every 1000 steps.

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
        for name, ref in (("q_ref", q_ref), ("qd_ref", qd_ref), ("qdd_ref", qdd_ref)):
            if np.ndim(ref) != 2 or np.shape(ref) != (len(q_ref), n):
                raise DataError(f"'{name}' must have shape (S, {n}) like q_ref, got {np.shape(ref)}")
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
                qdd = acceleration(t, q, qd, qr[s], qdr[s], qddr[s])
                try:
                    valid = type(qdd) is list and len(qdd) == n and isfinite(sum(qdd))
                except TypeError:
                    valid = False
                if not valid:
                    qdd = self._controller_output(qdd, controller, "acceleration", s).tolist()
                tau_rb = self.step_acceleration(qdd, q, qd)
            else:
                try:
                    tau = controller(t, np.array(q), np.array(qd), Reference(q_ref[s], qd_ref[s], qdd_ref[s]))
                except DataError as exc:
                    raise DataError(
                        f"controller '{controller.label}' failed at step {s} (t = {t:.6g} s): {exc}"
                    ) from exc
                tau = self._controller_output(tau, controller, "torque", s)
                qdd, tau_rb = self._step_torque(tau, q, qd)
            if s % decimation == 0:
                rec_t[k] = t
                rec_q[k], rec_qd[k], rec_qdd[k], rec_rigid[k] = q, qd, qdd, tau_rb
                if not exact:
                    rec_tau[k] = tau
                k += 1
            if progress is not None and s % 1000 == 0:
                progress(s, S)
        if progress is not None:
            progress(S, S)
        self.check_positions(rec_q)
        return {
            "t": rec_t,
            "q": rec_q,
            "qd": rec_qd,
            "qdd": rec_qdd,
            "tau": self.motor_torque(rec_rigid, rec_qd, rec_qdd) if exact else rec_tau,
            "tau_rigid": rec_rigid,
        }

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

    def check_positions(self, q: np.ndarray, tolerance: float = 1e-6) -> None:
        """Raise :class:`DataError` naming the joint if any position left its limits."""
        lo, hi = self.robot.position_limits
        below = q < lo - tolerance
        above = q > hi + tolerance
        if below.any() or above.any():
            j = int(np.argwhere(below | above)[0][1])
            raise DataError(
                f"joint '{self.robot.joint_names[j]}' left its limits [{lo[j]:.4g}, {hi[j]:.4g}] during "
                f"simulation (range reached {q[:, j].min():.4g} .. {q[:, j].max():.4g}); "
                "reduce the excitation amplitude"
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
