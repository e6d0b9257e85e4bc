"""BIRDy's Monte Carlo protocol in a sweep (Leboutet et al., "Inertial Parameter Identification in Robotics: A
Survey", 2021, and its toolbox's ``run_identification_benchmark.m``): initial estimates drawn around the truth,
closed-loop cells, and the figures of merit of each run.

- **Initial estimates** ('RefSd', :func:`draw_initial`): θ₀ = θ_true ∘ (1 + s · N(0, 1)) per standard
  parameter, redrawn until the set is physically consistent
  (:func:`robotid_sim.identification.lmi.standard_consistency`: every link's pseudo-inertia positive definite,
  rotor inertia and friction coefficients non-negative). Estimate i comes from the generator seeded
  (seed, i), so it does not depend on how many are drawn. Few draws pass (about 1 in 300 on the TX40, whose
  thin links sit near the triangle inequality's boundary), so they are drawn and checked in batches.
- **Closed-loop cells** (:func:`simulate_closed_loop_cell`): one record of the closed loop per (robot,
  excitation, noise preset, repetition) (:func:`robotid_sim.sim.closed_loop_data.closed_loop_record`, noise
  seed = the cell's seed), turned into BIRDy's data set and, for the ``filtered: true`` estimators, its
  Butterworth-filtered one (:func:`~robotid_sim.sim.closed_loop_data.birdy_dataset`); every estimator and
  initial estimate of the cell identifies those.
- **Per run** (:func:`run_figures`): ``d_beta`` = 100 · (2/b) Σ_i |β̂_i − β_i| / (|β_i| + |β̂_i|) (the symmetric
  relative error in %, a term with β̂_i = β_i = 0 counting 0), ``diverged`` = ‖β̂ − β‖ > 50 · ‖β₀ − β‖ (BIRDy's
  rule; without an initial estimate: a non-finite estimate), the estimator's ``iterations`` and
  ``model_evaluations`` (None for one without them) and the physical consistency of the estimate.

The figures that need the mean estimate of a (method, preset) over its runs (d_tau, d_q) are computed when the
sweep's tables are written (:mod:`robotid_sim.sweep.merit`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

import numpy as np

from robotid_sim.errors import ConfigError

#: a run diverged when its final parameter error exceeds this many times its initial one (BIRDy)
DIVERGENCE_FACTOR = 50.0
#: draws of one initial estimate before giving up (a truth that is itself inconsistent never passes; the TX40
#: keeps about 1 draw in 300 at BIRDy's relative std 0.15)
MAX_DRAWS = 200_000
#: draws checked at once
DRAW_BATCH = 1000


def draw_initial(structure, theta_true, relative_std: float, seed: int, index: int) -> np.ndarray:
    """Initial estimate ``index`` (p,): θ_true ∘ (1 + relative_std · N(0, 1)), redrawn until consistent.

    The draws come in batches of :data:`DRAW_BATCH` from the generator seeded (seed, index); the first draw
    whose links all have a positive-definite pseudo-inertia (:func:`robotid_sim.robot.physical
    .pseudo_inertia_positive_definite`, batched) and that passes
    :func:`~robotid_sim.identification.lmi.standard_consistency` is kept.

    Raises:
        ConfigError: no consistent draw in :data:`MAX_DRAWS` (the truth itself is not consistent, or the
            spread is too large).
    """
    from robotid_sim.identification.lmi import standard_consistency
    from robotid_sim.robot.physical import pseudo_inertia_positive_definite

    theta_true = np.asarray(theta_true, float)
    links = np.asarray(structure.parameter_slices()["inertial"], int).reshape(-1, 10)
    rng = np.random.default_rng([int(seed), int(index)])
    for _ in range(MAX_DRAWS // DRAW_BATCH):
        thetas = theta_true * (1.0 + relative_std * rng.standard_normal((DRAW_BATCH, theta_true.size)))
        for k in np.flatnonzero(pseudo_inertia_positive_definite(thetas[:, links]).all(axis=1)):
            if standard_consistency(structure, thetas[k]).consistent:
                return thetas[k]
    raise ConfigError(
        f"initial_estimates: no physically consistent draw around robot '{structure.name}'s parameters in "
        f"{MAX_DRAWS} tries with relative_std {relative_std:g}; lower relative_std"
    )


def symmetric_relative_error(estimate, truth) -> float:
    """BIRDy's d_beta of one run: 100 · (2/b) Σ |β̂ − β| / (|β| + |β̂|), in %; a term with both zero is 0."""
    estimate, truth = np.asarray(estimate, float), np.asarray(truth, float)
    scale = np.abs(truth) + np.abs(estimate)
    terms = np.divide(np.abs(estimate - truth), scale, out=np.zeros_like(scale), where=scale > 0)
    return float(100.0 * 2.0 * terms.mean())


def is_diverged(estimate, truth, initial=None) -> bool:
    """BIRDy's divergence: ‖β̂ − β‖ > :data:`DIVERGENCE_FACTOR` · ‖β₀ − β‖; a non-finite estimate always."""
    estimate, truth = np.asarray(estimate, float), np.asarray(truth, float)
    if not np.all(np.isfinite(estimate)):
        return True
    if initial is None:
        return False
    return bool(np.linalg.norm(estimate - truth) > DIVERGENCE_FACTOR * np.linalg.norm(np.asarray(initial) - truth))


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float | np.integer) and np.isfinite(value) else None


def physically_consistent(model) -> bool | None:
    """Whether the estimate is physically consistent (:func:`robotid_sim.identification.lmi.model_consistency`:
    of a standard set directly, of base values through a semidefinite program); None without inertial
    parameters."""
    from robotid_sim.identification.lmi import model_consistency

    consistency = model_consistency(model)
    return None if consistency is None else bool(consistency.consistent)


def run_figures(
    model, truth: dict[str, float], initial_base: dict[str, float] | None, consistent: bool | None
) -> dict[str, Any]:
    """The protocol's fields of one run's record (module docstring).

    Args:
        model: the fitted model.
        truth: true base values by name.
        initial_base: the initial estimate's base values by name, or None without one.
        consistent: :func:`physically_consistent` of the model.
    """
    from robotid_sim.identification import LinearParameterModel

    diagnostics = model.diagnostics or {}
    fields: dict[str, Any] = {
        "iterations": _count(diagnostics.get("iterations")),
        "model_evaluations": _count(diagnostics.get("model_evaluations")),
        "d_beta": None,
        "initial_error": None,
        "physically_consistent": consistent,
    }
    if not isinstance(model, LinearParameterModel):
        return fields
    names = list(model.structure.base_parameters().names)
    estimate = np.asarray(model.base_values(), float)
    true = np.array([truth[n] for n in names])
    initial = None if initial_base is None else np.array([initial_base[n] for n in names])
    fields["diverged"] = is_diverged(estimate, true, initial)
    if np.all(np.isfinite(estimate)):
        fields["d_beta"] = symmetric_relative_error(estimate, true)
    if initial is not None:
        fields["initial_error"] = float(np.linalg.norm(initial - true))
    return fields


# ------------------------------------------------------------------------------ closed-loop cells
@dataclasses.dataclass(frozen=True)
class ClosedLoopPlan:
    """A closed-loop cell's checked settings (:func:`prepare_closed_loop_cell`).

    Attributes:
        robot, structure: the robot and the structure the estimators are given.
        estimators: (label, estimator) pairs, options applied.
        excitation: the excitation mapping (None: the robot's default), checked against the joint limits.
        loop: the controller (a :class:`~robotid_sim.sim.closed_loop_data.PIDLoop`), None for the robot's
            BIRDy gains.
        data: the ``data.closed_loop`` settings (a mapping).
    """

    robot: Any
    structure: Any
    estimators: list
    excitation: dict | None
    loop: Any
    data: dict[str, Any]


def closed_loop_plan_key(spec: dict[str, Any]) -> str:
    """The part of a closed-loop cell its plan depends on."""
    return json.dumps(
        {
            "excitation": spec["excitation"],
            "data": spec["data"],
            "estimators": [{k: e[k] for k in ("name", "label", "options")} for e in spec["estimators"]],
        },
        sort_keys=True,
    )


@functools.lru_cache(maxsize=16)
def _closed_loop_plan(key: str, robot_ref: str) -> ClosedLoopPlan:
    from robotid_sim.plugins import get_estimator
    from robotid_sim.robot import load_robot
    from robotid_sim.sim.simulate import resolve_excitation

    spec = json.loads(key)
    robot = load_robot(robot_ref)
    structure = robot.structure()
    estimators = []
    for entry in spec["estimators"]:
        estimator = get_estimator(entry["name"]).from_options(**entry["options"])
        estimator.check_structure(structure)
        estimators.append((entry["label"] or entry["name"], estimator))
    data = spec["data"]
    excitation = None if spec["excitation"] == "default" else spec["excitation"]
    resolved = resolve_excitation(robot, spec["excitation"])
    resolved.check_limits(robot, duration=min(float(data["duration"]), resolved.duration))
    return ClosedLoopPlan(robot, structure, estimators, excitation, loop_of(robot, data), data)


def loop_of(robot, data: dict[str, Any]):
    """The cell's PID loop (None: the robot's BIRDy gains), checked against the robot and the sample rate."""
    from robotid_sim.sim.closed_loop_data import BIRDY_TX40_PID, TX40_ROBOTS, PIDLoop

    controller = data.get("controller")
    if controller is None and robot.name not in TX40_ROBOTS:
        raise ConfigError(
            f"data.closed_loop.controller: robot '{robot.name}' has no default PID gains (only "
            f"{', '.join(TX40_ROBOTS)} have BIRDy's); give {{kp, kd, ki}} with one gain per joint"
        )
    try:
        loop = None if controller is None else PIDLoop.from_dict(controller, robot.n_dof)
    except ConfigError as exc:
        raise ConfigError(f"data.closed_loop.controller: {exc}") from None
    rate = (BIRDY_TX40_PID if loop is None else loop).control_rate_hz
    per_sample = rate / float(data["sample_rate_hz"])
    if per_sample < 1 or abs(per_sample - round(per_sample)) > 1e-9 * per_sample:
        raise ConfigError(
            f"data.closed_loop.sample_rate_hz = {data['sample_rate_hz']:g} must divide the control rate {rate:g} Hz "
            "(BIRDy: 1000 Hz samples of a 5000 Hz loop)"
        )
    return loop


def prepare_closed_loop_cell(spec: dict[str, Any]) -> ClosedLoopPlan:
    """Check a closed-loop cell's settings without simulating (robot, estimators and their options, the
    excitation against the joint limits, the controller), cached per process.

    Raises:
        ConfigError (or another RobotIdError): naming the problem.
    """
    return _closed_loop_plan(closed_loop_plan_key(spec), spec["robot_ref"])


def simulate_closed_loop_cell(spec: dict[str, Any]) -> dict[str, Any]:
    """A closed-loop cell's data: one record, BIRDy's data set and (when an estimator asks) the filtered one.

    Returns:
        ``plan`` (:class:`ClosedLoopPlan`), ``problems`` {filtered: IdentificationProblem}, ``truth`` (true base
        values by name), ``truth_base`` (the robot's base parameters).
    """
    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.sim.closed_loop_data import birdy_dataset, closed_loop_record

    plan = prepare_closed_loop_cell(spec)
    data = plan.data
    record = closed_loop_record(
        plan.robot,
        excitation=plan.excitation,
        loop=plan.loop,
        noise=spec["noise"],
        seed=int(spec["seed"]),
        duration=float(data["duration"]),
        sample_rate_hz=float(data["sample_rate_hz"]),
    )
    problems = {}
    for filtered in sorted({bool(e.get("filtered", False)) for e in spec["estimators"]}):
        ds = birdy_dataset(
            record,
            derivatives=data["derivatives"],
            filtered=filtered,
            trim=int(data["trim"]),
            decimation=data["decimation"],
            cutoff_hz=float(data["cutoff_hz"]),
        )
        problems[filtered] = IdentificationProblem(plan.structure, ds)
    truth_base = plan.robot.base_parameters()
    return {
        "plan": plan,
        "problems": problems,
        "truth_base": truth_base,
        "truth": dict(zip(truth_base.names, np.asarray(truth_base.true_values(), float).tolist(), strict=True)),
    }
