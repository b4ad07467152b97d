"""Planted faults are flagged: a slow client is client_bound, a server that runs fewer requests
than c (silently capped, or out of KV cache) ran_below_c, a level above the declared cap
capped_by_server.

Both run the real runner and the real metrics against the simulated server; nothing is mocked.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from specbench import metrics
from specbench.load.runner import PointSpec, run_point
from specbench.prompts import PromptRequest
from tests.harness import sim_server

pytestmark = pytest.mark.slow

TIME_SCALE = 4.0
REQUESTS = [
    PromptRequest(
        id=f"p{i}",
        prompt_set="coding",
        category="codegen",
        messages=({"role": "user", "content": f"Implement helper {i}. " + "x " * (i % 50)},),
        max_tokens=128 + (i * 53) % 256,
    )
    for i in range(300)
]


def _measure(url: str, concurrency: int, delay_us: float = 0.0) -> dict[str, object]:
    spec = PointSpec(
        base_url=url,
        protocol="openai-chat",
        model="m",
        concurrency=concurrency,
        requests=REQUESTS,
        warmup_s=0.5 / TIME_SCALE * 4,
        window_s=3.0,
        planted_read_delay_us=delay_us,
    )
    result = asyncio.run(run_point(spec))
    return metrics.summarize_point(result, TIME_SCALE, max_running_requests=256, error_budget=0.01)


def test_a_planted_slow_client_is_flagged_client_bound(tmp_path: Path) -> None:
    with sim_server("baseline", tmp_path, max_running_requests=256, time_scale=TIME_SCALE) as sim:
        clean = _measure(sim.base_url, 128)
        # 2 ms of CPU per read cost only 19-26% of the throughput, and 5 ms 14-20% on two
        # fresh-clone CIs of a busy 2-core machine: too close to the 20% this test asks for.
        slow = _measure(sim.base_url, 128, delay_us=10000.0)
    assert "client_bound" not in str(clean["flags"]).split(";")
    assert "client_bound" in str(slow["flags"]).split(";")
    # The planted slowdown really cost throughput: the flag is not a false alarm.
    assert float(slow["output_tok_s"]) < 0.8 * float(clean["output_tok_s"])  # type: ignore[arg-type]


def test_a_server_capped_below_the_concurrency_is_flagged(tmp_path: Path) -> None:
    # /server_info says 256, but the server silently runs at most 16 requests at a time.
    with sim_server("baseline", tmp_path, max_running_requests=256, time_scale=TIME_SCALE,
                    sim_args=["--sim-cap-running", "16"]) as sim:
        capped = _measure(sim.base_url, 64)
    assert str(capped["flags"]).split(";") == ["ran_below_c"]
    assert float(capped["server_running_reqs_mean"]) <= 16.5  # type: ignore[arg-type]


def test_a_server_out_of_kv_cache_is_flagged_from_its_gauges(tmp_path: Path) -> None:
    # A 6000-token KV pool holds about ten of these requests: the rest wait in the queue (or
    # are retracted), which only SGLang's own gauges show (no simulator-only metric is read).
    with sim_server("baseline", tmp_path, max_running_requests=256, time_scale=TIME_SCALE,
                    sim_args=["--max-total-tokens", "6000"]) as sim:
        limited = _measure(sim.base_url, 64)
    with sim_server("baseline", tmp_path, max_running_requests=256,
                    time_scale=TIME_SCALE) as roomy:
        full = _measure(roomy.base_url, 64)
    assert "ran_below_c" in str(limited["flags"]).split(";")
    assert "ran_below_c" not in str(full["flags"]).split(";")
    limited_running = float(limited["server_running_reqs_mean"])  # type: ignore[arg-type]
    full_running = float(full["server_running_reqs_mean"])  # type: ignore[arg-type]
    assert full_running > 0.8 * 64 and limited_running < 0.7 * full_running


def test_concurrency_above_the_declared_limit_is_flagged(tmp_path: Path) -> None:
    with sim_server("baseline", tmp_path, max_running_requests=32, time_scale=TIME_SCALE) as sim:
        spec = PointSpec(
            base_url=sim.base_url,
            protocol="openai-chat",
            model="m",
            concurrency=48,
            requests=REQUESTS,
            warmup_s=0.5,
            window_s=2.0,
        )
        result = asyncio.run(run_point(spec))
        summary = metrics.summarize_point(
            result, TIME_SCALE, max_running_requests=32, error_budget=0.01
        )
    assert "capped_by_server" in str(summary["flags"]).split(";")
