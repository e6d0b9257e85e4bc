"""Controllers that drive the arm along a reference, and the closed-loop runs that compare them
(SPEC §5, §10).

The controller interface (:class:`Plant`, :class:`Reference`, :class:`Controller`,
:class:`AccelerationController`) and the simulator's default :class:`ComputedTorquePD` are defined in
:mod:`robotid_sim.sim.tracking`, the layer of the simulator that drives them, and exported here.

A controller is configured with keyword options, reset with the :class:`Plant` it controls
(its model, the control period and n), then called once per step::

    controller = PID(kp=80.0, ki=8.0, kd=2.0)
    controller.reset(Plant(robot, dt=1e-3))
    tau = controller(t, q, qd, Reference(q_ref, qd_ref, qdd_ref))   # motor torque (n,)

:meth:`robotid_sim.sim.PyBulletSimulator.track` and :func:`robotid_sim.sim.simulate` take any
controller (default :class:`ComputedTorquePD`, computed torque on the true model).
:func:`~robotid_sim.control.closed_loop.run_closed_loop` drives the PyBullet truth or an identified
model along a reference under one and reports the tracking error η (seed 000 Fig. 15).

Controllers are also plugins; the built-in ones (``robotid_sim.plugins.get_controller(name)``):

======================  ====================================================================
``pid``                 :class:`PID`: torque-mode PID (seed 000's gains)
``feedforward``         :class:`Feedforward`: a model's torque at the reference + PID
                        (seed 000 Eqs. 35–36)
``computed_torque``     :class:`ComputedTorque`: M̂(q)(qdd_ref + kd ė + kp e) + ĥ(q, qd)
``pd``                  :class:`PD`: torque-mode PD, optionally gravity-compensated
``computed_torque_pd``  :class:`ComputedTorquePD`: computed torque on the plant's own model, the
                        simulator's default (realised exactly by Bullet)
======================  ====================================================================

``closed_loop`` is imported on first use: it needs the simulator, which imports this package.
"""

from robotid_sim.control.model_based import ComputedTorque, Feedforward, ModelOption, describe_model, resolve_model
from robotid_sim.control.pd import PD
from robotid_sim.control.pid import PID, SEED000_KD, SEED000_KI, SEED000_KP
from robotid_sim.sim.tracking import (
    COMPUTED_TORQUE_KD,
    COMPUTED_TORQUE_KP,
    AccelerationController,
    ComputedTorquePD,
    Controller,
    Plant,
    Reference,
    flag_option,
    model_torque,
    per_joint_gain,
)

__all__ = [
    "COMPUTED_TORQUE_KD",
    "COMPUTED_TORQUE_KP",
    "PD",
    "PID",
    "SEED000_KD",
    "SEED000_KI",
    "SEED000_KP",
    "AccelerationController",
    "ComputedTorque",
    "ComputedTorquePD",
    "Controller",
    "Feedforward",
    "ModelOption",
    "Plant",
    "Reference",
    "describe_model",
    "flag_option",
    "model_torque",
    "per_joint_gain",
    "resolve_model",
]
