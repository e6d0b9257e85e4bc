"""Issue 16 point 4: a plugin that raises inside ``fit`` (or a controller that raises in the loop) is reported as
failed, with its error and traceback, in ``report.md`` and ``metrics.json``; the other estimators and controllers of
the scenario still produce complete results, and the run fails only when every estimator does."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml
from helpers import TINY_SCENARIO, cli_process, install_plugin, run_cli

PLUGIN = textwrap.dedent(
    '''
    """A broken estimator and a broken controller, as a third party might ship them."""
    from robotid_sim.control import Controller
    from robotid_sim.hookspecs import hookimpl
    from robotid_sim.identification import Estimator


    def _helper_that_divides(problem):
        return problem.n_dof / 0


    class Crashing(Estimator):
        name = "crashing"

        def _fit(self, problem):
            return _helper_that_divides(problem)


    class Exploding(Controller):
        name = "exploding"

        def __call__(self, t, q, qd, reference):
            raise RuntimeError("actuator model went away")


    @hookimpl
    def register_estimators(register):
        register("crashing", Crashing)


    @hookimpl
    def register_controllers(register):
        register("exploding", Exploding)
    '''
)


def _run(tmp_path, **changes):
    site = tmp_path / "site"
    if not site.exists():
        install_plugin(site, "rid_broken_plugin", PLUGIN, "broken")
    # no figures: what fails is in the tables and notes (half of a small run's time is its figures)
    scenario = {**TINY_SCENARIO, "report": {"figures": False}, **changes}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(scenario))
    return run_cli(["run", "study.yaml", "--out", "runs"], cwd=tmp_path, env_extra={"PYTHONPATH": str(site)})


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """(the process, the folder of its run folders) of a run whose estimators are the crashing plugin and ols and
    whose closed loop has the exploding controller beside two others: one run for both kinds of failure."""
    folder = tmp_path_factory.mktemp("broken")
    closed_loop = {"controllers": ["exploding", "computed_torque", "pd"], "duration": 0.5}
    return _run(folder, estimators=["crashing", "ols"], closed_loop=closed_loop), folder / "runs"


def test_a_plugin_whose_fit_raises_is_reported_and_the_others_are_complete(broken_run, tmp_path):
    run, runs = broken_run
    assert run.returncode == 0, run.stderr
    assert "failed estimator crashing: ZeroDivisionError: division by zero" in " ".join(run.stdout.split())
    (run_dir,) = runs.iterdir()
    report = (run_dir / "report.md").read_text()
    assert "## Failures" in report and "### estimator crashing: failed" in report
    assert "Traceback (most recent call last)" in report and "_helper_that_divides" in report
    metrics = json.loads((run_dir / "metrics.json").read_text())
    rows = {row.get("estimator"): row for row in metrics["estimators"] + metrics["failed"]}
    failed_estimators = [row["estimator"] for row in metrics["failed"] if "controller" not in row]
    assert failed_estimators == ["crashing"]  # failures apart from the results
    assert rows["crashing"]["status"] == "failed" and rows["crashing"]["error"] == "ZeroDivisionError: division by zero"
    assert "_helper_that_divides" in rows["crashing"]["traceback"]
    assert len(rows["ols"]["torque_rms"]) == 5 and rows["ols"]["base_parameter_error"] < 0.5  # complete
    assert (run_dir / "models" / "ols.json").exists() and not (run_dir / "models" / "crashing.json").exists()
    # the run folder reads back with the same failure (in a forked process: the command's fresh interpreter is
    # tried by tests/test_first_screen.py)
    again = cli_process(["report", str(run_dir)], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "failed estimator crashing" in " ".join(again.stdout.split())


def test_a_controller_that_raises_in_the_loop_is_reported_and_the_others_run(broken_run):
    run, runs = broken_run
    assert run.returncode == 0, run.stderr
    (run_dir,) = runs.iterdir()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    controllers = {row["controller"]: row for row in metrics["controllers"] + metrics["failed"] if "controller" in row}
    assert all(row["status"] == "failed" for row in metrics["failed"])
    assert controllers["exploding"]["status"] == "failed"
    assert controllers["exploding"]["error"] == "RuntimeError: actuator model went away"
    assert "eta" in controllers["computed_torque"]
    # a controller the loop stops (a joint left its limits) was only a note, with no row in metrics.json
    assert controllers["pd"]["status"] == "failed" and "left its limits" in controllers["pd"]["error"]
    report = (run_dir / "report.md").read_text()
    assert "### controller exploding: failed" in report and "actuator model went away" in report


def test_the_run_fails_only_when_every_estimator_fails(tmp_path):
    run = _run(tmp_path, estimators=["crashing"])
    assert run.returncode != 0
    assert "division by zero" in run.stderr
    assert not (tmp_path / "runs").exists() or not any(
        p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")
    )
