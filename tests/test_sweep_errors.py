"""Bad sweep input (issue 27, defects 2, 3, 4, 7, 8 and 13 for sweeps): one line ``error: ...`` with exit
code 2 before anything is created, and nothing left behind; ``--resume`` of another grid is refused naming
both sweeps; a relative robot path is found from the sweep file's folder, also when resumed elsewhere; an
absurd grid is refused at once with its estimate; the Dask executor is quiet."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from helpers import cli_process

from robotid_sim.sweep import run_sweep_tasks
from robotid_sim.sweep.executors import run_cells
from robotid_sim.sweep.store import RESULTS_DIR, SWEEP_FILE, write_sweep_file

HAS_DASK = importlib.util.find_spec("dask") is not None and importlib.util.find_spec("distributed") is not None
ROBOTS = Path(__file__).resolve().parents[1] / "robots"

#: one cell of one estimator: checked in well under a second, simulated in about one
SWEEP = {
    "name": "tiny",
    "robots": ["three_axis"],
    "excitations": {"fourier": {"type": "fourier", "harmonics": 2, "base_frequency": 1.0, "periods": 1, "seed": 1}},
    "noise": {"tau": {"tau": {"std": 0.05}}},
    "estimators": ["ols"],
    "repetitions": 1,
    "simulation": {"rate_hz": 100},
    "validation": {"trajectory_horizon": 0},
}


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _write(folder: Path, name: str, data: dict) -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data))
    return path


def _refused(folder: Path, argv: list[str], *needles: str) -> str:
    """``robotid-sim sweep ARGV`` in ``folder``, in a process, exits 2 with one ``error:`` line naming ``needles``
    and leaves the folder as it was."""
    before = _listing(folder)
    result = cli_process(["sweep", *argv, "--no-progress"], folder)
    err = result.stderr
    assert result.returncode == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    for needle in needles:
        assert needle in err
    assert _listing(folder) == before
    return err


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"noise": {"tau": {"tau": {"std": float("nan")}}}}, "noise.tau.tau.std"),
        ({"excitations": {"f": {"type": "fourier", "harmonics": 2, "base_frequency": float("inf")}}}, "base_frequency"),
        ({"estimators": [{"name": "irls", "options": {"tol": float("nan")}}]}, "estimators[0].options.tol"),
        (
            {"validation": {"trajectory_horizon": 0, "excitation": {"type": "fourier", "periods": -float("inf")}}},
            "periods",
        ),
    ],
    ids=["noise", "excitation", "estimator-option", "validation-excitation"],
)
def test_a_nan_or_inf_anywhere_is_refused_before_hashing(tmp_path, monkeypatch, change, field):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "bad.yaml", {**SWEEP, **change})
    _refused(tmp_path, ["bad.yaml"], field, "not a finite number")


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--workers", "0"], ["--workers must be at least 1"]),
        (["--address", "tcp://localhost:8786"], ["add --executor dask"]),
        (["--max-tasks", "-1"], ["--max-tasks"]),
        pytest.param(
            ["--executor", "dask", "--address", "not a url"],
            ["'not a url' is not a Dask scheduler address", "tcp://host:8786"],
            marks=pytest.mark.skipif(not HAS_DASK, reason="needs dask[distributed]"),
        ),
    ],
    ids=["workers-0", "address-without-dask", "max-tasks", "bad-address"],
)
def test_bad_executor_arguments_are_refused_leaving_nothing_behind(tmp_path, monkeypatch, argv, needles):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "tiny.yaml", SWEEP)
    _refused(tmp_path, ["tiny.yaml", *argv], *needles)
    assert not (tmp_path / "runs").exists()


def test_resume_with_another_grid_is_refused_naming_both_and_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "runs" / "sweeps" / "small"
    (folder / RESULTS_DIR).mkdir(parents=True)
    write_sweep_file(folder, {**SWEEP, "name": "small", "repetitions": 60})
    recorded = (folder / SWEEP_FILE).read_text()
    _write(tmp_path, "other.yaml", {**SWEEP, "name": "other"})
    _refused(tmp_path, ["other.yaml", "--resume", "runs/sweeps/small"], "'small' (60 tasks)", "'other' (1 tasks")
    # the same name with another grid is no resume either
    _write(tmp_path, "small.yaml", {**SWEEP, "name": "small"})
    _refused(tmp_path, ["small.yaml", "--resume", "runs/sweeps/small"], "repetitions", "--resume runs/sweeps/small")
    # nor is another sweep run into that folder
    _write(tmp_path, "other2.yaml", {**SWEEP, "name": "other", "output": "small"})
    _refused(tmp_path, ["other2.yaml"], "holds the sweep 'small'", "own folder")
    assert (folder / SWEEP_FILE).read_text() == recorded


def test_a_relative_robot_path_is_the_sweep_files_and_is_found_when_resumed_from_elsewhere(tmp_path, monkeypatch):
    project = tmp_path / "project"
    shutil.copytree(ROBOTS / "three_axis", project / "arm")
    sweep = _write(project, "arm.yaml", {**SWEEP, "name": "arm", "robots": ["arm/robot.urdf"]})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    first = run_sweep_tasks(str(sweep), tmp_path / "out", max_tasks=0)  # checked (the robot loaded), nothing run
    assert (first.tasks, first.ran) == (1, 0)
    monkeypatch.chdir(tmp_path)
    resumed = run_sweep_tasks(None, resume=first.run_dir.resolve(), max_tasks=0)
    assert resumed.tasks == 1
    recorded = yaml.safe_load((first.run_dir / SWEEP_FILE).read_text())
    assert recorded["robots"] == ["arm/robot.urdf"] and not Path(recorded["robot_folder"]).is_absolute()


@pytest.mark.parametrize(
    ("noise_presets", "estimators", "repetitions", "tasks"),
    [(25, 10, 100_000, "25,000,000"), (1, 2, 100_000, "200,000")],
)
def test_an_absurd_grid_is_refused_at_once_with_its_estimate(
    tmp_path, monkeypatch, noise_presets, estimators, repetitions, tasks
):
    monkeypatch.chdir(tmp_path)
    noise = {f"n{k}": {"tau": {"std": 0.01 * (k + 1)}} for k in range(noise_presets)}
    entries = [{"name": "ols", "label": f"ols{k}"} for k in range(estimators)]
    _write(tmp_path, "huge.yaml", {**SWEEP, "noise": noise, "estimators": entries, "repetitions": repetitions})
    start = time.monotonic()
    err = _refused(tmp_path, ["huge.yaml", "--max-tasks", "0"], f"{tasks} tasks", "100,000", "of memory")
    assert time.monotonic() - start < 2.0, err  # the issue's limit; the check itself takes milliseconds


@pytest.mark.skipif(not HAS_DASK, reason="needs dask[distributed]")
def test_the_dask_executor_is_quiet_and_leaves_no_scratch_folder(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the cluster's scratch folder goes
    monkeypatch.chdir(tmp_path)
    outcomes = list(run_cells(len, [{}], executor="dask", workers=1))  # a trivial task: the cluster is the test
    assert [outcome for _, outcome in outcomes] == [0]
    out, err = capfd.readouterr()
    assert "INFO" not in out + err and "leaked" not in err and "Port" not in err
    assert list(tmp_path.iterdir()) == []  # no dask-scratch-space, no temporary folder
