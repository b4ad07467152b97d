"""An open-loop run (``--request-rates``) for people: its tables, terminal view and figure.

Per prompt set: the two decisions (where EAGLE-3 stops winning on goodput and on tok/s, with
their intervals and the baseline's batch there), one row per rate and configuration (achieved
rate, tok/s, goodput, the latency percentiles asked with ``--percentiles``, the running batch
the server's gauges saw and the share above the dynamic server's T, its switches), and the
dynamic server's efficiency per rate. The figure puts goodput (tok/s without SLOs) and the
highest TPOT percentile against the rate, the SLO line and the goodput crossing marked.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from specbench.analysis.text import rate_decision_words
from specbench.report.blocks import Block, Heading, Para, plain, table
from specbench.report.style import (
    color,
    label,
    legend,
    order,
    panels,
    set_title,
    short_label,
    style,
)
from specbench.results import Run
from specbench.results.analysis import Analysis, DynamicRate, PromptSetAnalysis

if TYPE_CHECKING:  # drawn through style.panels, which imports matplotlib when it draws
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as MplFigure

FIGURE = "arrivals"
CAPTION = ("Goodput (output tok/s without SLOs) and TPOT against the request rate, per "
           "configuration; the SLO and the goodput crossing marked")


def _num(value: float | int | str | None, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) and math.isfinite(value) \
        else "–"


def _rate_value(text: str, finite_top: float) -> float:
    """A rate on the figure's axis: inf sits one doubling above the top finite rate."""
    return 2 * finite_top if text == "inf" else float(text)


def _percentiles(run: Run) -> tuple[int, ...]:
    return tuple(run.manifest.config.load.percentiles)


def point_headers(run: Run) -> tuple[str, ...]:
    qs = _percentiles(run)
    return ("rate", "configuration", "achieved req/s", "tok/s", "goodput req/s", "SLO met",
            *(f"TTFT p{q} ms" for q in qs), *(f"TPOT p{q} ms" for q in qs),
            "batch mean (p10-p90)", "above T", "switches", "flags")


def point_rows(run: Run, set_result: PromptSetAnalysis, short: bool = False
               ) -> list[tuple[str, ...]]:
    qs = _percentiles(run)
    points = set_result["points"]
    modes = order(points, run.manifest.config.server.speculative_num_steps)
    rates = list(dict.fromkeys(str(p["rate"]) for m in modes for p in points[m]))
    rates.sort(key=lambda r: math.inf if r == "inf" else float(r))
    rows = []
    for rate in rates:
        for mode in modes:
            p = next((q for q in points[mode] if q["rate"] == rate), None)
            if p is None:
                continue
            good = p.get("goodput_req_s")
            good_text = "–" if good is None else (
                f"{good:.2f}±{p['goodput_req_s_se']:.2f}" if p.get("goodput_req_s_se")
                is not None else f"{good:.2f}")
            batch = (f"{_num(p.get('server_running_reqs_mean'), '.0f')} "
                     f"({_num(p.get('server_running_reqs_p10'), '.0f')}-"
                     f"{_num(p.get('server_running_reqs_p90'), '.0f')})")
            above = p.get("above_threshold_share")
            rows.append((
                rate, short_label(mode) if short else label(mode),
                _num(p.get("achieved_rate_req_s"), ".2f"),
                _num(p.get("output_tok_s"), ".0f"), good_text,
                _num(p.get("slo_met_frac"), ".0%"),
                *(_num(p.get(f"ttft_ms_p{q}"), ".0f") for q in qs),
                *(_num(p.get(f"tpot_ms_p{q}"), ".1f") for q in qs),
                batch,
                f"{above:.0%} (T={p['threshold']})" if above is not None else "–",
                _num(p.get("server_switches"), ".0f"),
                str(p.get("flags") or "")))
    return rows


DYNAMIC_HEADERS = ("rate", "E on tok/s", "E on goodput", "switches", "batch above T")


def dynamic_rows(rows: list[DynamicRate]) -> list[tuple[str, ...]]:
    return [(r["rate"], _num(r["efficiency_tok_s"], ".2f"), _num(r["efficiency_goodput"], ".2f"),
             _num(r["switches"], ".0f"),
             f"{r['above_threshold_share']:.0%}" if r["above_threshold_share"] is not None
             else "–") for r in rows]


def _decision_lines(set_result: PromptSetAnalysis) -> list[str]:
    lines = []
    if set_result.get("goodput") is not None:
        lines.append(rate_decision_words(set_result["goodput"]))
    lines.append(rate_decision_words(set_result.get("tok_s")))
    t = set_result.get("threshold_batch_size")
    if t is not None:
        lines.append(f"threshold from the {set_result['threshold_source']} decision: batch size "
                     f"{t}")
    return lines


def intro(result: Analysis) -> str:
    slo = result.get("slo") or {}
    shape = ("Poisson arrivals" if result.get("burstiness") == 1.0
             else f"gamma arrivals (burstiness {result.get('burstiness'):g})")
    cap = (f", at most {result['max_concurrency']} in flight" if result.get("max_concurrency")
           else "")
    slos = ", ".join(f"{k.removesuffix('_ms').upper()} <= {v:g} ms" for k, v in slo.items())
    return (f"Open loop: {shape} at {', '.join(result['request_rates'])} requests/s{cap}; "
            + (f"goodput counts the window's arrivals that met {slos}." if slos
               else "no SLOs given (--slo), so no goodput."))


def blocks(run: Run, result: Analysis) -> list[Block]:
    """The open-loop sections of report.md / report.html."""
    out: list[Block] = [Para(plain(intro(result)))]
    for name, s in result["prompt_sets"].items():
        out.append(Heading(2, f"Prompt set: {name}"))
        out += [Para(plain(line + ".")) for line in _decision_lines(s)]
        out.append(table(point_headers(run), point_rows(run, s)))
        for mode, rows in (s.get("dynamic") or {}).items():
            out.append(Para(plain(f"{label(mode)} against the better static server at each "
                                  "rate (E = dynamic / max(baseline, EAGLE-3)); switches: "
                                  "runtime-state switches its log shows during the point.")))
            out.append(table(DYNAMIC_HEADERS, dynamic_rows(rows)))
    return out


def render_terminal(run: Run, console: Console, result: Analysis) -> None:
    console.print(intro(result), highlight=False)
    for name, s in result["prompt_sets"].items():
        console.print(f"[bold]{name}[/]: " + "; ".join(_decision_lines(s)), highlight=False)
        # The terminal's table keeps what fits 100 columns: report.md has every percentile.
        headers = point_headers(run)
        q = max(_percentiles(run))
        keep = [headers.index(h) for h in ("rate", "configuration", "tok/s", "goodput req/s",
                                           "SLO met", f"TTFT p{q} ms", f"TPOT p{q} ms",
                                           "batch mean (p10-p90)", "switches", "flags")]
        t = Table(title=f"{name}: per rate (report.md has every percentile)",
                  title_justify="left")
        short = {"configuration": "config", "goodput req/s": "goodput", "SLO met": "met",
                 f"TTFT p{q} ms": f"TTFT p{q}", f"TPOT p{q} ms": f"TPOT p{q}",
                 "batch mean (p10-p90)": "batch (p10-p90)"}
        for i in keep:
            t.add_column(short.get(headers[i], headers[i]),
                         justify="left" if headers[i] in ("configuration", "flags") else "right")
        for row in point_rows(run, s, short=True):
            t.add_row(*(row[i] for i in keep))
        console.print(t)
        for mode, rows in (s.get("dynamic") or {}).items():
            d = Table(title=f"{name}: {label(mode)}", title_justify="left")
            for h in DYNAMIC_HEADERS:
                d.add_column(h, justify="right")
            for row in dynamic_rows(rows):
                d.add_row(*row)
            console.print(d)


def _axis(ax: Axes, rates: list[str], finite_top: float) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks([_rate_value(r, finite_top) for r in rates], labels=rates)
    ax.minorticks_off()
    ax.set_xlabel("request rate (requests/s)")
    ax.grid(alpha=0.3)


def figure(run: Run, result: Analysis) -> MplFigure:
    """Goodput (or tok/s) and the top TPOT percentile against the rate, per set."""
    sets = list(result["prompt_sets"])
    slo = result.get("slo") or {}
    q = max(_percentiles(run))
    fig, axes = panels(2, len(sets), "Under arrivals: goodput and TPOT against the request rate")
    steps = run.manifest.config.server.speculative_num_steps
    for col, name in enumerate(sets):
        s = result["prompt_sets"][name]
        rates = list(result["request_rates"])
        finite = [float(r) for r in rates if r != "inf"] or [1.0]
        top, bottom = axes[0][col], axes[1][col]
        metric = "goodput_req_s" if slo else "output_tok_s"
        for mode in order(s["points"], steps):
            pts = s["points"][mode]
            xs = [_rate_value(str(p["rate"]), max(finite)) for p in pts]
            for ax, key in ((top, metric), (bottom, f"tpot_ms_p{q}")):
                ys = [p.get(key) if p.get(key) is not None else math.nan for p in pts]
                ax.plot(xs, ys, marker="o", ms=4, color=color(mode, steps), label=label(mode),
                        **style(mode))
        good = s.get("goodput") or {}
        if good.get("rate_req_s") is not None:
            top.axvline(good["rate_req_s"], color="grey", ls=":", lw=1.2,
                        label=f"goodput crossing {good['rate_req_s']:.3g} req/s")
        if "tpot_ms" in slo:
            bottom.axhline(slo["tpot_ms"], color="red", ls="--", lw=1,
                           label=f"TPOT SLO {slo['tpot_ms']:g} ms")
        top.set_ylabel("goodput (requests/s meeting the SLOs)" if slo
                       else "output tokens/s")
        bottom.set_ylabel(f"TPOT p{q} (ms)")
        for ax in (top, bottom):
            _axis(ax, rates, max(finite))
            legend(ax, len(ax.get_lines()))
        set_title(top, name)
    return fig
