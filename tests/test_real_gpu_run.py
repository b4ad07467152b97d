"""The committed real H200 run (results/gpu/) stays readable: analysis and report re-run on it.

It is the first run specbench launched on real SGLang (0.5.17, Triton attention, one H200); the
numbers here are what that run measured, so a change that cannot read it, or reads it
differently, fails here rather than in front of a user.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.results import load_run
from tests.harness import run_cli

RUNS = Path(__file__).resolve().parents[1] / "results" / "gpu"
RUN = RUNS / "h200-sglang-0.5.17-llama8b-shape-q0.3"
CONTEXT_RUN = RUNS / "h200-sglang-0.5.17-llama8b-shape-q0.3-context"
DERIVED = ("analysis.json", "report.md", "report.html", "plots")


def _rerun(run: Path, tmp_path_factory: pytest.TempPathFactory, *, draw: bool = False) -> Path:
    """A copy of a committed run with its analysis and report made again by `specbench report`
    (figures too with `draw`: the tests read the numbers, and drawing is most of the CPU)."""
    copy = tmp_path_factory.mktemp("gpu") / run.name
    shutil.copytree(run, copy)
    for name in DERIVED:
        path = copy / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    done = run_cli(["report", str(copy), *([] if draw else ["--no-plots"])], cwd=copy.parent,
                   timeout=300)
    assert done.returncode == 0, done.stderr
    return copy


def _one_server(copy: Path, prompt_set: str) -> dict[str, Any]:
    """A re-run copy's one-server decision for `prompt_set`, as analysis.json holds it."""
    found = json.loads((copy / "analysis.json").read_text())
    return dict(found["prompt_sets"][prompt_set]["one_server"])


@pytest.fixture(scope="module")
def rerun(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _rerun(RUN, tmp_path_factory, draw=True)


def test_the_run_names_its_hardware_and_sglang() -> None:
    manifest = json.loads((RUN / "manifest.json").read_text())
    gpu = manifest["fingerprint"]["gpus"][0]
    assert gpu["name"] == "NVIDIA H200" and gpu["driver_version"]
    assert manifest["engine"] == {"kind": "sglang", "version": "0.5.17"}
    argv = manifest["servers"]["eagle3"]["argv"]
    assert "--attention-backend" in argv and "triton" in argv
    assert (RUN / "models" / "README.md").read_text().startswith("Constructed")


def test_speculative_points_carry_the_servers_acceptance() -> None:
    rows = pd.read_parquet(RUN / "summary.parquet")
    eagle3 = rows[rows["mode"] == "eagle3"]
    assert len(eagle3) == 12
    # SGLang 0.5.17 streams no per-request counts: every figure is the server's counters'.
    assert set(eagle3["accept_source"]) == {"server"}
    assert all(2.4 < a < 2.7 for a in eagle3["accept_length"])  # Q=0.3: ideal 2.53


def test_the_run_is_complete_and_the_dynamic_server_keeps_the_better_path() -> None:
    rows = pd.read_parquet(RUN / "summary.parquet")
    grid = rows.groupby(["mode", "prompt_set"])["concurrency"].apply(sorted)
    assert len(grid) == 4 * 2 and all(levels == [1, 4, 16, 32, 64, 128] for levels in grid)
    drafting = rows[rows["mode"].isin(["eagle3", "dynamic"])]
    assert drafting["accept_length"].notna().all() and len(drafting) == 24
    # T = 129 kept the dynamic server drafting, so it should serve as fast as EAGLE-3.
    analysis = json.loads((RUN / "analysis.json").read_text())
    for name in ("coding", "agentic"):
        one_server = analysis["prompt_sets"][name]["one_server"]
        assert len(one_server["efficiency"]) == 6 and one_server["efficiency_min"] >= 0.97


def test_analysis_and_report_rerun_on_the_real_run(rerun: Path) -> None:
    analysis = json.loads((rerun / "analysis.json").read_text())
    stored = json.loads((RUN / "analysis.json").read_text())
    assert analysis == stored  # the analysis of the committed run does not drift silently
    report = (rerun / "report.md").read_text()
    assert "EAGLE-3 never wins (agentic)" in report
    coding = analysis["prompt_sets"]["coding"]["plain_server"]
    c_star, (low, high) = coding["crossover_concurrency"], coding["interval"]
    assert 4 < c_star < 16 and low <= c_star <= high
    assert math.isfinite(low) and math.isfinite(high)
    assert (rerun / "report.html").stat().st_size > 0
    assert any((rerun / "plots").glob("*.png"))  # a real run's figures draw too


def test_thresholds_name_the_prompt_lengths_they_hold_for(rerun: Path) -> None:
    analysis = json.loads((rerun / "analysis.json").read_text())
    spreads = {n: analysis["prompt_sets"][n]["prompt_tokens"] for n in ("coding", "agentic")}
    for spread in spreads.values():
        assert spread["min"] <= spread["p50"] <= spread["p90"] <= spread["max"]
        assert spread["n_requests"] > 100
    # The real tokenizer counted about 3.7k tokens per agentic prompt, 0.9k per coding prompt.
    assert spreads["agentic"]["p50"] > 2 * spreads["coding"]["p50"]
    done = run_cli(["threshold", str(rerun), "--write-adaptive-config", str(rerun / "t.json"),
                    "--prompt-set", "coding"], cwd=rerun.parent)
    assert done.returncode == 0, done.stderr
    coding = spreads["coding"]
    measured_with = f"prompts p50 {coding['p50']:,}, p90 {coding['p90']:,} tokens"
    out = " ".join(done.stdout.split())
    assert f"coding 129 ({measured_with})" in out
    assert f"context: it holds for traffic like the coding set's, measured with {measured_with}" \
        in out


def test_the_context_run_reads_back_with_its_surface(tmp_path_factory: pytest.TempPathFactory,
                                                     ) -> None:
    """The first bucketed run on the H200 (coding and agentic at up to 4k and 4k-12k prompt
    tokens): on Triton attention EAGLE-3 loses ground as the context grows."""
    copy = _rerun(CONTEXT_RUN, tmp_path_factory)
    analysis = json.loads((copy / "analysis.json").read_text())
    assert analysis == json.loads((CONTEXT_RUN / "analysis.json").read_text())
    coding = analysis["context_surface"]["coding"]
    assert [b["range"] for b in coding["buckets"]] == ["up to 4k prompt tokens",
                                                       "4k-12k prompt tokens"]
    short, long = coding["buckets"]
    assert short["plain_server"]["outcome"] == "crossover"  # c* about 7
    assert long["plain_server"]["outcome"] == "eagle3_never_wins"
    for bucket in coding["buckets"]:  # the server's own token counts fall in the bucket
        spread = bucket["prompt_tokens"]
        assert bucket["low_tokens"] < spread["min"] <= spread["max"] <= bucket["high_tokens"]
    assert "## Context length" in (copy / "report.md").read_text()


AGENTIC_CONTEXT_RUN = RUNS / "h200-sglang-0.5.17-llama8b-shape-q0.3-context-agentic"
K_TOKENS = 1024


def test_the_agentic_context_run_keeps_drafting_in_both_buckets() -> None:
    """Agentic EAGLE-3 and zero-step per bucket on the H200 (buckets of version 2: every prompt
    the server counted falls in its bucket): EAGLE-3 beats its zero-step path by 2x or more at
    every level of both buckets, so the one-server threshold is "never switch" at 4k and 12k."""
    analysis = json.loads((AGENTIC_CONTEXT_RUN / "analysis.json").read_text())
    for name in ("agentic@4k", "agentic@12k"):
        found = analysis["prompt_sets"][name]
        assert found["one_server"]["outcome"] == "eagle3_always_wins"
        assert found["one_server"]["threshold_batch_size"] == 33  # never switch: top level + 1
        assert found["plain_server"]["outcome"] is None  # no baseline in this run
    rows = pd.read_parquet(AGENTIC_CONTEXT_RUN / "summary.parquet")
    tok_s = rows.pivot_table(index=["prompt_set", "concurrency"], columns="mode",
                             values="output_tok_s")
    assert list(tok_s.index) == [(s, c) for s in ("agentic@12k", "agentic@4k") for c in (1, 8, 32)]
    assert (tok_s["eagle3"] / tok_s["zero-step"] > 2.0).all()
    eagle3 = rows[rows["mode"] == "eagle3"]
    assert set(eagle3["accept_source"]) <= {"server", "server_gauge"}  # SGLang's own counters
    assert all(2.4 < a < 2.8 for a in eagle3["accept_length"])
    bounds = {"agentic@4k": (0, 4 * K_TOKENS), "agentic@12k": (4 * K_TOKENS, 12 * K_TOKENS)}
    for path in AGENTIC_CONTEXT_RUN.glob("points/*/*/*.parquet"):
        low, high = bounds[path.parent.name]
        counted = pd.read_parquet(path, columns=["prompt_tokens"])["prompt_tokens"].dropna()
        assert len(counted) and low < counted.min() and counted.max() <= high, path


def test_a_run_without_a_baseline_reports_its_missing_grid_in_one_line(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    report = (_rerun(AGENTIC_CONTEXT_RUN, tmp_path_factory) / "report.md").read_text()
    assert "| 4k | 2.38 | 2.20 | 2.32 |" in report  # EAGLE-3 / zero-step, measured
    assert ("EAGLE-3 / baseline (plain server: c*): not measured (no baseline curve in this "
            "run).") in report
    assert "| 4k | – | – | – |" not in report


@pytest.mark.parametrize("name", [
    "h200-sglang-0.5.17-llama8b-shape-q0.3-context-agentic",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-agentic-rerun",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-agentic-fresh",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-agentic-fresh-gclog",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-agentic-repeats/A-fresh",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-agentic-repeats/B-sweep",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-agentic-repeats/C-again",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-agentic-steps",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-coding-steps",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-agentic-c4",
    "h200-sglang-0.5.17-llama8b-shape-q0.3-coding-small",
    "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-coding-prof-zero-step",
    "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-launch-k",
    "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-agentic-prof",
    "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-agentic-steps",
    "h100-sglang-0.5.17-llama8b-shape-q0.3-triton-ends",
    "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-ends",
    # (the other H100 runs: test_a_narrow_crossover_interval_reads_as_two_numbers and
    # test_the_real_tune_run_measures_its_schedule_against_sglangs_default)
])
def test_the_other_real_runs_report(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    copy = _rerun(RUNS / name, tmp_path_factory)
    assert (copy / "report.md").read_text().strip()
    assert not (copy / "plots").exists()  # report --no-plots draws nothing


REPEATS = RUNS / "h200-sglang-0.5.17-llama8b-shape-q0.3-agentic-repeats"

def _run(tail: str) -> Path:
    return RUNS / f"h200-sglang-0.5.17-llama8b-shape-q0.3{tail}"


# The same agentic requests, flags and windows; split by what each server had served before
# its c = 64 point: nothing (or only its own c = 64 point before c = 128), or more.
FRESH_RUNS = [_run("-agentic-fresh"), _run("-agentic-fresh-gclog"), REPEATS / "A-fresh",
              _run("-agentic-steps")]
USED_RUNS = [_run(""), _run("-agentic-rerun"), REPEATS / "B-sweep", REPEATS / "C-again"]
GEN2_OBJECTS = re.compile(r"Generation 2 \| Duration: [\d.]+s \| # Objects: .*gen2=(\d+)")


def _baseline_agentic(run: Path, concurrency: int) -> tuple[float, float, float]:
    """(tok/s, 95% low, 95% high) of the plain server's agentic point at `concurrency`."""
    rows = pd.read_parquet(run / "summary.parquet")
    row = rows[(rows["mode"] == "baseline") & (rows["prompt_set"] == "agentic")
               & (rows["concurrency"] == concurrency)].iloc[0]
    return row["output_tok_s"], row["output_tok_s_ci_low"], row["output_tok_s_ci_high"]


def test_the_plain_servers_agentic_throughput_at_load_spreads_from_run_to_run() -> None:
    """Eight runs of the same agentic requests on the plain server: at c = 64 and 128 their
    tok/s spread by more than 1.4x and the slowest and fastest runs' 95% intervals do not
    overlap. At c = 128 every server that had served at most its own c = 64 point beat every
    one that had served more; at c = 64 a fresh server is not simply the faster one (repeat A,
    fresh, made less than C on the same server after two sweeps). The tokenizer manager's
    gen-2 heap does not grow through the repeats (SGLang's own GC log)."""
    for c in (64, 128):
        points = sorted(_baseline_agentic(run, c) for run in FRESH_RUNS + USED_RUNS)
        slowest, fastest = points[0], points[-1]
        assert fastest[0] / slowest[0] > 1.4, (c, points)
        assert slowest[2] < fastest[1], (c, points)
    assert (min(_baseline_agentic(run, 128)[0] for run in FRESH_RUNS)
            > max(_baseline_agentic(run, 128)[0] for run in USED_RUNS))
    assert _baseline_agentic(REPEATS / "A-fresh", 64)[0] < _baseline_agentic(
        REPEATS / "C-again", 64)[0]
    with lzma.open(REPEATS / "server.log.xz", "rt") as log:
        objects = [int(n) for n in GEN2_OBJECTS.findall(log.read())]
    assert len(objects) >= 8 and min(objects) > 700_000 and max(objects) < 900_000, objects


FLASHINFER = _run("-flashinfer")


def test_the_flashinfer_run_swept_its_cold_first_point_and_names_its_backend(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The first FlashInfer run (issue 36) began on a cold kernel cache. Its first point's
    second request was the first prefix-cache hit: FlashInfer compiled its cascade kernel and
    every request waited ~9.7 s for a token. The warmup waited that out (the window opened
    within 0.1 s of that request's first token) instead of failing the point."""
    manifest = json.loads((FLASHINFER / "manifest.json").read_text())
    argv = manifest["servers"]["baseline"]["argv"]
    assert argv[argv.index("--attention-backend") + 1] == "flashinfer"
    first = pd.read_parquet(FLASHINFER / "points" / "baseline" / "coding" / "c1-r0.parquet")
    stalled = first.iloc[0]
    assert stalled["ttft_ms"] > 8000 and -0.1 < stalled["t_first_token_s"] <= 0.0
    assert all(p["status"] == "ok" and p["attempts"] == 1 for p in manifest["points"].values())
    copy = _rerun(FLASHINFER, tmp_path_factory)
    summary = load_run(copy).summary
    cold = summary[(summary["mode"] == "baseline") & (summary["prompt_set"] == "coding")
                   & (summary["concurrency"] == 1)].iloc[0]
    assert cold["warmup_s"] > 9.0
    speculative = summary[summary["mode"].isin(["eagle3", "zero-step"])]
    assert speculative["accept_length"].notna().all()
    assert "Measured on 1x NVIDIA H200, SGLang 0.5.17, flashinfer attention;" in (
        copy / "report.md").read_text()


DEFLEN = _run("-flashinfer-deflen")


def test_the_default_lengths_run_is_the_workload_its_script_writes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The real run at the default profile's output lengths (issue 37) sent the prompt file
    `lab/gpu/default_lengths.py` writes: the script, run again here, writes the file the
    manifest hashed, and the report read again puts c* where the run's notes say (24.4)."""
    manifest = json.loads((DEFLEN / "manifest.json").read_text())
    script = RUNS.parents[1] / "lab" / "gpu" / "default_lengths.py"
    done = subprocess.run([sys.executable, str(script), "coding", "llama-3.1-8b-1xh200"],
                          capture_output=True, check=True, cwd=RUNS.parents[1])
    assert hashlib.sha256(done.stdout).hexdigest() == \
        manifest["prompt_sets"]["coding-deflen"]["sha256"]
    caps = [r["max_tokens"] for r in map(json.loads, done.stdout.decode().splitlines())
            if isinstance(r["max_tokens"], int)]
    assert 300 < sum(caps) / len(caps) < 360  # the default's 380-token mean, under the rows' caps
    copy = _rerun(DEFLEN, tmp_path_factory)
    crossing = json.loads((copy / "analysis.json").read_text())["prompt_sets"]["coding-deflen"]
    assert crossing["outcome"] == "crossover"
    assert crossing["crossover_concurrency"] == pytest.approx(24.4, abs=0.05)
    assert crossing["sampling_interval"] == pytest.approx([22.9, 25.7], abs=0.05)
    assert crossing["interval"] == pytest.approx([22.5, 26.2], abs=0.05)  # with the chord


H100_STEPS = RUNS / "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-coding-steps"


def test_one_step_at_a_time_the_flashinfer_prefill_forwards_cost_no_overhead() -> None:
    """The FlashInfer server logged every decode step (issue 37; an H100 came for the H200 asked
    for): its short prefill forwards at 16-64 running cost less beyond the step beside them than
    the simulator's GEMMs and extend alone, on the plain server and EAGLE-3 alike, so both
    prefill overheads fit to 0 where the 40-step intervals of the H200 run read 14.5 ms and
    1.32 ms per running request."""
    script = RUNS.parents[1] / "lab" / "gpu" / "fit_profile.py"
    done = subprocess.run(
        [sys.executable, str(script), str(FLASHINFER), "--prompt-set", "coding",
         "--keep-frontend", "--profile", "llama-3.1-8b-1xh200-flashinfer",
         "--steps-run", str(H100_STEPS)],
        capture_output=True, text=True, check=True, cwd=RUNS.parents[1])
    assert "[overheads] o_prefill_ms = 0\n" in done.stdout
    assert "[overheads] o_spec_prefill_per_running_req_ms = 0\n" in done.stdout
    table = done.stdout.split("one step at a time: mean per short prefill forward")[1]
    rows = [line.split() for line in table.splitlines()[2:8]]
    assert [(r[1], int(r[2])) for r in rows] == [
        (mode, b) for mode in ("baseline", "eagle3") for b in (16, 32, 64)]
    assert all(int(r[4]) >= 8 and float(r[6]) < float(r[7]) for r in rows), rows
    manifest = json.loads((H100_STEPS / "manifest.json").read_text())
    assert "H100" in json.dumps(manifest["fingerprint"])


def test_a_narrow_crossover_interval_reads_as_two_numbers(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Paired requests put the H100 run's c* in [26.6, 27.5] (the chord between 16 and 32
    widens that to [24.6, 29.6]): whole numbers would print such an interval as "27–27", so a
    sentence gives a narrow one a decimal."""
    from specbench.analysis.text import interval_words

    assert interval_words(26.59, 27.49) == "26.6–27.5"
    report = (_rerun(H100_STEPS, tmp_path_factory) / "report.md").read_text()
    assert "below 27 concurrent requests (coding; 95% interval 25–30)" in report


def test_the_real_tune_run_measures_its_schedule_against_sglangs_default(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Issue 40's tune run, all 84 points: K = 3 wins every coding level and the tuned coding
    server (K = 3 alone) is within 2% of it everywhere and x1.27 over SGLang's default; on
    agentic the durations of the same requests favour K = 5 at c = 32 alone, the one-drafting-K
    rule keeps K = 3, and the tuned agentic server measured again with it (its first, launched
    at K = 5, kept as a log) runs K = 3 everywhere, x1.11 over the default; SGLang's default
    runs K = 3 to 16, then its 32-63 slot's 0/1 and its 64 slot's 0 (by tokens per verify);
    every tuned / default ratio carries its interval."""
    run = RUNS / "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-tune"
    copy = _rerun(run, tmp_path_factory)
    sets = json.loads((copy / "analysis.json").read_text())["prompt_sets"]
    coding, agentic = sets["coding"]["schedule"], sets["agentic"]["schedule"]
    assert set(coding["candidates"]) == {"0", "1", "2", "3", "5"}
    assert coding["slots"] == {"1": 3} and set(coding["per_level"].values()) == {3}
    # One drafting K (analysis/schedule.py): agentic's K = 5 at c = 32 alone gives way to K = 3.
    assert agentic["measured_best"]["32"] == 5 and agentic["slots"] == {"1": 3}
    assert agentic["applied_slots"] == {"1": 3}
    assert (run / "servers" / "tuned-agentic.launched-k5.log.xz").exists()
    assert coding["efficiency_min"] >= 0.97
    # The same configuration as the static K = 3 server, launched again: within 7% on agentic.
    assert agentic["efficiency_min"] > 0.93
    assert [c for c, e in agentic["efficiency"].items() if e < 0.97] == ["16", "64"]
    assert coding["steps_by_accept"]["sglang-default"] == {
        "1": 3, "4": 3, "16": 3, "32": 1, "64": 0, "128": 0}
    assert set(agentic["steps_by_accept"]["tuned"].values()) == {3}
    for schedule in (coding, agentic):
        intervals = schedule["vs_sglang_default_interval"]
        assert set(intervals) == {"1", "4", "16", "32", "64", "128"}
        assert all(lo <= schedule["vs_sglang_default"][c] <= hi
                   for c, (lo, hi) in intervals.items())
    assert coding["vs_sglang_default_geomean"] > 1.2
    assert 1.05 < agentic["vs_sglang_default_geomean"] < 1.2
    assert agentic["vs_sglang_default_interval"]["64"][1] < 1  # the default ahead at 64
    assert coding["vs_sglang_default_interval"]["32"][0] > 1.4  # the default's 0/1 flips at 32
    report = (copy / "report.md").read_text()
    assert ("Tuned schedule (batch size → steps): 1→3; lowest efficiency 0.938 (under 0.97, "
            "95% within one launch: c=16 0.943 [0.918–0.967], c=64 0.938 [0.851–1.037]);") in report
    assert "(the tuned server measured here ran" not in report
    assert "tuned / SGLang's default by level (95%): c=1 ×1.40 [" in report


def test_the_model_overcharges_agentic_steps_where_running_requests_share_prefixes() -> None:
    """Issue 37's `-agentic-steps` run (the plain server and zero-step on agentic, one step a
    log line, an H100): where the running requests' summed contexts are far over the KV pool's
    distinct tokens (shared prefixes, at 128 running), the real plain step over the FlashInfer
    profile's at the same summed context is well under the card's own factor (the coding steps'
    ratio); where little is shared (16) it is near it; charging a shared block's later reads
    at 0.4 of a first read (the profile's shared_read_fraction) brings it near. Zero-step's
    excess over the plain step grows with the batch."""
    import statistics

    from specbench.sim.costmodel import load_profile
    from tests.fit_steps import one_step_samples, real_over_model, run_log_interval

    profile = load_profile("llama-3.1-8b-1xh200-flashinfer")
    prefix = "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-"

    def lines(run: str, running: int) -> list[Any]:
        return [x for x in one_step_samples(RUNS / f"{prefix}{run}") if x.batch == running]

    # The fit reads a run logged every step as such (its contexts grow one step a line).
    assert run_log_interval(RUNS / f"{prefix}agentic-steps") == 1
    assert run_log_interval(RUNS / f"{prefix}tune") == 40
    card = real_over_model(lines("coding-steps", 64), profile, 1.0)
    shared, little = lines("agentic-steps", 128), lines("agentic-steps", 16)
    assert statistics.median(x.kv_tokens / x.pool_tokens for x in shared) > 2.5
    assert statistics.median(x.kv_tokens / x.pool_tokens for x in little) < 1.3
    assert real_over_model(shared, profile, 1.0) < 0.75 * card
    assert real_over_model(little, profile, 1.0) > 0.85 * card
    assert real_over_model(shared, profile, 0.4) > 0.85 * card
    run = RUNS / f"{prefix}agentic-steps"
    plain = _step_ms_by_running(run / "servers" / "baseline.log.xz", accept_default=1.0)
    zero = _step_ms_by_running(run / "servers" / "zero-step.log.xz")
    excess = [zero[b] - plain[b] for b in (16, 32, 64, 128)]
    assert excess == sorted(excess) and excess[-1] > 3 * excess[0]


def test_an_adaptive_server_below_its_launch_k_takes_longer_steps() -> None:
    """Issue 40's `-launch-k` run: a server launched at K = 5 and run at K = 3 from batch size 1
    (`--schedule 0:5,1:3`) against the static K = 3 server, one step a log line: the same tokens
    per verify, steps over 20% longer at 1, 16 and 64 running; the kernel profiles put the extra
    time mostly in the host's gaps between kernels."""
    run = RUNS / "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-launch-k"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["tuned"] == {"coding": {"0": 5, "1": 3}}
    steps = {mode: _step_ms_by_running(run / "servers" / f"{mode}.log.xz")
             for mode in ("eagle3", "tuned")}
    for running in (1, 16, 64):
        assert steps["tuned"][running] > 1.2 * steps["eagle3"][running], (running, steps)
    rows = json.loads((run / "profile-steps.json").read_text())["rows"]
    for c in (1, 16, 64):
        tuned, static = rows[f"tuned-c{c}"], rows[f"eagle3-c{c}"]
        assert tuned["idle"] - static["idle"] > 3.0


def _step_ms_by_running(log: Path, accept_default: float | None = None) -> dict[int, float]:
    """Median ms per step at each running-request count, from one-step `Decode batch` lines
    (requests x tokens per verify / the line's tok/s), read with explain's parser; a plain
    server's lines carry no tokens per verify (give `accept_default` 1)."""
    import statistics

    from specbench.analysis.steps import DECODE_LINE, read_log

    found: dict[int, list[float]] = {}
    for text in read_log(log):
        m = DECODE_LINE.search(text)
        accept = float(m["accept"]) if m and m["accept"] else accept_default
        if m and accept and float(m["tok_s"]) > 0:
            running = int(m["batch"])
            found.setdefault(running, []).append(running * accept * 1000 / float(m["tok_s"]))
    return {running: statistics.median(v) for running, v in found.items()}


def test_a_crossing_read_off_a_chord_holds_a_second_launchs_finer_one() -> None:
    # The H100 run measured EAGLE-3 and the baseline at 4, 16, 32, 64: c* is read off the
    # chord between 16 and 32. A second launch at 8, 16, 24, 32 put it at 28.7; the draws'
    # interval of this run (26.6-27.5) did not hold that, the one with the chord's error does.
    from specbench.analysis import analyze

    run = load_run(RUNS / "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-coding-steps")
    coding = analyze(run)["prompt_sets"]["coding"]
    low, high = coding["interval"]
    sampling_low, sampling_high = coding["sampling_interval"]
    assert not sampling_low <= 28.7 <= sampling_high
    assert low <= 28.7 <= high


def test_explain_reads_the_resumed_triton_run_and_names_the_speculative_step(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # The first real run resumed across launches lost mid-point: its logs hold a flush more per
    # lost launch than its points have attempts. Each launch's last flush is then the lost
    # attempt, and the rest line up with the points.
    run = tmp_path_factory.mktemp("triton") / "run"
    shutil.copytree(RUN, run)
    proc = run_cli(["explain", str(run)], cwd=run.parent, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    coding = json.loads((run / "explain.json").read_text())["prompt_sets"]["coding"]
    by_c = {level["concurrency"]: level for level in coding["levels"]}
    # Triton's verify: the speculative step costs 1.9x a plain one at batch 1 and grows with
    # the batch, and it is the largest term wherever the 40-step lines have steady decodes.
    assert [by_c[c]["largest"] for c in (1, 4, 16, 32)] == ["step"] * 4
    ratios = [by_c[c]["step_ratio"] for c in (1, 4, 16, 32)]
    assert ratios == sorted(ratios) and 1.5 < ratios[0] < 2.2 and ratios[-1] > 4.0
    assert "verify" in by_c[16]["words"]


def test_a_real_server_reads_equal_ends_faster_and_the_flag_says_so() -> None:
    # The coding prompts at c = 64 with every cap 330 tokens against caps drawn from the default
    # profile's length law (mean 330); the constructed pair never stops early. Equal caps run
    # in lockstep (every user's next prompt prefilled in one burst: TTFT p50 ~490 ms against
    # ~40), and read 17.7% more tok/s.
    rows = pd.read_parquet(RUNS / "h100-sglang-0.5.17-llama8b-shape-q0.3-triton-ends"
                           / "summary.parquet").set_index("prompt_set")
    equal, staggered = rows.loc["coding-equal"], rows.loc["coding-staggered"]
    assert "lockstep_ends" in str(equal["flags"])
    assert "lockstep_ends" not in str(staggered["flags"])
    assert staggered["output_tok_s"] / equal["output_tok_s"] < 0.85
    assert equal["ttft_ms_p50"] > 5 * staggered["ttft_ms_p50"]


ENDS = RUNS / "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-ends"


def test_a_real_flashinfer_server_reads_equal_ends_faster_and_records_the_tree() -> None:
    # Every cap 330 tokens against caps drawn around the same mean, c = 16 and 64: the plain
    # server loses 2% and 17% with staggered ends; only the equal-cap points are flagged.
    rows = pd.read_parquet(ENDS / "summary.parquet").set_index(
        ["mode", "prompt_set", "concurrency"])
    for mode in ("baseline", "eagle3", "eagle3-k3-t4-d8"):
        for c in (16, 64):
            assert "lockstep_ends" in str(rows.loc[(mode, "coding-equal", c), "flags"])
            assert "lockstep_ends" not in str(rows.loc[(mode, "coding-staggered", c), "flags"])
    base = rows.loc["baseline"]["output_tok_s"]
    assert base[("coding-staggered", 64)] < 0.85 * base[("coding-equal", 64)]
    # The tree's acceptance is recorded as the chain's is (the constructed draft's top-1 is its
    # only right token, so the tree accepts what the chain does), and its dearer verify costs.
    for prompt_set in ("coding-equal", "coding-staggered"):
        tree = rows.loc[("eagle3-k3-t4-d8", prompt_set, 64)]
        chain = rows.loc[("eagle3", prompt_set, 64)]
        assert tree["accept_length"] == pytest.approx(chain["accept_length"], rel=0.01)
        assert 2.0 < tree["accept_length"] < 4.0
        assert tree["output_tok_s"] < chain["output_tok_s"]
    report = (ENDS / "report.md").read_text()
    assert "Drafts measured as static trees: eagle3-k3-t4-d8" in report


def test_explain_reads_the_flashinfer_profile_and_its_logs_alike(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # SGLang's profiler at c = 64: the kernels' step ratio within 10% of the one-step logs'
    # (2.68 against 2.95 with equal caps, 2.96 against 3.03 staggered), once the lines logged
    # under the profiler (and the 1.5-s one after its trace was written) are out of the steady
    # steps. The speculative step, not acceptance, moves EAGLE-3 below the plain server.
    run = tmp_path_factory.mktemp("ends") / ENDS.name
    shutil.copytree(ENDS, run)
    proc = run_cli(["explain", str(run)], cwd=run.parent, timeout=300)
    assert proc.returncode == 0, proc.stderr
    sets = json.loads((run / "explain.json").read_text())["prompt_sets"]
    for name in ("coding-equal", "coding-staggered"):
        (profile,) = sets[name]["profiles"]
        assert profile["concurrency"] == 64
        assert profile["kernel_ratio"] == pytest.approx(profile["log_step_ratio"], rel=0.10)
        assert profile["step_ratio"] != pytest.approx(profile["log_step_ratio"], rel=0.10)
        by_c = {level["concurrency"]: level for level in sets[name]["levels"]}
        assert by_c[64]["step_ratio"] < 3.2  # no profiler stall among the steady lines
        assert by_c[16]["tok_s_ratio"] > 1.0 > by_c[64]["tok_s_ratio"]
        crossing = sets[name]["crossing"]
        assert "The speculative step (draft forwards and the verify) moved it below" in crossing
        assert "verify attention" in crossing


def test_a_dynamic_server_at_t_1_is_a_relaunch_of_zero_step(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # Agentic at 64 and 128 on an H100: zero-step as fast as EAGLE-3 at both, so T = 1 and the
    # dynamic server ran zero-step's own adaptive config. Its E reads what a relaunch moves:
    # 0.94 at 64, an interval (paired by request) that leaves 1 out.
    name = "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-straddle-agentic"
    copy = _rerun(RUNS / name, tmp_path_factory)
    servers = RUNS / name / "servers"
    assert (json.loads((servers / "dynamic.adaptive.json").read_text())
            == json.loads((servers / "zero-step.adaptive.json").read_text()))
    one = _one_server(copy, "agentic")
    assert one["threshold_batch_size"] == 1 and one["outcome"] == "eagle3_never_wins"
    assert one["efficiency"]["64"] < 0.97 and one["efficiency_interval"]["64"][1] < 1.0
    assert one["efficiency_interval"]["128"][0] < 1.0 < one["efficiency_interval"]["128"][1]
    finding = (copy / "report.md").read_text().split("\n\n")[1]
    assert "never draft, T = 1" in finding
    assert "what a second launch of one configuration moves, not its threshold" in finding


def test_the_dynamic_server_holds_at_its_own_t_with_the_static_points_there(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # Agentic on an H200: T = 26 chosen from 16 and 32, both static servers measured again at
    # 25, 26 and 27 beside the dynamic one. No E there rests on an interpolation, and none is
    # under 0.97; the dynamic server switched at T and above, and drafted below.
    name = "h200-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-straddle-agentic"
    copy = _rerun(RUNS / name, tmp_path_factory)
    assert json.loads((copy / "analysis.json").read_text())["applied_threshold"] == 26
    one = _one_server(copy, "agentic")
    assert set(one["efficiency"]) == {"16", "25", "26", "27"}
    assert one["efficiency_interpolated"] == [] and one["efficiency_short"] == {}
    assert min(one["efficiency"].values()) >= 0.97
    assert one["efficiency"]["26"] == pytest.approx(0.983, abs=0.001)
    assert one["efficiency_interval"]["26"] == pytest.approx([0.945, 1.021], abs=0.001)
    summary = load_run(copy).summary
    dynamic = summary[summary["mode"] == "dynamic"].set_index("concurrency")
    assert dynamic.loc[25, "server_switches"] == 0 and dynamic.loc[25, "accept_length"] > 2.5
    assert dynamic.loc[26, "server_switches"] == 40 and dynamic.loc[26, "accept_length"] < 1.3
    # The points at T-1..T+1 moved the recommendation to 24, inside its interval.
    assert one["threshold_batch_size"] == 24 and one["interval"] == pytest.approx([19.58, 30.76])

    coding = "h200-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-straddle-coding"
    one = _one_server(_rerun(RUNS / coding, tmp_path_factory), "coding")
    assert one["threshold_batch_size"] == 1
    assert one["efficiency"] == pytest.approx({"64": 0.979, "128": 1.035}, abs=0.001)
