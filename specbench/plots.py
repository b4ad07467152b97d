"""Figures of a run: throughput, the EAGLE-3/baseline ratio, acceptance, latency, envelope.

Every figure is built from the run directory (through :func:`specbench.results.load_run`) and
the analysis of :mod:`specbench.analysis`, so the notebook, `specbench plot` and the report show
the same thing. Figures are plain :class:`matplotlib.figure.Figure` objects on an Agg canvas:
no pyplot, no global state, safe in threads and in tests. Concurrency axes are log2 (the grid
doubles), each mode keeps one colour everywhere, and each title states what the figure shows
rather than what is plotted.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from specbench.analysis import AnalysisError, current_analysis, point_means
from specbench.results import Run
from specbench.results.store import atomic_write

# Colour-blind-safe (Okabe-Ito); the same colour for a mode in every figure.
MODE_COLORS: dict[str, str] = {"baseline": "#0072B2", "eagle3": "#D55E00", "dynamic": "#009E73"}
MODE_LABELS: dict[str, str] = {"baseline": "baseline", "eagle3": "EAGLE-3",
                               "dynamic": "dynamic-disable"}
MODE_ORDER: tuple[str, ...] = ("baseline", "eagle3", "dynamic")
# Dynamic is drawn as a wide translucent underlay: where it equals a static mode (its purpose)
# both stay visible.
MODE_STYLES: dict[str, dict[str, Any]] = {
    "baseline": {"lw": 1.5, "zorder": 3}, "eagle3": {"lw": 1.5, "zorder": 3},
    "dynamic": {"lw": 4.0, "alpha": 0.5, "zorder": 2},
}
FIGURE_NAMES: tuple[str, ...] = ("throughput", "ratio", "acceptance", "latency", "envelope")
_PANEL_W, _PANEL_H = 5.2, 3.8


def _log2_axis(ax: Axes, levels: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ticks: list[int] = []
    for c in sorted(set(levels)):
        # Straddle levels (31, 32, 33) would print on top of each other.
        if not ticks or c / ticks[-1] >= 1.3:
            ticks.append(c)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
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


def _panels(n_rows: int, n_cols: int, title: str) -> tuple[Figure, np.ndarray]:
    width_in = max(_PANEL_W * n_cols, 7.5)
    fig = Figure(figsize=(width_in, _PANEL_H * n_rows + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = np.atleast_2d(np.asarray(fig.subplots(n_rows, n_cols, squeeze=False)))
    # About 9.5 bold 12-pt characters per inch.
    fig.suptitle(textwrap.fill(title, width=int(9.5 * width_in)), fontsize=12, fontweight="bold")
    return fig, axes


def _title(ax: Axes, text: str) -> None:
    ax.set_title(textwrap.fill(text, width=58), fontsize=10)


def _curve(means: pd.DataFrame, mode: str, prompt_set: str) -> pd.DataFrame:
    """One mode's points of one prompt set, in concurrency order."""
    return means[(means["mode"] == mode) & (means["prompt_set"] == prompt_set)].sort_values(
        "concurrency")


def _c_label(value: float) -> str:
    """A concurrency for a figure: whole from 9.5 up, else always one decimal (3.0, not 3)."""
    return f"{value:.0f}" if value >= 9.5 else f"{value:.1f}"


def headline(set_result: dict[str, Any]) -> str:
    """A few words for one prompt set's outcome."""
    outcome = set_result["outcome"]
    if outcome == "crossover":
        return f"EAGLE-3 faster below c≈{_c_label(set_result['crossover_concurrency'])}"
    if outcome == "eagle3_never_wins":
        return "baseline faster at every level"
    return "EAGLE-3 faster at every level"


def _mark_crossover(ax: Axes, set_result: dict[str, Any] | None, *, threshold: bool) -> None:
    if not set_result or set_result["outcome"] != "crossover":
        return
    c_star = set_result["crossover_concurrency"]
    lo, hi = set_result["interval"]
    ax.axvspan(lo, hi, color="0.5", alpha=0.15, lw=0,
               label=f"crossover 95% interval {_c_label(lo)}–{_c_label(hi)}")
    ax.axvline(c_star, color="0.3", lw=1.2, label=f"crossover c*≈{_c_label(c_star)}")
    if threshold:
        t = set_result["threshold_batch_size"]
        ax.axvline(t, color="black", lw=1.0, ls="-.", label=f"threshold T={t} (batch size)")


def _set_result(result: dict[str, Any] | None, prompt_set: str) -> dict[str, Any] | None:
    if result is None:
        return None
    sets: dict[str, dict[str, Any]] = result.get("prompt_sets", {})
    return sets.get(prompt_set)


# ---------------------------------------------------------------------------------------------
# the five figures


def throughput_figure(run: Run, result: dict[str, Any] | None) -> Figure:
    """(1) Output tok/s vs concurrency per mode, bands, crossover and threshold."""
    means = point_means(run)
    sets = run.prompt_sets
    heads = [f"{s}: {headline(r)}" for s in sets if (r := _set_result(result, s))]
    title = "Output throughput vs load" + (" — " + "; ".join(heads) if heads else "")
    fig, axes = _panels(1, len(sets), title)
    for ax, prompt_set in zip(axes[0], sets, strict=True):
        for mode in MODE_ORDER:
            rows = _curve(means, mode, prompt_set)
            if rows.empty:
                continue
            color = MODE_COLORS[mode]
            ax.plot(rows["concurrency"], rows["output_tok_s"], marker="o", ms=4, color=color,
                    label=MODE_LABELS[mode], **MODE_STYLES[mode])
            band = rows[rows["tok_s_band_low"].notna() & rows["tok_s_band_high"].notna()]
            if not band.empty:
                ax.fill_between(band["concurrency"], band["tok_s_band_low"],
                                band["tok_s_band_high"], color=color, alpha=0.2, lw=0)
        flagged = means[(means["prompt_set"] == prompt_set) & means["flagged"]]
        if not flagged.empty:
            ax.plot(flagged["concurrency"], flagged["output_tok_s"], "x", ms=8, mew=1.5,
                    color="black", zorder=4, label="point with flags (see report)")
        set_result = _set_result(result, prompt_set)
        _mark_crossover(ax, set_result, threshold=True)
        _log2_axis(ax, means[means["prompt_set"] == prompt_set]["concurrency"].tolist())
        ax.set_ylabel("output tokens/s (all users, in the window)")
        _title(ax, prompt_set)  # the suptitle states each set's finding
        ax.legend(fontsize=8, loc="upper left")
    return fig


def ratio_figure(run: Run, result: dict[str, Any]) -> Figure:
    """(2) r(c) = tok/s(EAGLE-3) / tok/s(baseline) with its band and the 1.0 line."""
    sets = list(result["prompt_sets"])
    fig, axes = _panels(1, len(sets), "EAGLE-3 speed-up over the baseline vs load "
                        "(below 1.0 the baseline is faster)")
    for ax, prompt_set in zip(axes[0], sets, strict=True):
        s = result["prompt_sets"][prompt_set]
        levels = [int(c) for c in s["ratio_by_concurrency"]]
        ratio = list(s["ratio_by_concurrency"].values())
        band = np.asarray(list(s["ratio_interval_by_concurrency"].values()), dtype=float)
        color = MODE_COLORS["eagle3"]
        ax.plot(levels, ratio, marker="o", ms=4, color=color, label="EAGLE-3 / baseline")
        ax.fill_between(levels, band[:, 0], band[:, 1], color=color, alpha=0.2, lw=0,
                        label="95% bootstrap band")
        ax.axhline(1.0, color="black", lw=1.0, ls="--", label="1.0 (equal throughput)")
        _mark_crossover(ax, s, threshold=False)
        _log2_axis(ax, levels)
        ax.set_ylabel("output tok/s ratio, EAGLE-3 / baseline")
        first, last = ratio[0], ratio[-1]
        _title(ax, f"{prompt_set}: ×{first:.2f} at c={levels[0]} → ×{last:.2f} at "
               f"c={levels[-1]}; {headline(s)}")
        ax.legend(fontsize=8)
    return fig


def acceptance_figure(run: Run) -> Figure | None:
    """(3) Acceptance length (tokens per verify step) vs concurrency for the speculative modes."""
    means = point_means(run)
    spec = means[means["mode"].isin(("eagle3", "dynamic")) & means["accept_length"].notna()]
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
    for ax, prompt_set in zip(axes[0], sets, strict=True):
        for mode in ("eagle3", "dynamic"):
            rows = _curve(spec, mode, prompt_set)
            if not rows.empty:
                ax.plot(rows["concurrency"], rows["accept_length"], marker="o", ms=4,
                        color=MODE_COLORS[mode], label=MODE_LABELS[mode], **MODE_STYLES[mode])
        _log2_axis(ax, means[means["prompt_set"] == prompt_set]["concurrency"].tolist())
        ax.set_ylabel("accept length (tokens per verify step)")
        ax.set_ylim(bottom=0)
        _title(ax, prompt_set)
        ax.legend(fontsize=8)
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
    """(4) TTFT and ITL, p50 (solid) and p99 (dashed), per mode."""
    means = point_means(run)
    sets = run.prompt_sets
    changes = [f"{s} {c}" for s in sets if (c := _latency_change(means, s, "itl_ms_p50"))]
    title = "Latency vs load" + (
        " — EAGLE-3 ITL p50 vs baseline: " + "; ".join(changes) if changes else "")
    fig, axes = _panels(2, len(sets), title)
    metrics = (("ttft_ms", "time to first token (ms)"),
               ("itl_ms", "inter-token latency, per token (ms)"))
    for col, prompt_set in enumerate(sets):
        for row, (prefix, label) in enumerate(metrics):
            ax = axes[row, col]
            for mode in MODE_ORDER:
                rows = _curve(means, mode, prompt_set)
                if rows.empty:
                    continue
                for pct, style in (("p50", "-"), ("p99", "--")):
                    ax.plot(rows["concurrency"], rows[f"{prefix}_{pct}"], ls=style, marker="o",
                            ms=3, color=MODE_COLORS[mode], label=f"{MODE_LABELS[mode]} {pct}",
                            **MODE_STYLES[mode])
            _log2_axis(ax, means[means["prompt_set"] == prompt_set]["concurrency"].tolist())
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(_sparse_log_label))
            ax.set_ylabel(label)
            _title(ax, f"{prompt_set}: {label.split(' (')[0]}")
            ax.legend(fontsize=7, ncol=2)
    return fig


def envelope_figure(run: Run, result: dict[str, Any]) -> Figure | None:
    """(5) E(c) = dynamic / max(baseline, EAGLE-3): does the switch capture the better mode?"""
    sets = [s for s, r in result["prompt_sets"].items() if r["envelope_efficiency"]]
    if not sets:
        return None
    worst = min((result["prompt_sets"][s]["envelope_min"], s) for s in sets)
    worst_c = min(result["prompt_sets"][worst[1]]["envelope_efficiency"].items(),
                  key=lambda kv: kv[1])[0]
    if worst[0] >= 0.95:
        title = (f"Dynamic-disable keeps ≥95% of the better static mode at every level "
                 f"(lowest {worst[0]:.2f} at c={worst_c}, {worst[1]})")
    else:
        title = (f"Dynamic-disable falls to {worst[0]:.2f} of the better static mode at "
                 f"c={worst_c} ({worst[1]})")
    threshold = result.get("applied_threshold") or result["recommended_threshold"]
    fig, axes = _panels(1, len(sets), title)
    for ax, prompt_set in zip(axes[0], sets, strict=True):
        s = result["prompt_sets"][prompt_set]
        set_threshold = s.get("applied_threshold") or threshold
        eff = {int(c): e for c, e in s["envelope_efficiency"].items()}
        interpolated = set(s["envelope_interpolated"])
        levels = sorted(eff)
        color = MODE_COLORS["dynamic"]
        ax.plot(levels, [eff[c] for c in levels], color=color, lw=1.2,
                label="dynamic / max(baseline, EAGLE-3)")
        measured = [c for c in levels if c not in interpolated]
        ax.plot(measured, [eff[c] for c in measured], "o", ms=5, color=color,
                label="static modes measured here")
        if interpolated:
            pts = sorted(interpolated)
            ax.plot(pts, [eff[c] for c in pts], "o", ms=5, mfc="white", color=color,
                    label="static modes interpolated")
        ax.axhline(1.0, color="black", lw=1.0, ls="--", label="1.0 (as good as the best)")
        ax.axhline(0.95, color="0.5", lw=0.8, ls=":", label="0.95")
        ax.axvline(set_threshold, color="black", lw=1.0, ls="-.",
                   label=f"threshold T={set_threshold} (batch size)")
        _log2_axis(ax, levels)
        ax.set_ylabel("envelope efficiency E(c)")
        _title(ax, f"{prompt_set}: lowest E {s['envelope_min']:.2f}")
        ax.legend(fontsize=8)
    return fig


def figures(run: Run, result: dict[str, Any] | None = None) -> dict[str, Figure]:
    """All figures that the run's data allows, by name (see FIGURE_NAMES)."""
    if result is None:
        result = current_analysis(run)  # None for e.g. a baseline-only run: plot what exists
    out: dict[str, Figure] = {"throughput": throughput_figure(run, result)}
    builders: dict[str, Callable[[], Figure | None]] = {
        "ratio": lambda: ratio_figure(run, result) if result else None,
        "acceptance": lambda: acceptance_figure(run),
        "latency": lambda: latency_figure(run),
        "envelope": lambda: envelope_figure(run, result) if result else None,
    }
    for name, build in builders.items():
        fig = build()
        if fig is not None:
            out[name] = fig
    return out


def plot_run(
    run: Run, out_dir: Path | None = None, result: dict[str, Any] | None = None,
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

