"""One evaluation of an identified model on a validation dataset (SPEC §9), used by runs, ``identify --validate``,
sweeps and closed-loop runs alike, so that every output names the same figure the same way.

:func:`evaluate` returns an :class:`Evaluation`: the model's predicted torque, its forward-dynamics validation,
and ``metrics``, its row of ``metrics.json`` (also the sweep's table columns), in this order:

- ``torque_rms``: (n,) RMS of τ − τ̂ per joint on the validation data (seed 004 Eq. 45); ``torque_rms_total``:
  the RMS over every joint and sample;
- ``torque_rms_vs_truth_total``: the same against the noise-free torque (None without a truth);
- ``torque_relative_error_vs_truth``: ‖τ̂ − τ_true‖ / ‖τ_true‖ over every sample and joint (None without a
  truth; BIRDy's torque error, the sweep's former ``torque_error``);
- ``torque_nrms_range_pct``, ``torque_nrms_limit_pct``: (n,) 100 · RMS / the joint's validation torque range,
  and / its effort limit (None where unknown);
- ``rsd``, ``agreement_index``: (n,) residual standard deviation and Willmott's index (Eq. 46–47);
- ``fit_time_s``: ``diagnostics['fit_time_s']``, None for a model no estimator fitted; without the time numba
  spent compiling kernels where the model was fitted by :func:`fit_timed` (as in a run);
- ``condition_number``: of the identification data, when the caller gives it;
- ``physically_consistent``, ``link_min_eigenvalue``: when the model has standard parameters
  (:func:`~robotid_sim.identification.lmi.model_consistency`);
- ``base_parameter_error``: ‖θ̂_b − θ_b‖ / ‖θ_b‖ of a model linear in its base parameters, with a truth (the
  sweep's former ``param_error``);
- ``acceleration_rms``, ``acceleration_rsd``: (n,) forward dynamics against the reference accelerations;
- ``trajectory_rms``, ``trajectory_rms_total``, ``trajectory_rsd``, ``trajectory_agreement_index``,
  ``trajectory_max_error``: the open-loop motion against the reference motion (``trajectory_rms_total``, the
  RMS over the joints, is the sweep's former ``trajectory_error``);

followed by the model's own diagnostics (:func:`reported_diagnostics`), so that a new estimator's diagnostics
reach ``metrics.json`` and the report with no list to edit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from robotid_sim.identification import LinearParameterModel
from robotid_sim.identification import metrics as M
from robotid_sim.identification.lmi import model_consistency
from robotid_sim.identification.validation import (
    ForwardDynamicsValidation,
    OpenLoopReference,
    TrajectoryError,
    forward_dynamics_validation,
)

#: the metric names :func:`evaluate` may write, in their order (module docstring); every other key of a model's
#: row of ``metrics.json`` is one of its diagnostics
METRIC_NAMES = (
    "torque_rms",
    "torque_rms_total",
    "torque_rms_vs_truth_total",
    "torque_relative_error_vs_truth",
    "torque_nrms_range_pct",
    "torque_nrms_limit_pct",
    "rsd",
    "agreement_index",
    "fit_time_s",
    "condition_number",
    "physically_consistent",
    "link_min_eigenvalue",
    "base_parameter_error",
    "acceleration_rms",
    "acceleration_rsd",
    "trajectory_rms",
    "trajectory_rms_total",
    "trajectory_rsd",
    "trajectory_agreement_index",
    "trajectory_max_error",
)
#: diagnostics never copied into ``metrics.json``: the base fit's values behind an essential-parameter model (they
#: are in the saved model; the report shows their effect, ``essential_validation_change_pct``)
UNREPORTED_DIAGNOSTICS = frozenset({"essential_full_values"})
#: a diagnostic list longer than this is not copied into ``metrics.json`` (:func:`reported_diagnostics`)
MAX_DIAGNOSTIC_LENGTH = 64


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """A model evaluated on a validation dataset (:func:`evaluate`).

    Attributes:
        metrics: the model's row of ``metrics.json`` (module docstring): JSON-able scalars and per-joint lists;
            a figure that cannot be computed (no truth, no forward dynamics) is absent or None.
        tau_predicted: (N, n) the model's torque on the validation samples.
        forward: the forward-dynamics and open-loop validation
            (:func:`~robotid_sim.identification.validation.forward_dynamics_validation`).
    """

    metrics: dict[str, Any]
    tau_predicted: np.ndarray
    forward: ForwardDynamicsValidation

    @property
    def has_forward_dynamics(self) -> bool:
        """Whether the model has forward dynamics (accelerations and open-loop motion were validated)."""
        return self.forward.acceleration_rms is not None


def evaluate(
    model,
    dataset,
    *,
    truth=None,
    open_loop: OpenLoopReference | None = None,
    effort_limits: np.ndarray | None = None,
    condition_number: float | None = None,
) -> Evaluation:
    """Evaluate ``model`` on the validation ``dataset``: its torque, forward dynamics and open-loop motion.

    Args:
        model: an :class:`~robotid_sim.identification.IdentifiedModel`.
        dataset: the validation data (a :class:`~robotid_sim.sim.dataset.Dataset`): ``q``, ``qd``, ``qdd``,
            ``tau`` (N, n) and ``truth`` (the noise-free signals of a simulation, or None).
        truth: the true base parameters of a simulation (``names``, ``true_values()``:
            :meth:`Robot.base_parameters`); with it, ``dataset.truth.tau`` is the noise-free torque the
            ``*_vs_truth`` figures compare with. None for recorded data.
        open_loop: the open-loop validation reference
            (:func:`~robotid_sim.identification.validation.open_loop_reference`), or None for none.
        effort_limits: (n,) the joints' effort limits (N·m or N; NaN, inf or 0 where unknown), for
            ``torque_nrms_limit_pct``; None: unknown for every joint.
        condition_number: the identification data's condition number, written beside the model's figures;
            None: left out.

    Returns:
        The :class:`Evaluation`; ``metrics`` ends with :func:`reported_diagnostics` of the model.

    Raises:
        DataError: the model predicts a non-finite torque (:mod:`robotid_sim.identification.metrics`).
    """
    pred = model.predict_torque(dataset.q, dataset.qd, dataset.qdd)
    metrics = _torque_metrics(model, dataset, pred, truth, effort_limits)
    metrics |= _essential_metrics(model, dataset, metrics["torque_rms_total"])
    if condition_number is not None:
        metrics["condition_number"] = float(condition_number)
    metrics |= _parameter_metrics(model, truth)
    forward = forward_dynamics_validation(model, dataset, open_loop)
    metrics |= _forward_metrics(model, forward, open_loop)
    for key, value in reported_diagnostics(model).items():
        metrics.setdefault(key, value)
    return Evaluation(metrics, pred, forward)


def _essential_metrics(model, dataset, rms_total: float) -> dict[str, float]:
    """For a model refitted on its essential parameters (``diagnostics['essential_full_values']``, the base fit's
    values; :mod:`robotid_sim.identification.essential`): ``essential_validation_change_pct``, 100·(its validation
    torque RMS / the full base model's − 1). Empty for any other model."""
    full_values = (model.diagnostics or {}).get("essential_full_values")
    if full_values is None or not isinstance(model, LinearParameterModel):
        return {}
    full = model.with_values(np.asarray(full_values, float))
    rms_full = float(M.torque_rms_total(dataset.tau, full.predict_torque(dataset.q, dataset.qd, dataset.qdd)))
    return {"essential_validation_change_pct": 100.0 * (rms_total / rms_full - 1.0) if rms_full > 0 else 0.0}


def fit_timed(estimator, problem):
    """``estimator.fit(problem)``, its ``diagnostics['fit_time_s']`` less the seconds numba spent compiling
    kernels during the fit (the first estimator of a fresh install would pay every shared kernel's
    compilation), those seconds kept as ``diagnostics['compile_time_s']``; loading a kernel from numba's cache
    counts as fit time."""
    from numba.core import event  # the estimators' kernels load numba anyway

    compiled = [0.0]
    with event.install_timer("numba:compile", lambda seconds: compiled.__setitem__(0, seconds)):
        model = estimator.fit(problem)
    fit_time = model.diagnostics.get("fit_time_s")
    if compiled[0] > 0 and isinstance(fit_time, int | float):
        model.diagnostics["fit_time_s"] = max(float(fit_time) - compiled[0], 0.0)
        model.diagnostics["compile_time_s"] = compiled[0]
    return model


def torque_scales(tau: np.ndarray, effort_limits: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-joint scales of the normalised RMS: the validation torque's range, and the effort limit (or NaN).

    Args:
        tau: (N, n) the validation torque.
        effort_limits: (n,) the joints' effort limits, or None (unknown).
    """
    span = np.ptp(tau, axis=0)
    limit = np.full(tau.shape[1], np.nan) if effort_limits is None else np.array(effort_limits, float)
    limit = np.where(np.isfinite(limit) & (limit > 0), limit, np.nan)
    return {"range": np.where(span > 0, span, np.nan), "limit": limit}


def _percent(rms: np.ndarray, scale: np.ndarray) -> list[float | None] | None:
    """100·rms/scale per joint, None where the scale is unknown; None when no joint has one."""
    if not np.isfinite(scale).any():
        return None
    return [float(100.0 * r / s) if np.isfinite(s) else None for r, s in zip(rms, scale, strict=True)]


def _torque_metrics(model, dataset, pred, truth, effort_limits) -> dict[str, Any]:
    """The torque figures of the module docstring, through ``fit_time_s``."""
    tau_true = dataset.truth.tau if truth is not None else None
    scale = torque_scales(dataset.tau, effort_limits)
    rms = M.torque_rms(dataset.tau, pred)
    fit_time = model.diagnostics.get("fit_time_s")
    return {
        "torque_rms": rms.tolist(),
        "torque_rms_total": float(M.torque_rms_total(dataset.tau, pred)),
        "torque_rms_vs_truth_total": float(M.torque_rms_total(tau_true, pred)) if tau_true is not None else None,
        # BIRDy's torque error: ‖τ̂ − τ_true‖ / ‖τ_true‖ over every sample and joint
        "torque_relative_error_vs_truth": (
            float(M.relative_parameter_error(np.asarray(pred, float).ravel(), tau_true.ravel()))
            if tau_true is not None
            else None
        ),
        "torque_nrms_range_pct": (100.0 * rms / scale["range"]).tolist(),
        "torque_nrms_limit_pct": _percent(rms, scale["limit"]),
        "rsd": M.rsd(dataset.tau, pred).tolist(),
        "agreement_index": M.agreement_index(dataset.tau, pred).tolist(),
        "fit_time_s": None if fit_time is None else float(fit_time),
    }


def _parameter_metrics(model, truth) -> dict[str, Any]:
    """Physical consistency, and the base-parameter error of a model linear in its base parameters."""
    metrics: dict[str, Any] = {}
    consistency = model_consistency(model)
    if consistency is not None:
        metrics["physically_consistent"] = float(consistency.consistent)
        metrics["link_min_eigenvalue"] = [float(v) if np.isfinite(v) else None for v in consistency.link_min_eigenvalue]
    if isinstance(model, LinearParameterModel) and truth is not None:
        # against the true values of the model's own base parameters (its friction law may have fewer
        # coefficients than the truth's)
        values = model.base_values()
        true = true_values_by_name(truth, model.structure.base_parameters().names)
        finite = bool(np.all(np.isfinite(values)))
        metrics["base_parameter_error"] = float(M.relative_parameter_error(values, true)) if finite else None
    return metrics


def true_values_by_name(truth, names) -> np.ndarray:
    """The true base values of the parameters ``names`` (each one of ``truth.names``)."""
    values = dict(zip(truth.names, truth.true_values(), strict=True))
    return np.array([values[n] for n in names])


def _forward_metrics(model, forward: ForwardDynamicsValidation, open_loop: OpenLoopReference | None) -> dict:
    """The acceleration and open-loop trajectory figures of the module docstring."""
    metrics: dict[str, Any] = {}
    if forward.acceleration_rms is not None:
        metrics["acceleration_rms"] = forward.acceleration_rms.tolist()
        metrics["acceleration_rsd"] = forward.acceleration_rsd.tolist()
    if open_loop is not None and model.has_forward_dynamics:
        err = TrajectoryError.between(forward.q_open_loop, open_loop.q_reference)  # the rollout just made
        metrics["trajectory_rms"] = err.rms.tolist()
        metrics["trajectory_rms_total"] = float(np.sqrt(np.mean(err.rms**2)))
        metrics["trajectory_rsd"] = err.rsd.tolist()
        metrics["trajectory_agreement_index"] = err.agreement_index.tolist()
        metrics["trajectory_max_error"] = [float(x) if np.isfinite(x) else None for x in forward.max_error]
    return metrics


def reported_diagnostics(model) -> dict[str, Any]:
    """The diagnostics of ``model`` that ``metrics.json`` and the report show, whatever the estimator.

    The rule: every entry of ``model.diagnostics`` whose value is a number (a bool as 1.0 or 0.0, as
    ``physically_consistent``) or a flat list (or 1-D array) of at most :data:`MAX_DIAGNOSTIC_LENGTH` numbers
    (None allowed), in the model's order. Texts (a solver's status, a note), nested values (a stepwise model's
    ``steps``, a library's terms), matrices and histories are left out: they are in the saved model, and the
    report reads them from there. A diagnostic named like a metric (:data:`METRIC_NAMES`) never replaces the
    metric.
    """
    out = {}
    for key, value in (model.diagnostics or {}).items():
        if not isinstance(key, str) or key in METRIC_NAMES or key in UNREPORTED_DIAGNOSTICS:
            continue
        reported = _reportable(value)
        if reported is not _SKIP:
            out[key] = reported
    return out


_SKIP = object()


def _reportable(value: Any) -> Any:
    """``value`` as JSON-able plain data when :func:`reported_diagnostics` reports it, else ``_SKIP``."""
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or value.dtype.kind not in "biuf":
            return _SKIP
        value = value.tolist()
    if isinstance(value, list | tuple) and len(value) <= MAX_DIAGNOSTIC_LENGTH:
        items = [_reportable(v) if v is not None else None for v in value]
        if all(v is None or isinstance(v, int | float) for v in items):
            return items
    return _SKIP


def diagnostic_keys(row: Mapping[str, Any]) -> list[str]:
    """The keys of a model's row of ``metrics.json`` that are its diagnostics (not :data:`METRIC_NAMES`,
    ``estimator`` or a failure's ``status``/``error``/``traceback``)."""
    fixed = {*METRIC_NAMES, "estimator", "status", "error", "traceback"}
    return [key for key in row if key not in fixed]


@dataclass
class Failure:
    """An estimator whose ``fit`` raised, or a controller that raised (or stopped) in the loop: the other results
    of the run are complete without it.

    Attributes:
        kind: ``"estimator"`` or ``"controller"``.
        name: its label in the scenario.
        error: ``"<ExceptionType>: <message>"``.
        traceback: the formatted traceback (where the error came from, for the plugin's author).
    """

    kind: str
    name: str
    error: str
    traceback: str = ""

    @classmethod
    def of(cls, kind: str, name: str, exc: BaseException) -> Failure:
        import traceback

        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(kind, name, f"{type(exc).__name__}: {exc}", text)

    def metrics_row(self) -> dict:
        """Its row of ``metrics.json``."""
        return {self.kind: self.name, "status": "failed", "error": self.error, "traceback": self.traceback}
