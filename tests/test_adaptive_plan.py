"""The adaptive plan (`--plan adaptive`): where it places levels (the sweep: tests/e2e)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specbench.errors import ConfigError
from specbench.run.adaptive import Crossing, coarse_levels, crossings, next_levels

GRID = (1, 2, 4, 8, 16, 32, 64, 128, 250)


def test_coarse_grid_keeps_the_ends_and_every_third_level() -> None:
    assert coarse_levels(GRID) == [1, 8, 64, 250]
    assert coarse_levels((4, 1, 2)) == [1, 4]
    assert coarse_levels((16,)) == [16]


def _crossing_on(measured: list[int], crossing_c: float) -> Crossing:
    """What an analysis of a ratio curve (crossing_c / c) ** 0.5 would say from `measured`:
    the crossing interpolated in log c between the measured levels around it, +-5%."""
    ratio = {c: (crossing_c / c) ** 0.5 for c in measured}
    lo = max(c for c in measured if ratio[c] >= 1)
    hi = min(c for c in measured if ratio[c] < 1)
    t = math.log(ratio[lo]) / (math.log(ratio[lo]) - math.log(ratio[hi]))
    estimate = math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo)))
    return Crossing("coding", "c*", estimate, estimate * 0.95, estimate * 1.05)


@pytest.mark.parametrize("crossing_c", [3.0, 11.0, 40.0, 90.0, 200.0])
def test_a_crossing_at_a_known_level_ends_bracketed_by_adjacent_grid_levels(
    crossing_c: float,
) -> None:
    measured = coarse_levels(GRID)
    rounds = 0
    while levels := next_levels(GRID, measured, _crossing_on(measured, crossing_c)):
        assert not set(levels) & set(measured) and set(levels) <= set(GRID)
        measured = sorted({*measured, *levels})
        rounds += 1
    below = max(c for c in GRID if c <= crossing_c)
    above = min(c for c in GRID if c > crossing_c)
    assert below in measured and above in measured
    assert rounds == 1  # the coarse bracket filled at once: one more launch per server
    assert len(measured) <= len(coarse_levels(GRID)) + 2 < len(GRID)


def test_a_wide_interval_brackets_the_interval_not_only_the_estimate() -> None:
    wide = Crossing("agentic", "T", 40.0, 20.0, 45.0)  # the estimate between 32 and 64
    assert next_levels(GRID, [1, 8, 32, 64, 250], wide) == [16]
    narrow = Crossing("agentic", "T", 40.0, 34.0, 45.0)
    assert next_levels(GRID, [1, 8, 32, 64, 250], narrow) == []
    beyond = Crossing("coding", "T", 240.0, 200.0, 260.0)  # the interval past the top level
    assert next_levels(GRID, [1, 8, 64, 250], beyond) == [128]


def test_crossings_read_both_decisions_and_skip_sets_without_one() -> None:
    analysis = {"prompt_sets": {
        "coding": {"plain_server": {"outcome": "crossover", "crossover_concurrency": 119.4,
                                    "interval": [109.9, 128.7]},
                   "one_server": {"outcome": "crossover", "crossover_concurrency": 217.7,
                                  "interval": [195.0, 250.0]}},
        "agentic": {"plain_server": {"outcome": "never", "crossover_concurrency": None}},
    }}
    found = crossings(analysis, ["coding", "agentic"])
    assert [(c.prompt_set, c.decision, c.estimate) for c in found] == [
        ("coding", "c*", 119.4), ("coding", "T", 217.7)]
    assert found[0].low == 109.9 and found[0].high == 128.7


def test_adaptive_plan_refuses_what_it_cannot_run(tmp_path: Path) -> None:
    from specbench import config

    with pytest.raises(ConfigError, match="drop --gpus, --executor ray and --only-config"):
        config.resolve({"plan": "adaptive", "gpus": (0, 1)})
    with pytest.raises(ConfigError, match="add --plan adaptive"):
        config.resolve({"budget_gpu_min": 5.0})


def test_dry_run_shows_the_coarse_grid_and_the_rule(tmp_path: Path) -> None:
    from tests.harness import run_cli

    proc = run_cli(["sweep", "--plan", "adaptive", "--modes", "baseline,eagle3", "--dry-run"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "concurrency 1,8,64,250 x 1 repeat(s)" in out
    assert "adaptive plan: the coarse levels above first" in out
    assert "16 points in all" in out
