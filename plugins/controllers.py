"""Built-in controllers ``computed_torque_pd`` (computed torque + PD, the simulator's default) and
``pd`` (torque-mode PD, optionally gravity-compensated) (SPEC §5, §10)."""

from __future__ import annotations

from robotid_sim.control import PD, ComputedTorquePD
from robotid_sim.hookspecs import hookimpl


@hookimpl
def register_controllers(register):
    register("computed_torque_pd", ComputedTorquePD)
    register("pd", PD)
