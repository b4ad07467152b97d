"""Tests for the CI regression gate on synthetic run directories written with specbench.results.

Each run is built the way `specbench sweep` leaves it (point files, summary, manifest), from a
smooth throughput model where EAGLE-3 beats the baseline up to c=32 and loses above it.
"""

from __future__ import annotations

import io
import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from specbench import analysis, regress, results
from specbench.errors import UserError
from specbench.regress import Thresholds, compare, main
from specbench.stats import mann_whitney_u, u_counts
from tests.builders import (
    REGRESS_LEVELS,
    REGRESS_MODES,
    REGRESS_SETS,
    make_regress_run,
    model_accept,
    model_tok_s,
    rounded_json,
    scaled,
    with_repeat_noise,
)
from tests.snapshot import assert_snapshot

LEVELS = REGRESS_LEVELS
SETS = REGRESS_SETS
MODES = REGRESS_MODES
REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "specbench-regression.yml"


def run_main(ref: Path, cand: Path, **kwargs: Any) -> tuple[int, str]:
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None)
    code = main(ref, cand, console=console, **kwargs)
    return code, buf.getvalue()


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite itself may run under GitHub Actions; keep its step summary clean.
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_regress_run(tmp_path_factory.mktemp("ref") / "run")


# --- verdicts ---------------------------------------------------------------------------------


def test_identical_runs_pass_with_unit_ratios(reference: Path, tmp_path: Path) -> None:
    cand = make_regress_run(tmp_path / "cand")
    code, out = run_main(reference, cand, json_path=tmp_path / "verdict.json")
    assert code == 0
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["status"] == "ok" and verdict["exit_code"] == 0
    assert len(verdict["groups"]) == 4 and len(verdict["points"]) == 32
    assert all(g["geomean_ratio"] == pytest.approx(1.0) for g in verdict["groups"])
    assert "No regression (32 points compared)" in out


def test_noise_within_thresholds_passes(reference: Path, tmp_path: Path) -> None:
    rng = random.Random(7)
    noise = {(m, s, c): rng.uniform(-0.02, 0.02) for m in MODES for s in SETS for c in LEVELS}
    cand = make_regress_run(tmp_path / "cand", scaled(lambda m, s, c, r: 1 + noise[(m, s, c)]))
    ref_run, cand_run = results.load_run(reference), results.load_run(cand)
    verdict = compare(ref_run, cand_run, Thresholds())
    assert verdict.exit_code == 0
    assert verdict.status == "ok"
    worst = min(p.ratio for p in verdict.points)
    assert 0.98 <= worst < 1.0


def test_uniform_slowdown_fails_naming_mode_and_set(reference: Path, tmp_path: Path) -> None:
    slow = scaled(lambda m, s, c, r: 0.9 if (m, s) == ("eagle3", "coding") else 1.0)
    cand = make_regress_run(tmp_path / "cand", slow)
    code, out = run_main(reference, cand, json_path=tmp_path / "v.json")
    assert code == 1
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["status"] == "regression"
    fails = [f for f in verdict["findings"] if f["status"] == "fail"]
    assert [f["subject"] for f in fails] == ["eagle3/coding"]
    assert fails[0]["text"].startswith(
        "eagle3/coding: output tok/s -10.0% (geomean over 8 levels; c=1..128 below by 10%"
    )
    assert "95% bootstrap intervals apart" in fails[0]["text"]
    by_label = {f"{g['mode']}/{g['prompt_set']}": g for g in verdict["groups"]}
    assert by_label["eagle3/coding"]["status"] == "fail"
    assert by_label["baseline/coding"]["status"] == "ok"
    assert "FAIL eagle3/coding: output tok/s -10.0%" in out


def test_slowdown_with_repeats_uses_rank_test(tmp_path: Path) -> None:
    ref = make_regress_run(tmp_path / "ref", with_repeat_noise(model_tok_s), repeats=3, ci_pct=None,
                   levels=(1, 8, 64, 128), sets=("coding",))
    slow = scaled(lambda m, s, c, r: 0.88 if m == "eagle3" else 1.0,
                  with_repeat_noise(model_tok_s))
    cand = make_regress_run(tmp_path / "cand", slow, repeats=3, ci_pct=None, levels=(1, 8, 64, 128),
                    sets=("coding",))
    verdict = compare(results.load_run(ref), results.load_run(cand), Thresholds())
    assert verdict.exit_code == 1
    eagle = [p for p in verdict.points if p.mode == "eagle3"]
    assert all(p.test == "mann-whitney" for p in eagle)
    # 3 vs 3 with every candidate value below every reference value: exact p = 1/20.
    assert all(p.p_value == pytest.approx(0.05) for p in eagle)
    assert verdict.messages[0] == (
        "eagle3/coding: output tok/s -12.0% (geomean over 4 levels; c=1..128 below by 12%, "
        "p<=0.05)"
    )


def test_drop_inside_wide_intervals_only_warns(tmp_path: Path) -> None:
    # +-20% bootstrap intervals: a 10% drop overlaps them at each level, and over two levels
    # the geometric mean is not significant either (z = log(0.9) / 0.103 -> p ~= 0.15).
    levels = (8, 64)
    ref = make_regress_run(tmp_path / "ref", levels=levels, sets=("coding",), ci_pct=20.0)
    cand = make_regress_run(tmp_path / "cand", scaled(lambda m, s, c, r: 0.9), levels=levels,
                    sets=("coding",), ci_pct=20.0)
    verdict = compare(results.load_run(ref), results.load_run(cand))
    assert verdict.exit_code == 0 and verdict.status == "warn"
    assert all(p.test == "ci-overlap" and p.significant is False for p in verdict.points)
    group = verdict.groups[0]
    assert group.geomean_p_value == pytest.approx(0.154, abs=0.01)


def test_single_bad_level_only_warns(reference: Path, tmp_path: Path) -> None:
    bad = scaled(lambda m, s, c, r: 0.8 if (m, s, c) == ("eagle3", "coding", 16) else 1.0)
    cand = make_regress_run(tmp_path / "cand", bad)
    code, out = run_main(reference, cand)
    assert code == 0
    verdict = compare(results.load_run(reference), results.load_run(cand))
    assert verdict.status == "warn"
    point = next(p for p in verdict.points if (p.mode, p.prompt_set, p.concurrency)
                 == ("eagle3", "coding", 16))
    assert point.status == "fail" and point.change_pct == pytest.approx(-20.0)
    assert "worst c=16 -20.0%" in verdict.messages[0]
    assert "WARN eagle3/coding" in out


def test_one_level_cannot_carry_the_geomean(tmp_path: Path) -> None:
    levels = (1, 8, 64, 128)
    ref = make_regress_run(tmp_path / "ref", levels=levels, sets=("coding",))
    # -40% at one of four levels puts the geomean at -12%, beyond the fail threshold, but
    # without that level nothing changed.
    bad = scaled(lambda m, s, c, r: 0.6 if (m, c) == ("eagle3", 64) else 1.0)
    cand = make_regress_run(tmp_path / "cand", bad, levels=levels, sets=("coding",))
    verdict = compare(results.load_run(ref), results.load_run(cand))
    group = next(g for g in verdict.groups if g.mode == "eagle3")
    assert group.geomean_ratio == pytest.approx(0.6 ** 0.25)
    assert group.geomean_without_worst == pytest.approx(1.0)
    assert verdict.exit_code == 0 and group.status == "warn"


def test_spread_out_slowdown_fails_through_the_geomean(tmp_path: Path) -> None:
    levels = (1, 8, 64, 128)
    ref = make_regress_run(tmp_path / "ref", levels=levels, sets=("coding",))
    # Two non-adjacent levels 20% down: no adjacent run, but the geomean stays beyond -5%
    # without the worst level and the intervals make it significant.
    bad = scaled(lambda m, s, c, r: 0.8 if (m, c) in (("eagle3", 1), ("eagle3", 64)) else 1.0)
    cand = make_regress_run(tmp_path / "cand", bad, levels=levels, sets=("coding",))
    verdict = compare(results.load_run(ref), results.load_run(cand))
    assert verdict.exit_code == 1
    assert verdict.messages[0].startswith("eagle3/coding: output tok/s -10.6% (geomean over 4 "
                                          "levels, p=")


def test_halved_acceptance_fails(reference: Path, tmp_path: Path) -> None:
    def halved(m: str, s: str, c: int, r: int) -> float | None:
        value = model_accept(m, s, c, r)
        return None if value is None else value / 2

    cand = make_regress_run(tmp_path / "cand", accept=halved)
    verdict = compare(results.load_run(reference), results.load_run(cand))
    assert verdict.exit_code == 1
    accept = [f for f in verdict.findings if f.check == "accept_length"]
    assert {f.subject for f in accept} == {"eagle3/coding", "eagle3/agentic"}
    assert all(f.status == "fail" for f in accept)
    coding = next(f for f in accept if f.subject == "eagle3/coding")
    assert coding.text.startswith("eagle3/coding: accept length -50.0% (geomean over 8 levels, "
                                  "3.20 -> 1.60")
    # Throughput was unchanged, so only acceptance fails.
    assert not [f for f in verdict.findings if f.check == "output_tok_s"]


def test_error_rate_rise_fails(reference: Path, tmp_path: Path) -> None:
    cand = make_regress_run(tmp_path / "cand", errors=lambda m, s, c: 5 if m == "baseline" else 0)
    verdict = compare(results.load_run(reference), results.load_run(cand))
    assert verdict.exit_code == 1
    errors = [f for f in verdict.findings if f.check == "error_rate"]
    assert [f.subject for f in errors] == ["baseline/agentic", "baseline/coding"]
    assert errors[0].text.startswith("baseline/agentic: error rate 0.0% -> 9.1%")


def test_untestable_slowdown_is_insufficient_data(tmp_path: Path) -> None:
    ref = make_regress_run(tmp_path / "ref", ci_pct=None, sets=("coding",))
    cand = make_regress_run(tmp_path / "cand", scaled(lambda m, s, c, r: 0.85), ci_pct=None,
                    sets=("coding",))
    code, out = run_main(ref, cand)
    assert code == 2
    assert "no statistical test is possible" in out
    assert "--repeats 3" in out


def test_crossover_shift_from_analysis_fails(tmp_path: Path) -> None:
    def stored(c_star: float, interval: list[float]) -> dict[str, Any]:
        coding = {"outcome": "crossover", "crossover_concurrency": c_star,
                  "interval": interval, "threshold_batch_size": int(c_star)}
        return {"analysis_version": analysis.ANALYSIS_VERSION, "prompt_sets": {"coding": coding},
                "recommended_threshold": int(c_star)}

    ref = make_regress_run(tmp_path / "ref", sets=("coding",), analysis=stored(32, [28, 37]))
    cand = make_regress_run(tmp_path / "cand", sets=("coding",), analysis=stored(8, [6, 10]))
    verdict = compare(results.load_run(ref), results.load_run(cand))
    assert verdict.exit_code == 1
    (x,) = verdict.crossovers
    assert x.source == "analysis.json" and x.shift_levels == pytest.approx(-2.0)
    assert x.status == "fail"
    assert x.message.startswith("crossover/coding: c*=32 -> c*=8 (-2.0 levels, reference "
                                "interval 28-37; analysis.json); a dynamic-disable threshold")
    # Inside the reference interval the same gate passes.
    near = make_regress_run(tmp_path / "near", sets=("coding",), analysis=stored(36, [30, 40]))
    assert compare(results.load_run(ref), results.load_run(near)).exit_code == 0


def test_crossover_computed_without_analysis(reference: Path, tmp_path: Path) -> None:
    # EAGLE-3 speedup falls 0.12 per doubling from 1.6 at c=1: r(32) = 1.0. Lowering it by
    # 0.3 everywhere moves the crossover to c = 2^((1.6-0.3-1)/0.12) ~= 5.7.
    def early(m: str, s: str, c: int, r: int) -> float:
        base = model_tok_s("baseline", s, c, r)
        return base if m == "baseline" else base * (1.3 - 0.12 * math.log2(c))

    cand = make_regress_run(tmp_path / "cand", early)
    verdict = compare(results.load_run(reference), results.load_run(cand))
    coding = next(x for x in verdict.crossovers if x.prompt_set == "coding")
    assert coding.source == "computed"
    assert coding.ref_concurrency == pytest.approx(32.0)
    assert coding.cand_concurrency == pytest.approx(2 ** (0.3 / 0.12), rel=0.05)
    assert coding.status == "fail" and coding.shift_levels < -2
    assert verdict.exit_code == 1


def _with_zero_step(fraction: float) -> Any:
    """model_tok_s plus a zero-step curve at `fraction` of the baseline."""
    def tok(m: str, s: str, c: int, r: int) -> float:
        if m == "zero-step":
            return model_tok_s("baseline", s, c, r) * fraction
        return model_tok_s(m, s, c, r)
    return tok


def test_one_server_crossover_is_judged_too(tmp_path: Path) -> None:
    # EAGLE-3 meets the zero-step curve (0.8 of the baseline) where 1.6 - 0.12 log2 c = 0.8:
    # c = 2^(0.8 / 0.12) ~= 102. A faster zero-step path (0.98) moves it to 2^(0.62 / 0.12)
    # ~= 36, 1.5 levels down.
    modes = ("baseline", "eagle3", "zero-step")
    ref = make_regress_run(tmp_path / "ref", _with_zero_step(0.8), modes=modes)
    cand = make_regress_run(tmp_path / "cand", _with_zero_step(0.98), modes=modes)
    verdict = compare(results.load_run(ref), results.load_run(cand))
    one = {x.prompt_set: x for x in verdict.crossovers if x.decision == "one-server"}
    plain = {x.prompt_set: x for x in verdict.crossovers if x.decision == "plain-server"}
    assert set(one) == set(plain) == {"coding", "agentic"}
    assert one["coding"].ref_concurrency == pytest.approx(2 ** (0.8 / 0.12), rel=0.01)
    assert one["coding"].cand_concurrency == pytest.approx(2 ** (0.62 / 0.12), rel=0.01)
    assert one["coding"].status == "fail"
    assert plain["coding"].status == "ok"  # the baseline crossover did not move
    subjects = {f.subject for f in verdict.findings if f.check == "crossover"}
    assert subjects == {"one-server/coding", "one-server/agentic"}
    assert any(f.text.startswith("one-server/coding: c*=102 -> c*=36") and
               f.text.endswith("a one-server threshold taken from the reference no longer fits")
               for f in verdict.findings)
    assert verdict.exit_code == 1
    # From analysis.json when both runs have one: the same rule, the stored numbers.
    for path in (ref, cand):
        run = results.load_run(path)
        analysis.write_analysis(run)
    stored = compare(results.load_run(ref), results.load_run(cand))
    x = next(x for x in stored.crossovers
             if x.decision == "one-server" and x.prompt_set == "coding")
    assert x.source == "analysis.json" and x.status == "fail"
    assert x.ref_interval is not None


# --- unusable input ---------------------------------------------------------------------------


def test_missing_points_are_listed(reference: Path, tmp_path: Path) -> None:
    cand = make_regress_run(tmp_path / "cand", levels=(1, 2, 4, 8, 16, 32))
    code, out = run_main(reference, cand, json_path=tmp_path / "v.json")
    assert code == 2
    assert "8 reference point(s) missing in the candidate" in out
    assert "eagle3/coding c=64,128" in out and "baseline/agentic c=64,128" in out
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["status"] == "unusable" and verdict["exit_code"] == 2


def test_different_prompt_set_hash_is_unusable(reference: Path, tmp_path: Path) -> None:
    cand = make_regress_run(tmp_path / "cand",
                            hashes={"coding": "sha-other", "agentic": "sha-agentic"})
    code, out = run_main(reference, cand)
    assert code == 2
    assert "prompt set 'coding' differs (sha256 sha-coding in the reference, sha-other in" in out
    assert "agentic" not in out.split("differs")[0]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"sim_profile": "large-moe-8xh200"},
            "sim profile differs (sim.profile: reference 'llama-3.1-8b-1xh200', "
            "candidate 'large-moe-8xh200')",
        ),
        ({"model_path": "Qwen/Qwen3-8B"}, "model path differs"),
        ({"sets": ("coding",)}, "the candidate has no prompt set agentic"),
    ],
)
def test_different_engine_config_is_unusable(
    reference: Path, tmp_path: Path, kwargs: dict[str, Any], expected: str
) -> None:
    cand = make_regress_run(tmp_path / "cand", **kwargs)
    code, out = run_main(reference, cand)
    assert code == 2
    assert expected in out
    assert out.count("\n") == 1, "unusable input is reported on one line"


def test_input_problems_are_user_errors(reference: Path, tmp_path: Path) -> None:
    # The CLI prints a UserError as one line; the gate reports it as unusable input (exit 2).
    cand = make_regress_run(tmp_path / "cand", levels=(1, 2))
    with pytest.raises(regress.RegressInputError) as info:
        compare(results.load_run(reference), results.load_run(cand))
    assert isinstance(info.value, UserError)
    with pytest.raises(UserError, match="is not a directory"):
        regress.compare_dirs(reference, tmp_path / "nowhere")


def test_not_a_run_directory_is_unusable(reference: Path, tmp_path: Path) -> None:
    code, out = run_main(reference, tmp_path / "nowhere")
    assert code == 2
    assert "is not a directory" in out


def test_bad_thresholds_are_unusable(reference: Path) -> None:
    code, out = run_main(reference, reference, warn_pct=9.0, fail_pct=5.0)
    assert code == 2
    assert "warn_pct 9 is above fail_pct 5" in out


def test_extra_candidate_points_are_ignored_with_a_note(reference: Path, tmp_path: Path) -> None:
    cand = make_regress_run(tmp_path / "cand", levels=(*LEVELS, 250))
    verdict = compare(results.load_run(reference), results.load_run(cand))
    assert verdict.exit_code == 0 and len(verdict.points) == 32
    assert any("4 candidate point(s) not in the reference, ignored" in n for n in verdict.notes)


def test_reference_without_per_request_files(tmp_path: Path) -> None:
    ref = make_regress_run(tmp_path / "ref", keep_points=False)
    assert not (ref / "points").exists()
    same = make_regress_run(tmp_path / "same")
    assert run_main(ref, same)[0] == 0
    slow = make_regress_run(tmp_path / "slow",
                            scaled(lambda m, s, c, r: 0.9 if m == "baseline" else 1))
    code, out = run_main(ref, slow)
    assert code == 1
    assert "FAIL baseline/agentic: output tok/s -10.0%" in out


# --- outputs ----------------------------------------------------------------------------------


def test_step_summary_gets_markdown(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    cand = make_regress_run(tmp_path / "cand",
                            scaled(lambda m, s, c, r: 0.9 if m == "eagle3" else 1.0))
    assert run_main(reference, cand)[0] == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n## specbench regression check: REGRESSION\n")
    assert "| eagle3/coding | 8 | -10.0% | c=1 -10.0% | +0.0% | 0.0% -> 0.0% | REGRESSION |" in text
    assert "| baseline/coding | 8 | +0.0% |" in text
    assert "- eagle3/agentic: output tok/s -10.0%" in text
    # Unusable input is reported there too.
    assert run_main(reference, tmp_path / "missing")[0] == 2
    assert "## specbench regression check: unusable input" in summary.read_text()


def test_cli_appends_its_markdown_to_the_step_summary(reference: Path, tmp_path: Path) -> None:
    # `specbench regress` as a workflow step runs it: an earlier step's text stays (this one
    # left no newline at its end), the verdict goes after it on its own line, and with
    # `--json -` stdout stays pure JSON.
    from typer.testing import CliRunner

    from specbench.cli.main import app

    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step")
    args = ["regress", "--reference", str(reference), "--candidate", str(reference)]
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    result = CliRunner().invoke(app, [*args, "--json", "-"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "ok"
    first = summary.read_text()
    assert first.startswith("earlier step\n## specbench regression check: ok\n")
    assert "| baseline/coding | 8 | +0.0% |" in first
    # A second run appends again; nothing is overwritten.
    assert CliRunner().invoke(app, args, env=env).exit_code == 0
    second = summary.read_text()
    assert second.startswith(first) and second.count("## specbench regression check") == 2


def test_unwritable_step_summary_warns_and_keeps_the_verdict(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a directory: open() fails
    cand = make_regress_run(tmp_path / "cand",
                            scaled(lambda m, s, c, r: 0.9 if m == "eagle3" else 1.0))
    assert run_main(reference, cand)[0] == 1
    assert run_main(reference, reference)[0] == 0
    err = capsys.readouterr().err
    assert f"warning: could not append the verdict to $GITHUB_STEP_SUMMARY ({tmp_path})" in err


def test_json_to_stdout(reference: Path, tmp_path: Path) -> None:
    cand = make_regress_run(tmp_path / "cand", scaled(lambda m, s, c, r: 0.97))
    code, out = run_main(reference, cand, json_path="-")
    verdict = json.loads(out)
    assert code == 0 and verdict["status"] == "warn"
    assert verdict["schema"] == regress.JSON_SCHEMA
    assert verdict["groups"][0]["geomean_change_pct"] == pytest.approx(-3.0)
    assert verdict["thresholds"]["fail_pct"] == 5.0
    # A stricter fail threshold turns the same data into a regression.
    assert run_main(reference, cand, fail_pct=2.5, warn_pct=1.0)[0] == 1


# --- the rank test ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "y", "alternative", "u", "p"),
    [
        ([1, 2, 3], [4, 5, 6], "less", 0.0, 1 / 20),
        ([1, 2, 3], [4, 5, 6], "greater", 0.0, 1.0),
        ([1, 2, 3], [4, 5, 6], "two-sided", 0.0, 2 / 20),
        ([1, 3, 5], [2, 4, 6], "less", 3.0, 7 / 20),
        ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], "less", 0.0, 1 / 252),
        ([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], "greater", 25.0, 1 / 252),
    ],
)
def test_rank_test_exact_values(
    x: list[float], y: list[float], alternative: str, u: float, p: float
) -> None:
    result = mann_whitney_u(x, y, alternative)
    assert result.method == "exact"
    assert result.u == u
    assert result.p_value == pytest.approx(p)


def test_rank_test_normal_approximation_with_ties() -> None:
    # Ties force the normal approximation. U = 1 (each x=2 ties the y=2: 0.5 + 0.5), mean 4.5,
    # one tie group of 3 among N=6: sigma^2 = 9/12 * (7 - (3^3-3)/(6*5)) = 4.65.
    result = mann_whitney_u([1, 2, 2], [2, 3, 4], "less")
    assert result.method == "normal"
    assert result.u == 1.0
    z = (1.0 - 4.5 + 0.5) / math.sqrt(9 / 12 * (7 - 24 / 30))
    assert result.p_value == pytest.approx(0.5 * math.erfc(-z / math.sqrt(2)))
    assert mann_whitney_u([5, 5, 5], [5, 5, 5]).p_value == 1.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 10_000), min_size=1, max_size=9, unique=True),
    st.sampled_from(["less", "greater", "two-sided"]),
    st.integers(1, 8),
)
def test_rank_test_matches_scipy(values: list[int], alternative: str, split: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    if len(values) < 2:
        return
    k = max(1, min(split, len(values) - 1))
    x, y = values[:k], values[k:]
    ours = mann_whitney_u(x, y, alternative)
    theirs = stats.mannwhitneyu(x, y, alternative=alternative, method="exact")
    assert ours.u == pytest.approx(theirs.statistic)
    assert ours.p_value == pytest.approx(theirs.pvalue)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=4, max_size=30), st.integers(1, 29))
def test_rank_test_with_ties_matches_scipy_asymptotic(values: list[int], split: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    k = max(1, min(split, len(values) - 1))
    x, y = values[:k], values[k:]
    if len(set(values)) == len(values):
        return  # no ties: the exact path is tested above
    ours = mann_whitney_u(x, y, "less")
    theirs = stats.mannwhitneyu(x, y, alternative="less", method="asymptotic",
                                use_continuity=True)
    assert ours.p_value == pytest.approx(float(theirs.pvalue), abs=1e-9)


def test_u_distribution_counts() -> None:
    counts = u_counts(3, 3)
    assert counts == [1, 1, 2, 3, 3, 3, 3, 2, 1, 1]
    big = u_counts(12, 17)
    assert sum(big) == math.comb(29, 12) and big == big[::-1]


# --- the workflow -----------------------------------------------------------------------------


def test_workflow_is_valid_and_gates_on_regress() -> None:
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(WORKFLOW.read_text())
    triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "schedule" in triggers and "workflow_dispatch" in triggers
    assert triggers["schedule"][0]["cron"].count(" ") == 4
    assert "pull_request" in triggers and "push" in triggers
    job = doc["jobs"]["regression"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    # The user's SGLang, not one the job installs; the job's logic is the script.
    assert ".[sglang]" not in runs and "pip install -e ." in runs
    assert "python scripts/gpu_regression.py check" in runs
    uploads = [s for s in job["steps"]
               if str(s.get("uses", "")).startswith("actions/upload-artifact@v4")]
    assert uploads and all(s.get("if") == "always()" for s in uploads)
    assert any("results/candidate" in str(s["with"]["path"]) for s in uploads)
    # Every input reaches the script as its REGRESSION_* variable, through the environment.
    inputs = triggers["workflow_dispatch"]["inputs"]
    assert {"server_command", "tp_size", "server_args", "attention_backend", "port",
            "levels"} <= set(inputs)
    script = (REPO / "scripts" / "gpu_regression.py").read_text()
    for name in inputs:
        variable = "REGRESSION_NAME" if name == "reference" else f"REGRESSION_{name.upper()}"
        assert f"inputs.{name} ||" in job["env"][variable], (name, job["env"])
        assert f'("{variable.removeprefix("REGRESSION_").lower().replace("_", "-")}"' in script \
            or variable == "REGRESSION_NAME", variable
    assert "${{" not in runs  # inputs never pasted into a shell line
    assert "1,8,16,32,64,128" in job["env"]["REGRESSION_LEVELS"]
    # The simulated job: the ci preset against the committed sim-ci reference.
    sim = doc["jobs"]["sim"]
    runs = "\n".join(step.get("run", "") for step in sim["steps"])
    assert "specbench sweep --preset ci " in runs and "--engine" not in runs
    assert "specbench regress --reference results/reference/sim-ci" in runs
    assert (REPO / "results/reference/sim-ci/manifest.json").is_file()


# --- settings that may differ --------------------------------------------------------------


def _add_point(run: Path, mode: str, pset: str, c: int, tok_s: float) -> None:
    summary = {"n_requests": 50, "n_errors": 0, "window_s": 8.0, "output_tok_s": tok_s,
               "requests_per_s": tok_s / 200, "accept_length": 1.0, "flags": "",
               "output_tok_s_ci_low": tok_s * 0.98, "output_tok_s_ci_high": tok_s * 1.02}
    results.write_point(run, results.PointKey(mode, pset, c, 0),
                        pd.DataFrame({"window_tokens": [100]}), summary)
    results.rebuild_summary(run)


def test_threshold_only_dynamic_levels_may_differ(tmp_path: Path) -> None:
    # The sweep adds dynamic-only levels around the threshold (here 24 vs 28): they do not
    # repeat run to run, so they are not gated nor required; grid levels still are.
    modes = ("baseline", "eagle3", "dynamic")
    ref = make_regress_run(tmp_path / "ref", modes=modes)
    _add_point(ref, "dynamic", "coding", 24, 2000.0)
    cand = make_regress_run(tmp_path / "cand", modes=modes)
    _add_point(cand, "dynamic", "coding", 28, 2100.0)
    code, out = run_main(ref, cand)
    assert code == 0, out
    assert "1 point(s) at levels the sweep added around the threshold, not gated" in out
    assert "dynamic/coding c=24" in out
    shutil.rmtree(cand / "points" / "dynamic" / "coding")
    results.rebuild_summary(cand)
    code, out = run_main(ref, cand)
    assert code == 2
    assert "reference point(s) missing in the candidate: dynamic/coding c=1,2,4,8,16,32,64,128" \
        in out


def test_allowed_config_change_is_compared_with_a_note(reference: Path, tmp_path: Path) -> None:
    # A planted profile is passed by path, so sim.profile differs: refused unless declared.
    cand = make_regress_run(tmp_path / "cand", sim_profile="/tmp/slow.toml",
                    tok=scaled(lambda m, s, c, r: 0.9))
    code, out = run_main(reference, cand)
    assert code == 2 and "pass --allow-config-change sim.profile" in out
    code, out = run_main(reference, cand, allow_config_changes=("sim.profile",))
    assert code == 1, out
    assert "compared anyway (--allow-config-change sim.profile)" in out
    assert "FAIL baseline/coding: output tok/s -10.0%" in out
    code, out = run_main(reference, cand, allow_config_changes=("sim.time_scale",))
    assert code == 2 and "--allow-config-change sim.time_scale is not a compared setting" in out


# --- snapshots: the exact text users read -------------------------------------------------------


def _gate_outputs(
    ref: Path, cand: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str, str]:
    """Exit code, terminal text, JSON file and step summary of one `specbench regress` run.

    Temporary paths become <tmp>; the JSON's floats are compared to ten significant digits.
    """
    step_summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    buf = io.StringIO()
    code = main(ref, cand, json_path=tmp_path / "verdict.json",
                console=Console(file=buf, width=100, color_system=None))

    def clean(text: str) -> str:
        return text.replace(str(tmp_path), "<tmp>")

    verdict_json = rounded_json(clean((tmp_path / "verdict.json").read_text()))
    return code, clean(buf.getvalue()), verdict_json, clean(step_summary.read_text())


def test_snapshot_passing_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Both runs carry analysis.json, so the crossover comes from there; 1% noise per point.
    rng = random.Random(3)
    noise = {(m, s, c): rng.uniform(-0.01, 0.01) for m in MODES for s in SETS for c in LEVELS}
    ref = make_regress_run(tmp_path / "ref")
    cand = make_regress_run(tmp_path / "cand", scaled(lambda m, s, c, r: 1 + noise[(m, s, c)]))
    for path in (ref, cand):
        analysis.write_analysis(results.load_run(path))
    code, terminal, verdict_json, markdown = _gate_outputs(ref, cand, tmp_path, monkeypatch)
    assert code == 0
    assert_snapshot("regress-pass.txt", terminal)
    assert_snapshot("regress-pass.json", verdict_json)
    assert_snapshot("regress-pass.md", markdown)


def test_snapshot_regression_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # eagle3/coding 10% slower (fails, and moves the computed crossover), one baseline/agentic
    # level 4% slower, acceptance of eagle3/agentic 6% lower and one error per baseline/coding
    # point (warnings), and a candidate level the reference lacks (a note).
    def tok(m: str, s: str, c: int, r: int) -> float:
        factor = {("eagle3", "coding"): 0.9}.get((m, s), 1.0)
        if (m, s, c) == ("baseline", "agentic", 16):
            factor = 0.96
        return model_tok_s(m, s, c, r) * factor

    def accept(m: str, s: str, c: int, r: int) -> float | None:
        value = model_accept(m, s, c, r)
        return None if value is None else value * (0.94 if s == "agentic" else 1.0)

    ref = make_regress_run(tmp_path / "ref")
    cand = make_regress_run(tmp_path / "cand", tok, accept=accept, levels=(*LEVELS, 250),
                            errors=lambda m, s, c: 1 if (m, s) == ("baseline", "coding") else 0)
    code, terminal, verdict_json, markdown = _gate_outputs(ref, cand, tmp_path, monkeypatch)
    assert code == 1
    assert_snapshot("regress-regression.txt", terminal)
    assert_snapshot("regress-regression.json", verdict_json)
    assert_snapshot("regress-regression.md", markdown)
