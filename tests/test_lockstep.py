"""The lockstep_ends flag: request ends in bursts (equal output lengths), not spread out."""

from __future__ import annotations

import numpy as np
import pytest

from specbench import metrics
from specbench.load.runner import PointResult, RequestRecord
from specbench.metrics import end_bursts, explain_flag, in_flight_mean, summarize_point

TPOT_S = 0.008  # one decode step of the synthetic server


def request(request_id: int, t_send: float, t_end: float, tokens: int = 100) -> RequestRecord:
    """An OK request streaming one token per step from its first token to its end."""
    t_first = t_end - (tokens - 1) * TPOT_S
    chunk_t = np.linspace(t_first, t_end, tokens)
    return RequestRecord(
        request_id=request_id, user=request_id % 1000, prompt_id=f"p{request_id}",
        category="c", max_tokens=tokens, t_send=t_send, t_first_token=t_first, t_end=t_end,
        chunk_t=chunk_t, chunk_tokens=np.arange(1, tokens + 1, dtype=np.int64),
        prompt_tokens=10, completion_tokens=tokens, spec_verify_ct=None, status="ok",
        error_class=None, error_detail=None, finish_reason="length", http_status=200,
        n_chunks=tokens + 1, n_reads=tokens, token_mismatch=False)


def closed_loop(ends_per_user: list[list[float]], start: float, end: float) -> PointResult:
    """Each user's requests back to back: the next one is sent when the previous ends."""
    records = []
    for user, ends in enumerate(ends_per_user):
        t_send = start - 1.0
        for t_end in ends:
            records.append(request(1000 * len(records) + user, t_send, t_end))
            t_send = t_end
        records.append(request(1000 * len(records) + user, t_send, end + 5.0))  # cut by the end
    records = [r for r in records if r.t_end > start]  # what the runner keeps: alive in it
    return PointResult(
        records=records, window_start=start, window_end=end, warmup_records=len(ends_per_user),
        warmup_errors=0, client_cpu_s=0.1, loop_lag_ms={"p50": 0.1, "p99": 0.2, "max": 1.0},
        metrics_before=None, metrics_after=None, server_gone=False,
        concurrency=len(ends_per_user), protocol="openai-chat", end_reason="window_s")


def flags_of(result: PointResult) -> set[str]:
    row = summarize_point(result, 1.0, None, 0.01)
    return set(filter(None, row["flags"].split(";")))


def lockstep(c: int, cycle_s: float, window_s: float, spread_steps: int = 2,
             seed: int = 0) -> PointResult:
    """Every user's request ends within `spread_steps` decode steps of the others, every cycle."""
    rng = np.random.default_rng(seed)
    ends = [[k * cycle_s + 0.1 + float(rng.integers(0, spread_steps + 1)) * TPOT_S
             for k in range(int(window_s / cycle_s) + 1)] for _ in range(c)]
    return closed_loop([[t for t in e if t <= window_s] for e in ends], 0.0, window_s)


def staggered(c: int, mean_cycle_s: float, window_s: float, seed: int = 0) -> PointResult:
    """Each user's requests of log-normal lengths: ends at independent times."""
    rng = np.random.default_rng(seed)
    ends = []
    for _ in range(c):
        t, user_ends = -rng.uniform(0.0, mean_cycle_s), []
        while t <= window_s:
            t += mean_cycle_s * rng.lognormal(-0.32, 0.8)  # mean 1 cycle
            user_ends.append(t)
        ends.append([x for x in user_ends if 0.0 < x <= window_s])
    return closed_loop(ends, 0.0, window_s)


def test_ends_spread_out_leave_no_quiet_stretch_and_one_burst() -> None:
    quiet, burst = end_bursts(np.arange(1.0, 10.0), 0.0, 10.0)
    assert quiet == 0.0 and burst == 9.0


def test_ends_in_waves_leave_the_window_quiet_between_bursts() -> None:
    # Three waves of 16 ends 2 ms apart at 1.5, 4.5 and 7.5 s: 10 s, 48 ends, mean gap 0.2 s.
    ends = np.concatenate([t + 0.002 * np.arange(16) for t in (1.5, 4.5, 7.5)])
    quiet, burst = end_bursts(ends, 0.0, 10.0)
    # Every stretch between waves (and from each edge) is over 5 mean gaps (1.02 s): quiet
    # but for the waves' 3 x 30 ms.
    assert quiet == pytest.approx(1.0 - 3 * 0.030 / 10.0)
    assert burst == 16.0
    # Ends outside the window (start, end] do not count; none at all says nothing.
    assert end_bursts(ends, 2.0, 5.0)[1] == 16.0
    assert all(np.isnan(end_bursts(ends, 8.0, 9.0)))
    # A wave 1 s from the edge, under 5 mean gaps (1.02 s): that stretch is not quiet.
    early = np.concatenate([t + 0.002 * np.arange(16) for t in (1.0, 4.0, 7.0)])
    assert end_bursts(early, 0.0, 10.0)[0] == pytest.approx(1.0 - (3 * 0.030 + 1.0) / 10.0)


def test_in_flight_is_time_averaged_over_the_window() -> None:
    records = [request(0, -1.0, 5.0), request(1, 2.0, 12.0), request(2, 11.0, 20.0)]
    assert in_flight_mean(records, 0.0, 10.0) == pytest.approx((5.0 + 8.0) / 10.0)


@pytest.mark.parametrize("c", [8, 16, 64, 250])
def test_a_closed_loop_in_lockstep_is_flagged(c: int) -> None:
    result = lockstep(c, cycle_s=1.5, window_s=8.0)
    assert metrics.in_flight_mean(result.records, 0.0, 8.0) == pytest.approx(c, rel=0.01)
    assert flags_of(result) == {"lockstep_ends"}


def test_a_lockstep_that_fell_apart_into_waves_of_tens_of_steps_is_flagged() -> None:
    # At c = 250 chunked prefill staggers a cohort's starts: its ends spread over ~50 steps
    # (a sixth of the cycle here), still with quiet stretches between.
    assert flags_of(lockstep(250, cycle_s=2.4, window_s=8.0, spread_steps=50)) == {
        "lockstep_ends"}


@pytest.mark.parametrize("c", [1, 4, 16, 64, 250])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_staggered_ends_are_not_flagged(c: int, seed: int) -> None:
    assert "lockstep_ends" not in flags_of(staggered(c, mean_cycle_s=2.0, window_s=8.0,
                                                     seed=seed))


def test_a_few_long_requests_among_short_ones_are_not_a_lockstep() -> None:
    # c = 2: one user's long request spans most of the window while the other's short ones
    # end in a run; the quiet stretch is real but the bursts hold one or two ends.
    ends = [[0.5, 9.5], [0.2, 0.4, 0.6, 0.8, 1.0]]
    quiet, _ = end_bursts(np.array([t for e in ends for t in e]), 0.0, 10.0)
    assert quiet >= metrics.LOCKSTEP_QUIET_MIN
    assert flags_of(closed_loop(ends, 0.0, 10.0)) == set()


def test_too_few_ends_say_nothing_and_a_burst_must_be_a_share_of_c() -> None:
    # One wave of 4 ends: too_few_requests, not lockstep_ends.
    assert flags_of(closed_loop([[5.0]] * 4, 0.0, 10.0)) == {"too_few_requests"}
    # Bursts of 8 ends with 250 requests in flight: not most of the batch ending together.
    few = closed_loop([[2.0, 6.0]] * 8 + [[]] * 242, 0.0, 10.0)
    assert end_bursts(np.array([r.t_end for r in few.records if r.t_end <= 10.0]),
                      0.0, 10.0)[1] == 8.0
    assert flags_of(few) == set()


def test_the_advice_quotes_the_thresholds_and_points_to_the_docs() -> None:
    text = explain_flag("lockstep_ends")
    assert text.startswith("Requests ended together (equal output lengths?)")
    assert "25% of the requests in flight" in text and "50%" in text
    assert "docs/reading-results.md" in text
