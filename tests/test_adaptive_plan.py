"""The adaptive plan (`--plan adaptive`): where it places levels (the sweep: tests/e2e)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specbench.errors import ConfigError
from specbench.run.adaptive import next_level, place, placed_levels, start_level

GRID = (1, 2, 4, 8, 16, 32, 64, 128, 250)


def test_bisection_starts_at_the_middle_level_of_the_grid() -> None:
    assert start_level(GRID) == 16
    assert start_level((4, 1, 2)) == 2
    assert start_level((16,)) == 16


def _read(measured: list[int], crossing_c: float) -> tuple[str, float | None]:
    """What an analysis of the ratio curve (crossing_c / c) ** 0.5 says from `measured`: the
    crossing interpolated in log c between the measured levels around it, or no crossing."""
    ratio = {c: (crossing_c / c) ** 0.5 for c in measured}
    if all(r >= 1 for r in ratio.values()):
        return "eagle3_always_wins", None
    if all(r < 1 for r in ratio.values()):
        return "eagle3_never_wins", None
    lo = max(c for c in measured if ratio[c] >= 1)
    hi = min(c for c in measured if ratio[c] < 1)
    t = math.log(ratio[lo]) / (math.log(ratio[lo]) - math.log(ratio[hi]))
    return "crossover", math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo)))


@pytest.mark.parametrize("crossing_c", [0.5, 1.5, 3.0, 11.0, 40.0, 90.0, 200.0, 400.0])
def test_a_crossing_at_a_known_level_ends_bracketed_by_adjacent_grid_levels(
    crossing_c: float,
) -> None:
    measured = [start_level(GRID)]
    while (level := next_level(GRID, measured, *_read(measured, crossing_c))) is not None:
        assert level in GRID and level not in measured
        measured = sorted({*measured, level})
    below = [c for c in GRID if c <= crossing_c]
    above = [c for c in GRID if c > crossing_c]
    # Beyond the grid's edge, the edge level says so (EAGLE-3 ahead or behind everywhere).
    assert (not below or below[-1] in measured) and (not above or above[0] in measured)
    assert len(measured) <= math.ceil(math.log2(len(GRID))) + 1 < len(GRID)


def test_an_interval_reaching_a_bracket_level_gets_the_level_beyond_it() -> None:
    # Cut at 64, the top its pair measured: the draws crossing above 64 need 128.
    assert next_level(GRID, [16, 32, 64], "crossover", 62.0, [57.0, 64.0]) == 128
    # Reaching below 64 with 32 unmeasured: those draws would spread over 16..64.
    assert next_level(GRID, [16, 64, 128], "crossover", 76.0, [61.0, 85.0]) == 32
    assert next_level(GRID, [16, 64, 128], "crossover", 76.0, [66.0, 85.0]) is None
    assert next_level(GRID, [16, 32, 64, 128], "crossover", 62.0, [31.0, 64.0]) is None
    assert next_level(GRID, [16, 128, 250], "crossover", 230.0, [200.0, 250.0]) is None


def test_no_level_for_a_decision_without_a_reading() -> None:
    assert next_level(GRID, [], "crossover", 40.0) is None
    assert next_level(GRID, [16], None, None) is None  # e.g. no zero-step curve


def _analysis(**decisions: tuple[str, float | None]) -> dict[str, object]:
    fields = {"c_star": "plain_server", "t": "one_server"}
    return {"prompt_sets": {"coding": {
        fields[k]: {"outcome": outcome, "crossover_concurrency": c}
        for k, (outcome, c) in decisions.items()}}}


def test_each_decision_places_its_level_on_its_own_two_servers() -> None:
    refined: dict[str, list[int]] = {}
    servers = ["baseline", "eagle3", "zero-step", "dynamic"]
    placed = place(_analysis(c_star=("crossover", 20.0), t=("eagle3_always_wins", None)),
                   refined, GRID, ["coding"], servers)
    assert len(placed) == 2
    # c*: measured only at 16 (crossing above it, unbracketed up to the top): bisect 16..250.
    assert refined == {"eagle3/coding": [64], "baseline/coding": [64],
                       "zero-step/coding": [64]}
    refined = {"eagle3/coding": [32], "baseline/coding": [32], "zero-step/coding": [128]}
    place(_analysis(c_star=("crossover", 20.0), t=("eagle3_always_wins", None)),
          refined, GRID, ["coding"], servers)
    assert refined["baseline/coding"] == [32]  # 16 and 32 bracket c* = 20: nothing more
    assert refined["zero-step/coding"] == [64, 128]  # T: the pair shares only 16 so far
    assert refined["eagle3/coding"] == [32, 64]
    # A server no decision compares is measured wherever either pair was.
    assert placed_levels(refined, GRID, "dynamic", "coding") == [16, 32, 64, 128]
    assert placed_levels(refined, GRID, "baseline", "coding") == [16, 32]


def test_a_decision_whose_servers_are_not_in_the_sweep_is_left_alone() -> None:
    refined: dict[str, list[int]] = {}
    place(_analysis(c_star=("eagle3_always_wins", None), t=("eagle3_always_wins", None)),
          refined, GRID, ["coding"], ["baseline", "eagle3"])
    assert refined == {"eagle3/coding": [64], "baseline/coding": [64]}


def test_adaptive_plan_refuses_what_it_cannot_run() -> None:
    from specbench import config

    with pytest.raises(ConfigError, match="drop --gpus, --executor ray and --only-config"):
        config.resolve({"plan": "adaptive", "gpus": (0, 1)})
    with pytest.raises(ConfigError, match="add --plan adaptive"):
        config.resolve({"budget_gpu_min": 5.0})
    with pytest.raises(ConfigError, match="use --plan dense with specbench tune"):
        config.resolve({"plan": "adaptive", "modes": ("baseline", "eagle3", "tuned")})


def test_dry_run_shows_the_start_level_and_the_rule(tmp_path: Path) -> None:
    from tests.harness import run_cli

    proc = run_cli(["sweep", "--plan", "adaptive", "--modes", "baseline,eagle3", "--dry-run"],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "concurrency 16 x 1 repeat(s)" in out
    assert "adaptive plan: the middle level above first" in out
    assert "4 points in all" in out
