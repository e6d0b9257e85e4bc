"""The plugin development kit: ``robotid-sim plugin new NAME`` writes a ready-to-install plugin package.

:func:`new_plugin` renders the templates in ``templates/`` (package data; ``string.Template``
placeholders such as ``$name``, no dependency) into a folder ``robotid-sim-<name>/``::

    robotid-sim-<name>/
      pyproject.toml              the entry point [project.entry-points.robotid_sim] <name> = "robotid_sim_<name>"
      README.md                   install, use, make it yours, publish
      .gitignore
      robotid_sim_<name>/__init__.py   a skeleton that already works, with the @hookimpl that registers it
      tests/test_<name>.py        tests using robotid_sim.testing / the public API

One skeleton per kind (:data:`PLUGIN_KINDS`): an ``estimator`` (least squares on the base
regressor), a ``controller`` (PD with gravity compensation), an ``excitation`` (a random Fourier
series) and a ``noise`` model (offset plus white noise). The generated package declares the
current plugin-API version (:data:`robotid_sim.hookspecs.PLUGIN_API_VERSION`), passes its own
tests and ``ruff check`` / ``ruff format --check`` as written.
"""

from __future__ import annotations

import contextlib
import keyword
import os
import re
import shutil
import string
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from robotid_sim.errors import ConfigError
from robotid_sim.run_folder import check_writable_folder

#: the kinds of plugin ``plugin new`` can write, and the registry each one's name goes into
PLUGIN_KINDS: dict[str, str] = {
    "estimator": "estimators",
    "controller": "controllers",
    "excitation": "excitations",
    "noise": "noise_models",
}
#: a plugin name: lower-case letters, digits and '_', starting with a letter (it names the module too)
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,29}")
#: names a configuration file cannot give as a plugin name: ``default`` means the robot's own excitation
#: (``excitation: default``, ``--reference default``), and YAML reads the others unquoted as null or booleans
RESERVED_NAMES = frozenset({"default", "null", "true", "false", "yes", "no", "on", "off"})
#: prefix of the generated module (``robotid_sim_<name>``) and distribution (``robotid-sim-<name>``)
PACKAGE_PREFIX = "robotid_sim_"

_DESCRIPTIONS = {
    "estimator": "the robotid_sim estimator '{name}' (least squares on the base regressor, to make your own)",
    "controller": "the robotid_sim controller '{name}' (PD with gravity compensation, to make your own)",
    "excitation": "the robotid_sim excitation type '{name}' (a random Fourier series, to make your own)",
    "noise": "the robotid_sim noise model '{name}' (offset plus white noise, to make your own)",
}
_WHAT = {
    "estimator": "the estimator class",
    "controller": "the controller class",
    "excitation": "the excitation factory",
    "noise": "the noise model class",
}
_SUFFIX = {"estimator": "Estimator", "controller": "Controller", "excitation": "Excitation", "noise": "Noise"}


@dataclass(frozen=True)
class PluginNames:
    """Every name of a plugin package, derived from the plugin name.

    Attributes:
        name: the plugin name: entry-point name and registered name (``my_ridge``).
        package: the importable module (``robotid_sim_my_ridge``).
        distribution: the pip distribution and folder name (``robotid-sim-my-ridge``).
        class_name: the class (or, for an excitation, the options class prefix) (``MyRidgeEstimator``).
    """

    name: str
    package: str
    distribution: str
    class_name: str


def plugin_names(name: str, kind: str = "estimator") -> PluginNames:
    """Check ``name`` and derive the package, distribution and class names.

    Raises:
        ConfigError: ``name`` is not a valid plugin name (the message says what is expected and
            suggests one), or ``kind`` is not one of :data:`PLUGIN_KINDS`.
    """
    if kind not in PLUGIN_KINDS:
        raise ConfigError(f"unknown plugin kind '{kind}'; choose one of {', '.join(PLUGIN_KINDS)}")
    if not NAME_PATTERN.fullmatch(name) or keyword.iskeyword(name) or name in RESERVED_NAMES:
        if keyword.iskeyword(name):
            why = "a Python keyword"
        elif name in RESERVED_NAMES:
            why = "a word the configuration files give a meaning of their own"
        else:
            why = "not a valid plugin name"
        hint = f" (e.g. '{suggested_name(name)}')" if suggested_name(name) else ""
        raise ConfigError(
            f"'{name}' is {why}: use 1 to 30 lower-case letters, digits and '_', starting with a letter{hint}, "
            "not a Python keyword; it becomes the registered name, the entry-point name and the module "
            "robotid_sim_<name>"
        )
    class_name = "".join(part.capitalize() for part in name.split("_") if part) + _SUFFIX[kind]
    return PluginNames(name, PACKAGE_PREFIX + name, (PACKAGE_PREFIX + name).replace("_", "-"), class_name)


def suggested_name(name: str, taken=lambda candidate: False) -> str | None:
    """A valid plugin name close to ``name``: lower case, other characters as '_', a keyword, a reserved word or a
    ``taken`` one prefixed with ``my_`` (then numbered); None when nothing of ``name`` is usable."""
    base = re.sub(r"[^a-z0-9_]+", "_", name.strip().lower()).strip("_")
    base = re.sub(r"^[0-9_]+", "", base)[:30]
    if not base:
        return None
    candidates = [base, f"my_{base}"[:30], *(f"my_{base}"[:28] + f"_{k}" for k in range(2, 10))]
    for candidate in candidates:
        if (
            NAME_PATTERN.fullmatch(candidate)
            and not keyword.iskeyword(candidate)
            and candidate not in RESERVED_NAMES
            and not taken(candidate)
        ):
            return candidate
    return None


def _name_taken(name: str, kind: str) -> str | None:
    """Why ``name`` would clash with an installed plugin or a registered name of this kind; None if free."""
    from robotid_sim import plugins

    registry = getattr(plugins, PLUGIN_KINDS[kind])()
    installed = {info.name for info in plugins.list_plugins()}
    suggestion = suggested_name(name, lambda candidate: candidate in registry or candidate in installed)
    hint = f" (e.g. '{suggestion}')" if suggestion else ""
    if name in registry:
        article = "an" if kind[0] in "aeiou" else "a"
        return (
            f"{article} {kind} named '{name}' is already registered (by an installed or built-in plugin) and the "
            f"first registration wins; choose another name{hint}"
        )
    if name in installed:
        return f"a plugin named '{name}' is already installed; choose another name{hint}"
    return None


def _template(relative: str) -> string.Template:
    text = resources.files(__name__).joinpath("templates", *relative.split("/")).read_text(encoding="utf-8")
    return string.Template(text)


def render_plugin(name: str, kind: str = "estimator") -> dict[str, str]:
    """The files of a new plugin package, rendered: ``{relative path: text}``.

    Raises:
        ConfigError: a bad ``name`` or ``kind`` (see :func:`plugin_names`).
    """
    from robotid_sim import __version__
    from robotid_sim.hookspecs import PLUGIN_API_VERSION

    names = plugin_names(name, kind)
    values = {
        "name": names.name,
        "package": names.package,
        "distribution": names.distribution,
        "class_name": names.class_name,
        "kind": kind,
        "api_version": PLUGIN_API_VERSION,
        "robotid_sim_version": __version__,
        "description": _DESCRIPTIONS[kind].format(name=name).capitalize(),
        "what": _WHAT[kind],
    }
    values["usage"] = _template(f"{kind}/usage.md.tmpl").substitute(values)
    values["make_it_yours"] = _template(f"{kind}/make_it_yours.md.tmpl").substitute(values)
    return {
        "pyproject.toml": _template("common/pyproject.toml.tmpl").substitute(values),
        "README.md": _template("common/README.md.tmpl").substitute(values),
        ".gitignore": _template("common/gitignore.tmpl").substitute(values),
        f"{names.package}/__init__.py": _template(f"{kind}/module.py.tmpl").substitute(values),
        f"tests/test_{names.name}.py": _template(f"{kind}/test.py.tmpl").substitute(values),
    }


def new_plugin(name: str, kind: str = "estimator", out: str | os.PathLike = ".", check_installed: bool = True) -> Path:
    """Write a new plugin package ``<out>/robotid-sim-<name>/`` and return its folder.

    The folder appears complete or not at all (written beside it, then renamed); an existing
    one is never touched.

    Args:
        name: the plugin name (see :func:`plugin_names`).
        kind: ``estimator``, ``controller``, ``excitation`` or ``noise``.
        out: the parent folder (made if missing).
        check_installed: refuse a name already registered for this kind, or an installed
            plugin's name (a clash would make the new plugin broken).

    Raises:
        ConfigError: a bad name or kind, a name already taken, or an existing folder.
    """
    files = render_plugin(name, kind)
    names = plugin_names(name, kind)
    parent = Path(out)
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"--out '{parent}' is a file; give a folder to write the plugin package in")
    target = parent / names.distribution
    if target.exists() or target.is_symlink():
        raise ConfigError(f"'{target}' already exists; remove it or choose another --out or name (never overwritten)")
    if check_installed:
        taken = _name_taken(name, kind)
        if taken:
            raise ConfigError(taken)
    check_writable_folder(parent, "--out folder")
    created = [folder for folder in (parent, *parent.parents) if not folder.exists()]  # innermost first
    parent.mkdir(parents=True, exist_ok=True)
    try:
        _write_package(files, parent, target)
    except BaseException:
        for folder in created:  # nothing is left behind: the folders made for it go too, if still empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return target


def _write_package(files: dict[str, str], parent: Path, target: Path) -> None:
    """``files`` written in a staging folder under ``parent``, renamed to ``target``; removed on failure."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        staging.chmod(0o777 & ~_umask())
        if target.exists():  # made meanwhile: never replace it
            raise ConfigError(f"'{target}' already exists; remove it or choose another --out or name")
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


__all__ = ["NAME_PATTERN", "PLUGIN_KINDS", "PluginNames", "new_plugin", "plugin_names", "render_plugin"]
