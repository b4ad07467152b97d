"""Prompt sets: loading by name or path, and the deterministic order requests are sent in.

A prompt set is a JSONL file, one *session* per line, in the OpenAI Chat Completions shape plus
bookkeeping keys that are never sent (schema in ``prompts/README.md``):

    {"id", "workload", "category", "messages": [...], "tools": [...], "targets": [t, ...],
     "max_tokens": n | [n, ...], "sampling": {...}, "meta": {...}}

Each row expands to one request per target (snapshot replay, see :mod:`.model`).

Where sets come from:
- built-in sets ``coding`` and ``agentic``: the files in ``<repo>/prompts/``, written by
  ``python -m tools.promptgen`` and shipped as package data (``specbench/data/prompts`` links to
  that folder in a checkout; a wheel holds a copy), or the folder ``$SPECBENCH_PROMPTS_DIR``;
- optional package sets ``humaneval`` and ``bfcl-multiturn`` (:mod:`.packages`);
- any JSONL path; its set name is the file stem.

Loading an invalid file raises :class:`PromptSetError` naming the first problem
(:mod:`.schema` finds them all). The send order is a seeded shuffle that depends only on the set
and the seed, so every server mode sees the same sequence.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from specbench.prompts.mix import MIX_NAME, mix_prompt_set
from specbench.prompts.model import (
    CHARS_PER_TOKEN,
    DEFAULT_MAX_TOKENS,
    PromptRequest,
    PromptSet,
    PromptSetError,
    expand_row,
    file_sha256,
    message_chars,
    ordered_requests,
    tools_chars,
)
from specbench.prompts.packages import PACKAGE_SETS, load_package_set
from specbench.prompts.schema import (
    CALL_ID_RE,
    MAX_TOKENS_LIMIT,
    ROLES,
    TOOL_NAME_RE,
    Problem,
    parse_rows,
    validate_file,
)
from specbench.prompts.stats import PromptSetStats, Spread, percentile, prompt_set_stats

__all__ = [
    "BUILTIN_SETS",
    "CALL_ID_RE",
    "CHARS_PER_TOKEN",
    "DEFAULT_MAX_TOKENS",
    "ENV_PROMPTS_DIR",
    "MAX_TOKENS_LIMIT",
    "MIX_NAME",
    "PACKAGE_SETS",
    "ROLES",
    "TOOL_NAME_RE",
    "Problem",
    "PromptRequest",
    "PromptSet",
    "PromptSetError",
    "PromptSetStats",
    "Spread",
    "available_set_names",
    "expand_row",
    "load_prompt_set",
    "message_chars",
    "mix_prompt_set",
    "ordered_requests",
    "percentile",
    "prompt_set_stats",
    "prompts_dir",
    "tools_chars",
    "validate_file",
]

ENV_PROMPTS_DIR = "SPECBENCH_PROMPTS_DIR"
BUILTIN_SETS: dict[str, str] = {"coding": "coding.jsonl", "agentic": "agentic.jsonl"}


def prompts_dir() -> Path:
    """Where the built-in sets live: $SPECBENCH_PROMPTS_DIR, else the package's data folder.

    The path is resolved, so in a checkout it names ``<repo>/prompts`` itself.
    """
    override = os.environ.get(ENV_PROMPTS_DIR)
    if override:
        return Path(override)
    # pip installs wheels unpacked, so the package data is a real folder on disk.
    return Path(str(resources.files("specbench.data") / "prompts")).resolve()


def available_set_names() -> list[str]:
    return [*BUILTIN_SETS, *PACKAGE_SETS]


def load_prompt_set(name_or_path: str) -> PromptSet:
    """A built-in set name, an optional package set name, or a path to a JSONL prompt file."""
    if name_or_path in BUILTIN_SETS:
        path = prompts_dir() / BUILTIN_SETS[name_or_path]
        if not path.is_file():
            raise PromptSetError(
                f"built-in prompt set {name_or_path!r} is missing ({path}); rebuild it with "
                f"`python -m tools.promptgen` in a checkout or point ${ENV_PROMPTS_DIR} at a "
                "folder holding it")
        return _load_jsonl(path, name_or_path, "builtin")
    if name_or_path in PACKAGE_SETS:
        return load_package_set(name_or_path)
    path = Path(name_or_path)
    if path.suffix in (".jsonl", ".json") or path.exists() or os.sep in name_or_path:
        return _load_jsonl(path, path.stem, "file")
    raise PromptSetError(f"unknown prompt set {name_or_path!r}; use one of "
                         f"{', '.join(available_set_names())} or a path to a .jsonl file")


def _load_jsonl(path: Path, name: str, source: str) -> PromptSet:
    if not path.is_file():
        raise PromptSetError(f"prompt file {path} not found; give an existing .jsonl path "
                             f"or one of the sets {', '.join(available_set_names())}")
    rows, problems = parse_rows(path, str(path))
    if problems:
        more = f" ({len(problems)} problems in total)" if len(problems) > 1 else ""
        raise PromptSetError(f"invalid prompt file: {problems[0]}{more}; fix it (run `specbench "
                             f"prompts validate {path}` to list every problem)")
    requests: list[PromptRequest] = []
    for lineno, row in rows:
        requests.extend(expand_row(row, name, f"{name}/{lineno}"))
    return PromptSet(name=name, path=path, sha256=file_sha256(path), rows=len(rows),
                     requests=tuple(requests), source=source)
