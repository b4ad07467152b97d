"""Across context buckets: the threshold surface (concurrency x context) of a bucketed run.

A run with `--context-lengths` measures each prompt set once per bucket, as ``set@bucket``; each
of those is analysed like any prompt set. This section puts a base set's buckets side by side,
in rising context order: both decisions with their intervals, the tax and E per bucket, and the
two ratio grids the surface figure shows (EAGLE-3 over its zero-step path, and over the
baseline, per bucket and level). Nothing here is computed anew: every value is the bucket's own
analysis, so the surface and the per-set sections cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping

from specbench.prompts.context import ContextBucket, parse_context_lengths, split_bucket
from specbench.results.analysis import (
    BucketBounds,
    ContextSurface,
    Decision,
    PlainServer,
    PromptSetAnalysis,
    SurfaceBucket,
    SurfaceDecision,
)


def _decision(d: Decision | PlainServer | None) -> SurfaceDecision:
    if d is None:
        d = {}
    return {"outcome": d.get("outcome"), "crossover_concurrency": d.get("crossover_concurrency"),
            "interval": d.get("interval"), "threshold_batch_size": d.get("threshold_batch_size")}


def _grid(rows: list[dict[str, float]], levels: list[int]) -> list[list[float | None]]:
    return [[row.get(str(c)) for c in levels] for row in rows]


def _bucket_entry(bucket: ContextBucket, found: PromptSetAnalysis) -> SurfaceBucket:
    one = found.get("one_server") or {}
    plain = found.get("plain_server") or {}
    return {
        "bucket": bucket.name, "low_tokens": bucket.low_tokens, "high_tokens": bucket.high_tokens,
        "range": bucket.range_text, "prompt_tokens": found.get("prompt_tokens"),
        "one_server": _decision(one), "plain_server": _decision(plain),
        "tax": plain.get("tax"), "efficiency_min": one.get("efficiency_min"),
    }


def bucket_of(name: str, bucket_names: tuple[str, ...]) -> BucketBounds | None:
    """A bucketed set's bucket (name, token bounds, range text); None for a set without one."""
    _, bucket = split_bucket(name)
    for b in parse_context_lengths(bucket_names):
        if b.name == bucket:
            return {"bucket": b.name, "low_tokens": b.low_tokens, "high_tokens": b.high_tokens,
                    "range": b.range_text}
    return None


def context_surface(sets: Mapping[str, PromptSetAnalysis],
                    bucket_names: tuple[str, ...]) -> dict[str, ContextSurface] | None:
    """Per base set: its measured buckets and ratio grids (analysis.json's `context_surface`);
    None for a run without buckets."""
    if not bucket_names:
        return None
    buckets = {b.name: b for b in parse_context_lengths(bucket_names)}
    by_base: dict[str, list[tuple[ContextBucket, PromptSetAnalysis]]] = {}
    for name, found in sets.items():
        base, bucket = split_bucket(name)
        if bucket in buckets:
            by_base.setdefault(base, []).append((buckets[bucket], found))
    out: dict[str, ContextSurface] = {}
    for base, entries in by_base.items():
        entries.sort(key=lambda e: e[0].high_tokens)
        levels = sorted({int(c) for _, f in entries
                         for ratios in (f.get("ratio_by_concurrency"),
                                        (f.get("one_server") or {}).get("ratio_by_concurrency"))
                         for c in ratios or {}})
        out[base] = {
            "levels": levels,
            "buckets": [_bucket_entry(b, f) for b, f in entries],
            "over_zero_step": _grid([(f.get("one_server") or {}).get("ratio_by_concurrency")
                                     or {} for _, f in entries], levels),
            "over_baseline": _grid([f.get("ratio_by_concurrency") or {} for _, f in entries],
                                   levels),
        }
    return out or None
