"""The command line and the scenario runner end to end (issue 4)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import TINY_SCENARIO, run_cli

import robotid_sim as rid
from robotid_sim import plugins
from robotid_sim.cli import main
from robotid_sim.plugin_kit import new_plugin


def _write_scenario(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({**TINY_SCENARIO, **changes}))
    return path


def _complete_runs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*") if p.is_dir() and not p.name.startswith("."))


def test_run_without_argument_runs_the_default_scenario_and_never_overwrites(tmp_path, monkeypatch):
    first = run_cli(["run"], cwd=tmp_path, columns=80)
    assert first.returncode == 0, first.stderr
    assert all(name in first.stdout for name in ("estimator", "ols", "adaline", "hopfield", "ekf"))  # the table
    # the first screen fits an 80-column terminal: no line wraps, no value cut short; the rest is named
    assert max(map(len, first.stdout.splitlines())) <= 80 and "…" not in first.stdout
    assert "every column: the comparison table of report.md" in first.stdout
    runs = _complete_runs(tmp_path / "runs")
    assert len(runs) == 1
    run = runs[0]
    for name in (
        "report.md",
        "report.html",
        "report.json",
        "metrics.json",
        "metrics.csv",
        "scenario.yaml",
        "models/ols.json",
        "models/adaline.json",
        "models/hopfield.json",
        "models/ekf.json",
        "sensitivity.json",
        "plots/torque_comparison.png",
        "plots/sensitivity.png",
        "plots/convergence_adaline.png",
        "plots/convergence_hopfield.png",
        "plots/convergence_ekf.png",
        "data/identification.npz",
        "data/validation.npz",
    ):
        assert (run / name).is_file(), name
    stamp = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    # another run of a study of the same name into the same folder (a short one: the run folder is what counts;
    # in this process, the command's fresh interpreter is the first run)
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(_write_scenario(tmp_path, name="prrrp_seed004"))]) == 0
    runs_after = _complete_runs(tmp_path / "runs")
    assert len(runs_after) == 2 and run in runs_after
    assert all(p.name.startswith("prrrp_seed004-") for p in runs_after)
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == stamp  # the first run is untouched


def test_identify_on_the_csv_written_by_simulate_matches_the_in_memory_path(tmp_path):
    result = run_cli(["simulate", "--robot", "prrrp", "--duration", "4", "--out", "data.csv"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    result = run_cli(
        ["identify", "--data", "data.csv", "--robot", "prrrp", "--estimator", "ols", "--out", "model.json"],
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    from_file = rid.load_model(tmp_path / "model.json")
    ds = rid.simulate("prrrp", "default", duration=4.0)
    in_memory = rid.identify(ds, "prrrp", estimator="ols")
    assert from_file.parameter_names == in_memory.parameter_names
    assert np.allclose(from_file.values, in_memory.values, rtol=1e-9, atol=1e-12)


def test_unknown_estimator_in_a_scenario_lists_the_known_ones_and_leaves_no_run(tmp_path, capsys):
    path = _write_scenario(tmp_path, estimators=["ols", "magic"])
    code = main(["run", str(path), "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code != 0
    assert "unknown estimator 'magic'; known: ols, wls, irls" in " ".join(err.split())
    assert _complete_runs(tmp_path / "runs") == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"robot": None}, "field 'robot': Input should be a valid string"),
        ({"estimators": []}, "field 'estimators': List should have at least 1 item"),
        ({"simulation": {"rate_hz": -5}}, "field 'simulation.rate_hz': Input should be greater than 0"),
        ({"noyse": {}}, "unknown field 'noyse'"),
    ],
)
def test_malformed_scenario_names_the_field_and_the_reason(tmp_path, capsys, changes, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**TINY_SCENARIO, **changes}))
    code = main(["run", str(path), "--out", str(tmp_path / "runs")])
    assert code != 0
    assert message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "runs").exists() or _complete_runs(tmp_path / "runs") == []


def test_malformed_yaml_is_reported(tmp_path, capsys):
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nrobot: [unclosed\n")
    assert main(["run", str(path)]) != 0
    assert "is not valid YAML" in " ".join(capsys.readouterr().err.split())


def test_a_run_that_fails_midway_leaves_no_complete_looking_folder(tmp_path, monkeypatch):
    import robotid_sim.studies.run as runner

    def boom(*args, **kwargs):
        raise rid.IdentificationError("simulated failure while writing the report")

    monkeypatch.setattr(runner, "write_report", boom)
    with pytest.raises(rid.IdentificationError):
        rid.run_scenario(_write_scenario(tmp_path), out_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()  # made by the failed run: removed with its partial folder (issue 27)


def test_report_command_prints_the_table_of_a_run(tmp_path, capsys, tiny_run):
    run = shutil.copytree(tiny_run, tmp_path / tiny_run.name)  # a run of TINY_SCENARIO (conftest.py)
    assert main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert "ols" in out and "RMS" in out  # the compact table's two-line headers ("torque / RMS", "traj. / RMS")
    metrics = json.loads((run / "metrics.json").read_text())["estimators"]
    assert metrics[0]["estimator"] == "ols" and len(metrics[0]["torque_rms"]) == 5


BROKEN_MODULE = "raise RuntimeError('this plugin is broken on purpose')\n"


@pytest.fixture()
def site_with_plugins(tmp_path):
    """A directory with a broken plugin and a plugin written by ``plugin new`` (estimator ``myls``) installed
    (pip --target)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "rs_broken_plugin.py").write_text(BROKEN_MODULE)
    info = site / "robotid_sim_broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: robotid-sim-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[robotid_sim]\nbroken = rs_broken_plugin\n")
    src = new_plugin("myls", "estimator", tmp_path / "src")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(src),
        ],
        check=True,
        timeout=240,
    )
    return site


def test_broken_plugin_is_listed_and_an_external_plugin_runs_through_a_scenario(tmp_path, site_with_plugins):
    env = {"PYTHONPATH": str(site_with_plugins)}
    listing = run_cli(["plugins"], cwd=tmp_path, env_extra=env)
    assert listing.returncode == 0, listing.stderr
    text = " ".join(listing.stdout.split())
    assert "broken" in text and "RuntimeError: this plugin is broken on purpose" in text
    assert "myls" in text
    # a scenario that does not use the broken plugin still runs, with the third-party estimator
    path = _write_scenario(tmp_path, estimators=["ols", "myls"], report={"figures": False})
    result = run_cli(["run", str(path), "--out", "runs"], cwd=tmp_path, env_extra=env)
    assert result.returncode == 0, result.stderr
    run = _complete_runs(tmp_path / "runs")[0]
    assert (run / "models" / "myls.json").is_file()
    assert not (run / "plots").exists()  # report.figures: false
    plugins.reset_plugin_manager()


def test_plugins_command_lists_the_builtins(capsys):
    assert main(["plugins"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name in ("ols", "wls", "irls", "adaline", "hopfield", "ekf"):
        assert name in out


def test_cli_help_is_available():
    code = subprocess.run([sys.executable, "-m", "robotid_sim.cli", "--help"], capture_output=True, text=True)
    assert code.returncode == 0 and "run" in code.stdout and "identify" in code.stdout


def test_scenarios_bundled_for_every_robot_are_valid():
    from robotid_sim.scenario import bundled_scenarios, load_scenario

    scenarios = {load_scenario(p).robot for p in bundled_scenarios().values()}
    assert {"planar3r", "scara", "three_axis", "prrrp", "hyper9"} <= scenarios


def test_scenario_with_sensitivity_writes_the_plus_minus_50_percent_table(tmp_path):
    """Seed 004 Table 6: each identified parameter varied by ±50 %, trajectory RMS reported."""
    run = rid.run_scenario(_write_scenario(tmp_path, sensitivity=True), out_dir=tmp_path / "runs")
    table = json.loads((run / "sensitivity.json").read_text())
    text = json.dumps(table)
    model = rid.load_model(run / "models" / "ols.json")
    for name in model.parameter_names:
        assert name in text
    assert "0.5" in text and "1.5" in text


def test_period_averaging_in_a_scenario_identifies_on_the_mean_period(tmp_path):
    """Seed 001 §5: repeat a periodic excitation and average the periods before identifying."""
    scenario = {
        **TINY_SCENARIO,
        "excitation": {"type": "fourier", "harmonics": 4, "base_frequency": 0.5, "periods": 4, "seed": 0},
        "noise": {"tau": {"std": 0.2}},
        "simulation": {"rate_hz": 100},
        "preprocessing": {"period_average": 4},
        "estimators": ["ols"],
    }
    run = rid.run_scenario(_write_scenario(tmp_path, **scenario), out_dir=tmp_path / "runs")
    report = (run / "report.md").read_text()
    assert "4 periods averaged into one" in report
    bad = _write_scenario(tmp_path, **{**scenario, "preprocessing": {"period_average": 6}})
    with pytest.raises(rid.ConfigError, match="period_average = 6 but the data holds 4.00 periods"):
        rid.run_scenario(bad, out_dir=tmp_path / "runs2")


def test_averaging_periods_divides_the_noise_by_sqrt_k(robots):
    from robotid_sim.signal import average_periods

    robot = robots["prrrp"]
    exc = {"type": "fourier", "harmonics": 4, "base_frequency": 0.5, "periods": 9, "seed": 0}
    ds = rid.simulate(robot, exc, noise={"tau": {"std": 0.3}}, seed=0, rate_hz=100)
    averaged = average_periods(ds, 9)
    assert averaged.n_samples == 200
    ratio = np.std(averaged.tau - averaged.truth.tau) / np.std(ds.tau - ds.truth.tau)
    assert ratio == pytest.approx(1 / 3, rel=0.1)
