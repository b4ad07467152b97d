"""The context-length surface of a bucketed run: tables, terminal view and heatmap figure.

Reads analysis.json's ``context_surface`` (:mod:`specbench.analysis.surface`): per base prompt
set, its buckets in rising context order with both decisions, and the ratio grids. The figure
is a heatmap per set and ratio (rows: buckets; columns: concurrency levels; colour: log2 of
the ratio, red where EAGLE-3 loses) with the crossing drawn through it: a user reads at a
glance up to which concurrency drafting pays at each context length.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from rich.console import Console
from rich.table import Table

from specbench.analysis.text import crossing
from specbench.report.blocks import Block, Heading, Para, plain, table
from specbench.results.analysis import (
    Analysis,
    ContextSurface,
    Decision,
    PlainServer,
    SurfaceBucket,
    SurfaceDecision,
)

if TYPE_CHECKING:  # imported by surface_figure, where it draws: the tables need no matplotlib
    from matplotlib.figure import Figure as MplFigure

HEADERS = ("bucket", "prompt p50", "prompt p90", "T", "c* vs 0-step", "95% interval",
           "c* vs base", "95% interval", "tax", "E dyn min")
GridKey = Literal["over_zero_step", "over_baseline"]
DecisionKey = Literal["one_server", "plain_server"]
# (key in a set's surface, the decision drawn on it, title)
PANELS: tuple[tuple[GridKey, DecisionKey, str], ...] = (
    ("over_zero_step", "one_server", "EAGLE-3 / zero-step (one server: T)"),
    ("over_baseline", "plain_server", "EAGLE-3 / baseline (plain server: c*)"))


def c_star_cells(d: Decision | PlainServer | SurfaceDecision, digits: int = 1) -> tuple[str, str]:
    """(crossing cell, 95% interval cell) of one decision, for the report's tables."""
    outcome = d.get("outcome")
    if outcome is None:
        return "–", "–"
    if outcome != "crossover":
        return ("never wins" if outcome == "eagle3_never_wins" else "always wins"), "–"
    c_star, lo, hi = crossing(d)
    return f"{c_star:.{digits}f}", f"{lo:.{digits}f}–{hi:.{digits}f}"


def _tokens(b: SurfaceBucket, key: Literal["p50", "p90"]) -> str:
    spread = b.get("prompt_tokens")
    return f"{spread[key]:,}" if spread and key in spread else "–"


def _tax(b: SurfaceBucket) -> str:
    values = list((b.get("tax") or {}).values())
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return f"{lo:.0%}" if f"{lo:.0%}" == f"{hi:.0%}" else f"{lo:.0%}–{hi:.0%}"


def bucket_rows(surface: ContextSurface) -> list[list[str]]:
    rows = []
    for b in surface["buckets"]:
        threshold = b["one_server"].get("threshold_batch_size")
        e_min = b.get("efficiency_min")
        rows.append([f"{b['bucket']} ({b['range']})", _tokens(b, "p50"), _tokens(b, "p90"),
                     "–" if threshold is None else str(threshold), *c_star_cells(b["one_server"]),
                     *c_star_cells(b["plain_server"]), _tax(b),
                     "–" if e_min is None else f"{e_min:.3f}"])
    return rows


def grid_rows(surface: ContextSurface, key: GridKey) -> tuple[list[str], list[list[str]]]:
    headers = ["bucket", *(f"c={c}" for c in surface["levels"])]
    rows = [[b["bucket"], *("–" if v is None else f"{v:.2f}" for v in values)]
            for b, values in zip(surface["buckets"], surface[key], strict=True)]
    return headers, rows


_EXPLAIN = ("Each prompt set was measured once per context bucket (set@bucket, prompts of more "
            "than the previous bucket's top and at most this one, as the server counted them). "
            "T is the one-server threshold (batch size) of that bucket; a threshold holds for "
            "traffic whose prompts fall in its bucket. The grids give EAGLE-3 over its zero-step "
            "path and over the baseline per level; below 1 drafting loses.")


_MISSING_CURVE = {"one_server": "zero-step", "plain_server": "baseline"}


def _unmeasured(surface: ContextSurface, key: GridKey) -> bool:
    return all(v is None for line in surface[key] for v in line)


def surface_blocks(result: Analysis | None) -> list[Block]:
    """The report's "Context length" section; nothing for a run without buckets."""
    surfaces = (result or {}).get("context_surface")
    if not surfaces:
        return []
    out: list[Block] = [Heading(2, "Context length"), Para(plain(_EXPLAIN))]
    for base, surface in surfaces.items():
        out += [Heading(3, base), table(HEADERS, bucket_rows(surface))]
        for key, decision, title in PANELS:
            if _unmeasured(surface, key):
                missing = _MISSING_CURVE[decision]
                out.append(Para(plain(f"{title}: not measured (no {missing} curve in this run).")))
                continue
            headers, rows = grid_rows(surface, key)
            out += [Para(plain(title + ":")), table(headers, rows)]
    return out


def render_surface_terminal(result: Analysis | None, console: Console) -> None:
    surfaces = (result or {}).get("context_surface")
    for base, surface in (surfaces or {}).items():
        decisions = Table(title=f"{base}: decisions per context bucket", title_justify="left")
        for header in ("prompt tokens", "p50", "T", "c* vs 0-step", "c* vs base", "E min"):
            decisions.add_column(header, justify="left" if header == "prompt tokens" else "right")
        for b, row in zip(surface["buckets"], bucket_rows(surface), strict=True):
            decisions.add_row(b["range"].removesuffix(" prompt tokens"), row[1], row[3],
                              _joined(*c_star_cells(b["one_server"], 0)),
                              _joined(*c_star_cells(b["plain_server"], 0)), row[9])
        console.print(decisions)
        headers, rows = grid_rows(surface, "over_zero_step")
        grid = Table(title=f"{base}: EAGLE-3 / zero-step by context and concurrency",
                     title_justify="left")
        for header in headers:
            grid.add_column(header, justify="left" if header == "bucket" else "right")
        for row in rows:
            grid.add_row(*(f"[red]{cell}[/]" if _below_one(cell) else cell for cell in row))
        console.print(grid)


def _joined(value: str, interval: str) -> str:
    return value if interval == "–" else f"{value} [{interval}]"


def _below_one(cell: str) -> bool:
    try:
        return float(cell) < 1.0
    except ValueError:
        return False


def _x_of(c: float, levels: list[int]) -> float:
    """A concurrency's position on the heatmap's column axis (log2 between columns)."""
    if c <= levels[0]:
        return 0.0
    for i in range(len(levels) - 1):
        lo, hi = levels[i], levels[i + 1]
        if c <= hi:
            return i + (math.log2(c) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
    return float(len(levels) - 1)


def _crossing_x(decision: SurfaceDecision, levels: list[int]) -> float | None:
    outcome = decision.get("outcome")
    if outcome == "crossover":
        return _x_of(crossing(decision)[0], levels)
    if outcome == "eagle3_always_wins":
        return len(levels) - 0.5
    if outcome == "eagle3_never_wins":
        return -0.5
    return None


def surface_figure(result: Analysis | None) -> MplFigure | None:
    """Heatmaps of both ratios per base set with the crossing line; None without buckets."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    surfaces = (result or {}).get("context_surface")
    if not surfaces:
        return None
    n_sets = len(surfaces)
    fig = MplFigure(figsize=(11, 0.6 + 2.4 * n_sets), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_sets, 2, squeeze=False)
    image = None
    for row, (base, surface) in enumerate(surfaces.items()):
        levels, buckets = surface["levels"], surface["buckets"]
        for col, (key, decision, title) in enumerate(PANELS):
            ax = axes[row][col]
            if _unmeasured(surface, key):
                ax.text(0.5, 0.5, f"not measured (no {_MISSING_CURVE[decision]} curve)",
                        ha="center", va="center", transform=ax.transAxes)
            values = [[math.log2(v) if v else math.nan for v in line] for line in surface[key]]
            xs = [_crossing_x(b[decision], levels) for b in buckets]
            image = ax.imshow(values, cmap="RdBu", vmin=-1.5, vmax=1.5, aspect="auto",
                              origin="lower")
            for row_y, line in enumerate(surface[key]):
                for col_x, v in enumerate(line):
                    if v is not None:
                        ax.text(col_x, row_y + 0.25, f"{v:.2f}", ha="center", va="center",
                                fontsize=8)
            # The crossing: a bar across each bucket's row, joined from bucket to bucket
            # (at the right edge where EAGLE-3 wins at every level, the left where it never does).
            points = [(x, y) for y, x in enumerate(xs) if x is not None]
            for x, y in points:
                ax.plot([x, x], [y - 0.45, y + 0.45], color="black", lw=3)
            if len(points) > 1:
                ax.plot([p[0] for p in points], [p[1] for p in points], "k--", lw=1.2)
            ax.set_xticks(range(len(levels)), [str(c) for c in levels])
            ax.set_yticks(range(len(buckets)),
                          [b["range"].removesuffix(" prompt tokens") for b in buckets])
            ax.set_xlabel("concurrency")
            ax.set_ylabel("prompt tokens")
            ax.set_title(f"{base}: {title}", fontsize=10, loc="left")
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="log2 ratio (blue: EAGLE-3 faster)")
    return fig
