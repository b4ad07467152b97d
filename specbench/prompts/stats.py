"""What `specbench prompts stats` reports about a set: sizes per request and the category mix."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from specbench.prompts.model import CHARS_PER_TOKEN, PromptSet


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (a value that occurs in the data; no interpolation)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Spread:
    p10: float
    p50: float
    p90: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(percentile(values, 10), percentile(values, 50), percentile(values, 90),
                   max(values) if values else 0.0)


@dataclass(frozen=True)
class PromptSetStats:
    """What `specbench prompts stats` shows: sizes are per request (what the server sees)."""

    name: str
    source: str
    path: str
    sha256: str
    rows: int
    requests: int
    input_chars: Spread
    est_input_tokens: Spread
    max_tokens: Spread
    categories: dict[str, int]  # requests per category
    languages: dict[str, int]  # requests per meta.language ("-" when absent)
    turns: dict[int, int]  # requests per number of user turns sent
    tools: Spread  # tools per request
    with_tools: int  # requests that send tools


def prompt_set_stats(ps: PromptSet) -> PromptSetStats:
    reqs = ps.requests
    chars = [float(r.input_chars) for r in reqs]

    def count(keys: Iterable[Any]) -> dict[Any, int]:
        out: dict[Any, int] = {}
        for key in keys:
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], str(kv[0]))))

    return PromptSetStats(
        name=ps.name, source=ps.source, path=str(ps.path), sha256=ps.sha256, rows=ps.rows,
        requests=len(reqs), input_chars=Spread.of(chars),
        est_input_tokens=Spread.of([c / CHARS_PER_TOKEN for c in chars]),
        max_tokens=Spread.of([float(r.max_tokens) for r in reqs]),
        categories=count(r.category for r in reqs),
        languages=count(str(r.meta.get("language", "-")) for r in reqs),
        turns=dict(sorted(count(r.turns for r in reqs).items())),
        tools=Spread.of([float(len(r.tools or ())) for r in reqs]),
        with_tools=sum(1 for r in reqs if r.tools),
    )
