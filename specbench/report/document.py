"""What a run found, for people: rich tables in the terminal, <run>/report.md and report.html.

All start with the finding (per prompt set: where one adaptive server should stop drafting,
and where a separate plain server beats any speculative one), then give per prompt set the
tables behind it: output tok/s per configuration at each concurrency, and per level the two
ratios (EAGLE-3 over the baseline and over its zero-step path), the zero-step tax, the
efficiency of the one-threshold server and of the tuned schedule, the best K, acceptance, and
any flags the measurement raised. report.md adds the figures, latency per level and
configuration, request lengths and acceptance per prompt sub-category
(:mod:`specbench.report.tables`), and what each flag means; report.html is the same blocks
(:mod:`specbench.report.blocks`) as one self-contained page with the figures inside
(:mod:`specbench.report.html`). Any set of configurations works (columns follow
:func:`specbench.configurations.ordered`, with the short labels of :func:`style.short_label`),
and a table that would be wider than 100 columns is split in two. Everything comes from the
run directory through :func:`specbench.results.load_run` and from :mod:`specbench.analysis`; a
run without both baseline and eagle3 still gets its tables, only without decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from specbench.analysis import current_analysis, point_means
from specbench.analysis.explain import SetExplanation
from specbench.analysis.mix import chosen_threshold
from specbench.analysis.schedule import EFFICIENCY_TARGET
from specbench.metrics import explain_flag
from specbench.report import arrivals
from specbench.report.blocks import Block, Bullets, Figure, Heading, Para, plain, table, to_markdown
from specbench.report.context import c_star_cells, render_surface_terminal, surface_blocks
from specbench.report.html import HTML_FILE, figure_markup, render_html
from specbench.report.provenance import measured_on
from specbench.report.style import FIGURE_NAMES, label, order, short_label, slots_text
from specbench.report.tables import (
    acceptance_by_category,
    category_section,
    finished_requests,
    latency_section,
    length_section,
)
from specbench.report.why import explained, finding_sentence, why_blocks
from specbench.results import PointKey, Run
from specbench.results.analysis import Analysis, PromptSetAnalysis
from specbench.results.manifest import gpu_time
from specbench.results.store import atomic_write
from specbench.stats import finite_or_none

__all__ = ["MAX_WIDTH", "RATIO_HEADER", "REPORT_FILE", "LevelRow", "acceptance_by_category",
           "legend", "level_rows", "render_markdown", "render_terminal", "report_blocks",
           "table_groups", "write_report"]

REPORT_FILE = "report.md"
RATIO_HEADER = "E3/base"
MAX_WIDTH = 100  # columns: a wider table is split into tok/s and decisions
# The level columns besides tok/s: (header, what it is).
_DECISION_COLUMNS: tuple[tuple[str, str], ...] = (
    (RATIO_HEADER, "EAGLE-3 tok/s / baseline tok/s"),
    ("E3/0-step", "EAGLE-3 / zero-step (one server drafts where it is >= 1)"),
    ("tax", "1 - zero-step / baseline"),
    ("E dyn", "dynamic / max(EAGLE-3, zero-step), paired by request"),
    ("E env", "dynamic / max(baseline, EAGLE-3), paired by request"),
    ("best K", "draft steps with the highest tok/s (0 = zero-step)"),
    ("E tuned", "tuned / max(each K, zero-step), paired by request"),
    ("tuned/sgl", "tuned / sglang-default, paired by request"),
    ("tuned K", "the K the tuned server ran: the static K with the nearest tokens per verify"),
    ("sgl K", "the K SGLang's default ran, likewise"),
    ("mix loss", "loss at the mix's threshold"),
    ("accept", "EAGLE-3 tokens per verify step"),
)
_FIGURE_CAPTIONS: dict[str, str] = {
    "throughput": "Output throughput per configuration (bands: min-max over repeats, else 95%)",
    "ratio": "EAGLE-3 over the baseline and over its zero-step path, with 95% bands",
    "acceptance": "Acceptance length (tokens per verify step)",
    "latency": "TTFT and inter-token latency, p50 and p99",
    "envelope": "Efficiency of the one-threshold server and of the tuned schedule",
    "schedule": "Best draft steps per level and the tuned batch-size slots",
    "context": "EAGLE-3 over zero-step and over the baseline by context bucket and concurrency, "
               "with the crossing",
    arrivals.FIGURE: arrivals.CAPTION,
}


@dataclass(frozen=True)
class LevelRow:
    """One line of a per-prompt-set table (None where nothing was measured)."""

    concurrency: int
    tok_s: dict[str, float | None]  # by configuration
    values: dict[str, float | None]  # by decision column header
    flags: dict[str, list[str]]  # flag name -> configurations whose point raised it

    @property
    def ratio(self) -> float | None:
        return self.values.get(RATIO_HEADER)


def _by_level(mapping: Mapping[str, float | None] | None) -> dict[int, float]:
    return {int(c): float(v) for c, v in (mapping or {}).items() if v is not None}


def _level_values(set_result: PromptSetAnalysis) -> dict[str, dict[int, float]]:
    """Each decision column's values by level, from one set's analysis."""
    one = set_result.get("one_server") or {}
    schedule = set_result.get("schedule") or {}
    has_zero = one.get("outcome") is not None
    return {
        RATIO_HEADER: _by_level(set_result.get("ratio_by_concurrency")),
        "E3/0-step": _by_level(one.get("ratio_by_concurrency")),
        "tax": _by_level((set_result.get("plain_server") or {}).get("tax")),
        "E dyn": _by_level(one.get("efficiency")),
        "E env": {} if has_zero else _by_level(set_result.get("envelope_efficiency")),
        "best K": _by_level(schedule.get("per_level")),
        "E tuned": _by_level(schedule.get("efficiency")),
        "tuned/sgl": _by_level(schedule.get("vs_sglang_default")),
        "tuned K": _by_level((schedule.get("steps_by_accept") or {}).get("tuned")),
        "sgl K": _by_level((schedule.get("steps_by_accept") or {}).get("sglang-default")),
        "mix loss": _by_level(set_result.get("loss_at_mix_threshold")),
    }


def _point_flags(summary: pd.DataFrame, c: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in summary[summary["concurrency"] == c].itertuples():
        for name in str(r.flags).split(";"):
            if name.strip() and str(r.mode) not in out.setdefault(name.strip(), []):
                out[name.strip()].append(str(r.mode))
    return out


def level_rows(run: Run, prompt_set: str, result: Analysis | None) -> list[LevelRow]:
    """The per-level table of one prompt set, shared by the terminal and report.md."""
    means = point_means(run)
    means = means[means["prompt_set"] == prompt_set]
    columns = _level_values((result or {}).get("prompt_sets", {}).get(prompt_set, {}))
    modes = order(means["mode"].unique(), run.manifest.config.server.speculative_num_steps)
    summary = run.summary[run.summary["prompt_set"] == prompt_set]
    rows = []
    for c in sorted(int(c) for c in means["concurrency"].unique()):
        at_c = means[means["concurrency"] == c].set_index("mode")
        values = {h: columns[h].get(c) for h in columns}
        values["accept"] = finite_or_none(at_c["accept_length"].get("eagle3"))
        rows.append(LevelRow(
            concurrency=c,
            tok_s={m: finite_or_none(at_c["output_tok_s"].get(m)) for m in modes},
            values=values, flags=_point_flags(summary, c)))
    return rows


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def _flags_cell(row: LevelRow, modes: list[str] | None = None) -> str:
    # "client_bound (base, E3)": one entry per flag, the configurations that raised it.
    ranked = modes or order({m for ms in row.flags.values() for m in ms})
    return "; ".join(
        f"{name} ({', '.join(short_label(m) for m in sorted(ms, key=ranked.index))})"
        for name, ms in sorted(row.flags.items()))


Column = tuple[str, Callable[[LevelRow], str]]
_FORMATS = {"tax": ".0%", "best K": ".0f", "tuned K": ".0f", "sgl K": ".0f", "mix loss": ".1%",
            "accept": ".2f",
            RATIO_HEADER: ".2f", "E3/0-step": ".2f"}


def _tok_columns(rows: list[LevelRow]) -> list[Column]:
    def tok_s(mode: str) -> Callable[[LevelRow], str]:
        return lambda r: _fmt(r.tok_s[mode], ",.0f")

    modes = list(rows[0].tok_s) if rows else []
    return [(short_label(m), tok_s(m)) for m in modes if any(r.tok_s[m] is not None for r in rows)]


def _decision_columns(rows: list[LevelRow]) -> list[Column]:
    def value(header: str) -> Callable[[LevelRow], str]:
        return lambda r: _fmt(r.values.get(header), _FORMATS.get(header, ".3f"))

    return [(h, value(h)) for h, _ in _DECISION_COLUMNS
            if any(r.values.get(h) is not None for r in rows)]


def _width(columns: list[Column], rows: list[LevelRow], two_line: bool) -> int:
    """Characters of a markdown (or boxed) row of these columns; `two_line`: headers may wrap
    at their first space (the terminal's)."""
    def header(h: str) -> int:
        return max(len(part) for part in h.split(" ", 1)) if two_line else len(h)

    return 1 + sum(max(header(h), *(len(render(r)) for r in rows)) + 3 for h, render in columns)


def table_groups(rows: list[LevelRow], width: int = MAX_WIDTH,
                 two_line: bool = False) -> list[tuple[str, list[Column]]]:
    """One table (tok/s and decisions) when it fits in `width` columns, else two."""
    c_col: Column = ("c", lambda r: str(r.concurrency))
    tok, decisions = _tok_columns(rows), _decision_columns(rows)
    if _width([c_col, *tok, *decisions], rows, two_line) <= width or not decisions:
        return [("output tok/s and decisions", [c_col, *tok, *decisions])]
    return [("output tok/s", [c_col, *tok]), ("decisions", [c_col, *decisions])]


def legend(rows: list[LevelRow]) -> str:
    """What the columns of these rows mean, in one line."""
    modes = [m for m in (rows[0].tok_s if rows else {}) if any(r.tok_s[m] for r in rows)]
    names = [f"{short_label(m)} = {label(m)}" for m in modes if short_label(m) != label(m)]
    used = {h for h, _ in _decision_columns(rows)}
    parts = [f"{h} = {text}" for h, text in _DECISION_COLUMNS if h in used]
    return "; ".join(["tok/s per configuration" + (f" ({', '.join(names)})" if names else ""),
                      *parts])


def _applied_lines(result: Analysis) -> list[str]:
    """The thresholds this run's dynamic server used (the finding says what to use)."""
    sets = result["prompt_sets"]
    lines = []
    used = {name: r.get("applied_threshold") for name, r in sets.items()}
    if any(t is not None for t in used.values()) and len(set(used.values())) > 1:
        shown = ", ".join(f"T = {t} for {name}" for name, t in used.items() if t is not None)
        lines.append(f"The dynamic server ran each prompt set with its own threshold: {shown}.")
    else:
        applied = result.get("applied_threshold")
        if applied is not None and applied != result.get("recommended_threshold"):
            lines.append(f"The dynamic-disable server in this run used T = {applied}.")
    between = result.get("between_launch")
    if between:
        moved = ", ".join(f"{name} {found['sd_pct']:.1f}%"
                          for name, found in between["by_configuration"].items())
        lines.append(f"The intervals carry how far each configuration moved between launches, "
                     f"from a second launch ({between['relaunch']}): sd {moved}.")
    return lines


def _schedule_line(set_result: PromptSetAnalysis) -> str | None:
    schedule = set_result.get("schedule") or {}
    if not schedule.get("slots"):
        return None
    text = f"Tuned schedule (batch size → steps): {slots_text(schedule['slots'])}"
    applied = schedule.get("applied_slots")
    if applied and dict(applied) != dict(schedule["slots"]):
        # the run's tuned server ran what the analysis chose when it was measured
        text += f" (the tuned server measured here ran {slots_text(applied)})"
    if schedule.get("efficiency_min") is not None:
        text += f"; lowest efficiency {schedule['efficiency_min']:.3f}"
        under = {c: band for c, band in (schedule.get("efficiency_interval") or {}).items()
                 if schedule["efficiency"][c] < EFFICIENCY_TARGET}
        if under:  # where the tuned server fell behind a static one, and how surely
            shown = ", ".join(f"c={c} {schedule['efficiency'][c]:.3f} [{lo:.3f}–{hi:.3f}]"
                              for c, (lo, hi) in sorted(under.items(), key=lambda i: int(i[0])))
            text += f" (under {EFFICIENCY_TARGET}, 95% within one launch: {shown})"
    if schedule.get("vs_sglang_default_geomean") is not None:
        text += f"; vs SGLang's default ×{schedule['vs_sglang_default_geomean']:.3f} (geomean)"
    intervals = schedule.get("vs_sglang_default_interval") or {}
    if intervals:
        by_level = ", ".join(
            f"c={c} ×{schedule['vs_sglang_default'][c]:.2f} [{lo:.2f}–{hi:.2f}]"
            for c, (lo, hi) in sorted(intervals.items(), key=lambda item: int(item[0])))
        text += f"; tuned / SGLang's default by level (95%): {by_level}"
    return text


def _notes(set_result: PromptSetAnalysis) -> list[str]:
    one = set_result.get("one_server") or {}
    return ([f"plain server: {n}" for n in set_result.get("notes", [])]
            + [f"one server: {n}" for n in one.get("notes", [])])


# ---------------------------------------------------------------------------------------------
# terminal


def _rich_table(title: str, columns: list[Column], rows: list[LevelRow]) -> Table:
    table = Table(title=title, title_justify="left")
    for header, _ in columns:
        table.add_column(header.replace(" ", "\n", 1), justify="right", no_wrap=True)
    for row in rows:
        cells = [render(row) for _, render in columns]
        for i, (header, _) in enumerate(columns):
            value = row.values.get(header) if header in (RATIO_HEADER, "E3/0-step") else None
            if value is not None:
                cells[i] = f"[{'green' if value >= 1.0 else 'red'}]{cells[i]}[/]"
        table.add_row(*cells)
    return table


def render_terminal(run: Run, console: Console, result: Analysis | None = None,
                    sets: Sequence[SetExplanation] | None = None) -> None:
    """Print the finding, then per prompt set its tables, flags and notes (`sets`: explain's
    reading of the run, read here when not given)."""
    result = result if result is not None else current_analysis(run)
    if run.open_loop and result is not None:
        console.print(Panel("\n".join([f"[bold]{result['finding']}[/]", measured_on(run)]),
                            title="specbench finding", expand=False))
        arrivals.render_terminal(run, console, result)
        return
    if result is not None:
        why = finding_sentence(explained(run) if sets is None else sets)
        body = "\n".join([f"[bold]{result['finding']}{why}[/]", measured_on(run),
                          *_applied_lines(result)])
        console.print(Panel(body, title="specbench finding", expand=False))
    else:
        console.print(Panel("No crossover: the run needs eagle3 points and baseline or "
                            f"zero-step ones. {measured_on(run)}", title="specbench",
                            expand=False))
    for prompt_set in run.prompt_sets:
        rows = level_rows(run, prompt_set, result)
        set_result = (result or {}).get("prompt_sets", {}).get(prompt_set)
        console.print(f"[bold]{prompt_set}[/]" + (f": {set_result['sentence']}"
                                                   if set_result else ""))
        for title, columns in table_groups(rows, min(console.width, MAX_WIDTH), two_line=True):
            console.print(_rich_table(f"{prompt_set}: {title}", columns, rows))
        console.print(f"  {legend(rows)}", highlight=False)
        modes = list(rows[0].tok_s) if rows else []
        for row in rows:
            if row.flags:
                console.print(f"  [yellow]flags at c={row.concurrency}:[/] "
                              f"{_flags_cell(row, modes)}", highlight=False)
        line = _schedule_line(set_result or {})
        if line:
            console.print(f"  {line}", highlight=False)
        for note in _notes(set_result or {}):
            console.print(f"  [yellow]note:[/] {note}")
    render_surface_terminal(result, console)
    gpu_rows = gpu_time_rows(run)
    if gpu_rows:
        spent = ", ".join(f"{r[0]} {r[-1]}" for r in gpu_rows[:-1])
        total = gpu_rows[-1]
        console.print(f"GPU time: {total[-1]} GPU-min ({spent}), {total[3]} of them in "
                      f"{total[2]} launch(es)", highlight=False)


# ---------------------------------------------------------------------------------------------
# report.md and report.html


def _pct_span(values: Mapping[str, float] | None) -> str:
    numbers = list((values or {}).values())
    if not numbers:
        return "–"
    lo, hi = min(numbers), max(numbers)
    return f"{lo:.0%}" if f"{lo:.0%}" == f"{hi:.0%}" else f"{lo:.0%}–{hi:.0%}"


def _summary_section(result: Analysis) -> list[Block]:
    headers = ["prompt set", "T", "c* vs 0-step", "95% interval", "c* vs base",
               "95% interval", "tax", "plain faster"]
    body = []
    for name, s in result["prompt_sets"].items():
        plain_server = s.get("plain_server") or {}
        body.append([name, str(chosen_threshold(s)), *c_star_cells(s.get("one_server") or {}),
                     *c_star_cells(s), _pct_span(plain_server.get("tax")),
                     _pct_span(plain_server.get("faster_above"))])
    notes = [plain(f"{name}, {note}") for name, s in result["prompt_sets"].items()
             for note in _notes(s)]
    return [table(headers, body),
            Para(plain("T is the one-server threshold (batch size): where EAGLE-3 falls below "
                       "its own zero-step path, as c users keep c requests running (where "
                       "EAGLE-3 meets the baseline when no zero-step curve was measured). "
                       "c* vs base is where a separate plain server starts to beat "
                       "any speculative one; tax = 1 - zero-step / baseline over the levels; "
                       "plain faster = baseline over the best speculative configuration above "
                       "c* vs base.")),
            *([Bullets(tuple(notes))] if notes else [])]


def _set_section(run: Run, prompt_set: str, result: Analysis | None) -> list[Block]:
    set_result = (result or {}).get("prompt_sets", {}).get(prompt_set)
    out: list[Block] = [Heading(2, prompt_set)]
    if set_result:
        out.append(Para(plain(set_result["sentence"] + ".")))
        line = _schedule_line(set_result)
        if line:
            out.append(Para(plain(line + ".")))
    rows = level_rows(run, prompt_set, result)
    for _title, columns in table_groups(rows):
        out.append(table([h for h, _ in columns],
                         [[render(r) for _, render in columns] for r in rows]))
    out.append(Para((("i", legend(rows) + "."),)))
    modes = list(rows[0].tok_s) if rows else []
    flagged = [plain(f"c={r.concurrency}: {_flags_cell(r, modes)}") for r in rows if r.flags]
    if flagged:
        out += [Para(plain("Flags:")), Bullets(tuple(flagged))]
    return out


def _flag_advice(name: str) -> str:
    """The advice of a flag (specbench.metrics owns the texts); "" for a name it does not know."""
    try:
        return explain_flag(name)
    except ValueError:
        return ""


def _flags_section(run: Run) -> list[Block]:
    where: dict[str, list[str]] = {}
    for r in run.summary.to_dict("records"):
        for name in str(r["flags"]).split(";"):
            if name.strip():
                where.setdefault(name.strip(), []).append(PointKey.of_row(r).label)
    if not where:
        return [Para(plain("No point raised a flag."))]
    items = []
    for name, points in sorted(where.items()):
        text = _flag_advice(name)
        items.append((("b", name), ("", (f" — {text}" if text else "")
                      + f" ({len(points)} point{'s' if len(points) > 1 else ''}: "
                      + ", ".join(points) + ")")))
    return [Bullets(tuple(items))]


def _run_section(run: Run) -> list[Block]:
    manifest = run.manifest
    config = manifest.config
    gpus = manifest.fingerprint.get("gpus")
    facts = [
        ("command", " ".join(manifest.command)),
        ("engine", config.engine),
        ("engine version", manifest.engine.version),
        ("GPU", gpus),
        ("model", config.server.model_path),
        ("draft model", config.server.draft_model_path),
        ("speculative steps", config.server.speculative_num_steps),
        ("sim profile", config.sim.profile if config.engine == "sim" else None),
        ("protocol", config.load.protocol),
        ("window (s)", config.load.window_s),
        ("repeats", config.load.repeats),
        ("started", manifest.started_at),
        ("ended", manifest.ended_at),
    ]
    return [Bullets(tuple((("", f"{name}: "), ("code", str(value)))
                          for name, value in facts if value not in (None, "")))]


def gpu_time_rows(run: Run) -> list[tuple[str, ...]]:
    """Per configuration, then in all: GPUs, launches, launch and point GPU time (empty for a
    run made before specbench recorded GPU time)."""
    spent = gpu_time(run.manifest)

    def minutes(gpu_s: float) -> str:
        return f"{gpu_s / 60:.1f}"

    rows: list[tuple[str, ...]] = [
        (name, str(t.gpus), str(t.launches), minutes(t.launch_gpu_s), str(t.points),
         minutes(t.point_gpu_s), minutes(t.total_gpu_s))
        for name, t in spent.items()]
    if rows:
        times = spent.values()
        rows.append(("all", "", str(sum(t.launches for t in times)),
                     minutes(sum(t.launch_gpu_s for t in times)),
                     str(sum(t.points for t in times)),
                     minutes(sum(t.point_gpu_s for t in times)),
                     minutes(sum(t.total_gpu_s for t in times))))
    return rows


GPU_TIME_HEADERS = ("configuration", "GPUs", "launches", "launch GPU-min", "points",
                    "point GPU-min", "GPU-min")


def _gpu_section(run: Run) -> list[Block]:
    rows = gpu_time_rows(run)
    if not rows:
        return []
    note = ("GPU time each configuration held: its launches (command to ready), and its points "
            "(cache flush, warmup, window, scrapes), times its GPUs.")
    if run.manifest.config.engine == "sim":
        note += (" On the simulator, points count in simulated GPU time and launches in the "
                 "simulator's own start-up time.")
    return [Heading(2, "GPU time"), Para(plain(note)), table(GPU_TIME_HEADERS, rows)]


def _figures_section(run: Run, figure_names: list[str], plot_error: str | None) -> list[Block]:
    if not figure_names and not plot_error:
        return []
    out: list[Block] = [Heading(2, "Figures")]
    out += [Figure(name, _FIGURE_CAPTIONS.get(name, name)) for name in figure_names]
    if plot_error:
        out.append(Para((("", f"The figures could not be drawn ({plot_error}); run "),
                         ("code", f"specbench plot {run.path}"), ("", " to retry."))))
    return out


def report_blocks(run: Run, result: Analysis | None,
                  figure_names: list[str] | None = None,
                  plot_error: str | None = None,
                  sets: Sequence[SetExplanation] | None = None) -> list[Block]:
    """The report, finding first, as blocks both report.md and report.html are written from."""
    out: list[Block] = [Heading(1, f"specbench report: {run.path.name}")]
    if run.open_loop and result is not None:
        out.append(Para((("b", "Finding."), ("", " " + result["finding"])), role="finding"))
        out.append(Para(plain(measured_on(run))))
        out += arrivals.blocks(run, result)
        out += _figures_section(run, figure_names or [], plot_error)
        out += [Heading(2, "Flags"), *_flags_section(run), *_gpu_section(run),
                Heading(2, "Run"), *_run_section(run)]
        return out
    sets = explained(run) if sets is None else sets
    if result is not None:
        out.append(Para((("b", "Finding."), ("", " " + result["finding"] + finding_sentence(sets))),
                        role="finding"))
        out.append(Para(plain(measured_on(run))))
        out += [Para(plain(text)) for text in _applied_lines(result)]
        out += _summary_section(result)
        out += surface_blocks(result)
    else:
        out.append(Para((("b", "Finding."), ("", " No crossover: this run lacks eagle3 points, "
                                             "or both baseline and zero-step ones.")),
                        role="finding"))
        out.append(Para(plain(measured_on(run))))
    for prompt_set in run.prompt_sets:
        out += _set_section(run, prompt_set, result)
    out += why_blocks(sets)
    out += _figures_section(run, figure_names or [], plot_error)
    # Lengths and acceptance read the same per-request rows: read them once.
    requests_by_set = {s: finished_requests(run, s) for s in run.prompt_sets}
    out += latency_section(run)
    out += length_section(run, requests_by_set)
    out += category_section(run, requests_by_set)
    out += [Heading(2, "Flags"), *_flags_section(run), *_gpu_section(run), Heading(2, "Run"),
            *_run_section(run)]
    return out


def render_markdown(run: Run, result: Analysis | None,
                    figure_names: list[str] | None = None, plot_error: str | None = None) -> str:
    """The text of report.md (figure links are relative to the run directory)."""
    return to_markdown(report_blocks(run, result, figure_names, plot_error))


def _figures_drawn(run: Run, result: Analysis | None,
                   draw: bool) -> tuple[list[str], str | None]:
    """The figures in <run>/plots, drawn first when missing (and `draw`); and why drawing
    failed, if it did."""
    plots_dir = run.path / "plots"
    plot_error = None
    wanted = (arrivals.FIGURE,) if run.open_loop else ("throughput", "latency")
    if draw and not all((plots_dir / f"{name}.png").exists() for name in wanted):
        from specbench.report.plots import plot_run  # matplotlib: only when drawing

        try:
            plot_run(run, result=result)
        except Exception as exc:  # a figure failing must not cost the user the report
            plot_error = f"{type(exc).__name__}: {exc}"
    return [n for n in FIGURE_NAMES if (plots_dir / f"{n}.png").exists()], plot_error


def write_report(run: Run, result: Analysis | None = None,
                 sets: Sequence[SetExplanation] | None = None, draw: bool = True) -> Path:
    """Write <run>/report.md and <run>/report.html (the same blocks; the page embeds the
    figures); figures are drawn first when <run>/plots lacks them, unless `draw` is off (the
    report then shows those already there). Returns report.md's path."""
    result = result if result is not None else current_analysis(run)
    names, plot_error = _figures_drawn(run, result, draw)
    blocks = report_blocks(run, result, names, plot_error, sets)
    path = run.path / REPORT_FILE
    atomic_write(path, to_markdown(blocks))
    figures = {b.name: figure_markup(run.path / "plots", b.name, b.caption)
               for b in blocks if isinstance(b, Figure)}
    atomic_write(run.path / HTML_FILE,
                 render_html(f"specbench report: {run.path.name}", blocks, figures))
    return path
