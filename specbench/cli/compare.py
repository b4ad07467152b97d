"""`specbench compare RUN_A RUN_B [...]`: runs side by side, for people (CI has `regress`).

Prints the comparison's Markdown (:mod:`specbench.report.compare`) to stdout; with
``--out DIR`` also writes DIR/compare.md, DIR/compare.json and the figure DIR/compare.png and
.svg (:mod:`specbench.report.compare_plot`), and names the files on stderr so stdout stays
Markdown.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from specbench.cli.guard import guard

if TYPE_CHECKING:
    from specbench.report.compare import Comparison

COMPARE_VERSION = 1  # of compare.json
MARKDOWN_FILE = "compare.md"
JSON_FILE = "compare.json"
FIGURE_NAME = "compare"


def to_json(c: Comparison) -> dict[str, Any]:
    """compare.json: what compare.md shows. Per-run values are lists in the order of `runs`;
    ratios are lists over the runs after the base."""
    groups = [{"prompt_set": g.prompt_set, "mode": g.mode,
               "geomean_ratio": [g.geomean_ratio(i) for i in range(1, len(c.labels))],
               "levels": [{**asdict(lv), "ratio": list(lv.ratios)} for lv in g.levels]}
              for g in c.groups]
    spans = [dict(zip(("run", "geomean_ratio", "min_ratio", "max_ratio", "n_points"),
                      (name, *(c.ratio_span(i) or (None, None, None, 0))), strict=True))
             for i, name in enumerate(c.labels[1:], start=1)]
    return {"compare_version": COMPARE_VERSION,
            "runs": [{"label": lb, "name": n, "path": p}
                     for lb, n, p in zip(c.labels, c.names, c.paths, strict=True)],
            "facts": {k: list(v) for k, v in c.facts.items()},
            "differences": list(c.differing()), "warnings": list(c.warnings),
            "left_out": list(c.left_out), "summary": spans,
            "decisions": {s: [None if d is None else asdict(d) for d in ds]
                          for s, ds in c.decisions.items()},
            "groups": groups}


def write_outputs(c: Comparison, out_dir: Path) -> tuple[str, list[Path]]:
    """Write the figure, compare.md and compare.json into out_dir; (Markdown, paths)."""
    from specbench.errors import UserError
    from specbench.report import compare as compare_mod
    from specbench.report.compare_plot import write_figure
    from specbench.results import atomic_write, write_json

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = write_figure(c, out_dir, FIGURE_NAME)
        text = compare_mod.render_markdown(c, figure=f"{FIGURE_NAME}.png")
        paths.append(atomic_write(out_dir / MARKDOWN_FILE, text.encode()))
        paths.append(write_json(out_dir / JSON_FILE, to_json(c)))
    except OSError as exc:
        raise UserError(f"cannot write the comparison into {out_dir} ({exc.strerror or exc}); "
                        "pass a writable directory with --out") from None
    return text, paths


def compare(
    run_dirs: Annotated[list[Path], typer.Argument(
        metavar="RUN_DIR", help="two or more run directories; the first is the base",
        show_default=False)],
    out: Annotated[Path | None, typer.Option(
        "--out", help="also write compare.md, compare.json and the figure (PNG, SVG) here")
    ] = None,
) -> None:
    """Compare runs for people: tok/s per level and the ratio to the first run, decisions,
    acceptance, and what differs between the runs."""
    from specbench.report import compare as compare_mod

    comparison = guard(lambda: compare_mod.compare_dirs(run_dirs))
    if out is None:
        print(compare_mod.render_markdown(comparison))
        return
    text, paths = guard(lambda: write_outputs(comparison, out))
    print(text)
    for path in paths:
        typer.echo(f"wrote {path}", err=True)
