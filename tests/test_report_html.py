"""report.html: self-contained (nothing fetched), the finding first, text escaped, figures
inline with ids of their own. The exact page is pinned by the snapshot in tests/test_report.py."""

from __future__ import annotations

import html
import re
import shutil
from collections import Counter
from pathlib import Path

from specbench.report import document as report
from specbench.report.html import inline_svg
from specbench.results import load_run
from tests.builders import make_run, ratio_crossing_at, static_curves

LEVELS = (1, 2, 4, 8, 16, 32, 64, 128)


def _run(tmp_path: Path, flags: dict[tuple[str, str, int], str] | None = None) -> Path:
    return make_run(tmp_path, static_curves(ratio_crossing_at(32.0), levels=LEVELS),
                    flags=flags)


def _page(run_dir: Path) -> str:
    report.write_report(load_run(run_dir))
    return (run_dir / "report.html").read_text()


def test_page_is_self_contained_and_leads_with_the_finding(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    page = _page(run_dir)
    markdown = (run_dir / "report.md").read_text()
    # Nothing to fetch: no scripts, style sheets, fonts or images from elsewhere.
    assert not re.search(r"<script|<link|@import|@font-face|(?:src|href)=\"(?!#|data:)", page)
    assert "url(" not in page.replace("url(#", "")
    # The same finding as report.md, before any section.
    finding = markdown.split("**Finding.** ", 1)[1].split("\n", 1)[0]
    assert f'<p class="finding"><strong>Finding.</strong> {html.escape(finding)}</p>' in page
    assert page.index('class="finding"') < page.index("<h2")
    # One inline SVG per figure report.md links, every id unique and every reference resolved.
    figures = re.findall(r"\(plots/([a-z]+)\.png\)", markdown)
    assert figures and page.count("<svg") == len(figures)
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    refs = set(re.findall(r'href="#([^"]+)"', page)) | set(re.findall(r"url\(#([^)]+)\)", page))
    assert refs and refs <= set(ids)
    # The tables report.md has, with numbers right-aligned.
    assert '<th class="txt">configuration</th><th class="num">TTFT p50</th>' in page
    assert '<td class="num">4,800</td><td class="num">3,840</td>' in page  # c=64 coding


def test_text_is_escaped(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, flags={("eagle3", "coding", 8): "odd<b>&flag"})
    odd = tmp_path / "run <i>&amp;"
    shutil.move(run_dir, odd)
    page = _page(odd)
    assert "<title>specbench report: run &lt;i&gt;&amp;amp;</title>" in page
    assert "<strong>odd&lt;b&gt;&amp;flag</strong>" in page
    assert "<b>" not in page and "<i>" not in page


def test_unsafe_or_missing_svg(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    _page(run_dir)  # draws the figures
    plots = run_dir / "plots"
    (plots / "ratio.svg").write_text('<svg><script>alert(1)</script></svg>')
    (plots / "latency.svg").unlink()
    page = _page(run_dir)  # the figures exist, so they are not drawn again
    assert "<script" not in page
    assert "Figure left out (EAGLE-3 over the baseline" in page
    # Without its SVG a figure comes as its PNG, inside the page.
    assert '<img alt="TTFT and inter-token latency, p50 and p99" src="data:image/png;base64,' \
        in page


def test_inline_svg_prefixes_ids_and_their_references() -> None:
    svg = ('<?xml version="1.0"?>\n<!DOCTYPE svg>\n<svg><defs><path id="m1"/>'
           '<clipPath id="p2"/></defs><use xlink:href="#m1"/><g clip-path="url(#p2)"/></svg>')
    assert inline_svg(svg, "ratio-") == (
        '<svg><defs><path id="ratio-m1"/><clipPath id="ratio-p2"/></defs>'
        '<use xlink:href="#ratio-m1"/><g clip-path="url(#ratio-p2)"/></svg>')
    for unsafe in ('<svg onload="x()"/>', '<svg><a href="https://example.com"/></svg>',
                   '<svg><foreignObject/></svg>', "no svg at all"):
        assert inline_svg(unsafe, "x-") is None
    image = '<svg><image xlink:href="data:image/png;base64,AAAA"/></svg>'
    assert inline_svg(image, "x-") == image
