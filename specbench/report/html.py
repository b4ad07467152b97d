"""report.html: the blocks of report.md as one self-contained page.

Nothing is fetched when the page opens: the style sheet is inline, fonts are the reader's
own, and each figure is its SVG from <run>/plots written into the page (a PNG as a data URI
when no SVG was drawn). Every text is escaped. Matplotlib gives every figure the same element
ids (figure_1, axes_1, ...), so each figure's ids get the figure's name as a prefix; an SVG
holding anything that could run (a script, an event attribute, a link to elsewhere) is left
out instead of being embedded.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from specbench.report.blocks import Block, Bullets, Figure, Heading, Inline, Para, TableBlock

HTML_FILE = "report.html"
_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       color: #1b1b1b; background: #fff; line-height: 1.45; }
main { max-width: 1100px; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
p.finding { background: #f3f6fb; border-left: 4px solid #0072B2; padding: .8rem 1rem; }
nav ul { display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; padding: 0; list-style: none; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .9rem; }
th, td { padding: .25rem .6rem; border-bottom: 1px solid #e4e4e4; white-space: nowrap; }
th { background: #f6f6f6; } td.num, th.num { text-align: right;
  font-variant-numeric: tabular-nums; } td.txt, th.txt { text-align: left; }
tbody tr:nth-child(even) { background: #fafafa; }
code { background: #f3f3f3; padding: 0 .25rem; border-radius: 3px; }
figure { margin: 1rem 0 2rem; } figcaption { color: #555; font-size: .9rem; }
figure svg, figure img { max-width: 100%; height: auto; }
"""
_TAGS = {"": "{}", "b": "<strong>{}</strong>", "i": "<em>{}</em>", "code": "<code>{}</code>"}
# What an SVG from a plotting library never needs and a planted one could use to run code.
_UNSAFE_SVG = re.compile(r"<\s*script|<\s*foreignObject|\son[a-z]+\s*=|javascript:"
                         r"|(?:xlink:)?href\s*=\s*[\"'](?!#|data:image/)", re.IGNORECASE)


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _inline(spans: Inline) -> str:
    return "".join(_TAGS[style].format(_esc(text)) for style, text in spans)


def _slug(text: str, taken: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def inline_svg(svg_text: str, prefix: str) -> str | None:
    """An SVG file's text ready to sit in the page: the XML prolog and doctype dropped, ids
    prefixed (references too); None when it holds anything unsafe or is no SVG."""
    start = svg_text.find("<svg")
    if start < 0 or _UNSAFE_SVG.search(svg_text):
        return None
    body = svg_text[start:].strip()
    body = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m[1]}"', body)
    body = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m[1]})", body)
    return re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m[1]}"', body)


def figure_markup(plots_dir: Path, name: str, caption: str) -> str | None:
    """The page's markup for plots/<name>: its SVG inline, else its PNG as a data URI."""
    svg = plots_dir / f"{name}.svg"
    if svg.is_file():
        return inline_svg(svg.read_text(encoding="utf-8", errors="replace"), f"fig-{name}-")
    png = plots_dir / f"{name}.png"
    if png.is_file():
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        return f'<img alt="{_esc(caption)}" src="data:image/png;base64,{data}">'
    return None


def _table(block: TableBlock) -> str:
    kinds = ["txt" if block.left(i) else "num" for i in range(len(block.headers))]
    head = "".join(f'<th class="{k}">{_esc(h)}</th>' for k, h in zip(kinds, block.headers,
                                                                    strict=True))
    body = "\n".join(
        "<tr>" + "".join(f'<td class="{k}">{_esc(c)}</td>' for k, c in zip(kinds, row,
                                                                         strict=True)) + "</tr>"
        for row in block.rows)
    return (f'<div class="scroll"><table>\n<thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n{body}\n</tbody>\n</table></div>")


def _figure(block: Figure, figures: Mapping[str, str | None]) -> str:
    markup = figures.get(block.name)
    if markup is None:
        return (f"<p>Figure left out ({_esc(block.caption)}): plots/{_esc(block.name)}.svg is "
                "missing or holds more than a drawing; see plots/ beside this file.</p>")
    return (f'<figure id="fig-{_esc(block.name)}">\n{markup}\n'
            f"<figcaption>{_esc(block.caption)}</figcaption>\n</figure>")


def _block(block: Block, figures: Mapping[str, str | None], anchor: str | None) -> str:
    if isinstance(block, Heading):
        attr = f' id="{anchor}"' if anchor else ""
        return f"<h{block.level}{attr}>{_esc(block.text)}</h{block.level}>"
    if isinstance(block, Para):
        role = f' class="{_esc(block.role)}"' if block.role else ""
        return f"<p{role}>{_inline(block.spans)}</p>"
    if isinstance(block, Bullets):
        return "<ul>\n" + "\n".join(f"<li>{_inline(i)}</li>" for i in block.items) + "\n</ul>"
    if isinstance(block, TableBlock):
        return _table(block)
    return _figure(block, figures)


def _nav(sections: list[tuple[str, str]]) -> str:
    links = "".join(f'<li><a href="#{slug}">{_esc(text)}</a></li>' for text, slug in sections)
    return f"<nav><ul>{links}</ul></nav>"


def render_html(title: str, blocks: Sequence[Block], figures: Mapping[str, str | None]) -> str:
    """The page: the blocks in order, with links to the sections before the first section.

    `figures`: each Figure block's markup by name (:func:`figure_markup`); None: left out.
    """
    taken: set[str] = set()
    headings = [(i, b) for i, b in enumerate(blocks) if isinstance(b, Heading) and b.level > 1]
    anchors = {i: _slug(b.text, taken) for i, b in headings}
    sections = [(i, b.text, anchors[i]) for i, b in headings if b.level == 2]
    parts: list[str] = []
    for i, block in enumerate(blocks):
        if sections and i == sections[0][0]:
            parts.append(_nav([(text, slug) for _, text, slug in sections]))
        parts.append(_block(block, figures, anchors.get(i)))
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_esc(title)}</title>\n<style>{_STYLE}</style>\n</head>\n"
            f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n")
