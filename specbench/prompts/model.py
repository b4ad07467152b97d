"""The records a prompt set loads into, and how a validated row becomes requests.

A row becomes one :class:`PromptRequest` per target: the request for target ``t`` sends
``messages[:t]`` (snapshot replay, teacher-forced), so replays are deterministic and do not depend
on what the model under test answers. Single-turn rows omit ``targets`` and generate after the end.

These live apart from ``specbench.prompts`` itself so that the schema, package-set and statistics
modules can use them without importing the package that re-exports them.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.errors import UserError

# Used when a row gives no max_tokens; the low end of what coding answers need.
DEFAULT_MAX_TOKENS = 512
# Without a tokenizer offline, sizes are estimated at about 4 characters per token (English, JSON).
CHARS_PER_TOKEN = 4.0


class PromptSetError(UserError, ValueError):
    """A user-caused problem with a prompt set; the message is one line: cause, then fix."""


@dataclass(frozen=True)
class PromptRequest:
    """One request to send: a chat conversation prefix and its output cap.

    `messages` and `tools` are in OpenAI Chat Completions form; nothing else is sent except
    `tool_choice` and per-row `sampling` overrides when a row gives them.
    """

    id: str
    prompt_set: str
    category: str
    messages: tuple[dict[str, Any], ...]
    max_tokens: int
    tools: tuple[dict[str, Any], ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    workload: str = ""
    session_id: str = ""  # the row this request was expanded from
    target_index: int = 0  # index into the session's messages where the model generates
    # Size of the recorded reference reply (chars), when the session has one: an output-length hint.
    reference_chars: int | None = None
    tool_choice: Any = None
    sampling: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def input_chars(self) -> int:
        """Characters the server has to read: message text, tool-call arguments, tool schemas."""
        return message_chars(self.messages) + tools_chars(self.tools)

    @property
    def est_input_tokens(self) -> int:
        return round(self.input_chars / CHARS_PER_TOKEN)

    @property
    def turns(self) -> int:
        """User turns sent so far (1 for a single-turn prompt)."""
        return sum(1 for m in self.messages if m.get("role") == "user")


@dataclass(frozen=True)
class PromptSet:
    """A loaded prompt set: where it came from, its hash, and its requests in file order."""

    name: str
    path: Path
    sha256: str
    rows: int  # sessions (lines) in the source
    requests: tuple[PromptRequest, ...]
    source: str = "file"  # builtin | package | file | mix


def message_chars(messages: Iterable[dict[str, Any]]) -> int:
    total = 0
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, str):
            total += len(content)
        for call in msg.get("tool_calls") or ():
            fn = call.get("function", {})
            total += len(fn.get("name", "")) + len(fn.get("arguments", ""))
    return total


def tools_chars(tools: Iterable[dict[str, Any]] | None) -> int:
    return sum(len(json.dumps(t, separators=(",", ":"))) for t in tools or ())


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def expand_row(row: dict[str, Any], set_name: str, default_id: str) -> list[PromptRequest]:
    """A validated row -> one request per target (snapshot replay)."""
    messages: list[dict[str, Any]] = row["messages"]
    targets: list[int] = row.get("targets", [len(messages)])
    raw_max = row.get("max_tokens", DEFAULT_MAX_TOKENS)
    caps = raw_max if isinstance(raw_max, list) else [raw_max] * len(targets)
    tools = tuple(row["tools"]) if row.get("tools") else None
    row_id = row.get("id", default_id)
    workload = row.get("workload", "")
    category = row.get("category") or workload or "uncategorized"
    out: list[PromptRequest] = []
    for t, cap in zip(targets, caps, strict=True):
        reference = messages[t] if t < len(messages) else None
        out.append(PromptRequest(
            id=row_id if len(targets) == 1 else f"{row_id}@{t}",
            prompt_set=set_name,
            category=category,
            messages=tuple(messages[:t]),
            max_tokens=cap,
            tools=tools,
            meta=dict(row.get("meta", {})),
            workload=workload,
            session_id=row_id,
            target_index=t,
            reference_chars=None if reference is None else message_chars([reference]),
            tool_choice=row.get("tool_choice"),
            sampling=row.get("sampling"),
        ))
    return out


def ordered_requests(ps: PromptSet, seed: int) -> list[PromptRequest]:
    """The send order for a set: a seeded shuffle that depends only on the set (its name and
    request ids) and the seed, so every server mode (and every rerun) sees the same sequence.
    A mix (:mod:`specbench.prompts.mix`) is built in its send order already."""
    if ps.source == "mix":
        return list(ps.requests)
    requests = sorted(ps.requests, key=lambda r: r.id)
    # A string seed is hashed with SHA-512 by `random`, so the order is stable across processes.
    random.Random(f"specbench-order/{seed}/{ps.name}").shuffle(requests)
    return requests
