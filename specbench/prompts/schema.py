"""The prompt-file schema: every problem in a file, each with its file, line and field.

Validation collects every problem (file, line, field, message) so ``specbench prompts validate``
can list them all; loading stops at the first. The rules follow what OpenAI-compatible servers,
SGLang's chat templates among them, accept (schema in ``prompts/README.md``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
# OpenAI's rule for function names; BFCL "live" names with dots must be rewritten to fit it.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Some chat templates (Mistral) reject any tool-call id that is not 9 alphanumerics.
CALL_ID_RE = re.compile(r"^[A-Za-z0-9]{9}$")
# A cap far above any real answer; larger values are almost certainly a typo.
MAX_TOKENS_LIMIT = 131072


@dataclass(frozen=True)
class Problem:
    """One validation problem, printed as ``file:line: field: message``."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class _Checker:
    """Collects problems for one row; `where` names the field the way a user would find it."""

    def __init__(self, file: str, line: int) -> None:
        self.file = file
        self.line = line
        self.problems: list[Problem] = []

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem(self.file, self.line, where, message))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_tools(chk: _Checker, tools: Any) -> set[str]:
    names: set[str] = set()
    if tools is None:
        return names
    if not isinstance(tools, list):
        chk.add("tools", "must be a list of {\"type\": \"function\", \"function\": {...}} objects")
        return names
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("function"), dict):
            chk.add(where, "must be an object with a \"function\" object")
            continue
        if tool.get("type", "function") != "function":
            chk.add(f"{where}.type", f"is {tool.get('type')!r}; only \"function\" tools exist")
        fn = tool["function"]
        name = fn.get("name")
        if not _check_tool_name(chk, f"{where}.function.name", name):
            continue
        if name in names:
            chk.add(f"{where}.function.name", f"duplicate tool {name!r}; give each tool once")
        names.add(name)
        params = fn.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type") != "object"):
            chk.add(f"{where}.function.parameters",
                    "must be a JSON schema with \"type\": \"object\"")
    return names


def _check_tool_name(chk: _Checker, where: str, name: Any) -> bool:
    """Whether `name` is a valid function name (reported at `where` when it is not)."""
    if isinstance(name, str) and TOOL_NAME_RE.match(name):
        return True
    chk.add(where, f"{name!r} is not a valid tool name; use 1-64 of A-Z a-z 0-9 _ -")
    return False


def _check_tool_calls(
    chk: _Checker, where: str, calls: Any, tool_names: set[str], has_tools: bool,
    call_ids: set[str],
) -> None:
    if not isinstance(calls, list) or not calls:
        chk.add(where, "must be a non-empty list of tool calls (or be left out)")
        return
    for j, call in enumerate(calls):
        cw = f"{where}[{j}]"
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            chk.add(cw, "must be an object with \"id\", \"type\" and a \"function\" object")
            continue
        _check_call_id(chk, f"{cw}.id", call.get("id"), call_ids)
        if call.get("type", "function") != "function":
            chk.add(f"{cw}.type", f"is {call.get('type')!r}; use \"function\"")
        fn = call["function"]
        name = fn.get("name")
        if _check_tool_name(chk, f"{cw}.function.name", name) and name not in tool_names:
            fix = "add it to \"tools\"" if has_tools else "add a \"tools\" list that defines it"
            chk.add(f"{cw}.function.name", f"calls {name!r}, which is not in \"tools\"; {fix}")
        _check_arguments(chk, f"{cw}.function.arguments", fn.get("arguments"))


def _check_call_id(chk: _Checker, where: str, call_id: Any, call_ids: set[str]) -> None:
    """A call needs an id unique in its row; `call_ids` collects them for the tool messages."""
    if not isinstance(call_id, str) or not call_id:
        chk.add(where, "missing; give each tool call an id (9 letters or digits)")
    elif call_id in call_ids:
        chk.add(where, f"duplicate tool call id {call_id!r}; ids must be unique in a row")
    else:
        call_ids.add(call_id)


def _check_arguments(chk: _Checker, where: str, args: Any) -> None:
    if not isinstance(args, str):
        chk.add(where, "must be a JSON string (json.dumps of the arguments object)")
        return
    try:
        parsed = json.loads(args)
    except json.JSONDecodeError as exc:
        chk.add(where, f"is not valid JSON ({exc.msg})")
        return
    if not isinstance(parsed, dict):
        chk.add(where, "must encode a JSON object")


def _check_messages(chk: _Checker, messages: Any, tool_names: set[str], has_tools: bool) -> bool:
    if not isinstance(messages, list) or not messages:
        chk.add("messages", "missing or empty; give a non-empty list of chat messages")
        return False
    call_ids: set[str] = set()
    ok = True
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            chk.add(where, "must be an object with \"role\" and \"content\"")
            ok = False
            continue
        role = msg.get("role")
        if role is None:
            chk.add(f"{where}.role", f"missing; add one of {', '.join(ROLES)}")
            ok = False
            continue
        if role not in ROLES:
            chk.add(f"{where}.role", f"{role!r} is not a role; use one of {', '.join(ROLES)}")
            ok = False
            continue
        content = msg.get("content")
        if not isinstance(content, str):
            fix = "use \"\" for an empty reply" if role == "assistant" else "give the text"
            kind = "null" if content is None else type(content).__name__
            chk.add(f"{where}.content", f"is {kind}, must be a string; {fix}")
        if "tool_calls" in msg:
            if role != "assistant":
                chk.add(f"{where}.tool_calls",
                        f"only assistant messages make tool calls, not {role}")
            else:
                _check_tool_calls(chk, f"{where}.tool_calls", msg["tool_calls"], tool_names,
                                  has_tools, call_ids)
        if role == "tool":
            ref = msg.get("tool_call_id")
            if not isinstance(ref, str) or not ref:
                chk.add(f"{where}.tool_call_id",
                        "missing; a tool message answers a call and must name its id")
            elif ref not in call_ids:
                chk.add(f"{where}.tool_call_id",
                        f"{ref!r} matches no earlier assistant tool call; use that call's id")
    return ok


def _check_targets(chk: _Checker, row: dict[str, Any], messages: list[Any]) -> list[int]:
    n = len(messages)
    raw = row.get("targets", [n])
    if not isinstance(raw, list) or not raw or not all(_is_int(t) for t in raw):
        chk.add("targets", "must be a non-empty list of message indices (or be left out)")
        return []
    targets: list[int] = raw
    for k, t in enumerate(targets):
        where = f"targets[{k}]"
        if k and t <= targets[k - 1]:
            chk.add(where, "targets must be strictly increasing")
        if not 1 <= t <= n:
            chk.add(where, f"{t} is outside 1..{n} (len(messages)); a target indexes messages")
            continue
        before = messages[t - 1]
        if isinstance(before, dict) and before.get("role") not in ("user", "tool"):
            chk.add(where, f"messages[{t - 1}] is {before.get('role')!r}; the last message sent "
                    "must be user or tool")
        if t < n and isinstance(messages[t], dict) and messages[t].get("role") != "assistant":
            chk.add(where, f"messages[{t}] is {messages[t].get('role')!r}; the reference at a "
                    "target must be an assistant message")
    return targets


def _check_max_tokens(chk: _Checker, value: Any, n_targets: int) -> None:
    if value is None:
        return
    values = value if isinstance(value, list) else [value]
    if isinstance(value, list) and n_targets and len(value) != n_targets:
        chk.add("max_tokens", f"has {len(value)} entries for {n_targets} targets; give one per "
                "target or a single number")
    for v in values:
        if not _is_int(v) or not 1 <= v <= MAX_TOKENS_LIMIT:
            chk.add("max_tokens", f"{v!r} is not a whole number in 1..{MAX_TOKENS_LIMIT}")
            return


def _check_row(chk: _Checker, row: Any) -> None:
    if not isinstance(row, dict):
        chk.add("row", "must be a JSON object, one per line")
        return
    for key in ("id", "workload", "category"):
        if key in row and not isinstance(row[key], str):
            chk.add(key, "must be a string")
    for key in ("meta", "sampling"):
        if key in row and not isinstance(row[key], dict):
            chk.add(key, "must be an object")
    tool_names = _check_tools(chk, row.get("tools"))
    messages = row.get("messages")
    ok = _check_messages(chk, messages, tool_names, "tools" in row)
    if not ok or not isinstance(messages, list):
        _check_max_tokens(chk, row.get("max_tokens"), 0)
        return
    targets = _check_targets(chk, row, messages)
    _check_max_tokens(chk, row.get("max_tokens"), len(targets))


def _iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("r", encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, start=1):
            if text.strip():
                yield lineno, text


def parse_rows(path: Path, label: str) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
    """Rows with their line numbers, and every problem found (empty when the file is valid)."""
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[Problem] = []
    seen_ids: dict[str, int] = {}
    try:
        lines = list(_iter_lines(path))
    except UnicodeDecodeError as exc:
        reason = f"is not UTF-8 text ({exc.reason}); save it as UTF-8"
        return [], [Problem(label, 0, "file", reason)]
    for lineno, text in lines:
        chk = _Checker(label, lineno)
        try:
            row = json.loads(text.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            chk.add("json", f"invalid JSON at column {exc.colno} ({exc.msg}); one object per line")
            problems.extend(chk.problems)
            continue
        _check_row(chk, row)
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            first = seen_ids.setdefault(row["id"], lineno)
            if first != lineno:
                chk.add("id", f"{row['id']!r} repeats the id on line {first}; ids must be unique")
        problems.extend(chk.problems)
        if not chk.problems:
            rows.append((lineno, row))
    if not lines:
        problems.append(Problem(label, 0, "file", "has no rows; add one JSON object per line"))
    return rows, problems


def validate_file(path: str | Path) -> list[Problem]:
    """Every problem in a prompt file, in file order; empty when the file is valid."""
    p = Path(path)
    if not p.is_file():
        return [Problem(str(p), 0, "file", "not found; give the path of a .jsonl prompt file")]
    return parse_rows(p, str(p))[1]
