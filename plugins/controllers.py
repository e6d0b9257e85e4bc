"""Built-in controllers (SPEC §5, §10): ``pid`` (torque-mode PID, seed 000's gains), ``feedforward``
(a model's torque at the reference + PID, seed 000 Eqs. 35–36), ``computed_torque`` (computed torque
on any model), ``pd`` (torque-mode PD, optionally gravity-compensated) and ``computed_torque_pd``
(computed torque + PD on the true model, the simulator's default)."""

from __future__ import annotations

from robotid_sim.control import PD, PID, ComputedTorque, ComputedTorquePD, Feedforward
from robotid_sim.hookspecs import hookimpl

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)


@hookimpl
def register_controllers(register):
    for cls in (ComputedTorquePD, PD, PID, Feedforward, ComputedTorque):
        register(cls)  # under its class attribute ``name``
