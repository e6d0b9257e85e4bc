"""A sweep's figures and report: box plots per estimator and noise level, Markdown and HTML.

Figures follow :mod:`robotid_sim.report.plots` (a :class:`matplotlib.figure.Figure` rendered by Agg, never
pyplot; the estimators' colours of every report); matplotlib is imported when a figure is drawn.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robotid_sim.report.plots import estimator_colors, log_scale_if_wide, new_figure, panel_grid, save_figure
from robotid_sim.safety import atomic_write
from robotid_sim.sweep.tasks import FIGURES

#: what each figure of merit is, for axes and tables
FIGURE_TITLES = {
    "base_parameter_error": "relative base-parameter error [-]",
    "torque_relative_error_vs_truth": "relative validation torque error [-]",
    "trajectory_rms_total": "open-loop trajectory RMS error [rad; m for prismatic joints]",
    "fit_time_s": "fit time [s]",
}


def _ordered(rows: Sequence[dict[str, Any]], key: str) -> list[str]:
    return list(dict.fromkeys(str(r[key]) for r in rows))


def plot_boxes(rows: Sequence[dict[str, Any]], figure: str, path: Path) -> Path | None:
    """Box plots of one figure of merit: a panel per (robot, excitation), a group of boxes per noise preset,
    a box per estimator (successful repetitions, finite values). None when no value is finite."""
    from matplotlib.patches import Patch

    ok = [r for r in rows if r["status"] == "ok" and r[figure] is not None and math.isfinite(float(r[figure]))]
    if not ok:
        return None
    panels = list(dict.fromkeys((r["robot"], r["excitation"]) for r in rows))
    noises, estimators = _ordered(rows, "noise"), _ordered(rows, "estimator")
    colors = estimator_colors(estimators)
    ncols = min(len(panels), 2)
    fig = new_figure(6.0 * ncols, 3.6 * math.ceil(len(panels) / ncols))
    axes = panel_grid(fig, len(panels), 2, sharex=False)
    width = 0.8 / len(estimators)
    for ax, (robot, excitation) in zip(axes, panels, strict=True):
        everything = []
        for j, noise in enumerate(noises):
            for k, estimator in enumerate(estimators):
                values = [
                    float(r[figure])
                    for r in ok
                    if (r["robot"], r["excitation"], r["noise"], r["estimator"])
                    == (robot, excitation, noise, estimator)
                ]
                if not values:
                    continue
                everything += values
                box = ax.boxplot(
                    values, positions=[j + (k - (len(estimators) - 1) / 2) * width], widths=width * 0.85,
                    patch_artist=True, showfliers=True, manage_ticks=False,
                )  # fmt: skip
                for patch in box["boxes"]:
                    patch.set_facecolor(colors[estimator])
                    patch.set_alpha(0.75)
                for line in box["medians"]:
                    line.set_color("black")
        ax.set_xticks(range(len(noises)), noises, rotation=20, fontsize=8)
        ax.set_title(f"{robot} — {excitation}", fontsize=9)
        ax.set_ylabel(FIGURE_TITLES[figure], fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        log_scale_if_wide(ax, np.asarray(everything), ratio=30.0)
    fig.legend(
        handles=[Patch(facecolor=colors[e], alpha=0.75, label=e) for e in estimators],
        loc="outside lower center",
        ncols=min(len(estimators), 6),
        fontsize=8,
    )
    return save_figure(fig, path)


def _fmt(value: Any) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if math.isfinite(value) else str(value)
    return str(value)


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    def cell(x):
        return html.escape(_fmt(x), quote=False).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return lines + ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows] + [""]


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in headers) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{html.escape(_fmt(x))}</td>" for x in row) + "</tr>" for row in rows]
    return [*out, "</table>"]


#: the headers of BIRDy's table (:func:`birdy_table`)
BIRDY_HEADERS = (
    *("robot", "excitation", "noise", "method", "runs", "failed", "diverged", "d_beta [%]", "d_tau [%]"),
    *("d_q [%]", "d_t [s]", "iterations", "model evaluations", "consistent"),
)


def _pct(value: Any) -> str | None:
    return None if value is None or value == "" else f"{100 * float(value):.0f} %"


def _pm(mean: Any, std: Any) -> str | None:
    if mean is None or mean == "":
        return None
    return f"{float(mean):.3g} ± {float(std):.2g}" if std not in (None, "") else f"{float(mean):.3g}"


def birdy_table(birdy: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """(headers, rows) of BIRDy's figures of merit per (method, preset) (:mod:`robotid_sim.sweep.merit`)."""
    rows = [
        [
            *(b["robot"], b["excitation"], b["noise"], b["estimator"], b["runs"], b["failed"]),
            _pct(b["divergence_rate"]),
            *(_pm(b["d_beta_mean"], b["d_beta_std"]), b["d_tau"], b["d_q"], b["d_t"], b["iterations"]),
            *(b["model_evaluations"], _pct(b["consistent"])),
        ]
        for b in birdy
    ]
    return list(BIRDY_HEADERS), rows


def _cell(value: Any, width: int) -> str:
    text = _fmt(None if value == "" else value)
    return text[:width].rjust(width)


def birdy_text(birdy: Sequence[dict[str, Any]]) -> str:
    """BIRDy's table for a terminal (at most 80 columns): a block per (robot, excitation, noise preset), a line
    per method: d_beta mean, d_tau, d_q (%), d_t (s), iterations, model evaluations, divergence rate and
    physical consistency (share of runs)."""
    widths = (14, 8, 8, 8, 8, 7, 8, 5, 5)
    header = ("method", "d_beta%", "d_tau%", "d_q%", "d_t s", "iter", "evals", "div", "PC")
    lines = []
    for key in dict.fromkeys((b["robot"], b["excitation"], b["noise"]) for b in birdy):
        heading = header[0].ljust(widths[0]) + "".join(
            f" {h.rjust(w)}" for h, w in zip(header[1:], widths[1:], strict=True)
        )
        lines += ["", " / ".join(str(k) for k in key)[:80], heading]
        for b in (b for b in birdy if (b["robot"], b["excitation"], b["noise"]) == key):
            values = (
                *(b["d_beta_mean"], b["d_tau"], b["d_q"], b["d_t"], b["iterations"], b["model_evaluations"]),
                *(_pct(b["divergence_rate"]), _pct(b["consistent"])),
            )
            lines.append(
                str(b["estimator"])[: widths[0]].ljust(widths[0])
                + "".join(" " + _cell(v, w) for v, w in zip(values, widths[1:], strict=True))
            )
    return "\n".join(lines[1:])


def plot_parameter_error_bars(parameters: Sequence[dict[str, Any]], key: tuple, path: Path) -> Path | None:
    """Per-parameter error bars of one (robot, excitation, noise): a panel per method, mean ± std of each base
    parameter's relative error (%) over its kept runs (symlog axis). None without any finite error."""
    rows = [p for p in parameters if (p["robot"], p["excitation"], p["noise"]) == key]
    rows = [p for p in rows if p["error_mean_pct"] not in (None, "")]
    if not rows:
        return None
    methods = _ordered(rows, "estimator")
    names = _ordered(rows, "parameter")
    colors = estimator_colors(methods)
    ncols = min(len(methods), 3)
    fig = new_figure(5.5 * ncols, 2.6 * math.ceil(len(methods) / ncols))
    axes = panel_grid(fig, len(methods), 3, sharex=True)
    for ax, method in zip(axes, methods, strict=True):
        mine = {p["parameter"]: p for p in rows if p["estimator"] == method}
        x = [k for k, n in enumerate(names) if n in mine]
        mean = [float(mine[names[k]]["error_mean_pct"]) for k in x]
        std = [float(mine[names[k]]["error_std_pct"] or 0.0) for k in x]
        ax.errorbar(x, mean, yerr=std, fmt="o", ms=2.5, lw=0.8, capsize=1.5, color=colors[method])
        ax.axhline(0.0, color="black", lw=0.5)
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_title(method, fontsize=8)
        ax.tick_params(labelsize=6)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes:
        ax.set_xticks(range(len(names)), names, rotation=90, fontsize=4)
    where = " / ".join(str(k) for k in key)
    fig.suptitle(f"{where}: relative error of each base parameter, mean ± std [%]", fontsize=9)
    return save_figure(fig, path)


def _birdy_blocks(birdy: Sequence[dict], images: dict[str, str]) -> list[tuple[str, str, Any]]:
    blocks: list[tuple[str, str, Any]] = [
        ("h2", "BIRDy's figures of merit per method and noise preset", None),
        (
            "p",
            "Over each (method, preset)'s runs (initial estimates × noise realisations); diverged runs "
            "(‖β̂ − β‖ > 50 ‖β₀ − β‖) are counted and left out of the means. d_beta: symmetric relative parameter "
            "error, mean ± std (%); d_tau: 100·mean ‖τ − Wβ̄‖/‖τ‖ on the noise-free closed-loop run, β̄ the mean "
            "estimate; d_q: the same for q from a closed-loop re-simulation with β̄ (%); d_t: seconds per "
            "estimate; iterations and model evaluations: means over the runs that report them; consistent: share "
            "of runs whose estimate is physically consistent.",
            None,
        ),
        ("table", "", birdy_table(birdy)),
    ]
    if images:
        blocks.append(("h2", "Per-parameter errors (mean ± std over the runs)", None))
        blocks += [("img", text, path) for text, path in images.items()]
    return blocks


def _birdy_images(run_dir: Path, parameters: Sequence[dict[str, Any]]) -> dict[str, str]:
    """``plots/birdy_errors_<noise>.png`` per (robot, excitation, noise) (numbered with several robots or
    excitations): title → path relative to ``run_dir``."""
    keys = list(dict.fromkeys((p["robot"], p["excitation"], p["noise"]) for p in parameters))
    several = len({k[:2] for k in keys}) > 1
    images = {}
    for index, key in enumerate(keys):
        stem = f"birdy_errors_{index + 1}_{key[2]}" if several else f"birdy_errors_{key[2]}"
        path = plot_parameter_error_bars(parameters, key, run_dir / "plots" / f"{stem}.png")
        if path is not None:
            images[f"per-parameter errors, {' / '.join(str(k) for k in key)}"] = str(path.relative_to(run_dir))
    return images


def _sections(
    title: str, info: dict[str, Any], summary: Sequence[dict], crb: Sequence[dict], images: dict[str, str]
) -> list[tuple[str, str, Any]]:
    """(kind, heading or text, payload) blocks shared by the Markdown and HTML renderings."""
    blocks: list[tuple[str, str, Any]] = [("h1", title, None)]
    blocks.append(("table", "", (["", ""], [[k, v] for k, v in info.items()])))
    headers = ["robot", "excitation", "noise", "estimator", "tasks", "failures", "diverged"]
    for figure in FIGURES:
        headers += [f"{figure} mean", f"{figure} std", f"{figure} p5", f"{figure} p50", f"{figure} p95"]
    rows = []
    for s in summary:
        row = [s["robot"], s["excitation"], s["noise"], s["estimator"], s["tasks"], s["failures"]]
        row.append(None if s["divergence_rate"] is None else f"{100 * s['divergence_rate']:.0f} %")
        for figure in FIGURES:
            row += [s[f"{figure}_{k}"] for k in ("mean", "std", "p5", "p50", "p95")]
        rows.append(row)
    blocks += [
        ("h2", "Figures of merit per cell", None),
        (
            "p",
            "Over the successful repetitions: relative base-parameter error ‖β̂ − β‖/‖β‖, relative validation "
            "torque error ‖τ̂ − τ‖/‖τ‖ (against the noise-free torque of another trajectory), RMS error of the "
            "open-loop trajectory over the validation horizon (a diverged model counts in 'diverged', not in "
            "its statistics), and the fit time.",
            None,
        ),
        ("table", "", (headers, rows)),
    ]
    if crb:
        blocks += [
            ("h2", "Monte Carlo spread against the Cramér–Rao bound", None),
            (
                "p",
                "Per base parameter: the standard deviation of the estimates over the repetitions beside the "
                "Cramér–Rao bound sqrt(diag((YᵀΣ⁻¹Y)⁻¹)) = sqrt(diag(σ²(YᵀWY)⁻¹)), W = σ²Σ⁻¹ (W = I with one σ "
                "on every joint), Σ the noise preset's Gaussian torque covariance and Y the base regressor of "
                "the cell's data; a ratio near 1 means the estimator attains "
                "the bound. With noise on q, qd or qdd as well, the bound covers the torque noise only.",
                None,
            ),
            (
                "table",
                "",
                (
                    [*("robot", "excitation", "noise", "estimator", "parameter", "true"),
                     *("MC mean", "MC std", "CRB std", "ratio")],
                    [
                        [c["robot"], c["excitation"], c["noise"], c["estimator"], c["parameter"], c["true"],
                         c["mc_mean"], c["mc_std"], c["crb_std"], c["ratio"]]
                        for c in crb
                    ],
                ),
            ),
        ]  # fmt: skip
    if images:
        blocks.append(("h2", "Box plots", None))
        blocks += [("img", FIGURE_TITLES[key], path) for key, path in images.items()]
    return blocks


def write_report(
    run_dir: Path,
    title: str,
    info: dict[str, Any],
    rows: Sequence[dict[str, Any]],
    summary: Sequence[dict[str, Any]],
    crb: Sequence[dict[str, Any]],
    birdy: Sequence[dict[str, Any]] | None = None,
    parameters: Sequence[dict[str, Any]] | None = None,
) -> dict[str, Path]:
    """Box plots (``plots/<figure>.png``), ``report.md`` and ``report.html`` in ``run_dir``; for a sweep with
    BIRDy's protocol, its table (``birdy``: :func:`robotid_sim.sweep.merit.protocol_rows`) first, and the
    per-parameter error bars (``parameters``: :func:`~robotid_sim.sweep.merit.parameter_rows`) as
    ``plots/birdy_errors_<noise>.png``."""
    images = {}
    for figure in FIGURES:
        path = plot_boxes(rows, figure, run_dir / "plots" / f"{figure}.png")
        if path is not None:
            images[figure] = str(path.relative_to(run_dir))
    blocks = _sections(title, info, summary, crb, images)
    bars = _birdy_images(run_dir, parameters or [])
    if birdy is not None:
        blocks[2:2] = _birdy_blocks(birdy, bars)
    md: list[str] = []
    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)} — robotid_sim sweep</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:12px;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}img{max-width:100%}</style>",
        "</head><body>",
    ]
    for kind, text, payload in blocks:
        if kind in ("h1", "h2"):
            md += [("# " if kind == "h1" else "## ") + text, ""]
            page.append(f"<{kind}>{html.escape(text)}</{kind}>")
        elif kind == "p":
            md += [text, ""]
            page.append(f"<p>{html.escape(text)}</p>")
        elif kind == "table":
            md += _md_table(*payload)
            page += _html_table(*payload)
        elif kind == "img":
            md += [f"![{text}]({payload})", ""]
            page.append(f'<figure><img src="{html.escape(payload)}" alt="{html.escape(text)}"></figure>')
    page.append("</body></html>")
    out = {"markdown": run_dir / "report.md", "html": run_dir / "report.html"}
    atomic_write(out["markdown"], lambda fh: fh.write("\n".join(md) + "\n"), binary=False)
    atomic_write(out["html"], lambda fh: fh.write("\n".join(page) + "\n"), binary=False)
    return {**out, **{k: run_dir / v for k, v in images.items()}, **{Path(v).stem: run_dir / v for v in bars.values()}}
