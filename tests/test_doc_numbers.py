"""Numbers the docs quote from a committed run are what `specbench threshold` prints on it today:
a change to the analysis that moves them fails here until the docs say the new ones."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from specbench.results import load_run
from tests.harness import run_cli

REPO = Path(__file__).resolve().parents[1]
FLASHINFER = REPO / "results" / "gpu" / "h200-sglang-0.5.17-llama8b-shape-q0.3-flashinfer"
# The docs that quote `specbench threshold` on that run (coding's decision lines).
QUOTING = ("README.md", "docs/gpu-quickstart.md")
DECISION = re.compile(r"^\s*(one server|plain server): c\* = .*$")


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    copy = tmp_path_factory.mktemp("doc") / FLASHINFER.name
    shutil.copytree(FLASHINFER, copy)  # threshold rewrites a stale analysis.json
    done = run_cli(["threshold", str(copy), "--prompt-set", "coding"], cwd=copy.parent,
                   timeout=300)
    assert done.returncode == 0, done.stderr
    return [line.strip() for line in done.stdout.splitlines()]


def quoted(doc: str) -> list[str]:
    return [m.group(0).strip() for line in (REPO / doc).read_text().splitlines()
            if (m := DECISION.match(line))]


@pytest.mark.parametrize("doc", QUOTING)
def test_each_quoted_decision_line_is_printed_today(doc: str, printed: list[str]) -> None:
    lines = quoted(doc)
    assert lines, f"{doc} quotes no decision line"
    for line in lines:
        # "(abridged)": a quote may stop before the end of the printed line.
        assert any(out.startswith(line) for out in printed), (doc, line, printed)


def test_the_check_fails_on_a_stale_quote(printed: list[str]) -> None:
    stale = ("one server: c* = 81.7 (95% interval 67.9–94.8), server batch size 80.4 -> "
             "threshold 81 (interval 67–94), bootstrap support 100%")
    assert not any(out.startswith(stale) for out in printed)


ENDS = REPO / "results" / "gpu" / "h100-sglang-0.5.17-llama8b-shape-q0.3-triton-ends"


def test_the_equal_against_staggered_numbers_are_the_committed_runs() -> None:
    rows = pd.read_parquet(ENDS / "summary.parquet").set_index("prompt_set")["output_tok_s"]
    equal, staggered = rows["coding-equal"], rows["coding-staggered"]
    drop = f"{100 * (1 - staggered / equal):.1f}% lower"
    for doc in ("docs/reading-results.md", "results/gpu/README.md"):
        text = " ".join((REPO / doc).read_text().split())
        assert f"{equal:,.0f}" in text and f"{staggered:,.0f}" in text, doc
        assert drop in text, (doc, drop)


FLASHINFER_ENDS = REPO / "results" / "gpu" / "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-ends"


def _on_a_copy(run: Path, command: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of a committed run after `specbench COMMAND` on it (the run itself stays as is)."""
    copy = tmp_path_factory.mktemp(command) / run.name
    shutil.copytree(run, copy)
    figures = ["--no-plots"] if command == "report" else []  # the numbers, not the figures
    done = run_cli([command, str(copy), *figures], cwd=copy.parent, timeout=300)
    assert done.returncode == 0, done.stderr
    return copy


def test_the_flashinfer_equal_against_staggered_numbers_are_the_committed_run() -> None:
    rows = pd.read_parquet(FLASHINFER_ENDS / "summary.parquet")
    base = rows[rows["mode"] == "baseline"].set_index(["prompt_set", "concurrency"])["output_tok_s"]
    text = " ".join((REPO / "docs/reading-results.md").read_text().split())
    for c in (16, 64):
        equal, staggered = base[("coding-equal", c)], base[("coding-staggered", c)]
        quoted = (f"{equal:,.0f} against {staggered:,.0f}",
                  f"{100 * (1 - staggered / equal):.1f}% lower")
        assert all(q in text for q in quoted), (c, quoted)


def test_the_step_profile_numbers_are_what_explain_says_today(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # reading-results.md and validation.md quote the FlashInfer run's kernel and log ratios at
    # c = 64 and (reading-results.md) where EAGLE-3 ties the plain server with equal caps.
    copy = _on_a_copy(FLASHINFER_ENDS, "explain", tmp_path_factory)
    sets = json.loads((copy / "explain.json").read_text())["prompt_sets"]
    (equal,), (staggered,) = sets["coding-equal"]["profiles"], sets["coding-staggered"]["profiles"]
    quoted = [f"{p[key]:.2f}" for key in ("kernel_ratio", "log_step_ratio")
              for p in (equal, staggered)]
    for doc in ("docs/reading-results.md", "docs/validation.md"):
        text = " ".join((REPO / doc).read_text().split())
        assert all(q in text for q in quoted), (doc, quoted)
    tie = re.search(r"ties the plain server at about c = (\d+)", sets["coding-equal"]["crossing"])
    assert tie is not None
    reading = " ".join((REPO / "docs/reading-results.md").read_text().split())
    assert f"EAGLE-3 ties at about c = {tie[1]} between 16 and 64" in reading


STRADDLE = (REPO / "results" / "gpu"
            / "h200-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-straddle-agentic")


def test_the_dynamic_servers_e_at_its_own_t_is_what_the_run_reads_today(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # validation.md and reading-results.md quote E per level and the flips at T of the H200
    # agentic straddle run.
    copy = _on_a_copy(STRADDLE, "report", tmp_path_factory)
    one = json.loads((copy / "analysis.json").read_text())["prompt_sets"]["agentic"]["one_server"]
    e = {int(c): f"{value:.3f}" for c, value in one["efficiency"].items()}
    low = min(lo for lo, _ in one["efficiency_interval"].values())
    switches = load_run(copy).summary.query("mode == 'dynamic' and concurrency == 26")
    flips = f"{int(switches['server_switches'].iloc[0])} flips"
    validation = " ".join((REPO / "docs/validation.md").read_text().split())
    quoted = [f"E {e[16]} at 16, {e[25]} at 25, {e[26]} at 26 and {e[27]} at 27",
              f"down to {low:.3f}", flips]
    assert all(q in validation for q in quoted), quoted
    reading = " ".join((REPO / "docs/reading-results.md").read_text().split())
    assert f"{flips.split()[0]} times a 12-s window" in reading
    assert f"E {e[26]} and {e[27]}" in reading


TUNED = (REPO / "results" / "gpu"
         / "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-tuned-agentic")


def test_the_tuned_servers_e_beside_its_static_points_is_what_the_run_reads_today(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    # validation.md quotes the tuned agentic server's E per level, its intervals and its ratio
    # to EAGLE-3, from the H100 run that measured both static servers beside it.
    copy = _on_a_copy(TUNED, "report", tmp_path_factory)
    schedule = json.loads((copy / "analysis.json").read_text())["prompt_sets"]["agentic"][
        "schedule"]
    assert schedule["applied_slots"] == {"1": 3}
    e, band = schedule["efficiency"], schedule["efficiency_interval"]
    tok_s = load_run(copy).summary.set_index(["mode", "concurrency"])["output_tok_s"]
    vs_eagle3 = {c: tok_s[("tuned", c)] / tok_s[("eagle3", c)] for c in (16, 64)}
    # It ran what EAGLE-3 ran at both levels; under 0.97 only where zero-step led EAGLE-3.
    assert min(vs_eagle3.values()) >= 0.97
    assert tok_s[("zero-step", 64)] > tok_s[("eagle3", 64)] and e["64"] < 0.97 <= e["16"]
    validation = " ".join((REPO / "docs/validation.md").read_text().split())
    quoted = [f"E {e['16']:.3f} at 16 and {e['64']:.3f} at 64",
              f"95% intervals {band['16'][0]:.3f}-{band['16'][1]:.3f} and "
              f"{band['64'][0]:.3f}-{band['64'][1]:.3f}",
              f"read {vs_eagle3[64]:.3f} of EAGLE-3's tok/s there ({vs_eagle3[16]:.3f} at 16)"]
    assert all(q in validation for q in quoted), quoted
