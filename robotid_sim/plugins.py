"""The one plugin manager: entry-point loading, error isolation and the registries (SPEC §12).

Loading (done once, lazily, by :func:`get_plugin_manager`):

1. **Built-in plugins** — the modules of ``plugins/`` (package ``robotid_sim_plugins``) — are
   declared as entry points of the ``robotid_sim`` group in robotid_sim's own ``pyproject.toml``
   and are loaded through those entry points exactly like third-party plugins. They are
   registered first, in :data:`DEFAULT_PLUGINS` order, so a built-in name always wins.
   *Fallback:* a module of :data:`DEFAULT_PLUGINS` that no installed entry point points to
   (stale package metadata, e.g. an editable install made before the entry points were
   added, or a source checkout on ``sys.path``) is imported directly, so the core estimators
   always work; :func:`list_plugins` shows it with ``source="built-in (no entry point)"``.
2. **Third-party plugins**: every other entry point of the group, sorted by distribution and
   entry-point name. The environment variable :data:`PLUGINS_ENV_VAR`
   (``ROBOTID_SIM_PLUGINS``) limits which of them load (see :func:`selected_plugins`).
3. ``pm.check_pending()``: a hook implementation whose name is not a hook (a typo such as
   ``register_estimator``) marks its plugin broken.

Error isolation: nothing that a plugin does can break the others or the core.

- A plugin that fails to import or to register is not registered; it is recorded as broken.
- Registries are built by calling each plugin's hook implementation separately with a
  ``register`` callback. A hook that raises contributes nothing to that registry, and its
  plugin is recorded as broken; the other plugins' entries are unaffected.
- Duplicate names: the first plugin to register a name keeps it (built-ins load first); a later
  plugin registering the same name is recorded as broken with an error naming both plugins, and
  its other entries still count.
- Invalid entries (a non-class estimator, a robot directory without ``robot.urdf``, ...) are
  skipped and recorded the same way.

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
#: points to them (stale metadata), otherwise loaded through their entry points
DEFAULT_PLUGINS: tuple[str, ...] = (
    "robotid_sim_plugins.ols",
    "robotid_sim_plugins.wls",
    "robotid_sim_plugins.irls",
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


_state: _State | None = None


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
        pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
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
        logger.warning("could not read '%s' entry points (%s); loading built-in plugins only",
                       ENTRY_POINT_GROUP, _error_text(exc))
        return []


def _load_plugins(state: _State) -> None:
    entry_points = _installed_entry_points()
    builtin = [ep for ep in entry_points if _is_builtin(ep)]
    external = [ep for ep in entry_points if not _is_builtin(ep)]

    def builtin_order(ep: importlib.metadata.EntryPoint) -> tuple[int, str]:
        rank = DEFAULT_PLUGINS.index(ep.module) if ep.module in DEFAULT_PLUGINS else len(DEFAULT_PLUGINS)
        return rank, ep.name

    for ep in sorted(builtin, key=builtin_order):
        _register_entry_point(state, ep, builtin=True)
    covered = {ep.module for ep in builtin}
    for module_name in DEFAULT_PLUGINS:
        if module_name not in covered:
            logger.debug("no entry point for built-in plugin %s (stale metadata?); importing it directly",
                         module_name)
            origin = PluginInfo(name=module_name.rsplit(".", 1)[-1], distribution=DISTRIBUTION_NAME,
                                version=_own_version(), module=module_name, source=SOURCE_FALLBACK,
                                builtin=True)
            _register(state, lambda m=module_name: importlib.import_module(m), origin)

    allowed = selected_plugins()
    seen = {_normalise(name) for name in [DISTRIBUTION_NAME, *(ep.name for ep in builtin),
                                          *(m.rsplit(".", 1)[-1] for m in DEFAULT_PLUGINS)]}
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
            logger.warning("%s names '%s', but no installed plugin has that entry-point or distribution name",
                           PLUGINS_ENV_VAR, name)
    _check_pending(state)


def _register_entry_point(state: _State, ep: importlib.metadata.EntryPoint, builtin: bool) -> None:
    dist_name, version = _distribution_of(ep)
    origin = PluginInfo(name=ep.name, distribution=dist_name, version=version, module=ep.module,
                        source=SOURCE_ENTRY_POINT, builtin=builtin)
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
    if pm.is_registered(plugin):
        fail(f"PluginError: {_describe(plugin)} is already registered as plugin '{pm.get_name(plugin)}'")
        return
    try:
        pm.register(plugin, name=origin.name)
    except Exception as exc:  # pluggy.PluginValidationError: a hookimpl with unknown arguments
        fail(_error_text(exc))
        return
    state.origins[origin.name] = _with(origin, path=getattr(plugin, "__file__", None),
                                       module=getattr(plugin, "__name__", None) or origin.module)
    logger.debug("registered plugin '%s' from %s", origin.name, origin.source)


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
                _set_problem(state, impl.plugin_name, f"hook {name}",
                             f"PluginValidationError: '{name}' is not a robotid_sim hook; known hooks: {known}")


def _set_problem(state: _State, plugin_name: str, where: str, error: str | None) -> None:
    key = (plugin_name, where)
    if error is None:
        state.problems.pop(key, None)
        return
    if state.problems.get(key) != error:
        logger.warning("plugin '%s' is broken: %s", plugin_name, error)
    state.problems[key] = error


# ------------------------------------------------------------------------------ registries
def _check_name(kind: str, name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise PluginError(f"a {kind} name must be a non-empty string, got {name!r}")
    return name


def _check_class(kind: str, name: str, obj: Any) -> Any:
    if not inspect.isclass(obj):
        raise PluginError(f"{kind} '{name}' must be a class, got {type(obj).__name__} {obj!r}")
    return obj


def _check_callable(kind: str, name: str, obj: Any) -> Any:
    if not callable(obj):
        raise PluginError(f"{kind} '{name}' must be callable as factory(config, robot), got {type(obj).__name__}")
    return obj


def _check_robot_dir(kind: str, name: str, obj: Any) -> Path:
    try:
        path = Path(obj)
    except TypeError as exc:
        raise PluginError(f"{kind} '{name}' must be a directory path, got {type(obj).__name__}") from exc
    if not (path / "robot.urdf").is_file():
        raise PluginError(f"{kind} '{name}': directory {path} has no robot.urdf (expected robot.urdf + robot.yaml)")
    return path


#: hook name -> (kind of thing registered, validator(kind, name, obj) -> stored value)
_HOOKS: dict[str, tuple[str, Callable[[str, str, Any], Any]]] = {
    "register_estimators": ("estimator", _check_class),
    "register_controllers": ("controller", _check_class),
    "register_robots": ("robot", _check_robot_dir),
    "register_noise_models": ("noise model", _check_class),
    "register_excitations": ("excitation", _check_callable),
}


def _collect(hook_name: str) -> dict[str, tuple[Any, str]]:
    """Call every implementation of ``hook_name`` on its own; ``{name: (value, plugin name)}``.

    Implementations are called in plugin registration order, so the first plugin to register a
    name keeps it. Problems are recorded per (plugin, hook) and replace earlier ones.
    """
    state = _get_state()
    kind, check = _HOOKS[hook_name]
    order = {id(plugin): k for k, (_, plugin) in enumerate(state.pm.list_name_plugin())}
    impls = sorted(getattr(state.pm.hook, hook_name).get_hookimpls(),
                   key=lambda impl: order.get(id(impl.plugin), len(order)))
    found: dict[str, tuple[Any, str]] = {}
    for impl in impls:
        plugin = impl.plugin_name
        if impl.hookwrapper or impl.wrapper:
            _set_problem(state, plugin, hook_name, f"PluginError: {hook_name} cannot be a hook wrapper")
            continue
        entries: list[tuple[Any, Any]] = []

        def register(name: str, obj: Any, _entries: list = entries) -> None:
            _entries.append((name, obj))

        try:
            impl.function(*[{"register": register}[arg] for arg in impl.argnames])
        except Exception as exc:
            logger.debug("%s of plugin '%s' raised", hook_name, plugin, exc_info=True)
            _set_problem(state, plugin, hook_name, f"{_error_text(exc)} (in {hook_name})")
            continue
        errors = []
        for name, obj in entries:
            try:
                value = check(kind, _check_name(kind, name), obj)
            except PluginError as exc:
                errors.append(_error_text(exc))
                continue
            if name in found:
                owner = found[name][1]
                errors.append(f"PluginError: {kind} '{name}' is already registered by plugin '{owner}'; "
                              f"plugin '{plugin}' cannot register it again (rename it)")
                continue
            found[name] = (value, plugin)
        _set_problem(state, plugin, hook_name, "; ".join(errors) or None)
    return found


def _registry(hook_name: str) -> dict[str, Any]:
    return {name: value for name, (value, _) in _collect(hook_name).items()}


def estimators() -> dict[str, type]:
    """Estimator classes by name, from every working plugin (built-ins first)."""
    return _registry("register_estimators")


def controllers() -> dict[str, type]:
    """Controller classes by name, from every working plugin."""
    return _registry("register_controllers")


def plugin_robot_dirs() -> dict[str, Path]:
    """Robot directories (each holding ``robot.urdf`` + ``robot.yaml``) added by plugins."""
    return _registry("register_robots")


def noise_models() -> dict[str, type]:
    """Noise model classes by name, from every working plugin."""
    return _registry("register_noise_models")


def excitations() -> dict[str, Callable[..., Any]]:
    """Excitation factories ``factory(config, robot)`` by type name, from every working plugin."""
    return _registry("register_excitations")


def _lookup(kind: str, registry: dict[str, Any], name: str) -> Any:
    if name in registry:
        return registry[name]
    message = f"unknown {kind} '{name}'; known: {', '.join(registry) or '(none)'}"
    close = difflib.get_close_matches(str(name), list(registry), n=1)
    if close:
        message += f" (did you mean '{close[0]}'?)"
    broken = [info.name for info in broken_plugins()]
    if broken:
        message += f". Broken plugins: {', '.join(broken)}; run 'robotid-sim plugins' for their errors"
    raise PluginError(message)


def get_estimator(name: str) -> type:
    """The estimator class registered as ``name``.

    Raises:
        PluginError: no plugin registers ``name``; the message lists the known estimators (and
            any broken plugins, which may be where it was expected to come from).
    """
    return _lookup("estimator", estimators(), name)


def get_controller(name: str) -> type:
    """The controller class registered as ``name``.

    Raises:
        PluginError: no plugin registers ``name``; the message lists the known controllers.
    """
    return _lookup("controller", controllers(), name)


def get_noise_model(name: str) -> type:
    """The noise model class registered as ``name``.

    Raises:
        PluginError: no plugin registers ``name``; the message lists the known noise models.
    """
    return _lookup("noise model", noise_models(), name)


def get_excitation(name: str) -> Callable[..., Any]:
    """The excitation factory registered as ``name``.

    Raises:
        PluginError: no plugin registers ``name``; the message lists the known excitations.
    """
    return _lookup("excitation", excitations(), name)


# ---------------------------------------------------------------------------------- listing
def list_plugins() -> list[PluginInfo]:
    """Every plugin: the registered ones, then those that failed to load.

    Calls every registry hook first, so ``registers`` and ``status`` are current.

    Returns:
        One :class:`PluginInfo` per plugin, in registration order.
    """
    state = _get_state()
    contributed: dict[str, list[str]] = {}
    for hook_name, (kind, _) in _HOOKS.items():
        for name, (_, plugin) in _collect(hook_name).items():
            contributed.setdefault(plugin, []).append(f"{kind} {name}")
    infos = []
    for name, plugin in state.pm.list_name_plugin():
        origin = state.origins.get(name) or PluginInfo(
            name=name, module=_describe(plugin), path=getattr(plugin, "__file__", None))
        errors = [error for (owner, _), error in state.problems.items() if owner == name]
        hooks = tuple(sorted(caller.name for caller in state.pm.get_hookcallers(plugin) or ()))
        infos.append(_with(origin, name=name, hooks=hooks, registers=tuple(contributed.get(name, ())),
                           status="broken" if errors else "ok", error="; ".join(errors) or None))
    return infos + list(state.load_failures)


def broken_plugins() -> list[PluginInfo]:
    """The plugins of :func:`list_plugins` whose status is ``"broken"``."""
    return [info for info in list_plugins() if not info.ok]
