"""Helpers shared by test modules: the CLI in a fresh process or in a process forked from the test's, a
pybullet_data file, a tiny scenario, a plugin package installed on a path."""

from __future__ import annotations

import logging
import multiprocessing
import os
import subprocess
import sys
import tempfile
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


def cli_process(args: list[str], cwd: Path, *, timeout: float = 120, columns: int = 160) -> subprocess.CompletedProcess:
    """``robotid-sim ARGS`` in ``cwd`` in a process of its own, forked from the test's (its imports already done:
    about 0.05 s where a new interpreter takes 1-2 s): the exit status, stdout and stderr a process gives, what it
    writes on disk, and nothing of its state back in the test's process. For the many bad-input cases; the
    commands' real processes are tried by :func:`run_cli`."""
    with tempfile.TemporaryDirectory() as folder:
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        child = multiprocessing.get_context("fork").Process(
            target=_cli_child, args=(list(args), str(cwd), str(out), str(err), columns)
        )
        child.start()
        child.join(timeout)
        if child.is_alive():
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired(["robotid-sim", *args], timeout)
        return subprocess.CompletedProcess(["robotid-sim", *args], child.exitcode, out.read_text(), err.read_text())


def _cli_child(args: list[str], cwd: str, out: str, err: str, columns: int) -> None:
    """The forked process of :func:`cli_process`: stdout and stderr on files, a terminal of ``columns``, logging as
    a fresh process has it, then ``robotid_sim.cli.main`` and its status as the exit status."""
    from robotid_sim import cli

    os.chdir(cwd)
    os.environ["COLUMNS"] = str(columns)
    for fd, path in ((1, out), (2, err)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
    logging.root.handlers.clear()  # pytest's capture handlers: main() sets up its own, as in a new process
    cli._consoles.cache_clear()
    try:
        code = cli.main(args)
    except SystemExit as exc:  # argparse's --help
        code = exc.code if isinstance(exc.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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
