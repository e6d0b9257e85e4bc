"""Helpers shared by test modules: the CLI in a fresh process, a pybullet_data file, a tiny scenario, a plugin
package installed on a path."""

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


def install_plugin(site: Path, package: str, source: str, entry: str) -> None:
    """``source`` as the package ``package`` in the folder ``site`` with a distribution whose ``robotid_sim`` entry
    point ``entry`` names it: installed, as pip would, for a process with ``site`` on its PYTHONPATH."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(source)
    dist = site / f"{package}-0.1.dist-info"
    dist.mkdir()
    name = package.replace("_", "-")
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[robotid_sim]\n{entry} = {package}\n")
