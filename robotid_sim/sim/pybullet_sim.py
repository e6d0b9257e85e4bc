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

Two ways to drive the arm:

- :meth:`PyBulletSimulator.step_acceleration`: computed torque on the true model. Bullet
  receives ``calculateInverseDynamics(q, qd, qdd_cmd)`` and realises ``qdd_cmd`` exactly; the
  motor torque is that plus ``Ia·qdd_cmd + friction(qd)`` (computed afterwards, batched).
- :meth:`PyBulletSimulator.step_torque`: any motor torque (PID, ...). The joint acceleration of
  the arm with rotor inertia and friction, qdd = (M + Ia)^-1 (tau - h - friction), is computed
  from Bullet's own mass matrix and bias, and Bullet receives ``tau - friction - Ia·qdd``.
"""

from __future__ import annotations

import logging

import numpy as np
import pybullet as p

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
            p.changeDynamics(self.body, link, linearDamping=0.0, angularDamping=0.0, jointDamping=0.0,
                             maxJointVelocity=1e4, physicsClientId=c)
        n = robot.n_dof
        p.setJointMotorControlArray(self.body, self.joint_ids, p.VELOCITY_CONTROL, forces=[0.0] * n,
                                    physicsClientId=c)
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
        torque Bullet received (the motor torque adds ``Ia·qdd_cmd + friction(qd)``)."""
        tau_rb = p.calculateInverseDynamics(self.body, q, qd, qdd_cmd, physicsClientId=self.client)
        p.setJointMotorControlArray(self.body, self.joint_ids, p.TORQUE_CONTROL, forces=tau_rb,
                                    physicsClientId=self.client)
        p.stepSimulation(physicsClientId=self.client)
        self.t += self.dt
        return tau_rb

    def step_torque(self, tau_motor: np.ndarray) -> np.ndarray:
        """One step under motor torque ``tau_motor`` (n,) with rotor inertia and friction acting;
        returns the joint acceleration (n,) realised during the step."""
        q, qd = self._state_lists()
        c = self.client
        M = np.array(p.calculateMassMatrix(self.body, q, physicsClientId=c))
        h = np.array(p.calculateInverseDynamics(self.body, q, qd, [0.0] * len(q), physicsClientId=c))
        rhs = np.asarray(tau_motor, float) - h - self.robot.friction.torque(np.asarray(qd)[None])[0]
        rotor = self.robot.rotor_inertia
        M_total = M + np.diag(rotor) if rotor is not None else M
        qdd = np.linalg.solve(M_total, rhs)
        tau_rb = M @ qdd + h
        p.setJointMotorControlArray(self.body, self.joint_ids, p.TORQUE_CONTROL, forces=tau_rb.tolist(),
                                    physicsClientId=c)
        p.stepSimulation(physicsClientId=c)
        self.t += self.dt
        return qdd

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
        kp: float | np.ndarray = 400.0,
        kd: float | np.ndarray = 40.0,
        progress=None,
    ) -> dict[str, np.ndarray]:
        """Follow a reference sampled at every physics step with computed torque on the true
        model + PD: qdd_cmd = qdd_ref + kd (qd_ref - qd) + kp (q_ref - q).

        Args:
            q_ref, qd_ref, qdd_ref: (S, n) reference at the S physics steps.
            decimation: record every ``decimation``-th step.
            kp, kd: PD gains (1/s², 1/s), scalars or (n,).
            progress: optional callable(steps_done, steps_total) called every 1000 steps.

        Returns:
            dict of recorded arrays: ``t`` (N,), ``q``, ``qd``, ``qdd``, ``tau`` (motor torque),
            ``tau_rigid`` (what Bullet received), each (N, n), N = ceil(S / decimation).
        """
        S, n = q_ref.shape
        self.reset(q_ref[0], qd_ref[0])
        kp = np.broadcast_to(np.asarray(kp, float), (n,))
        kd = np.broadcast_to(np.asarray(kd, float), (n,))
        N = (S + decimation - 1) // decimation
        rec_q, rec_qd, rec_qdd, rec_tau = (np.empty((N, n)) for _ in range(4))
        rec_t = np.empty(N)
        # the PD correction is cheap in plain Python for small n; numpy per step costs more
        kp_l, kd_l = kp.tolist(), kd.tolist()
        qr, qdr, qddr = q_ref.tolist(), qd_ref.tolist(), qdd_ref.tolist()
        rng = range(n)
        k = 0
        for s in range(S):
            q, qd = self._state_lists()
            a, b, c = qr[s], qdr[s], qddr[s]
            qdd_cmd = [c[i] + kd_l[i] * (b[i] - qd[i]) + kp_l[i] * (a[i] - q[i]) for i in rng]
            tau_rb = self.step_acceleration(qdd_cmd, q, qd)
            if s % decimation == 0:
                rec_t[k] = s * self.dt
                rec_q[k], rec_qd[k], rec_qdd[k], rec_tau[k] = q, qd, qdd_cmd, tau_rb
                k += 1
            if progress is not None and s % 1000 == 0:
                progress(s, S)
        if progress is not None:
            progress(S, S)
        self.check_positions(rec_q)
        return {
            "t": rec_t, "q": rec_q, "qd": rec_qd, "qdd": rec_qdd,
            "tau": self.motor_torque(rec_tau, rec_qd, rec_qdd), "tau_rigid": rec_tau,
        }

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
            cameraTargetPosition=[0, 0, 0.4 * reach], distance=distance, yaw=45, pitch=-25, roll=0,
            upAxisIndex=2, physicsClientId=self.client,
        )
        proj = p.computeProjectionMatrixFOV(fov=60, aspect=width / height, nearVal=0.01, farVal=20,
                                            physicsClientId=self.client)
        img = p.getCameraImage(width, height, view, proj, renderer=p.ER_TINY_RENDERER,
                               physicsClientId=self.client)
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
