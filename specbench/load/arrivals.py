"""Open-loop load for one point: requests arrive on a schedule, not when a user is free.

:func:`run_open_point` sends requests at ``request_rate`` per second whatever the server does:
a slow server makes requests pile up, as in production, instead of slowing the senders down
(the closed loop, :mod:`specbench.load.runner`). Gaps between arrivals are gamma distributed
with shape ``burstiness`` and mean 1 / rate, vLLM's definition: 1 is a Poisson process, below 1
burstier, above 1 steadier. ``max_concurrency`` (optional) caps the requests in flight: an
arrival past the cap waits for one to end, as SGLang's bench_serving and vLLM do.

Timeline (wall seconds, ``time.monotonic()``)::

    start ── warmup: arrivals at the rate, for warmup_s; then until a request has ended and a
             │       first token came after that moment (a first-use compile holds every
             │       token, so the server answers at its own pace again), at most warmup_max_s
             ├─ window: exactly round(rate x window_s) arrivals, tokens counted as in the closed
             │          loop; at rate inf, burst_requests all at once, and the window ends
             │          with the last of them (at most window_s + drain_max_s)
             └─ drain: arrivals go on (the load stays) until every request sent in the window
                       has ended, at most drain_max_s; then the rest is cancelled.

The window's arrival times are a renewal process conditioned on its count: N + 1 gamma gaps
scaled so that the (N+1)-th lands on the window's end (for Poisson, N uniform order statistics,
which is the Poisson process given N). So the achieved rate measures the client keeping the
schedule, not the dice, and every configuration gets the same arrival times (one seed).

The client never waits for the server before sending (unless ``max_concurrency`` says so) and
checks that it kept the schedule: each window arrival's lag (dispatch time minus scheduled time)
is recorded, and a point whose median lag is above a small share of the mean gap is flagged
(:mod:`specbench.metrics`). Requests go over a pool of keep-alive HTTP/1.1 connections, one per
request in flight, so the per-chunk hot path is the closed loop's.
"""

from __future__ import annotations

import asyncio
import math
import time

import aiohttp
import numpy as np

from specbench.load.flights import Flight
from specbench.load.prometheus import MetricsSnapshot
from specbench.load.records import PointResult, PointSpec, RequestRecord
from specbench.load.runner import (
    LoadError,
    _percentiles_ms,
    _Point,
    _validate,
    _wait_any,
    raise_fd_limit,
)

__all__ = ["gamma_gaps_s", "run_open_point", "run_open_point_sync", "window_offsets_s"]

_POLL_S = 0.005
# Sockets to make room for when no cap bounds the requests in flight.
_OPEN_FD_FLOOR = 1024


def gamma_gaps_s(rate: float, burstiness: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` gaps (s) between arrivals at `rate` per second, gamma with shape `burstiness`."""
    return rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)


def window_offsets_s(rate: float, burstiness: float, window_s: float,
                     rng: np.random.Generator) -> np.ndarray:
    """Arrival times in (0, window_s): exactly round(rate x window_s) of them (at least one)."""
    n = max(1, round(rate * window_s))
    ends = np.cumsum(rng.gamma(shape=burstiness, scale=1.0, size=n + 1))
    return ends[:-1] / ends[-1] * window_s


class _OpenPoint(_Point):
    """The closed loop's point, with arrivals instead of users: the window edges, sending,
    accounting, self-checks and records are shared (runner._Point)."""

    def __init__(self, spec: PointSpec, session: aiohttp.ClientSession) -> None:
        super().__init__(spec, session)
        rate = spec.request_rate
        assert rate is not None
        self.rate = rate
        # The window's arrivals have a generator of their own: however long each server's
        # warmup ran, every configuration's window gets the same arrival times.
        self.arrival_rng = np.random.default_rng([spec.arrival_seed, 0])
        self.window_rng = np.random.default_rng([spec.arrival_seed, 1])
        self.conns = []
        self.current = []
        self.idle: list[int] = []  # connection slots free for the next request
        self.cap = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else None
        self.next_id = 0
        self.after_warmup = 0  # arrivals since the window opened
        self.window_flights: list[Flight] = []
        self.window_done = 0  # of those, ended (the drain waits for all)
        self.lags_s: list[float] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.first_token_after: float | None = None
        self.all_ended = asyncio.Event()

    # -- arrivals ------------------------------------------------------------------------
    def dispatch(self, t_scheduled: float, in_window: bool) -> None:
        """Send the next arrival. The window's k-th arrival is prompt k on every server (the
        warmup's length varies by server: its prompts come from the end of the order)."""
        lag = time.monotonic() - t_scheduled
        n = len(self.requests)
        if in_window or self.window_start is not None:  # the window's, then the drain's
            prompt = self.after_warmup % n
            self.after_warmup += 1
        else:
            prompt = (n - 1 - self.next_id) % n
        flight = Flight(self.next_id, -1, prompt)
        self.next_id += 1
        if in_window:
            flight.in_window = True
            self.window_flights.append(flight)
            self.lags_s.append(lag)
        task = asyncio.create_task(self.request(flight))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def request(self, flight: Flight) -> None:
        if self.cap is not None:
            await self.cap.acquire()
        try:
            if self.idle:
                flight.user = self.idle.pop()
                self.current[flight.user] = flight
            else:
                flight.user = len(self.conns)
                self.conns.append(None)
                self.current.append(flight)
            await self.send(flight)
            self.current[flight.user] = None
            self.idle.append(flight.user)
            self.finish(flight)
            if flight.in_window:
                self.window_done += 1
                if self.window_ended():
                    self.all_ended.set()
        finally:
            if self.cap is not None:
                self.cap.release()

    async def arrive(self) -> None:
        """Dispatch every arrival on time: warmup, window, then drain, one schedule."""
        spec, loop = self.spec, asyncio.get_running_loop()
        finite = math.isfinite(self.rate)
        # At rate inf the warmup spreads the burst over one window.
        warm_rate = self.rate if finite else spec.burst_requests / spec.window_s
        t = loop.time()
        while not self.opened.is_set():
            t += float(gamma_gaps_s(warm_rate, spec.burstiness, 1, self.arrival_rng)[0])
            await _wait_any([self.opened, self.closing], max(0.0, t - loop.time()))
            if self.opened.is_set() or self.closing.is_set():
                break
            self.dispatch(t, in_window=False)
        if self.closing.is_set() and self.window_start is None:
            return
        assert self.window_start is not None
        if not finite:
            for _ in range(spec.burst_requests):
                self.dispatch(self.window_start, in_window=True)
            return
        offsets = window_offsets_s(self.rate, spec.burstiness, spec.window_s, self.window_rng)
        for t in self.window_start + offsets:
            await asyncio.sleep(max(0.0, t - loop.time()))
            self.dispatch(float(t), in_window=True)
        t = self.window_start + spec.window_s
        while True:  # drain: the load stays while the window's requests finish
            t += float(gamma_gaps_s(self.rate, spec.burstiness, 1, self.arrival_rng)[0])
            await asyncio.sleep(max(0.0, t - loop.time()))
            self.dispatch(t, in_window=False)

    def window_cap_s(self) -> float:
        """A burst's window ends when its last request does, at most a drain after window_s."""
        spec = self.spec
        return spec.window_s if math.isfinite(self.rate) else spec.window_s + spec.drain_max_s

    def window_ended(self) -> bool:
        """Whether every request of the window has been sent and has ended."""
        all_sent = self.window_end is not None or not math.isfinite(self.rate)
        return all_sent and self.window_done == len(self.window_flights) > 0

    def saw_first_token_since(self, since: float) -> bool:
        """Whether a request has had its first bytes after `since`."""
        return any(f is not None and f.times and f.times[0] > since for f in self.current) or (
            self.first_token_after is not None and self.first_token_after > since)

    def finish(self, flight: Flight) -> None:
        if flight.times and (self.first_token_after is None
                             or flight.times[0] > self.first_token_after):
            self.first_token_after = flight.times[0]
        super().finish(flight)

    # -- the point ------------------------------------------------------------------------
    async def warm_up(self) -> None:
        spec = self.spec
        t_start = self.t_start = time.monotonic()
        deadline = t_start + (spec.warmup_max_s if spec.warmup_max_s is not None else math.inf)
        await _wait_any([self.closing], spec.warmup_s)
        while not self.closing.is_set() and self.warmup_records < 1 \
                and time.monotonic() < deadline:
            await asyncio.sleep(_POLL_S)
        cutoff = time.monotonic()
        while not self.closing.is_set() and not self.saw_first_token_since(cutoff) \
                and time.monotonic() < deadline:
            await asyncio.sleep(_POLL_S)

    async def run(self) -> tuple[MetricsSnapshot | None, MetricsSnapshot | None]:
        spec = self.spec
        arrivals = asyncio.create_task(self.arrive())
        background = [arrivals, asyncio.create_task(self.probe_lag())]
        if spec.live is not None:
            background.append(asyncio.create_task(self.publish_live(spec.live)))
        before = after = None
        try:
            await self.warm_up()
            self.open_window()
            sampler = None
            if spec.scrape_metrics and not self.closing.is_set():
                before = self.first_scrape = await self.scrape()
                sampler = asyncio.create_task(self.sample_gauges())
            if not math.isfinite(self.rate):  # the burst's window ends when the burst does
                await _wait_any([self.all_ended, self.closing], None)
                self.close("drained")
            await self.closing.wait()
            if sampler is not None:
                await sampler
            if spec.scrape_metrics and not self.server_gone:
                after = await self.scrape()
            if not self.server_gone and not self.window_ended():
                await _wait_any([self.all_ended], spec.drain_max_s)
        finally:
            for task in [*background, *self.tasks]:
                task.cancel()
            await asyncio.gather(*background, *self.tasks, return_exceptions=True)
            if spec.live is not None:
                spec.live.phase = "done"
            self.kept.extend(f for f in self.current if f is not None)
            for conn in self.conns:
                if conn is not None and conn.transport is not None:
                    conn.transport.close()
            await asyncio.sleep(0)
        return before, after

    def records(self) -> list[RequestRecord]:
        """Every request alive in the window, and every request sent in it followed to its end
        (or to the drain's end): latencies and goodput are of the requests that arrived in the
        window."""
        window_end = self.window_end if self.window_end is not None else float("inf")
        out = []
        for flight in sorted(self.kept, key=lambda f: f.request_id):
            if flight.t_send == 0.0:  # waited for --max-concurrency, never sent
                continue
            if flight.t_send < window_end or flight.in_window:
                request = self.spec.requests[flight.prompt_index]
                out.append(flight.record(request, self.protocol, 0))
        return out


def _validate_open(spec: PointSpec) -> None:
    rate = spec.request_rate
    if rate is None or not rate > 0:
        raise LoadError(f"request rate {rate} must be > 0 (or inf); give e.g. --request-rates 2,8")
    if not spec.burstiness > 0:
        raise LoadError(f"burstiness {spec.burstiness} must be > 0; 1 is Poisson")
    if not math.isfinite(rate) and spec.burst_requests < 1:
        raise LoadError("rate inf sends burst_requests at once; it must be at least 1")
    if spec.max_concurrency is not None and spec.max_concurrency < 1:
        raise LoadError("--max-concurrency must be at least 1 (or unset)")


async def run_open_point(spec: PointSpec) -> PointResult:
    """Measure one open-loop point; see the module docstring. Never raises on a bad response."""
    _validate(spec)
    _validate_open(spec)
    raise_fd_limit(max(spec.max_concurrency or _OPEN_FD_FLOOR, spec.burst_requests))
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        point = _OpenPoint(spec, session)
        before, after = await point.run()
    sent = point.window_flights
    return point.result(
        before, after,
        request_rate=spec.request_rate,
        window_arrivals=len(sent),
        window_request_ids=frozenset(f.request_id for f in sent),
        arrival_lag_ms=_percentiles_ms(point.lags_s),
        unfinished=sum(f.t_send == 0.0 or f.status == "cancelled" for f in sent),
    )


def run_open_point_sync(spec: PointSpec) -> PointResult:
    """:func:`run_open_point` for callers without an event loop."""
    return asyncio.run(run_open_point(spec))
