"""Real-robot logs end to end (issue 9): a log written by another tool gets the same study as a simulation.

The "real robot" is planar3r whose friction differs from its sidecar's (the prior the study is given);
its recordings are written the way another tool would: its own NPZ keys, degrees, unix time, 500 Hz,
joints in another order, three files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import pybullet_data_file, run_cli

import robotid_sim as rid
from robotid_sim.scenario.schema import parse_scenario

FRICTION_SCALE = {"fc": 1.8, "fv": 0.5}  # the real robot's friction, relative to the sidecar's prior
ORDER = [2, 0, 1]  # the other tool's joint order
LAYOUT = {
    "keys": {"t": "times", "q": "positions", "qd": "velocities", "tau": "torques"},
    "units": {"t": "unix", "q": "deg", "qd": "deg/s"},
    "joint_names": ["joint3", "joint1", "joint2"],
    "decimate": 5,
}


def _real_robot():
    robot = rid.load_robot("planar3r")
    theta = robot.true_parameters().copy()
    for k, name in enumerate(robot.parameter_names):
        for prefix, scale in FRICTION_SCALE.items():
            if name.startswith(prefix) and name[len(prefix) :].isdigit():
                theta[k] *= scale
    return robot.with_parameters(theta)


def _write_foreign_log(ds, path: Path, t0: float) -> None:
    """The other tool's NPZ: its own keys, degrees, unix seconds, joints in its order, no qdd."""
    np.savez(
        path,
        times=t0 + ds.t,
        positions=np.degrees(ds.q[:, ORDER]),
        velocities=np.degrees(ds.qd[:, ORDER]),
        torques=ds.tau[:, ORDER],
    )


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("logs")
    robot = _real_robot()
    noise = {"tau": {"std": 0.02}}
    for k, (name, seed) in enumerate((("a", 1), ("b", 2), ("c", 3))):
        excitation = {"type": "fourier", "harmonics": 4, "base_frequency": 0.2, "seed": seed}
        ds = rid.simulate(robot, excitation, duration=5.0, rate_hz=500, noise=noise, seed=seed)
        _write_foreign_log(ds, folder / f"{name}.npz", t0=1.7e9 + 1000.0 * k)
    (folder / "layout.yaml").write_text(yaml.safe_dump(LAYOUT))
    return folder


@pytest.fixture(scope="module")
def data_run(logs) -> Path:
    scenario = {
        "name": "arm_log",
        "robot": "planar3r",
        "data": {"identification": ["a.npz", "b.npz"], "validation": ["c.npz"], "defaults": LAYOUT},
        "validation": {"trajectory_horizon": 0.5},
        # the anti-aliasing filter of 'decimate' smooths the Coulomb jumps at reversals: leave those samples out
        "identification": {"velocity_deadband": 0.05},
        "estimators": ["ols", "wls"],
    }
    (logs / "study.yaml").write_text(yaml.safe_dump(scenario))
    return rid.run_scenario(logs / "study.yaml", out_dir=logs / "runs")


def test_a_foreign_log_gets_a_report_with_plots_a_cad_row_and_per_joint_errors(data_run):
    rows = {row["estimator"]: row for row in json.loads((data_run / "metrics.json").read_text())["estimators"]}
    assert set(rows) == {"ols", "wls", "CAD"}
    assert (data_run / "models" / "CAD.json").is_file()
    for name in ("torque_comparison.png", "torque_errors.png"):
        assert (data_run / "plots" / name).stat().st_size > 1000
    report = (data_run / "report.md").read_text()
    assert "CAD" in report and "joint3" in report
    assert "nRMS" in report
    # no truth: the metrics that need one are not available, never faked
    assert rows["ols"]["torque_rms_vs_truth_total"] is None and "base_parameter_error" not in rows["ols"]
    assert "no truth" in report
    assert len(rows["ols"]["torque_nrms_range_pct"]) == 3 and len(rows["ols"]["torque_nrms_limit_pct"]) == 3
    # the CAD friction is the sidecar's prior, not the real robot's: the identified model predicts better
    for name in ("ols", "wls"):
        assert rows[name]["torque_rms_total"] < 0.5 * rows["CAD"]["torque_rms_total"], (name, rows)
    assert rows["ols"]["trajectory_rms_total"] < rows["CAD"]["trajectory_rms_total"]


def test_the_data_run_identifies_the_real_friction_from_two_experiments(data_run):
    robot = _real_robot()
    model = rid.load_model(data_run / "models" / "ols.json")
    truth = dict(zip(robot.base_parameters().names, robot.base_parameters().true_values(), strict=True))
    names, values, _ = model.parameter_table()
    for name, value in zip(names, values, strict=True):
        if name.startswith(("fc", "fv")):
            assert value == pytest.approx(truth[name], rel=0.05, abs=0.02), name
    ident = rid.load_dataset(data_run / "data" / "identification.npz")
    assert [e["name"] for e in ident.metadata["experiments"]] == ["a", "b"]
    assert ident.t[-1] < 20.0  # unix time made relative
    assert ident.metadata.get("robot") is None  # a real log carries no robot name


def test_report_of_a_data_run_reads_back(data_run, capsys):
    from robotid_sim.cli import main

    assert main(["report", str(data_run)]) == 0
    out = capsys.readouterr().out
    assert "CAD" in out and "ols" in out


def test_identify_cli_writes_a_study_from_several_files(logs):
    """The issue's one-liner: two identification files, one validation file, a URDF and a sidecar."""
    robot_dir = Path(rid.load_robot("planar3r").urdf_path).parent
    args = ["identify", "--data", "a.npz", "--data", "b.npz", "--validate", "c.npz", "--layout", "layout.yaml"]
    args += ["--robot", str(robot_dir / "robot.urdf"), "--sidecar", str(robot_dir / "robot.yaml")]
    args += ["--estimator", "ols", "--out", "study"]
    result = run_cli(args, cwd=logs)
    assert result.returncode == 0, result.stderr
    (run,) = [p for p in (logs / "study").iterdir() if p.is_dir()]
    assert (run / "report.html").is_file() and (run / "report.md").is_file()
    rows = {row["estimator"] for row in json.loads((run / "metrics.json").read_text())["estimators"]}
    assert rows == {"ols", "CAD"}


def test_a_data_scenario_that_also_simulates_is_refused():
    data = {"identification": ["a.npz"], "validation": ["c.npz"]}
    with pytest.raises(rid.ConfigError, match=r"a scenario with 'data' simulates nothing: remove \['noise'\]"):
        parse_scenario({"robot": "planar3r", "data": data, "noise": {"tau": {"std": 1}}, "estimators": ["ols"]})
    with pytest.raises(rid.ConfigError, match="both identification and validation data"):
        parse_scenario({"robot": "planar3r", "data": {**data, "validation": ["a.npz"]}, "estimators": ["ols"]})
    with pytest.raises(rid.ConfigError, match="the label 'CAD' is the report's URDF baseline row"):
        parse_scenario({"robot": "planar3r", "estimators": [{"name": "ols", "label": "cad"}]})


def test_a_bad_file_entry_is_refused_before_any_work(logs, tmp_path):
    scenario = {
        "robot": "planar3r",
        "data": {"identification": [{"path": "a.npz", "units": {"q": "gradians"}}], "validation": ["c.npz"]},
        "estimators": ["ols"],
    }
    path = logs / "bad.yaml"
    path.write_text(yaml.safe_dump(scenario))
    with pytest.raises(rid.RobotIdError, match="gradians"):
        rid.run_scenario(path, out_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_two_files_identify_like_one_file_with_a_gap_and_unlike_a_naive_join(tmp_path):
    """Derivatives from q within each recording: stacking two files = one file with a pause between them."""
    from robotid_sim.signal.preprocess import preprocess
    from robotid_sim.sim.logs import experiments, load_logs, per_experiment

    robot = rid.load_robot("planar3r")
    parts = []
    for seed in (1, 2):
        excitation = {"type": "fourier", "harmonics": 4, "base_frequency": 0.2, "seed": seed}
        parts.append(rid.simulate(robot, excitation, duration=4.0, rate_hz=200, noise={"q": {"std": 1e-4}}, seed=seed))
    a, b = parts
    for name, ds in (("a", a), ("b", b)):
        np.savez(tmp_path / f"{name}.npz", t=ds.t, q=ds.q, tau=ds.tau)
    gap, joined = 2.0, a.t[-1] + a.dt
    np.savez(
        tmp_path / "gap.npz", t=np.r_[a.t, b.t + joined + gap], q=np.r_[a.q, b.q], tau=np.r_[a.tau, b.tau]
    )  # one recording with a 2 s pause
    np.savez(tmp_path / "naive.npz", t=np.r_[a.t, b.t + joined], q=np.r_[a.q, b.q], tau=np.r_[a.tau, b.tau])

    def identified(files):
        loaded = load_logs([tmp_path / f for f in files], robot)
        ds, _ = preprocess(loaded, per_experiment=per_experiment, experiments=experiments, differentiate=True)
        return rid.identify(ds, robot, "ols").base_values()

    two_files, one_with_gap, naive = identified(["a.npz", "b.npz"]), identified(["gap.npz"]), identified(["naive.npz"])
    assert np.allclose(two_files, one_with_gap, rtol=0, atol=1e-10)
    assert np.abs(naive - two_files).max() > 1e-3  # differentiated across the join


def test_simulate_and_identify_take_locks_and_a_sidecar_on_the_command_line(tmp_path, capsys):
    from robotid_sim.cli import main

    panda = pybullet_data_file("franka_panda/panda.urdf")
    locks = ["--lock-joint", "panda_finger_joint1=0.02", "--lock-joint", "panda_finger_joint2=0.02"]
    out = tmp_path / "p.npz"
    assert main(["simulate", "--robot", str(panda), *locks, "--duration", "2", "--out", str(out)]) == 0
    assert rid.load_dataset(out).n_dof == 7
    assert main(["identify", "--robot", str(panda), *locks, "--data", str(out), "--estimator", "ols"]) == 0
    assert "MX7" in capsys.readouterr().out
    # without the locks the Panda is a tree of 9 joints, its fingers free (issue 29)
    assert main(["simulate", "--robot", str(panda), "--duration", "2", "--out", str(tmp_path / "q.npz")]) == 0
    assert rid.load_dataset(tmp_path / "q.npz").n_dof == 9
