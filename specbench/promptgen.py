"""Seeded generator of the built-in prompt sets ``prompts/coding.jsonl`` and ``prompts/agentic.jsonl``.

Why generate instead of downloading: the benchmark must run offline, public speculative-decoding
sets have no agentic split, and random-token prompts overstate speculative speedups. So the sets
are written here from a project-authored code corpus (the ``Snippet`` table below) and templates,
varied by seeded renames, file compositions and task wording. Nothing here is third-party text.

Determinism: every choice comes from ``random.Random`` seeded with a string derived from the seed
(never time, environment or set iteration order), and rows are serialised with a fixed key order,
so ``python -m specbench.promptgen`` rebuilds both files byte for byte. Each row records
``meta.generator`` and ``meta.seed``.

The simulated server picks a per-request acceptance mean by matching phrases in the prompt text.
The coding sub-categories that copy more (whole-file edits, tests, bug fixes) or less (prose
answers) each carry exactly one marker phrase in their final user turn (``PHRASES``); no other
row, coding or agentic, contains any of them.
"""

# The code corpus below holds source lines verbatim, some longer than the house line length.
# ruff: noqa: E501
from __future__ import annotations

import argparse
import difflib
import json
import random
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GENERATOR = "specbench.promptgen/1"
DEFAULT_SEED = 0
SET_FILES: dict[str, str] = {"coding": "coding.jsonl", "agentic": "agentic.jsonl"}
# Marker phrases the simulated server matches (first match wins); one per copy-heavy or prose
# sub-category, in the final user turn only.
PHRASES: dict[str, str] = {
    "edit_whole_file": "Return the complete updated file",
    "testgen": "Write unit tests",
    "bugfix": "Find and fix the bug",
    "explain_review": "Answer in prose, without code",
}
CODING_CATEGORIES: tuple[str, ...] = (
    "codegen", "module", "edit_whole_file", "bugfix", "testgen", "explain_review", "multiturn",
)
# Rows per coding sub-category (about 240 in all; the load generator recycles prompts).
CODING_COUNTS: dict[str, int] = {
    "codegen": 40, "module": 32, "edit_whole_file": 36, "bugfix": 36, "testgen": 34,
    "explain_review": 32, "multiturn": 30,
}
AGENTIC_SESSIONS = 40


# ============================================================================ code corpus
# Project-written snippets. Each is real code with concrete names; `renames` lists identifiers
# the generator may swap (word-boundary replacement in code, spec, summary and bug text alike), so
# one snippet yields several distinct prompts. A bug is a (correct text -> buggy text) swap plus the
# failure a developer would see; `{file}` and `{line}` in the symptom are filled in per prompt.


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

_PY: list[Snippet] = [
    Snippet(
        "py_merge_intervals", "python", "merge_intervals",
        "merges overlapping closed intervals and returns them sorted by start",
        "Write a function `merge_intervals(intervals: list[tuple[int, int]]) -> "
        "list[tuple[int, int]]` that merges overlapping closed intervals and returns them sorted "
        "by start. Touching intervals such as (1, 2) and (2, 3) count as overlapping. Raise "
        "ValueError for an interval whose start is greater than its end. Example: "
        "merge_intervals([(1, 3), (2, 6), (8, 10)]) returns [(1, 6), (8, 10)].",
        r'''def merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge overlapping closed intervals; the result is sorted by start."""
    for start, end in intervals:
        if start > end:
            raise ValueError(f"interval ({start}, {end}) has start > end")
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            last_start, last_end = merged[-1]
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged
''',
        {"merge_intervals": ("coalesce_ranges", "merge_spans", "union_intervals"),
         "intervals": ("ranges", "spans", "periods")},
        (Bug("max(last_end, end)", "end",
             "FAILED tests/test_ranges.py::test_nested_interval - AssertionError\n"
             ">       assert merge_intervals([(1, 10), (2, 3)]) == [(1, 10)]\n"
             "E       AssertionError: assert [(1, 3)] == [(1, 10)]\n"
             "{file}:{line}: AssertionError"),
         Bug("start <= merged[-1][1]", "start < merged[-1][1]",
             "FAILED tests/test_ranges.py::test_touching - AssertionError\n"
             ">       assert merge_intervals([(1, 2), (2, 3)]) == [(1, 3)]\n"
             "E       AssertionError: assert [(1, 2), (2, 3)] == [(1, 3)]")),
        (("merge_intervals([(1, 3), (2, 6), (8, 10)])", "[(1, 6), (8, 10)]"),
         ("merge_intervals([(1, 10), (2, 3)])", "[(1, 10)]"),
         ("merge_intervals([(1, 2), (2, 3)])", "[(1, 3)]"),
         ("merge_intervals([])", "[]")),
    ),
    Snippet(
        "py_lru_cache", "python", "LRUCache",
        "is a fixed-capacity least-recently-used cache built on OrderedDict",
        "Implement a class `LRUCache` with a constructor taking `capacity: int`, a method "
        "`get(key)` that returns the cached value or None and marks the key as recently used, and "
        "`put(key, value)` that inserts or updates a key and evicts the least recently used entry "
        "when the cache is over capacity. Both operations must be O(1). Reject a capacity below 1 "
        "with ValueError.",
        r'''from collections import OrderedDict
from typing import Any, Hashable


class LRUCache:
    """A fixed-capacity cache that evicts the least recently used key."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any | None:
        if key not in self._data:
            return None
        self._data.move_to_end(key)
        return self._data[key]

    def put(self, key: Hashable, value: Any) -> None:
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        if len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
''',
        {"LRUCache": ("RecentCache", "BoundedCache", "LruStore"), "capacity": ("max_items", "limit")},
        (Bug("self._data.popitem(last=False)", "self._data.popitem()",
             "FAILED tests/test_cache.py::test_evicts_oldest - AssertionError\n"
             ">       assert cache.get(\"b\") == 2\n"
             "E       AssertionError: assert None == 2\n"
             "E        +  where None = <LRUCache object at 0x7f3a2c1d0e50>.get('b')"),
         Bug("        self._data.move_to_end(key)\n        return self._data[key]",
             "        return self._data[key]",
             "FAILED tests/test_cache.py::test_get_refreshes_key - AssertionError\n"
             ">       assert cache.get(\"a\") == 1\n"
             "E       AssertionError: assert None == 1")),
        (("len(LRUCache(2))", "0"),),
    ),
    Snippet(
        "py_token_bucket", "python", "TokenBucket",
        "is a token-bucket rate limiter with an injectable clock",
        "Write a `TokenBucket` rate limiter class. The constructor takes `rate_per_s: float` and "
        "`burst: int`; `try_acquire(tokens: int = 1) -> bool` takes tokens if available and "
        "returns whether it did. Refill continuously based on elapsed time, never above `burst`. "
        "Accept an optional `clock` callable (defaulting to time.monotonic) so tests can control "
        "time.",
        r'''import time
from typing import Callable


class TokenBucket:
    """Allow `rate_per_s` operations per second on average, with bursts up to `burst`."""

    def __init__(self, rate_per_s: float, burst: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be > 0 and burst >= 1")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._last
        self._last = now
        self._tokens = min(self.burst, self._tokens + elapsed * self.rate_per_s)

    def try_acquire(self, tokens: int = 1) -> bool:
        self._refill()
        if tokens <= self._tokens:
            self._tokens -= tokens
            return True
        return False
''',
        {"TokenBucket": ("RateLimiter", "Throttle", "LeakyGate"), "try_acquire": ("allow", "take")},
        (Bug("min(self.burst, self._tokens + elapsed * self.rate_per_s)",
             "self._tokens + elapsed * self.rate_per_s",
             "FAILED tests/test_ratelimit.py::test_burst_is_capped - AssertionError\n"
             ">       assert sum(bucket.try_acquire() for _ in range(10)) == 5\n"
             "E       AssertionError: assert 10 == 5"),),
        (),
    ),
    Snippet(
        "py_retry", "python", "retry",
        "is a decorator that retries a function with exponential backoff on chosen exceptions",
        "Write a decorator factory `retry(attempts: int = 3, base_delay_s: float = 0.1, "
        "exceptions: tuple[type[BaseException], ...] = (Exception,))`. The decorated function is "
        "called up to `attempts` times; after a failure it sleeps base_delay_s * 2**(attempt-1) "
        "seconds. The last exception is re-raised. Keep the wrapped function's name and docstring.",
        r'''import functools
import time
from typing import Callable, TypeVar

T = TypeVar("T")


def retry(attempts: int = 3, base_delay_s: float = 0.1,
          exceptions: tuple[type[BaseException], ...] = (Exception,),
          sleep: Callable[[float], None] = time.sleep) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Retry the decorated function on `exceptions`, doubling the delay after each failure."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")

    def decorator(func: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(func)
        def wrapper(*args: object, **kwargs: object) -> T:
            for attempt in range(1, attempts + 1):
                try:
                    return func(*args, **kwargs)
                except exceptions:
                    if attempt == attempts:
                        raise
                    sleep(base_delay_s * 2 ** (attempt - 1))
            raise AssertionError("unreachable")
        return wrapper
    return decorator
''',
        {"retry": ("with_retries", "retrying", "backoff_retry"), "attempts": ("tries", "max_attempts")},
        (Bug("for attempt in range(1, attempts + 1):", "for attempt in range(1, attempts):",
             "FAILED tests/test_retry.py::test_succeeds_on_last_attempt - RuntimeError: flaky\n"
             "    @retry(attempts=3, sleep=lambda s: None)\n"
             "    def flaky():\n"
             "        calls.append(1)\n"
             "        if len(calls) < 3:\n"
             ">           raise RuntimeError(\"flaky\")\n"
             "E           RuntimeError: flaky"),),
        (),
    ),
    Snippet(
        "py_chunked", "python", "chunked",
        "splits any iterable into lists of at most `size` items, lazily",
        "Write a generator `chunked(items: Iterable[T], size: int) -> Iterator[list[T]]` that "
        "yields consecutive lists of `size` items; the last chunk may be shorter. It must work on "
        "iterators without materialising them and raise ValueError when size < 1.",
        r'''from itertools import islice
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Yield lists of `size` consecutive items; the last one may be shorter."""
    if size < 1:
        raise ValueError("size must be at least 1")
    iterator = iter(items)
    while True:
        chunk = list(islice(iterator, size))
        if not chunk:
            return
        yield chunk
''',
        {"chunked": ("batched", "in_chunks", "split_every"), "size": ("n", "batch_size")},
        (Bug("        if not chunk:\n            return\n", "",
             "FAILED tests/test_chunks.py::test_chunks_of_two - Failed: Timeout >30.0s\n"
             "tests/test_chunks.py:8: in test_chunks_of_two\n"
             "    assert list(chunked([1, 2, 3], 2)) == [[1, 2], [3]]\n"
             "+++++++++++++++++++++++++++++++++++ Timeout +++++++++++++++++++++++++++++++++++"),),
        (("list(chunked([1, 2, 3], 2))", "[[1, 2], [3]]"), ("list(chunked([], 3))", "[]"),
         ("list(chunked(range(4), 4))", "[[0, 1, 2, 3]]")),
    ),
    Snippet(
        "py_flatten_dict", "python", "flatten_dict",
        "flattens nested dictionaries into a single level with dotted keys",
        "Write `flatten_dict(nested: dict[str, Any], sep: str = \".\") -> dict[str, Any]` that "
        "turns nested dictionaries into one level, joining keys with `sep`. Non-dict values "
        "(including lists) are kept as they are; an empty nested dict disappears. Example: "
        "{\"a\": {\"b\": 1, \"c\": {\"d\": 2}}, \"e\": 3} becomes {\"a.b\": 1, \"a.c.d\": 2, \"e\": 3}.",
        r'''from typing import Any


def flatten_dict(nested: dict[str, Any], sep: str = ".", prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts into one level; keys are joined with `sep`."""
    flat: dict[str, Any] = {}
    for key, value in nested.items():
        full_key = f"{prefix}{sep}{key}" if prefix else key
        if isinstance(value, dict):
            flat.update(flatten_dict(value, sep, full_key))
        else:
            flat[full_key] = value
    return flat
''',
        {"flatten_dict": ("flatten_mapping", "to_dotted", "flatten_config"), "nested": ("tree", "data")},
        (Bug("flat.update(flatten_dict(value, sep, full_key))", "flat.update(flatten_dict(value, sep, key))",
             "FAILED tests/test_flatten.py::test_three_levels - AssertionError\n"
             ">       assert flatten_dict({\"a\": {\"c\": {\"d\": 2}}}) == {\"a.c.d\": 2}\n"
             "E       AssertionError: assert {'c.d': 2} == {'a.c.d': 2}"),),
        (("flatten_dict({\"a\": {\"b\": 1, \"c\": {\"d\": 2}}, \"e\": 3})",
          "{\"a.b\": 1, \"a.c.d\": 2, \"e\": 3}"),
         ("flatten_dict({})", "{}"), ("flatten_dict({\"x\": {}})", "{}")),
    ),
    Snippet(
        "py_levenshtein", "python", "edit_distance",
        "computes the Levenshtein edit distance between two strings in O(len(a) * len(b)) time "
        "and O(len(b)) memory",
        "Write `edit_distance(a: str, b: str) -> int` returning the Levenshtein distance "
        "(insertions, deletions and substitutions all cost 1). Use a single rolling row so memory "
        "is O(len(b)). Example: edit_distance(\"kitten\", \"sitting\") == 3.",
        r'''def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance with one rolling row of the DP table."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            cost = 0 if char_a == char_b else 1
            current.append(min(
                previous[j] + 1,         # deletion
                current[j - 1] + 1,      # insertion
                previous[j - 1] + cost,  # substitution
            ))
        previous = current
    return previous[-1]
''',
        {"edit_distance": ("levenshtein", "string_distance", "edit_cost")},
        (Bug("current = [i]", "current = [0]",
             "FAILED tests/test_distance.py::test_deletion_only - AssertionError\n"
             ">       assert edit_distance(\"abc\", \"\") == 3\n"
             "E       AssertionError: assert 0 == 3"),),
        (("edit_distance(\"kitten\", \"sitting\")", "3"), ("edit_distance(\"\", \"abc\")", "3"),
         ("edit_distance(\"same\", \"same\")", "0")),
    ),
    Snippet(
        "py_dijkstra", "python", "shortest_paths",
        "computes single-source shortest path distances with Dijkstra's algorithm and a heap",
        "Write `shortest_paths(graph: dict[str, list[tuple[str, float]]], source: str) -> "
        "dict[str, float]` that returns the shortest distance from `source` to every reachable "
        "node using Dijkstra's algorithm with heapq. Edge weights are non-negative; raise "
        "ValueError on a negative weight. Unreachable nodes are left out of the result.",
        r'''import heapq


def shortest_paths(graph: dict[str, list[tuple[str, float]]], source: str) -> dict[str, float]:
    """Dijkstra from `source`; returns distances of reachable nodes only."""
    dist: dict[str, float] = {source: 0.0}
    heap: list[tuple[float, str]] = [(0.0, source)]
    while heap:
        d, node = heapq.heappop(heap)
        if d > dist.get(node, float("inf")):
            continue  # stale heap entry
        for neighbour, weight in graph.get(node, []):
            if weight < 0:
                raise ValueError(f"negative edge weight {weight} on {node}->{neighbour}")
            candidate = d + weight
            if candidate < dist.get(neighbour, float("inf")):
                dist[neighbour] = candidate
                heapq.heappush(heap, (candidate, neighbour))
    return dist
''',
        {"shortest_paths": ("dijkstra", "distances_from", "route_costs"), "graph": ("network", "adjacency")},
        (Bug("candidate = d + weight", "candidate = weight",
             "FAILED tests/test_graph.py::test_two_hops - AssertionError\n"
             ">       assert shortest_paths(g, \"a\")[\"c\"] == 3.0\n"
             "E       AssertionError: assert 2.0 == 3.0"),),
        (("shortest_paths({\"a\": [(\"b\", 1.0)], \"b\": [(\"c\", 2.0)]}, \"a\")",
          "{\"a\": 0.0, \"b\": 1.0, \"c\": 3.0}"),
         ("shortest_paths({}, \"x\")", "{\"x\": 0.0}")),
    ),
    Snippet(
        "py_parse_duration", "python", "parse_duration",
        "parses human durations such as '1h30m' or '45s' into seconds",
        "Write `parse_duration(text: str) -> int` that converts strings like \"1h30m\", \"45s\", "
        "\"2d\" or \"1h 5m 10s\" into a number of seconds. Units are d, h, m and s; whitespace "
        "between parts is allowed; anything else (including an empty string) raises ValueError "
        "with a message that quotes the input.",
        r'''import re

_PART = re.compile(r"\s*(\d+)\s*([dhms])")
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    """'1h30m' -> 5400. Units: d, h, m, s."""
    pos = 0
    total_s = 0
    stripped = text.strip()
    if not stripped:
        raise ValueError(f"empty duration {text!r}")
    while pos < len(stripped):
        match = _PART.match(stripped, pos)
        if match is None:
            raise ValueError(f"cannot parse duration {text!r} at position {pos}")
        total_s += int(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    return total_s
''',
        {"parse_duration": ("duration_to_seconds", "parse_interval", "seconds_from_text"),
         "total_s": ("seconds", "acc_s")},
        (Bug("total_s += int(match.group(1)) * _UNIT_S[match.group(2)]",
             "total_s = int(match.group(1)) * _UNIT_S[match.group(2)]",
             "FAILED tests/test_duration.py::test_hours_and_minutes - AssertionError\n"
             ">       assert parse_duration(\"1h30m\") == 5400\n"
             "E       AssertionError: assert 1800 == 5400"),),
        (("parse_duration(\"1h30m\")", "5400"), ("parse_duration(\"45s\")", "45"),
         ("parse_duration(\"2d\")", "172800"), ("parse_duration(\"1h 5m 10s\")", "3910")),
    ),
    Snippet(
        "py_slugify", "python", "slugify",
        "turns a title into a lowercase ASCII URL slug",
        "Write `slugify(title: str, max_length: int = 60) -> str` that lowercases the text, "
        "strips accents (NFKD normalisation), replaces every run of non-alphanumeric characters "
        "with a single hyphen, trims hyphens at both ends and cuts the result to `max_length` "
        "without leaving a trailing hyphen. Example: slugify(\"Héllo, World!\") == \"hello-world\".",
        r'''import re
import unicodedata


def slugify(title: str, max_length: int = 60) -> str:
    """'Héllo, World!' -> 'hello-world'."""
    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug[:max_length].rstrip("-")
''',
        {"slugify": ("make_slug", "to_slug", "url_slug"), "title": ("text", "heading")},
        (Bug('.strip("-")', "",
             "FAILED tests/test_slug.py::test_punctuation_at_ends - AssertionError\n"
             ">       assert slugify(\"Hello, World!\") == \"hello-world\"\n"
             "E       AssertionError: assert 'hello-world-' == 'hello-world'"),),
        (("slugify(\"Hello, World!\")", "\"hello-world\""), ("slugify(\"  A  B  \")", "\"a-b\""),
         ("slugify(\"\")", "\"\"")),
    ),
    Snippet(
        "py_moving_average", "python", "moving_average",
        "computes a simple moving average over a sliding window in O(n)",
        "Write `moving_average(values: Sequence[float], window: int) -> list[float]` returning the "
        "mean of every full window of `window` consecutive values, in O(n) time using a running "
        "sum. Return an empty list when there are fewer values than the window; raise ValueError "
        "when window < 1.",
        r'''from typing import Sequence


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Means of each full window, computed with a running sum."""
    if window < 1:
        raise ValueError("window must be at least 1")
    if len(values) < window:
        return []
    running = sum(values[:window])
    averages = [running / window]
    for i in range(window, len(values)):
        running += values[i] - values[i - window]
        averages.append(running / window)
    return averages
''',
        {"moving_average": ("rolling_mean", "sliding_average", "smooth"), "window": ("span", "width")},
        (Bug("running += values[i] - values[i - window]", "running += values[i] - values[i - window + 1]",
             "FAILED tests/test_smoothing.py::test_three_point_window - AssertionError\n"
             ">       assert moving_average([1, 2, 3, 4, 5], 3) == [2.0, 3.0, 4.0]\n"
             "E       AssertionError: assert [2.0, 2.6666666666666665, 3.3333333333333335] == [2.0, 3.0, 4.0]"),),
        (("moving_average([1, 2, 3, 4, 5], 3)", "[2.0, 3.0, 4.0]"), ("moving_average([1], 2)", "[]")),
    ),
    Snippet(
        "py_toposort", "python", "topological_order",
        "orders tasks so that every dependency comes first (Kahn's algorithm) and reports cycles",
        "Write `topological_order(deps: dict[str, set[str]]) -> list[str]` where deps maps each "
        "task to the tasks it depends on. Return an order in which every task comes after its "
        "dependencies, breaking ties alphabetically so the result is deterministic. Tasks that "
        "appear only as dependencies are included. Raise ValueError naming the tasks involved "
        "when there is a cycle.",
        r'''import heapq


def topological_order(deps: dict[str, set[str]]) -> list[str]:
    """Kahn's algorithm with a heap, so ties come out alphabetically."""
    nodes = set(deps) | {d for ds in deps.values() for d in ds}
    indegree = {node: 0 for node in nodes}
    dependents: dict[str, list[str]] = {node: [] for node in nodes}
    for task, requirements in deps.items():
        for requirement in requirements:
            indegree[task] += 1
            dependents[requirement].append(task)
    ready = [node for node, count in indegree.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for dependent in dependents[node]:
            indegree[dependent] -= 1
            if indegree[dependent] == 0:
                heapq.heappush(ready, dependent)
    if len(order) != len(nodes):
        stuck = sorted(node for node, count in indegree.items() if count > 0)
        raise ValueError(f"dependency cycle among: {', '.join(stuck)}")
    return order
''',
        {"topological_order": ("build_order", "resolve_order", "schedule_tasks"), "deps": ("graph", "requires")},
        (Bug("            indegree[dependent] -= 1\n            if indegree[dependent] == 0:",
             "            if indegree[dependent] == 0:",
             "FAILED tests/test_order.py::test_chain - ValueError: dependency cycle among: b, c\n"
             "    def test_chain():\n"
             ">       assert topological_order({\"b\": {\"a\"}, \"c\": {\"b\"}}) == [\"a\", \"b\", \"c\"]\n"
             "E       ValueError: dependency cycle among: b, c"),),
        (("topological_order({\"b\": {\"a\"}, \"c\": {\"b\"}})", "[\"a\", \"b\", \"c\"]"),
         ("topological_order({})", "[]")),
    ),
    Snippet(
        "py_word_freq", "python", "top_words",
        "counts word frequencies in a text and returns the most common ones, ties alphabetical",
        "Write `top_words(text: str, n: int = 10, stopwords: frozenset[str] = frozenset()) -> "
        "list[tuple[str, int]]` that lowercases the text, splits it into words (letters and "
        "apostrophes), drops stop words and returns the `n` most frequent words with their "
        "counts, sorted by count descending and then alphabetically.",
        r'''import re
from collections import Counter

_WORD = re.compile(r"[a-z']+")


def top_words(text: str, n: int = 10, stopwords: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
    """Most frequent words, by count then alphabetically."""
    words = (w.strip("'") for w in _WORD.findall(text.lower()))
    counts = Counter(w for w in words if w and w not in stopwords)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ranked[:n]
''',
        {"top_words": ("most_common_words", "word_ranking", "frequent_terms"), "stopwords": ("ignored", "skip_words")},
        (Bug("key=lambda item: (-item[1], item[0])", "key=lambda item: (item[1], item[0])",
             "FAILED tests/test_words.py::test_most_common_first - AssertionError\n"
             ">       assert top_words(\"b a b c b a\", 2) == [(\"b\", 3), (\"a\", 2)]\n"
             "E       AssertionError: assert [('c', 1), ('a', 2)] == [('b', 3), ('a', 2)]"),),
        (("top_words(\"b a b c b a\", 2)", "[(\"b\", 3), (\"a\", 2)]"), ("top_words(\"\")", "[]")),
    ),
    Snippet(
        "py_inventory_csv", "python", "load_inventory",
        "loads and validates inventory rows from CSV text into dataclasses, collecting errors "
        "with line numbers",
        "Write a dataclass `InventoryItem(sku: str, name: str, quantity: int, unit_price: float)` "
        "and a function `load_inventory(text: str) -> tuple[list[InventoryItem], list[str]]` that "
        "parses CSV text with a header row (sku,name,quantity,unit_price). Valid rows become items; "
        "each invalid row (missing field, non-numeric or negative quantity or price) adds an error "
        "string of the form 'line N: reason' instead of stopping the parse.",
        r'''import csv
import io
from dataclasses import dataclass


@dataclass(frozen=True)
class InventoryItem:
    sku: str
    name: str
    quantity: int
    unit_price: float

    @property
    def total_value(self) -> float:
        return self.quantity * self.unit_price


def load_inventory(text: str) -> tuple[list[InventoryItem], list[str]]:
    """Parse CSV rows; bad rows are reported as 'line N: reason' and skipped."""
    items: list[InventoryItem] = []
    errors: list[str] = []
    reader = csv.DictReader(io.StringIO(text))
    for line_no, row in enumerate(reader, start=2):
        try:
            sku = (row.get("sku") or "").strip()
            name = (row.get("name") or "").strip()
            if not sku or not name:
                raise ValueError("sku and name are required")
            quantity = int(row["quantity"])
            unit_price = float(row["unit_price"])
            if quantity < 0 or unit_price < 0:
                raise ValueError("quantity and unit_price must not be negative")
        except (KeyError, TypeError, ValueError) as exc:
            errors.append(f"line {line_no}: {exc}")
            continue
        items.append(InventoryItem(sku, name, quantity, unit_price))
    return items, errors
''',
        {"InventoryItem": ("StockItem", "Product", "CatalogEntry"), "load_inventory": ("parse_stock", "read_catalog"),
         "unit_price": ("price", "cost")},
        (Bug("enumerate(reader, start=2)", "enumerate(reader)",
             "FAILED tests/test_inventory.py::test_error_line_numbers - AssertionError\n"
             ">       assert errors == [\"line 3: quantity and unit_price must not be negative\"]\n"
             "E       AssertionError: assert ['line 1: quantity and unit_price must not be negative'] == "
             "['line 3: quantity and unit_price must not be negative']"),),
        (("load_inventory(\"sku,name,quantity,unit_price\\n\")", "([], [])"),),
    ),
    Snippet(
        "py_bisect_first", "python", "first_at_least",
        "finds the index of the first element not smaller than a target in a sorted list by binary "
        "search",
        "Write `first_at_least(sorted_values: Sequence[int], target: int) -> int` that returns the "
        "index of the first element >= target in an ascending sequence, or len(sorted_values) if "
        "there is none. Implement the binary search yourself (no bisect module) in O(log n).",
        r'''from typing import Sequence


def first_at_least(sorted_values: Sequence[int], target: int) -> int:
    """Lower bound: index of the first value >= target (len() when none)."""
    lo, hi = 0, len(sorted_values)
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_values[mid] < target:
            lo = mid + 1
        else:
            hi = mid
    return lo
''',
        {"first_at_least": ("lower_bound", "search_left", "find_insert_point"), "sorted_values": ("values", "keys")},
        (Bug("lo = mid + 1", "lo = mid",
             "FAILED tests/test_search.py::test_target_after_all - Failed: Timeout >30.0s\n"
             "tests/test_search.py:14: in test_target_after_all\n"
             "    assert first_at_least([1, 3, 5], 9) == 3"),),
        (("first_at_least([1, 3, 5], 3)", "1"), ("first_at_least([1, 3, 5], 9)", "3"),
         ("first_at_least([], 1)", "0")),
    ),
    Snippet(
        "py_settings", "python", "load_settings",
        "loads typed settings from a JSON file with environment variable overrides",
        "Write a frozen dataclass `Settings(host: str = \"127.0.0.1\", port: int = 8080, debug: "
        "bool = False, workers: int = 4)` and `load_settings(path: Path | None, env: "
        "Mapping[str, str]) -> Settings`. Values come from the JSON file when given, then from "
        "environment variables APP_HOST, APP_PORT, APP_DEBUG, APP_WORKERS, which win. Convert "
        "types (\"1\", \"true\", \"yes\" mean True) and raise ValueError naming the variable when a "
        "value does not convert or a JSON key is unknown.",
        r'''import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    debug: bool = False
    workers: int = 4


def _convert(name: str, raw: Any, kind: type) -> Any:
    if kind is bool:
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(f"{name}={raw!r} is not a boolean")
    try:
        return kind(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={raw!r} is not a valid {kind.__name__}") from None


def load_settings(path: Path | None, env: Mapping[str, str]) -> Settings:
    """File values first, then APP_* environment variables."""
    types = {f.name: type(f.default) for f in fields(Settings)}
    values: dict[str, Any] = {}
    if path is not None:
        for key, raw in json.loads(path.read_text()).items():
            if key not in types:
                raise ValueError(f"unknown setting {key!r} in {path}")
            values[key] = _convert(key, raw, types[key])
    for name, kind in types.items():
        var = f"APP_{name.upper()}"
        if var in env:
            values[name] = _convert(var, env[var], kind)
    return Settings(**values)
''',
        {"Settings": ("AppConfig", "ServiceSettings", "Options"), "load_settings": ("read_config", "load_options")},
        (Bug("        if var in env:\n            values[name]", "        if var in values:\n            values[name]",
             "FAILED tests/test_settings.py::test_env_overrides_file - AssertionError\n"
             ">       assert load_settings(cfg, {\"APP_PORT\": \"9000\"}).port == 9000\n"
             "E       AssertionError: assert 8080 == 9000"),),
        (("load_settings(None, {}).port", "8080"), ("load_settings(None, {\"APP_DEBUG\": \"yes\"}).debug", "True")),
    ),
    Snippet(
        "py_rle", "python", "rle_encode",
        "run-length encodes and decodes strings such as 'aaab' <-> '3a1b'",
        "Write `rle_encode(text: str) -> str` and `rle_decode(encoded: str) -> str` for run-length "
        "encoding where each run is written as its count followed by the character, e.g. "
        "\"aaabcc\" <-> \"3a1b2c\". Counts may have several digits. rle_decode must raise "
        "ValueError on malformed input such as a trailing count.",
        r'''import re

_RUN = re.compile(r"(\d+)(\D)")


def rle_encode(text: str) -> str:
    """'aaabcc' -> '3a1b2c'."""
    if not text:
        return ""
    parts: list[str] = []
    current, count = text[0], 1
    for char in text[1:]:
        if char == current:
            count += 1
        else:
            parts.append(f"{count}{current}")
            current, count = char, 1
    parts.append(f"{count}{current}")
    return "".join(parts)


def rle_decode(encoded: str) -> str:
    """'3a1b2c' -> 'aaabcc'."""
    pos = 0
    out: list[str] = []
    while pos < len(encoded):
        match = _RUN.match(encoded, pos)
        if match is None:
            raise ValueError(f"malformed run-length text at position {pos}: {encoded!r}")
        out.append(match.group(2) * int(match.group(1)))
        pos = match.end()
    return "".join(out)
''',
        {"rle_encode": ("run_length_encode", "compress_runs"), "rle_decode": ("run_length_decode", "expand_runs")},
        (Bug('    parts.append(f"{count}{current}")\n    return', "    return",
             "FAILED tests/test_rle.py::test_roundtrip - AssertionError\n"
             ">       assert rle_encode(\"aaabcc\") == \"3a1b2c\"\n"
             "E       AssertionError: assert '3a1b' == '3a1b2c'"),),
        (("rle_encode(\"aaabcc\")", "\"3a1b2c\""), ("rle_decode(\"3a1b2c\")", "\"aaabcc\""),
         ("rle_encode(\"\")", "\"\"")),
    ),
    Snippet(
        "py_group_by", "python", "group_by",
        "groups items by a key function preserving first-seen key order, with optional value "
        "projection",
        "Write `group_by(items: Iterable[T], key: Callable[[T], K], value: Callable[[T], V] | None "
        "= None) -> dict[K, list[V]]` that groups items by key, keeps keys in first-seen order and "
        "items in input order, and applies `value` to each item when given.",
        r'''from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


def group_by(items: Iterable[T], key: Callable[[T], K],
             value: Callable[[T], V] | None = None) -> dict[K, list]:
    """Group items by key; keys keep first-seen order, items keep input order."""
    groups: dict[K, list] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item if value is None else value(item))
    return groups
''',
        {"group_by": ("bucket_by", "partition_by", "index_by")},
        (Bug("groups.setdefault(key(item), []).append", "groups[key(item)] = [].append",
             "FAILED tests/test_grouping.py::test_groups_words_by_length - AssertionError\n"
             ">       assert group_by([\"a\", \"bb\", \"c\"], len) == {1: [\"a\", \"c\"], 2: [\"bb\"]}\n"
             "E       AssertionError: assert {1: None, 2: None} == {1: ['a', 'c'], 2: ['bb']}"),),
        (("group_by([\"a\", \"bb\", \"c\"], len)", "{1: [\"a\", \"c\"], 2: [\"bb\"]}"),
         ("group_by([], len)", "{}")),
    ),
]

_TS: list[Snippet] = [
    Snippet(
        "ts_debounce", "typescript", "debounce",
        "delays calls to a function until a quiet period has passed, with a cancel method",
        "Write a TypeScript function `debounce<A extends unknown[]>(fn: (...args: A) => void, "
        "waitMs: number)` that returns a debounced function: each call restarts a timer and `fn` "
        "runs once, with the latest arguments, after `waitMs` ms without calls. The returned "
        "function must also have a `cancel()` method that drops a pending call.",
        r'''export interface Debounced<A extends unknown[]> {
  (...args: A): void;
  cancel(): void;
}

export function debounce<A extends unknown[]>(fn: (...args: A) => void, waitMs: number): Debounced<A> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const debounced = ((...args: A) => {
    if (timer !== undefined) {
      clearTimeout(timer);
    }
    timer = setTimeout(() => {
      timer = undefined;
      fn(...args);
    }, waitMs);
  }) as Debounced<A>;
  debounced.cancel = () => {
    if (timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
  };
  return debounced;
}
''',
        {"debounce": ("debounced", "quietCall", "settle"), "waitMs": ("delayMs", "quietMs")},
        (Bug("    if (timer !== undefined) {\n      clearTimeout(timer);\n    }\n    timer = setTimeout",
             "    timer = setTimeout",
             "FAIL src/debounce.test.ts\n  ● debounce › calls fn once after a burst\n\n"
             "    expect(jest.fn()).toHaveBeenCalledTimes(expected)\n\n    Expected number of calls: 1\n"
             "    Received number of calls: 3\n\n      at Object.<anonymous> (src/debounce.test.ts:17:20)"),),
        (),
    ),
    Snippet(
        "ts_deep_merge", "typescript", "deepMerge",
        "recursively merges plain objects, with arrays and primitives from the override winning",
        "Write `deepMerge<T extends Record<string, unknown>>(base: T, override: Partial<T>): T` in "
        "TypeScript. Plain objects are merged recursively; arrays, primitives and null in "
        "`override` replace the base value; undefined in `override` is ignored. Neither input may "
        "be mutated.",
        r'''type Plain = Record<string, unknown>;

function isPlainObject(value: unknown): value is Plain {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function deepMerge<T extends Plain>(base: T, override: Partial<T>): T {
  const result: Plain = { ...base };
  for (const [key, value] of Object.entries(override)) {
    if (value === undefined) {
      continue;
    }
    const current = result[key];
    result[key] = isPlainObject(current) && isPlainObject(value) ? deepMerge(current, value) : value;
  }
  return result as T;
}
''',
        {"deepMerge": ("mergeDeep", "mergeConfig", "overlay"), "override": ("patch", "overrides")},
        (Bug("    if (value === undefined) {\n      continue;\n    }\n", "",
             "FAIL src/merge.test.ts\n  ● deepMerge › ignores undefined overrides\n\n"
             "    expect(received).toEqual(expected) // deep equality\n\n"
             "    - Expected  - 1\n    + Received  + 1\n\n      Object {\n    -   \"port\": 8080,\n"
             "    +   \"port\": undefined,\n      }"),),
        (("deepMerge({ a: { b: 1 } }, { a: { c: 2 } } as any)", "{ a: { b: 1, c: 2 } }"),
         ("deepMerge({ a: 1 }, {})", "{ a: 1 }")),
    ),
    Snippet(
        "ts_query_string", "typescript", "parseQuery",
        "parses a URL query string into a map of string arrays, decoding percent escapes and '+'",
        "Write `parseQuery(query: string): Map<string, string[]>` in TypeScript. Accept an optional "
        "leading '?', split on '&', decode '+' as a space and percent escapes with "
        "decodeURIComponent, keep repeated keys as several values in order, and treat a key "
        "without '=' as having the empty string as its value. Skip empty segments.",
        r'''export function parseQuery(query: string): Map<string, string[]> {
  const params = new Map<string, string[]>();
  const body = query.startsWith("?") ? query.slice(1) : query;
  for (const segment of body.split("&")) {
    if (segment === "") {
      continue;
    }
    const eq = segment.indexOf("=");
    const rawKey = eq === -1 ? segment : segment.slice(0, eq);
    const rawValue = eq === -1 ? "" : segment.slice(eq + 1);
    const key = decodeURIComponent(rawKey.replace(/\+/g, " "));
    const value = decodeURIComponent(rawValue.replace(/\+/g, " "));
    const values = params.get(key) ?? [];
    values.push(value);
    params.set(key, values);
  }
  return params;
}
''',
        {"parseQuery": ("parseSearchParams", "decodeQuery", "readQuery")},
        (Bug("segment.slice(eq + 1)", "segment.slice(eq)",
             "FAIL src/query.test.ts\n  ● parseQuery › reads a single pair\n\n"
             "    expect(received).toEqual(expected)\n\n    Expected: [\"1\"]\n    Received: [\"=1\"]"),),
        (("parseQuery(\"?a=1&a=2\").get(\"a\")", "[\"1\", \"2\"]"), ("parseQuery(\"\").size", "0")),
    ),
    Snippet(
        "ts_event_emitter", "typescript", "TypedEmitter",
        "is a small typed event emitter with on/off/once and safe emission order",
        "Implement a TypeScript class `TypedEmitter<Events extends Record<string, unknown[]>>` "
        "with `on(event, listener)` returning an unsubscribe function, `once(event, listener)`, "
        "`off(event, listener)` and `emit(event, ...args)` returning the number of listeners "
        "called. Listeners added during an emit must not run in that emit.",
        r'''type Listener<A extends unknown[]> = (...args: A) => void;

export class TypedEmitter<Events extends Record<string, unknown[]>> {
  private listeners = new Map<keyof Events, Set<Listener<any>>>();

  on<E extends keyof Events>(event: E, listener: Listener<Events[E]>): () => void {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(listener);
    return () => this.off(event, listener);
  }

  once<E extends keyof Events>(event: E, listener: Listener<Events[E]>): () => void {
    const wrapper: Listener<Events[E]> = (...args) => {
      this.off(event, wrapper);
      listener(...args);
    };
    return this.on(event, wrapper);
  }

  off<E extends keyof Events>(event: E, listener: Listener<Events[E]>): void {
    this.listeners.get(event)?.delete(listener);
  }

  emit<E extends keyof Events>(event: E, ...args: Events[E]): number {
    const snapshot = [...(this.listeners.get(event) ?? [])];
    for (const listener of snapshot) {
      listener(...args);
    }
    return snapshot.length;
  }
}
''',
        {"TypedEmitter": ("EventBus", "Emitter", "SignalHub")},
        (Bug("      this.off(event, wrapper);\n      listener(...args);", "      listener(...args);",
             "FAIL src/emitter.test.ts\n  ● TypedEmitter › once listeners run a single time\n\n"
             "    expect(jest.fn()).toHaveBeenCalledTimes(expected)\n\n    Expected number of calls: 1\n"
             "    Received number of calls: 2"),),
        (),
    ),
    Snippet(
        "ts_group_by", "typescript", "groupBy",
        "groups array items into a record keyed by a selector",
        "Write a generic TypeScript function `groupBy<T, K extends string | number>(items: "
        "readonly T[], keyOf: (item: T) => K): Record<K, T[]>` that keeps the input order inside "
        "each group and does not mutate the input.",
        r'''export function groupBy<T, K extends string | number>(items: readonly T[], keyOf: (item: T) => K): Record<K, T[]> {
  const groups = {} as Record<K, T[]>;
  for (const item of items) {
    const key = keyOf(item);
    if (!(key in groups)) {
      groups[key] = [];
    }
    groups[key].push(item);
  }
  return groups;
}
''',
        {"groupBy": ("bucketBy", "indexBy", "partitionBy"), "keyOf": ("selector", "getKey")},
        (Bug("if (!(key in groups))", "if (key in groups)",
             "FAIL src/group.test.ts\n  ● groupBy › groups words by length\n\n"
             "    TypeError: Cannot read properties of undefined (reading 'push')\n\n"
             "      at groupBy (src/{file}:{line}:19)"),),
        (("groupBy([\"a\", \"bb\", \"c\"], (s) => s.length)", "{ 1: [\"a\", \"c\"], 2: [\"bb\"] }"),),
    ),
    Snippet(
        "ts_fetch_retry", "typescript", "fetchJson",
        "fetches JSON with a timeout and retries on network errors and 5xx responses",
        "Write an async TypeScript function `fetchJson<T>(url: string, options: { timeoutMs?: "
        "number; retries?: number } = {}): Promise<T>` using the global fetch and AbortController. "
        "Retry network errors and 5xx responses up to `retries` times with a 200 ms * attempt "
        "delay; throw an Error that includes the status for 4xx responses without retrying.",
        r'''export class HttpError extends Error {
  constructor(public readonly status: number, url: string) {
    super(`GET ${url} failed with status ${status}`);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function fetchJson<T>(url: string, options: { timeoutMs?: number; retries?: number } = {}): Promise<T> {
  const { timeoutMs = 5000, retries = 2 } = options;
  for (let attempt = 0; ; attempt++) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const response = await fetch(url, { signal: controller.signal });
      if (response.status >= 400 && response.status < 500) {
        throw new HttpError(response.status, url);
      }
      if (!response.ok) {
        throw new Error(`server error ${response.status}`);
      }
      return (await response.json()) as T;
    } catch (err) {
      if (err instanceof HttpError || attempt >= retries) {
        throw err;
      }
      await sleep(200 * (attempt + 1));
    } finally {
      clearTimeout(timer);
    }
  }
}
''',
        {"fetchJson": ("getJson", "requestJson", "loadJson"), "retries": ("maxRetries", "attempts")},
        (Bug("if (err instanceof HttpError || attempt >= retries)", "if (attempt >= retries)",
             "FAIL src/http.test.ts (6.2 s)\n  ● fetchJson › does not retry a 404\n\n"
             "    expect(jest.fn()).toHaveBeenCalledTimes(expected)\n\n    Expected number of calls: 1\n"
             "    Received number of calls: 3"),),
        (),
    ),
]

_GO: list[Snippet] = [
    Snippet(
        "go_word_count", "go", "CountWords",
        "counts words across many files concurrently with a bounded worker pool",
        "Write a Go function `CountWords(paths []string, workers int) (map[string]int, error)` "
        "that reads the files concurrently with at most `workers` goroutines, splits contents "
        "with strings.Fields, lowercases words and merges the counts. Return the first read error "
        "(wrapped with the path) after all workers finish.",
        r'''package textstats

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// CountWords counts lowercase words across files using at most `workers` goroutines.
func CountWords(paths []string, workers int) (map[string]int, error) {
	if workers < 1 {
		workers = 1
	}
	jobs := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	totals := make(map[string]int)

	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for path := range jobs {
				data, err := os.ReadFile(path)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("read %s: %w", path, err)
					}
				} else {
					for _, word := range strings.Fields(string(data)) {
						totals[strings.ToLower(word)]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, path := range paths {
		jobs <- path
	}
	close(jobs)
	wg.Wait()
	return totals, firstErr
}
''',
        {"CountWords": ("WordCounts", "TallyWords", "CountTokens"), "workers": ("parallelism", "poolSize")},
        (Bug("	close(jobs)\n	wg.Wait()", "	wg.Wait()",
             "fatal error: all goroutines are asleep - deadlock!\n\ngoroutine 1 [semacquire]:\n"
             "sync.runtime_Semacquire(0xc000012148?)\n\t/usr/local/go/src/runtime/sema.go:62 +0x25\n"
             "sync.(*WaitGroup).Wait(0xc000012140)\n\t/usr/local/go/src/sync/waitgroup.go:116 +0x48\n"
             "example.com/textstats.CountWords({0xc00001e0c0, 0x2, 0x2}, 0x4)\n\t{file}:{line} +0x1d9\n"
             "FAIL\texample.com/textstats\t0.012s"),),
        (),
    ),
    Snippet(
        "go_parse_kv", "go", "ParseConfig",
        "parses key=value configuration text with comments and quoted values",
        "Write a Go function `ParseConfig(r io.Reader) (map[string]string, error)` that reads "
        "lines of `key = value`, ignores blank lines and lines starting with '#', trims spaces, "
        "strips one pair of surrounding double quotes from values, and returns an error naming the "
        "line number for a line without '=' or with an empty key. Later keys override earlier ones.",
        r'''package config

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ParseConfig reads `key = value` lines; '#' starts a comment line.
func ParseConfig(r io.Reader) (map[string]string, error) {
	values := make(map[string]string)
	scanner := bufio.NewScanner(r)
	lineNo := 0
	for scanner.Scan() {
		lineNo++
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, found := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !found || key == "" {
			return nil, fmt.Errorf("line %d: expected key = value, got %q", lineNo, line)
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && strings.HasPrefix(value, "\"") && strings.HasSuffix(value, "\"") {
			value = value[1 : len(value)-1]
		}
		values[key] = value
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return values, nil
}
''',
        {"ParseConfig": ("ReadSettings", "LoadKV", "ParseEnvFile"), "values": ("settings", "entries")},
        (Bug("value = value[1 : len(value)-1]", "value = value[1:]",
             "--- FAIL: TestParseConfig/quoted_value (0.00s)\n"
             "    config_test.go:41: got name = \"demo\\\"\", want \"demo\"\nFAIL\n"
             "FAIL\texample.com/config\t0.004s"),),
        (("mustParse(\"a = 1\\n# c\\nb = \\\"x\\\"\\n\")[\"b\"]", "\"x\""),),
    ),
    Snippet(
        "go_health_handler", "go", "HealthHandler",
        "serves a JSON health endpoint that reports each dependency check and returns 503 when "
        "one fails",
        "Write a Go net/http handler constructor `HealthHandler(checks map[string]func(context."
        "Context) error, timeout time.Duration) http.Handler`. On GET it runs every check with a "
        "context timeout, responds with JSON {\"status\": \"ok\"|\"degraded\", \"checks\": {name: "
        "\"ok\" | error text}} and status 200 or 503; other methods get 405.",
        r'''package health

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

type report struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// HealthHandler runs each dependency check and reports 503 if any fails.
func HealthHandler(checks map[string]func(context.Context) error, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		out := report{Status: "ok", Checks: make(map[string]string, len(checks))}
		for name, check := range checks {
			if err := check(ctx); err != nil {
				out.Status = "degraded"
				out.Checks[name] = err.Error()
			} else {
				out.Checks[name] = "ok"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if out.Status != "ok" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(out)
	})
}
''',
        {"HealthHandler": ("NewHealthHandler", "ReadinessHandler", "StatusHandler"), "checks": ("probes", "deps")},
        (Bug("				out.Status = \"degraded\"\n", "",
             "--- FAIL: TestHealthHandler/failing_database (0.00s)\n"
             "    health_test.go:58: status = 200, want 503\nFAIL\nFAIL\texample.com/health\t0.006s"),),
        (),
    ),
    Snippet(
        "go_stack", "go", "Stack",
        "is a generic slice-backed stack with Push, Pop and Peek",
        "Implement a generic Go type `Stack[T any]` backed by a slice with methods `Push(v T)`, "
        "`Pop() (T, bool)`, `Peek() (T, bool)` and `Len() int`. Pop and Peek on an empty stack "
        "return the zero value and false. Pop must not keep a reference to the removed element.",
        r'''package collections

// Stack is a LIFO stack backed by a slice.
type Stack[T any] struct {
	items []T
}

// Push adds v on top.
func (s *Stack[T]) Push(v T) {
	s.items = append(s.items, v)
}

// Pop removes and returns the top element.
func (s *Stack[T]) Pop() (T, bool) {
	var zero T
	if len(s.items) == 0 {
		return zero, false
	}
	last := len(s.items) - 1
	v := s.items[last]
	s.items[last] = zero // let the GC reclaim it
	s.items = s.items[:last]
	return v, true
}

// Peek returns the top element without removing it.
func (s *Stack[T]) Peek() (T, bool) {
	var zero T
	if len(s.items) == 0 {
		return zero, false
	}
	return s.items[len(s.items)-1], true
}

// Len is the number of elements.
func (s *Stack[T]) Len() int { return len(s.items) }
''',
        {"Stack": ("LIFO", "Pile"), "items": ("elems", "data")},
        (Bug("v := s.items[last]", "v := s.items[0]",
             "--- FAIL: TestStackOrder (0.00s)\n    stack_test.go:19: Pop() = 1, want 3\nFAIL\n"
             "FAIL\texample.com/collections\t0.003s"),),
        (),
    ),
    Snippet(
        "go_retry", "go", "Retry",
        "retries an operation with exponential backoff until it succeeds or the context ends",
        "Write a Go function `Retry(ctx context.Context, attempts int, base time.Duration, op "
        "func(context.Context) error) error` that calls op up to `attempts` times, sleeping base*2^i "
        "between attempts, returns nil on the first success, stops early with ctx.Err() when the "
        "context is cancelled, and otherwise returns the last error wrapped with the attempt count.",
        r'''package retry

import (
	"context"
	"fmt"
	"time"
)

// Retry calls op until it succeeds, `attempts` runs out, or ctx is done.
func Retry(ctx context.Context, attempts int, base time.Duration, op func(context.Context) error) error {
	var err error
	for i := 0; i < attempts; i++ {
		if err = op(ctx); err == nil {
			return nil
		}
		if i == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(base << i):
		}
	}
	return fmt.Errorf("after %d attempts: %w", attempts, err)
}
''',
        {"Retry": ("WithBackoff", "Do", "RetryOp"), "attempts": ("maxTries", "tries")},
        (Bug("		if i == attempts-1 {\n			break\n		}\n", "",
             "--- FAIL: TestRetryGivesUp (1.60s)\n    retry_test.go:33: took 1.6s, want < 1s "
             "(slept after the last attempt)\nFAIL\nFAIL\texample.com/retry\t1.612s"),),
        (),
    ),
]

_RUST: list[Snippet] = [
    Snippet(
        "rs_tokenizer", "rust", "tokenize",
        "tokenizes arithmetic expressions into numbers, operators and parentheses",
        "Write a Rust function `tokenize(input: &str) -> Result<Vec<Token>, String>` with `enum "
        "Token { Num(f64), Op(char), LParen, RParen }`. Skip whitespace, read decimal numbers "
        "such as 3.25, accept + - * / as operators and return an error naming the position of "
        "any other character.",
        r'''#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    Num(f64),
    Op(char),
    LParen,
    RParen,
}

pub fn tokenize(input: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' => i += 1,
            '+' | '-' | '*' | '/' => {
                tokens.push(Token::Op(c));
                i += 1;
            }
            '(' => {
                tokens.push(Token::LParen);
                i += 1;
            }
            ')' => {
                tokens.push(Token::RParen);
                i += 1;
            }
            '0'..='9' | '.' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                let value = text
                    .parse::<f64>()
                    .map_err(|_| format!("bad number {:?} at {}", text, start))?;
                tokens.push(Token::Num(value));
            }
            other => return Err(format!("unexpected {:?} at {}", other, i)),
        }
    }
    Ok(tokens)
}
''',
        {"tokenize": ("lex", "scan_tokens", "tokenise"), "Token": ("Tok", "Lexeme")},
        (Bug("            ')' => {\n                tokens.push(Token::RParen);\n                i += 1;",
             "            ')' => {\n                tokens.push(Token::RParen);",
             "running 3 tests\ntest tests::parens ... FAILED\n\nfailures:\n\n---- tests::parens stdout ----\n"
             "thread 'tests::parens' has overflowed its stack\n(test timed out after 60 seconds)\n\n"
             "error: test failed, to rerun pass `--lib`"),),
        (),
    ),
    Snippet(
        "rs_word_freq", "rust", "word_frequencies",
        "counts word frequencies with a HashMap and returns the top n sorted by count then word",
        "Write `fn word_frequencies(text: &str, n: usize) -> Vec<(String, usize)>` in Rust that "
        "lowercases words (split on non-alphanumeric characters), counts them with a HashMap and "
        "returns the n most frequent, ordered by count descending then alphabetically.",
        r'''use std::collections::HashMap;

pub fn word_frequencies(text: &str, n: usize) -> Vec<(String, usize)> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }
    let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(n);
    ranked
}
''',
        {"word_frequencies": ("top_words", "count_words", "rank_words")},
        (Bug("b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0))", "b.1.cmp(&a.1)",
             "---- tests::ties_are_alphabetical stdout ----\nthread 'tests::ties_are_alphabetical' "
             "panicked at src/lib.rs:41:9:\nassertion `left == right` failed\n  left: "
             "[(\"b\", 1), (\"a\", 1)]\n right: [(\"a\", 1), (\"b\", 1)]"),),
        (),
    ),
    Snippet(
        "rs_ring_buffer", "rust", "RingBuffer",
        "is a fixed-capacity ring buffer that overwrites the oldest element when full",
        "Implement `struct RingBuffer<T>` in Rust with `new(capacity: usize)`, `push(&mut self, "
        "value: T) -> Option<T>` (returns the overwritten oldest value when full), `pop(&mut "
        "self) -> Option<T>` (oldest first), `len` and `is_empty`. Panic in `new` when capacity is "
        "zero. Use a Vec<Option<T>> and head/len indices.",
        r'''pub struct RingBuffer<T> {
    slots: Vec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> RingBuffer<T> {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "capacity must be positive");
        let mut slots = Vec::with_capacity(capacity);
        slots.resize_with(capacity, || None);
        RingBuffer { slots, head: 0, len: 0 }
    }

    pub fn push(&mut self, value: T) -> Option<T> {
        let cap = self.slots.len();
        let tail = (self.head + self.len) % cap;
        let evicted = self.slots[tail].replace(value);
        if self.len == cap {
            self.head = (self.head + 1) % cap;
        } else {
            self.len += 1;
        }
        evicted
    }

    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots[self.head].take();
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        value
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
''',
        {"RingBuffer": ("CircularBuffer", "Ring", "BoundedQueue"), "slots": ("cells", "buf")},
        (Bug("        self.head = (self.head + 1) % self.slots.len();\n        self.len -= 1;",
             "        self.len -= 1;",
             "---- tests::fifo_order stdout ----\nthread 'tests::fifo_order' panicked at src/ring.rs:88:9:\n"
             "assertion `left == right` failed\n  left: None\n right: Some(2)"),),
        (),
    ),
    Snippet(
        "rs_config", "rust", "parse_config",
        "parses INI-style sections into nested HashMaps with line-numbered errors",
        "Write `fn parse_config(text: &str) -> Result<HashMap<String, HashMap<String, String>>, "
        "ConfigError>` in Rust for INI-like text: `[section]` headers, `key = value` lines, blank "
        "lines and ';' comments. Keys before any section go to section \"\". ConfigError carries "
        "the 1-based line number and a message and implements Display.",
        r'''use std::collections::HashMap;
use std::fmt;

#[derive(Debug, PartialEq)]
pub struct ConfigError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

pub fn parse_config(text: &str) -> Result<HashMap<String, HashMap<String, String>>, ConfigError> {
    let mut sections: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut current = String::new();
    for (idx, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_string();
            sections.entry(current.clone()).or_default();
            continue;
        }
        let (key, value) = line.split_once('=').ok_or_else(|| ConfigError {
            line: idx + 1,
            message: format!("expected key = value, got {:?}", line),
        })?;
        sections
            .entry(current.clone())
            .or_default()
            .insert(key.trim().to_string(), value.trim().to_string());
    }
    Ok(sections)
}
''',
        {"parse_config": ("parse_ini", "read_sections", "load_ini"), "ConfigError": ("IniError", "ParseError")},
        (Bug("line: idx + 1,", "line: idx,",
             "---- tests::reports_line_numbers stdout ----\nthread 'tests::reports_line_numbers' panicked "
             "at src/config.rs:77:9:\nassertion `left == right` failed\n  left: 2\n right: 3"),),
        (),
    ),
    Snippet(
        "rs_binary_search", "rust", "find_first_ge",
        "returns the index of the first element >= target in a sorted slice",
        "Write a generic Rust function `find_first_ge<T: Ord>(sorted: &[T], target: &T) -> usize` "
        "that performs a lower-bound binary search without using the standard library's search "
        "helpers, returning sorted.len() when every element is smaller.",
        r'''pub fn find_first_ge<T: Ord>(sorted: &[T], target: &T) -> usize {
    let (mut lo, mut hi) = (0usize, sorted.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if sorted[mid] < *target {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
''',
        {"find_first_ge": ("lower_bound", "partition_point_ge", "search_left")},
        (Bug("let (mut lo, mut hi) = (0usize, sorted.len());", "let (mut lo, mut hi) = (0usize, sorted.len() - 1);",
             "---- tests::empty_slice stdout ----\nthread 'tests::empty_slice' panicked at src/search.rs:2:44:\n"
             "attempt to subtract with overflow"),),
        (),
    ),
]

_JAVA: list[Snippet] = [
    Snippet(
        "java_account", "java", "Account",
        "models a bank account with deposits, withdrawals and an atomic transfer between accounts",
        "Write a Java class `Account` with an id, an owner and a balance in cents (long), methods "
        "`deposit(long cents)`, `withdraw(long cents)` and a static `transfer(Account from, Account "
        "to, long cents)`. Reject non-positive amounts with IllegalArgumentException and "
        "overdrafts with an `InsufficientFundsException` (checked). Make transfer thread-safe "
        "without deadlocks by locking accounts in id order.",
        r'''public final class Account {
    private final long id;
    private final String owner;
    private long balanceCents;

    public Account(long id, String owner, long openingCents) {
        if (openingCents < 0) {
            throw new IllegalArgumentException("opening balance must not be negative");
        }
        this.id = id;
        this.owner = owner;
        this.balanceCents = openingCents;
    }

    public synchronized long balanceCents() {
        return balanceCents;
    }

    public synchronized void deposit(long cents) {
        requirePositive(cents);
        balanceCents += cents;
    }

    public synchronized void withdraw(long cents) throws InsufficientFundsException {
        requirePositive(cents);
        if (cents > balanceCents) {
            throw new InsufficientFundsException(id, cents, balanceCents);
        }
        balanceCents -= cents;
    }

    public static void transfer(Account from, Account to, long cents) throws InsufficientFundsException {
        Account first = from.id < to.id ? from : to;
        Account second = first == from ? to : from;
        synchronized (first) {
            synchronized (second) {
                from.withdraw(cents);
                to.deposit(cents);
            }
        }
    }

    private static void requirePositive(long cents) {
        if (cents <= 0) {
            throw new IllegalArgumentException("amount must be positive, got " + cents);
        }
    }

    public String owner() {
        return owner;
    }
}

class InsufficientFundsException extends Exception {
    InsufficientFundsException(long accountId, long requested, long available) {
        super("account " + accountId + ": requested " + requested + " cents, only " + available + " available");
    }
}
''',
        {"Account": ("Wallet", "LedgerAccount", "BankAccount"), "balanceCents": ("cents", "amountCents")},
        (Bug("if (cents > balanceCents)", "if (cents > balanceCents + 1)",
             "[ERROR] Tests run: 6, Failures: 1, Errors: 0, Skipped: 0\n[ERROR] AccountTest.withdrawMoreThanBalance"
             "  Time elapsed: 0.004 s  <<< FAILURE!\norg.opentest4j.AssertionFailedError: Expected "
             "InsufficientFundsException to be thrown, but nothing was thrown.\n"
             "\tat AccountTest.withdrawMoreThanBalance(AccountTest.java:31)"),),
        (),
    ),
    Snippet(
        "java_lru", "java", "LruCache",
        "is an LRU cache built on LinkedHashMap's access order",
        "Implement `LruCache<K, V>` in Java by extending LinkedHashMap with access order and "
        "overriding removeEldestEntry so the map never holds more than `maxEntries` entries. "
        "Validate that maxEntries is positive.",
        r'''import java.util.LinkedHashMap;
import java.util.Map;

public class LruCache<K, V> extends LinkedHashMap<K, V> {
    private final int maxEntries;

    public LruCache(int maxEntries) {
        super(16, 0.75f, true);
        if (maxEntries <= 0) {
            throw new IllegalArgumentException("maxEntries must be positive: " + maxEntries);
        }
        this.maxEntries = maxEntries;
    }

    @Override
    protected boolean removeEldestEntry(Map.Entry<K, V> eldest) {
        return size() > maxEntries;
    }

    public int maxEntries() {
        return maxEntries;
    }
}
''',
        {"LruCache": ("BoundedCache", "RecentMap", "AccessOrderCache"), "maxEntries": ("capacity", "limit")},
        (Bug("super(16, 0.75f, true);", "super(16, 0.75f, false);",
             "[ERROR] LruCacheTest.getRefreshesEntry  Time elapsed: 0.002 s  <<< FAILURE!\n"
             "org.opentest4j.AssertionFailedError: expected: <[b, a]> but was: <[a, b]>\n"
             "\tat LruCacheTest.getRefreshesEntry(LruCacheTest.java:22)"),),
        (),
    ),
    Snippet(
        "java_csv", "java", "CsvParser",
        "splits one CSV line into fields, handling quoted fields and doubled quotes",
        "Write a Java class `CsvParser` with a static method `List<String> parseLine(String line)` "
        "that splits a CSV line on commas, supports fields in double quotes that contain commas, "
        "turns a doubled quote inside a quoted field into one quote, and throws "
        "IllegalArgumentException for an unterminated quote.",
        r'''import java.util.ArrayList;
import java.util.List;

public final class CsvParser {
    private CsvParser() {
    }

    public static List<String> parseLine(String line) {
        List<String> fields = new ArrayList<>();
        StringBuilder current = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quoted) {
                if (c == '"' && i + 1 < line.length() && line.charAt(i + 1) == '"') {
                    current.append('"');
                    i++;
                } else if (c == '"') {
                    quoted = false;
                } else {
                    current.append(c);
                }
            } else if (c == '"') {
                quoted = true;
            } else if (c == ',') {
                fields.add(current.toString());
                current.setLength(0);
            } else {
                current.append(c);
            }
        }
        if (quoted) {
            throw new IllegalArgumentException("unterminated quote in: " + line);
        }
        fields.add(current.toString());
        return fields;
    }
}
''',
        {"CsvParser": ("CsvLine", "CsvSplitter", "RecordParser"), "parseLine": ("split", "fieldsOf")},
        (Bug("                fields.add(current.toString());\n                current.setLength(0);",
             "                fields.add(current.toString());",
             "[ERROR] CsvParserTest.splitsPlainFields  Time elapsed: 0.003 s  <<< FAILURE!\n"
             "org.opentest4j.AssertionFailedError: expected: <[a, b, c]> but was: <[a, ab, abc]>"),),
        (),
    ),
    Snippet(
        "java_rate_window", "java", "SlidingWindowCounter",
        "counts events in a sliding time window per key, for rate limiting",
        "Write a thread-safe Java class `SlidingWindowCounter` that records events per key and "
        "answers `boolean tryRecord(String key, long nowMillis)`: allow at most `limit` events per "
        "key in the last `windowMillis` milliseconds, dropping timestamps that fell out of the "
        "window. Use a ConcurrentHashMap of ArrayDeque<Long>.",
        r'''import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.ConcurrentHashMap;

public final class SlidingWindowCounter {
    private final int limit;
    private final long windowMillis;
    private final ConcurrentHashMap<String, Deque<Long>> events = new ConcurrentHashMap<>();

    public SlidingWindowCounter(int limit, long windowMillis) {
        if (limit <= 0 || windowMillis <= 0) {
            throw new IllegalArgumentException("limit and windowMillis must be positive");
        }
        this.limit = limit;
        this.windowMillis = windowMillis;
    }

    public boolean tryRecord(String key, long nowMillis) {
        Deque<Long> times = events.computeIfAbsent(key, k -> new ArrayDeque<>());
        synchronized (times) {
            while (!times.isEmpty() && times.peekFirst() <= nowMillis - windowMillis) {
                times.pollFirst();
            }
            if (times.size() >= limit) {
                return false;
            }
            times.addLast(nowMillis);
            return true;
        }
    }
}
''',
        {"SlidingWindowCounter": ("RateWindow", "WindowLimiter", "EventWindow"), "tryRecord": ("allow", "record")},
        (Bug("if (times.size() >= limit)", "if (times.size() > limit)",
             "[ERROR] SlidingWindowCounterTest.rejectsOverLimit  <<< FAILURE!\n"
             "org.opentest4j.AssertionFailedError: expected: <false> but was: <true>\n"
             "\tat SlidingWindowCounterTest.rejectsOverLimit(SlidingWindowCounterTest.java:18)"),),
        (),
    ),
]

_CPP: list[Snippet] = [
    Snippet(
        "cpp_matrix", "cpp", "Matrix",
        "is a dense row-major matrix with bounds-checked access and multiplication",
        "Write a C++17 class `Matrix` storing doubles in a row-major std::vector with a "
        "constructor (rows, cols), `at(r, c)` accessors that throw std::out_of_range, and "
        "`Matrix operator*(const Matrix&) const` that throws std::invalid_argument on a shape "
        "mismatch. Use the i-k-j loop order for cache friendliness.",
        r'''#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

class Matrix {
public:
    Matrix(std::size_t rows, std::size_t cols) : rows_(rows), cols_(cols), data_(rows * cols, 0.0) {}

    std::size_t rows() const { return rows_; }
    std::size_t cols() const { return cols_; }

    double& at(std::size_t r, std::size_t c) {
        check(r, c);
        return data_[r * cols_ + c];
    }

    double at(std::size_t r, std::size_t c) const {
        check(r, c);
        return data_[r * cols_ + c];
    }

    Matrix operator*(const Matrix& other) const {
        if (cols_ != other.rows_) {
            throw std::invalid_argument("shape mismatch: " + std::to_string(cols_) + " vs " +
                                        std::to_string(other.rows_));
        }
        Matrix out(rows_, other.cols_);
        for (std::size_t i = 0; i < rows_; ++i) {
            for (std::size_t k = 0; k < cols_; ++k) {
                const double a = data_[i * cols_ + k];
                for (std::size_t j = 0; j < other.cols_; ++j) {
                    out.data_[i * other.cols_ + j] += a * other.data_[k * other.cols_ + j];
                }
            }
        }
        return out;
    }

private:
    void check(std::size_t r, std::size_t c) const {
        if (r >= rows_ || c >= cols_) {
            throw std::out_of_range("index (" + std::to_string(r) + ", " + std::to_string(c) + ")");
        }
    }

    std::size_t rows_;
    std::size_t cols_;
    std::vector<double> data_;
};
''',
        {"Matrix": ("DenseMatrix", "Mat", "Grid2D")},
        (Bug("out.data_[i * other.cols_ + j] += a * other.data_[k * other.cols_ + j];",
             "out.data_[i * other.cols_ + j] = a * other.data_[k * other.cols_ + j];",
             "[ RUN      ] MatrixTest.MultipliesTwoByTwo\nmatrix_test.cpp:27: Failure\nExpected equality of "
             "these values:\n  c.at(0, 0)\n    Which is: 14\n  19\n[  FAILED  ] MatrixTest.MultipliesTwoByTwo (0 ms)"),),
        (),
    ),
    Snippet(
        "cpp_split", "cpp", "split",
        "splits and trims strings by a delimiter, optionally dropping empty parts",
        "Write C++17 functions `std::string trim(std::string_view s)` and "
        "`std::vector<std::string> split(std::string_view s, char delim, bool keep_empty = false)` "
        "that trim ASCII whitespace from each part.",
        r'''#include <string>
#include <string_view>
#include <vector>

std::string trim(std::string_view s) {
    const char* ws = " \t\r\n";
    const auto first = s.find_first_not_of(ws);
    if (first == std::string_view::npos) {
        return {};
    }
    const auto last = s.find_last_not_of(ws);
    return std::string(s.substr(first, last - first + 1));
}

std::vector<std::string> split(std::string_view s, char delim, bool keep_empty = false) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        const auto pos = s.find(delim, start);
        const auto piece = trim(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
        if (keep_empty || !piece.empty()) {
            parts.push_back(piece);
        }
        if (pos == std::string_view::npos) {
            break;
        }
        start = pos + 1;
    }
    return parts;
}
''',
        {"split": ("split_fields", "tokenize", "explode"), "trim": ("strip", "trim_ascii")},
        (Bug("return std::string(s.substr(first, last - first + 1));", "return std::string(s.substr(first, last - first));",
             "[ RUN      ] SplitTest.TrimsParts\nsplit_test.cpp:12: Failure\nExpected equality of these values:\n"
             "  parts[0]\n    Which is: \"ab\"\n  \"abc\"\n[  FAILED  ] SplitTest.TrimsParts (0 ms)"),),
        (),
    ),
    Snippet(
        "cpp_bounded_queue", "cpp", "BoundedQueue",
        "is a blocking bounded queue for producer/consumer threads",
        "Implement a C++17 class template `BoundedQueue<T>` with a fixed capacity, `void push(T)` "
        "that blocks while full, `T pop()` that blocks while empty, and `bool try_pop(T&)`. Use one "
        "std::mutex and two std::condition_variable objects.",
        r'''#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

template <typename T>
class BoundedQueue {
public:
    explicit BoundedQueue(std::size_t capacity) : capacity_(capacity) {}

    void push(T value) {
        std::unique_lock<std::mutex> lock(mutex_);
        not_full_.wait(lock, [&] { return items_.size() < capacity_; });
        items_.push_back(std::move(value));
        not_empty_.notify_one();
    }

    T pop() {
        std::unique_lock<std::mutex> lock(mutex_);
        not_empty_.wait(lock, [&] { return !items_.empty(); });
        T value = std::move(items_.front());
        items_.pop_front();
        not_full_.notify_one();
        return value;
    }

    bool try_pop(T& out) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (items_.empty()) {
            return false;
        }
        out = std::move(items_.front());
        items_.pop_front();
        not_full_.notify_one();
        return true;
    }

private:
    std::size_t capacity_;
    std::deque<T> items_;
    std::mutex mutex_;
    std::condition_variable not_full_;
    std::condition_variable not_empty_;
};
''',
        {"BoundedQueue": ("BlockingQueue", "WorkQueue", "Channel")},
        (Bug("        items_.pop_front();\n        not_full_.notify_one();\n        return value;",
             "        items_.pop_front();\n        return value;",
             "[ RUN      ] BoundedQueueTest.ProducerConsumer\n(test hangs; killed by ctest after 1500 s)\n"
             "The following tests FAILED:\n\t  3 - BoundedQueueTest.ProducerConsumer (Timeout)"),),
        (),
    ),
]

_SQL: list[Snippet] = [
    Snippet(
        "sql_monthly_revenue", "sql", "monthly_revenue",
        "reports revenue, order count and month-over-month growth per month from orders",
        "Write a PostgreSQL query over `orders(id, customer_id, status, total_cents, created_at)` "
        "that returns, for each calendar month, the revenue in dollars of completed orders, the "
        "number of completed orders, and the growth in percent against the previous month "
        "(NULL for the first month). Order by month.",
        r'''-- monthly_revenue: completed-order revenue per month with month-over-month growth
WITH monthly AS (
    SELECT date_trunc('month', created_at) AS month,
           SUM(total_cents) / 100.0        AS revenue,
           COUNT(*)                        AS orders
    FROM orders
    WHERE status = 'completed'
    GROUP BY 1
)
SELECT month,
       revenue,
       orders,
       ROUND(100.0 * (revenue - LAG(revenue) OVER (ORDER BY month))
             / NULLIF(LAG(revenue) OVER (ORDER BY month), 0), 1) AS growth_pct
FROM monthly
ORDER BY month;
''',
        {"monthly": ("per_month", "by_month"), "orders": ("purchases", "sales")},
        (Bug("WHERE status = 'completed'\n", "",
             "Finance reports that March 2024 revenue from this query is $48,210.00, but the ledger "
             "shows $41,975.50. The difference matches the total of refunded and cancelled orders "
             "that month."),),
        (),
    ),
    Snippet(
        "sql_top_customers", "sql", "top_customers",
        "ranks each region's top three customers by lifetime spend with a window function",
        "Write a SQL query over `customers(id, name, region)` and `orders(id, customer_id, "
        "total_cents, status)` that returns the top 3 customers by lifetime spend of paid orders in "
        "each region, with their rank (ties share a rank), using a window function.",
        r'''-- top_customers: three biggest spenders per region
WITH spend AS (
    SELECT c.region,
           c.id   AS customer_id,
           c.name,
           SUM(o.total_cents) AS spent_cents
    FROM customers c
    JOIN orders o ON o.customer_id = c.id
    WHERE o.status = 'paid'
    GROUP BY c.region, c.id, c.name
),
ranked AS (
    SELECT spend.*,
           RANK() OVER (PARTITION BY region ORDER BY spent_cents DESC) AS spend_rank
    FROM spend
)
SELECT region, customer_id, name, spent_cents, spend_rank
FROM ranked
WHERE spend_rank <= 3
ORDER BY region, spend_rank, name;
''',
        {"spend": ("totals", "lifetime"), "ranked": ("ordered", "leaderboard")},
        (Bug("PARTITION BY region ORDER BY", "ORDER BY",
             "The report lists only three customers in total, all from the EMEA region; every other "
             "region is missing from the output."),),
        (),
    ),
    Snippet(
        "sql_dedupe", "sql", "dedupe_events",
        "removes duplicate event rows keeping the earliest per (user_id, event_type, payload)",
        "Write a PostgreSQL statement that deletes duplicate rows from `events(id bigserial, "
        "user_id, event_type, payload jsonb, received_at)`, keeping only the earliest received row "
        "for each (user_id, event_type, payload) and breaking ties by the smallest id.",
        r'''-- dedupe_events: keep the first copy of each event
DELETE FROM events e
USING (
    SELECT id,
           ROW_NUMBER() OVER (
               PARTITION BY user_id, event_type, payload
               ORDER BY received_at, id
           ) AS copy_no
    FROM events
) d
WHERE e.id = d.id
  AND d.copy_no > 1;
''',
        {"copy_no": ("dup_rank", "rn"), "events": ("audit_events", "tracking_events")},
        (Bug("d.copy_no > 1", "d.copy_no >= 1",
             "After running the cleanup on staging, the events table is empty: SELECT count(*) FROM "
             "events returns 0, where 1,204,331 rows were expected to remain."),),
        (),
    ),
]

_BASH: list[Snippet] = [
    Snippet(
        "sh_backup_rotate", "bash", "rotate_backups",
        "creates a dated tar.gz backup of a directory and keeps only the newest N archives",
        "Write a Bash script that takes a source directory and a backup directory, creates "
        "`<name>-YYYYmmdd-HHMMSS.tar.gz` of the source there, and deletes all but the newest KEEP "
        "archives (KEEP defaults to 7, from the environment). Use `set -euo pipefail`, check the "
        "arguments and print a usage line on misuse.",
        r'''#!/usr/bin/env bash
# rotate_backups: archive a directory and keep only the newest $KEEP archives.
set -euo pipefail

usage() { echo "usage: $0 SOURCE_DIR BACKUP_DIR" >&2; exit 2; }

[[ $# -eq 2 ]] || usage
src=$1
dest=$2
keep=${KEEP:-7}
[[ -d $src ]] || { echo "error: $src is not a directory" >&2; exit 2; }
mkdir -p "$dest"

name=$(basename "$src")
stamp=$(date +%Y%m%d-%H%M%S)
archive="$dest/$name-$stamp.tar.gz"
tar -czf "$archive" -C "$(dirname "$src")" "$name"
echo "created $archive"

mapfile -t old < <(ls -1t "$dest"/"$name"-*.tar.gz | tail -n +$((keep + 1)))
for file in "${old[@]}"; do
    rm -f -- "$file"
    echo "removed $file"
done
''',
        {"keep": ("retain", "max_archives"), "archive": ("tarball", "backup_file")},
        (Bug("tail -n +$((keep + 1))", "tail -n +$keep",
             "With KEEP=7 the backup directory only ever holds 6 archives: after each run `ls "
             "backups/ | wc -l` prints 6, and the archive from the run seven days ago is always gone."),),
        (),
    ),
    Snippet(
        "sh_log_summary", "bash", "summarize_errors",
        "summarises the most frequent error messages in log files",
        "Write a Bash script that reads one or more log files (or stdin when none are given), "
        "keeps lines containing ERROR, strips the leading timestamp (first two fields), counts "
        "identical messages and prints the top N (default 10, option -n) as 'count message', "
        "most frequent first.",
        r'''#!/usr/bin/env bash
# summarize_errors: top ERROR messages across log files.
set -euo pipefail

top=10
while getopts "n:" opt; do
    case $opt in
        n) top=$OPTARG ;;
        *) echo "usage: $0 [-n TOP] [LOG...]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

cat -- "${@:--}" \
    | grep -F 'ERROR' \
    | cut -d' ' -f3- \
    | sort \
    | uniq -c \
    | sort -rn \
    | head -n "$top"
''',
        {"top": ("limit", "count")},
        (Bug("    | sort \\\n    | uniq -c", "    | uniq -c",
             "The summary shows the same message several times with small counts, e.g. '3 ERROR db "
             "timeout' on one line and '2 ERROR db timeout' a few lines further down, instead of one "
             "line with 5."),),
        (),
    ),
    Snippet(
        "sh_wait_for_port", "bash", "wait_for_port",
        "waits until a TCP port accepts connections or a timeout expires",
        "Write a Bash function `wait_for_port HOST PORT TIMEOUT_S` that polls every 0.5 s using "
        "bash's /dev/tcp until a connection succeeds (exit 0) or TIMEOUT_S seconds pass (print an "
        "error to stderr and return 1).",
        r'''#!/usr/bin/env bash
# wait_for_port: block until HOST:PORT accepts TCP connections.
set -euo pipefail

wait_for_port() {
    local host=$1 port=$2 timeout_s=$3
    local deadline=$((SECONDS + timeout_s))
    while ((SECONDS < deadline)); do
        if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
            return 0
        fi
        sleep 0.5
    done
    echo "error: $host:$port not reachable after ${timeout_s}s" >&2
    return 1
}

wait_for_port "${1:-127.0.0.1}" "${2:-8080}" "${3:-30}"
''',
        {"wait_for_port": ("await_port", "wait_tcp"), "deadline": ("give_up_at", "until_s")},
        (Bug("        sleep 0.5\n", "",
             "On the CI runner the readiness step pins one CPU core at 100% for the whole wait, and "
             "the service it waits for starts noticeably slower than when started by hand."),),
        (),
    ),
]

SNIPPETS: tuple[Snippet, ...] = (*_PY, *_TS, *_GO, *_RUST, *_JAVA, *_CPP, *_SQL, *_BASH)

# ============================================================================ helpers


def _rng(seed: int, *parts: object) -> random.Random:
    """A generator for one purpose; string seeds are hashed with SHA-512, stable everywhere."""
    return random.Random("/".join([f"specbench-promptgen-{seed}", *map(str, parts)]))


def _pick_lang(rng: random.Random, allowed: Sequence[str] | None = None) -> str:
    langs = [k for k in LANG_WEIGHTS if allowed is None or k in allowed]
    return rng.choices(langs, weights=[LANG_WEIGHTS[k] for k in langs])[0]


def _call_id(rng: random.Random) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return "".join(rng.choice(alphabet) for _ in range(9))


def _fence(code: str, lang: str) -> str:
    return f"```{LANGS[lang].fence}\n{code.rstrip()}\n```"


def _line_of(text: str, needle: str) -> int:
    """1-based line where `needle` starts (its first non-blank line)."""
    pos = text.index(needle)
    skip = len(needle) - len(needle.lstrip("\n"))
    return text.count("\n", 0, pos + skip) + 1


def _round_tokens(n: float, lo: int, hi: int, step: int = 128) -> int:
    return int(max(lo, min(hi, step * round(n / step))))


def _code_tokens(chars: int) -> float:
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


def _instantiate(snippet: Snippet, rng: random.Random) -> Instance:
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


def _snippets(lang: str) -> list[Snippet]:
    return [s for s in SNIPPETS if s.lang == lang]


_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(name: str) -> str:
    return _SNAKE.sub("_", name).lower()


# ---------------------------------------------------------------------------- file composition
# Several snippets of one language become one plausible source file: imports are merged and
# de-duplicated at the top, bodies follow. Java and Bash files hold one snippet (one public class,
# one script per file).

_IMPORT_LINE = {
    "python": re.compile(r"^(import |from )"),
    "typescript": re.compile(r"^import "),
    "rust": re.compile(r"^use "),
    "cpp": re.compile(r"^#include "),
}


def _split_imports(code: str, lang: str) -> tuple[list[str], str]:
    if lang == "go":
        body = re.sub(r"^package \w+\n\n", "", code)
        match = re.match(r"import \(\n(.*?)\n\)\n\n", body, re.S)
        if match:
            found = [line.strip() for line in match.group(1).splitlines() if line.strip()]
            return found, body[match.end():]
        single = re.match(r'import ("[^"]+")\n\n', body)
        if single:
            return [single.group(1)], body[single.end():]
        return [], body
    pattern = _IMPORT_LINE.get(lang)
    if pattern is None:
        return [], code
    lines = code.splitlines(keepends=True)
    imports: list[str] = []
    i = 0
    while i < len(lines) and (pattern.match(lines[i]) or not lines[i].strip()):
        if lines[i].strip():
            imports.append(lines[i].rstrip("\n"))
        i += 1
    return imports, "".join(lines[i:])


def _python_imports(lines: list[str]) -> str:
    """Merge import lines the way isort would: __future__ first, then `import x`, then
    `from x import ...` with the names of repeated modules combined."""
    plain: list[str] = []
    names: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith("from "):
            module, _, imported = line[5:].partition(" import ")
            bucket = names.setdefault(module, [])
            bucket.extend(n.strip() for n in imported.split(",") if n.strip() not in bucket)
        elif line not in plain:
            plain.append(line)
    out = [f"from __future__ import {', '.join(sorted(names.pop('__future__')))}\n"
           ] if "__future__" in names else []
    out += sorted(plain)
    out += [f"from {m} import {', '.join(sorted(set(n), key=str.lower))}" for m, n in sorted(names.items())]
    return "\n".join(out)


def compose_file(lang: str, parts: Sequence[str], header: str = "", package: str = "app") -> str:
    """Join code parts of one language into one file with merged imports."""
    imports: list[str] = []
    bodies: list[str] = []
    for part in parts:
        found, body = _split_imports(part, lang)
        imports.extend(x for x in found if x not in imports)
        bodies.append(body.strip("\n"))
    sep = "\n\n\n" if lang == "python" else "\n\n"
    chunks: list[str] = []
    if header:
        chunks.append(header.rstrip("\n"))
    if lang == "go":
        chunks.append(f"package {package}")
        if imports:
            chunks.append("import (\n" + "\n".join(f"\t{x}" for x in sorted(imports)) + "\n)")
    elif imports:
        if lang == "python":
            chunks.append(_python_imports(imports))
        else:
            chunks.append("\n".join(sorted(imports)))
    head = "\n\n".join(chunks)
    return (head + sep if head else "") + sep.join(bodies) + "\n"


# ---------------------------------------------------------------------------- entity modules
# Longer, realistic files (records + validation + store + queries + CLI) generated from a small
# entity description; the number of fields sets the length.


@dataclass(frozen=True)
class Entity:
    name: str  # CamelCase
    plural: str  # snake_case plural
    fields: tuple[tuple[str, str], ...]  # (name, kind) with kind in str|int|float|bool|date
    statuses: tuple[str, ...]


ENTITIES: tuple[Entity, ...] = (
    Entity("Invoice", "invoices", (("customer", "str"), ("amount_cents", "int"), ("currency", "str"),
           ("due_date", "date"), ("paid", "bool"), ("notes", "str"), ("tax_rate", "float"),
           ("po_number", "str")), ("draft", "sent", "paid", "void")),
    Entity("Shipment", "shipments", (("tracking_code", "str"), ("carrier", "str"), ("weight_kg", "float"),
           ("destination", "str"), ("shipped_on", "date"), ("insured", "bool"), ("parcels", "int"),
           ("recipient", "str")), ("pending", "in_transit", "delivered", "lost")),
    Entity("Ticket", "tickets", (("title", "str"), ("reporter", "str"), ("assignee", "str"),
           ("priority", "int"), ("opened_on", "date"), ("blocking", "bool"), ("component", "str"),
           ("estimate_h", "float")), ("open", "in_progress", "resolved", "closed")),
    Entity("Booking", "bookings", (("guest", "str"), ("room", "str"), ("nights", "int"),
           ("check_in", "date"), ("rate_cents", "int"), ("breakfast", "bool"), ("channel", "str"),
           ("adults", "int")), ("held", "confirmed", "checked_in", "cancelled")),
    Entity("Employee", "employees", (("full_name", "str"), ("email", "str"), ("team", "str"),
           ("salary_cents", "int"), ("hired_on", "date"), ("remote", "bool"), ("level", "int"),
           ("manager", "str")), ("active", "on_leave", "terminated")),
    Entity("Subscription", "subscriptions", (("account", "str"), ("plan", "str"), ("seats", "int"),
           ("monthly_cents", "int"), ("renews_on", "date"), ("auto_renew", "bool"),
           ("discount", "float"), ("region", "str")), ("trial", "active", "past_due", "cancelled")),
    Entity("Reading", "readings", (("sensor_id", "str"), ("site", "str"), ("celsius", "float"),
           ("humidity", "float"), ("taken_on", "date"), ("calibrated", "bool"), ("battery_pct", "int"),
           ("firmware", "str")), ("ok", "suspect", "rejected")),
    Entity("Order", "orders", (("customer_email", "str"), ("total_cents", "int"), ("items", "int"),
           ("placed_on", "date"), ("gift", "bool"), ("coupon", "str"), ("shipping_cents", "int"),
           ("country", "str")), ("new", "paid", "shipped", "refunded")),
    Entity("Build", "builds", (("repo", "str"), ("branch", "str"), ("commit", "str"),
           ("duration_s", "float"), ("started_on", "date"), ("cached", "bool"), ("tests_run", "int"),
           ("runner", "str")), ("queued", "running", "passed", "failed")),
    Entity("Vehicle", "vehicles", (("vin", "str"), ("make", "str"), ("model", "str"), ("mileage_km", "int"),
           ("registered_on", "date"), ("electric", "bool"), ("fuel_l_per_100km", "float"),
           ("depot", "str")), ("available", "rented", "maintenance", "retired")),
    Entity("Patient", "patients", (("name", "str"), ("ward", "str"), ("age", "int"), ("admitted_on", "date"),
           ("allergies", "str"), ("insured", "bool"), ("weight_kg", "float"), ("doctor", "str")),
           ("admitted", "discharged", "transferred")),
    Entity("Listing", "listings", (("address", "str"), ("city", "str"), ("price_cents", "int"),
           ("bedrooms", "int"), ("listed_on", "date"), ("furnished", "bool"), ("area_m2", "float"),
           ("agent", "str")), ("draft", "published", "under_offer", "sold")),
)

_PY_TYPE = {"str": "str", "int": "int", "float": "float", "bool": "bool", "date": "date"}
_PY_DEFAULT = {"str": '""', "int": "0", "float": "0.0", "bool": "False"}


def python_entity_module(ent: Entity, rng: random.Random) -> str:
    """A store-and-query module for one record type; its length grows with the field count."""
    n_fields = rng.randint(4, len(ent.fields))
    fields = list(ent.fields[:n_fields])
    e, cls = _snake(ent.name), ent.name
    store, err = f"{cls}Store", f"{cls}Error"
    strs = [f for f, k in fields if k == "str"]
    nums = [f for f, k in fields if k in ("int", "float")]
    dates = [f for f, k in fields if k == "date"]
    out: list[str] = [
        f'"""Storage, validation and queries for {ent.plural.replace("_", " ")}.\n\n'
        f"{cls} records are validated when added and kept in memory, keyed by id. The module\n"
        f"also reads and writes JSON lines and CSV, and has a small command-line report.\n"
        '"""\n',
        "from __future__ import annotations\n",
        "import argparse\nimport csv\nimport io\nimport json\nimport sys\n"
        "from collections import Counter\nfrom dataclasses import asdict, dataclass, replace\n"
        + ("from datetime import date\n" if dates else "")
        + "from pathlib import Path\nfrom typing import Iterator\n",
        f"STATUSES: tuple[str, ...] = ({', '.join(json.dumps(s) for s in ent.statuses)})\n",
        f"\nclass {err}(ValueError):\n    \"\"\"A record is invalid or conflicts with the store.\"\"\"\n",
    ]
    body = ["    id: int"]
    body += [f"    {f}: {_PY_TYPE[k]}" for f, k in fields]
    body.append(f'    status: str = "{ent.statuses[0]}"')
    to_dict = ["    def to_dict(self) -> dict[str, object]:", "        data = asdict(self)"]
    to_dict += [f'        data["{f}"] = self.{f}.isoformat()' for f in dates]
    to_dict.append("        return data")
    conv = {"str": "str({})", "int": "int({})", "float": "float({})", "bool": "bool({})",
            "date": "date.fromisoformat(str({}))"}
    from_dict = [
        "    @classmethod",
        f"    def from_dict(cls, data: dict[str, object]) -> {cls}:",
        "        try:",
        "            return cls(",
        '                id=int(data["id"]),',
    ]
    from_dict += [f"                {f}={conv[k].format(f'data[{json.dumps(f)}]')},"
                  for f, k in fields]
    from_dict += [
        f'                status=str(data.get("status", "{ent.statuses[0]}")),',
        "            )",
        "        except (KeyError, TypeError, ValueError) as exc:",
        f'            raise {err}(f"bad {e} record {{data!r}}: {{exc}}") from None',
    ]
    out.append("\n@dataclass(frozen=True)\nclass " + cls + ":\n" + "\n".join(body) + "\n\n"
               + "\n".join(to_dict) + "\n\n" + "\n".join(from_dict) + "\n")
    checks = [f"def validate({e}: {cls}) -> list[str]:",
              '    """Every problem with a record, as readable sentences (empty when valid)."""',
              "    problems: list[str] = []",
              f"    if {e}.id < 1:",
              f'        problems.append(f"id must be positive, got {{{e}.id}}")']
    for f in strs:
        checks += [f"    if not {e}.{f}.strip():", f'        problems.append("{f} must not be empty")']
    for f in nums:
        checks += [f"    if {e}.{f} < 0:", f'        problems.append(f"{f} must not be negative, got {{{e}.{f}}}")']
    checks += [f"    if {e}.status not in STATUSES:",
               f'        problems.append(f"unknown status {{{e}.status!r}}; expected one of {{\', \'.join(STATUSES)}}")',
               "    return problems"]
    out.append("\n" + "\n".join(checks) + "\n")
    methods = [
        f"class {store}:",
        f'    """In-memory {ent.plural.replace("_", " ")} keyed by id."""',
        "",
        "    def __init__(self) -> None:",
        f"        self._items: dict[int, {cls}] = {{}}",
        "",
        "    def __len__(self) -> int:",
        "        return len(self._items)",
        "",
        f"    def __iter__(self) -> Iterator[{cls}]:",
        "        return iter(sorted(self._items.values(), key=lambda item: item.id))",
        "",
        f"    def add(self, {e}: {cls}) -> None:",
        f"        problems = validate({e})",
        "        if problems:",
        f'            raise {err}(f"{e} {{{e}.id}}: " + "; ".join(problems))',
        f"        if {e}.id in self._items:",
        f'            raise {err}(f"{e} {{{e}.id}} already exists")',
        f"        self._items[{e}.id] = {e}",
        "",
        f"    def get(self, item_id: int) -> {cls}:",
        "        try:",
        "            return self._items[item_id]",
        "        except KeyError:",
        f'            raise {err}(f"no {e} with id {{item_id}}") from None',
        "",
        f"    def update(self, item_id: int, **changes: object) -> {cls}:",
        "        updated = replace(self.get(item_id), **changes)  # type: ignore[arg-type]",
        "        problems = validate(updated)",
        "        if problems:",
        f'            raise {err}(f"{e} {{item_id}}: " + "; ".join(problems))',
        "        self._items[item_id] = updated",
        "        return updated",
        "",
        f"    def remove(self, item_id: int) -> {cls}:",
        "        return self._items.pop(item_id, None) or self.get(item_id)",
        "",
        f"    def with_status(self, status: str) -> list[{cls}]:",
        "        if status not in STATUSES:",
        f'            raise {err}(f"unknown status {{status!r}}")',
        "        return [item for item in self if item.status == status]",
        "",
        "    def count_by_status(self) -> dict[str, int]:",
        "        counts = Counter(item.status for item in self)",
        "        return {status: counts.get(status, 0) for status in STATUSES}",
    ]
    for f in strs[:rng.randint(1, max(1, len(strs)))]:
        methods += ["", f"    def find_by_{f}(self, value: str) -> list[{cls}]:",
                    "        needle = value.strip().lower()",
                    f"        return [item for item in self if item.{f}.lower() == needle]"]
    for f in nums:
        methods += ["", f"    def total_{f}(self, status: str | None = None) -> float:",
                    "        items = self if status is None else self.with_status(status)",
                    f"        return sum(item.{f} for item in items)"]
    for f in dates[:1]:
        methods += ["", f"    def between(self, start: date, end: date) -> list[{cls}]:",
                    f'        """Records whose {f} falls in [start, end]."""',
                    "        if start > end:",
                    f'            raise {err}("start must not be after end")',
                    f"        return [item for item in self if start <= item.{f} <= end]"]
    methods += [
        "",
        "    def to_csv(self) -> str:",
        "        buffer = io.StringIO()",
        f"        columns = [\"id\", {', '.join(repr(f) for f, _ in fields)}, \"status\"]",
        "        writer = csv.DictWriter(buffer, fieldnames=columns)",
        "        writer.writeheader()",
        "        for item in self:",
        "            writer.writerow(item.to_dict())",
        "        return buffer.getvalue()",
        "",
        "    @classmethod",
        f"    def from_json_lines(cls, text: str) -> {store}:",
        "        store = cls()",
        "        for line_no, line in enumerate(text.splitlines(), start=1):",
        "            if not line.strip():",
        "                continue",
        "            try:",
        f"                store.add({cls}.from_dict(json.loads(line)))",
        f"            except (json.JSONDecodeError, {err}) as exc:",
        f'                raise {err}(f"line {{line_no}}: {{exc}}") from None',
        "        return store",
    ]
    out.append("\n" + "\n".join(methods) + "\n")
    report = [f"def summary({e}_store: {store}) -> str:",
              '    """A short plain-text report: counts per status and totals."""',
              f'    lines = [f"{ent.plural.replace("_", " ")}: {{len({e}_store)}}"]',
              f"    for status, count in {e}_store.count_by_status().items():",
              '        lines.append(f"  {status:<12} {count:>6}")']
    for f in nums[:3]:
        report.append(f'    lines.append(f"total {f}: {{{e}_store.total_{f}():,.2f}}")')
    report.append('    return "\\n".join(lines)')
    out.append("\n" + "\n".join(report) + "\n")
    main = [
        "def main(argv: list[str] | None = None) -> int:",
        f'    parser = argparse.ArgumentParser(description="Report on {ent.plural.replace("_", " ")} stored as JSON lines.")',
        '    parser.add_argument("path", type=Path, help="JSON lines file, one record per line")',
        '    parser.add_argument("--status", choices=STATUSES, help="only list records with this status")',
        '    parser.add_argument("--csv", action="store_true", help="print CSV instead of the report")',
        "    args = parser.parse_args(argv)",
        "    try:",
        f"        {e}_store = {store}.from_json_lines(args.path.read_text())",
        f"    except (OSError, {err}) as exc:",
        '        print(f"error: {exc}", file=sys.stderr)',
        "        return 2",
        "    if args.csv:",
        f"        print({e}_store.to_csv(), end=\"\")",
        "    elif args.status:",
        f"        for item in {e}_store.with_status(args.status):",
        "            print(json.dumps(item.to_dict()))",
        "    else:",
        f"        print(summary({e}_store))",
        "    return 0",
        "",
        "",
        'if __name__ == "__main__":',
        "    raise SystemExit(main())",
    ]
    out.append("\n" + "\n".join(main) + "\n")
    return "\n".join(out)


_GO_TYPE = {"str": "string", "int": "int64", "float": "float64", "bool": "bool", "date": "time.Time"}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def go_entity_module(ent: Entity, rng: random.Random, package: str) -> str:
    """A Go store with validation and an HTTP handler for one record type."""
    fields = list(ent.fields[:rng.randint(4, len(ent.fields))])
    cls = ent.name
    recv = cls[0].lower()
    strs = [f for f, k in fields if k == "str"]
    nums = [f for f, k in fields if k in ("int", "float")]
    lines = [
        f"// Package {package} stores {ent.plural.replace('_', ' ')} in memory and serves them over HTTP.",
        f"package {package}",
        "",
        "import (",
        '\t"encoding/json"',
        '\t"errors"',
        '\t"fmt"',
        '\t"net/http"',
        '\t"sort"',
        '\t"strconv"',
        '\t"strings"',
        '\t"sync"',
        '\t"time"',
        ")",
        "",
        f"// {cls}Statuses lists the valid values of {cls}.Status.",
        f"var {cls}Statuses = []string{{{', '.join(json.dumps(s) for s in ent.statuses)}}}",
        "",
        f"// ErrNotFound is returned when no {ent.name.lower()} has the requested id.",
        "var ErrNotFound = errors.New(\"not found\")",
        "",
        f"// {cls} is one record.",
        f"type {cls} struct {{",
        '\tID     int64  `json:"id"`',
    ]
    lines += [f'\t{_camel(f)} {_GO_TYPE[k]} `json:"{f}"`' for f, k in fields]
    lines += ['\tStatus string `json:"status"`', "}", "",
              "// Validate reports every problem with the record.",
              f"func ({recv} {cls}) Validate() error {{",
              "\tvar problems []string",
              f"\tif {recv}.ID < 1 {{",
              f'\t\tproblems = append(problems, fmt.Sprintf("id must be positive, got %d", {recv}.ID))',
              "\t}"]
    for f in strs:
        lines += [f"\tif strings.TrimSpace({recv}.{_camel(f)}) == \"\" {{",
                  f'\t\tproblems = append(problems, "{f} must not be empty")', "\t}"]
    for f in nums:
        lines += [f"\tif {recv}.{_camel(f)} < 0 {{",
                  f'\t\tproblems = append(problems, "{f} must not be negative")', "\t}"]
    lines += ["\tvalid := false", f"\tfor _, s := range {cls}Statuses {{",
              f"\t\tif s == {recv}.Status {{", "\t\t\tvalid = true", "\t\t}", "\t}",
              "\tif !valid {", f'\t\tproblems = append(problems, fmt.Sprintf("unknown status %q", {recv}.Status))',
              "\t}", "\tif len(problems) > 0 {",
              f'\t\treturn fmt.Errorf("{ent.name.lower()} %d: %s", {recv}.ID, strings.Join(problems, "; "))',
              "\t}", "\treturn nil", "}", "",
              f"// Store keeps {ent.plural.replace('_', ' ')} keyed by id; safe for concurrent use.",
              "type Store struct {", "\tmu    sync.RWMutex", f"\titems map[int64]{cls}", "}", "",
              "// NewStore returns an empty store.",
              "func NewStore() *Store {", f"\treturn &Store{{items: make(map[int64]{cls})}}", "}", "",
              "// Add validates and inserts a record.",
              f"func (s *Store) Add({recv} {cls}) error {{",
              f"\tif err := {recv}.Validate(); err != nil {{", "\t\treturn err", "\t}",
              "\ts.mu.Lock()", "\tdefer s.mu.Unlock()",
              f"\tif _, exists := s.items[{recv}.ID]; exists {{",
              f'\t\treturn fmt.Errorf("{ent.name.lower()} %d already exists", {recv}.ID)', "\t}",
              f"\ts.items[{recv}.ID] = {recv}", "\treturn nil", "}", "",
              "// Get returns the record with the given id.",
              f"func (s *Store) Get(id int64) ({cls}, error) {{",
              "\ts.mu.RLock()", "\tdefer s.mu.RUnlock()",
              f"\t{recv}, ok := s.items[id]", "\tif !ok {",
              f'\t\treturn {cls}{{}}, fmt.Errorf("{ent.name.lower()} %d: %w", id, ErrNotFound)', "\t}",
              f"\treturn {recv}, nil", "}", "",
              "// List returns records sorted by id, optionally filtered by status.",
              f"func (s *Store) List(status string) []{cls} {{",
              "\ts.mu.RLock()", "\tdefer s.mu.RUnlock()",
              f"\tout := make([]{cls}, 0, len(s.items))",
              f"\tfor _, {recv} := range s.items {{",
              f"\t\tif status == \"\" || {recv}.Status == status {{",
              f"\t\t\tout = append(out, {recv})", "\t\t}", "\t}",
              "\tsort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })",
              "\treturn out", "}", ""]
    for f in nums[:2]:
        lines += [f"// Total{_camel(f)} sums {f} over all records.",
                  f"func (s *Store) Total{_camel(f)}() float64 {{",
                  "\ts.mu.RLock()", "\tdefer s.mu.RUnlock()", "\tvar total float64",
                  f"\tfor _, {recv} := range s.items {{", f"\t\ttotal += float64({recv}.{_camel(f)})", "\t}",
                  "\treturn total", "}", ""]
    lines += ["// Handler serves GET /items, GET /items/{id} and POST /items.",
              "func (s *Store) Handler() http.Handler {", "\tmux := http.NewServeMux()",
              '\tmux.HandleFunc("/items", func(w http.ResponseWriter, r *http.Request) {',
              "\t\tswitch r.Method {", "\t\tcase http.MethodGet:",
              '\t\t\twriteJSON(w, http.StatusOK, s.List(r.URL.Query().Get("status")))',
              "\t\tcase http.MethodPost:", f"\t\t\tvar {recv} {cls}",
              f"\t\t\tif err := json.NewDecoder(r.Body).Decode(&{recv}); err != nil {{",
              '\t\t\t\thttp.Error(w, "bad JSON: "+err.Error(), http.StatusBadRequest)', "\t\t\t\treturn", "\t\t\t}",
              f"\t\t\tif err := s.Add({recv}); err != nil {{",
              "\t\t\t\thttp.Error(w, err.Error(), http.StatusUnprocessableEntity)", "\t\t\t\treturn", "\t\t\t}",
              f"\t\t\twriteJSON(w, http.StatusCreated, {recv})", "\t\tdefault:",
              '\t\t\thttp.Error(w, "method not allowed", http.StatusMethodNotAllowed)', "\t\t}", "\t})",
              '\tmux.HandleFunc("/items/", func(w http.ResponseWriter, r *http.Request) {',
              '\t\tid, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/items/"), 10, 64)',
              "\t\tif err != nil {", '\t\t\thttp.Error(w, "bad id", http.StatusBadRequest)', "\t\t\treturn", "\t\t}",
              f"\t\t{recv}, err := s.Get(id)", "\t\tif errors.Is(err, ErrNotFound) {",
              "\t\t\thttp.Error(w, err.Error(), http.StatusNotFound)", "\t\t\treturn", "\t\t}",
              f"\t\twriteJSON(w, http.StatusOK, {recv})", "\t})", "\treturn mux", "}", "",
              "func writeJSON(w http.ResponseWriter, status int, v any) {",
              '\tw.Header().Set("Content-Type", "application/json")', "\tw.WriteHeader(status)",
              "\t_ = json.NewEncoder(w).Encode(v)", "}", "",
              "// Age returns how long ago t was, rounded to whole days.",
              "func Age(t time.Time, now time.Time) int {",
              "\treturn int(now.Sub(t).Hours() / 24)", "}", ""]
    return "\n".join(lines)

# ============================================================================ coding prompts

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
    return [{"role": "system", "content": rng.choice(_CODING_SYSTEMS).format(lang=LANGS[lang].title)}]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _path_for(lang: str, stem: str, rng: random.Random) -> str:
    folder = {"python": rng.choice(("src/app", "app", "lib", "service")),
              "typescript": "src", "go": rng.choice(("internal/core", "pkg/util", "internal/store")),
              "rust": "src", "java": "src/main/java/com/example", "cpp": "src",
              "sql": rng.choice(("queries", "sql/reports", "migrations")),
              "bash": rng.choice(("scripts", "bin", "ops"))}[lang]
    if lang == "java":
        return f"{folder}/{stem}.java"
    return f"{folder}/{_snake(stem)}{LANGS[lang].ext}"


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
    pool = _snippets(lang)
    if lang in ("java", "bash"):
        min_parts = max_parts = 1
    k = max(1, min(rng.randint(min_parts, max_parts), len(pool)))
    chosen = [must.snippet] if must else []
    others = [s for s in pool if not must or s.key != must.snippet.key]
    rng.shuffle(others)
    chosen += others[: k - len(chosen)]
    instances = [must if must and s.key == must.snippet.key else _instantiate(s, rng) for s in chosen]
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
        text = compose_file(lang, parts, header=header, package=package.group(1) if package else "app")
        stem = instances[0].name
    return SourceFile(_path_for(lang, stem, rng), text, lang, instances, entity)


def _show_file(f: SourceFile) -> str:
    return f"`{f.path}`:\n\n{_fence(f.text, f.lang)}"


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
    lang = _pick_lang(rng)
    inst = _instantiate(rng.choice(_snippets(lang)), rng)
    title = LANGS[lang].title
    stub = _python_stub(inst) if lang == "python" and rng.random() < 0.4 else None
    if stub:
        text = f"Complete the following function:\n\n```python\n{stub}```"
    else:
        parts = [rng.choice(_CODEGEN_INTROS).format(lang=title), inst.spec,
                 rng.choice(_CODEGEN_CONTEXTS), rng.choice(_CODEGEN_ASKS)]
        text = "\n\n".join(p for p in parts if p)
    cap = _round_tokens(_code_tokens(len(inst.code)) * 1.5, 256, 1024)
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
        "Write a Python class `{Cls}Importer` that imports {plural} from JSON lines, validates each "
        "record ({fields}; status one of {statuses}), de-duplicates by id keeping the newest, and "
        "returns an import report (accepted, rejected with reasons). Include tests covering the "
        "rejection paths.",
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
    lang = _pick_lang(rng)
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
        "Add an `__all__` list with the public names of this module, in the order they are defined.",
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
        "Add #[must_use] to functions that return values and derive Debug and Clone wherever possible.",
        "Replace panics and assertions in library code with Result-returning errors.",
    ),
    "java": ("Make fields final where possible and add Javadoc to the public API.",
             "Replace synchronized blocks with a ReentrantLock."),
    "cpp": ("Add [[nodiscard]] to functions that return values and mark single-argument "
            "constructors explicit.", "Mark member functions noexcept where they cannot throw."),
    "sql": ("Add a comment above each CTE explaining what it computes, and use explicit column lists.",
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
    lang = _pick_lang(rng)
    f = _make_file(rng, lang, 3, 9, entity_p=0.7)
    inst = rng.choice(f.instances)
    if f.entity and lang == "python":
        old, new = f"{f.entity.name}Store", f"{f.entity.name}Repository"
    else:
        old = inst.name
        alternatives = [n for n in (inst.snippet.name, *inst.snippet.renames.get(inst.snippet.name, ()))
                        if n != old]
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
        text = f"Here is {f.path}:\n\n{_fence(f.text, lang)}\n\n{instruction} {closer}"
    cap = _round_tokens(_code_tokens(len(f.text)) * 1.1 + 128, 512, 4096, 256)
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
    "Find and fix the bug. Explain the cause in one or two sentences, then show the corrected code.",
    "Find and fix the bug, and show only the functions you changed.",
    "Find and fix the bug; keep the fix minimal.",
    "Find and fix the bug. Show a unified diff.",
)


def _bugfix(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = _pick_lang(rng)
    candidates = [s for s in _snippets(lang) if s.bugs]
    inst = _instantiate(rng.choice(candidates), rng)
    bug = rng.choice(inst.bugs)
    f = _make_file(rng, lang, 1, 4, must=inst)
    buggy = f.text.replace(bug.find, bug.replace, 1)
    line = _line_of(f.text, bug.find)
    symptom = bug.symptom.replace("{file}", f.path).replace("{line}", str(line))
    f.text = buggy
    if rng.random() < 0.5:
        text = f"{rng.choice(_BUG_INTROS)}\n\n```\n{symptom}\n```\n\n{_show_file(f)}\n\n{rng.choice(_BUG_CLOSERS)}"
    else:
        text = f"{_show_file(f)}\n\n{rng.choice(_BUG_INTROS)}\n\n```\n{symptom}\n```\n\n{rng.choice(_BUG_CLOSERS)}"
    cap = _round_tokens(_code_tokens(len(inst.code)) * 1.3 + 128, 512, 1536)
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
    lang = _pick_lang(rng)
    f = _make_file(rng, lang, 1, 3, entity_p=0.25)
    target = f.instances[0]
    ask = rng.choice(_TEST_ASKS).format(name=target.name, framework=LANGS[lang].test_framework)
    text = f"{_show_file(f)}\n\n{ask}" if rng.random() < 0.7 else f"{ask}\n\n{_show_file(f)}"
    cap = _round_tokens(_code_tokens(len(target.code)) * 2.0 + 256, 768, 2048, 256)
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
    "Our CI takes 40 minutes. Describe a plan to bring it under 10 minutes without losing coverage.",
    "What is the difference between concurrency and parallelism, using {lang} as the example "
    "language?",
    "How do database indexes speed up queries, and when does adding an index make things slower?",
)


def _explain_review(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = _pick_lang(rng)
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
    return _coding_row("explain_review", k, lang, [*_system(rng, lang), _user(text)], cap, seed, keys)


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
    "python": ("Add type hints and a docstring, please.", "Make it a generator instead of building a list.",
               "Can you make it async-friendly?"),
    "typescript": ("Make it generic so it works for any element type.", "Convert it to use async/await."),
    "go": ("Make it safe for concurrent use.", "Return errors instead of panicking."),
    "rust": ("Make it generic over the element type.", "Avoid the extra allocations."),
    "java": ("Make it thread-safe.", "Use records where it makes sense."),
    "cpp": ("Make it a template.", "Make it exception-safe."),
    "sql": ("Make it work on MySQL 8 as well.", "Add an index that would speed it up and explain why."),
    "bash": ("Make it POSIX sh compatible.", "Add a --verbose flag."),
}
_REPLY_LEADS = ("Here's an implementation:", "Sure. Here is one way to do it:",
                "Here is a version that follows the specification:", "This should do it:")


def _multiturn(rng: random.Random, k: int, seed: int) -> dict[str, Any]:
    lang = _pick_lang(rng)
    inst = _instantiate(rng.choice(_snippets(lang)), rng)
    framework = LANGS[lang].test_framework
    follow = [x.format(framework=framework) for x in (*_FOLLOW_UPS["any"], *_FOLLOW_UPS[lang])]
    rng.shuffle(follow)
    messages = [*_system(rng, lang), _user(f"{inst.spec}\n\nUse {LANGS[lang].title}."),
                {"role": "assistant",
                 "content": f"{rng.choice(_REPLY_LEADS)}\n\n{_fence(inst.code, lang)}\n\n"
                            f"It {inst.summary}."},
                _user(follow[0])]
    targets = [len(messages)]
    caps = [_round_tokens(_code_tokens(len(inst.code)) * 1.4, 512, 1536)]
    if rng.random() < 0.5:
        revised = f"{LANGS[lang].comment} Revised: {follow[0].rstrip('?.!').lower()}\n{inst.code}"
        messages += [{"role": "assistant",
                      "content": f"Updated version:\n\n{_fence(revised, lang)}"},
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
            rows.append(_CODING_BUILDERS[category](_rng(seed, "coding", category, k), k, seed))
    return rows

# ============================================================================ agentic sessions
# A session is an agent working in a small synthetic repository built from the corpus. Tool
# results are computed from that repository (files really contain what read_file returns, grep
# really finds its matches, git_diff is a real diff), so later steps copy paths, names and lines
# from earlier outputs as a real agent's would.


def _tool(name: str, description: str, props: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": list(required)}}}


def _s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _i(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "description": description, **extra}


TOOLS: tuple[dict[str, Any], ...] = (
    _tool("read_file", "Read a text file from the workspace. Returns the content with line numbers "
          "(number, tab, line). Use start_line and end_line to read part of a large file; both are "
          "1-based and inclusive. Binary files are refused.",
          {"path": _s("Path relative to the workspace root."),
           "start_line": _i("First line to return (1-based).", minimum=1),
           "end_line": _i("Last line to return (inclusive).", minimum=1)}, ["path"]),
    _tool("write_file", "Create a file or overwrite it completely with the given content. Parent "
          "folders are created. Prefer str_replace for small changes to existing files.",
          {"path": _s("Path relative to the workspace root."), "content": _s("The full new content.")},
          ["path", "content"]),
    _tool("str_replace", "Replace exactly one occurrence of old_str with new_str in a file. old_str "
          "must match the file byte for byte, including indentation, and must be unique in the file; "
          "include surrounding lines to make it unique. Returns the edited region.",
          {"path": _s("Path relative to the workspace root."),
           "old_str": _s("Text to find; must occur exactly once."),
           "new_str": _s("Replacement text; may be empty to delete.")}, ["path", "old_str", "new_str"]),
    _tool("insert_lines", "Insert text after the given line of a file (0 inserts at the top).",
          {"path": _s("Path relative to the workspace root."), "after_line": _i("Line number to insert after.", minimum=0),
           "text": _s("Text to insert.")}, ["path", "after_line", "text"]),
    _tool("delete_file", "Delete a file from the workspace. Fails for folders.",
          {"path": _s("Path relative to the workspace root.")}, ["path"]),
    _tool("move_file", "Move or rename a file inside the workspace.",
          {"source": _s("Existing path."), "destination": _s("New path.")}, ["source", "destination"]),
    _tool("list_dir", "List the entries of a folder. Folders end with '/'. Hidden entries and "
          "build output folders are skipped.",
          {"path": _s("Folder relative to the workspace root; '.' for the root."),
           "depth": _i("How many levels to descend (default 1).", minimum=1, maximum=4)}, ["path"]),
    _tool("glob", "Find files whose path matches a glob pattern such as 'src/**/*.py'.",
          {"pattern": _s("Glob pattern relative to the workspace root.")}, ["pattern"]),
    _tool("grep", "Search file contents with a regular expression (Python syntax). Returns "
          "'path:line:text' for each matching line, at most 100 matches.",
          {"pattern": _s("Regular expression."), "path": _s("Folder or file to search (default: workspace root)."),
           "include": _s("Only search files matching this glob, e.g. '*.py'."),
           "ignore_case": {"type": "boolean", "description": "Case-insensitive search."}}, ["pattern"]),
    _tool("run_tests", "Run the project's test suite, or part of it, and return the runner's output. "
          "Takes the test command from the project configuration.",
          {"path": _s("Test file or folder to run (default: all tests)."),
           "filter": _s("Only run tests whose name contains this text."),
           "verbose": {"type": "boolean", "description": "Print one line per test."}}, []),
    _tool("run_bash", "Run a shell command in the workspace with bash and return its combined "
          "stdout and stderr. Commands time out after 120 seconds. Do not start servers that keep "
          "running; use background jobs with care.",
          {"command": _s("The command line to run."), "timeout_s": _i("Timeout in seconds (max 600).", maximum=600)},
          ["command"]),
    _tool("git_status", "Show changed, staged and untracked files.", {}, []),
    _tool("git_diff", "Show the unified diff of uncommitted changes, optionally for one path.",
          {"path": _s("Limit the diff to this path."), "staged": {"type": "boolean", "description": "Show staged changes only."}},
          []),
    _tool("git_log", "Show recent commits (hash, author, date, subject).",
          {"path": _s("Only commits touching this path."), "max_count": _i("Number of commits (default 10).", minimum=1)}, []),
    _tool("git_commit", "Stage all changes and create a commit with the given message.",
          {"message": _s("Commit message: a short subject line, a blank line, then details.")}, ["message"]),
    _tool("create_branch", "Create a new git branch from the current HEAD and switch to it.",
          {"name": _s("Branch name, e.g. 'fix/rate-limit-refill'.")}, ["name"]),
    _tool("open_pull_request", "Push the current branch and open a pull request.",
          {"title": _s("Pull request title."), "body": _s("Markdown description."),
           "draft": {"type": "boolean", "description": "Open as a draft."}}, ["title", "body"]),
    _tool("list_ci_runs", "List recent CI runs for a branch with their status and run id.",
          {"branch": _s("Branch name (default: current branch)."), "limit": _i("How many runs (default 5).", minimum=1)}, []),
    _tool("get_ci_logs", "Fetch the log of one CI job. Long logs are cut to the last lines.",
          {"run_id": _i("Run id from list_ci_runs."), "job": _s("Job name, e.g. 'lint' or 'test'.")}, ["run_id"]),
    _tool("http_get", "Send an HTTP GET request from the sandbox and return status, selected headers "
          "and the body (cut at 20,000 characters). Only hosts on the allow list are reachable.",
          {"url": _s("Absolute URL."), "headers": {"type": "object", "description": "Extra request headers.",
                                                    "additionalProperties": {"type": "string"}}}, ["url"]),
    _tool("http_post", "Send an HTTP POST request with a JSON body and return the response.",
          {"url": _s("Absolute URL."), "json_body": {"type": "object", "description": "JSON body to send."}},
          ["url", "json_body"]),
    _tool("list_tables", "List the tables of the analytics database with approximate row counts.", {}, []),
    _tool("describe_table", "Show the columns, types and indexes of one table.",
          {"table": _s("Table name.")}, ["table"]),
    _tool("sql_query", "Run a read-only SQL query (PostgreSQL dialect) against the analytics database "
          "and return at most 200 rows as a text table. Statements that modify data are rejected.",
          {"query": _s("A single SELECT or WITH statement.")}, ["query"]),
    _tool("search_docs", "Search the internal engineering documentation and return the best matching "
          "passages with their page titles.",
          {"query": _s("What to look for."), "limit": _i("Maximum passages (default 5).", minimum=1, maximum=20)}, ["query"]),
    _tool("get_issue", "Read an issue from the tracker, including its comments.",
          {"number": _i("Issue number.")}, ["number"]),
    _tool("comment_on_issue", "Add a comment to an issue.",
          {"number": _i("Issue number."), "body": _s("Markdown comment.")}, ["number", "body"]),
    _tool("todo_write", "Replace the agent's todo list. Use it to plan multi-step work and to mark "
          "progress; the list is shown back to you.",
          {"items": {"type": "array", "description": "The whole list, in order.", "items": {
              "type": "object", "properties": {"text": _s("What to do."),
                                               "status": _s("State.", enum=["pending", "in_progress", "done"])},
              "required": ["text", "status"]}}}, ["items"]),
    _tool("ask_user", "Ask the user a clarifying question and wait for the answer. Use sparingly.",
          {"question": _s("The question.")}, ["question"]),
    _tool("format_code", "Run the project's formatter on the given paths and report changed files.",
          {"paths": {"type": "array", "items": {"type": "string"}, "description": "Files or folders."}}, ["paths"]),
    _tool("lint", "Run the project's linters and return their findings as 'path:line:col: code message'.",
          {"paths": {"type": "array", "items": {"type": "string"}, "description": "Files or folders (default: all)."}}, []),
    _tool("install_package", "Install or upgrade a dependency with the project's package manager and "
          "update the lock file.",
          {"name": _s("Package name."), "version": _s("Version specifier, e.g. '>=2.1,<3'.")}, ["name"]),
)
_TOOL_BY_NAME: dict[str, dict[str, Any]] = {t["function"]["name"]: t for t in TOOLS}

_AGENT_IDENTITY = (
    "You are an autonomous software engineering agent. You work inside a sandboxed checkout of "
    "the user's repository and act only through the tools you are given. You are persistent: keep "
    "going until the user's request is fully handled, then stop and report.",
    "You are a coding agent embedded in the team's developer portal. Engineers hand you tasks in "
    "plain language; you investigate the codebase with tools, make careful changes, verify them "
    "and report back concisely.",
    "You are a maintenance bot for a small engineering team. You fix failing builds, answer "
    "questions about the code and data, and prepare changes for human review.",
)
_AGENT_POLICY = (
    "## Working method\n- Read before you edit: open the relevant files and search for usages "
    "before changing a function.\n- Make the smallest change that solves the problem; do not "
    "reformat unrelated code.\n- After editing, run the relevant tests or checks and read their "
    "output. If they fail, fix the cause rather than the symptom.\n- When several lookups do not "
    "depend on each other, issue the tool calls in the same step.",
    "## Tool use\nEvery tool call costs time. Prefer grep and glob to find code over listing "
    "folders one by one. Read large files in ranges when you only need part of them. Never "
    "guess file contents: if you have not read a file in this session, read it before quoting "
    "it. Paths are always relative to the workspace root.",
    "## Editing rules\n- Use str_replace for focused edits; old_str must be unique, so include a "
    "line or two of context.\n- Keep the existing style: indentation, quote style, naming, "
    "import order.\n- Do not add new dependencies without asking.\n- Do not delete or weaken "
    "existing tests to make a build pass.",
    "## Verification\nA task is done only when the relevant checks pass. For code changes that "
    "means the tests covering the changed code; for dependency changes the full suite; for "
    "documentation changes a spell check is enough. If a check cannot run in the sandbox, say so "
    "explicitly in your final message.",
    "## Communication\nYour final message is read by a busy engineer. Start with the outcome in "
    "one sentence, then list what you changed (file and a few words each) and anything they must "
    "check themselves. No greetings, no restating the task, no long explanations of obvious steps.",
    "## Safety\n- Never print or commit secrets, tokens or the contents of .env files.\n- Do not "
    "push to the main branch; create a branch when a commit is requested.\n- Do not run "
    "destructive commands (rm -rf, git reset --hard, DROP TABLE) without explicit permission.\n- "
    "The database tools are read-only; never try to work around that.",
    "## Git conventions\nBranch names: fix/<topic>, feat/<topic> or chore/<topic>. Commit "
    "subjects are imperative and under 72 characters (\"Fix refill of rate limiter\"), followed "
    "by a blank line and a short body explaining why. One logical change per commit.",
    "## When you are unsure\nIf the request is ambiguous and a wrong guess would be costly, ask "
    "one precise question with ask_user. Otherwise make a reasonable assumption, state it in the "
    "final message and proceed.",
    "## Code quality bar\nNew code must have type annotations where the language supports them, "
    "handle errors explicitly, avoid global state, and come with tests when behaviour changes. "
    "Names say what a value is and, for quantities, the unit (timeout_s, size_bytes).",
    "## Data questions\nWhen answering questions about data, inspect the schema first, state the "
    "query you used, mention filters (time range, status) and round numbers sensibly. If the "
    "data looks wrong (duplicates, nulls, impossible values), say so instead of hiding it.",
    "## Performance\nAvoid quadratic algorithms on inputs that can grow, stream large files "
    "instead of reading them whole, and measure before optimising. Mention any performance "
    "trade-off you made in the final message.",
    "## Output format\nUse GitHub-flavoured Markdown in messages to the user. Refer to code as "
    "`path:line`. Keep the final message under 200 words unless the user asked for a detailed "
    "explanation.",
)
_AGENT_ENV = (
    "<environment>\nworkspace: /workspace/{repo}\nos: linux (debian 12)\nshell: bash 5.2\n"
    "languages: {langs}\nnetwork: allow list only (internal APIs, package index)\n"
    "current_date: 2025-03-{day:02d}\n</environment>"
)

# Repository names and the language their code is in.
_REPOS: tuple[tuple[str, str], ...] = (
    ("ledger-service", "python"), ("fleet-tracker", "python"), ("ticket-desk", "python"),
    ("booking-engine", "python"), ("payroll-tools", "python"), ("sensor-hub", "python"),
    ("shop-backend", "python"), ("ci-insights", "python"), ("clinic-records", "python"),
    ("listing-api", "python"), ("billing-gateway", "go"), ("shipping-router", "go"),
    ("events-ingest", "go"), ("web-console", "typescript"), ("notify-worker", "typescript"),
    ("search-frontend", "typescript"),
)


def _agent_system(rng: random.Random, repo: str, lang: str) -> str:
    policies = list(_AGENT_POLICY)
    rng.shuffle(policies)
    chosen = policies[: rng.randint(6, len(policies))]
    langs = {"python": "Python 3.11", "go": "Go 1.22", "typescript": "Node.js 20, TypeScript 5.4"}[lang]
    env = _AGENT_ENV.format(repo=repo, langs=langs, day=rng.randint(3, 28))
    return "\n\n".join([rng.choice(_AGENT_IDENTITY), *chosen, env])


# ---------------------------------------------------------------------------- the repository


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


def _py_tests(module: str, insts: Sequence[Instance], rng: random.Random) -> str:
    names = [i.name for i in insts if i.examples]
    lines = [f'"""Tests for {module}."""', "", f"from {module} import {', '.join(sorted(names))}", ""]
    for inst in insts:
        for k, (call, expected) in enumerate(inst.examples):
            lines += ["", f"def test_{_snake(inst.name)}_{k}() -> None:", f"    assert {call} == {expected}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _ts_tests(module: str, insts: Sequence[Instance]) -> str:
    names = [i.name for i in insts if i.examples]
    lines = [f'import {{ {", ".join(names)} }} from "./{module}";', ""]
    for inst in insts:
        if not inst.examples:
            continue
        lines.append(f'describe("{inst.name}", () => {{')
        for k, (call, expected) in enumerate(inst.examples):
            lines += [f'  test("example {k + 1}", () => {{', f"    expect({call}).toEqual({expected});", "  });"]
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
    files: dict[str, str] = {}
    # Helpers with examples get generated tests; languages with few such snippets use them all.
    pool = [s for s in _snippets(lang) if s.examples]
    if len(pool) < 3:
        pool = _snippets(lang)
    rng.shuffle(pool)
    util = [_instantiate(s, rng) for s in pool[: rng.randint(2, min(4, len(pool)))]]
    readme = (f"# {name}\n\n{name.replace('-', ' ').capitalize()} keeps track of "
              f"{ent.plural.replace('_', ' ')} for the operations team. It exposes a small API and a "
              f"command-line report.\n\n## Development\n\n")
    repo = Repo(name, lang, package, files, entity=ent)
    if lang == "python":
        readme += ("```bash\npython -m venv .venv && . .venv/bin/activate\npip install -e '.[dev]'\n"
                   "pytest -q\n```\n\nCode lives in `src/" + package + "/`, tests in `tests/`.\n")
        files["README.md"] = readme
        files["pyproject.toml"] = (
            f'[project]\nname = "{name}"\nversion = "1.{rng.randint(0, 9)}.{rng.randint(0, 20)}"\n'
            f'requires-python = ">=3.11"\ndependencies = [\n    "aiohttp>=3.9,<4",\n    "pydantic>=2.5,<3",\n'
            f'    "python-dateutil>=2.8",\n]\n\n[project.optional-dependencies]\ndev = ["pytest>=8", "ruff>=0.4", "mypy>=1.8"]\n\n'
            f'[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n\n[tool.ruff]\nline-length = 100\n')
        files[f"src/{package}/__init__.py"] = f'"""{name}."""\n\n__version__ = "1.0.0"\n'
        repo.entity_path = f"src/{package}/{ent.plural}.py"
        files[repo.entity_path] = python_entity_module(ent, rng)
        related = rng.choice([e for e in ENTITIES if e.name != ent.name])
        files[f"src/{package}/{related.plural}.py"] = python_entity_module(related, rng)
        repo.util_path = f"src/{package}/utils.py"
        files[repo.util_path] = compose_file("python", [i.code for i in util],
                                             header='"""Small helpers shared by the service."""')
        files["tests/__init__.py"] = ""
        test_path = "tests/test_utils.py"
        files[test_path] = _py_tests(f"{package}.utils", util, rng)
        repo.test_paths[repo.util_path] = test_path
        files[f"tests/test_{ent.plural}.py"] = (
            f'"""Tests for {package}.{ent.plural}."""\n\nimport pytest\n\n'
            f"from {package}.{ent.plural} import {ent.name}Error, {ent.name}Store\n\n\n"
            f"def test_empty_store_has_no_items() -> None:\n    assert len({ent.name}Store()) == 0\n\n\n"
            f"def test_get_missing_raises() -> None:\n    with pytest.raises({ent.name}Error):\n"
            f"        {ent.name}Store().get(42)\n")
        files[".github/workflows/ci.yml"] = (
            "name: ci\non: [push, pull_request]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
            "      - uses: actions/checkout@v4\n      - uses: actions/setup-python@v5\n        with:\n"
            "          python-version: '3.11'\n      - run: pip install -e '.[dev]'\n      - run: ruff check .\n"
            "      - run: pytest -q\n")
    elif lang == "go":
        readme += "```bash\ngo test ./...\n```\n"
        files["README.md"] = readme
        files["go.mod"] = (f"module example.com/{name}\n\ngo 1.22\n\nrequire (\n\tgithub.com/google/uuid v1.6.0\n"
                           f"\tgolang.org/x/sync v0.{rng.randint(5, 8)}.0\n)\n")
        repo.entity_path = "internal/store/store.go"
        files[repo.entity_path] = go_entity_module(ent, rng, "store")
        pkg = "util"
        repo.util_path = f"internal/{pkg}/{pkg}.go"
        files[repo.util_path] = compose_file("go", [i.code for i in util], package=pkg)
        test_path = f"internal/{pkg}/{pkg}_test.go"
        files[test_path] = _go_tests(pkg, util)
        repo.test_paths[repo.util_path] = test_path
        files["cmd/server/main.go"] = (
            f'package main\n\nimport (\n\t"log"\n\t"net/http"\n\n\t"example.com/{name}/internal/store"\n)\n\n'
            "func main() {\n\ts := store.NewStore()\n\tlog.Println(\"listening on :8080\")\n"
            "\tlog.Fatal(http.ListenAndServe(\":8080\", s.Handler()))\n}\n")
    else:
        readme += "```bash\nnpm ci\nnpm test\n```\n"
        files["README.md"] = readme
        files["package.json"] = json.dumps({
            "name": name, "version": f"2.{rng.randint(0, 9)}.0", "private": True, "type": "module",
            "scripts": {"build": "tsc -p .", "test": "jest", "lint": "eslint src"},
            "dependencies": {"zod": "^3.22.4", "pino": f"^8.{rng.randint(10, 19)}.0"},
            "devDependencies": {"jest": "^29.7.0", "ts-jest": "^29.1.2", "typescript": "^5.4.5",
                                "eslint": "^8.57.0"}}, indent=2) + "\n"
        files["tsconfig.json"] = json.dumps({"compilerOptions": {
            "target": "ES2022", "module": "NodeNext", "strict": True, "outDir": "dist"},
            "include": ["src"]}, indent=2) + "\n"
        repo.util_path = "src/utils.ts"
        files[repo.util_path] = compose_file("typescript", [i.code for i in util])
        test_path = "src/utils.test.ts"
        files[test_path] = _ts_tests("utils", util)
        repo.test_paths[repo.util_path] = test_path
        repo.entity_path = repo.util_path
    repo.util_instances = util
    # A second helpers module: more code for agents that read around before acting.
    rest = [x for x in _snippets(lang) if x.key not in {i.snippet.key for i in util}]
    rng.shuffle(rest)
    more = [_instantiate(x, rng) for x in rest[: rng.randint(2, 5)]]
    if more:
        stem = {"python": f"src/{package}/support.py", "go": "internal/support/support.go",
                "typescript": "src/support.ts"}[lang]
        files[stem] = compose_file(lang, [i.code for i in more], package="support",
                                   header='"""Support code for jobs and reports."""' if lang == "python" else "")
    files["CHANGELOG.md"] = (f"# Changelog\n\n## Unreleased\n\n## 1.{rng.randint(2, 9)}.0\n\n- Add "
                             f"{ent.plural.replace('_', ' ')} CSV export\n- Fix time zone handling in reports\n")
    repo.snapshot()
    return repo


# ---------------------------------------------------------------------------- tool execution


def _numbered(text: str, start: int = 1, end: int | None = None) -> str:
    lines = text.splitlines()
    end = len(lines) if end is None else min(end, len(lines))
    return "\n".join(f"{n:6d}\t{lines[n - 1]}" for n in range(start, end + 1))


def _edit_hunk(before: str, after: str, context: int = 1) -> tuple[str, str]:
    """The smallest unique (old_str, new_str) pair, in whole lines, that turns before into after."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    ops = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes() if op[0] != "equal"]
    i1, i2, j1, j2 = ops[0][1], ops[-1][2], ops[0][3], ops[-1][4]
    while True:
        lo_a, hi_a = max(0, i1 - context), min(len(a), i2 + context)
        old = "".join(a[lo_a:hi_a])
        if before.count(old) == 1 or (lo_a == 0 and hi_a == len(a)):
            new = "".join(b[max(0, j1 - (i1 - lo_a)): j2 + (hi_a - i2)])
            return old.rstrip("\n"), new.rstrip("\n")
        context += 1


class Workspace:
    """Answers tool calls from the synthetic repository; file tools really read and edit it."""

    def __init__(self, repo: Repo, rng: random.Random) -> None:
        self.repo = repo
        self.rng = rng
        # (path, buggy text, test id, failure text): tests fail while the file is still buggy.
        self.failure: tuple[str, str, str, str] | None = None

    def run(self, tool: str, args: dict[str, Any]) -> str:
        handler = getattr(self, f"_t_{tool}", None)
        if handler is None:  # scenario steps pass the output of tools not simulated here
            raise KeyError(f"{tool} is not simulated; give its output in the step")
        return str(handler(**args))

    def _t_read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        if path not in self.repo.files:
            return f"error: {path}: no such file"
        return _numbered(self.repo.files[path], start_line, end_line)

    def _t_write_file(self, path: str, content: str) -> str:
        self.repo.files[path] = content
        return f"wrote {len(content.encode())} bytes to {path}"

    def _t_str_replace(self, path: str, old_str: str, new_str: str) -> str:
        text = self.repo.files[path]
        if text.count(old_str) != 1:
            raise ValueError(f"str_replace target not unique in {path}")
        pos = text.index(old_str)
        self.repo.files[path] = text.replace(old_str, new_str, 1)
        first = text.count("\n", 0, pos) + 1
        last = first + new_str.count("\n")
        return (f"edited {path}; lines {max(1, first - 2)}-{last + 2} now read:\n"
                + _numbered(self.repo.files[path], max(1, first - 2), last + 2))

    def _t_list_dir(self, path: str, depth: int = 1) -> str:
        prefix = "" if path in (".", "") else path.rstrip("/") + "/"
        entries: list[str] = []
        for p in sorted(self.repo.files):
            if not p.startswith(prefix):
                continue
            rest = p[len(prefix):].split("/")
            for level in range(1, min(depth, len(rest)) + 1):
                entry = "/".join(rest[:level]) + ("/" if level < len(rest) else "")
                if entry not in entries:
                    entries.append(entry)
        return "\n".join(entries) if entries else f"error: {path}: no such folder"

    def _t_glob(self, pattern: str) -> str:
        rx = re.compile("^" + re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*", "[^/]*") + "$")
        return "\n".join(p for p in sorted(self.repo.files) if rx.match(p)) or "no matches"

    def _t_grep(self, pattern: str, path: str = ".", include: str | None = None,
                ignore_case: bool = False) -> str:
        rx = re.compile(pattern, re.I if ignore_case else 0)
        ext = include.lstrip("*") if include else ""
        hits = []
        for p in sorted(self.repo.files):
            if path not in (".", "") and not p.startswith(path.rstrip("/")):
                continue
            if ext and not p.endswith(ext):
                continue
            for n, line in enumerate(self.repo.files[p].splitlines(), start=1):
                if rx.search(line):
                    hits.append(f"{p}:{n}:{line}")
        return "\n".join(hits[:100]) or "no matches"

    def _t_git_diff(self, path: str | None = None, staged: bool = False) -> str:
        chunks: list[str] = []
        for p in sorted(set(self.repo.files) | set(self.repo.original)):
            if path and p != path:
                continue
            before, after = self.repo.original.get(p, ""), self.repo.files.get(p, "")
            if before != after:
                chunks.extend(difflib.unified_diff(before.splitlines(), after.splitlines(),
                                                   f"a/{p}", f"b/{p}", lineterm=""))
        return "\n".join(chunks) or "no changes"

    def _t_git_status(self) -> str:
        changed = [p for p in sorted(self.repo.files) if self.repo.original.get(p) != self.repo.files[p]]
        lines = [f" M {p}" if p in self.repo.original else f"?? {p}" for p in changed]
        return "On branch main\n" + ("\n".join(lines) if lines else "nothing to commit, working tree clean")

    def _t_todo_write(self, items: list[dict[str, str]]) -> str:
        marks = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}
        return "todo list updated:\n" + "\n".join(f"{marks[i['status']]} {i['text']}" for i in items)

    def _t_git_commit(self, message: str) -> str:
        changed = sum(1 for p in self.repo.files if self.repo.original.get(p) != self.repo.files[p])
        sha = "".join(self.rng.choice("0123456789abcdef") for _ in range(7))
        return f"[main {sha}] {message.splitlines()[0]}\n {changed} file{'s' if changed != 1 else ''} changed"

    def _t_create_branch(self, name: str) -> str:
        return f"Switched to a new branch '{name}'"

    # --- test runners: output depends on the repository state, so a fix really turns them green.

    def _failing(self) -> tuple[str, str] | None:
        if self.failure and self.repo.files.get(self.failure[0]) == self.failure[1]:
            return self.failure[2], self.failure[3]
        return None

    def _t_run_tests(self, path: str | None = None, filter: str | None = None,
                     verbose: bool = False) -> str:
        failing = self._failing()
        if failing and path and not failing[0].startswith(path):
            failing = None
        lang = self.repo.lang
        test_files = [p for p in sorted(self.repo.files)
                      if (p.startswith("tests/test_") and p.endswith(".py")) or p.endswith(("_test.go", ".test.ts"))]
        if path:
            test_files = [p for p in test_files if p.startswith(path)] or test_files
        duration = f"{self.rng.uniform(0.2, 3.5):.2f}"
        if lang == "python":
            counts = {p: max(1, self.repo.files[p].count("\ndef test_")) for p in test_files}
            total = sum(counts.values())
            lines = ["============================= test session starts ==============================",
                     "platform linux -- Python 3.11.9, pytest-8.2.2, pluggy-1.5.0",
                     f"rootdir: /workspace/{self.repo.name}", "configfile: pyproject.toml",
                     f"collected {total} items", ""]
            done = 0
            for p, n in counts.items():
                done += n
                marks = "." * n
                if failing and failing[0].startswith(p):
                    marks = marks[:-1] + "F"
                lines.append(f"{p} {marks}".ljust(73) + f"[{round(100 * done / total):3d}%]")
            if failing:
                name = failing[0].split("::")[-1]
                lines += ["", "=================================== FAILURES ===================================",
                          f" {name} ".center(80, "_"), failing[1], "",
                          "=========================== short test summary info ============================",
                          f"FAILED {failing[0]}",
                          f" 1 failed, {total - 1} passed in {duration}s ".center(80, "=")]
            else:
                lines += ["", f" {total} passed in {duration}s ".center(80, "=")]
            return "\n".join(lines)
        if lang == "go":
            if failing:
                return f"{failing[1]}\nok  \texample.com/{self.repo.name}/internal/store\t0.{self.rng.randint(10, 99)}1s"
            pkgs = sorted({p.rsplit("/", 1)[0] for p in self.repo.files if p.endswith(".go")})
            return "\n".join(f"ok  \texample.com/{self.repo.name}/{p}\t0.{self.rng.randint(10, 99)}2s" for p in pkgs)
        n_tests = sum(self.repo.files[p].count("test(") for p in test_files)
        if failing:
            return (f"{failing[1]}\n\nTest Suites: 1 failed, {len(test_files) - 1} passed, {len(test_files)} total\n"
                    f"Tests:       1 failed, {n_tests - 1} passed, {n_tests} total\nTime:        {duration} s")
        return "\n".join([*(f"PASS {p}" for p in test_files), "",
                          f"Test Suites: {len(test_files)} passed, {len(test_files)} total",
                          f"Tests:       {n_tests} passed, {n_tests} total", f"Time:        {duration} s",
                          "Ran all test suites."])


_THOUGHTS = {
    "start": ("Let me start by reproducing the failure.", "I'll run the failing test first.",
              "First, let me see the current state of the tests.", ""),
    "read": ("Let me look at the implementation and the test.", "Reading the relevant files.", "", ""),
    "fix": ("Found it: the change below restores the intended behaviour.",
            "The logic here is wrong; fixing it.", "", ""),
    "verify": ("Now re-running the tests.", "Let me confirm the fix with the full suite.", ""),
    "explore": ("Let me get an overview of the repository first.", "I'll look around the codebase.", ""),
}


class Session:
    """Builds one agent session: messages, the target index of every assistant step and its cap."""

    def __init__(self, rng: random.Random, ws: Workspace) -> None:
        self.rng = rng
        self.ws = ws
        self.messages: list[dict[str, Any]] = []
        self.targets: list[int] = []
        self.caps: list[int] = []
        self.used: list[str] = []

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def thought(self, kind: str) -> str:
        return self.rng.choice(_THOUGHTS[kind])

    def step(self, calls: Sequence[tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]],
             thought: str = "") -> list[str]:
        """One assistant turn with one or more (parallel) tool calls, then their results."""
        self.targets.append(len(self.messages))
        tool_calls: list[dict[str, Any]] = []
        outputs: list[str] = []
        for call in calls:
            name, args = call[0], call[1]
            output = call[2] if len(call) == 3 else self.ws.run(name, args)
            tool_calls.append({"id": _call_id(self.rng), "type": "function",
                               "function": {"name": name, "arguments": json.dumps(args)}})
            outputs.append(output)
            if name not in self.used:
                self.used.append(name)
        size = len(thought) + sum(len(c["function"]["arguments"]) + 40 for c in tool_calls)
        self.caps.append(next(c for c in (128, 256, 512, 1024) if c >= size / 3.5 * 1.5 or c == 1024))
        self.messages.append({"role": "assistant", "content": thought, "tool_calls": tool_calls})
        for tc, out in zip(tool_calls, outputs, strict=True):
            self.messages.append({"role": "tool", "tool_call_id": tc["id"], "content": out})
        return outputs

    def answer(self, text: str) -> None:
        self.targets.append(len(self.messages))
        self.caps.append(256 if len(text) < 500 else 512)
        self.messages.append({"role": "assistant", "content": text})


def _test_path(repo: Repo) -> str:
    return repo.test_paths[repo.util_path]


def _src_dir(repo: Repo) -> str:
    return repo.util_path.rsplit("/", 1)[0]


def _explore(s: Session, repo: Repo, rng: random.Random) -> None:
    """The long variant: an agent that orients itself before acting (reads grow the context)."""
    s.step([("list_dir", {"path": ".", "depth": 3})], s.thought("explore"))
    config = {"python": "pyproject.toml", "go": "go.mod", "typescript": "package.json"}[repo.lang]
    s.step([("read_file", {"path": "README.md"}), ("read_file", {"path": config})])
    others = [p for p in repo.files if p.startswith(("src/", "internal/")) and p.endswith((".py", ".go", ".ts"))
              and not p.endswith(("__init__.py", "_test.go", ".test.ts"))]
    sources = list(dict.fromkeys([repo.entity_path, repo.util_path, *others]))
    s.step([("read_file", {"path": p}) for p in sources], "Reading the main modules.")
    tests = [p for p in repo.files if p.endswith(("_test.go", ".test.ts")) or p.startswith("tests/test_")]
    s.step([("read_file", {"path": p}) for p in tests[:3]])
    if rng.random() < 0.5:
        log = "\n".join(
            f"{''.join(rng.choice('0123456789abcdef') for _ in range(7))} {a} 2025-03-{d:02d} {m}"
            for a, d, m in (("dana", 14, "Add CSV export"), ("lee", 12, "Refactor store validation"),
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
    line = _line_of(fixed, bug.find)
    repo.files[repo.util_path] = fixed.replace(bug.find, bug.replace, 1)
    symptom = bug.symptom.replace("{file}", repo.util_path).replace("{line}", str(line))
    test_path = _test_path(repo)
    match = re.search(r"^>\s+(assert .*)$", symptom, re.M) if repo.lang == "python" else None
    if match:
        test_name = f"test_{_snake(inst.name)}_regression"
        repo.files[test_path] += f"\n\ndef {test_name}() -> None:\n    {match.group(1)}\n"
        symptom = "\n".join([
            f"    def {test_name}() -> None:",
            *(x for x in symptom.splitlines() if x.startswith((">", "E"))),
            "",
            f"{test_path}:{repo.files[test_path].count(chr(10))}: AssertionError"])
    return inst, Bug(bug.find, bug.replace, symptom), fixed


def _sc_fix_failing_test(s: Session, repo: Repo, rng: random.Random) -> None:
    inst, bug, fixed = _inject_bug(repo, rng)
    test_path = _test_path(repo)
    buggy = repo.files[repo.util_path]
    s.ws.failure = (repo.util_path, buggy, f"{test_path}::test_{_snake(inst.name)}_regression",
                    bug.symptom)
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
    old, new = _edit_hunk(buggy, fixed)
    s.step([("str_replace", {"path": repo.util_path, "old_str": old, "new_str": new})],
           s.thought("fix"))
    s.step([("run_tests", {})], s.thought("verify"))
    s.answer(f"`{inst.name}` in `{repo.util_path}` is repaired: {rng.choice(_CAUSES)} The "
             "failing test passes again and the rest of the suite is green; no tests were changed.")


_CAUSES = (
    "a recent change broke the core loop, so one case was handled incorrectly.",
    "one condition was off, which made the function skip a necessary update.",
    "an expression used the wrong variable, so results drifted from the specification.",
)

def _sc_add_feature(s: Session, repo: Repo, rng: random.Random) -> None:
    present = {i.snippet.key for i in repo.util_instances}
    pool = [x for x in _snippets(repo.lang) if x.key not in present and x.examples]
    pool = pool or [x for x in _snippets(repo.lang) if x.key not in present]
    new = _instantiate(rng.choice(pool), rng)
    test_path = _test_path(repo)
    repo.snapshot()
    s.user(f"Please add a `{new.name}` helper to `{repo.util_path}`. Requirements: {new.spec} "
           "Add tests next to the existing ones and make sure the suite passes.")
    if rng.random() < 0.5:
        s.step([("list_dir", {"path": _src_dir(repo)})], s.thought("explore"))
    s.step([("read_file", {"path": repo.util_path}), ("read_file", {"path": test_path})],
           s.thought("read"))
    imports, body = _split_imports(new.code, repo.lang)
    text = repo.files[repo.util_path]
    tail = text.rstrip("\n").splitlines()[-2:]
    old_tail = "\n".join(tail)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("str_replace", {"path": repo.util_path, "old_str": old_tail,
                         "new_str": old_tail + ("\n\n\n" if repo.lang == "python" else "\n\n") + body.strip("\n")})]
    have, _ = _split_imports(text, repo.lang)
    missing = [x for x in imports if x not in have]
    if missing and have and text.count(have[0]) == 1 and repo.lang != "go":
        calls.append(("str_replace", {"path": repo.util_path, "old_str": have[0],
                                      "new_str": "\n".join([have[0], *missing])}))
    s.step(calls, "I'll add the function at the end of the module.")
    if repo.lang == "python" and new.examples:
        tests = "".join(f"\n\ndef test_{_snake(new.name)}_{k}() -> None:\n    assert {c} == {e}\n"
                        for k, (c, e) in enumerate(new.examples))
        test_text = repo.files[test_path]
        first = test_text.splitlines()[2] if len(test_text.splitlines()) > 2 else ""
        edit_calls: list[tuple[str, dict[str, Any]]] = [
            ("str_replace", {"path": test_path, "old_str": test_text.rstrip("\n").splitlines()[-1],
                             "new_str": test_text.rstrip("\n").splitlines()[-1] + "\n" + tests.rstrip("\n")})]
        if first.startswith("from ") and test_text.count(first) == 1:
            edit_calls.append(("str_replace", {"path": test_path, "old_str": first,
                                               "new_str": first + f"\nfrom {repo.package}.utils import {new.name}"}))
        s.step(edit_calls)
    elif repo.lang == "typescript" and new.examples:
        block = "\n".join([f'describe("{new.name}", () => {{',
                           *(f'  test("example {k + 1}", () => {{\n    expect({c}).toEqual({e});\n  }});'
                             for k, (c, e) in enumerate(new.examples)), "});", ""])
        s.step([("write_file", {"path": f"src/{_snake(new.name)}.test.ts",
                                "content": f'import {{ {new.name} }} from "./utils";\n\n{block}'})])
    s.step([("run_tests", {"path": test_path if repo.lang == "python" else _src_dir(repo)})],
           s.thought("verify"))
    if rng.random() < 0.5:
        s.step([("git_diff", {})])
    s.answer(f"Added `{new.name}` to `{repo.util_path}` ({new.summary}), with tests covering the "
             "examples from the request. The suite passes.")


def _sc_explore_question(s: Session, repo: Repo, rng: random.Random) -> None:
    repo.snapshot()
    if repo.lang == "python" and repo.entity:
        ent = repo.entity
        s.user(rng.choice((
            f"How does `{ent.name}Store.update` validate changes, and what happens when someone "
            "passes a field that doesn't exist? Point me to the code.",
            f"Where do we check that a {ent.name.lower()} status is valid, and which statuses are "
            "allowed? I need to add a new one.",
            f"Walk me through what happens when a JSON lines file with a malformed {ent.name.lower()} "
            "record is loaded.",
        )))
        s.step([("grep", {"pattern": r"def (update|validate|from_json_lines|with_status)\b", "path": "src"})],
               "Let me find the relevant functions.")
        lines = repo.files[repo.entity_path].splitlines()
        start = next(n for n, x in enumerate(lines, 1) if x.startswith("def validate"))
        calls: list[tuple[str, dict[str, Any]]] = [
            ("read_file", {"path": repo.entity_path, "start_line": max(1, start - 30), "end_line": start + 60})]
        if rng.random() < 0.5:
            calls.append(("read_file", {"path": f"tests/test_{ent.plural}.py"}))
        s.step(calls)
        s.answer(
            f"Validation lives in `validate()` in `{repo.entity_path}` (around line {start}). "
            f"`{ent.name}Store.add` and `update` both call it and raise `{ent.name}Error` with every "
            f"problem joined by '; '. `update` builds the new record with `dataclasses.replace`, so an "
            "unknown field name fails there with a TypeError before validation runs; that error is "
            f"not converted to `{ent.name}Error`, which callers may not expect. Allowed statuses are "
            f"the `STATUSES` tuple at the top of the module ({', '.join(ent.statuses)}); adding one "
            "means extending that tuple, and the report and CSV export pick it up automatically. "
            "JSON lines loading wraps decode and validation errors with the line number.")
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
    alternatives = [n for n in (inst.snippet.name, *inst.snippet.renames.get(inst.snippet.name, ()))
                    if n != inst.name]
    new_name = rng.choice(alternatives) if alternatives else inst.name + "Impl"
    repo.snapshot()
    s.user(f"Rename `{inst.name}` to `{new_name}` everywhere in the repository, including tests and "
           "docs. Behaviour must not change.")
    hits = s.step([("grep", {"pattern": rf"\b{inst.name}\b", "path": "."})], "Finding every use first.")[0]
    word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(inst.name)}(?![A-Za-z0-9_])")
    files = list(dict.fromkeys(h.split(":", 1)[0] for h in hits.splitlines() if ":" in h))
    calls: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        text = repo.files[path]
        changed = [ln for ln in dict.fromkeys(text.splitlines()) if word.search(ln)]
        if len(changed) <= 3 and all(text.count(ln) == 1 for ln in changed):
            calls += [("str_replace", {"path": path, "old_str": ln, "new_str": word.sub(new_name, ln)})
                      for ln in changed]
        else:
            calls.append(("write_file", {"path": path, "content": word.sub(new_name, text)}))
    for k in range(0, len(calls), 4):  # at most four edits per step, as agents batch them
        s.step(calls[k:k + 4])
    s.step([("grep", {"pattern": rf"\b{inst.name}\b", "path": "."}), ("run_tests", {})],
           "Checking nothing was missed and the tests still pass.")
    s.answer(f"Renamed `{inst.name}` to `{new_name}` in {len(files)} file(s): "
             + ", ".join(f"`{p}`" for p in files) + ". No references to the old name remain and "
             "the test suite passes.")


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    sep = "-+-".join("-" * w for w in widths)
    body = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, sep, *body, f"({len(cells)} row{'s' if len(cells) != 1 else ''})"])


_SQL_TYPE = {"str": "text", "int": "bigint", "float": "double precision", "bool": "boolean", "date": "date"}


def _sc_sql_investigation(s: Session, repo: Repo, rng: random.Random) -> None:
    ent = repo.entity or rng.choice(ENTITIES)
    repo.snapshot()
    table = ent.plural
    status = rng.choice(ent.statuses)
    str_field = next(f for f, k in ent.fields if k == "str")
    s.user(f"How many {ent.plural.replace('_', ' ')} were in status '{status}' per month this year, "
           f"and which {str_field.replace('_', ' ')} has the most of them overall? Use the analytics DB.")
    tables = [(table, rng.randint(20_000, 2_000_000)), ("audit_log", rng.randint(1_000_000, 9_000_000)),
              ("users", rng.randint(500, 50_000)), (f"{table}_archive", rng.randint(100_000, 900_000)),
              ("schema_migrations", rng.randint(40, 200))]
    s.step([("list_tables", {}, _table(["table", "approx_rows"], tables))], "Let me check the schema first.")
    cols = [("id", "bigint", "no"), *((f, _SQL_TYPE[k], rng.choice(("no", "yes"))) for f, k in ent.fields),
            ("status", "text", "no"), ("created_at", "timestamptz", "no"), ("updated_at", "timestamptz", "yes")]
    s.step([("describe_table", {"table": table},
             _table(["column", "type", "nullable"], cols) + f"\nindexes: {table}_pkey (id), "
             f"{table}_status_idx (status), {table}_created_at_idx (created_at)"),
            ("describe_table", {"table": "audit_log"},
             _table(["column", "type", "nullable"], [("id", "bigint", "no"), ("entity", "text", "no"),
                                                     ("entity_id", "bigint", "no"), ("action", "text", "no"),
                                                     ("at", "timestamptz", "no")]))])
    months = [f"2025-{m:02d}-01" for m in range(1, rng.randint(3, 4))]
    monthly = [(m, rng.randint(40, 4000)) for m in months]
    q1 = (f"SELECT date_trunc('month', created_at)::date AS month, count(*) AS n\nFROM {table}\n"
          f"WHERE status = '{status}' AND created_at >= '2025-01-01'\nGROUP BY 1\nORDER BY 1")
    s.step([("sql_query", {"query": q1}, _table(["month", "n"], monthly))])
    names = [f"{str_field}-{rng.randint(100, 999)}" for _ in range(rng.randint(4, 8))]
    counts = sorted((rng.randint(10, 900) for _ in names), reverse=True)
    q2 = (f"SELECT {str_field}, count(*) AS n\nFROM {table}\nWHERE status = '{status}'\nGROUP BY 1\n"
          "ORDER BY n DESC\nLIMIT 10")
    s.step([("sql_query", {"query": q2}, _table([str_field, "n"], list(zip(names, counts, strict=True))))])
    s.answer("Per month in 2025 (status '" + status + "'): "
             + ", ".join(f"{m[:7]}: {n:,}" for m, n in monthly)
             + f". The {str_field.replace('_', ' ')} with the most is `{names[0]}` ({counts[0]:,} "
             f"overall). Counted by `created_at`; rows moved to `{table}_archive` are not included.")


def _sc_log_debugging(s: Session, repo: Repo, rng: random.Random) -> None:
    ent = repo.entity
    assert ent is not None and repo.lang == "python"
    text = repo.files[repo.entity_path]
    field_name = next(f for f, k in ent.fields if k == "str" and f'data["{f}"]' in text)
    line_no = _line_of(text, f'{field_name}=str(data["{field_name}"])')
    repo.snapshot()
    s.user(f"The import job for {ent.plural.replace('_', ' ')} failed last night around 02:10 UTC. "
           "Can you figure out what went wrong from the logs and fix it if it's a code problem?")
    log_lines = []
    for k in range(39):
        log_lines.append(f"2025-03-14T02:{k // 4:02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z "
                         f"INFO  worker-{rng.randint(1, 4)} import {ent.plural}: batch {k + 1} ok "
                         f"({rng.randint(100, 500)} records, {rng.randint(80, 900)} ms, "
                         f"queue_depth={rng.randint(0, 40)})")
    log_lines.append(f"2025-03-14T02:10:{rng.randint(0, 59):02d}Z ERROR import {ent.plural}: batch failed")
    s.step([("run_bash", {"command": "tail -n 40 logs/import.log"}, "\n".join(log_lines[-40:]))],
           "Let me look at the end of the import log.")
    tb = "\n".join([
        "Traceback (most recent call last):",
        f'  File "/srv/app/src/{repo.package}/jobs.py", line 57, in run_import',
        f"    store = {ent.name}Store.from_json_lines(payload)",
        f'  File "/srv/app/{repo.entity_path}", line {text[:text.index("def from_json_lines")].count(chr(10)) + 9}, in from_json_lines',
        f"    store.add({ent.name}.from_dict(json.loads(line)))",
        f'  File "/srv/app/{repo.entity_path}", line {line_no}, in from_dict',
        f'    {field_name}=str(data["{field_name}"]),',
        f"KeyError: '{field_name}'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        f"{repo.package}.{ent.plural}.{ent.name}Error: line {rng.randint(200, 4000)}: bad "
        f"{_snake(ent.name)} record {{'id': {rng.randint(1000, 9999)}, ...}}: '{field_name}'",
    ])
    s.step([("run_bash", {"command": "grep -n -A 20 'Traceback' logs/import.log | head -n 60"}, tb)])
    s.step([("read_file", {"path": repo.entity_path, "start_line": max(1, line_no - 15), "end_line": line_no + 10})])
    old = f'{field_name}=str(data["{field_name}"]),'
    new = f'{field_name}=str(data.get("{field_name}", "")),'
    s.step([("str_replace", {"path": repo.entity_path, "old_str": old, "new_str": new})],
           f"The upstream export started omitting `{field_name}`; treating it as optional here and "
           "letting validation decide.")
    s.step([("run_tests", {})], s.thought("verify"))
    s.answer(f"The job failed because some records in the upstream export have no `{field_name}` "
             f"key: `{ent.name}.from_dict` indexed it directly (`{repo.entity_path}:{line_no}`), so "
             "the whole batch was rejected. It is now read with a default, and `validate()` still "
             f"reports an empty {field_name} as a problem, so bad rows are rejected individually with "
             "their line number instead of aborting the import. Tests pass. You may want to ask the "
             "upstream team whether the field was dropped on purpose.")


_DEP_UPDATES = {
    "python": ("pyproject.toml", '"aiohttp>=3.9,<4"', '"aiohttp>=3.10.11,<4"', "aiohttp",
               "pip index versions aiohttp",
               "aiohttp (3.11.14)\nAvailable versions: 3.11.14, 3.11.13, 3.11.12, 3.10.11, 3.10.10, 3.9.5"),
    "go": ("go.mod", "golang.org/x/sync v0.", "golang.org/x/sync v0.1", "golang.org/x/sync",
           "go list -m -versions golang.org/x/sync",
           "golang.org/x/sync v0.1.0 v0.2.0 v0.3.0 v0.4.0 v0.5.0 v0.6.0 v0.7.0 v0.8.0 v0.9.0 v0.10.0 v0.11.0 v0.12.0"),
    "typescript": ("package.json", '"pino": "^8.', '"pino": "^9.6.0", "_was": "^8.', "pino",
                   "npm view pino versions --json | tail -n 8",
                   '  "9.4.0",\n  "9.5.0",\n  "9.6.0"\n]'),
}


def _sc_dependency_update(s: Session, repo: Repo, rng: random.Random) -> None:
    path, old_frag, _, dep, cmd, out = _DEP_UPDATES[repo.lang]
    repo.snapshot()
    s.user(f"Security flagged our `{dep}` version. Please upgrade it to the latest release that fits "
           "our constraints, check nothing breaks, and tell me what changed.")
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
    install = {"python": ("pip install -e '.[dev]' -q && pip check", "No broken requirements found."),
               "go": ("go mod tidy && go build ./...", ""),
               "typescript": ("npm install && npx tsc --noEmit",
                              "added 3 packages, changed 2 packages, and audited 412 packages in 4s\n\n"
                              "found 0 vulnerabilities")}[repo.lang]
    s.step([("run_bash", {"command": install[0]}, install[1] or "(no output)")])
    s.step([("run_tests", {})], s.thought("verify"))
    s.answer(f"Upgraded `{dep}` in `{path}` (`{line.strip()}` -> `{new_line.strip()}`). The install "
             "resolved cleanly, the build passes and all tests pass. Worth skimming the upstream "
             "changelog for behaviour changes in code paths our tests don't cover.")


def _sc_ci_failure(s: Session, repo: Repo, rng: random.Random) -> None:
    text = repo.files[repo.util_path]
    if repo.lang == "python":
        stray = "import os"
        rest = text.partition("\n\n")[2]
        imports = [x for x in rest.split("\n\n")[0].splitlines()]
        anchor = imports[0] if imports and text.count(imports[0]) == 1 else None
    else:
        stray, anchor = "", None
    if anchor:
        repo.files[repo.util_path] = text.replace(anchor, f"{stray}\n{anchor}" if stray < anchor
                                                  else f"{anchor}\n{stray}", 1)
        bad_line = _line_of(repo.files[repo.util_path], stray)
        log_tail = (f"Run ruff check .\n{repo.util_path}:{bad_line}:8: F401 [*] `os` imported but unused\n"
                    "Found 1 error.\n[*] 1 fixable with the `--fix` option.\nError: Process completed "
                    "with exit code 1.")
    else:
        log_tail = ("Run npm run lint\n" if repo.lang == "typescript" else "Run go vet ./...\n") + (
            f"{repo.util_path}:1:1: file is not formatted (run the formatter)\nError: Process completed "
            "with exit code 1.")
    repo.snapshot()
    run_id = rng.randint(41_000, 99_000)
    s.user("The CI pipeline on my branch is failing and I don't see why. Can you check and fix it?")
    runs = json.dumps([{"run_id": run_id, "branch": "feat/report-export", "status": "failure",
                        "failed_jobs": ["lint"], "commit": "9c1e2ab"},
                       {"run_id": run_id - rng.randint(3, 40), "branch": "feat/report-export",
                        "status": "success", "failed_jobs": [], "commit": "5f0d7c3"}], indent=1)
    s.step([("list_ci_runs", {"branch": "feat/report-export"}, runs)])
    setup = "\n".join(f"2025-03-14T09:{m:02d}:{rng.randint(0, 59):02d}Z {x}" for m, x in enumerate((
        "Current runner version: '2.319.1'", "Operating System: Ubuntu 22.04.4 LTS",
        "Prepare workflow directory", "Download action repository 'actions/checkout@v4'",
        "Download action repository 'actions/setup-python@v5'", "Complete job name: lint",
        "Syncing repository: example/" + repo.name, "Fetching the repository",
        "Determining the checkout info", "Checking out the ref", "Successfully set up python 3.11.9",
        "Run pip install -e '.[dev]'", "Successfully installed " + " ".join(
            f"pkg{n}-{rng.randint(1, 9)}.{rng.randint(0, 30)}" for n in range(12)))))
    s.step([("get_ci_logs", {"run_id": run_id, "job": "lint"}, setup + "\n" + log_tail)])
    if anchor:
        s.step([("read_file", {"path": repo.util_path, "start_line": 1, "end_line": 20})])
        old, new = _edit_hunk(repo.files[repo.util_path], text)
        s.step([("str_replace", {"path": repo.util_path, "old_str": old, "new_str": new})],
               "Removing the unused import.")
        s.step([("lint", {"paths": [repo.util_path]}, "All checks passed!")])
        s.answer(f"The lint job failed on an unused `import os` in `{repo.util_path}` (F401). I "
                 "removed it; ruff is clean now. Push again and CI should go green.")
    else:
        s.step([("format_code", {"paths": [repo.util_path]}, f"formatted 1 file: {repo.util_path}")])
        s.step([("lint", {"paths": [_src_dir(repo)]}, "no problems found")])
        s.answer(f"CI failed in the lint job because `{repo.util_path}` was not formatted. I ran the "
                 "formatter (whitespace-only changes) and the linter is clean now.")


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
    s.step([("run_bash", {"command": f"mkdir -p data && curl -s '{url}' | jq -c '.items[]' > data/{ent.plural}.jsonl "
                                     f"&& wc -l data/{ent.plural}.jsonl"},
             f"{len(records)} data/{ent.plural}.jsonl")])
    totals = re.findall(r'lines\.append\(f"total (\w+):', module_text)
    counts = {st: sum(r["status"] == st for r in records) for st in ent.statuses}
    report = [f"{ent.plural.replace('_', ' ')}: {len(records)}",
              *(f"  {st:<12} {c:>6}" for st, c in counts.items()),
              *(f"total {f}: {sum(r[f] for r in records):,.2f}" for f in totals)]
    s.step([("run_bash", {"command": f"python -m {repo.package}.{ent.plural} data/{ent.plural}.jsonl"},
             "\n".join(report))])
    s.answer(f"{len(records)} {ent.plural.replace('_', ' ')} were updated since March 1st. By status: "
             + ", ".join(f"{st} {c}" for st, c in counts.items() if c) + ". "
             + " ".join(f"Total {f}: {sum(r[f] for r in records):,.2f}." for f in totals)
             + f" The raw data is in `data/{ent.plural}.jsonl` if you want to dig further.")


def _follow_up(s: Session, repo: Repo, rng: random.Random) -> None:
    """A second request in the same session, as users often add one."""
    choice = rng.randrange(3)
    if choice == 0:
        s.user("Thanks. Please commit this on a new branch and open a pull request.")
        branch = rng.choice(("fix/report-job", "chore/maintenance", "fix/ci-red", "feat/helper"))
        s.step([("create_branch", {"name": branch})])
        s.step([("git_commit", {"message": "Apply requested change\n\nSee the pull request for details."})])
        s.step([("open_pull_request", {"title": "Apply requested change", "body": "Summary of the change and how it was verified."},
                 f"https://git.example.com/{repo.name}/pull/{rng.randint(100, 999)}")])
        s.answer("Done: committed on a new branch and opened a pull request (link above).")
    elif choice == 1:
        s.user("Can you add a line about this to CHANGELOG.md under Unreleased?")
        s.step([("read_file", {"path": "CHANGELOG.md"})])
        s.step([("str_replace", {"path": "CHANGELOG.md", "old_str": "## Unreleased\n",
                                 "new_str": "## Unreleased\n\n- Apply the requested maintenance change\n"})])
        s.answer("Added an entry under Unreleased in CHANGELOG.md.")
    else:
        s.user("Show me the full diff before I review it.")
        diff = s.step([("git_diff", {})])[0]
        s.answer("Here is the change set; " + ("it touches " + str(diff.count("+++ ")) + " file(s)."
                                                if diff != "no changes" else "there are no code changes."))


_SCENARIOS: dict[str, tuple[Callable[[Session, Repo, random.Random], None], tuple[str, ...]]] = {
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
_SECOND_TASKS = ("sql_investigation", "dependency_update", "explore_question", "data_export",
                 "log_debugging", "ci_failure")
_SCENARIO_TOOLS = {
    "sql_investigation": ("list_tables", "describe_table", "sql_query"),
    "data_export": ("http_get", "http_post"),
    "ci_failure": ("list_ci_runs", "get_ci_logs", "lint", "format_code"),
}


def _agentic_session(seed: int, k: int) -> dict[str, Any]:
    rng = _rng(seed, "agentic", k)
    names = list(_SCENARIOS)
    category = names[k % len(names)]
    func, langs = _SCENARIOS[category]
    # Mostly Python repositories, with a steady share of Go and TypeScript ones.
    lang = rng.choices(langs, weights=[{"python": 6, "go": 2, "typescript": 2}[x] for x in langs])[0]
    repo_name = rng.choice([r for r, r_lang in _REPOS if r_lang == lang])
    repo = build_repo(rng, repo_name, lang)
    ws = Workspace(repo, rng)
    s = Session(rng, ws)
    s.messages.append({"role": "system", "content": _agent_system(rng, repo_name, lang)})
    # A third of sessions orient themselves first: longer histories, as in real agent traces.
    long_variant = rng.random() < 0.5
    if long_variant:
        s.user("I'm going to give you a task in this repository; first get familiar with it.")
        _explore(s, repo, rng)
        s.answer("I've read the README, the project configuration and the main modules. Ready.")
    func(s, repo, rng)
    scenarios = [category]
    if rng.random() < 0.35:
        # A second task in the same session: the longest histories come from these.
        second = rng.choice([n for n in _SECOND_TASKS if lang in _SCENARIOS[n][1] and n != category])
        _SCENARIOS[second][0](s, repo, rng)
        scenarios.append(second)
    if rng.random() < 0.45:
        _follow_up(s, repo, rng)
    needed = [*s.used, *(t for sc in scenarios for t in _SCENARIO_TOOLS.get(sc, ()))]
    extra = [t["function"]["name"] for t in TOOLS if t["function"]["name"] not in needed]
    rng.shuffle(extra)
    n_tools = rng.randint(max(8, len(set(needed))), 30)
    keep = set(needed) | set(extra[: max(0, n_tools - len(set(needed)))])
    tools = [t for t in TOOLS if t["function"]["name"] in keep]
    return {
        "id": f"agentic/{category}-{k:03d}",
        "workload": "agentic",
        "category": category,
        "messages": s.messages,
        "tools": tools,
        "targets": s.targets,
        "max_tokens": s.caps,
        "meta": {"language": lang, "repo": repo_name, "tasks": scenarios, "long_variant": long_variant,
                 "source": "project", "license": "project", "generator": GENERATOR, "seed": seed},
    }


def generate_agentic(seed: int = DEFAULT_SEED) -> list[dict[str, Any]]:
    return [_agentic_session(seed, k) for k in range(AGENTIC_SESSIONS)]

# ============================================================================ output


def prompt_text(row: dict[str, Any]) -> str:
    """Everything a server would render from a row: message text, tool-call arguments, tools."""
    parts = [m.get("content") or "" for m in row["messages"]]
    parts += [c["function"]["arguments"] for m in row["messages"] for c in m.get("tool_calls") or ()]
    parts += [json.dumps(row.get("tools") or [])]
    return "\n".join(parts)


def phrase_problem(row: dict[str, Any]) -> str | None:
    """Why a row breaks the marker-phrase rule, or None. The rule: a coding row of a marked
    sub-category has its phrase exactly once, in its final user turn; every other row has none
    (matching is case-insensitive here, stricter than the simulator needs)."""
    text = prompt_text(row).lower()
    own = PHRASES.get(row.get("category", "")) if row.get("workload") == "coding" else None
    for category, phrase in PHRASES.items():
        count = text.count(phrase.lower())
        if phrase == own:
            last_user = next(m for m in reversed(row["messages"]) if m["role"] == "user")
            if count != 1 or phrase.lower() not in last_user["content"].lower():
                return f"{row['id']}: needs {phrase!r} exactly once in its final user turn, has {count}"
        elif count:
            return f"{row['id']}: contains {phrase!r}, the marker of {category}"
    return None


def generate(seed: int = DEFAULT_SEED) -> dict[str, list[dict[str, Any]]]:
    """Both sets as rows; raises ValueError if a row breaks the marker-phrase rule."""
    sets = {"coding": generate_coding(seed), "agentic": generate_agentic(seed)}
    for rows in sets.values():
        for row in rows:
            problem = phrase_problem(row)
            if problem:
                raise ValueError(problem)
    return sets


def render(rows: Sequence[dict[str, Any]]) -> bytes:
    """JSONL bytes: one compact object per line, keys in insertion order, UTF-8."""
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                   for r in rows).encode("utf-8")


def write_sets(out_dir: Path, seed: int = DEFAULT_SEED) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, rows in generate(seed).items():
        path = out_dir / SET_FILES[name]
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_bytes(render(rows))
        tmp.replace(path)
        written[name] = path
    return written


def default_out_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "prompts"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m specbench.promptgen",
        description="Rebuild prompts/coding.jsonl and prompts/agentic.jsonl deterministically.")
    parser.add_argument("--out", type=Path, default=default_out_dir(), help="output folder")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generator seed (default 0)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the files in --out differ from a fresh build")
    args = parser.parse_args(argv)
    if args.check:
        stale = [name for name, rows in generate(args.seed).items()
                 if not (args.out / SET_FILES[name]).is_file()
                 or (args.out / SET_FILES[name]).read_bytes() != render(rows)]
        if stale:
            print(f"prompt sets out of date: {', '.join(stale)}; run `python -m specbench.promptgen"
                  f" --seed {args.seed}` to rebuild them", file=sys.stderr)
            return 1
        print(f"prompt sets in {args.out} are up to date (seed {args.seed})")
        return 0
    for name, path in write_sets(args.out, args.seed).items():
        print(f"wrote {path} ({name})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
