"""A KV pool too small for the load: SGLang's queueing and retraction, and its load gauges.

`--max-total-tokens N` (SGLang's own flag) caps the simulated pool. Then requests wait in
the queue for KV (admission reserves room for their output, kvpool.py), running requests are
retracted when a decode step does not fit, and `/metrics` shows it the way SGLang does:
`sglang:num_running_reqs`, `sglang:num_queue_reqs` and `sglang:token_usage` as last
reported (at a prefill, every --decode-log-interval decode steps, on falling idle),
`sglang:num_retracted_requests_total` from the first retraction on.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import aiohttp
import pytest

from specbench.sim import kvpool
from specbench.sim.request import SimRequest
from specbench.sim.workload import RequestTraits
from tests.sim.conftest import SimProc, sse

FAST = ("--sim-time-scale", "20", "--enable-metrics")


def metric(text: str, name: str) -> float | None:
    found = re.search(rf"^{re.escape(name)}{{[^}}]*}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def request(prompt: int, out: int, max_new: int, ignore_eos: bool = False) -> SimRequest:
    traits = RequestTraits(prompt, 10_000, 0.5, "default", seed=1)
    req = SimRequest("r", traits, max_new_tokens=max_new, ignore_eos=ignore_eos)
    req.completion_tokens = out
    return req


# ----------------------------------------------------------------------------- policy
def test_retraction_takes_the_fewest_outputs_then_the_longest_prompt() -> None:
    a, b, c, d = request(10, 50, 100), request(10, 5, 100), request(90, 5, 100), request(5, 70, 100)
    assert kvpool.keep_order([a, b, c, d]) == [d, a, b, c]


def test_new_token_ratio_decays_resets_and_is_re_estimated() -> None:
    ratio = kvpool.NewTokenRatio()
    assert ratio.current == 0.7
    for _ in range(kvpool.DECAY_STEPS + 50):
        ratio.decay_step()
    assert ratio.current == pytest.approx(0.7 * 0.14)
    ratio.reset()
    assert ratio.current == 0.7
    ratio.after_retraction([request(10, 100, 400), request(10, 60, 400)])
    assert ratio.current == pytest.approx((160 + 2 * 20) / 801)


def test_reservation_and_step_tokens() -> None:
    running = [request(10, 100, 400), request(10, 0, 10_000), request(10, 0, 50, ignore_eos=True)]
    # (400 - 100) x 0.5 + 4096 (clipped) x 0.5 + 50 x 1.0 (ignore_eos runs to its cap)
    assert kvpool.running_reservation(running, 0.5) == pytest.approx(150 + 2048 + 50)
    assert kvpool.step_tokens(running, 3, speculative=True) == 4 + 4 + 4
    assert kvpool.step_tokens(running, 0, speculative=False) == 3


# ----------------------------------------------------------------------------- server
async def _load(sim: SimProc, bodies: list[dict[str, Any]]) -> tuple[list[Any], list[str]]:
    """Stream every body at once from /generate while scraping /metrics; the final
    meta_info of each, and the scrapes."""
    scrapes: list[str] = []
    async with aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(sse(session, sim.url + "/generate", b)) for b in bodies]
        while not all(t.done() for t in tasks):
            async with session.get(sim.url + "/metrics") as resp:
                scrapes.append(await resp.text())
            await asyncio.sleep(0.01)
        finals = [events[-2].json["meta_info"] for _, events in [t.result() for t in tasks]]
    return finals, scrapes


def test_a_small_pool_queues_and_retracts(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*FAST, "--max-total-tokens", "4000")
    info = sim.get_json("/server_info")
    assert info["max_total_num_tokens"] == 4000 and info["max_total_tokens"] == 4000
    assert info["max_req_input_len"] == 3999 - 5
    assert "KV pool holds 4000 tokens, fewer than --context-length 131072" in sim.log
    assert metric(sim.get("/metrics")[1], "sglang:num_retracted_requests_total") is None
    # ~100-token prompts, 380-400 output tokens each: 16 of them need ~8000 tokens of KV.
    bodies = [
        {"text": f"job {i} " + "x" * 400, "stream": True,
         "sampling_params": {"max_new_tokens": 400, "min_new_tokens": 380}}
        for i in range(16)
    ]  # fmt: skip
    finals, scrapes = asyncio.run(_load(sim, bodies))
    assert all(m["completion_tokens"] >= 380 for m in finals)
    running = [metric(s, "sglang:num_running_reqs") or 0 for s in scrapes]
    queued = [metric(s, "sglang:num_queue_reqs") or 0 for s in scrapes]
    usage = [metric(s, "sglang:token_usage") or 0 for s in scrapes]
    assert max(queued) > 0 and 0 < max(running) < 16
    assert max(usage) <= 1.0
    after = sim.get("/metrics")[1]
    retracted = metric(after, "sglang:num_retracted_requests_total")
    assert retracted is not None and retracted > 0
    assert retracted == sum(m["num_retractions"] for m in finals)
    assert metric(after, "sglang:num_retracted_output_tokens_total") > 0  # type: ignore[operator]
    assert "KV cache pool is full. Retract requests. #retracted_reqs:" in sim.log
    # Once idle, SGLang republishes the gauges that still showed load.
    assert metric(after, "sglang:num_running_reqs") == 0
    assert metric(after, "sglang:num_queue_reqs") == 0


def test_gauges_are_refreshed_at_prefill_and_on_decode_log_lines(start_sim) -> None:  # type: ignore[no-untyped-def]
    body = {"text": "long", "stream": True,
            "sampling_params": {"max_new_tokens": 3000, "ignore_eos": True}}  # fmt: skip

    async def running_while_one_decodes(sim: SimProc) -> float | None:
        async with aiohttp.ClientSession() as session:
            task = asyncio.create_task(sse(session, sim.url + "/generate", body))
            await asyncio.sleep(0.3)
            async with session.get(sim.url + "/metrics") as resp:
                value = metric(await resp.text(), "sglang:num_running_reqs")
            await task
        return value

    # Its own prefill reports the batch it joins (empty), and no decode line comes for a while.
    rare = start_sim(*FAST, "--decode-log-interval", "100000")
    assert asyncio.run(running_while_one_decodes(rare)) == 0
    often = start_sim(*FAST, "--decode-log-interval", "10")
    assert asyncio.run(running_while_one_decodes(often)) == 1


def test_max_total_tokens_above_the_profiled_pool_is_ignored(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*FAST, "--max-total-tokens", "10M")
    info = json.loads(sim.get("/server_info")[1])
    assert info["max_total_num_tokens"] < 10_000_000
    assert "max_total_tokens=10000000 is larger than the profiled value" in sim.log
