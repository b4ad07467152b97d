"""specbench's stream parsers and request bodies against SGLang 0.5.23's own serving code.

The streams are what SGLang's FastAPI app, ``OpenAIServingChat``/``OpenAIServingCompletion``,
TokenizerManager and detokenizer process send for scripted generations (see ``conftest.py``
and ``standin_scheduler.py``), read by the client as specbench's runner reads them. The true
counts are the scripts' own, so these tests do not trust SGLang's numbers either: they check
that SGLang and specbench agree with the script.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from specbench.load.protocols import PROTOCOLS, SAMPLING_KEYS, ParsedStream
from tests.engines.oracle.conftest import Run
from tests.engines.oracle.streams import (
    CASE_BY_NAME,
    ROUTES,
    SAMPLING,
    Capture,
    kind,
    one_read_per_event,
    params,
    usage_placement,
)

pytestmark = [pytest.mark.contract, pytest.mark.slow]


def parse(route: str, capture: Capture) -> ParsedStream:
    return PROTOCOLS[ROUTES[route]].parse(capture.reads, capture.times)


@pytest.mark.parametrize(("mode", "route", "case"), params())
def test_parsers_record_the_true_counts_and_raise_no_flag(
    oracle: Run, mode: str, route: str, case: str
):
    script = CASE_BY_NAME[case]
    capture = oracle.captures[(mode, route, case)]
    assert capture.status == 200, capture.raw[:500]
    parsed = parse(route, capture)
    assert parsed.error_class is None, parsed.error_detail
    assert parsed.completion_tokens == script.completion_tokens
    assert parsed.finish_reason == script.finish_reason
    assert parsed.spec_verify_ct == script.spec_verify_ct(mode)
    assert not parsed.token_mismatch, (
        f"a false token_mismatch on SGLang's own {route} stream ({script.what})")
    # the count timeline ends at the true count and never goes down
    tokens = parsed.chunk_tokens.tolist()
    assert tokens and tokens[-1] == script.completion_tokens
    assert tokens == sorted(tokens)
    assert parsed.t_first_token is not None and parsed.t_first_token <= parsed.chunk_t[-1]
    assert parsed.prompt_tokens is not None and parsed.prompt_tokens > 0


@pytest.mark.parametrize("mode", ["baseline", "eagle3"])
def test_sglang_streams_no_chat_chunk_for_a_step_that_adds_only_eos(oracle: Run, mode: str):
    """The case the parser must accept (issue 13 item 1), seen on SGLang's own stream: the
    last content chunk says N-1, the finish chunk has no usage, the usage chunk says N. Also
    guards the oracle: had the stand-in's steps been coalesced, the gap would be gone."""
    script = CASE_BY_NAME["onestep"]
    events = [e for e in oracle.captures[(mode, "chat", "onestep")].events() if e != "[DONE]"]
    kinds = [kind("chat", e) for e in events]
    n = script.completion_tokens
    words = sum(1 for step in script.steps for w in step if w != "<eos>")
    assert kinds.count("content") == words, (
        "SGLang merged steps into one chunk: the machine was too busy for the stand-in's step "
        "interval (raise SPECBENCH_ORACLE_STEP_S)")
    last_content = events[len(kinds) - 1 - kinds[::-1].index("content")]
    finish = events[kinds.index("finish")]
    assert last_content["usage"]["completion_tokens"] == n - 1
    assert "usage" not in finish
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == n


def retotal(capture: Capture, route: str, n: int) -> tuple[list[bytes], list[float]]:
    """The stream with its final count (usage chunk, or last meta_info) set to `n`."""
    events = capture.events()
    final = max(i for i, e in enumerate(events) if e != "[DONE]"
                and (route == "generate" or (not e["choices"] and "sglext" not in e)))
    event: dict[str, Any] = json.loads(json.dumps(events[final]))
    (event["meta_info"] if route == "generate" else event["usage"])["completion_tokens"] = n
    events[final] = event
    return one_read_per_event(events)


@pytest.mark.parametrize(("mode", "route", "case"),
                         [p for p in params() if p[1] != "generate"])
def test_a_real_disagreement_on_sglang_streams_is_still_a_mismatch(
    oracle: Run, mode: str, route: str, case: str
):
    """The same stream with a final usage above what a skipped stop chunk explains (chat: two
    above the last streamed count; completions, which stream every step: one above), or below
    the last streamed count, is a token_mismatch."""
    capture = oracle.captures[(mode, route, case)]
    gap = usage_placement(route, capture)["final_minus_last_streamed"]
    if gap is None:
        pytest.skip("nothing is streamed before the usage chunk: nothing to disagree with")
    last_streamed = CASE_BY_NAME[case].completion_tokens - gap
    for final in (last_streamed + (2 if route == "chat" else 1), last_streamed - 1):
        parsed = PROTOCOLS[ROUTES[route]].parse(*retotal(capture, route, final))
        assert parsed.token_mismatch, f"final usage {final} after {last_streamed} streamed"
        assert parsed.completion_tokens == final  # the server's final word is still the count


# --------------------------------------------------------------------------------------------
# Request fields (issue 13 item 9): tool_choice and a row's sampling overrides reach SGLang.


def test_the_sampling_case_covers_every_override_specbench_sends():
    assert set(SAMPLING) == set(SAMPLING_KEYS)


# SamplingParams attribute (what the scheduler received) -> the override it comes from.
RECEIVED_AS = {
    "temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
    "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty",
    "repetition_penalty": "repetition_penalty", "sampling_seed": "seed", "stop_strs": "stop",
    "stop_token_ids": "stop_token_ids", "stop_regex_strs": "stop_regex",
    "min_new_tokens": "min_tokens", "ignore_eos": "ignore_eos", "no_stop_trim": "no_stop_trim",
    "skip_special_tokens": "skip_special_tokens", "logit_bias": "logit_bias",
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_sampling_overrides_reach_sglangs_scheduler(oracle: Run, route: str):
    """Sent through SGLang's own request models (ChatCompletionRequest, CompletionRequest,
    /generate's strict sampling_params), every override arrives in the SamplingParams the
    scheduler gets, under SGLang's name, with its value; an unknown or misplaced key would be
    a 400 (/generate) or silently dropped (OpenAI routes)."""
    capture = oracle.sampled[route]
    assert capture.status == 200, capture.raw[:500]
    assert parse(route, capture).error_class is None
    got = oracle.received[f"sampled{route}"]
    assert set(RECEIVED_AS.values()) == set(SAMPLING_KEYS)
    assert {attr: got[attr] for attr in RECEIVED_AS} == {
        attr: SAMPLING[key] for attr, key in RECEIVED_AS.items()}
    assert got["max_new_tokens"] == 64


def test_tool_choice_reaches_sglangs_chat_route(oracle: Run):
    """A tool_choice naming a declared tool is served; one naming an undeclared tool is
    SGLang's 400 "Tool 'no_such_tool' not found in tools list.", so the field is read."""
    assert oracle.sampled["chat"].status == 200
    refused = oracle.unknown_tool_choice
    assert refused.status == 400
    assert "Tool 'no_such_tool' not found" in refused.raw.decode()
