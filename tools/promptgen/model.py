"""What the generator is made of: snippets, languages, seeded draws and snippet instances.

Every random choice goes through `rng_for`, a `random.Random` seeded with a string built from the
seed and the purpose, so no draw depends on time, the environment, hash seeds or the order in
which other rows were built.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

# Recorded in every row's meta. The name predates the move out of the package; changing it would
# change every committed row.
GENERATOR = "specbench.promptgen/1"
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Bug:
    find: str
    replace: str
    symptom: str


@dataclass(frozen=True)
class Snippet:
    key: str
    lang: str
    name: str  # the main function / type, as named in `code`
    summary: str  # one sentence: what it does
    spec: str  # a task statement from which the code could be written
    code: str
    renames: dict[str, tuple[str, ...]] = field(default_factory=dict)
    bugs: tuple[Bug, ...] = ()
    # (call, expected) pairs in the snippet's own language, for generated test files.
    examples: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Lang:
    key: str
    title: str
    fence: str
    ext: str
    test_framework: str
    comment: str


LANGS: dict[str, Lang] = {
    "python": Lang("python", "Python", "python", ".py", "pytest", "#"),
    "typescript": Lang("typescript", "TypeScript", "ts", ".ts", "Jest", "//"),
    "go": Lang("go", "Go", "go", ".go", "the standard testing package", "//"),
    "rust": Lang("rust", "Rust", "rust", ".rs", "cargo test (#[cfg(test)] module)", "//"),
    "java": Lang("java", "Java", "java", ".java", "JUnit 5", "//"),
    "cpp": Lang("cpp", "C++", "cpp", ".cpp", "GoogleTest", "//"),
    "sql": Lang("sql", "SQL", "sql", ".sql", "pgTAP", "--"),
    "bash": Lang("bash", "Bash", "bash", ".sh", "bats", "#"),
}
# Relative weights when a language is drawn: about half Python, as in real coding traffic.
LANG_WEIGHTS: dict[str, int] = {
    "python": 50, "typescript": 12, "go": 10, "rust": 8, "java": 7, "cpp": 5, "sql": 4, "bash": 4,
}


def rng_for(seed: int, *parts: object) -> random.Random:
    """A generator for one purpose; string seeds are hashed with SHA-512, stable everywhere."""
    return random.Random("/".join([f"specbench-promptgen-{seed}", *map(str, parts)]))


def pick_lang(rng: random.Random, allowed: Sequence[str] | None = None) -> str:
    langs = [k for k in LANG_WEIGHTS if allowed is None or k in allowed]
    return rng.choices(langs, weights=[LANG_WEIGHTS[k] for k in langs])[0]


def call_id(rng: random.Random) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return "".join(rng.choice(alphabet) for _ in range(9))


def fence(code: str, lang: str) -> str:
    return f"```{LANGS[lang].fence}\n{code.rstrip()}\n```"


def line_of(text: str, needle: str) -> int:
    """1-based line where `needle` starts (its first non-blank line)."""
    pos = text.index(needle)
    skip = len(needle) - len(needle.lstrip("\n"))
    return text.count("\n", 0, pos + skip) + 1


def round_tokens(n: float, lo: int, hi: int, step: int = 128) -> int:
    return int(max(lo, min(hi, step * round(n / step))))


def code_tokens(chars: int) -> float:
    # Code tokenises denser than English: about 3.3 characters per token.
    return chars / 3.3


@dataclass(frozen=True)
class Instance:
    """A snippet after seeded renames: the names and text a prompt actually shows."""

    snippet: Snippet
    name: str
    summary: str
    spec: str
    code: str
    bugs: tuple[Bug, ...]
    examples: tuple[tuple[str, str], ...]

    @property
    def lang(self) -> str:
        return self.snippet.lang


def instantiate(snippet: Snippet, rng: random.Random) -> Instance:
    mapping: dict[str, str] = {}
    for old, alternatives in snippet.renames.items():
        # Keep the original name about a third of the time, as real code reuses common names.
        choice = rng.choice((old, *alternatives))
        if choice != old:
            mapping[old] = choice

    def sub(text: str) -> str:
        for old, new in mapping.items():
            text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(old)}(?![A-Za-z0-9_])", new, text)
        return text

    return Instance(
        snippet=snippet, name=sub(snippet.name), summary=sub(snippet.summary),
        spec=sub(snippet.spec), code=sub(snippet.code),
        bugs=tuple(Bug(sub(b.find), sub(b.replace), sub(b.symptom)) for b in snippet.bugs),
        examples=tuple((sub(c), sub(e)) for c, e in snippet.examples),
    )


_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def snake_case(name: str) -> str:
    return _SNAKE.sub("_", name).lower()

