"""The torque-mode PD controller :class:`PD` (SPEC §5, §10).

Computed torque + PD, :class:`~robotid_sim.sim.tracking.ComputedTorquePD`, is the simulator's default
tracking controller and lives with it in :mod:`robotid_sim.sim.tracking`."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from robotid_sim.control.pid import SEED000_KD, SEED000_KP
from robotid_sim.sim.tracking import Controller, Gain, Plant, Reference, flag_option, per_joint_gain


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

    class Options(Controller.Options):
        kp: Gain = Field(SEED000_KP, description="position gain (N·m/rad, N/m), a scalar or one per joint")
        kd: Gain = Field(SEED000_KD, description="velocity gain (N·m·s/rad, N·s/m), a scalar or one per joint")
        gravity_compensation: Any = Field(False, description="add the plant model's torque at rest at q (true/false)")

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
