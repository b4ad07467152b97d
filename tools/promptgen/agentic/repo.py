"""A small synthetic repository per session, built from the corpus in Python, Go or TypeScript.

Tool results are computed from it (files really contain what read_file returns, grep really
finds its matches, git_diff is a real diff), so later steps copy paths, names and lines from
earlier outputs as a real agent's would.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tools.promptgen.compose import compose_file
from tools.promptgen.corpus import snippets_of
from tools.promptgen.entities import ENTITIES, Entity, go_entity_module, python_entity_module
from tools.promptgen.model import Instance, instantiate, snake_case


@dataclass
class Repo:
    name: str
    lang: str
    package: str
    files: dict[str, str]
    original: dict[str, str] = field(default_factory=dict)
    entity: Entity | None = None
    entity_path: str = ""
    util_path: str = ""
    util_instances: list[Instance] = field(default_factory=list)
    test_paths: dict[str, str] = field(default_factory=dict)  # source path -> its test file

    def snapshot(self) -> None:
        self.original = dict(self.files)


def _py_tests(module: str, insts: Sequence[Instance]) -> str:
    names = [i.name for i in insts if i.examples]
    lines = [f'"""Tests for {module}."""', "", f"from {module} import {', '.join(sorted(names))}",
             ""]
    for inst in insts:
        for k, (call, expected) in enumerate(inst.examples):
            lines += ["", f"def test_{snake_case(inst.name)}_{k}() -> None:",
                      f"    assert {call} == {expected}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _ts_tests(module: str, insts: Sequence[Instance]) -> str:
    names = [i.name for i in insts if i.examples]
    lines = [f'import {{ {", ".join(names)} }} from "./{module}";', ""]
    for inst in insts:
        if not inst.examples:
            continue
        lines.append(f'describe("{inst.name}", () => {{')
        for k, (call, expected) in enumerate(inst.examples):
            lines += [f'  test("example {k + 1}", () => {{',
                      f"    expect({call}).toEqual({expected});", "  });"]
        lines += ["});", ""]
    return "\n".join(lines)


def _go_tests(package: str, insts: Sequence[Instance]) -> str:
    lines = [f"package {package}", "", 'import "testing"', ""]
    for inst in insts:
        lines += [f"func Test{inst.name}(t *testing.T) {{", "\tt.Parallel()",
                  f"\t// {inst.summary}", "}", ""]
    return "\n".join(lines)


def build_repo(rng: random.Random, name: str, lang: str) -> Repo:
    """A small but complete repository: README, config, an entity module, a helpers module and
    tests, in `lang`."""
    package = name.replace("-", "_")
    ent = rng.choice(ENTITIES)
    # Helpers with examples get generated tests; languages with few such snippets use them all.
    pool = [s for s in snippets_of(lang) if s.examples]
    if len(pool) < 3:
        pool = snippets_of(lang)
    rng.shuffle(pool)
    util = [instantiate(s, rng) for s in pool[: rng.randint(2, min(4, len(pool)))]]
    readme = (f"# {name}\n\n{name.replace('-', ' ').capitalize()} keeps track of "
              f"{ent.plural.replace('_', ' ')} for the operations team. It exposes a small API "
              "and a command-line report.\n\n## Development\n\n")
    repo = Repo(name, lang, package, {}, entity=ent, util_instances=util)
    # The file order matters: agents list and read files in the order they were added.
    _LAYOUTS[lang](repo, ent, readme, rng)
    # A second helpers module: more code for agents that read around before acting.
    rest = [x for x in snippets_of(lang) if x.key not in {i.snippet.key for i in util}]
    rng.shuffle(rest)
    more = [instantiate(x, rng) for x in rest[: rng.randint(2, 5)]]
    if more:
        stem = {"python": f"src/{package}/support.py", "go": "internal/support/support.go",
                "typescript": "src/support.ts"}[lang]
        header = '"""Support code for jobs and reports."""' if lang == "python" else ""
        repo.files[stem] = compose_file(lang, [i.code for i in more], package="support",
                                        header=header)
    repo.files["CHANGELOG.md"] = (
        f"# Changelog\n\n## Unreleased\n\n## 1.{rng.randint(2, 9)}.0\n\n- Add "
        f"{ent.plural.replace('_', ' ')} CSV export\n- Fix time zone handling in reports\n")
    repo.snapshot()
    return repo


def _python_layout(repo: Repo, ent: Entity, readme: str, rng: random.Random) -> None:
    files, name, package = repo.files, repo.name, repo.package
    files["README.md"] = readme + (
        "```bash\npython -m venv .venv && . .venv/bin/activate\npip install -e '.[dev]'\n"
        "pytest -q\n```\n\nCode lives in `src/" + package + "/`, tests in `tests/`.\n")
    files["pyproject.toml"] = (
        f'[project]\nname = "{name}"\nversion = "1.{rng.randint(0, 9)}.{rng.randint(0, 20)}"\n'
        'requires-python = ">=3.11"\ndependencies = [\n    "aiohttp>=3.9,<4",\n'
        '    "pydantic>=2.5,<3",\n    "python-dateutil>=2.8",\n]\n\n'
        '[project.optional-dependencies]\ndev = ["pytest>=8", "ruff>=0.4", "mypy>=1.8"]\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n\n'
        "[tool.ruff]\nline-length = 100\n")
    files[f"src/{package}/__init__.py"] = f'"""{name}."""\n\n__version__ = "1.0.0"\n'
    repo.entity_path = f"src/{package}/{ent.plural}.py"
    files[repo.entity_path] = python_entity_module(ent, rng)
    related = rng.choice([e for e in ENTITIES if e.name != ent.name])
    files[f"src/{package}/{related.plural}.py"] = python_entity_module(related, rng)
    repo.util_path = f"src/{package}/utils.py"
    files[repo.util_path] = compose_file("python", [i.code for i in repo.util_instances],
                                         header='"""Small helpers shared by the service."""')
    files["tests/__init__.py"] = ""
    test_path = "tests/test_utils.py"
    files[test_path] = _py_tests(f"{package}.utils", repo.util_instances)
    repo.test_paths[repo.util_path] = test_path
    files[f"tests/test_{ent.plural}.py"] = (
        f'"""Tests for {package}.{ent.plural}."""\n\nimport pytest\n\n'
        f"from {package}.{ent.plural} import {ent.name}Error, {ent.name}Store\n\n\n"
        "def test_empty_store_has_no_items() -> None:\n"
        f"    assert len({ent.name}Store()) == 0\n\n\n"
        f"def test_get_missing_raises() -> None:\n    with pytest.raises({ent.name}Error):\n"
        f"        {ent.name}Store().get(42)\n")
    files[".github/workflows/ci.yml"] = (
        "name: ci\non: [push, pull_request]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/setup-python@v5\n"
        "        with:\n          python-version: '3.11'\n      - run: pip install -e '.[dev]'\n"
        "      - run: ruff check .\n      - run: pytest -q\n")


def _go_layout(repo: Repo, ent: Entity, readme: str, rng: random.Random) -> None:
    files, name = repo.files, repo.name
    files["README.md"] = readme + "```bash\ngo test ./...\n```\n"
    files["go.mod"] = (f"module example.com/{name}\n\ngo 1.22\n\nrequire (\n"
                       "\tgithub.com/google/uuid v1.6.0\n"
                       f"\tgolang.org/x/sync v0.{rng.randint(5, 8)}.0\n)\n")
    repo.entity_path = "internal/store/store.go"
    files[repo.entity_path] = go_entity_module(ent, rng, "store")
    pkg = "util"
    repo.util_path = f"internal/{pkg}/{pkg}.go"
    files[repo.util_path] = compose_file("go", [i.code for i in repo.util_instances], package=pkg)
    test_path = f"internal/{pkg}/{pkg}_test.go"
    files[test_path] = _go_tests(pkg, repo.util_instances)
    repo.test_paths[repo.util_path] = test_path
    files["cmd/server/main.go"] = (
        'package main\n\nimport (\n\t"log"\n\t"net/http"\n\n'
        f'\t"example.com/{name}/internal/store"\n)\n\n'
        "func main() {\n\ts := store.NewStore()\n\tlog.Println(\"listening on :8080\")\n"
        "\tlog.Fatal(http.ListenAndServe(\":8080\", s.Handler()))\n}\n")


def _typescript_layout(repo: Repo, ent: Entity, readme: str, rng: random.Random) -> None:
    files = repo.files
    files["README.md"] = readme + "```bash\nnpm ci\nnpm test\n```\n"
    files["package.json"] = json.dumps({
        "name": repo.name, "version": f"2.{rng.randint(0, 9)}.0", "private": True,
        "type": "module", "scripts": {"build": "tsc -p .", "test": "jest", "lint": "eslint src"},
        "dependencies": {"zod": "^3.22.4", "pino": f"^8.{rng.randint(10, 19)}.0"},
        "devDependencies": {"jest": "^29.7.0", "ts-jest": "^29.1.2", "typescript": "^5.4.5",
                            "eslint": "^8.57.0"}}, indent=2) + "\n"
    files["tsconfig.json"] = json.dumps({"compilerOptions": {
        "target": "ES2022", "module": "NodeNext", "strict": True, "outDir": "dist"},
        "include": ["src"]}, indent=2) + "\n"
    repo.util_path = "src/utils.ts"
    files[repo.util_path] = compose_file("typescript", [i.code for i in repo.util_instances])
    test_path = "src/utils.test.ts"
    files[test_path] = _ts_tests("utils", repo.util_instances)
    repo.test_paths[repo.util_path] = test_path
    # TypeScript repositories have no entity module; the helpers stand in for it.
    repo.entity_path = repo.util_path


_LAYOUTS: dict[str, Callable[[Repo, Entity, str, random.Random], None]] = {
    "python": _python_layout, "go": _go_layout, "typescript": _typescript_layout,
}
