"""The closed-loop runner against small real aiohttp servers (tests/load/fakeserver.py)."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from typing import Any

import pytest

from specbench import metrics
from specbench.load.protocols import ProtocolError
from specbench.load.runner import (
    FAILURE_BACKOFF_MAX_S,
    LoadError,
    PointResult,
    PointSpec,
    parse_prometheus,
    raise_fd_limit,
    run_point,
    run_point_sync,
)
from specbench.prompts import PromptRequest
from tests.load.fakeserver import BatchFake, FakeOptions, FakeSGLang, fake_in_thread

PROTOCOL_NAMES = ("openai-chat", "openai-completions", "sglang-native")


def prompts(n: int = 10, max_tokens: int = 1000) -> list[PromptRequest]:
    return [PromptRequest(id=f"p{i}", prompt_set="coding", category="edit",
                          messages=({"role": "user", "content": f"task {i}"},),
                          max_tokens=max_tokens) for i in range(n)]


def spec_for(url: str, **kw: Any) -> PointSpec:
    base: dict[str, Any] = dict(base_url=url, protocol="openai-chat", model="m", concurrency=4,
                                requests=prompts(), warmup_s=0.1, window_s=0.8)
    base.update(kw)
    return PointSpec(**base)


def summary(result: PointResult, budget: float = 0.01) -> dict[str, Any]:
    return metrics.summarize_point(result, 1.0, None, budget)


async def measure(opts: FakeOptions, **kw: Any) -> tuple[PointResult, FakeSGLang]:
    async with FakeSGLang(opts) as srv:
        result = await run_point(spec_for(srv.url, **kw))
    return result, srv


def expected_verify_steps(total: int, pattern: tuple[int, ...]) -> int:
    """Replay the fake's cadence: first token alone, then pattern steps until total."""
    n = 1
    for steps, k in enumerate(itertools.cycle(pattern)):
        if n >= total:
            return steps
        n += min(k, total - n)
    raise AssertionError("unreachable")


def test_250_users_are_in_flight_at_once_with_no_connection_pool_cap() -> None:
    # The server answers nobody until 250 requests wait at once; aiohttp's default pool of
    # 100 connections would leave 150 users queued in the client and this would time out.
    opts = FakeOptions(output_tokens=3, hold_until=250, hold_timeout_s=20.0)
    result, srv = asyncio.run(measure(opts, concurrency=250, requests=prompts(300), warmup_s=0.0,
                                      window_s=30.0, window_max_requests=250))
    assert srv.peak_waiting == 250
    s = summary(result)
    assert s["n_errors"] == 0
    assert s["n_requests"] == 250
    assert result.end_reason == "window_max_requests"


@pytest.mark.parametrize("protocol", PROTOCOL_NAMES)
def test_window_throughput_and_acceptance_match_the_servers_ground_truth(protocol: str) -> None:
    pattern = (1, 3, 2, 4)  # speculative cadence: several tokens per chunk
    opts = FakeOptions(output_tokens=40, tokens_per_step=pattern, step_s=0.003, spec=True)
    result, srv = asyncio.run(measure(opts, protocol=protocol, concurrency=16, window_s=1.0,
                                      warmup_s=0.2))
    s = summary(result)
    truth = srv.tokens_between(result.window_start, result.window_end)
    assert truth > 2000
    assert s["output_tok_s"] * s["window_s"] == pytest.approx(truth, rel=0.02)
    expected_accept = 40 / expected_verify_steps(40, pattern)
    assert s["accept_length"] == pytest.approx(expected_accept, rel=1e-9)
    assert s["server_accept_length"] == pytest.approx(expected_accept, rel=1e-9)
    assert s["n_errors"] == 0 and s["n_requests"] >= 16
    # Every user had a request running when the window closed: cancelled, or ended while the
    # last scrape ran (a loaded machine's scrape can outlast a 50 ms request).
    assert sum(r.t_end > result.window_end for r in result.records) == 16
    assert s["tokens_per_chunk"] > 1.5
    # The load gauges were sampled through the window (their mean is checked against the
    # simulator in test_sim_fidelity: this fake steps all users in lockstep).
    assert len(result.gauges) >= 3
    assert 0 < s["server_running_reqs_mean"] <= 16
    assert "server_disagrees" not in s["flags"]
    assert 0.0 < s["client_cpu_frac"] < 1.5
    assert result.loop_lag_ms["p50"] >= 0.0 and math.isfinite(result.loop_lag_ms["p99"])
    assert result.metrics_before is not None and result.metrics_after is not None


def test_failures_are_classified_counted_and_the_point_goes_on() -> None:
    faults = ["http500", "truncate", "malformed", "error_event", "reset", "abort"]

    def fault(i: int) -> str | None:
        return faults[(i // 2) % len(faults)] if i % 2 else None

    opts = FakeOptions(output_tokens=10, step_s=0.002, fault=fault)
    result, _ = asyncio.run(measure(opts, concurrency=6, window_s=1.5, warmup_s=0.1))
    s = summary(result)
    assert not result.server_gone
    assert s["n_requests"] > 20
    assert s["n_errors_http_status"] > 0
    assert s["n_errors_stream_truncated"] > 0  # truncated and reset streams
    assert s["n_errors_malformed_chunk"] > 0
    assert s["n_errors_server_error"] > 0  # error events and finish_reason abort
    assert s["n_errors"] == sum(s[f"n_errors_{c}"] for c in
                                ("connect", "http_status", "timeout", "stream_truncated",
                                 "malformed_chunk", "server_error", "server_gone"))
    assert "error_budget" in s["flags"]
    http = [r for r in result.records if r.error_class == "http_status"]
    assert http[0].http_status == 500 and "HTTP 500" in (http[0].error_detail or "")


def test_a_request_past_its_timeout_is_a_timeout() -> None:
    opts = FakeOptions(output_tokens=10, step_s=0.002,
                       fault=lambda i: "stall" if i == 0 else None)
    result, _ = asyncio.run(measure(opts, concurrency=2, warmup_s=0.0, window_s=1.2,
                                    request_timeout_s=0.4))
    timeouts = [r for r in result.records if r.error_class == "timeout"]
    assert len(timeouts) == 1
    assert timeouts[0].t_end - timeouts[0].t_send == pytest.approx(0.4, abs=0.2)
    assert summary(result)["n_requests"] > 10


def test_requests_running_at_the_window_end_are_cancelled_and_their_tokens_count() -> None:
    async def go() -> tuple[PointResult, FakeSGLang, int]:
        async with FakeSGLang(FakeOptions(output_tokens=2000, step_s=0.002)) as srv:
            result = await run_point(spec_for(srv.url, concurrency=8, window_s=0.5,
                                              warmup_s=0.1))
            await asyncio.sleep(0.3)
            return result, srv, srv.in_flight

    result, srv, left_running = asyncio.run(go())
    assert left_running == 0  # the server saw every cancelled request go away
    assert [r.status for r in result.records] == ["cancelled"] * 8
    s = summary(result)
    assert s["n_cancelled"] == 8 and s["n_requests"] == 0 and s["n_errors"] == 0
    truth = srv.tokens_between(result.window_start, result.window_end)
    assert s["output_tok_s"] * s["window_s"] == pytest.approx(truth, rel=0.03)


def test_window_ends_after_window_max_requests() -> None:
    result, _ = asyncio.run(measure(FakeOptions(output_tokens=5), concurrency=4, window_s=30.0,
                                    window_max_requests=12))
    assert result.end_reason == "window_max_requests"
    assert summary(result)["n_requests"] == 12
    assert result.window_wall_s < 10.0


def test_the_window_opens_after_warmup_with_every_user_in_flight() -> None:
    result, _ = asyncio.run(measure(FakeOptions(output_tokens=6, step_s=0.002), concurrency=5,
                                    warmup_s=0.3, window_s=0.4))
    assert result.warmup_records > 0  # requests that ended during warmup are not measured
    first_send = min(r.t_send for r in result.records)
    assert first_send < result.window_start
    # Every user has a request alive at the moment the window opens.
    alive = {r.user for r in result.records if r.t_send <= result.window_start < r.t_end}
    assert alive == set(range(5))
    assert not result.window_forced_open


def test_a_server_that_dies_mid_point_ends_it_early_with_server_gone() -> None:
    async def go() -> tuple[PointResult, float]:
        async with FakeSGLang(FakeOptions(output_tokens=50, step_s=0.002)) as srv:
            loop = asyncio.get_running_loop()
            loop.call_later(0.6, srv.kill)
            t0 = time.monotonic()
            result = await run_point(spec_for(srv.url, window_s=30.0, warmup_s=0.1,
                                              dead_server_s=0.5))
            return result, time.monotonic() - t0

    result, took_s = asyncio.run(go())
    assert result.server_gone and result.end_reason == "server_gone"
    assert took_s < 5.0
    classes = {r.error_class for r in result.records if r.status == "error"}
    assert "server_gone" in classes
    assert result.metrics_after is None


def test_an_unreachable_server_ends_the_point_as_connect_errors() -> None:
    import socket

    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    result = asyncio.run(run_point(spec_for(f"http://127.0.0.1:{port}", warmup_s=0.1,
                                            window_s=30.0, dead_server_s=0.5)))
    assert time.monotonic() - t0 < 5.0
    assert result.server_gone
    assert result.warmup_errors > 0
    assert {r.error_class for r in result.records} <= {"connect"}


def test_api_key_is_sent_as_a_bearer_token() -> None:
    opts = FakeOptions(output_tokens=4, api_key="sekrit")
    # Refused users back off up to FAILURE_BACKOFF_MAX_S between tries: a window longer than
    # that holds a try of every user (a 0.3-s one held none about one time in three).
    denied, _ = asyncio.run(measure(opts, window_s=FAILURE_BACKOFF_MAX_S + 0.5))
    assert summary(denied)["n_errors_http_status"] > 0
    assert {r.http_status for r in denied.records if r.status == "error"} == {401}
    allowed, _ = asyncio.run(measure(opts, window_s=0.3, api_key="sekrit"))
    assert summary(allowed)["n_errors"] == 0 and summary(allowed)["n_requests"] > 0


def test_metrics_snapshots_sum_label_sets_and_skip_buckets() -> None:
    result, _ = asyncio.run(measure(FakeOptions(output_tokens=8), window_s=0.5))
    assert result.metrics_before is not None and result.metrics_after is not None
    values = result.metrics_after.values
    assert "sglang:e2e_request_latency_seconds_bucket" not in values
    assert values["sglang:e2e_request_latency_seconds_count"] == 3.0
    assert "process_cpu_seconds_total" not in values
    assert result.metrics_before.t < result.metrics_after.t
    assert result.metrics_before.t == pytest.approx(result.window_start, abs=0.2)


def test_scraping_can_be_switched_off() -> None:
    result, _ = asyncio.run(measure(FakeOptions(output_tokens=4), window_s=0.3,
                                    scrape_metrics=False))
    assert result.metrics_before is None and result.metrics_after is None
    assert math.isnan(summary(result)["server_output_tok_s"])


def test_parse_prometheus_handles_labels_with_spaces_and_special_values() -> None:
    text = "\n".join([
        "# TYPE sglang:num_running_reqs gauge",
        'sglang:num_running_reqs{model_name="my model {v2}",tp_rank="0"} 3',
        'sglang:num_running_reqs{model_name="my model {v2}",tp_rank="1"} 4 1732880000000',
        "sglang:gen_throughput NaN",
        "sglang:token_usage +Inf",
        "vllm:other 5",
    ])
    values = parse_prometheus(text)
    assert values["sglang:num_running_reqs"] == 7.0
    assert math.isnan(values["sglang:gen_throughput"])
    assert values["sglang:token_usage"] == math.inf
    assert "vllm:other" not in values


def test_sync_wrapper_runs_against_a_server_on_another_loop() -> None:
    with fake_in_thread(FakeOptions(output_tokens=6)) as srv:
        result = run_point_sync(spec_for(srv.url, protocol="sglang-native", window_s=0.4))
    s = summary(result)
    assert s["n_requests"] > 0 and s["n_errors"] == 0
    # asyncio.run reprs the finished result; records must not make that expensive.
    assert "RequestRecord" not in repr(result) and "chunk_t" not in repr(result)


def test_the_benchmarks_batch_mode_streams_what_the_client_expects() -> None:
    # benchmarks/client_capacity.py measures the client against BatchFake: its streams must
    # parse cleanly, one token per chunk, with exact counts, or the benchmark measures errors.
    async def go() -> PointResult:
        fake = BatchFake(FakeOptions(output_tokens=20, step_s=0.002))
        serving = asyncio.create_task(fake.serve_forever())
        while fake.port == 0:
            await asyncio.sleep(0.01)
        try:
            return await run_point(spec_for(f"http://127.0.0.1:{fake.port}", window_s=0.5,
                                            scrape_metrics=False))
        finally:
            serving.cancel()

    result = asyncio.run(go())
    s = summary(result)
    assert s["n_errors"] == 0 and s["n_requests"] > 20
    assert s["tokens_per_chunk"] == 1.0
    assert "token_mismatch" not in s["flags"]
    done = [r for r in result.records if r.status == "ok"]
    assert {r.completion_tokens for r in done} == {20}
    assert {r.finish_reason for r in done} == {"stop"}


def test_specs_that_cannot_run_are_refused_with_one_clear_line() -> None:
    with pytest.raises(ProtocolError, match="unknown protocol 'grpc'; choose from"):
        asyncio.run(run_point(spec_for("http://127.0.0.1:1", protocol="grpc")))
    with pytest.raises(LoadError, match="concurrency 0 must be at least 1"):
        asyncio.run(run_point(spec_for("http://127.0.0.1:1", concurrency=0)))
    with pytest.raises(LoadError, match="request list is empty"):
        asyncio.run(run_point(spec_for("http://127.0.0.1:1", requests=[])))
    with pytest.raises(LoadError, match="must start with http"):
        asyncio.run(run_point(spec_for("127.0.0.1:30000")))
    with pytest.raises(LoadError, match="ulimit"):
        raise_fd_limit(10**9)


@pytest.mark.slow
def test_1024_users_run_without_errors_or_running_out_of_files() -> None:
    opts = FakeOptions(output_tokens=4, step_s=0.005)
    result, srv = asyncio.run(measure(opts, concurrency=1024, requests=prompts(50), warmup_s=0.5,
                                      window_s=2.0))
    s = summary(result)
    assert s["n_errors"] == 0 and result.warmup_errors == 0
    assert srv.max_in_flight == 1024
    assert s["n_requests"] > 1024
    assert not result.window_forced_open
