"""The data a study hands to the report: plain values and arrays, no live objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from robotid_sim.control.comparison import ClosedLoopOutcome
from robotid_sim.identification.evaluation import Failure

if TYPE_CHECKING:
    from robotid_sim.identification import IdentifiedModel
    from robotid_sim.identification.metrics import SensitivityTable


@dataclass
class EstimatorOutcome:
    """What one estimator produced in a study.

    Attributes:
        name: estimator name (e.g. ``"wls"``).
        parameter_names: names of the identified parameters (b,).
        values: identified values (b,).
        std: standard deviations (b,) where the method gives them, else None.
        true_values: the truth for the same parameters (b,) when known (simulation), else None.
        metrics: flat mapping: scalars (``torque_rms_total``, ``base_parameter_error``,
            ``fit_time_s``, ``condition_number``, ``trajectory_rms_total``, ...) and per-joint lists
            (``torque_rms``, ``rsd``, ``agreement_index`` of the validation torque; ``trajectory_rms``,
            ``trajectory_rsd``, ``trajectory_agreement_index`` of the open-loop joint trajectory).
        tau_predicted: predicted torque (N, n) on the validation trajectory.
        history: parameter evolution (K, b) for online methods, else None.
        history_t: time or iteration stamps (K,) of ``history``.
        history_std: (K, b) standard deviation along ``history`` where the method tracks one (EKF), else None.
        history_names: the b names of ``history``'s columns when they are other quantities than
            ``parameter_names`` (two_loop's exponents α, the base values a standard model went through); None:
            the parameters themselves.
        model_path: where the identified model was saved, relative to the run folder.
        sparse: the equations, coefficients and sparsity diagnostics of a feature-library (SINDy-like)
            model, else None.
        steps: the steps of a stepwise least-squares model (``sequential``, seed 003 §5.1: per step ``step``,
            ``joint``, ``parameters``, ``rows``, ``rank_h``, ``rank_h_tau``, ``expected_rank``,
            ``condition_number``, ``residual_rms``, ...), from its diagnostics; else None.
        qdd_predicted: (N, n) the model's forward-dynamics accelerations under the validation torque (the
            noise-free one of a simulation, else the measured one; seed 003 Fig. 12–14), or None.
        q_open_loop: (K, n) the model's open-loop motion under the validation torque (NaN after a divergence),
            or None.
        essential: for a model refitted on its essential parameters (``ols``/``wls``/``irls`` with ``essential``),
            ``{"kept", "dropped", "dropped_relative_std_pct", "residual_growth", "threshold"}`` from its
            diagnostics; else None.
    """

    name: str
    parameter_names: list[str]
    values: np.ndarray
    std: np.ndarray | None
    true_values: np.ndarray | None
    metrics: dict[str, float | list[float]]
    tau_predicted: np.ndarray
    history: np.ndarray | None = None
    history_t: np.ndarray | None = None
    history_std: np.ndarray | None = None
    history_names: list[str] | None = None
    model_path: str | None = None
    sparse: SparseModelSummary | None = None
    steps: list[dict] | None = None
    qdd_predicted: np.ndarray | None = None
    q_open_loop: np.ndarray | None = None
    essential: dict | None = None

    @classmethod
    def of_model(
        cls,
        name: str,
        model,
        metrics: dict,
        tau_predicted: np.ndarray,
        model_path: str | None,
        truth_names: list[str] | None = None,
        truth_values: np.ndarray | None = None,
    ) -> EstimatorOutcome:
        """The outcome of an identified model; true values only for a base-parameter model whose every parameter
        is one of the truth's (``truth_names``), as in a simulated run (the model's friction law may have fewer
        coefficients than the truth's)."""
        from robotid_sim.identification import BaseParameterModel

        names, values, std = model.parameter_table()
        truth = {} if truth_names is None else dict(zip(truth_names, np.asarray(truth_values, float), strict=True))
        is_base = isinstance(model, BaseParameterModel) and bool(truth) and all(n in truth for n in names)
        history = model.history
        return cls(
            name=name,
            parameter_names=list(names),
            values=values,
            std=std,
            true_values=np.array([truth[n] for n in names]) if is_base else None,
            metrics=metrics,
            tau_predicted=tau_predicted,
            history=None if history is None else history.values,
            history_t=None if history is None else history.t,
            history_std=None if history is None else history.std,
            history_names=None if history is None or list(history.names) == list(names) else list(history.names),
            model_path=model_path,
            sparse=SparseModelSummary.of_model(model),
            steps=_steps_of(model),
            essential=_essential_of(model),
        )


def _essential_of(model) -> dict | None:
    """The essential-parameter diagnostics of a model (:mod:`robotid_sim.identification.essential`), else None."""
    d = model.diagnostics or {}
    if "essential_parameters" not in d or not isinstance(d.get("essential_dropped"), list):
        return None
    return {
        "kept": d["essential_parameters"],
        "dropped": [str(name) for name in d["essential_dropped"]],
        "dropped_relative_std_pct": list(d.get("essential_dropped_relative_std_pct") or []),
        "residual_growth": d.get("essential_residual_growth"),
        "threshold": d.get("essential_threshold"),
    }


def _steps_of(model) -> list[dict] | None:
    """The ``steps`` diagnostics of a stepwise least-squares model (a list of dicts with a ``parameters`` list),
    else None (stepwise SINDy's steps are another table: :class:`SparseModelSummary`)."""
    from robotid_sim.identification import LinearParameterModel

    steps = (model.diagnostics or {}).get("steps")
    if not isinstance(model, LinearParameterModel) or not isinstance(steps, list) or not steps:
        return None
    if not all(isinstance(s, dict) and isinstance(s.get("parameters"), list) for s in steps):
        return None
    return [dict(s) for s in steps]


#: the diagnostics of a feature-library model the report reads (``sindy``, ``stepwise_sindy``; plugins/sindy/)
SPARSE_DIAGNOSTICS = (
    "library_size",
    "library_sizes",
    "library",
    "active_terms",
    "fit_time_s",
    "regression_time_s",
    "segmentation_time_s",
    "samples",
    "steps",
    "segmentation",
)


@dataclass
class SparseModelSummary:
    """What the report shows of a feature-library (SINDy-like) model, read from the model alone, so a run
    folder read back (the saved model with its diagnostics) gives the same report as the live run.

    Attributes:
        terms: (F,) names of the model's library terms (the terms active on at least one joint).
        coefficients: (n, F) coefficients; 0 where a term is inactive on a joint.
        equations: one readable equation per joint (``FeatureLibraryModel.equations()``).
        threshold: the activity threshold of the estimator's options (``threshold``), or None.
        diagnostics: the model's diagnostics named in :data:`SPARSE_DIAGNOSTICS` that it has: ``library_size``
            (total candidates; the sum over the steps for stepwise SINDy), ``library_sizes`` (per step),
            ``active_terms`` (per joint), ``fit_time_s``, ``steps`` (per step: ``step``, ``state``, ``samples``,
            ``runs``, ``library_size``, ``active_terms``, ``fit_time_s``), ``segmentation`` (``method``,
            ``samples`` per state, ``k``, ``wcss``, ``cluster_sizes``, ``cluster_labels``, ``centroids``,
            ``label_agreement``), ...
    """

    terms: list[str]
    coefficients: np.ndarray
    equations: list[str]
    threshold: float | None = None
    diagnostics: dict = field(default_factory=dict)

    @classmethod
    def of_model(cls, model) -> SparseModelSummary | None:
        """The summary of a :class:`~robotid_sim.identification.FeatureLibraryModel`; None for any other model."""
        from robotid_sim.identification import FeatureLibraryModel

        if not isinstance(model, FeatureLibraryModel):
            return None
        threshold = (model.options or {}).get("threshold")
        ok = isinstance(threshold, int | float) and not isinstance(threshold, bool) and np.isfinite(threshold)
        diagnostics = model.diagnostics or {}
        return cls(
            terms=list(model.library.names),
            coefficients=np.array(model.coefficients, dtype=float),
            equations=list(model.equations()),
            threshold=float(threshold) if ok and threshold > 0 else None,
            diagnostics={k: diagnostics[k] for k in SPARSE_DIAGNOSTICS if k in diagnostics},
        )

    @property
    def is_stepwise(self) -> bool:
        """True for a model fitted in steps (stepwise SINDy: its diagnostics list the steps)."""
        return isinstance(self.diagnostics.get("steps"), list) and bool(self.diagnostics["steps"])


@dataclass
class SensitivityOutcome:
    """The ±50 % parameter sensitivity of one estimator's model (seed 004 Table 6, Fig. 8).

    Attributes:
        estimator: the estimator whose identified parameters were varied, one at a time.
        table: parameter names, nominal values, scale factors and the open-loop trajectory RMS of each scaled
            model against the nominal one (:class:`~robotid_sim.identification.metrics.SensitivityTable`).
        horizon_s: seconds of open-loop simulation each RMS is taken over.
    """

    estimator: str
    table: SensitivityTable
    horizon_s: float


@dataclass
class StudyResult:
    """Everything a report shows about one run.

    Attributes:
        title: scenario name.
        robot_name: robot name.
        joint_names: (n,) joint names.
        scenario: the validated scenario as plain data.
        t_validation: (N,) time of the validation trajectory.
        tau_measured: (N, n) measured torque on the validation trajectory.
        tau_true: (N, n) noise-free torque on the validation trajectory, if known.
        outcomes: one per estimator, in the scenario's order.
        base_parameter_table: rows (name, expression, true value) of the robot's base parameters.
        friction_curves: optional {"qd": (M,) velocity grid, "true": (M, n), estimator name: (M, n)}
            friction torque against velocity.
        notes: free-text lines (warnings, what was skipped and why).
        info: extra key/values shown at the top (seed, noise, excitation, condition number, ...).
        baselines: names of outcomes that are references, not estimators (the ``CAD`` row: the robot's own
            parameters); shown in the tables but never marked best.
        closed_loop: one per controller of the closed-loop comparison, in the scenario's order (empty
            without one).
        parameter_labels: base-parameter name to the label shown beside it (the scenario's
            ``report.parameter_labels``, e.g. ``{"M1": "λ1*"}``); empty: no label column.
        sensitivity: the ±50 % sensitivity study, or None when the scenario asks for none.
        qdd_reference: (N, n) accelerations on the validation trajectory that each outcome's ``qdd_predicted``
            is compared with (the noise-free ones of a simulation, else the measured ones), or None.
        open_loop_t: (K,) time of the open-loop validation (from its start), or None without one.
        q_open_loop_reference: (K, n) the reference motion of the open-loop validation (the true robot's, or the
            measured one), or None.
        failures: the estimators and controllers that raised (:class:`Failure`), shown with their tracebacks.
        joint_kinds: (n,) ``"revolute"`` or ``"prismatic"`` per joint, for the units of the figures' axes
            (rad, rad/s, N·m or m, m/s, N); empty: unknown, both named.
    """

    title: str
    robot_name: str
    joint_names: list[str]
    scenario: dict
    t_validation: np.ndarray
    tau_measured: np.ndarray
    tau_true: np.ndarray | None
    outcomes: list[EstimatorOutcome]
    base_parameter_table: list[tuple[str, str, float]] = field(default_factory=list)
    friction_curves: dict[str, np.ndarray] | None = None
    notes: list[str] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)
    baselines: list[str] = field(default_factory=list)
    closed_loop: list[ClosedLoopOutcome] = field(default_factory=list)
    parameter_labels: dict[str, str] = field(default_factory=dict)
    sensitivity: SensitivityOutcome | None = None
    qdd_reference: np.ndarray | None = None
    open_loop_t: np.ndarray | None = None
    q_open_loop_reference: np.ndarray | None = None
    failures: list[Failure] = field(default_factory=list)
    joint_kinds: list[str] = field(default_factory=list)


#: points of the velocity grid of the friction curves
FRICTION_GRID_POINTS = 401


def friction_curves(models: dict[str, IdentifiedModel], qd: np.ndarray) -> dict[str, np.ndarray] | None:
    """Each model's friction torque against joint velocity (seed 001 Fig. 11), for ``StudyResult.friction_curves``.

    The grid spans ±max|qd| of each joint in ``qd`` (N, n). A model linear in parameters contributes its friction
    law with its identified coefficients; a residual model whose correction reads the joint velocities only, one
    joint each (``semiparametric`` with ``per_joint``), contributes its base model's friction plus the learned
    correction, which is then a function of the velocity alone. None when no model has a friction law.
    """
    from robotid_sim.identification import LinearParameterModel, ResidualModel

    span = np.max(np.abs(qd), axis=0)
    grid = np.linspace(-1.0, 1.0, FRICTION_GRID_POINTS)[:, None] * span
    zero = np.zeros_like(grid)
    curves: dict[str, np.ndarray] = {}
    for label, model in models.items():
        base = model.base if isinstance(model, ResidualModel) else model
        if not isinstance(base, LinearParameterModel) or base.structure.friction_law.get("model") == "none":
            continue
        torque = base.equivalent_robot.friction.torque(grid)
        if base is not model:
            if tuple(model.correction.inputs) != ("qd",) or not model.diagnostics.get("per_joint"):
                continue
            torque = torque + model.correction(zero, grid, zero)
        curves[label] = torque
    return {"qd": grid, **curves} if curves else None
