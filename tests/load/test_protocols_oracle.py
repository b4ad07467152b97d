"""The parser's token-count check and the request bodies' row overrides, without SGLang.

The streams here are written in the shape SGLang 0.5.23's own serving code sends (what the
oracle contract tests in ``tests/engines/oracle`` capture from it): a chat content chunk only
for a non-empty text delta, usage on content chunks but never on the finish chunk, then the
sglext chunk (``"usage": null``) and the usage chunk. The oracle tests check the same rules on
SGLang's real bytes; these keep them checked where SGLang is not installed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbench.errors import UserError
from specbench.load.protocols import (
    PROTOCOLS,
    SAMPLING_KEYS,
    SamplingOverrideError,
    chat_body,
    completions_body,
    native_body,
    parse_chat,
    parse_completions,
    render_prompt,
)
from specbench.prompts import PromptRequest

HEAD = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
EOS_ID = 128009


def sse(obj: Any) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def usage(n: int) -> dict[str, Any]:
    return {"prompt_tokens": 9, "total_tokens": 9 + n, "completion_tokens": n,
            "prompt_tokens_details": None, "reasoning_tokens": 0,
            "completion_tokens_details": None}


def choice(delta: dict[str, Any], finish: str | None = None, matched: Any = None) -> list:
    return [{"index": 0, "delta": {"reasoning_content": None, **delta}, "logprobs": None,
             "finish_reason": finish, "matched_stop": matched}]


def chat_stream(streamed: list[int], final: int, finish: str = "stop",
                matched: Any = EOS_ID) -> tuple[list[bytes], list[float]]:
    """Role chunk, one content chunk per streamed count, finish chunk (no usage), usage."""
    events = [sse({**HEAD, "choices": choice({"role": "assistant", "content": ""})})]
    events += [sse({**HEAD, "choices": choice({"content": f" w{n}"}), "usage": usage(n)})
               for n in streamed]
    events.append(sse({**HEAD, "choices": choice({}, finish, matched)}))
    events.append(sse({**HEAD, "choices": [], "usage": usage(final)}))
    events.append(sse(b"[DONE]"))
    return events, [float(i) for i in range(len(events))]


def completions_stream(streamed: list[int], final: int) -> tuple[list[bytes], list[float]]:
    head = {**HEAD, "object": "text_completion"}
    events = [sse({**head, "choices": [{"index": 0, "text": f" w{n}", "logprobs": None,
                                        "finish_reason": None, "matched_stop": None}],
                   "usage": usage(n)}) for n in streamed[:-1]]
    events.append(sse({**head, "choices": [{"index": 0, "text": "", "logprobs": None,
                                            "finish_reason": "stop", "matched_stop": EOS_ID}],
                       "usage": usage(streamed[-1])}))
    events.append(sse({**head, "choices": [], "usage": {"prompt_tokens": 9,
                                                        "total_tokens": 9 + final,
                                                        "completion_tokens": final}}))
    events.append(sse(b"[DONE]"))
    return events, [float(i) for i in range(len(events))]


# --------------------------------------------------------------------------------------------
# token_mismatch: SGLang's EOS step is not one, a real disagreement is


def test_a_chat_stream_whose_last_step_added_only_eos_is_no_mismatch():
    # SGLang counts the EOS token but trims its text, and chat sends no chunk for an empty
    # delta: 4 streamed, 5 in the usage chunk.
    parsed = parse_chat(*chat_stream([1, 2, 3, 4], 5))
    assert parsed.error_class is None
    assert not parsed.token_mismatch
    assert parsed.completion_tokens == 5
    # the true count is the last point of the timeline, at the usage chunk
    assert parsed.chunk_tokens.tolist() == [1, 2, 3, 4, 5]


def test_a_one_token_eos_answer_streams_no_count_and_is_no_mismatch():
    parsed = parse_chat(*chat_stream([], 1))
    assert parsed.error_class is None and not parsed.token_mismatch
    assert parsed.completion_tokens == 1
    assert parsed.chunk_tokens.tolist() == [1]


@pytest.mark.parametrize(("streamed", "final", "finish", "matched", "why"), [
    ([1, 4, 8], 10, "stop", EOS_ID, "two above the last streamed count: more than one stop"),
    ([1, 4, 8], 7, "stop", EOS_ID, "the final count below the streamed one"),
    ([1, 4, 8], 9, "length", None, "a gap on a length finish: no stop to explain it"),
    ([1, 4, 8], 13, "stop", "END", "more tokens than the stop string has bytes"),
    ([1, 4, 8], 9, "abort", None, "a gap on an aborted stream: no stop to explain it"),
])
def test_a_real_chat_disagreement_is_a_mismatch(streamed, final, finish, matched, why):
    parsed = parse_chat(*chat_stream(streamed, final, finish, matched))
    assert parsed.token_mismatch, why
    assert parsed.completion_tokens == final  # the server's final count is still the count


def test_a_stop_string_may_explain_one_token_per_byte():
    parsed = parse_chat(*chat_stream([1, 4, 8], 11, "stop", "END"))
    assert not parsed.token_mismatch
    assert parsed.completion_tokens == 11


def test_completions_streams_every_step_so_any_gap_is_a_mismatch():
    assert not parse_completions(*completions_stream([1, 2, 3], 3)).token_mismatch
    assert parse_completions(*completions_stream([1, 2, 3], 4)).token_mismatch


@given(st.lists(st.integers(1, 4), min_size=1, max_size=12), st.integers(-3, 3))
def test_only_a_one_token_stop_gap_passes(steps: list[int], delta: int):
    streamed = [sum(steps[: i + 1]) for i in range(len(steps))]
    parsed = parse_chat(*chat_stream(streamed, streamed[-1] + delta))
    assert parsed.token_mismatch == (delta not in (0, 1))
    assert parsed.completion_tokens == streamed[-1] + delta


# --------------------------------------------------------------------------------------------
# Request bodies: a row's tool_choice and sampling overrides are sent (issue 13 item 9)

TOOLS = ({"type": "function", "function": {"name": "run_tests", "parameters": {
    "type": "object", "properties": {}}}},)


def row(**kw: Any) -> PromptRequest:
    base: dict[str, Any] = {"id": "r", "prompt_set": "s", "category": "c",
                            "messages": ({"role": "user", "content": "hi"},), "max_tokens": 32}
    return PromptRequest(**{**base, **kw})


def test_a_row_without_overrides_sends_what_it_always_did():
    r = row()
    assert set(chat_body(r, "m", 0.0)) == {
        "model", "messages", "max_completion_tokens", "max_tokens", "temperature", "stream",
        "stream_options", "return_spec_tokens_details"}
    assert set(completions_body(r, "m", 0.0)) == {
        "model", "prompt", "max_tokens", "temperature", "stream", "stream_options",
        "return_spec_tokens_details"}
    assert native_body(r, "m", 0.0)["sampling_params"] == {"max_new_tokens": 32,
                                                           "temperature": 0.0}


@pytest.mark.parametrize("tool_choice", ["auto", "required", "none",
                                         {"type": "function", "function": {"name": "run_tests"}}])
def test_chat_sends_the_rows_tool_choice(tool_choice: Any):
    body = chat_body(row(tools=TOOLS, tool_choice=tool_choice), "m", 0.0)
    assert body["tool_choice"] == tool_choice
    assert body["tools"] == list(TOOLS)


def test_tool_choice_none_leaves_the_tools_out_of_the_rendered_prompt():
    # as SGLang's chat route leaves them out of the template
    assert "<|tools|>" in render_prompt(row(tools=TOOLS))
    assert "<|tools|>" not in render_prompt(row(tools=TOOLS, tool_choice="none"))


SAMPLING = {"temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
            "frequency_penalty": 0.1, "presence_penalty": 0.2, "repetition_penalty": 1.1,
            "seed": 3, "stop": ["\n\n"], "stop_token_ids": [7], "stop_regex": "x+$",
            "min_tokens": 2, "ignore_eos": True, "no_stop_trim": True,
            "skip_special_tokens": False, "logit_bias": {"11": -2.0}}


def test_every_sampling_key_is_sent_on_every_route_under_its_routes_name():
    assert set(SAMPLING) == set(SAMPLING_KEYS)
    r = row(sampling=SAMPLING)
    for body in (chat_body(r, "m", 0.0), completions_body(r, "m", 0.0)):
        assert {k: body[k] for k in SAMPLING} == SAMPLING
        assert body["stream"] is True and body["return_spec_tokens_details"] is True
    params = native_body(r, "m", 0.0)["sampling_params"]
    assert params == {"max_new_tokens": 32,
                      **{SAMPLING_KEYS[k]: v for k, v in SAMPLING.items()}}
    assert params["sampling_seed"] == 3 and params["min_new_tokens"] == 2


def test_a_rows_temperature_overrides_the_command_line():
    r = row(sampling={"temperature": 0.8})
    for name in PROTOCOLS:
        body = PROTOCOLS[name].build_body(r, "m", 0.0)
        temperature = body.get("temperature", body.get("sampling_params", {}).get("temperature"))
        assert temperature == 0.8, name


@pytest.mark.parametrize("key", ["max_tokens", "n", "sampling_seed", "logprobs"])
def test_a_sampling_key_specbench_cannot_send_everywhere_is_a_user_error(key: str):
    r = row(sampling={key: 1})
    for name in PROTOCOLS:
        with pytest.raises(SamplingOverrideError, match=f"sampling key '{key}'") as info:
            PROTOCOLS[name].encode(r, "m", 0.0)
        assert isinstance(info.value, UserError)
        assert "temperature" in str(info.value)  # the message lists what is accepted
