"""Built-in plugin ``core``: the built-in excitation types, noise models, bundled robots and model kinds.

These names are not kept in any table of robotid_sim: they exist only because this plugin
registers them, through the same hooks a third-party plugin uses, so
:func:`robotid_sim.plugins.get_excitation`, :func:`~robotid_sim.plugins.get_noise_model` and
:func:`robotid_sim.load_robot` find built-in and plugin entries the same way. ``core`` is
the first plugin registered (:data:`robotid_sim.plugins.DEFAULT_PLUGINS`), and the first
registration of a name wins, so no plugin can replace these names.

Import cost: importing this module and calling its hooks imports nothing heavy. The
excitation builders live in :mod:`robotid_sim.excitation.from_config` (which needs numpy);
the factories registered here import it on first call. The noise model classes and the model
kinds are imported when their hook is called (that is, when noise models or model kinds are
looked up).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from robotid_sim.hookspecs import hookimpl

ROBOTID_SIM_PLUGIN_API = "2.0"  # the plugin-API version this plugin is written for (robotid_sim.hookspecs)

#: built-in excitation types; each is built by ``robotid_sim.excitation.from_config.build_<type>``
EXCITATION_TYPES: tuple[str, ...] = (
    "fourier",
    "sequential_sine",
    "single_joint_sine",
    "polynomial",
    "stepwise",
    "constant_velocity",
    "hold",
    "sequence",
)

#: built-in noise models: class names in :mod:`robotid_sim.sim.noise` (each registers under its ``kind``)
NOISE_MODELS: tuple[str, ...] = ("GaussianSNR", "GaussianStd", "Outliers", "Quantization", "CurrentMeasurement")


def _excitation_factory(kind: str) -> Callable[[dict, Any], Any]:
    """``factory(config, robot)`` calling ``from_config.build_<kind>``, imported on first use."""

    def factory(config: dict, robot: Any) -> Any:
        from robotid_sim.excitation import from_config

        return getattr(from_config, f"build_{kind}")(config, robot)

    factory.__name__ = factory.__qualname__ = f"build_{kind}"
    factory.__doc__ = f"Build a '{kind}' excitation: robotid_sim.excitation.from_config.build_{kind}(config, robot)."
    return factory


#: the factories, made once so that every lookup returns the same object
_FACTORIES: dict[str, Callable[[dict, Any], Any]] = {kind: _excitation_factory(kind) for kind in EXCITATION_TYPES}


@hookimpl
def register_excitations(register):
    for kind, factory in _FACTORIES.items():
        register(kind, factory)


@hookimpl
def register_noise_models(register):
    from robotid_sim.sim import noise

    for class_name in NOISE_MODELS:
        register(getattr(noise, class_name))


@hookimpl
def register_robots(register):
    import robotid_sim_robots

    root = Path(robotid_sim_robots.__file__).parent
    for directory in sorted(root.iterdir()):
        if (directory / "robot.urdf").is_file():
            register(directory)


@hookimpl
def register_model_kinds(register):
    from robotid_sim.identification.models import BUILTIN_MODEL_KINDS

    for cls in BUILTIN_MODEL_KINDS:
        register(cls)
