"""The package's imports go one way: no module reaches, directly or around a circle, back to itself.

The graph is read from the source (ast; nothing is imported): every ``import`` and ``from ...
import`` anywhere in a module counts, inside functions too, except those under ``if
TYPE_CHECKING:``. ``from P import name`` is an edge to the submodule ``P.name`` when there is
one, else to ``P`` itself (its ``__init__``); importing ``P.sub`` also runs the packages above
it, except those the importer lives in (they are already running).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "specbench"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported(source: str, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of `modules` that the module `name` (with `source`) imports."""
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = here.split(".")[: len(here.split(".")) - (child.level - 1)]
                    base = ".".join([*parts, *([child.module] if child.module else [])])
                subs = {f"{base}.{a.name}" for a in child.names} & modules
                found.update(subs)
                if len(subs) < len(child.names):
                    found.add(base)
            visit(child)

    visit(ast.parse(source))
    edges: set[str] = set()
    for target in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if not target or target == name:
            continue
        edges.add(target)
        parts = target.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent in modules and not name.startswith(parent + "."):
                edges.add(parent)
    edges.discard(name)
    return edges


def import_graph(root: Path = PACKAGE,
                 extra: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Module -> the modules it imports; `extra` adds source text to a module (for the tests)."""
    paths = {module_name(p, root): p for p in root.rglob("*.py") if "__pycache__" not in p.parts}
    modules = set(paths)
    graph = {}
    for name, path in paths.items():
        source = path.read_text() + "\n" + (extra or {}).get(name, "")
        graph[name] = imported(source, name, path.name == "__init__.py", modules)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def test_the_package_has_no_import_circle() -> None:
    found = circles(import_graph())
    assert found == [], "import circles: " + "; ".join(" <-> ".join(c) for c in found)


# The circles the package had before its layout by concern, each closed again by one import.
OLD_CIRCLES = {
    "prompts/mix (inside a function)": (
        "specbench.prompts.mix", "def f():\n    from specbench.prompts import load_prompt_set\n",
        {"specbench.prompts", "specbench.prompts.mix"}),
    "engines/base and attach": (
        "specbench.engines.base", "from specbench.engines.attach import AttachEngine\n",
        {"specbench.engines.attach", "specbench.engines.base"}),
    "run/sweep and its executors": (
        "specbench.run.sweep", "def f():\n    from specbench.run.parallel import ParallelRunner\n",
        {"specbench.run.sweep", "specbench.run.parallel"}),
    "cli/main and the commands it registers": (
        "specbench.cli.compare", "def f():\n    from specbench.cli.main import app\n",
        {"specbench.cli.main", "specbench.cli.compare"}),
    "analysis and prompt_set (inside a function)": (
        "specbench.analysis.prompt_set", "def f():\n    from specbench.analysis import analyze\n",
        {"specbench.analysis", "specbench.analysis.prompt_set"}),
}


def test_each_old_circle_put_back_is_found() -> None:
    for what, (module, source, members) in OLD_CIRCLES.items():
        found = circles(import_graph(extra={module: source}))
        assert any(members <= set(c) for c in found), f"{what}: not found in {found}"


def test_type_checking_imports_do_not_count() -> None:
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from specbench.cli.main import app\n")
    assert circles(import_graph(extra={"specbench.cli.compare": source})) == []


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for module in graph[todo.pop()] - seen:
            seen.add(module)
            todo.append(module)
    return seen


def test_the_sweep_measures_and_the_plan_decides() -> None:
    # The sweep runs what the plan hands it: it reaches none of the plan's modules, and reads
    # no analysis itself (the profiler it uses classifies kernels through analysis.kernels).
    graph = import_graph()
    plan = {"specbench.run.adaptive", "specbench.run.plan", "specbench.run.planner",
            "specbench.run.phases"}
    assert reachable(graph, "specbench.run.sweep") & plan == set()
    assert not any(m.startswith("specbench.analysis") for m in graph["specbench.run.sweep"])
    # And the plan's way back: put an import of the plan into the sweep, and it is seen.
    graph = import_graph(extra={"specbench.run.sweep": "from specbench.run import planner\n"})
    assert "specbench.run.planner" in reachable(graph, "specbench.run.sweep")


def test_reading_a_run_starts_without_matplotlib_or_the_http_client() -> None:
    # Each `specbench report/threshold/regress/export` (and every sweep's own conclusion) is a
    # new process: matplotlib costs most of a CPU-second to import and aiohttp a third of one,
    # so only drawing imports the one and only measuring the other.
    modules = ["specbench.cli.main", "specbench.report.document", "specbench.analysis",
               "specbench.regress", "specbench.report.export", "specbench.metrics"]
    probe = (f"import sys\nfor m in {modules!r}: __import__(m)\n"
             "print(' '.join(m for m in ('matplotlib', 'aiohttp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "", out.stdout
