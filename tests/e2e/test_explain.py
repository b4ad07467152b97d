"""`specbench explain` on simulated sweeps: the simulator's decode log lines speak SGLang's words,
so the step ratio, the break-even acceptance and the largest term come out per level; and the
simulator's /server_info says what SGLang 0.5.23 resolves (attention backend, graphs, overlap)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from specbench.engines.server_info import fetch_server_info, recorded
from tests.harness import run_cli, sim_server, sweep_cli

pytestmark = pytest.mark.slow

ONE_STEP = "--server-arg=--decode-log-interval=1"  # every decode step logged: steady at load


def _explained(tmp_path: Path, run_dir: Path) -> tuple[str, dict[str, Any]]:
    proc = run_cli(["explain", str(run_dir)], tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, json.loads((run_dir / "explain.json").read_text())


def test_explain_splits_each_level_of_a_simulated_sweep(tmp_path: Path, port: int) -> None:
    proc = sweep_cli(tmp_path, port, "--modes", "baseline,eagle3", "--prompts", "coding",
                     "--concurrency", "1,16,64", ONE_STEP)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "res" / "run"
    out, found = _explained(tmp_path, run_dir)
    levels = {lv["concurrency"]: lv for lv in found["prompt_sets"]["coding"]["levels"]}
    assert sorted(levels) == [1, 16, 64]
    for c, lv in levels.items():
        assert lv["batch"] == c and min(lv["steady_lines"]) >= 5
        low, high = lv["step_ratio_interval"]
        assert 1.0 < low <= lv["step_ratio"] <= high  # a verify plus drafts: dearer than a decode
        assert lv["tok_s_ratio"] == pytest.approx(
            lv["accept_length"] / lv["step_ratio"] * lv["rest"])
        assert lv["break_even_accept"] == pytest.approx(lv["step_ratio"] / lv["rest"])
        assert lv["largest"] in ("acceptance", "step", "rest") and lv["words"]
    # The verify of K + 1 tokens per request grows with the batch faster than a decode step.
    assert levels[64]["step_ratio"] > levels[1]["step_ratio"] + 0.5
    # EAGLE-3 loses at 64 users: its acceptance falls short of the break-even there.
    assert levels[64]["tok_s_ratio"] < 1.0
    assert levels[64]["accept_length"] < levels[64]["break_even_accept"]
    assert levels[64]["largest"] == "step"
    assert "coding: why eagle3 wins or loses against baseline" in out
    assert "c=1: the largest term is" in out and "explain: " in out
    report = run_cli(["report", str(run_dir)], tmp_path)
    assert report.returncode == 0, report.stderr
    assert "## Why" in (run_dir / "report.md").read_text()

    # A run directory without its servers' logs: one line, exit 2.
    bare = tmp_path / "bare"
    shutil.copytree(run_dir, bare, ignore=shutil.ignore_patterns("servers"))
    proc = run_cli(["explain", str(bare)], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and len(proc.stderr.strip().splitlines()) == 1
    assert "servers/<config>.log" in proc.stderr


def test_explain_names_acceptance_and_the_drafts_cost_on_the_moe_profile(
        tmp_path: Path, port: int) -> None:
    # moe-8xh200 reproduces the case that started specbench: acceptance about 1.6 and an
    # all-reduce per draft step, so EAGLE-3 loses even to one user.
    proc = sweep_cli(tmp_path, port, "--modes", "baseline,eagle3", "--prompts", "coding",
                     "--concurrency", "1,16", "--sim-profile", "moe-8xh200", ONE_STEP)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out, found = _explained(tmp_path, tmp_path / "res" / "run")
    one = found["prompt_sets"]["coding"]["levels"][0]
    assert one["concurrency"] == 1 and one["tok_s_ratio"] < 1.0
    assert one["largest"] == "acceptance"
    assert one["accept_length"] < 1.8 < one["break_even_accept"]
    assert one["step_ratio"] > 1.5
    assert "fall short of the break-even" in one["words"]
    assert "the draft's forwards and the verify" in one["words"]
    assert found["finding"].startswith("Why EAGLE-3 loses at the lowest load measured: coding")
    assert "the largest term is acceptance" in out
    # The report's finding carries the same sentence (not only its "Why" section).
    report = run_cli(["report", str(tmp_path / "res" / "run")], tmp_path)
    assert report.returncode == 0, report.stderr
    finding = next(line for line in (tmp_path / "res" / "run" / "report.md").read_text()
                   .splitlines() if line.startswith("**Finding.**"))
    assert "Why EAGLE-3 loses at the lowest load measured: coding at c=1" in finding


def test_the_simulators_server_info_says_what_sglang_resolved(tmp_path: Path) -> None:
    with sim_server("eagle3", tmp_path, max_running_requests=64) as server:
        info = fetch_server_info(server.base_url)
    kept = recorded(info)
    assert kept["attention_backend"] == "fa3"  # SGLang 0.5.23's default on Hopper
    assert kept["tp_size"] == 1 and kept["disable_overlap_schedule"] is False
    assert kept["speculative_eagle_topk"] == 1 and kept["speculative_num_draft_tokens"] == 4
    # speculative decode graphs up to --max-running-requests, with SGLang's spacing
    assert kept["cuda_graph_max_bs"] == 64 and kept["cuda_graph_bs"][:9] == [1, 2, 3, 4, 5, 6,
                                                                           7, 8, 10]
    assert kept["cuda_graph_bs"][-1] == 64
    assert info["cuda_graph_config"]["decode"]["backend"] == "full"
