"""The coding set: single requests (and a few short chats) in seven sub-categories.

Each builder takes its own seeded generator, so one category can change without moving the rows
of the others. The sub-categories that copy more (whole-file edits, tests, bug fixes) or less
(prose answers) put their marker phrase in the final user turn; see `build.PHRASES`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tools.promptgen.compose import compose_file
from tools.promptgen.corpus import snippets_of
from tools.promptgen.entities import ENTITIES, Entity, go_entity_module, python_entity_module
from tools.promptgen.model import (
    DEFAULT_SEED,
    GENERATOR,
    LANGS,
    Instance,
    code_tokens,
    fence,
    instantiate,
    line_of,
    pick_lang,
    rng_for,
    round_tokens,
    snake_case,
)

CODING_CATEGORIES: tuple[str, ...] = (
    "codegen", "module", "edit_whole_file", "bugfix", "testgen", "explain_review", "multiturn",
)
# Rows per coding sub-category (about 240 in all; the load generator recycles prompts).
CODING_COUNTS: dict[str, int] = {
    "codegen": 40, "module": 32, "edit_whole_file": 36, "bugfix": 36, "testgen": 34,
    "explain_review": 32, "multiturn": 30,
}

_CODING_SYSTEMS: tuple[str, ...] = (
    "You are an expert software engineer. Write correct, idiomatic and maintainable code, and "
    "keep explanations short.",
    "You are a senior {lang} developer helping a colleague. Prefer the standard library, handle "
    "errors explicitly and follow the language's usual style guide.",
    "You are a careful programming assistant. When you write code, make it complete and runnable; "
    "when something is ambiguous, state the assumption you made in one sentence.",
    "You are a coding assistant inside an IDE. Answers are rendered as Markdown; put code in "
    "fenced blocks with a language tag.",
    "You are a helpful assistant.",
)


def _system(rng: random.Random, lang: str) -> list[dict[str, Any]]:
    # About a third of real coding requests carry no system prompt at all.
    if rng.random() < 0.35:
        return []
    text = rng.choice(_CODING_SYSTEMS).format(lang=LANGS[lang].title)
    return [{"role": "system", "content": text}]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _path_for(lang: str, stem: str, rng: random.Random) -> str:
    # Every language's choice is drawn (in this order) whatever `lang` is.
    folder = {"python": rng.choice(("src/app", "app", "lib", "service")),
              "typescript": "src",
              "go": rng.choice(("internal/core", "pkg/util", "internal/store")),
              "rust": "src", "java": "src/main/java/com/example", "cpp": "src",
              "sql": rng.choice(("queries", "sql/reports", "migrations")),
              "bash": rng.choice(("scripts", "bin", "ops"))}[lang]
    if lang == "java":
        return f"{folder}/{stem}.java"
    return f"{folder}/{snake_case(stem)}{LANGS[lang].ext}"


@dataclass
class SourceFile:
    """One file shown in a prompt, and which snippet instances it holds."""

    path: str
    text: str
    lang: str
    instances: list[Instance]
    entity: Entity | None = None


def _make_file(rng: random.Random, lang: str, min_parts: int, max_parts: int,
               must: Instance | None = None, entity_p: float = 0.45) -> SourceFile:
    """A source file of `lang` built from corpus snippets (and, for Python/Go, maybe an entity
    module) that contains `must` when given."""
    pool = snippets_of(lang)
    if lang in ("java", "bash"):
        min_parts = max_parts = 1
    k = max(1, min(rng.randint(min_parts, max_parts), len(pool)))
    chosen = [must.snippet] if must else []
    others = [s for s in pool if not must or s.key != must.snippet.key]
    rng.shuffle(others)
    chosen += others[: k - len(chosen)]
    instances = [must if must and s.key == must.snippet.key else instantiate(s, rng)
                 for s in chosen]
    rng.shuffle(instances)
    parts = [i.code for i in instances]
    entity = None
    if lang in ("python", "go") and rng.random() < entity_p:
        entity = rng.choice(ENTITIES)
        module = (python_entity_module(entity, rng) if lang == "python"
                  else go_entity_module(entity, rng, "store"))
        # An entity module is a whole file already; snippets join it as helpers below.
        if lang == "python":
            head, _, rest = module.partition("from __future__ import annotations\n")
            parts = ["from __future__ import annotations\n" + rest, *parts]
            text = compose_file(lang, parts, header=head.rstrip("\n"))
        else:
            text = compose_file(lang, [module, *parts], package="store")
        stem = entity.plural
    else:
        header = ""
        if lang == "python" and rng.random() < 0.6:
            header = f'"""Helpers: {"; ".join(i.name for i in instances)}."""'
        package = re.search(r"^package (\w+)", instances[0].code, re.M) if lang == "go" else None
        text = compose_file(lang, parts, header=header,
                            package=package.group(1) if package else "app")
        stem = instances[0].name
    return SourceFile(_path_for(lang, stem, rng), text, lang, instances, entity)


def _show_file(f: SourceFile) -> str:
    return f"`{f.path}`:\n\n{fence(f.text, f.lang)}"


def _coding_row(category: str, k: int, lang: str, messages: list[dict[str, Any]],
                max_tokens: int | list[int], seed: int, snippets: Sequence[str],
                targets: list[int] | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": f"coding/{category}-{k:03d}",
        "workload": "coding",
        "category": category,
        "messages": messages,
    }
    if targets is not None:
        row["targets"] = targets
    row["max_tokens"] = max_tokens
    row["meta"] = {"language": lang, "snippets": list(snippets), "source": "project",
                   "license": "project", "generator": GENERATOR, "seed": seed}
    return row


# --- codegen ---------------------------------------------------------------------------------

_CODEGEN_INTROS = (
    "Write this in {lang}.", "Implement the following in {lang}.", "I need some {lang} code.",
    "Please write {lang} code for the task below.", "{lang} task:",
)
_CODEGEN_CONTEXTS = (
    "", "", "It will be called from a web backend that handles a few hundred requests a second.",
    "This is for a data pipeline that processes nightly exports.",
    "It runs inside a command-line tool, so clear error messages matter more than speed.",
    "The code will be reviewed by a team that cares about readability.",
    "We're replacing a slow hand-rolled version in our codebase with this.",
)
_CODEGEN_ASKS = (
    "Reply with just the code.", "Include a brief docstring or doc comment.",
    "Use only the standard library.", "Keep it short and idiomatic.",
    "Add a couple of example calls at the end as comments.", "",
)


def _python_stub(inst: Instance) -> str | None:
    match = re.search(rf"^def {re.escape(inst.name)}\(.*?\).*?:\n", inst.code, re.S | re.M)
    if not match:
        return None
    words = inst.spec.split()
    lines: list[str] = []
    current = ""
    for word in words:
        if len(current) + len(word) + 1 > 84:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    lines.append(current)
    doc = "\n    ".join(lines)
    return f'{match.group(0)}    """{doc}\n    """\n'


def _codegen(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = pick_lang(rng)
    inst = instantiate(rng.choice(snippets_of(lang)), rng)
    title = LANGS[lang].title
    stub = _python_stub(inst) if lang == "python" and rng.random() < 0.4 else None
    if stub:
        text = f"Complete the following function:\n\n```python\n{stub}```"
    else:
        parts = [rng.choice(_CODEGEN_INTROS).format(lang=title), inst.spec,
                 rng.choice(_CODEGEN_CONTEXTS), rng.choice(_CODEGEN_ASKS)]
        text = "\n\n".join(p for p in parts if p)
    cap = round_tokens(code_tokens(len(inst.code)) * 1.5, 256, 1024)
    return _coding_row("codegen", k, lang, [*_system(rng, lang), _user(text)], cap, seed,
                       [inst.snippet.key])


# --- module ----------------------------------------------------------------------------------

_MODULE_TASKS: dict[str, tuple[str, ...]] = {
    "python": (
        "Write a Python module with a `{Cls}Repository` class that stores {plural} ({fields}) in "
        "SQLite using the sqlite3 module: create the table if missing, add, get by id, update, "
        "delete, and list with optional filtering by status ({statuses}). Use dataclasses for the "
        "records and parameterised queries. Include pytest tests for it in a second code block "
        "using an in-memory database.",
        "Write a command-line tool in Python (argparse, standard library only) called `{cli}` that "
        "reads a CSV file of {plural} with the columns {fields}, and prints per-status counts and "
        "totals; `--status` filters and `--format json|table` selects the output. Invalid rows "
        "are reported on stderr with their line number and skipped; exit code 2 when the file "
        "cannot be read. Include tests for the parsing and summarising functions.",
        "Build a small aiohttp web service in Python exposing CRUD endpoints for {plural} "
        "({fields}) under /api/{slug}, storing them in memory. Validate input and return JSON "
        "errors with proper status codes. Include tests that use aiohttp's test client.",
        "Write a Python class `{Cls}Importer` that imports {plural} from JSON lines, validates "
        "each record ({fields}; status one of {statuses}), de-duplicates by id keeping the newest, "
        "and returns an import report (accepted, rejected with reasons). Include tests covering "
        "the rejection paths.",
    ),
    "typescript": (
        "Write a TypeScript module for Node.js (no frameworks) with an HTTP request handler that "
        "serves {plural} ({fields}) under /api/{slug}: GET list with a `status` query filter, GET "
        "by id, POST to create with validation, DELETE. Keep storage in a Map behind a small "
        "repository interface. Include tests written with node:test.",
        "Implement a TypeScript class `{Cls}Store` with typed records ({fields}), an event emitted "
        "on every change, undo of the last change, and a `summary()` that counts records per "
        "status ({statuses}). Include Jest tests.",
    ),
    "go": (
        "Write a Go package `{slug}` with a net/http handler for {plural} ({fields}): list with "
        "status filter, get, create and delete, JSON in and out, backed by an interface so the "
        "storage can be swapped. Include table-driven tests using httptest.",
        "Write a Go command-line program that reads {plural} as JSON lines from stdin ({fields}), "
        "aggregates totals per status ({statuses}) concurrently with a worker pool, and prints a "
        "sorted report. Include tests for the aggregation function.",
    ),
    "rust": (
        "Write a Rust library module for {plural} ({fields}) with a `{Cls}` struct, a validating "
        "constructor returning Result with a custom error enum, a `Store` keyed by id with add, "
        "get, remove and filter-by-status ({statuses}), and serde-free CSV export. Include a "
        "#[cfg(test)] module with tests.",
    ),
    "java": (
        "Write a Java 17 service class `{Cls}Service` with a `{Cls}Repository` interface and an "
        "in-memory implementation for {plural} ({fields}). The service validates input, "
        "enforces status transitions ({statuses}) and throws descriptive exceptions. Include "
        "JUnit 5 tests.",
    ),
    "cpp": (
        "Write a C++17 header and implementation for a `{Cls}Registry` class that stores {plural} "
        "({fields}) keyed by id, supports add, find, erase and iteration in id order, and writes "
        "CSV to a std::ostream. Include GoogleTest tests.",
    ),
    "sql": (
        "Design a PostgreSQL schema for {plural} ({fields}; status one of {statuses}) with "
        "appropriate types, constraints and indexes, plus a view that reports counts and totals "
        "per status per month. Include a few INSERT statements and queries that check the "
        "constraints work.",
    ),
    "bash": (
        "Write a Bash script `{cli}` that manages a directory of {plural} stored as one JSON file "
        "each: subcommands add, list (with --status), show and remove, using jq. Validate "
        "arguments, print usage on misuse and exit non-zero on errors. Include a bats test file.",
    ),
}


def _module(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = pick_lang(rng)
    ent = rng.choice(ENTITIES)
    fields = ent.fields[: rng.randint(4, len(ent.fields))]
    text = rng.choice(_MODULE_TASKS[lang]).format(
        Cls=ent.name, plural=ent.plural.replace("_", " "), slug=ent.plural,
        fields=", ".join(f"{f} ({kind})" for f, kind in fields),
        statuses=", ".join(ent.statuses), cli=f"{ent.plural.replace('_', '-')}-report",
    )
    cap = rng.choice((1024, 1536, 2048, 2048))
    return _coding_row("module", k, lang, [*_system(rng, lang), _user(text)], cap, seed,
                       [f"entity:{ent.name}"])


# --- edit_whole_file -------------------------------------------------------------------------

_EDITS_ANY = (
    "Add a short doc comment to every public function and type that does not have one.",
    "Move the numeric and string literals that configure behaviour into named constants near "
    "the top of the file.",
    "Make every error message include the value that caused it.",
)
_EDITS: dict[str, tuple[str, ...]] = {
    "python": (
        "Add complete type hints to every function and method, including return types.",
        "Add an `__all__` list with the public names of this module, in the order they are "
        "defined.",
        "Replace the string status values with an `enum.Enum` subclass and update every use.",
        "Make the module safe to use from several threads by guarding shared state with a "
        "threading.RLock.",
    ),
    "typescript": (
        "Give every exported function an explicit return type and make array parameters readonly.",
        "Replace thrown strings and generic Errors with a small hierarchy of custom error classes.",
    ),
    "go": (
        "Wrap every returned error with context using fmt.Errorf and %w.",
        "Add a context.Context as the first parameter of every exported function that blocks or "
        "does I/O, and honour cancellation.",
    ),
    "rust": (
        "Add #[must_use] to functions that return values and derive Debug and Clone wherever "
        "possible.",
        "Replace panics and assertions in library code with Result-returning errors.",
    ),
    "java": ("Make fields final where possible and add Javadoc to the public API.",
             "Replace synchronized blocks with a ReentrantLock."),
    "cpp": ("Add [[nodiscard]] to functions that return values and mark single-argument "
            "constructors explicit.", "Mark member functions noexcept where they cannot throw."),
    "sql": ("Add a comment above each CTE explaining what it computes, and use explicit column "
            "lists.",
            "Parameterise the query by a date range ($1 inclusive, $2 exclusive)."),
    "bash": ("Add a --dry-run option that prints what would be done without changing anything.",
             "Log each step with a timestamp to stderr through a small log function."),
}
_EDIT_CLOSERS = (
    "Return the complete updated file, not a diff.",
    "Return the complete updated file in a single code block.",
    "Return the complete updated file; keep everything else unchanged.",
    "Return the complete updated file with no commentary before or after it.",
)


def _edit_whole_file(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = pick_lang(rng)
    f = _make_file(rng, lang, 3, 9, entity_p=0.7)
    inst = rng.choice(f.instances)
    if f.entity and lang == "python":
        old, new = f"{f.entity.name}Store", f"{f.entity.name}Repository"
    else:
        old = inst.name
        names = (inst.snippet.name, *inst.snippet.renames.get(inst.snippet.name, ()))
        alternatives = [n for n in names if n != old]
        new = rng.choice(alternatives) if alternatives else f"{old}_impl"
    options = [*_EDITS_ANY, *_EDITS[lang]]
    options.append(f"Rename `{old}` to `{new}` everywhere in the file, including comments, "
                   "docstrings and error messages.")
    if rng.random() < 0.3:
        other = rng.choice([i for i in f.instances])
        options = [f"Change `{other.name}` so that {rng.choice(_BEHAVIOUR_CHANGES)}"]
    instruction = rng.choice(options)
    closer = rng.choice(_EDIT_CLOSERS)
    if rng.random() < 0.5:
        text = f"{instruction}\n\n{_show_file(f)}\n\n{closer}"
    else:
        text = f"Here is {f.path}:\n\n{fence(f.text, lang)}\n\n{instruction} {closer}"
    cap = round_tokens(code_tokens(len(f.text)) * 1.1 + 128, 512, 4096, 256)
    return _coding_row("edit_whole_file", k, lang, [*_system(rng, lang), _user(text)], cap, seed,
                       [i.snippet.key for i in f.instances])


_BEHAVIOUR_CHANGES = (
    "it logs a warning (through the standard logging facility of the language) when it is "
    "given empty input.",
    "invalid input is rejected at the top of the function with a clear error.",
    "it counts how many times it has been called, exposed through a separate accessor.",
    "its main loop exits early when the result can no longer change.",
)


# --- bugfix ----------------------------------------------------------------------------------

_BUG_INTROS = (
    "This test started failing after a refactor:", "CI is red with this output:",
    "We get this in production:", "After my last change I see:", "A user reported:",
    "Output from the test run:",
)
_BUG_CLOSERS = (
    "Find and fix the bug. Explain the cause in one or two sentences, then show the corrected "
    "code.",
    "Find and fix the bug, and show only the functions you changed.",
    "Find and fix the bug; keep the fix minimal.",
    "Find and fix the bug. Show a unified diff.",
)


def _bugfix(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = pick_lang(rng)
    candidates = [s for s in snippets_of(lang) if s.bugs]
    inst = instantiate(rng.choice(candidates), rng)
    bug = rng.choice(inst.bugs)
    f = _make_file(rng, lang, 1, 4, must=inst)
    buggy = f.text.replace(bug.find, bug.replace, 1)
    line = line_of(f.text, bug.find)
    symptom = bug.symptom.replace("{file}", f.path).replace("{line}", str(line))
    f.text = buggy
    symptom_first = rng.random() < 0.5
    intro, closer = rng.choice(_BUG_INTROS), rng.choice(_BUG_CLOSERS)
    report = f"{intro}\n\n```\n{symptom}\n```"
    text = (f"{report}\n\n{_show_file(f)}\n\n{closer}" if symptom_first
            else f"{_show_file(f)}\n\n{report}\n\n{closer}")
    cap = round_tokens(code_tokens(len(inst.code)) * 1.3 + 128, 512, 1536)
    return _coding_row("bugfix", k, lang, [*_system(rng, lang), _user(text)], cap, seed,
                       [i.snippet.key for i in f.instances])


# --- testgen ---------------------------------------------------------------------------------

_TEST_ASKS = (
    "Write unit tests for `{name}` using {framework}. Cover normal cases, edge cases and errors.",
    "Write unit tests for `{name}` with {framework}; aim for full branch coverage and use "
    "descriptive test names.",
    "Write unit tests for `{name}` ({framework}). Group them by behaviour and include at least one "
    "test for invalid input.",
    "Write unit tests for the public API of this file with {framework}, focusing on `{name}`.",
)


def _testgen(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = pick_lang(rng)
    f = _make_file(rng, lang, 1, 3, entity_p=0.25)
    target = f.instances[0]
    ask = rng.choice(_TEST_ASKS).format(name=target.name, framework=LANGS[lang].test_framework)
    text = f"{_show_file(f)}\n\n{ask}" if rng.random() < 0.7 else f"{ask}\n\n{_show_file(f)}"
    cap = round_tokens(code_tokens(len(target.code)) * 2.0 + 256, 768, 2048, 256)
    return _coding_row("testgen", k, lang, [*_system(rng, lang), _user(text)], cap, seed,
                       [i.snippet.key for i in f.instances])


# --- explain_review --------------------------------------------------------------------------

_EXPLAIN_QUESTIONS = (
    "Explain step by step what `{name}` does, and give its time and memory complexity.",
    "Review this code as you would a pull request: correctness, edge cases, naming, error "
    "handling and maintainability. Rank your comments by importance.",
    "Is `{name}` safe to call from several threads at once? Explain where it could break.",
    "How would you change the design of `{name}` if the input were a hundred times larger? "
    "Describe the approach and the trade-offs.",
    "A new team member has to maintain this file. Explain how the pieces fit together and what "
    "they should be careful about.",
    "What are the failure modes of `{name}` in production, and how would you monitor for them?",
)
_EXPLAIN_CLOSERS = (
    "Answer in prose, without code.", "Answer in prose, without code blocks.",
    "Answer in prose, without code; a few short paragraphs are enough.",
)
_DESIGN_QUESTIONS = (
    "When should a service use a token bucket rather than a sliding-window counter for rate "
    "limiting? Compare burst handling, memory use and behaviour across several instances.",
    "We store money amounts as floats in a {lang} service. What problems does that cause, and "
    "what are the alternatives?",
    "What are the trade-offs between optimistic and pessimistic locking for a booking system "
    "where two users may reserve the same room?",
    "How should a {lang} library report errors to its callers? Compare exceptions or error values, "
    "error codes and result types.",
    "Explain how an LRU cache achieves O(1) get and put, and when an LFU cache would be a better "
    "choice.",
    "Our CI takes 40 minutes. Describe a plan to bring it under 10 minutes without losing "
    "coverage.",
    "What is the difference between concurrency and parallelism, using {lang} as the example "
    "language?",
    "How do database indexes speed up queries, and when does adding an index make things slower?",
)


def _explain_review(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = pick_lang(rng)
    closer = rng.choice(_EXPLAIN_CLOSERS)
    if rng.random() < 0.2:
        text = f"{rng.choice(_DESIGN_QUESTIONS).format(lang=LANGS[lang].title)} {closer}"
        keys: list[str] = []
        cap = 768
    else:
        f = _make_file(rng, lang, 1, 3)
        question = rng.choice(_EXPLAIN_QUESTIONS).format(name=rng.choice(f.instances).name)
        text = f"{_show_file(f)}\n\n{question} {closer}"
        keys = [i.snippet.key for i in f.instances]
        cap = rng.choice((512, 768, 1024))
    return _coding_row("explain_review", k, lang, [*_system(rng, lang), _user(text)], cap, seed,
                       keys)


# --- multiturn -------------------------------------------------------------------------------

_FOLLOW_UPS: dict[str, tuple[str, ...]] = {
    "any": (
        "Can you add input validation with clear error messages?",
        "Now make it handle very large inputs efficiently; what would you change?",
        "Please add comments explaining the non-obvious parts.",
        "Now add tests for it using {framework}.",
        "Rename things so the names say what the values mean, and show the whole code again.",
        "Make it configurable: the magic numbers should become parameters with defaults.",
    ),
    "python": ("Add type hints and a docstring, please.",
               "Make it a generator instead of building a list.",
               "Can you make it async-friendly?"),
    "typescript": ("Make it generic so it works for any element type.",
                   "Convert it to use async/await."),
    "go": ("Make it safe for concurrent use.", "Return errors instead of panicking."),
    "rust": ("Make it generic over the element type.", "Avoid the extra allocations."),
    "java": ("Make it thread-safe.", "Use records where it makes sense."),
    "cpp": ("Make it a template.", "Make it exception-safe."),
    "sql": ("Make it work on MySQL 8 as well.",
            "Add an index that would speed it up and explain why."),
    "bash": ("Make it POSIX sh compatible.", "Add a --verbose flag."),
}
_REPLY_LEADS = ("Here's an implementation:", "Sure. Here is one way to do it:",
                "Here is a version that follows the specification:", "This should do it:")


def _multiturn(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = pick_lang(rng)
    inst = instantiate(rng.choice(snippets_of(lang)), rng)
    framework = LANGS[lang].test_framework
    follow = [x.format(framework=framework) for x in (*_FOLLOW_UPS["any"], *_FOLLOW_UPS[lang])]
    rng.shuffle(follow)
    messages = [*_system(rng, lang), _user(f"{inst.spec}\n\nUse {LANGS[lang].title}."),
                {"role": "assistant",
                 "content": f"{rng.choice(_REPLY_LEADS)}\n\n{fence(inst.code, lang)}\n\n"
                            f"It {inst.summary}."},
                _user(follow[0])]
    targets = [len(messages)]
    caps = [round_tokens(code_tokens(len(inst.code)) * 1.4, 512, 1536)]
    if rng.random() < 0.5:
        revised = f"{LANGS[lang].comment} Revised: {follow[0].rstrip('?.!').lower()}\n{inst.code}"
        messages += [{"role": "assistant",
                      "content": f"Updated version:\n\n{fence(revised, lang)}"},
                     _user(follow[1])]
        targets.append(len(messages))
        caps.append(caps[0])
    return _coding_row("multiturn", k, lang, messages, caps, seed, [inst.snippet.key], targets)


_CODING_BUILDERS: dict[str, Callable[[random.Random, int, int], dict[str, Any]]] = {
    "codegen": _codegen, "module": _module, "edit_whole_file": _edit_whole_file,
    "bugfix": _bugfix, "testgen": _testgen, "explain_review": _explain_review,
    "multiturn": _multiturn,
}


def generate_coding(seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for category in CODING_CATEGORIES:
        for k in range(CODING_COUNTS[category]):
            rows.append(_CODING_BUILDERS[category](rng_for(seed, "coding", category, k), k, seed))
    return rows
