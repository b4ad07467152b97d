"""The figure of `specbench compare`: every run's throughput on one axis, ratios below.

One column per prompt set. The top panel has each configuration's output tok/s in every run
(one colour per configuration, as in a run's own figures; one line style per run), the panel
below each other run's tok/s over the base's per level, with the 1.0 line: a run 10% slower
sits at 0.91 there. The style helpers (colours, names, the log2 concurrency axis) are
:mod:`specbench.report.plots`'s, so a configuration looks the same here as in its run's report.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from specbench.report.compare import Comparison, Group
from specbench.report.plots import log2_axis
from specbench.report.style import color, label, set_title
from specbench.results.store import atomic_write

# Run i draws with the i-th style (the base solid); colours stay the configurations'.
_RUN_LINES = ("-", "--", ":", "-.")
_RUN_MARKERS = ("o", "s", "^", "D", "v")
_PANEL_W_IN, _TOP_H_IN, _RATIO_H_IN = 5.6, 3.8, 2.4


def _run_style(i: int) -> dict[str, Any]:
    return {"ls": _RUN_LINES[i % len(_RUN_LINES)], "marker": _RUN_MARKERS[i % len(_RUN_MARKERS)],
            "ms": 4, "lw": 1.5}


def _title_text(c: Comparison) -> str:
    parts = []
    for i, name in enumerate(c.labels[1:], start=1):
        if (span := c.ratio_span(i)) is not None:
            mean, low, high, _n = span
            parts.append(f"{name} ×{mean:.3f} ({mean - 1:+.1%}; per point {low - 1:+.1%} to "
                         f"{high - 1:+.1%})")
    runs = ", ".join(f"{lb} = {n}" for lb, n in zip(c.labels, c.names, strict=True))
    return f"Output tok/s against {c.labels[0]} (base): {'; '.join(parts)}\n{runs}"


def _throughput_panel(ax: Axes, c: Comparison, groups: list[Group], steps: int) -> None:
    for g in groups:
        xs = [lv.concurrency for lv in g.levels if math.isfinite(lv.concurrency)]
        for i, name in enumerate(c.labels):
            ys = [lv.output_tok_s[i] for lv in g.levels if math.isfinite(lv.concurrency)]
            ax.plot(xs, [float("nan") if y is None else y for y in ys], color=color(g.mode, steps),
                    label=f"{label(g.mode)}, {name}", **_run_style(i))
    ax.set_ylabel("output tokens/s (all users)")
    ax.set_ylim(bottom=0)


def _ratio_panel(ax: Axes, c: Comparison, groups: list[Group], steps: int) -> None:
    for g in groups:
        xs = [lv.concurrency for lv in g.levels if math.isfinite(lv.concurrency)]
        for i, name in enumerate(c.labels[1:], start=1):
            ys = [lv.ratios[i - 1] for lv in g.levels if math.isfinite(lv.concurrency)]
            ax.plot(xs, [float("nan") if y is None else y for y in ys], color=color(g.mode, steps),
                    label=f"{label(g.mode)}, {name} / {c.labels[0]}",
                    **_run_style(i))
    ax.axhline(1.0, color="black", lw=1.0, ls="--", label=f"1.0 (as fast as {c.labels[0]})")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.2f} ({v - 1:+.0%})"))
    ax.set_ylabel(f"tok/s over {c.labels[0]}")


def compare_figure(c: Comparison) -> Figure:
    """The figure: a column per prompt set, throughput on top and the ratio panel below."""
    sets = c.prompt_sets
    steps = int(c.facts["speculative steps"][0])  # the base's K shades EAGLE-3 at other K
    fig = Figure(figsize=(max(_PANEL_W_IN * len(sets), 7.5), _TOP_H_IN + _RATIO_H_IN + 0.8),
                 layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(sets), squeeze=False, sharex="col",
                        gridspec_kw={"height_ratios": [_TOP_H_IN, _RATIO_H_IN]})
    fig.suptitle(_title_text(c), fontsize=11, fontweight="bold")
    for ax in axes[1, 1:]:
        ax.sharey(axes[1, 0])  # one ratio scale, so the prompt sets' slowdowns compare by eye
    for col, prompt_set in enumerate(sets):
        groups = [g for g in c.groups if g.prompt_set == prompt_set]
        # A burst (rate inf) has no place on the rate axis: the table has it.
        levels = sorted({lv.concurrency for g in groups for lv in g.levels
                         if math.isfinite(lv.concurrency)})
        # Levels every configuration has (the grid, not a dynamic server's T-1, T, T+1) get
        # their ticks first.
        grid = set.intersection(*({lv.concurrency for lv in g.levels} for g in groups))
        top, bottom = axes[0, col], axes[1, col]
        _throughput_panel(top, c, groups, steps)
        _ratio_panel(bottom, c, groups, steps)
        for ax in (top, bottom):
            log2_axis(ax, levels, grid)
            ax.legend(fontsize=7, loc="best", ncol=2 if len(ax.get_lines()) > 6 else 1)
        top.set_xlabel("")
        if c.facts.get("load", ("",))[0] == "open loop":
            bottom.set_xlabel("request rate (requests/s, log2 scale; a burst is in the table)")
        set_title(top, f"{prompt_set}: output tok/s per configuration and run")
        set_title(bottom, f"{prompt_set}: each run over {c.labels[0]} per level")
    return fig


def write_figure(c: Comparison, out_dir: Path, name: str = "compare") -> list[Path]:
    """Write the figure as out_dir/<name>.png and .svg; returns the paths."""
    fig = compare_figure(c)
    written = []
    for ext in ("png", "svg"):
        image = io.BytesIO()
        # No date in the SVG, so the same comparison gives the same file.
        fig.savefig(image, format=ext, dpi=110, metadata={"Date": None} if ext == "svg" else {})
        written.append(atomic_write(out_dir / f"{name}.{ext}", image.getvalue()))
    return written
