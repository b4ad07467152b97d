"""The nine task scripts agent sessions follow, plus the orientation prelude and the follow-ups.

Each scenario writes its user request, then steps whose tool results come from the workspace (or,
for tools with no local state such as SQL or HTTP, from the step itself), then a short answer.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from tools.promptgen.agentic.repo import Repo
from tools.promptgen.agentic.session import Session
from tools.promptgen.agentic.workspace import edit_hunk
from tools.promptgen.compose import split_imports
from tools.promptgen.corpus import snippets_of
from tools.promptgen.entities import ENTITIES
from tools.promptgen.model import Bug, Instance, instantiate, line_of, snake_case


def _test_path(repo: Repo) -> str:
    return repo.test_paths[repo.util_path]


def _src_dir(repo: Repo) -> str:
    return repo.util_path.rsplit("/", 1)[0]


def explore(s: Session, repo: Repo, rng: random.Random) -> None:
    """The long variant: an agent that orients itself before acting (reads grow the context)."""
    s.step([("list_dir", {"path": ".", "depth": 3})], s.thought("explore"))
    config = {"python": "pyproject.toml", "go": "go.mod", "typescript": "package.json"}[repo.lang]
    s.step([("read_file", {"path": "README.md"}), ("read_file", {"path": config})])
    others = [p for p in repo.files
              if p.startswith(("src/", "internal/")) and p.endswith((".py", ".go", ".ts"))
              and not p.endswith(("__init__.py", "_test.go", ".test.ts"))]
    sources = list(dict.fromkeys([repo.entity_path, repo.util_path, *others]))
    s.step([("read_file", {"path": p}) for p in sources], "Reading the main modules.")
    tests = [p for p in repo.files
             if p.endswith(("_test.go", ".test.ts")) or p.startswith("tests/test_")]
    s.step([("read_file", {"path": p}) for p in tests[:3]])
    if rng.random() < 0.5:
        log = "\n".join(
            f"{''.join(rng.choice('0123456789abcdef') for _ in range(7))} {a} 2025-03-{d:02d} {m}"
            for a, d, m in (("dana", 14, "Add CSV export"),
                            ("lee", 12, "Refactor store validation"),
                            ("sam", 11, "Bump dependencies"), ("dana", 9, "Fix report totals"),
                            ("ops-bot", 8, "Update CI image")))
        s.step([("git_log", {"max_count": 5}, log)])


def _inject_bug(repo: Repo, rng: random.Random) -> tuple[Instance, Bug, str]:
    """Break one helper in the repository (and add the regression test that catches it, for
    Python); returns the instance, the bug with its failure text filled in, and the fixed text."""
    options = [(i, b) for i in repo.util_instances for b in i.bugs
               if repo.files[repo.util_path].count(b.find) == 1]
    inst, bug = rng.choice(options)
    fixed = repo.files[repo.util_path]
    line = line_of(fixed, bug.find)
    repo.files[repo.util_path] = fixed.replace(bug.find, bug.replace, 1)
    symptom = bug.symptom.replace("{file}", repo.util_path).replace("{line}", str(line))
    test_path = _test_path(repo)
    match = re.search(r"^>\s+(assert .*)$", symptom, re.M) if repo.lang == "python" else None
    if match:
        test_name = f"test_{snake_case(inst.name)}_regression"
        repo.files[test_path] += f"\n\ndef {test_name}() -> None:\n    {match.group(1)}\n"
        symptom = "\n".join([
            f"    def {test_name}() -> None:",
            *(x for x in symptom.splitlines() if x.startswith((">", "E"))),
            "",
            f"{test_path}:{repo.files[test_path].count(chr(10))}: AssertionError"])
    return inst, Bug(bug.find, bug.replace, symptom), fixed


_CAUSES = (
    "a recent change broke the core loop, so one case was handled incorrectly.",
    "one condition was off, which made the function skip a necessary update.",
    "an expression used the wrong variable, so results drifted from the specification.",
)


def _sc_fix_failing_test(s: Session, repo: Repo, rng: random.Random) -> None:
    inst, bug, fixed = _inject_bug(repo, rng)
    test_path = _test_path(repo)
    buggy = repo.files[repo.util_path]
    s.ws.failure = (repo.util_path, buggy,
                    f"{test_path}::test_{snake_case(inst.name)}_regression", bug.symptom)
    repo.snapshot()
    s.user(rng.choice((
        f"The test suite is red on main: something in `{inst.name}` broke. Find out why and "
        "repair it. Don't change the tests.",
        f"CI fails in {test_path} since this morning. Can you take a look and fix the code?",
        f"`{inst.name}` is returning wrong results according to the tests. Please correct the "
        "implementation and make sure everything passes.",
    )))
    if rng.random() < 0.35:
        s.step([("todo_write", {"items": [
            {"text": "Reproduce the failing test", "status": "in_progress"},
            {"text": f"Locate the fault in {inst.name}", "status": "pending"},
            {"text": "Repair it and re-run the suite", "status": "pending"}]})])
    s.step([("run_tests", {"path": test_path})], s.thought("start"))
    if rng.random() < 0.6:
        s.step([("read_file", {"path": repo.util_path}), ("read_file", {"path": test_path})],
               s.thought("read"))
    else:
        s.step([("read_file", {"path": repo.util_path})], s.thought("read"))
    if rng.random() < 0.5:
        s.step([("grep", {"pattern": rf"\b{inst.name}\b", "path": "."})])
    old, new = edit_hunk(buggy, fixed)
    s.step([("str_replace", {"path": repo.util_path, "old_str": old, "new_str": new})],
           s.thought("fix"))
    s.step([("run_tests", {})], s.thought("verify"))
    s.answer(f"`{inst.name}` in `{repo.util_path}` is repaired: {rng.choice(_CAUSES)} The "
             "failing test passes again and the rest of the suite is green; no tests were changed.")


def _sc_add_feature(s: Session, repo: Repo, rng: random.Random) -> None:
    present = {i.snippet.key for i in repo.util_instances}
    pool = [x for x in snippets_of(repo.lang) if x.key not in present and x.examples]
    pool = pool or [x for x in snippets_of(repo.lang) if x.key not in present]
    new = instantiate(rng.choice(pool), rng)
    test_path = _test_path(repo)
    repo.snapshot()
    s.user(f"Please add a `{new.name}` helper to `{repo.util_path}`. Requirements: {new.spec} "
           "Add tests next to the existing ones and make sure the suite passes.")
    if rng.random() < 0.5:
        s.step([("list_dir", {"path": _src_dir(repo)})], s.thought("explore"))
    s.step([("read_file", {"path": repo.util_path}), ("read_file", {"path": test_path})],
           s.thought("read"))
    imports, body = split_imports(new.code, repo.lang)
    text = repo.files[repo.util_path]
    tail = text.rstrip("\n").splitlines()[-2:]
    old_tail = "\n".join(tail)
    gap = "\n\n\n" if repo.lang == "python" else "\n\n"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("str_replace", {"path": repo.util_path, "old_str": old_tail,
                         "new_str": old_tail + gap + body.strip("\n")})]
    have, _ = split_imports(text, repo.lang)
    missing = [x for x in imports if x not in have]
    if missing and have and text.count(have[0]) == 1 and repo.lang != "go":
        calls.append(("str_replace", {"path": repo.util_path, "old_str": have[0],
                                      "new_str": "\n".join([have[0], *missing])}))
    s.step(calls, "I'll add the function at the end of the module.")
    test_calls = _new_test_calls(repo, new, test_path)
    if test_calls:
        s.step(test_calls)
    s.step([("run_tests", {"path": test_path if repo.lang == "python" else _src_dir(repo)})],
           s.thought("verify"))
    if rng.random() < 0.5:
        s.step([("git_diff", {})])
    s.answer(f"Added `{new.name}` to `{repo.util_path}` ({new.summary}), with tests covering the "
             "examples from the request. The suite passes.")


def _new_test_calls(repo: Repo, new: Instance,
                    test_path: str) -> list[tuple[str, dict[str, Any]]]:
    """The edits that add tests for a new helper: appended to the Python test file (and its
    import), or a new Jest file for TypeScript; none for Go or a helper without examples."""
    if repo.lang == "python" and new.examples:
        tests = "".join(f"\n\ndef test_{snake_case(new.name)}_{k}() -> None:\n"
                        f"    assert {c} == {e}\n" for k, (c, e) in enumerate(new.examples))
        test_text = repo.files[test_path]
        first = test_text.splitlines()[2] if len(test_text.splitlines()) > 2 else ""
        last = test_text.rstrip("\n").splitlines()[-1]
        calls: list[tuple[str, dict[str, Any]]] = [
            ("str_replace", {"path": test_path, "old_str": last,
                             "new_str": last + "\n" + tests.rstrip("\n")})]
        if first.startswith("from ") and test_text.count(first) == 1:
            import_line = f"\nfrom {repo.package}.utils import {new.name}"
            calls.append(("str_replace", {"path": test_path, "old_str": first,
                                          "new_str": first + import_line}))
        return calls
    if repo.lang == "typescript" and new.examples:
        block = "\n".join([f'describe("{new.name}", () => {{',
                           *(f'  test("example {k + 1}", () => {{\n'
                             f"    expect({c}).toEqual({e});\n  }});"
                             for k, (c, e) in enumerate(new.examples)), "});", ""])
        return [("write_file", {"path": f"src/{snake_case(new.name)}.test.ts",
                                "content": f'import {{ {new.name} }} from "./utils";\n\n{block}'})]
    return []


def _sc_explore_question(s: Session, repo: Repo, rng: random.Random) -> None:
    repo.snapshot()
    if repo.lang == "python" and repo.entity:
        ent = repo.entity
        s.user(rng.choice((
            f"How does `{ent.name}Store.update` validate changes, and what happens when someone "
            "passes a field that doesn't exist? Point me to the code.",
            f"Where do we check that a {ent.name.lower()} status is valid, and which statuses are "
            "allowed? I need to add a new one.",
            "Walk me through what happens when a JSON lines file with a malformed "
            f"{ent.name.lower()} record is loaded.",
        )))
        s.step([("grep", {"pattern": r"def (update|validate|from_json_lines|with_status)\b",
                          "path": "src"})], "Let me find the relevant functions.")
        lines = repo.files[repo.entity_path].splitlines()
        start = next(n for n, x in enumerate(lines, 1) if x.startswith("def validate"))
        calls: list[tuple[str, dict[str, Any]]] = [
            ("read_file", {"path": repo.entity_path, "start_line": max(1, start - 30),
                           "end_line": start + 60})]
        if rng.random() < 0.5:
            calls.append(("read_file", {"path": f"tests/test_{ent.plural}.py"}))
        s.step(calls)
        s.answer(
            f"Validation lives in `validate()` in `{repo.entity_path}` (around line {start}). "
            f"`{ent.name}Store.add` and `update` both call it and raise `{ent.name}Error` with "
            "every problem joined by '; '. `update` builds the new record with "
            "`dataclasses.replace`, so an unknown field name fails there with a TypeError before "
            f"validation runs; that error is not converted to `{ent.name}Error`, which callers may "
            "not expect. Allowed statuses are the `STATUSES` tuple at the top of the module "
            f"({', '.join(ent.statuses)}); adding one means extending that tuple, and the report "
            "and CSV export pick it up automatically. JSON lines loading wraps decode and "
            "validation errors with the line number.")
        return
    inst = rng.choice(repo.util_instances)
    s.user(f"What does `{inst.name}` do, where is it used, and is it safe to call concurrently?")
    s.step([("grep", {"pattern": rf"\b{inst.name}\b", "path": "."})], "Searching for it.")
    s.step([("read_file", {"path": repo.util_path})])
    s.answer(f"`{inst.name}` (in `{repo.util_path}`) {inst.summary}. It is only referenced by its "
             "own tests so far. It keeps no shared state between calls unless noted in its type, "
             "so concurrent calls on separate inputs are fine; shared instances need external "
             "locking.")


def _sc_rename_refactor(s: Session, repo: Repo, rng: random.Random) -> None:
    inst = rng.choice(repo.util_instances)
    names = (inst.snippet.name, *inst.snippet.renames.get(inst.snippet.name, ()))
    alternatives = [n for n in names if n != inst.name]
    new_name = rng.choice(alternatives) if alternatives else inst.name + "Impl"
    repo.snapshot()
    s.user(f"Rename `{inst.name}` to `{new_name}` everywhere in the repository, including tests "
           "and docs. Behaviour must not change.")
    grep = ("grep", {"pattern": rf"\b{inst.name}\b", "path": "."})
    hits = s.step([grep], "Finding every use first.")[0]
    word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(inst.name)}(?![A-Za-z0-9_])")
    files = list(dict.fromkeys(h.split(":", 1)[0] for h in hits.splitlines() if ":" in h))
    calls: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        text = repo.files[path]
        changed = [ln for ln in dict.fromkeys(text.splitlines()) if word.search(ln)]
        if len(changed) <= 3 and all(text.count(ln) == 1 for ln in changed):
            calls += [("str_replace",
                       {"path": path, "old_str": ln, "new_str": word.sub(new_name, ln)})
                      for ln in changed]
        else:
            calls.append(("write_file", {"path": path, "content": word.sub(new_name, text)}))
    for k in range(0, len(calls), 4):  # at most four edits per step, as agents batch them
        s.step(calls[k:k + 4])
    s.step([grep, ("run_tests", {})], "Checking nothing was missed and the tests still pass.")
    s.answer(f"Renamed `{inst.name}` to `{new_name}` in {len(files)} file(s): "
             + ", ".join(f"`{p}`" for p in files) + ". No references to the old name remain and "
             "the test suite passes.")


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    sep = "-+-".join("-" * w for w in widths)
    body = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, sep, *body, f"({len(cells)} row{'s' if len(cells) != 1 else ''})"])


_SQL_TYPE = {"str": "text", "int": "bigint", "float": "double precision", "bool": "boolean",
             "date": "date"}


def _sc_sql_investigation(s: Session, repo: Repo, rng: random.Random) -> None:
    ent = repo.entity or rng.choice(ENTITIES)
    repo.snapshot()
    table = ent.plural
    status = rng.choice(ent.statuses)
    str_field = next(f for f, k in ent.fields if k == "str")
    s.user(f"How many {ent.plural.replace('_', ' ')} were in status '{status}' per month this "
           f"year, and which {str_field.replace('_', ' ')} has the most of them overall? Use the "
           "analytics DB.")
    tables = [(table, rng.randint(20_000, 2_000_000)),
              ("audit_log", rng.randint(1_000_000, 9_000_000)),
              ("users", rng.randint(500, 50_000)),
              (f"{table}_archive", rng.randint(100_000, 900_000)),
              ("schema_migrations", rng.randint(40, 200))]
    s.step([("list_tables", {}, _table(["table", "approx_rows"], tables))],
           "Let me check the schema first.")
    columns = ["column", "type", "nullable"]
    cols = [("id", "bigint", "no"),
            *((f, _SQL_TYPE[k], rng.choice(("no", "yes"))) for f, k in ent.fields),
            ("status", "text", "no"), ("created_at", "timestamptz", "no"),
            ("updated_at", "timestamptz", "yes")]
    audit = [("id", "bigint", "no"), ("entity", "text", "no"), ("entity_id", "bigint", "no"),
             ("action", "text", "no"), ("at", "timestamptz", "no")]
    s.step([("describe_table", {"table": table},
             _table(columns, cols) + f"\nindexes: {table}_pkey (id), "
             f"{table}_status_idx (status), {table}_created_at_idx (created_at)"),
            ("describe_table", {"table": "audit_log"}, _table(columns, audit))])
    months = [f"2025-{m:02d}-01" for m in range(1, rng.randint(3, 4))]
    monthly = [(m, rng.randint(40, 4000)) for m in months]
    q1 = (f"SELECT date_trunc('month', created_at)::date AS month, count(*) AS n\nFROM {table}\n"
          f"WHERE status = '{status}' AND created_at >= '2025-01-01'\nGROUP BY 1\nORDER BY 1")
    s.step([("sql_query", {"query": q1}, _table(["month", "n"], monthly))])
    names = [f"{str_field}-{rng.randint(100, 999)}" for _ in range(rng.randint(4, 8))]
    counts = sorted((rng.randint(10, 900) for _ in names), reverse=True)
    q2 = (f"SELECT {str_field}, count(*) AS n\nFROM {table}\nWHERE status = '{status}'\n"
          "GROUP BY 1\nORDER BY n DESC\nLIMIT 10")
    top = list(zip(names, counts, strict=True))
    s.step([("sql_query", {"query": q2}, _table([str_field, "n"], top))])
    s.answer("Per month in 2025 (status '" + status + "'): "
             + ", ".join(f"{m[:7]}: {n:,}" for m, n in monthly)
             + f". The {str_field.replace('_', ' ')} with the most is `{names[0]}` ({counts[0]:,} "
             f"overall). Counted by `created_at`; rows moved to `{table}_archive` are not "
             "included.")


def _sc_log_debugging(s: Session, repo: Repo, rng: random.Random) -> None:
    ent = repo.entity
    assert ent is not None and repo.lang == "python"
    text = repo.files[repo.entity_path]
    field_name = next(f for f, k in ent.fields if k == "str" and f'data["{f}"]' in text)
    line_no = line_of(text, f'{field_name}=str(data["{field_name}"])')
    repo.snapshot()
    s.user(f"The import job for {ent.plural.replace('_', ' ')} failed last night around 02:10 UTC. "
           "Can you figure out what went wrong from the logs and fix it if it's a code problem?")
    s.step([("run_bash", {"command": "tail -n 40 logs/import.log"}, _import_log(ent.plural, rng))],
           "Let me look at the end of the import log.")
    tb = _import_traceback(repo, field_name, line_no, rng)
    s.step([("run_bash", {"command": "grep -n -A 20 'Traceback' logs/import.log | head -n 60"},
             tb)])
    s.step([("read_file", {"path": repo.entity_path, "start_line": max(1, line_no - 15),
                           "end_line": line_no + 10})])
    old = f'{field_name}=str(data["{field_name}"]),'
    new = f'{field_name}=str(data.get("{field_name}", "")),'
    s.step([("str_replace", {"path": repo.entity_path, "old_str": old, "new_str": new})],
           f"The upstream export started omitting `{field_name}`; treating it as optional here and "
           "letting validation decide.")
    s.step([("run_tests", {})], s.thought("verify"))
    s.answer(f"The job failed because some records in the upstream export have no `{field_name}` "
             f"key: `{ent.name}.from_dict` indexed it directly (`{repo.entity_path}:{line_no}`), "
             "so the whole batch was rejected. It is now read with a default, and `validate()` "
             f"still reports an empty {field_name} as a problem, so bad rows are rejected "
             "individually with their line number instead of aborting the import. Tests pass. You "
             "may want to ask the upstream team whether the field was dropped on purpose.")


def _import_log(plural: str, rng: random.Random) -> str:
    """The last 40 lines of a nightly import log: 39 good batches, then the failure."""
    log_lines = []
    for k in range(39):
        log_lines.append(f"2025-03-14T02:{k // 4:02d}:{rng.randint(0, 59):02d}."
                         f"{rng.randint(0, 999):03d}Z "
                         f"INFO  worker-{rng.randint(1, 4)} import {plural}: batch {k + 1} ok "
                         f"({rng.randint(100, 500)} records, {rng.randint(80, 900)} ms, "
                         f"queue_depth={rng.randint(0, 40)})")
    log_lines.append(f"2025-03-14T02:10:{rng.randint(0, 59):02d}Z ERROR import {plural}: "
                     "batch failed")
    return "\n".join(log_lines[-40:])


def _import_traceback(repo: Repo, field_name: str, line_no: int, rng: random.Random) -> str:
    """The traceback of the failed import, pointing at the real lines of the entity module."""
    ent = repo.entity
    assert ent is not None
    text = repo.files[repo.entity_path]
    loader_line = text[:text.index("def from_json_lines")].count("\n") + 9
    return "\n".join([
        "Traceback (most recent call last):",
        f'  File "/srv/app/src/{repo.package}/jobs.py", line 57, in run_import',
        f"    store = {ent.name}Store.from_json_lines(payload)",
        f'  File "/srv/app/{repo.entity_path}", line {loader_line}, in from_json_lines',
        f"    store.add({ent.name}.from_dict(json.loads(line)))",
        f'  File "/srv/app/{repo.entity_path}", line {line_no}, in from_dict',
        f'    {field_name}=str(data["{field_name}"]),',
        f"KeyError: '{field_name}'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        f"{repo.package}.{ent.plural}.{ent.name}Error: line {rng.randint(200, 4000)}: bad "
        f"{snake_case(ent.name)} record {{'id': {rng.randint(1000, 9999)}, ...}}: '{field_name}'",
    ])


_DEP_UPDATES = {
    "python": ("pyproject.toml", '"aiohttp>=3.9,<4"', '"aiohttp>=3.10.11,<4"', "aiohttp",
               "pip index versions aiohttp",
               "aiohttp (3.11.14)\nAvailable versions: 3.11.14, 3.11.13, 3.11.12, 3.10.11, "
               "3.10.10, 3.9.5"),
    "go": ("go.mod", "golang.org/x/sync v0.", "golang.org/x/sync v0.1", "golang.org/x/sync",
           "go list -m -versions golang.org/x/sync",
           "golang.org/x/sync v0.1.0 v0.2.0 v0.3.0 v0.4.0 v0.5.0 v0.6.0 v0.7.0 v0.8.0 v0.9.0 "
           "v0.10.0 v0.11.0 v0.12.0"),
    "typescript": ("package.json", '"pino": "^8.', '"pino": "^9.6.0", "_was": "^8.', "pino",
                   "npm view pino versions --json | tail -n 8",
                   '  "9.4.0",\n  "9.5.0",\n  "9.6.0"\n]'),
}


def _sc_dependency_update(s: Session, repo: Repo, rng: random.Random) -> None:
    path, old_frag, _, dep, cmd, out = _DEP_UPDATES[repo.lang]
    repo.snapshot()
    s.user(f"Security flagged our `{dep}` version. Please upgrade it to the latest release that "
           "fits our constraints, check nothing breaks, and tell me what changed.")
    s.step([("read_file", {"path": path})], "Checking the current constraint.")
    s.step([("run_bash", {"command": cmd}, out)])
    text = repo.files[path]
    line = next(ln for ln in text.splitlines() if old_frag in ln)
    if repo.lang == "python":
        new_line = line.replace("3.9", "3.10.11")
    elif repo.lang == "go":
        new_line = re.sub(r"v0\.\d+\.0", "v0.12.0", line)
    else:
        new_line = re.sub(r'"\^8\.\d+\.0"', '"^9.6.0"', line)
    s.step([("str_replace", {"path": path, "old_str": line, "new_str": new_line})])
    install = {"python": ("pip install -e '.[dev]' -q && pip check",
                          "No broken requirements found."),
               "go": ("go mod tidy && go build ./...", ""),
               "typescript": ("npm install && npx tsc --noEmit",
                              "added 3 packages, changed 2 packages, and audited 412 packages in "
                              "4s\n\nfound 0 vulnerabilities")}[repo.lang]
    s.step([("run_bash", {"command": install[0]}, install[1] or "(no output)")])
    s.step([("run_tests", {})], s.thought("verify"))
    s.answer(f"Upgraded `{dep}` in `{path}` (`{line.strip()}` -> `{new_line.strip()}`). The "
             "install resolved cleanly, the build passes and all tests pass. Worth skimming the "
             "upstream changelog for behaviour changes in code paths our tests don't cover.")


def _break_lint(repo: Repo) -> tuple[bool, str]:
    """Make the lint job fail: an unused `import os` in Python helpers (when there is an import
    line to put it next to), otherwise an unformatted file. Returns whether an import was added,
    and the end of the job's log."""
    text = repo.files[repo.util_path]
    anchor = None
    if repo.lang == "python":
        rest = text.partition("\n\n")[2]
        imports = [x for x in rest.split("\n\n")[0].splitlines()]
        anchor = imports[0] if imports and text.count(imports[0]) == 1 else None
    if anchor:
        stray = "import os"
        repo.files[repo.util_path] = text.replace(anchor, f"{stray}\n{anchor}" if stray < anchor
                                                  else f"{anchor}\n{stray}", 1)
        bad_line = line_of(repo.files[repo.util_path], stray)
        return True, (f"Run ruff check .\n{repo.util_path}:{bad_line}:8: F401 [*] `os` imported "
                      "but unused\nFound 1 error.\n[*] 1 fixable with the `--fix` option.\n"
                      "Error: Process completed with exit code 1.")
    runner = "Run npm run lint\n" if repo.lang == "typescript" else "Run go vet ./...\n"
    return False, (runner + f"{repo.util_path}:1:1: file is not formatted (run the formatter)\n"
                   "Error: Process completed with exit code 1.")


def _ci_setup_log(repo: Repo, rng: random.Random) -> str:
    return "\n".join(f"2025-03-14T09:{m:02d}:{rng.randint(0, 59):02d}Z {x}" for m, x in enumerate((
        "Current runner version: '2.319.1'", "Operating System: Ubuntu 22.04.4 LTS",
        "Prepare workflow directory", "Download action repository 'actions/checkout@v4'",
        "Download action repository 'actions/setup-python@v5'", "Complete job name: lint",
        "Syncing repository: example/" + repo.name, "Fetching the repository",
        "Determining the checkout info", "Checking out the ref",
        "Successfully set up python 3.11.9", "Run pip install -e '.[dev]'",
        "Successfully installed " + " ".join(
            f"pkg{n}-{rng.randint(1, 9)}.{rng.randint(0, 30)}" for n in range(12)))))


def _sc_ci_failure(s: Session, repo: Repo, rng: random.Random) -> None:
    text = repo.files[repo.util_path]
    stray_import, log_tail = _break_lint(repo)
    repo.snapshot()
    run_id = rng.randint(41_000, 99_000)
    s.user("The CI pipeline on my branch is failing and I don't see why. Can you check and fix it?")
    runs = json.dumps([{"run_id": run_id, "branch": "feat/report-export", "status": "failure",
                        "failed_jobs": ["lint"], "commit": "9c1e2ab"},
                       {"run_id": run_id - rng.randint(3, 40), "branch": "feat/report-export",
                        "status": "success", "failed_jobs": [], "commit": "5f0d7c3"}], indent=1)
    s.step([("list_ci_runs", {"branch": "feat/report-export"}, runs)])
    setup = _ci_setup_log(repo, rng)
    s.step([("get_ci_logs", {"run_id": run_id, "job": "lint"}, setup + "\n" + log_tail)])
    if stray_import:
        s.step([("read_file", {"path": repo.util_path, "start_line": 1, "end_line": 20})])
        old, new = edit_hunk(repo.files[repo.util_path], text)
        s.step([("str_replace", {"path": repo.util_path, "old_str": old, "new_str": new})],
               "Removing the unused import.")
        s.step([("lint", {"paths": [repo.util_path]}, "All checks passed!")])
        s.answer(f"The lint job failed on an unused `import os` in `{repo.util_path}` (F401). I "
                 "removed it; ruff is clean now. Push again and CI should go green.")
    else:
        s.step([("format_code", {"paths": [repo.util_path]},
                 f"formatted 1 file: {repo.util_path}")])
        s.step([("lint", {"paths": [_src_dir(repo)]}, "no problems found")])
        s.answer(f"CI failed in the lint job because `{repo.util_path}` was not formatted. I ran "
                 "the formatter (whitespace-only changes) and the linter is clean now.")


def _random_value(rng: random.Random, name: str, kind: str) -> Any:
    if kind == "str":
        return f"{name.split('_')[0]}-{rng.randint(10, 99)}"
    if kind == "int":
        return rng.randint(0, 5000)
    if kind == "float":
        return round(rng.uniform(0, 500), 2)
    if kind == "bool":
        return rng.random() < 0.5
    return f"2025-0{rng.randint(1, 3)}-{rng.randint(10, 28)}"


def _sc_data_export(s: Session, repo: Repo, rng: random.Random) -> None:
    ent = repo.entity
    assert ent is not None and repo.lang == "python"
    repo.snapshot()
    module_text = repo.files[repo.entity_path]
    fields = [f for f, _ in ent.fields if f'data["{f}"]' in module_text]
    kinds = dict(ent.fields)
    records = []
    for n in range(rng.randint(6, 24)):
        rec: dict[str, Any] = {"id": 1000 + n}
        for f in fields:
            rec[f] = _random_value(rng, f, kinds[f])
        rec["status"] = rng.choice(ent.statuses)
        records.append(rec)
    url = f"https://api.internal.example/v2/{ent.plural}?updated_since=2025-03-01&limit=500"
    s.user(f"Pull the {ent.plural.replace('_', ' ')} updated since March 1st from the internal API "
           "and run our report on them. What are the numbers?")
    body = json.dumps({"items": records, "next_cursor": None, "count": len(records)}, indent=2)
    s.step([("http_get", {"url": url}, f"HTTP 200\ncontent-type: application/json\n\n{body}")],
           "Fetching the data first.")
    data = f"data/{ent.plural}.jsonl"
    s.step([("run_bash", {"command": f"mkdir -p data && curl -s '{url}' | jq -c '.items[]' > "
                                     f"{data} && wc -l {data}"},
             f"{len(records)} {data}")])
    totals = re.findall(r'lines\.append\(f"total (\w+):', module_text)
    counts = {st: sum(r["status"] == st for r in records) for st in ent.statuses}
    report = [f"{ent.plural.replace('_', ' ')}: {len(records)}",
              *(f"  {st:<12} {c:>6}" for st, c in counts.items()),
              *(f"total {f}: {sum(r[f] for r in records):,.2f}" for f in totals)]
    s.step([("run_bash", {"command": f"python -m {repo.package}.{ent.plural} {data}"},
             "\n".join(report))])
    s.answer(f"{len(records)} {ent.plural.replace('_', ' ')} were updated since March 1st. "
             "By status: "
             + ", ".join(f"{st} {c}" for st, c in counts.items() if c) + ". "
             + " ".join(f"Total {f}: {sum(r[f] for r in records):,.2f}." for f in totals)
             + f" The raw data is in `data/{ent.plural}.jsonl` if you want to dig further.")


def follow_up(s: Session, repo: Repo, rng: random.Random) -> None:
    """A second request in the same session, as users often add one."""
    choice = rng.randrange(3)
    if choice == 0:
        s.user("Thanks. Please commit this on a new branch and open a pull request.")
        branch = rng.choice(("fix/report-job", "chore/maintenance", "fix/ci-red", "feat/helper"))
        s.step([("create_branch", {"name": branch})])
        s.step([("git_commit", {"message": "Apply requested change\n\n"
                                           "See the pull request for details."})])
        s.step([("open_pull_request",
                 {"title": "Apply requested change",
                  "body": "Summary of the change and how it was verified."},
                 f"https://git.example.com/{repo.name}/pull/{rng.randint(100, 999)}")])
        s.answer("Done: committed on a new branch and opened a pull request (link above).")
    elif choice == 1:
        s.user("Can you add a line about this to CHANGELOG.md under Unreleased?")
        s.step([("read_file", {"path": "CHANGELOG.md"})])
        s.step([("str_replace", {
            "path": "CHANGELOG.md", "old_str": "## Unreleased\n",
            "new_str": "## Unreleased\n\n- Apply the requested maintenance change\n"})])
        s.answer("Added an entry under Unreleased in CHANGELOG.md.")
    else:
        s.user("Show me the full diff before I review it.")
        diff = s.step([("git_diff", {})])[0]
        touched = ("it touches " + str(diff.count("+++ ")) + " file(s)."
                   if diff != "no changes" else "there are no code changes.")
        s.answer("Here is the change set; " + touched)


SCENARIOS: dict[str, tuple[Callable[[Session, Repo, random.Random], None], tuple[str, ...]]] = {
    "fix_failing_test": (_sc_fix_failing_test, ("python", "go", "typescript")),
    "add_feature": (_sc_add_feature, ("python", "typescript", "go")),
    "explore_question": (_sc_explore_question, ("python", "go", "typescript")),
    "rename_refactor": (_sc_rename_refactor, ("python", "typescript", "go")),
    "sql_investigation": (_sc_sql_investigation, ("python", "go", "typescript")),
    "log_debugging": (_sc_log_debugging, ("python",)),
    "dependency_update": (_sc_dependency_update, ("python", "go", "typescript")),
    "ci_failure": (_sc_ci_failure, ("python", "typescript", "go")),
    "data_export": (_sc_data_export, ("python",)),
}
# Tasks that can follow another in one session (they do not depend on untouched helper code).
SECOND_TASKS = ("sql_investigation", "dependency_update", "explore_question", "data_export",
                 "log_debugging", "ci_failure")
SCENARIO_TOOLS = {
    "sql_investigation": ("list_tables", "describe_table", "sql_query"),
    "data_export": ("http_get", "http_post"),
    "ci_failure": ("list_ci_runs", "get_ci_logs", "lint", "format_code"),
}

