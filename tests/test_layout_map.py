"""The layout map (docs/layout.md, "One line per file") names every file of the package, once,
and nothing that is not there; the package's root stays small and each package says what it is.
Modules are sized by what they mean, not by a line count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "specbench"
ROOT_MODULES_MAX = 12


def _map_lines() -> list[str]:
    text = (REPO / "docs" / "layout.md").read_text()
    section = text.split("## One line per file", 1)[1]
    block = section.split("```\n", 2)[1]
    assert block.startswith("specbench/\n")
    return block.splitlines()


def _mapped_paths() -> list[str]:
    """Paths the map names under specbench/, from its indentation (two spaces a level)."""
    paths: list[str] = []
    parents: list[str] = []
    for line in _map_lines()[1:]:
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            break  # the lines after the package (tools/, tests/, ...)
        name = line.split()[0]
        depth = indent // 2 - 1
        parents = parents[:depth]
        path = "/".join([*parents, name.rstrip("/")])
        paths.append(path + ("/" if name.endswith("/") else ""))
        if name.endswith("/"):
            parents.append(name.rstrip("/"))
    return paths


def _tree() -> set[str]:
    """Every module but __init__.py, and every package or data folder, relative to specbench/."""
    found = set()
    for path in PACKAGE.rglob("*"):
        rel = path.relative_to(PACKAGE)
        if "__pycache__" in rel.parts or (rel.parts[0] == "data" and len(rel.parts) > 1):
            continue
        if path.is_dir() and (path / "__init__.py").exists():
            found.add(f"{rel.as_posix()}/")
        elif path.suffix == ".py" and path.name != "__init__.py":
            found.add(rel.as_posix())
    return found


def test_the_map_names_every_file_once_and_nothing_else() -> None:
    mapped = _mapped_paths()
    assert len(mapped) == len(set(mapped)), "named twice: " + str(
        sorted({p for p in mapped if mapped.count(p) > 1}))
    tree = _tree()
    assert sorted(tree - set(mapped)) == [], "files the map does not name"
    assert sorted(set(mapped) - tree) == [], "the map names files that are not there"


def test_the_root_holds_few_modules() -> None:
    modules = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py",
                                                                       "__main__.py")]
    assert len(modules) <= ROOT_MODULES_MAX, sorted(modules)


def test_each_package_says_what_it_is() -> None:
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and re.match(r"\S", doc), f"{init.relative_to(REPO)} has no docstring"


def test_the_package_says_why_not_history() -> None:
    # Comments and docstrings in the package say why; the history (issue numbers, the design
    # notes outside the repository) stays in commits and lab/.
    history = re.compile(r"DESIGN §|[Ii]ssue [0-9]+")
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if history.search(line)]
    assert found == []
