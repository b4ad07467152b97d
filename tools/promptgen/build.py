"""Both sets as rows, the marker-phrase rule every row must keep, and their JSONL bytes.

The simulated server picks a per-request acceptance mean by matching phrases in the prompt
text. The coding sub-categories that copy more (whole-file edits, tests, bug fixes) or less
(prose answers) each carry exactly one marker phrase in their final user turn (`PHRASES`); no
other row, coding or agentic, contains any of them. `generate` refuses a row that breaks this.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specbench.prompts import BUILTIN_SETS
from specbench.results.store import atomic_write
from tools.promptgen.agentic import generate_agentic
from tools.promptgen.coding import generate_coding
from tools.promptgen.model import DEFAULT_SEED

# Set name -> file name, the same names specbench loads the built-in sets by.
SET_FILES: dict[str, str] = BUILTIN_SETS
# Marker phrases the simulated server matches (first match wins); one per copy-heavy or prose
# sub-category, in the final user turn only. The sim profiles' acceptance rules use the same text.
PHRASES: dict[str, str] = {
    "edit_whole_file": "Return the complete updated file",
    "testgen": "Write unit tests",
    "bugfix": "Find and fix the bug",
    "explain_review": "Answer in prose, without code",
}


def prompt_text(row: dict[str, Any]) -> str:
    """Everything a server would render from a row: message text, tool-call arguments, tools."""
    parts = [m.get("content") or "" for m in row["messages"]]
    parts += [c["function"]["arguments"] for m in row["messages"]
              for c in m.get("tool_calls") or ()]
    parts += [json.dumps(row.get("tools") or [])]
    return "\n".join(parts)


def phrase_problem(row: dict[str, Any]) -> str | None:
    """Why a row breaks the marker-phrase rule, or None. The rule: a coding row of a marked
    sub-category has its phrase exactly once, in its final user turn; every other row has none
    (matching is case-insensitive here, stricter than the simulator needs)."""
    text = prompt_text(row).lower()
    own = PHRASES.get(row.get("category", "")) if row.get("workload") == "coding" else None
    for category, phrase in PHRASES.items():
        count = text.count(phrase.lower())
        if phrase == own:
            last_user = next(m for m in reversed(row["messages"]) if m["role"] == "user")
            if count != 1 or phrase.lower() not in last_user["content"].lower():
                return (f"{row['id']}: needs {phrase!r} exactly once in its final user turn, "
                        f"has {count}")
        elif count:
            return f"{row['id']}: contains {phrase!r}, the marker of {category}"
    return None


def generate(seed: int = DEFAULT_SEED) -> dict[str, list[dict[str, Any]]]:
    """Both sets as rows; raises ValueError if a row breaks the marker-phrase rule."""
    sets = {"coding": generate_coding(seed), "agentic": generate_agentic(seed)}
    for rows in sets.values():
        for row in rows:
            problem = phrase_problem(row)
            if problem:
                raise ValueError(problem)
    return sets


def render(rows: Sequence[dict[str, Any]]) -> bytes:
    """JSONL bytes: one compact object per line, keys in insertion order, UTF-8."""
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                   for r in rows).encode("utf-8")


def write_sets(out_dir: Path, seed: int = DEFAULT_SEED) -> dict[str, Path]:
    """Generate both sets and write them to `out_dir`; each file is replaced atomically."""
    return {name: atomic_write(out_dir / SET_FILES[name], render(rows))
            for name, rows in generate(seed).items()}
