"""Crossover, interval, threshold and envelope on synthetic run directories.

`tests.builders.make_run` writes real run directories through specbench.results (point files
with per-request rows, manifest, summary), so the analysis is exercised exactly as on a
measured run.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench import analysis, stats
from specbench.analysis import AnalysisError, analyze, threshold_levels
from specbench.errors import UserError
from specbench.results import load_run
from tests.builders import (
    GRID,
    Curve,
    baseline_curve,
    make_run,
    ratio_crossing_at,
    static_curves,
)

# ---------------------------------------------------------------------------------------------


def test_clean_crossing_interpolates_in_log2_c(tmp_path: Path) -> None:
    # r = 1.2 at 16 and 0.8 at 64: halfway in log2 c is exactly 32.
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0))))
    result = analyze(run)
    coding = result["prompt_sets"]["coding"]
    assert coding["outcome"] == "crossover"
    assert coding["crossover_concurrency"] == pytest.approx(32.0, rel=1e-6)
    assert coding["confirmed"] is True  # 128 lies beyond the bracket, also below 1
    lo, hi = coding["interval"]
    assert 16 <= lo < 32 < hi <= 64
    # No running-request measurements: batch size falls back to c, so T = 32.
    assert coding["threshold_batch_size"] == 32
    assert result["recommended_threshold"] == 32
    assert coding["ratio_by_concurrency"]["16"] == pytest.approx(1.2, rel=1e-3)
    assert "EAGLE-3 wins below 32 concurrent requests (coding" in coding["sentence"]
    assert coding["outcome_support"] > 0.95
    assert coding["interval_method"] == ["ci_columns"]


def test_threshold_uses_measured_running_requests(tmp_path: Path) -> None:
    # The server ran fewer requests than users (requests between turns): 7 of 8 running.
    running = {(m, "coding"): {c: 0.875 * c for c in GRID} for m in ("baseline", "eagle3")}
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0)), running=running))
    coding = analyze(run)["prompt_sets"]["coding"]
    assert coding["crossover_concurrency"] == pytest.approx(32.0, rel=1e-6)
    assert coding["crossover_batch_size"] == pytest.approx(28.0, rel=1e-6)
    assert coding["threshold_batch_size"] == 28
    assert coding["batch_size_by_concurrency"]["64"] == pytest.approx(56.0)


def test_running_requests_above_the_user_count_are_capped(tmp_path: Path) -> None:
    # c closed-loop users cannot keep more than c requests running; a metric saying 10% more
    # is wrong, so the threshold falls back to c and a note says why.
    running = {(m, "coding"): {c: 1.1 * c for c in GRID} for m in ("baseline", "eagle3")}
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0)), running=running))
    coding = analyze(run)["prompt_sets"]["coding"]
    assert coding["threshold_batch_size"] == 32
    assert coding["batch_size_by_concurrency"]["64"] == 64
    assert any("more running requests than there were users" in n for n in coding["notes"])


def test_never_wins_gives_threshold_one(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(lambda c: 0.9)))
    result = analyze(run)
    coding = result["prompt_sets"]["coding"]
    assert coding["outcome"] == "eagle3_never_wins"
    assert coding["crossover_concurrency"] is None and coding["interval"] is None
    assert coding["threshold_batch_size"] == 1
    assert "never wins" in coding["sentence"]


def test_always_wins_gives_threshold_beyond_the_grid(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(1000.0))))
    coding = analyze(run)["prompt_sets"]["coding"]
    assert coding["outcome"] == "eagle3_always_wins"
    assert coding["threshold_batch_size"] == 129
    assert "every measured level" in coding["sentence"]


def test_flags_on_the_deciding_points_are_noted(tmp_path: Path) -> None:
    flags = {("baseline", "coding", 128): "client_bound;too_few_requests",
             ("eagle3", "coding", 1): "client_bound"}
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(1000.0)), flags=flags))
    notes = analyze(run)["prompt_sets"]["coding"]["notes"]
    # Always-wins is decided at the top level: its flag is noted, the one at c=1 is not.
    assert len(notes) == 1
    assert notes[0].startswith("the highest-load points, where the baseline should win, carry "
                               "flags (baseline c=128: client_bound;too_few_requests)")


def test_noisy_curve_crossing_twice_uses_the_last_crossing(tmp_path: Path) -> None:
    ratios = {1: 2.0, 2: 1.6, 4: 0.97, 8: 1.03, 16: 0.9, 64: 0.8, 128: 0.7}
    run = load_run(make_run(tmp_path, static_curves(lambda c: ratios[int(c)])))
    coding = analyze(run)["prompt_sets"]["coding"]
    assert coding["outcome"] == "crossover"
    # Between 8 (1.03) and 16 (0.9): 8 * 2**(0.03/0.13).
    assert coding["crossover_concurrency"] == pytest.approx(8 * 2 ** (0.03 / 0.13), rel=1e-3)
    assert any("crosses 1 from above 2 times" in n for n in coding["notes"])


def test_crossing_at_the_top_is_unconfirmed(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(100.0))))
    coding = analyze(run)["prompt_sets"]["coding"]
    assert coding["outcome"] == "crossover"
    assert 64 < coding["crossover_concurrency"] < 128
    assert coding["confirmed"] is False
    assert any("no further level confirms it" in n for n in coding["notes"])


def test_single_level_run(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(lambda c: 1.5, levels=(8,))))
    coding = analyze(run)["prompt_sets"]["coding"]
    assert coding["outcome"] == "eagle3_always_wins"
    assert coding["threshold_batch_size"] == 9
    assert any("only one concurrency level (c=8)" in n for n in coding["notes"])


def test_missing_mode_is_a_one_line_error(tmp_path: Path) -> None:
    curves = static_curves(ratio_crossing_at(32.0))
    del curves[("eagle3", "coding")]
    run = load_run(make_run(tmp_path, curves))
    with pytest.raises(AnalysisError) as info:
        analyze(run)
    assert isinstance(info.value, UserError)  # the CLI prints it as one line, exit 2
    message = str(info.value)
    assert "no eagle3 points" in message and "--resume" in message and "\n" not in message


def test_mode_missing_for_one_prompt_set_names_the_set(tmp_path: Path) -> None:
    curves = {**static_curves(ratio_crossing_at(32.0)),
              ("baseline", "agentic"): {c: baseline_curve(c) for c in GRID}}
    run = load_run(make_run(tmp_path, curves))
    with pytest.raises(AnalysisError, match="prompt set 'agentic' has no eagle3 points"):
        analyze(run)


def test_repeats_give_a_t_interval_that_narrows_with_agreement(tmp_path: Path) -> None:
    ratio = ratio_crossing_at(32.0)

    def curves(spread: float) -> dict[tuple[str, str], dict[int, list[float]]]:
        return {
            ("baseline", "coding"): {c: [baseline_curve(c) * (1 + d) for d in (-spread, 0, spread)]
                                     for c in GRID},
            ("eagle3", "coding"): {c: [baseline_curve(c) * ratio(c) * (1 + d)
                                       for d in (spread, 0, -spread)] for c in GRID},
        }

    tight = analyze(load_run(make_run(tmp_path / "a", curves(0.01), ci_rel=None)))
    loose = analyze(load_run(make_run(tmp_path / "b", curves(0.08), ci_rel=None)))
    t_lo, t_hi = tight["prompt_sets"]["coding"]["interval"]
    l_lo, l_hi = loose["prompt_sets"]["coding"]["interval"]
    assert tight["prompt_sets"]["coding"]["interval_method"] == ["repeats"]
    assert tight["prompt_sets"]["coding"]["crossover_concurrency"] == pytest.approx(32.0, rel=1e-6)
    assert t_lo <= 32 <= t_hi
    assert (l_hi / l_lo) > (t_hi / t_lo)


def test_one_repeat_without_ci_columns_has_no_spread(tmp_path: Path) -> None:
    # Only a point whose window held no request lacks its CI; then nothing says how noisy the
    # level is, the interval collapses onto c* and a note says so.
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0)), ci_rel=None))
    assert "output_tok_s_ci_low" not in run.summary.columns
    coding = analyze(run)["prompt_sets"]["coding"]
    assert coding["interval_method"] == ["none"]
    assert coding["interval"] == [coding["crossover_concurrency"]] * 2
    assert any("the interval has zero width" in n for n in coding["notes"])


def test_bootstrap_is_seeded(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0))))
    assert analyze(run, seed=3) == analyze(run, seed=3)


def test_recommended_threshold_is_the_minimum_over_sets(tmp_path: Path) -> None:
    curves = {**static_curves(ratio_crossing_at(32.0), "coding"),
              **static_curves(ratio_crossing_at(8.0), "agentic")}
    result = analyze(load_run(make_run(tmp_path, curves)))
    assert result["prompt_sets"]["coding"]["threshold_batch_size"] == 32
    assert result["prompt_sets"]["agentic"]["threshold_batch_size"] == 8
    assert result["recommended_threshold"] == 8
    assert result["combine_rule"].startswith("minimum")
    assert "batch size 8" in result["finding"]


def test_a_set_where_eagle3_never_wins_sets_the_recommendation(tmp_path: Path) -> None:
    curves = {**static_curves(ratio_crossing_at(32.0), "coding"),
              **static_curves(lambda c: 0.9, "agentic")}
    result = analyze(load_run(make_run(tmp_path, curves)))
    assert result["recommended_threshold"] == 1
    assert result["finding"].startswith("EAGLE-3 never wins (agentic)")
    assert "EAGLE-3 wins below 32 concurrent requests (coding" in result["finding"]
    assert "Recommended: never draft (threshold 1)" in result["finding"]


def test_envelope_efficiency_including_straddle_levels(tmp_path: Path) -> None:
    ratio = ratio_crossing_at(32.0)
    levels = (1, 2, 4, 8, 16, 32, 64, 128)
    curves = static_curves(ratio, levels=levels)
    # Dynamic matches the best static mode on the grid, but loses 20% at c=33 (a straddle level).
    dynamic = {c: baseline_curve(c) * max(ratio(c), 1.0) for c in levels}
    dynamic[33] = baseline_curve(33) * 0.8
    curves[("dynamic", "coding")] = dynamic
    run_dir = make_run(tmp_path, curves)
    result = analysis.write_analysis(load_run(run_dir))
    coding = result["prompt_sets"]["coding"]
    assert coding["envelope_efficiency"]["16"] == pytest.approx(1.0, abs=1e-3)
    # At 33 the static curves are interpolated (log-log) between 32 and 64.
    assert coding["envelope_efficiency"]["33"] == pytest.approx(0.8, abs=0.01)
    assert coding["envelope_interpolated"] == [33]
    assert coding["envelope_min"] == coding["envelope_efficiency"]["33"]
    # The crossover uses only levels measured in both static modes.
    assert "33" not in coding["ratio_by_concurrency"]
    # What was written is what analyze returned, and load_run reads it back.
    assert json.loads((run_dir / "analysis.json").read_text()) == result
    assert load_run(run_dir).analysis == result


def test_threshold_levels() -> None:
    assert threshold_levels(32, GRID) == [31, 32, 33]
    assert threshold_levels(16, GRID) == [15, 17]
    assert threshold_levels(1, GRID) == []  # 0 is no level; 1 and 2 are in the grid
    assert threshold_levels(129, GRID) == []  # beyond the grid the server would cap them


def test_threshold_summary_gives_the_adaptive_config(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0))))
    text = analysis.threshold_summary(run)
    assert "recommended threshold: 32" in text
    assert '{"1": {"candidate_steps": [3]}, "32": {"candidate_steps": [0]}}' in text
    assert analysis.speculative_num_steps(run) == 3


def test_applied_threshold_comes_from_the_manifest(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0)), threshold=24))
    assert analyze(run)["applied_threshold"] == 24


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    levels=st.lists(st.integers(1, 256), min_size=2, max_size=9, unique=True).map(sorted),
    position=st.floats(0.05, 0.95),
    slope=st.floats(0.02, 1.0),
)
def test_monotone_ratio_crosses_within_its_bracket(
    levels: list[int], position: float, slope: float,
) -> None:
    # A strictly decreasing r crossing 1 somewhere between the first and last level.
    log2 = np.log2(levels)
    x_star = log2[0] + position * (log2[-1] - log2[0])
    ratio = [1.0 + slope * (x_star - x) for x in log2]
    if any(r == 1.0 for r in ratio):
        return
    crossing = stats.find_crossing(levels, ratio)
    assert crossing.outcome == "crossover"
    assert crossing.bracket is not None and crossing.crossover_concurrency is not None
    lo, hi = crossing.bracket
    assert lo <= crossing.crossover_concurrency <= hi
    # r is exactly linear in log2 c, so the interpolation recovers c* itself.
    assert crossing.crossover_concurrency == pytest.approx(2.0 ** x_star, rel=1e-6)
    assert ratio[levels.index(lo)] >= 1.0 > ratio[levels.index(hi)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.3, 3.0), min_size=1, max_size=9))
def test_crossing_rule_on_any_curve(ratios: list[float]) -> None:
    levels = [2 ** i for i in range(len(ratios))]
    crossing = stats.find_crossing(levels, ratios)
    if all(r < 1.0 for r in ratios):
        assert crossing.outcome == "eagle3_never_wins"
    elif ratios[-1] >= 1.0:
        assert crossing.outcome == "eagle3_always_wins"
    else:
        assert crossing.outcome == "crossover" and crossing.bracket is not None
        lo, hi = crossing.bracket
        # Everything after the bracket is below 1: EAGLE-3 stays behind past c*.
        assert all(r < 1.0 for c, r in zip(levels, ratios, strict=True) if c >= hi)
        assert ratios[levels.index(lo)] >= 1.0


def test_interval_covers_the_true_crossover_under_measurement_noise(tmp_path: Path) -> None:
    # Points measured with 3% noise and CI columns that say so: the 95% interval of c* should
    # contain the true crossing (32) in most runs, and c* itself should scatter around it.
    rng = np.random.default_rng(11)
    noise_rel, levels, trials = 0.03, (4, 16, 64, 128), 25
    ratio = ratio_crossing_at(32.0)
    covered, estimates = 0, []
    for trial in range(trials):
        curves = {
            ("baseline", "coding"): {c: baseline_curve(c) * (1 + rng.normal(0, noise_rel))
                                     for c in levels},
            ("eagle3", "coding"): {c: baseline_curve(c) * ratio(c) * (1 + rng.normal(0, noise_rel))
                                   for c in levels},
        }
        run = load_run(make_run(tmp_path / str(trial), curves, ci_rel=1.96 * noise_rel,
                                n_requests=4))
        coding = analyze(run, resamples=500)["prompt_sets"]["coding"]
        assert coding["outcome"] == "crossover"
        lo, hi = coding["interval"]
        covered += lo <= 32.0 <= hi
        estimates.append(coding["crossover_concurrency"])
    assert covered >= 0.8 * trials
    assert 26 < float(np.median(estimates)) < 39


def test_point_means_bands_from_repeats_or_ci(tmp_path: Path) -> None:
    curves: dict[tuple[str, str], Curve] = {
        ("baseline", "coding"): {1: [90.0, 100.0, 110.0], 2: 200.0},
        ("eagle3", "coding"): {1: [150.0, 160.0, 170.0], 2: 220.0},
    }
    run = load_run(make_run(tmp_path, curves, ci_rel=0.05))
    means = analysis.point_means(run).set_index(["mode", "concurrency"])
    # Repeats: min-max over repeats; one repeat: the 95% CI columns.
    assert means.loc[("baseline", 1), "output_tok_s"] == pytest.approx(100.0)
    assert means.loc[("baseline", 1), "tok_s_band_low"] == pytest.approx(90.0)
    assert means.loc[("baseline", 1), "tok_s_band_high"] == pytest.approx(110.0)
    assert means.loc[("baseline", 2), "tok_s_band_low"] == pytest.approx(190.0)
    assert means.loc[("baseline", 2), "tok_s_band_high"] == pytest.approx(210.0)
