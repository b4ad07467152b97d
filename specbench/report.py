"""What a run found, for people: rich tables in the terminal and <run>/report.md.

Both start with the finding (where EAGLE-3 stops paying off and the threshold to use), then
give per prompt set the table behind it: concurrency vs output tok/s per mode, the
EAGLE-3/baseline ratio, acceptance length, envelope efficiency of the dynamic-disable server,
and any flags the measurement raised. report.md adds the figures, acceptance per prompt
sub-category, and what each flag means. Everything comes from the run directory through
:func:`specbench.results.load_run` and from :mod:`specbench.analysis`; a run without both
static modes still gets its tables, only without a crossover.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from specbench.analysis import current_analysis, point_means
from specbench.metrics import explain_flag
from specbench.plots import FIGURE_NAMES, MODE_ORDER, plot_run
from specbench.results import Run, RunDirError
from specbench.results.store import atomic_write
from specbench.stats import finite_or_none

REPORT_FILE = "report.md"
RATIO_HEADER = "ratio"
TABLE_LEGEND = ("ratio = EAGLE-3 tok/s / baseline tok/s; accept = tokens per verify step; "
                "E(c) = dynamic / max(baseline, EAGLE-3)")
# Short mode names keep the tables narrow enough for a terminal.
_SHORT: dict[str, str] = {"baseline": "baseline", "eagle3": "EAGLE-3", "dynamic": "dynamic"}
_TINY: dict[str, str] = {"baseline": "base", "eagle3": "E3", "dynamic": "dyn"}
_FIGURE_CAPTIONS: dict[str, str] = {
    "throughput": "Output throughput per mode (bands: min-max over repeats, else 95% CI)",
    "ratio": "EAGLE-3 / baseline throughput ratio with its 95% bootstrap band",
    "acceptance": "Acceptance length (tokens per verify step)",
    "latency": "TTFT and inter-token latency, p50 and p99",
    "envelope": "Envelope efficiency of the dynamic-disable server",
}


@dataclass(frozen=True)
class LevelRow:
    """One line of a per-prompt-set table (None where nothing was measured)."""

    concurrency: int
    tok_s: dict[str, float | None]
    ratio: float | None
    accept_length: dict[str, float | None]
    envelope: float | None
    flags: dict[str, list[str]]  # flag name -> modes whose point at this level raised it


def level_rows(run: Run, prompt_set: str, result: dict[str, Any] | None) -> list[LevelRow]:
    """The per-level table of one prompt set, shared by the terminal and report.md."""
    means = point_means(run)
    means = means[means["prompt_set"] == prompt_set]
    set_result = (result or {}).get("prompt_sets", {}).get(prompt_set, {})
    ratios = set_result.get("ratio_by_concurrency", {})
    envelope = set_result.get("envelope_efficiency", {})
    flags = run.summary[run.summary["prompt_set"] == prompt_set]
    rows = []
    for c in sorted(int(c) for c in means["concurrency"].unique()):
        at_c = means[means["concurrency"] == c].set_index("mode")
        point_flags: dict[str, list[str]] = {}
        for r in flags[flags["concurrency"] == c].itertuples():
            for name in str(r.flags).split(";"):
                if name.strip() and str(r.mode) not in point_flags.setdefault(name.strip(), []):
                    point_flags[name.strip()].append(str(r.mode))
        rows.append(LevelRow(
            concurrency=c,
            tok_s={m: finite_or_none(at_c["output_tok_s"].get(m)) for m in MODE_ORDER},
            ratio=finite_or_none(ratios.get(str(c))),
            accept_length={m: finite_or_none(at_c["accept_length"].get(m))
                           for m in ("eagle3", "dynamic")},
            envelope=finite_or_none(envelope.get(str(c))),
            flags=point_flags,
        ))
    return rows


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def _flags_cell(row: LevelRow) -> str:
    # "client_bound (base, E3)": one entry per flag, the modes that raised it in brackets.
    return "; ".join(
        f"{name} ({', '.join(_TINY[m] for m in sorted(modes, key=MODE_ORDER.index))})"
        for name, modes in sorted(row.flags.items()))


def _columns(rows: list[LevelRow]) -> list[tuple[str, Callable[[LevelRow], str]]]:
    """Header and formatter of each column that has data in these rows."""

    def tok_s(mode: str) -> Callable[[LevelRow], str]:
        return lambda r: _fmt(r.tok_s[mode], ",.0f")

    def accept(mode: str) -> Callable[[LevelRow], str]:
        return lambda r: _fmt(r.accept_length[mode], ".2f")

    cols: list[tuple[str, Callable[[LevelRow], str]]] = [("c", lambda r: str(r.concurrency))]
    cols += [(f"{_SHORT[m]} tok/s", tok_s(m)) for m in MODE_ORDER
             if any(r.tok_s[m] is not None for r in rows)]
    if any(r.ratio is not None for r in rows):
        cols.append((RATIO_HEADER, lambda r: _fmt(r.ratio, ".2f")))
    cols += [(f"accept {_SHORT[m]}", accept(m)) for m in ("eagle3", "dynamic")
             if any(r.accept_length[m] is not None for r in rows)]
    if any(r.envelope is not None for r in rows):
        cols.append(("E(c)", lambda r: _fmt(r.envelope, ".3f")))
    cols.append(("flags", _flags_cell))
    return cols


def _threshold_lines(result: dict[str, Any]) -> list[str]:
    """Why the recommended threshold is what it is, and what this run's dynamic server used."""
    lines = []
    if len(result["prompt_sets"]) > 1:
        lines.append(f"Threshold rule: {result['combine_rule']}.")
    used = {name: r.get("applied_threshold") for name, r in result["prompt_sets"].items()}
    if any(t is not None for t in used.values()) and len(set(used.values())) > 1:
        shown = ", ".join(f"T = {t} for {name}" for name, t in used.items() if t is not None)
        lines.append(
            f"The dynamic-disable check ran each prompt set with its own threshold: {shown}."
        )
    else:
        applied = result.get("applied_threshold")
        if applied is not None and applied != result["recommended_threshold"]:
            lines.append(f"The dynamic-disable server in this run used T = {applied}.")
    return lines


# ---------------------------------------------------------------------------------------------
# terminal


def render_terminal(run: Run, console: Console, result: dict[str, Any] | None = None) -> None:
    """Print the finding, then per prompt set the table of c vs tok/s, ratio, acceptance, E(c)."""
    result = result if result is not None else current_analysis(run)
    if result is not None:
        body = "\n".join([f"[bold]{result['finding']}[/]", *_threshold_lines(result)])
        console.print(Panel(body, title="specbench finding", expand=False))
    else:
        console.print(Panel("No crossover: the run needs both baseline and eagle3 points.",
                            title="specbench", expand=False))
    for prompt_set in run.prompt_sets:
        rows = level_rows(run, prompt_set, result)
        set_result = (result or {}).get("prompt_sets", {}).get(prompt_set)
        title = f"{prompt_set}: {set_result['sentence']}" if set_result else prompt_set
        table = Table(title=title, title_justify="left", caption=TABLE_LEGEND,
                      caption_justify="left")
        # Flags go under the table: a column of them would squeeze the numbers in a terminal.
        columns = [col for col in _columns(rows) if col[0] != "flags"]
        for header, _ in columns:
            # Two-line headers ("baseline" over "tok/s") keep the table within 80 columns.
            table.add_column(header.replace(" ", "\n", 1) if header != "c" else header,
                             justify="right", no_wrap=True)
        for row in rows:
            cells = [render(row) for _, render in columns]
            if row.ratio is not None:
                ratio_at = [h for h, _ in columns].index(RATIO_HEADER)
                style = "green" if row.ratio >= 1.0 else "red"
                cells[ratio_at] = f"[{style}]{cells[ratio_at]}[/]"
            table.add_row(*cells)
        console.print(table)
        for row in rows:
            if row.flags:
                console.print(f"  [yellow]flags at c={row.concurrency}:[/] {_flags_cell(row)}",
                              highlight=False)
        for note in (set_result or {}).get("notes", []):
            console.print(f"  [yellow]note:[/] {note}")


# ---------------------------------------------------------------------------------------------
# report.md


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |",
             "|" + "|".join("---:" if h not in ("flags", "category", "prompt set", "outcome",
                                               "notes") else "---" for h in headers) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def acceptance_by_category(run: Run, prompt_set: str) -> pd.DataFrame | None:
    """Verify-weighted accept length per category and speculative mode, pooled over levels.

    Sum of completion_tokens / sum of spec_verify_ct over requests that finished in the window,
    as the per-point accept length is defined. None when the rows carry no category.
    """
    points = run.summary[(run.summary["prompt_set"] == prompt_set)
                         & run.summary["mode"].isin(("eagle3", "dynamic"))]
    frames = []
    needed = ["category", "completion_tokens", "spec_verify_ct"]  # and finished_in_window
    for point in points.to_dict("records"):
        mode = str(point["mode"])
        try:
            requests = run.requests(mode, prompt_set, int(point["concurrency"]),
                                    int(point["repeat"]))
        except (RunDirError, OSError):
            continue  # committed references keep only the summary
        if not {*needed, "finished_in_window"} <= set(requests.columns):
            continue
        done = requests[requests["finished_in_window"].fillna(False).astype(bool)]
        frames.append(done[needed].assign(mode=mode))
    if not frames:
        return None
    rows = pd.concat(frames, ignore_index=True)
    rows["spec_verify_ct"] = pd.to_numeric(rows["spec_verify_ct"], errors="coerce")
    rows["completion_tokens"] = pd.to_numeric(rows["completion_tokens"], errors="coerce")
    rows = rows[rows["spec_verify_ct"] > 0]
    if rows.empty:
        return None
    sums = rows.groupby(["category", "mode"])[["completion_tokens", "spec_verify_ct"]].sum()
    table = (sums["completion_tokens"] / sums["spec_verify_ct"]).unstack("mode")
    table["requests"] = rows.groupby("category").size()
    return table


def _flag_advice(name: str) -> str:
    """The advice of a flag (specbench.metrics owns the texts); "" for a name it does not know."""
    try:
        return explain_flag(name)
    except ValueError:
        return ""


def _flags_section(run: Run) -> list[str]:
    where: dict[str, list[str]] = {}
    for r in run.summary.itertuples():
        for name in str(r.flags).split(";"):
            if name.strip():
                where.setdefault(name.strip(), []).append(
                    f"{r.mode}/{r.prompt_set}/c{r.concurrency}-r{r.repeat}")
    if not where:
        return ["No point raised a flag."]
    lines = []
    for name, points in sorted(where.items()):
        text = _flag_advice(name)
        lines.append(f"- **{name}**" + (f" — {text}" if text else "")
                     + f" ({len(points)} point{'s' if len(points) > 1 else ''}: "
                     + ", ".join(points) + ")")
    return lines


def _run_section(run: Run) -> list[str]:
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
    return [f"- {name}: `{value}`" for name, value in facts if value not in (None, "")]


def render_markdown(run: Run, result: dict[str, Any] | None,
                    figure_names: list[str] | None = None, plot_error: str | None = None) -> str:
    """The text of report.md (figure links are relative to the run directory)."""
    out = [f"# specbench report: {run.path.name}", ""]
    if result is not None:
        out += [f"**Finding.** {result['finding']}", ""]
        out += [line for text in _threshold_lines(result) for line in (text, "")]
        out += ["| prompt set | outcome | c* | 95% interval | threshold T | support | notes |"]
        out += ["|---|---|---:|---:|---:|---:|---|"]
        for name, s in result["prompt_sets"].items():
            c_star = _fmt(s["crossover_concurrency"], ".1f")
            interval = ("–" if s["interval"] is None
                        else f"{s['interval'][0]:.1f}–{s['interval'][1]:.1f}")
            notes = "; ".join(s["notes"]).replace("|", "\\|")
            out.append(f"| {name} | {s['outcome']} | {c_star} | {interval} | "
                       f"{s['threshold_batch_size']} | {s['outcome_support']:.0%} | {notes} |")
        out += ["", "c* is where EAGLE-3's output tok/s falls below the baseline's (log-linear "
                "interpolation between measured levels); T maps it to the server's batch size. "
                "Support is the share of bootstrap curves with the same outcome.", ""]
    else:
        out += ["**Finding.** No crossover: this run lacks baseline or eagle3 points.", ""]

    for prompt_set in run.prompt_sets:
        set_result = (result or {}).get("prompt_sets", {}).get(prompt_set)
        out += [f"## {prompt_set}", ""]
        if set_result:
            out += [set_result["sentence"] + ".", ""]
        rows = level_rows(run, prompt_set, result)
        columns = _columns(rows)
        out += [_md_table([h for h, _ in columns],
                          [[render(r) for _, render in columns] for r in rows]), ""]
    if run.prompt_sets:
        out += [f"_{TABLE_LEGEND}._", ""]

    figures = figure_names if figure_names is not None else []
    if figures or plot_error:
        out += ["## Figures", ""]
        for name in figures:
            out += [f"![{_FIGURE_CAPTIONS.get(name, name)}](plots/{name}.png)", ""]
        if plot_error:
            out += [f"The figures could not be drawn ({plot_error}); run `specbench plot "
                    f"{run.path}` to retry.", ""]

    category_parts: list[str] = []
    for prompt_set in run.prompt_sets:
        table = acceptance_by_category(run, prompt_set)
        if table is None:
            continue
        modes = [m for m in ("eagle3", "dynamic") if m in table.columns]
        headers = ["category", *(f"accept {_SHORT[m]}" for m in modes), "requests"]
        body = [[str(cat), *(_fmt(finite_or_none(row[m]), ".2f") for m in modes),
                 str(int(row["requests"]))] for cat, row in table.iterrows()]
        category_parts += [f"### {prompt_set}", "", _md_table(headers, body), ""]
    if category_parts:
        out += ["## Acceptance by category", "",
                "Verify-weighted over requests that finished in the window, all levels pooled: "
                "sum of completion tokens / sum of verify steps.", "", *category_parts]

    out += ["## Flags", "", *_flags_section(run), "", "## Run", "", *_run_section(run), ""]
    return "\n".join(out)


def write_report(run: Run, result: dict[str, Any] | None = None) -> Path:
    """Write <run>/report.md; figures are drawn first when <run>/plots lacks them."""
    result = result if result is not None else current_analysis(run)
    plots_dir = run.path / "plots"
    plot_error = None
    if not all((plots_dir / f"{name}.png").exists() for name in ("throughput", "latency")):
        try:
            plot_run(run, result=result)
        except Exception as exc:  # a figure failing must not cost the user the report
            plot_error = f"{type(exc).__name__}: {exc}"
    figures = [n for n in FIGURE_NAMES if (plots_dir / f"{n}.png").exists()]
    path = run.path / REPORT_FILE
    atomic_write(path, render_markdown(run, result, figures, plot_error))
    return path
