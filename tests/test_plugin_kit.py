"""The plugin development kit (issue 16): ``robotid-sim plugin new``, ``robotid-sim plugins --json``
and the plugin-API version.

The end-to-end tests generate an estimator and a controller plugin with the command, ``pip install``
them (editable, offline) into a fresh virtual environment that sees this interpreter's packages,
and then, in that environment, list them, run a scenario naming both, and run the generated
packages' own tests.
"""

from __future__ import annotations

import importlib
import json
import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from helpers import TINY_SCENARIO

from robotid_sim import hookspecs, plugins
from robotid_sim.cli import main
from robotid_sim.errors import ConfigError, PluginError
from robotid_sim.hookspecs import PLUGIN_API_VERSION, plugin_api_problem
from robotid_sim.plugin_kit import PLUGIN_KINDS, new_plugin, plugin_names

ESTIMATOR = "kit_lsq"
CONTROLLER = "kit_pd"


pytestmark = pytest.mark.usefixtures("fresh_plugin_manager")


def _subprocess_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in (plugins.PLUGINS_ENV_VAR, "PYTHONPATH")}
    return {**env, "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1"}


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=_subprocess_env(), capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------------- a virtual environment
@pytest.fixture(scope="module")
def venv_with_plugins(tmp_path_factory):
    """A venv (``--system-site-packages``, plus a ``.pth`` adding this interpreter's site-packages,
    so robotid_sim, its dependencies, pip, setuptools, pytest and ruff are importable) with the two
    generated plugins installed editable, offline.

    Returns:
        (python of the venv, {kind: package folder}, work folder).
    """
    work = tmp_path_factory.mktemp("plugin_kit")
    packages = {
        "estimator": new_plugin(ESTIMATOR, "estimator", work / "src"),
        "controller": new_plugin(CONTROLLER, "controller", work / "src"),
    }
    venv = work / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], work, 120)
    if made.returncode != 0:  # e.g. a Python built without the venv module
        pytest.skip(f"cannot create a virtual environment here: {made.stderr.strip()[-300:]}")
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], work, 60)
    assert purelib.returncode == 0, purelib.stderr
    host = [p for p in site.getsitepackages() if Path(p).is_dir()] or [sysconfig.get_path("purelib")]
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in host)
    Path(purelib.stdout.strip(), "_robotid_sim_host.pth").write_text(lines)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
    pip += ["--no-build-isolation", "--no-index"]
    for folder in packages.values():
        pip += ["-e", str(folder)]
    installed = _run(pip, work, 240)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python, packages, work


def test_generated_plugins_are_listed_in_the_venv(venv_with_plugins):
    python, packages, work = venv_with_plugins
    listing = _run([str(python), "-m", "robotid_sim.cli", "plugins"], work, 120)
    assert listing.returncode == 0, listing.stderr
    rows = {line.split("│")[1].strip(): line for line in listing.stdout.splitlines() if line.count("│") > 3}
    for name, kind in ((ESTIMATOR, "estimator"), (CONTROLLER, "controller")):
        row = " ".join(rows[name].split())
        assert f"robotid-sim-{name.replace('_', '-')} │ 0.1.0 │ {PLUGIN_API_VERSION} │ {kind}: {name} │ ok" in row

    as_json = _run([str(python), "-m", "robotid_sim.cli", "plugins", "--json"], work, 120)
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["plugin_api_version"] == PLUGIN_API_VERSION
    found = {row["name"]: row for row in document["plugins"]}
    estimator = found[ESTIMATOR]
    assert estimator["kinds"] == ["estimator"] and estimator["registers"] == {"estimator": [ESTIMATOR]}
    assert (estimator["distribution"], estimator["version"], estimator["module"]) == (
        "robotid-sim-kit-lsq",
        "0.1.0",
        "robotid_sim_kit_lsq",
    )
    assert estimator["api_version"] == PLUGIN_API_VERSION and estimator["status"] == "ok"
    assert estimator["error"] is None and estimator["builtin"] is False
    assert Path(estimator["path"]).is_relative_to(packages["estimator"])
    assert found[CONTROLLER]["registers"] == {"controller": [CONTROLLER]} and found[CONTROLLER]["status"] == "ok"


def test_a_scenario_naming_the_generated_plugins_runs_to_a_report(venv_with_plugins):
    python, _, work = venv_with_plugins
    scenario = {
        **TINY_SCENARIO,
        "name": "kit",
        "estimators": ["ols", ESTIMATOR],
        "closed_loop": {"controllers": [CONTROLLER], "duration": 0.5},
        "report": {"figures": False},  # the report's tables name both plugins
    }
    (work / "kit.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    run = _run([str(python), "-m", "robotid_sim.cli", "run", "kit.yaml", "--out", "runs"], work)
    assert run.returncode == 0, run.stderr
    (run_dir,) = (work / "runs").iterdir()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    estimators = {row["estimator"]: row for row in metrics["estimators"]}
    controllers = {row["controller"]: row for row in metrics["controllers"]}
    assert {"ols", ESTIMATOR} <= set(estimators) and set(controllers) == {CONTROLLER}
    # the skeleton is least squares: it agrees with the built-in OLS
    assert estimators[ESTIMATOR]["torque_rms_total"] == pytest.approx(estimators["ols"]["torque_rms_total"], rel=1e-6)
    assert all(eta < 5.0 for eta in controllers[CONTROLLER]["eta"])  # mean |error| per joint, deg or mm
    report = (run_dir / "report.md").read_text()
    assert f"| {ESTIMATOR} |" in report and f"| {CONTROLLER} |" in report
    assert (run_dir / "models" / f"{ESTIMATOR}.json").is_file()


@pytest.mark.parametrize("kind", ["estimator", "controller"])
def test_generated_packages_pass_their_own_tests_in_the_venv(venv_with_plugins, kind):
    python, packages, _ = venv_with_plugins
    tests = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"], packages[kind], 300)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "skipped" not in tests.stdout


# ------------------------------------------------------------------------------------- ruff
def test_every_kind_of_generated_package_passes_ruff_out_of_the_box(tmp_path):
    folders = [new_plugin("x", kind, tmp_path / f"short_{kind}") for kind in PLUGIN_KINDS]
    folders += [
        new_plugin("a" * 20 + f"_long_{kind[:3]}", kind, tmp_path, check_installed=False) for kind in PLUGIN_KINDS
    ]
    for folder in folders:
        for command in (["check", "--no-cache", "."], ["format", "--no-cache", "--check", "."]):
            result = _run([sys.executable, "-m", "ruff", *command], folder, 60)
            assert result.returncode == 0, f"{folder.name}: ruff {command[0]}\n{result.stdout}{result.stderr}"


def test_generated_package_layout_declares_the_entry_point_and_the_api_version(tmp_path):
    import tomllib

    folder = new_plugin("my_ridge", "estimator", tmp_path)
    assert folder == tmp_path / "robotid-sim-my-ridge"
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        ".gitignore",
        "README.md",
        "pyproject.toml",
        "robotid_sim_my_ridge/__init__.py",
        "tests/test_my_ridge.py",
    ]
    project = tomllib.loads((folder / "pyproject.toml").read_text())
    assert project["project"]["name"] == "robotid-sim-my-ridge"
    assert project["project"]["entry-points"][hookspecs.PROJECT_NAME] == {"my_ridge": "robotid_sim_my_ridge"}
    module = (folder / "robotid_sim_my_ridge" / "__init__.py").read_text()
    assert f'{hookspecs.PLUGIN_API_ATTRIBUTE} = "{PLUGIN_API_VERSION}"' in module
    assert "class MyRidgeEstimator(Estimator):" in module and 'register("my_ridge", MyRidgeEstimator)' in module
    assert "parametrize_with_checks([MyRidgeEstimator])" in (folder / "tests" / "test_my_ridge.py").read_text()


# ------------------------------------------------------------------------------- user errors
@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "My-Ridge",
            "'My-Ridge' is not a valid plugin name: use 1 to 30 lower-case letters, digits and '_', "
            "starting with a letter (e.g. 'my_ridge')",
        ),
        ("2fast", "'2fast' is not a valid plugin name"),
        ("class", "'class' is a Python keyword"),
        ("x" * 31, "use 1 to 30 lower-case letters"),
        ("ols", "an estimator named 'ols' is already registered"),
    ],
)
def test_plugin_new_with_a_bad_name_exits_2_with_a_clear_message(tmp_path, capsys, name, message):
    assert main(["plugin", "new", name, "--out", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error: ") and message in err
    assert list(tmp_path.iterdir()) == []


def test_plugin_new_never_overwrites_an_existing_folder(tmp_path, capsys):
    existing = tmp_path / "robotid-sim-my-pd"
    existing.mkdir()
    (existing / "mine.txt").write_text("keep me")
    assert main(["plugin", "new", "my_pd", "--kind", "controller", "--out", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"error: '{existing}' already exists" in err and "never overwritten" in err
    assert [p.name for p in existing.iterdir()] == ["mine.txt"] and sorted(p.name for p in tmp_path.iterdir()) == [
        "robotid-sim-my-pd"
    ]


def test_plugin_new_prints_the_folder_and_the_next_steps(tmp_path, capsys):
    assert main(["plugin", "new", "my_noise", "--kind", "noise", "--out", str(tmp_path / "made")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    folder = tmp_path / "made" / "robotid-sim-my-noise"
    assert f"wrote the noise plugin 'my_noise' in {folder}" in out and f"pip install -e '{folder}[test]'" in out
    assert (folder / "robotid_sim_my_noise" / "__init__.py").is_file()


def test_plugin_names_are_derived_from_the_name():
    names = plugin_names("my_fast_ls", "estimator")
    assert (names.package, names.distribution, names.class_name) == (
        "robotid_sim_my_fast_ls",
        "robotid-sim-my-fast-ls",
        "MyFastLsEstimator",
    )
    with pytest.raises(ConfigError, match="unknown plugin kind 'planner'; choose one of estimator, controller"):
        plugin_names("x", "planner")


# ------------------------------------------------------------------------- plugin-API versions
@pytest.mark.parametrize(
    ("declared", "compatible"),
    [
        (None, True),
        ("2", True),
        ("2.0", True),
        (" 2.0 ", True),
        ("1.1", False),  # 2.0 broke 1.x plugins: options only through a nested Options class, name from the class
        ("3.0", False),
        ("2.1", False),  # newer minor than the host's 2.0: it may use what 2.1 added
        ("two", False),
        (2.0, False),
    ],
)
def test_plugin_api_compatibility_is_same_major_and_no_newer_minor(declared, compatible):
    assert PLUGIN_API_VERSION == "2.0"
    assert (plugin_api_problem(declared) is None) is compatible


def test_a_plugin_registered_directly_is_version_checked_too():
    """Regression: get_plugin_manager().register(...) skipped the plugin-API check the entry-point loader makes."""
    from robotid_sim_plugins.ols import OLSEstimator

    from robotid_sim.hookspecs import hookimpl
    from robotid_sim.plugins import estimators, get_plugin_manager

    class Future:
        ROBOTID_SIM_PLUGIN_API = "3.0"

        @hookimpl
        def register_estimators(self, register):
            register(type("FromTheFuture", (OLSEstimator,), {"name": "from_the_future"}))

    class Current(Future):
        ROBOTID_SIM_PLUGIN_API = PLUGIN_API_VERSION

    pm = get_plugin_manager()
    with pytest.raises(
        PluginError, match=r"plugin 'future' cannot be loaded: it is written for robotid_sim plugin API 3.0"
    ):
        pm.register(Future(), name="future")
    assert not pm.has_plugin("future") and "from_the_future" not in estimators()
    pm.register(Current(), name="current")
    assert "from_the_future" in estimators()


def test_older_minor_version_is_compatible_with_a_newer_host():
    assert plugin_api_problem("1.0", provided="1.3") is None
    assert "provides only plugin API 1.3" in plugin_api_problem("1.4", provided="1.3")


def test_builtin_plugins_declare_the_current_plugin_api_version():
    for module_name in plugins.DEFAULT_PLUGINS:
        module = importlib.import_module(module_name)
        assert getattr(module, hookspecs.PLUGIN_API_ATTRIBUTE, None) == PLUGIN_API_VERSION, module_name
    infos = {info.name: info for info in plugins.list_plugins()}
    assert infos["ols"].api_version == PLUGIN_API_VERSION and infos["ols"].ok


@pytest.fixture()
def incompatible_plugin(tmp_path, monkeypatch):
    """A generated estimator plugin edited to declare plugin API 3.0, installed as a distribution on sys.path."""
    folder = new_plugin("future_ls", "estimator", tmp_path / "src")
    module = folder / "robotid_sim_future_ls" / "__init__.py"
    text = module.read_text()
    text = text.replace(f'ROBOTID_SIM_PLUGIN_API = "{PLUGIN_API_VERSION}"', 'ROBOTID_SIM_PLUGIN_API = "3.0"')
    # a hook that must never run: an incompatible plugin is never registered
    module.write_text(text + '\n\n@hookimpl\ndef register_robots(register):\n    raise RuntimeError("called")\n')
    site_dir = tmp_path / "site"
    (site_dir / "robotid_sim_future_ls-0.3.dist-info").mkdir(parents=True)
    (site_dir / "robotid_sim_future_ls-0.3.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: robotid-sim-future-ls\nVersion: 0.3\n"
    )
    (site_dir / "robotid_sim_future_ls-0.3.dist-info" / "entry_points.txt").write_text(
        "[robotid_sim]\nfuture_ls = robotid_sim_future_ls\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.syspath_prepend(str(site_dir))
    importlib.invalidate_caches()
    plugins.reset_plugin_manager()
    yield
    sys.modules.pop("robotid_sim_future_ls", None)


def test_plugin_for_an_incompatible_api_version_is_refused_naming_both_versions(incompatible_plugin, capsys):
    infos = {info.name: info for info in plugins.list_plugins()}
    info = infos["future_ls"]
    assert info.status == "broken" and info.api_version == "3.0"
    assert (info.distribution, info.version) == ("robotid-sim-future-ls", "0.3")
    assert "written for robotid_sim plugin API 3.0" in info.error
    assert f"this robotid_sim provides plugin API {PLUGIN_API_VERSION}" in info.error
    assert not plugins.get_plugin_manager().has_plugin("future_ls")  # never registered, its hooks never called
    assert "future_ls" not in plugins.estimators()
    with pytest.raises(PluginError, match="Broken plugins: future_ls"):
        plugins.get_estimator("future_ls")
    assert all(other.ok for name, other in infos.items() if name != "future_ls")

    assert main(["plugins", "--json"]) == 0
    row = {r["name"]: r for r in json.loads(capsys.readouterr().out)["plugins"]}["future_ls"]
    assert row["status"] == "broken" and row["api_version"] == "3.0" and "plugin API 3.0" in row["error"]
    assert main(["plugins"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "broken plugin 'future_ls'" in out and "plugin API 3.0" in out and f"plugin API {PLUGIN_API_VERSION}" in out


def test_plugins_json_lists_the_builtins_with_their_api_version(capsys):
    assert main(["plugins", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = {row["name"]: row for row in document["plugins"]}
    assert rows["ols"] == {
        "name": "ols",
        "kinds": ["estimator"],
        "registers": {"estimator": ["ols"]},
        "distribution": rows["ols"]["distribution"],
        "version": rows["ols"]["version"],
        "module": "robotid_sim_plugins.ols",
        "path": rows["ols"]["path"],
        "source": rows["ols"]["source"],
        "builtin": True,
        "api_version": PLUGIN_API_VERSION,
        "hooks": ["register_estimators"],
        "status": "ok",
        "error": None,
    }
    assert {"excitation", "noise model", "robot"} <= set(rows["core"]["kinds"])
