"""Every robotid_sim hook, in one file, each with its docstring (SPEC §12).

A plugin is a module (or any object) with functions decorated by :data:`hookimpl` whose names
are the hooks below. Every hook follows the ``register_*(register)`` callback style: the host
passes a ``register`` function and the plugin calls it once per thing it provides::

    from robotid_sim.hookspecs import hookimpl

    @hookimpl
    def register_estimators(register):
        register(RidgeEstimator)  # under RidgeEstimator.name, "ridge"

**A name in one place.** A registered class names itself: an estimator or a controller by its
class attribute ``name``, a noise model or a model kind by its ``kind``, so ``register(cls)``
registers it under that name. ``register(name, cls)`` is accepted too, when ``name`` is the
class's own (anything else is refused: the class stamps its own name on what it makes). A robot
directory registered as ``register(directory)`` is named after the directory; an excitation
factory has no name of its own, so it is registered as ``register(name, factory)``. Each base
class checks its own subclasses (its ``registration_problem`` classmethod, found through the
class attribute :data:`REGISTRY_HOOK_ATTRIBUTE`; see :class:`Registrable`), so the registry imports no
base class.

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

**Plugin-API version.** :data:`PLUGIN_API_VERSION` (``"MAJOR.MINOR"``) versions the contract
written in this module: the hooks, what ``register`` accepts, and the base classes and objects
handed to plugins (``Estimator``, ``IdentificationProblem``, ``IdentifiedModel``, ``Controller``,
``Plant``, ``Reference``, ``NoiseModel``, ``Excitation``). A plugin module declares the version
it was written for in a module attribute named :data:`PLUGIN_API_ATTRIBUTE`::

    ROBOTID_SIM_PLUGIN_API = "2.0"

The policy (``docs/plugins.md``, "Plugin-API versions"): the **major** number changes when a
change can break a working plugin (a hook removed or renamed, an argument or a registered
object's contract changed); the **minor** number changes when something is only added (a new
hook, a new optional attribute). A plugin loads when its major equals the host's and its minor
is not newer than the host's; otherwise it is listed as broken with both versions named and is
never registered (:func:`plugin_api_problem`). A plugin without the attribute is assumed to be
written for the current version.
"""

from __future__ import annotations

import inspect
import re
from typing import ClassVar

import pluggy

#: project name shared by the markers, the plugin manager and the entry-point group
PROJECT_NAME = "robotid_sim"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

#: version of the plugin API defined here, ``"MAJOR.MINOR"``: MAJOR changes break plugins, MINOR ones only add
PLUGIN_API_VERSION = "2.0"
#: module attribute in which a plugin declares the plugin-API version it targets (``"1"`` or ``"1.0"``)
PLUGIN_API_ATTRIBUTE = "ROBOTID_SIM_PLUGIN_API"

_VERSION = re.compile(r"(\d+)(?:\.(\d+))?")


def parse_plugin_api_version(text: object) -> tuple[int, int]:
    """``"1"`` or ``"1.2"`` as ``(major, minor)`` (a missing minor is 0).

    Raises:
        ValueError: ``text`` is not a string of the form ``MAJOR`` or ``MAJOR.MINOR`` (digits).
    """
    match = _VERSION.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(
            f"{PLUGIN_API_ATTRIBUTE} = {text!r} is not a plugin-API version; write a string such as "
            f"'{PLUGIN_API_VERSION}' (MAJOR.MINOR)"
        )
    return int(match.group(1)), int(match.group(2) or 0)


def plugin_api_problem(declared: object, provided: str = PLUGIN_API_VERSION) -> str | None:
    """Why a plugin declaring plugin-API version ``declared`` cannot load here; None when it can.

    Compatible means: the same major version, and a minor version not newer than ``provided``
    (a plugin written for 1.3 may use what 1.3 added, which a 1.0 host lacks). ``declared=None``
    (no declaration) is compatible.

    Args:
        declared: the plugin module's :data:`PLUGIN_API_ATTRIBUTE` value, or None.
        provided: the host's version (default :data:`PLUGIN_API_VERSION`).

    Returns:
        A message naming both versions and the fix, or None.
    """
    if declared is None:
        return None
    try:
        major, minor = parse_plugin_api_version(declared)
    except ValueError as exc:
        return str(exc)
    host_major, host_minor = parse_plugin_api_version(provided)
    if major != host_major:
        return (
            f"it is written for robotid_sim plugin API {declared}, but this robotid_sim provides plugin API "
            f"{provided} (a different major version is incompatible); install a version of the plugin made for "
            f"plugin API {host_major}.x, or a robotid-sim that provides plugin API {major}.x"
        )
    if minor > host_minor:
        return (
            f"it is written for robotid_sim plugin API {declared}, but this robotid_sim provides only plugin API "
            f"{provided} (older than the plugin needs); upgrade robotid-sim"
        )
    return None


#: class attribute by which a base class names the registry hook its subclasses are registered through
REGISTRY_HOOK_ATTRIBUTE = "registry_hook"


class Registrable:
    """Mixin of the base classes whose subclasses a registry hook accepts, which check their own registrations.

    ``Estimator``, ``Controller``, ``NoiseModel`` and ``IdentifiedModel`` derive from it and set, in their
    own class body, :attr:`registry_hook` (the hook their subclasses are registered through: the registry of
    :mod:`robotid_sim.plugins` finds the base class in a registered class's MRO by it, without importing it),
    :attr:`registry_base` and, where a subclass's name is not its ``name``, :attr:`registry_name_attribute`.
    """

    #: the hook the subclasses are registered through (``"register_estimators"``)
    registry_hook: ClassVar[str] = ""
    #: the base class's public dotted name, for messages (``"robotid_sim.identification.Estimator"``)
    registry_base: ClassVar[str] = ""
    #: the class attribute holding a subclass's registered name (``"name"``, or ``"kind"``)
    registry_name_attribute: ClassVar[str] = "name"

    @classmethod
    def registered_name(cls) -> str:
        """The name this class registers under with ``register(cls)``: its :attr:`registry_name_attribute`."""
        return getattr(cls, cls.registry_name_attribute)

    @classmethod
    def registration_problem(cls, name: str) -> str | None:
        """What the registry expects instead of this class registered as ``name``; None when it is fine.

        ``cls`` must be concrete, and its own name (:meth:`registered_name`) must be ``name``, so a class is
        registered under the name it stamps on what it makes, spelled in one place.

        Returns:
            ``"a concrete subclass of <base> (it is abstract: implement ...)"`` or ``"a subclass of <base>
            with <name attribute> = '<name>' (got <name attribute> = ...)"``, or None.
        """
        if inspect.isabstract(cls):
            missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
            return f"a concrete subclass of {cls.registry_base} (it is abstract: implement {missing})"
        own, attribute = cls.registered_name(), cls.registry_name_attribute
        if own != name:
            return f"a subclass of {cls.registry_base} with {attribute} = '{name}' (got {attribute} = {own!r})"
        return None


@hookspec
def register_estimators(register):
    """Register estimator classes (SPEC §8).

    Call ``register(cls)`` once per estimator; it is registered under ``cls.name``, the string
    used in scenarios, the CLI and :func:`robotid_sim.identify` (lower case, e.g. ``"ols"``;
    ``register(name, cls)`` with ``name == cls.name`` is the same). ``cls`` is a
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

    Call ``register(cls)`` once per controller, e.g. ``register(PIDController)``; it is
    registered under ``cls.name`` (``register(name, cls)`` with ``name == cls.name`` is the same).
    ``cls`` is a subclass of ``robotid_sim.control.Controller`` whose constructor takes keyword
    options (gains, and the identified model for model-based controllers).
    """


@hookspec
def register_robots(register):
    """Register robot descriptions (SPEC §3).

    Call ``register(name, directory)`` once per robot, or ``register(directory)`` to name it
    after the directory. ``directory`` (a ``str`` or :class:`pathlib.Path`) must contain
    ``robot.urdf`` and, optionally, the YAML sidecar ``robot.yaml``; it is then loadable as
    ``load_robot(name)`` and usable in scenarios. The
    bundled robots are registered by the built-in ``core`` plugin; as for every hook, the first
    registration of a name wins, so a plugin robot cannot replace a bundled one (give it
    another name, or load your URDF by path).
    """


@hookspec
def register_noise_models(register):
    """Register measurement noise models (SPEC §5).

    Call ``register(cls)`` once per noise model; it is registered under ``cls.kind``
    (``register(name, cls)`` with ``name == cls.kind`` is the same). ``cls`` is a concrete subclass
    of :class:`robotid_sim.sim.noise.NoiseModel`, a frozen dataclass whose fields are its options.
    Its ``kind`` is the ``type`` of a scenario's noise list entry:
    ``noise: {models: [{type: kind, <field>: value, ...}]}`` (and of ``to_dict()``).
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

    Call ``register(cls)`` once per model kind; it is registered under ``cls.kind``
    (``register(kind, cls)`` with ``kind == cls.kind`` is the same). ``cls`` is a subclass of
    :class:`robotid_sim.identification.IdentifiedModel`; its ``kind`` is the ``"kind"`` written
    in the model's JSON file. An estimator that returns its own model class registers that class
    here.
    """
