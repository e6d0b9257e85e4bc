"""The closed-loop comparison of controllers (SPEC §10, seed 000 Fig. 15): each controller of a checked
``closed_loop`` section drives the plant in turn (:func:`robotid_sim.control.closed_loop.run_closed_loop`), and
its tracking error η becomes a row of ``metrics.json``; a controller that raises fails alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from robotid_sim.control.closed_loop import PYBULLET, describe_plant, run_closed_loop
from robotid_sim.identification.evaluation import Failure

log = logging.getLogger(__name__)


@dataclass
class ClosedLoopOutcome:
    """What one controller did in the closed-loop comparison (SPEC §10, seed 000 Fig. 15).

    Attributes:
        name: the controller's label (``"pid"``, ``"feedforward(ols)"``).
        metrics: its row of ``metrics.json``: ``eta`` (n,) = mean |q_ref - q| per joint, ``eta_mean``,
            ``max_error`` (n,), ``units`` (n,) (``"deg"``, or ``"mm"`` for a prismatic joint), ``plant``,
            ``model``, ``controller_type``, ``duration_s``, ``diverged_at``.
        t: (N,) time of the run, or None (a run folder read back keeps no time series).
        error: (N, n) tracking error q_ref - q in ``units``, or None.
        series: the run's time series in SI units (``t`` (N,); ``q``, ``qd``, ``q_ref``, ``qd_ref``, ``tau``
            (N, n)), saved in the run folder as ``closed_loop/<label>.npz``; None when read back.
    """

    name: str
    metrics: dict
    t: np.ndarray | None = None
    error: np.ndarray | None = None
    series: dict[str, np.ndarray] | None = None


def run_closed_loop_plan(
    plan, robot, models: dict[str, Any], report: Callable[[str, int, int], None]
) -> tuple[list[ClosedLoopOutcome], list[str], list[Failure]]:
    """Drive the plant with each controller of ``plan``.

    Args:
        plan: the checked section (:class:`robotid_sim.scenario.closed_loop.ClosedLoopPlan`: ``config`` with ``dt``
            and ``friction``, ``controllers`` each with ``label``, ``cls``, ``model``, ``takes_model`` and
            ``build(models)``, ``plant`` (``"pybullet"`` or a model source with ``text`` and ``get(models)``),
            ``reference``, ``reference_text``, ``duration``).
        robot: the robot of the run.
        models: the run's models by label, case-folded (``"ols"``, ``"cad"``).
        report: progress callback(task, done, total).

    Returns:
        ``(outcomes, notes, failures)``: one :class:`ClosedLoopOutcome` per controller that ran to the end, notes
        for the report (what was tracked, by which plant), and a
        :class:`~robotid_sim.identification.evaluation.Failure` per controller that raised or was stopped (a joint
        leaving its limits, a torque that is not finite).
    """
    config = plan.config
    if isinstance(plan.plant, str):
        plant, plant_name = PYBULLET, PYBULLET + ("" if config.friction else " without friction")
    else:
        plant = plan.plant.get(models)
        plant_name = f"'{plan.plant.text}' ({describe_plant(plant)})"
    outcomes: list[ClosedLoopOutcome] = []
    notes: list[str] = []
    failures: list[Failure] = []
    total = len(plan.controllers)
    for k, entry in enumerate(plan.controllers):
        report("closed loop", k, total)
        try:
            controller = entry.build(models)
            result = run_closed_loop(  # the plan checked the whole comparison's size (allow_large included)
                robot,
                controller,
                plan.reference,
                plan.duration,
                plant,
                dt=config.dt,
                friction=config.friction,
                allow_large=True,
            )
        except Exception as exc:  # noqa: BLE001 - the loop's own stop (a DataError: a joint left its limits, a
            # torque was not finite) or anything a plugin controller raises; the other controllers still run
            log.warning("controller '%s' failed: %s: %s", entry.label, type(exc).__name__, exc)
            failures.append(Failure.of("controller", entry.label, exc))
            continue
        metrics = {
            "controller_type": entry.cls.name or entry.cls.__name__,
            "model": None if entry.model is None else entry.model.text,
            **result.metrics(),
        }
        series = {name: getattr(result, name) for name in ("t", "q", "qd", "q_ref", "qd_ref", "tau")}
        outcomes.append(ClosedLoopOutcome(entry.label, metrics, result.t, result.error_display, series))
    report("closed loop", total, total)
    notes.insert(
        0,
        f"closed loop: each controller tracks {plan.reference_text} for {plan.duration:g} s at dt = "
        f"{config.dt:g} s on the plant {plant_name}, from the reference's first state; η = mean |q_ref - q| "
        "per joint (seed 000 Fig. 15)",
    )
    own = [c.label for c in plan.controllers if c.takes_model and c.model is None]
    if own:
        notes.append(
            f"closed loop: {', '.join(own)} given no model use the plant's own model"
            + (" (the true robot)" if isinstance(plan.plant, str) else "")
        )
    diverged = [o.name for o in outcomes if o.metrics.get("diverged_at") is not None]
    if diverged:
        notes.append(f"closed loop: the model plant diverged under {', '.join(diverged)} (η shown as inf)")
    return outcomes, notes, failures
