"""Start-up cost and packaging: ``import robotid_sim`` and ``robotid-sim --help`` stay light, the version is
defined once, and every package of the source tree is packaged.

Nothing here measures wall-clock time (see ``benchmarks/startup.py`` for the figures); the tests check which
modules a fresh interpreter loads, which is what the time depends on.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import robotid_sim

ROOT = Path(__file__).resolve().parents[1]

#: top-level packages that ``import robotid_sim`` and ``robotid-sim --help`` must never load
HEAVY = ("matplotlib", "sympy", "scipy", "pybullet", "torch", "cvxpy", "sklearn", "numba", "gymnasium")
#: also left out of ``--help``: it prints usage text, nothing numerical or rich
NOT_FOR_HELP = (*HEAVY, "numpy", "rich", "pydantic", "yaml")

_IMPORTTIME = re.compile(r"^import time:\s+\d+\s+\|\s+\d+\s+\|\s*(\S+)\s*$")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    env["COLUMNS"] = "160"
    return {**env, **extra}


def _imported(stderr: str) -> set[str]:
    """Module names in the ``-X importtime`` report written to stderr."""
    return {m.group(1) for line in stderr.splitlines() if (m := _IMPORTTIME.match(line))}


def _roots(modules) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_import_robotid_sim_loads_no_heavy_package():
    code = "import json, sys; import robotid_sim; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = _roots(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert "robotid_sim" in loaded
    assert not loaded & set(HEAVY), f"import robotid_sim loads {sorted(loaded & set(HEAVY))}"


def _assert_help(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr[-2000:]
    for command in ("run", "simulate", "identify", "plugins", "report"):
        assert command in proc.stdout
    imported = _imported(proc.stderr)
    assert "robotid_sim.cli" in imported or "robotid_sim" in imported  # the report was parsed
    heavy = _roots(imported) & set(NOT_FOR_HELP)
    assert not heavy, f"robotid-sim --help loads {sorted(heavy)}"


def test_cli_help_loads_no_heavy_package():
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "robotid_sim.cli", "--help"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    _assert_help(proc)


def test_console_script_help_loads_no_heavy_package():
    script = Path(sys.executable).with_name("robotid-sim")
    if not script.is_file():
        pytest.skip("the robotid-sim console script is not installed next to this interpreter")
    proc = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, env=_env(PYTHONPROFILEIMPORTTIME="1"), timeout=120
    )
    _assert_help(proc)


@pytest.mark.parametrize(
    "package",
    [
        "robotid_sim",
        "robotid_sim.sim",
        "robotid_sim.scenario",
        "robotid_sim.excitation",
        "robotid_sim.studies",
        "robotid_sim.sweep",
    ],
)
def test_every_public_name_resolves_and_is_listed(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert name in dir(module), name
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018
    namespace: dict = {}
    exec(f"from {package} import *", namespace)
    assert set(module.__all__) <= set(namespace)


def test_lazy_names_are_the_objects_of_their_defining_modules():
    from robotid_sim.robot import load_robot
    from robotid_sim.sim.dataset import Dataset

    assert robotid_sim.load_robot is load_robot
    assert robotid_sim.Dataset is Dataset
    assert robotid_sim.hookimpl is importlib.import_module("robotid_sim.hookspecs").hookimpl
    assert robotid_sim.plugins is importlib.import_module("robotid_sim.plugins")  # sub-modules too


def test_simulate_stays_the_function_after_its_submodule_is_imported():
    """``robotid_sim.sim.simulate`` is both a function and a sub-module; the function wins, as before."""
    code = (
        "import robotid_sim.sim as s, robotid_sim.sim.simulate, sys; "
        "from robotid_sim.sim import simulate; import robotid_sim; "
        "assert callable(simulate) and simulate is s.simulate is robotid_sim.simulate, simulate; "
        "assert sys.modules['robotid_sim.sim.simulate'].simulate is simulate"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_version_is_defined_once_in_the_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "robotid_sim.__version__"}
    # a literal assignment, so setuptools reads it without importing the package
    tree = ast.parse((ROOT / "robotid_sim" / "__init__.py").read_text())
    literals = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert literals == [robotid_sim.__version__]
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)*", robotid_sim.__version__)


def _packages_in_tree() -> dict[str, Path]:
    """Every package of the source tree, by the name it installs under."""
    roots = {
        "robotid_sim": ROOT / "robotid_sim",
        "robotid_sim_plugins": ROOT / "plugins",
        "robotid_sim_robots": ROOT / "robots",
        "robotid_sim_scenarios": ROOT / "scenarios",
    }
    found = {}
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                rel = init.parent.relative_to(folder).parts
                found[".".join((name, *rel))] = init.parent
    return found


def test_setuptools_discovers_every_package_of_the_tree():
    pytest.importorskip("setuptools")
    code = (
        "import json; from setuptools.dist import Distribution; d = Distribution(); "
        "d.parse_config_files(); d.set_defaults(); "
        "print(json.dumps({'packages': d.packages, 'package_dir': d.package_dir, 'version': d.get_version()}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=_env(), timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    missing = set(_packages_in_tree()) - set(found["packages"])
    assert not missing, f"packages left out of the distribution: {sorted(missing)}"
    assert {
        "robotid_sim_plugins": "plugins",
        "robotid_sim_robots": "robots",
        "robotid_sim_scenarios": "scenarios",
    }.items() <= found["package_dir"].items()
    assert found["version"] == robotid_sim.__version__


def test_wheel_holds_every_module_robot_and_scenario(tmp_path):
    """Build a wheel of a copy of the tree (offline, no build isolation) and list it."""
    pytest.importorskip("setuptools")
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for folder in ("robotid_sim", "plugins", "robots", "scenarios"):
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("robotid_sim-*.whl")
    assert wheel.name.startswith(f"robotid_sim-{robotid_sim.__version__}-")
    names = set(zipfile.ZipFile(wheel).namelist())

    expected = set()
    for package, folder in _packages_in_tree().items():
        prefix = package.replace(".", "/")
        expected |= {f"{prefix}/{p.name}" for p in folder.glob("*.py")}
    expected |= {
        f"robotid_sim_robots/{p.relative_to(ROOT / 'robots').as_posix()}"
        for pattern in ("*/*.urdf", "*/*.yaml")
        for p in (ROOT / "robots").glob(pattern)
    }
    expected |= {f"robotid_sim_scenarios/{p.name}" for p in (ROOT / "scenarios").glob("*.yaml")}
    assert any(n.endswith(".urdf") for n in expected) and any(n.startswith("robotid_sim_scenarios/") for n in expected)
    assert not expected - names, f"missing from the wheel: {sorted(expected - names)}"
