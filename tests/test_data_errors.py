"""Regression tests of issue 27's data defects: recordings of another joint count, filter limits, decimation, absolute
paths in saved metadata, ``--lock-joint`` on the bundled robots and a way to load a robot without a sidecar.

Recordings are synthetic (no simulation): the refusals come before any identification.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import robotid_sim as rid
from robotid_sim import cli
from robotid_sim.errors import ConfigError, DataError
from robotid_sim.signal import butterworth_filtfilt
from robotid_sim.sim.dataset import Dataset, load_dataset_for_robot
from robotid_sim.sim.logs import load_log, load_logs
from tests.helpers import cli_process, run_cli

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ("planar3r", "prrrp", "scara", "three_axis", "hyper9")


def _recording(n_dof: int, samples: int = 300, rate_hz: float = 100.0, metadata: dict | None = None) -> Dataset:
    """A recording of ``n_dof`` joints with the generic names joint1 ... jointn (random signals)."""
    rng = np.random.default_rng(n_dof)
    t = np.arange(samples) / rate_hz
    q, qd, qdd, tau = (rng.normal(size=(samples, n_dof)) for _ in range(4))
    return Dataset(t, q, qd, qdd, tau, metadata=metadata or {})


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _one_error(code, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def _cli_error(args: list[str], folder: Path) -> str:
    """``robotid-sim ARGS`` in ``folder``, in a process: exit 2, one error line (returned), nothing written."""
    before = _listing(folder)
    result = cli_process(args, folder)
    line = _one_error(result.returncode, result.stderr)
    assert _listing(folder) == before
    return line


@pytest.fixture()
def scara_log(tmp_path) -> Path:
    """A 4-joint recording without its JSON (as a CSV, an NPZ and a MAT file) and a good 3-joint one."""
    recording = _recording(4)
    for suffix in (".csv", ".npz", ".mat"):
        recording.save(tmp_path / f"scara_log{suffix}")
        (tmp_path / "scara_log.json").unlink(missing_ok=True)
    _recording(3).save(tmp_path / "planar.npz")
    return tmp_path


# -------------------------------------------------------------------------------------- joint count (defect 5)


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".mat"])
def test_a_recording_of_more_joints_than_the_robot_is_refused_naming_both_counts(scara_log, suffix):
    args = ["identify", "--data", f"scara_log{suffix}", "--robot", "planar3r", "--estimator", "ols"]
    line = _cli_error(args, scara_log)
    assert "has 4 joint columns" in line and "robot 'planar3r' has 3 joints" in line and "joint_names" in line


def test_a_recording_of_another_joint_count_among_others_is_refused(scara_log):
    args = ["identify", "--data", "planar.npz", "--data", "scara_log.csv", "--robot", "planar3r"]
    line = _cli_error(args, scara_log)
    assert "'scara_log.csv' has 4 joint columns" in line and "has 3 joints" in line


def test_a_validation_recording_of_another_joint_count_is_refused_in_a_process_leaving_nothing(scara_log):
    before = _listing(scara_log)
    args = ["identify", "--data", "planar.npz", "--validate", "scara_log.npz", "--robot", "planar3r"]
    result = run_cli(args, cwd=scara_log, env_extra={"PYTHONPATH": str(ROOT)}, timeout=120)
    line = _one_error(result.returncode, result.stderr)
    assert "scara_log.npz' has 4 joint columns" in line and "has 3 joints" in line
    assert _listing(scara_log) == before  # no run folder, not even an empty runs/


def test_the_layouts_joint_names_still_pick_the_robots_joints_out_of_a_wider_recording(scara_log, robots):
    source = {"path": "scara_log.npz", "joint_names": ["joint1", "joint2", "joint3", "finger"]}
    loaded = load_log(source, robots["planar3r"], base_dir=scara_log)
    assert loaded.n_dof == 3 and loaded.metadata["ignored_joints"] == ["finger"]


def test_a_generic_csv_of_another_joint_count_is_refused_for_a_robot(scara_log, robots):
    with pytest.raises(DataError, match=r"has 4 joint columns \(q_joint1 \.\.\. q_joint4\) but robot 'planar3r' has 3"):
        load_dataset_for_robot(scara_log / "scara_log.csv", robots["planar3r"])


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_a_recording_of_another_robot_names_that_robot_and_its_joint_count(tmp_path, robots, suffix):
    _recording(5, metadata={"robot": "prrrp"}).save(tmp_path / f"p5{suffix}")
    with pytest.raises(DataError) as info:
        load_logs([f"p5{suffix}"], robots["planar3r"], base_dir=tmp_path)
    message = str(info.value)
    assert "recorded on robot 'prrrp' (5 joint columns" in message and "'planar3r' has 3 joints" in message
    assert "--robot prrrp" in message and "(joint1, joint2, joint3)" in message


# ------------------------------------------------------------------------- filters and decimation (defects 7, 13)


@pytest.mark.parametrize(
    ("cutoff", "match"),
    [
        ("1e-9", r"1e-09 Hz is below 0\.3333 Hz, one cycle per record \(300 samples"),
        ("60", "Nyquist frequency fs/2 = 50 Hz"),
    ],
)
def test_a_lowpass_outside_the_records_band_is_a_one_line_error_naming_the_flag(scara_log, cutoff, match):
    args = ["identify", "--data", "planar.npz", "--robot", "planar3r", "--lowpass", cutoff]
    line = _cli_error(args, scara_log)
    assert "--lowpass" in line and "LinAlgError" not in line and "bug" not in line
    assert re.search(match, line), line


def test_a_lowpass_outside_the_band_of_a_validation_study_is_refused_before_any_run_folder(scara_log):
    _recording(3).save(scara_log / "held_out.npz")
    args = [
        "identify",
        "--data",
        "planar.npz",
        "--validate",
        "held_out.npz",
        "--robot",
        "planar3r",
        "--lowpass",
        "1e-9",
    ]
    line = _cli_error(args, scara_log)  # nothing written: not even an empty runs/
    assert "--lowpass" in line and "one cycle per record" in line


def test_filter_parameters_are_checked_against_their_limits():
    from robotid_sim.signal import check_cutoff

    x = np.zeros((1000, 2))
    with pytest.raises(ConfigError, match=r"cutoff = 1e-09 Hz is below 1 Hz"):
        butterworth_filtfilt(x, 1000.0, 1e-9)
    with pytest.raises(ConfigError, match=r"'order' must be at most 20"):
        butterworth_filtfilt(x, 1000.0, 10.0, order=100)
    assert check_cutoff(10.0, 1000.0, 1000) == 10.0


def test_a_decimation_too_large_for_the_recording_names_the_field_and_counts(scara_log, robots):
    with pytest.raises(DataError) as info:
        load_log({"path": "planar.npz", "decimate": 100000}, robots["planar3r"], base_dir=scara_log)
    message = str(info.value)
    assert "decimate: 100000 needs at least 1000001 samples" in message and "has 300" in message
    assert "at most 29" in message and "'x'" not in message


# ------------------------------------------------------------------------------ absolute paths (defect 9)


def test_loaded_recordings_keep_no_absolute_path_of_the_machine(tmp_path, robots):
    _recording(3).save(tmp_path / "a.npz")
    relative = load_logs(["a.npz"], robots["planar3r"], base_dir=tmp_path)
    absolute = load_logs([str(tmp_path / "a.npz")], robots["planar3r"])
    for loaded in (relative, absolute):
        text = json.dumps(loaded.metadata)
        assert str(tmp_path) not in text and os.sep + "a.npz" not in text
        assert loaded.metadata["experiments"][0]["file"] == "a.npz"
        assert loaded.metadata["log_source"]["path"] == "a.npz"


# ------------------------------------------------------------------------------------ locked joints (defect 10)


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_robot_loads_with_a_locked_joint_its_sidecar_following_the_lock(name):
    full = rid.load_robot(name)
    locked = rid.load_robot(name, lock_joints={"joint2": 0.1})
    keep = [k for k, joint in enumerate(full.joint_names) if joint != "joint2"]
    assert locked.joint_names == [full.joint_names[k] for k in keep]
    for attribute in ("gear_ratio", "velocity_limit", "acceleration_limit"):
        np.testing.assert_array_equal(getattr(locked, attribute), getattr(full, attribute)[keep])
    for field, values in full.friction.to_dict().items():
        if isinstance(values, list):
            assert locked.friction.to_dict()[field] == [values[k] for k in keep]


def test_lock_joint_simulates_the_bundled_robot_with_an_explicit_default_excitation(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["simulate", "--robot", "hyper9", "--lock-joint", "joint2=0.1", "--duration", "0.2", "--out", "h.npz"]
    assert cli.main(args) == 0, capsys.readouterr().err
    assert rid.load_dataset(tmp_path / "h.npz").n_dof == 8


# ----------------------------------------------------------------------------------- no sidecar (carried over)


def test_a_robot_loads_without_any_sidecar_when_asked():
    assert rid.load_robot("scara").friction_source == "sidecar"
    for value in (False, "none"):
        robot = rid.load_robot("scara", sidecar=value)
        assert robot.sidecar is None and robot.rotor_inertia is None and robot.friction_source == "none"
    urdf = rid.bundled_robots()["scara"] / "robot.urdf"
    assert rid.load_robot(urdf, sidecar="none").sidecar is None
    with pytest.raises(ConfigError, match="sidecar=True"):
        rid.load_robot("scara", sidecar=True)


def test_the_command_line_takes_sidecar_none(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["simulate", "--robot", "scara", "--sidecar", "none", "--duration", "0.2", "--out", "s.npz"]
    assert cli.main(args) == 0, capsys.readouterr().err
    assert rid.load_dataset(tmp_path / "s.npz").n_dof == 4
