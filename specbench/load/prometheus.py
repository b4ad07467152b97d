"""The server's Prometheus `/metrics` page, as the load generator reads it.

Counters are read as deltas across the window; SGLang's load gauges (running and queued
requests, KV token usage) are snapshots it refreshes only at prefill and every
`--decode-log-interval` decode steps, so they are sampled several times through the window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# SGLang counts a request's tokens as it finishes.
GEN_TOKENS = "sglang:generation_tokens_total"
GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
          "sglang:num_retracted_reqs", "sglang:spec_accept_length")


@dataclass(frozen=True)
class MetricsSnapshot:
    """One scrape of the server's Prometheus ``/metrics``.

    ``values`` maps each ``sglang:*`` sample name to its value summed over label sets
    (histogram buckets left out; ``_sum``/``_count`` kept). ``t`` is the monotonic time half
    way through the scrape.
    """

    t: float
    values: dict[str, float]


def parse_prometheus(text: str) -> dict[str, float]:
    """``sglang:*`` samples of a Prometheus text page, summed over label sets."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("sglang:"):
            continue
        m = _SAMPLE_RE.match(line)
        if m is None:
            continue
        name = m.group(1)
        if name.endswith(("_bucket", "_created")):
            continue
        try:
            value = float(m.group(2))
        except ValueError:
            continue
        values[name] = values.get(name, 0.0) + value
    return values


_SAMPLE_RE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{.*\})?\s+(\S+)(?:\s+\S+)?\s*$")
