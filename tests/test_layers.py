"""The package's layers, enforced: a module imports only from its own floor or below.

LAYERS is the one table of floors (README's "Layout" section is checked against it).
A new module must be added here, on the floor of the highest module it imports (or
higher); the test names any module missing from the table. Imports inside functions
count too: a lazy import is still a dependency, only a cheaper one at start-up.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "memctl"

# floor -> modules (a package name stands for all its modules, e.g. "embed" for embed/*).
LAYERS: dict[int, tuple[str, ...]] = {
    1: ("errors", "output", "textnorm", "clock", "tsv", "markers", "numerals", "jsonshape", "early", "private", "chunking", "unixsock",
        "values", "claude_paths", "linebreak", "procs"),
    2: ("fact", "config", "fsutil", "gitstore", "importers", "secrets", "runcmd"),
    3: ("store", "index", "parsecache", "embed", "merge", "claude_memory", "trust"),
    4: ("facts", "ledger", "ledger_ops", "vcache", "rindex", "access", "episodes", "sources", "watch"),
    5: ("state", "neardup", "judge", "sync_fast", "facts_check"),
    6: ("recall", "jobs", "sync", "lifecycle", "transcripts", "docindex", "config_check"),  # sync: a pushed job table is checked (jobs)
    7: ("context", "doctor", "maintain", "resident", "installed", "runjob"),
    8: ("cli", "integrations", "api", "ui", "__main__"),  # integrations: other programs' formats, used only by cli/;
    # api: the functions `import memctl` offers (docs/PYTHON.md), which cli/ and integrations/ call too;
    # ui: `memctl ui`'s read-only page (docs/UI.md), over the library and the hooks' text
    9: ("__init__",),  # `import memctl`: the Python face over everything
}

# Upward imports known today, each with its reason; the test fails when one of them
# disappears (then delete its line) as well as when a new one appears.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


def floor_of(module: str) -> int:
    """The floor of `module` ("lifecycle.forget", "embed", "cli.jobs"), by its first part."""
    top = module.split(".")[0]
    for floor, names in LAYERS.items():
        if top in names:
            return floor
    raise KeyError(module)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(base: list[str], name: str) -> str:
    """`from .base import name`: the module when `name` is one, else base itself."""
    candidate = [*base, name]
    if (PACKAGE.joinpath(*candidate).with_suffix(".py")).is_file() or (PACKAGE.joinpath(*candidate) / "__init__.py").is_file():
        return ".".join(candidate)
    return ".".join(base)


def imports_of(path: Path) -> set[str]:
    """The memctl modules a file imports (relative to the package, e.g. "facts", "embed.server")."""
    module = module_name(path)
    package = module.split(".") if path.name == "__init__.py" and module != "__init__" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else list(package)
            elif node.module and (node.module == "memctl" or node.module.startswith("memctl.")):
                base = []
            else:
                continue
            if node.module:
                base = base + [p for p in node.module.split(".") if p != "memctl" or node.level]
            for alias in node.names:
                found.add(_resolve(base, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("memctl."):
                    found.add(alias.name.removeprefix("memctl."))
    return {m for m in found if m and m != module}


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_has_a_floor():
    missing = sorted(m for m in all_modules() if not any(m.split(".")[0] in names for names in LAYERS.values()))
    assert not missing, (f"modules with no floor in tests/test_layers.py LAYERS: {', '.join(missing)} "
                         "(add each on the floor of the highest module it imports)")


def test_no_module_imports_a_higher_floor():
    upward = {}
    for module, path in all_modules().items():
        for target in imports_of(path):
            if floor_of(target) > floor_of(module):
                upward[(module.split(".")[0], target.split(".")[0])] = f"memctl/{path.relative_to(PACKAGE)} imports {target}"
    new = {k: v for k, v in upward.items() if k not in KNOWN_UPWARD}
    assert not new, "upward imports (a lower floor must not know a higher one): " + "; ".join(
        f"{why} (floor {floor_of(k[0])} -> {floor_of(k[1])})" for k, why in sorted(new.items()))
    gone = sorted(set(KNOWN_UPWARD) - set(upward))
    assert not gone, f"no longer imported upward, remove from KNOWN_UPWARD: {gone}"


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    """The test above can fail: a floor-1 module importing a floor-4 one is caught, relative or absolute."""
    fake = tmp_path / "memctl"
    fake.mkdir()
    (fake / "facts.py").write_text("")
    (fake / "output.py").write_text("def f():\n    from . import facts\n")
    (fake / "errors.py").write_text("import memctl.facts\nfrom memctl import facts as f\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    assert imports_of(fake / "output.py") == {"facts"}
    assert imports_of(fake / "errors.py") == {"facts"}
    assert floor_of("facts") > floor_of("output")
    with pytest.raises(KeyError):
        floor_of("newmodule")


def test_readme_layout_agrees_with_the_table():
    """README's "Layout" names floors for the core modules: each must be the table's floor."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("the package, in layers that import downwards:")
    section = " ".join(text[start:text.index("memctl/cli/", start)].split(":", 1)[1].split())
    said: dict[str, int] = {}
    for names, floor in re.findall(r"([a-z_/, ]+?) \((?:floor )?(\d)\)", section):
        for name in names.split(","):
            name = name.strip().rstrip("/").split(" ")[-1]
            if name:
                said[name] = int(floor)
    assert len(said) >= 20, said
    missing = [name for names in LAYERS.values() for name in names if name not in said and name != "__main__"]
    assert not missing, f"README's Layout names no floor for: {missing}"
    wrong = {name: (floor, floor_of(name)) for name, floor in said.items() if floor_of(name) != floor}
    assert not wrong, f"README floor vs tests/test_layers.py LAYERS: {wrong}"
