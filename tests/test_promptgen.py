"""The seeded generator of prompts/coding.jsonl and prompts/agentic.jsonl (tools/promptgen, run
from a checkout): determinism, the mix the issue asks for, realism of the sessions, and the
marker-phrase rule the simulator relies on."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from specbench.prompts import PromptRequest, load_prompt_set, message_chars, validate_file
from tools import promptgen

REPO = Path(__file__).resolve().parent.parent
PROMPTS = REPO / "prompts"
CALL_ID = re.compile(r"^[A-Za-z0-9]{9}$")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def rows() -> dict[str, list[dict[str, Any]]]:
    return {name: [json.loads(line) for line in (PROMPTS / f).read_text("utf-8").splitlines()]
            for name, f in promptgen.SET_FILES.items()}


# ----------------------------------------------------------------------------- determinism


def test_regenerating_reproduces_the_committed_files_byte_for_byte(tmp_path: Path) -> None:
    assert promptgen.main(["--out", str(tmp_path)]) == 0
    for filename in promptgen.SET_FILES.values():
        assert _sha(tmp_path / filename) == _sha(PROMPTS / filename), (
            f"{filename} is stale; run `python -m tools.promptgen`")


def test_generation_does_not_depend_on_hash_seed_or_process(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    subprocess.run([sys.executable, "-m", "tools.promptgen", "--out", str(tmp_path)],
                   check=True, env=env, capture_output=True, timeout=120, cwd=REPO)
    for filename in promptgen.SET_FILES.values():
        assert _sha(tmp_path / filename) == _sha(PROMPTS / filename)


def test_check_flag_reports_stale_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    promptgen.main(["--out", str(tmp_path)])
    assert promptgen.main(["--out", str(tmp_path), "--check"]) == 0
    coding = tmp_path / "coding.jsonl"
    coding.write_bytes(coding.read_bytes().replace(b"Write", b"write", 1))
    assert promptgen.main(["--out", str(tmp_path), "--check"]) == 1
    assert "out of date: coding" in capsys.readouterr().err


def test_seed_changes_the_sets_and_is_recorded() -> None:
    a, b = promptgen.generate_coding(0), promptgen.generate_coding(1)
    assert promptgen.render(a) != promptgen.render(b)
    assert {r["meta"]["seed"] for r in b} == {1}
    assert {r["meta"]["generator"] for r in a} == {promptgen.GENERATOR}


def test_committed_rows_carry_generator_and_seed(rows: dict[str, list[dict[str, Any]]]) -> None:
    for set_rows in rows.values():
        assert all(r["meta"]["generator"] == promptgen.GENERATOR for r in set_rows)
        assert all(r["meta"]["seed"] == promptgen.DEFAULT_SEED for r in set_rows)


def test_committed_files_are_valid() -> None:
    for filename in promptgen.SET_FILES.values():
        assert validate_file(PROMPTS / filename) == []


# ----------------------------------------------------------------------------- coding mix


def test_coding_has_200_prompts_across_all_subcategories_and_5_languages(
        rows: dict[str, list[dict[str, Any]]]) -> None:
    coding = rows["coding"]
    assert len(coding) >= 200
    cats = Counter(r["category"] for r in coding)
    assert set(cats) == set(promptgen.CODING_CATEGORIES)
    assert min(cats.values()) >= 25
    langs = Counter(r["meta"]["language"] for r in coding)
    assert len(langs) >= 5
    assert 0.4 <= langs["python"] / len(coding) <= 0.6  # "about half Python"
    assert {"typescript", "go", "rust", "java", "sql", "bash"} <= set(langs)


def test_coding_lengths_and_caps_spread_like_real_traffic() -> None:
    ps = load_prompt_set("coding")
    by_cat: dict[str, list[int]] = {}
    for req in ps.requests:
        by_cat.setdefault(req.category, []).append(req.input_chars)
    # Whole-file edits carry files of several thousand characters; specs are short.
    assert max(by_cat["edit_whole_file"]) > 10_000
    assert sorted(by_cat["edit_whole_file"])[len(by_cat["edit_whole_file"]) // 2] > 3_000
    assert max(by_cat["codegen"]) < 3_000
    caps = [r.max_tokens for r in ps.requests]
    assert min(caps) >= 128 and max(caps) <= 4096
    assert sum(512 <= c <= 2048 for c in caps) / len(caps) > 0.6
    # Edits return the whole file: the cap grows with the file.
    edits = [r for r in ps.requests if r.category == "edit_whole_file"]
    longest = max(edits, key=lambda r: r.input_chars)
    shortest = min(edits, key=lambda r: r.input_chars)
    assert longest.max_tokens > shortest.max_tokens


def test_multiturn_rows_replay_two_or_three_turns() -> None:
    multi = [r for r in load_prompt_set("coding").requests if r.category == "multiturn"]
    assert {r.turns for r in multi} == {2, 3}
    for req in multi:
        assert req.messages[-1]["role"] == "user"
        assert req.messages[-2]["role"] == "assistant" and "```" in req.messages[-2]["content"]


def test_python_code_shown_in_coding_prompts_compiles() -> None:
    blocks = 0
    for req in load_prompt_set("coding").requests:
        for msg in req.messages:
            for code in re.findall(r"```python\n(.*?)```", msg["content"], re.S):
                compile(code, req.id, "exec")
                blocks += 1
    assert blocks > 100


# ----------------------------------------------------------------------------- phrase rule


def _request_text(req: PromptRequest) -> str:
    parts = [m.get("content", "") for m in req.messages]
    parts += [c["function"]["arguments"] for m in req.messages for c in m.get("tool_calls", ())]
    return "\n".join(parts) + json.dumps(req.tools or [])


def test_each_marked_coding_request_has_its_phrase_once_in_the_final_user_turn() -> None:
    for req in load_prompt_set("coding").requests:
        text = _request_text(req).lower()
        own = promptgen.PHRASES.get(req.category)
        for phrase in promptgen.PHRASES.values():
            expected = 1 if phrase == own else 0
            assert text.count(phrase.lower()) == expected, (req.id, phrase)
        if own:
            assert own in req.messages[-1]["content"]


def test_agentic_requests_carry_no_marker_phrase_and_are_recognisable_by_tools() -> None:
    for req in load_prompt_set("agentic").requests:
        text = _request_text(req).lower()
        assert not any(p.lower() in text for p in promptgen.PHRASES.values()), req.id
        assert req.tools


def test_generator_refuses_a_row_that_breaks_the_phrase_rule() -> None:
    row = {"id": "coding/x", "workload": "coding", "category": "codegen",
           "messages": [{"role": "user", "content": "Write unit tests for f."}]}
    assert "marker of testgen" in (promptgen.phrase_problem(row) or "")
    row["category"] = "testgen"
    assert promptgen.phrase_problem(row) is None


# ----------------------------------------------------------------------------- agentic shape


def test_agentic_has_150_requests_from_30_sessions() -> None:
    ps = load_prompt_set("agentic")
    assert ps.rows >= 30
    assert len(ps.requests) >= 150
    assert len({r.session_id for r in ps.requests}) == ps.rows


def test_agentic_sessions_have_8_to_30_tools_and_a_long_system_prompt(
        rows: dict[str, list[dict[str, Any]]]) -> None:
    for row in rows["agentic"]:
        assert 8 <= len(row["tools"]) <= 30, row["id"]
        names = {t["function"]["name"] for t in row["tools"]}
        used = {c["function"]["name"] for m in row["messages"] for c in m.get("tool_calls", ())}
        assert used <= names
        assert row["messages"][0]["role"] == "system"
        assert len(row["messages"][0]["content"]) >= 1000


def test_agentic_context_grows_from_about_1k_to_30k_chars(
        rows: dict[str, list[dict[str, Any]]]) -> None:
    firsts, lasts = [], []
    for row in rows["agentic"]:
        sizes = [message_chars(row["messages"][1:t]) for t in row["targets"]]  # after the system
        assert sizes == sorted(sizes) and sizes[-1] > sizes[0], row["id"]
        firsts.append(sizes[0])
        lasts.append(sizes[-1])
    assert max(firsts) < 1_000  # the first request is the system prompt and a short task
    assert sum(x >= 30_000 for x in lasts) >= 5
    assert sorted(lasts)[len(lasts) // 2] >= 8_000


def test_agentic_history_follows_the_openai_tool_call_rules(
        rows: dict[str, list[dict[str, Any]]]) -> None:
    parallel = 0
    for row in rows["agentic"]:
        pending: list[str] = []
        for msg in row["messages"]:
            assert isinstance(msg["content"], str)  # "" for empty assistant content, never null
            if msg["role"] == "assistant" and msg.get("tool_calls"):
                assert not pending
                pending = [c["id"] for c in msg["tool_calls"]]
                parallel += len(pending) > 1
                for call in msg["tool_calls"]:
                    assert CALL_ID.match(call["id"])
                    assert isinstance(json.loads(call["function"]["arguments"]), dict)
            elif msg["role"] == "tool":
                assert msg["tool_call_id"] == pending.pop(0)
        assert not pending
    assert parallel >= 20


def test_agentic_targets_are_tool_calls_or_short_answers(
        rows: dict[str, list[dict[str, Any]]]) -> None:
    caps = []
    for row in rows["agentic"]:
        assistant_at = [i for i, m in enumerate(row["messages"]) if m["role"] == "assistant"]
        assert row["targets"] == assistant_at
        caps += row["max_tokens"]
        final = row["messages"][row["targets"][-1]]
        assert not final.get("tool_calls") and final["content"]
    assert min(caps) >= 64 and max(caps) <= 1024
    assert sorted(caps)[len(caps) // 2] <= 256


def test_agentic_fix_sessions_go_from_a_failing_to_a_passing_test_run(
        rows: dict[str, list[dict[str, Any]]]) -> None:
    checked = 0
    for row in rows["agentic"]:
        if row["category"] != "fix_failing_test":
            continue
        names = {c["id"]: c["function"]["name"] for m in row["messages"]
                 for c in m.get("tool_calls", ())}
        runs = [m["content"] for m in row["messages"]
                if m["role"] == "tool" and names[m["tool_call_id"]] == "run_tests"]
        assert re.search(r"fail", runs[0], re.I), row["id"]
        assert not re.search(r"\b[1-9]\d* failed|FAIL\b|--- FAIL", runs[-1]), row["id"]
        checked += 1
    assert checked >= 3


# ----------------------------------------------------------------------------- corpus


def test_corpus_bugs_apply_and_python_examples_hold() -> None:
    for snippet in promptgen.SNIPPETS:
        assert snippet.name in snippet.code
        for bug in snippet.bugs:
            assert snippet.code.count(bug.find) == 1, snippet.key
        if snippet.lang == "python":
            namespace: dict[str, Any] = {}
            exec(compile(snippet.code, snippet.key, "exec"), namespace)
            for call, expected in snippet.examples:
                assert eval(call, namespace) == eval(expected, namespace), (snippet.key, call)
            for bug in snippet.bugs:
                compile(snippet.code.replace(bug.find, bug.replace), snippet.key, "exec")
