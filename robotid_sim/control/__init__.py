"""Controllers that drive the arm along a reference (SPEC §5, §10).

A controller is configured with keyword options, reset with the :class:`Plant` it controls
(its model, the control period and n), then called once per step::

    controller = PD(kp=80.0, kd=2.0, gravity_compensation=True)
    controller.reset(Plant(robot, dt=1e-3))
    tau = controller(t, q, qd, Reference(q_ref, qd_ref, qdd_ref))   # motor torque (n,)

:meth:`robotid_sim.sim.PyBulletSimulator.track` and :func:`robotid_sim.sim.simulate` take any
controller (default :class:`ComputedTorquePD`, computed torque on the true model). Controllers
are also plugins: the built-in ones are registered as ``computed_torque_pd`` and ``pd``
(``robotid_sim.plugins.get_controller(name)``).
"""

from robotid_sim.control.base import (
    AccelerationController,
    Controller,
    Plant,
    Reference,
    model_torque,
    per_joint_gain,
)
from robotid_sim.control.pd import PD, ComputedTorquePD

__all__ = [
    "PD",
    "AccelerationController",
    "ComputedTorquePD",
    "Controller",
    "Plant",
    "Reference",
    "model_torque",
    "per_joint_gain",
]
