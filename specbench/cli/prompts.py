"""`specbench prompts ...`: list the prompt sets, show their size statistics, validate a file.

A typer sub-app (`prompts_app`) mounted by the main CLI as `specbench prompts`. Commands parse,
call one function of :mod:`specbench.prompts` (statistics from :mod:`specbench.prompts.stats`),
and print; user-caused problems (:class:`~specbench.errors.UserError`: unknown set, invalid
file) end with one line on stderr and exit code 2.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from specbench import prompts
from specbench.cli.guard import fail
from specbench.errors import UserError
from specbench.prompts.stats import prompt_set_stats

prompts_app = typer.Typer(help="Prompt sets: list them, show statistics, validate a file.",
                          no_args_is_help=True, add_completion=False)


def _console() -> Console:
    # Wide enough that paths and percentile columns do not wrap in CI logs and pasted output.
    return Console(width=120, highlight=False)


@prompts_app.command("list")
def list_sets() -> None:
    """The prompt sets available here: built-in files and optional package sets."""
    table = Table(title="prompt sets")
    for col in ("name", "source", "rows", "requests", "where"):
        table.add_column(col, justify="right" if col in ("rows", "requests") else "left")
    for name, filename in prompts.BUILTIN_SETS.items():
        path = prompts.prompts_dir() / filename
        if not path.is_file():
            table.add_row(name, "builtin", "-", "-", f"missing: {path}")
            continue
        ps = prompts.load_prompt_set(name)
        table.add_row(name, "builtin", str(ps.rows), str(len(ps.requests)), str(path))
    for name, (module, hint) in prompts.PACKAGE_SETS.items():
        if importlib.util.find_spec(module) is None:
            table.add_row(name, "package", "-", "-", f"not installed: {hint}")
            continue
        try:
            ps = prompts.load_prompt_set(name)
        except prompts.PromptSetError as exc:
            table.add_row(name, "package", "-", "-", f"unusable: {exc}")
            continue
        table.add_row(name, "package", str(ps.rows), str(len(ps.requests)), str(ps.path))
    _console().print(table)


def _short(path: str) -> str:
    """The path relative to the working directory when it is below it (shorter in logs)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _num(value: float) -> str:
    return f"{value:,.0f}"


@prompts_app.command("stats")
def stats(
    name_or_file: Annotated[str, typer.Argument(metavar="NAME|FILE",
                                                help="a set name (see `list`) or a JSONL path")],
) -> None:
    """Counts, input sizes and output caps (p10/p50/p90/max per request), and the mix of
    sub-categories, languages and turns."""
    try:
        st = prompt_set_stats(prompts.load_prompt_set(name_or_file))
    except UserError as exc:
        fail(str(exc))
    console = _console()
    console.print(f"{st.name}: {st.rows} rows -> {st.requests} requests ({st.source}, "
                  f"{_short(st.path)}, "
                  f"sha256 {st.sha256[:12]})", markup=False)
    sizes = Table(title="per request", title_justify="left")
    for col in ("", "p10", "p50", "p90", "max"):
        sizes.add_column(col, justify="left" if not col else "right")
    for label, sp in (("input chars", st.input_chars), ("est. input tokens", st.est_input_tokens),
                      ("max_tokens", st.max_tokens), ("tools", st.tools)):
        sizes.add_row(label, _num(sp.p10), _num(sp.p50), _num(sp.p90), _num(sp.max))
    console.print(sizes)
    mix = Table(title="mix (requests)", title_justify="left")
    for col in ("sub-category", "n", "language", "n ", "user turns", "n  "):
        mix.add_column(col, justify="right" if col.startswith("n") else "left")
    cats, langs = list(st.categories.items()), list(st.languages.items())
    turns = list(st.turns.items())
    for i in range(max(len(cats), len(langs), len(turns))):
        row: list[str] = []
        for pairs in (cats, langs, turns):
            row += [str(pairs[i][0]), str(pairs[i][1])] if i < len(pairs) else ["", ""]
        mix.add_row(*row)
    console.print(mix)
    console.print(f"requests with tools: {st.with_tools}; token estimates use "
                  f"{prompts.CHARS_PER_TOKEN:g} characters per token (no tokenizer offline)",
                  markup=False)


@prompts_app.command("validate")
def validate(file: Annotated[Path, typer.Argument(help="a JSONL prompt file")]) -> None:
    """Check a prompt file against the schema: one line per problem, exit 2 when any."""
    problems = prompts.validate_file(file)
    if problems:
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        for problem in problems:
            err.print(str(problem), markup=False)
        err.print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in {file}",
                  markup=False)
        raise typer.Exit(code=2)
    rows = sum(1 for line in file.read_text(encoding="utf-8").splitlines() if line.strip())
    _console().print(f"ok, {rows} rows", markup=False)
