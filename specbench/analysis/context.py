"""The prompt lengths a run's traffic carried, per prompt set: the context its thresholds hold for.

A crossover moves with context length (the verify and the decode read each request's KV cache),
so a threshold is stated with the prompt tokens of the requests that measured it: their p50 and
p90 as the server counted them (`prompt_tokens` of each request row), over every point of the
set. Runs without per-request rows (a stored CI reference) have none.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.results import Run
from specbench.results.analysis import PromptSetAnalysis, PromptTokens
from specbench.results.points import measured_keys, point_path


def prompt_tokens(run: Run, prompt_set: str) -> PromptTokens | None:
    """p50, p90, min and max prompt tokens over the set's requests, or None without rows."""
    found = []
    for key in sorted(measured_keys(run.path), key=lambda k: k.label):
        if key.prompt_set != prompt_set:
            continue
        try:
            column = pd.read_parquet(point_path(run.path, key), columns=["prompt_tokens"])
        except (OSError, ValueError, KeyError):
            continue  # no per-request rows, or a format without the column
        found.append(pd.to_numeric(column["prompt_tokens"], errors="coerce").to_numpy(float))
    if not found:
        return None
    tokens = np.concatenate(found)
    tokens = tokens[np.isfinite(tokens) & (tokens > 0)]
    if tokens.size == 0:
        return None
    return {"p50": int(np.percentile(tokens, 50)), "p90": int(np.percentile(tokens, 90)),
            "min": int(tokens.min()), "max": int(tokens.max()), "n_requests": int(tokens.size)}


def phrase(spread: PromptTokens | None) -> str:
    """"prompts p50 908, p90 1,640 tokens" for a sentence; empty without a spread."""
    if not spread:
        return ""
    return f"prompts p50 {spread['p50']:,}, p90 {spread['p90']:,} tokens"


def context_text(name: str, entry: PromptSetAnalysis) -> str:
    """Which traffic a set's threshold holds for: its context bucket (a bucketed run) and the
    prompt lengths that measured it; the line `threshold --write-adaptive-config` prints and
    writes into the file."""
    spread = entry.get("prompt_tokens")
    bucket = entry.get("context_bucket")
    where = f"it holds for traffic like the {name} set's"
    if bucket:
        where += f": {bucket['range']}"
    if not spread:
        return (f"{where}; the run keeps no per-request rows for {name}, so the prompt lengths "
                "that measured it are unknown")
    return (f"{where}, measured with {phrase(spread)} (from {spread['min']:,} to "
            f"{spread['max']:,})")
