"""The adaptive plan (`--plan adaptive`): where it places levels (the sweep: tests/e2e)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specbench.configurations import TUNE_NAMES
from specbench.errors import ConfigError
from specbench.run.adaptive import (
    first_levels,
    next_level,
    place,
    placed_levels,
    start_level,
)

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


def _level(*args: object) -> int | None:
    return next_level(GRID, *args)  # type: ignore[arg-type]


def test_an_interval_reaching_a_bracket_level_gets_the_level_beyond_it() -> None:
    # Cut at 64, the top its pair measured: the draws crossing above 64 need 128.
    assert _level([16, 32, 64], "crossover", 62.0, [57.0, 64.0]) == 128
    # Reaching below 64 with 32 unmeasured: those draws would spread over 16..64.
    assert _level([16, 64, 128], "crossover", 76.0, [61.0, 85.0]) == 32
    assert _level([16, 64, 128], "crossover", 76.0, [66.0, 85.0]) is None
    assert _level([16, 32, 64, 128], "crossover", 62.0, [31.0, 64.0]) is None
    assert _level([16, 128, 250], "crossover", 230.0, [200.0, 250.0]) is None


def test_no_level_for_a_decision_without_a_reading() -> None:
    assert next_level(GRID, [16], None, None) is None  # e.g. no zero-step curve
    # Nothing measured yet: the whole grid is the bracket, its middle comes first.
    assert _level([], None, None) == 16


def test_a_floor_steers_the_search_and_is_measured_before_it_bounds_the_bracket() -> None:
    # Known from c* to lie above 64: the search starts there, nothing measured below it.
    assert next_level(GRID, [], None, None, None, 64) == 128
    # Behind at 128: the bracket is floor..128, its middle would be the floor's neighbour,
    # so the floor itself is measured (nothing closes on a level only assumed).
    assert next_level(GRID, [128], "eagle3_never_wins", None, None, 64) == 64
    assert next_level(GRID, [128], "eagle3_never_wins", None, None, 32) == 64
    # A floor outside the measured bracket says nothing.
    assert next_level(GRID, [64, 128], "crossover", 100.0, None, 32) is None


def _analysis(**decisions: tuple[str, float | None]) -> dict[str, object]:
    fields = {"c_star": "plain_server", "t": "one_server"}
    return {"prompt_sets": {"coding": {
        fields[k]: {"outcome": outcome, "crossover_concurrency": c}
        for k, (outcome, c) in decisions.items()}}}


def test_c_star_starts_and_t_waits_for_its_bracket() -> None:
    refined: dict[str, list[int]] = {}
    servers = ["baseline", "eagle3", "zero-step", "dynamic"]
    first_levels(refined, GRID, ["coding"], servers)
    assert refined == {"eagle3/coding": [16], "baseline/coding": [16]}
    placed = place(_analysis(c_star=("eagle3_always_wins", None)), refined, GRID, ["coding"],
                   servers)
    assert len(placed) == 1  # c* bisects 16..250; T waits
    assert refined == {"eagle3/coding": [16, 64], "baseline/coding": [16, 64]}
    refined = {"eagle3/coding": [16, 32], "baseline/coding": [16, 32]}
    place(_analysis(c_star=("crossover", 20.0)), refined, GRID, ["coding"], servers)
    # 16 and 32 bracket c* = 20: T starts above 16, where EAGLE-3 beat the plain server.
    assert refined["baseline/coding"] == [16, 32]
    assert refined["zero-step/coding"] == [64]
    assert refined["eagle3/coding"] == [16, 32, 64]
    # A server no decision compares is measured wherever either pair was.
    assert placed_levels(refined, "dynamic", "coding") == [16, 32, 64]
    assert placed_levels(refined, "baseline", "coding") == [16, 32]


def test_without_a_baseline_t_starts_at_the_middle_level() -> None:
    refined: dict[str, list[int]] = {}
    first_levels(refined, GRID, ["coding"], ["eagle3", "zero-step"])
    assert refined == {"eagle3/coding": [16], "zero-step/coding": [16]}
    place(_analysis(c_star=("eagle3_always_wins", None), t=("eagle3_always_wins", None)),
          refined, GRID, ["coding"], ["eagle3", "zero-step"])
    assert refined == {"eagle3/coding": [16, 64], "zero-step/coding": [16, 64]}


def _plan(c_star: float, t: float, servers: tuple[str, ...] = ("baseline", "eagle3",
          "zero-step")) -> tuple[dict[str, list[int]], int]:
    """The whole plan against known ratio curves (crossing_c / c) ** 0.5 for c* and T: the
    levels and the rounds it took."""
    refined: dict[str, list[int]] = {}
    first_levels(refined, GRID, ["coding"], servers)
    for rounds in range(1, 20):
        entry = {}
        for field, pair, crossing in (("plain_server", ("eagle3", "baseline"), c_star),
                                      ("one_server", ("eagle3", "zero-step"), t)):
            shared = sorted(set.intersection(*(set(placed_levels(refined, s, "coding"))
                                               for s in pair)))
            if shared:
                outcome, c = _read(shared, crossing)
                entry[field] = {"outcome": outcome, "crossover_concurrency": c}
        if not place({"prompt_sets": {"coding": entry}}, refined, GRID, ["coding"], servers):
            return refined, rounds
    raise AssertionError("the plan did not end")


@pytest.mark.parametrize(("c_star", "t"), [(40.0, 70.0), (110.0, 220.0), (5.0, 11.0),
                                           (0.5, 3.0), (90.0, 400.0), (30.0, 30.5)])
def test_both_crossings_end_bracketed_on_levels_both_servers_measured(
    c_star: float, t: float,
) -> None:
    refined, rounds = _plan(c_star, t)
    for crossing, pair in ((c_star, ("eagle3", "baseline")), (t, ("eagle3", "zero-step"))):
        shared = set.intersection(*(set(refined[f"{s}/coding"]) for s in pair))
        below = [c for c in GRID if c <= crossing]
        above = [c for c in GRID if c > crossing]
        assert (not below or below[-1] in shared) and (not above or above[0] in shared)
    assert rounds <= 8


def test_t_spends_no_zero_step_point_below_c_stars_bracket() -> None:
    # A coding-like pair: c* 110 (bracket 64..128), T 220 (128..250).
    refined, _ = _plan(110.0, 220.0)
    assert refined["zero-step/coding"] == [128, 250]
    assert refined["baseline/coding"] == [16, 64, 128]


def test_t_below_the_floor_is_still_found_by_measurement() -> None:
    # The zero-step path faster than the plain server (the floor's premise broken): c* at 100
    # says "T above 64", but T is 20. The floor is measured, found wrong, and T bisected down.
    refined, _ = _plan(100.0, 20.0)
    shared = set(refined["zero-step/coding"]) & set(refined["eagle3/coding"])
    assert {16, 32} <= shared


def test_adaptive_plan_refuses_what_it_cannot_run() -> None:
    from specbench import config

    with pytest.raises(ConfigError, match="drop --gpus, --executor ray and --only-config"):
        config.resolve({"plan": "adaptive", "gpus": (0, 1)})
    with pytest.raises(ConfigError, match="add --plan adaptive"):
        config.resolve({"budget_gpu_min": 5.0, "plan": "dense"})
    with pytest.raises(ConfigError, match="add --plan adaptive"):  # auto: a grid given
        config.resolve({"budget_gpu_min": 5.0, "concurrency": (1, 8, 64)})
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
    assert "about 16 points in all" in out  # 2 sets x 2 servers x log2 of 9 levels
    # T's zero-step server waits for c*'s bracket.
    proc = run_cli(["sweep", "--plan", "adaptive", "--dry-run"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "zero-step: " in out and "no level before the adaptive plan places one" in out
    assert "--plan dense measures all 9 levels" in out


def test_auto_plan_is_adaptive_only_where_the_benchmark_measured_it() -> None:
    from specbench import config

    assert config.resolve({}).plan == "adaptive"
    assert config.resolve({"budget_gpu_min": 5.0}).plan == "adaptive"
    # Levels someone listed, several GPU slots, a tuned server, no decision pair: dense.
    assert config.resolve({"concurrency": (1, 8, 64)}).plan == "dense"
    assert config.resolve({}, preset="quick").plan == "dense"
    assert config.resolve({"gpus": (0, 1)}).plan == "dense"
    assert config.resolve({"modes": ("baseline", "dynamic")}).plan == "dense"
    assert config.resolve({}, base={"modes": list(TUNE_NAMES)}).plan == "dense"
    assert config.resolve({"modes": ("eagle3", "zero-step")}).plan == "adaptive"
    assert config.resolve({"plan": "dense"}).plan == "dense"
