"""How a configuration looks in every figure and table: its colour, line, legend label and
short label, and the panel grid figures are drawn on (shared by the run's, the comparison's and
an open-loop run's figures)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from specbench import configurations
from specbench.errors import ConfigError

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn: it costs most of a
    # second of CPU at start-up, and the report's tables and `threshold` draw nothing
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Colour-blind-safe (Okabe-Ito); the same colour for a configuration in every figure.
MODE_COLORS: dict[str, str] = {
    "baseline": "#0072B2", "eagle3": "#D55E00", "dynamic": "#009E73", "zero-step": "#000000",
    "sglang-default": "#CC79A7", "tuned": "#E69F00",
}
MODE_LABELS: dict[str, str] = {
    "baseline": "baseline", "eagle3": "EAGLE-3", "dynamic": "dynamic-disable",
    "zero-step": "zero-step", "sglang-default": "SGLang default", "tuned": "tuned",
}
_SHORT: dict[str, str] = {"baseline": "base", "eagle3": "E3", "dynamic": "dyn",
                          "zero-step": "0-step", "sglang-default": "sgl-def", "tuned": "tuned"}
# The three configurations every default sweep has, in their order (kept for callers).
MODE_ORDER: tuple[str, ...] = ("baseline", "eagle3", "dynamic")
# Switching servers are drawn as wide translucent underlays: where one equals a static curve
# (its purpose) both stay visible.
_UNDERLAY = {"lw": 4.0, "alpha": 0.5, "zorder": 2}
_LINE = {"lw": 1.5, "zorder": 3}
_PANEL_W, _PANEL_H = 5.2, 3.8
_FALLBACK = ("#56B4E9", "#F0E442", "#882255", "#44AA99", "#999933", "#AA4499")

# Every figure a run can have, in the report's order (RUN_DIR/plots/<name>.png).
FIGURE_NAMES: tuple[str, ...] = ("throughput", "ratio", "acceptance", "latency", "envelope",
                                 "schedule", "context", "arrivals")


def _parsed(name: str) -> configurations.ServerConfiguration | None:
    try:
        return configurations.parse(name)
    except ConfigError:
        return None


def order(names: Iterable[str], default_steps: int = 3) -> list[str]:
    """Configuration names in measuring order (:func:`specbench.configurations.ordered`);
    names that are no configuration go last, sorted."""
    names = sorted(set(names))
    known = [n for n in names if _parsed(n) is not None]
    return ([c.name for c in configurations.ordered(known, default_steps)]
            + [n for n in names if n not in known])


def _named(name: str, fixed: dict[str, str], eagle3: str, dynamic: str) -> str:
    """`name` from `fixed`, else EAGLE-3 at K steps or a threshold server at T by the formats."""
    if name in fixed:
        return fixed[name]
    config = _parsed(name)
    if config is not None and config.kind == "eagle3" and config.steps is not None:
        return eagle3.format(config.steps)
    if config is not None and config.threshold is not None:
        return dynamic.format(config.threshold)
    return name


def _tree(name: str) -> configurations.ServerConfiguration | None:
    config = _parsed(name)
    return config if config is not None and config.tree else None


def label(name: str) -> str:
    """A configuration's name in a legend: "EAGLE-3 K=2", "EAGLE-3 tree K=3 topk=4 N=8",
    "dynamic-disable T=40"."""
    if tree := _tree(name):
        return f"EAGLE-3 tree K={tree.steps} topk={tree.topk} N={tree.draft_tokens}"
    return _named(name, MODE_LABELS, "EAGLE-3 K={}", "dynamic-disable T={}")


def short_label(name: str) -> str:
    """A configuration's name in a table column or flag list: "E3 k2", "E3 k3t4d8", "dyn t40"."""
    if tree := _tree(name):
        return f"E3 k{tree.steps}t{tree.topk}d{tree.draft_tokens}"
    return _named(name, _SHORT, "E3 k{}", "dyn t{}")


def _shade(hex_color: str, amount: float) -> str:
    """Toward white for amount > 0, toward black for amount < 0."""
    from matplotlib.colors import to_hex, to_rgb

    rgb = np.asarray(to_rgb(hex_color))
    target = np.ones(3) if amount > 0 else np.zeros(3)
    return to_hex(rgb + (target - rgb) * min(abs(amount), 0.8))


def color(name: str, default_steps: int = 3) -> str:
    """One colour per configuration: EAGLE-3 at other K in lighter (fewer steps) or darker
    (more) shades of EAGLE-3's; unknown names from a fixed list, by name."""
    if name in MODE_COLORS:
        return MODE_COLORS[name]
    config = _parsed(name)
    if config is not None and config.kind == "eagle3" and config.steps is not None:
        return _shade(MODE_COLORS["eagle3"], 0.25 * (default_steps - config.steps))
    if config is not None and config.adaptive == "threshold":
        return _shade(MODE_COLORS["dynamic"], 0.4)
    return _FALLBACK[sum(map(ord, name)) % len(_FALLBACK)]


def style(name: str) -> dict[str, Any]:
    config = _parsed(name)
    if config is not None and config.kind == "dynamic" and name not in ("zero-step",
                                                                       "sglang-default"):
        return dict(_UNDERLAY)
    if name == "zero-step":
        return {**_LINE, "ls": "--"}
    if name == "sglang-default":
        return {**_LINE, "ls": ":", "lw": 2.0}
    if _tree(name):  # a tree shares its K's colour with the chain: told apart by the line
        return {**_LINE, "ls": "-."}
    return dict(_LINE)


def slots_text(slots: Mapping[str, int]) -> str:
    """A schedule's slots as the report and its figure write them: `1→3, 71→0`."""
    return ", ".join(f"{key}→{steps}" for key, steps in slots.items())


def panels(n_rows: int, n_cols: int, title: str) -> tuple[Figure, np.ndarray]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width_in = max(_PANEL_W * n_cols, 7.5)
    fig = Figure(figsize=(width_in, _PANEL_H * n_rows + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = np.atleast_2d(np.asarray(fig.subplots(n_rows, n_cols, squeeze=False)))
    # About 9.5 bold 12-pt characters per inch.
    fig.suptitle(textwrap.fill(title, width=int(9.5 * width_in)), fontsize=12, fontweight="bold")
    return fig, axes


def set_title(ax: Axes, text: str) -> None:
    ax.set_title(textwrap.fill(text, width=58), fontsize=10)


def legend(ax: Axes, n: int) -> None:
    ax.legend(fontsize=7 if n > 6 else 8, loc="best", ncol=2 if n > 8 else 1)
