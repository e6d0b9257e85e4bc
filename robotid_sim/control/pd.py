"""PD controllers: :class:`ComputedTorquePD` (the simulator's default tracking controller) and
the torque-mode :class:`PD` (SPEC §5, §10)."""

from __future__ import annotations

import numpy as np

from robotid_sim.control.base import (
    COMPUTED_TORQUE_KD,
    COMPUTED_TORQUE_KP,
    SEED000_KD,
    SEED000_KP,
    AccelerationController,
    Controller,
    Plant,
    Reference,
    flag_option,
    per_joint_gain,
)


class ComputedTorquePD(AccelerationController):
    """Computed torque + PD: qdd_cmd = qdd_ref + kd (qd_ref - qd) + kp (q_ref - q).

    On the plant's own model this linearises the arm exactly, so every joint's error follows
    ë + kd ė + kp e = 0; the defaults give a critically damped 20 rad/s error dynamics. In the
    PyBullet simulator it is computed torque on the true model: Bullet realises qdd_cmd exactly.

    Args:
        kp: position gain (1/s²), a scalar or one per joint.
        kd: velocity gain (1/s), a scalar or one per joint.
    """

    name = "computed_torque_pd"

    def __init__(self, kp: float | np.ndarray = COMPUTED_TORQUE_KP, kd: float | np.ndarray = COMPUTED_TORQUE_KD):
        self.kp = kp
        self.kd = kd

    def reset(self, plant: Plant) -> None:
        super().reset(plant)
        self._kp = per_joint_gain(self.kp, plant.n_dof, "kp", self.label).tolist()
        self._kd = per_joint_gain(self.kd, plant.n_dof, "kd", self.label).tolist()
        self._joints = range(plant.n_dof)

    def acceleration(self, t: float, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        return np.array(self.acceleration_lists(t, q, qd, reference.q, reference.qd, reference.qdd))

    def acceleration_lists(self, t, q, qd, q_ref, qd_ref, qdd_ref) -> list[float]:
        # per joint in plain Python, cheaper than numpy for a few joints; the recorded data
        # depend bit for bit on this order of the operations
        kp, kd = self._kp, self._kd
        return [qdd_ref[i] + kd[i] * (qd_ref[i] - qd[i]) + kp[i] * (q_ref[i] - q[i]) for i in self._joints]

    def describe(self) -> dict:
        """``{"type": "computed_torque_true_model_pd", "kp": ..., "kd": ...}``, the metadata
        datasets have carried since before controllers were pluggable (gains as floats, or lists
        of floats per joint)."""

        def gain(value):
            arr = np.asarray(value, dtype=float)
            return float(arr) if arr.ndim == 0 else arr.tolist()

        return {"type": "computed_torque_true_model_pd", "kp": gain(self.kp), "kd": gain(self.kd)}


class PD(Controller):
    """Torque-mode PD: tau = kp (q_ref - q) + kd (qd_ref - qd) [+ g(q)].

    Args:
        kp: position gain (N·m/rad, N/m for prismatic joints), a scalar or one per joint;
            the default is seed 000's PID proportional gain.
        kd: velocity gain (N·m·s/rad, N·s/m), a scalar or one per joint; seed 000's.
        gravity_compensation: add the plant model's torque at rest at q
            (:meth:`Plant.gravity_torque`: gravity, and a friction offset where there is one).
    """

    name = "pd"

    def __init__(
        self,
        kp: float | np.ndarray = SEED000_KP,
        kd: float | np.ndarray = SEED000_KD,
        gravity_compensation: bool = False,
    ):
        self.kp = kp
        self.kd = kd
        self.gravity_compensation = gravity_compensation

    def reset(self, plant: Plant) -> None:
        super().reset(plant)
        self._kp = per_joint_gain(self.kp, plant.n_dof, "kp", self.label)
        self._kd = per_joint_gain(self.kd, plant.n_dof, "kd", self.label)
        flag_option(self.gravity_compensation, "gravity_compensation", self.label)

    def __call__(self, t: float, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        tau = self._kp * (reference.q - q) + self._kd * (reference.qd - qd)
        if self.gravity_compensation:
            tau = tau + self.plant.gravity_torque(q)
        return tau
