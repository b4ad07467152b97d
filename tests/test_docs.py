"""The README and docs/ say what the tool does: every link resolves, every mode is named, and the
option tables in docs/options.md are `--help` as a user sees it, with every default.

`--help` runs in a subprocess on a wide terminal and each option's row is read whole (wrapped
lines joined, whitespace collapsed), so nothing here depends on the terminal's width. The tables
between `<!-- BEGIN name -->` and `<!-- END name -->` in docs/options.md are generated from it,
from presets.py and from the config schema's keys that have no flag; after changing an option,
regenerate them and read the diff:

    SPECBENCH_UPDATE_SNAPSHOTS=1 python3 -m pytest -q tests/test_docs.py
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from specbench import configurations, presets
from specbench.cli import options as cli_options
from specbench.config import SweepConfig
from tests.harness import cli_help

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
OPTIONS_DOC = DOCS / "options.md"
UPDATE_ENV = "SPECBENCH_UPDATE_SNAPSHOTS"
README_MAX_LINES = 250
FIRST_SCREEN_LINES = 60
# Docs a user asked for by name; the README links each.
REQUIRED_DOCS = ("gpu-quickstart.md", "gpu-regression.md", "prompt-format.md")
# Every mode name configurations.parse accepts: the fixed names and the two numbered patterns.
NUMBERED_MODES = {"eagle3-k<K>": "eagle3-k2", "dynamic-t<T>": "dynamic-t81"}
NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md")), REPO / "prompts" / "README.md",
            REPO / "results" / "reference" / "README.md"]


# ---------------------------------------------------------------------------------------------
# links


def _prose(text: str) -> str:
    """Markdown without fenced code blocks and inline code, where brackets are not links."""
    text = re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    seen: dict[str, int] = {}
    ids = set()
    for line in _prose_keep_headings(path.read_text()).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        ids.add(slug if n == 0 else f"{slug}-{n}")
    return ids


def _prose_keep_headings(text: str) -> str:
    """Markdown without fenced code blocks (a `#` there is a comment, not a heading)."""
    return re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.S | re.M)


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(doc.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (doc.parent / path_part).resolve() if path_part else doc
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading #{anchor} in {resolved.name})")
    assert not broken, f"{doc.relative_to(REPO)}: " + "; ".join(broken)


# ---------------------------------------------------------------------------------------------
# the README


def test_readme_fits_and_maps_the_docs() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = {Path(t.partition("#")[0]).name for t in LINK.findall(_prose(text))
              if t.startswith("docs/")}
    for name in REQUIRED_DOCS:
        assert name in linked, f"README does not link docs/{name}"
    unlinked = sorted(p.name for p in DOCS.glob("*.md") if p.name not in linked)
    assert not unlinked, f"docs the README's map leaves out: {unlinked}"


def test_readme_first_screen_has_the_two_commands() -> None:
    first = "\n".join(README.read_text().splitlines()[:FIRST_SCREEN_LINES])
    assert "python3 -m pip install -e '.[dev]' && specbench sweep\n" in first
    assert re.search(r"^python3 -m pytest", first, flags=re.M), "the test command"


def test_readme_says_how_to_reach_real_sglang_and_counts_the_servers() -> None:
    text = README.read_text()
    assert "--engine sglang" in text
    count = NUMBER_WORDS[len(configurations.DEFAULT_NAMES)]
    assert f"{count} servers" in text
    # The default sweep's servers are counted the same way wherever it is described ("two
    # servers" is a decision's pair, so it is not a miscount).
    others = [w for n, w in NUMBER_WORDS.items()
              if n not in (2, len(configurations.DEFAULT_NAMES))]
    for doc in _markdown_files():
        for word in others:
            phrase = re.search(rf"\b(?:the|launches|sweep's) {word} server", doc.read_text(),
                               flags=re.I)
            assert phrase is None, f"{doc.relative_to(REPO)}: {phrase.group(0)!r}"
    for name in configurations.DEFAULT_NAMES:
        assert f"`{name}`" in text, name


# ---------------------------------------------------------------------------------------------
# modes


def _all_modes() -> list[str]:
    for example in NUMBERED_MODES.values():
        configurations.parse(example)  # the patterns are still accepted
    return [*configurations._NAMED, *NUMBERED_MODES]


def test_every_mode_is_in_the_modes_table_and_the_readme() -> None:
    options = OPTIONS_DOC.read_text()
    readme = README.read_text()
    for mode in _all_modes():
        assert re.search(rf"^\| `{re.escape(mode)}` \|", options, flags=re.M), (
            f"docs/options.md: no row for mode {mode}")
        assert f"`{mode}`" in readme, f"README does not name mode {mode}"
    for name in configurations.TUNE_NAMES:
        configurations.parse(name)


# ---------------------------------------------------------------------------------------------
# option tables: --help, as a user sees it


@dataclass(frozen=True)
class HelpRow:
    panel: str
    flag: str
    kind: str  # "int", "list[str]", ... ("" when help shows none)
    text: str
    default: str | None  # what [default: ...] shows, or "required"
    envvar: str | None


ROW_START = re.compile(r"^│\s*(?:\*\s+)?(--[a-z0-9-]+)\s")
PANEL = re.compile(r"^╭─ (.+?) ─")
TAG = re.compile(r"\s*\[(default|env var|required)(?::\s*([^\]]*))?\]$")


@cache
def _help(*command: str) -> tuple[HelpRow, ...]:
    text = cli_help(*command)
    rows: list[tuple[str, str, list[str]]] = []
    panel, flag = "", None
    for line in text.splitlines():
        if match := PANEL.match(line):
            panel = match.group(1)
        if not line.startswith("│"):
            flag = None
            continue
        if match := ROW_START.match(line):
            flag = match.group(1)
            rows.append((panel, flag, []))
        if flag is not None:
            rows[-1][2].append(line.strip("│ ").removeprefix("*").strip().removeprefix(flag))
    return tuple(_help_row(panel, flag, " ".join(" ".join(parts).split()))
                 for panel, flag, parts in rows if flag != "--help")


def _help_row(panel: str, flag: str, row: str) -> HelpRow:
    kind = ""
    if match := re.match(r"^<([^>]*)>\s*", row):
        kind, row = match.group(1), row[match.end():]
    tags: dict[str, str] = {}
    while match := TAG.search(row):
        tags[match.group(1)] = match.group(2) or ""
        row = row[: match.start()]
    default = "required" if "required" in tags else tags.get("default")
    return HelpRow(panel, flag, kind, row.strip(), default, tags.get("env var"))


def _cell(text: str) -> str:
    """Table-safe Markdown: pipes and stars escaped, `<K>`-style names as code."""
    text = text.replace("|", "\\|").replace("*", "\\*")
    return re.sub(r"[\w.-]*<\w+>[\w.-]*", lambda m: f"`{m.group(0)}`", text)


def _toml_keys() -> dict[str, str]:
    """Flag -> the config file's key for it (`[load] window_s` is `load.window_s`)."""
    return {opt.flag: ".".join(opt.path) for opt in cli_options.SWEEP_OPTIONS}


def _options_table(rows: tuple[HelpRow, ...], toml: dict[str, str] | None) -> str:
    out: list[str] = []
    for panel in dict.fromkeys(r.panel for r in rows):
        if toml is not None:
            out += ["", f"**{panel}**", ""]
        head = "| option | " + ("config key | " if toml is not None else "")
        out += [head + "type | default | what it sets |",
                "|---|" + ("---|" if toml is not None else "") + "---|---|---|"]
        for r in (r for r in rows if r.panel == panel):
            key = f" `{toml[r.flag]}` |" if toml is not None and r.flag in toml else (
                " |" if toml is not None else "")
            text = _cell(r.text) + (f" (env `{r.envvar}`)" if r.envvar else "")
            kind = f"`{_cell(r.kind)}`" if r.kind else ""
            default = _cell(r.default) if r.default is not None else ""
            out.append(f"| `{r.flag}` |{key} {kind} | {default} | {text} |")
    return "\n".join(out).strip("\n") + "\n"


def _tune_table() -> str:
    sweep = {r.flag: r for r in _help("sweep")}
    out = ["| option | `specbench sweep` | `specbench tune` |", "|---|---|---|"]
    for r in _help("tune"):
        if r.flag in sweep and sweep[r.flag].default != r.default:
            out.append(f"| `{r.flag}` | {_cell(sweep[r.flag].default or '')} | "
                       f"{_cell(r.default or '')} |")
    return "\n".join(out) + "\n"


def _config_only_table() -> str:
    """Schema fields with no flag: a config file is the only way to set them."""
    out = ["| config key | type | default | what it sets |", "|---|---|---|---|"]

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            annotation: Any = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation, f"{prefix}{name}.")
                continue
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            if extra.get("cli") is not None:
                continue
            kind = re.sub(r"\b(typing|pathlib)\.", "", getattr(annotation, "__name__", None)
                          or str(annotation))
            out.append(f"| `{prefix}{name}` | `{_cell(kind)}` | {field.default!r} | "
                       f"{_cell(field.description or '')} |")

    walk(SweepConfig, "")
    return "\n".join(out) + "\n"


def _presets_table() -> str:
    """Each --preset as the config keys it sets (presets.py)."""

    def flat(layer: dict[str, Any], prefix: str = "") -> list[str]:
        out: list[str] = []
        for key, value in layer.items():
            if isinstance(value, dict):
                out += flat(value, f"{prefix}{key}.")
            else:
                shown = ", ".join(map(str, value)) if isinstance(value, list) else value
                out.append(f"`{prefix}{key}` {shown}")
        return out

    rows = [f"| `{name}` | {'; '.join(flat(layer))} |" for name, layer in presets.PRESETS.items()]
    return "\n".join(["| preset | sets |", "|---|---|", *rows]) + "\n"


def _generated() -> dict[str, str]:
    return {
        "sweep --help": _options_table(_help("sweep"), _toml_keys()),
        "tune defaults": _tune_table(),
        "regress --help": _options_table(_help("regress"), None),
        "presets": _presets_table(),
        "config-only keys": _config_only_table(),
    }


def _block(text: str, name: str) -> tuple[int, int]:
    begin, end = f"<!-- BEGIN {name} -->\n", f"<!-- END {name} -->"
    assert begin in text and end in text, f"docs/options.md has no block {name!r}"
    start = text.index(begin) + len(begin)
    return start, text.index(end, start)


def test_option_tables_are_the_help() -> None:
    text = OPTIONS_DOC.read_text()
    generated = _generated()
    if os.environ.get(UPDATE_ENV) == "1":
        for name, body in generated.items():
            start, end = _block(text, name)
            text = text[:start] + body + text[end:]
        OPTIONS_DOC.write_text(text)
        return
    for name, body in generated.items():
        start, end = _block(text, name)
        if text[start:end] != body:
            diff = "".join(difflib.unified_diff(
                text[start:end].splitlines(keepends=True), body.splitlines(keepends=True),
                fromfile=f"docs/options.md ({name})", tofile="from --help"))
            raise AssertionError(f"docs/options.md is not what --help says; regenerate with "
                                 f"{UPDATE_ENV}=1 python3 -m pytest -q tests/test_docs.py\n{diff}")


def test_every_default_in_help_is_in_the_docs() -> None:
    options = OPTIONS_DOC.read_text().splitlines()
    rows = _help("sweep")
    assert len([r for r in rows if r.default is not None]) >= 25
    for r in rows:
        lines = [line for line in options if line.startswith(f"| `{r.flag}` |")]
        assert lines, f"docs/options.md has no row for {r.flag}"
        if r.default is not None:
            assert any(f"| {_cell(r.default)} |" in line for line in lines), (r.flag, r.default)


def test_regress_limits_are_in_the_regression_doc() -> None:
    text = (DOCS / "gpu-regression.md").read_text()
    limits = [r for r in _help("regress") if r.default not in (None, "required")]
    assert {r.flag for r in limits} >= {"--warn-pct", "--fail-pct", "--accept-fail-pct"}
    for r in limits:
        assert re.search(rf"`{re.escape(r.flag)}`[^|\n]*?\b{re.escape(r.default)}\b", text), (
            f"docs/gpu-regression.md does not give {r.flag}'s default {r.default}")
