"""Stream parsers and request bodies, against byte streams in SGLang 0.5.23's exact format."""

from __future__ import annotations

import itertools
import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.load.protocols import (
    PROTOCOLS,
    parse_chat,
    parse_completions,
    parse_native,
    render_prompt,
    split_events,
)
from specbench.prompts import PromptRequest


def sse(obj: dict) -> bytes:
    # SGLang serialises with pydantic's model_dump_json: compact separators.
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
CHAT_BASE = {"id": "9f1c", "object": "chat.completion.chunk", "created": 1732880000,
             "model": "meta-llama/Llama-3.1-8B-Instruct"}


def chat_chunk(content: str | None, n: int | None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    obj: dict = {**CHAT_BASE, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                           "finish_reason": finish, "matched_stop": None}]}
    if n is not None:
        obj["usage"] = {"prompt_tokens": 31, "total_tokens": 31 + n, "completion_tokens": n,
                        "reasoning_tokens": 0}
    return sse(obj)


ROLE = sse({**CHAT_BASE, "choices": [{"index": 0, "delta": {"reasoning_content": None,
                                                              "role": "assistant", "content": ""},
                                      "logprobs": None, "finish_reason": None,
                                      "matched_stop": None}]})
SGLEXT = sse({**CHAT_BASE, "choices": [], "sglext": {"spec_tokens_details": {
    "spec_accept_rate": 0.61, "spec_accept_length": 2.8, "spec_cap_length": 4.0,
    "spec_block_accept_length": 2.8, "spec_num_correct_drafts": 9,
    "spec_num_proposed_drafts": 15, "spec_verify_ct": 5,
    "spec_correct_drafts_histogram": [1, 1, 2, 1], "spec_cap_lens_histogram": [0, 0, 0, 5]}}})
USAGE = sse({**CHAT_BASE, "choices": [], "usage": {"prompt_tokens": 31, "total_tokens": 45,
                                                   "completion_tokens": 14, "reasoning_tokens": 0}})

# A speculative chat stream: first token alone, then coalesced chunks of 3, 4, 2, 4 tokens.
CHAT_EVENTS = [ROLE, chat_chunk("def", 1), chat_chunk(" f(x):\n", 4), chat_chunk("  return", 8),
               chat_chunk(" x", 10), chat_chunk(" + 1\n", 14), chat_chunk(None, 14, "stop"),
               SGLEXT, USAGE, DONE]


def one_read_per_event(events: list[bytes]) -> tuple[list[bytes], list[float]]:
    return list(events), [float(i) for i in range(len(events))]


def test_chat_stream_with_coalesced_chunks_sglext_and_usage() -> None:
    parsed = parse_chat(*one_read_per_event(CHAT_EVENTS))
    assert parsed.error_class is None, parsed.error_detail
    # The role chunk (t=0) carries no usage; counts start with the first content chunk and
    # end with the finish chunk; the usage chunk (t=8) confirms the total.
    assert parsed.chunk_t.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert parsed.chunk_tokens.tolist() == [1, 4, 8, 10, 14, 14]
    assert parsed.t_first_token == 1.0
    assert parsed.completion_tokens == 14
    assert parsed.prompt_tokens == 31
    assert parsed.spec_verify_ct == 5
    assert parsed.finish_reason == "stop"
    assert parsed.n_events == 10
    assert not parsed.token_mismatch


def test_events_arriving_in_one_read_share_its_time_and_the_last_count_wins() -> None:
    reads = [b"".join(CHAT_EVENTS[:3]), b"".join(CHAT_EVENTS[3:])]
    parsed = parse_chat(reads, [10.0, 20.0])
    assert parsed.chunk_t.tolist() == [10.0, 20.0]
    assert parsed.chunk_tokens.tolist() == [4, 14]
    assert parsed.t_first_token == 10.0
    assert parsed.error_class is None


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_split_into_reads_gives_each_event_the_time_of_the_read_that_completed_it(
        data: st.DataObject) -> None:
    stream = b"".join(CHAT_EVENTS)
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=40)))
    bounds = [0, *cuts, len(stream)]
    reads = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    times = [float(i) for i in range(len(reads))]
    parsed = parse_chat(reads, times)
    assert parsed.error_class is None
    assert parsed.completion_tokens == 14
    # Expected: each count-bearing event at the read holding its terminating newline.
    ends = {}
    offset = 0
    for event in CHAT_EVENTS:
        offset += len(event)
        line_end = offset - 1  # the blank line's newline ends the event; the data line ends before
        ends[event] = next(i for i, b in enumerate(bounds[1:]) if b >= line_end)
    expected: dict[float, int] = {}
    for event, n in zip(CHAT_EVENTS[1:7], [1, 4, 8, 10, 14, 14], strict=True):
        expected[float(ends[event])] = n
    assert parsed.chunk_t.tolist() == list(expected)
    assert parsed.chunk_tokens.tolist() == list(expected.values())


def test_chat_without_continuous_usage_still_counts_tokens_from_the_final_usage() -> None:
    events = [ROLE, chat_chunk("a", None), chat_chunk("b c", None),
              chat_chunk(None, None, "length"), USAGE, DONE]
    parsed = parse_chat(*one_read_per_event(events))
    assert parsed.error_class is None
    assert parsed.t_first_token == 1.0  # first content, even without a count
    assert parsed.chunk_t.tolist() == [4.0]  # the usage chunk is the only count point
    assert parsed.chunk_tokens.tolist() == [14]
    assert parsed.completion_tokens == 14
    assert parsed.spec_verify_ct is None


def test_final_usage_that_disagrees_with_the_streamed_count_is_a_token_mismatch() -> None:
    events = [ROLE, chat_chunk("a", 1), chat_chunk("b", 12), chat_chunk(None, 12, "stop"),
              USAGE, DONE]
    parsed = parse_chat(*one_read_per_event(events))
    assert parsed.error_class is None
    assert parsed.token_mismatch
    assert parsed.completion_tokens == 14


def test_truncated_chat_stream_keeps_its_tokens_and_says_truncated() -> None:
    parsed = parse_chat(*one_read_per_event(CHAT_EVENTS[:5]))
    assert parsed.error_class == "stream_truncated"
    assert "[DONE]" in (parsed.error_detail or "")
    assert parsed.chunk_tokens.tolist() == [1, 4, 8, 10]
    assert parsed.completion_tokens == 10


def test_done_without_finish_reason_is_truncated() -> None:
    parsed = parse_chat(*one_read_per_event([ROLE, chat_chunk("a", 1), DONE]))
    assert parsed.error_class == "stream_truncated"
    assert "finish_reason" in (parsed.error_detail or "")


def test_malformed_chunk_is_classified_and_later_counts_still_parse() -> None:
    events = [ROLE, chat_chunk("a", 1), b'data: {"id":"9f1c","choices":[{"ind\n\n',
              chat_chunk("b", 2), chat_chunk(None, 2, "stop"), DONE]
    parsed = parse_chat(*one_read_per_event(events))
    assert parsed.error_class == "malformed_chunk"
    assert "not JSON" in (parsed.error_detail or "")
    assert parsed.chunk_tokens.tolist() == [1, 2, 2]


def test_counts_that_go_down_are_malformed() -> None:
    events = [ROLE, chat_chunk("a", 5), chat_chunk("b", 3), chat_chunk(None, 5, "stop"), DONE]
    parsed = parse_chat(*one_read_per_event(events))
    assert parsed.error_class == "malformed_chunk"
    assert "went down from 5 to 3" in (parsed.error_detail or "")


def test_error_event_and_abort_are_server_errors() -> None:
    err = sse({"error": {"message": "The request was aborted: out of memory",
                         "type": "InternalServerError", "code": 500, "retryable": True}})
    parsed = parse_chat(*one_read_per_event([ROLE, chat_chunk("a", 1), err, DONE]))
    assert parsed.error_class == "server_error"
    assert parsed.error_detail == "The request was aborted: out of memory"
    parsed = parse_chat(*one_read_per_event([ROLE, chat_chunk("a", 1),
                                             chat_chunk(None, 1, "abort"), DONE]))
    assert parsed.error_class == "server_error"


def test_a_plain_json_body_instead_of_a_stream_is_reported() -> None:
    body = json.dumps({"id": "x", "choices": [{"message": {"content": "hi"}}]}).encode()
    parsed = parse_chat([body], [1.0])
    assert parsed.error_class == "stream_truncated"
    assert parsed.n_events == 0


COMPLETION_BASE = {"id": "c1", "object": "text_completion", "created": 1, "model": "m"}


def completion_chunk(text: str, n: int, finish: str | None = None) -> bytes:
    return sse({**COMPLETION_BASE, "choices": [{"index": 0, "text": text, "logprobs": None,
                                                "finish_reason": finish, "matched_stop": None}],
                "usage": {"prompt_tokens": 12, "total_tokens": 12 + n, "completion_tokens": n}})


def test_completions_stream_with_finish_on_the_last_content_chunk() -> None:
    events = [completion_chunk("x", 1), completion_chunk(" = 1", 4),
              completion_chunk("\n", 6, "length"),
              sse({**COMPLETION_BASE, "choices": [], "sglext": {"spec_tokens_details": {
                  "spec_verify_ct": 3, "spec_accept_length": 2.0}}}),
              sse({**COMPLETION_BASE, "choices": [],
                   "usage": {"prompt_tokens": 12, "total_tokens": 18, "completion_tokens": 6}}),
              DONE]
    parsed = parse_completions(*one_read_per_event(events))
    assert parsed.error_class is None
    assert parsed.chunk_tokens.tolist() == [1, 4, 6]
    assert parsed.finish_reason == "length"
    assert parsed.spec_verify_ct == 3
    assert parsed.completion_tokens == 6
    assert parsed.prompt_tokens == 12


def native_update(text: str, n: int, final: bool = False, spec: bool = True) -> bytes:
    meta: dict = {"id": "abc", "finish_reason": None, "prompt_tokens": 20,
                  "completion_tokens": n, "cached_tokens": 0, "reasoning_tokens": 0,
                  "weight_version": "default", "num_retractions": 0}
    if final:
        meta["finish_reason"] = {"type": "length", "length": n}
        meta["e2e_latency"] = 0.52
        if spec:
            meta.update(spec_accept_length=2.5, spec_accept_rate=0.5, spec_verify_ct=4,
                        spec_num_correct_drafts=6, spec_num_proposed_drafts=12)
    return sse({"text": text, "output_ids": list(range(n)), "meta_info": meta})


def test_native_stream_is_cumulative_and_the_final_update_carries_spec_counts() -> None:
    events = [native_update("a", 1), native_update("a b c", 3), native_update("a b c d e f", 7),
              native_update("a b c d e f g h i j", 10, final=True), DONE]
    parsed = parse_native(*one_read_per_event(events))
    assert parsed.error_class is None
    assert parsed.chunk_tokens.tolist() == [1, 3, 7, 10]
    assert parsed.completion_tokens == 10
    assert parsed.spec_verify_ct == 4
    assert parsed.finish_reason == "length"
    assert parsed.prompt_tokens == 20
    assert parsed.t_first_token == 0.0


def test_native_baseline_has_no_verify_count_and_truncation_is_seen() -> None:
    events = [native_update("a", 1), native_update("a b", 2, final=True, spec=False), DONE]
    parsed = parse_native(*one_read_per_event(events))
    assert parsed.spec_verify_ct is None and parsed.error_class is None
    parsed = parse_native(*one_read_per_event(events[:1]))
    assert parsed.error_class == "stream_truncated"
    assert parsed.completion_tokens == 1


def test_native_update_without_meta_info_is_malformed() -> None:
    parsed = parse_native(*one_read_per_event([sse({"text": "a"}), DONE]))
    assert parsed.error_class == "malformed_chunk"


def test_split_events_handles_crlf_comments_and_an_unterminated_tail() -> None:
    reads = [b": keep-alive\r\n\r\ndata: {\"a\": 1}\r\n\r\nda", b"ta: [DONE]"]
    events = list(split_events(reads, [1.0, 2.0]))
    assert events == [(1.0, b'{"a": 1}'), (2.0, b"[DONE]")]


REQUEST = PromptRequest(
    id="agentic-0007", prompt_set="agentic", category="tool-use",
    messages=({"role": "system", "content": "You are a coding agent."},
              {"role": "user", "content": [{"type": "text", "text": "List files."}]},
              {"role": "assistant", "content": None, "tool_calls": [
                  {"id": "call_1", "type": "function",
                   "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"}),
    max_tokens=300,
    tools=({"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}},),
)


def test_request_bodies_follow_each_routes_contract() -> None:
    chat = json.loads(PROTOCOLS["openai-chat"].encode(REQUEST, "served-name", 0.0))
    assert chat["model"] == "served-name"
    assert chat["messages"][2]["tool_calls"][0]["function"]["name"] == "ls"
    assert chat["tools"][0]["function"]["name"] == "ls"
    assert chat["max_completion_tokens"] == chat["max_tokens"] == 300
    assert chat["temperature"] == 0.0 and chat["stream"] is True
    assert chat["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert chat["return_spec_tokens_details"] is True

    comp = json.loads(PROTOCOLS["openai-completions"].encode(REQUEST, "m", 0.7))
    assert comp["prompt"] == render_prompt(REQUEST)
    assert comp["max_tokens"] == 300 and comp["temperature"] == 0.7
    assert comp["stream_options"]["continuous_usage_stats"] is True

    native = json.loads(PROTOCOLS["sglang-native"].encode(REQUEST, "m", 0.0))
    # /generate rejects unknown sampling_params keys with 400: exactly these two.
    assert native["sampling_params"] == {"max_new_tokens": 300, "temperature": 0.0}
    assert native["text"] == render_prompt(REQUEST) and native["stream"] is True
    assert PROTOCOLS["sglang-native"].path == "/generate"


def test_rendered_prompt_is_deterministic_and_keeps_every_part() -> None:
    text = render_prompt(REQUEST)
    assert text == render_prompt(REQUEST)
    for needle in ("You are a coding agent.", "List files.", '"name": "ls"', "a.py\nb.py",
                   "<|tool id=call_1|>", "<|tools|>"):
        assert needle in text
    assert text.endswith("<|assistant|>\n")


def test_parsed_arrays_are_compact_numpy() -> None:
    parsed = parse_chat(*one_read_per_event(CHAT_EVENTS))
    assert parsed.chunk_t.dtype == np.float64 and parsed.chunk_tokens.dtype == np.int64
