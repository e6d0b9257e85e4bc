"""Shared fixtures: bundled robots, the in-test 6-joint URDF, a PyBullet reference body, a fresh plugin manager."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from arm6 import arm6_urdf  # noqa: E402

import robotid_sim as rid  # noqa: E402

BUNDLED = ["planar3r", "scara", "three_axis", "prrrp", "hyper9"]


def pytest_configure(config):
    """When the tests run in several processes (pytest-xdist: one per core), each keeps one thread per BLAS,
    OpenMP, numba and torch pool, as the sweep's workers do (two processes of two threads on two cores only fight
    over them). Set before xdist starts its workers: they inherit the environment, and so do the CLI subprocesses
    of tests."""
    from robotid_sim.sweep.executors import SINGLE_THREAD_SETTINGS

    workers = getattr(config.option, "numprocesses", None)
    if workers not in (None, 0, "0"):
        for key, value in SINGLE_THREAD_SETTINGS.items():
            os.environ.setdefault(key, value)


@pytest.fixture(autouse=True)
def _cli_width_off_a_terminal(monkeypatch):
    """In-process CLI output is printed as off a terminal (160 columns) whatever COLUMNS the test runner exports
    (pytest-xdist's workers inherit the controller's terminal width)."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture()
def fresh_plugin_manager(monkeypatch):
    """The test starts and ends with a plugin manager loaded from scratch, all plugins allowed (a module that
    changes plugins uses it on every test: ``pytestmark = pytest.mark.usefixtures("fresh_plugin_manager")``)."""
    from robotid_sim import plugins

    monkeypatch.delenv(plugins.PLUGINS_ENV_VAR, raising=False)
    plugins.reset_plugin_manager()
    yield
    plugins.reset_plugin_manager()


@pytest.fixture(scope="session")
def arm6_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("arm6") / "arm6.urdf"
    path.write_text(arm6_urdf())
    return path


@pytest.fixture(scope="session")
def robots(arm6_path) -> dict[str, rid.Robot]:
    out = {name: rid.load_robot(name) for name in BUNDLED}
    out["arm6"] = rid.load_robot(arm6_path)
    return out


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
