"""A mixed workload: requests of several prompt sets interleaved by weight (`--mix`).

A server cannot tell workloads apart by batch size, so one threshold for a mixed deployment
has to be measured on the mix itself, not derived from the sets' own thresholds. The mix is
a prompt set like any other (its points land under `mix`); its requests come from each set's
own seeded order, interleaved by smooth weighted round robin so that every stretch of the
send order holds the sets in their weights' proportions.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from specbench.prompts.model import PromptRequest, PromptSet, PromptSetError, ordered_requests

MIX_NAME = "mix"


def mix_prompt_set(
    parts: dict[str, PromptSet], weights: dict[str, float], seed: int
) -> PromptSet:
    """The `mix` set of `parts` (by name) with `weights`, in the send order for `seed`."""
    if not weights or any(w <= 0 for w in weights.values()):
        raise PromptSetError("--mix needs positive weights; use e.g. --mix coding=0.5,agentic=0.5")
    orders = {name: ordered_requests(parts[name], seed) for name in weights}
    total = sum(weights.values())
    share = {name: w / total for name, w in weights.items()}
    n_requests = sum(len(order) for order in orders.values())
    credit = dict.fromkeys(weights, 0.0)
    taken = dict.fromkeys(weights, 0)
    requests: list[PromptRequest] = []
    for _ in range(n_requests):
        for name in credit:
            credit[name] += share[name]
        name = max(credit, key=lambda n: credit[n])
        credit[name] -= 1.0
        order = orders[name]
        requests.append(order[taken[name] % len(order)])
        taken[name] += 1
    digest = hashlib.sha256()
    for name in sorted(weights):
        digest.update(f"{name}={weights[name]!r}:{parts[name].sha256};".encode())
    digest.update(f"seed={seed}".encode())
    return PromptSet(
        name=MIX_NAME,
        path=Path(MIX_NAME),
        sha256=digest.hexdigest(),
        rows=sum(parts[name].rows for name in weights),
        requests=tuple(requests),
        source="mix",
    )
