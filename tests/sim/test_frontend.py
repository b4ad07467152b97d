"""The frontend stage (SGLang's tokenizer manager, one process) in the simulated server.

A profile's ``[frontend]`` table gives each generation request a serial service time before the
scheduler sees it. Checked over real HTTP against a simulator whose profile makes that service
large (hundreds of ms of model time per request) so that the stage, not the GPU model, sets the
rate: a closed loop of users then completes about one request per service time, each waits for
the others' service before its first token, and SGLang's queue gauge does not count them. The
tolerances are wide because the machine running the tests may be loaded.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from specbench.sim.costmodel import (
    Frontend,
    ProfileError,
    bundled_profiles,
    load_profile,
    resolve_profile_path,
)
from tests.sim.conftest import SimProc, sse

TIME_SCALE = 10.0  # real time = model time / 10
REQUEST_MS = 100.0  # model ms per request
PROMPT_TOKEN_US = 400.0  # model us per prompt token
PROMPT = "word " * 800  # ~1,000 prompt tokens at the default 4 characters per token
USERS = 6
RUN_S = 3.0


def _profile_with(tmp_path: Path, table: str) -> str:
    """The default profile with `table` appended, as a TOML file for --sim-profile."""
    text = resolve_profile_path("llama-3.1-8b-1xh200").read_text()
    path = tmp_path / "frontend.toml"
    path.write_text(text + "\n" + table)
    return str(path)


def _flags(profile: str) -> tuple[str, ...]:
    return (
        "--sim-profile",
        profile,
        "--sim-time-scale",
        str(TIME_SCALE),
        "--enable-metrics",
        "--skip-server-warmup",
    )


def _body() -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@dataclass
class Loop:
    done: int  # requests finished inside the run
    run_s: float
    ttft_s: list[float]
    prompt_tokens: int


def closed_loop(sim: SimProc, users: int = USERS, run_s: float = RUN_S) -> Loop:
    """`users` clients, each sending its next request when the last one ends."""

    async def user(session: aiohttp.ClientSession, stop_at: float, out: Loop) -> None:
        while time.monotonic() < stop_at:
            sent = time.monotonic()
            status, events = await sse(session, sim.url + "/v1/chat/completions", _body())
            assert status == 200
            if events[-1].t <= stop_at:
                out.done += 1
                out.ttft_s.append(events[0].t - sent)
            usage = [e.json["usage"] for e in events[:-1] if e.json.get("usage")]
            out.prompt_tokens = usage[-1]["prompt_tokens"]

    async def go() -> Loop:
        out = Loop(0, run_s, [], 0)
        async with aiohttp.ClientSession() as session:
            stop_at = time.monotonic() + run_s
            await asyncio.gather(*(user(session, stop_at, out) for _ in range(users)))
        return out

    return asyncio.run(go())


def _service_real_s(prompt_tokens: int) -> float:
    return (REQUEST_MS + PROMPT_TOKEN_US * prompt_tokens / 1e3) / 1e3 / TIME_SCALE


def test_the_stage_caps_requests_per_second_at_its_service_time(start_sim, tmp_path) -> None:
    table = f"[frontend]\nrequest_ms = {REQUEST_MS}\nprompt_token_us = {PROMPT_TOKEN_US}\n"
    sim = start_sim(*_flags(_profile_with(tmp_path, table)))
    loop = closed_loop(sim)
    service_s = _service_real_s(loop.prompt_tokens)
    assert 0.04 < service_s < 0.06  # ~1,000 tokens: 0.5 s of model time, 50 ms real
    # One worker: about one request per service time, whatever the number of users.
    rate = loop.done / loop.run_s
    assert rate == pytest.approx(1.0 / service_s, rel=0.25)
    # First come, first served: a request waits for the others' service before its own, so
    # its first token comes about `users` service times after it was sent.
    assert statistics.median(loop.ttft_s) == pytest.approx(USERS * service_s, rel=0.4)
    info = sim.get_json("/server_info")["sim_frontend"]
    assert info["request_ms"] == REQUEST_MS and info["prompt_token_us"] == PROMPT_TOKEN_US
    assert info["served"] >= loop.done
    # The server's own TTFT starts at arrival, so it includes the wait too (model seconds).
    metrics = sim.get("/metrics")[1]
    ttft_sum = _metric(metrics, "sglang:time_to_first_token_seconds_sum")
    ttft_count = _metric(metrics, "sglang:time_to_first_token_seconds_count")
    assert ttft_sum / ttft_count > 0.5 * USERS * service_s * TIME_SCALE


def test_requests_waiting_in_the_stage_are_not_in_the_scheduler_queue(
    start_sim, tmp_path
) -> None:
    table = f"[frontend]\nrequest_ms = {REQUEST_MS}\nprompt_token_us = {PROMPT_TOKEN_US}\n"
    sim = start_sim(*_flags(_profile_with(tmp_path, table)))
    seen: list[tuple[int, float]] = []

    async def watch(stop_at: float) -> None:
        while time.monotonic() < stop_at:
            info = await asyncio.to_thread(sim.get_json, "/server_info")
            metrics = (await asyncio.to_thread(sim.get, "/metrics"))[1]
            waiting = info["sim_frontend"]["waiting"]
            seen.append((waiting, _metric(metrics, "sglang:num_queue_reqs")))
            await asyncio.sleep(0.1)

    async def go() -> None:
        async with aiohttp.ClientSession() as session:
            stop_at = time.monotonic() + 1.5
            users = [sse(session, sim.url + "/v1/chat/completions", _body()) for _ in range(8)]
            await asyncio.gather(watch(stop_at), *users)

    asyncio.run(go())
    assert max(w for w, _ in seen) >= 3  # a backlog built up in the stage...
    assert max(q for _, q in seen) == 0  # ...and SGLang's queue gauge never saw it


def _burst_beside_a_long_stream(
    start_sim, tmp_path, burst: int, extra: str = ""
) -> tuple[list[float], list[float]]:
    """A holding frontend: a long stream runs, then `burst` requests arrive at once. The long
    stream's gaps after the burst was sent, and each burst request's first token after it."""
    table = (
        f"[frontend]\nrequest_ms = {REQUEST_MS}\nprompt_token_us = {PROMPT_TOKEN_US}\n"
        f"holds_output = true\n{extra}"
    )
    sim = start_sim(*_flags(_profile_with(tmp_path, table)))

    async def go() -> tuple[list[float], list[float]]:
        async with aiohttp.ClientSession() as session:
            long = {**_body(), "max_tokens": 3000, "ignore_eos": True}
            long["messages"] = [{"role": "user", "content": "x"}]
            running = asyncio.create_task(sse(session, sim.url + "/v1/chat/completions", long))
            await asyncio.sleep(0.2)  # the long stream is under way
            sent = time.monotonic()
            users = [sse(session, sim.url + "/v1/chat/completions", _body()) for _ in range(burst)]
            results = await asyncio.gather(*users)
            _, events = await running
            gaps = [b.t - a.t for a, b in itertools.pairwise(events) if a.t > sent]
            return gaps, [ev[0].t - sent for _, ev in results]

    return asyncio.run(go())


def test_a_held_stream_writes_nothing_while_a_burst_is_tokenized(start_sim, tmp_path) -> None:
    burst = 8
    gaps, first_tokens = _burst_beside_a_long_stream(start_sim, tmp_path, burst)
    service_s = _service_real_s(1000)
    # The worker serves in rounds: the requests waiting when a round starts. The burst makes
    # at most two (a first arrival may start one alone), the larger of >= burst/2 requests.
    # The running stream writes nothing for that whole round...
    assert max(gaps) > 0.6 * (burst / 2) * service_s
    # ...and a round's first tokens come out together at its end: at most one step between
    # them as long as a service, where first come first served without the hold spaces all
    # of them one service apart.
    ordered = sorted(first_tokens)
    steps = [b - a for a, b in itertools.pairwise(ordered)]
    assert sum(step > 0.5 * service_s for step in steps) <= 1
    assert ordered[0] > 0.6 * service_s


def test_a_round_lets_the_output_through_after_its_request_limit(start_sim, tmp_path) -> None:
    cap, burst = 3, 12
    gaps, first_tokens = _burst_beside_a_long_stream(
        start_sim, tmp_path, burst, f"round_max_requests = {cap}\n")
    service_s = _service_real_s(1000)
    # The running stream waits for at most one round of `cap` requests (a whole burst
    # without the limit, as above)...
    assert max(gaps) < (cap + 1.5) * service_s
    # ...and the burst's first tokens come out in rounds: at least burst / cap groups a
    # service or more apart.
    ordered = sorted(first_tokens)
    steps = [b - a for a, b in itertools.pairwise(ordered)]
    assert sum(step > 0.5 * service_s for step in steps) >= burst // cap - 1


def test_without_a_frontend_table_requests_go_straight_to_the_scheduler(start_sim) -> None:
    sim = start_sim(*_flags("llama-3.1-8b-1xh200"))
    loop = closed_loop(sim, run_s=1.5)
    assert "sim_frontend" not in sim.get_json("/server_info")
    # The same loop is limited by the modelled GPU alone: several times the stage's rate.
    assert loop.done / loop.run_s > 3.0 / _service_real_s(loop.prompt_tokens)
    assert statistics.median(loop.ttft_s) < _service_real_s(loop.prompt_tokens)


def test_only_the_profiles_of_the_real_0517_server_model_the_stage() -> None:
    # Fitted to the real H200 runs of SGLang 0.5.17 (whose tokenizer manager holds the output
    # while it tokenizes); the other profiles (the default models 0.5.23, which tokenizes in a
    # worker thread), the CI reference and the snapshots send requests straight to the scheduler.
    real = {"llama-3.1-8b-1xh200-triton", "llama-3.1-8b-1xh200-flashinfer"}
    for name in bundled_profiles():
        frontend = load_profile(name).frontend
        assert frontend.enabled == (name in real), name
    assert Frontend().service_ms(4000, tokenized=True) == 0.0


def test_service_time_is_fixed_plus_per_prompt_token() -> None:
    frontend = Frontend(request_ms=12.0, prompt_token_us=4.0)
    assert frontend.service_ms(4000, tokenized=True) == pytest.approx(28.0)
    # A prompt sent as token ids is not tokenized: only the fixed part.
    assert frontend.service_ms(4000, tokenized=False) == pytest.approx(12.0)


def test_a_misspelt_frontend_key_is_refused(tmp_path) -> None:
    path = _profile_with(tmp_path, "[frontend]\nrequest_us = 3\n")
    with pytest.raises(ProfileError, match="frontend"):
        load_profile(path)


def _metric(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )
