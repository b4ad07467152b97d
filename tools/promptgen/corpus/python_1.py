"""Python snippets, first half: containers, rate limiting, retries, graphs, parsing.

The Python part of the corpus is split in two files only to keep each short; SNIPPETS
lists PYTHON_1 before PYTHON_2, and that order is part of what the seeds draw from."""

# Snippet code is source text kept verbatim; some of its lines are longer than the house limit.
# ruff: noqa: E501
from __future__ import annotations

from tools.promptgen.model import Bug, Snippet

PYTHON_1: tuple[Snippet, ...] = (
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
)
