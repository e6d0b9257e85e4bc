"""The study report as Markdown and as one self-contained HTML page (SPEC §13).

Both show, in this order: title, info key/values, the comparison table, notes, the per-joint torque RMS,
the validation trajectory's RMS, RSD, agreement index and largest error per joint (seed 004 Table 5), the
forward dynamics' acceleration RMS and RSD per joint (seed 003 §3.3), the steps of a sequential
identification (seed 003 §5.1), the closed-loop
tracking errors, the sparse models (seed 000 Table 2: library size, active terms per joint, fit time; the
steps and segmentation of stepwise SINDy; each model's equations), the identified models, the figures, the
base-parameter table (seed 004 Table 4) with the relative error of each estimate, the ±50 % sensitivity table
(seed 004 Table 6) and the scenario. A closed-loop comparison on its own (no estimator) has no comparison
table. The HTML page has inline CSS only (no scripts, no external assets) and refers to the figures
by their relative paths.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence

from robotid_sim.report.result import StudyResult
from robotid_sim.report.tables import (
    NEAR_ZERO,
    NEAR_ZERO_MARK,
    Cell,
    acceleration_rows,
    base_parameter_rows,
    closed_loop_rows,
    comparison_rows,
    consistency_rows,
    diagnostic_rows,
    essential_rows,
    per_joint_rows,
    relative_error_rows,
    segmentation_summary,
    sensitivity_rows,
    sequential_outcomes,
    sequential_step_rows,
    sparse_model_rows,
    sparse_outcomes,
    sparse_step_rows,
    trajectory_rows,
    wrap_equation,
)

#: Parameter tables longer than this are folded into a <details> element in HTML.
COLLAPSE_ROWS = 40

_CAPTIONS = {
    "torque_comparison": "Measured vs predicted torque on the validation trajectory",
    "torque_errors": "Per-joint torque RMS on the validation trajectory",
    "forward_dynamics": "Forward dynamics: measured vs predicted accelerations, and open-loop joint angles "
    "(seed 003 Fig. 12–14)",
    "parameter_errors": "Relative error per base parameter",
    "friction_curves": "Friction torque against joint velocity",
    "tracking_errors": "Closed-loop tracking error per joint",
    "sensitivity": "Trajectory RMS against each parameter's scale factor (seed 004 Fig. 8)",
    "active_terms": "Active terms per joint of the sparse models (seed 000 Fig. 5, Fig. 10)",
}
#: under the closed-loop table, in both renderers
_CLOSED_LOOP_HINT = "η = mean |q_ref − q| per joint over the run (seed 000 Fig. 15); lowest value per column"
_PREFIX_CAPTIONS = {
    "convergence/": "Parameter convergence: ",
    "convergence_values/": "Parameter estimates against time (seed 004 Fig. 5–6): ",
    "sparsity/": "Coefficient sparsity: ",
    "segmentation/": "RAI + k-means segmentation and the WCSS elbow (seed 000 Fig. 2): ",
}
#: under the validation-trajectory table, in both renderers
_CONSISTENCY_HINT = (
    "Smallest eigenvalue of each link's pseudo-inertia J = [[½tr(I)E − I, mc], [mcᵀ, m]] (kg·m², kg): J ≻ 0 means "
    "positive mass, positive-definite inertia and the triangle inequality (Wensing et al. 2017). A full standard set "
    "(lmi_wls, irls with physical, two_loop, CAD) is judged as it is; base values are judged by the standard set with "
    "those base values whose smallest eigenvalue is largest (a semidefinite program): 'no' means no rigid bodies have "
    "these base values, and an open-loop simulation may then diverge"
)
_TRAJECTORY_HINT = (
    "Joint positions of each model's open-loop simulation under the validation torque against the true robot's "
    "(measured ones for recorded data): RMS (rad or m), RSD and Willmott agreement index AI (seed 004 Eq. 45–47); "
    "a diverged simulation shows RMS and RSD inf, AI 0; max |Δq|: the largest error over the horizon (rad or m). "
    "Best value per row (lowest RMS, RSD and max error, highest AI)"
)
_ACCELERATION_HINT = (
    "Accelerations M(q)⁻¹(τ − h(q, qd)) of each model (its mass matrix and bias rebuilt from the identified "
    "parameters, seed 003 §3.3) under the validation torque against the recorded ones (a simulation's noise-free "
    "signals, else the measured ones): RMS (rad/s² or m/s²) and RSD. Lowest value per row"
)
_DIAGNOSTICS_HINT = (
    "What each estimator's model reported about its fit (its diagnostics: iterations, rejected samples, rows "
    "removed by the velocity dead-band, ...), as in metrics.json"
)
_ESSENTIAL_HINT = (
    "Base parameters dropped one at a time, largest relative standard deviation first, while the identification "
    "residual grew by at most the threshold; the dropped ones are 0 in the model. Validation change: its "
    "validation torque RMS against the full base model's"
)
_STEPS_HINT = (
    "One step per joint, in the order the joints moved; each adds the base parameters the moving joint excites, "
    "those of earlier steps held at their values (SIMO: every joint's torque equation). rank [H τ] = rank H: the "
    "torque lies in the range of H (a unique solution, noise-free); one more: the torque holds noise or model "
    "error (seed 003 §3.2). cond(H): of the new parameters' columns"
)
#: under the relative-error table, in both renderers
_RELATIVE_ERROR_HINT = (
    f"100 · |estimate − true| / |true|; {NEAR_ZERO_MARK}: true value ≈ 0, error relative to {NEAR_ZERO:g}·max|true| "
    "instead. Lowest value per parameter"
)


def _sparse_hint(result: StudyResult) -> str:
    """The line under the sparse-model table: what each column counts."""
    joints = ", ".join(f"τ{j + 1} = {name}" for j, name in enumerate(result.joint_names))
    return (
        "Library size: candidate functions (stepwise SINDy: the sum over its steps, each step's in 'library per "
        "step'); active τj: terms of joint j's equation (|ξ| above the estimator's threshold; a stepwise model "
        "holds the union of its steps' terms); fit time: the whole fit, segmentation included. Joints: "
        f"{joints}. Lowest value per column"
    )


def _equation_lines(outcome) -> list[str]:
    """The equations of a feature-library model, one per joint, wrapped (:func:`wrap_equation`)."""
    lines: list[str] = []
    for equation in outcome.sparse.equations:
        lines += wrap_equation(equation)
    return lines


def _sensitivity_hint(result: StudyResult) -> str:
    """The line under the sensitivity table: what was varied, over what, and the ranking."""
    sensitivity = result.sensitivity
    table = sensitivity.table
    factors = ", ".join(f"{f:g}" for f in table.factors)
    return (
        f"Each identified parameter of '{sensitivity.estimator}' scaled alone by {factors}; RMS over all joints of "
        f"the open-loop trajectory ({sensitivity.horizon_s:g} s of the validation torque) against the nominal "
        f"model's. Ranking, most sensitive first: {', '.join(table.ranking())}."
    )


def image_caption(key: str) -> str:
    """Caption of a report figure from its key (``"torque_comparison"``, ``"convergence/<estimator>"``, ...).

    Args:
        key: the figure's key in the ``images`` mapping.

    Returns:
        A human-readable caption.
    """
    if key in _CAPTIONS:
        return _CAPTIONS[key]
    for prefix, caption in _PREFIX_CAPTIONS.items():
        if key.startswith(prefix):
            return caption + key[len(prefix) :]
    return key.replace("_", " ")


def _scenario_text(result: StudyResult) -> str:
    return json.dumps(result.scenario, indent=2, sort_keys=False, default=str) if result.scenario else ""


# --------------------------------------------------------------------------------------------- Markdown


def _md_escape(text: str) -> str:
    """Escape text for a Markdown table cell or paragraph: no raw HTML, no cell breaks, no emphasis."""
    text = html.escape(str(text), quote=False)
    for char in "\\|*`":
        text = text.replace(char, "\\" + char)
    return text.replace("\n", " ")


def _md_code(text: str) -> str:
    if not text:
        return ""
    text = str(text).replace("|", "\\|").replace("\n", " ")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _md_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    code_columns: Sequence[int] = (),
    text_columns: Sequence[int] = (0,),
) -> list[str]:
    lines = [
        "| " + " | ".join(_md_escape(h) for h in headers) + " |",
        "|" + "|".join(":---" if k in text_columns else "---:" for k in range(len(headers))) + "|",
    ]
    for row in rows:
        cells = []
        for k, cell in enumerate(row):
            text = _md_code(cell.text) if k in code_columns else _md_escape(cell.text)
            cells.append(f"**{text}**" if cell.best and text else text)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_markdown(result: StudyResult, images: Mapping[str, str]) -> str:
    """The report as Markdown (GitHub-flavoured tables).

    Args:
        result: the study.
        images: figure key to path relative to the report (e.g. ``{"torque_comparison":
            "plots/torque_comparison.png"}``), in display order; see :func:`image_caption` for the keys.

    Returns:
        The Markdown text, ending with a newline.
    """
    parts = (_md_summary, _md_validation, _md_models, _md_files)
    return "\n".join(line for part in parts for line in part(result, images))


def _md_summary(result: StudyResult, images: Mapping[str, str]) -> list[str]:
    """The title, the study's key/values, the comparison, failures, notes and per-joint torque RMS."""
    out = [f"# {_md_escape(result.title)}", ""]
    info = {"robot": result.robot_name, **result.info}
    out += [f"- **{_md_escape(key)}:** {_md_escape(value)}" for key, value in info.items()]
    out.append("")

    headers, rows = comparison_rows(result)
    if rows:
        out += ["## Comparison", ""]
        out += _md_table(headers, rows)
        out += ["", "Validation on a trajectory not used for identification; best value per column in **bold**.", ""]
    elif not result.closed_loop:
        out += ["## Comparison", "", "No estimator ran.", ""]

    if result.failures:
        out += ["## Failures", "", FAILURES_HINT, ""]
        for failure in result.failures:
            out += [f"### {failure.kind} {_md_escape(failure.name)}: failed", "", f"`{_md_escape(failure.error)}`", ""]
            if failure.traceback:
                fence = "~~~~" if "```" in failure.traceback else "```"
                out += [fence + "text", failure.traceback.rstrip(), fence, ""]

    if result.notes:
        out += ["## Notes", ""]
        out += [f"- {_md_escape(note)}" for note in result.notes]
        out.append("")

    if result.outcomes:
        headers, rows = per_joint_rows(result)
        out += ["## Torque RMS per joint", ""]
        out += _md_table(headers, rows)
        out += ["", "Lowest value per joint in **bold**.", ""]
    return out


def _md_validation(result: StudyResult, images: Mapping[str, str]) -> list[str]:
    """Physical consistency, open-loop trajectory, forward dynamics and the models' diagnostics."""
    out: list[str] = []
    headers, rows = consistency_rows(result)
    if rows:
        out += ["## Physical consistency", ""]
        out += _md_table(headers, rows, text_columns=(0, 1))
        out += ["", _md_escape(_CONSISTENCY_HINT), ""]

    headers, rows = trajectory_rows(result)
    if rows:
        out += ["## Validation trajectory (seed 004 Table 5)", ""]
        out += _md_table(headers, rows, text_columns=(0, 1))
        out += ["", f"{_md_escape(_TRAJECTORY_HINT)} in **bold**.", ""]

    headers, rows = acceleration_rows(result)
    if rows:
        out += ["## Forward dynamics (seed 003 §3.3)", ""]
        out += _md_table(headers, rows, text_columns=(0, 1))
        out += ["", f"{_md_escape(_ACCELERATION_HINT)} in **bold**.", ""]

    headers, rows = diagnostic_rows(result)
    if rows:
        out += ["## Diagnostics", ""]
        out += _md_table(headers, rows, text_columns=(0, 1))
        out += ["", _md_escape(_DIAGNOSTICS_HINT), ""]
    return out


def _md_models(result: StudyResult, images: Mapping[str, str]) -> list[str]:
    """Stepwise steps, the closed loop, and the sparse models with their equations."""
    out: list[str] = []
    for outcome in sequential_outcomes(result):
        headers, rows = sequential_step_rows(outcome, list(result.joint_names))
        out += [f"## Steps of {_md_escape(outcome.name)} (seed 003 §3.2, §5.1)", ""]
        out += _md_table(headers, rows, text_columns=(0, 1, 2))
        out += ["", _md_escape(_STEPS_HINT), ""]

    headers, rows = essential_rows(result)
    if rows:
        out += ["## Essential parameters (Pham and Gautier 1991)", ""]
        out += _md_table(headers, rows, text_columns=(0, 5))
        out += ["", _md_escape(_ESSENTIAL_HINT), ""]

    if result.closed_loop:
        headers, rows = closed_loop_rows(result)
        out += ["## Closed loop", ""]
        out += _md_table(headers, rows)
        out += ["", f"{_md_escape(_CLOSED_LOOP_HINT)} in **bold**.", ""]

    headers, rows = sparse_model_rows(result)
    if rows:
        out += ["## Sparse models (seed 000 Table 2)", ""]
        out += _md_table(headers, rows, text_columns=(0, 2) if "library per step" in headers else (0,))
        out += ["", f"{_md_escape(_sparse_hint(result))} in **bold**.", ""]
        for outcome in sparse_outcomes(result):
            headers, rows = sparse_step_rows(outcome)
            summary = segmentation_summary(outcome)
            if rows or summary:
                out += [f"### Steps of {_md_escape(outcome.name)}", ""]
            if rows:
                out += _md_table(headers, rows, text_columns=(0, 1))
                out.append("")
            if summary:
                out += [_md_escape(summary), ""]
        for outcome in sparse_outcomes(result):
            lines = _equation_lines(outcome)
            fence = "`" * max(3, 1 + max((len(x) for x in lines if set(x) == {"`"}), default=0))
            out += [f"### Equations of {_md_escape(outcome.name)}", "", f"{fence}text", *lines, fence, ""]
    return out


def _md_files(result: StudyResult, images: Mapping[str, str]) -> list[str]:
    """Model files, figures, base parameters, sensitivity and the scenario as run."""
    out: list[str] = []
    models = [(o.name, o.model_path) for o in result.outcomes if o.model_path]
    if models:
        out += ["## Identified models", ""]
        out += [f"- {_md_escape(name)}: [{_md_escape(path)}](<{path}>)" for name, path in models]
        out.append("")

    if images:
        out += ["## Figures", ""]
        for key, path in images.items():
            caption = _md_escape(image_caption(key))
            out += [f"### {caption}", "", f"![{caption}](<{path}>)", ""]

    names = (0, 1) if result.parameter_labels else (0,)
    headers, rows = base_parameter_rows(result)
    if rows:
        out += ["## Base parameters", ""]
        out += _md_table(headers, rows, code_columns=(headers.index("expression"),), text_columns=names)
        out.append("")
        headers, rows = relative_error_rows(result)
        if rows:
            out += ["### Relative error per base parameter", ""]
            out += _md_table(headers, rows, text_columns=names)
            out += ["", f"{_md_escape(_RELATIVE_ERROR_HINT)} in **bold**.", ""]

    headers, rows = sensitivity_rows(result)
    if rows:
        out += ["## Sensitivity (seed 004 Table 6)", ""]
        out += _md_table(headers, rows, text_columns=names)
        out += ["", _md_escape(_sensitivity_hint(result)), ""]

    scenario = _scenario_text(result)
    if scenario:
        out += ["## Scenario", "", "```json", scenario, "```", ""]
    return out


# ------------------------------------------------------------------------------------------------- HTML

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; margin: 0;
       background: #fff; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 1.5rem 1.5rem 4rem; }
h1 { font-size: 1.7rem; margin-bottom: 0.3rem; }
h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid #d0d7de; padding-bottom: 0.25rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9rem; margin: 0.6rem 0; }
th, td { border: 1px solid #d0d7de; padding: 0.3rem 0.6rem; }
th { background: #f6f8fa; text-align: center; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.best { font-weight: 700; background: #dafbe1; }
td code { font-size: 0.85rem; }
table.info th { text-align: left; }
.hint { color: #57606a; font-size: 0.85rem; }
figure { margin: 1.2rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eaeef2; }
figcaption { color: #57606a; font-size: 0.9rem; margin-top: 0.3rem; }
details summary { cursor: pointer; font-weight: 600; margin: 0.4rem 0; }
pre { background: #f6f8fa; padding: 0.8rem; overflow-x: auto; font-size: 0.8rem; }
ul.notes li { margin: 0.2rem 0; }
""".strip()


#: what the Failures section says above the errors
FAILURES_HINT = (
    "These raised and have no results; every other estimator and controller of the run is complete. The run "
    "fails (exit status 2) only when every estimator does."
)


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    text_columns: Sequence[int] = (0,),
    code_columns: Sequence[int] = (),
) -> list[str]:
    out = [
        '<div class="scroll"><table>',
        "<thead><tr>" + "".join(f"<th>{_esc(h)}</th>" for h in headers) + "</tr></thead>",
        "<tbody>",
    ]
    for row in rows:
        cells = []
        for k, cell in enumerate(row):
            classes = [] if k in text_columns or k in code_columns else ["num"]
            if cell.best:
                classes.append("best")
            attr = f' class="{" ".join(classes)}"' if classes else ""
            body = f"<code>{_esc(cell.text)}</code>" if k in code_columns and cell.text else _esc(cell.text)
            cells.append(f"<td{attr}>{body}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out += ["</tbody>", "</table></div>"]
    return out


def _folded(table: list[str], count: int, what: str) -> list[str]:
    """An HTML table folded into a <details> element when it has more than :data:`COLLAPSE_ROWS` rows."""
    if count <= COLLAPSE_ROWS:
        return table
    return [f"<details><summary>{count} {_esc(what)} (click to expand)</summary>", *table, "</details>"]


def render_html(result: StudyResult, images: Mapping[str, str]) -> str:
    """The report as one self-contained HTML page: inline CSS, no scripts, figures by relative path.

    Args:
        result: the study.
        images: figure key to path relative to the report, in display order (as for :func:`render_markdown`).

    Returns:
        The HTML document.
    """
    parts = (_html_summary, _html_validation, _html_models, _html_files)
    return "\n".join(line for part in parts for line in part(result, images))


def _html_summary(result: StudyResult, images: Mapping[str, str]) -> list[str]:
    """The page head, the study's key/values, the comparison, failures, notes and per-joint torque RMS."""
    title = _esc(result.title)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title} — robotid_sim report</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body>",
        "<main>",
        f"<h1>{title}</h1>",
    ]
    info = {"robot": result.robot_name, **result.info}
    out.append('<table class="info"><tbody>')
    out += [f"<tr><th>{_esc(key)}</th><td>{_esc(value)}</td></tr>" for key, value in info.items()]
    out.append("</tbody></table>")

    headers, rows = comparison_rows(result)
    if rows:
        out.append("<h2>Comparison</h2>")
        out += _html_table(headers, rows)
        out.append(
            '<p class="hint">Validation on a trajectory not used for identification; '
            "best value per column highlighted.</p>"
        )
    elif not result.closed_loop:
        out += ["<h2>Comparison</h2>", "<p>No estimator ran.</p>"]

    if result.failures:
        out += ["<h2>Failures</h2>", f'<p class="hint">{_esc(FAILURES_HINT)}</p>']
        for failure in result.failures:
            out.append(f"<h3>{_esc(failure.kind)} {_esc(failure.name)}: failed</h3>")
            out.append(f"<p><code>{_esc(failure.error)}</code></p>")
            if failure.traceback:
                out.append(f"<pre>{_esc(failure.traceback.rstrip())}</pre>")

    if result.notes:
        out.append("<h2>Notes</h2>")
        out.append('<ul class="notes">' + "".join(f"<li>{_esc(note)}</li>" for note in result.notes) + "</ul>")

    if result.outcomes:
        out.append("<h2>Torque RMS per joint</h2>")
        headers, rows = per_joint_rows(result)
        out += _html_table(headers, rows)
        out.append('<p class="hint">Lowest value per joint highlighted.</p>')
    return out


def _html_validation(result: StudyResult, images: Mapping[str, str]) -> list[str]:
    """Physical consistency, open-loop trajectory, forward dynamics and the models' diagnostics."""
    out: list[str] = []
    headers, rows = consistency_rows(result)
    if rows:
        out.append("<h2>Physical consistency</h2>")
        out += _html_table(headers, rows, text_columns=(0, 1))
        out.append(f'<p class="hint">{_esc(_CONSISTENCY_HINT)}</p>')

    headers, rows = trajectory_rows(result)
    if rows:
        out.append("<h2>Validation trajectory (seed 004 Table 5)</h2>")
        out += _html_table(headers, rows, text_columns=(0, 1))
        out.append(f'<p class="hint">{_esc(_TRAJECTORY_HINT)} highlighted.</p>')

    headers, rows = acceleration_rows(result)
    if rows:
        out.append("<h2>Forward dynamics (seed 003 §3.3)</h2>")
        out += _html_table(headers, rows, text_columns=(0, 1))
        out.append(f'<p class="hint">{_esc(_ACCELERATION_HINT)} highlighted.</p>')

    headers, rows = diagnostic_rows(result)
    if rows:
        out.append("<h2>Diagnostics</h2>")
        out += _html_table(headers, rows, text_columns=(0, 1))
        out.append(f'<p class="hint">{_esc(_DIAGNOSTICS_HINT)}</p>')
    return out


def _html_models(result: StudyResult, images: Mapping[str, str]) -> list[str]:
    """Stepwise steps, the closed loop, and the sparse models with their equations."""
    out: list[str] = []
    for outcome in sequential_outcomes(result):
        headers, rows = sequential_step_rows(outcome, list(result.joint_names))
        out.append(f"<h2>Steps of {_esc(outcome.name)} (seed 003 §3.2, §5.1)</h2>")
        out += _html_table(headers, rows, text_columns=(0, 1, 2))
        out.append(f'<p class="hint">{_esc(_STEPS_HINT)}</p>')

    headers, rows = essential_rows(result)
    if rows:
        out.append("<h2>Essential parameters (Pham and Gautier 1991)</h2>")
        out += _html_table(headers, rows, text_columns=(0, 5))
        out.append(f'<p class="hint">{_esc(_ESSENTIAL_HINT)}</p>')

    if result.closed_loop:
        out.append("<h2>Closed loop</h2>")
        headers, rows = closed_loop_rows(result)
        out += _html_table(headers, rows)
        out.append(f'<p class="hint">{_esc(_CLOSED_LOOP_HINT)} highlighted.</p>')

    headers, rows = sparse_model_rows(result)
    if rows:
        out.append("<h2>Sparse models (seed 000 Table 2)</h2>")
        out += _html_table(headers, rows, text_columns=(0, 2) if "library per step" in headers else (0,))
        out.append(f'<p class="hint">{_esc(_sparse_hint(result))} highlighted.</p>')
        for outcome in sparse_outcomes(result):
            headers, rows = sparse_step_rows(outcome)
            summary = segmentation_summary(outcome)
            if rows or summary:
                out.append(f"<h3>Steps of {_esc(outcome.name)}</h3>")
            if rows:
                out += _html_table(headers, rows, text_columns=(0, 1))
            if summary:
                out.append(f'<p class="hint">{_esc(summary)}</p>')
        for outcome in sparse_outcomes(result):
            out.append(f"<h3>Equations of {_esc(outcome.name)}</h3>")
            out.append(f'<pre class="equations">{_esc(chr(10).join(_equation_lines(outcome)))}</pre>')
    return out


def _html_files(result: StudyResult, images: Mapping[str, str]) -> list[str]:
    """Model files, figures, base parameters, sensitivity, the scenario as run, and the page end."""
    out: list[str] = []
    models = [(o.name, o.model_path) for o in result.outcomes if o.model_path]
    if models:
        out.append("<h2>Identified models</h2>")
        out.append(
            "<ul>"
            + "".join(f'<li>{_esc(name)}: <a href="{_esc(path)}">{_esc(path)}</a></li>' for name, path in models)
            + "</ul>"
        )

    if images:
        out.append("<h2>Figures</h2>")
        for key, path in images.items():
            caption = _esc(image_caption(key))
            out.append(
                f'<figure><img src="{_esc(path)}" alt="{caption}" loading="lazy">'
                f"<figcaption>{caption}</figcaption></figure>"
            )

    names = (0, 1) if result.parameter_labels else (0,)
    headers, rows = base_parameter_rows(result)
    if rows:
        out.append("<h2>Base parameters</h2>")
        out += _folded(
            _html_table(headers, rows, text_columns=names, code_columns=(headers.index("expression"),)),
            len(rows),
            "base parameters",
        )
        headers, rows = relative_error_rows(result)
        if rows:
            out.append("<h3>Relative error per base parameter</h3>")
            out += _folded(_html_table(headers, rows, text_columns=names), len(rows), "relative errors")
            out.append(f'<p class="hint">{_esc(_RELATIVE_ERROR_HINT)} highlighted.</p>')

    headers, rows = sensitivity_rows(result)
    if rows:
        out.append("<h2>Sensitivity (seed 004 Table 6)</h2>")
        out += _folded(_html_table(headers, rows, text_columns=names), len(rows), "parameters")
        out.append(f'<p class="hint">{_esc(_sensitivity_hint(result))}</p>')

    scenario = _scenario_text(result)
    if scenario:
        out.append("<h2>Scenario</h2>")
        out.append(f"<details><summary>scenario as run</summary><pre>{_esc(scenario)}</pre></details>")
    out += ["</main>", "</body>", "</html>", ""]
    return out
