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

One rule for names, in every hook: **the first registration wins.** The built-in plugins
register first (``core``: the excitation types, noise models and bundled robots; ``ols``,
``wls``, ``irls``: the estimators; ...), so a plugin can never replace a built-in name. A
plugin that registers a name already taken is listed as broken by ``robotid-sim plugins``,
with an error naming both plugins; its other registrations still count. What is registered
is checked (the class or object each hook asks for below); an invalid entry is skipped and
its plugin listed as broken the same way.
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
    ``from_options`` and ``get_params`` that scenarios use; anything else is refused): its
    constructor only stores keyword options (all with defaults), and
    ``cls(**options).fit(problem)`` takes an
    :class:`~robotid_sim.identification.IdentificationProblem` and returns an
    :class:`~robotid_sim.identification.IdentifiedModel`.
    """


@hookspec
def register_controllers(register):
    """Register controller classes (SPEC §10).

    Call ``register(name, cls)`` once per controller, e.g. ``register("pid", PIDController)``.
    ``cls`` is a class whose constructor takes keyword options (gains, and the identified model
    for model-based controllers) and which follows the controller interface of
    ``robotid_sim.control``: a subclass of ``robotid_sim.control.Controller`` (a class with
    ``__call__`` and ``reset`` methods where that package is not available).
    """


@hookspec
def register_robots(register):
    """Register robot descriptions (SPEC §3).

    Call ``register(name, directory)`` once per robot. ``directory`` (a ``str`` or
    :class:`pathlib.Path`) must contain ``robot.urdf`` and, optionally, the YAML sidecar
    ``robot.yaml``; it is then loadable as ``load_robot(name)`` and usable in scenarios. The
    bundled robots are registered by the built-in ``core`` plugin; as for every hook, the first
    registration of a name wins, so a plugin robot cannot replace a bundled one (give it
    another name, or load your URDF by path).
    """


@hookspec
def register_noise_models(register):
    """Register measurement noise models (SPEC §5).

    Call ``register(name, cls)`` once per noise model. ``cls`` is a concrete subclass of
    :class:`robotid_sim.sim.noise.NoiseModel`, a frozen dataclass whose fields are its options,
    with ``cls.kind == name`` (so that ``to_dict()`` round-trips). ``name`` is the ``type`` of a
    scenario's noise list entry: ``noise: {models: [{type: name, <field>: value, ...}]}``.
    """


@hookspec
def register_excitations(register):
    """Register excitation trajectory builders (SPEC §6).

    Call ``register(name, factory)`` once per excitation type. ``factory(config, robot)`` is
    called like the built-in builders of :mod:`robotid_sim.excitation.from_config`, with the
    scenario's excitation mapping (a ``dict`` including ``type``) and the
    :class:`~robotid_sim.robot.Robot` (or None), and returns an
    :class:`~robotid_sim.excitation.base.Excitation`; raise
    :class:`~robotid_sim.errors.ConfigError` for a bad key or value. ``name`` is the ``type``
    used in scenarios and in :func:`~robotid_sim.excitation.excitation_from_config`.
    """


@hookspec
def register_model_kinds(register):
    """Register identified-model classes, so :func:`robotid_sim.load_model` can read them back.

    Call ``register(kind, cls)`` once per model kind. ``cls`` is a subclass of
    :class:`robotid_sim.identification.IdentifiedModel` with ``cls.kind == kind``; ``kind`` is
    the ``"kind"`` written in the model's JSON file. An estimator that returns its own model
    class registers that class here.
    """
