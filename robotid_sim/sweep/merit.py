"""BIRDy's figures of merit per (method, noise preset), from the runs of a protocol sweep
(:mod:`robotid_sim.sweep.protocol`), as BIRDy's post-processing defines them:

- ``runs``, ``failed``, ``diverged`` (runs whose ‖β̂ − β‖ > 50 · ‖β₀ − β‖) and ``divergence_rate``; the diverged
  runs are left out of every mean below, as BIRDy does;
- ``d_beta_mean``, ``d_beta_std``: the runs' symmetric relative parameter errors (%);
- ``d_tau``: 100 · mean over samples k of ‖τ_k − W_k β̄‖ / ‖τ_k‖ with β̄ the mean estimate of the (method,
  preset), W and τ the regressor and torque of the **noise-free** closed-loop run of the same reference
  (its true q, qd, qdd and control torque; τ = W β exactly, so the truth scores 0);
- ``d_q``: 100 · mean over samples of ‖q_k − q̂_k‖ / ‖q_k‖, q̂ the closed loop re-simulated on the model with β̄
  (:func:`robotid_sim.identification.closed_loop_model.simulate_closed_loop`, θ = pinv(K) β̄) and q the same
  simulation with the true parameters (the truth scores 0); inf when the re-simulation with β̄ diverged;
- ``d_t``: mean seconds per estimate; ``iterations``, ``model_evaluations``: means over the runs that report
  them;
- ``consistent``: the share of runs whose estimate is physically consistent (1.0: in every run).

d_tau and d_q need closed-loop data (``data.closed_loop``); an open-loop sweep with initial estimates has the
others. :func:`parameter_rows` gives, per base parameter, the mean and standard deviation of the relative
error 100 · (β̂_i − β_i) / |β_i| over the runs (the report's error bars).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: the cell of a figures-of-merit row (BIRDy's (method, preset), per robot and excitation)
GROUP = ("robot", "excitation", "noise", "estimator")
#: a true base value below this times the largest is zero (round-off of the base reduction): no relative error
ZERO = 1e-12
#: the columns of ``birdy.csv``
COLUMNS = (
    *GROUP,
    "runs",
    "failed",
    "diverged",
    "divergence_rate",
    "d_beta_mean",
    "d_beta_std",
    "d_tau",
    "d_q",
    "d_t",
    "iterations",
    "model_evaluations",
    "consistent",
)


def _groups(records: Sequence[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(tuple(record[k] for k in GROUP), []).append(record)
    return groups


def kept_runs(members: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The successful runs that did not diverge (the ones BIRDy's means are taken over)."""
    return [r for r in members if r.get("status") == "ok" and not r.get("diverged")]


def mean_estimate(runs: Sequence[dict[str, Any]]) -> tuple[list[str], np.ndarray] | None:
    """(base names, β̄) over ``runs`` with finite base values of the same names; None when there are none."""
    with_values = [r for r in runs if r.get("base_values") and None not in r["base_values"]]
    if not with_values:
        return None
    names = with_values[0]["base_names"]
    values = np.array([r["base_values"] for r in with_values if r["base_names"] == names], float)
    return list(names), values.mean(axis=0)


def _mean(values: Sequence[Any]) -> float | None:
    finite = [float(v) for v in values if v is not None and np.isfinite(float(v))]
    return float(np.mean(finite)) if finite else None


def summary_row(key: tuple, members: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One (method, preset)'s figures (module docstring) without d_tau and d_q (:func:`reference_errors`)."""
    ok = [r for r in members if r.get("status") == "ok"]
    kept = kept_runs(members)
    d_beta = [float(r["d_beta"]) for r in kept if r.get("d_beta") is not None]
    consistency = [bool(r["physically_consistent"]) for r in kept if r.get("physically_consistent") is not None]
    return {
        **dict(zip(GROUP, key, strict=True)),
        "runs": len(members),
        "failed": len(members) - len(ok),
        "diverged": len(ok) - len(kept),
        "divergence_rate": (len(ok) - len(kept)) / len(ok) if ok else None,
        "d_beta_mean": float(np.mean(d_beta)) if d_beta else None,
        "d_beta_std": float(np.std(d_beta, ddof=1)) if len(d_beta) > 1 else (0.0 if d_beta else None),
        "d_tau": None,
        "d_q": None,
        "d_t": _mean([r.get("fit_time_s") for r in ok]),
        "iterations": _mean([r.get("iterations") for r in kept]),
        "model_evaluations": _mean([r.get("model_evaluations") for r in kept]),
        "consistent": float(np.mean(consistency)) if consistency else None,
    }


def torque_error(W: np.ndarray, tau: np.ndarray, beta: np.ndarray) -> float:
    """d_tau: 100 · mean over samples of ‖τ_k − W_k β‖ / ‖τ_k‖ (W (N, n, b), τ (N, n)); samples with τ_k = 0
    are left out."""
    residual = np.linalg.norm(tau - W @ beta, axis=1)
    norm = np.linalg.norm(tau, axis=1)
    use = norm > 0
    return float(100.0 * np.mean(residual[use] / norm[use]))


def position_error(q_true: np.ndarray, q: np.ndarray) -> float:
    """d_q: 100 · mean over samples of ‖q_k − q̂_k‖ / ‖q_k‖ ((N, n) each); samples with q_k = 0 left out."""
    norm = np.linalg.norm(q_true, axis=1)
    use = norm > 0
    return float(100.0 * np.mean(np.linalg.norm(q_true - q, axis=1)[use] / norm[use]))


def closed_loop_reference(robot, excitation, data: dict[str, Any]) -> dict[str, Any]:
    """The noise-free closed-loop run of a (robot, excitation) with BIRDy's preprocessing: its truth's base
    regressor ``W`` (N, n, b) and torque ``tau`` (N, n), the loop ``spec`` and sample ``times`` for d_q."""
    import dataclasses

    from robotid_sim.identification import IdentificationProblem
    from robotid_sim.identification.closed_loop_model import closed_loop_of
    from robotid_sim.sim.closed_loop_data import birdy_dataset, closed_loop_record
    from robotid_sim.sweep.protocol import loop_of

    record = closed_loop_record(
        robot,
        excitation=excitation,
        loop=loop_of(robot, data),
        duration=float(data["duration"]),
        sample_rate_hz=float(data["sample_rate_hz"]),
    )
    ds = birdy_dataset(record, derivatives="exact", trim=int(data["trim"]), decimation=data["decimation"])
    truth = ds.truth
    exact = dataclasses.replace(ds, q=truth.q, qd=truth.qd, qdd=truth.qdd, tau=truth.tau, truth=None)
    problem = IdentificationProblem(robot.structure(), exact)
    return {
        "W": problem.base_regressor(stacked=False, all_rows=True),
        "tau": np.asarray(truth.tau, float),
        "names": problem.base_parameter_names,
        "spec": closed_loop_of(ds),
        "times": np.asarray(ds.t, float),
    }


def reference_errors(rows: list[dict[str, Any]], means: dict[tuple, tuple], robot, reference) -> None:
    """Fill ``d_tau`` and ``d_q`` of the ``rows`` of one (robot, excitation) from their mean estimates
    (``means[key]`` = (names, β̄)), one batched closed-loop simulation for all of them."""
    from robotid_sim.identification.closed_loop_model import simulate_closed_loop, standard_of_base

    structure = robot.structure()
    base = structure.base_parameters()
    usable = [r for r in rows if tuple(r[k] for k in GROUP) in means]
    usable = [r for r in usable if means[tuple(r[k] for k in GROUP)][0] == reference["names"]]
    if not usable:
        return
    betas = np.array([means[tuple(r[k] for k in GROUP)][1] for r in usable])
    for row, beta in zip(usable, betas, strict=True):
        row["d_tau"] = torque_error(reference["W"], reference["tau"], beta)
    thetas = np.vstack([robot.true_parameters()[None], standard_of_base(base, betas)])
    sim = simulate_closed_loop(structure, thetas, reference["spec"], reference["times"])
    for k, row in enumerate(usable, start=1):
        row["d_q"] = position_error(sim["q"][0], sim["q"][k]) if sim["ok"][k] else float("inf")


def protocol_rows(
    records: Sequence[dict[str, Any]], data: dict[str, Any] | None, robots: dict[str, Any], excitations: dict
) -> list[dict[str, Any]]:
    """The figures of merit per (robot, excitation, noise, estimator) (module docstring).

    Args:
        records: every record of the grid.
        data: the sweep's ``data.closed_loop`` settings (a mapping), or None (no d_tau, d_q).
        robots: robot name → loaded robot.
        excitations: excitation label → mapping or 'default'.
    """
    rows, means = [], {}
    for key, members in _groups(records).items():
        rows.append(summary_row(key, members))
        mean = mean_estimate(kept_runs(members))
        if mean is not None:
            means[key] = mean
    if data is None:
        return rows
    for robot_name, robot in robots.items():
        for label, excitation in excitations.items():
            chosen = [r for r in rows if r["robot"] == robot_name and r["excitation"] == label]
            if not chosen:
                continue
            reference = closed_loop_reference(robot, None if excitation == "default" else excitation, data)
            reference_errors(chosen, means, robot, reference)
    return rows


def parameter_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (robot, excitation, noise, estimator) and base parameter: its true value, and the mean and std
    (ddof 1; 0 with one run) of the relative error 100 · (β̂_i − β_i) / |β_i| (%) over the kept runs (None
    for a parameter whose true value is 0, up to :data:`ZERO` times the largest)."""
    out = []
    for key, members in _groups(records).items():
        runs = [r for r in kept_runs(members) if r.get("base_values") and None not in r["base_values"]]
        if not runs:
            continue
        names = runs[0]["base_names"]
        runs = [r for r in runs if r["base_names"] == names]
        values = np.array([r["base_values"] for r in runs], float)
        true = np.array(runs[0]["base_true"], float)
        scale = np.where(np.abs(true) > ZERO * np.abs(true).max(), np.abs(true), np.nan)
        errors = 100.0 * (values - true) / scale
        spread = errors.std(axis=0, ddof=1) if len(runs) > 1 else np.zeros(len(names))
        for k, name in enumerate(names):
            finite = bool(np.isfinite(scale[k]))
            out.append(
                {
                    **dict(zip(GROUP, key, strict=True)),
                    "parameter": name,
                    "true": float(true[k]),
                    "error_mean_pct": float(errors[:, k].mean()) if finite else None,
                    "error_std_pct": float(spread[k]) if finite else None,
                    "runs": len(runs),
                }
            )
    return out


def load_robots(names: Sequence[str], refs: dict[str, str]) -> dict[str, Any]:
    """The sweep's robots, loaded once (``refs``: name → what :func:`~robotid_sim.robot.load_robot` is given)."""
    from robotid_sim.robot import load_robot

    return {name: load_robot(refs[name]) for name in names}
