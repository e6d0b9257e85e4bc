"""Reports of feature-library models (issue 14, seed 000 Table 2, Fig. 2, Fig. 5 / 10, Fig. 11).

``sindy`` and ``stepwise_sindy`` are fitted on a small exact stepwise collection of the SCARA (the builders of
``tests/test_sindy.py``); the report must print each model's equations, a sparse-model table whose numbers are
the models' own diagnostics, and the sparsity, active-terms and segmentation figures. One short scenario run
checks that a run folder read back (``robotid-sim report``) gives the same tables.
"""

from __future__ import annotations

import html
import json
import math
import re

import numpy as np
import pytest
import yaml
from test_sindy import exact_dataset, rich_stepwise

import robotid_sim as rid
from robotid_sim.identification import FeatureLibraryModel, IdentificationProblem
from robotid_sim.report import EstimatorOutcome, StudyResult, write_report
from robotid_sim.report.markdown import render_markdown
from robotid_sim.report.tables import (
    MISSING,
    segmentation_summary,
    sparse_model_rows,
    sparse_step_rows,
    wrap_equation,
)
from robotid_sim.studies import load_run_result, run_scenario

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def study(robots, tmp_path_factory):
    """(models by name, StudyResult, written report files) for sindy and stepwise_sindy on the SCARA."""
    robot = robots["scara"]
    ident = exact_dataset(robot, rich_stepwise(robot, n_poses=10, n_sweeps=10, fourier_segments=1, seed=0))
    val = exact_dataset(robot, rich_stepwise(robot, n_poses=3, n_sweeps=3, fourier_segments=1, seed=7))
    problem = IdentificationProblem(robot, ident)
    models = {
        "sindy": rid.plugins.get_estimator("sindy").from_options(first_order=1).fit(problem),
        "stepwise_sindy": rid.plugins.get_estimator("stepwise_sindy").from_options(first_orders=[1, 1, 1]).fit(problem),
    }
    outcomes = []
    for name, model in models.items():
        pred = model.predict_torque(val.q, val.qd, val.qdd)
        rms = np.sqrt(np.mean((pred - val.tau) ** 2, axis=0))
        metrics = {"torque_rms": rms.tolist(), "torque_rms_total": float(np.sqrt(np.mean(rms**2)))}
        outcomes.append(EstimatorOutcome.of_model(name, model, metrics, pred, f"models/{name}.json"))
    result = StudyResult(
        title="sindy report",
        robot_name=robot.name,
        joint_names=list(robot.joint_names),
        scenario={},
        t_validation=val.t,
        tau_measured=val.tau,
        tau_true=val.truth.tau,
        outcomes=outcomes,
    )
    run_dir = tmp_path_factory.mktemp("sindy_report")
    return models, result, write_report(run_dir, result)


def _equations_in_markdown(text: str, name: str) -> list[str]:
    """The equations of ``name``'s code block in report.md, wrapped lines joined back."""
    block = re.search(rf"### Equations of {re.escape(name)}\n\n```text\n(.*?)\n```", text, re.S)
    assert block, f"no equation block for {name}"
    equations: list[str] = []
    for line in block.group(1).splitlines():
        if line.startswith("tau"):
            equations.append(line)
        else:
            equations[-1] += " " + line.strip()
    return equations


def test_every_feature_library_model_prints_its_equations(study):
    models, result, files = study
    markdown = files["markdown"].read_text()
    page = files["html"].read_text()
    for name, model in models.items():
        assert isinstance(model, FeatureLibraryModel)
        equations = model.equations()
        assert _equations_in_markdown(markdown, name) == equations
        assert f"<h3>Equations of {name}</h3>" in page
        for equation in equations:
            assert html.escape(wrap_equation(equation)[0]) in page
        outcome = next(o for o in result.outcomes if o.name == name)
        assert outcome.sparse.equations == equations
        assert outcome.sparse.terms == list(model.library.names)
        np.testing.assert_array_equal(outcome.sparse.coefficients, model.coefficients)
        assert outcome.sparse.threshold == model.options["threshold"]


def test_wrapped_equations_are_short_and_join_back():
    equation = "tau1 = " + " + ".join(f"{k + 0.5:.4g}*sin(q1)*qd2*qdd{k % 3 + 1}" for k in range(40))
    equation = equation.replace("+ 3.5", "- 3.5")
    lines = wrap_equation(equation, width=80)
    assert len(lines) > 5 and all(len(line) <= 80 for line in lines)
    assert all(line.startswith(" " * len("tau1 = ")) for line in lines[1:])
    assert " ".join(line.strip() for line in lines) == equation
    assert wrap_equation("tau2 = 0") == ["tau2 = 0"]


def _row(rows, name):
    return next(row for row in rows if row[0].text == name)


def test_sparse_model_table_holds_the_models_diagnostics(study):
    models, result, files = study
    headers, rows = sparse_model_rows(result)
    n = len(result.joint_names)
    assert headers == [
        "estimator",
        "library size",
        "library per step",
        *[f"active τ{j + 1}" for j in range(n)],
        "active total",
        "fit time [s]",
        "fit time per step [s]",
    ]
    assert [row[0].text for row in rows] == ["sindy", "stepwise_sindy"]
    for name, model in models.items():
        d = model.diagnostics
        row = {h: cell for h, cell in zip(headers, _row(rows, name), strict=True)}
        assert row["library size"].value == d["library_size"]
        assert row["library size"].text == str(d["library_size"])
        assert [row[f"active τ{j + 1}"].value for j in range(n)] == d["active_terms"]
        assert row["active total"].value == sum(d["active_terms"])
        assert row["fit time [s]"].value == pytest.approx(d["fit_time_s"])
        if name == "stepwise_sindy":
            assert row["library per step"].text == " / ".join(str(s) for s in d["library_sizes"])
            assert d["library_size"] == sum(d["library_sizes"])
            assert row["fit time per step [s]"].text.count(" / ") == 2
        else:
            assert row["library per step"].text == MISSING
    # the stepwise library is the smaller one (seed 000 Table 2), so it is marked best
    assert _row(rows, "stepwise_sindy")[1].best and not _row(rows, "sindy")[1].best
    markdown = files["markdown"].read_text()
    assert "## Sparse models (seed 000 Table 2)" in markdown
    assert "<h2>Sparse models (seed 000 Table 2)</h2>" in files["html"].read_text()
    sizes = [models[name].diagnostics["library_size"] for name in ("sindy", "stepwise_sindy")]
    assert re.search(rf"\| sindy \| {sizes[0]} \| — \|", markdown)
    assert re.search(rf"\| stepwise_sindy \| \*\*{sizes[1]}\*\* \|", markdown)
    assert "## Base parameters" not in markdown  # SINDy terms are shown as equations, not as base parameters


def test_stepwise_steps_and_segmentation_are_shown(study):
    models, result, files = study
    d = models["stepwise_sindy"].diagnostics
    stepwise = next(o for o in result.outcomes if o.name == "stepwise_sindy")
    headers, rows = sparse_step_rows(stepwise)
    assert [row[0].text for row in rows] == ["Step I", "Step II", "Step III"]
    for row, step in zip(rows, d["steps"], strict=True):
        cells = dict(zip(headers, row, strict=True))
        assert cells["state"].text == step["state"].replace("_", " ")
        assert cells["samples"].value == step["samples"]
        assert cells["library size"].value == step["library_size"]
        assert [cells[f"active τ{j + 1}"].value for j in range(4)] == step["active_terms"]
        assert cells["fit time [s]"].value == pytest.approx(step["fit_time_s"])
    summary = segmentation_summary(stepwise)
    assert f"k = {d['segmentation']['k']} by the elbow" in summary
    assert f"{100 * d['segmentation']['label_agreement']:.1f} %" in summary
    sindy = next(o for o in result.outcomes if o.name == "sindy")
    assert sparse_step_rows(sindy) == ([], []) and segmentation_summary(sindy) is None
    markdown = files["markdown"].read_text()
    assert "### Steps of stepwise_sindy" in markdown and "### Steps of sindy" not in markdown


@pytest.mark.renders_figures
def test_sparse_figures_are_drawn(study):
    _, result, files = study
    for key in (
        "torque_comparison",
        "torque_errors",
        "active_terms",
        "sparsity/sindy",
        "sparsity/stepwise_sindy",
        "segmentation/stepwise_sindy",
    ):
        assert key in files, key
        assert files[key].read_bytes()[:8] == PNG
    assert "segmentation/sindy" not in files
    markdown = files["markdown"].read_text()
    assert "](<plots/active_terms.png>)" in markdown
    assert "](<plots/segmentation_stepwise_sindy.png>)" in markdown
    assert not any("was not drawn" in note for note in result.notes)


def test_a_run_folder_read_back_gives_the_same_sparse_tables(tmp_path):
    scenario = {
        "name": "sindy_tiny",
        "robot": "scara",
        "seed": 0,
        "excitation": {"type": "stepwise", "n_poses": 4, "cruise_time": 1.0, "fourier_segments": 1, "seed": 0},
        "simulation": {"rate_hz": 100},
        "validation": {"duration": 2.0, "trajectory_horizon": 0.2},
        "estimators": [
            {"name": "sindy", "options": {"first_order": 1}},
            # the data's own labels: RAI + k-means finds no static samples in so short a collection
            {"name": "stepwise_sindy", "options": {"first_orders": [1, 1, 1], "segmentation": "labels"}},
        ],
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    run = run_scenario(path, out_dir=tmp_path / "runs")
    for name in ("torque_comparison", "active_terms", "sparsity_sindy", "sparsity_stepwise_sindy"):
        assert (run / "plots" / f"{name}.png").is_file(), name
    assert not (run / "plots" / "segmentation_stepwise_sindy.png").exists()  # labels: no WCSS curve to draw
    markdown = (run / "report.md").read_text()
    assert "## Sparse models (seed 000 Table 2)" in markdown
    assert "### Equations of stepwise_sindy" in markdown
    loaded = load_run_result(run)
    assert [o.name for o in loaded.outcomes if o.sparse is not None] == ["sindy", "stepwise_sindy"]
    # the live tables, rebuilt from the saved models' diagnostics, equal the ones read back
    headers, rows = sparse_model_rows(loaded)
    fit_time = headers.index("fit time [s]")
    for row in rows:
        model = rid.load_model(run / "models" / f"{row[0].text}.json")
        assert math.isclose(row[fit_time].value, model.diagnostics["fit_time_s"])
    again = render_markdown(loaded, {})
    section = markdown.split("## Sparse models (seed 000 Table 2)")[1].split("## Identified models")[0]
    assert section in again


def test_a_model_without_forward_dynamics_is_validated_without_them(tmp_path):
    """A SINDy library with products of accelerations has no forward dynamics: the run (and then 'robotid-sim
    report') stopped with the model's error; the seed 000 scenarios had to switch the open-loop validation off."""
    scenario = {
        "name": "sindy_no_forward",
        "robot": "scara",
        "excitation": {"type": "stepwise", "n_poses": 4, "n_sweeps": 4, "fourier_segments": 1, "seed": 0},
        "simulation": {"rate_hz": 100},
        "validation": {"duration": 2.0, "trajectory_horizon": 0.2},
        "estimators": [
            {"name": "sindy", "options": {"first_order": 1, "second_order": 2}},
            {"name": "stepwise_sindy", "options": {"first_orders": [1, 1, 1], "segmentation": "labels"}},
        ],
    }
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    run = run_scenario(path, out_dir=tmp_path / "runs")
    assert not rid.load_model(run / "models" / "sindy.json").has_forward_dynamics
    rows = {r["estimator"]: r for r in json.loads((run / "metrics.json").read_text())["estimators"]}
    assert "acceleration_rms" not in rows["sindy"] and "trajectory_rms" not in rows["sindy"]
    assert len(rows["stepwise_sindy"]["trajectory_rms"]) == 4  # the stepwise model (linear in qdd) is simulated
    assert "sindy: no forward dynamics" in (run / "report.md").read_text()
    assert [o.name for o in load_run_result(run).outcomes] == ["sindy", "stepwise_sindy", "CAD"]
