"""Plugin machinery (SPEC §12): hookspecs, entry-point loading, error isolation, registries."""

from __future__ import annotations

import importlib.metadata
import inspect
import pkgutil
import shutil
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from robotid_sim import hookspecs, plugins
from robotid_sim.errors import PluginError
from robotid_sim.hookspecs import hookimpl

REPO = Path(__file__).resolve().parents[1]
HOOK_NAMES = sorted(
    name
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
    if hasattr(fn, f"{hookspecs.PROJECT_NAME}_spec")
)


pytestmark = pytest.mark.usefixtures("fresh_plugin_manager")


@pytest.fixture()
def plugin_site(tmp_path, monkeypatch):
    """Factory for installed-looking plugin distributions: modules + a dist-info on sys.path."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    created: list[str] = []

    def make(dist: str, version: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
        for module, source in modules.items():
            (site / f"{module}.py").write_text(textwrap.dedent(source))
            created.append(module)
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
        (info / "entry_points.txt").write_text(f"[{hookspecs.PROJECT_NAME}]\n{lines}")
        importlib.invalidate_caches()
        plugins.reset_plugin_manager()

    yield make
    for module in created:
        sys.modules.pop(module, None)


GOOD_PLUGIN = """
    from robotid_sim.hookspecs import hookimpl
    from robotid_sim.identification import Estimator

    class {cls}(Estimator):
        name = "{name}"

    @hookimpl
    def register_estimators(register):
        register("{name}", {cls})
"""


def by_name(infos) -> dict:
    return {info.name: info for info in infos}


# ------------------------------------------------------------------------------- hookspecs
def test_there_is_a_hook_for_each_kind_of_plugin():
    assert HOOK_NAMES == [
        "register_controllers",
        "register_estimators",
        "register_excitations",
        "register_model_kinds",
        "register_noise_models",
        "register_robots",
    ]


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_every_hook_has_a_docstring_saying_how_to_call_register(hook):
    doc = inspect.getdoc(getattr(hookspecs, hook))
    assert doc and "register(" in doc


@pytest.mark.parametrize("hook", HOOK_NAMES)
def test_every_hook_is_documented_in_the_plugin_guide(hook):
    assert f"`{hook}(register)`" in (REPO / "docs" / "plugins.md").read_text()


def test_hookimpl_is_re_exported_from_the_package():
    import robotid_sim

    assert robotid_sim.hookimpl is hookspecs.hookimpl


# ---------------------------------------------------------------------------- built-ins
def test_builtin_estimators_are_registered():
    assert {"ols", "wls", "irls"} <= set(plugins.estimators())
    infos = by_name(plugins.list_plugins())
    for name in ("ols", "wls", "irls"):
        assert infos[name].ok and infos[name].builtin
        assert f"estimator {name}" in infos[name].registers
        assert infos[name].hooks == ("register_estimators",)


def test_builtins_are_imported_directly_when_no_entry_point_is_installed(monkeypatch):
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: [])
    infos = by_name(plugins.list_plugins())
    assert infos["ols"].source == plugins.SOURCE_FALLBACK
    assert infos["ols"].distribution == plugins.DISTRIBUTION_NAME
    assert plugins.get_estimator("ols").__module__ == "robotid_sim_plugins.ols"


def test_builtin_declared_as_entry_point_is_loaded_through_it_and_only_once(monkeypatch):
    declared = [
        importlib.metadata.EntryPoint(name=module.rsplit(".", 1)[-1], value=module, group="robotid_sim")
        for module in plugins.DEFAULT_PLUGINS
    ]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: declared)
    infos = plugins.list_plugins()
    # each exactly once, through its entry point (a module another engineer has not written yet,
    # such as plugins/controllers.py, is listed as a broken built-in instead of failing this test)
    assert sorted(info.module for info in infos) == sorted(plugins.DEFAULT_PLUGINS)
    assert all(info.source == plugins.SOURCE_ENTRY_POINT and info.builtin for info in infos)
    registered = [name for name, _ in plugins.get_plugin_manager().list_name_plugin()]
    in_order = [m.rsplit(".", 1)[-1] for m in plugins.DEFAULT_PLUGINS]
    assert registered == [name for name in in_order if name in registered]  # in DEFAULT_PLUGINS order
    assert registered[0] == "core"


def test_with_stale_metadata_core_is_still_registered_first(monkeypatch):
    """Metadata from before core had an entry point: core is imported directly, in its place."""
    declared = [
        importlib.metadata.EntryPoint(name=name, value=f"robotid_sim_plugins.{name}", group="robotid_sim")
        for name in ("ols", "wls", "irls")
    ]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: declared)
    registered = [name for name, _ in plugins.get_plugin_manager().list_name_plugin()]
    assert registered[0] == "core"
    assert [name for name in registered if name in ("ols", "wls", "irls")] == ["ols", "wls", "irls"]
    assert by_name(plugins.list_plugins())["core"].source == plugins.SOURCE_FALLBACK


def test_core_is_the_first_builtin_plugin_and_registers_the_builtin_names():
    assert plugins.DEFAULT_PLUGINS[:2] == ("robotid_sim_plugins.core", "robotid_sim_plugins.controllers")
    assert plugins.get_plugin_manager().list_name_plugin()[0][0] == "core"
    core = by_name(plugins.list_plugins())["core"]
    assert core.ok and core.builtin, core.error
    assert {
        "excitation fourier",
        "excitation sequence",
        "noise model gaussian_snr",
        "noise model current",
        "robot planar3r",
    } <= set(core.registers)


def test_a_builtin_plugin_is_named_in_one_place():
    """The entry points in pyproject.toml are DEFAULT_PLUGINS, in order, each named after its module; every
    module or package of plugins/ is one; an estimator plugin registers an estimator of its own name, and
    every built-in class is registered under its class attribute."""
    entry_points = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    declared = entry_points[hookspecs.PROJECT_NAME]
    assert list(declared.values()) == list(plugins.DEFAULT_PLUGINS)
    assert all(target == f"{plugins.BUILTIN_PACKAGE}.{name}" for name, target in declared.items())
    assert {module.name for module in pkgutil.iter_modules([str(REPO / "plugins")])} == set(declared)
    infos = by_name(plugins.list_plugins())
    for name in declared:
        assert infos[name].ok and infos[name].builtin, infos[name].error
        estimators = [
            entry.removeprefix("estimator ") for entry in infos[name].registers if entry.startswith("estimator ")
        ]
        assert not estimators or name in estimators, (name, estimators)
    for name, cls in [*plugins.estimators().items(), *plugins.controllers().items()]:
        assert cls.name == name
    for name, cls in [*plugins.noise_models().items(), *plugins.model_kinds().items()]:
        assert cls.kind == name


# ----------------------------------------------------------------------- registries
def _estimator_base():
    from robotid_sim.identification.estimator import Estimator

    return Estimator


def _noise_base():
    from robotid_sim.sim.noise import NoiseModel

    return NoiseModel


class FakeEstimator(_estimator_base()):
    name = "fake"


def _controller_base():
    from robotid_sim.control import Controller

    return Controller


class FakeController(_controller_base()):
    name = "fake_ctrl"

    def __call__(self, t, q, qd, reference):
        return q


@dataclass(frozen=True)
class FakeNoise(_noise_base()):
    kind: ClassVar[str] = "fake_noise"

    def _perturb(self, signals, rng):
        pass


def fake_model_kind():
    """A concrete model class of kind ``fake_kind``: a subclass of a registered built-in kind."""
    from robotid_sim.identification.model import IdentifiedModel

    builtin = list(plugins.model_kinds().values())
    return type("FakeModel", (builtin[0] if builtin else IdentifiedModel,), {"kind": "fake_kind"})


def fake_excitation(config, robot):
    return config


def test_plugin_registered_directly_appears_in_every_registry(tmp_path):
    robot_dir = tmp_path / "toy"
    robot_dir.mkdir()
    (robot_dir / "robot.urdf").write_text("<robot name='toy'/>")
    FakeModel = fake_model_kind()

    class Everything:
        @hookimpl
        def register_estimators(self, register):
            register("fake", FakeEstimator)

        @hookimpl
        def register_controllers(self, register):
            register("fake_ctrl", FakeController)

        @hookimpl
        def register_robots(self, register):
            register("toy", str(robot_dir))

        @hookimpl
        def register_noise_models(self, register):
            register("fake_noise", FakeNoise)

        @hookimpl
        def register_excitations(self, register):
            register("fake_exc", fake_excitation)

        @hookimpl
        def register_model_kinds(self, register):
            register("fake_kind", FakeModel)

    plugins.get_plugin_manager().register(Everything(), name="everything")
    assert plugins.get_estimator("fake") is FakeEstimator
    assert plugins.get_controller("fake_ctrl") is FakeController
    assert plugins.robots()["toy"] == robot_dir
    assert plugins.get_noise_model("fake_noise") is FakeNoise
    assert plugins.get_excitation("fake_exc") is fake_excitation
    assert plugins.get_model_kind("fake_kind") is FakeModel
    info = by_name(plugins.list_plugins())["everything"]
    assert info.ok and info.source == plugins.SOURCE_DIRECT, info.error
    assert set(info.registers) == {
        "estimator fake",
        "controller fake_ctrl",
        "robot toy",
        "noise model fake_noise",
        "excitation fake_exc",
        "model kind fake_kind",
    }
    assert len(info.hooks) == 6


def test_plugin_robot_is_loadable_by_name(tmp_path):
    import robotid_sim as rid

    source = rid.bundled_robots()["planar3r"]
    shutil.copytree(source, tmp_path / "myarm")

    class RobotPlugin:
        @hookimpl
        def register_robots(self, register):
            register("myarm", tmp_path / "myarm")

    plugins.get_plugin_manager().register(RobotPlugin(), name="robots")
    assert rid.load_robot("myarm").n_dof == 3


def test_hook_that_raises_is_reported_with_its_error_and_others_keep_working():
    class Exploding:
        @hookimpl
        def register_estimators(self, register):
            register(FakeEstimator)
            raise RuntimeError("boom while registering")

    plugins.get_plugin_manager().register(Exploding(), name="exploding")
    registry = plugins.estimators()
    assert {"ols", "wls", "irls"} <= set(registry)
    assert "fake" not in registry  # nothing of a hook that raised is kept
    info = by_name(plugins.broken_plugins())["exploding"]
    assert info.status == "broken"
    assert info.error == "RuntimeError: boom while registering (in register_estimators)"


def test_duplicate_name_keeps_the_first_plugin_and_reports_the_second():
    OLSImpostor = type("OLSImpostor", (_estimator_base(),), {"name": "ols"})

    class Impostor:
        @hookimpl
        def register_estimators(self, register):
            register(OLSImpostor)
            register(FakeEstimator)

    plugins.get_plugin_manager().register(Impostor(), name="impostor")
    assert plugins.get_estimator("ols").__module__ == "robotid_sim_plugins.ols"
    assert plugins.get_estimator("fake") is FakeEstimator
    info = by_name(plugins.list_plugins())["impostor"]
    assert not info.ok
    assert "estimator 'ols' is already registered by plugin 'ols'" in info.error
    assert "plugin 'impostor' cannot register it again" in info.error


def test_invalid_entries_are_skipped_and_reported(tmp_path):
    class Sloppy:
        @hookimpl
        def register_estimators(self, register):
            register("instance", FakeEstimator())

        @hookimpl
        def register_robots(self, register):
            register("nowhere", tmp_path)

    plugins.get_plugin_manager().register(Sloppy(), name="sloppy")
    assert "instance" not in plugins.estimators()
    assert "nowhere" not in plugins.robots()
    error = by_name(plugins.list_plugins())["sloppy"].error
    assert (
        "plugin 'sloppy' registers estimator 'instance' as FakeEstimator" in error
    ) and "expected a subclass of robotid_sim.identification.Estimator" in error
    assert "has no robot.urdf" in error


def test_unknown_estimator_lists_the_known_ones():
    with pytest.raises(PluginError, match=r"unknown estimator 'olsx'; known: ols, wls, irls") as excinfo:
        plugins.get_estimator("olsx")
    assert "did you mean 'ols'" in str(excinfo.value)


def test_unknown_controller_raises_plugin_error_naming_it():
    with pytest.raises(PluginError, match="unknown controller 'nope'"):
        plugins.get_controller("nope")


def test_unknown_name_mentions_broken_plugins(plugin_site):
    plugin_site(
        "broken-dist",
        "0.1",
        {"brokenest": "rs_test_broken_mod"},
        {"rs_test_broken_mod": "raise ImportError('needs libfoo')\n"},
    )
    with pytest.raises(PluginError, match="Broken plugins: brokenest"):
        plugins.get_estimator("from_the_broken_one")


# ------------------------------------------------------------------------- entry points
def test_entry_point_plugin_is_loaded_with_its_distribution_and_version(plugin_site):
    plugin_site(
        "robotid-sim-good",
        "2.3.1",
        {"good": "rs_test_good_mod"},
        {"rs_test_good_mod": GOOD_PLUGIN.format(cls="GoodEstimator", name="good")},
    )
    assert plugins.get_estimator("good").__name__ == "GoodEstimator"
    info = by_name(plugins.list_plugins())["good"]
    assert (info.distribution, info.version, info.source) == ("robotid-sim-good", "2.3.1", plugins.SOURCE_ENTRY_POINT)
    assert info.ok and not info.builtin and info.path.endswith("rs_test_good_mod.py")


def test_plugin_that_fails_to_import_is_listed_broken_with_its_error(plugin_site):
    plugin_site(
        "robotid-sim-bad",
        "1.2",
        {"bad": "rs_test_bad_mod"},
        {"rs_test_bad_mod": "raise ImportError('needs libfoo, which is not installed')\n"},
    )
    assert {"ols", "wls", "irls"} <= set(plugins.estimators())
    info = by_name(plugins.broken_plugins())["bad"]
    assert (info.distribution, info.version, info.module) == ("robotid-sim-bad", "1.2", "rs_test_bad_mod")
    assert info.error == "ImportError: needs libfoo, which is not installed"


def test_hook_with_unknown_arguments_is_broken_not_registered(plugin_site):
    source = """
        from robotid_sim.hookspecs import hookimpl

        @hookimpl
        def register_estimators(register, extra):
            register("never", object)
    """
    plugin_site(
        "robotid-sim-wrongargs", "0.1", {"wrongargs": "rs_test_wrongargs_mod"}, {"rs_test_wrongargs_mod": source}
    )
    assert "never" not in plugins.estimators()
    info = by_name(plugins.list_plugins())["wrongargs"]
    assert info.status == "broken" and "PluginValidationError" in info.error and "extra" in info.error


def test_misspelt_hook_name_marks_the_plugin_broken(plugin_site):
    source = """
        from robotid_sim.hookspecs import hookimpl

        @hookimpl
        def register_estimator(register):
            register("typo", object)
    """
    plugin_site("robotid-sim-typo", "0.1", {"typo": "rs_test_typo_mod"}, {"rs_test_typo_mod": source})
    info = by_name(plugins.list_plugins())["typo"]
    assert "'register_estimator' is not a robotid_sim hook" in info.error
    assert {"ols", "wls", "irls"} <= set(plugins.estimators())


def test_second_plugin_with_a_taken_name_is_broken(plugin_site):
    plugin_site(
        "robotid-sim-clash",
        "0.1",
        {"ols": "rs_test_clash_mod"},
        {"rs_test_clash_mod": GOOD_PLUGIN.format(cls="ClashEstimator", name="clash")},
    )
    assert plugins.get_estimator("ols").__module__ == "robotid_sim_plugins.ols"
    broken = [info for info in plugins.broken_plugins() if info.distribution == "robotid-sim-clash"]
    assert len(broken) == 1 and "plugin name 'ols' is already taken" in broken[0].error


# ----------------------------------------------------------------------- env variable
@pytest.fixture()
def two_plugins(plugin_site):
    plugin_site(
        "robotid-sim-first",
        "1.0",
        {"first": "rs_test_first_mod"},
        {"rs_test_first_mod": GOOD_PLUGIN.format(cls="FirstEstimator", name="first")},
    )
    plugin_site(
        "robotid-sim-second",
        "1.0",
        {"second": "rs_test_second_mod"},
        {"rs_test_second_mod": GOOD_PLUGIN.format(cls="SecondEstimator", name="second")},
    )


def test_all_plugins_load_when_the_env_var_is_unset(two_plugins):
    assert {"first", "second", "ols"} <= set(plugins.estimators())


def test_env_var_limits_loading_to_the_named_entry_points(two_plugins, monkeypatch):
    monkeypatch.setenv(plugins.PLUGINS_ENV_VAR, "first")
    plugins.reset_plugin_manager()
    names = set(plugins.estimators())
    assert "first" in names and "second" not in names
    assert {"ols", "wls", "irls"} <= names  # built-ins always load


def test_env_var_accepts_distribution_names(two_plugins, monkeypatch):
    monkeypatch.setenv(plugins.PLUGINS_ENV_VAR, " Robotid_Sim_Second , ")
    plugins.reset_plugin_manager()
    names = set(plugins.estimators())
    assert "second" in names and "first" not in names


def test_empty_env_var_loads_only_the_builtins(two_plugins, monkeypatch):
    monkeypatch.setenv(plugins.PLUGINS_ENV_VAR, "")
    plugins.reset_plugin_manager()
    assert set(plugins.estimators()) >= {"ols", "wls", "irls"}
    assert all(info.builtin for info in plugins.list_plugins())


def test_env_var_naming_no_installed_plugin_is_logged(two_plugins, monkeypatch, caplog):
    monkeypatch.setenv(plugins.PLUGINS_ENV_VAR, "first,ols,frist")
    plugins.reset_plugin_manager()
    with caplog.at_level("WARNING", logger="robotid_sim.plugins"):
        assert "first" in plugins.estimators()
    assert [r.getMessage() for r in caplog.records] == [
        f"{plugins.PLUGINS_ENV_VAR} names 'frist', but no installed plugin has that entry-point or distribution name"
    ]
