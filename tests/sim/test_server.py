"""Endpoints and stream formats of the simulated server, checked over real HTTP."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from typing import Any

import aiohttp
import pytest

from tests.sim.conftest import EAGLE3_FLAGS, Event, SimProc, sse

FAST = ("--sim-time-scale", "20", "--max-running-requests", "64")


@pytest.fixture(scope="module")
def eagle(sim_module) -> SimProc:  # type: ignore[no-untyped-def]
    return sim_module(*FAST, "--enable-metrics", *EAGLE3_FLAGS)


@pytest.fixture(scope="module")
def base(sim_module) -> SimProc:  # type: ignore[no-untyped-def]
    return sim_module(*FAST, "--enable-metrics")


@pytest.fixture(scope="module")
def plain(sim_module) -> SimProc:  # type: ignore[no-untyped-def]
    return sim_module(*FAST)


def chat_body(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
        **extra,
    }


def stream(sim: SimProc, path: str, body: dict[str, Any]) -> list[Event]:
    async def go() -> list[Event]:
        async with aiohttp.ClientSession() as session:
            status, events = await sse(session, sim.url + path, body)
            assert status == 200
            return events

    return asyncio.run(go())


def post_json(sim: SimProc, path: str, body: dict[str, Any]) -> Any:
    status, text = sim.post(path, body)
    assert status == 200, text
    return json.loads(text)


def metric_sum(text: str, name: str) -> float:
    return sum(
        float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.M)
    )


# ----------------------------------------------------------------------------- endpoints
def test_readiness_endpoints(eagle: SimProc) -> None:
    assert eagle.get("/ready") == (200, "OK")
    assert eagle.get("/health")[0] == 200
    assert eagle.get("/health_generate")[0] == 200
    assert eagle.get("/ping")[0] == 200


def test_model_info_and_models(eagle: SimProc) -> None:
    info = eagle.get_json("/model_info")
    assert info["model_path"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert info["is_generation"] is True and info["architectures"] == ["LlamaForCausalLM"]
    assert eagle.get_json("/get_model_info") == info
    models = eagle.get_json("/v1/models")
    assert models["data"][0]["id"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_server_info_reports_resolved_args(eagle: SimProc, base: SimProc) -> None:
    info = eagle.get_json("/server_info")
    assert info["version"] == "0.5.23-sim"
    assert info["speculative_algorithm"] == "EAGLE3"
    assert (
        info["speculative_num_steps"],
        info["speculative_eagle_topk"],
        info["speculative_num_draft_tokens"],
    ) == (3, 1, 4)
    assert info["speculative_adaptive"] is False
    assert info["max_running_requests"] == 64 and info["enable_metrics"] is True
    assert info["sim_profile"] == "llama-3.1-8b-1xh200" and info["sim_time_scale"] == 20.0
    assert info["cuda_graph_bs_decode"] is None and info["port"] == eagle.port
    state = info["internal_states"][0]
    assert state["effective_max_running_requests_per_dp"] == 64
    assert state["speculative_num_steps"] == 3
    assert set(info["sim_lag"]) >= {"last_s", "max_s", "behind"}
    assert set(info["sim_stream_delay"]) == {"mean_ms", "max_ms", "writes"}
    assert eagle.get_json("/get_server_info").keys() == info.keys()
    binfo = base.get_json("/server_info")
    assert binfo["speculative_algorithm"] is None and binfo["speculative_num_steps"] is None
    assert "avg_spec_accept_length" not in binfo["internal_states"][0]


def test_metrics_only_with_enable_metrics(plain: SimProc, base: SimProc) -> None:
    assert plain.get("/metrics")[0] == 404
    status, text = base.get("/metrics")
    assert status == 200
    for name in (
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
        "sglang:spec_verify_calls_total",
        "sglang:num_requests_total",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:gen_throughput",
        "sglang:sim_running_reqs_seconds_total",
        "sglang:sim_model_seconds_total",
    ):
        assert f"# TYPE {name} " in text, name
    assert 'engine_type="unified"' in text and 'tp_rank="0"' in text
    assert 'model_name="meta-llama/Llama-3.1-8B-Instruct"' in text


def test_bad_requests_are_400(eagle: SimProc) -> None:
    status, text = eagle.post("/v1/chat/completions", {"model": "m", "messages": []})
    assert status == 400 and "Messages cannot be empty" in text
    status, text = eagle.post("/generate", {"text": "hi", "sampling_params": {"max_tokens": 3}})
    assert status == 400
    assert json.loads(text)["error"].startswith(
        "unknown field `max_tokens`, expected one of `max_new_tokens`"
    )
    status, text = eagle.post("/v1/completions", {"model": "m"})
    assert status == 400


# ----------------------------------------------------------------------------- chat stream
def test_chat_stream_exact_sequence_with_spec_details_and_usage(eagle: SimProc) -> None:
    body = chat_body(
        "Write unit tests for the cache.",
        max_tokens=120,
        stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
        return_spec_tokens_details=True,
    )
    events = stream(eagle, "/v1/chat/completions", body)
    assert events[-1].data == "[DONE]"
    chunks = [e.json for e in events[:-1]]
    role, *content, finish, ext, usage = chunks
    assert role["object"] == "chat.completion.chunk" and role["model"] == "m"
    assert role["choices"][0]["delta"] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": None,
    }
    assert "usage" not in role
    assert content and all(
        c["choices"][0]["delta"].keys() == {"content", "reasoning_content"} for c in content
    )
    assert all(c["choices"][0]["delta"]["reasoning_content"] is None for c in content)
    assert all(c["choices"][0]["finish_reason"] is None for c in content)
    counts = [c["usage"]["completion_tokens"] for c in content]
    assert counts == sorted(counts) and len(set(counts)) == len(counts)
    assert max(b - a for a, b in zip([0, *counts], counts, strict=False)) > 1, (
        "EAGLE-3 chunks carry several tokens"
    )
    assert finish["choices"][0]["delta"] == {"reasoning_content": None}
    assert finish["choices"][0]["finish_reason"] in ("stop", "length")
    assert "usage" not in finish
    assert ext["choices"] == [] and ext["usage"] is None
    details = ext["sglext"]["spec_tokens_details"]
    assert set(details) == {
        "spec_accept_rate",
        "spec_accept_length",
        "spec_cap_length",
        "spec_block_accept_length",
        "spec_num_correct_drafts",
        "spec_num_proposed_drafts",
        "spec_verify_ct",
        "spec_correct_drafts_histogram",
        "spec_cap_lens_histogram",
    }
    assert usage["choices"] == []
    final = usage["usage"]
    # SGLang counts the EOS token but sends no chunk for a step that added only it.
    gap = final["completion_tokens"] - counts[-1]
    assert gap == 0 or (gap == 1 and finish["choices"][0]["finish_reason"] == "stop")
    assert final["total_tokens"] == final["prompt_tokens"] + final["completion_tokens"]
    assert final["reasoning_tokens"] == 0
    assert details["spec_accept_length"] == pytest.approx(
        final["completion_tokens"] / details["spec_verify_ct"]
    )
    assert sum(details["spec_correct_drafts_histogram"]) == details["spec_verify_ct"]
    assert details["spec_num_proposed_drafts"] == 3 * details["spec_verify_ct"]
    assert {c["id"] for c in chunks} == {role["id"]}


def test_chat_stream_without_options_has_no_usage_or_sglext(eagle: SimProc) -> None:
    events = stream(
        eagle, "/v1/chat/completions", chat_body("Explain recursion.", max_tokens=30, stream=True)
    )
    chunks = [e.json for e in events[:-1]]
    assert events[-1].data == "[DONE]"
    assert all("usage" not in c and "sglext" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    non_stream = post_json(
        eagle, "/v1/chat/completions", chat_body("Explain recursion.", max_tokens=30)
    )
    assert text == non_stream["choices"][0]["message"]["content"]


def test_baseline_chunks_carry_one_token_and_no_sglext(base: SimProc) -> None:
    body = chat_body(
        "Write unit tests for the cache.",
        max_tokens=60,
        stream=True,
        ignore_eos=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True},
        return_spec_tokens_details=True,
    )
    chunks = [e.json for e in stream(base, "/v1/chat/completions", body)[:-1]]
    assert all("sglext" not in c for c in chunks)
    counts = [c["usage"]["completion_tokens"] for c in chunks if c["choices"] and "usage" in c]
    steps = [b - a for a, b in zip([0, *counts], counts, strict=False)]
    assert counts[-1] == 60
    assert sum(1 for s in steps if s == 1) >= 0.8 * len(steps)


def test_finish_reason_stop_vs_length(base: SimProc) -> None:
    short = post_json(base, "/v1/chat/completions", chat_body("Implement quicksort.", max_tokens=5))
    assert (
        short["choices"][0]["finish_reason"] == "length"
        and short["usage"]["completion_tokens"] == 5
    )
    free = post_json(base, "/v1/chat/completions", chat_body("Implement quicksort."))
    assert (
        free["choices"][0]["finish_reason"] == "stop"
        and free["choices"][0]["matched_stop"] == 128009
    )
    assert free["usage"]["completion_tokens"] > 5


# ----------------------------------------------------------------------------- completions
def test_completions_stream_sequence(eagle: SimProc) -> None:
    body = {
        "model": "m",
        "prompt": "def fib(n):",
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
        "return_spec_tokens_details": True,
    }
    events = stream(eagle, "/v1/completions", body)
    assert events[-1].data == "[DONE]"
    *content, ext, usage = [e.json for e in events[:-1]]
    assert all(c["object"] == "text_completion" and c["usage"] is None for c in content)
    assert [c["choices"][0]["finish_reason"] for c in content][-1] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in content[:-1])
    assert ext["choices"] == [] and "spec_tokens_details" in ext["sglext"]
    assert (
        usage["choices"] == [] and usage["usage"]["completion_tokens"] == 16
    )  # default max_tokens


def test_completions_continuous_usage(base: SimProc) -> None:
    body = {
        "model": "m",
        "prompt": "hello",
        "max_tokens": 20,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"continuous_usage_stats": True},
    }
    chunks = [e.json for e in stream(base, "/v1/completions", body)[:-1]]
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert counts[-1] == 20 and counts == sorted(counts)


# ----------------------------------------------------------------------------- native
def test_generate_stream_is_cumulative(eagle: SimProc) -> None:
    body = {
        "text": "def fib(n):",
        "sampling_params": {"ignore_eos": True, "temperature": 0},
        "stream": True,
    }
    events = stream(eagle, "/generate", body)
    assert events[-1].data == "[DONE]"
    chunks = [e.json for e in events[:-1]]
    for prev, cur in itertools.pairwise(chunks):
        assert cur["text"].startswith(prev["text"])
        assert cur["output_ids"][: len(prev["output_ids"])] == prev["output_ids"]
        assert cur["meta_info"]["completion_tokens"] > prev["meta_info"]["completion_tokens"]
    last = chunks[-1]["meta_info"]
    assert (
        last["completion_tokens"] == 128 == len(chunks[-1]["output_ids"])
    )  # default max_new_tokens
    assert last["finish_reason"] == {"type": "length", "length": 128}
    assert last["e2e_latency"] > 0 and last["cached_tokens"] == 0
    assert last["spec_verify_ct"] > 0
    assert last["spec_accept_length"] == pytest.approx(128 / last["spec_verify_ct"])
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    assert "e2e_latency" not in chunks[0]["meta_info"]


def test_generate_non_stream_stop(base: SimProc) -> None:
    out = post_json(
        base,
        "/generate",
        {"text": "Implement a trie.", "sampling_params": {"max_new_tokens": 4000}},
    )
    meta = out["meta_info"]
    assert meta["finish_reason"] == {"type": "stop", "matched": 128009}
    assert len(out["output_ids"]) == meta["completion_tokens"]
    assert "spec_verify_ct" not in meta


def test_non_stream_sglext_only_when_requested(eagle: SimProc) -> None:
    plain = post_json(eagle, "/v1/chat/completions", chat_body("Fix it.", max_tokens=20))
    assert "sglext" not in plain and plain["usage"]["completion_tokens"] <= 20
    rich = post_json(
        eagle,
        "/v1/chat/completions",
        chat_body("Fix it.", max_tokens=20, return_spec_tokens_details=True),
    )
    assert rich["sglext"]["spec_tokens_details"]["spec_verify_ct"] >= 1
    assert "spec_verify_ct" not in rich["usage"]


# ----------------------------------------------------------------------------- semantics
def test_outputs_identical_across_modes(base: SimProc, eagle: SimProc) -> None:
    for i in range(6):
        body = chat_body(f"Task {i}: implement a parser.", max_tokens=400)
        a, b = (
            post_json(base, "/v1/chat/completions", body),
            post_json(eagle, "/v1/chat/completions", body),
        )
        assert a["usage"] == b["usage"]
        assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
        assert a["choices"][0]["finish_reason"] == b["choices"][0]["finish_reason"]


def run_concurrent(sim: SimProc, bodies: list[dict[str, Any]]) -> list[list[Event]]:
    async def go() -> list[list[Event]]:
        async with aiohttp.ClientSession() as session:
            results = await asyncio.gather(
                *(sse(session, sim.url + "/v1/chat/completions", b) for b in bodies)
            )
        return [events for _, events in results]

    return asyncio.run(go())


def test_ground_truth_and_counters_agree_with_clients(eagle: SimProc) -> None:
    before = eagle.get("/metrics")[1]
    t0 = time.monotonic()
    bodies = [
        chat_body(
            f"Write unit tests for module {i}.",
            max_tokens=150,
            stream=True,
            stream_options={"include_usage": True, "continuous_usage_stats": True},
            return_spec_tokens_details=True,
        )
        for i in range(8)
    ]
    results = run_concurrent(eagle, bodies)
    t1 = time.monotonic()
    after = eagle.get("/metrics")[1]
    finals = [[e.json for e in ev[:-1]] for ev in results]
    tokens = sum(c[-1]["usage"]["completion_tokens"] for c in finals)
    verify = sum(c[-2]["sglext"]["spec_tokens_details"]["spec_verify_ct"] for c in finals)
    gt = eagle.get_json(f"/sim/ground_truth?start={t0}&end={t1}")
    assert gt["output_tokens"] == tokens
    assert gt["finished_requests"] == 8
    assert gt["finished_verify_ct"] == verify
    assert gt["accept_length"] == pytest.approx(tokens / verify)
    assert 0 < gt["running_reqs_mean"] <= 8
    d_gen = metric_sum(after, "sglang:generation_tokens_total") - metric_sum(
        before, "sglang:generation_tokens_total"
    )
    d_ver = metric_sum(after, "sglang:spec_verify_calls_total") - metric_sum(
        before, "sglang:spec_verify_calls_total"
    )
    assert (d_gen, d_ver) == (tokens, verify)
    assert (
        metric_sum(after, "sglang:num_requests_total")
        - metric_sum(before, "sglang:num_requests_total")
        == 8
    )


def test_mean_running_requests_from_ground_truth_and_metrics(base: SimProc) -> None:
    # 10000 tokens at ~4.3 ms per step / time scale 20 keep 6 requests running for ~2 s, well
    # past the 0.4 s measured from 0.2 s on even when a loaded machine makes the scrapes slow.
    bodies = [
        chat_body(f"Long job {i}", max_tokens=10000, ignore_eos=True, stream=True)
        for i in range(6)
    ]

    async def go() -> tuple[dict[str, Any], str, str]:
        async with aiohttp.ClientSession() as session:

            async def get(path: str) -> str:
                async with session.get(base.url + path) as resp:
                    return await resp.text()

            tasks = [
                asyncio.create_task(sse(session, base.url + "/v1/chat/completions", b))
                for b in bodies
            ]
            await asyncio.sleep(0.2)
            t0 = time.monotonic()
            m0 = await get("/metrics")
            await asyncio.sleep(0.4)
            m1 = await get("/metrics")
            t1 = time.monotonic()
            gt = json.loads(await get(f"/sim/ground_truth?start={t0}&end={t1}"))
            await asyncio.gather(*tasks)
        return gt, m0, m1

    gt, m0, m1 = asyncio.run(go())
    # Wall time between two forwards (streaming, scrapes) counts as idle in the ground truth;
    # at 20x that is 15-20 % of the window on this 2-core machine, idle or not (4.78-5.08 seen,
    # where 5.1 once held), and more beside a busy core. The model-time integral below has no
    # such gaps and is the exact check; this one says the window's mean is of running requests.
    assert 4.2 <= gt["running_reqs_mean"] <= 6.0 + 1e-9
    area = metric_sum(m1, "sglang:sim_running_reqs_seconds_total") - metric_sum(
        m0, "sglang:sim_running_reqs_seconds_total"
    )
    model = metric_sum(m1, "sglang:sim_model_seconds_total") - metric_sum(
        m0, "sglang:sim_model_seconds_total"
    )
    assert area / model == pytest.approx(6, abs=0.6)
    # 6 running requests decode at ~6 tokens per ~4.3 ms of model time.
    assert 900 < gt["output_tok_s_model"] < 1700


def test_flush_cache_resets_spec_stats_only_when_idle(eagle: SimProc) -> None:
    post_json(eagle, "/v1/chat/completions", chat_body("warm", max_tokens=30))
    assert "avg_spec_accept_length" in eagle.get_json("/server_info")["internal_states"][0]
    status, text = eagle.post("/flush_cache", {})
    assert status == 200 and text.startswith("Cache flushed.")
    assert "avg_spec_accept_length" not in eagle.get_json("/server_info")["internal_states"][0]
    assert eagle.get("/flush_cache")[0] == 200

    async def busy() -> int:
        async with aiohttp.ClientSession() as session:
            task = asyncio.create_task(
                sse(
                    session,
                    eagle.url + "/v1/chat/completions",
                    chat_body("long", max_tokens=3000, ignore_eos=True, stream=True),
                )
            )
            await asyncio.sleep(0.2)
            async with session.post(eagle.url + "/flush_cache") as resp:
                status = resp.status
            await task
            return status

    assert asyncio.run(busy()) == 400
    assert eagle.get("/flush_cache")[0] == 200
    before = metric_sum(eagle.get("/metrics")[1], "sglang:spec_verify_calls_total")
    assert before > 0, "flush does not reset the Prometheus counters"


def test_decode_log_line_every_40_steps(base: SimProc) -> None:
    post_json(base, "/v1/chat/completions", chat_body("log me", max_tokens=200, ignore_eos=True))
    lines = [line for line in base.log.splitlines() if "Decode batch" in line]
    assert lines
    assert re.search(
        r"Decode batch, #running-req: \d+, #token: \d+, token usage: [\d.]+, cuda graph: True, "
        r"gen throughput \(token/s\): [\d.]+, #queue-req: \d+",
        lines[-1],
    )
    assert "The server is fired up and ready to roll!" in base.log


def test_client_disconnect_frees_the_slot(base: SimProc) -> None:
    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            body = chat_body("forever", max_tokens=100000, ignore_eos=True, stream=True)
            async with session.post(base.url + "/v1/chat/completions", json=body) as resp:
                n = 0
                async for _ in resp.content:
                    n += 1
                    if n > 20:
                        break
            # Leaving the block closes the connection mid-stream.

    asyncio.run(go())
    deadline = time.monotonic() + 5
    while metric_sum(base.get("/metrics")[1], "sglang:num_running_reqs") != 0:
        assert time.monotonic() < deadline, "the abandoned request is still running"
        time.sleep(0.05)
    assert "Traceback" not in base.log


def test_a_queued_request_whose_client_left_is_aborted_within_sglangs_poll(start_sim) -> None:  # type: ignore[no-untyped-def]
    """SGLang checks a waiting request's client every 4 s and aborts it when gone; a request
    left in the queue must not hold the server until its turn comes."""
    from specbench.sim.streaming import DISCONNECT_POLL_S

    scale = 8.0
    sim: SimProc = start_sim("--sim-time-scale", str(scale), "--max-running-requests", "1",
                             "--enable-metrics", "--skip-server-warmup")

    def queued() -> float:
        return metric_sum(sim.get("/metrics")[1], "sglang:num_queue_reqs")

    async def go() -> float:
        async with aiohttp.ClientSession() as session:
            long = chat_body("hold the slot", max_tokens=100000, ignore_eos=True, stream=True)
            async with session.post(sim.url + "/v1/chat/completions", json=long) as holder:
                await holder.content.readline()  # the only slot is taken
                waiter = chat_body("wait", max_tokens=10, stream=True)
                # The headers come at once (as SGLang's StreamingResponse sends them).
                response = await session.post(sim.url + "/v1/chat/completions", json=waiter)
                while queued() < 1:
                    await asyncio.sleep(0.02)
                response.close()  # the client leaves while its request is queued
                left = time.monotonic()
                while queued() > 0:
                    assert time.monotonic() - left < 3 * DISCONNECT_POLL_S / scale + 1.0
                    await asyncio.sleep(0.02)
                return time.monotonic() - left

    assert asyncio.run(go()) < 3 * DISCONNECT_POLL_S / scale + 1.0
    assert "Traceback" not in sim.log


# 4x and 8x: at 16x a decode step is 0.3 ms of wall time, near the simulator's own cost per
# forward, and CI's loaded machine stretched the run by 14 % (a lag, not a wrong clock).
@pytest.mark.parametrize("scale", ["4", "8"])
def test_wall_time_times_scale_is_model_time(start_sim, scale: str) -> None:  # type: ignore[no-untyped-def]
    from specbench.sim.costmodel import decode_step, load_profile, prefill_step
    from specbench.sim.workload import count_tokens, render_chat

    sim: SimProc = start_sim(
        "--sim-time-scale", scale, "--max-running-requests", "64", "--skip-server-warmup"
    )
    n, tokens = 8, 800
    messages = [[{"role": "user", "content": f"Job {i}"}] for i in range(n)]
    bodies = [
        {"model": "m", "messages": m, "max_tokens": tokens, "ignore_eos": True} for m in messages
    ]

    async def go() -> float:
        async with aiohttp.ClientSession() as session:

            async def one(body: dict[str, Any]) -> None:
                async with session.post(sim.url + "/v1/chat/completions", json=body) as resp:
                    assert resp.status == 200
                    await resp.read()

            t0 = time.monotonic()
            await asyncio.gather(*(one(b) for b in bodies))
            return time.monotonic() - t0

    wall_s = asyncio.run(go())
    # Predicted model time: one prefill of all prompts, then the 8 decode in lock step.
    profile = load_profile()
    prompts = [count_tokens(render_chat(m, None)) for m in messages]
    model_s = prefill_step(profile, [(p, 0) for p in prompts], speculative=False).total_ms / 1e3
    for step in range(1, tokens):
        model_s += (
            decode_step(profile, n, sum(prompts) + n * step, speculative=False).total_ms / 1e3
        )
    assert wall_s * float(scale) == pytest.approx(model_s, rel=0.12)


def test_non_stream_client_timeout_frees_the_slot(base: SimProc) -> None:
    async def go() -> None:
        timeout = aiohttp.ClientTimeout(total=0.3)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            body = chat_body("forever", max_tokens=100000, ignore_eos=True)
            with pytest.raises(asyncio.TimeoutError):
                async with session.post(base.url + "/v1/chat/completions", json=body) as resp:
                    await resp.read()

    asyncio.run(go())
    deadline = time.monotonic() + 5
    while metric_sum(base.get("/metrics")[1], "sglang:num_running_reqs") != 0:
        assert time.monotonic() < deadline, "the abandoned request is still running"
        time.sleep(0.05)
    assert "Traceback" not in base.log


def test_a_profile_that_renders_message_text_counts_no_tool_call_json(start_sim) -> None:  # type: ignore[no-untyped-def]
    # The Triton profile's server (a plain template) counted each message's text only: the
    # usage the simulator reports for a chat request with a tool call follows that text.
    from specbench.sim.costmodel import load_profile
    from specbench.sim.workload import count_pieces, render_chat, render_message_text

    name = "llama-3.1-8b-1xh200-triton"
    per_piece = load_profile(name).workload.prompt_tokens_per_piece
    sim: SimProc = start_sim("--sim-profile", name, "--skip-server-warmup")
    call = {"id": "c1", "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "src/app/main.py"}' * 20}}
    messages = [
        {"role": "user", "content": "Fix the failing test in tests/test_main.py."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "def main():\n    return 1\n"},
    ]
    body = {"model": "m", "messages": messages, "max_tokens": 1}

    async def go() -> dict[str, Any]:
        async with (aiohttp.ClientSession() as session,
                    session.post(sim.url + "/v1/chat/completions", json=body) as resp):
            assert resp.status == 200
            return dict(await resp.json())

    usage = asyncio.run(go())["usage"]
    assert usage["prompt_tokens"] == count_pieces(render_message_text(messages), per_piece)
    assert usage["prompt_tokens"] < count_pieces(render_chat(messages, None), per_piece) - 100
