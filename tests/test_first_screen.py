"""The first screen of ``robotid-sim run`` / ``report`` (issue 27, item 12) and what a run folder keeps for its report
(carried-over items: ``metrics.json`` sections, a report rebuilt from the folder equal to the run's own).

- the comparison table fits the terminal: columns whose shown values are the same for every estimator are left
  out and named with their value, then the least telling columns that do not fit; report.md keeps every column;
- no "best" mark on values that tie at the shown precision;
- ``fit_time_s`` leaves out numba's compilation.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
from helpers import run_cli
from rich.console import Console

import robotid_sim as rid
from robotid_sim.identification import Estimator, IdentificationProblem
from robotid_sim.identification.evaluation import fit_timed
from robotid_sim.plugins import get_estimator
from robotid_sim.report import EstimatorOutcome, StudyResult, write_report
from robotid_sim.report.tables import comparison_rows, rich_compact_comparison
from robotid_sim.sim.dataset import load_dataset
from robotid_sim.studies import load_run_result

#: the default study's comparison (prrrp_seed004): per estimator torque RMS, vs truth, nRMS % of range and of
#: limit, mean RSD, agreement, base-parameter error, trajectory RMS, qdd RSD, fit time, condition number
DEFAULT_STUDY = {
    "ols": (0.018158, 0.011957, 1.2451, 0.0099021, 0.020512, 0.99641, 1.3198e-4, 0.0014491, 0.0062141, 3.238, 64.742),
    "adaline": (0.018158, 0.011958, 1.2450, 0.0099019, 0.020501, 0.99642, 9.882e-5, 4.8082e-4, 0.006015, 23.32, 64.742),
    "hopfield": (
        0.018158,
        0.011958,
        1.2450,
        0.0099019,
        0.020501,
        0.99642,
        9.882e-5,
        4.807e-4,
        0.006014,
        0.8392,
        64.742,
    ),
    "ekf": (0.018161, 0.011967, 1.2461, 0.0099131, 0.020551, 0.99640, 1.4121e-4, 0.0033171, 0.005854, 20.7, 64.742),
    "CAD": (0.018158, 0.011957, 1.2451, 0.0099031, 0.020511, 0.99641, 0.0, 0.0, 4.162e-15, None, 64.742),
}
KEYS = (
    "torque_rms_total",
    "torque_rms_vs_truth_total",
    "torque_nrms_range_pct",
    "torque_nrms_limit_pct",
    "rsd",
    "agreement_index",
    "base_parameter_error",
    "trajectory_rms_total",
    "acceleration_rsd",
    "fit_time_s",
    "condition_number",
)


def _default_study() -> StudyResult:
    outcomes = []
    for name, values in DEFAULT_STUDY.items():
        metrics = dict(zip(KEYS, values, strict=True))
        for key in ("torque_nrms_range_pct", "torque_nrms_limit_pct", "rsd", "agreement_index", "acceleration_rsd"):
            metrics[key] = [metrics[key]] * 5  # a per-joint metric; the table shows its mean
        outcomes.append(EstimatorOutcome(name, ["M1"], np.ones(1), None, None, metrics, np.zeros((2, 5))))
    return StudyResult("prrrp_seed004", "prrrp", [f"joint{j}" for j in range(1, 6)], {}, np.zeros(2), np.zeros((2, 5)),
                       None, outcomes, baselines=["CAD"])  # fmt: skip


def _printed(table, lines, width: int) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 - closed with console
    console.print(table)
    for line in lines:
        console.print(line)
    return console.export_text()


def test_the_default_studys_table_fits_80_columns_with_the_columns_that_separate_the_estimators():
    table, lines = rich_compact_comparison(_default_study(), 80)
    text = _printed(table, lines, 80)
    assert max(map(len, text.splitlines())) <= 80 and "…" not in text  # nothing cut short
    header = text.split("┡")[0]
    assert "torque\n" not in header and "cond." not in header and "agree" not in header  # the same for everyone
    for shown in ("9.882e-05", "4.807e-04", "0.8392", "23.32"):  # base-parameter error, trajectory RMS, fit time
        assert shown in text
    assert "the same for every estimator: torque RMS 0.01816, mean agreement index 0.9964, condition number 64.74" in (
        " ".join(text.split())
    )
    assert "every column: the comparison table of report.md" in text
    headers, _ = comparison_rows(_default_study())
    assert len(headers) == 12  # the report keeps the full table


def test_a_wide_terminal_shows_every_column_that_separates_the_estimators():
    table, lines = rich_compact_comparison(_default_study(), 200)
    assert len(table.columns) == 9 and not any(line.startswith("not shown") for line in lines)


def test_values_that_tie_at_the_shown_precision_are_not_marked_best():
    headers, rows = comparison_rows(_default_study())
    column = {h: [row[k] for row in rows] for k, h in enumerate(headers)}
    assert not any(cell.best for cell in column["torque RMS"])  # 0.01816 for every estimator
    assert not any(cell.best for cell in column["base-parameter error"])  # 9.882e-05 twice
    assert [cell.best for cell in column["trajectory RMS"]] == [False, False, True, False, False]  # 4.807e-04


class _Compiling(Estimator):
    """OLS that compiles a fresh numba function first (as a first call of a kernel does)."""

    name = "compiling"

    def _fit(self, problem):
        import numba

        numba.njit(lambda x: x * 2.0 + 1.0)(1.0)
        return get_estimator("ols")().fit(problem)


def test_fit_time_leaves_out_numbas_compilation(history_run):
    ds = load_dataset(history_run / "data" / "identification.npz")
    problem = IdentificationProblem(rid.load_robot("prrrp").structure(), ds)
    model = fit_timed(_Compiling(), problem)
    assert model.diagnostics["compile_time_s"] > 0.0
    assert model.diagnostics["fit_time_s"] < model.diagnostics["compile_time_s"]  # a compile costs far more


def test_report_at_80_columns_fits_and_leaves_the_folder_as_it_was(history_run, tmp_path):
    before = sorted(p.relative_to(history_run) for p in history_run.rglob("*"))
    result = run_cli(["report", str(history_run)], cwd=tmp_path, columns=80)
    assert result.returncode == 0, result.stderr
    assert max(map(len, result.stdout.splitlines())) <= 80 and "…" not in result.stdout
    assert "ols" in result.stdout and "hopfield" in result.stdout
    assert sorted(p.relative_to(history_run) for p in history_run.rglob("*")) == before
    assert list(tmp_path.iterdir()) == []


def test_metrics_json_keeps_estimators_controllers_and_failures_apart(history_run):
    metrics = json.loads((history_run / "metrics.json").read_text())
    assert metrics["metrics_version"] == 2 and metrics["controllers"] == [] and metrics["failed"] == []
    assert [row["estimator"] for row in metrics["estimators"]] == ["ols", "hopfield", "CAD"]


def test_a_run_folder_of_the_one_list_layout_still_reads(history_run, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(history_run, old)
    rows = json.loads((history_run / "metrics.json").read_text())["estimators"]
    (old / "metrics.json").write_text(json.dumps(rows))
    assert [o.metrics for o in load_run_result(old).outcomes] == [
        o.metrics for o in load_run_result(history_run).outcomes
    ]


def test_the_report_rebuilt_from_a_run_folder_is_the_runs_own(history_run, tmp_path):
    result = load_run_result(history_run)
    assert result.parameter_labels == {"M1": "λ1*"} and result.sensitivity is not None
    written = write_report(tmp_path / "again", result)
    for name in ("report.md", "report.html", "report.json"):
        assert (tmp_path / "again" / name).read_text() == (history_run / name).read_text(), name
    assert sorted(p.name for p in (tmp_path / "again" / "plots").iterdir()) == sorted(
        p.name for p in (history_run / "plots").iterdir()
    )
    assert "sensitivity" in written
