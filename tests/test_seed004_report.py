"""The report's seed 004 layout: Table 4 (estimates with labels and relative errors), Table 5 (validation
trajectory RMS, RSD, AI), Table 6 and Fig. 8 (±50 % sensitivity), and convergence plots with a ±2σ band."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml
from helpers import TINY_SCENARIO

import robotid_sim as rid
from robotid_sim.identification.metrics import SensitivityTable
from robotid_sim.report import EstimatorOutcome, SensitivityOutcome, StudyResult, plots
from robotid_sim.report.markdown import image_caption, render_html, render_markdown
from robotid_sim.report.tables import (
    base_parameter_rows,
    relative_error_rows,
    sensitivity_rows,
    trajectory_rows,
)
from robotid_sim.scenario.schema import DEFAULT_SENSITIVITY_FACTORS, parse_scenario

NAMES = ["M1", "MX3", "MY3"]
TRUTH = np.array([4.0, -0.5, 0.0])  # MY3 is zero: its error is relative to ε = 1e-3 · 4
LABELS = {"M1": "λ1*", "MX3": "λ4*/l2"}


def _outcome(name: str, values, metrics: dict, **extra) -> EstimatorOutcome:
    return EstimatorOutcome(
        name=name,
        parameter_names=list(NAMES),
        values=np.array(values, float),
        std=None,
        true_values=TRUTH,
        metrics=metrics,
        tau_predicted=np.zeros((4, 2)),
        **extra,
    )


def _sensitivity() -> SensitivityOutcome:
    factors = (0.5, 1.0, 1.5)
    rms_total = np.array([[0.2, 0.0, 0.1], [0.05, 0.0, np.inf], [0.01, 0.0, 0.02]])
    table = SensitivityTable(
        parameter_names=tuple(NAMES),
        values=np.array([4.1, -0.4, 0.001]),
        factors=factors,
        rms=np.repeat(rms_total[:, :, None], 2, axis=2),
        rms_total=rms_total,
    )
    return SensitivityOutcome("ols", table, 0.5)


def make_study(labels: dict[str, str] | None = None) -> StudyResult:
    """Two joints, three base parameters, two estimators and the CAD baseline; ``wls`` diverged in open loop."""
    ols = _outcome(
        "ols",
        [4.4, -0.45, 0.002],
        {"trajectory_rms": [1e-3, 2e-3], "trajectory_rsd": [0.01, 0.02], "trajectory_agreement_index": [0.99, 0.9]},
    )
    wls = _outcome(
        "wls",
        [4.04, -0.6, -0.001],
        {
            "trajectory_rms": [math.inf, math.inf],
            "trajectory_rsd": [math.inf, math.inf],
            "trajectory_agreement_index": [0.0, 0.0],
        },
    )
    cad = _outcome(
        "CAD", TRUTH, {"trajectory_rms": [0.0, 0.0], "trajectory_rsd": [0.0, 0.0], "trajectory_agreement_index": [1, 1]}
    )
    return StudyResult(
        title="seed004",
        robot_name="prrrp",
        joint_names=["joint1", "joint2"],
        scenario={},
        t_validation=np.linspace(0, 1, 4),
        tau_measured=np.zeros((4, 2)),
        tau_true=None,
        outcomes=[ols, wls, cad],
        base_parameter_table=[(n, n, float(v)) for n, v in zip(NAMES, TRUTH, strict=True)],
        baselines=["CAD"],
        parameter_labels=dict(labels or {}),
        sensitivity=_sensitivity(),
    )


# ------------------------------------------------------------------------------------------- Table 4
def test_base_parameter_table_has_a_label_column_only_when_labels_are_given():
    headers, rows = base_parameter_rows(make_study())
    assert headers == ["name", "expression", "true", "ols", "wls", "CAD"]
    headers, rows = base_parameter_rows(make_study(LABELS))
    assert headers == ["name", "label", "expression", "true", "ols", "wls", "CAD"]
    assert [(r[0].text, r[1].text) for r in rows] == [("M1", "λ1*"), ("MX3", "λ4*/l2"), ("MY3", "")]


def test_relative_error_table_gives_percent_per_estimator_and_marks_the_lowest_but_never_cad():
    headers, rows = relative_error_rows(make_study(LABELS))
    assert headers == ["name", "label", "ols", "wls", "CAD"]
    by_name = {r[0].text: r[2:] for r in rows}
    ols, wls, cad = by_name["M1"]
    assert ols.value == pytest.approx(10.0) and ols.text == "10 %"  # |4.4 − 4| / 4
    assert wls.value == pytest.approx(1.0) and wls.best and not ols.best
    assert cad.value == 0.0 and not cad.best  # the baseline is never best
    ols, wls, _ = by_name["MX3"]
    assert ols.value == pytest.approx(10.0) and ols.best and wls.value == pytest.approx(20.0)
    ols, wls, _ = by_name["MY3"]  # true value 0: relative to ε = 4e-3, marked †
    assert ols.value == pytest.approx(50.0) and ols.text.endswith("%†")
    assert wls.value == pytest.approx(25.0) and wls.best


def test_relative_error_table_is_empty_without_a_truth():
    study = make_study()
    study.base_parameter_table = []
    for outcome in study.outcomes:
        outcome.true_values = None
    assert relative_error_rows(study)[1] == []


# ------------------------------------------------------------------------------------------- Table 5
def test_trajectory_table_has_rms_rsd_ai_per_joint_and_marks_the_best_of_each_row():
    headers, rows = trajectory_rows(make_study())
    assert headers == ["joint", "index", "ols", "wls", "CAD"]
    assert [(r[0].text, r[1].text) for r in rows] == [
        ("joint1", "RMS"),
        ("", "RSD"),
        ("", "AI"),
        ("joint2", "RMS"),
        ("", "RSD"),
        ("", "AI"),
    ]
    rms, rsd, ai = rows[0], rows[1], rows[2]
    assert [c.text for c in rms[2:]] == ["0.001", "inf", "0"]
    assert [c.text for c in rsd[2:]] == ["0.01", "inf", "0"]
    assert [c.text for c in ai[2:]] == ["0.99", "0", "1"]
    # ols beats the diverged wls on every row; the CAD baseline is never marked
    assert all(row[2].best and not row[3].best and not row[4].best for row in rows)


def test_trajectory_table_is_empty_when_no_estimator_has_the_indices():
    study = make_study()
    for outcome in study.outcomes:
        outcome.metrics = {}
    assert trajectory_rows(study)[1] == []


# ------------------------------------------------------------------------------------------- Table 6
def test_sensitivity_table_has_the_range_the_rms_at_both_ends_and_the_rank():
    headers, rows = sensitivity_rows(make_study(LABELS))
    assert headers == [
        "name",
        "label",
        "nominal",
        "value at ×0.5",
        "value at ×1.5",
        "RMS at ×0.5",
        "RMS at ×1.5",
        "largest RMS",
        "rank",
    ]
    assert [r[0].text for r in rows] == NAMES  # the parameters' order, as in the seed
    m1, mx3, my3 = rows
    assert [c.value for c in m1[2:5]] == pytest.approx([4.1, 2.05, 6.15])
    assert [c.text for c in m1[5:9]] == ["0.2", "0.1", "0.2 at ×0.5", "2"]
    assert [c.text for c in mx3[5:9]] == ["0.05", "inf (diverged)", "inf (diverged) at ×1.5", "1"]
    assert my3[8].text == "3"
    assert not any(c.best for row in rows for c in row)


def test_report_sections_follow_the_seed_tables_in_markdown_and_html():
    study = make_study(LABELS)
    text = render_markdown(study, {"sensitivity": "plots/sensitivity.png"})
    for title in (
        "## Validation trajectory (seed 004 Table 5)",
        "## Base parameters",
        "### Relative error per base parameter",
        "## Sensitivity (seed 004 Table 6)",
    ):
        assert title in text
    assert text.index("Table 5") < text.index("## Base parameters") < text.index("Table 6")
    assert "| M1 | λ1\\* |" in text
    assert "Ranking, most sensitive first: MX3, M1, MY3." in text
    page = render_html(study, {"sensitivity": "plots/sensitivity.png"})
    assert "<h2>Validation trajectory (seed 004 Table 5)</h2>" in page
    assert "<h2>Sensitivity (seed 004 Table 6)</h2>" in page
    assert '<td class="num">inf (diverged)</td>' in page
    assert '<img src="plots/sensitivity.png"' in page and "seed 004 Fig. 8" in page


def test_image_captions_of_the_new_figures():
    assert "Fig. 8" in image_caption("sensitivity")
    assert image_caption("convergence_values/ekf").endswith(": ekf") and "Fig. 5–6" in image_caption(
        "convergence_values/ekf"
    )
    assert image_caption("convergence/ekf") == "Parameter convergence: ekf"


# ------------------------------------------------------------------------------ figures and bands
@pytest.fixture()
def drawn(monkeypatch):
    """The y-extent of each shaded band on each axis of the figures drawn, captured before they are saved."""
    captured: list[list[tuple[float, float]]] = []
    save = plots.save_figure

    def spy(fig, path):
        for ax in fig.axes:
            captured.append(
                [(p.vertices[:, 1].min(), p.vertices[:, 1].max()) for c in ax.collections for p in c.get_paths()]
            )
        return save(fig, path)

    monkeypatch.setattr(plots, "save_figure", spy)
    return captured


def _history_outcome(with_std: bool) -> EstimatorOutcome:
    K = 20
    std = np.tile([0.1, 0.05, 1e-4], (K, 1))
    return _outcome(
        "ekf",
        TRUTH,
        {},
        history=np.tile(TRUTH, (K, 1)),
        history_t=np.linspace(0, 1, K),
        history_std=std if with_std else None,
    )


@pytest.mark.renders_figures
def test_convergence_plot_shades_two_sigma_normalised_like_the_curve(tmp_path, drawn):
    path = plots.plot_parameter_convergence(_history_outcome(True), tmp_path / "c.png", labels=LABELS)
    assert path.read_bytes()[:4] == b"\x89PNG"
    bands = drawn[0]  # the normalised panel: curves at 1, bands 1 ± 2σ/|θ| (ε = 4e-3 for the zero MY3)
    assert len(bands) == 3
    for (low, high), half in zip(bands, [2 * 0.1 / 4.0, 2 * 0.05 / 0.5, 2 * 1e-4 / 4e-3], strict=True):
        assert low == pytest.approx(1 - half) and high == pytest.approx(1 + half)


def test_convergence_plot_without_std_has_no_band(tmp_path, drawn):
    plots.plot_parameter_convergence(_history_outcome(False), tmp_path / "c.png")
    assert drawn[0] == []


def test_values_plot_has_one_axis_per_parameter_with_the_band_around_the_estimate(tmp_path, drawn):
    plots.plot_parameter_values(_history_outcome(True), tmp_path / "v.png", labels=LABELS)
    assert len(drawn) == 3
    for bands, theta, sigma in zip(drawn, TRUTH, [0.1, 0.05, 1e-4], strict=True):
        assert bands == [(pytest.approx(theta - 2 * sigma), pytest.approx(theta + 2 * sigma))]


def test_values_plot_refuses_more_than_twelve_parameters(tmp_path):
    outcome = _history_outcome(False)
    outcome.history = np.zeros((5, 13))
    outcome.parameter_names = [f"p{k}" for k in range(13)]
    with pytest.raises(ValueError, match="at most 12 parameters"):
        plots.plot_parameter_values(outcome, tmp_path / "v.png")


@pytest.mark.renders_figures
def test_sensitivity_figure_is_a_png(tmp_path):
    path = plots.plot_sensitivity(_sensitivity(), tmp_path / "s.png", LABELS)
    assert path.read_bytes()[:4] == b"\x89PNG"


# -------------------------------------------------------------------------------------------- schema
SCENARIO = {**TINY_SCENARIO, "name": "tiny004", "estimators": ["ols", {"name": "wls", "label": "weighted"}]}


def test_sensitivity_true_is_the_first_estimator_over_eleven_factors():
    sc = parse_scenario({**SCENARIO, "sensitivity": True})
    assert sc.sensitivity.estimator == "ols"
    assert sc.sensitivity.factors == list(DEFAULT_SENSITIVITY_FACTORS)
    assert len(DEFAULT_SENSITIVITY_FACTORS) == 11
    assert parse_scenario({**SCENARIO, "sensitivity": False}).sensitivity is None


def test_sensitivity_mapping_names_an_estimator_label_and_always_has_both_bounds():
    sc = parse_scenario({**SCENARIO, "sensitivity": {"estimator": "Weighted", "factors": [1.2, 0.9]}})
    assert sc.sensitivity.estimator == "weighted"
    assert sc.sensitivity.factors == [0.5, 0.9, 1.2, 1.5]


@pytest.mark.parametrize(
    ("sensitivity", "message"),
    [
        (
            {"estimator": "wls"},
            r"sensitivity.estimator 'wls' is not an estimator of this scenario; choose one of \['ols', 'weighted'\]",
        ),
        ({"factors": [0.0, 1.2]}, r"sensitivity.factors.*must be > 0"),
        ({"estimator": "ols", "factor": [1.2]}, r"sensitivity.factor"),
    ],
)
def test_bad_sensitivity_sections_are_refused_when_parsed(sensitivity, message):
    with pytest.raises(rid.ConfigError, match=message):
        parse_scenario({**SCENARIO, "sensitivity": sensitivity})


def test_an_unknown_parameter_label_name_is_refused_before_anything_runs(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**SCENARIO, "report": {"parameter_labels": {"M1": "λ1*", "MX9": "?"}}}))
    with pytest.raises(rid.ConfigError) as info:
        rid.run_scenario(path, out_dir=tmp_path / "runs")
    message = str(info.value)
    assert "report.parameter_labels" in message and "'MX9'" in message
    assert "M1, ZZ2, ZZ3, MX3, MY3, ZZ4, MX4, MY4, M5" in message
    assert not (tmp_path / "runs").exists()


def test_empty_parameter_labels_are_refused():
    with pytest.raises(rid.ConfigError, match="empty label"):
        parse_scenario({**SCENARIO, "report": {"parameter_labels": {"M1": " "}}})


# ------------------------------------------------------------------------------------ a small run
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("seed004")
    scenario = {
        **SCENARIO,
        "sensitivity": {"estimator": "weighted", "factors": [0.75]},
        "report": {"parameter_labels": {"M1": "λ1*", "M5": "λ8*"}},
    }
    path = root / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return rid.run_scenario(path, out_dir=root / "runs")


def test_a_run_reports_trajectory_rsd_and_agreement_index_per_joint(run):
    rows = json.loads((run / "metrics.json").read_text())["estimators"]
    for row in rows:
        assert len(row["trajectory_rsd"]) == 5 and len(row["trajectory_agreement_index"]) == 5
        assert all(0.0 <= ai <= 1.0 for ai in row["trajectory_agreement_index"])
    cad = next(row for row in rows if row["estimator"] == "CAD")  # the truth itself: a perfect model
    assert cad["trajectory_rms"] == [0.0] * 5 and cad["trajectory_rsd"] == [0.0] * 5
    assert cad["trajectory_agreement_index"] == [1.0] * 5
    assert "trajectory_agreement_index_5" in (run / "metrics.csv").read_text().splitlines()[0]


@pytest.mark.renders_figures
def test_a_run_with_sensitivity_shows_table_6_and_fig_8(run):
    data = json.loads((run / "sensitivity.json").read_text())
    assert data["estimator"] == "weighted" and data["factors"] == [0.5, 0.75, 1.5]
    assert (run / "plots" / "sensitivity.png").read_bytes()[:4] == b"\x89PNG"
    text = (run / "report.md").read_text()
    assert "## Sensitivity (seed 004 Table 6)" in text and "(<plots/sensitivity.png>)" in text
    assert "Each identified parameter of 'weighted' scaled alone by 0.5, 0.75, 1.5" in text
    section = text[text.index("## Sensitivity") :]
    assert "| M5 | λ8\\* |" in section
    assert "## Validation trajectory (seed 004 Table 5)" in text
    # the CAD row is a standard parameter set: its M1 (one link's mass) is not the base M1, so it has no column
    assert "| name | label | expression | true | ols | weighted |\n" in text
    page = (run / "report.html").read_text()
    assert "<h2>Sensitivity (seed 004 Table 6)</h2>" in page and '<img src="plots/sensitivity.png"' in page
    assert "<h2>Validation trajectory (seed 004 Table 5)</h2>" in page
