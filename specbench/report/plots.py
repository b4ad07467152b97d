"""Figures of a run: throughput, ratios, acceptance, latency, efficiency, the tuned schedule.

Every figure is built from the run directory (through :func:`specbench.results.load_run`) and
the analysis of :mod:`specbench.analysis`, so the notebook, `specbench plot` and the report show
the same thing. Figures are plain :class:`matplotlib.figure.Figure` objects on an Agg canvas:
no pyplot, no global state, safe in threads and in tests. Concurrency axes are log2 (the grid
doubles), each configuration keeps one colour everywhere, and each title states what the figure
shows rather than what is plotted. Any configuration names work (:func:`order`,
:func:`label`, :func:`short_label`, :func:`color`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator

from specbench.analysis import AnalysisError, current_analysis, point_means
from specbench.analysis.text import crossing
from specbench.analysis.text import threshold as decided_threshold
from specbench.report import arrivals
from specbench.report.context import surface_figure
from specbench.report.style import (
    MODE_COLORS,
    color,
    label,
    order,
    set_title,
    slots_text,
    style,
)
from specbench.report.style import legend as _legend
from specbench.report.style import panels as _panels
from specbench.results import Run
from specbench.results.analysis import (
    Analysis,
    Decision,
    OneServer,
    PromptSetAnalysis,
    Schedule,
)
from specbench.results.store import atomic_write


def _steps(run: Run) -> int:
    return run.manifest.config.server.speculative_num_steps


def _modes(run: Run) -> list[str]:
    return order(run.modes, _steps(run))


def _grid(run: Run) -> list[int]:
    return [int(c) for c in run.manifest.config.concurrency]


def log2_axis(ax: Axes, levels: Sequence[float], grid: Iterable[float] = ()) -> None:
    """A log2 concurrency axis with a tick at each level that has room; the run's configured
    levels (`grid`) get theirs first."""
    preferred = set(grid)
    ax.set_xscale("log", base=2)
    ticks: list[float] = []
    # Straddle levels (31, 32, 33) would print on top of each other, and over the grid's own
    # levels: grid levels first, then any other level with room around it.
    for c in sorted(set(levels), key=lambda c: (c not in preferred, c)):
        if all(max(c, t) / min(c, t) >= 1.3 for t in ticks):
            ticks.append(c)
    ax.xaxis.set_major_locator(FixedLocator(sorted(ticks)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("concurrent requests (closed-loop users, log2 scale)")
    ax.grid(True, which="major", alpha=0.3)


def _sparse_log_label(value: float, _pos: int | None) -> str:
    # Minor ticks of a log axis: label 2x and 5x only, so the labels do not collide.
    if value <= 0:
        return ""
    lead = value / 10 ** math.floor(math.log10(value))
    return f"{value:g}" if round(lead, 6) in (2.0, 5.0) else ""


def _curve(means: pd.DataFrame, mode: str, prompt_set: str) -> pd.DataFrame:
    """One configuration's points of one prompt set, in concurrency order."""
    return means[(means["mode"] == mode) & (means["prompt_set"] == prompt_set)].sort_values(
        "concurrency")


def _c_label(value: float) -> str:
    """A concurrency for a figure: whole from 9.5 up, else always one decimal (3.0, not 3)."""
    return f"{value:.0f}" if value >= 9.5 else f"{value:.1f}"


def _one_server(set_result: PromptSetAnalysis | None) -> OneServer | None:
    one = (set_result or {}).get("one_server")
    return one if one and one.get("outcome") is not None else None


def headline(set_result: PromptSetAnalysis) -> str:
    """A few words for one prompt set's outcome (plain server; one server when measured)."""
    outcome = set_result["outcome"]
    if outcome == "crossover":
        text = f"EAGLE-3 faster below c≈{_c_label(crossing(set_result)[0])}"
    elif outcome == "eagle3_never_wins":
        text = "baseline faster at every level"
    elif outcome is None:
        text = "no baseline measured"
    else:
        text = "EAGLE-3 faster at every level"
    one = _one_server(set_result)
    if one is not None and one["outcome"] == "eagle3_always_wins":
        text += ", one server keeps drafting at every level"
    elif one is not None:
        text += f", one server stops drafting at T={one['threshold_batch_size']}"
    return text


def _mark_crossover(ax: Axes, set_result: PromptSetAnalysis | None, *, threshold: bool) -> None:
    if not set_result:
        return
    if set_result["outcome"] == "crossover":
        c_star, lo, hi = crossing(set_result)
        ax.axvspan(lo, hi, color="0.5", alpha=0.15, lw=0,
                   label=f"crossover 95% interval {_c_label(lo)}–{_c_label(hi)}")
        ax.axvline(c_star, color="0.3", lw=1.2, label=f"crossover c*≈{_c_label(c_star)}")
    one = _one_server(set_result)
    if one is not None and one["outcome"] == "crossover":
        one_c_star = crossing(one)[0]
        ax.axvline(one_c_star, color="0.3", lw=1.2, ls=":",
                   label=f"EAGLE-3 = zero-step at c≈{_c_label(one_c_star)}")
    if threshold:
        t = decided_threshold(one or set_result)
        name = "one-server threshold" if one is not None else "threshold"
        ax.axvline(t, color="black", lw=1.0, ls="-.", label=f"{name} T={t} (batch size)")


def _set_result(result: Analysis | None, prompt_set: str) -> PromptSetAnalysis | None:
    if result is None:
        return None
    sets: dict[str, PromptSetAnalysis] = result.get("prompt_sets", {})
    return sets.get(prompt_set)


# ---------------------------------------------------------------------------------------------
# the figures


def throughput_figure(run: Run, result: Analysis | None) -> Figure:
    """(1) Output tok/s vs concurrency per configuration, bands, crossovers and threshold."""
    means = point_means(run)
    sets = run.prompt_sets
    heads = [f"{s}: {headline(r)}" for s in sets if (r := _set_result(result, s))]
    title = "Output throughput vs load" + (" — " + "; ".join(heads) if heads else "")
    fig, axes = _panels(1, len(sets), title)
    k = _steps(run)
    for ax, prompt_set in zip(axes[0], sets, strict=True):
        for mode in _modes(run):
            rows = _curve(means, mode, prompt_set)
            if rows.empty:
                continue
            ax.plot(rows["concurrency"], rows["output_tok_s"], marker="o", ms=4,
                    color=color(mode, k), label=label(mode), **style(mode))
            band = rows[rows["tok_s_band_low"].notna() & rows["tok_s_band_high"].notna()]
            if not band.empty:
                ax.fill_between(band["concurrency"], band["tok_s_band_low"],
                                band["tok_s_band_high"], color=color(mode, k), alpha=0.15, lw=0)
        flagged = means[(means["prompt_set"] == prompt_set) & means["flagged"]]
        if not flagged.empty:
            ax.plot(flagged["concurrency"], flagged["output_tok_s"], "x", ms=8, mew=1.5,
                    color="black", zorder=4, label="point with flags (see report)")
        _mark_crossover(ax, _set_result(result, prompt_set), threshold=True)
        log2_axis(ax, means[means["prompt_set"] == prompt_set]["concurrency"].tolist(),
                   _grid(run))
        ax.set_ylabel("output tokens/s (all users, in the window)")
        set_title(ax, prompt_set)  # the suptitle states each set's finding
        _legend(ax, len(ax.get_lines()))
    return fig


def _ratio_series(s: PromptSetAnalysis) -> list[tuple[str, str, Decision]]:
    """The ratio curves a set has: over the baseline, over zero-step (a run may lack either)."""
    series: list[tuple[str, str, Decision]] = (
        [("EAGLE-3 / baseline", MODE_COLORS["eagle3"], s)]
        if s.get("ratio_by_concurrency") else [])
    one = _one_server(s)
    if one is not None:
        series.append(("EAGLE-3 / zero-step", MODE_COLORS["zero-step"], one))
    return series


def ratio_figure(run: Run, result: Analysis) -> Figure:
    """(2) EAGLE-3 over the baseline (and over zero-step) with 95% bands and the 1.0 line."""
    sets = list(result["prompt_sets"])
    fig, axes = _panels(1, len(sets), "EAGLE-3 speed-up vs load: over the baseline (below 1.0 a "
                        "plain server is faster) and over its zero-step path (below 1.0 one "
                        "server should stop drafting)")
    for ax, prompt_set in zip(axes[0], sets, strict=True):
        s = result["prompt_sets"][prompt_set]
        for name, col, d in _ratio_series(s):
            levels = [int(c) for c in d["ratio_by_concurrency"]]
            band = np.asarray(list(d["ratio_interval_by_concurrency"].values()), dtype=float)
            ax.plot(levels, list(d["ratio_by_concurrency"].values()), marker="o", ms=4,
                    color=col, label=name)
            ax.fill_between(levels, band[:, 0], band[:, 1], color=col, alpha=0.2, lw=0,
                            label=f"{name}: 95% band")
        ax.axhline(1.0, color="black", lw=1.0, ls="--", label="1.0 (equal throughput)")
        _mark_crossover(ax, s, threshold=False)
        first = _ratio_series(s)[0][2]
        levels = [int(c) for c in first["ratio_by_concurrency"]]
        ratio = list(first["ratio_by_concurrency"].values())
        over = "the baseline" if first is s else "its zero-step path"
        log2_axis(ax, levels, _grid(run))
        ax.set_ylabel("output tok/s ratio")
        set_title(ax, f"{prompt_set}: ×{ratio[0]:.2f} at c={levels[0]} → ×{ratio[-1]:.2f} at "
               f"c={levels[-1]} over {over}; {headline(s)}")
        _legend(ax, len(ax.get_lines()))
    return fig


def acceptance_figure(run: Run) -> Figure | None:
    """(3) Acceptance length (tokens per verify step) vs concurrency, speculative servers."""
    means = point_means(run)
    spec = means[(means["mode"] != "baseline") & means["accept_length"].notna()]
    if spec.empty:
        return None
    sets = run.prompt_sets
    changes = []
    for prompt_set in sets:
        rows = _curve(spec, "eagle3", prompt_set)
        if len(rows) >= 2:
            first, last = rows["accept_length"].iloc[0], rows["accept_length"].iloc[-1]
            changes.append(f"{prompt_set} {first:.2f}→{last:.2f} ({(last / first - 1):+.0%})")
    title = "EAGLE-3 acceptance length from lowest to highest load: " + (
        ", ".join(changes) if changes else "one level measured")
    fig, axes = _panels(1, len(sets), title)
    k = _steps(run)
    for ax, prompt_set in zip(axes[0], sets, strict=True):
        for mode in _modes(run):
            rows = _curve(spec, mode, prompt_set)
            if not rows.empty:
                ax.plot(rows["concurrency"], rows["accept_length"], marker="o", ms=4,
                        color=color(mode, k), label=label(mode), **style(mode))
        log2_axis(ax, means[means["prompt_set"] == prompt_set]["concurrency"].tolist(),
                   _grid(run))
        ax.set_ylabel("accept length (tokens per verify step)")
        ax.set_ylim(bottom=0)
        set_title(ax, prompt_set)
        _legend(ax, len(ax.get_lines()))
    return fig


def _latency_change(means: pd.DataFrame, prompt_set: str, column: str) -> str | None:
    base = _curve(means, "baseline", prompt_set).set_index("concurrency")[column]
    spec = _curve(means, "eagle3", prompt_set).set_index("concurrency")[column]
    common = sorted(set(base.dropna().index) & set(spec.dropna().index))
    if not common or not base[common[0]] > 0:
        return None
    lo, hi = common[0], common[-1]
    text = f"{spec[lo] / base[lo] - 1:+.0%} at c={lo}"
    if hi != lo and base[hi] > 0:
        text += f", {spec[hi] / base[hi] - 1:+.0%} at c={hi}"
    return text


def latency_figure(run: Run) -> Figure:
    """(4) TTFT and ITL, p50 (solid) and p99 (dashed), per configuration."""
    means = point_means(run)
    sets = run.prompt_sets
    changes = [f"{s} {c}" for s in sets if (c := _latency_change(means, s, "itl_ms_p50"))]
    title = "Latency vs load" + (
        " — EAGLE-3 ITL p50 vs baseline: " + "; ".join(changes) if changes else "")
    fig, axes = _panels(2, len(sets), title)
    metrics = (("ttft_ms", "time to first token (ms)"),
               ("itl_ms", "inter-token latency, per token (ms)"))
    k = _steps(run)
    for col, prompt_set in enumerate(sets):
        for row, (prefix, text) in enumerate(metrics):
            ax = axes[row, col]
            for mode in _modes(run):
                rows = _curve(means, mode, prompt_set)
                if rows.empty:
                    continue
                for pct, ls in (("p50", "-"), ("p99", "--")):
                    ax.plot(rows["concurrency"], rows[f"{prefix}_{pct}"], marker="o", ms=3,
                            color=color(mode, k), label=f"{label(mode)} {pct}",
                            **{**style(mode), "ls": ls})
            log2_axis(ax, means[means["prompt_set"] == prompt_set]["concurrency"].tolist(),
                   _grid(run))
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(_sparse_log_label))
            ax.set_ylabel(text)
            set_title(ax, f"{prompt_set}: {text.split(' (')[0]}")
            ax.legend(fontsize=6 if len(ax.get_lines()) > 8 else 7, ncol=2)
    return fig


def _efficiency_series(s: PromptSetAnalysis) -> list[tuple[str, str, dict[str, float], list[int]]]:
    """(legend, colour, E by level, interpolated levels) of every switching server measured."""
    series = []
    one = s.get("one_server") or {}
    if one.get("efficiency"):
        series.append(("one threshold: dynamic / max(EAGLE-3, zero-step)", MODE_COLORS["dynamic"],
                       one["efficiency"], one.get("efficiency_interpolated", [])))
    elif s.get("envelope_efficiency"):
        series.append(("dynamic / max(baseline, EAGLE-3)", MODE_COLORS["dynamic"],
                       s["envelope_efficiency"], s.get("envelope_interpolated", [])))
    schedule = s.get("schedule") or {}
    if schedule.get("efficiency"):
        series.append(("schedule: tuned / max(each K, zero-step)", MODE_COLORS["tuned"],
                       schedule["efficiency"], schedule.get("efficiency_interpolated", [])))
    return series


def _efficiency_title(result: Analysis, sets: list[str]) -> str:
    worst = min((min(eff.values()), name, min(eff, key=eff.get), legend.split(":")[0])  # type: ignore[arg-type]
                for name in sets
                for legend, _, eff, _ in _efficiency_series(result["prompt_sets"][name]))
    value, name, c, who = worst
    if value >= 0.95:
        return (f"Switching servers keep ≥95% of the better static mode at every level "
                f"(lowest {value:.2f} at c={c}, {name}, {who})")
    return f"{who} falls to {value:.2f} of the better static mode at c={c} ({name})"


def envelope_figure(run: Run, result: Analysis) -> Figure | None:
    """(5) Efficiency of the one-threshold server and of the tuned schedule, per level."""
    sets = [s for s, r in result["prompt_sets"].items() if _efficiency_series(r)]
    if not sets:
        return None
    fig, axes = _panels(1, len(sets), _efficiency_title(result, sets))
    for ax, prompt_set in zip(axes[0], sets, strict=True):
        s = result["prompt_sets"][prompt_set]
        levels: list[int] = []
        for legend, col, eff, interpolated in _efficiency_series(s):
            by_c = {int(c): e for c, e in eff.items()}
            xs = sorted(by_c)
            levels += xs
            ax.plot(xs, [by_c[c] for c in xs], "-o", ms=5, color=col, lw=1.2, label=legend)
            pts = sorted(set(interpolated) & set(xs))
            if pts:
                ax.plot(pts, [by_c[c] for c in pts], "o", ms=5, mfc="white", color=col,
                        label="static curves interpolated")
        ax.axhline(1.0, color="black", lw=1.0, ls="--", label="1.0 (as good as the best)")
        ax.axhline(0.95, color="0.5", lw=0.8, ls=":", label="0.95")
        one = _one_server(s)
        t = (one or s).get("applied_threshold") or s.get("applied_threshold") or (
            one or s)["threshold_batch_size"]
        ax.axvline(t, color="black", lw=1.0, ls="-.", label=f"threshold T={t} (batch size)")
        log2_axis(ax, levels, _grid(run))
        ax.set_ylabel("efficiency: server / best static curve")
        lowest = min(min(e.values()) for _, _, e, _ in _efficiency_series(s))
        set_title(ax, f"{prompt_set}: lowest E {lowest:.2f}")
        _legend(ax, len(ax.get_lines()))
    return fig


def schedule_figure(run: Run, result: Analysis) -> Figure | None:
    """(6) The best K per level and the batch-size slots the tuned server uses."""
    schedules: dict[str, Schedule] = {
        name: schedule for name, r in result["prompt_sets"].items()
        if (schedule := r.get("schedule")) and schedule.get("slots")}
    sets = list(schedules)
    if not sets:
        return None
    shown = "; ".join(f"{s} {slots_text(schedules[s]['slots'])}" for s in sets)
    fig, axes = _panels(1, len(sets), f"Tuned steps per batch size (slot → K): {shown}")
    for ax, prompt_set in zip(axes[0], sets, strict=True):
        sched = schedules[prompt_set]
        per_level = {int(c): k for c, k in sched["per_level"].items()}
        measured = {int(c): k for c, k in sched.get("measured_best", sched["per_level"]).items()}
        levels = sorted(per_level)
        ax.plot(levels, [measured[c] for c in levels], "o", ms=7, color=MODE_COLORS["eagle3"],
                label="best K measured at this concurrency (0 = zero-step)")
        smoothed = [c for c in levels if per_level[c] != measured[c]]
        if smoothed:
            ax.plot(smoothed, [per_level[c] for c in smoothed], "o", ms=7, mfc="white",
                    color=MODE_COLORS["eagle3"],
                    label="K chosen there (one drafting K; zero-step within 2% smoothed)")
        keys = [int(k) for k in sched["slots"]]
        steps = list(sched["slots"].values())
        right = max(levels[-1], keys[-1]) * 1.3
        ax.step([*keys, right], [*steps, steps[-1]], where="post", color=MODE_COLORS["tuned"],
                lw=2.0, label="slots: steps from this batch size on")
        log2_axis(ax, levels, _grid(run))
        ax.set_xlabel("concurrency (points) / batch size (slots), log2 scale")
        ax.set_ylabel("draft steps K")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(-0.4, max(*per_level.values(), *measured.values()) + 0.6)
        set_title(ax, f"{prompt_set}: {slots_text(sched['slots'])}")
        _legend(ax, 2)
    return fig


def figures(run: Run, result: Analysis | None = None) -> dict[str, Figure]:
    """All figures that the run's data allows, by name (see style.FIGURE_NAMES)."""
    if result is None:
        result = current_analysis(run)  # None for e.g. a baseline-only run: plot what exists
    if run.open_loop:
        return {arrivals.FIGURE: arrivals.figure(run, result)} if result else {}
    builders: dict[str, Callable[[], Figure | None]] = {
        "ratio": lambda: ratio_figure(run, result) if result else None,
        "acceptance": lambda: acceptance_figure(run),
        "latency": lambda: latency_figure(run),
        "envelope": lambda: envelope_figure(run, result) if result else None,
        "schedule": lambda: schedule_figure(run, result) if result else None,
        "context": lambda: surface_figure(result),
    }
    out: dict[str, Figure] = {"throughput": throughput_figure(run, result)}
    for name, build in builders.items():
        fig = build()
        if fig is not None:
            out[name] = fig
    return out


def plot_run(
    run: Run, out_dir: Path | None = None, result: Analysis | None = None,
) -> list[Path]:
    """Write every figure as PNG and SVG into out_dir (default <run>/plots); returns the paths."""
    if run.summary.empty:
        raise AnalysisError(f"{run.path} has no measured points; nothing to plot")
    target = out_dir if out_dir is not None else run.path / "plots"
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, fig in figures(run, result).items():
        for ext in ("png", "svg"):
            # No date in the SVG, so identical runs give identical files.
            meta = {"Date": None} if ext == "svg" else {}
            image = io.BytesIO()
            fig.savefig(image, format=ext, dpi=110, metadata=meta)
            written.append(atomic_write(target / f"{name}.{ext}", image.getvalue()))
    return written
