"""`specbench export RUN_DIR --format sglang|vllm|jsonl`: one JSON line per measured point.

The records come from :mod:`specbench.report.export`; this module parses the options, writes the
lines to stdout or (atomically) to ``--output``, and turns every user-caused problem (no such
run, an unknown format or name, an unwritable output) into one line on stderr and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from specbench.cli.guard import fail
from specbench.cli.options import help_with_default
from specbench.errors import UserError

FORMAT_HELP = (
    "sglang: SGLang 0.5.23 bench_serving's --output-file lines; vllm: vLLM bench serve's "
    "--save-result object, one per line (as --append-result writes them); jsonl: specbench's "
    "summary row per point"
)


def _names(text: str | None) -> list[str] | None:
    return [name.strip() for name in text.split(",") if name.strip()] if text else None


def _write(path: Path, text: str) -> None:
    from specbench.results import atomic_write

    if path.is_dir():
        raise UserError(f"--output {path} is a directory; name a file such as {path}/export.jsonl")
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise UserError(f"cannot write {path}: {blocking} is a file, not a directory; "
                        "choose another path with --output")
    try:
        atomic_write(path, text)
    except OSError as exc:
        raise UserError(f"cannot write {path} ({exc.strerror or exc}); "
                        "choose a writable path with --output") from None


def export(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR",
                                            help="a run directory (results/<run-id>)")],
    fmt: Annotated[str, typer.Option("--format", metavar="sglang|vllm|jsonl",
                                     help=FORMAT_HELP)] = "jsonl",
    output: Annotated[Path | None, typer.Option(
        help="write the lines to this file (atomically) instead of stdout")] = None,
    modes: Annotated[str | None, typer.Option(
        metavar="<list[str]>",
        help=help_with_default("only these configurations, comma-separated", "all"))] = None,
    prompts: Annotated[str | None, typer.Option(
        metavar="<list[str]>",
        help=help_with_default("only these prompt sets, comma-separated", "all"))] = None,
) -> None:
    """Export one JSON record per measured point (JSONL) in SGLang's or vLLM's benchmark result
    schema, or as specbench's summary rows; the window's requests count, as in the summary."""
    from specbench import results
    from specbench.report import export as export_mod

    try:
        fmt = export_mod.check_format(fmt)
        run = results.load_run(run_dir)
        records = export_mod.build_records(run, fmt, _names(modes), _names(prompts))
        text = export_mod.records_text(records, fmt)
        if output is not None:
            _write(output, text)
    except UserError as exc:
        fail(str(exc))
    if output is None:
        typer.echo(text, nl=False)
    else:
        typer.echo(f"{len(records)} {fmt} record(s) -> {output}")
