"""Seeded generator of the built-in prompt sets ``prompts/coding.jsonl`` and
``prompts/agentic.jsonl``.

A development tool, not part of the installed package: run ``python -m tools.promptgen`` from the
repository root (or ``python scripts/gen_prompts.py``) after changing it, and commit both files.

Why generate instead of downloading: the benchmark must run offline, public speculative-decoding
sets have no agentic split, and random-token prompts overstate speculative speedups. So the sets
are written from a project-authored code corpus (`corpus`) and templates, varied by seeded
renames, file compositions and task wording. Nothing here is third-party text.

Determinism: every choice comes from ``random.Random`` seeded with a string derived from the seed
(never time, environment or set iteration order), and rows are serialised with a fixed key order,
so a rebuild reproduces both files byte for byte. Each row records ``meta.generator`` and
``meta.seed``.

Layout: `model` (snippets, languages, seeded draws), `corpus` (the code, per language),
`compose` and `entities` (source files built from it), `coding` (the coding set), `agentic`
(repository, emulated tools, sessions and scenarios), `build` (both sets, the marker-phrase rule,
JSONL bytes), `cli` (the command).
"""

from __future__ import annotations

from tools.promptgen.agentic import generate_agentic
from tools.promptgen.build import PHRASES, SET_FILES, generate, phrase_problem, render, write_sets
from tools.promptgen.cli import main
from tools.promptgen.coding import CODING_CATEGORIES, generate_coding
from tools.promptgen.corpus import SNIPPETS
from tools.promptgen.model import DEFAULT_SEED, GENERATOR

__all__ = [
    "CODING_CATEGORIES", "DEFAULT_SEED", "GENERATOR", "PHRASES", "SET_FILES", "SNIPPETS",
    "generate", "generate_agentic", "generate_coding", "main", "phrase_problem", "render",
    "write_sets",
]
