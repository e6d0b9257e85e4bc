"""Tables shared by the Markdown report, the HTML report and the terminal.

Every table is returned as ``(headers, rows)`` where each row is a list of :class:`Cell`: the text to show,
the number behind it (for sorting and highlighting) and whether it is the best value of its column.
The renderers only decide how a cell looks; what goes into it is decided here, once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from robotid_sim.control.comparison import ClosedLoopOutcome
from robotid_sim.report.result import EstimatorOutcome, StudyResult

if TYPE_CHECKING:
    from rich.table import Table

MISSING = "—"


def format_number(value: object, digits: int = 4) -> str:
    """Format a number for a table: ``digits`` significant digits, scientific for tiny or huge values.

    Args:
        value: a number (anything ``float()`` accepts); other values are shown with ``str``.
        digits: significant digits.

    Returns:
        The text, e.g. ``"0.1235"``, ``"1.235e-05"``, ``"0"``; ``"—"`` for None or NaN.
    """
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value)
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(x):
        return MISSING
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e5:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


@dataclass(frozen=True)
class Cell:
    """One table cell.

    Attributes:
        text: what is shown.
        value: the number behind the text (NaN for text cells or missing values).
        best: True when this is the best value of its column (comparison table) or row (per-joint table).
    """

    text: str
    value: float = math.nan
    best: bool = False

    def __str__(self) -> str:
        return self.text


def _scalar(outcome: EstimatorOutcome | ClosedLoopOutcome, key: str) -> float:
    value = outcome.metrics.get(key)
    if value is None or isinstance(value, list | tuple | np.ndarray):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _mean(outcome: EstimatorOutcome, key: str) -> float:
    value = outcome.metrics.get(key)
    if value is None:
        return math.nan
    arr = np.asarray(value, dtype=float).ravel()
    if arr.size == 0 or not np.isfinite(arr).any():
        return math.nan
    return float(np.nanmean(arr))


def _total_rms(outcome: EstimatorOutcome) -> float:
    return _scalar(outcome, "torque_rms_total")


@dataclass(frozen=True)
class _Column:
    header: str
    extract: Callable[[EstimatorOutcome], float]
    better: str | None  # "min", "max", or None (no best value, e.g. the same for every row)


_COMPARISON_COLUMNS: tuple[_Column, ...] = (
    _Column("torque RMS", _total_rms, "min"),
    _Column("torque RMS vs truth", lambda o: _scalar(o, "torque_rms_vs_truth_total"), "min"),
    _Column("mean nRMS [% of range]", lambda o: _mean(o, "torque_nrms_range_pct"), "min"),
    _Column("mean nRMS [% of limit]", lambda o: _mean(o, "torque_nrms_limit_pct"), "min"),
    _Column("mean RSD", lambda o: _mean(o, "rsd"), "min"),
    _Column("mean agreement index", lambda o: _mean(o, "agreement_index"), "max"),
    _Column("base-parameter error", lambda o: _scalar(o, "base_parameter_error"), "min"),
    _Column("trajectory RMS", lambda o: _scalar(o, "trajectory_rms_total"), "min"),
    _Column("mean qdd RSD", lambda o: _mean(o, "acceleration_rsd"), "min"),
    _Column("fit time [s]", lambda o: _scalar(o, "fit_time_s"), "min"),
    _Column("condition number", lambda o: _scalar(o, "condition_number"), None),
)


def _best_mask(
    values: list[float],
    better: str | None,
    eligible: list[bool] | None = None,
    text: Callable[[float], str] = format_number,
) -> list[bool]:
    """Which entries hold the best value among the ``eligible`` ones (default all); nothing is highlighted
    with fewer than two eligible values that are not NaN, nor when two eligible values tie at the shown
    precision (``text`` of the best value shared). An infinite value (a diverged simulation) takes part in the
    comparison but is never marked itself."""
    eligible = [True] * len(values) if eligible is None else eligible
    known = [v for v, ok in zip(values, eligible, strict=True) if ok and not math.isnan(v)]
    if better is None or len(known) < 2:
        return [False] * len(values)
    best = min(known) if better == "min" else max(known)
    if sum(text(v) == text(best) for v in known) > 1:
        return [False] * len(values)  # a tie as shown: no row is better than the others
    return [ok and math.isfinite(v) and v == best for v, ok in zip(values, eligible, strict=True)]


def comparison_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """The comparison table: one row per estimator, one column per metric.

    Columns: estimator, total torque RMS, torque RMS against the noise-free torque, mean normalised RMS
    (% of each joint's validation torque range, and of its URDF effort limit), mean RSD, mean agreement
    index, relative base-parameter error, trajectory RMS, fit time, condition number. A metric column
    appears only when at least one row has a value for it (inf counts: a diverged simulation). The best
    value of each column (lowest, or highest for the agreement index) is marked ``best`` when two or more
    estimators have one; baseline rows (``result.baselines``, the CAD row) and the condition number are
    never marked.

    Args:
        result: the study.

    Returns:
        ``(headers, rows)``; ``rows[k][0]`` is the name of ``result.outcomes[k]``.
    """
    outcomes = result.outcomes
    estimators = [o.name not in result.baselines for o in outcomes]
    headers = ["estimator"]
    columns: list[list[Cell]] = []
    for column in _COMPARISON_COLUMNS:
        values = [column.extract(o) for o in outcomes]
        if all(math.isnan(v) for v in values):
            continue
        headers.append(column.header)
        mask = _best_mask(values, column.better, estimators)
        columns.append([Cell(format_number(v), v, b) for v, b in zip(values, mask, strict=True)])
    rows = [[Cell(o.name)] + [col[k] for col in columns] for k, o in enumerate(outcomes)]
    return headers, rows


def _joint_values(metrics: Mapping, key: str, n: int) -> np.ndarray | None:
    """The per-joint metric ``key`` as an (n,) array (None entries NaN), or None when it is missing, not a list
    or not one value per joint."""
    value = metrics.get(key)
    if not isinstance(value, list | tuple | np.ndarray):
        return None
    arr = np.asarray(value, dtype=float).ravel()
    return arr if arr.size == n else None


def per_joint_rms(result: StudyResult, outcome: EstimatorOutcome) -> np.ndarray:
    """Per-joint torque RMS of one estimator on the validation trajectory (seed 001 Table 5).

    Uses ``outcome.metrics["torque_rms"]`` when present, else computes it from ``tau_predicted``.

    Args:
        result: the study (for the measured torque).
        outcome: the estimator.

    Returns:
        (n,) RMS per joint.
    """
    stored = _joint_values(outcome.metrics, "torque_rms", len(result.joint_names))
    if stored is not None:
        return stored
    residual = np.asarray(result.tau_measured, dtype=float) - np.asarray(outcome.tau_predicted, dtype=float)
    return np.sqrt(np.mean(residual**2, axis=0))


def per_joint_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """Per-joint torque RMS: one row per joint, one column per estimator, the lowest of each row marked best.

    Args:
        result: the study.

    Returns:
        ``(headers, rows)`` with headers ``["joint", estimator names...]``.
    """
    headers = ["joint"] + [o.name for o in result.outcomes]
    per_outcome = [per_joint_rms(result, o) for o in result.outcomes]
    estimators = [o.name not in result.baselines for o in result.outcomes]
    rows = []
    for j, joint in enumerate([*result.joint_names, "sum"]):
        values = [float(rms[j]) if j < len(rms) else float(np.sum(rms)) for rms in per_outcome]
        mask = _best_mask(values, "min", estimators)
        rows.append([Cell(joint)] + [Cell(format_number(v), v, b) for v, b in zip(values, mask, strict=True)])
    return headers, rows


def consistency_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """Physical consistency of each model (metrics ``physically_consistent`` and ``link_min_eigenvalue``): yes/no
    and the smallest pseudo-inertia eigenvalue of each link; models without inertial parameters are left out.

    Returns:
        ``(headers, rows)`` with headers ``["model", "consistent", "link 1", ...]``; no rows when no model has it.
    """
    checked = [o for o in result.outcomes if o.metrics.get("link_min_eigenvalue") is not None]
    if not checked:
        return [], []
    n = max(len(o.metrics["link_min_eigenvalue"]) for o in checked)
    headers = ["model", "consistent"] + [f"link {k + 1}" for k in range(n)]
    rows = []
    for o in checked:
        values = [
            Cell("—") if v is None or not np.isfinite(v) else Cell(format_number(v), v)
            for v in o.metrics["link_min_eigenvalue"]
        ]
        rows.append([Cell(o.name), Cell("yes" if o.metrics.get("physically_consistent") else "no")] + values)
    return headers, rows


#: the rows of the validation-trajectory table per joint: (label, metric key, better)
TRAJECTORY_INDICES = (
    ("RMS", "trajectory_rms", "min"),
    ("RSD", "trajectory_rsd", "min"),
    ("AI", "trajectory_agreement_index", "max"),
    ("max |Δq|", "trajectory_max_error", "min"),
)
#: the rows of the forward-dynamics acceleration table per joint (seed 003 §3.3, Fig. 12–14)
ACCELERATION_INDICES = (
    ("RMS", "acceleration_rms", "min"),
    ("RSD", "acceleration_rsd", "min"),
)


def _joint_index_rows(result: StudyResult, indices, required: str) -> tuple[list[str], list[list[Cell]]]:
    """Rows per joint and index (``indices``: (label, metric key, better)) of the estimators that have the
    per-joint metric ``required``; an index an estimator lacks shows —."""
    n = len(result.joint_names)
    outcomes = [o for o in result.outcomes if _joint_values(o.metrics, required, n) is not None]
    headers = ["joint", "index"] + [o.name for o in outcomes]
    eligible = [o.name not in result.baselines for o in outcomes]
    nan = np.full(n, math.nan)
    columns = {
        key: [v if (v := _joint_values(o.metrics, key, n)) is not None else nan for o in outcomes]
        for _, key, _ in indices
    }
    rows = []
    for j, joint in enumerate(result.joint_names if outcomes else []):
        shown = [index for index in indices if any(math.isfinite(c[j]) or math.isinf(c[j]) for c in columns[index[1]])]
        for k, (label, key, better) in enumerate(shown):
            values = [float(column[j]) for column in columns[key]]
            mask = _best_mask(values, better, eligible)
            cells = [Cell(format_number(v), v, b) for v, b in zip(values, mask, strict=True)]
            rows.append([Cell(joint if k == 0 else ""), Cell(label)] + cells)
    return headers, rows


def acceleration_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """Forward dynamics on the validation trajectory (seed 003 §3.3, Fig. 12–14): per joint, RMS (rad/s² or
    m/s²) and RSD of the accelerations M(q)⁻¹(τ − h) of each model under the measured torque against the
    measured ones; the lowest of each row marked (never a baseline).

    Returns:
        ``(headers, rows)`` with headers ``["joint", "index", estimator names...]``; no rows when no estimator
        has the ``acceleration_rsd`` metric.
    """
    return _joint_index_rows(result, ACCELERATION_INDICES, "acceleration_rsd")


def trajectory_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """The validation trajectory's error indices (seed 004 Table 5, Eq. 45–47): rows per joint, RMS, RSD,
    agreement index and the largest error over the horizon (seed 003 Fig. 12–14; rad or m, shown when known) of
    the joint position of each model's open-loop simulation against the reference motion, one column per
    estimator that has them.

    The best value of each row (lowest RMS and RSD, highest AI) is marked when two or more estimators have
    one; a baseline (the CAD row) is never marked. A diverged simulation shows RMS and RSD ``inf`` and AI 0.

    Args:
        result: the study; uses the ``trajectory_rms``, ``trajectory_rsd``, ``trajectory_agreement_index`` and
            ``trajectory_max_error`` metrics (n,).

    Returns:
        ``(headers, rows)`` with headers ``["joint", "index", estimator names...]``; the joint is named on its
        first row only; no rows when no estimator has the indices.
    """
    return _joint_index_rows(result, TRAJECTORY_INDICES, "trajectory_rms")


def diagnostic_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """The diagnostics table: one row per (estimator, diagnostic) with every diagnostic the estimator's model
    reported in its row of ``metrics.json`` (whatever the estimator:
    :func:`~robotid_sim.identification.evaluation.reported_diagnostics`); a list is shown joined.

    Returns:
        ``(headers, rows)``; no rows when no model reported a diagnostic.
    """
    from robotid_sim.identification.evaluation import diagnostic_keys

    rows = []
    for outcome in result.outcomes:
        for key in diagnostic_keys(outcome.metrics):
            value = outcome.metrics[key]
            text = _joined(_numbers(value), format_number) if isinstance(value, list) else format_number(value)
            rows.append([Cell(outcome.name), Cell(key), Cell(text, _number(value))])
    return ["estimator", "diagnostic", "value"], rows


def _scaled_column(table, factor: float) -> int | None:
    """Index of ``factor`` among the sensitivity table's factors, or None."""
    return next((j for j, f in enumerate(table.factors) if math.isclose(f, factor)), None)


def _rms_text(value: float) -> str:
    return "inf (diverged)" if math.isinf(value) else format_number(value)


def sensitivity_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """The ±50 % sensitivity table (seed 004 Table 6): one row per identified parameter, in the model's order.

    Columns: name (and label), nominal value, the values at ×0.5 and ×1.5 (the seed's "minimum" and "maximum",
    named by their factor here: for a negative nominal value ×1.5 is the smaller),
    the trajectory RMS over all joints of the model with that parameter scaled by 0.5 and by 1.5 against the
    nominal model's trajectory (``inf (diverged)`` where the scaled model's simulation diverged), the largest
    RMS over every factor studied with its factor, and the parameter's rank by that largest RMS (1: most
    sensitive; ties keep the parameter order). Nothing is marked best.

    Args:
        result: the study; uses ``result.sensitivity``.

    Returns:
        ``(headers, rows)``; no rows without a sensitivity study.
    """
    headers = _name_headers(result) + [
        "nominal",
        "value at ×0.5",
        "value at ×1.5",
        "RMS at ×0.5",
        "RMS at ×1.5",
        "largest RMS",
        "rank",
    ]
    if result.sensitivity is None:
        return headers, []
    table = result.sensitivity.table
    rank = {name: k + 1 for k, name in enumerate(table.ranking())}
    low, high = _scaled_column(table, 0.5), _scaled_column(table, 1.5)
    rows = []
    for i, name in enumerate(table.parameter_names):
        nominal = float(table.values[i])
        rms = [math.nan if j is None else float(table.rms_total[i, j]) for j in (low, high)]
        worst = int(np.argmax(table.rms_total[i]))
        largest = float(table.rms_total[i, worst])
        rows.append(
            _name_cells(result, name)
            + [Cell(format_number(nominal), nominal)]
            + [Cell(format_number(f * nominal), f * nominal) for f in (0.5, 1.5)]
            + [Cell(_rms_text(v), v) for v in rms]
            + [Cell(f"{_rms_text(largest)} at ×{table.factors[worst]:g}", largest)]
            + [Cell(str(rank[name]), float(rank[name]))]
        )
    return headers, rows


#: Parameters whose reference value is below this fraction of the largest one count as (numerically) zero.
NEAR_ZERO = 1e-3


def parameter_scale(reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signed denominators for relative errors, guarded for parameters that are (numerically) zero.

    Base parameters such as a first moment about a symmetry axis are exactly zero; an error relative to
    them is undefined. Those get ``ε = NEAR_ZERO · max|θ|`` instead.

    Args:
        reference: (b,) reference values θ (true or final).

    Returns:
        ``(denominator, near_zero)``: (b,) θᵢ, or ε where ``|θᵢ| < ε``; (b,) bool mask of the latter.
    """
    reference = np.asarray(reference, dtype=float).ravel()
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    floor = max(NEAR_ZERO * scale, 1e-300)
    near_zero = np.abs(reference) < floor
    return np.where(near_zero, floor, reference), near_zero


def relative_parameter_errors(values: np.ndarray, true_values: np.ndarray) -> np.ndarray:
    """Per-parameter relative error ``|θ̂ᵢ − θᵢ| / max(|θᵢ|, ε)`` with ε from :func:`parameter_scale`.

    Args:
        values: (b,) identified values.
        true_values: (b,) true values.

    Returns:
        (b,) relative errors.
    """
    denominator, _ = parameter_scale(true_values)
    return np.abs(np.asarray(values, dtype=float).ravel() - np.asarray(true_values, dtype=float).ravel()) / np.abs(
        denominator
    )


def _base_table(result: StudyResult) -> list[tuple[str, str, float]]:
    """The study's (name, expression, true value) rows; without a base-parameter table, the estimators' own
    names and true values (NaN where unknown); a feature-library model's terms are no parameters of this table
    (the report prints them as equations)."""
    if result.base_parameter_table:
        return list(result.base_parameter_table)
    seen: dict[str, float] = {}
    for outcome in result.outcomes:
        if outcome.sparse is not None:
            continue
        truth = outcome.true_values
        for k, name in enumerate(outcome.parameter_names):
            if name not in seen:
                seen[name] = math.nan if truth is None else float(truth[k])
    return [(name, "", value) for name, value in seen.items()]


def _name_cells(result: StudyResult, name: str) -> list[Cell]:
    """A parameter's name, and its label when the study has labels (empty where this one has none)."""
    labels = result.parameter_labels
    return [Cell(name)] + ([Cell(labels.get(name, ""))] if labels else [])


def _name_headers(result: StudyResult) -> list[str]:
    return ["name"] + (["label"] if result.parameter_labels else [])


def _base_estimates(
    result: StudyResult, table: list[tuple[str, str, float]]
) -> list[tuple[EstimatorOutcome, dict[str, tuple[float, float]]]]:
    """The estimators with base parameters among the table's (not SINDy terms), each with name → (value, std).

    With the study's own base-parameter table, only models of exactly those parameters are shown: a standard
    parameter set (the CAD row, LMI-WLS) shares names such as ``M1`` that mean another quantity there.
    """
    names = {row[0] for row in table}
    exact = [row[0] for row in table] if result.base_parameter_table else None
    estimates = []
    for outcome in result.outcomes:
        if not names.intersection(outcome.parameter_names):
            continue
        if exact is not None and list(outcome.parameter_names) != exact:
            continue
        std = outcome.std
        lookup = {
            name: (float(outcome.values[k]), math.nan if std is None else float(std[k]))
            for k, name in enumerate(outcome.parameter_names)
        }
        estimates.append((outcome, lookup))
    return estimates


def base_parameter_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """Base parameters (seed 004 Table 4): name, its label (when the study has ``parameter_labels``),
    expression, true value, then each estimator's value (``value ± std`` when known).

    Estimators whose parameters are not base parameters (e.g. SINDy terms) get no column. When the
    study has no base-parameter table, the rows come from the estimators' own names and true values.

    Args:
        result: the study.

    Returns:
        ``(headers, rows)`` with headers ``["name", ("label",) "expression", "true", estimator names...]``.
    """
    table = _base_table(result)
    estimates = _base_estimates(result, table)
    headers = _name_headers(result) + ["expression", "true"] + [o.name for o, _ in estimates]
    rows = []
    for name, expression, true_value in table:
        row = _name_cells(result, name) + [Cell(expression), Cell(format_number(true_value), float(true_value))]
        for _, lookup in estimates:
            value, std = lookup.get(name, (math.nan, math.nan))
            text = format_number(value)
            if math.isfinite(std) and math.isfinite(value):
                text = f"{text} ± {format_number(std, 2)}"
            row.append(Cell(text, value))
        rows.append(row)
    return headers, rows


#: marks a relative error taken against ε because the true value is (numerically) zero
NEAR_ZERO_MARK = "†"


def relative_error_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """Relative error per base parameter in %: ``100 · |θ̂ᵢ − θᵢ| / max(|θᵢ|, ε)`` (:func:`parameter_scale`).

    One row per base parameter whose true value is known, one column per estimator of
    :func:`base_parameter_rows`; the lowest of each row is marked best (never a baseline). A parameter whose
    true value is (numerically) zero is measured against ``ε = NEAR_ZERO · max|θ|`` and its errors carry
    :data:`NEAR_ZERO_MARK`.

    Args:
        result: the study.

    Returns:
        ``(headers, rows)`` with headers ``["name", ("label",) estimator names...]``; no rows without a truth.
    """
    table = [row for row in _base_table(result) if math.isfinite(row[2])]
    estimates = _base_estimates(result, table)
    headers = _name_headers(result) + [o.name for o, _ in estimates]
    if not table or not estimates:
        return headers, []
    truth = np.array([value for _, _, value in table])
    _, near_zero = parameter_scale(truth)
    errors = [
        100.0 * relative_parameter_errors([lookup.get(name, (math.nan,))[0] for name, _, _ in table], truth)
        for _, lookup in estimates
    ]
    eligible = [o.name not in result.baselines for o, _ in estimates]
    rows = []
    for k, (name, _, _) in enumerate(table):
        values = [float(error[k]) for error in errors]
        mask = _best_mask(values, "min", eligible, lambda v: format_number(v, 3))
        mark = NEAR_ZERO_MARK if near_zero[k] else ""
        cells = [
            Cell(f"{format_number(v, 3)} %{mark}" if math.isfinite(v) else format_number(v), v, b)
            for v, b in zip(values, mask, strict=True)
        ]
        rows.append(_name_cells(result, name) + cells)
    return headers, rows


def _closed_loop_values(outcome: ClosedLoopOutcome, key: str, n: int) -> np.ndarray:
    values = _joint_values(outcome.metrics, key, n)
    return np.full(n, math.nan) if values is None else values


def closed_loop_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """The closed-loop table (seed 000 Fig. 15): one row per controller; columns η per joint, mean η and the
    largest |e| over the joints, the lowest of each column marked best.

    η_i = mean |q_ref - q| of joint i over the run, in degrees (millimetres for a prismatic joint).

    Args:
        result: the study.

    Returns:
        ``(headers, rows)`` with headers ``["controller", "η <joint> [deg]"..., "mean η", "max |e|"]``;
        ``rows[k][0]`` is the name of ``result.closed_loop[k]``.
    """
    outcomes, n = result.closed_loop, len(result.joint_names)
    units = next((o.metrics["units"] for o in outcomes if len(o.metrics.get("units") or []) == n), ["deg"] * n)
    same = len(set(units)) == 1
    headers = ["controller"] + [f"η {joint} [{unit}]" for joint, unit in zip(result.joint_names, units, strict=True)]
    headers += [f"mean η [{units[0]}]" if same else "mean η", f"max |e| [{units[0]}]" if same else "max |e|"]
    columns = [[_closed_loop_values(o, "eta", n)[j] for o in outcomes] for j in range(n)]
    columns.append([_scalar(o, "eta_mean") for o in outcomes])
    columns.append([float(np.max(_closed_loop_values(o, "max_error", n))) for o in outcomes])
    cells = []
    for values in columns:
        mask = _best_mask(values, "min")
        cells.append([Cell(format_number(v), v, b) for v, b in zip(values, mask, strict=True)])
    rows = [[Cell(o.name)] + [col[k] for col in cells] for k, o in enumerate(outcomes)]
    return headers, rows


def _rich_table(title: str, headers: list[str], rows: list[list[Cell]]) -> Table:
    from rich.table import Table  # only the terminal needs rich; the Markdown and HTML reports do not
    from rich.text import Text

    # Text objects throughout: names and headers such as "fit time [s]" must not be read as rich markup.
    table = Table(title=Text(title), caption="best value per column in bold green")
    for k, header in enumerate(headers):
        table.add_column(Text(header), justify="left" if k == 0 else "right", no_wrap=k == 0)
    for row in rows:
        table.add_row(*(Text(cell.text, style="bold green" if cell.best else "") for cell in row))
    return table


#: the terminal's comparison table: each column's short two-line header, in the order columns are kept while
#: the table still fits the terminal (the most telling first)
_COMPACT_HEADERS = {
    "torque RMS": "torque\nRMS",
    "torque RMS vs truth": "RMS vs\ntruth",
    "base-parameter error": "param.\nerror",
    "trajectory RMS": "traj.\nRMS",
    "fit time [s]": "fit\ntime [s]",
    "mean RSD": "mean\nRSD",
    "mean nRMS [% of range]": "nRMS\n% range",
    "mean agreement index": "agree-\nment",
    "mean qdd RSD": "qdd\nRSD",
    "mean nRMS [% of limit]": "nRMS\n% limit",
    "condition number": "cond.\nnumber",
}


@dataclass(frozen=True)
class CompactTable:
    """The comparison table cut to a terminal's width (:func:`compact_comparison_rows`).

    Attributes:
        headers: the short headers of the columns shown (the first is ``estimator``).
        rows: one row per estimator, cells as in :func:`comparison_rows`.
        same: ``(column, shown value)`` of each column left out because every estimator shows the same value.
        left_out: the columns left out for want of width.
    """

    headers: list[str]
    rows: list[list[Cell]]
    same: list[tuple[str, str]]
    left_out: list[str]


def _table_width(columns: list[list[str]]) -> int:
    """Characters a rich table with heavy-head box of these columns (each: header lines and cell texts) needs."""
    return 1 + sum(max(map(len, texts), default=0) + 3 for texts in columns)


def compact_comparison_rows(result: StudyResult, width: int) -> CompactTable:
    """The comparison table (:func:`comparison_rows`) for a terminal ``width`` characters wide.

    A column whose shown value is the same for every estimator (baselines such as ``CAD`` aside, when two or
    more estimators ran) separates nothing and is left out, its value kept in ``same``; the others are kept in
    the order of :data:`_COMPACT_HEADERS` while the table fits ``width`` and shown in the full table's order.

    Args:
        result: the study.
        width: the terminal's width in characters.

    Returns:
        The :class:`CompactTable`.
    """
    headers, rows = comparison_rows(result)
    estimators = [k for k, o in enumerate(result.outcomes) if o.name not in result.baselines]
    compared = estimators if len(estimators) >= 2 else list(range(len(rows)))
    same, candidates = [], []
    for c, header in enumerate(headers[1:], start=1):
        texts = {rows[k][c].text for k in compared}
        if len(compared) >= 2 and len(texts) == 1:
            same.append((header, texts.pop()))
        else:
            candidates.append(c)
    order = list(_COMPACT_HEADERS)
    candidates.sort(key=lambda c: order.index(headers[c]) if headers[c] in order else len(order))
    shown: list[int] = [0]
    left_out: list[str] = []
    for c in candidates:
        trial = sorted([*shown, c])
        columns = [_COMPACT_HEADERS.get(headers[i], headers[i]).split("\n") + [r[i].text for r in rows] for i in trial]
        if _table_width(columns) <= width:
            shown = trial
        else:
            left_out.append(headers[c])
    short = [_COMPACT_HEADERS.get(headers[i], headers[i]) for i in shown]
    return CompactTable(short, [[row[i] for i in shown] for row in rows], same, left_out)


def rich_comparison_table(result: StudyResult) -> Table:
    """The comparison table for the terminal, every column, best values in bold green.

    Args:
        result: the study.

    Returns:
        A :class:`rich.table.Table` with one row per estimator; the caller prints it.
    """
    return _rich_table(f"{result.title} ({result.robot_name})", *comparison_rows(result))


def rich_compact_comparison(result: StudyResult, width: int) -> tuple[Table, list[str]]:
    """The comparison table for a terminal ``width`` characters wide (:func:`compact_comparison_rows`), best
    values in bold green, and the lines to print under it naming the columns left out.

    Args:
        result: the study.
        width: the terminal's width in characters.

    Returns:
        A :class:`rich.table.Table` with one row per estimator, and the lines about the columns left out (none
        when every column is shown); the caller prints them.
    """
    compact = compact_comparison_rows(result, width)
    lines = []
    if compact.same:
        lines.append("the same for every estimator: " + ", ".join(f"{name} {text}" for name, text in compact.same))
    if compact.left_out:
        lines.append(f"not shown in {width} columns: " + ", ".join(compact.left_out))
    if compact.same or compact.left_out:
        lines.append("every column: the comparison table of report.md")
    return _rich_table(f"{result.title} ({result.robot_name})", compact.headers, compact.rows), lines


def rich_closed_loop_table(result: StudyResult) -> Table:
    """The closed-loop table (:func:`closed_loop_rows`) for the terminal, best values in bold green.

    Args:
        result: the study.

    Returns:
        A :class:`rich.table.Table` with one row per controller; the caller prints it.
    """
    return _rich_table(f"{result.title}: closed-loop tracking error η ({result.robot_name})", *closed_loop_rows(result))


# ------------------------------------------------------------------------------ sparse (feature-library) models
def sparse_outcomes(result: StudyResult) -> list[EstimatorOutcome]:
    """The outcomes whose model is a feature-library (SINDy-like) model, in the study's order."""
    return [o for o in result.outcomes if o.sparse is not None]


def _number(value: object) -> float:
    """A diagnostics value as a float (NaN when missing or not a number)."""
    if value is None or isinstance(value, bool):
        return math.nan
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _numbers(value: object, n: int | None = None) -> list[float]:
    """A diagnostics list as floats (NaN for entries that are not numbers); [] when not a list (or not n long)."""
    if not isinstance(value, list | tuple):
        return []
    out = [_number(v) for v in value]
    return out if n is None or len(out) == n else []


def _count_text(value: float) -> str:
    return MISSING if math.isnan(value) else str(int(round(value)))


def _joined(values: list[float], text: Callable[[float], str]) -> str:
    return " / ".join(text(v) for v in values) if values else MISSING


def _step_names(sparse) -> list[str]:
    return [
        str(s.get("step", f"Step {k + 1}")) if isinstance(s, dict) else f"Step {k + 1}"
        for k, s in enumerate(sparse.diagnostics.get("steps") or [])
    ]


def sparse_model_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """The sparse-model table in the layout of seed 000 Table 2: one row per feature-library model.

    Columns: estimator, library size (candidate functions; for stepwise SINDy the sum over its steps,
    diagnostics ``library_size``), the library per step (``library_sizes``, stepwise only), active terms per
    joint (``active_terms``: the terms of each joint's equation) and their total, fit time (``fit_time_s``)
    and the fit time per step (``steps[k]["fit_time_s"]``, stepwise only). The per-step columns appear only when
    a stepwise model is in the study. The lowest library size, active-term count and fit time are marked best
    when two or more models have one.

    Returns:
        ``(headers, rows)``; no rows when the study has no feature-library model.
    """
    outcomes = sparse_outcomes(result)
    if not outcomes:
        return [], []
    n = max((o.sparse.coefficients.shape[0] for o in outcomes), default=0)
    stepwise = any(o.sparse.is_stepwise for o in outcomes)
    headers = ["estimator", "library size"]
    if stepwise:
        headers.append("library per step")
    headers += [f"active τ{j + 1}" for j in range(n)] + ["active total", "fit time [s]"]
    if stepwise:
        headers.append("fit time per step [s]")
    columns: list[list[Cell]] = []

    def add(values: list[float], text: Callable[[float], str], better: str | None) -> None:
        mask = _best_mask(values, better, text=text)
        columns.append([Cell(text(v), v, b) for v, b in zip(values, mask, strict=True)])

    def add_text(texts: list[str]) -> None:
        columns.append([Cell(t) for t in texts])

    diagnostics = [o.sparse.diagnostics for o in outcomes]
    add([_number(d.get("library_size")) for d in diagnostics], _count_text, "min")
    if stepwise:
        add_text([_joined(_numbers(d.get("library_sizes")), _count_text) for d in diagnostics])
    active = [_numbers(d.get("active_terms"), n) or [math.nan] * n for d in diagnostics]
    for j in range(n):
        add([a[j] for a in active], _count_text, "min")
    add([math.nan if any(math.isnan(v) for v in a) else float(sum(a)) for a in active], _count_text, "min")
    add([_number(d.get("fit_time_s")) for d in diagnostics], format_number, "min")
    if stepwise:
        add_text(
            [
                _joined(
                    [_number(s.get("fit_time_s")) if isinstance(s, dict) else math.nan for s in d.get("steps") or []],
                    format_number,
                )
                for d in diagnostics
            ]
        )
    rows = [[Cell(o.name)] + [col[k] for col in columns] for k, o in enumerate(outcomes)]
    return headers, rows


def sparse_step_rows(outcome: EstimatorOutcome) -> tuple[list[str], list[list[Cell]]]:
    """The steps of a stepwise model: one row per step (diagnostics ``steps``).

    Columns: step, state, samples, runs (contiguous runs of samples in the state), library size, active terms
    per joint in that step's regression, fit time [s].

    Returns:
        ``(headers, rows)``; no rows for a model fitted in one go.
    """
    sparse = outcome.sparse
    if sparse is None or not sparse.is_stepwise:
        return [], []
    n = sparse.coefficients.shape[0]
    headers = ["step", "state", "samples", "runs", "library size"]
    headers += [f"active τ{j + 1}" for j in range(n)] + ["fit time [s]"]
    rows = []
    for name, step in zip(_step_names(sparse), sparse.diagnostics["steps"], strict=True):
        step = step if isinstance(step, dict) else {}
        active = _numbers(step.get("active_terms"), n) or [math.nan] * n
        row = [Cell(name), Cell(str(step.get("state", MISSING)).replace("_", " "))]
        row += [Cell(_count_text(v), v) for v in (_number(step.get(k)) for k in ("samples", "runs", "library_size"))]
        row += [Cell(_count_text(v), v) for v in active]
        fit = _number(step.get("fit_time_s"))
        row.append(Cell(format_number(fit), fit))
        rows.append(row)
    return headers, rows


def segmentation_summary(outcome: EstimatorOutcome) -> str | None:
    """One line on a stepwise model's segmentation (diagnostics ``segmentation``), or None without one.

    E.g. ``"RAI + k-means: k = 3 by the elbow on the WCSS (k = 1 … 8); samples per state: static 1136,
    constant velocity 1213, variable velocity 7414; 91.4 % agree with the data's own labels"``.
    """
    sparse = outcome.sparse
    seg = None if sparse is None else sparse.diagnostics.get("segmentation")
    if not isinstance(seg, dict):
        return None
    parts = []
    if seg.get("method") == "rai":
        wcss = _numbers(seg.get("wcss"))
        span = f" (k = 1 … {len(wcss)})" if wcss else ""
        parts.append(f"RAI + k-means: k = {seg.get('k', MISSING)} by the elbow on the WCSS{span}")
    else:
        parts.append(f"segmented by {str(seg.get('method', '?')).replace('_', ' ')} (the data's own labels)")
    samples = seg.get("samples")
    if isinstance(samples, dict) and samples:
        parts.append("samples per state: " + ", ".join(f"{str(k).replace('_', ' ')} {v}" for k, v in samples.items()))
    agreement = _number(seg.get("label_agreement"))
    if not math.isnan(agreement):
        parts.append(f"{100 * agreement:.1f} % agree with the data's own labels")
    time_s = _number(sparse.diagnostics.get("segmentation_time_s"))
    if not math.isnan(time_s):
        parts.append(f"segmentation time {format_number(time_s)} s")
    return "; ".join(parts)


#: longest line of an equation in the report before it is wrapped
EQUATION_WIDTH = 100
_TERM_BREAK = re.compile(r" (?=[+-] )")


def wrap_equation(equation: str, width: int = EQUATION_WIDTH) -> list[str]:
    """An equation ``tau1 = a*x + b*y - ...`` split into lines of at most ``width`` characters, breaking only
    before a ``+``/``-`` between terms (a term longer than the width keeps its own line); continuation lines are
    indented under the first term, so joining the stripped lines with single spaces gives the equation back."""
    head, sep, _ = equation.partition(" = ")
    indent = " " * (len(head) + len(sep)) if sep else "    "
    lines: list[str] = []
    for token in _TERM_BREAK.split(equation):
        if lines and len(lines[-1]) + 1 + len(token) <= width:
            lines[-1] += " " + token
        else:
            lines.append(token if not lines else indent + token)
    return lines or [equation]


def sequential_outcomes(result: StudyResult) -> list[EstimatorOutcome]:
    """The outcomes of stepwise least-squares models (``sequential``), in the study's order."""
    return [o for o in result.outcomes if o.steps]


def sequential_step_rows(outcome: EstimatorOutcome, joint_names: list[str]) -> tuple[list[str], list[list[Cell]]]:
    """The steps of a sequential identification (seed 003 §3.2 and §5.1): one row per step with the joint that
    moved, the base parameters it added, the torque equations used, rank H and rank [H τ] (seed 003 §3.2:
    equal for a unique, noise-free solution, one more when the torque holds noise), the condition number of
    the new parameters' columns and the residual RMS. Nothing is marked best.

    Returns:
        ``(headers, rows)``; no rows for an outcome without steps.
    """
    headers = ["step", "joint", "parameters added", "equations", "rank H", "rank [H τ]", "cond(H)", "residual RMS"]
    rows = []
    for step in outcome.steps or []:
        joint = step.get("joint")
        name = joint_names[joint] if isinstance(joint, int) and 0 <= joint < len(joint_names) else str(joint)
        rank_h, rank_aug = step.get("rank_h"), step.get("rank_h_tau")
        rows.append(
            [
                Cell(str(step.get("step", ""))),
                Cell(name),
                Cell(", ".join(str(p) for p in step.get("parameters", []))),
                Cell(format_number(step.get("rows")), _number(step.get("rows"))),
                Cell(str(rank_h), _number(rank_h)),
                Cell(str(rank_aug), _number(rank_aug)),
                Cell(format_number(step.get("condition_number")), _number(step.get("condition_number"))),
                Cell(format_number(step.get("residual_rms")), _number(step.get("residual_rms"))),
            ]
        )
    return headers, rows


def essential_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """The essential parameters of the models refitted on them (Pham and Gautier 1991): base and essential counts,
    the growth of the identification residual, the change of the validation torque RMS against the full base
    model (``essential_validation_change_pct``), and the dropped parameters in the order dropped with their
    relative std when dropped. Nothing is marked best.

    Returns:
        ``(headers, rows)``; no rows when no model has essential parameters.
    """
    headers = ["estimator", "base", "essential", "residual growth", "validation change", "dropped (relative std)"]
    rows = []
    for outcome in result.outcomes:
        ess = outcome.essential
        if ess is None:
            continue
        change = outcome.metrics.get("essential_validation_change_pct")
        growth = _number(ess.get("residual_growth"))
        stds = _numbers(ess.get("dropped_relative_std_pct"))
        dropped = ", ".join(
            f"{name} ({format_number(std, 3)} %)" if i < len(stds) else name
            for i, (name, std) in enumerate(zip(ess["dropped"], stds + [math.nan] * len(ess["dropped"]), strict=False))
        )
        rows.append(
            [
                Cell(outcome.name),
                Cell(str(len(outcome.values)), float(len(outcome.values))),
                Cell(str(ess["kept"]), _number(ess["kept"])),
                Cell(f"{format_number(100.0 * growth, 3)} %", 100.0 * growth),
                Cell("" if change is None else f"{format_number(change, 3)} %", _number(change)),
                Cell(dropped or "none"),
            ]
        )
    return headers, rows
