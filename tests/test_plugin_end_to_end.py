"""A third-party plugin's excitation type, noise model, estimator and model kind, installed as a
package (an entry point on the path), work through ``robotid-sim run`` and a fresh-process
``load_model``, exactly like the built-in ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import yaml
from helpers import install_plugin

PLUGIN = textwrap.dedent('''
    """A plugin with one of each: excitation 'slow_fourier', noise 'tau_bias', estimator
    'scaled_ols' whose model is of the plugin's own kind 'scaled_linear'."""
    from dataclasses import dataclass
    from typing import ClassVar

    import numpy as np

    from robotid_sim.hookspecs import hookimpl
    from robotid_sim.identification import BaseParameterModel, Estimator, weighted_least_squares
    from robotid_sim.sim.noise import NoiseModel


    def slow_fourier(config, robot):
        from robotid_sim.excitation import FourierExcitation

        return FourierExcitation.random(robot, 3, float(config.get("base_frequency", 0.25)), seed=config.get("seed", 0))


    @dataclass(frozen=True)
    class TauBias(NoiseModel):
        kind: ClassVar[str] = "tau_bias"
        offset: float = 0.0

        def _perturb(self, signals, rng):
            signals["tau"] += self.offset


    class ScaledLinear(BaseParameterModel):
        """A base-parameter model stored with a display scale (a model kind of the plugin's own)."""

        kind = "scaled_linear"


    class ScaledOLS(Estimator):
        name = "scaled_ols"

        def _fit(self, problem):
            fit = weighted_least_squares(problem.base_regressor(), problem.torque_vector())
            return ScaledLinear(problem.structure, problem.base.independent, fit.beta)


    @hookimpl
    def register_excitations(register):
        register("slow_fourier", slow_fourier)


    @hookimpl
    def register_noise_models(register):
        register("tau_bias", TauBias)


    @hookimpl
    def register_estimators(register):
        register("scaled_ols", ScaledOLS)


    @hookimpl
    def register_model_kinds(register):
        register("scaled_linear", ScaledLinear)
''')


def test_plugin_excitation_noise_and_model_kind_through_the_cli_and_a_fresh_load(tmp_path):
    site = tmp_path / "site"
    install_plugin(site, "rid_e2e_plugin", PLUGIN, "e2e")
    scenario = {
        "name": "plugin_e2e",
        "robot": "planar3r",
        "seed": 0,
        "excitation": {"type": "slow_fourier", "base_frequency": 0.25, "seed": 1},
        "noise": {"models": [{"type": "tau_bias", "offset": 0.02}]},
        "simulation": {"rate_hz": 100},
        "validation": {
            "excitation": {"type": "slow_fourier", "base_frequency": 0.25, "seed": 7},
            "duration": 4.0,
            "trajectory_horizon": 0.0,
        },
        "estimators": ["scaled_ols", "ols"],
        "report": {"figures": False},  # what is checked is in the tables and data
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "robotid_sim.cli", "run", "study.yaml", "--out", "runs"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    ds = json.loads((run_dir / "data" / "identification.json").read_text())
    assert ds["excitation"]["type"] == "fourier" and ds["noise"]["models"] == [{"type": "tau_bias", "offset": 0.02}]
    document = json.loads((run_dir / "models" / "scaled_ols.json").read_text())
    assert document["kind"] == "scaled_linear"

    code = textwrap.dedent("""
        import sys, numpy as np
        from robotid_sim import load_model, load_dataset
        m = load_model(sys.argv[1])
        ds = load_dataset(sys.argv[2])
        tau = m.predict_torque(ds.q, ds.qd, ds.qdd)
        print(type(m).__name__, m.kind, m.estimator, float(np.sqrt(np.mean((tau - ds.truth.tau) ** 2))))
    """)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(run_dir / "models" / "scaled_ols.json"),
            str(run_dir / "data" / "validation.npz"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    name, kind, estimator, rms = out.stdout.split()
    assert (name, kind, estimator) == ("ScaledLinear", "scaled_linear", "scaled_ols")
    # the constant bias is absorbed by the friction offsets S: the model stays close to the truth
    assert float(rms) < 0.05
    metrics = {row["estimator"]: row for row in json.loads((run_dir / "metrics.json").read_text())["estimators"]}
    assert np.isclose(metrics["scaled_ols"]["torque_rms_total"], metrics["ols"]["torque_rms_total"])
