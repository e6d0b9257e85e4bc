"""Torque-mode PID, seed 000's model-free baseline (SPEC §10)."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from robotid_sim.sim.tracking import Controller, Gain, Plant, Reference, flag_option, per_joint_gain

#: seed 000's PID gains, "Kp = 80, Ki = 8, and Kd = 2" (N·m/rad, N·m/(rad·s), N·m·s/rad), shared by
#: every controller of its comparison (``pid``, ``feedforward``, and ``pd`` without the integral)
SEED000_KP = 80.0
SEED000_KI = 8.0
SEED000_KD = 2.0


class PID(Controller):
    """Torque-mode PID: tau = kp e + ki ∫e dt + kd ė [+ g(q)], with e = q_ref - q, ė = qd_ref - qd.

    Seed 000 compares "the classic PID control in the torque mode" with its model-based
    controllers (Eqs. 35–36) at Kp = 80, Ki = 8, Kd = 2, the defaults here. ė uses the measured
    velocity, not a differentiated position. The integral ∫e dt is a rectangle sum over the
    control steps (the error of the current step included), reset to zero by :meth:`reset`.

    Args:
        kp: proportional gain (N·m/rad, N/m for prismatic joints), a scalar or one per joint.
        ki: integral gain (N·m/(rad·s), N/(m·s)), a scalar or one per joint.
        kd: derivative gain (N·m·s/rad, N·s/m), a scalar or one per joint.
        integral_limit: anti-windup clamp: the integral term ``ki ∫e dt`` is kept within
            ± this torque (N·m or N), a scalar or one per joint; None (the default): no clamp.
        gravity_compensation: add the plant model's torque at rest at q
            (:meth:`Plant.gravity_torque`: gravity, and a friction offset where there is one).
    """

    name = "pid"

    class Options(Controller.Options):
        kp: Gain = Field(SEED000_KP, description="proportional gain (N·m/rad, N/m), a scalar or one per joint")
        ki: Gain = Field(SEED000_KI, description="integral gain (N·m/(rad·s), N/(m·s)), a scalar or one per joint")
        kd: Gain = Field(SEED000_KD, description="derivative gain (N·m·s/rad, N·s/m), a scalar or one per joint")
        integral_limit: Gain = Field(None, description="clamp on the integral term ki ∫e dt (N·m or N); None: none")
        gravity_compensation: Any = Field(False, description="add the plant model's torque at rest at q (true/false)")

    def reset(self, plant: Plant) -> None:
        """Resolve the gains for ``plant``'s joints and set the integral ∫e dt (n,) to zero."""
        super().reset(plant)
        n = plant.n_dof
        self._kp = per_joint_gain(self.kp, n, "kp", self.label)
        self._ki = per_joint_gain(self.ki, n, "ki", self.label)
        self._kd = per_joint_gain(self.kd, n, "kd", self.label)
        self._bound = np.full(n, np.inf)  # on ∫e dt, from the clamp on ki ∫e dt
        if self.integral_limit is not None:
            limit = per_joint_gain(self.integral_limit, n, "integral_limit", self.label)
            active = self._ki > 0
            self._bound[active] = limit[active] / self._ki[active]
        self._gravity = flag_option(self.gravity_compensation, "gravity_compensation", self.label)
        self._dt = plant.dt
        self.integral = np.zeros(n)

    def feedback(self, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        """The PID torque (n,) at this step; adds this step's error to the integral."""
        e = reference.q - q
        self.integral = np.clip(self.integral + e * self._dt, -self._bound, self._bound)
        return self._kp * e + self._ki * self.integral + self._kd * (reference.qd - qd)

    def __call__(self, t: float, q: np.ndarray, qd: np.ndarray, reference: Reference) -> np.ndarray:
        tau = self.feedback(q, qd, reference)
        if self._gravity:
            tau = tau + self.plant.gravity_torque(q)
        return tau
