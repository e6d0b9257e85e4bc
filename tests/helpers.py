"""Helpers shared by test modules: the CLI in a fresh process, a pybullet_data file, a tiny scenario."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: a scenario that simulates in about a second (3 s of the PRRRP arm at 100 Hz, OLS only)
TINY_SCENARIO = {
    "name": "tiny",
    "robot": "prrrp",
    "seed": 0,
    "excitation": {"type": "polynomial", "random_waypoints": 6, "seed": 0, "durations": "auto"},
    "noise": {"tau": {"std": 0.05}},
    "simulation": {"rate_hz": 100, "duration": 3.0},
    "validation": {"duration": 2.0, "trajectory_horizon": 0.2},
    "estimators": ["ols"],
}


def run_cli(
    args: list[str], cwd: Path, *, env_extra: dict | None = None, timeout: float = 300, columns: int = 160
) -> subprocess.CompletedProcess:
    """``python -m robotid_sim.cli ARGS`` in ``cwd``, output captured as text."""
    env = {**os.environ, "COLUMNS": str(columns), **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "robotid_sim.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def pybullet_data_file(relative: str) -> Path:
    """A file shipped with pybullet_data; the test is skipped where this pybullet lacks it."""
    pybullet_data = pytest.importorskip("pybullet_data")
    path = Path(pybullet_data.getDataPath()) / relative
    if not path.is_file():
        pytest.skip(f"{relative} is not shipped with this pybullet")
    return path
