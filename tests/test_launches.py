"""The between-launch term of the crossover intervals (issue 36): two launches of the same
servers, one of them running EAGLE-3 faster, as a GPU relaunch did (2,695 vs 3,246 tok/s)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from specbench import analysis, results
from specbench.analysis.curves import LevelStats
from specbench.analysis.launches import ratio_sd, spread_of
from tests.builders import baseline_curve, make_run, ratio_crossing_at, static_curves
from tests.harness import run_cli

LEVELS = (4, 8, 16, 32, 64, 128)


def _launch(root: Path, eagle3_factor: float) -> Path:
    """A run whose EAGLE-3 curve is `eagle3_factor` times the first launch's (c* near 20)."""
    curves = static_curves(ratio_crossing_at(20.0), levels=LEVELS)
    curves[("eagle3", "coding")] = {c: v * eagle3_factor
                                    for c, v in curves[("eagle3", "coding")].items()}
    root.mkdir(parents=True, exist_ok=True)
    return make_run(root, curves, ci_rel=0.01, n_requests=40)


def _stats(values: dict[int, float], rel_se: float) -> dict[int, LevelStats]:
    return {c: LevelStats(c, v, v * rel_se, 0, 1, "batch_means") for c, v in values.items()}


def test_sigma_is_what_the_launches_disagree_by_beyond_the_points_own_noise() -> None:
    first = {c: baseline_curve(c) for c in LEVELS}
    shifted = {c: v * 1.2 for c, v in first.items()}
    found = spread_of("eagle3", "coding", _stats(first, 0.0), _stats(shifted, 0.0))
    assert found is not None
    # d = log 1.2 at every level, no point noise: 2 sigma^2 = d^2.
    assert found.sd_log == pytest.approx(math.log(1.2) / math.sqrt(2))
    # Points whose own noise covers the difference leave no between-launch term.
    noisy = spread_of("eagle3", "coding", _stats(first, 0.2), _stats(shifted, 0.2))
    assert noisy is not None and noisy.sd_log == 0.0
    assert spread_of("eagle3", "coding", _stats(first, 0.0), {}) is None


def test_a_relaunch_widens_the_crossover_interval_to_hold_its_own_estimate(
        tmp_path: Path) -> None:
    one = _launch(tmp_path / "a", 1.0)
    two = _launch(tmp_path / "b", 1.2)
    alone = analysis.analyze(results.load_run(one))["prompt_sets"]["coding"]["plain_server"]
    other = analysis.analyze(results.load_run(two))["prompt_sets"]["coding"]["plain_server"]
    print("one launch:", alone["crossover_concurrency"], alone["interval"],
          "the other:", other["crossover_concurrency"])
    lo, hi = alone["interval"]
    # Within one launch the paired interval is narrow and misses the other launch's c*.
    assert not lo <= other["crossover_concurrency"] <= hi
    run = results.load_run(one)
    both = analysis.write_analysis(run, relaunch=results.load_run(two))
    plain = both["prompt_sets"]["coding"]["plain_server"]
    wide_lo, wide_hi = plain["interval"]
    print("with the relaunch:", plain["interval"])
    assert wide_lo <= other["crossover_concurrency"] <= wide_hi
    assert wide_lo <= alone["crossover_concurrency"] <= wide_hi
    assert "between_launches" in both["prompt_sets"]["coding"]["interval_method"]
    section = both["between_launch"]
    assert section["by_configuration"]["eagle3/coding"]["sd_pct"] == pytest.approx(
        100 * math.log(1.2) / math.sqrt(2), abs=1.0)
    assert section["by_configuration"]["baseline/coding"]["sd_pct"] == 0.0
    # The term stays with the run: a later `specbench report` re-analyses with it.
    again = analysis.write_analysis(results.load_run(one))
    assert again["between_launch"] == section
    assert again["prompt_sets"]["coding"]["plain_server"]["interval"] == plain["interval"]
    assert ratio_sd(section, "coding", "eagle3", "baseline") == pytest.approx(
        section["by_configuration"]["eagle3/coding"]["sd_pct"] / 100)


def test_report_takes_the_relaunch_and_names_it(tmp_path: Path) -> None:
    one = _launch(tmp_path / "a", 1.0)
    two = _launch(tmp_path / "b", 1.2)
    proc = run_cli(["report", str(one), "--relaunch", str(two)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stored = json.loads((one / "analysis.json").read_text())
    assert stored["between_launch"]["relaunch"] == str(two)
    text = (one / "report.md").read_text()
    assert "between launches" in text and "eagle3/coding" in text
    missing = run_cli(["report", str(one), "--relaunch", str(tmp_path / "nope")], cwd=tmp_path)
    assert missing.returncode == 2
    assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr


def test_the_gate_lets_a_relaunch_through_when_the_reference_measured_the_spread(
        tmp_path: Path) -> None:
    from specbench import regress
    from tests.builders import make_regress_run, scaled

    # A relaunch that runs EAGLE-3 10% slower everywhere (the H200's EAGLE-3 at c = 16 moved
    # 17%), the baseline as before.
    relaunch = scaled(lambda m, s, c, r: 0.9 if m == "eagle3" else 1.0)
    ref = make_regress_run(tmp_path / "ref")
    cand = make_regress_run(tmp_path / "cand", relaunch)
    assert regress.main(ref, cand) == 1  # no spread measured: a 10% drop is a regression
    # A reference made of two launches (the second one, here, is the same relaunch's twin).
    twin = make_regress_run(tmp_path / "twin", relaunch)
    analysis.write_analysis(results.load_run(ref), relaunch=results.load_run(twin))
    assert regress.main(ref, cand, json_path=tmp_path / "v.json") == 0
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert any("a relaunch must not fail" in note for note in verdict["notes"]), verdict["notes"]
    # A real regression beyond the spread still fails.
    worse = make_regress_run(tmp_path / "worse", scaled(lambda m, s, c, r: 0.75))
    assert regress.main(ref, worse) == 1


def test_the_same_requests_on_two_real_launches_show_what_the_windows_noise_hides() -> None:
    """The H200 FlashInfer run and its relaunch (EAGLE-3 and zero-step, both sets, 16-128): the
    windows' own errors (5-10% a point) cover the launches' differences, the paired errors do
    not."""
    from specbench.analysis.curves import level_stats
    from specbench.analysis.launches import launch_spreads

    gpu = Path(__file__).resolve().parent.parent / "results" / "gpu"
    name = "h200-sglang-0.5.17-llama8b-shape-q0.3-flashinfer"
    first, second = results.load_run(gpu / name), results.load_run(gpu / f"{name}-relaunch")
    spreads = {(s.mode, s.prompt_set): s for s in launch_spreads(first, second)}
    assert set(spreads) == {(m, p) for m in ("eagle3", "zero-step") for p in ("coding", "agentic")}
    assert all(s.levels == (16, 32, 64, 128) for s in spreads.values())
    # Coding repeats within a few percent (3.2% and 2.3%); agentic moves more (6% and 12%).
    assert 0.01 < spreads[("eagle3", "coding")].sd_log < 0.08
    assert spreads[("zero-step", "agentic")].sd_log > spreads[("zero-step", "coding")].sd_log
    for mode, prompt_set in spreads:
        unpaired = spread_of(mode, prompt_set, level_stats(first.summary, mode, prompt_set),
                             level_stats(second.summary, mode, prompt_set))
        assert unpaired is not None and unpaired.sd_log == 0.0, (mode, prompt_set)
