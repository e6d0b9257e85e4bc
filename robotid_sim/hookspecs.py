"""Every robotid_sim hook, in one file, each with its docstring (SPEC §12).

A plugin is a module (or any object) with functions decorated by :data:`hookimpl` whose names
are the hooks below. Every hook follows the ``register_*(register)`` callback style: the host
passes a ``register`` function and the plugin calls it once per thing it provides::

    from robotid_sim.hookspecs import hookimpl

    @hookimpl
    def register_estimators(register):
        register("ridge", RidgeEstimator)

The host, not the plugin, owns the registries, so it can attribute every name to the plugin
that registered it, refuse duplicates, and isolate a plugin whose hook raises
(see :mod:`robotid_sim.plugins`). Plugins are found through the ``robotid_sim`` entry-point
group; the built-in ones in ``plugins/`` are registered the same way (``docs/plugins.md``).
"""

from __future__ import annotations

import pluggy

#: project name shared by the markers, the plugin manager and the entry-point group
PROJECT_NAME = "robotid_sim"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def register_estimators(register):
    """Register estimator classes (SPEC §8).

    Call ``register(name, cls)`` once per estimator. ``name`` is the string used in scenarios,
    the CLI and :func:`robotid_sim.identify` (lower case, e.g. ``"ols"``). ``cls`` is a
    subclass of :class:`robotid_sim.identification.Estimator` (which provides the
    ``from_options`` and ``get_params`` that scenarios use): its constructor only stores
    keyword options (all with defaults), and ``cls(**options).fit(problem)`` takes an
    :class:`~robotid_sim.identification.IdentificationProblem` and returns an
    :class:`~robotid_sim.identification.IdentifiedModel`.
    """


@hookspec
def register_controllers(register):
    """Register controller classes (SPEC §10).

    Call ``register(name, cls)`` once per controller, e.g. ``register("pid", PIDController)``.
    ``cls`` is a class whose constructor takes keyword options (gains, and the identified model
    for model-based controllers) and which follows the controller interface of
    ``robotid_sim.control``.
    """


@hookspec
def register_robots(register):
    """Register robot descriptions (SPEC §3).

    Call ``register(name, directory)`` once per robot. ``directory`` (a ``str`` or
    :class:`pathlib.Path`) must contain ``robot.urdf`` and, optionally, the YAML sidecar
    ``robot.yaml``; it is then loadable as ``load_robot(name)`` and usable in scenarios. A
    plugin robot with the name of a bundled robot replaces the bundled one.
    """


@hookspec
def register_noise_models(register):
    """Register measurement noise models (SPEC §5).

    Call ``register(name, cls)`` once per noise model. ``cls`` is a subclass of
    :class:`robotid_sim.sim.noise.NoiseModel` (a frozen dataclass whose fields are its options)
    and ``name`` is the ``type`` used for it in scenario noise lists.
    """


@hookspec
def register_excitations(register):
    """Register excitation trajectory builders (SPEC §6).

    Call ``register(name, factory)`` once per excitation type. ``factory(config, robot)`` is
    called like the built-in builders of :mod:`robotid_sim.excitation.from_config`, with the
    scenario's excitation mapping (a ``dict`` including ``type``) and the
    :class:`~robotid_sim.robot.Robot`, and returns an
    :class:`~robotid_sim.excitation.base.Excitation`. ``name`` is the ``type`` used in
    scenarios.
    """
