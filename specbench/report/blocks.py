"""The report as a list of blocks, so report.md and report.html say exactly the same thing.

:mod:`specbench.report.document` builds the blocks (headings, paragraphs, bullet lists, tables,
figures) from a run; :func:`to_markdown` writes them as report.md and
:mod:`specbench.report.html` as report.html. Inline text is a tuple of spans, each (style, text)
with style "" (plain), "b" (bold), "i" (italic) or "code"; a renderer that escapes text escapes
each span's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Span = tuple[str, str]
Inline = tuple[Span, ...]
# Text columns, left-aligned in both formats; every other column holds numbers.
LEFT_HEADERS = frozenset(
    {"flags", "category", "prompt set", "outcome", "notes", "configuration"})


def plain(text: str) -> Inline:
    return (("", text),)


@dataclass(frozen=True)
class Heading:
    level: int  # 1: the title, 2: a section, 3: a prompt set within a section
    text: str


@dataclass(frozen=True)
class Para:
    spans: Inline
    role: str = ""  # "finding": the paragraph the report leads with (the HTML sets it apart)


@dataclass(frozen=True)
class Bullets:
    items: tuple[Inline, ...]


@dataclass(frozen=True)
class TableBlock:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def left(self, i: int) -> bool:
        return self.headers[i] in LEFT_HEADERS


@dataclass(frozen=True)
class Figure:
    name: str  # plots/<name>.png and .svg
    caption: str


Block = Heading | Para | Bullets | TableBlock | Figure


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> TableBlock:
    return TableBlock(tuple(headers), tuple(tuple(r) for r in rows))


# ---------------------------------------------------------------------------------------------
# Markdown


_MD_STYLE = {"": "{}", "b": "**{}**", "i": "_{}_", "code": "`{}`"}


def _md_inline(spans: Inline) -> str:
    return "".join(_MD_STYLE[style].format(text) for style, text in spans)


def _md_table(block: TableBlock) -> str:
    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    rule = "|" + "|".join("---" if block.left(i) else "---:"
                          for i in range(len(block.headers))) + "|"
    return "\n".join([row(block.headers), rule, *(row(r) for r in block.rows)])


def _md_block(block: Block) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + block.text
    if isinstance(block, Para):
        return _md_inline(block.spans)
    if isinstance(block, Bullets):
        return "\n".join("- " + _md_inline(item) for item in block.items)
    if isinstance(block, TableBlock):
        return _md_table(block)
    return f"![{block.caption}](plots/{block.name}.png)"


def to_markdown(blocks: Sequence[Block]) -> str:
    """report.md: one blank line between blocks (figure links relative to the run directory)."""
    return "\n\n".join(_md_block(b) for b in blocks) + "\n"
