"""Figures: files written, titles that state the finding, crossover and threshold drawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.lines import Line2D

from specbench.analysis import AnalysisError, analyze
from specbench.report import plots, style
from specbench.results import load_run
from tests.builders import (
    ZERO_STEP_FRACTION,
    baseline_curve,
    k_speedup,
    make_run,
    ratio_crossing_at,
    static_curves,
    tune_curves,
)

LEVELS = (1, 2, 4, 8, 16, 32, 64, 128)


def xs(line: Line2D) -> list[float]:
    return np.asarray(line.get_xdata(), dtype=float).tolist()


def ys(line: Line2D) -> list[float]:
    return np.asarray(line.get_ydata(), dtype=float).tolist()


def _with_dynamic(threshold: int | None = 32) -> dict[tuple[str, str], dict[int, float]]:
    ratio = ratio_crossing_at(24.0)
    curves = static_curves(ratio, levels=LEVELS)
    curves[("dynamic", "coding")] = {c: baseline_curve(c) * max(ratio(c), 1.0) * 0.97
                                     for c in LEVELS}
    return curves


def _tune_run(tmp_path: Path) -> Path:
    curves = tune_curves(levels=LEVELS, tuned=0.99, sglang_default=0.9)
    ratio = {c: max(k_speedup(3, c), ZERO_STEP_FRACTION) for c in LEVELS}
    curves[("dynamic", "coding")] = {c: baseline_curve(c) * ratio[c] * 0.98 for c in LEVELS}
    return make_run(tmp_path, curves, se_rel=0.01)


def test_plot_run_writes_png_and_svg_for_every_figure(tmp_path: Path) -> None:
    run = load_run(_tune_run(tmp_path))
    paths = plots.plot_run(run)
    names = sorted(p.name for p in paths)
    # context: bucketed runs only; arrivals: open-loop runs only
    drawn = [n for n in style.FIGURE_NAMES if n not in ("context", "arrivals")]
    expected = sorted(f"{n}.{ext}" for n in drawn for ext in ("png", "svg"))
    assert names == expected
    for path in paths:
        assert path.parent == run.path / "plots"
        head = path.read_bytes()[:8]
        assert head.startswith(b"\x89PNG") if path.suffix == ".png" else b"<?xml" in head
        assert path.stat().st_size > 5_000
    assert not list((run.path / "plots").glob(".*"))  # no temporary files left behind


def test_out_dir_and_no_envelope_without_dynamic(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(24.0), levels=LEVELS)))
    paths = plots.plot_run(run, out_dir=tmp_path / "figs")
    assert {p.stem for p in paths} == {"throughput", "ratio", "acceptance", "latency"}
    assert all(p.parent == tmp_path / "figs" for p in paths)


def test_titles_state_the_finding_and_the_crossover_is_drawn(tmp_path: Path) -> None:
    flags = {("baseline", "coding", 128): "client_bound"}
    run = load_run(make_run(tmp_path, _with_dynamic(), flags=flags))
    result = analyze(run)
    c_star = result["prompt_sets"]["coding"]["crossover_concurrency"]
    assert c_star == pytest.approx(24.0, rel=1e-6)
    figs = plots.figures(run, result)

    throughput = figs["throughput"]
    assert "EAGLE-3 faster below c≈24" in throughput.get_suptitle().replace("\n", " ")
    ax = throughput.axes[0]
    assert ax.get_xscale() == "log"
    assert "concurrent requests" in ax.get_xlabel() and "tokens/s" in ax.get_ylabel()
    vertical = [line for line in ax.get_lines() if xs(line) == [c_star, c_star]]
    assert vertical, "the crossover c* is drawn as a vertical line"
    legend = ax.get_legend()
    assert legend is not None
    labels = [t.get_text() for t in legend.get_texts()]
    assert "threshold T=24 (batch size)" in labels
    assert {"baseline", "EAGLE-3", "dynamic-disable"} <= set(labels)
    flagged = [line for line in ax.get_lines()
               if str(line.get_label()).startswith("point with flags")]
    assert [xs(line) for line in flagged] == [[128]]
    assert ys(flagged[0]) == [pytest.approx(baseline_curve(128))]
    # One colour per mode, the same in every figure.
    colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
    assert colours["EAGLE-3"] == style.MODE_COLORS["eagle3"]

    ratio_ax = figs["ratio"].axes[0]
    assert any(ys(line) == [1.0, 1.0] for line in ratio_ax.get_lines())
    # r = 1 + 0.2 log2(24 / c): 1.92 at c=1, 0.52 at c=128.
    assert "×1.92 at c=1 → ×0.52 at c=128" in ratio_ax.get_title().replace("\n", " ")

    envelope = figs["envelope"]
    title = envelope.get_suptitle().replace("\n", " ")
    assert "keep ≥95% of the better static mode" in title and "lowest 0.97" in title


def test_envelope_title_names_the_worst_level_when_dynamic_loses(tmp_path: Path) -> None:
    curves = _with_dynamic()
    curves[("dynamic", "coding")][64] = baseline_curve(64) * 0.8
    run = load_run(make_run(tmp_path, curves))
    title = plots.figures(run)["envelope"].get_suptitle().replace("\n", " ")
    assert "falls to 0.80 of the better static mode at c=64 (coding)" in title


def test_baseline_only_run_still_plots_what_was_measured(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, {("baseline", "coding"): {c: baseline_curve(c)
                                                                 for c in LEVELS}}))
    with pytest.raises(AnalysisError):
        analyze(run)
    paths = plots.plot_run(run)
    assert {p.stem for p in paths} == {"throughput", "latency"}


def test_every_configuration_is_drawn_with_its_own_colour_and_label(tmp_path: Path) -> None:
    run = load_run(_tune_run(tmp_path))
    result = analyze(run)
    figs = plots.figures(run, result)
    ax = figs["throughput"].axes[0]
    lines = {str(line.get_label()): line for line in ax.get_lines()}
    expected = {"baseline", "EAGLE-3", "EAGLE-3 K=1", "EAGLE-3 K=2", "EAGLE-3 K=5", "zero-step",
                "SGLang default", "tuned", "dynamic-disable"}
    assert expected <= set(lines)
    colours = [lines[name].get_color() for name in expected]
    assert len(set(colours)) == len(expected)
    assert lines["zero-step"].get_linestyle() == "--"
    # The one-server threshold (EAGLE-3 meets zero-step) is the threshold drawn.
    one = result["prompt_sets"]["coding"]["one_server"]
    assert f"one-server threshold T={one['threshold_batch_size']} (batch size)" in lines
    # Both ratios, each with its band.
    ratio_labels = [str(line.get_label()) for line in figs["ratio"].axes[0].get_lines()]
    assert {"EAGLE-3 / baseline", "EAGLE-3 / zero-step"} <= set(ratio_labels)


def test_schedule_and_efficiency_figures(tmp_path: Path) -> None:
    run = load_run(_tune_run(tmp_path))
    figs = plots.figures(run)
    schedule = figs["schedule"]
    assert "coding 1→3, 71→0" in schedule.get_suptitle().replace("\n", " ")
    ax = schedule.axes[0]
    best = next(line for line in ax.get_lines() if str(line.get_label()).startswith("best K"))
    assert ys(best) == [5, 5, 5, 3, 3, 2, 2, 0]  # each level's own winner
    chosen = next(line for line in ax.get_lines() if str(line.get_label()).startswith("K chosen"))
    assert ys(chosen) == [3] * 5  # one drafting K where another K won (c = 1-4, 32, 64)
    slots = next(line for line in ax.get_lines() if str(line.get_label()).startswith("slots"))
    assert xs(slots)[:2] == [1, 71] and ys(slots)[:2] == [3, 0]
    envelope = figs["envelope"].axes[0]
    labels = [str(line.get_label()) for line in envelope.get_lines()]
    assert "one threshold: dynamic / max(EAGLE-3, zero-step)" in labels
    assert "schedule: tuned / max(each K, zero-step)" in labels


def test_labels_and_order_of_any_names() -> None:
    assert style.order(["tuned", "eagle3-k5", "baseline", "zero-step", "eagle3", "eagle3-k1",
                        "sglang-default", "dynamic-t40", "dynamic", "weird"]) == [
        "baseline", "eagle3", "eagle3-k1", "eagle3-k5", "zero-step", "dynamic-t40",
        "sglang-default", "dynamic", "tuned", "weird"]
    assert style.label("eagle3-k2") == "EAGLE-3 K=2" and style.short_label("eagle3-k2") == "E3 k2"
    assert style.label("dynamic-t40") == "dynamic-disable T=40"
    assert style.short_label("dynamic-t40") == "dyn t40"
    assert style.short_label("weird") == "weird" and style.color("weird").startswith("#")
    # Fewer steps lighter, more steps darker than EAGLE-3 at the run's K.
    assert style.color("eagle3-k1") != style.color("eagle3-k5") != style.MODE_COLORS["eagle3"]


def test_headline_says_the_one_server_keeps_drafting_when_eagle3_always_beats_zero_step() -> None:
    """A threshold above the grid is "never switch", not a level at which drafting stops."""
    set_result = {"outcome": None,
                  "one_server": {"outcome": "eagle3_always_wins", "threshold_batch_size": 33}}
    assert plots.headline(set_result) == (
        "no baseline measured, one server keeps drafting at every level")
    set_result["one_server"] = {"outcome": "crossover", "threshold_batch_size": 40}
    assert plots.headline(set_result).endswith("one server stops drafting at T=40")
