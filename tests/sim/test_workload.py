"""Prompt -> token count, output length and acceptance: deterministic and ordered by task."""

from __future__ import annotations

import statistics

import pytest

from specbench.sim.costmodel import load_profile
from specbench.sim.workload import (
    TraitModel,
    count_tokens,
    filler_ids,
    filler_json,
    filler_text,
    is_agentic,
    render_chat,
)

TASKS = {
    "edit": "Here is utils.py. Rename foo to bar. Return the complete updated file.",
    "tests": "Write unit tests for the parser below using pytest.",
    "bugfix": "Find and fix the bug in this function; the traceback is below.",
    "default": "Implement an LRU cache class in Python with get and put.",
    "review": "Explain the design trade-offs of this module. Answer in prose, without code.",
}


@pytest.fixture(scope="module")
def model() -> TraitModel:
    return TraitModel(load_profile().workload, seed=0)


def mean_alpha(model: TraitModel, text: str, *, agentic: bool = False, n: int = 200) -> float:
    return statistics.fmean(
        model.traits(f"{text}\n# variant {i}", agentic=agentic).alpha for i in range(n)
    )


def test_acceptance_ordering_by_task(model: TraitModel) -> None:
    means = {name: mean_alpha(model, text) for name, text in TASKS.items()}
    assert means["edit"] > means["tests"] > means["bugfix"] > means["default"] > means["review"]
    assert means["edit"] == pytest.approx(0.84, abs=0.02)
    assert means["review"] == pytest.approx(0.58, abs=0.02)


def test_agentic_acceptance_below_coding_average(model: TraitModel) -> None:
    coding = statistics.fmean(mean_alpha(model, text) for text in TASKS.values())
    agentic = mean_alpha(model, "List the files, then read src/cache.py.", agentic=True)
    assert agentic == pytest.approx(0.60, abs=0.02)
    assert agentic < coding - 0.08


def test_first_matching_rule_wins_over_agentic(model: TraitModel) -> None:
    traits = model.traits("Write unit tests for the tool output above", agentic=True)
    assert traits.category == "tests"


def test_alpha_jitter_and_clipping(model: TraitModel) -> None:
    alphas = [model.traits(f"prompt {i}", agentic=False).alpha for i in range(500)]
    assert 0.03 < statistics.pstdev(alphas) < 0.07
    assert all(0.05 <= a <= 0.95 for a in alphas)


def test_traits_are_deterministic_per_seed(model: TraitModel) -> None:
    a = model.traits("same prompt", agentic=False)
    assert model.traits("same prompt", agentic=False) == a
    other_seed = TraitModel(load_profile().workload, seed=1).traits("same prompt", agentic=False)
    assert other_seed != a


def test_output_lengths_have_the_workload_means(model: TraitModel) -> None:
    coding = [
        model.traits(f"code task {i}", agentic=False).natural_output_tokens for i in range(2000)
    ]
    agentic = [
        model.traits(f"agent step {i}", agentic=True).natural_output_tokens for i in range(2000)
    ]
    assert statistics.fmean(coding) == pytest.approx(380, rel=0.08)
    assert statistics.fmean(agentic) == pytest.approx(120, rel=0.08)
    assert min(coding) >= 1


def test_prompt_tokens_are_characters_over_four(model: TraitModel) -> None:
    assert count_tokens("x" * 4000) == 1000
    assert count_tokens("x" * 4001) == 1001
    assert count_tokens("") == 1
    assert model.traits("y" * 400, agentic=False).prompt_tokens == 100


def test_chat_rendering_is_deterministic_and_includes_tools() -> None:
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix tests."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "run_tests", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "FAILED"},
    ]
    tools = [
        {"type": "function", "function": {"name": "run_tests", "parameters": {"b": 1, "a": 2}}}
    ]
    text = render_chat(messages, tools)
    assert text == render_chat([dict(m) for m in messages], [dict(t) for t in tools])
    assert "run_tests" in text and "FAILED" in text and text.endswith("<|assistant|>\n")
    assert is_agentic(messages, None) and is_agentic([messages[1]], tools)
    assert not is_agentic([messages[1]], None)


def test_filler_text_is_a_prefix_stable_sequence() -> None:
    full = filler_text(42, 0, 50)
    assert filler_text(42, 0, 20) + filler_text(42, 20, 50) == full
    assert len(filler_ids(42, 0, 50)) == 50
    assert filler_text(43, 0, 50) != full
    assert filler_text(7, 65530, 65540) == "".join(
        filler_text(7, i, i + 1) for i in range(65530, 65540)
    )


@pytest.mark.parametrize(("start", "stop"), [(0, 0), (0, 50), (10, 300), (65500, 65600)])
def test_filler_json_is_the_escaped_filler_text(start: int, stop: int) -> None:
    import json

    for seed in (1, 99_999, 2**61 + 7):
        assert json.loads(filler_json(seed, start, stop)) == filler_text(seed, start, stop)


def test_a_profile_can_count_prompt_tokens_without_the_tool_schemas_and_calls() -> None:
    import dataclasses

    messages = [
        {"role": "user", "content": "x" * 400},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    tools = [{"type": "function", "function": {"name": "f", "description": "y\n" * 300}}]
    text = render_chat(messages, tools)
    default = load_profile().workload
    generic = TraitModel(default, seed=0)
    assert generic.traits(text, agentic=True, messages=messages).prompt_tokens == count_tokens(
        text)
    plain = dataclasses.replace(default, prompt_chars_per_token=2.0, prompt_renders_tools=False)
    counted = TraitModel(plain, seed=0).traits(text, agentic=True, messages=messages)
    message_text = "<|user|>\n" + "x" * 400 + "\n<|assistant|>\n\n<|tool|>\nok\n<|assistant|>\n"
    assert counted.prompt_tokens == -(-len(message_text) // 2)
    # Only the count changes: the same prompt keeps its output length and acceptance.
    assert counted.alpha == generic.traits(text, agentic=True).alpha


def test_pieces_are_words_numbers_symbol_runs_and_whitespace() -> None:
    from specbench.sim.workload import count_pieces, pre_tokenizer_pieces

    # GPT-2's split: a space joins the piece after it, so a run of spaces keeps all but one;
    # "\n   " (a break and an indent) counts two: def, " f", "(", "x", "):", 2, " return",
    # " x", " +", " 10".
    assert pre_tokenizer_pieces("def f(x):\n    return x + 10") == 11
    assert pre_tokenizer_pieces("it's 2026") == 3  # "it", "'s", " 2026"
    assert count_pieces("a b c d", 1.5) == 6
    assert count_pieces("", 1.07) == 1

