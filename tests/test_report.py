"""Reports: PNG figures, Markdown and HTML, the comparison table, and never overwriting a run."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from rich.table import Table

from robotid_sim.report import EstimatorOutcome, StudyResult, write_report
from robotid_sim.report.markdown import render_html, render_markdown
from robotid_sim.report.plots import plot_sparsity
from robotid_sim.report.tables import comparison_rows, format_number, rich_comparison_table

#: the figure tests: their figures are rendered (conftest.figures_not_rendered)
pytestmark = pytest.mark.renders_figures

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ODD_NAME = "rls<λ=0.99>"


def _metrics(tau: np.ndarray, pred: np.ndarray, values: np.ndarray, truth: np.ndarray, fit_time: float) -> dict:
    residual = tau - pred
    mean = tau.mean(axis=0)
    agreement = 1 - np.sum(residual**2, axis=0) / np.sum((np.abs(pred - mean) + np.abs(tau - mean)) ** 2, axis=0)
    return {
        "torque_rms": np.sqrt(np.mean(residual**2, axis=0)).tolist(),
        "torque_rms_total": float(np.sqrt(np.mean(residual**2))),
        "rsd": np.sqrt(np.sum(residual**2, axis=0) / np.sum(tau**2, axis=0)).tolist(),
        "agreement_index": agreement.tolist(),
        "base_parameter_error": float(np.linalg.norm(values - truth) / np.linalg.norm(truth)),
        "fit_time_s": fit_time,
        "condition_number": 42.0,
    }


def make_study() -> StudyResult:
    """3 joints, 2 estimators (one with a parameter history and an HTML-hostile name), friction curves."""
    rng = np.random.default_rng(7)
    joints = ["shoulder", "elbow", "wrist"]
    N, n, b, K = 600, 3, 8, 50
    t = np.linspace(0.0, 6.0, N)
    tau_true = np.column_stack([np.sin((j + 1) * t) * (j + 1) for j in range(n)])
    tau = tau_true + 0.05 * rng.standard_normal((N, n))
    names = [f"b{k + 1}" for k in range(b)]
    truth = rng.uniform(0.1, 2.0, b) * rng.choice([-1, 1], b)
    wls_values = truth + 1e-3 * rng.standard_normal(b)
    rls_values = truth + 5e-2 * rng.standard_normal(b)
    wls_pred = tau_true + 0.01 * rng.standard_normal((N, n))
    rls_pred = tau_true + 0.2 * rng.standard_normal((N, n))
    decay = np.exp(-np.linspace(0, 5, K))[:, None]
    history = rls_values + decay * rng.standard_normal((K, b))
    qd = np.linspace(-2, 2, 101)
    friction_true = np.column_stack([0.3 * np.sign(qd) + 0.1 * (j + 1) * qd for j in range(n)])
    outcomes = [
        EstimatorOutcome(
            name="wls",
            parameter_names=names,
            values=wls_values,
            std=np.full(b, 1e-3),
            true_values=truth,
            metrics=_metrics(tau, wls_pred, wls_values, truth, 0.02),
            tau_predicted=wls_pred,
            model_path="models/wls.json",
        ),
        EstimatorOutcome(
            name=ODD_NAME,
            parameter_names=names,
            values=rls_values,
            std=None,
            true_values=truth,
            metrics=_metrics(tau, rls_pred, rls_values, truth, 0.5),
            tau_predicted=rls_pred,
            history=history,
            history_t=np.linspace(0, 6, K),
        ),
    ]
    return StudyResult(
        title="unit <study>",
        robot_name="toy3",
        joint_names=joints,
        scenario={"name": "unit", "seed": 7},
        t_validation=t,
        tau_measured=tau,
        tau_true=tau_true,
        outcomes=outcomes,
        base_parameter_table=[
            (name, f"m{k} + 0.5*I{k}", float(v)) for k, (name, v) in enumerate(zip(names, truth, strict=True))
        ],
        friction_curves={"qd": qd, "true": friction_true, "wls": friction_true * 1.05, ODD_NAME: friction_true * 0.9},
        notes=["validation noise seed offset 1"],
        info={"seed": "7", "noise": "gaussian 0.05"},
    )


@pytest.fixture()
def study() -> StudyResult:
    return make_study()


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    """One report written once for the read-only tests (drawing the figures takes most of the time)."""
    return write_report(tmp_path_factory.mktemp("report") / "run", make_study())


def test_write_report_draws_every_applicable_figure_as_a_png(written):
    pngs = {key: path for key, path in written.items() if path.suffix == ".png"}
    assert set(pngs) == {
        "torque_comparison",
        "torque_errors",
        "parameter_errors",
        "friction_curves",
        f"convergence/{ODD_NAME}",
        f"convergence_values/{ODD_NAME}",
    }
    for path in pngs.values():
        assert path.parent.name == "plots"
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC, path
        assert len(data) > 10_000, path


def test_write_report_skips_friction_and_convergence_when_absent(study, tmp_path):
    study.friction_curves = None
    study.outcomes[1].history = None
    written = write_report(tmp_path / "run", study)
    assert "friction_curves" not in written
    assert not any(key.startswith("convergence/") for key in written)
    assert sorted(p.name for p in (tmp_path / "run" / "plots").iterdir()) == [
        "parameter_errors.png",
        "torque_comparison.png",
        "torque_errors.png",
    ]


def test_a_report_without_figures_has_its_tables_and_says_so(study, tmp_path):
    from robotid_sim.report import NO_FIGURES_NOTE

    written = write_report(tmp_path / "run", study, figures=False)
    assert set(written) == {"markdown", "html", "context"}
    assert not (tmp_path / "run" / "plots").exists()
    markdown = written["markdown"].read_text()
    assert NO_FIGURES_NOTE in markdown and "![" not in markdown
    assert any(line.startswith("| wls |") for line in markdown.splitlines())  # the comparison table


def test_a_figure_that_fails_is_a_note_and_one_warning_line_not_a_traceback(study, tmp_path, monkeypatch, caplog):
    import robotid_sim.report as report

    def broken(*_):
        raise ValueError("operands could not be broadcast together")

    monkeypatch.setattr(report, "plot_torque_errors", broken)
    with caplog.at_level("WARNING", logger="robotid_sim.report"):
        written = write_report(tmp_path / "run", study)
    assert "torque_errors" not in written and "torque_comparison" in written
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].exc_info is None
    assert "torque_errors" in warnings[0].getMessage()
    markdown = written["markdown"].read_text()
    assert "figure 'torque_errors' was not drawn: ValueError: operands could not be broadcast together" in markdown


def test_markdown_comparison_table_names_both_estimators_and_bolds_the_best_rms(study, written):
    text = written["markdown"].read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert any(row.startswith("| wls |") for row in rows)
    assert any(row.startswith("| rls&lt;λ=0.99&gt; |") for row in rows)
    best = min(o.metrics["torque_rms_total"] for o in study.outcomes)
    assert study.outcomes[0].metrics["torque_rms_total"] == best
    wls_row = next(row for row in rows if row.startswith("| wls |"))
    assert wls_row.split("|")[2].strip() == f"**{format_number(best)}**"
    assert "![Measured vs predicted torque" in text and "(<plots/torque_comparison.png>)" in text


def test_markdown_images_are_relative_paths_that_exist(written):
    text = written["markdown"].read_text()
    run_dir = written["markdown"].parent
    paths = re.findall(r"\]\(<([^>]+)>\)", text)
    images = [p for p in paths if p.endswith(".png")]
    assert len(images) == 6
    assert all((run_dir / p).is_file() for p in images)


def test_html_escapes_names_and_is_self_contained(written):
    text = written["html"].read_text()
    assert "rls&lt;λ=0.99&gt;" in text
    assert "<λ" not in text and "unit <study>" not in text
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert text.count("<table") >= 4
    for src in re.findall(r'<img src="([^"]+)"', text):
        assert (written["html"].parent / src).is_file()


def test_html_folds_long_base_parameter_tables(study):
    b = 50
    study.base_parameter_table = [(f"p{k}", f"m{k}", float(k + 1)) for k in range(b)]
    short = render_html(dataclasses.replace(study, base_parameter_table=study.base_parameter_table[:10]), {})
    long = render_html(study, {})
    assert "<details><summary>50 base parameters" in long
    assert "base parameters (click" not in short


def test_write_report_refuses_to_overwrite(study, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "report.md").write_text("earlier run")
    with pytest.raises(FileExistsError, match="report.md"):
        write_report(run_dir, study)
    assert (run_dir / "report.md").read_text() == "earlier run"
    assert not (run_dir / "report.html").exists()


def test_rich_table_has_one_row_per_estimator(study):
    table = rich_comparison_table(study)
    assert isinstance(table, Table)
    assert table.row_count == len(study.outcomes)
    headers, rows = comparison_rows(study)
    assert len(table.columns) == len(headers)
    assert [row[0].text for row in rows] == ["wls", ODD_NAME]


def test_comparison_marks_highest_agreement_index_and_never_condition_number(study):
    headers, rows = comparison_rows(study)
    ai = headers.index("mean agreement index")
    assert rows[0][ai].best and not rows[1][ai].best
    cond = headers.index("condition number")
    assert not any(row[cond].best for row in rows)
    assert "trajectory RMS" not in headers  # no estimator reported it


def test_format_number_is_compact():
    assert format_number(0.123456) == "0.1235"
    assert format_number(1.5e-7) == "1.500e-07"
    assert format_number(float("nan")) == "—"
    assert format_number(0.0) == "0"


def test_render_markdown_without_images_or_outcomes(study):
    empty = dataclasses.replace(study, outcomes=[], base_parameter_table=[])
    text = render_markdown(empty, {})
    assert "No estimator ran." in text
    assert "## Figures" not in text


@pytest.mark.parametrize("shape", [(12,), (12, 3)])
def test_plot_sparsity_writes_a_png(tmp_path, shape):
    rng = np.random.default_rng(0)
    coefficients = rng.standard_normal(shape) * 10.0 ** rng.uniform(-6, 1, shape)
    path = plot_sparsity([f"term{k}" for k in range(12)], coefficients, tmp_path / "s.png", threshold=1e-2)
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_plot_sparsity_rejects_mismatched_names(tmp_path):
    with pytest.raises(ValueError, match="len\\(names\\)"):
        plot_sparsity(["a"], np.ones(3), tmp_path / "s.png", threshold=0.1)


@pytest.mark.parametrize(
    "names",
    [
        ["../x", "../../etc/passwd", "/abs/path", "a..b"],
        ["OLS", "ols", "Ols"],
        ["x" * 200, "x" * 199, "é λ", "..."],
    ],
    ids=["paths", "case", "long-and-odd"],
)
def test_figure_file_names_from_estimator_names_stay_in_plots_and_are_distinct(study, tmp_path, names):
    """Issue 8: an estimator name never leads a figure out of plots/, nor onto another's file."""
    from robotid_sim.report import figure_plan
    from robotid_sim.safety import safe_name

    template = study.outcomes[1]
    outcomes = [
        dataclasses.replace(template, name=name, metrics={**template.metrics, "sparsity_threshold": 0.1})
        for name in names
    ]
    plots = tmp_path / "run" / "plots"
    plan = figure_plan(dataclasses.replace(study, outcomes=outcomes), plots)
    per_estimator = [path for key, path, _ in plan if "/" in key]
    assert len(per_estimator) == 3 * len(names)  # a convergence, a values and a sparsity figure each
    for path in per_estimator:
        assert path.parent == plots
        assert safe_name(path.name, "figure") == path.name
    assert len({p.name.casefold() for p in per_estimator}) == len(per_estimator)
