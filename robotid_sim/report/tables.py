"""Tables shared by the Markdown report, the HTML report and the terminal.

Every table is returned as ``(headers, rows)`` where each row is a list of :class:`Cell`: the text to show,
the number behind it (for sorting and highlighting) and whether it is the best value of its column.
The renderers only decide how a cell looks; what goes into it is decided here, once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from robotid_sim.report.result import ClosedLoopOutcome, EstimatorOutcome, StudyResult

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
    _Column("fit time [s]", lambda o: _scalar(o, "fit_time_s"), "min"),
    _Column("condition number", lambda o: _scalar(o, "condition_number"), None),
)


def _best_mask(values: list[float], better: str | None, eligible: list[bool] | None = None) -> list[bool]:
    """Which entries hold the best value among the ``eligible`` ones (default all); nothing is highlighted
    with fewer than two finite eligible values."""
    eligible = [True] * len(values) if eligible is None else eligible
    finite = [v for v, ok in zip(values, eligible, strict=True) if ok and math.isfinite(v)]
    if better is None or len(finite) < 2:
        return [False] * len(values)
    best = min(finite) if better == "min" else max(finite)
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


def per_joint_rms(result: StudyResult, outcome: EstimatorOutcome) -> np.ndarray:
    """Per-joint torque RMS of one estimator on the validation trajectory (seed 001 Table 5).

    Uses ``outcome.metrics["torque_rms"]`` when present, else computes it from ``tau_predicted``.

    Args:
        result: the study (for the measured torque).
        outcome: the estimator.

    Returns:
        (n,) RMS per joint.
    """
    n = len(result.joint_names)
    value = outcome.metrics.get("torque_rms")
    if value is not None:
        arr = np.asarray(value, dtype=float).ravel()
        if arr.size == n:
            return arr
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
    for j, joint in enumerate(result.joint_names):
        values = [float(rms[j]) for rms in per_outcome]
        mask = _best_mask(values, "min", estimators)
        rows.append([Cell(joint)] + [Cell(format_number(v), v, b) for v, b in zip(values, mask, strict=True)])
    return headers, rows


def base_parameter_rows(result: StudyResult) -> tuple[list[str], list[list[Cell]]]:
    """Base parameters: name, expression, true value, then each estimator's value (``value ± std`` when known).

    Estimators whose parameters are not base parameters (e.g. SINDy terms) get no column. When the
    study has no base-parameter table, the rows come from the estimators' own names and true values.

    Args:
        result: the study.

    Returns:
        ``(headers, rows)`` with headers ``["name", "expression", "true", estimator names...]``.
    """
    table = list(result.base_parameter_table)
    if not table:
        seen: dict[str, float] = {}
        for outcome in result.outcomes:
            truth = outcome.true_values
            for k, name in enumerate(outcome.parameter_names):
                if name not in seen:
                    seen[name] = math.nan if truth is None else float(truth[k])
        table = [(name, "", value) for name, value in seen.items()]
    names = {row[0] for row in table}
    included = [o for o in result.outcomes if names.intersection(o.parameter_names)]
    headers = ["name", "expression", "true"] + [o.name for o in included]
    lookups = []
    for outcome in included:
        std = outcome.std
        lookups.append(
            {
                name: (float(outcome.values[k]), math.nan if std is None else float(std[k]))
                for k, name in enumerate(outcome.parameter_names)
            }
        )
    rows = []
    for name, expression, true_value in table:
        row = [Cell(name), Cell(expression), Cell(format_number(true_value), float(true_value))]
        for lookup in lookups:
            value, std = lookup.get(name, (math.nan, math.nan))
            text = format_number(value)
            if math.isfinite(std) and math.isfinite(value):
                text = f"{text} ± {format_number(std, 2)}"
            row.append(Cell(text, value))
        rows.append(row)
    return headers, rows


def _closed_loop_values(outcome: ClosedLoopOutcome, key: str, n: int) -> list[float]:
    value = outcome.metrics.get(key)
    arr = np.asarray(value if isinstance(value, list | tuple) else [], dtype=float).ravel()
    return arr.tolist() if arr.size == n else [math.nan] * n


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


def rich_comparison_table(result: StudyResult) -> Table:
    """The comparison table for the terminal, best values in bold green.

    Args:
        result: the study.

    Returns:
        A :class:`rich.table.Table` with one row per estimator; the caller prints it.
    """
    return _rich_table(f"{result.title} ({result.robot_name})", *comparison_rows(result))


def rich_closed_loop_table(result: StudyResult) -> Table:
    """The closed-loop table (:func:`closed_loop_rows`) for the terminal, best values in bold green.

    Args:
        result: the study.

    Returns:
        A :class:`rich.table.Table` with one row per controller; the caller prints it.
    """
    return _rich_table(f"{result.title}: closed-loop tracking error η ({result.robot_name})", *closed_loop_rows(result))
