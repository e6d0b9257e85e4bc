"""A new estimator is one module plus one registration (issue 26): a plugin estimator installed as a package,
returning a model kind of its own with diagnostics of its own, has those diagnostics in ``metrics.json`` and
``report.md`` of a scenario run with no other edit."""

from __future__ import annotations

import json
import os
import textwrap

import yaml
from helpers import install_plugin, run_cli

PLUGIN = textwrap.dedent('''
    """Estimator 'counting_ols' returning the plugin's own model kind 'counted_linear' with two diagnostics
    no built-in estimator has."""
    import numpy as np

    from robotid_sim.hookspecs import hookimpl
    from robotid_sim.identification import BaseParameterModel, Estimator, weighted_least_squares


    class CountedLinear(BaseParameterModel):
        """A base-parameter model that counts the passes its estimator made over the data."""

        kind = "counted_linear"


    class CountingOLS(Estimator):
        name = "counting_ols"

        def _fit(self, problem):
            fit = weighted_least_squares(problem.base_regressor(), problem.torque_vector())
            diagnostics = {"passes_over_data": 7, "column_norms": [1.5, 2.5], "solver_note": "text is left out"}
            return CountedLinear.from_problem(problem, fit.beta, diagnostics=diagnostics)


    @hookimpl
    def register_estimators(register):
        register("counting_ols", CountingOLS)


    @hookimpl
    def register_model_kinds(register):
        register("counted_linear", CountedLinear)
''')


def test_a_plugin_models_own_diagnostics_reach_metrics_json_and_the_report(tmp_path):
    site = tmp_path / "site"
    install_plugin(site, "rid_counting_plugin", PLUGIN, "counting")
    scenario = {
        "name": "counting_e2e",
        "robot": "planar3r",
        "seed": 0,
        "excitation": {"type": "fourier", "harmonics": 3, "base_frequency": 0.25, "seed": 1},
        "simulation": {"rate_hz": 100},
        "validation": {"duration": 4.0, "trajectory_horizon": 0.0},
        "estimators": ["counting_ols"],
        "report": {"figures": False},  # the diagnostics are in the tables
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    pythonpath = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    run = run_cli(["run", "study.yaml", "--out", "runs"], cwd=tmp_path, env_extra={"PYTHONPATH": pythonpath})
    assert run.returncode == 0, run.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert json.loads((run_dir / "models" / "counting_ols.json").read_text())["kind"] == "counted_linear"
    (row,) = [
        r
        for r in json.loads((run_dir / "metrics.json").read_text())["estimators"]
        if r.get("estimator") == "counting_ols"
    ]
    assert row["passes_over_data"] == 7 and row["column_norms"] == [1.5, 2.5]
    assert "solver_note" not in row  # texts stay in the saved model
    report = (run_dir / "report.md").read_text()
    diagnostics = report.split("## Diagnostics", 1)[1].split("\n## ", 1)[0]
    assert "| counting_ols | passes_over_data | 7 |" in diagnostics
    assert "| counting_ols | column_norms | 1.5 / 2.5 |" in diagnostics
