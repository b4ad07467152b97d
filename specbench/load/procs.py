"""One point's users split over several client processes (``--client-procs N``).

One Python event loop reads a few tens of thousands of stream chunks a second; a data-parallel
deployment or an 8-GPU server streams more. Here each child process runs
:func:`specbench.load.runner.run_point` for its share of the users, on its own event loop, and
this process coordinates them so that the result is one point, as one process would measure it:

- request ids come from one shared counter, so request k is prompt k on every server;
- a child says it is warm once its share of the warmup is done and all its users are in flight;
  when every child is, the coordinator opens ONE window at a common instant (the monotonic
  clock is the machine's), and every child closes it at the same instant (the window's length,
  or when the coordinator says: enough requests finished, or the server is gone);
- the coordinator alone scrapes ``/metrics`` (before, through and after the window, as one
  process does), and lets the children cancel their requests only after its last scrape;
- records are merged in request order; CPU and loop lag are the busiest child's, because
  ``client_bound`` asks whether any event loop, not their sum, set the pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import multiprocessing as mp
import time
from multiprocessing.connection import Connection
from typing import Any

import aiohttp

from specbench.load.records import PointResult, PointSpec
from specbench.load.runner import LoadError, _Point, _validate, run_point, run_point_sync

# The window opens this long after the last child is warm: time for the message to reach all.
_OPEN_DELAY_S = 0.02
_CHILD_START_TIMEOUT_S = 120.0


def run_point_procs(spec: PointSpec, procs: int) -> PointResult:
    """Measure one point with its users split over `procs` processes (1: this process)."""
    procs = min(procs, spec.concurrency)
    if procs <= 1:
        return run_point_sync(spec)
    _validate(spec)
    return asyncio.run(_coordinate(spec, procs))


def auto_procs(concurrency: int, cpus: int) -> int:
    """Processes for `concurrency` users: one per 64 users, at most half the cores (the other
    half is for the server when it runs on the same machine)."""
    return max(1, min(cpus // 2, math.ceil(concurrency / 64)))


# -- a child ------------------------------------------------------------------------------

class _ChildGate:
    def __init__(self, conn: Connection, counter: Any, report_finished: bool) -> None:
        self.conn = conn
        self.counter = counter
        self.report_finished = report_finished
        self.release = asyncio.Event()
        self.point: _Point | None = None

    def take_id(self) -> int:
        with self.counter.get_lock():
            request_id = int(self.counter.value)
            self.counter.value = request_id + 1
        return request_id

    async def open(self, point: _Point) -> None:
        self.point = point
        loop = asyncio.get_running_loop()
        grace_end = loop.time() + max(1.0, point.spec.window_s)
        while (point.in_flight < point.spec.concurrency and not point.closing.is_set()
               and loop.time() < grace_end):
            await asyncio.sleep(0.005)
        loop.add_reader(self.conn.fileno(), self._message)
        self.conn.send(("warm", point.in_flight < point.spec.concurrency))
        waiter = asyncio.ensure_future(point.opened.wait())
        closing = asyncio.ensure_future(point.closing.wait())
        await asyncio.wait([waiter, closing], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        closing.cancel()

    def _message(self) -> None:
        point = self.point
        assert point is not None
        try:
            msg = self.conn.recv()
        except EOFError:  # the coordinator is gone: end the point
            asyncio.get_running_loop().remove_reader(self.conn.fileno())
            point.close("server_gone")
            self.release.set()
            return
        if msg[0] == "open":
            _, at_s, forced = msg
            asyncio.get_running_loop().call_at(at_s, point.open_window, forced, at_s)
        elif msg[0] == "close":
            point.close(msg[2], at=msg[1])
        elif msg[0] == "release":
            self.release.set()

    async def released(self) -> None:
        await self.release.wait()

    def finished(self) -> None:
        if self.report_finished:
            self.conn.send(("finished",))

    def gone(self) -> None:
        self.conn.send(("gone",))


def _child(spec: PointSpec, user_offset: int, counter: Any, conn: Connection) -> None:
    try:
        gate = _ChildGate(conn, counter, spec.window_max_requests is not None)
        result = asyncio.run(run_point(spec, gate, user_offset))
        conn.send(("result", result))
    except BaseException as exc:  # the coordinator reports it; a child must not hang it
        with contextlib.suppress(OSError):  # unless the coordinator is gone already
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


# -- the coordinator ----------------------------------------------------------------------

async def _coordinate(spec: PointSpec, procs: int) -> PointResult:
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["specbench.load.runner"])
    counter = ctx.Value("q", 0)
    sizes = [spec.concurrency // procs + (i < spec.concurrency % procs) for i in range(procs)]
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[int, tuple[Any, ...]]] = asyncio.Queue()
    conns: list[Connection] = []
    children = []
    offset = 0
    for i, size in enumerate(sizes):
        mine, theirs = ctx.Pipe()
        share = dataclasses.replace(
            spec, concurrency=size, live=None, scrape_metrics=False,
            warmup_min_requests=math.ceil(spec.warmup_min_requests * size / spec.concurrency))
        child = ctx.Process(target=_child, args=(share, offset, counter, theirs), daemon=True)
        child.start()
        theirs.close()
        offset += size
        conns.append(mine)
        children.append(child)
        loop.add_reader(mine.fileno(), _forward, i, mine, inbox, loop)
    try:
        return await _window(spec, conns, inbox)
    finally:
        for conn in conns:
            loop.remove_reader(conn.fileno())
            conn.close()
        for child in children:
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join()


def _forward(i: int, conn: Connection, inbox: asyncio.Queue[tuple[int, tuple[Any, ...]]],
             loop: asyncio.AbstractEventLoop) -> None:
    try:
        msg = conn.recv()
    except (EOFError, OSError):
        loop.remove_reader(conn.fileno())
        inbox.put_nowait((i, ("error", "the client process ended without a result")))
        return
    if msg[0] in ("result", "error"):
        # A child's last message. Its pipe closes when the child exits, which is no error: stop
        # reading it, or that end would reach the inbox while other children are still at work.
        loop.remove_reader(conn.fileno())
    inbox.put_nowait((i, msg))


def _broadcast(conns: list[Connection], msg: tuple[Any, ...]) -> None:
    for conn in conns:
        # A child that already ended sends its error through the inbox.
        with contextlib.suppress(OSError):
            conn.send(msg)


async def _window(spec: PointSpec, conns: list[Connection],
                  inbox: asyncio.Queue[tuple[int, tuple[Any, ...]]]) -> PointResult:
    results: dict[int, PointResult] = {}
    gone = False

    def take(i: int, msg: tuple[Any, ...]) -> None:
        nonlocal gone
        if msg[0] == "error":
            raise LoadError(f"client process {i} failed: {msg[1]}; run the point with "
                            "--client-procs 1 to see the error in this process")
        if msg[0] == "result":
            results[i] = msg[1]
        elif msg[0] == "gone":
            gone = True

    timeout = aiohttp.ClientTimeout(total=spec.request_timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        scraper = _Point(spec, session)  # scrapes and the live view; runs no users
        scraper.in_flight = spec.concurrency
        live = asyncio.create_task(scraper.publish_live(spec.live)) if spec.live else None
        warm, forced = 0, False
        start_limit = (spec.warmup_max_s or 0.0) + max(1.0, spec.window_s) + _CHILD_START_TIMEOUT_S
        while warm < len(conns) and not gone:
            i, msg = await asyncio.wait_for(inbox.get(), start_limit)
            take(i, msg)
            if msg[0] == "warm":
                warm += 1
                forced = forced or bool(msg[1])
        open_s = time.monotonic() + _OPEN_DELAY_S
        _broadcast(conns, ("open", open_s, forced))
        scraper.open_window(forced, at=open_s)
        before = after = None
        await asyncio.sleep(max(0.0, open_s - time.monotonic()))
        sampler = None
        if spec.scrape_metrics and not gone:
            before = scraper.first_scrape = await scraper.scrape()
            sampler = asyncio.create_task(scraper.sample_gauges())
        finished, reason = 0, "window_s"
        close_s = open_s + spec.window_s
        while not gone and time.monotonic() < close_s:
            try:
                i, msg = await asyncio.wait_for(inbox.get(), close_s - time.monotonic())
            except TimeoutError:
                break
            take(i, msg)
            finished += msg[0] == "finished"
            limit = spec.window_max_requests
            if limit is not None and finished >= limit:
                reason, close_s = "window_max_requests", time.monotonic()
                break
        if gone:
            reason, close_s = "server_gone", time.monotonic()
        if reason != "window_s":
            _broadcast(conns, ("close", close_s, reason))
        scraper.close(reason, at=min(close_s, time.monotonic()))
        if sampler is not None:
            await sampler
        if spec.scrape_metrics and not gone:
            after = await scraper.scrape()
        _broadcast(conns, ("release",))
        while len(results) < len(conns):
            i, msg = await asyncio.wait_for(inbox.get(), spec.request_timeout_s + 60.0)
            take(i, msg)
        if live is not None:
            live.cancel()
            assert spec.live is not None
            spec.live.phase, spec.live.window_elapsed_s = "done", close_s - open_s
    parts = [results[i] for i in sorted(results)]
    return _merge(spec, parts, before, after, scraper.gauges, open_s, close_s, reason, forced)


def _merge(spec: PointSpec, parts: list[PointResult], before: Any, after: Any, gauges: Any,
           open_s: float, close_s: float, reason: str, forced: bool) -> PointResult:
    lag: dict[str, float] = {}
    for key in ("p50", "p99", "max"):
        values = [p.loop_lag_ms.get(key, math.nan) for p in parts]
        finite = [v for v in values if math.isfinite(v)]
        lag[key] = max(finite) if finite else math.nan
    records = sorted((r for p in parts for r in p.records), key=lambda r: r.request_id)
    return PointResult(
        records=records,
        window_start=open_s,
        window_end=close_s,
        warmup_records=sum(p.warmup_records for p in parts),
        warmup_errors=sum(p.warmup_errors for p in parts),
        client_cpu_s=max(p.client_cpu_s for p in parts),
        loop_lag_ms=lag,
        metrics_before=before,
        metrics_after=after,
        server_gone=any(p.server_gone for p in parts) or reason == "server_gone",
        concurrency=spec.concurrency,
        protocol=spec.protocol,
        end_reason=reason,
        window_forced_open=forced or any(p.window_forced_open for p in parts),
        gauges=gauges,
        warmup_wall_s=max(p.warmup_wall_s for p in parts),
    )
