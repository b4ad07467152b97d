"""Crossover, interval, threshold and envelope on synthetic run directories.

`tests.builders.make_run` writes real run directories through specbench.results (point files
with per-request rows, manifest, summary), so the analysis is exercised exactly as on a
measured run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench import analysis, stats
from specbench.analysis import AnalysisError, analyze
from specbench.errors import UserError
from specbench.report.document import level_rows
from specbench.results import load_run
from tests.builders import (
    GRID,
    Curve,
    baseline_curve,
    make_run,
    ratio_crossing_at,
    static_curves,
    tune_curves,
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
    flagged = [n for n in notes if "carry flags" in n]
    assert len(flagged) == 1
    assert flagged[0].startswith("the highest-load points, where the baseline should win, carry "
                                 "flags (baseline c=128: client_bound;too_few_requests)")
    # The user listed these levels (dense plan): the crossing above the top is theirs to find.
    assert notes[0] == ("EAGLE-3 still beats the baseline at 128, the largest level listed, so "
                        "the crossing lies above it; add a higher level (--concurrency) to "
                        "locate it")


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
    # Repeat r of both configurations saw the same prompt order: compared pair by pair.
    assert tight["prompt_sets"]["coding"]["interval_method"] == ["paired_repeats"]
    assert tight["prompt_sets"]["coding"]["crossover_concurrency"] == pytest.approx(32.0, rel=1e-6)
    assert t_lo <= 32 <= t_hi
    assert (l_hi / l_lo) > (t_hi / t_lo)


def test_one_repeat_without_ci_columns_has_no_spread(tmp_path: Path) -> None:
    # Only a point whose window held no request lacks its CI; then nothing says how noisy the
    # level is, the draws' interval collapses onto c* and a note says so. The interval keeps
    # the chord's error alone: a straight ratio curve in log c (this one) bends nowhere.
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0)), ci_rel=None))
    assert "output_tok_s_ci_low" not in run.summary.columns
    coding = analyze(run)["prompt_sets"]["coding"]
    assert coding["interval_method"] == ["none"]
    assert coding["sampling_interval"] == [coding["crossover_concurrency"]] * 2
    error = coding["chord_error_log2"]
    assert coding["interval"] == pytest.approx(
        [32.0 / 2 ** error, 32.0 * 2 ** error], abs=0.01)
    assert any("the interval has zero width" in n for n in coding["notes"])


def test_bootstrap_is_seeded(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0))))
    assert analyze(run, seed=3) == analyze(run, seed=3)


def test_without_a_mix_there_is_no_mixed_recommendation(tmp_path: Path) -> None:
    # No minimum over sets: the per-set thresholds, and a mixed one needs a measured mix.
    curves = {**static_curves(ratio_crossing_at(32.0), "coding"),
              **static_curves(ratio_crossing_at(8.0), "agentic")}
    result = analyze(load_run(make_run(tmp_path, curves)))
    assert result["prompt_sets"]["coding"]["threshold_batch_size"] == 32
    assert result["prompt_sets"]["agentic"]["threshold_batch_size"] == 8
    assert result["recommended_threshold"] is None
    assert result["recommendation_source"] is None and result["mix"] is None
    assert result["finding"].endswith(
        "One threshold for all sets needs a measured mix (--mix agentic=0.5,coding=0.5).")
    text = analysis.threshold_summary(load_run(tmp_path / "run"), result)
    assert "recommended threshold" not in text and "--mix" in text
    assert ("Per-set thresholds (batch size): agentic 8, coding 32; a mixed-deployment "
            "threshold needs a measured mix (--mix agentic=0.5,coding=0.5)") in text


def test_a_set_where_eagle3_never_wins(tmp_path: Path) -> None:
    curves = {**static_curves(ratio_crossing_at(32.0), "coding"),
              **static_curves(lambda c: 0.9, "agentic")}
    result = analyze(load_run(make_run(tmp_path, curves)))
    assert result["prompt_sets"]["agentic"]["threshold_batch_size"] == 1
    # One short sentence per decision: T (here from c*: no zero-step curve), then c*.
    assert result["finding"].startswith(
        "agentic: never draft (threshold 1), from c* (no zero-step curve was measured). "
        "agentic: a plain server is ")
    assert "faster than speculative decoding at every level measured (1–128): serve without " \
        "it. coding: stop drafting at batch size 32, from c*" in result["finding"]
    assert "coding: above c* = 32 concurrent requests (95% interval " in result["finding"]
    # The why stays in each set's sentence.
    assert "EAGLE-3 never wins (agentic)" in result["prompt_sets"]["agentic"]["sentence"]


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
    # The dynamic server's T-1, T, T+1 beside the grid (plan.levels_for), the servers' running
    # request limit (the grid's top) capping them, and no level 0.
    from specbench.config import SweepConfig
    from specbench.configurations import Schedule
    from specbench.run.plan import levels_for

    cfg = SweepConfig(concurrency=GRID, plan="dense")
    dynamic = next(c for c in cfg.configurations if c.name == "dynamic")
    extra = {t: sorted(set(levels_for(dynamic, cfg, Schedule.from_threshold(3, t))) - set(GRID))
             for t in (32, 16, 1, 129)}
    assert extra == {32: [31, 32, 33], 16: [15, 17], 1: [], 129: []}


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


# --- the two decisions ----------------------------------------------------------------------

LEVELS8 = (1, 2, 4, 8, 16, 32, 64, 128)


def test_one_server_crossing_is_against_the_zero_step_curve(tmp_path: Path) -> None:
    # EAGLE-3 meets the baseline at 32 and the zero-step curve (12% below the baseline) where
    # 1 + 0.2 log2(32 / c) = 0.88: log2 c = 5.6.
    curves = static_curves(ratio_crossing_at(32.0), levels=LEVELS8, zero_step=0.88)
    result = analyze(load_run(make_run(tmp_path, curves)))
    coding = result["prompt_sets"]["coding"]
    one, plain = coding["one_server"], coding["plain_server"]
    assert one["outcome"] == "crossover"
    assert one["crossover_concurrency"] == pytest.approx(2 ** 5.6, rel=1e-3)
    assert one["threshold_batch_size"] == 49  # ceil(48.5): no running requests, b = c
    lo, hi = one["interval"]
    assert lo < 2 ** 5.6 < hi
    assert one["ratio_by_concurrency"]["64"] == pytest.approx(0.8 / 0.88, rel=1e-3)
    # The plain-server decision is today's crossover, and the top-level keys stay it.
    assert plain["crossover_concurrency"] == coding["crossover_concurrency"]
    assert coding["crossover_concurrency"] == pytest.approx(32.0, rel=1e-6)
    assert coding["threshold_batch_size"] == 32
    # The tax: 12% at every level; above c* = 32 the baseline beats the best speculative
    # server (EAGLE-3 at 64: 0.8, zero-step 0.88) by 1 / 0.88 - 1.
    assert all(t == pytest.approx(0.12) for t in plain["tax"].values())
    assert plain["faster_above"] == {"64": pytest.approx(1 / 0.88 - 1, abs=1e-4),
                                     "128": pytest.approx(1 / 0.88 - 1, abs=1e-4)}
    assert "above it a separate plain server is 14% faster" in plain["sentence"]
    # One set: its one-server threshold is the recommendation.
    assert result["recommended_threshold"] == 49
    assert result["recommendation_source"] == "single prompt set"
    assert coding["sentence"].startswith(
        "One server: EAGLE-3 beats its zero-step path below 48 concurrent requests (coding")
    assert "stop drafting at batch size 49. Plain server: EAGLE-3 wins below 32" in \
        coding["sentence"]
    assert result["analysis_version"] == 4


def test_a_run_without_a_baseline_decides_the_one_server_threshold(tmp_path: Path) -> None:
    # `--modes eagle3,zero-step`: T from EAGLE-3 against zero-step (the same crossing at
    # 2^5.6 as with a baseline); the plain-server decision says it was not measured.
    curves = static_curves(ratio_crossing_at(32.0), levels=LEVELS8, zero_step=0.88)
    del curves[("baseline", "coding")]
    run = load_run(make_run(tmp_path, curves))
    result = analyze(run)
    coding = result["prompt_sets"]["coding"]
    one, plain = coding["one_server"], coding["plain_server"]
    assert one["crossover_concurrency"] == pytest.approx(2 ** 5.6, rel=1e-3)
    assert one["threshold_batch_size"] == 49 == result["recommended_threshold"]
    assert coding["outcome"] is None and plain["outcome"] is None and plain["tax"] == {}
    assert "no baseline curve" in coding["notes"][0]
    assert coding["sentence"].startswith("One server: EAGLE-3 beats its zero-step path below 48")
    assert "Plain server: no baseline curve" in coding["sentence"]
    assert "stop drafting at batch size 49" in analysis.threshold_summary(run, result)
    # Without zero-step too, nothing can be decided: the baseline is asked for.
    del curves[("zero-step", "coding")]
    with pytest.raises(AnalysisError, match="no baseline points"):
        analyze(load_run(make_run(tmp_path / "e3", curves)))


def test_one_server_threshold_uses_running_requests_of_eagle3_and_zero_step(
    tmp_path: Path,
) -> None:
    curves = static_curves(ratio_crossing_at(32.0), levels=LEVELS8, zero_step=0.88)
    running = {(m, "coding"): {c: 0.5 * c for c in LEVELS8} for m in ("eagle3", "zero-step")}
    one = analyze(load_run(make_run(tmp_path, curves, running=running)))["prompt_sets"][
        "coding"]["one_server"]
    assert one["crossover_batch_size"] == pytest.approx(2 ** 5.6 / 2, rel=1e-3)
    assert one["threshold_batch_size"] == 25


def test_one_server_never_and_always(tmp_path: Path) -> None:
    # Zero-step at 0.88 of the baseline; EAGLE-3 below it everywhere, then above it everywhere.
    never = static_curves(lambda c: 0.8, levels=LEVELS8, zero_step=0.88)
    one = analyze(load_run(make_run(tmp_path / "a", never)))["prompt_sets"]["coding"]
    assert one["one_server"]["outcome"] == "eagle3_never_wins"
    assert one["one_server"]["threshold_batch_size"] == 1
    assert "never draft (threshold 1)" in one["one_server"]["sentence"]
    always = static_curves(ratio_crossing_at(32.0), levels=LEVELS8, zero_step=0.5)
    one = analyze(load_run(make_run(tmp_path / "b", always)))["prompt_sets"]["coding"]
    assert one["one_server"]["outcome"] == "eagle3_always_wins"
    assert one["one_server"]["threshold_batch_size"] == 129
    assert one["plain_server"]["outcome"] == "crossover"


def test_moe_like_run_says_what_one_server_should_do(tmp_path: Path) -> None:
    # The baseline beats every speculative configuration; EAGLE-3 still beats its zero-step
    # path at low load.
    curves = static_curves(ratio_crossing_at(0.5), levels=LEVELS8, zero_step=0.75)
    coding = analyze(load_run(make_run(tmp_path, curves)))["prompt_sets"]["coding"]
    assert coding["plain_server"]["outcome"] == "eagle3_never_wins"
    assert coding["one_server"]["outcome"] == "crossover"
    t = coding["one_server"]["threshold_batch_size"]
    assert 1 < t < 16
    assert coding["sentence"].startswith(
        "Plain server: EAGLE-3 never wins (coding): the baseline is faster at every measured "
        "level")
    assert "at every level; serve without speculative decoding. If one adaptive server must " \
        "serve it anyway: EAGLE-3 beats its zero-step path below" in coding["sentence"]
    assert f"stop drafting at batch size {t}" in coding["sentence"]


def test_one_server_efficiency_against_eagle3_and_zero_step(tmp_path: Path) -> None:
    ratio = ratio_crossing_at(32.0)
    curves = static_curves(ratio, levels=LEVELS8, zero_step=0.88)
    best = {c: baseline_curve(c) * max(ratio(c), 0.88) for c in LEVELS8}
    dynamic = {c: best[c] * 0.99 for c in LEVELS8}
    dynamic[49] = baseline_curve(49) * 0.88 * 0.9  # a straddle level, 10% short
    curves[("dynamic", "coding")] = dynamic
    coding = analyze(load_run(make_run(tmp_path, curves)))["prompt_sets"]["coding"]
    eff = coding["one_server"]["efficiency"]
    assert eff["8"] == pytest.approx(0.99, abs=1e-4)
    assert eff["128"] == pytest.approx(0.99, abs=1e-4)
    # At 49 both static curves are interpolated log-log between 32 and 64.
    # (log-log interpolation of a saturating curve undershoots a little: 0.91, not 0.90)
    assert eff["49"] == pytest.approx(0.9, abs=0.02)
    assert coding["one_server"]["efficiency_interpolated"] == [49]
    assert coding["one_server"]["efficiency_min"] == eff["49"]
    # The envelope against the baseline is still there: above c* the baseline is better.
    assert coding["envelope_efficiency"]["128"] == pytest.approx(0.99 * 0.88, abs=1e-3)


def test_no_zero_step_curve_falls_back_to_the_baseline_crossover(tmp_path: Path) -> None:
    result = analyze(load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0)))))
    coding = result["prompt_sets"]["coding"]
    assert coding["one_server"]["threshold_batch_size"] is None
    assert coding["one_server"]["outcome"] is None
    assert coding["plain_server"]["tax"] == {}
    assert result["recommended_threshold"] == 32
    assert coding["sentence"] == ("EAGLE-3 wins below 32 concurrent requests (coding; 95% "
                                  "interval " + coding["sentence"].split("interval ")[1])
    assert coding["schedule"] is None


# --- the schedule ---------------------------------------------------------------------------


def test_schedule_keeps_one_drafting_k_and_zero_step(tmp_path: Path) -> None:
    # tests.builders.K_CURVES: the best K is 5 up to c=4, 3 at 8-16, 2 at 64, 0 at 128. One K
    # for all drafting levels (the schedule module says why): K = 5, within 7% of each level's
    # best where it drafts, then zero-step from where K = 5 meets it (2.0 - 0.22 x = 0.88, x =
    # log2 c = 5.09: c = 34).
    run = load_run(make_run(tmp_path, tune_curves()))
    sched = analyze(run)["prompt_sets"]["coding"]["schedule"]
    assert sched["measured_best"] == {"1": 5, "2": 5, "4": 5, "8": 3, "16": 3, "64": 2, "128": 0}
    assert sched["per_level"] == {"1": 5, "2": 5, "4": 5, "8": 5, "16": 5, "64": 0, "128": 0}
    assert sched["slots"] == {"1": 5, "35": 0}
    assert sched["candidates"] == {"0": "zero-step", "1": "eagle3-k1", "2": "eagle3-k2",
                                   "3": "eagle3", "5": "eagle3-k5"}
    assert sched["efficiency"] == {} and sched["vs_sglang_default_geomean"] is None


def test_schedule_keeps_the_k_with_the_best_geomean(tmp_path: Path) -> None:
    # K = 3 made faster by 6% everywhere: it beats K = 5 from c = 2 on, and its schedule (K = 3,
    # then zero-step) loses less over the levels than K = 5's.
    curves = tune_curves()
    curves[("eagle3", "coding")] = {c: v * 1.06 for c, v in curves[("eagle3", "coding")].items()}
    sched = analyze(load_run(make_run(tmp_path, curves)))["prompt_sets"]["coding"]["schedule"]
    assert set(sched["per_level"].values()) == {3, 0}
    assert list(sched["slots"].values()) == [3, 0]


def test_schedule_slots_from_measured_running_requests(tmp_path: Path) -> None:
    # The servers kept half the users running: every slot starts at half the batch size.
    curves = tune_curves()
    running = {key: {c: 0.5 * c for c in GRID} for key in curves}
    sched = analyze(load_run(make_run(tmp_path, curves, running=running)))["prompt_sets"][
        "coding"]["schedule"]
    assert sched["slots"] == {"1": 5, "18": 0}
    assert sched["batch_size_by_concurrency"]["64"] == 32.0


def test_schedule_picks_k_by_the_same_requests_durations(tmp_path: Path) -> None:
    # At c=8 the windows put K=3 0.7% ahead of K=5; K=5's requests there took 5% less time
    # than they would at its window's tok/s. Judged by the same requests' durations (as the
    # efficiency judges), K=5 is 4.5% faster, so c=8's best K is 5.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from specbench.results import PointKey, point_path

    run_dir = make_run(tmp_path, tune_curves(), paired_noise=0.0, n_requests=60)
    window_only = analyze(load_run(run_dir))["prompt_sets"]["coding"]["schedule"]
    assert window_only["measured_best"]["8"] == 3
    path = point_path(run_dir, PointKey("eagle3-k5", "coding", 8, 0))
    table = pq.read_table(path)  # keeps the point's summary in the schema metadata
    rows = table.to_pandas()
    rows["t_end_s"] = rows["t_send_s"] + 0.95 * (rows["t_end_s"] - rows["t_send_s"])
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False)
                   .replace_schema_metadata(table.schema.metadata), path)
    sched = analyze(load_run(run_dir))["prompt_sets"]["coding"]["schedule"]
    assert sched["measured_best"]["8"] == 5
    assert sched["measured_best"]["16"] == 3


def test_schedule_merges_and_drops_slots(tmp_path: Path) -> None:
    # Only K = 1 and 2 and zero-step; 2 is best below 64, zero-step from 64 on, 1 never.
    curves = tune_curves()
    for name in ("eagle3-k5",):
        del curves[(name, "coding")]
    curves[("eagle3", "coding")] = {c: v * 0.5 for c, v in curves[("eagle3", "coding")].items()}
    sched = analyze(load_run(make_run(tmp_path, curves)))["prompt_sets"]["coding"]["schedule"]
    assert list(sched["slots"].values()) == [2, 0]
    assert next(iter(sched["slots"])) == "1"


def test_schedule_needs_several_k(tmp_path: Path) -> None:
    curves = static_curves(ratio_crossing_at(32.0), zero_step=0.88)
    assert analyze(load_run(make_run(tmp_path, curves)))["prompt_sets"]["coding"][
        "schedule"] is None


def test_schedule_efficiency_and_sglang_default(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, tune_curves(tuned=0.99, sglang_default=0.9),
                            tuned={"coding": {"1": 5, "8": 3, "30": 2, "104": 0}}))
    sched = analyze(run)["prompt_sets"]["coding"]["schedule"]
    assert set(sched["efficiency"]) == {str(c) for c in GRID}
    assert all(e == pytest.approx(0.99, abs=1e-4) for e in sched["efficiency"].values())
    assert all(v == pytest.approx(1.1, abs=1e-4) for v in sched["vs_sglang_default"].values())
    assert sched["vs_sglang_default_geomean"] == pytest.approx(1.1, abs=1e-4)
    intervals = sched["vs_sglang_default_interval"]
    assert set(intervals) == set(sched["vs_sglang_default"])
    assert all(lo < sched["vs_sglang_default"][c] < hi and hi / lo < 1.5
               for c, (lo, hi) in intervals.items())
    # E's interval: against the static configuration each level's E comes from.
    efficiency = sched["efficiency_interval"]
    assert set(efficiency) == set(sched["efficiency"])
    assert all(lo < sched["efficiency"][c] < hi and hi / lo < 1.5
               for c, (lo, hi) in efficiency.items())
    assert sched["applied_slots"] == {"1": 5, "8": 3, "30": 2, "104": 0}
    text = analysis.threshold_summary(run)
    assert "tuned schedule (batch size: steps) {'1': 5, '35': 0}" in text
    assert '{"1": {"candidate_steps": [5]}, "35": {"candidate_steps": [0]}' in text


def test_the_steps_adaptive_servers_ran_follow_their_tokens_per_verify(tmp_path: Path) -> None:
    accepts = {"eagle3-k1": 1.7, "eagle3-k2": 2.2, "eagle3": 2.5, "eagle3-k5": 2.9,
               "zero-step": 1.0, "tuned": 2.45, "sglang-default": 1.98}
    run = load_run(make_run(tmp_path, tune_curves(tuned=0.99, sglang_default=0.9),
                            accept_lengths=accepts))
    result = analyze(run)
    ran = result["prompt_sets"]["coding"]["schedule"]["steps_by_accept"]
    assert ran == {"tuned": {str(c): 3 for c in GRID}, "sglang-default": {str(c): 2 for c in GRID}}
    rows = level_rows(run, "coding", result)
    assert {(r.values["tuned K"], r.values["sgl K"]) for r in rows} == {(3.0, 2.0)}


# --- the mix --------------------------------------------------------------------------------


def test_mix_gives_the_recommendation_and_the_loss_per_set(tmp_path: Path) -> None:
    # zero-step at 0.88 of the baseline: coding's EAGLE-3 meets it at 2^5.6 = 48.5, agentic's
    # at 2^3.6 = 12.1, the mix's (between them) at 2^4.6 = 24.3 (threshold 25).
    curves = {**static_curves(ratio_crossing_at(32.0), "coding", LEVELS8, zero_step=0.88),
              **static_curves(ratio_crossing_at(8.0), "agentic", LEVELS8, zero_step=0.88),
              **static_curves(ratio_crossing_at(16.0), "mix", LEVELS8, zero_step=0.88)}
    result = analyze(load_run(make_run(tmp_path, curves)))
    assert result["recommended_threshold"] == 25
    assert result["recommendation_source"] == "mix"
    mix = result["mix"]
    assert mix["threshold_batch_size"] == 25
    # coding at c=32 (below its own 48.5 but above T_mix): zero-step instead of EAGLE-3 (1.0).
    coding = mix["loss_by_set"]["coding"]
    assert coding["32"] == pytest.approx(0.12, abs=1e-4)
    assert coding["16"] == 0.0 and coding["64"] == 0.0
    # agentic at c=16: EAGLE-3 (0.8 of the baseline) where zero-step (0.88) is better.
    agentic = mix["loss_by_set"]["agentic"]
    assert agentic["16"] == pytest.approx(1 - 0.8 / 0.88, abs=1e-4)
    assert agentic["32"] == 0.0
    assert mix["max_loss_by_set"] == {"coding": pytest.approx(0.12, abs=1e-4),
                                      "agentic": pytest.approx(1 - 0.8 / 0.88, abs=1e-4)}
    assert result["prompt_sets"]["coding"]["loss_at_mix_threshold"] == coding
    assert "mix" not in mix["loss_by_set"]
    assert ("Mixed deployment (measured mix): stop drafting at batch size 25; throughput lost "
            "there against each set's better static curve: agentic up to 9.1%, coding up to "
            "12.0%.") in result["finding"]
    text = analysis.threshold_summary(load_run(tmp_path / "run"), result)
    assert "recommended threshold: 25 (the measured mix)" in text


# --- intervals ------------------------------------------------------------------------------


def test_batch_means_errors_are_preferred_and_widened_for_correlated_slices(
    tmp_path: Path,
) -> None:
    curves = static_curves(ratio_crossing_at(32.0), levels=LEVELS8, zero_step=0.88)
    plain = analyze(load_run(make_run(tmp_path / "a", curves, ci_rel=0.2, se_rel=0.01)))
    coding = plain["prompt_sets"]["coding"]
    assert coding["interval_method"] == ["batch_means"]
    assert plain["intervals"]["inflation"] == 1.0  # lag-1 -0.1 over 10 slices: independent
    lo, hi = coding["interval"]
    # The request bootstrap (±20%) would span most of the grid; 1% batch means do not.
    assert 28 < lo < 32 < hi < 37
    correlated = analyze(load_run(make_run(tmp_path / "b", curves, ci_rel=0.2, se_rel=0.01,
                                           slice_lag1=0.5)))
    # rho = (10 x 0.5 + 1) / 7 (Kendall's bias correction), factor sqrt((1 + rho) / (1 - rho)).
    assert correlated["intervals"]["inflation"] == pytest.approx(math.sqrt(13 / 1), rel=1e-3)
    assert correlated["intervals"]["slice_lag1_mean"] == 0.5
    c_lo, c_hi = correlated["prompt_sets"]["coding"]["interval"]
    assert c_hi - c_lo > 1.5 * (hi - lo)


def test_single_repeats_are_compared_by_paired_requests(tmp_path: Path) -> None:
    # Request k is prompt k on every server; durations scatter 5% around each prompt's work.
    curves = static_curves(ratio_crossing_at(32.0), levels=LEVELS8, zero_step=0.88)
    paired = analyze(load_run(make_run(tmp_path / "a", curves, se_rel=0.05,
                                       paired_noise=0.05, n_requests=60)))
    coding = paired["prompt_sets"]["coding"]
    assert coding["interval_method"] == ["paired_requests"]
    assert coding["one_server"]["interval_method"] == ["paired_requests"]
    assert paired["intervals"]["pair_blocks"] == 8
    unpaired = analyze(load_run(make_run(tmp_path / "b", curves, se_rel=0.05, n_requests=60)))
    assert unpaired["prompt_sets"]["coding"]["interval_method"] == ["batch_means"]
    # 5% per request over 60 requests is well under the 5% (x sqrt 2) of unpaired points.
    p_lo, p_hi = coding["interval"]
    u_lo, u_hi = unpaired["prompt_sets"]["coding"]["interval"]
    assert p_lo <= 32.0 <= p_hi
    assert (p_hi - p_lo) < 0.5 * (u_hi - u_lo)


def test_paired_blocks_take_the_windows_ratio_apart_by_request() -> None:
    from specbench.analysis.intervals import paired_blocks

    ids = np.arange(40)
    tau = 1.0 + 0.5 * np.sin(ids)  # each request's time inside the window
    den = pd.DataFrame({"prompt_id": [f"p{i}" for i in ids], "tau": tau, "y": 10.0 * tau},
                       index=ids)
    # Every request of both servers runs at its server's rate (num 20% faster): the windows'
    # ratio is exactly 1.2 and nothing in it is uncertain, whatever the requests' lengths.
    num = den.assign(y=12.0 * tau)
    assert np.allclose(paired_blocks(num, den), 0.0)
    # A request only the faster window reaches adds to it at its rate: still nothing uncertain.
    reach = pd.concat([num, pd.DataFrame({"prompt_id": ["p40"], "tau": [1.0], "y": [12.0]},
                                         index=[40])])
    assert np.allclose(paired_blocks(reach, den), 0.0)
    # A request that sat in one window without a token (a long prefill) pulls its block down
    # and leaves the rest a little above their server's (now lower) rate; the sums add to 0.
    stalled = num.assign(y=np.where(ids == 5, 0.0, num["y"]))
    sums = paired_blocks(stalled, den)
    assert sums is not None and sums[1] < -0.01 and (np.delete(sums, 1) > 0).all()
    assert abs(sums.sum()) < 1e-12
    # Other prompts under the same request ids (another order) are not paired.
    assert paired_blocks(num.assign(prompt_id=[f"q{i}" for i in ids]), den) is None
    # Below 3 blocks of 3 requests in the two windows there is no paired error.
    assert paired_blocks(num.iloc[:8], den.iloc[:8]) is None


def test_duration_ratio_is_the_same_requests_time_and_ignores_a_held_up_pair() -> None:
    from specbench.analysis.intervals import duration_ratio

    ids = np.arange(18)
    den = pd.DataFrame({"prompt_id": [f"p{i}" for i in ids], "d": 0.3 + 0.05 * (ids % 7)},
                       index=ids)
    # The same prompts, every one 10% slower: tok/s is 1/1.1 of the other server's.
    slower = den.assign(d=den["d"] * 1.1)
    assert duration_ratio(slower, den) == pytest.approx(1 / 1.1)
    # As fast, but one request held up 0.44 s by the client's machine: that pair is left out.
    held = den.copy()
    held.loc[4, "d"] += 0.44
    assert duration_ratio(held, den) == pytest.approx(1.0)
    # Small timing jitter on every request stays in.
    jitter = den.assign(d=den["d"] * (1 + 0.002 * np.sin(ids)))
    assert duration_ratio(jitter, den) == pytest.approx(1.0, abs=0.003)
    # Other prompts, or too few shared requests: no paired ratio.
    assert duration_ratio(den.assign(prompt_id=[f"q{i}" for i in ids]), den) is None
    assert duration_ratio(den.iloc[:4], den) is None


def test_efficiency_comes_from_paired_requests_when_points_have_them(tmp_path: Path) -> None:
    curves = static_curves(ratio_crossing_at(32.0), levels=LEVELS8, zero_step=0.88)
    curves[("dynamic", "coding")] = {c: 0.97 * max(curves[("eagle3", "coding")][c],
                                                   curves[("zero-step", "coding")][c])
                                     for c in LEVELS8}
    # Durations follow tok/s exactly (no per-request noise): the paired ratio is the same 0.97.
    exact = analyze(load_run(make_run(tmp_path / "a", curves, paired_noise=0.0, n_requests=40)))
    eff = exact["prompt_sets"]["coding"]["one_server"]["efficiency"]
    assert set(eff) == {str(c) for c in LEVELS8}
    assert all(e == pytest.approx(0.97, abs=0.01) for e in eff.values())
    # With per-request noise the estimate moves with the requests, not with the windows.
    noisy = analyze(load_run(make_run(tmp_path / "b", curves, paired_noise=0.05, n_requests=40)))
    moved = noisy["prompt_sets"]["coding"]["one_server"]["efficiency"]
    assert any(abs(moved[c] - 0.97) > 0.002 for c in moved)
    assert all(abs(moved[c] - 0.97) < 0.06 for c in moved)


def test_schedule_takes_noise_blips_out(tmp_path: Path) -> None:
    # Zero-step edges out K = 5 at c=4 alone, inside K = 5's range: within 2% it is noise,
    # beyond it a slot of its own.
    def run_with(edge: float) -> dict[str, object]:
        curves = tune_curves()
        curves[("zero-step", "coding")][4] = curves[("eagle3-k5", "coding")][4] * edge
        return analyze(load_run(make_run(tmp_path / str(edge), curves)))["prompt_sets"][
            "coding"]["schedule"]

    noise = run_with(1.01)
    assert noise["measured_best"]["4"] == 0 and noise["per_level"]["4"] == 5
    assert noise["slots"] == {"1": 5, "35": 0}
    real = run_with(1.05)
    assert real["per_level"]["4"] == 0
    assert list(real["slots"].values()) == [5, 0, 5, 0]


