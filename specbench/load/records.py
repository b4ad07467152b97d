"""What one point is asked to do and what it gives back: the runner's inputs and outputs.

Plain records, kept apart from the runner (`runner.py`) so that the metrics, the sweep and the
tests can name them without reading the load generator's machinery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from specbench.load.prometheus import MetricsSnapshot
from specbench.load.protocols import BodyOptions
from specbench.prompts import PromptRequest


@dataclass
class LiveView:
    """What a progress display may read while a point runs; the runner's loop writes it a few
    times a second (never on the hot path), a display thread only reads it."""

    concurrency: int = 0
    in_flight: int = 0
    phase: str = "starting"  # starting | warmup | window | done
    window_elapsed_s: float = 0.0  # wall
    window_s: float = 0.0  # wall
    # Output tok/s so far (wall), from the server's token counter: it moves as requests end.
    server_tok_s: float | None = None
    time_scale: float = 1.0  # set by the caller: wall seconds x this = model seconds


@dataclass(frozen=True)
class PointSpec:
    """Everything one point needs; the load generator knows nothing of engines or modes.

    Durations are wall-clock seconds (the caller divides model seconds by the simulator's time
    scale).
    """

    base_url: str
    protocol: str
    model: str
    concurrency: int
    requests: Sequence[PromptRequest]
    warmup_s: float
    window_s: float
    window_max_requests: int | None = None
    # Closed loop, one client process: past window_s the window stays open until this many
    # requests have finished in it, or until window_max_s (wall) has passed since it opened.
    # None, or a cap not above window_s: it ends at window_s. Where every request has the same
    # max_tokens and warmup_min_requests is set, it then waits for a round's edge, under the
    # same cap (runner.py: a lockstep loop's window of whole cycles).
    window_min_requests: int | None = None
    window_max_s: float | None = None
    request_timeout_s: float = 600.0
    temperature: float = 0.0
    api_key: str | None = field(default=None, repr=False)
    scrape_metrics: bool = True
    # Steady state: after warmup_s, keep warming until this many requests have ended (about
    # one per user), so the window does not measure the cold-start prefill wave; but never
    # longer than warmup_max_s in all.
    warmup_min_requests: int = 0
    # Test knob: CPU burnt per network read, to plant a slow client (tests of the
    # client_bound flag and of the regression gate). Zero in every real measurement.
    planted_read_delay_us: float = 0.0
    warmup_max_s: float | None = None
    # Wall seconds of nothing but connect/server_gone failures after which the server is
    # considered dead and the point ends.
    dead_server_s: float = 3.0
    # What every body gets beyond its row (--extra-request-body, --ignore-eos, the renderer).
    body: BodyOptions = field(default_factory=BodyOptions)
    # A progress display's view of the point (see LiveView); None: nobody is watching.
    live: LiveView | None = field(default=None, compare=False, repr=False)
    # Open loop (load/arrivals.py): requests per wall second (inf: a burst); None: closed loop,
    # `concurrency` users. Gaps are gamma with shape `burstiness` (1: Poisson); at most
    # `max_concurrency` in flight; at rate inf `burst_requests` at once; the window's requests
    # are followed for at most `drain_max_s` after it.
    request_rate: float | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None
    burst_requests: int = 0
    arrival_seed: int = 0
    drain_max_s: float = 30.0


@dataclass(frozen=True, eq=False)
class RequestRecord:
    """One request as the client saw it. Times are monotonic seconds (wall clock).

    ``chunk_t``/``chunk_tokens`` are parallel arrays: arrival time and cumulative completion
    tokens reported by the server; they carry all token timing (several tokens may share one
    chunk under speculative decoding).
    """

    request_id: int
    user: int
    prompt_id: str
    category: str
    max_tokens: int
    t_send: float
    t_first_token: float | None
    t_end: float
    # repr=False: asyncio.run (3.11) reprs the finished task's result; arrays make that slow.
    chunk_t: np.ndarray = field(repr=False)
    chunk_tokens: np.ndarray = field(repr=False)
    prompt_tokens: int | None
    completion_tokens: int
    spec_verify_ct: int | None
    status: str  # ok | cancelled | error
    error_class: str | None
    error_detail: str | None
    finish_reason: str | None
    http_status: int | None
    n_chunks: int  # SSE events, [DONE] included
    n_reads: int  # network reads that carried them
    token_mismatch: bool  # final usage disagreed with the last streamed cumulative count


@dataclass(frozen=True, eq=False)
class PointResult:
    # Every request alive at any moment of the window. repr=False: see RequestRecord.
    records: list[RequestRecord] = field(repr=False)
    window_start: float
    window_end: float
    warmup_records: int  # requests that ended before the window opened (not kept, not parsed)
    warmup_errors: int  # of those, transport-level failures (connect, HTTP status, timeout...)
    client_cpu_s: float  # process CPU time (user + system) spent inside the window
    loop_lag_ms: dict[str, float]  # p50, p99, max oversleep of a 10 ms probe in the window
    metrics_before: MetricsSnapshot | None
    metrics_after: MetricsSnapshot | None
    server_gone: bool
    concurrency: int
    protocol: str
    # window_s | window_max_requests | window_min_requests (held open until enough finished) |
    # round_end (equal caps: held to the phase it opened at) | max_window_s (held open, capped)
    # | server_gone | drained (open loop)
    end_reason: str
    # The window opened although not all users were in flight (failures kept some idle).
    window_forced_open: bool = False
    # Scrapes of the server's load gauges through the window (see GAUGES).
    gauges: list[MetricsSnapshot] = field(default_factory=list, repr=False)
    # Wall seconds from the point's start to the window's opening (the warmup as it ran).
    warmup_wall_s: float = float("nan")
    # Open loop only: the asked rate (per wall second), the requests that arrived in the
    # window, how late the client sent them against the schedule (p50, p99, max), and how many
    # had not ended when the drain did.
    request_rate: float | None = None
    window_arrivals: int = 0
    window_request_ids: frozenset[int] = frozenset()
    arrival_lag_ms: dict[str, float] = field(default_factory=dict)
    unfinished: int = 0

    @property
    def window_wall_s(self) -> float:
        return self.window_end - self.window_start
