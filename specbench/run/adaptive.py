"""The adaptive plan (`--plan adaptive`): measure a coarse grid, then only where a decision is.

Most of the default grid lies far from any crossover, and on a GPU every point costs minutes.
The plan measures the static servers on :func:`coarse_levels` of the grid first. Then, round by
round, each decision that crossed 1 (EAGLE-3 over the baseline: c*; EAGLE-3 over its zero-step
path: T) gets one more grid level inside the measured bracket around its 95% interval
(:func:`next_level`), measured on every static server, until each crossing is bracketed by
adjacent grid levels (the dense grid's own resolution) or `--budget-gpu-min` is spent. The
dynamic and tuned servers then follow from the thresholds as in a dense run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specbench.results.manifest import gpu_time

if TYPE_CHECKING:
    from specbench.configurations import ServerConfiguration
    from specbench.run.progress import SweepProgress
    from specbench.run.sweep import Sweep

# Every third level of the grid, plus its top: 1, 8, 64, 250 of the default x2 grid.
COARSE_STRIDE = 3
# Rounds of placement at most: each round relaunches the static servers.
MAX_ROUNDS = 4
# The decisions the plan refines: (analysis field, name shown).
DECISIONS = (("plain_server", "c*"), ("one_server", "T"))


def coarse_levels(grid: Sequence[int]) -> list[int]:
    """The grid's first level, every COARSE_STRIDE-th after it, and its top."""
    levels = sorted(set(grid))
    return sorted({*levels[::COARSE_STRIDE], levels[-1]})


@dataclass(frozen=True)
class Crossing:
    """One decision's crossing of ratio 1, in concurrency, from a run's analysis."""

    prompt_set: str
    decision: str  # "c*" or "T"
    estimate: float
    low: float
    high: float


def crossings(analysis: Mapping[str, Any], names: Iterable[str]) -> list[Crossing]:
    """The crossings the analysis found for the named prompt sets (sets without one: none)."""
    found = []
    for name in names:
        entry = analysis.get("prompt_sets", {}).get(name) or {}
        for field, shown in DECISIONS:
            decision = entry.get(field) or {}
            estimate = decision.get("crossover_concurrency")
            interval = decision.get("interval") or (estimate, estimate)
            if decision.get("outcome") != "crossover" or estimate is None:
                continue
            low, high = (float(v) if v is not None else float(estimate) for v in interval)
            found.append(Crossing(name, shown, float(estimate), low, high))
    return found


def next_levels(grid: Sequence[int], measured: Iterable[int], crossing: Crossing) -> list[int]:
    """The grid levels to measure next for a crossing: [] when none is left to place.

    The bracket is the measured levels just outside the crossing's 95% interval (or its
    estimate); every grid level not yet measured inside it is next, all in one round, since on
    a GPU each round costs a launch of every static server. [] once adjacent measured levels
    bracket the interval.
    """
    done = sorted(set(measured))
    if not done:
        return []
    low = min(crossing.low, crossing.estimate)
    high = max(crossing.high, crossing.estimate)
    below = [c for c in done if c <= low]
    above = [c for c in done if c >= high]
    left = below[-1] if below else done[0]
    right = above[0] if above else done[-1]
    return [c for c in sorted(set(grid)) if left < c < right and c not in done]


def refine(sweep: Sweep, configs: list[ServerConfiguration], progress: SweepProgress) -> None:
    """The adaptive plan's rounds after the coarse grid (see the module docstring): each round
    places the levels of every crossing not yet bracketed by adjacent grid levels, records them
    in the manifest (so `--resume` measures the same levels) and measures them on every static
    server."""
    cfg, manifest = sweep.cfg, sweep.manifest
    grid = cfg.concurrency
    for _ in range(MAX_ROUNDS):
        spent_min = sum(t.total_gpu_s for t in gpu_time(manifest).values()) / 60
        if cfg.budget_gpu_min is not None and spent_min >= cfg.budget_gpu_min:
            sweep.console.print(f"adaptive plan: {spent_min:.1f} GPU-min spent, the budget is "
                                f"{cfg.budget_gpu_min:g}; no more levels placed")
            return
        placed: list[str] = []
        for crossing in crossings(sweep.analysis(), sweep.sets):
            extra = manifest.refined.setdefault(crossing.prompt_set, [])
            measured = {*coarse_levels(grid), *extra}
            levels = next_levels(grid, measured, crossing)
            if not levels:
                continue
            extra.extend(levels)
            extra.sort()
            placed.append(f"{crossing.prompt_set} c={','.join(map(str, levels))} "
                          f"({crossing.decision} {crossing.estimate:.3g}, "
                          f"95% {crossing.low:.3g}-{crossing.high:.3g})")
        if not placed:
            return
        manifest.save(sweep.run_dir)
        sweep.console.print("adaptive plan: next levels " + "; ".join(placed))
        sweep.run_configurations(configs, progress)
