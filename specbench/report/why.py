"""Why EAGLE-3 wins or loses, per level: `specbench explain`'s tables and the report's section.

The arithmetic is :mod:`specbench.analysis.explain`; this module only shows it, the same
columns in the terminal and in report.md / report.html.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from specbench.analysis.explain import (
    ExplainError,
    LevelExplanation,
    LevelProfile,
    SetExplanation,
    crossing_words,
    explain_run,
    level_words,
    lowest_level_sentence,
    profile_words,
)
from specbench.analysis.kernels import KINDS, PointProfile
from specbench.report.blocks import Block, Bullets, Heading, Para, plain, table
from specbench.results import Run

HEADERS = ("c", "batch", "accept", "spec step ms", "plain step ms", "step ratio",
           "E3/base", "rest", "break-even accept", "largest")
LEGEND = ("accept = tokens per verify; step ratio = a speculative decode step over a plain one at "
          "the same running batch (steady decode log lines); E3/base = accept / step ratio x "
          "rest, rest = prefill, admission and the frontend; break-even accept = the tokens per "
          "verify at which EAGLE-3 would tie the plain server there; 95% intervals in brackets")


PROFILE_HEADERS = ("c", "server", "ranks", "step ms", "draft", "verify attn", "decode attn",
                   "prefill", "GEMM", "comm", "other", "unknown", "host idle")
PROFILE_LEGEND = ("SGLang's profiler at the levels of --profile-steps: ms per decode step on the "
                  "slowest rank (the step every rank runs at; the ranks' own steps in brackets), "
                  "by kind of GPU time; draft = the draft model's forwards, prefill = the prefill "
                  "forwards that ran among the profiled steps (not in the step), host idle = no "
                  "kernel running; unknown kernels are named below")
UNKNOWN_NAMED = 5  # unknown kernel names shown per profile


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _with_interval(value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" + (f" [{interval[0]:.2f}–{interval[1]:.2f}]" if interval else "")


def _cells(lv: LevelExplanation) -> list[str]:
    accept = _num(lv.accept_length)
    if lv.max_accept_length and lv.accept_length is not None:
        accept += f" / {lv.max_accept_length}"
    return [
        str(lv.concurrency),
        "–" if lv.batch is None else str(lv.batch),
        accept,
        _num(lv.spec_step_ms),
        _num(lv.plain_step_ms),
        _with_interval(lv.step_ratio, lv.step_ratio_interval),
        _with_interval(lv.tok_s_ratio, lv.tok_s_ratio_interval),
        _with_interval(lv.rest, lv.rest_interval),
        _with_interval(lv.break_even_accept, lv.break_even_interval),
        lv.largest or "–",
    ]


def _profile_cells(c: int, profile: PointProfile) -> list[str]:
    step = profile.step
    if step is None:
        return [str(c), profile.mode, "0", *["–"] * (len(PROFILE_HEADERS) - 3)]
    steps = sorted(split.step_ms for split in profile.ranks.values())
    ranks = str(len(steps)) + (f" [{steps[0]:.2f}–{steps[-1]:.2f}]" if len(steps) > 1 else "")
    return [str(c), profile.mode, ranks, f"{step.step_ms:.2f}",
            *(f"{step.kinds_ms.get(kind, 0.0):.2f}" for kind in KINDS)]


def _profile_rows(s: SetExplanation) -> list[list[str]]:
    return [_profile_cells(lv.concurrency, p) for lv in s.profiles
            for p in (lv.spec, lv.plain) if p is not None]


def _profile_lines(levels: Sequence[LevelProfile]) -> list[str]:
    """The profile's step ratio beside the logs' per level, and the unknown kernels by name."""
    out = [w for w in (profile_words(lv) for lv in levels) if w is not None]
    for lv in levels:
        for p in (lv.spec, lv.plain):
            unknown = p.unknown_ms if p is not None else {}
            if p is not None and unknown:
                named = ", ".join(f"{name} {ms:.3f} ms"
                                  for name, ms in list(unknown.items())[:UNKNOWN_NAMED])
                out.append(f"unknown kernels, {p.mode} c={lv.concurrency} (a step, all ranks): "
                           f"{named}")
    return out


def _words(s: SetExplanation) -> list[str]:
    """One line per level whose largest term differs from the level before (a run of levels
    with the same cause is said once, at its first level)."""
    out, last = [], None
    for lv in s.levels:
        words = level_words(lv)
        if words is not None and lv.largest != last:
            out.append(words)
        last = lv.largest if words is not None else last
    return out


def render_terminal(sets: Sequence[SetExplanation], console: Console) -> None:
    """Per prompt set: the table, the largest terms in words, and the notes."""
    sentence = lowest_level_sentence(sets)
    if sentence:
        console.print(f"[bold]{sentence}[/]")
    for s in sets:
        grid = Table(title=f"{s.prompt_set}: why {s.speculative} wins or loses against baseline",
                     title_justify="left")
        for header in HEADERS:
            grid.add_column(header.replace(" ", "\n", 1), justify="right", no_wrap=True)
        for lv in s.levels:
            cells = _cells(lv)
            cells[6] = f"[{'green' if lv.tok_s_ratio >= 1.0 else 'red'}]{cells[6]}[/]"
            grid.add_row(*cells)
        console.print(grid)
        console.print(f"  {LEGEND}", highlight=False)
        for line in _words(s) + [w for w in (crossing_words(s),) if w]:
            console.print(f"  {line}", highlight=False)
        if s.profiles:
            _render_profiles(s, console)
        for note in s.notes:
            console.print(f"  [yellow]note:[/] {note}")


def _render_profiles(s: SetExplanation, console: Console) -> None:
    grid = Table(title=f"{s.prompt_set}: a step by kind of GPU time (SGLang's profiler)",
                 title_justify="left")
    for header in PROFILE_HEADERS:
        grid.add_column(header.replace(" ", "\n", 1), justify="right", no_wrap=True)
    for row in _profile_rows(s):
        grid.add_row(*row)
    console.print(grid)
    console.print(f"  {PROFILE_LEGEND}", highlight=False)
    for line in _profile_lines(s.profiles):
        console.print(f"  {line}", highlight=False, markup=False)


def explained(run: Run) -> list[SetExplanation]:
    """explain's reading of the run; empty for a run it cannot read (no logs, no baseline), so
    a report never fails for want of it."""
    try:
        return list(explain_run(run))
    except ExplainError:
        return []


def finding_sentence(sets: Sequence[SetExplanation]) -> str:
    """What the report's finding adds where EAGLE-3 loses at a set's lowest level ("" if not)."""
    sentence = lowest_level_sentence(sets)
    return f" {sentence}" if sentence else ""


def why_blocks(sets: Sequence[SetExplanation]) -> list[Block]:
    """The report's "Why" section (the finding carries its lowest-level sentence)."""
    if not sets:
        return []
    out: list[Block] = [Heading(2, "Why")]
    for s in sets:
        out.append(Heading(3, s.prompt_set))
        out.append(table(HEADERS, [_cells(lv) for lv in s.levels]))
        out.append(Para(plain(LEGEND)))
        crossing = crossing_words(s)
        if crossing:
            out.append(Para(plain(crossing)))
        items = _words(s) + [f"note: {n}" for n in s.notes]
        if items:
            out.append(Bullets(tuple(plain(i) for i in items)))
        if s.profiles:
            out.append(table(PROFILE_HEADERS, _profile_rows(s)))
            out.append(Para(plain(PROFILE_LEGEND)))
            lines = _profile_lines(s.profiles)
            if lines:
                out.append(Bullets(tuple(plain(i) for i in lines)))
    return out
