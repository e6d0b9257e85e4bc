"""Every registry is used, through the one plugin manager, with one name-clash rule.

A plugin's excitation type, noise model and robot work through the public paths
(``excitation_from_config``, ``noise_from_config``, ``simulate``, ``load_robot``,
``run_scenario``) exactly like the built-in ones, which are registered by the built-in plugin
``core``; the first registration of a name wins in every registry; what a plugin registers is
checked; and importing the plugin machinery stays cheap.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import yaml

from robotid_sim import plugins
from robotid_sim.errors import ConfigError, PluginError, RobotIdError
from robotid_sim.hookspecs import hookimpl
from robotid_sim.sim.noise import NoiseModel

REPO = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("fresh_plugin_manager")


def by_name(infos) -> dict:
    return {info.name: info for info in infos}


def register(plugin, name: str):
    plugins.get_plugin_manager().register(plugin, name=name)
    return plugin


# ------------------------------------------------------------------ a plugin with one of each
EXCITATION_KEYS = ("harmonics", "base_frequency", "seed")


def my_excitation(config: dict, robot):
    """``myexc``: a random Fourier excitation (a plugin factory calling library classes)."""
    from robotid_sim.excitation import FourierExcitation

    unknown = sorted(set(config) - {"type", *EXCITATION_KEYS})
    if unknown:
        raise ConfigError(f"unknown field(s) {unknown} for excitation type 'myexc'; valid: {EXCITATION_KEYS}")
    return FourierExcitation.random(
        robot, int(config.get("harmonics", 3)), float(config.get("base_frequency", 0.5)), seed=config.get("seed", 0)
    )


@dataclass(frozen=True)
class Bias(NoiseModel):
    """``mynoise``: a constant offset on one signal (deterministic, so tests can check it exactly)."""

    kind: ClassVar[str] = "mynoise"
    offset: float = 0.0
    signal: str = "tau"

    def _perturb(self, signals, rng) -> None:
        signals[self.signal] = signals[self.signal] + self.offset


class MyPlugin:
    def __init__(self, robot_dir: Path | None = None):
        self.robot_dir = robot_dir

    @hookimpl
    def register_excitations(self, register):
        register("myexc", my_excitation)

    @hookimpl
    def register_noise_models(self, register):
        register("mynoise", Bias)

    @hookimpl
    def register_robots(self, register):
        if self.robot_dir is not None:
            register("myarm", self.robot_dir)


@pytest.fixture()
def myarm_dir(tmp_path) -> Path:
    """A plugin robot: a copy of the bundled planar3r under another name."""
    target = tmp_path / "plugin_robots" / "myarm"
    shutil.copytree(plugins.robots()["planar3r"], target)
    return target


@pytest.fixture()
def my_plugin(myarm_dir):
    return register(MyPlugin(myarm_dir), "myplugin")


# ------------------------------------------------------------------------- the built-ins
def test_builtin_excitations_noise_models_and_robots_come_from_the_core_plugin():
    core = by_name(plugins.list_plugins())["core"]
    assert core.ok and core.builtin, core.error
    assert {
        "fourier",
        "sequential_sine",
        "single_joint_sine",
        "polynomial",
        "stepwise",
        "constant_velocity",
        "hold",
        "sequence",
    } <= set(plugins.excitations())
    assert list(plugins.noise_models()) == ["gaussian_snr", "gaussian_std", "outliers", "quantization", "current"]
    assert {"planar3r", "scara", "three_axis", "prrrp", "hyper9"} <= set(plugins.robots())
    for kind in ("excitation fourier", "noise model gaussian_snr", "robot planar3r"):
        assert kind in core.registers


def test_no_module_keeps_a_second_table_of_names():
    from robotid_sim.excitation import from_config
    from robotid_sim.sim import noise

    assert not hasattr(noise, "MODELS")
    assert not hasattr(from_config, "EXCITATION_BUILDERS")


def test_bundled_robots_reads_the_robots_registry(my_plugin, myarm_dir):
    import robotid_sim as rid

    assert rid.bundled_robots() == plugins.robots()
    assert rid.bundled_robots()["myarm"] == myarm_dir


# --------------------------------------------------------- a plugin excitation type, in use
def test_plugin_excitation_is_built_by_excitation_from_config(my_plugin):
    import robotid_sim as rid
    from robotid_sim.excitation import FourierExcitation, excitation_from_config

    robot = rid.load_robot("planar3r")
    exc = excitation_from_config({"type": "myexc", "harmonics": 3, "base_frequency": 0.5, "seed": 4}, robot)
    assert isinstance(exc, FourierExcitation) and exc.n_dof == 3
    assert exc.describe() == FourierExcitation.random(robot, 3, 0.5, seed=4).describe()


def test_plugin_excitation_works_as_a_part_of_a_sequence(my_plugin):
    import robotid_sim as rid
    from robotid_sim.excitation import excitation_from_config

    robot = rid.load_robot("planar3r")
    part = excitation_from_config({"type": "myexc", "seed": 1}, robot)
    seq = excitation_from_config(
        {
            "type": "sequence",
            "parts": [{"type": "myexc", "seed": 1}, {"type": "hold", "pose": [0.0, 0.0, 0.0], "duration": 0.5}],
        },
        robot,
    )
    assert seq.duration == pytest.approx(part.duration + 0.5)


def test_plugin_excitation_errors_are_config_errors(my_plugin):
    import robotid_sim as rid
    from robotid_sim.excitation import excitation_from_config

    with pytest.raises(ConfigError, match="unknown field"):
        excitation_from_config({"type": "myexc", "colour": "red"}, rid.load_robot("planar3r"))


def test_unknown_excitation_type_lists_plugin_types_too(my_plugin):
    from robotid_sim.excitation import excitation_from_config

    with pytest.raises(ConfigError, match=r"unknown excitation type 'myexcc'; valid types: .*fourier.*myexc") as info:
        excitation_from_config({"type": "myexcc"})
    assert "did you mean 'myexc'" in str(info.value)
    assert isinstance(info.value, RobotIdError)


def test_excitation_type_that_is_not_a_string_is_a_config_error():
    from robotid_sim.excitation import excitation_from_config

    with pytest.raises(ConfigError, match="unknown excitation type"):
        excitation_from_config({"type": ["fourier"]})


# --------------------------------------------------------------- a plugin noise model, in use
def test_plugin_noise_model_is_built_by_noise_from_config(my_plugin):
    from robotid_sim.sim.noise import noise_from_config

    chain = noise_from_config(
        {"models": [{"type": "gaussian_std", "signal": "q", "std": 0.1}, {"type": "mynoise", "offset": 0.5}]}
    )
    assert chain.models[1] == Bias(offset=0.5)
    assert noise_from_config(chain.to_dict()) == chain  # round trip through the registry
    signals = {"q": np.zeros((4, 2)), "tau": np.ones((4, 2))}
    out = chain.apply(signals, np.random.default_rng(0))
    assert np.array_equal(out["tau"], np.full((4, 2), 1.5))


def test_plugin_noise_model_keys_are_checked(my_plugin):
    from robotid_sim.sim.noise import noise_from_config

    with pytest.raises(
        ConfigError,
        match=r"'noise.models\[0\]' \(mynoise\): noise model 'mynoise': unknown option\(s\) \['gain'\]; "
        r"valid options: \['offset', 'signal'\]",
    ):
        noise_from_config({"models": [{"type": "mynoise", "gain": 2.0}]})


def test_unknown_noise_model_type_lists_plugin_models_too(my_plugin):
    from robotid_sim.sim.noise import noise_from_config

    with pytest.raises(
        ConfigError,
        match=r"'noise.models\[0\]' must be a mapping whose 'type' is one of "
        r"gaussian_snr, .*, mynoise",
    ) as info:
        noise_from_config({"models": [{"type": "mynoize"}]})
    assert "did you mean 'mynoise'" in str(info.value)


# ------------------------------------------------------------- simulate and a whole scenario
def test_simulate_uses_plugin_excitation_noise_model_and_robot(my_plugin):
    import robotid_sim as rid

    ds = rid.simulate(
        "myarm",
        {"type": "myexc", "harmonics": 3, "base_frequency": 1.0, "seed": 2},
        noise={"models": [{"type": "mynoise", "offset": 0.25}]},
        rate_hz=100,
    )
    assert ds.metadata["robot"] == "planar3r"  # the URDF's robot name; loaded from the plugin's directory
    assert ds.metadata["noise"] == {"models": [{"type": "mynoise", "offset": 0.25, "signal": "tau"}]}
    assert ds.n_samples == 100 and ds.n_dof == 3
    assert np.allclose(ds.tau - ds.truth.tau, 0.25)
    assert np.array_equal(ds.q, ds.truth.q)


def test_load_robot_finds_the_plugin_robot(my_plugin, myarm_dir):
    import robotid_sim as rid

    robot = rid.load_robot("myarm")
    assert robot.n_dof == 3 and Path(robot.urdf_path).parent == myarm_dir


SCENARIO = {
    "name": "plugin_study",
    "robot": "myarm",
    "seed": 0,
    "excitation": {"type": "myexc", "harmonics": 4, "base_frequency": 0.5, "seed": 0},
    "noise": {"models": [{"type": "mynoise", "offset": 0.01}, {"type": "gaussian_std", "signal": "tau", "std": 0.01}]},
    "simulation": {"rate_hz": 100},
    "validation": {"trajectory_horizon": 0.0},
    "estimators": ["ols"],
}


def test_scenario_uses_plugin_excitation_noise_model_and_robot(my_plugin, tmp_path):
    from robotid_sim.scenario import load_scenario
    from robotid_sim.sim import load_dataset
    from robotid_sim.studies import run_scenario

    path = tmp_path / "plugin_study.yaml"
    path.write_text(yaml.safe_dump(SCENARIO, sort_keys=False))
    assert load_scenario(path).excitation["type"] == "myexc"  # the schema lets plugin types through
    run_dir = run_scenario(path, out_dir=tmp_path / "runs")
    ds = load_dataset(run_dir / "data" / "identification.npz")
    assert ds.metadata["noise"]["models"][0] == {"type": "mynoise", "offset": 0.01, "signal": "tau"}
    assert ds.n_samples == 200  # one period of the 0.5 Hz plugin excitation at 100 Hz
    metrics = json.loads((run_dir / "metrics.json").read_text())["estimators"]
    assert [row["estimator"] for row in metrics] == ["ols", "CAD"]  # CAD: the robot's own parameters
    assert np.isfinite(metrics[0]["torque_rms_total"])


# -------------------------------------------------------------------- one name-clash rule
def _estimator(name):
    from robotid_sim.identification.estimator import Estimator

    return type(f"Est_{name}", (Estimator,), {"name": name})


def _controller(name):
    from robotid_sim.control import Controller

    return type(f"Ctrl_{name}", (Controller,), {"name": name, "__call__": lambda self, *a: None})


def _noise(name):
    return dataclass(frozen=True)(type(f"Noise_{name}", (Bias,), {"kind": name, "__annotations__": {}}))


def _model_kind(name):
    """A concrete model class of kind ``name``: a subclass of a registered built-in kind."""
    from robotid_sim.identification.model import IdentifiedModel

    builtin = list(plugins.model_kinds().values())
    return type(f"Model_{name}", (builtin[0] if builtin else IdentifiedModel,), {"kind": name})


def _robot_factory(tmp_path):
    def make(name):
        target = tmp_path / "clash_robots" / f"{name}_{len(list(tmp_path.glob('clash_robots/*')))}"
        shutil.copytree(REPO / "robots" / "planar3r", target)
        return target

    return make


#: kind -> (hook, registry function, maker(name) -> a valid new entry, a built-in name)
REGISTRIES = {
    "estimator": ("register_estimators", plugins.estimators, _estimator, "ols"),
    "controller": ("register_controllers", plugins.controllers, _controller, "pd"),
    "robot": ("register_robots", plugins.robots, None, "planar3r"),
    "noise model": ("register_noise_models", plugins.noise_models, _noise, "gaussian_snr"),
    "excitation": ("register_excitations", plugins.excitations, lambda name: lambda config, robot: None, "fourier"),
    "model kind": ("register_model_kinds", plugins.model_kinds, _model_kind, "base_linear"),
}


def _plugin(hook: str, entries: dict):
    """A plugin object implementing ``hook`` by registering ``entries``."""

    class Plugin:
        pass

    def implementation(register):
        for name, obj in entries.items():
            register(name, obj)

    setattr(Plugin, hook, staticmethod(hookimpl(implementation, specname=hook)))
    return Plugin()


def _maker(kind, tmp_path):
    maker = REGISTRIES[kind][2]
    return _robot_factory(tmp_path) if maker is None else maker


@pytest.mark.parametrize("kind", list(REGISTRIES))
def test_first_registration_wins_and_the_second_plugin_is_broken(kind, tmp_path):
    hook, registry, _, _ = REGISTRIES[kind]
    make = _maker(kind, tmp_path)
    first, second, extra = make("dup_name"), make("dup_name"), make("second_only")
    register(_plugin(hook, {"dup_name": first}), "first")
    register(_plugin(hook, {"dup_name": second, "second_only": extra}), "second")
    entries = registry()
    assert entries["dup_name"] == first and entries["dup_name"] != second
    assert entries["second_only"] == extra  # the clashing plugin's other entries still count
    infos = by_name(plugins.list_plugins())
    assert infos["first"].ok
    assert not infos["second"].ok
    assert (
        f"{kind} 'dup_name' is already registered by plugin 'first'; plugin 'second' cannot register it again"
        in infos["second"].error
    )
    assert f"{kind} second_only" in infos["second"].registers


@pytest.mark.parametrize("kind", list(REGISTRIES))
def test_a_plugin_cannot_replace_a_builtin_name(kind, tmp_path):
    hook, registry, _, builtin = REGISTRIES[kind]
    before = registry()
    if builtin not in before:
        pytest.skip(f"built-in {kind} '{builtin}' is not registered in this checkout")
    owner = next(info.name for info in plugins.list_plugins() if f"{kind} {builtin}" in info.registers)
    impostor = _maker(kind, tmp_path)(builtin)
    register(_plugin(hook, {builtin: impostor}), "impostor")
    assert registry()[builtin] == before[builtin] != impostor
    error = by_name(plugins.list_plugins())["impostor"].error
    assert f"{kind} '{builtin}' is already registered by plugin '{owner}'; plugin 'impostor'" in error


def test_a_plugin_robot_with_a_bundled_name_does_not_replace_it(tmp_path):
    import robotid_sim as rid

    bundled = plugins.robots()["scara"]
    shutil.copytree(REPO / "robots" / "planar3r", tmp_path / "scara")
    register(_plugin("register_robots", {"scara": tmp_path / "scara"}), "robot_impostor")
    assert Path(rid.load_robot("scara").urdf_path).parent == bundled
    assert (
        "robot 'scara' is already registered by plugin 'core'"
        in by_name(plugins.broken_plugins())["robot_impostor"].error
    )


# ------------------------------------------------------------------------ invalid entries
class NotAnEstimator:
    def __init__(self, **options):
        self.options = options


class NoReset:
    def __call__(self, t, q, qd):
        return q


@dataclass
class MutableNoise(NoiseModel):
    kind: ClassVar[str] = "mutable"

    def _perturb(self, signals, rng) -> None:
        pass


@dataclass(frozen=True)
class AbstractNoise(NoiseModel):
    kind: ClassVar[str] = "abstract"


#: (hook, kind, name, make() -> the invalid entry, what the error says is expected)
INVALID_CASES = [
    (
        "register_estimators",
        "estimator",
        "bad_est",
        lambda: NotAnEstimator,
        "expected a subclass of robotid_sim.identification.Estimator",
    ),
    ("register_estimators", "estimator", "bad_instance", lambda: _estimator("x")(), "expected a subclass of"),
    (
        "register_estimators",
        "estimator",
        "renamed_est",
        lambda: _estimator("other"),
        "with name = 'renamed_est' (got name = 'other')",
    ),
    ("register_controllers", "controller", "bad_ctrl", lambda: NoReset, "expected a"),
    (
        "register_controllers",
        "controller",
        "renamed_ctrl",
        lambda: _controller("other"),
        "with name = 'renamed_ctrl' (got name = 'other')",
    ),
    (
        "register_noise_models",
        "noise model",
        "bad_noise",
        lambda: NotAnEstimator,
        "expected a subclass of robotid_sim.sim.noise.NoiseModel",
    ),
    ("register_noise_models", "noise model", "wrong_kind", lambda: Bias, "(it is kind = 'mynoise')"),
    ("register_noise_models", "noise model", "mutable", lambda: MutableNoise, "(it is not a frozen dataclass)"),
    ("register_noise_models", "noise model", "abstract", lambda: AbstractNoise, "(it is abstract: implement _perturb)"),
    (
        "register_excitations",
        "excitation",
        "bad_exc",
        lambda: {"not": "callable"},
        "expected a callable factory(config, robot) -> Excitation",
    ),
    (
        "register_model_kinds",
        "model kind",
        "bad_kind",
        lambda: NotAnEstimator,
        "expected a subclass of robotid_sim.identification.IdentifiedModel",
    ),
    (
        "register_model_kinds",
        "model kind",
        "other_kind",
        lambda: _model_kind("some_kind"),
        "with kind = 'other_kind' (got kind = 'some_kind')",
    ),
    ("register_robots", "robot", "bad_robot", lambda: "/nonexistent/robot/dir", "has no robot.urdf"),
]


@pytest.mark.parametrize(
    ("hook", "kind", "name", "make", "expected"), INVALID_CASES, ids=[case[2] for case in INVALID_CASES]
)
def test_invalid_entry_is_skipped_and_its_plugin_broken(hook, kind, name, make, expected, tmp_path):
    registry = REGISTRIES[kind][1]
    good = _maker(kind, tmp_path)("good_one")
    register(_plugin(hook, {name: make(), "good_one": good}), "sloppy")
    entries = registry()
    assert name not in entries and entries["good_one"] == good
    error = by_name(plugins.list_plugins())["sloppy"].error
    assert f"PluginError: plugin 'sloppy' registers {kind} '{name}' as " in error
    assert expected in error


@pytest.mark.parametrize("kind", ["estimator", "controller", "noise model", "model kind", "robot"])
def test_an_entry_registered_without_a_name_registers_under_its_own(kind, tmp_path):
    hook, registry, _, _ = REGISTRIES[kind]
    entry = _maker(kind, tmp_path)("self_named")
    name = Path(entry).name if kind == "robot" else "self_named"

    class Plugin:
        pass

    setattr(Plugin, hook, staticmethod(hookimpl(lambda register: register(entry), specname=hook)))
    register(Plugin(), "self_naming")
    assert registry()[name] == entry
    assert by_name(plugins.list_plugins())["self_naming"].ok


def test_a_class_whose_own_registration_check_raises_is_refused_and_the_others_still_count():
    from robotid_sim.identification.estimator import Estimator

    def broken_check(cls, name):
        raise RuntimeError("oops")

    broken = type(
        "BrokenCheck", (Estimator,), {"name": "broken_check", "registration_problem": classmethod(broken_check)}
    )
    register(_plugin("register_estimators", {"broken_check": broken, "good_one": _estimator("good_one")}), "odd")
    entries = plugins.estimators()
    assert "broken_check" not in entries and "good_one" in entries
    assert "registration_problem works (it raised RuntimeError: oops)" in by_name(plugins.list_plugins())["odd"].error


def test_an_excitation_registered_without_a_name_is_refused():
    class Plugin:
        @hookimpl
        def register_excitations(self, register):
            register(my_excitation)

    register(Plugin(), "nameless")
    error = by_name(plugins.list_plugins())["nameless"].error
    assert "registers excitation function" in error and "without a name; expected register(name, excitation)" in error


def test_non_string_name_is_refused():
    register(_plugin("register_excitations", {3: my_excitation}), "numbered")
    assert 3 not in plugins.excitations()
    assert (
        "registers a excitation named 3; expected a non-empty string"
        in by_name(plugins.list_plugins())["numbered"].error
    )


def test_refused_estimator_lookup_says_why():
    register(_plugin("register_estimators", {"notanestimator": NotAnEstimator}), "badest")
    with pytest.raises(
        PluginError,
        match=r"estimator 'notanestimator' cannot be used: plugin 'badest' registers "
        r"estimator 'notanestimator' as class .*NotAnEstimator; expected a "
        r"subclass of robotid_sim.identification.Estimator",
    ):
        plugins.get_estimator("notanestimator")


def test_refused_noise_model_in_a_noise_list_is_a_config_error_saying_why():
    from robotid_sim.sim.noise import noise_from_config

    register(_plugin("register_noise_models", {"mutable": MutableNoise}), "badnoise")
    with pytest.raises(
        ConfigError,
        match=r"'noise.models\[0\]': noise model 'mutable' cannot be used: .*"
        r"not a frozen dataclass",
    ):
        noise_from_config({"models": [{"type": "mutable"}]})


def test_refused_excitation_is_a_config_error_saying_why():
    from robotid_sim.excitation import excitation_from_config

    register(_plugin("register_excitations", {"notcallable": 42}), "badexc")
    with pytest.raises(ConfigError, match="excitation 'notcallable' cannot be used: .*expected a callable"):
        excitation_from_config({"type": "notcallable"})


def test_scenario_naming_a_refused_estimator_fails_with_one_line_and_exit_code_2(tmp_path, capsys):
    from robotid_sim.cli import main
    from robotid_sim.studies import run_scenario

    register(_plugin("register_estimators", {"notanestimator": NotAnEstimator}), "badest")
    path = tmp_path / "bad_estimator.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                **SCENARIO,
                "robot": "planar3r",
                "noise": None,
                "excitation": {"type": "fourier", "harmonics": 3, "base_frequency": 0.5, "seed": 0},
                "estimators": ["notanestimator"],
            }
        )
    )
    with pytest.raises(PluginError, match="estimator 'notanestimator' cannot be used"):
        run_scenario(path, out_dir=tmp_path / "runs")
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    assert "estimator 'notanestimator' cannot be used" in lines[0]
    assert lines[0].rstrip().endswith("expected a subclass of robotid_sim.identification.Estimator"), err
    assert not list((tmp_path / "runs").glob("plugin_study*"))


# ----------------------------------------------------------------------------- model kinds
def test_plugin_model_kind_is_found_by_get_model_kind():
    model = _model_kind("my_kind")
    register(_plugin("register_model_kinds", {"my_kind": model}), "kinds")
    assert plugins.model_kinds()["my_kind"] is model
    assert plugins.get_model_kind("my_kind") is model
    with pytest.raises(PluginError, match="unknown model kind 'my_kindd'.*did you mean 'my_kind'"):
        plugins.get_model_kind("my_kindd")


# ------------------------------------------------------------------------------ start-up
HEAVY = ("matplotlib", "scipy", "sympy", "pybullet", "torch")


def test_importing_the_plugin_machinery_and_listing_excitations_stays_light():
    code = textwrap.dedent(f"""
        import sys
        import robotid_sim.plugins
        print(sorted(m for m in {HEAVY!r} if m in sys.modules))
        names = robotid_sim.plugins.excitations()
        assert "fourier" in names, names
        print(sorted(m for m in {HEAVY!r} if m in sys.modules))
    """)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, plugins.PLUGINS_ENV_VAR: ""},
    )
    assert result.returncode == 0, result.stderr
    after_import, after_excitations = result.stdout.splitlines()
    assert after_import == "[]", "import robotid_sim.plugins imported " + after_import
    assert "matplotlib" not in after_excitations and "pybullet" not in after_excitations, after_excitations
