"""The one plugin manager: entry-point loading, error isolation and the registries (SPEC §12).

Loading (done once, lazily, by :func:`get_plugin_manager`):

1. **Built-in plugins** — the modules of ``plugins/`` (package ``robotid_sim_plugins``) — are
   declared as entry points of the ``robotid_sim`` group in robotid_sim's own ``pyproject.toml``
   and are loaded through those entry points exactly like third-party plugins. They are
   registered first, in :data:`DEFAULT_PLUGINS` order (``core`` first), so a built-in name
   always wins.
   *Fallback:* a module of :data:`DEFAULT_PLUGINS` that no installed entry point points to
   (stale package metadata, e.g. an editable install made before the entry points were
   added, or a source checkout on ``sys.path``) is imported directly, so the core estimators
   always work; :func:`list_plugins` shows it with ``source="built-in (no entry point)"``.
2. **Third-party plugins**: every other entry point of the group, sorted by distribution and
   entry-point name. The environment variable :data:`PLUGINS_ENV_VAR`
   (``ROBOTID_SIM_PLUGINS``) limits which of them load (see :func:`selected_plugins`).
3. ``pm.check_pending()``: a hook implementation whose name is not a hook (a typo such as
   ``register_estimator``) marks its plugin broken.

Plugin-API versions: a plugin module may declare the plugin-API version it targets
(``ROBOTID_SIM_PLUGIN_API = "2.0"``, see :mod:`robotid_sim.hookspecs`). The module is imported
to read it; when it is incompatible with :data:`~robotid_sim.hookspecs.PLUGIN_API_VERSION` (a
different major version, or a newer minor one) the plugin is recorded as broken with both
versions named and is never registered: none of its hooks is ever called.

Error isolation: nothing that a plugin does can break the others or the core.

- A plugin that fails to import or to register is not registered; it is recorded as broken.
- Registries are built by calling each plugin's hook implementation separately with a
  ``register`` callback. A hook that raises contributes nothing to that registry, and its
  plugin is recorded as broken; the other plugins' entries are unaffected.
- Name clashes, one rule for every registry (estimators, controllers, robots, noise models,
  excitation types, model kinds): **the first registration wins**. Built-ins register first
  (the ``core`` plugin holds the built-in excitation types, noise models and bundled robots),
  so a plugin can never silently replace a built-in name; a later plugin registering a taken
  name is recorded as broken with an error naming both plugins, and its other entries still
  count.
- Invalid entries (an estimator that is not an ``Estimator`` subclass, a class registered
  under another name than its own, a noise model that is not a ``NoiseModel`` dataclass, a
  robot directory without ``robot.urdf``, ...) are skipped
  and recorded the same way, naming the plugin, the name and what was expected; asking for
  such a name says why it was refused.

There is one registry per kind of thing, here; no other module keeps a table of names. The
registries are rebuilt from the hooks on every call (cheap: a few function calls), so a plugin
registered with ``pm.register`` counts at once.

Import cost and layers: this module imports only the standard library, pluggy and
:mod:`robotid_sim.hookspecs` / :mod:`robotid_sim.errors`, never a stage of robotid_sim (a
contract checked by ``lint-imports``). A registered class is checked by its own base class
(``Estimator``, ``Controller``, ``NoiseModel``, ``IdentifiedModel``), found in the class's MRO by
its :data:`~robotid_sim.hookspecs.REGISTRY_HOOK_ATTRIBUTE` and asked through its
``registration_problem(name)`` classmethod; ``register(cls)`` takes the name from the class
(``registered_name()``).

Every problem is recorded as a :class:`PluginInfo` with ``status="broken"`` and
``error="<ExceptionType>: <message>"`` (several problems are joined by ``"; "``), logged once
as a warning, and shown by ``robotid-sim plugins``. Nothing here prints.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import inspect
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from robotid_sim import hookspecs
from robotid_sim.errors import PluginError

logger = logging.getLogger(__name__)

#: entry-point group read by the loader (the same for built-in and third-party plugins)
ENTRY_POINT_GROUP = hookspecs.PROJECT_NAME
#: environment variable limiting which third-party plugins load (see :func:`selected_plugins`)
PLUGINS_ENV_VAR = "ROBOTID_SIM_PLUGINS"
#: the distribution that ships the built-in plugins
DISTRIBUTION_NAME = "robotid-sim"
#: built-in plugin modules, in registration order; imported directly only when no entry point
#: points to them (stale metadata), otherwise loaded through their entry points. The entry points of
#: pyproject.toml list the same modules in the same order, each named after its module (a test checks it)
DEFAULT_PLUGINS: tuple[str, ...] = (
    "robotid_sim_plugins.core",
    "robotid_sim_plugins.controllers",
    "robotid_sim_plugins.ols",
    "robotid_sim_plugins.wls",
    "robotid_sim_plugins.irls",
    "robotid_sim_plugins.adaline",
    "robotid_sim_plugins.hopfield",
    "robotid_sim_plugins.ekf",
    "robotid_sim_plugins.lmi_wls",
    "robotid_sim_plugins.two_loop",
    "robotid_sim_plugins.sindy",
    "robotid_sim_plugins.auto_features",
    "robotid_sim_plugins.sequential",
    "robotid_sim_plugins.semiparametric",
    "robotid_sim_plugins.idim_tls",
    "robotid_sim_plugins.idim_ml",
    "robotid_sim_plugins.idim_iv",
    "robotid_sim_plugins.didim",
    "robotid_sim_plugins.cloe",
)
#: package holding the built-in plugin modules
BUILTIN_PACKAGE = "robotid_sim_plugins"

SOURCE_ENTRY_POINT = "entry point"
SOURCE_FALLBACK = "built-in (no entry point)"
SOURCE_DIRECT = "registered directly"


@dataclass(frozen=True)
class PluginInfo:
    """One plugin as listed by ``robotid-sim plugins``.

    Attributes:
        name: plugin name: the entry-point name (``"ols"``), or the name it was registered
            under with ``pm.register``.
        distribution: the installed distribution that declares it (``"robotid-sim"``), or
            None when unknown (registered directly).
        version: that distribution's version, or None.
        module: dotted name of the plugin module (or of the entry point's target).
        path: file the plugin module was loaded from, or None.
        source: how it was found: ``"entry point"``, ``"built-in (no entry point)"`` or
            ``"registered directly"``.
        builtin: whether it is one of robotid_sim's own plugins.
        hooks: names of the hooks it implements.
        registers: what it contributed, as ``"<kind> <name>"`` (``"estimator ols"``).
        status: ``"ok"`` or ``"broken"``.
        error: for a broken plugin, ``"<ExceptionType>: <message>"`` (several joined by
            ``"; "``); None when ok.
        api_version: the plugin-API version the plugin module declares
            (``ROBOTID_SIM_PLUGIN_API``), or None when it declares none or could not be imported.
    """

    name: str
    distribution: str | None = None
    version: str | None = None
    module: str | None = None
    path: str | None = None
    source: str = SOURCE_DIRECT
    builtin: bool = False
    hooks: tuple[str, ...] = ()
    registers: tuple[str, ...] = ()
    status: str = "ok"
    error: str | None = None
    api_version: str | None = None

    @property
    def ok(self) -> bool:
        """True when the plugin loaded and every hook of it worked."""
        return self.status == "ok"


@dataclass
class _State:
    """The plugin manager and what loading it and calling its hooks found."""

    pm: pluggy.PluginManager
    #: registered plugin name -> how it was found (PluginInfo with the origin fields only)
    origins: dict[str, PluginInfo] = field(default_factory=dict)
    #: plugins that could not be registered at all
    load_failures: list[PluginInfo] = field(default_factory=list)
    #: (plugin name, hook or step) -> error text, for registered plugins
    problems: dict[tuple[str, str], str] = field(default_factory=dict)
    #: hook name -> {name: why it was refused}, for invalid entries of the last collection
    rejected: dict[str, dict[str, str]] = field(default_factory=dict)


_state: _State | None = None


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager that checks the plugin-API version at every ``register``: one made by the entry-point
    loader and one made directly (``get_plugin_manager().register(MyPlugin(), name="mine")``) alike."""

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        problem = hookspecs.plugin_api_problem(getattr(plugin, hookspecs.PLUGIN_API_ATTRIBUTE, None))
        if problem is not None:  # never registered: none of its hooks is called
            raise PluginError(f"plugin '{name or _describe(plugin)}' cannot be loaded: {problem}")
        return super().register(plugin, name)


# --------------------------------------------------------------------------------- manager
def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, created and loaded on first use.

    Returns:
        The :class:`pluggy.PluginManager` for project ``robotid_sim`` with every hookspec added
        and the built-in and installed plugins registered.
    """
    return _get_state().pm


def reset_plugin_manager() -> None:
    """Forget the plugin manager and every recorded problem; the next use loads afresh.

    Meant for tests (e.g. after changing ``ROBOTID_SIM_PLUGINS`` or ``sys.path``).
    """
    global _state
    _state = None


def _get_state() -> _State:
    global _state
    if _state is None:
        pm = _PluginManager(hookspecs.PROJECT_NAME)
        pm.add_hookspecs(hookspecs)
        state = _State(pm)
        _state = state  # set before loading so a plugin importing robotid_sim.plugins sees it
        try:
            _load_plugins(state)
        except BaseException:
            _state = None
            raise
    return _state


def selected_plugins() -> set[str] | None:
    """Third-party plugins allowed by ``ROBOTID_SIM_PLUGINS``.

    The variable holds comma-separated entry-point names or distribution names
    (``"myestimator,robotid-sim-other"``; spaces ignored, distribution names compared
    case-insensitively with ``-``, ``_`` and ``.`` equivalent).

    Returns:
        None when the variable is unset (load every installed plugin); otherwise the set of
        allowed names, empty for an empty string (load no third-party plugin). The built-in
        plugins load whatever the variable says, so the core always works.
    """
    raw = os.environ.get(PLUGINS_ENV_VAR)
    if raw is None:
        return None
    return {_normalise(part) for part in raw.split(",") if part.strip()}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _distribution_of(ep: importlib.metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    try:
        return dist.metadata["Name"], dist.version
    except Exception:  # malformed metadata must not stop loading
        return None, None


def _own_version() -> str | None:
    try:
        return importlib.metadata.version(DISTRIBUTION_NAME)
    except importlib.metadata.PackageNotFoundError:
        return None


def _is_builtin(ep: importlib.metadata.EntryPoint) -> bool:
    module = ep.module
    if module in DEFAULT_PLUGINS or module.startswith(BUILTIN_PACKAGE + "."):
        return True
    dist_name, _ = _distribution_of(ep)
    return dist_name is not None and _normalise(dist_name) == DISTRIBUTION_NAME


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _installed_entry_points() -> list[importlib.metadata.EntryPoint]:
    try:
        return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception as exc:  # a broken dist-info somewhere on sys.path
        logger.warning(
            "could not read '%s' entry points (%s); loading built-in plugins only", ENTRY_POINT_GROUP, _error_text(exc)
        )
        return []


def _load_plugins(state: _State) -> None:
    entry_points = _installed_entry_points()
    builtin = [ep for ep in entry_points if _is_builtin(ep)]
    external = [ep for ep in entry_points if not _is_builtin(ep)]

    # built-ins in DEFAULT_PLUGINS order (``core`` first), each through its entry point or, with
    # stale metadata, imported directly in its place; then any other built-in entry point
    for module_name in DEFAULT_PLUGINS:
        declared = sorted((ep for ep in builtin if ep.module == module_name), key=lambda ep: ep.name)
        for ep in declared:
            _register_entry_point(state, ep, builtin=True)
        if not declared:
            logger.debug("no entry point for built-in plugin %s (stale metadata?); importing it directly", module_name)
            origin = PluginInfo(
                name=module_name.rsplit(".", 1)[-1],
                distribution=DISTRIBUTION_NAME,
                version=_own_version(),
                module=module_name,
                source=SOURCE_FALLBACK,
                builtin=True,
            )
            _register(state, lambda m=module_name: importlib.import_module(m), origin)
    for ep in sorted((ep for ep in builtin if ep.module not in DEFAULT_PLUGINS), key=lambda ep: ep.name):
        _register_entry_point(state, ep, builtin=True)

    allowed = selected_plugins()
    seen = {
        _normalise(name)
        for name in [DISTRIBUTION_NAME, *(ep.name for ep in builtin), *(m.rsplit(".", 1)[-1] for m in DEFAULT_PLUGINS)]
    }
    for ep in sorted(external, key=lambda e: (_normalise(_distribution_of(e)[0] or ""), e.name)):
        dist_name, _ = _distribution_of(ep)
        keys = {_normalise(ep.name)} | ({_normalise(dist_name)} if dist_name else set())
        seen |= keys
        if allowed is not None and not keys & allowed:
            logger.debug("plugin %s (%s) not loaded: not in %s", ep.name, dist_name, PLUGINS_ENV_VAR)
            continue
        _register_entry_point(state, ep, builtin=False)
    if allowed:
        for name in sorted(allowed - seen):
            logger.warning(
                "%s names '%s', but no installed plugin has that entry-point or distribution name",
                PLUGINS_ENV_VAR,
                name,
            )
    _check_pending(state)


def _register_entry_point(state: _State, ep: importlib.metadata.EntryPoint, builtin: bool) -> None:
    dist_name, version = _distribution_of(ep)
    origin = PluginInfo(
        name=ep.name,
        distribution=dist_name,
        version=version,
        module=ep.module,
        source=SOURCE_ENTRY_POINT,
        builtin=builtin,
    )
    _register(state, ep.load, origin)


def _register(state: _State, load: Callable[[], Any], origin: PluginInfo) -> None:
    """Import a plugin with ``load()`` and register it under ``origin.name``; record any failure."""
    pm = state.pm

    def fail(error: str) -> None:
        logger.warning("plugin '%s' (%s) is broken: %s", origin.name, origin.distribution or origin.module, error)
        state.load_failures.append(_with(origin, status="broken", error=error))

    if pm.has_plugin(origin.name):
        other = state.origins.get(origin.name)
        by = f"{other.module} ({other.distribution})" if other else "another plugin"
        fail(f"PluginError: plugin name '{origin.name}' is already taken by {by}; rename the entry point")
        return
    try:
        plugin = load()
    except Exception as exc:
        logger.debug("importing plugin '%s' failed", origin.name, exc_info=True)
        fail(_error_text(exc))
        return
    origin = _with(origin, api_version=_declared_api_version(plugin), path=getattr(plugin, "__file__", None))
    if pm.is_registered(plugin):
        fail(f"PluginError: {_describe(plugin)} is already registered as plugin '{pm.get_name(plugin)}'")
        return
    try:
        pm.register(plugin, name=origin.name)
    except Exception as exc:  # a plugin-API version not provided; pluggy.PluginValidationError: unknown arguments
        fail(_error_text(exc))
        return
    state.origins[origin.name] = _with(
        origin, path=getattr(plugin, "__file__", None), module=getattr(plugin, "__name__", None) or origin.module
    )
    logger.debug("registered plugin '%s' from %s", origin.name, origin.source)


def _declared_api_version(plugin: Any) -> str | None:
    declared = getattr(plugin, hookspecs.PLUGIN_API_ATTRIBUTE, None)
    return None if declared is None else str(declared)


def _with(info: PluginInfo, **changes: Any) -> PluginInfo:
    return PluginInfo(**{**info.__dict__, **changes})


def _describe(plugin: Any) -> str:
    return getattr(plugin, "__name__", None) or type(plugin).__name__


def _check_pending(state: _State) -> None:
    """``pm.check_pending()``, but recording every offending plugin instead of raising."""
    try:
        state.pm.check_pending()
        return
    except pluggy.PluginValidationError:
        pass
    known = ", ".join(sorted(_HOOKS))
    for name, caller in vars(state.pm.hook).items():
        if not isinstance(caller, pluggy.HookCaller) or caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if not impl.optionalhook:
                _set_problem(
                    state,
                    impl.plugin_name,
                    f"hook {name}",
                    f"PluginValidationError: '{name}' is not a robotid_sim hook; known hooks: {known}",
                )


def _set_problem(state: _State, plugin_name: str, where: str, error: str | None) -> None:
    key = (plugin_name, where)
    if error is None:
        state.problems.pop(key, None)
        return
    if state.problems.get(key) != error:
        logger.warning("plugin '%s' is broken: %s", plugin_name, error)
    state.problems[key] = error


# ------------------------------------------------------------------------------ registries
class _Invalid(Exception):
    """An entry a plugin registered is not what its hook expects; the message says what is."""


def _describe_value(obj: Any) -> str:
    if inspect.isclass(obj):
        return f"class {obj.__module__}.{obj.__qualname__}"
    text = repr(obj)
    return f"{type(obj).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _registry_base(hook_name: str, obj: Any) -> type | None:
    """The base class in ``obj``'s MRO that declares itself the base of ``hook_name``'s entries, or None.

    A registrable base class (``Estimator``, ``Controller``, ``NoiseModel``, ``IdentifiedModel``) names its
    hook in its own class attribute :data:`~robotid_sim.hookspecs.REGISTRY_HOOK_ATTRIBUTE` and provides the
    classmethods ``registered_name()`` and ``registration_problem(name)``; this registry calls them through the
    registered class and never imports a base class.
    """
    if not inspect.isclass(obj):
        return None
    return next((k for k in obj.__mro__ if vars(k).get(hookspecs.REGISTRY_HOOK_ATTRIBUTE) == hook_name), None)


def _class_check(hook_name: str, expected: str) -> Callable[[str, Any], type]:
    """A validator for a hook whose entries are subclasses of a registrable base class.

    Args:
        hook_name: the hook.
        expected: what is expected of an entry that is not such a subclass; ``{name}`` stands for the name.
    """

    def check(name: str, obj: Any) -> type:
        if _registry_base(hook_name, obj) is None:
            raise _Invalid(expected.format(name=name))
        try:
            problem = obj.registration_problem(name)
        except Exception as exc:  # a plugin's override must not break the registry
            problem = f"a class whose registration_problem works (it raised {_error_text(exc)})"
        if problem is not None:
            raise _Invalid(problem)
        return obj

    return check


def _check_excitation(name: str, obj: Any) -> Callable[..., Any]:
    if not callable(obj):
        raise _Invalid("a callable factory(config, robot) -> Excitation")
    return obj


def _check_robot_dir(name: str, obj: Any) -> Path:
    expected = "a directory (str or Path) holding robot.urdf and, optionally, robot.yaml"
    if not isinstance(obj, str | os.PathLike):
        raise _Invalid(expected)
    path = Path(obj)
    if not (path / "robot.urdf").is_file():
        raise _Invalid(f"{expected}; {path} has no robot.urdf")
    return path


@dataclass(frozen=True)
class _Hook:
    """One registry: what its hook registers and how an entry is checked."""

    #: the kind of thing registered, for messages (``"estimator"``)
    kind: str
    #: validator(name, obj) -> the value stored, raising :class:`_Invalid`
    check: Callable[[str, Any], Any]
    #: the name of an entry registered without one (``register(cls)``), or None when it has none of its own
    own_name: Callable[[Any], str | None]


def _class_name(hook_name: str) -> Callable[[Any], str | None]:
    """The name a class registered through ``hook_name`` gives itself (its ``registered_name()``), or None."""

    def own_name(obj: Any) -> str | None:
        if _registry_base(hook_name, obj) is None:
            return None
        try:
            return obj.registered_name()
        except Exception:  # a plugin's override must not break the registry: the entry is refused as nameless
            logger.debug("registered_name() of %s raised", _describe_value(obj), exc_info=True)
            return None

    return own_name


def _directory_name(obj: Any) -> str | None:
    return Path(obj).name if isinstance(obj, str | os.PathLike) else None


_HOOKS: dict[str, _Hook] = {
    "register_estimators": _Hook(
        "estimator",
        _class_check("register_estimators", "a subclass of robotid_sim.identification.Estimator"),
        _class_name("register_estimators"),
    ),
    "register_controllers": _Hook(
        "controller",
        _class_check("register_controllers", "a subclass of robotid_sim.control.Controller"),
        _class_name("register_controllers"),
    ),
    "register_robots": _Hook("robot", _check_robot_dir, _directory_name),
    "register_noise_models": _Hook(
        "noise model",
        _class_check(
            "register_noise_models",
            "a subclass of robotid_sim.sim.noise.NoiseModel that is a frozen dataclass with kind = '{name}'",
        ),
        _class_name("register_noise_models"),
    ),
    "register_excitations": _Hook("excitation", _check_excitation, lambda obj: None),
    "register_model_kinds": _Hook(
        "model kind",
        _class_check("register_model_kinds", "a subclass of robotid_sim.identification.IdentifiedModel"),
        _class_name("register_model_kinds"),
    ),
}

_NO_NAME = object()


def _collect(hook_name: str) -> dict[str, tuple[Any, str]]:
    """Call every implementation of ``hook_name`` on its own; ``{name: (value, plugin name)}``.

    Implementations are called in plugin registration order (built-ins first), so the first
    plugin to register a name keeps it. Problems are recorded per (plugin, hook) and replace
    earlier ones; refused entries are remembered in ``state.rejected[hook_name]``.
    """
    state = _get_state()
    order = {id(plugin): k for k, (_, plugin) in enumerate(state.pm.list_name_plugin())}
    impls = sorted(
        getattr(state.pm.hook, hook_name).get_hookimpls(), key=lambda impl: order.get(id(impl.plugin), len(order))
    )
    found: dict[str, tuple[Any, str]] = {}
    rejected: dict[str, str] = {}
    for impl in impls:
        plugin = impl.plugin_name
        if impl.hookwrapper or impl.wrapper:
            _set_problem(state, plugin, hook_name, f"PluginError: {hook_name} cannot be a hook wrapper")
            continue
        entries: list[tuple[Any, Any]] = []

        def register(name: Any, obj: Any = _NO_NAME, _entries: list = entries) -> None:
            _entries.append((_NO_NAME, name) if obj is _NO_NAME else (name, obj))

        try:
            impl.function(*[{"register": register}[arg] for arg in impl.argnames])
        except Exception as exc:
            logger.debug("%s of plugin '%s' raised", hook_name, plugin, exc_info=True)
            _set_problem(state, plugin, hook_name, f"{_error_text(exc)} (in {hook_name})")
            continue
        errors = [_add_entry(hook_name, plugin, name, obj, found, rejected) for name, obj in entries]
        _set_problem(state, plugin, hook_name, "; ".join(error for error in errors if error) or None)
    state.rejected[hook_name] = {name: error for name, error in rejected.items() if name not in found}
    return found


def _add_entry(
    hook_name: str, plugin: str, name: Any, obj: Any, found: dict[str, tuple[Any, str]], rejected: dict[str, str]
) -> str | None:
    """Check one entry of ``plugin`` and add it to ``found``; the error text when it is refused, else None.

    ``name`` is :data:`_NO_NAME` for ``register(obj)``: the entry's own name is used (a class's
    ``registered_name()``, a robot directory's name).
    """
    hook = _HOOKS[hook_name]
    if name is _NO_NAME:
        name = hook.own_name(obj)
        if name is None:
            return (
                f"PluginError: plugin '{plugin}' registers {hook.kind} {_describe_value(obj)} without a name; "
                f"expected register(name, {hook.kind.replace(' ', '_')}) or an entry that names itself"
            )
    if not isinstance(name, str) or not name.strip():
        return (
            f"PluginError: plugin '{plugin}' registers a {hook.kind} named {name!r}; "
            "expected a non-empty string as its name"
        )
    try:
        value = hook.check(name, obj)
    except _Invalid as exc:
        error = (
            f"PluginError: plugin '{plugin}' registers {hook.kind} '{name}' as {_describe_value(obj)}; expected {exc}"
        )
        rejected.setdefault(name, error)
        return error
    if name in found:
        return (
            f"PluginError: {hook.kind} '{name}' is already registered by plugin '{found[name][1]}'; "
            f"plugin '{plugin}' cannot register it again (the first registration wins: rename it)"
        )
    found[name] = (value, plugin)
    return None


def _registry(hook_name: str) -> dict[str, Any]:
    return {name: value for name, (value, _) in _collect(hook_name).items()}


def estimators() -> dict[str, type]:
    """Estimator classes (``Estimator`` subclasses) by name, from every working plugin (built-ins first)."""
    return _registry("register_estimators")


def controllers() -> dict[str, type]:
    """Controller classes by name, from every working plugin (built-ins first)."""
    return _registry("register_controllers")


def robots() -> dict[str, Path]:
    """Robot directories (each holding ``robot.urdf`` + optional ``robot.yaml``) by name.

    The bundled robots (registered by the built-in ``core`` plugin) come first, then those of
    other plugins; :func:`robotid_sim.robot.load_robot` and ``bundled_robots()`` read this.
    """
    return _registry("register_robots")


def noise_models() -> dict[str, type]:
    """Noise model classes (``NoiseModel`` subclasses) by ``type`` name, built-ins first."""
    return _registry("register_noise_models")


def excitations() -> dict[str, Callable[..., Any]]:
    """Excitation factories ``factory(config, robot)`` by ``type`` name, built-ins first."""
    return _registry("register_excitations")


def model_kinds() -> dict[str, type]:
    """Identified-model classes (``IdentifiedModel`` subclasses) by ``kind``, for ``load_model``."""
    return _registry("register_model_kinds")


def _lookup(hook_name: str, name: str) -> Any:
    kind = _HOOKS[hook_name].kind
    registry = _registry(hook_name)
    if name in registry:
        return registry[name]
    refused = rejected(hook_name).get(name)
    if refused is not None:
        raise PluginError(f"{kind} '{name}' cannot be used: {refused.removeprefix('PluginError: ')}")
    raise PluginError(
        f"unknown {kind} '{name}'; known: {', '.join(registry) or '(none)'}{unknown_name_hint(name, registry)}"
    )


def rejected(hook_name: str) -> dict[str, str]:
    """Names registered through ``hook_name`` whose entries were refused, with the reason.

    As found by the last call of that registry (``estimators()``, ``get_estimator(...)``, ...):
    ``{name: "PluginError: plugin 'p' registers estimator 'name' as ...; expected ..."}``.
    """
    return dict(_get_state().rejected.get(hook_name, {}))


def unknown_name_hint(name: Any, known: Any) -> str:
    """What to append to an "unknown name" message: a close match, and the broken plugins.

    Returns:
        ``" (did you mean 'ols'?). Broken plugins: a, b; run 'robotid-sim plugins' for their
        errors"``, either part left out when empty; ``""`` when neither applies.
    """
    hint = ""
    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    if close:
        hint += f" (did you mean '{close[0]}'?)"
    broken = [info.name for info in broken_plugins()]
    if broken:
        hint += f". Broken plugins: {', '.join(broken)}; run 'robotid-sim plugins' for their errors"
    return hint


def get_estimator(name: str) -> type:
    """The estimator class registered as ``name``.

    Raises:
        PluginError: no plugin registers ``name`` (the message lists the known estimators and
            any broken plugins, which may be where it was expected to come from), or the class
            registered under it was refused (the message says why).
    """
    return _lookup("register_estimators", name)


def get_controller(name: str) -> type:
    """The controller class registered as ``name``.

    Raises:
        PluginError: no plugin registers ``name`` (the message lists the known controllers), or
            what was registered under it was refused.
    """
    return _lookup("register_controllers", name)


def get_noise_model(name: str) -> type:
    """The noise model class registered as ``name`` (the ``type`` of a ``noise.models`` entry).

    Raises:
        PluginError: no plugin registers ``name`` (the message lists the known noise models),
            or what was registered under it was refused.
    """
    return _lookup("register_noise_models", name)


def get_excitation(name: str) -> Callable[..., Any]:
    """The excitation factory registered as ``name`` (the ``type`` of an excitation mapping).

    Raises:
        PluginError: no plugin registers ``name`` (the message lists the known excitation
            types), or what was registered under it was refused.
    """
    return _lookup("register_excitations", name)


def get_model_kind(name: str) -> type:
    """The identified-model class registered for ``kind`` ``name`` (used by ``load_model``).

    Raises:
        PluginError: no plugin registers ``name`` (the message lists the known kinds), or what
            was registered under it was refused.
    """
    return _lookup("register_model_kinds", name)


# ---------------------------------------------------------------------------------- listing
def list_plugins() -> list[PluginInfo]:
    """Every plugin: the registered ones, then those that failed to load.

    Calls every registry hook first, so ``registers`` and ``status`` are current.

    Returns:
        One :class:`PluginInfo` per plugin, in registration order.
    """
    state = _get_state()
    contributed: dict[str, list[str]] = {}
    for hook_name, hook in _HOOKS.items():
        for name, (_, plugin) in _collect(hook_name).items():
            contributed.setdefault(plugin, []).append(f"{hook.kind} {name}")
    infos = []
    for name, plugin in state.pm.list_name_plugin():
        origin = state.origins.get(name) or PluginInfo(
            name=name,
            module=_describe(plugin),
            path=getattr(plugin, "__file__", None),
            api_version=_declared_api_version(plugin),
        )
        errors = [error for (owner, _), error in state.problems.items() if owner == name]
        hooks = tuple(sorted(caller.name for caller in state.pm.get_hookcallers(plugin) or ()))
        infos.append(
            _with(
                origin,
                name=name,
                hooks=hooks,
                registers=tuple(contributed.get(name, ())),
                status="broken" if errors else "ok",
                error="; ".join(errors) or None,
            )
        )
    return infos + list(state.load_failures)


def broken_plugins() -> list[PluginInfo]:
    """The plugins of :func:`list_plugins` whose status is ``"broken"``."""
    return [info for info in list_plugins() if not info.ok]
