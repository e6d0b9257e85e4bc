"""PNG figures for the report (SPEC §13): torque fits, errors, parameter convergence and values, friction,
sparsity, closed-loop tracking errors, parameter sensitivity.

Every function takes plain data and a path, writes one PNG and returns the path. Figures are built with
:class:`matplotlib.figure.Figure` directly, never through ``pyplot``, so nothing touches matplotlib's
global state or needs a display, and nothing has to be closed; PNGs are rendered by the Agg canvas.
matplotlib is imported by the functions that draw, not with this module, so importing the report costs
nothing until a figure is made.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.report.result import EstimatorOutcome, SensitivityOutcome, StudyResult
from robotid_sim.report.tables import (
    NEAR_ZERO,
    parameter_scale,
    per_joint_rms,
    relative_parameter_errors,
    sparse_outcomes,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap
    from matplotlib.figure import Figure

DPI = 110
_MEASURED = "0.55"
_TRUTH = "black"


def estimator_colors(names: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """One colour per estimator, the same in every figure of a report.

    Args:
        names: estimator names in the study's order.

    Returns:
        Name to RGB colour.
    """
    palette = _palette()
    return {name: palette[k % len(palette)] for k, name in enumerate(names)}


def _colormap(name: str) -> Colormap:
    from matplotlib import colormaps

    return colormaps[name]


@functools.cache
def _palette() -> tuple[tuple[float, ...], ...]:
    """The qualitative palette (matplotlib's ``tab10``) shared by every figure."""
    return tuple(_colormap("tab10").colors)


def new_figure(width: float, height: float) -> Figure:
    """A matplotlib Figure of ``width`` x ``height`` inches, constrained layout, rendered by Agg (never pyplot)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PNG to ``path`` (its folder created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, format="png")
    fig.clear()
    return path


def panel_grid(fig: Figure, count: int, max_cols: int, sharex: bool) -> list[Axes]:
    """``count`` axes in a grid of at most ``max_cols`` columns; unused cells hidden, x labels kept visible."""
    ncols = min(count, max_cols)
    nrows = math.ceil(count / ncols)
    axes = fig.subplots(nrows, ncols, sharex=sharex, squeeze=False)
    flat = list(axes.flat)
    for k, ax in enumerate(flat):
        if k >= count:
            ax.set_visible(False)
        elif k + ncols >= count:  # nothing visible below this one
            ax.xaxis.set_tick_params(labelbottom=True)
    return flat[:count]


def _label_bottom(axes: list[Axes], max_cols: int, label: str) -> None:
    ncols = min(len(axes), max_cols)
    for k, ax in enumerate(axes):
        if k + ncols >= len(axes):
            ax.set_xlabel(label)


#: the SI unit of a joint quantity for a revolute and for a prismatic joint
_UNITS = {
    "q": ("rad", "m"),
    "q_shown": ("deg", "mm"),
    "qd": ("rad/s", "m/s"),
    "qdd": ("rad/s²", "m/s²"),
    "tau": ("N·m", "N"),
}
#: the unit written on an axis whose quantity has none (a ratio, a count)
DIMENSIONLESS = "[-]"


def joint_unit(result: StudyResult, quantity: str, joint: int | None = None) -> str:
    """The unit of ``quantity`` (``q``, ``q_shown`` (degrees or millimetres), ``qd``, ``qdd``, ``tau``) of
    ``joint``, or of every joint (None): ``"N·m"``, ``"N"``, or ``"N·m or N"`` where the kinds differ or are
    unknown (``result.joint_kinds``)."""
    revolute, prismatic = _UNITS[quantity]
    kinds = result.joint_kinds
    if joint is not None:
        kinds = kinds[joint : joint + 1]
    if kinds and all(kind == "prismatic" for kind in kinds):
        return prismatic
    if kinds and all(kind != "prismatic" for kind in kinds):
        return revolute
    return f"{revolute} or {prismatic}"


def _degrees_or_millimetres(result: StudyResult, values: np.ndarray, joint: int) -> np.ndarray:
    """Joint positions (rad or m) in the unit of :func:`joint_unit` ``q_shown``."""
    prismatic = joint < len(result.joint_kinds) and result.joint_kinds[joint] == "prismatic"
    return 1000.0 * values if prismatic else np.degrees(values)


def log_scale_if_wide(ax: Axes, values: np.ndarray, ratio: float = 100.0) -> None:
    """A logarithmic y axis when the positive finite ``values`` span more than ``ratio``."""
    positive = values[np.isfinite(values) & (values > 0)]
    if positive.size and positive.max() / positive.min() > ratio:
        ax.set_yscale("log")


def plot_torque_comparison(result: StudyResult, path: str | Path, max_points: int = 4000) -> Path:
    """Measured validation torque against each estimator's prediction, one subplot per joint.

    The noise-free torque, when known, is drawn as a thin dashed black line. Samples are decimated to at
    most ``max_points`` per curve for plotting only.

    Args:
        result: the study; uses ``t_validation`` (N,), ``tau_measured`` (N, n), ``tau_true`` and each
            outcome's ``tau_predicted`` (N, n).
        path: PNG to write.
        max_points: most samples drawn per curve.

    Returns:
        ``path``.
    """
    t = np.asarray(result.t_validation, dtype=float)
    measured = np.asarray(result.tau_measured, dtype=float).reshape(len(t), -1)
    n = measured.shape[1]
    step = max(1, math.ceil(len(t) / max(1, max_points)))
    colors = estimator_colors([o.name for o in result.outcomes])
    max_cols = 1 if n <= 4 else 2
    nrows = math.ceil(n / max_cols)
    fig = new_figure(12.0 if max_cols == 2 else 10.0, 1.75 * nrows + 1.1)
    axes = panel_grid(fig, n, max_cols, sharex=True)
    names = list(result.joint_names) + [f"joint {j + 1}" for j in range(len(result.joint_names), n)]
    for j, ax in enumerate(axes):
        ax.plot(t[::step], measured[::step, j], color=_MEASURED, lw=0.8, label="measured")
        for outcome in result.outcomes:
            predicted = np.asarray(outcome.tau_predicted, dtype=float).reshape(len(t), -1)
            ax.plot(t[::step], predicted[::step, j], color=colors[outcome.name], lw=1.1, label=outcome.name)
        if result.tau_true is not None:
            truth = np.asarray(result.tau_true, dtype=float).reshape(len(t), -1)
            ax.plot(t[::step], truth[::step, j], color=_TRUTH, lw=0.7, ls="--", label="truth (noise-free)")
        ax.set_title(names[j], fontsize=10, loc="left")
        ax.set_ylabel(f"torque [{joint_unit(result, 'tau', j)}]")
        ax.grid(alpha=0.3)
        ax.margins(x=0)
    _label_bottom(axes, max_cols, "time [s]")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6), frameon=False)
    return save_figure(fig, path)


def plot_forward_dynamics(result: StudyResult, path: str | Path, max_points: int = 4000) -> Path:
    """Forward dynamics of the identified models (seed 003 §3.3, Fig. 12–14), one row per joint.

    Left: the validation accelerations (noise-free in a simulation, else measured) against each model's
    M(q)⁻¹(τ − h) under the same torque.
    Right (when the study has an open-loop validation): the reference joint angle (the true robot's rollout,
    or the measured motion) against each model's open-loop simulation under the same torque, in degrees.

    Args:
        result: the study; uses ``t_validation``, ``qdd_reference``, ``open_loop_t``, ``q_open_loop_reference``
            and each outcome's ``qdd_predicted`` and ``q_open_loop``.
        path: PNG to write.
        max_points: most samples drawn per curve.

    Returns:
        ``path``.
    """
    t = np.asarray(result.t_validation, dtype=float)
    measured = np.asarray(result.qdd_reference, dtype=float).reshape(len(t), -1)
    n = measured.shape[1]
    step = max(1, math.ceil(len(t) / max(1, max_points)))
    colors = estimator_colors([o.name for o in result.outcomes])
    reference = result.q_open_loop_reference
    cols = 2 if reference is not None and result.open_loop_t is not None else 1
    fig = new_figure(12.0 if cols == 2 else 10.0, 1.9 * n + 1.1)
    axes = fig.subplots(n, cols, squeeze=False)
    names = list(result.joint_names) + [f"joint {j + 1}" for j in range(len(result.joint_names), n)]
    for j in range(n):
        ax = axes[j, 0]
        ax.plot(t[::step], measured[::step, j], color=_MEASURED, lw=0.8, label="recorded")
        for outcome in result.outcomes:
            if outcome.qdd_predicted is not None:
                qdd = np.asarray(outcome.qdd_predicted, dtype=float).reshape(len(t), -1)
                ax.plot(t[::step], qdd[::step, j], color=colors[outcome.name], lw=1.0, label=outcome.name)
        ax.set_title(f"{names[j]}: acceleration", fontsize=10, loc="left")
        ax.set_ylabel(f"qdd [{joint_unit(result, 'qdd', j)}]")
        ax.grid(alpha=0.3)
        ax.margins(x=0)
        if cols == 2:
            ax = axes[j, 1]
            t_open = np.asarray(result.open_loop_t, dtype=float)
            q_reference = _degrees_or_millimetres(result, np.asarray(reference, dtype=float)[:, j], j)
            ax.plot(t_open, q_reference, color=_TRUTH, lw=1.2, ls="--", label="reference")
            for outcome in result.outcomes:
                if outcome.q_open_loop is not None:
                    q = _degrees_or_millimetres(result, np.asarray(outcome.q_open_loop, dtype=float)[:, j], j)
                    ax.plot(t_open, q, color=colors[outcome.name], lw=1.0, label=outcome.name)
            ax.set_title(f"{names[j]}: open-loop angle", fontsize=10, loc="left")
            ax.set_ylabel(f"q [{joint_unit(result, 'q_shown', j)}]")
            ax.grid(alpha=0.3)
            ax.margins(x=0)
    for ax in axes[-1]:
        ax.set_xlabel("time [s]")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if cols == 2:
        more = axes[0, 1].get_legend_handles_labels()
        for h, label in zip(*more, strict=True):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6), frameon=False)
    return save_figure(fig, path)


def plot_torque_errors(result: StudyResult, path: str | Path) -> Path:
    """Grouped bars of the per-joint torque RMS of each estimator; log scale when values span over 100x.

    Args:
        result: the study.
        path: PNG to write.

    Returns:
        ``path``.
    """
    n = len(result.joint_names)
    outcomes = result.outcomes
    colors = estimator_colors([o.name for o in outcomes])
    rms = np.array([per_joint_rms(result, o) for o in outcomes]).reshape(len(outcomes), n)
    fig = new_figure(min(13.0, max(6.0, 1.0 + 0.3 * n * max(1, len(outcomes)) + 0.3 * n)), 4.2)
    ax = fig.subplots()
    width = 0.8 / max(1, len(outcomes))
    x = np.arange(n)
    for k, outcome in enumerate(outcomes):
        ax.bar(x - 0.4 + width * (k + 0.5), rms[k], width, color=colors[outcome.name], label=outcome.name)
    log_scale_if_wide(ax, rms)
    ax.set_xticks(x, result.joint_names, rotation=30 if n > 6 else 0, ha="right" if n > 6 else "center")
    ax.set_ylabel(f"torque RMS on validation [{joint_unit(result, 'tau')}]")
    ax.set_title("Per-joint torque RMS (lower is better)", fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    fig.legend(loc="outside lower center", ncols=min(len(outcomes), 5), frameon=False)
    return save_figure(fig, path)


def plot_tracking_errors(result: StudyResult, path: str | Path, max_points: int = 4000) -> Path:
    """Closed-loop tracking error against time, one subplot per joint, one line per controller (seed 000
    Fig. 15).

    The signed error q_ref - q is drawn on a linear axis; when the controllers' errors span more than 100x
    (a PID next to computed torque on an accurate model) |q_ref - q| is drawn on a log axis instead, so that
    every controller stays visible. Samples are decimated to at most ``max_points`` per curve for plotting.

    Args:
        result: the study; uses each ``result.closed_loop`` outcome's ``t`` (N,), ``error`` (N, n) and
            ``metrics["units"]``.
        path: PNG to write.
        max_points: most samples drawn per curve.

    Returns:
        ``path``.
    """
    outcomes = [o for o in result.closed_loop if o.t is not None and o.error is not None]
    n = len(result.joint_names)
    colors = estimator_colors([o.name for o in outcomes])
    units = next((o.metrics["units"] for o in outcomes if len(o.metrics.get("units") or []) == n), ["deg"] * n)
    errors = [np.abs(np.asarray(o.error, dtype=float)) for o in outcomes]
    typical = np.array([np.nanmean(e) for e in errors if np.isfinite(e).any()])
    logarithmic = typical.size > 1 and typical.min() > 0 and typical.max() / typical.min() > 100.0
    max_cols = 1 if n <= 4 else 2
    fig = new_figure(12.0 if max_cols == 2 else 10.0, 1.75 * math.ceil(n / max_cols) + 1.1)
    axes = panel_grid(fig, n, max_cols, sharex=True)
    for j, ax in enumerate(axes):
        for outcome in outcomes:
            t = np.asarray(outcome.t, dtype=float)
            step = max(1, math.ceil(len(t) / max(1, max_points)))
            e = np.asarray(outcome.error, dtype=float)[::step, j]
            ax.plot(t[::step], np.abs(e) if logarithmic else e, color=colors[outcome.name], lw=1.0, label=outcome.name)
        if logarithmic:  # down to 1 % of the smallest mean error: the start on the reference is not a feature
            ax.set_yscale("log")
            means = [np.nanmean(e[:, j]) for e in errors if np.isfinite(e[:, j]).any()]
            positive = [m for m in means if m > 0]
            if positive:
                ax.set_ylim(bottom=0.01 * min(positive))
        ax.set_title(result.joint_names[j], fontsize=10, loc="left")
        ax.set_ylabel(f"|e| [{units[j]}]" if logarithmic else f"e [{units[j]}]")
        ax.grid(alpha=0.3)
        ax.margins(x=0)
    _label_bottom(axes, max_cols, "time [s]")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=min(max(len(labels), 1), 6), frameon=False)
    return save_figure(fig, path)


def plot_parameter_errors(result: StudyResult, path: str | Path) -> Path:
    """Relative error per base parameter (log scale), one marker series per estimator with true values.

    Markers rather than bars keep 90+ parameters and several estimators readable; the legend gives each
    estimator's median relative error. Parameters whose true value is (numerically) zero are drawn hollow:
    their error is relative to ``ε = 1e-3 · max|θ|`` instead.

    Args:
        result: the study; outcomes without ``true_values`` are left out.
        path: PNG to write.

    Returns:
        ``path``.

    Raises:
        DataError: if no estimator has true values.
    """
    outcomes = [o for o in result.outcomes if o.true_values is not None]
    if not outcomes:
        raise DataError("plot_parameter_errors needs at least one estimator with true_values; none has any")
    colors = estimator_colors([o.name for o in result.outcomes])
    order = list(dict.fromkeys(name for o in outcomes for name in o.parameter_names))
    position = {name: k for k, name in enumerate(order)}
    b = len(order)
    fig = new_figure(min(16.0, max(7.0, 2.0 + 0.14 * b)), 4.8)
    ax = fig.subplots()
    markers = "os^Dv<>px*"
    any_zero = False
    for k, outcome in enumerate(outcomes):
        errors = relative_parameter_errors(outcome.values, outcome.true_values)
        _, near_zero = parameter_scale(outcome.true_values)
        any_zero |= bool(near_zero.any())
        x = np.array([position[name] for name in outcome.parameter_names])
        shown = np.clip(errors, 1e-12, None)
        color, marker = colors[outcome.name], markers[k % len(markers)]
        label = f"{outcome.name} (median {np.median(errors):.2g})"
        ax.scatter(
            x[~near_zero], shown[~near_zero], s=24, marker=marker, color=color, label=label, alpha=0.85, zorder=3
        )
        ax.scatter(x[near_zero], shown[near_zero], s=24, marker=marker, facecolors="none", edgecolors=color, zorder=3)
    ax.set_yscale("log")
    fontsize = 8 if b <= 30 else 6.5 if b <= 60 else 5.5
    ax.set_xticks(np.arange(b), order, rotation=90, fontsize=fontsize)
    ax.set_xlim(-0.7, b - 0.3)
    ax.set_ylabel(r"$|\hat\theta_i - \theta_i| \,/\, |\theta_i|$ " + DIMENSIONLESS)
    title = "Relative error per base parameter (lower is better)"
    if any_zero:
        title += f"\nhollow: true value ≈ 0, error relative to {NEAR_ZERO:g}·max|θ|"
    ax.set_title(title, fontsize=11 if not any_zero else 10)
    ax.grid(axis="y", alpha=0.3, which="major")
    ax.grid(axis="x", alpha=0.12)
    ax.set_axisbelow(True)
    ax.legend(frameon=True, framealpha=0.9, fontsize=8, loc="best")
    return save_figure(fig, path)


def _display_name(name: str, labels: Mapping[str, str] | None) -> str:
    """``"M1 (λ1*)"`` where ``labels`` gives the parameter one, else the name."""
    label = (labels or {}).get(name)
    return f"{name} ({label})" if label else name


def _history(outcome: EstimatorOutcome, xlabel: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """(t (K,), history (K, b), std (K, b) or None, x-axis label) of an outcome with a parameter history."""
    if outcome.history is None:
        raise DataError(f"estimator '{outcome.name}' has no parameter history to plot")
    history = np.asarray(outcome.history, dtype=float)
    history = history.reshape(len(history), -1)
    std = None if outcome.history_std is None else np.asarray(outcome.history_std, dtype=float).reshape(history.shape)
    counting = np.arange(len(history), dtype=float)
    t = counting if outcome.history_t is None else np.asarray(outcome.history_t, dtype=float).ravel()
    if xlabel is None:
        xlabel = "iteration [count]" if np.array_equal(t, counting) else "time [s]"
    return t, history, std, xlabel


#: half-width of the shaded band around a parameter history, in standard deviations
BAND_SIGMAS = 2.0
#: the most curves of other quantities than the parameters drawn as values rather than normalised
MAX_RAW_CURVES = 10


def plot_parameter_convergence(
    outcome: EstimatorOutcome,
    path: str | Path,
    xlabel: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Path:
    """Parameter history of an online or iterative estimator, normalised so that every curve ends on 1; a history
    of at most :data:`MAX_RAW_CURVES` other quantities (``history_names``, e.g. two_loop's exponents α per outer
    iteration, seed 001 Fig. 12) is drawn as its values.

    Each parameter is shown as ``θᵢ(k) / θᵢ`` with θ the true values when known, else the final identified
    values; a parameter whose reference is (numerically) zero is shown as ``1 + (θᵢ(k) − θᵢ) / ε`` with
    ``ε = 1e-3 · max|θ|``. Where the outcome has ``history_std`` (the EKF's covariance), a shaded band of
    ±2σ (:data:`BAND_SIGMAS`) surrounds each curve, normalised the same way. With true values a second panel
    shows the relative distance ``‖θ(k) − θ‖ / ‖θ‖``.

    Args:
        outcome: an estimator outcome with ``history`` (K, b), optionally ``history_t`` (K,) and
            ``history_std`` (K, b).
        path: PNG to write.
        xlabel: x-axis label; default ``"time [s]"``, or ``"iteration [count]"`` when ``history_t`` is None or
            just counts 0, 1, 2, ...
        labels: parameter name to the label added to its legend entry (``"M1 (λ1*)"``).

    Returns:
        ``path``.

    Raises:
        DataError: if the outcome has no history.
    """
    t, history, std, xlabel = _history(outcome, xlabel)
    b = history.shape[1]
    names = outcome.parameter_names if outcome.history_names is None else outcome.history_names
    # a few other quantities (two_loop's α per outer iteration) are drawn as they are; many (the base values of an
    # iterated standard model) are normalised to their final values
    own = outcome.history_names is None  # the parameters' own history: their truth or final values are the reference
    raw = not own and b <= MAX_RAW_CURVES
    truth = None if not own or outcome.true_values is None else np.asarray(outcome.true_values, dtype=float).ravel()
    if raw:
        normalised = history
        band = None if std is None else BAND_SIGMAS * std
    else:
        reference = history[-1] if not own else truth if truth is not None else np.asarray(outcome.values).ravel()
        normalised, band = _normalised(history, std, reference)

    fig = new_figure(9.0, 6.4 if truth is not None else 4.2)
    if truth is not None:
        ax, ax_err = fig.subplots(2, 1, sharex=True, height_ratios=[1.6, 1.0])
    else:
        ax, ax_err = fig.subplots(), None
    cmap = _colormap("viridis")
    few = b <= 10
    for k in range(b):
        label = _display_name(names[k], labels) if few and k < len(names) else None
        color = _palette()[k] if few else cmap(k / max(1, b - 1))
        ax.plot(t, normalised[:, k], lw=0.9 if few else 0.6, alpha=0.85 if few else 0.55, color=color, label=label)
        if band is not None:
            low, high = normalised[:, k] - band[:, k], normalised[:, k] + band[:, k]
            ax.fill_between(t, low, high, color=color, alpha=0.15 if few else 0.06, lw=0)
    if raw:
        ax.set_ylabel("value [SI unit of each]")
    else:
        _normalised_axis(ax, normalised, truth is not None)
    kind = "quantities" if raw else "parameters"
    title = f"{'Convergence' if raw else 'Parameter convergence'}: {outcome.name} ({b} {kind})"
    ax.set_title(title + (f", shaded ±{BAND_SIGMAS:g}σ" if band is not None else ""), fontsize=11)
    ax.grid(alpha=0.3)
    ax.margins(x=0)
    if few:
        ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        ax.legend(fontsize=8, loc="upper right", framealpha=0.9)
    if ax_err is not None and truth is not None:
        _plot_distance(ax_err, t, history, truth, xlabel)
    else:
        ax.set_xlabel(xlabel)
    return save_figure(fig, path)


def _normalised_axis(ax: Axes, normalised: np.ndarray, against_truth: bool) -> None:
    """The reference line at 1, y limits around the bulk of the normalised curves, and the y label."""
    finite = normalised[np.isfinite(normalised)]
    ax.axhline(1.0, color=_TRUTH, ls="--", lw=1.0, label="true" if against_truth else "final")
    if finite.size:
        low, high = np.percentile(finite, [2, 98])
        low, high = max(min(low, 0.5), -1.0), min(max(high, 1.5), 3.0)
        ax.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
    ax.set_ylabel(r"$\theta_i(k) / \theta_i$" + (" (true) " if against_truth else " (final) ") + DIMENSIONLESS)


def _normalised(history: np.ndarray, std: np.ndarray | None, reference: np.ndarray):
    """(``1 + (history − reference) / scale``, its ±:data:`BAND_SIGMAS` σ band or None), scale from
    :func:`~robotid_sim.report.tables.parameter_scale`."""
    denominator, _ = parameter_scale(reference)
    normalised = 1.0 + (history - reference) / denominator
    band = None if std is None else BAND_SIGMAS * std / np.abs(denominator)
    return normalised, band


def _plot_distance(ax: Axes, t: np.ndarray, history: np.ndarray, truth: np.ndarray, xlabel: str) -> None:
    """The relative distance ‖θ(k) − θ‖ / ‖θ‖ of a history (K, b) from the truth (b,) against ``t`` (K,)."""
    distance = np.linalg.norm(history - truth, axis=1) / max(float(np.linalg.norm(truth)), 1e-300)
    ax.plot(t, np.clip(distance, 1e-16, None), color="C3", lw=1.2)
    positive = distance[np.isfinite(distance) & (distance > 0)]
    if positive.size and positive.max() / positive.min() > 10:
        ax.set_yscale("log")
    else:
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    ax.set_ylabel(r"$\|\theta(k) - \theta\| / \|\theta\|$ " + DIMENSIONLESS)
    ax.grid(alpha=0.3)
    ax.set_xlabel(xlabel)


#: the most parameters :func:`plot_parameter_values` draws (one axis each)
MAX_VALUE_PANELS = 12


def plot_parameter_values(
    outcome: EstimatorOutcome,
    path: str | Path,
    xlabel: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Path:
    """Each parameter's value against time, one axis per parameter (seed 004 Fig. 5–6).

    The estimate is a solid line, the true value (when known) a dashed black line, and where the outcome has
    ``history_std`` a shaded band of ±2σ (:data:`BAND_SIGMAS`) surrounds the estimate.

    Args:
        outcome: an estimator outcome with ``history`` (K, b), b ≤ :data:`MAX_VALUE_PANELS`, optionally
            ``history_t`` (K,) and ``history_std`` (K, b).
        path: PNG to write.
        xlabel: x-axis label, as for :func:`plot_parameter_convergence`.
        labels: parameter name to the label added to its axis title (``"M1 (λ1*)"``).

    Returns:
        ``path``.

    Raises:
        DataError: if the outcome has no history.
        ConfigError: if it has more than :data:`MAX_VALUE_PANELS` parameters.
    """
    t, history, std, xlabel = _history(outcome, xlabel)
    b = history.shape[1]
    if b > MAX_VALUE_PANELS:
        raise ConfigError(
            f"plot_parameter_values draws at most {MAX_VALUE_PANELS} parameters; '{outcome.name}' has {b}"
        )
    truth = None if outcome.true_values is None else np.asarray(outcome.true_values, dtype=float).ravel()
    max_cols = min(b, 3)
    fig = new_figure(3.4 * max_cols + 0.6, 2.1 * math.ceil(b / max_cols) + 0.9)
    axes = panel_grid(fig, b, max_cols, sharex=True)
    for k, ax in enumerate(axes):
        name = outcome.parameter_names[k] if k < len(outcome.parameter_names) else f"θ{k + 1}"
        ax.plot(t, history[:, k], color="C0", lw=1.1, label="estimate")
        if std is not None:
            ax.fill_between(
                t,
                history[:, k] - BAND_SIGMAS * std[:, k],
                history[:, k] + BAND_SIGMAS * std[:, k],
                color="C0",
                alpha=0.2,
                lw=0,
                label=f"±{BAND_SIGMAS:g}σ",
            )
        if truth is not None:
            ax.axhline(truth[k], color=_TRUTH, ls="--", lw=1.0, label="true")
        finite = history[np.isfinite(history[:, k]), k]
        if finite.size:  # the start of an online estimate can be far off: frame the bulk, the end and the truth
            tail = finite[len(finite) // 2 :]
            low, high = np.percentile(finite, [5, 95])
            low, high = min(low, tail.min()), max(high, tail.max())
            if truth is not None:
                low, high = min(low, truth[k]), max(high, truth[k])
            pad = 0.1 * (high - low) or 0.1 * max(abs(high), 1e-12)
            ax.set_ylim(low - pad, high + pad)
        ax.set_title(_display_name(name, labels), fontsize=10, loc="left")
        ax.ticklabel_format(axis="y", useOffset=False)  # an offset label would sit on the title
        ax.grid(alpha=0.3)
        ax.margins(x=0)
    _label_bottom(axes, max_cols, xlabel)
    handles, legend = axes[0].get_legend_handles_labels()
    fig.legend(handles, legend, loc="outside lower center", ncols=len(legend), frameon=False)
    fig.suptitle(f"Parameter estimates: {outcome.name}", fontsize=11)
    return save_figure(fig, path)


def plot_sensitivity(
    sensitivity: SensitivityOutcome, path: str | Path, labels: Mapping[str, str] | None = None
) -> Path:
    """Trajectory RMS against the scale factor of each parameter, one curve per parameter (seed 004 Fig. 8).

    The RMS (over all joints) of the open-loop trajectory with one parameter scaled, against the nominal
    model's; log scale when the values span over 100x (the RMS 0 at ×1 is then a gap). A scale at which the
    simulation diverged leaves a gap in its curve and is named in the legend.

    Args:
        sensitivity: the study (:class:`~robotid_sim.report.result.SensitivityOutcome`).
        path: PNG to write.
        labels: parameter name to the label added to its legend entry (``"M1 (λ1*)"``).

    Returns:
        ``path``.
    """
    table = sensitivity.table
    factors = np.asarray(table.factors, dtype=float)
    rms = np.asarray(table.rms_total, dtype=float).reshape(len(table.parameter_names), len(factors))
    P = rms.shape[0]
    few = P <= 10
    cmap = _colormap("viridis")
    fig = new_figure(9.0, 4.8)
    ax = fig.subplots()
    markers = "os^Dv<>px*"
    log_scale_if_wide(ax, rms)
    # on a log axis the RMS 0 at ×1 (and of a parameter that is 0) leaves a gap rather than a drop to the floor
    floor = 0.0 if ax.get_yscale() == "log" else -np.inf
    for i, name in enumerate(table.parameter_names):
        label = _display_name(name, labels)
        diverged = factors[np.isinf(rms[i])]
        if diverged.size:
            label += " (diverged at ×" + ", ×".join(f"{f:g}" for f in diverged) + ")"
        color = _palette()[i] if few else cmap(i / max(1, P - 1))
        shown = np.where(np.isfinite(rms[i]) & (rms[i] > floor), rms[i], np.nan)
        ax.plot(factors, shown, color=color, lw=1.2, marker=markers[i % len(markers)], ms=4, label=label)
    ax.axvline(1.0, color="0.6", lw=0.8, ls=":")
    ax.set_xlabel(f"scale factor of the parameter {DIMENSIONLESS}")
    ax.set_ylabel(f"trajectory RMS over {sensitivity.horizon_s:g} s [rad, m for a prismatic joint]")
    ax.set_title(f"Sensitivity of the model of '{sensitivity.estimator}' to each parameter", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(
        fontsize=7.5 if few else 6,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
        ncols=1 if P <= 20 else 2,
    )
    return save_figure(fig, path)


def plot_friction_curves(result: StudyResult, path: str | Path) -> Path:
    """Friction torque against joint velocity, one subplot per joint, truth dashed black.

    Args:
        result: the study; uses ``friction_curves`` = {"qd": (M,) or (M, n) velocity grid, "true": (M, n),
            estimator name: (M, n)}.
        path: PNG to write.

    Returns:
        ``path``.

    Raises:
        DataError: if the study has no friction curves.
    """
    curves = result.friction_curves
    if not curves or "qd" not in curves:
        raise DataError("plot_friction_curves needs result.friction_curves with a 'qd' velocity grid")
    qd = np.asarray(curves["qd"], dtype=float)
    M = qd.shape[0]
    n = len(result.joint_names)
    qd = qd.reshape(M, -1)
    series = [key for key in curves if key not in ("qd", "true")]
    colors = estimator_colors(
        [o.name for o in result.outcomes] + [s for s in series if s not in {o.name for o in result.outcomes}]
    )
    max_cols = min(n, 3)
    nrows = math.ceil(n / max_cols)
    fig = new_figure(3.6 * max_cols + 0.6, 2.6 * nrows + 0.8)
    axes = panel_grid(fig, n, max_cols, sharex=False)
    for j, ax in enumerate(axes):
        x = qd[:, j if qd.shape[1] > 1 else 0]
        for name in series:
            y = np.asarray(curves[name], dtype=float).reshape(M, -1)
            ax.plot(x, y[:, j], color=colors[name], lw=1.3, label=name)
        if "true" in curves:
            y = np.asarray(curves["true"], dtype=float).reshape(M, -1)
            ax.plot(x, y[:, j], color=_TRUTH, lw=1.0, ls="--", label="true")
        ax.set_title(result.joint_names[j], fontsize=10, loc="left")
        ax.axhline(0, color="0.7", lw=0.6)
        ax.axvline(0, color="0.7", lw=0.6)
        ax.grid(alpha=0.3)
        ax.set_xlabel(f"velocity [{joint_unit(result, 'qd', j)}]")
        if j % max_cols == 0:
            ax.set_ylabel(f"friction torque [{joint_unit(result, 'tau', j)}]")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(labels), 6), frameon=False)
    return save_figure(fig, path)


def plot_sparsity(
    names: Sequence[str],
    coefficients: np.ndarray,
    path: str | Path,
    threshold: float,
    column_names: Sequence[str] | None = None,
    title: str | None = None,
) -> Path:
    """Magnitude of sparse-regression (SINDy-like) coefficients against the pruning threshold.

    A 1-D coefficient vector (p,) is drawn as stems on a log scale with the threshold as a red dashed line;
    terms below it are grey. A matrix (p, m), e.g. one column per joint, is drawn as a heatmap of
    ``log10|c|`` with the cells below the threshold left blank and the threshold marked on the colour bar.

    Args:
        names: (p,) term names.
        coefficients: (p,) or (p, m) coefficients.
        path: PNG to write.
        threshold: magnitude below which a term counts as inactive (> 0).
        column_names: (m,) column labels for a matrix; default ``τ1 … τm``.
        title: the figure's title; default the count of active terms.

    Returns:
        ``path``.

    Raises:
        DataError: if the names do not match the coefficients.
        ConfigError: if the threshold is not positive.
    """
    coefficients = np.asarray(coefficients, dtype=float)
    if coefficients.ndim not in (1, 2) or coefficients.shape[0] != len(names):
        raise DataError(
            f"plot_sparsity needs coefficients of shape (p,) or (p, m) with p = len(names) = "
            f"{len(names)}; got {coefficients.shape}"
        )
    if not threshold > 0:
        raise ConfigError(f"plot_sparsity needs a positive threshold; got {threshold}")
    magnitude = np.abs(coefficients)
    active = int(np.sum(magnitude >= threshold))
    p = len(names)
    heading = f"{active} of {magnitude.size} terms active (|c| ≥ {threshold:.3g})"
    fontsize = 8 if p <= 30 else 6.5 if p <= 70 else 5.5
    if coefficients.ndim == 1:
        fig = new_figure(min(16.0, max(7.0, 2.0 + 0.14 * p)), 4.6)
        ax = fig.subplots()
        positive = magnitude[magnitude > 0]
        floor = min(threshold, positive.min() if positive.size else threshold) * 1e-2
        shown = np.maximum(magnitude, floor)
        on = magnitude >= threshold
        x = np.arange(p)
        ax.vlines(x, floor, shown, colors=np.where(on, "C0", "0.7"), lw=1.2)
        ax.scatter(x[on], shown[on], color="C0", s=18, zorder=3, label="active")
        ax.scatter(x[~on], shown[~on], color="0.6", s=14, zorder=3, label="pruned")
        ax.axhline(threshold, color="C3", ls="--", lw=1.0, label="threshold")
        ax.set_yscale("log")
        ax.set_ylim(bottom=floor)
        ax.set_xticks(x, list(names), rotation=90, fontsize=fontsize)
        ax.set_xlim(-0.7, p - 0.3)
        ax.set_ylabel("|coefficient| [SI unit of each]")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    else:
        m = coefficients.shape[1]
        columns = list(column_names) if column_names is not None else [f"τ{j + 1}" for j in range(m)]
        fig = new_figure(max(5.0, 2.6 + 0.55 * m), min(20.0, max(3.5, 1.4 + 0.17 * p)))
        ax = fig.subplots()
        with np.errstate(divide="ignore"):
            logs = np.log10(magnitude)
        image = np.ma.masked_where(magnitude < threshold, logs)
        cmap = _colormap("viridis").with_extremes(bad="0.95")
        low = math.log10(threshold)
        high = float(image.max()) if image.count() else low + 1
        mesh = ax.imshow(image, aspect="auto", cmap=cmap, vmin=low, vmax=max(high, low + 1e-9), interpolation="nearest")
        colorbar = fig.colorbar(mesh, ax=ax)
        colorbar.set_label("log10 |coefficient| (blank: below threshold) [SI unit of each]")
        colorbar.ax.axhline(low, color="C3", lw=2)
        ax.set_xticks(np.arange(m), columns, fontsize=8)
        ax.set_yticks(np.arange(p), list(names), fontsize=fontsize)
    ax.set_title(heading if title is None else title, fontsize=11)
    return save_figure(fig, path)


# ------------------------------------------------------------------------------ sparse (feature-library) models
#: colours of the three states of stepwise SINDy's segmentation (seed 000 Fig. 2)
STATE_COLORS = {"static": "C0", "constant_velocity": "C2", "variable_velocity": "C3"}


def _int_list(value: object, n: int) -> np.ndarray | None:
    if not isinstance(value, list | tuple) or len(value) != n:
        return None
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None


def plot_active_terms(result: StudyResult, path: str | Path) -> Path:
    """Active terms per joint of every feature-library model, grouped bars (seed 000 Fig. 5 and Fig. 10).

    Reads each model's diagnostics ``active_terms`` (falling back to the non-zero coefficients per joint) and
    names its ``library_size`` in the legend.

    Raises:
        DataError: if the study has no feature-library model.
    """
    outcomes = sparse_outcomes(result)
    if not outcomes:
        raise DataError("plot_active_terms needs at least one feature-library model in the study")
    n = max(o.sparse.coefficients.shape[0] for o in outcomes)
    colors = estimator_colors([o.name for o in result.outcomes])
    fig = new_figure(max(6.0, 2.5 + 0.9 * n * max(1, len(outcomes)) ** 0.5), 4.2)
    ax = fig.subplots()
    width = 0.8 / len(outcomes)
    x = np.arange(n)
    for k, outcome in enumerate(outcomes):
        sparse = outcome.sparse
        active = _int_list(sparse.diagnostics.get("active_terms"), n)
        if active is None:
            active = np.count_nonzero(sparse.coefficients, axis=1).astype(float)
        size = sparse.diagnostics.get("library_size")
        label = outcome.name + (f" (library {size})" if isinstance(size, int) else "")
        bars = ax.bar(x + (k - (len(outcomes) - 1) / 2) * width, active, width, color=colors[outcome.name], label=label)
        ax.bar_label(bars, fmt="%d", fontsize=7, padding=1)
    ax.set_xticks(x, [f"τ{j + 1}\n{name}" for j, name in enumerate(result.joint_names[:n])], fontsize=8)
    ax.set_ylabel("active terms [count]")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    ax.set_title("Active terms per joint", fontsize=11)
    return save_figure(fig, path)


def plot_sparse_model(outcome: EstimatorOutcome, path: str | Path, joint_names: Sequence[str] | None = None) -> Path:
    """The coefficients of a feature-library model, terms × joints (:func:`plot_sparsity` as a heatmap).

    The model holds only the terms active on some joint; a blank cell is a term inactive on that joint. The
    threshold is the estimator's ``threshold`` option (else the smallest non-zero magnitude).

    Raises:
        DataError: if the outcome has no feature-library model.
    """
    sparse = outcome.sparse
    if sparse is None:
        raise DataError(f"'{outcome.name}' is not a feature-library model")
    coefficients = np.asarray(sparse.coefficients, dtype=float)
    magnitude = np.abs(coefficients[coefficients != 0])
    threshold = sparse.threshold or (float(magnitude.min()) if magnitude.size else 1.0)
    n = coefficients.shape[0]
    names = list(joint_names or [])
    columns = [f"τ{j + 1}" + (f" {names[j]}" if j < len(names) else "") for j in range(n)]
    active = int(np.count_nonzero(coefficients))
    size = sparse.diagnostics.get("library_size")
    of = f" of a library of {size} candidates" if isinstance(size, int) else ""
    title = f"{outcome.name}: {len(sparse.terms)} terms{of} kept; {active} active coefficients (|ξ| > {threshold:.3g})"
    if not sparse.terms:
        fig = new_figure(6.0, 2.5)
        ax = fig.subplots()
        ax.text(0.5, 0.5, "no active term", ha="center", va="center")
        ax.set_axis_off()
        ax.set_title(title, fontsize=10)
        return save_figure(fig, path)
    return plot_sparsity(sparse.terms, coefficients.T, path, threshold, column_names=columns, title=title)


def plot_segmentation(outcome: EstimatorOutcome, path: str | Path) -> Path:
    """Stepwise SINDy's RAI + k-means segmentation (seed 000 Fig. 2 and its elbow).

    Left: the RAI plane (RAI of the velocities against RAI of the accelerations). When the diagnostics carry
    per-sample features (``segmentation["features"]``, (N, 2), with ``segmentation["feature_states"]``) they are
    drawn coloured by state; otherwise the k cluster centroids (``centroids``), coloured by the state each was
    named (``cluster_labels``), with areas proportional to ``cluster_sizes``. Right: WCSS against k (``wcss``,
    k = 1 … k_max) with the k chosen by the elbow (``k``) marked.

    Raises:
        DataError: if the outcome has no RAI segmentation (no WCSS curve).
    """
    sparse = outcome.sparse
    seg = None if sparse is None else sparse.diagnostics.get("segmentation")
    wcss = np.asarray(seg.get("wcss") or [], dtype=float) if isinstance(seg, dict) else np.zeros(0)
    if wcss.size == 0:
        raise DataError(f"'{outcome.name}' has no RAI segmentation to draw")
    fig = new_figure(10.5, 4.2)
    left, right = fig.subplots(1, 2)
    features = seg.get("features")
    states = seg.get("feature_states")
    drawn = False
    if isinstance(features, list) and isinstance(states, list) and len(features) == len(states) and features:
        points = np.asarray(features, dtype=float)
        labels = np.asarray(states, dtype=str)
        for state, color in STATE_COLORS.items():
            on = labels == state
            if on.any():
                left.scatter(points[on, 0], points[on, 1], s=4, color=color, alpha=0.5, label=state.replace("_", " "))
        drawn = True
    centroids = np.asarray(seg.get("centroids") or [], dtype=float)
    names = list(seg.get("cluster_labels") or [])
    sizes = np.asarray(seg.get("cluster_sizes") or [], dtype=float)
    if centroids.ndim == 2 and centroids.shape[1] == 2 and len(names) == len(centroids):
        total = float(sizes.sum()) if sizes.size == len(centroids) and sizes.sum() > 0 else 0.0
        for c, (point, state) in enumerate(zip(centroids, names, strict=True)):
            share = sizes[c] / total if total else 0.0
            area = 60 + 1400 * share
            left.scatter(
                [point[0]],
                [point[1]],
                s=area,
                color=STATE_COLORS.get(state, "0.5"),
                edgecolors="black",
                marker="X" if drawn else "o",
                alpha=0.9 if drawn else 0.6,
                label=None if drawn else f"{state.replace('_', ' ')} ({int(sizes[c]) if total else '?'})",
                zorder=3,
            )
    left.set_xlabel(f"RAI of the velocities {DIMENSIONLESS}")
    left.set_ylabel(f"RAI of the accelerations {DIMENSIONLESS}")
    left.grid(alpha=0.3)
    left.margins(0.2)
    legend = left.legend(fontsize=8, loc="best")
    for handle in legend.legend_handles:
        if hasattr(handle, "set_sizes"):
            handle.set_sizes([40])
    left.set_title("samples by state" if drawn else "cluster centroids (area ∝ samples)", fontsize=10)
    k = np.arange(1, wcss.size + 1)
    right.plot(k, wcss, "o-", color="C0")
    chosen = seg.get("k")
    if isinstance(chosen, int) and 1 <= chosen <= wcss.size:
        right.scatter([chosen], [wcss[chosen - 1]], s=160, facecolors="none", edgecolors="C3", lw=2, zorder=3)
        right.annotate(f"k = {chosen}", (chosen, wcss[chosen - 1]), xytext=(10, 10), textcoords="offset points")
    right.set_xlabel("number of clusters k [count]")
    right.set_ylabel(f"WCSS {DIMENSIONLESS}")
    right.set_xticks(k)
    right.grid(alpha=0.3)
    right.set_title("elbow on the within-cluster sum of squares", fontsize=10)
    fig.suptitle(f"{outcome.name}: RAI + k-means segmentation", fontsize=11)
    return save_figure(fig, path)
