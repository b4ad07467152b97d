"""Per-request rows and per-point summaries: window arithmetic, latency, acceptance, flags."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specbench import metrics, stats
from specbench.load.runner import MetricsSnapshot, PointResult, RequestRecord
from specbench.metrics import Flag, explain_flag, summarize_point, window_tokens
from specbench.results import SUMMARY_COLUMNS, PointKey, point_path, read_point_summary, write_point


def rec(points: list[tuple[float, int]], t_send: float, t_end: float, *, status: str = "ok",
        verify: int | None = None, max_tokens: int = 1000, finish: str | None = "stop",
        request_id: int = 0, error_class: str | None = None,
        t_first: float | None = None, mismatch: bool = False) -> RequestRecord:
    t = np.array([p[0] for p in points], dtype=np.float64)
    n = np.array([p[1] for p in points], dtype=np.int64)
    first = t_first if t_first is not None else (float(t[n > 0][0]) if (n > 0).any() else None)
    return RequestRecord(
        request_id=request_id, user=request_id, prompt_id=f"p{request_id}", category="c",
        max_tokens=max_tokens, t_send=t_send, t_first_token=first, t_end=t_end, chunk_t=t,
        chunk_tokens=n, prompt_tokens=10, completion_tokens=int(n[-1]) if len(n) else 0,
        spec_verify_ct=verify, status=status, error_class=error_class,
        error_detail=None if error_class is None else "boom", finish_reason=finish,
        http_status=200, n_chunks=len(points) + 1, n_reads=len(points), token_mismatch=mismatch)


def point(records: list[RequestRecord], start: float = 0.0, end: float = 10.0, *,
          concurrency: int = 4, cpu_s: float = 0.1, lag_p50_ms: float = 0.1,
          lag_p99_ms: float = 0.2,
          before: MetricsSnapshot | None = None,
          after: MetricsSnapshot | None = None,
          gauges: list[MetricsSnapshot] | None = None,
          warmup: tuple[int, int] = (3, 0), forced_open: bool = False) -> PointResult:
    return PointResult(
        records=records, window_start=start, window_end=end, warmup_records=warmup[0],
        warmup_errors=warmup[1], client_cpu_s=cpu_s,
        loop_lag_ms={"p50": lag_p50_ms, "p99": lag_p99_ms, "max": 50.0},
        metrics_before=before, metrics_after=after, server_gone=False,
        concurrency=concurrency, protocol="openai-chat", end_reason="window_s",
        window_forced_open=forced_open, gauges=gauges or [])


# -- window arithmetic --------------------------------------------------------------------

def reference_window_tokens(times: list[float], sizes: list[int], a: float, b: float) -> float:
    """Brute force: chunk 1 lands whole at t1; chunk i spreads uniformly over (t[i-1], t[i]]."""
    total = float(sizes[0]) if a < times[0] <= b else 0.0
    for i in range(1, len(times)):
        lo, hi = times[i - 1], times[i]
        overlap = max(0.0, min(hi, b) - max(lo, a))
        total += sizes[i] * overlap / (hi - lo)
    return total


chunk_streams = st.lists(
    st.tuples(st.floats(1e-4, 0.5), st.integers(1, 8)), min_size=1, max_size=30
).map(lambda pairs: (list(np.cumsum([g for g, _ in pairs]) + 100.0), [k for _, k in pairs]))


@settings(max_examples=300, deadline=None)
@given(chunk_streams, st.floats(99.0, 116.0), st.floats(0.0, 16.0), st.floats(0.0, 1.0))
def test_window_tokens_are_exact_for_multi_token_chunks_and_edges_anywhere(
        stream: tuple[list[float], list[int]], a: float, width: float, split: float) -> None:
    times, sizes = stream
    t = np.array(times)
    n = np.cumsum(sizes)
    b = a + width
    got = window_tokens(t, n, a, b)
    assert got == pytest.approx(reference_window_tokens(times, sizes, a, b), abs=1e-6)
    # Windows add up exactly: (a, m] + (m, b] == (a, b].
    m = a + split * width
    assert window_tokens(t, n, a, m) + window_tokens(t, n, m, b) == pytest.approx(got, abs=1e-6)
    # A window covering the whole stream holds every token, whatever the chunking.
    assert window_tokens(t, n, times[0] - 1.0, times[-1]) == pytest.approx(sum(sizes))


@settings(max_examples=100, deadline=None)
@given(st.lists(chunk_streams, min_size=1, max_size=6), st.floats(100.0, 104.0),
       st.floats(0.5, 6.0), st.floats(0.5, 50.0))
def test_point_output_rate_is_the_exact_window_sum_over_requests(
        streams: list[tuple[list[float], list[int]]], start: float, width: float,
        scale: float) -> None:
    records = [rec(list(zip(times, np.cumsum(sizes).tolist(), strict=True)), times[0] - 0.01,
                   times[-1], request_id=i) for i, (times, sizes) in enumerate(streams)]
    end = start + width
    summary = summarize_point(point(records, start, end), scale, None, 0.0)
    expected = sum(reference_window_tokens(t, k, start, end) for t, k in streams)
    assert summary["window_s"] == pytest.approx(width * scale)
    assert summary["output_tok_s"] * summary["window_s"] == pytest.approx(expected, abs=1e-6)


def test_tokens_before_the_first_chunk_are_zero_and_flat_after_the_last() -> None:
    t, n = np.array([1.0, 2.0]), np.array([3, 7])
    assert metrics.tokens_at(t, n, 0.5) == 0.0
    assert metrics.tokens_at(t, n, 1.0) == 3.0
    assert metrics.tokens_at(t, n, 1.5) == 5.0
    assert metrics.tokens_at(t, n, 9.0) == 7.0
    assert metrics.tokens_at(np.empty(0), np.empty(0, dtype=np.int64), 1.0) == 0.0


# -- latency and acceptance ---------------------------------------------------------------

def test_itl_is_token_normalised_not_per_chunk() -> None:
    # Gaps of 10 ms (1 token) and 40 ms (4 tokens): every token took 10 ms. Per chunk it
    # would read 10 and 40 ms (mean 25).
    r = rec([(1.00, 1), (1.01, 2), (1.05, 6)], t_send=0.99, t_end=1.06)
    s = summarize_point(point([r], 0.0, 10.0), 1.0, None, 1.0)
    assert s["itl_ms_p50"] == pytest.approx(10.0)
    assert s["itl_ms_p99"] == pytest.approx(10.0)
    assert s["ttft_ms_p50"] == pytest.approx(10.0)
    assert s["e2e_ms_p50"] == pytest.approx(70.0)
    assert s["tpot_ms_p50"] == pytest.approx(60.0 / 5)
    assert s["tokens_per_chunk"] == pytest.approx(2.0)
    # The same stream on a simulator running 4x faster than real time: model time is 4x.
    fast = summarize_point(point([r], 0.0, 10.0), 4.0, None, 1.0)
    assert fast["itl_ms_p50"] == pytest.approx(40.0)
    assert fast["ttft_ms_p50"] == pytest.approx(40.0)
    assert fast["window_s"] == pytest.approx(40.0)


def test_accept_length_is_verify_weighted_over_requests_finished_in_the_window() -> None:
    done_a = rec([(1.0, 1), (2.0, 10)], 0.5, 2.5, verify=5, request_id=1)
    done_b = rec([(3.0, 1), (4.0, 30)], 2.5, 4.5, verify=10, request_id=2)
    # Finished after the window: its acceptance is not the window's.
    late = rec([(8.0, 1), (12.0, 100)], 7.5, 12.5, verify=10, request_id=3)
    # A one-token answer: no verify round, but its token counts, as in SGLang's numerator.
    single = rec([(5.0, 1)], 4.9, 5.1, verify=0, request_id=4)
    s = summarize_point(point([done_a, done_b, late, single], 0.0, 10.0), 1.0, None, 1.0)
    assert s["accept_length"] == pytest.approx(41 / 15)  # not the mean of 2.0, 3.0 (and 1/0)
    assert s["n_requests"] == 3
    baseline = summarize_point(point([rec([(1.0, 1), (2.0, 9)], 0.5, 2.5)]), 1.0, None, 1.0)
    assert math.isnan(baseline["accept_length"])


def test_cancelled_and_errored_requests_count_their_window_tokens_but_not_as_finished() -> None:
    ok = rec([(1.0, 1), (2.0, 11)], 0.5, 2.0, request_id=1)
    cancelled = rec([(8.0, 1), (12.0, 41)], 7.5, 12.0, status="cancelled", request_id=2,
                    finish=None)
    failed = rec([(3.0, 1), (4.0, 5)], 2.5, 4.0, status="error", request_id=3,
                 error_class="stream_truncated", finish=None)
    s = summarize_point(point([ok, cancelled, failed], 0.0, 10.0), 1.0, None, 1.0)
    # ok: 11; cancelled: 1 + 40 * 2/4 = 21 inside (0, 10]; failed: 5.
    assert s["output_tok_s"] * s["window_s"] == pytest.approx(11 + 21 + 5)
    assert (s["n_requests"], s["n_errors"], s["n_cancelled"]) == (1, 1, 1)
    assert s["n_errors_stream_truncated"] == 1 and s["n_errors_connect"] == 0


def test_server_numbers_come_from_counter_deltas_and_sampled_gauges() -> None:
    records = [rec([(1.0 + i, 1), (1.5 + i, 100)], 0.5 + i, 1.6 + i, request_id=i, verify=40)
               for i in range(6)]
    before = MetricsSnapshot(t=0.0, values={metrics.GEN_TOKENS: 1000.0,
                                            metrics.VERIFY_CALLS: 100.0,
                                            metrics.RUNNING_REQS: 3.0})
    after = MetricsSnapshot(t=10.0, values={metrics.GEN_TOKENS: 1600.0,
                                            metrics.VERIFY_CALLS: 340.0,
                                            metrics.RUNNING_REQS: 0.0})
    # The last scrape follows the cancellation: its gauge is not part of the window's mean.
    gauges = [MetricsSnapshot(t, {metrics.RUNNING_REQS: v}) for t, v in ((3.0, 4.0), (6.0, 5.0))]
    s = summarize_point(point(records, 0.0, 10.0, before=before, after=after, gauges=gauges),
                        2.0, None, 1.0)
    assert s["server_output_tok_s"] == pytest.approx(600 / 20.0)  # model time: 10 s wall x 2
    assert s["server_accept_length"] == pytest.approx(600 / 240)
    assert s["server_running_reqs_mean"] == pytest.approx(4.0)
    assert "server_disagrees" not in s["flags"]


def test_the_client_reads_no_simulator_only_metric() -> None:
    # A check that needs the simulator's own extensions would pass here and never run
    # against SGLang: outside the simulator, no module may name one.
    package = Path(metrics.__file__).resolve().parent
    readers = [p for p in package.rglob("*.py")
               if "sim" not in p.relative_to(package).parts
               and "sglang:sim_" in p.read_text()]
    assert readers == []


# -- flags --------------------------------------------------------------------------------

def clean_records(k: int = 8) -> list[RequestRecord]:
    return [rec([(1.0 + i, 1), (1.5 + i, 20)], 0.9 + i, 1.6 + i, request_id=i) for i in range(k)]


def flags_of(result: PointResult, **kw: Any) -> set[str]:
    s = summarize_point(result, kw.pop("scale", 1.0), kw.pop("max_running", 256),
                        kw.pop("budget", 0.01))
    return set(filter(None, s["flags"].split(";")))


def test_a_clean_point_has_no_flags() -> None:
    assert flags_of(point(clean_records())) == set()


def test_each_flag_fires_on_its_condition() -> None:
    assert flags_of(point(clean_records(3))) == {"too_few_requests"}
    assert "client_bound" in flags_of(point(clean_records(), cpu_s=9.5))
    # The loop was behind as a rule (median lag over a token gap of 500 ms)...
    assert "client_bound" in flags_of(point(clean_records(), lag_p50_ms=600.0, lag_p99_ms=900.0))
    # ...not merely once in a while: a 30 ms p99 over a 10 s window moves the edges by 0.6 %.
    assert "client_bound" not in flags_of(point(clean_records(), lag_p99_ms=30.0))
    # The same lag over a 2 s window could move output tok/s by 3 %.
    assert "client_bound" in flags_of(point(clean_records(), 0.0, 2.0, lag_p99_ms=30.0))
    assert "capped_by_server" in flags_of(point(clean_records(), concurrency=300))
    failing = [*clean_records(), rec([(2.0, 1)], 1.9, 2.1, status="error", request_id=99,
                                     error_class="http_status")]
    assert "error_budget" in flags_of(point(failing), budget=0.01)
    assert "error_budget" not in flags_of(point(failing), budget=0.2)
    short = [*clean_records(), rec([(2.0, 1), (2.5, 7)], 1.9, 2.6, request_id=50,
                                   max_tokens=8, finish="length")]
    assert "token_mismatch" in flags_of(point(short))
    assert "token_mismatch" in flags_of(point([*clean_records(), rec(
        [(2.0, 1), (2.5, 7)], 1.9, 2.6, request_id=51, mismatch=True)]))


def test_a_server_running_below_c_with_a_queue_or_retractions_is_flagged() -> None:
    records = clean_records()  # 160 tokens in the 10 s window, all from finished requests
    before = MetricsSnapshot(0.0, {metrics.GEN_TOKENS: 0.0, metrics.RUNNING_REQS: 2.0,
                                   metrics.QUEUE_REQS: 0.0})
    after = MetricsSnapshot(10.0, {metrics.GEN_TOKENS: 160.0})

    def sampled(running: float, queued: float) -> list[MetricsSnapshot]:
        return [MetricsSnapshot(t, {metrics.RUNNING_REQS: running, metrics.QUEUE_REQS: queued})
                for t in (2.0, 5.0, 8.0)]

    # Mean running 2.0 of c=4 while requests waited: the KV pool, not c, set the load.
    queued = point(records, concurrency=4, before=before, after=after, gauges=sampled(2.0, 2.0))
    assert flags_of(queued) == {"ran_below_c"}
    # The same mean with nothing waiting is the client's own gaps between requests.
    idle = point(records, concurrency=4, before=before, after=after, gauges=sampled(2.0, 0.0))
    assert flags_of(idle) == set()
    # Retractions between the scrapes count as waiting (the counter appears with the first).
    retracted = MetricsSnapshot(10.0, {metrics.GEN_TOKENS: 160.0, metrics.RETRACTED: 3.0})
    assert flags_of(point(records, concurrency=4, before=before, after=retracted,
                          gauges=sampled(2.0, 0.0))) == {"ran_below_c"}
    # Near c, a queue is only a request between its end and the next one's admission.
    assert flags_of(point(records, concurrency=4, before=before, after=after,
                          gauges=sampled(3.8, 1.0))) == set()


def test_counter_disagreement_is_flagged() -> None:
    records = clean_records()
    wrong = (MetricsSnapshot(0.0, {metrics.GEN_TOKENS: 0.0}),
             MetricsSnapshot(10.0, {metrics.GEN_TOKENS: 400.0}))
    assert flags_of(point(records, before=wrong[0], after=wrong[1])) == {"server_disagrees"}


def test_a_window_forced_open_and_warmup_errors_are_flagged() -> None:
    assert flags_of(point(clean_records(), forced_open=True)) == {"window_forced_open"}
    assert flags_of(point(clean_records(), warmup=(20, 2)), budget=0.05) == {"warmup_errors"}
    assert flags_of(point(clean_records(), warmup=(20, 1)), budget=0.05) == set()


def test_server_counters_are_compared_with_the_client_over_the_same_interval() -> None:
    # Eight requests finish between the scrapes (t = 1 .. 4), 20 tokens each; the counter
    # moved by 160: they agree. Requests that finished before the first scrape are not part
    # of the comparison, so a counter that moved by 160 more disagrees.
    records = [rec([(1.0 + 0.4 * i, 1), (1.2 + 0.4 * i, 20)], 0.9 + 0.4 * i, 1.3 + 0.4 * i,
                   request_id=i) for i in range(8)]
    before = MetricsSnapshot(0.5, {metrics.GEN_TOKENS: 40.0})
    after = MetricsSnapshot(10.0, {metrics.GEN_TOKENS: 200.0})
    s = summarize_point(point(records, before=before, after=after), 1.0, None, 1.0)
    assert s["server_output_tok_s"] == pytest.approx(160 / 9.5)
    assert "server_disagrees" not in s["flags"]
    after_more = MetricsSnapshot(10.0, {metrics.GEN_TOKENS: 360.0})
    s = summarize_point(point(records, before=before, after=after_more), 1.0, None, 1.0)
    assert "server_disagrees" in s["flags"]


def test_lag_under_the_selector_granularity_is_not_backlog() -> None:
    # A 0.25 s wall window: 1.2 ms p99 oversleep is the 1 ms timeout granularity plus 0.2 ms
    # (edge error 0.16 %); 3 ms is 2 ms of backlog per edge (1.6 %).
    quiet = point(clean_records(), 0.0, 0.25, lag_p99_ms=1.2)
    assert "client_bound" not in summarize_point(quiet, 8.0, None, 1.0)["flags"]
    busy = point(clean_records(), 0.0, 0.25, lag_p99_ms=3.0)
    assert "client_bound" in summarize_point(busy, 8.0, None, 1.0)["flags"]


def test_every_flag_has_advice_and_unknown_names_are_refused() -> None:
    for flag in Flag:
        text = explain_flag(flag.value)
        assert len(text) > 60 and text == flag.advice
    with pytest.raises(ValueError, match="unknown flag 'slow'"):
        explain_flag("slow")


# -- bootstrap and the point file ---------------------------------------------------------

def test_bootstrap_interval_is_seeded_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(3)
    tokens = rng.integers(50, 400, size=200).astype(float)
    low, high = stats.bootstrap_rate_ci(tokens, 10.0)
    assert (low, high) == stats.bootstrap_rate_ci(tokens, 10.0)
    assert low < tokens.sum() / 10.0 < high
    # Roughly sqrt(n) * sd / window either side: a sanity band, not a tight check.
    half = 1.96 * math.sqrt(len(tokens)) * tokens.std() / 10.0
    assert (high - low) / 2 == pytest.approx(half, rel=0.25)
    assert all(math.isnan(x) for x in stats.bootstrap_rate_ci(np.empty(0), 10.0))
    # The summary's CI columns are this interval over the window's per-request tokens.
    records = clean_records(6)
    row = summarize_point(point(records), 1.0, None, 0.0)
    wtok = np.array([window_tokens(r.chunk_t, r.chunk_tokens, 0.0, 10.0) for r in records])
    assert (row["output_tok_s_ci_low"], row["output_tok_s_ci_high"]) == \
        stats.bootstrap_rate_ci(wtok, 10.0)


def test_request_rows_are_model_time_from_window_start_and_round_trip_a_point_file(
        tmp_path: Path) -> None:
    records = [*clean_records(6), rec([], 3.0, 3.01, status="error", request_id=77,
                                      error_class="connect", finish=None)]
    result = point(records, start=0.5, end=10.5)
    frame = metrics.requests_frame(result, 3.0)
    assert list(frame.columns) == list(metrics.FRAME_COLUMNS)
    first = frame.iloc[0]
    assert first["t_send_s"] == pytest.approx((0.9 - 0.5) * 3.0)
    assert first["ttft_ms"] == pytest.approx(0.1 * 3000.0)
    assert first["window_tokens"] == pytest.approx(20.0)
    assert list(first["chunk_t_s"]) == pytest.approx([1.5, 3.0])
    summary = summarize_point(result, 3.0, 256, 0.5)
    key = PointKey("eagle3", "coding", 4, 0)
    write_point(tmp_path, key, frame, summary)
    back = pd.read_parquet(point_path(tmp_path, key))
    assert len(back) == 7
    assert back["chunk_tokens"].iloc[2].tolist() == [1, 20]
    assert back.loc[back["request_id"] == 77, "error_class"].item() == "connect"
    assert pd.isna(back.loc[back["request_id"] == 77, "ttft_ms"].item())
    row = read_point_summary(point_path(tmp_path, key))
    for column in SUMMARY_COLUMNS:
        assert column in row
    assert row["output_tok_s"] == pytest.approx(summary["output_tok_s"])
    assert row["accept_length"] is None  # NaN for a baseline-like point becomes empty


def test_empty_window_gives_nan_rates_not_a_crash() -> None:
    result = point([], start=5.0, end=5.0)
    s = summarize_point(result, 1.0, None, 0.01)
    assert math.isnan(s["output_tok_s"]) and s["n_requests"] == 0
    assert "too_few_requests" in s["flags"]
    assert metrics.requests_frame(result, 1.0).empty


@settings(max_examples=50, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_additivity_holds_at_chunk_boundaries_too(x: float, y: float) -> None:
    t = np.array([1.0, 2.0, 3.0, 4.0])
    n = np.array([2, 5, 5, 9])
    a, b = sorted((1.0 + 3.0 * x, 1.0 + 3.0 * y))
    assume(b > a)
    for m in (1.0, 2.0, 3.0, 4.0):
        if a <= m <= b:
            total = window_tokens(t, n, a, m) + window_tokens(t, n, m, b)
            assert total == pytest.approx(window_tokens(t, n, a, b))


def test_batch_means_over_time_slices_of_the_window() -> None:
    # Two requests, one steady at 10 tok/s over the whole window (0, 10], one adding 51 tokens
    # in (2, 3]: slices of 1 s give 10 everywhere and 61 in the third.
    steady = rec([(float(t), 10 * t) for t in range(0, 11)], -1.0, 10.5)
    burst = rec([(2.5, 1), (3.0, 51)], 1.5, 3.2, request_id=1)
    s = summarize_point(point([steady, burst], 0.0, 10.0), 1.0, None, 1.0)
    rates = np.array([10.0, 10.0, 61.0, *[10.0] * 7])
    assert s["output_tok_s_slices"] == stats.N_SLICES == 10
    assert s["output_tok_s"] == pytest.approx(rates.mean())
    assert s["output_tok_s_se"] == pytest.approx(rates.std(ddof=1) / math.sqrt(10))
    assert s["output_tok_s_slice_lag1"] == pytest.approx(stats.lag1_autocorrelation(rates))
