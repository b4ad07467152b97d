"""Notes and the finding by who chose the levels (issue 39): advice to add a level only on a grid
the user listed; where the adaptive plan (or the default grid) chose them, what the result means.

The runs mirror a newcomer's default sweep: the default grid, the adaptive plan's levels per
pair (c* bisected on baseline and EAGLE-3 to 64-128, T on EAGLE-3 and zero-step to 128-250), a
dynamic server at every level placed for the set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from specbench.analysis import analyze
from specbench.config import DEFAULT_CONCURRENCY
from specbench.report import document as report
from specbench.results import load_run
from tests.builders import Curve, baseline_curve, make_run

# Asking the user to change the levels, in any of the notes' words.
LEVEL_ADVICE = ("add a higher level", "add a lower level", "add levels", "--concurrency")


def _curves(plain: dict[int, float], one: dict[int, float]) -> dict[tuple[str, str], Curve]:
    """tok/s per configuration: EAGLE-3 at every level, the baseline at the `plain` ratios'
    levels (EAGLE-3 / baseline there), zero-step at the `one` ratios' (EAGLE-3 / zero-step)."""
    levels = sorted({*plain, *one})
    spec = {c: 2.0 * baseline_curve(c) for c in levels}
    return {
        ("eagle3", "coding"): spec,
        ("baseline", "coding"): {c: spec[c] / r for c, r in plain.items()},
        ("zero-step", "coding"): {c: spec[c] / r for c, r in one.items()},
        ("dynamic", "coding"): dict(spec),
    }


# c* between 64 and 128 (nothing above 128 on the baseline), T between 128 and 250 with EAGLE-3
# only 1% behind at 250, so T's interval reaches the grid's top.
DEFAULT_LIKE = _curves({16: 1.6, 64: 1.18, 128: 0.95}, {128: 1.08, 250: 0.99})
ALWAYS_AHEAD = _curves({16: 1.6, 64: 1.18, 128: 0.95}, {128: 1.2, 250: 1.1})


def _run(tmp_path: Path, curves: dict[tuple[str, str], Curve], plan: str,
         grid: tuple[int, ...] | None = None) -> Any:
    """A run of `curves` whose manifest says `plan` chose them from `grid` (the levels measured
    when None: a grid the user listed)."""
    run_dir = make_run(tmp_path, curves)
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["config"]["plan"] = plan
    if grid is not None:
        manifest["config"]["concurrency"] = list(grid)
    if plan == "adaptive":
        manifest["refined"] = {f"{mode}/coding": sorted(curve) for (mode, _), curve in
                               curves.items() if mode != "dynamic"}
    path.write_text(json.dumps(manifest))
    return load_run(run_dir)


def _notes(result: dict[str, Any]) -> list[str]:
    coding = result["prompt_sets"]["coding"]
    return [*coding["notes"], *coding["one_server"]["notes"]]


@pytest.mark.parametrize("plan", ["adaptive", "dense"])
def test_levels_the_tool_chose_get_no_advice_to_add_one(tmp_path: Path, plan: str) -> None:
    # The default grid, placed by the adaptive plan or measured by a dense one: the tool's.
    result = analyze(_run(tmp_path, DEFAULT_LIKE, plan, DEFAULT_CONCURRENCY))
    coding = result["prompt_sets"]["coding"]
    assert coding["outcome"] == "crossover" and coding["confirmed"] is False
    assert coding["one_server"]["outcome"] == "crossover"
    notes = _notes(result)
    assert not [n for n in notes if any(words in n for words in LEVEL_ADVICE)], notes
    assert not [n for n in notes if "outside the static grid" in n], notes
    # The bracket at the grid's top: what it means, not what to do.
    assert coding["one_server"]["interval"][1] == pytest.approx(250)
    assert ("the 95% interval reaches 250, the grid's largest level: the crossing may lie "
            "above it") in coding["one_server"]["notes"]
    assert coding["notes"] == []


def test_a_listed_grid_still_gets_the_advice(tmp_path: Path) -> None:
    # The same points, levels the user listed with a dense plan: adding one is theirs to do.
    result = analyze(_run(tmp_path, DEFAULT_LIKE, "dense"))
    coding = result["prompt_sets"]["coding"]
    assert ("the crossing lies between the two highest levels (64 and 128), so no further "
            "level confirms it; add a higher level") in coding["notes"]
    one = coding["one_server"]["notes"]
    assert any("add levels beyond the edge or repeats (--repeats 3)" in n for n in one), one
    assert any("(128 and 250), so no further level confirms it; add a higher level" in n
               for n in one), one


def test_ahead_at_the_grid_top_says_what_it_means(tmp_path: Path) -> None:
    adaptive = analyze(_run(tmp_path / "a", ALWAYS_AHEAD, "adaptive", DEFAULT_CONCURRENCY))
    one = adaptive["prompt_sets"]["coding"]["one_server"]
    assert one["outcome"] == "eagle3_always_wins" and one["threshold_batch_size"] == 251
    assert ("coding: keep drafting, T = 251 (EAGLE-3 still beats its zero-step path at 250, "
            "the largest level measured).") in adaptive["finding"]
    assert not [n for n in _notes(adaptive) if any(w in n for w in LEVEL_ADVICE)]
    # Listed by the user: the crossing is above their top level, and they can add one.
    dense = analyze(_run(tmp_path / "d", ALWAYS_AHEAD, "dense"))
    assert ("EAGLE-3 still beats the zero-step path at 250, the largest level listed, so the "
            "crossing lies above it; add a higher level (--concurrency) to locate it"
            ) in dense["prompt_sets"]["coding"]["one_server"]["notes"]


def test_one_level_placed_by_the_plan_names_no_grid(tmp_path: Path) -> None:
    curves = _curves({16: 1.6}, {16: 1.7})
    notes = _notes(analyze(_run(tmp_path, curves, "adaptive", DEFAULT_CONCURRENCY)))
    assert any("only one concurrency level (c=16)" in n and "the adaptive plan placed no more"
               in n for n in notes), notes
    assert not [n for n in notes if any(w in n for w in LEVEL_ADVICE)], notes


def test_the_finding_is_one_short_sentence_per_decision(tmp_path: Path) -> None:
    result = analyze(_run(tmp_path, DEFAULT_LIKE, "adaptive", DEFAULT_CONCURRENCY))
    sentences = result["finding"].split(". ")
    assert len(sentences) == 2  # T, then c*: one set, so no mix sentence
    assert sentences[0].startswith("coding: stop drafting at batch size T = ")
    assert "95% interval" in sentences[0]
    assert sentences[1].startswith("coding: above c* = ") and "95% interval" in sentences[1]
    # The why (the claims, prompt lengths) stays in the set's sentence.
    assert "One server: EAGLE-3 beats its zero-step path below" in \
        result["prompt_sets"]["coding"]["sentence"]


def test_the_default_like_run_prints_no_level_advice(tmp_path: Path) -> None:
    run = _run(tmp_path, DEFAULT_LIKE, "adaptive", DEFAULT_CONCURRENCY)
    console = Console(record=True, width=200, color_system=None)
    report.render_terminal(run, console, analyze(run))
    printed = [line for line in console.export_text().splitlines() if "note:" in line]
    assert ("  note: one server: the 95% interval reaches 250, the grid's largest level: the "
            "crossing may lie above it") in printed
    assert not [n for n in printed if any(w in n for w in LEVEL_ADVICE)], printed
    assert not [n for n in printed if "outside the static grid" in n], printed
