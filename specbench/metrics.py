"""Per-request records -> per-request rows and a per-point summary, exact at the window edges.

Two public functions feed a point file (:func:`specbench.results.write_point`):

- :func:`requests_frame`: one row per request alive in the window;
- :func:`summarize_point`: the point's summary row (the public columns of
  ``results.SUMMARY_COLUMNS`` and more), with self-check ``flags``.

**Time.** Records hold wall-clock monotonic seconds. Every duration is multiplied by
``time_scale`` (the simulator's speed-up; 1.0 for real SGLang), so all reported times are
simulated-GPU ("model") time, and are expressed relative to the window start. Client health
numbers (CPU fraction, event-loop lag) stay in wall time: they describe this machine.

**Tokens in the window.** A request's cumulative token count N(t) is known at each chunk's
arrival; between chunks it is interpolated linearly (a chunk's tokens are spread over the gap
since the previous chunk), before the first chunk it is 0 (the first chunk's tokens count at
its arrival), after the last it stays flat. Tokens of a request inside a window (a, b] are
N(b) - N(a), so windows add up exactly and a multi-token chunk straddling an edge is split in
proportion to time, never counted whole on one side. Output tok/s is the sum over requests
divided by the window length. Tokens of every request count, whatever its end (ok, cancelled,
error): they are work the server did inside the window; failures are reported beside it.

**Uncertainty.** ``output_tok_s_se`` is the batch-means standard error of output tok/s: the
window cut into ``stats.N_SLICES`` equal time slices, tok/s per slice, sd / sqrt(slices)
(``output_tok_s_slice_lag1`` is the slices' lag-1 autocorrelation, which says whether they are
close enough to independent for that). The crossover intervals use it. The
``output_tok_s_ci_low/high`` columns resample requests instead; they describe the spread of
requests within the window, not run-to-run noise, and only the regression gate reads them.

**Latency.** TTFT, E2E, ITL and TPOT come from requests that finished OK inside the window.
ITL is token-normalised: a chunk that arrives g after the previous token-bearing chunk with k
new tokens contributes k samples of g/k (so speculative decoding's multi-token chunks neither
inflate ITL nor hide tokens).

**Acceptance.** Verify-weighted over requests that finished in the window:
sum(completion_tokens) / sum(spec_verify_ct), from the stream's per-request counts. SGLang
before 0.5.19 streams none (engines/versions.py); then the point takes the server's own figure,
Δ``generation_tokens_total`` / Δ``spec_verify_calls_total`` between the window's two scrapes
(both counters move when a request finishes, by that request's tokens and verify rounds: the
same ratio over the requests that finished in between). Where no request finished in the
window (long answers at c=1), the mean of SGLang's own windowed ``spec_accept_length`` gauge,
sampled through the window, is the last resort. ``accept_source`` says which one a point used
(``stream``, ``server``, ``server_gauge``, or null for a baseline); ``server_accept_length`` is
always the counters' figure, so the two can be compared where both exist.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import pandas as pd

from specbench.goodput import Slo, open_loop_columns, percentile_columns
from specbench.load.prometheus import GEN_TOKENS, MetricsSnapshot
from specbench.load.protocols import ERROR_CLASSES
from specbench.load.records import PointResult, RequestRecord
from specbench.stats import batch_means, bootstrap_rate_ci, slice_rates

NAN = float("nan")

# Self-check thresholds, in one place so that the advice texts can quote them.
CLIENT_CPU_FRAC_MAX = 0.90  # the event loop is one thread: 1.0 is one core saturated
# The loop is "behind" when its median lag exceeds a whole token gap (wall): then chunks wait
# for the client as a rule, not by accident. A p99 spike (descheduling on a shared machine)
# blurs latency tails but does not limit throughput; loop_lag_ms_p99 reports it.
LOOP_LAG_FLOOR_MS = 2.0  # wall; an idle loop oversleeps up to ~1 ms (epoll's ms timeout)
# Chunks waiting in the loop's backlog at a window edge are timed late, so each edge can move
# the window's token count by about lag x rate: a relative error of ~2 x lag / window (wall).
# The probe's first millisecond is the selector's timeout granularity, not backlog.
EDGE_ERROR_MAX = 0.01
LAG_GRANULARITY_MS = 1.0
SERVER_TOLERANCE = 0.10
# Plus, in tokens, one chunk of up to 4 tokens per user in flight across the scrape edges.
SERVER_SLACK_TOKENS_PER_USER = 4
RUNNING_FRACTION_MIN = 0.80
# ran_below_c from the queue gauge needs a queue of at least this share of c on average, over
# at least this many samples.
QUEUE_FRACTION_MIN = 0.10
MIN_GAUGE_SAMPLES = 3
MIN_REQUESTS = 5
# lockstep_ends: a closed loop of equal-length requests prefills every user in one burst and
# ends them together, so the window's ends come in bursts with quiet stretches between (at
# c = 64 and up a burst spreads over tens of decode steps, as chunked prefill staggers the
# starts, so the yardstick is the window's mean gap between ends, not TPOT). A quiet stretch
# is a gap between consecutive ends, or between a window edge and the nearest end, longer
# than LOCKSTEP_GAP_FACTOR mean gaps; independent ends (a Poisson stream) leave
# (1 + 5) e^-5 = 4% of the window in such stretches.
LOCKSTEP_GAP_FACTOR = 5.0
LOCKSTEP_QUIET_MIN = 0.5  # share of the window
# Ends per burst on average, against the requests in flight: a burst of a lockstep loop holds
# most of them; a few long requests among short ones (low c) make bursts of one or two.
LOCKSTEP_BURST_FRACTION = 0.25
LOCKSTEP_MIN_BURST = 4

# Only what a real SGLang server exports is read: the simulator's own extensions are for its
# tests, so a check that works here works against SGLang (tests/test_metrics.py greps for it).
VERIFY_CALLS = "sglang:spec_verify_calls_total"
RUNNING_REQS = "sglang:num_running_reqs"  # gauges, sampled through the window
QUEUE_REQS = "sglang:num_queue_reqs"
RETRACTED = "sglang:num_retracted_requests_total"  # appears with the first retraction
ACCEPT_GAUGE = "sglang:spec_accept_length"  # windowed over decode log intervals


class Flag(Enum):
    """Per-point warnings; each member's advice says what it means and what to do."""

    CLIENT_BOUND = "client_bound"
    SERVER_DISAGREES = "server_disagrees"
    CAPPED_BY_SERVER = "capped_by_server"
    RAN_BELOW_C = "ran_below_c"
    TOKEN_MISMATCH = "token_mismatch"
    ERROR_BUDGET = "error_budget"
    TOO_FEW_REQUESTS = "too_few_requests"
    WINDOW_FORCED_OPEN = "window_forced_open"
    WARMUP_ERRORS = "warmup_errors"
    LOCKSTEP_ENDS = "lockstep_ends"
    BEHIND_SCHEDULE = "behind_schedule"

    @property
    def advice(self) -> str:
        return _ADVICE[self]


_ADVICE: dict[Flag, str] = {
    Flag.BEHIND_SCHEDULE: (
        "Open loop: the client sent the window's requests late against their arrival "
        "schedule (median lag above a tenth of the mean gap between arrivals, and above 2 ms "
        "wall), so the server saw fewer, later arrivals than asked. Use a lower "
        "--sim-time-scale or a quieter machine, or lower the rate; see "
        "benchmarks/client_capacity.py."
    ),
    Flag.CLIENT_BOUND: (
        f"The load generator, not the server, may have limited this point: client CPU was above "
        f"{CLIENT_CPU_FRAC_MAX:.0%} of a core; or the event loop's median lag exceeded one token "
        f"gap (and {LOOP_LAG_FLOOR_MS} ms wall), so chunks waited for the client; or its p99 "
        f"lag was large enough against the window's wall length to move output tok/s by more "
        f"than {EDGE_ERROR_MAX:.0%} at the window edges. Use a longer window or a lower "
        "--sim-time-scale, run the client on a quieter or faster machine, or lower the "
        "concurrency; see benchmarks/client_capacity.py."
    ),
    Flag.SERVER_DISAGREES: (
        f"Between the two /metrics scrapes, the server counted more than {SERVER_TOLERANCE:.0%} "
        "more or fewer tokens than the client received (for SGLang's counter, which moves when "
        "a request finishes: than the requests that finished in between). Check that nothing "
        "else sends load to this server and that no proxy drops or buffers streams."
    ),
    Flag.CAPPED_BY_SERVER: (
        "The concurrency is above the server's --max-running-requests, so the extra users "
        "only queue: the point measures the server's cap, not c. Raise "
        "--max-running-requests (equally for every configuration) or leave this level out."
    ),
    Flag.RAN_BELOW_C: (
        "The server ran fewer requests than the concurrency asked for: its sampled "
        f"sglang:num_running_reqs averaged below {RUNNING_FRACTION_MIN:.0%} of c while requests "
        "waited in its queue (sglang:num_queue_reqs) or were retracted "
        "(sglang:num_retracted_requests_total), which is what a KV cache too small for c "
        "running requests does. The point measures that limit, not c. Give the KV cache more "
        "room (--mem-fraction-static, --max-total-tokens, shorter --context-length, more GPUs) "
        "or leave this level out."
    ),
    Flag.TOKEN_MISMATCH: (
        "Token counts disagree: a final usage differed from the streamed cumulative count, a "
        "request finished for length with a count other than its max_tokens, or a stream "
        "went past its max_tokens (a server that ignores the cap streams until the window "
        "cuts it). Check the server version and that it honours max_tokens and "
        "stream_options.continuous_usage_stats."
    ),
    Flag.ERROR_BUDGET: (
        "More requests failed in the window than the error budget allows; the throughput is "
        "not trustworthy. Look at the error columns (n_errors_*) and the server log, then rerun."
    ),
    Flag.TOO_FEW_REQUESTS: (
        f"Fewer than {MIN_REQUESTS} requests finished in the window, so latency percentiles "
        "and acceptance rest on very few samples. Use a longer window (window_s)."
    ),
    Flag.WINDOW_FORCED_OPEN: (
        "The window opened with fewer than c users in flight (failing requests kept some "
        "waiting to retry), so the point measured less load than c. Look at the errors in the "
        "server log and the point's error columns, then rerun the point."
    ),
    Flag.WARMUP_ERRORS: (
        "More warmup requests failed than the error budget allows: the server was not healthy "
        "when the window opened, even if the window itself looks clean. Look at the server "
        "log around the point's start, then rerun."
    ),
    Flag.LOCKSTEP_ENDS: (
        "Requests ended together (equal output lengths?): their ends came in bursts of, on "
        f"average, at least {LOCKSTEP_BURST_FRACTION:.0%} of the requests in flight, with "
        f"{LOCKSTEP_QUIET_MIN:.0%} or more of the window in quiet stretches between (gaps over "
        f"{LOCKSTEP_GAP_FACTOR:g} mean gaps between ends), what a closed loop of equal-length "
        "requests does. Output tok/s reads higher than traffic whose requests end at different "
        "times; see docs/reading-results.md."
    ),
}


def explain_flag(name: str) -> str:
    """The advice text of a flag name as it appears in the summary's ``flags`` column."""
    try:
        return Flag(name).advice
    except ValueError:
        known = ", ".join(f.value for f in Flag)
        raise ValueError(f"unknown flag {name!r}; known flags are {known}") from None


# -- token arithmetic ---------------------------------------------------------------------

def tokens_at(chunk_t: np.ndarray, chunk_tokens: np.ndarray, t: float) -> float:
    """Cumulative tokens of one request at time t (see the module docstring)."""
    if len(chunk_t) == 0:
        return 0.0
    return float(np.interp(t, chunk_t, chunk_tokens, left=0.0))


def window_tokens(chunk_t: np.ndarray, chunk_tokens: np.ndarray, start: float, end: float) -> float:
    """Tokens of one request generated in the window (start, end]."""
    if len(chunk_t) == 0 or end <= start:
        return 0.0
    lo, hi = np.interp([start, end], chunk_t, chunk_tokens, left=0.0)
    return float(hi - lo)


def token_gaps(chunk_t: np.ndarray, chunk_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gap since the previous token-bearing chunk, new tokens) for each chunk after the first.

    Chunks that add no tokens (role, finish, usage chunks) are skipped, so a gap always runs
    from one token-bearing chunk to the next.
    """
    if len(chunk_t) == 0:
        return np.empty(0), np.empty(0, dtype=np.int64)
    bearing = np.flatnonzero(np.diff(chunk_tokens, prepend=0) > 0)
    return np.diff(chunk_t[bearing]), np.diff(chunk_tokens[bearing])


def itl_samples_s(chunk_t: np.ndarray, chunk_tokens: np.ndarray) -> np.ndarray:
    """Token-normalised ITL samples: a gap of g with k new tokens gives k samples of g/k."""
    gaps, tokens = token_gaps(chunk_t, chunk_tokens)
    return np.repeat(gaps / np.maximum(tokens, 1), tokens)


def end_bursts(t_end: np.ndarray, start: float, end: float) -> tuple[float, float]:
    """How the ends in the window (start, end] bunch: (quiet share, mean ends per burst).

    The quiet share is the part of the window in quiet stretches: gaps between consecutive
    ends, or between an edge and the nearest end, over ``LOCKSTEP_GAP_FACTOR`` mean gaps
    (window / (ends + 1)). The ends between two quiet stretches are one burst. Any time unit;
    NaN, NaN without ends.
    """
    t = np.sort(t_end[(t_end > start) & (t_end <= end)])
    if len(t) == 0:
        return NAN, NAN
    gaps = np.diff(np.concatenate(([start], t, [end])))
    quiet = gaps > LOCKSTEP_GAP_FACTOR * (end - start) / (len(t) + 1)
    # The edges' stretches bound the first and last burst; only inner ones split bursts.
    bursts = 1 + int(np.count_nonzero(quiet[1:-1]))
    return float(gaps[quiet].sum() / (end - start)), len(t) / bursts


def in_flight_mean(records: list[RequestRecord], start: float, end: float) -> float:
    """Requests in flight over the window (start, end], time-averaged (c in a closed loop)."""
    if end <= start:
        return NAN
    alive_s = sum(max(0.0, min(r.t_end, end) - max(r.t_send, start)) for r in records)
    return alive_s / (end - start)


# -- per-request rows ---------------------------------------------------------------------

def _finished_in_window(rec: RequestRecord, start: float, end: float) -> bool:
    return rec.status == "ok" and start < rec.t_end <= end


def _request_row(rec: RequestRecord, start: float, end: float, scale: float,
                 arrived: frozenset[int]) -> dict[str, Any]:
    ms = scale * 1000.0
    ttft = (rec.t_first_token - rec.t_send) * ms if rec.t_first_token is not None else NAN
    e2e = (rec.t_end - rec.t_send) * ms
    gaps, tokens = token_gaps(rec.chunk_t, rec.chunk_tokens)
    itl_mean = gaps.sum() / tokens.sum() * ms if tokens.sum() > 0 else NAN
    tpot = (e2e - ttft) / (rec.completion_tokens - 1) if rec.completion_tokens > 1 else NAN
    return {
        "request_id": rec.request_id,
        "user": rec.user,
        "prompt_id": rec.prompt_id,
        "category": rec.category,
        "status": rec.status,
        "error_class": rec.error_class,
        "error_detail": rec.error_detail,
        "finish_reason": rec.finish_reason,
        "http_status": rec.http_status,
        "prompt_tokens": rec.prompt_tokens,
        "completion_tokens": rec.completion_tokens,
        "max_tokens": rec.max_tokens,
        "spec_verify_ct": rec.spec_verify_ct,
        "n_chunks": rec.n_chunks,
        "n_reads": rec.n_reads,
        "token_mismatch": rec.token_mismatch,
        "finished_in_window": _finished_in_window(rec, start, end),
        "t_send_s": (rec.t_send - start) * scale,
        "t_first_token_s": (
            (rec.t_first_token - start) * scale if rec.t_first_token is not None else NAN),
        "t_end_s": (rec.t_end - start) * scale,
        "ttft_ms": ttft,
        "e2e_ms": e2e,
        "itl_ms_mean": itl_mean,
        "tpot_ms": tpot,
        "window_tokens": window_tokens(rec.chunk_t, rec.chunk_tokens, start, end),
        "chunk_t_s": (rec.chunk_t - start) * scale,
        "chunk_tokens": rec.chunk_tokens,
        "arrived_in_window": rec.request_id in arrived,
    }


_NULLABLE_INT = ("http_status", "prompt_tokens", "spec_verify_ct")
_STRINGS = ("prompt_id", "category", "status", "error_class", "error_detail", "finish_reason")
FRAME_COLUMNS: tuple[str, ...] = (
    "request_id", "user", "prompt_id", "category", "status", "error_class", "error_detail",
    "finish_reason", "http_status", "prompt_tokens", "completion_tokens", "max_tokens",
    "spec_verify_ct", "n_chunks", "n_reads", "token_mismatch", "finished_in_window", "t_send_s",
    "t_first_token_s", "t_end_s", "ttft_ms", "e2e_ms", "itl_ms_mean", "tpot_ms",
    "window_tokens", "chunk_t_s", "chunk_tokens", "arrived_in_window",
)


def requests_frame(result: PointResult, time_scale: float) -> pd.DataFrame:
    """One row per request alive in the window; times in model seconds/ms from window start.

    ``chunk_t_s``/``chunk_tokens`` are list columns: each request's (arrival, cumulative
    tokens) points, from which any other window can be recomputed. ``arrived_in_window``: an
    open-loop point's window arrivals (followed to their end); always false in a closed loop.
    """
    start, end = result.window_start, result.window_end
    arrived = result.window_request_ids
    rows = [_request_row(rec, start, end, time_scale, arrived) for rec in result.records]
    frame = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
    for col in _NULLABLE_INT:
        frame[col] = pd.array(frame[col].tolist(), dtype="Int64")
    for col in _STRINGS:
        frame[col] = frame[col].astype("string")
    for col in ("request_id", "user", "completion_tokens", "max_tokens", "n_chunks", "n_reads"):
        frame[col] = frame[col].astype("int64")
    for col in ("token_mismatch", "finished_in_window", "arrived_in_window"):
        frame[col] = frame[col].astype("bool")
    return frame


# -- per-point summary --------------------------------------------------------------------

def _delta(before: MetricsSnapshot | None, after: MetricsSnapshot | None, name: str) -> float:
    if before is None or after is None:
        return NAN
    if name not in before.values or name not in after.values:
        return NAN
    return after.values[name] - before.values[name]


def _ratio(num: float, den: float) -> float:
    if not math.isfinite(num) or not math.isfinite(den) or den == 0:
        return NAN
    return num / den


def _within(value: float, reference: float, tolerance: float, slack: float) -> bool:
    if not math.isfinite(value) or not math.isfinite(reference):
        return False
    return abs(value - reference) <= tolerance * abs(reference) + slack


@dataclass(frozen=True)
class _ServerView:
    """The server's own counts over the window, from /metrics deltas (NaN where not reported)."""

    scrape_s: float  # model seconds between the two scrapes
    finished_tokens: float  # tokens of the requests that finished in between (SGLang's counter)
    verify_calls: float
    running_mean: float  # mean of the sampled running-requests gauge (NaN: none sampled)
    queued_mean: float  # mean of the sampled queue gauge (0: none sampled)
    samples: int  # gauge samples behind the two means
    retracted: float  # requests the server retracted (preempted) between the scrapes
    accept_gauge: float  # mean of SGLang's windowed spec_accept_length gauge (NaN: none > 0)


def _server_view(result: PointResult, time_scale: float) -> _ServerView:
    before, after = result.metrics_before, result.metrics_after
    # The gauges as they stood at the window's start and through it; the last scrape comes
    # after the cancellation, when they say nothing about the window.
    samples = [s.values for s in ([before] if before else []) + list(result.gauges)]
    running = [v[RUNNING_REQS] for v in samples if RUNNING_REQS in v]
    queued = [v.get(QUEUE_REQS, 0.0) for v in samples]
    # 0 until the server's first decode log interval: no figure yet, not "nothing accepted".
    accepts = [v[ACCEPT_GAUGE] for v in samples if v.get(ACCEPT_GAUGE, 0.0) > 0.0]
    retracted = NAN
    if before is not None and after is not None:
        retracted = after.values.get(RETRACTED, 0.0) - before.values.get(RETRACTED, 0.0)
    return _ServerView(
        scrape_s=(after.t - before.t) * time_scale if before and after else NAN,
        finished_tokens=_delta(before, after, GEN_TOKENS),
        verify_calls=_delta(before, after, VERIFY_CALLS),
        running_mean=float(np.mean(running)) if running else NAN,
        queued_mean=float(np.mean(queued)) if queued else 0.0,
        samples=len(running),
        retracted=retracted,
        accept_gauge=float(np.mean(accepts)) if accepts else NAN,
    )


def _summary_row(result: PointResult, time_scale: float, server: _ServerView) -> dict[str, Any]:
    """Every column of the summary row except ``flags``."""
    start, end = result.window_start, result.window_end
    records = result.records
    wall_s = end - start
    window_s = wall_s * time_scale
    ms = time_scale * 1000.0

    wtok = np.array([window_tokens(r.chunk_t, r.chunk_tokens, start, end) for r in records])
    total_tokens = float(wtok.sum()) if len(wtok) else 0.0
    output_tok_s = _ratio(total_tokens, window_s)

    done = [r for r in records if _finished_in_window(r, start, end)]
    errors = [r for r in records if r.status == "error" and start < r.t_end <= end]
    n_requests = len(done)
    ttft = np.array([(r.t_first_token - r.t_send) * ms for r in done
                     if r.t_first_token is not None])
    e2e = np.array([(r.t_end - r.t_send) * ms for r in done])
    tpot = np.array([((r.t_end - r.t_first_token) * ms) / (r.completion_tokens - 1)
                     for r in done if r.t_first_token is not None and r.completion_tokens > 1])
    itl = (np.concatenate([itl_samples_s(r.chunk_t, r.chunk_tokens) for r in done]) * ms
           if done else np.empty(0))
    bearing_chunks = sum(int(np.count_nonzero(np.diff(r.chunk_tokens, prepend=0) > 0))
                         for r in done)
    done_tokens = sum(r.completion_tokens for r in done)

    # Every finished request with a verify count, zero included (a one-token answer).
    spec = [r for r in done if r.spec_verify_ct is not None]
    accept_length = _ratio(float(sum(r.completion_tokens for r in spec)),
                           float(sum(r.spec_verify_ct or 0 for r in spec)))
    server_accept = _ratio(server.finished_tokens, server.verify_calls)
    accept_source = "stream" if math.isfinite(accept_length) else None
    if accept_source is None and math.isfinite(server_accept):
        accept_length, accept_source = server_accept, "server"
    elif accept_source is None and math.isfinite(server.accept_gauge):
        accept_length, accept_source = server.accept_gauge, "server_gauge"

    lo, hi = bootstrap_rate_ci(wtok, window_s)
    slices = batch_means(slice_rates(
        [(r.chunk_t - start) * time_scale for r in records],
        [r.chunk_tokens for r in records], window_s))
    return {
        "n_requests": n_requests,
        "n_errors": len(errors),
        "window_s": window_s,
        "output_tok_s": output_tok_s,
        "requests_per_s": _ratio(float(n_requests), window_s),
        **percentile_columns({"ttft_ms": ttft, "itl_ms": itl, "tpot_ms": tpot, "e2e_ms": e2e}),
        "per_user_tok_s": _ratio(output_tok_s, float(result.concurrency)),
        "accept_length": accept_length,
        "accept_source": accept_source,
        "tokens_per_chunk": _ratio(float(done_tokens), float(bearing_chunks)),
        "server_output_tok_s": _ratio(server.finished_tokens, server.scrape_s),
        "server_accept_length": server_accept,
        "server_running_reqs_mean": server.running_mean,
        "client_cpu_frac": _ratio(result.client_cpu_s, wall_s),
        "loop_lag_ms_p50": result.loop_lag_ms.get("p50", NAN),
        "loop_lag_ms_p99": result.loop_lag_ms.get("p99", NAN),
        "loop_lag_ms_max": result.loop_lag_ms.get("max", NAN),
        "n_cancelled": sum(r.status == "cancelled" for r in records),
        **{f"n_errors_{cls}": sum(r.error_class == cls for r in errors) for cls in ERROR_CLASSES},
        "output_tok_s_ci_low": lo,
        "output_tok_s_ci_high": hi,
        "output_tok_s_se": slices.se,
        "output_tok_s_slices": slices.n,
        "output_tok_s_slice_lag1": slices.lag1,
        "window_wall_s": wall_s,
        "time_scale": time_scale,
        "warmup_requests": result.warmup_records,
        "warmup_s": result.warmup_wall_s * time_scale,
        "end_reason": result.end_reason,
        "server_gone": result.server_gone,
    }


def _client_bound(row: dict[str, Any], time_scale: float) -> bool:
    itl_wall_ms = row["itl_ms_p50"] / time_scale
    lag_limit_ms = LOOP_LAG_FLOOR_MS
    if math.isfinite(itl_wall_ms):
        lag_limit_ms = max(lag_limit_ms, itl_wall_ms)
    # NaN (no lag samples) gives 0 here, and NaN comparisons below are False: no evidence.
    backlog_ms = max(0.0, row["loop_lag_ms_p99"] - LAG_GRANULARITY_MS)
    edge_error = _ratio(2.0 * backlog_ms / 1000.0, row["window_wall_s"])
    return bool(row["client_cpu_frac"] >= CLIENT_CPU_FRAC_MAX
                or row["loop_lag_ms_p50"] > lag_limit_ms
                or edge_error > EDGE_ERROR_MAX)


def _server_disagrees(result: PointResult, server: _ServerView) -> bool:
    before, after = result.metrics_before, result.metrics_after
    if before is None or after is None or not math.isfinite(server.finished_tokens):
        return False
    slack = float(SERVER_SLACK_TOKENS_PER_USER * result.concurrency)
    # SGLang's counter moves when a request finishes: compare with the requests that finished
    # between the scrapes; with hardly any there is nothing to compare (too_few_requests says
    # so).
    ended = [r for r in result.records if r.status == "ok" and before.t < r.t_end <= after.t]
    return not (len(ended) < MIN_REQUESTS or _within(
        server.finished_tokens, float(sum(r.completion_tokens for r in ended)),
        SERVER_TOLERANCE, slack))


def _lockstep_ends(result: PointResult) -> bool:
    start, end = result.window_start, result.window_end
    ends = np.array([r.t_end for r in result.records if _finished_in_window(r, start, end)])
    quiet, burst = end_bursts(ends, start, end)
    min_burst = max(LOCKSTEP_MIN_BURST,
                    LOCKSTEP_BURST_FRACTION * in_flight_mean(result.records, start, end))
    # NaN (no ends) compares False.
    return bool(quiet >= LOCKSTEP_QUIET_MIN and burst >= min_burst)


def _flags(
    result: PointResult, row: dict[str, Any], server: _ServerView, time_scale: float,
    max_running_requests: int | None, error_budget: float,
) -> list[Flag]:
    """The self-check rules (thresholds at the top of this module); each flag's advice says why."""
    c = result.concurrency
    flags: list[Flag] = []
    if _client_bound(row, time_scale):
        flags.append(Flag.CLIENT_BOUND)
    if _server_disagrees(result, server):
        flags.append(Flag.SERVER_DISAGREES)
    if max_running_requests is not None and c > max_running_requests:
        flags.append(Flag.CAPPED_BY_SERVER)
    # Evidence that requests waited for the server, not for the client: a retraction, or a
    # queue that stayed (a request between two batches shows up in a sample or two).
    queue_stayed = (server.samples >= MIN_GAUGE_SAMPLES
                    and server.queued_mean >= max(1.0, QUEUE_FRACTION_MIN * c))
    if (server.retracted > 0 or queue_stayed) and server.running_mean < RUNNING_FRACTION_MIN * c:
        flags.append(Flag.RAN_BELOW_C)
    # More tokens than asked for counts whatever the end: a stream that ignores its cap runs
    # until the window cuts it.
    if any(r.token_mismatch or r.completion_tokens > r.max_tokens or (
            r.status == "ok" and r.finish_reason == "length"
            and r.completion_tokens != r.max_tokens)
           for r in result.records):
        flags.append(Flag.TOKEN_MISMATCH)
    n_requests, n_errors = row["n_requests"], row["n_errors"]
    if n_errors > error_budget * (n_requests + n_errors):
        flags.append(Flag.ERROR_BUDGET)
    if n_requests < MIN_REQUESTS:
        flags.append(Flag.TOO_FEW_REQUESTS)
    if result.window_forced_open:
        flags.append(Flag.WINDOW_FORCED_OPEN)
    if result.warmup_errors > error_budget * max(1, result.warmup_records):
        flags.append(Flag.WARMUP_ERRORS)
    if n_requests >= MIN_REQUESTS and _lockstep_ends(result):
        flags.append(Flag.LOCKSTEP_ENDS)
    return flags


def summarize_point(result: PointResult, time_scale: float, max_running_requests: int | None,
                    error_budget: float, slo: Slo | None = None,
                    frame: pd.DataFrame | None = None) -> dict[str, Any]:
    """The summary row of one point (model time; see the module docstring for definitions).
    An open-loop point adds its columns and latencies of its window's arrivals
    (:func:`specbench.goodput.open_loop_columns`; `frame`: its request rows, if built)."""
    server = _server_view(result, time_scale)
    row = _summary_row(result, time_scale, server)
    if result.request_rate is not None:
        if frame is None:
            frame = requests_frame(result, time_scale)
        arrived = [r for r in result.records
                   if r.request_id in result.window_request_ids and r.status == "ok"]
        itl_ms = (np.concatenate([itl_samples_s(r.chunk_t, r.chunk_tokens) for r in arrived])
                  * time_scale * 1000.0 if arrived else np.empty(0))
        running = np.array([g.values[RUNNING_REQS] for g in result.gauges
                            if RUNNING_REQS in g.values], dtype=float)
        row |= open_loop_columns(result, frame, time_scale, slo, running, itl_ms)
    flags = _flags(result, row, server, time_scale, max_running_requests, error_budget)
    if row.get("behind_schedule"):
        flags.append(Flag.BEHIND_SCHEDULE)
    row["flags"] = ";".join(f.value for f in flags)
    return row
