"""The cells of a sweep and the work done on one cell (in a worker process).

A **cell** is one (robot, excitation, noise preset, repetition) point of the grid; a **task** is one
(cell, estimator) pair. A cell's data sets (identification and validation) are simulated once, in the
worker that runs the cell, and shared by the estimators of that cell: :func:`run_cell` is the unit sent to an
executor, and it returns one record per task. With BIRDy's protocol (:mod:`robotid_sim.sweep.protocol`) a cell
is one closed-loop record instead, and a task is a (cell, estimator, initial estimate) triple.

Every task is named by :func:`task_id`, a hash of everything its result depends on (robot, excitation and
noise mappings, seed, simulation and validation settings, the estimator's name and options), never by a user
string: it is the name of the task's result file (``results/<task_id>.json``), so nothing a sweep file says
becomes a path, and a grown grid (more repetitions, another estimator) reuses every result it already has.

:func:`run_cell` works on plain data (a :class:`CellSpec` as a mapping) and returns plain data (JSON-able
records), so it travels to any executor (a local process pool or Dask workers); it imports the numerical
stack when it runs, not when this module is imported.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from typing import Any

log = logging.getLogger(__name__)

#: figures of merit of each task, in the table's column order (BIRDy's: parameter error, torque error,
#: trajectory error, time), named as in a run's ``metrics.json`` (:mod:`robotid_sim.identification.evaluation`)
FIGURES = ("base_parameter_error", "torque_relative_error_vs_truth", "trajectory_rms_total", "fit_time_s")
#: bump when a record's meaning changes: results of another version are re-run, not mixed in (2: the figures
#: renamed as in a run's metrics)
RECORD_VERSION = 2


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def task_id(cell: dict[str, Any], estimator: dict[str, Any]) -> str:
    """The name of a task's result: a SHA-256 of what the result depends on (24 hex digits).

    Args:
        cell: the cell's identity (:func:`cell_identity`).
        estimator: ``{"name", "label", "options"}`` of the estimator.
    """
    payload = _canonical({"version": RECORD_VERSION, "cell": cell, "estimator": estimator})
    return hashlib.sha256(payload.encode()).hexdigest()[:24]


def cell_identity(
    robot: str,
    excitation: Any,
    noise: Any,
    seed: int,
    simulation: dict[str, Any],
    validation: dict[str, Any],
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What a cell's data sets depend on (the labels are not part of it: renaming a preset keeps its results);
    ``data``: the closed-loop settings of a closed-loop sweep (absent from an open-loop cell's identity)."""
    identity = {
        "robot": robot,
        "excitation": excitation,
        "noise": noise,
        "seed": int(seed),
        "simulation": simulation,
        "validation": validation,
    }
    if data is not None:
        identity["data"] = data
    return identity


def estimator_identity(entry, initial: dict[str, Any] | None = None, index: int | None = None) -> dict[str, Any]:
    """What a task's result depends on besides its cell: the estimator's ``name``, ``label`` and ``options``, and
    only when used (so that the tasks of every other sweep keep their names) ``filtered: true`` and the initial
    estimate (``relative_std``, ``seed`` and its ``index``; not the count, so more initial estimates reuse the
    results of the first ones).

    Args:
        entry: a :class:`~robotid_sim.sweep.config.SweepEstimatorEntry`.
        initial: the sweep's ``initial_estimates`` (a mapping), or None.
        index: the initial estimate's index (with ``initial``).
    """
    identity: dict[str, Any] = {"name": entry.name, "label": entry.label, "options": entry.options}
    if entry.filtered:
        identity["filtered"] = True
    if initial is not None:
        identity["initial"] = {"relative_std": initial["relative_std"], "seed": initial["seed"], "index": index}
    return identity


@functools.lru_cache(maxsize=16)
def _plan(plan_key: str, robot_ref: str):
    """The checked run plan of a cell (robot, estimators, both excitations, noise chain), cached per worker."""
    from robotid_sim.scenario.plan import prepare_run
    from robotid_sim.scenario.schema import parse_scenario

    spec = json.loads(plan_key)
    scenario = {
        "name": "sweep",
        "robot": robot_ref,
        "excitation": spec["excitation"],
        "noise": spec["noise"],
        "simulation": spec["simulation"],
        "validation": spec["validation"],
        "estimators": spec["estimators"],
    }
    return prepare_run(parse_scenario(scenario, where="sweep cell"))


def plan_key(spec: dict[str, Any]) -> str:
    """The part of a cell spec its run plan depends on (everything but the seed and labels)."""
    return _canonical(
        {
            "excitation": spec["excitation"],
            "noise": spec["noise"],
            "simulation": spec["simulation"],
            "validation": spec["validation"],
            "estimators": [{k: e[k] for k in ("name", "label", "options")} for e in spec["estimators"]],
        }
    )


def prepare_cell(spec: dict[str, Any]):
    """Check a cell's settings without simulating (:func:`robotid_sim.scenario.plan.prepare_run`); raises
    :class:`~robotid_sim.errors.ConfigError` (or another RobotIdError) naming the problem."""
    return _plan(plan_key(spec), spec["robot_ref"])


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:2000]


#: the fields BIRDy's protocol adds to each record (:func:`robotid_sim.sweep.protocol.run_figures`), in the
#: task table's order; only a sweep with ``data.closed_loop`` or ``initial_estimates`` has them
PROTOCOL_FIELDS = ("initial", "initial_error", "d_beta", "iterations", "model_evaluations", "physically_consistent")


def _record(spec: dict[str, Any], estimator: dict[str, Any], **fields: Any) -> dict[str, Any]:
    base = {
        "version": RECORD_VERSION,
        "task_id": estimator["task_id"],
        "robot": spec["robot"],
        "excitation": spec["excitation_label"],
        "noise": spec["noise_label"],
        "repetition": int(spec["repetition"]),
        "seed": int(spec["seed"]),
        "estimator": estimator["label"] or estimator["name"],
        "estimator_name": estimator["name"],
        "status": "ok",
        "error": "",
        **dict.fromkeys(FIGURES[:-1]),
        "diverged": False,
        "fit_time_s": None,
        "base_names": None,
        "base_true": None,
        "base_values": None,
        "crb_std": None,
    }
    if is_protocol(spec):
        base |= dict.fromkeys(PROTOCOL_FIELDS)
        base["initial"] = estimator["initial"]["index"] if "initial" in estimator else None
    base.update(fields)
    return base


def is_protocol(spec: dict[str, Any]) -> bool:
    """Whether a cell follows BIRDy's protocol (closed-loop data or initial estimates): its records carry
    :data:`PROTOCOL_FIELDS`."""
    return spec.get("data") is not None or spec.get("initial_estimates") is not None


def run_cell(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Simulate one cell's data once and identify it with each of its estimators.

    Args:
        spec: the cell (:class:`robotid_sim.sweep.runner` builds it): ``robot``, ``robot_ref`` (what
            :func:`~robotid_sim.robot.load_robot` is given), ``excitation``/``noise`` and their labels, ``seed``,
            ``repetition``, ``simulation``, ``validation``, ``data`` (closed-loop settings or None),
            ``initial_estimates`` (``relative_std``, ``seed``; or None), and ``estimators`` (each ``name``,
            ``label``, ``options``, ``task_id``, and when used ``filtered`` and ``initial`` with its ``index``).

    Returns:
        One record per estimator (:data:`FIGURES`, ``status`` ``ok`` or ``failed`` with ``error``, and for
        models linear in the base parameters their values, the true ones and the Cramér–Rao standard
        deviations; with BIRDy's protocol :data:`PROTOCOL_FIELDS` too). A cell whose simulation fails gives a
        failed record for each of its estimators; a failing estimator fails alone. An estimator whose model
        reports no ``iterations`` (a one-step estimator, which ignores the initial estimate) is fitted once
        per cell and data set, its model shared by its initial estimates.
    """
    try:
        if spec.get("data") is not None:
            from robotid_sim.sweep.protocol import simulate_closed_loop_cell

            data = simulate_closed_loop_cell(spec)
        else:
            data = _simulate_cell(spec)
    except Exception as exc:  # recorded, never stops the sweep
        log.warning("sweep cell %s/%s seed %s failed: %s", spec["robot"], spec["noise_label"], spec["seed"], exc)
        return [_record(spec, e, status="failed", error=_error_text(exc)) for e in spec["estimators"]]
    data["fitted"] = {}
    return [_identify(spec, data, e) for e in spec["estimators"]]


def _simulate_cell(spec: dict[str, Any]) -> dict[str, Any]:
    """The cell's identification problem, validation data, open-loop reference and Cramér–Rao bound."""
    import numpy as np

    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.identification.validation import open_loop_reference
    from robotid_sim.sim.simulate import simulate

    plan = prepare_cell(spec)
    robot, sim, seed = plan.robot, plan.scenario.simulation, int(spec["seed"])
    common = {"noise": plan.noise, "rate_hz": sim.rate_hz, "dt": sim.dt, "kp": sim.kp, "kd": sim.kd}
    ds = simulate(robot, plan.excitation, duration=plan.duration, seed=seed, **common)
    ds_val = simulate(
        robot,
        plan.validation_excitation,
        duration=plan.validation_duration,
        seed=seed + plan.scenario.validation.noise_seed_offset,
        **common,
    )
    problem = IdentificationProblem(plan.structure, ds)
    truth_base = robot.base_parameters()
    return {
        "plan": plan,
        "problems": {False: problem},
        "validation": ds_val,
        "open_loop": open_loop_reference(robot, ds_val, plan.scenario.validation.trajectory_horizon, simulated=True),
        "truth_base": truth_base,
        "truth": dict(zip(truth_base.names, np.asarray(truth_base.true_values(), float).tolist(), strict=True)),
        "crb_std": cramer_rao_std(problem, plan.noise),
    }


def torque_noise_std(noise, n_dof: int):
    """(n,) σ of the Gaussian torque noise of a noise chain, or None when its torque noise is not (only)
    Gaussian with a given standard deviation (an SNR, outliers, quantisation or current noise on τ)."""
    import numpy as np

    from robotid_sim.sim.noise import GaussianStd

    sigma = np.zeros(n_dof)
    found = False
    for model in noise.models:
        if getattr(model, "signal", "tau") != "tau":  # a model without a signal (current noise) acts on τ
            continue
        if not isinstance(model, GaussianStd):
            return None
        sigma = np.sqrt(sigma**2 + np.broadcast_to(np.asarray(model.std, float), (n_dof,)) ** 2)
        found = True
    return sigma if found and np.all(sigma > 0) else None


def cramer_rao_std(problem, noise) -> list[float] | None:
    """Per base parameter, the Cramér–Rao standard deviation sqrt(diag((Yᵀ Σ⁻¹ Y)⁻¹)).

    Y is the (m, b) stacked base regressor of the cell's identification data and Σ the diagonal covariance
    of its torque rows (σ_j² for the rows of joint j). With one σ for every joint this is σ²(YᵀY)⁻¹, the
    covariance of ordinary least squares; with per-joint σ it is the covariance of weighted least squares
    with the true weights, W = Σ⁻¹ (Gauss–Markov). It is the bound for unbiased estimators when only the
    torque is noisy (Y exact); noise on q, qd or qdd adds errors in the variables that it does not cover.

    Returns:
        (b,) standard deviations, or None when the torque noise is not Gaussian with a known σ.
    """
    import numpy as np

    sigma = torque_noise_std(noise, problem.n_dof)
    if sigma is None:
        return None
    Y = problem.base_regressor()
    weights = 1.0 / sigma[problem.row_joint()] ** 2
    information = Y.T @ (weights[:, None] * Y)
    try:
        covariance = np.linalg.inv(information)
    except np.linalg.LinAlgError:
        return None
    return np.sqrt(np.clip(np.diag(covariance), 0.0, None)).tolist()


def _finite_or_none(value: float) -> float | None:
    import math

    return float(value) if math.isfinite(value) else None


def _estimator(plan, label: str):
    """The estimator of ``plan`` shown as ``label`` (an open-loop run plan or a closed-loop cell plan)."""
    return next(est for e, est in plan.estimators if getattr(e, "display", e) == label)


def _initial(spec: dict[str, Any], data: dict[str, Any], entry: dict[str, Any]):
    """The task's initial estimate θ₀ (p,) (:func:`robotid_sim.sweep.protocol.draw_initial`, cached in the
    cell), or None."""
    if "initial" not in entry:
        return None
    from robotid_sim.sweep.protocol import draw_initial

    index = int(entry["initial"]["index"])
    cache = data.setdefault("initials", {})
    if index not in cache:
        plan, settings = data["plan"], spec["initial_estimates"]
        cache[index] = draw_initial(
            plan.structure, plan.robot.true_parameters(), settings["relative_std"], settings["seed"], index
        )
    return cache[index]


def _fit(data: dict[str, Any], entry: dict[str, Any], theta0):
    """The task's model: fitted on its data set from θ₀, or a one-step estimator's model of this cell."""
    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.identification.evaluation import fit_timed

    label, filtered = entry["label"] or entry["name"], bool(entry.get("filtered", False))
    reused = data["fitted"].get((label, filtered))
    if reused is not None:
        return reused
    problem = data["problems"][filtered]
    if theta0 is not None:
        problem = IdentificationProblem(problem.structure, problem.dataset, initial=theta0)
    model = fit_timed(_estimator(data["plan"], label), problem)  # without numba's compilation, as in a run
    if "iterations" not in (model.diagnostics or {}):
        data["fitted"][(label, filtered)] = model
    return model


def _identify(spec: dict[str, Any], data: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """Fit one estimator on the cell's data and evaluate it (:func:`robotid_sim.identification.evaluation.evaluate`,
    BIRDy's figures of merit among its metrics; with BIRDy's protocol, :func:`robotid_sim.sweep.protocol.run_figures`
    too)."""
    try:
        theta0 = _initial(spec, data, entry)
        model = _fit(data, entry, theta0)
    except Exception as exc:
        return _record(spec, entry, status="failed", error=_error_text(exc))
    fields: dict[str, Any] = {"fit_time_s": model.diagnostics.get("fit_time_s")}
    try:
        fields |= _figures(model, data)
        if is_protocol(spec):
            from robotid_sim.sweep.protocol import physically_consistent, run_figures

            initial = None
            if theta0 is not None:
                base = data["truth_base"]
                initial = dict(zip(base.names, (base.K @ theta0).tolist(), strict=True))
            checked = data.setdefault("consistent", {})  # a shared one-step model is checked once
            if id(model) not in checked:
                checked[id(model)] = physically_consistent(model)
            fields |= run_figures(model, data["truth"], initial, checked[id(model)])
    except Exception as exc:
        return _record(spec, entry, status="failed", error=f"evaluation: {_error_text(exc)}", **fields)
    return _record(spec, entry, **fields)


def _figures(model, data: dict[str, Any]) -> dict[str, Any]:
    """The record fields of a fitted model: :data:`FIGURES` from its evaluation on the cell's validation data
    (a closed-loop cell has none: the base-parameter error only), ``diverged``, and for a model linear in the
    base parameters their names, values, true values and bound."""
    import numpy as np

    from robotid_sim.identification import LinearParameterModel
    from robotid_sim.identification import metrics as M
    from robotid_sim.identification.evaluation import evaluate

    plan = data["plan"]
    linear = isinstance(model, LinearParameterModel)
    names = list(model.structure.base_parameters().names) if linear else []
    if data.get("validation") is not None:
        limits = np.array([j.effort_limit for j in plan.robot.joints], float)
        metrics = evaluate(
            model, data["validation"], truth=data["truth_base"], open_loop=data["open_loop"], effort_limits=limits
        ).metrics
    else:
        values = np.asarray(model.base_values(), float) if linear else None
        finite = linear and bool(np.all(np.isfinite(values)))
        true = np.array([data["truth"][n] for n in names])
        metrics = {
            "base_parameter_error": float(M.relative_parameter_error(values, true)) if finite else None,
            "fit_time_s": model.diagnostics.get("fit_time_s"),
        }
    fields: dict[str, Any] = {figure: metrics.get(figure) for figure in FIGURES}
    if linear:
        fields |= {
            "base_names": names,
            "base_true": [data["truth"][n] for n in names],
            "base_values": [_finite_or_none(v) for v in np.asarray(model.base_values(), float)],
        }
        if data.get("crb_std") is not None and names == list(data["problems"][False].base_parameter_names):
            fields["crb_std"] = data["crb_std"]
    if data.get("open_loop") is not None:
        if "trajectory_rms_total" not in metrics:  # a model without forward dynamics
            fields["error"] = "no trajectory error: the model has no forward dynamics"
        else:
            total = metrics["trajectory_rms_total"]
            fields["trajectory_rms_total"] = _finite_or_none(total)
            fields["diverged"] = not np.isfinite(total)
    return fields
