"""Closed-loop load for one measured point: users, warmup, window, cancellation, self-checks.

:func:`run_point` drives ``c`` persistent users against one base URL. Each user sends its next
request (taken from one shared cursor over the ordered request list, cycling) as soon as the
last one ends, so the server sees ``c`` requests at all times. Each user streams
over its own keep-alive HTTP/1.1 connection (:mod:`specbench.load.http1`); aiohttp only scrapes
``/metrics``.

Timeline of a point (all times ``time.monotonic()``, the clock the simulator also uses)::

    start ── warmup_s ──┬─ window opens when warmup is over AND all c users are in flight
                        │  (scrape /metrics, note client CPU)
                        │  warmup is over after warmup_s, about one request per user, and
                        │  once the requests then in flight have had their first bytes
                        │  (see _Point.answering), or at warmup_max_s
                        └─ window closes after window_s or window_max_requests finished
                           (scrape /metrics again, note client CPU), then every request
                           still running is cancelled; its tokens inside the window count.
                           With window_min_requests, a window holding fewer finished
                           requests at window_s stays open until the one that makes them
                           enough ends, or until window_max_s: either way a cut at one
                           instant, as the metrics need (tok/s over the window's edges).
                           With every request capped alike, it then closes on a round's
                           edge instead (see below).

Equal output caps make a closed loop periodic: the users' requests end in one wave, are
prefilled again together and decode together, and the server's output rate swings over that
cycle (4.3 GPU-s at c = 250 on the simulated H200 with 256-word prompts and 128 tokens). The
warmup ends at a fixed phase of it (once the wave's first tokens are in), so a window of n
cycles and a fraction counts the phase that fraction covers n + 1 times and the rest n times: a
20-s window there read 6% over the server's rate over whole cycles (a +9% against
SGLang's own client). Such a window closes where it opened in the cycle instead: the warmup's
count was met at the N-th end; past window_s the runner waits for the (N + kc)-th end (k >= 1:
whole rounds of c ends), then for the requests in flight at that end to answer, as the warmup
did. Without a cycle this costs about half a request's time and a first token; with one, the
window is whole cycles.

A first use stalls a fresh server: SGLang with FlashInfer compiles a kernel (its cascade module)
the first time a prefill hits the prefix cache, and no request gets a token for seconds. The
warmup waits that out instead of measuring it (:meth:`_Point.answering`); a compile set off
inside the window by a later first hit is caught after the point (specbench.run.verdicts.stalled)
and the point measured again.

The per-chunk hot path is one clock read and two list appends (the raw bytes and their
arrival time). Streams are parsed by :mod:`specbench.load.protocols` after the point is over,
outside the measured window: lab/notes/benchmarks.md has the numbers that chose this.

The runner never raises on a bad response. Each failure is classified (see
``protocols.ERROR_CLASSES``) and counted, and the users keep going, but not in a tight loop: a
user whose request failed waits before its next one, 0.1 s doubling to 2 s with jitter, and
a request that succeeds resets the wait (docs/errors.md). A server answering 500 at once would
otherwise get thousands of requests a second per user. When for ``dead_server_s`` nothing but
connection failures came back, the server is gone: the point ends early with
``server_gone=True`` so the caller can stop the sweep instead of spinning.

The runner also watches itself: client CPU time over the window and the event-loop lag (how
late a 10 ms sleep wakes up), so a point limited by the harness rather than the server can be
flagged (:mod:`specbench.metrics`).
"""

from __future__ import annotations

import asyncio
import gc
import random
import resource
import time
from typing import Any, Protocol

import aiohttp
import numpy as np

from specbench.errors import UserError
from specbench.load import http1
from specbench.load.flights import Flight
from specbench.load.prometheus import GAUGES, GEN_TOKENS, MetricsSnapshot, parse_prometheus
from specbench.load.protocols import get_protocol
from specbench.load.records import LiveView, PointResult, PointSpec, RequestRecord

__all__ = ["LiveView", "LoadError", "MetricsSnapshot", "PointResult", "PointSpec",
           "RequestRecord", "parse_prometheus", "raise_fd_limit", "run_point", "run_point_sync"]

_LAG_PROBE_S = 0.010
# How often the end of the warmup asks whether the server answers at its own pace, and how
# close to the warmup's count a request must be sent to count as sent on it (the user sends its
# next request in the same event-loop step as the one that ended).
_ANSWERING_POLL_S = 0.005
_SAME_MOMENT_S = 0.001
# The load gauges are sampled through the window: about sixteen scrapes, at most twenty a second.
_GAUGE_SAMPLES = 16
_GAUGE_MIN_INTERVAL_S = 0.05
# A user whose connection was refused waits this long before trying again: the server cannot
# take requests anyway, and 1000 users retrying in a tight loop would only burn the CPU.
_CONNECT_BACKOFF_S = 0.1
# A user whose request failed otherwise (an HTTP error status, a timeout, a stream cut short)
# waits FAILURE_BACKOFF_S, doubled after each further failure up to FAILURE_BACKOFF_MAX_S, and
# "equal jitter" (half of it fixed, half random) so users that failed together do not come back
# together. SGLang answers 503/429 when it is overloaded and 500 on errors, often at once: the
# doubling gives a loaded server room and keeps a broken one under one request per user per
# second after the first few seconds. One success resets the wait.
FAILURE_BACKOFF_S = 0.1
FAILURE_BACKOFF_MAX_S = 2.0
_LIVE_INTERVAL_S = 0.5  # the display redraws twice a second (run/progress.py)
_SCRAPE_TIMEOUT_S = 10.0
_FD_HEADROOM = 64
_DETAIL_CHARS = 200
_SSE_TYPE = "text/event-stream"


class LoadError(UserError, ValueError):
    """A point that cannot be run as specified; the message names the cause and the fix."""


def full_backoff_s(failures: int) -> float:
    """The backoff before jitter after a user's `failures`-th failed request in a row."""
    return min(FAILURE_BACKOFF_MAX_S, FAILURE_BACKOFF_S * 2.0 ** min(failures - 1, 30))


def failure_backoff_s(failures: int, rng: random.Random) -> float:
    """The wait after a user's `failures`-th failed request in a row (see FAILURE_BACKOFF_S):
    between half of the full backoff and all of it."""
    full = full_backoff_s(failures)
    return full / 2 + rng.uniform(0.0, full / 2)


def raise_fd_limit(concurrency: int) -> None:
    """Make room for one socket per user: raise the soft RLIMIT_NOFILE up to the hard one."""
    need = concurrency + _FD_HEADROOM
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise LoadError(
                f"concurrency {concurrency} needs about {need} open files but the limit is "
                f"{hard}; raise it (ulimit -n {need}, or the hard limit in limits.conf) or lower "
                "the concurrency"
            )
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _validate(spec: PointSpec) -> None:
    get_protocol(spec.protocol)
    if spec.request_rate is None and spec.concurrency < 1:
        raise LoadError(f"concurrency {spec.concurrency} must be at least 1")
    if not spec.requests:
        raise LoadError("the request list is empty; load a prompt set with at least one prompt")
    if spec.window_s <= 0 or spec.warmup_s < 0:
        raise LoadError("window_s must be > 0 and warmup_s >= 0; fix the [load] values")
    if spec.window_max_requests is not None and spec.window_max_requests < 1:
        raise LoadError("window_max_requests must be at least 1 (or unset)")
    if spec.window_min_requests is not None and spec.window_min_requests < 1:
        raise LoadError("window_min_requests must be at least 1 (or unset)")
    if spec.request_timeout_s <= 0:
        raise LoadError("request_timeout_s must be > 0; fix the [load] value")
    if not spec.base_url.startswith(("http://", "https://")):
        raise LoadError(f"base URL {spec.base_url!r} must start with http:// or https://")


def _percentiles_ms(samples: list[float]) -> dict[str, float]:
    if not samples:
        nan = float("nan")
        return {"p50": nan, "p99": nan, "max": nan}
    arr = np.asarray(samples) * 1000.0
    return {"p50": float(np.percentile(arr, 50)), "p99": float(np.percentile(arr, 99)),
            "max": float(arr.max())}


class Gate(Protocol):
    """What a point run by one of several client processes asks its coordinator (procs.py)."""

    def take_id(self) -> int: ...
    async def open(self, point: _Point) -> None: ...
    def finished(self) -> None: ...
    def gone(self) -> None: ...
    async def released(self) -> None: ...


class _Point:
    """State of one running point; methods run on one event loop, so no locks are needed."""

    def __init__(self, spec: PointSpec, session: aiohttp.ClientSession,
                 gate: Gate | None = None) -> None:
        self.spec = spec
        # With several client processes (procs.py) the gate says when the window opens and
        # closes, hands out request ids and numbers this process's users.
        self.gate = gate
        self.user_offset = 0
        self.session = session
        self.protocol = get_protocol(spec.protocol)
        self.headers = {"Content-Type": "application/json"}
        if spec.api_key:
            self.headers["Authorization"] = f"Bearer {spec.api_key}"
        # Requests are encoded once (head and body); the hot path sends ready bytes.
        self.endpoint = http1.Endpoint(spec.base_url, self.protocol.path, self.headers)
        self.requests = [
            self.endpoint.request(self.protocol.encode(r, spec.model, spec.temperature, spec.body))
            for r in spec.requests]
        self.conns: list[http1.Connection | None] = [None] * spec.concurrency
        self.read_delay_s = spec.planted_read_delay_us / 1e6
        self.cursor = 0
        self.in_flight = 0
        self.warm = False
        self.window_start: float | None = None
        self.window_end: float | None = None
        self.cpu_start = 0.0
        self.cpu_end = 0.0
        self.window_forced_open = False
        # Held open for finished requests: closed loop in one process only (procs.py's
        # coordinator ends a split point's window at window_s itself; an open loop's window is
        # its arrivals), and only where the cap leaves room past window_s.
        self.min_requests: int | None = None
        if (spec.window_min_requests is not None and spec.window_max_s is not None
                and spec.window_max_s > spec.window_s and gate is None
                and spec.request_rate is None):
            self.min_requests = spec.window_min_requests
        self.held_open = False  # past window_s, waiting for min_requests
        # Closed loop in one process, steady-state warmup, room past window_s and one output cap
        # for every request: the window closes on a round's edge (module docstring).
        self.rounds = (gate is None and spec.request_rate is None
                       and spec.warmup_min_requests > 0 and spec.window_max_s is not None
                       and spec.window_max_s > spec.window_s
                       and len({r.max_tokens for r in spec.requests}) == 1)
        self.ends_since_count = 0  # requests ended since the warmup's count was met
        self.round_due = False  # the window may close at the next round's edge
        self.round_close: asyncio.Task[None] | None = None
        self.answered = False  # the warmup ended on its count and answers, not on its cap
        self.opened = asyncio.Event()
        self.warm_enough = asyncio.Event()
        if spec.warmup_min_requests <= 0:
            self.warm_enough.set()
        self.closing = asyncio.Event()
        self.end_reason = "window_s"
        self.kept: list[Flight] = []
        self.current: list[Flight | None] = [None] * spec.concurrency
        self.t_count_met = 0.0  # when warmup_min_requests had ended (see answering())
        self.t_start = 0.0
        self.finished_in_window = 0
        self.warmup_records = 0
        self.warmup_errors = 0
        self.server_seen = False
        self.dead_since: float | None = None
        self.server_gone = False
        self.rng = random.Random()  # the backoff's jitter
        self.lag_samples: list[float] = []
        self.gauges: list[MetricsSnapshot] = []
        self.first_scrape: MetricsSnapshot | None = None

    # -- window edges -------------------------------------------------------------------
    def open_window(self, forced: bool = False, at: float | None = None) -> None:
        if self.window_start is not None or self.closing.is_set():
            return
        # What exists now (prompts, the warmup's flights) is kept out of the window's garbage
        # collections: an open loop's warmup leaves more of it, and traversing it put the open
        # loop's CPU per chunk 11% above the closed loop's at 1,024 in flight (benchmarks/).
        gc.freeze()
        self.window_start = time.monotonic() if at is None else at
        self.cpu_start = time.process_time()
        self.window_forced_open = forced
        self.opened.set()
        # A window that did not open on the warmup's answers has no phase to close on.
        self.rounds = self.rounds and self.answered and not forced
        loop = asyncio.get_running_loop()
        # loop.time() is time.monotonic(), so the deadline is exact on the same clock.
        if self.min_requests is None and not self.rounds:
            loop.call_at(self.window_start + self.window_cap_s(), self.close, "window_s")
        else:
            loop.call_at(self.window_start + self.spec.window_s, self.window_s_passed)
            loop.call_at(self.window_start + self.window_cap_s(), self.close, "max_window_s")

    def window_cap_s(self) -> float:
        """The longest the window may stay open (wall seconds)."""
        if (self.min_requests is not None or self.rounds) and self.spec.window_max_s is not None:
            return self.spec.window_max_s
        return self.spec.window_s

    def window_s_passed(self) -> None:
        """At window_s: close, unless fewer than min_requests have finished in the window; then
        the request that makes them enough closes it as it ends (finish), or the cap does."""
        if self.closing.is_set():
            return
        if self.min_requests is None or self.finished_in_window >= self.min_requests:
            self.window_filled("window_s")
            return
        self.held_open = True
        self.show_cap()

    def window_filled(self, reason: str) -> None:
        """The window holds enough: close now, or at the next round's edge (rounds)."""
        if not self.rounds:
            self.close(reason)
            return
        self.round_due = True
        self.show_cap()

    def show_cap(self) -> None:
        if self.spec.live is not None:  # the display's "window x/y s" counts to the cap
            self.spec.live.window_s = self.window_cap_s()

    def round_edge(self) -> None:
        """A round of c ends is complete: close once the requests now in flight answer."""
        cutoff = time.monotonic()
        self.round_due = False
        self.round_close = asyncio.get_running_loop().create_task(
            self.close_answered(cutoff))

    async def close_answered(self, cutoff: float) -> None:
        await self.wait_answering(None, cutoff)
        self.close("round_end")

    def close(self, reason: str, at: float | None = None) -> None:
        if self.closing.is_set():
            return
        now = time.monotonic() if at is None else at
        if self.window_start is None:  # ended before the window could open
            self.window_start = now
            self.cpu_start = time.process_time()
        self.window_end = now
        self.cpu_end = time.process_time()
        gc.unfreeze()  # collectable again once the point lets go of it
        self.end_reason = reason
        self.closing.set()

    # -- users --------------------------------------------------------------------------
    async def user(self, user: int) -> None:
        n_prompts = len(self.requests)
        failures = 0  # this user's failed requests since its last success
        while not self.closing.is_set():
            if self.gate is None:
                request_id = self.cursor
                self.cursor += 1
            else:
                request_id = self.gate.take_id()
            flight = Flight(request_id, user, request_id % n_prompts)
            self.current[user] = flight
            await self.send(flight)
            self.current[user] = None
            self.finish(flight)
            if flight.error_class in ("connect", "server_gone"):
                await asyncio.sleep(_CONNECT_BACKOFF_S)
            elif flight.ended_cleanly():
                failures = 0
            else:
                failures += 1
                await asyncio.sleep(failure_backoff_s(failures, self.rng))

    async def send(self, flight: Flight) -> None:
        self.in_flight += 1
        if (self.warm and self.in_flight == self.spec.concurrency and self.window_start is None
                and self.gate is None):
            self.open_window()
        flight.t_send = time.monotonic()
        response = http1.Response(asyncio.get_running_loop().create_future())
        flight.times, flight.reads = response.times, response.pieces
        conn = self.conns[flight.user]
        try:
            async with asyncio.timeout(self.spec.request_timeout_s):
                if conn is None or not conn.reusable or conn.transport is None \
                        or conn.transport.is_closing():
                    async with asyncio.timeout(min(self.spec.request_timeout_s, 30.0)):
                        conn = await http1.connect(self.endpoint, self.read_delay_s)
                    self.conns[flight.user] = conn
                conn.start(self.requests[flight.prompt_index], response)
                await response.done
            flight.http_status = response.status
            if response.status != 200:
                body = b"".join(response.pieces)[:_DETAIL_CHARS]
                flight.error_class = "http_status"
                flight.error_detail = (f"HTTP {response.status}: "
                                       + body.decode("utf-8", "replace"))
            elif response.content_type and not response.content_type.startswith(_SSE_TYPE):
                # SGLang streams every route as text/event-stream; anything else is another
                # server on the port (a proxy's page, a non-streaming API).
                body = b"".join(response.pieces)[:_DETAIL_CHARS]
                flight.error_class = "malformed_chunk"
                flight.error_detail = (f"HTTP 200 {response.content_type}, not an event stream: "
                                       + body.decode("utf-8", "replace"))
        except asyncio.CancelledError:
            flight.status = "cancelled"
            if conn is not None:
                conn.abort()
            raise
        except TimeoutError:
            flight.error_class = "timeout"
            flight.error_detail = f"no complete response within {self.spec.request_timeout_s:g} s"
            if conn is not None:
                conn.abort()
        except http1.ConnectFailed as exc:
            flight.error_class = "server_gone" if self.server_seen else "connect"
            flight.error_detail = str(exc)[:_DETAIL_CHARS]
        except http1.Truncated as exc:
            flight.error_class = "stream_truncated"
            flight.error_detail = str(exc)[:_DETAIL_CHARS]
        except (http1.Disconnected, OSError) as exc:
            flight.error_class = "server_gone"
            flight.error_detail = str(exc)[:_DETAIL_CHARS] or type(exc).__name__
        except Exception as exc:  # never let one bad response end the point
            flight.error_class = "malformed_chunk"
            flight.error_detail = f"{type(exc).__name__}: {exc}"[:_DETAIL_CHARS]
        finally:
            flight.t_end = time.monotonic()
            if response.status:
                self.server_seen = True
                flight.http_status = response.status
            self.in_flight -= 1

    def finish(self, flight: Flight) -> None:
        """Account for a request that ended (not cancelled)."""
        if self.t_count_met > 0:
            self.ends_since_count += 1
        if self.window_start is None:
            # Ended before the window: warmup, unmeasured; its bytes are dropped here.
            self.warmup_records += 1
            self.warmup_errors += flight.error_class is not None
            if self.warmup_records >= self.spec.warmup_min_requests and \
                    not self.warm_enough.is_set():
                self.t_count_met = time.monotonic()
                self.warm_enough.set()
        elif not self.closing.is_set():
            self.kept.append(flight)
            if flight.ended_cleanly():
                self.finished_in_window += 1
                if self.gate is not None:
                    self.gate.finished()
                    return
                limit = self.spec.window_max_requests
                if limit is not None and self.finished_in_window >= limit:
                    self.close("window_max_requests")
                elif self.held_open and self.min_requests is not None \
                        and self.finished_in_window >= self.min_requests:
                    self.held_open = False
                    self.window_filled("window_min_requests")
            if (self.round_due and not self.closing.is_set()
                    and self.ends_since_count % self.spec.concurrency == 0):
                self.round_edge()
        else:
            self.kept.append(flight)  # ended between the close and the cancellation
        self.watch_server(flight)

    def watch_server(self, flight: Flight) -> None:
        cls = flight.error_class
        if cls in ("connect", "server_gone"):
            if self.dead_since is None:
                self.dead_since = flight.t_end
            elif flight.t_end - self.dead_since >= self.spec.dead_server_s:
                self.server_gone = True
                self.close("server_gone")
                if self.gate is not None:
                    self.gate.gone()
        elif cls in (None, "http_status", "malformed_chunk"):
            self.dead_since = None  # the server answered

    def answering(self, cutoff_s: float | None = None) -> bool:
        """Whether the requests in flight when the warmup's count was reached (and the one
        sent on that request's end) have had their first bytes; with `cutoff_s`, those in
        flight at that instant (a round's edge, for the window's close).

        A first-use compile in SGLang (FlashInfer's cascade kernel at the first prefix-cache
        hit, a kernel for a shape not seen yet) runs when a prefill is scheduled and holds every
        request, and the request that set it off waits for its first token all the while: at
        c=1 that is the second request, sent as the first one ends. Waiting for exactly those
        requests, chosen by the order of events and not by the moment the check runs, costs
        about one time-to-first-token without a stall and keeps windows of servers measured
        with the same prompts on the same requests.
        """
        cutoff = (self.t_count_met if cutoff_s is None else cutoff_s) + _SAME_MOMENT_S
        return all(flight is None or flight.t_send > cutoff or bool(flight.times)
                   for flight in self.current)

    async def wait_answering(self, deadline: float | None, cutoff_s: float | None = None
                             ) -> None:
        """Poll :meth:`answering` until it holds, the point closes or `deadline` passes."""
        while not self.closing.is_set() and not self.answering(cutoff_s):
            if deadline is not None and time.monotonic() >= deadline:
                return
            await asyncio.sleep(_ANSWERING_POLL_S)

    # -- self-checks --------------------------------------------------------------------
    async def probe_lag(self) -> None:
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(_LAG_PROBE_S)
            if self.window_start is not None and not self.closing.is_set():
                self.lag_samples.append(time.monotonic() - t0 - _LAG_PROBE_S)

    async def sample_gauges(self) -> None:
        """Scrape the load gauges through the window: SGLang refreshes them only at prefill and
        every --decode-log-interval decode steps, so one scrape says little."""
        interval_s = max(_GAUGE_MIN_INTERVAL_S, self.spec.window_s / _GAUGE_SAMPLES)
        while not self.closing.is_set():
            await _wait_any([self.closing], interval_s)
            if self.closing.is_set():
                return
            snap = await self.scrape()
            if snap is not None:
                kept = {k: v for k, v in snap.values.items() if k in GAUGES}
                self.gauges.append(MetricsSnapshot(t=snap.t, values=kept))
                self.live_rate(snap)

    def live_rate(self, snap: MetricsSnapshot) -> None:
        live, first = self.spec.live, self.first_scrape
        if live is None or first is None or snap.t <= first.t:
            return
        if GEN_TOKENS in snap.values and GEN_TOKENS in first.values:
            gained = snap.values[GEN_TOKENS] - first.values[GEN_TOKENS]
            live.server_tok_s = gained / (snap.t - first.t)

    async def publish_live(self, live: LiveView) -> None:
        live.concurrency, live.window_s = self.spec.concurrency, self.spec.window_s
        live.server_tok_s = None
        while True:
            live.in_flight = self.in_flight
            if self.window_start is None:
                live.phase = "warmup"
            else:
                live.phase = "done" if self.closing.is_set() else "window"
                end = self.window_end if self.window_end is not None else time.monotonic()
                live.window_elapsed_s = end - self.window_start
            await asyncio.sleep(_LIVE_INTERVAL_S)

    async def scrape(self) -> MetricsSnapshot | None:
        url = self.spec.base_url.rstrip("/") + "/metrics"
        t0 = time.monotonic()
        try:
            async with self.session.get(
                url, headers=self.headers, timeout=aiohttp.ClientTimeout(total=_SCRAPE_TIMEOUT_S)
            ) as resp:
                if resp.status != 200:
                    return None
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError, UnicodeDecodeError):
            return None
        t1 = time.monotonic()
        return MetricsSnapshot(t=(t0 + t1) / 2, values=parse_prometheus(text))

    # -- the point ----------------------------------------------------------------------
    async def run(self) -> tuple[MetricsSnapshot | None, MetricsSnapshot | None]:
        spec = self.spec
        users = [asyncio.create_task(self.user(u)) for u in range(spec.concurrency)]
        probe = asyncio.create_task(self.probe_lag())
        background = [probe]
        if spec.live is not None:
            background.append(asyncio.create_task(self.publish_live(spec.live)))
        before = after = None
        try:
            t_start = self.t_start = time.monotonic()
            await _wait_any([self.closing], spec.warmup_s)
            deadline = None
            if spec.warmup_max_s is not None:
                deadline = t_start + spec.warmup_max_s
                left = deadline - time.monotonic()
                await _wait_any([self.warm_enough, self.closing], max(0.0, left))
            else:
                await _wait_any([self.warm_enough, self.closing], None)
            if spec.warmup_min_requests > 0:  # a steady-state warmup was asked for
                await self.wait_answering(deadline)
                self.answered = self.warm_enough.is_set() and self.answering()
            self.warm = True
            if self.gate is not None:
                await self.gate.open(self)
            elif self.in_flight == spec.concurrency:
                self.open_window()
            # Users idle only between requests, so the window normally opens at once; when
            # failures keep some idle (backoff), it opens anyway after a grace period.
            await _wait_any([self.opened, self.closing], max(1.0, spec.window_s))
            self.open_window(forced=True)
            sampler = None
            if spec.scrape_metrics and not self.closing.is_set():
                before = self.first_scrape = await self.scrape()
                sampler = asyncio.create_task(self.sample_gauges())
            await self.closing.wait()
            if self.gate is not None:  # the coordinator's last scrape comes first
                await self.gate.released()
            # The last scrape comes before the cancellation, so that the server's counters
            # stop where the window does (an aborted request's tokens count when it ends).
            if sampler is not None:
                await sampler
            if spec.scrape_metrics and not self.server_gone:
                after = await self.scrape()
        finally:
            if self.round_close is not None:
                background.append(self.round_close)
            for task in [*users, *background]:
                task.cancel()
            await asyncio.gather(*users, *background, return_exceptions=True)
            if spec.live is not None:
                spec.live.phase = "done"
                if self.window_start is not None and self.window_end is not None:
                    spec.live.window_elapsed_s = self.window_end - self.window_start
            # Requests still running were cancelled; their tokens inside the window count.
            self.kept.extend(f for f in self.current if f is not None)
            for conn in self.conns:
                if conn is not None and conn.transport is not None:
                    conn.transport.close()
            await asyncio.sleep(0)  # let the transports close their sockets
        return before, after

    def result(self, before: MetricsSnapshot | None, after: MetricsSnapshot | None,
               **extra: Any) -> PointResult:
        """What the point measured, once it has run; `extra`: fields only some points have.
        Parsing happens here, after the window, so it never competes with the measurement."""
        assert self.window_start is not None and self.window_end is not None
        return PointResult(
            records=self.records(),
            window_start=self.window_start,
            window_end=self.window_end,
            warmup_records=self.warmup_records,
            warmup_errors=self.warmup_errors,
            client_cpu_s=self.cpu_end - self.cpu_start,
            loop_lag_ms=_percentiles_ms(self.lag_samples),
            metrics_before=before,
            metrics_after=after,
            server_gone=self.server_gone,
            concurrency=self.spec.concurrency,
            protocol=self.spec.protocol,
            end_reason=self.end_reason,
            gauges=self.gauges,
            warmup_wall_s=self.window_start - self.t_start,
            **extra,
        )

    def records(self) -> list[RequestRecord]:
        out = []
        window_end = self.window_end if self.window_end is not None else float("inf")
        for flight in sorted(self.kept, key=lambda f: f.request_id):
            if flight.t_send < window_end:  # sent after the close: never part of the window
                request = self.spec.requests[flight.prompt_index]
                out.append(flight.record(request, self.protocol, self.user_offset))
        return out

async def _wait_any(events: list[asyncio.Event], timeout_s: float | None) -> None:
    """Return when one of the events is set or after timeout_s, whichever comes first."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def run_point(spec: PointSpec, gate: Gate | None = None, user_offset: int = 0
                    ) -> PointResult:
    """Measure one point; see the module docstring for the timeline. Never raises on a bad
    response; raises :class:`LoadError` only for a spec that cannot be run. `gate` and
    `user_offset`: this process runs users from `user_offset` on of a point split over several
    processes (:mod:`specbench.load.procs`)."""
    _validate(spec)
    raise_fd_limit(spec.concurrency)
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(total=spec.request_timeout_s,
                                    sock_connect=min(spec.request_timeout_s, 30.0))
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        point = _Point(spec, session, gate)
        point.user_offset = user_offset
        before, after = await point.run()
    return point.result(before, after, window_forced_open=point.window_forced_open)


def run_point_sync(spec: PointSpec) -> PointResult:
    """:func:`run_point` for callers without an event loop."""
    return asyncio.run(run_point(spec))
