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


def compile_kernels(part: str) -> None:
    """Compile (or load from numba's on-disk cache) every numba kernel the tests call, with the argument types the
    package gives them, for batches below and from ``PARALLEL_MIN_SAMPLES`` (serial and threaded kernels): ``part``
    "inverse" the Newton-Euler torque and regressor kernels, "forward" the mass matrix, forward dynamics, the vector
    env's per-copy kernel and the online estimators' delta rule (two halves that share few compiled functions). The
    test run calls it in two processes while its workers start (see conftest.py)."""
    import numpy as np

    import robotid_sim as rid
    from robotid_sim.dynamics import crba

    robot = rid.load_robot("planar3r")
    n = robot.n_dof
    for N in (4, crba.PARALLEL_MIN_SAMPLES):
        q, qd, qdd = (np.full((N, n), 0.1) for _ in range(3))
        if part == "inverse":
            robot.inverse_dynamics(q, qd, qdd)
            robot.regressor(q, qd, qdd)
        else:
            robot.forward_dynamics(q, qd, qdd)
            robot.mass_matrix(q)
    if part == "forward":
        from robotid_sim.identification.online_kernels import delta_rule

        chain, B = crba.pack_chain(robot.joints), 2
        copies = [np.full((B, n), 0.1) for _ in range(4)]
        args = (chain.kind, chain.axis, chain.origin_rotation, chain.origin_translation)
        inertials = np.tile(robot.inertials, (B, 1, 1))
        crba.kernels().forward_per_copy(*args, inertials, robot.gravity, np.zeros((B, n)), *copies, np.ones(B, bool))
        Y, tau = np.ones((4, n, 2)), np.ones((4, n))
        delta_rule(Y, tau, np.zeros(2), np.ones(2), np.zeros(0), np.full(2, 0.1), 1, 1e-12)
