"""Numbers the scheduler keeps for observers, apart from the state it schedules with.

* :class:`Counters`: what `/metrics` exposes (Prometheus counters, never reset) and SGLang's
  resettable speculative statistics behind `/server_info`'s `avg_spec_accept_length`;
* :class:`LagStats`: how far the simulator fell behind real time, and how late streams wrote
  a forward's tokens (`sim_lag`, `sim_stream_delay` in `/server_info`): large values mean the
  simulator, not the client under test, was the bottleneck;
* :class:`DecodeLogWindow`: the window behind SGLang's periodic "Decode batch" log line, which
  also sets `gen_throughput` and `spec_accept_length`;
* :class:`LoadGauges`: the load gauges of `/metrics` as SGLang last reported them (at a
  prefill, every --decode-log-interval decode steps, and when the server falls idle), not
  live values.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

# Latencies of finished requests waiting for the next /metrics scrape to fold them into the
# histograms; without scrapes only the newest are kept.
LATENCY_SAMPLES = 4096
# A forward that ends later than this after its deadline counts as late.
LATE_FORWARD_S = 0.005


def _latencies() -> deque[float]:
    return deque(maxlen=LATENCY_SAMPLES)


@dataclass
class Counters:
    """Prometheus-style counters (never reset) and SGLang's resettable spec statistics."""

    prompt_tokens: dict[bool, int] = field(default_factory=lambda: {True: 0, False: 0})
    generation_tokens: dict[bool, int] = field(default_factory=lambda: {True: 0, False: 0})
    verify_calls: int = 0
    num_requests: int = 0
    # Requests taken back to the queue because the KV pool was full, and their tokens.
    retracted_requests: int = 0
    retracted_input_tokens: int = 0
    retracted_output_tokens: int = 0
    kv_waits: int = 0  # sim extension: times the head of the queue waited for KV space
    emitted_tokens: int = 0  # sim extension: tokens at emission time (exact, per forward)
    running_seconds: float = 0.0  # sim extension: integral of running requests over model time
    # Since start or the last /flush_cache (SGLang's avg_spec_accept_length).
    spec_decode_tokens: int = 0
    spec_req_steps: int = 0
    # Model seconds, per finished request, until the next scrape.
    e2e_s: deque[float] = field(default_factory=_latencies)
    ttft_s: deque[float] = field(default_factory=_latencies)


@dataclass
class LagStats:
    """How late the simulator ran (real seconds); all but `lag_s` reset on /flush_cache."""

    lag_s: float = 0.0  # of the latest forward
    max_lag_s: float = 0.0
    late_forwards: int = 0
    forwards: int = 0  # never reset
    last_commit_real_s: float = 0.0  # monotonic instant the latest forward's tokens appeared
    # Delay from a forward's commit to the stream write carrying its tokens (handler side).
    stream_delay_sum_s: float = 0.0
    stream_delay_max_s: float = 0.0
    stream_writes: int = 0

    def note_forward_end(self, end_real_s: float, deadline_real_s: float) -> None:
        self.lag_s = max(0.0, end_real_s - deadline_real_s)
        if self.lag_s > LATE_FORWARD_S:
            self.late_forwards += 1
        self.max_lag_s = max(self.max_lag_s, self.lag_s)
        self.last_commit_real_s = end_real_s

    def note_stream_write(self, now_real_s: float) -> None:
        delay = max(0.0, now_real_s - self.last_commit_real_s)
        self.stream_delay_sum_s += delay
        self.stream_delay_max_s = max(self.stream_delay_max_s, delay)
        self.stream_writes += 1

    def reset(self) -> None:
        self.max_lag_s = 0.0
        self.late_forwards = 0
        self.stream_delay_sum_s = self.stream_delay_max_s = 0.0
        self.stream_writes = 0


@dataclass
class DecodeLogWindow:
    """Decode forwards since SGLang's last "Decode batch" line (every --decode-log-interval)."""

    interval: int
    decode_forwards: int = 0  # never reset: the log fires when it is a multiple of interval
    tokens: int = 0
    req_steps: int = 0
    model_start_s: float = 0.0
    # What the latest log line reported; /metrics and /server_info show these.
    last_gen_throughput: float = 0.0
    last_accept_length: float = 0.0

    def add(self, tokens: int, req_steps: int) -> bool:
        """Count one decode forward; return whether the log line is due now."""
        self.tokens += tokens
        self.req_steps += req_steps
        self.decode_forwards += 1
        return self.decode_forwards % self.interval == 0

    def close(self, model_now_s: float, speculative: bool) -> None:
        """Compute the reported rates over the window and start the next one."""
        elapsed = model_now_s - self.model_start_s
        self.last_gen_throughput = self.tokens / elapsed if elapsed > 0 else 0.0
        if speculative:
            self.last_accept_length = self.tokens / self.req_steps if self.req_steps else 0.0
        self.tokens = 0
        self.req_steps = 0
        self.model_start_s = model_now_s


@dataclass
class LoadGauges:
    """What SGLang's scheduler last published for `sglang:num_running_reqs`,
    `sglang:num_queue_reqs`, `sglang:token_usage` and `sglang:num_retracted_reqs`."""

    running: int = 0
    queued: int = 0
    token_usage: float = 0.0  # rounded to 2 decimals, as SGLang does
    retracted: int = 0  # requests retracted between the two latest reports
