"""The adaptive plan (`--plan adaptive`): measure only where a decision is, by bisection.

Most of the default grid lies far from any crossover, and on a GPU every point costs minutes;
the points at high concurrency cost the most (the warmup waits for c first requests). Each
decision compares two servers (c*: EAGLE-3 against the baseline; T: EAGLE-3 against its
zero-step path), so the plan bisects each one on its own pair:

1. the first decision's two servers measure the grid's middle level (:func:`first_levels`);
2. after each analysis, each decision whose crossing is not yet bracketed by adjacent grid
   levels gets one more level, the middle of its bracket in grid steps (:func:`next_level`),
   measured on its two servers only; a curve that does not cross in what was measured is
   bracketed by the edge of the grid;
3. T waits for c*'s bracket and starts above it: the zero-step path is the plain model plus a
   draft it does not run, so EAGLE-3 beats it wherever EAGLE-3 beats the plain server (on the
   H200 the zero-step path made 0.16-0.53 of the plain server's tok/s). That level only
   steers the search: T's bracket ends on levels both its servers measured;
4. a bracketed crossing whose 95% interval reaches a bracket level gets the grid level beyond
   it, so the interval is not cut at the edge of what its pair measured;
5. the rounds end when nothing is left to place or `--budget-gpu-min` is spent. The server
   that measured last in a round stays up and measures first in the next (on a GPU a launch
   costs more than a point).

Every point has the dense grid's window: a longer one at the levels a crossing is read from
measured other prompts and moved c* (lab/notes/benchmarks.md). The levels placed are recorded per
server and prompt set in the manifest (`refined`), so `--resume` measures the same ones. The dynamic
and tuned servers then follow from the thresholds as in a dense run, at every level placed
for their prompt set.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from specbench.configurations import DECISION_PAIRS
from specbench.results.analysis import Analysis, PromptSetAnalysis

# A safety stop for rounds: bisection of a 9-level grid needs 4, T after c* about 7; a point
# that keeps failing would otherwise be placed again every round.
MAX_ROUNDS = 10


@dataclass(frozen=True)
class Decision:
    """One decision the plan bisects: its name, where the analysis keeps it, its two servers."""

    name: str
    field: Literal["plain_server", "one_server"]
    servers: tuple[str, str]


C_STAR = Decision("c*", "plain_server", DECISION_PAIRS["c*"])
T = Decision("T", "one_server", DECISION_PAIRS["T"])
DECISIONS = (C_STAR, T)


def start_level(grid: Sequence[int]) -> int:
    """The grid's middle level (16 of the default 1..250): the first bisection step."""
    levels = sorted(set(grid))
    return levels[len(levels) // 2]


def refined_key(config_name: str, prompt_set: str) -> str:
    """The manifest's `refined` key for one server's levels in one prompt set."""
    return f"{config_name}/{prompt_set}"


def _add(levels: dict[str, list[int]], server: str, prompt_set: str, level: int) -> None:
    key = refined_key(server, prompt_set)
    levels[key] = sorted({*levels.get(key, []), level})


def first_levels(refined: dict[str, list[int]], grid: Sequence[int], names: Iterable[str],
                 servers: Iterable[str]) -> None:
    """Place the start level on the first decision's servers (c*, or T without a baseline;
    every server when no decision's pair is in the sweep), unless a round placed levels
    already (a resumed run)."""
    if refined:
        return
    present = list(servers)
    pair = next((d.servers for d in DECISIONS if set(d.servers) <= set(present)), present)
    for name in names:
        for server in pair:
            _add(refined, server, name, start_level(grid))


def placed_levels(refined: Mapping[str, list[int]], config_name: str,
                  prompt_set: str) -> list[int]:
    """The levels the plan measures `config_name` at for `prompt_set`; a server no decision
    compares (dynamic, tuned) gets every level placed for the set, so its efficiency has both
    static curves at each."""
    paired = {s for d in DECISIONS for s in d.servers}
    if config_name in paired:
        return sorted(refined.get(refined_key(config_name, prompt_set), []))
    return sorted({c for s in paired for c in refined.get(refined_key(s, prompt_set), [])})


def estimated_points(grid: Sequence[int], n_sets: int, servers: Iterable[str]) -> int:
    """About how many points a run places, for the dry run: bisection takes about log2 of the
    grid's levels per decision, each on its two servers; a server no decision compares is
    measured at the levels placed and around its threshold (the default grid's 9 levels: 24
    here, 19 measured over 10 seeds of benchmarks/adaptive_plan.py)."""
    depth = max(1, math.ceil(math.log2(len(set(grid)))))
    present = set(servers)
    paired = {s for d in DECISIONS if set(d.servers) <= present for s in d.servers}
    return n_sets * (len(paired) * depth + len(present - paired) * (depth + 1))


def next_level(grid: Sequence[int], shared: Iterable[int], outcome: str | None,
               crossing_c: float | None, interval: Sequence[float] | None = None,
               floor: int | None = None) -> int | None:
    """The level to measure next for one decision, or None when it needs no more.

    `shared` are the levels both its servers measured, `outcome` and `crossing_c` what the
    analysis made of them. The bracket is the two measured levels around the crossing, or the
    measured edge and the grid's edge when the curve does not cross (EAGLE-3 ahead
    everywhere: the crossing may be above; behind everywhere: below); with nothing measured
    yet, the whole grid. `floor` is a level the crossing is known to lie above without
    measuring it there (T above c*'s bracket): it narrows the bracket for the search, and is
    measured itself once it is the bracket's last open side. The next level is the bracket's
    middle in grid steps. Once adjacent measured levels bracket the crossing, a 95%
    `interval` reaching one of them gets that side's next grid level too: bootstrap draws that
    cross beyond it are otherwise lost or spread over a wide segment, and the interval comes
    out cut at the measured edge. None once nothing is left to place.
    """
    levels = sorted(set(grid))
    done = sorted(levels.index(c) for c in set(shared) if c in levels)
    if not done:
        low, high = -1, len(levels)
    elif outcome == "crossover" and crossing_c is not None:
        low = max((i for i in done if levels[i] <= crossing_c), default=-1)
        high = min((i for i in done if levels[i] >= crossing_c), default=len(levels))
    elif outcome == "eagle3_always_wins":
        low, high = done[-1], len(levels)
    elif outcome == "eagle3_never_wins":
        low, high = -1, done[0]
    else:
        return None
    hinted = floor is not None and floor in levels and low < levels.index(floor) < high
    if floor is not None and hinted:
        low = levels.index(floor)
    if high - low > 1:
        return levels[(low + high) // 2]
    if hinted:
        return levels[low]
    if not done or outcome != "crossover" or not interval:
        return None
    beyond = []
    if low >= 1 and interval[0] <= levels[low]:
        beyond.append(low - 1)
    if high + 1 < len(levels) and interval[1] >= levels[high]:
        beyond.append(high + 1)
    return next((levels[i] for i in beyond if i not in done), None)


def _reading(entry: PromptSetAnalysis, decision: Decision
             ) -> tuple[str | None, float | None, list[float] | None]:
    found = entry.get(decision.field) or {}
    # The draws' interval: a chord's bend is narrowed by the levels bisection places anyway.
    interval = found.get("sampling_interval") or found.get("interval")
    return found.get("outcome"), found.get("crossover_concurrency"), interval


def _winning_level(shared: Iterable[int], outcome: str | None,
                   crossing_c: float | None) -> int | None:
    """The highest level both servers measured where EAGLE-3 won (None: none known)."""
    if outcome == "crossover" and crossing_c is not None:
        return max((c for c in shared if c <= crossing_c), default=None)
    if outcome == "eagle3_always_wins":
        return max(shared, default=None)
    return None


def place(analysis: Analysis, refined: dict[str, list[int]], grid: Sequence[int],
          names: Iterable[str], servers: Iterable[str]) -> list[str]:
    """One round: add each decision's next level to both its servers' levels in `refined`
    (decisions whose servers are not all in `servers` are skipped; T waits while c* still
    places levels); returns what was placed, in words, empty when all are bracketed."""
    present = set(servers)
    placed = []
    for name in names:
        entry = analysis.get("prompt_sets", {}).get(name) or {}
        floor: int | None = None  # a level where EAGLE-3 beat the plain server
        for decision in DECISIONS:
            if not set(decision.servers) <= present:
                continue
            shared = set.intersection(*(set(placed_levels(refined, s, name))
                                        for s in decision.servers))
            outcome, crossing_c, interval = _reading(entry, decision)
            level = next_level(grid, shared, outcome, crossing_c, interval,
                               floor if decision is T else None)
            if level is not None:
                for server in decision.servers:
                    _add(refined, server, name, level)
                at = f" {crossing_c:.3g}" if crossing_c is not None else ""
                placed.append(f"{name} {decision.name} c={level} ({outcome}{at})")
            if decision is C_STAR:
                if level is not None:
                    break  # T waits for c*'s bracket
                floor = _winning_level(shared, outcome, crossing_c)
    return placed

