"""How a verdict reaches people: rich tables in the terminal, JSON, the GitHub step summary.

:func:`publish` and :func:`publish_unusable` are the output half of `specbench regress`: they
print (or, with ``--json -``, print only the JSON), write the JSON file, append the Markdown to
``$GITHUB_STEP_SUMMARY`` when GitHub Actions sets it, and return the exit code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.regress.verdict import (
    EXIT_UNUSABLE,
    WORD,
    Verdict,
    accept_cell,
    describe_crossover,
    errors_cell,
    metric_cells,
    metric_columns,
    metric_label,
    metric_verdict,
    pct,
    unusable_json,
    worst,
)
from specbench.results.points import level_text, levels_text
from specbench.results.store import atomic_write

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"  # set by GitHub Actions in every step
_STYLE = {"ok": "green", "warn": "yellow", "insufficient": "magenta", "fail": "bold red",
          "regression": "bold red"}


def render_terminal(verdict: Verdict, console: Console) -> None:
    """Rich tables: per mode/prompt set, then crossovers, then the messages and the verdict."""
    table = Table(title="specbench regress: candidate vs reference", title_justify="left")
    for name in ("mode/prompt set", "levels", "output tok/s (geomean)", "worst point",
                 "accept length", "error rate", "verdict"):
        left = name in ("mode/prompt set", "verdict")
        table.add_column(name, justify="left" if left else "right")
    for g in verdict.groups:
        levels = f"{len(g.levels)} ({levels_text(g.levels[0], g.levels[-1])})"
        table.add_row(
            g.label, levels, pct(g.geomean_ratio),
            f"{level_text(g.worst_concurrency)} {pct(g.worst_ratio)}", accept_cell(g),
            errors_cell(g),
            f"[{_STYLE[g.status]}]{WORD[g.status]}[/]",
        )
    console.print(table)
    names = metric_columns(verdict)
    if names:
        mt = Table(title="latency and goodput, geomean change",
                   title_justify="left")
        mt.add_column("mode/prompt set")
        for name in names:
            mt.add_column(metric_label(name), justify="right")
        mt.add_column("verdict")
        for g in verdict.groups:
            status = worst(m.status for m in g.metrics)
            mt.add_row(g.label, *metric_cells(g, names),
                       f"[{_STYLE[status]}]{metric_verdict(g)}[/]")
        console.print(mt)
    if verdict.crossovers:
        xt = Table(title="crossovers (plain-server: EAGLE-3 vs the baseline; one-server: vs "
                   "its zero-step path)", title_justify="left")
        for name in ("prompt set", "decision", "reference", "candidate", "shift (levels)",
                     "source", "verdict"):
            xt.add_column(name)
        for x in verdict.crossovers:
            xt.add_row(
                x.prompt_set, x.decision, describe_crossover(x.ref_outcome, x.ref_concurrency),
                describe_crossover(x.cand_outcome, x.cand_concurrency),
                f"{x.shift_levels:+.1f}", x.source, f"[{_STYLE[x.status]}]{WORD[x.status]}[/]",
            )
        console.print(xt)
    for f in verdict.findings:
        style = _STYLE[f.status]
        word = {"fail": "FAIL", "insufficient": "INSUFFICIENT", "warn": "WARN"}[f.status]
        console.print(f"[{style}]{word}[/] {escape(f.text)}", highlight=False, soft_wrap=True)
    for text in verdict.notes:
        console.print(f"[dim]note: {escape(text)}[/]", highlight=False, soft_wrap=True)
    console.print(_summary_line(verdict), style=_STYLE.get(verdict.status, ""), highlight=False)


def _summary_line(verdict: Verdict) -> str:
    n = len(verdict.points)
    return {
        "regression": f"Regression: {sum(f.status == 'fail' for f in verdict.findings)} "
                      f"failing finding(s) over {n} points; exit 1",
        "insufficient": f"Insufficient data to decide over {n} points; exit 2",
        "warn": f"No regression beyond the fail thresholds ({n} points; warnings above); exit 0",
        "ok": f"No regression ({n} points compared); exit 0",
    }[verdict.status]


def unusable_markdown(message: str) -> str:
    return f"## specbench regression check: unusable input\n\n{message}\n\n"


def _ends_mid_line(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            if fh.seek(0, os.SEEK_END) == 0:
                return False
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"
    except OSError:
        return False


def append_step_summary(text: str) -> None:
    """GitHub Actions shows Markdown appended to $GITHUB_STEP_SUMMARY on the run page.

    Earlier steps' text is kept (appended after, on a line of its own). A summary that cannot
    be written is a warning on stderr, never a changed verdict or exit code.
    """
    path = os.environ.get(STEP_SUMMARY_ENV)
    if not path:
        return
    try:
        lead = "\n" if _ends_mid_line(path) else ""
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(lead + text)
    except OSError as exc:
        sys.stderr.write(f"warning: could not append the verdict to ${STEP_SUMMARY_ENV} "
                         f"({path}): {exc.strerror or exc}\n")


def _json_to_stdout(json_path: str | Path | None) -> bool:
    # "-" is the pipe mode: the JSON verdict alone on stdout, for jq.
    return json_path is not None and str(json_path) == "-"


def publish(verdict: Verdict, console: Console, json_path: str | Path | None = None) -> int:
    """Print the verdict (or only its JSON for `json_path` "-"), write the JSON file, append
    the step summary; return the exit code."""
    if _json_to_stdout(json_path):
        console.print(verdict.to_json(), markup=False, highlight=False, soft_wrap=True, end="")
    else:
        render_terminal(verdict, console)
        if json_path is not None:
            atomic_write(Path(json_path), verdict.to_json())
    append_step_summary(verdict.to_markdown())
    return verdict.exit_code


def publish_unusable(message: str, console: Console, json_path: str | Path | None = None) -> int:
    """The same for runs that cannot be compared: one error line (or the JSON); returns 2."""
    payload = unusable_json(message)
    if _json_to_stdout(json_path):
        console.print(payload, markup=False, highlight=False, soft_wrap=True, end="")
    else:
        console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
        if json_path is not None:
            atomic_write(Path(json_path), payload)
    append_step_summary(unusable_markdown(message))
    return EXIT_UNUSABLE
