"""PyBullet as an independent reference for the dynamics core (tests only)."""

from __future__ import annotations

import numpy as np
import pybullet as p


class PyBulletReference:
    """A DIRECT PyBullet client with the robot loaded exactly (inertia from file, no damping)."""

    def __init__(self, urdf_path, gravity=(0.0, 0.0, -9.81), joint_names=None):
        self.client = p.connect(p.DIRECT)
        p.setGravity(*gravity, physicsClientId=self.client)
        self.body = p.loadURDF(
            str(urdf_path),
            useFixedBase=True,
            flags=p.URDF_USE_INERTIA_FROM_FILE,
            physicsClientId=self.client,
        )
        nj = p.getNumJoints(self.body, physicsClientId=self.client)
        info = [p.getJointInfo(self.body, i, physicsClientId=self.client) for i in range(nj)]
        self.movable = [i for i in range(nj) if info[i][2] != p.JOINT_FIXED]
        names = [info[i][1].decode() for i in self.movable]
        if joint_names is not None:
            assert names == list(joint_names), (names, joint_names)
        for i in range(-1, nj):
            p.changeDynamics(
                self.body, i, linearDamping=0, angularDamping=0, jointDamping=0, physicsClientId=self.client
            )

    def inverse_dynamics(self, q, qd, qdd) -> np.ndarray:
        return np.array(
            [
                p.calculateInverseDynamics(
                    self.body,
                    list(map(float, a)),
                    list(map(float, b)),
                    list(map(float, c)),
                    physicsClientId=self.client,
                )
                for a, b, c in zip(q, qd, qdd, strict=True)
            ]
        )

    def mass_matrix(self, q) -> np.ndarray:
        return np.array([p.calculateMassMatrix(self.body, list(map(float, a)), physicsClientId=self.client) for a in q])

    def step_acceleration(self, q, qd, tau, dt=1e-3) -> np.ndarray:
        """qdd produced by one stepSimulation from (q, qd) under torque tau (semi-implicit Euler)."""
        c = self.client
        p.setTimeStep(dt, physicsClientId=c)
        for k, j in enumerate(self.movable):
            p.resetJointState(self.body, j, float(q[k]), float(qd[k]), physicsClientId=c)
        p.setJointMotorControlArray(
            self.body, self.movable, p.VELOCITY_CONTROL, forces=[0.0] * len(self.movable), physicsClientId=c
        )
        p.setJointMotorControlArray(
            self.body, self.movable, p.TORQUE_CONTROL, forces=list(map(float, tau)), physicsClientId=c
        )
        p.stepSimulation(physicsClientId=c)
        qd_new = np.array([s[1] for s in p.getJointStates(self.body, self.movable, physicsClientId=c)])
        return (qd_new - qd) / dt

    def close(self):
        p.disconnect(self.client)
