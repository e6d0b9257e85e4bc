"""The code-size and privacy rules of STYLE.md, checked on the source (issue 26, points 9 and 6).

- No private name is imported across modules: ``from robotid_sim.x import _y`` (or of ``robotid_sim_plugins``)
  in another module, and no private module (``robotid_sim.x._kernels``) imported from outside the package
  that holds it. Tests and benchmarks count too: they use public helpers (``robotid_sim.testing``).
- At most five functions are longer than 80 lines, and each says why in its docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"robotid_sim": ROOT / "robotid_sim", "robotid_sim_plugins": ROOT / "plugins"}
LONG_FUNCTION_LINES = 80
MAX_LONG_FUNCTIONS = 5
#: words a long function's docstring uses to say why it is not split
REASON_WORDS = ("not split", "cannot be split", "one pass", "single pass", "kernel")


def _module_name(path: Path) -> str | None:
    for package, folder in PACKAGES.items():
        if folder in path.parents:
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([package, *parts])
    return None


def _sources() -> list[Path]:
    files = [p for folder in PACKAGES.values() for p in folder.rglob("*.py")]
    files += list((ROOT / "tests").rglob("*.py")) + list((ROOT / "benchmarks").rglob("*.py"))
    return sorted(p for p in files if ".venv" not in p.parts and "templates" not in p.parts)


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _owner(module: str) -> str:
    """The package whose modules may share a private module: everything before its first private part."""
    parts = module.split(".")
    for k, part in enumerate(parts):
        if _private(part):
            return ".".join(parts[:k])
    return module


def private_imports() -> list[str]:
    """Every import of a private name or private module across modules, as ``file:line: what``."""
    found = []
    for path in _sources():
        importer = _module_name(path) or ""
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                modules = [(alias.name, "") for alias in node.names]
            else:
                continue
            for module, name in modules:
                if module.split(".")[0] not in PACKAGES or module == importer:
                    continue
                target = f"{module}.{name}" if name else module
                owner = _owner(target)
                if owner != target and not importer.startswith(owner + ".") and importer != owner:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target}")
    return found


def long_functions() -> list[tuple[str, int, str]]:
    """Every function of the package and plugins over the limit: ``(file:line name, lines, docstring)``."""
    found = []
    for path in _sources():
        if _module_name(path) is None:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > LONG_FUNCTION_LINES:
                    where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                    found.append((where, length, ast.get_docstring(node) or ""))
    return found


def test_no_private_name_is_imported_across_modules():
    assert private_imports() == []


def test_at_most_five_functions_are_over_80_lines_and_each_says_why():
    long = long_functions()
    assert len(long) <= MAX_LONG_FUNCTIONS, "\n".join(f"{w}: {n} lines" for w, n, _ in long)
    unexplained = [w for w, _, doc in long if not any(word in doc.lower() for word in REASON_WORDS)]
    assert unexplained == []


if __name__ == "__main__":  # the counts, for the issue note
    imports = private_imports()
    print(f"{len(imports)} private cross-module imports")
    print("\n".join("  " + line for line in imports))
    long = long_functions()
    print(f"{len(long)} functions over {LONG_FUNCTION_LINES} lines")
    print("\n".join(f"  {w}: {n} lines" for w, n, _ in long))
