"""The simulated server over HTTP, on what real SGLang 0.5.23 does that a harness runs into.

Streams as SGLang sends them (the EOS step of a chat stream sends no chunk, completions send
an empty one; no spec fields without a verify round), `--api-key` / `--admin-api-key`,
`--context-length` and `--allow-auto-truncate`, SGLang's sampling and tool checks, and
`/flush_cache` with `?timeout=`. The messages come from SGLang's code; test_rules_contract.py
checks them against SGLang itself.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
import urllib.error
import urllib.request
from itertools import pairwise
from typing import Any

import aiohttp
import pytest

from tests.sim.conftest import EAGLE3_FLAGS, Event, SimProc, sse

FAST = ("--sim-time-scale", "20", "--max-running-requests", "64")
OPTIONS = {"include_usage": True, "continuous_usage_stats": True}
EOS = 128009


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "temperature": 0,
            **extra}  # fmt: skip


def stream(sim: SimProc, path: str, body: dict[str, Any], token: str | None = None) -> list[Any]:
    async def go() -> list[Event]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with aiohttp.ClientSession(headers=headers) as session:
            status, events = await sse(session, sim.url + path, body)
            assert status == 200
            return events

    events = asyncio.run(go())
    assert events[-1].data == "[DONE]"
    return [e.json for e in events[:-1]]


def call(
    sim: SimProc, path: str, body: Any = None, token: str | None = None, method: str = "GET"
) -> tuple[int, str, dict[str, str]]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(
        sim.url + path, data=data, headers=headers, method="POST" if data else method
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


@pytest.fixture(scope="module")
def base(sim_module) -> SimProc:  # type: ignore[no-untyped-def]
    return sim_module(*FAST)


@pytest.fixture(scope="module")
def eagle(sim_module) -> SimProc:  # type: ignore[no-untyped-def]
    return sim_module(*FAST, *EAGLE3_FLAGS)


@pytest.fixture(scope="module")
def keyed(sim_module) -> SimProc:  # type: ignore[no-untyped-def]
    return sim_module(*FAST, "--enable-metrics", "--api-key", "K", "--admin-api-key", "A")


@pytest.fixture(scope="module")
def short(sim_module) -> SimProc:  # type: ignore[no-untyped-def]
    return sim_module(*FAST, *EAGLE3_FLAGS, "--context-length", "2048")


# ----------------------------------------------------------------------------- streams
def rises_by_step(counts: list[int]) -> bool:
    """One token more per chunk, except where the simulator fell behind real time and sent
    several steps in one chunk, as SGLang does (specbench.sim.streaming; CI saw a 38-token
    chunk on the loaded 2-core machine)."""
    return bool(counts) and counts[0] >= 1 and all(b > a for a, b in pairwise(counts))


def test_an_eos_ended_chat_stream_shows_n_minus_1_then_n(base: SimProc) -> None:
    """Baseline: every step adds one token, so the EOS step adds only EOS and sends nothing."""
    chunks = stream(base, "/v1/chat/completions", chat("Implement a queue.", stream=True,
                    max_tokens=4000, stream_options=OPTIONS))  # fmt: skip
    role, *content, finish, usage = chunks
    assert "usage" not in role and content
    counts = [c["usage"]["completion_tokens"] for c in content]
    assert rises_by_step(counts)
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert finish["choices"][0]["matched_stop"] == EOS
    assert "usage" not in finish
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == counts[-1] + 1
    assert all(c["choices"][0]["delta"]["content"] for c in content)


def test_a_length_ended_chat_stream_streams_every_token(sim_module) -> None:  # type: ignore[no-untyped-def]
    # At a quarter of real time (decode steps ~28 ms apart, not 0.35 ms at 20x): a stream
    # one step late merges two steps into one chunk, as SGLang does, and a fresh-clone CI's
    # three workers on two cores were that late once at 20x (counts 1, 2, 3, 4, 6, 7).
    paced = sim_module("--sim-time-scale", "0.25", "--max-running-requests", "64")
    chunks = stream(paced, "/v1/chat/completions", chat("Implement a queue.", stream=True,
                    max_tokens=7, stream_options=OPTIONS))  # fmt: skip
    counts = [c["usage"]["completion_tokens"] for c in chunks[1:-2]]
    assert counts == [1, 2, 3, 4, 5, 6, 7] and chunks[-1]["usage"]["completion_tokens"] == 7


def test_the_last_step_keeps_its_own_event_when_the_stream_is_late(start_sim) -> None:  # type: ignore[no-untyped-def]
    """A stream stalled past the request's end still shows the EOS step as SGLang sends it
    when it keeps up: no content chunk for it, so the last streamed count is N-1."""
    sim = start_sim(*FAST, "--sim-stall-after-tokens", "3", "--sim-stall-s", "1.0")
    chunks = stream(sim, "/v1/chat/completions", chat("Implement a queue.", stream=True,
                    max_tokens=4000, stream_options=OPTIONS))  # fmt: skip
    counts = [c["usage"]["completion_tokens"] for c in chunks[1:-2]]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert counts[-1] == chunks[-1]["usage"]["completion_tokens"] - 1
    assert counts[-1] - counts[-2] > 1, "the stall should have merged several steps"


def test_completions_send_the_empty_eos_chunk(base: SimProc) -> None:
    body = {"model": "m", "prompt": "def stack():", "max_tokens": 4000, "stream": True,
            "stream_options": OPTIONS}  # fmt: skip
    chunks = stream(base, "/v1/completions", body)
    *content, usage = chunks
    last = content[-1]
    assert last["choices"][0]["text"] == "" and last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"]["completion_tokens"] == usage["usage"]["completion_tokens"]
    assert rises_by_step([c["usage"]["completion_tokens"] for c in content])
    assert all(c["choices"][0]["text"] for c in content[:-1])
    # The final usage chunk is written without null fields.
    assert set(usage["usage"]) == {"prompt_tokens", "total_tokens", "completion_tokens",
                                   "reasoning_tokens"}  # fmt: skip


def test_text_and_ids_of_an_eos_ended_request(base: SimProc) -> None:
    status, text, _ = call(base, "/generate", {"text": "Implement a trie.",
                           "sampling_params": {"max_new_tokens": 4000}})  # fmt: skip
    assert status == 200
    out = json.loads(text)
    meta = out["meta_info"]
    assert out["output_ids"][-1] == EOS and len(out["output_ids"]) == meta["completion_tokens"]
    assert meta["weight_versions"] == [
        {"version": "default", "start": 0, "end": meta["completion_tokens"]}
    ]
    assert meta["cached_tokens_details"] is None and meta["dp_rank"] is None
    _, chat_text, _ = call(base, "/v1/chat/completions", chat("Implement a trie.",
                           max_tokens=4000))  # fmt: skip
    body = json.loads(chat_text)
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["metadata"]["weight_versions"] == [
        {"version": "default", "start": 0, "end": body["usage"]["completion_tokens"]}
    ]


def test_no_spec_fields_without_a_verify_round(eagle: SimProc) -> None:
    chunks = stream(eagle, "/v1/chat/completions", chat("One word.", stream=True, max_tokens=1,
                    stream_options=OPTIONS, return_spec_tokens_details=True))  # fmt: skip
    assert not any("sglext" in c for c in chunks)
    assert chunks[-1]["usage"]["completion_tokens"] == 1
    status, text, _ = call(eagle, "/generate", {"text": "One word.",
                           "sampling_params": {"max_new_tokens": 1}})  # fmt: skip
    assert status == 200 and not [k for k in json.loads(text)["meta_info"] if "spec" in k]
    status, text, _ = call(eagle, "/v1/completions", {"model": "m", "prompt": "x",
                           "max_tokens": 1, "return_spec_tokens_details": True})  # fmt: skip
    assert status == 200 and "sglext" not in json.loads(text)


def test_sglext_chunks_carry_usage_null(eagle: SimProc) -> None:
    chunks = stream(eagle, "/v1/chat/completions", chat("Write a sort.", stream=True,
                    max_tokens=50, ignore_eos=True, return_spec_tokens_details=True))  # fmt: skip
    ext = [c for c in chunks if "sglext" in c]
    assert len(ext) == 1 and ext[0]["usage"] is None and ext[0]["choices"] == []


# ----------------------------------------------------------------------------- api keys
def test_api_key_rules(keyed: SimProc) -> None:
    for path in ("/health", "/health_generate", "/ready", "/metrics"):
        assert call(keyed, path)[0] == 200, path
    status, text, headers = call(keyed, "/server_info")
    assert (status, json.loads(text)) == (401, {"error": "Unauthorized"})
    assert headers["Content-Type"].startswith("application/json")
    assert call(keyed, "/server_info", token="A")[0] == 401  # the admin key is not the API key
    assert call(keyed, "/server_info", token="K")[0] == 200
    assert call(keyed, "/v1/chat/completions", chat("hi", max_tokens=2))[0] == 401
    assert call(keyed, "/v1/chat/completions", chat("hi", max_tokens=2), token="K")[0] == 200
    # /flush_cache takes the admin key when there is one, and then not the API key.
    assert call(keyed, "/flush_cache", token="K")[0] == 401
    assert call(keyed, "/flush_cache", token="A")[0] == 200
    assert call(keyed, "/flush_cache")[0] == 401


def test_flush_takes_the_api_key_without_an_admin_key(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*FAST, "--api-key", "K")
    assert call(sim, "/flush_cache")[0] == 401
    assert call(sim, "/flush_cache", token="K")[0] == 200
    only_admin = start_sim(*FAST, "--admin-api-key", "A")
    assert call(only_admin, "/server_info")[0] == 200  # normal routes stay open
    assert call(only_admin, "/flush_cache")[0] == 401
    assert call(only_admin, "/flush_cache", token="A")[0] == 200


# ----------------------------------------------------------------------------- context
def test_context_length_in_server_info(short: SimProc, base: SimProc) -> None:
    info = call(short, "/server_info")[1]
    assert {k: json.loads(info)[k] for k in ("context_length", "max_req_input_len")} == {
        "context_length": 2048, "max_req_input_len": 2042}  # fmt: skip
    binfo = json.loads(call(base, "/server_info")[1])
    # Without the flag SGLang reports none; max_req_input_len is the model's limit.
    assert binfo["context_length"] is None and binfo["max_req_input_len"] == 131072 - 6
    models = json.loads(call(short, "/v1/models")[1])
    assert models["data"][0]["max_model_len"] == 2048


def test_prompt_plus_max_tokens_over_the_context_is_a_400(short: SimProc) -> None:
    prompt = "x" * 4000  # 1000 tokens at 4 characters per token
    status, text, _ = call(short, "/v1/chat/completions", chat(prompt, max_tokens=1500))
    assert status == 400
    counted = json.loads(call(short, "/v1/chat/completions", chat(prompt, max_tokens=1))[1])
    n_input = counted["usage"]["prompt_tokens"] + 4  # EAGLE's 4 reserved slots count too
    assert json.loads(text)["message"] == (
        "Requested token count exceeds the model's maximum context length of 2048 tokens. "
        f"You requested a total of {n_input + 1500} tokens: {n_input} tokens from the input "
        "messages and 1500 tokens for the completion. Please reduce the number of tokens in the "
        "input messages or the completion to fit within the limit."
    )
    status, text, _ = call(short, "/v1/completions", {"model": "m", "prompt": "y" * 9000})
    assert status == 400 and "is longer than the model's context length (2048 tokens)" in text
    status, text, _ = call(short, "/v1/chat/completions", chat("hi", max_tokens=3000))
    assert status == 400 and json.loads(text)["message"] == (
        "max_completion_tokens is too large: 3000.This model supports at most 2048 "
        "completion tokens."
    )


def test_auto_truncate_cuts_instead(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*FAST, "--context-length", "2048", "--allow-auto-truncate")
    assert json.loads(call(sim, "/server_info")[1])["allow_auto_truncate"] is True
    status, text, _ = call(sim, "/v1/completions", {"model": "m", "prompt": "z" * 4000,
                           "max_tokens": 1500, "ignore_eos": True})  # fmt: skip
    usage = json.loads(text)["usage"]
    # max_tokens is cut to 2048 - 1000; the scheduler then keeps 2 tokens of the context free.
    assert status == 200 and usage["prompt_tokens"] + usage["completion_tokens"] == 2046
    status, text, _ = call(sim, "/v1/completions", {"model": "m", "prompt": "z" * 9000,
                           "max_tokens": 10})  # fmt: skip
    assert status == 200 and json.loads(text)["usage"]["prompt_tokens"] == 2042


def test_an_input_over_the_schedulers_limit_is_an_error_event(short: SimProc) -> None:
    """2043..2047 tokens pass the context check (with max_tokens 1) but not max_req_input_len;
    a stream has already begun then, so it carries the error."""
    body = {"model": "m", "prompt": list(range(2043)), "max_tokens": 1, "stream": True}
    status, text, _ = call(short, "/v1/completions", {**body, "stream": False})
    assert status == 400 and "exceeds the maximum allowed length (2042 tokens)" in text
    with_eagle_slots = {**body, "prompt": list(range(2040)), "max_tokens": 1}
    assert call(short, "/v1/completions", {**with_eagle_slots, "stream": False})[0] == 200
    events = stream(short, "/v1/completions", {**body, "prompt": list(range(2043))})
    assert events[0]["error"]["message"].startswith("Input length (2043 tokens) exceeds")


# ----------------------------------------------------------------------------- sampling
def test_sampling_checks_are_sglangs(base: SimProc) -> None:
    status, text, _ = call(base, "/v1/chat/completions", chat("hi", temperature=-1))
    assert status == 400
    message = json.loads(text)["message"]
    assert message == "temperature must be a non-negative finite number, got -1.0."
    status, text, _ = call(base, "/v1/completions", {"model": "m", "prompt": "p", "top_p": 0})
    assert status == 400 and json.loads(text)["message"] == "top_p must be in (0, 1], got 0.0."
    wide = {"frequency_penalty": 0.5, "presence_penalty": 0.5, "repetition_penalty": 1.1,
            "stop_regex": ["zzz"], "max_new_tokens": 4}  # fmt: skip
    assert call(base, "/generate", {"text": "hi", "sampling_params": wide})[0] == 200
    bad = {"text": "hi", "sampling_params": {"repetition_penalty": 3}}
    status, text, _ = call(base, "/generate", bad)
    message = "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 3."
    assert (status, json.loads(text)) == (400, {"error": {"message": message}})
    events = stream(base, "/generate", {**bad, "stream": True})
    assert events == [{"error": {"message": message, "type": "invalid_request_error",
                                 "code": 400, "retryable": False}}]  # fmt: skip


def test_tool_checks_are_sglangs(base: SimProc) -> None:
    tool = {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}
    named = {"type": "function", "function": {"name": "nope"}}
    status, text, _ = call(base, "/v1/chat/completions",
                           chat("hi", tools=[tool], tool_choice=named))  # fmt: skip
    assert (status, json.loads(text)["message"]) == (400, "Tool 'nope' not found in tools list.")
    if importlib.util.find_spec("jsonschema") is None:
        pytest.skip("jsonschema is not installed: tool schemas are not checked")
    broken = {**tool, "function": {"name": "run", "parameters": {"type": "nonsense"}}}
    status, text, _ = call(base, "/v1/chat/completions", chat("hi", tools=[broken]))
    assert status == 400
    assert json.loads(text)["message"].startswith(
        "Tool 0 function has invalid 'parameters' schema: 'nonsense' is not valid"
    )
    database_style = {**tool, "function": {"name": "run", "parameters": {"type": "varchar(9)"}}}
    assert call(base, "/v1/chat/completions", chat("hi", tools=[database_style],
                max_tokens=2))[0] == 200  # fmt: skip


# ----------------------------------------------------------------------------- flush
def test_flush_cache_with_and_without_timeout(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*FAST)

    async def go() -> list[tuple[int, str]]:
        async with aiohttp.ClientSession() as session:
            # About 2.5 s of wall time at this time scale: it must outlast the four calls below
            # (2,500 tokens, about 0.6 s, did not on a loaded fresh-clone CI).
            long = asyncio.create_task(sse(session, sim.url + "/v1/chat/completions",
                chat("long", max_tokens=10000, ignore_eos=True, stream=True)))  # fmt: skip
            await asyncio.sleep(0.2)
            out = []
            for query in ("", "?timeout=0", "?timeout=0.2"):
                async with session.get(sim.url + "/flush_cache" + query) as resp:
                    out.append((resp.status, await resp.text()))
            waiting = asyncio.create_task(session.get(sim.url + "/flush_cache?timeout=30"))
            await asyncio.sleep(0.05)
            async with session.get(sim.url + "/flush_cache?timeout=30") as resp:
                out.append((resp.status, await resp.text()))
            t0 = time.monotonic()
            async with await waiting as resp:
                out.append((resp.status, await resp.text()))
            await long
            assert time.monotonic() - t0 < 10
            return out

    results = asyncio.run(go())
    assert results[:4] == [
        (400, "Flush cache failed.\n"),
        (400, "Flush cache failed.\n"),
        (400, "Timed out waiting for idle state."),
        (400, "Another flush_cache is already in progress."),
    ]
    assert results[4][0] == 200 and results[4][1].startswith("Cache flushed.")
    assert "Cache not flushed because there are pending requests. #queue-req: 0" in sim.log
    status, text, _ = call(sim, "/flush_cache?timeout=-1")
    assert status == 400 and "greater_than_equal" in json.loads(text)["message"]
    assert call(sim, "/flush_cache?timeout=abc")[0] == 400
    assert call(sim, "/flush_cache?timeout=2")[0] == 200
