"""Monte Carlo sweeps (issue 17): local and Dask executors agree, resume runs only the missing tasks, a failed
task is recorded without stopping the sweep, bad input is one clear line with exit code 2."""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import io
import re
import sys
from types import SimpleNamespace

import pytest

from robotid_sim.cli import add_sweep_parser, run_sweep_command
from robotid_sim.errors import ConfigError
from robotid_sim.studies import run_sweep
from robotid_sim.sweep import load_sweep_config, parse_sweep_config
from robotid_sim.sweep.aggregate import read_table
from robotid_sim.sweep.store import RESULTS_DIR

HAS_DASK = importlib.util.find_spec("dask") is not None and importlib.util.find_spec("distributed") is not None

#: one robot, one noise level, two estimators, three repetitions: 6 tasks in 3 cells
TINY = {
    "name": "tiny",
    "robots": ["three_axis"],
    "excitations": {"fourier": {"type": "fourier", "harmonics": 3, "base_frequency": 0.5, "periods": 1, "seed": 1}},
    "noise": {"tau_0.05": {"tau": {"std": 0.05}}},
    "estimators": ["ols", "wls"],
    "repetitions": 3,
    "validation": {
        "excitation": {"type": "fourier", "harmonics": 2, "base_frequency": 0.5, "periods": 1, "seed": 7},
        "trajectory_horizon": 0.2,
    },
}


def _without_times(path):
    rows = read_table(path)
    for row in rows:
        row.pop("fit_time_s")
    return rows


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers())
    return parser.parse_args(["sweep", *argv])


#: TINY with a user's label on one estimator: result files are never named after labels
TINY_LABELLED = {**TINY, "estimators": [{"name": "ols", "label": "my-ols"}, "wls"]}


@pytest.fixture(scope="module")
def tiny_cli(tmp_path_factory) -> SimpleNamespace:
    """``robotid-sim sweep`` of :data:`TINY_LABELLED` on two local processes: its exit ``code``, what it printed
    (``out``) and the sweep's ``folder``. Run once per test run (conftest.once_per_run: the xdist workers share
    it) for the tests of the CLI, of result file names and of Dask; its figures are saved blank (conftest.py: the
    small sweep renders them)."""
    import yaml
    from conftest import once_per_run, save_blank, shared_temp
    from matplotlib.figure import Figure

    def make() -> SimpleNamespace:
        root = shared_temp(tmp_path_factory) / "tiny_cli"
        root.mkdir()
        path = root / "tiny.yaml"
        path.write_text(yaml.safe_dump(TINY_LABELLED))
        with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(io.StringIO()) as out:
            patch.setattr(Figure, "savefig", save_blank)
            code = run_sweep_command(_parse([str(path), "--out", str(root), "--workers", "2", "--no-progress"]))
        return SimpleNamespace(code=code, out=out.getvalue(), folder=root / "tiny")

    return once_per_run(tmp_path_factory, "tiny_cli", make)


@pytest.fixture(scope="module")
def small_local(tmp_path_factory):
    """The bundled small sweep (2 robots × 2 noise levels × 3 estimators × 5 repetitions) on local processes, run
    once per test run (conftest.once_per_run: the xdist workers share it)."""
    from conftest import once_per_run, shared_temp

    return once_per_run(
        tmp_path_factory,
        "small_local",
        lambda: run_sweep("small", shared_temp(tmp_path_factory) / "small_local", executor="local", workers=2),
    )


def test_small_sweep_runs_every_task_on_local_processes(small_local):
    assert (small_local.tasks, small_local.ran, small_local.failed, small_local.missing) == (60, 60, 0, 0)
    rows = read_table(small_local.tables["results_parquet"])
    assert len(rows) == 60 and {r["status"] for r in rows} == {"ok"}
    assert len(read_table(small_local.tables["results"])) == 60  # the CSV beside it
    summary = read_table(small_local.tables["summary"])
    assert len(summary) == 2 * 2 * 3
    assert all(
        float(s["base_parameter_error_p5"])
        <= float(s["base_parameter_error_p50"])
        <= float(s["base_parameter_error_p95"])
        for s in summary
    )
    for name in (
        "report.md",
        "report.html",
        "plots/base_parameter_error.png",
        "plots/torque_relative_error_vs_truth.png",
    ):
        assert (small_local.run_dir / name).is_file()


def test_each_cell_is_simulated_once_and_shared_by_its_estimators(small_local):
    rows = read_table(small_local.tables["results_parquet"])
    by_cell = {}
    for row in rows:
        by_cell.setdefault((row["robot"], row["noise"], row["seed"]), set()).add(row["estimator"])
    assert len(by_cell) == 20 and all(e == {"ols", "wls", "irls"} for e in by_cell.values())
    # the same data: ols and wls (one σ, same weights) give the same parameter error in every cell
    ols = {(r["robot"], r["noise"], r["seed"]): r["base_parameter_error"] for r in rows if r["estimator"] == "ols"}
    wls = {(r["robot"], r["noise"], r["seed"]): r["base_parameter_error"] for r in rows if r["estimator"] == "wls"}
    assert all(abs(ols[k] - wls[k]) < 0.2 * ols[k] for k in ols)


def test_cramer_rao_bound_is_reported_beside_the_monte_carlo_spread(small_local):
    crb = read_table(small_local.tables["crb"])
    assert {r["estimator"] for r in crb} >= {"ols", "wls"}
    assert all(float(r["crb_std"]) > 0 and float(r["ratio"]) > 0 for r in crb)
    assert "Cramér–Rao" in (small_local.run_dir / "report.md").read_text()


@pytest.mark.skipif(not HAS_DASK, reason="dask[distributed] is not installed (pip install 'robotid-sim[dask]')")
def test_dask_local_cluster_gives_the_same_table_as_local_processes(tiny_cli, tmp_path):
    outcome = run_sweep(TINY_LABELLED, tmp_path / "dask", executor="dask", workers=2)
    assert (outcome.ran, outcome.failed) == (6, 0)
    local = tiny_cli.folder / "results.parquet"
    assert _without_times(outcome.tables["results_parquet"]) == _without_times(local)


def test_an_interrupted_sweep_runs_only_the_missing_tasks_when_started_again(tmp_path):
    first = run_sweep(TINY, tmp_path, workers=1, max_tasks=4)  # stopped after 4 of 6 tasks
    assert (first.tasks, first.ran, first.missing) == (6, 4, 2)
    assert len(list((first.run_dir / RESULTS_DIR).glob("*.json"))) == 4
    again = run_sweep(TINY, tmp_path, workers=1)  # the same sweep, the same folder
    assert (again.reused, again.ran, again.missing) == (4, 2, 0)
    # a result lost (a killed sweep) is the only task run by --resume
    lost = sorted((first.run_dir / RESULTS_DIR).glob("*.json"))[0]
    lost.unlink()
    resumed = run_sweep(None, resume=first.run_dir, workers=1)
    assert (resumed.reused, resumed.ran, resumed.missing) == (5, 1, 0)
    assert lost.is_file()
    assert len(read_table(resumed.tables["results"])) == 6


def test_result_files_are_named_by_task_hashes_only(tiny_cli):
    names = [p.name for p in (tiny_cli.folder / RESULTS_DIR).iterdir()]
    assert len(names) == 6 and all(re.fullmatch(r"[0-9a-f]{24}\.json", n) for n in names)


def test_a_failing_estimator_is_recorded_with_its_error_and_the_sweep_goes_on(tmp_path):
    # sequential refuses data without single-joint segments when it fits; ols on the same data succeeds
    sweep = {**TINY, "robots": ["prrrp"], "excitations": {"default": "default"}, "repetitions": 1}
    sweep["estimators"] = ["sequential", "ols"]
    sweep["validation"] = {"trajectory_horizon": 0}
    outcome = run_sweep(sweep, tmp_path, workers=1)
    rows = {r["estimator"]: r for r in read_table(outcome.tables["results"])}
    assert rows["sequential"]["status"] == "failed" and "sequential_sine" in rows["sequential"]["error"]
    assert rows["ols"]["status"] == "ok" and float(rows["ols"]["base_parameter_error"]) < 0.2
    assert outcome.failed == 1
    summary = {s["estimator"]: s for s in read_table(outcome.tables["summary"])}
    assert summary["sequential"]["failures"] == "1"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"estimators": ["no_such_estimator"]}, "no_such_estimator"),
        ({"robots": ["no_such_robot"]}, "no_such_robot"),
        ({"noise": {"../escape": {"tau": {"std": 0.1}}}}, "noise preset label"),
        ({"repetitions": 0}, "repetitions"),
        ({"colour": "red"}, "unknown field 'colour'"),
        ({"robots": ["prrrp"], "estimators": ["auto_features"]}, "are not revolute"),  # before any simulation
        ({"noise": {"bad": {"tau": {"std": -1}}}}, "std"),
    ],
)
def test_a_bad_sweep_file_is_one_clear_line_and_exit_code_2(tmp_path, capsys, change, message):
    import yaml

    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**TINY, **change}))
    assert run_sweep_command(_parse([str(path), "--out", str(tmp_path / "out"), "--no-progress"])) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.json"))


def test_a_missing_sweep_file_and_a_folder_that_is_no_sweep_exit_2(tmp_path, capsys):
    assert run_sweep_command(_parse([str(tmp_path / "missing.yaml")])) == 2
    assert "neither a file nor a bundled sweep" in capsys.readouterr().err
    assert run_sweep_command(_parse(["--resume", str(tmp_path)])) == 2
    assert "not a sweep folder" in capsys.readouterr().err


def test_dask_executor_without_dask_names_the_extra_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if not installed
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    argv = [str(path), "--out", str(tmp_path / "out"), "--executor", "dask", "--no-progress"]
    assert run_sweep_command(_parse(argv)) == 2
    assert "pip install 'robotid-sim[dask]'" in capsys.readouterr().err


def test_bundled_sweeps_are_valid():
    birdy = load_sweep_config("birdy")
    assert len(birdy.robots) >= 2 and len(birdy.noise) >= 4 and len(birdy.estimators) >= 5
    small = load_sweep_config("small")
    assert small.task_count == 60


def test_estimator_labels_must_be_distinct():
    with pytest.raises(ConfigError, match="appear twice"):
        parse_sweep_config({**TINY, "estimators": ["ols", {"name": "wls", "label": "OLS"}]})


def test_cli_prints_where_the_results_are(tiny_cli):
    assert tiny_cli.code == 0
    assert "sweep folder:" in tiny_cli.out and "6 run now" in tiny_cli.out
    with open(tiny_cli.folder / "results.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == 6
