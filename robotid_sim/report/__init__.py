"""Reports of a study: tables, PNG figures, Markdown and HTML (SPEC §13).

:func:`write_report` is the one entry point the studies (:mod:`robotid_sim.studies`) need; the figures,
tables and renderers are importable on their own from :mod:`robotid_sim.report.plots`,
:mod:`robotid_sim.report.tables` and :mod:`robotid_sim.report.markdown`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from collections.abc import Callable
from pathlib import Path

from robotid_sim.report.markdown import render_html, render_markdown
from robotid_sim.report.plots import (
    MAX_VALUE_PANELS,
    plot_active_terms,
    plot_forward_dynamics,
    plot_friction_curves,
    plot_parameter_convergence,
    plot_parameter_errors,
    plot_parameter_values,
    plot_segmentation,
    plot_sensitivity,
    plot_sparse_model,
    plot_sparsity,
    plot_torque_comparison,
    plot_torque_errors,
    plot_tracking_errors,
)
from robotid_sim.report.result import (
    EstimatorOutcome,
    SensitivityOutcome,
    SparseModelSummary,
    StudyResult,
    friction_curves,
)
from robotid_sim.safety import safe_name

__all__ = [
    "REPORT_CONTEXT_FILE",
    "EstimatorOutcome",
    "SensitivityOutcome",
    "SparseModelSummary",
    "StudyResult",
    "friction_curves",
    "write_report",
]

log = logging.getLogger(__name__)

#: the run folder's file with the report's info, notes and joint kinds (:func:`write_report`)
REPORT_CONTEXT_FILE = "report.json"

#: Metric key an estimator sets (a positive float) to get a sparsity figure of its coefficients.
SPARSITY_THRESHOLD_KEY = "sparsity_threshold"


#: longest estimator part of a figure's file name (``convergence_<slug>_<k>.png``, ``values_<slug>_<k>.png``
#: and ``sparsity_<slug>_<k>.png`` stay safe names)
_SLUG_LENGTH = 40


def _slug(name: str) -> str:
    """An estimator name made a file-name part: letters, digits, ``_ . -``, no ``..``, at most 40 characters."""
    slug = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9.-]+", "_", str(name)))
    return slug.strip("._-")[:_SLUG_LENGTH].strip("._-") or "estimator"


def _figure_path(plots_dir: Path, kind: str, slug: str) -> Path:
    """``plots_dir/<kind>_<slug>.png``, the file name checked by :func:`~robotid_sim.safety.safe_name`."""
    return plots_dir / safe_name(f"{kind}_{slug}.png", "figure file name")


def figure_plan(result: StudyResult, plots_dir: Path) -> list[tuple[str, Path, Callable[[Path], Path]]]:
    """The figures that apply to this study: (key, PNG path, function writing it)."""
    plan: list[tuple[str, Path, Callable[[Path], Path]]] = []
    if result.outcomes:
        plan.append(
            ("torque_comparison", plots_dir / "torque_comparison.png", lambda p: plot_torque_comparison(result, p))
        )
        plan.append(("torque_errors", plots_dir / "torque_errors.png", lambda p: plot_torque_errors(result, p)))
    if result.qdd_reference is not None and any(o.qdd_predicted is not None for o in result.outcomes):
        plan.append(
            ("forward_dynamics", plots_dir / "forward_dynamics.png", lambda p: plot_forward_dynamics(result, p))
        )
    if any(o.true_values is not None for o in result.outcomes):
        plan.append(
            ("parameter_errors", plots_dir / "parameter_errors.png", lambda p: plot_parameter_errors(result, p))
        )
    if any(o.t is not None and o.error is not None for o in result.closed_loop):
        plan.append(("tracking_errors", plots_dir / "tracking_errors.png", lambda p: plot_tracking_errors(result, p)))
    if result.friction_curves and "qd" in result.friction_curves:
        plan.append(("friction_curves", plots_dir / "friction_curves.png", lambda p: plot_friction_curves(result, p)))
    if result.sensitivity is not None:
        plan.append(
            (
                "sensitivity",
                plots_dir / "sensitivity.png",
                lambda p: plot_sensitivity(result.sensitivity, p, result.parameter_labels),
            )
        )
    if any(o.sparse is not None for o in result.outcomes):
        plan.append(("active_terms", plots_dir / "active_terms.png", lambda p: plot_active_terms(result, p)))
    used: set[str] = set()
    for outcome in result.outcomes:
        # distinct without case, so that no two figures share a file on a case-insensitive file system
        base = slug = _slug(outcome.name)
        k = 1
        while slug.casefold() in used:
            k += 1
            slug = f"{base}_{k}"
        used.add(slug.casefold())
        plan += _outcome_plan(result, outcome, plots_dir, slug)
    return plan


def _outcome_plan(
    result: StudyResult, outcome: EstimatorOutcome, plots_dir: Path, slug: str
) -> list[tuple[str, Path, Callable[[Path], Path]]]:
    """The figures of one estimator (files named with ``slug``): convergence, values, sparsity, segmentation."""
    labels = result.parameter_labels
    plan: list[tuple[str, Path, Callable[[Path], Path]]] = []
    if outcome.history is not None and len(outcome.history) > 0:
        plan.append(
            (
                f"convergence/{outcome.name}",
                _figure_path(plots_dir, "convergence", slug),
                lambda p, o=outcome: plot_parameter_convergence(o, p, labels=labels),
            )
        )
        if len(outcome.parameter_names) <= MAX_VALUE_PANELS:
            plan.append(
                (
                    f"convergence_values/{outcome.name}",
                    _figure_path(plots_dir, "values", slug),
                    lambda p, o=outcome: plot_parameter_values(o, p, labels=labels),
                )
            )
    threshold = outcome.metrics.get(SPARSITY_THRESHOLD_KEY)
    if outcome.sparse is not None:
        plan.append(
            (
                f"sparsity/{outcome.name}",
                _figure_path(plots_dir, "sparsity", slug),
                lambda p, o=outcome: plot_sparse_model(o, p, result.joint_names),
            )
        )
        segmentation = outcome.sparse.diagnostics.get("segmentation")
        if isinstance(segmentation, dict) and segmentation.get("wcss"):
            plan.append(
                (
                    f"segmentation/{outcome.name}",
                    _figure_path(plots_dir, "segmentation", slug),
                    lambda p, o=outcome: plot_segmentation(o, p),
                )
            )
    elif isinstance(threshold, int | float) and math.isfinite(threshold) and threshold > 0:
        plan.append(
            (
                f"sparsity/{outcome.name}",
                _figure_path(plots_dir, "sparsity", slug),
                lambda p, o=outcome, th=float(threshold): plot_sparsity(o.parameter_names, o.values, p, th),
            )
        )
    return plan


#: the note of a report written without its figures (``write_report(..., figures=False)``)
NO_FIGURES_NOTE = "figures not drawn: the scenario's report.figures is false"


def write_report(run_dir: Path, result: StudyResult, figures: bool = True) -> dict[str, Path]:
    """Write the figures, ``report.md`` and ``report.html`` of a study into its run folder.

    What the report shows that no other file of a run folder holds (``result.info``, ``result.notes``,
    ``result.joint_kinds``) goes to :data:`REPORT_CONTEXT_FILE`, so that the report can be rebuilt from the folder.
    Figures go to ``run_dir/plots/``: torque comparison and per-joint torque RMS (when an estimator ran),
    the forward dynamics of each model (measured against predicted accelerations, and the open-loop
    angles; when ``result.qdd_reference`` and a model's ``qdd_predicted`` are set, seed 003 Fig. 12–14),
    relative base-parameter errors (when true values are known), the closed-loop tracking errors (when
    ``result.closed_loop`` holds time series), friction curves (when
    ``result.friction_curves`` is set), the trajectory RMS against each parameter's scale factor (when
    ``result.sensitivity`` is set, seed 004 Fig. 8), per estimator with a history one convergence plot (with a
    ±2σ band where it has ``history_std``) and, for at most 12 parameters, one plot of the values against time
    with the truth dashed (seed 004 Fig. 5–6), and one sparsity plot per estimator whose metrics carry a
    positive ``"sparsity_threshold"``. A feature-library model (``sindy``, ``stepwise_sindy``) gets the active
    terms per joint of all such models (seed 000 Fig. 5 / Fig. 10), a terms × joints coefficient map, and for a
    RAI-segmented stepwise model the segmentation with its WCSS elbow (seed 000 Fig. 2). A figure that fails is
    left out and named in the report's notes, with one warning line (its traceback logged at INFO level only,
    ``--verbose``); the report is still written.

    Args:
        run_dir: the run folder (created if missing).
        result: the study.
        figures: False: no figure (no ``plots/`` folder); the report's notes say so (:data:`NO_FIGURES_NOTE`).

    Returns:
        ``{"markdown": report.md, "html": report.html, "context": report.json, <figure key>: PNG path, ...}``;
        figure keys are ``"torque_comparison"``, ``"torque_errors"``, ``"forward_dynamics"``, ``"parameter_errors"``,
        ``"tracking_errors"``, ``"friction_curves"``, ``"sensitivity"``, ``"convergence/<estimator>"``,
        ``"convergence_values/<estimator>"``, ``"sparsity/<estimator>"``, ``"active_terms"`` and
        ``"segmentation/<estimator>"``.

    Raises:
        FileExistsError: if any file the report would write already exists; nothing is written then.
    """
    run_dir = Path(run_dir)
    plots_dir = run_dir / "plots"
    markdown_path, html_path = run_dir / "report.md", run_dir / "report.html"
    context_path = run_dir / REPORT_CONTEXT_FILE
    plan = figure_plan(result, plots_dir) if figures else []
    if not figures:
        result = dataclasses.replace(result, notes=[*result.notes, NO_FIGURES_NOTE])
    for path in (markdown_path, html_path, context_path, *(p for _, p, _ in plan)):
        if path.exists():
            raise FileExistsError(
                f"report file {path} already exists; reports never overwrite, write into a fresh run folder"
            )
    if plan:
        plots_dir.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)

    context = {"info": result.info, "notes": result.notes, "joint_kinds": result.joint_kinds}
    with open(context_path, "x", encoding="utf-8") as fh:
        fh.write(json.dumps(context, indent=2, ensure_ascii=False) + "\n")
    written: dict[str, Path] = {}
    failures: list[str] = []
    for key, path, draw in plan:
        try:
            written[key] = draw(path)
        except Exception as error:  # a broken figure must not lose the rest of the report
            # one line on the terminal (the report names it too); the traceback only with --verbose
            kind = type(error).__name__
            log.warning("figure %s was not drawn (%s: %s); the report's notes name it", key, kind, error)
            log.info("figure %s failed", key, exc_info=True)
            failures.append(f"figure '{key}' was not drawn: {type(error).__name__}: {error}")
    if failures:
        result = dataclasses.replace(result, notes=[*result.notes, *failures])
    images = {key: path.relative_to(run_dir).as_posix() for key, path in written.items()}

    with open(markdown_path, "x", encoding="utf-8") as fh:
        fh.write(render_markdown(result, images))
    with open(html_path, "x", encoding="utf-8") as fh:
        fh.write(render_html(result, images))
    log.info("report written to %s", html_path)
    return {"markdown": markdown_path, "html": html_path, "context": context_path, **written}
