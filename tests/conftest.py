"""Shared fixtures: bundled robots, the in-test 6-joint URDF, a PyBullet reference body, a fresh plugin manager."""

from __future__ import annotations

import fcntl
import os
import pickle
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

    config.addinivalue_line("markers", "renders_figures: the test's figures are rendered (see figures_not_rendered)")
    # Python's bytecode cache for this session and every process it starts (the workers, about 60 CLI and sweep
    # subprocesses): where PYTHONDONTWRITEBYTECODE is set (many container images) each of them compiled the
    # package's sources again, 0.6 s a process; the .pyc files go to __pycache__ folders git ignores
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    # numba's kernels at LLVM's -O1 for the suite and its processes, in a cache of their own: about 30 % less
    # compilation (a fresh clone's largest cost: the UKF's test 62 s instead of 87 s of CPU) for the same run time
    # of the tests and the same numbers (no fast-math: the optimisation level changes no result). The package's
    # own cache (__pycache__ next to the kernels: the CLI's, the benchmarks') keeps -O3 code: numba's cache does
    # not tell the levels apart. A NUMBA_OPT of the caller's is left as it is.
    if "NUMBA_OPT" not in os.environ:
        os.environ["NUMBA_OPT"] = "1"
        os.environ["NUMBA_CACHE_DIR"] = str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "numba-O1")
    workers = getattr(config.option, "numprocesses", None)
    if workers not in (None, 0, "0"):
        for key, value in SINGLE_THREAD_SETTINGS.items():
            os.environ.setdefault(key, value)


@pytest.fixture(autouse=True)
def _cli_width_off_a_terminal(monkeypatch):
    """In-process CLI output is printed as off a terminal (160 columns) whatever COLUMNS the test runner exports
    (pytest-xdist's workers inherit the controller's terminal width)."""
    monkeypatch.delenv("COLUMNS", raising=False)


#: a valid 1 x 1 PNG: what a test's figures are saved as when their rendering is not under test
BLANK_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def save_blank(figure, fname, *args, **kwargs) -> None:
    """``Figure.savefig`` without the rendering: :data:`BLANK_PNG` at ``fname``."""
    Path(fname).write_bytes(BLANK_PNG)


@pytest.fixture(autouse=True)
def figures_not_rendered(request, monkeypatch):
    """Figures are built in full (every plotting call, its data, labels and layout objects) but saved as a blank
    PNG instead of being rasterised, in every test not marked ``renders_figures``: rendering is about 80 % of a
    small run's time. The figure tests (tests/test_report.py and those reading a PNG) render them; so do the CLI
    processes, and fixtures of module or session scope (set up before this one)."""
    if request.node.get_closest_marker("renders_figures"):
        return
    from matplotlib.figure import Figure

    monkeypatch.setattr(Figure, "savefig", save_blank)


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


def shared_temp(tmp_path_factory) -> Path:
    """The test run's temporary folder, the same in every pytest-xdist worker (each has its own inside it)."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def once_per_run(tmp_path_factory, name: str, make):
    """``make()``, computed once per test run however many pytest-xdist workers ask for it: the first computes it
    and pickles it into the run's temporary folder (shared by the workers), under a file lock; the others wait for
    it and read it."""
    root = shared_temp(tmp_path_factory)
    path = root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            part = path.with_suffix(".part")
            part.write_bytes(pickle.dumps(make()))
            part.rename(path)
    return pickle.loads(path.read_bytes())


@pytest.fixture(scope="session")
def stepwise_runs(tmp_path_factory) -> dict:
    """PyBullet runs of the default :class:`StepwiseExcitation` (seed 0: static creeps, sweeps, Fourier segments) of
    the scara and the three-axis arm at 200 Hz (about 60 and 78 s of motion), shared by the SINDy tests."""
    from robotid_sim.excitation import StepwiseExcitation

    def make():
        robots = {name: rid.load_robot(name) for name in ("scara", "three_axis")}
        return {name: rid.simulate(r, StepwiseExcitation(r, seed=0), rate_hz=200) for name, r in robots.items()}

    return once_per_run(tmp_path_factory, "stepwise_runs", make)


@pytest.fixture(scope="session")
def prrrp_study(tmp_path_factory) -> tuple:
    """(robot, noisy identification dataset, noise-free copy of it) of the default scenario (prrrp_seed004),
    simulated once per test run and shared by the online-estimator and filter tests."""
    from robotid_sim.scenario.plan import prepare_run, resolve_scenario_path, simulate_dataset
    from robotid_sim.scenario.schema import load_scenario
    from robotid_sim.sim.dataset import Dataset

    def make() -> tuple:
        plan = prepare_run(load_scenario(resolve_scenario_path("prrrp_seed004")))
        ds = simulate_dataset(plan, "identification")
        tr = ds.truth
        clean = Dataset(ds.t, tr.q, tr.qd, tr.qdd, tr.tau, joint_names=ds.joint_names, metadata=ds.metadata)
        return plan.robot, ds, clean

    return once_per_run(tmp_path_factory, "prrrp_study", make)


@pytest.fixture(scope="session")
def prrrp_online_fits(tmp_path_factory, prrrp_study) -> dict:
    """{(estimator, 'clean' | 'noisy'): model} of ols and the online estimators (adaline, hopfield, ekf) on
    :func:`prrrp_study`'s records, fitted once per test run (the EKF's Python path takes about 9 s a record)."""
    from robotid_sim import plugins
    from robotid_sim.identification import IdentificationProblem

    def make() -> dict:
        robot, noisy, clean = prrrp_study
        out = {}
        for label, ds in (("clean", clean), ("noisy", noisy)):
            problem = IdentificationProblem(robot.structure(), ds)
            for name in ("ols", "adaline", "hopfield", "ekf"):
                out[name, label] = plugins.get_estimator(name)().fit(problem)
        return out

    return once_per_run(tmp_path_factory, "prrrp_online_fits", make)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The run folder of ``helpers.TINY_SCENARIO`` (``run_scenario``), made once per test run: tests that change it
    work on a copy."""
    import yaml
    from helpers import TINY_SCENARIO

    def make() -> Path:
        folder = shared_temp(tmp_path_factory) / "tiny_run"
        folder.mkdir()
        (folder / "scenario.yaml").write_text(yaml.safe_dump(TINY_SCENARIO))
        return rid.run_scenario(folder / "scenario.yaml", out_dir=folder / "runs")

    return once_per_run(tmp_path_factory, "tiny_run", make)


@pytest.fixture(scope="session")
def history_run(tmp_path_factory) -> Path:
    """A tiny run with a parameter history (hopfield), a sensitivity study (Table 6, Fig. 8) and parameter labels,
    made once per test run with its figures saved blank (:data:`BLANK_PNG`); tests that change it work on a copy."""
    from helpers import TINY_SCENARIO
    from matplotlib.figure import Figure

    from robotid_sim.scenario import parse_scenario

    scenario = {
        **TINY_SCENARIO,
        "estimators": ["ols", "hopfield"],
        "sensitivity": {"estimator": "ols", "factors": [0.5, 1.5]},
        "report": {"parameter_labels": {"M1": "λ1*"}},
    }

    def make() -> Path:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Figure, "savefig", save_blank)
            out = shared_temp(tmp_path_factory) / "history_run"
            return rid.run_scenario(parse_scenario(scenario, "tiny"), out_dir=out)

    return once_per_run(tmp_path_factory, "history_run", make)


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
