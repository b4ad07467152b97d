"""Python snippets, second half: text, statistics, CSV and settings loading, grouping.

See python_1 for why the Python snippets are in two files."""

# Snippet code is source text kept verbatim; some of its lines are longer than the house limit.
# ruff: noqa: E501
from __future__ import annotations

from tools.promptgen.model import Bug, Snippet

PYTHON_2: tuple[Snippet, ...] = (
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
)
