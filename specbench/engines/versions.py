"""What differs between the SGLang releases specbench supports (0.5.14 to 0.5.23): one table.

Every version difference the client acts on is a column here, read from the released wheels'
own code (`sglang/srt/entrypoints/http_server.py`, `.../openai/protocol.py`,
`.../speculative/adaptive_spec_params.py`), so no branch elsewhere compares version numbers:

| since  | `/ready` | spec counts in OpenAI streams | built-in adaptive slot 1 |
|--------|----------|-------------------------------|--------------------------|
| 0.5.14 | no (poll `/health`) | no (`/metrics` counters only) | [1, 3, 7]       |
| 0.5.19 | no       | yes (`return_spec_tokens_details`) | [1, 3, 7]           |
| 0.5.20 | yes      | yes                           | [1, 3, 5, 7]             |

0.5.14 is the first release with steps 0 (what the zero-step and dynamic servers switch to);
`--speculative-adaptive` itself arrived in 0.5.11 and batch-size keys in 0.5.13.
"""

from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_FROM = (0, 5, 14)
# The steps of bare --speculative-adaptive's slots from batch size 8 on ([0, 1, 3], [0, 1], [0]):
# the same in every supported release. The simulator keeps its own copy of SGLang's table
# (specbench/sim/adaptive.py), read from the same wheels, so the two are checked, not shared.
DEFAULT_UPPER_SLOTS_STEPS = (0, 1, 3)


@dataclass(frozen=True)
class Release:
    """The behaviour of SGLang releases from `since` on (until the next row)."""

    since: tuple[int, int, int]
    ready_route: str  # the cheap readiness probe; `/health` generates a token when up
    stream_spec_counts: bool  # `sglext.spec_tokens_details` on request
    default_slot1_steps: tuple[int, ...]  # bare --speculative-adaptive, batch size 1..7


RELEASES: tuple[Release, ...] = (
    Release((0, 5, 14), "/health", False, (1, 3, 7)),
    Release((0, 5, 19), "/health", True, (1, 3, 7)),
    Release((0, 5, 20), "/ready", True, (1, 3, 5, 7)),
)
NEWEST = RELEASES[-1]


def release_tuple(version: str) -> tuple[int, int, int]:
    """`0.5.17`, `0.5.17.post1`, `0.5.18rc0` -> (0, 5, 17) / (0, 5, 18); missing parts are 0."""
    numbers = []
    for part in version.split(".")[:3]:
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        numbers.append(int(digits) if digits else 0)
    numbers += [0] * (3 - len(numbers))
    return numbers[0], numbers[1], numbers[2]


def release(version: str | None) -> Release:
    """The table row for `version`; an unknown version (None) is taken as the newest."""
    if version is None:
        return NEWEST
    found = release_tuple(version)
    rows = [r for r in RELEASES if r.since <= found]
    return rows[-1] if rows else RELEASES[0]


def dotted(numbers: tuple[int, ...]) -> str:
    return ".".join(map(str, numbers))
