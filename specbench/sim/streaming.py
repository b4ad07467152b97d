"""The SSE engine shared by the three generation APIs: one event per scheduler update.

A stream waits on its request's event, which the scheduler sets after every forward that
added tokens to it. A handler that falls behind the scheduler sends one chunk covering every
new token, as SGLang does; that is safe because the payload builders work from cumulative
counters. When the whole simulator is late (the scheduler behind real time) a stream steps
aside briefly so that the scheduler catches up, and then coalesces. The payload formats belong
to the APIs (`on_update`, `on_end`); this module owns the loop, the SSE framing and the
--sim-truncate-rate / --sim-malformed-rate / --sim-stall-* faults that act mid-stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from specbench.sim.args import FaultOptions
from specbench.sim.faults import FaultPlan
from specbench.sim.request import SimRequest
from specbench.sim.scheduler import Scheduler

# A stream waits (and so coalesces) while the scheduler is later than this behind real time.
COALESCE_LAG_S = 0.004
COALESCE_MAX_WAIT_S = 0.05
# SGLang 0.5.23's TokenizerManager checks a waiting request's client this often (server time).
DISCONNECT_POLL_S = 4.0
CLIENT_GONE = (ConnectionError,)  # aiohttp's ClientConnectionResetError is one
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}

# on_update(sent, now, finished) -> data payloads for the new tokens [sent, now); counts in
# them are `now`, not the request's (which may be further on).
OnUpdate = Callable[[int, int, bool], list[str]]
# on_end() -> payloads after the last token (finish, sglext, usage), before [DONE].
OnEnd = Callable[[], list[str]]
# output_turn() -> returns once the server process may write (frontend.FrontendStage).
OutputTurn = Callable[[], Awaitable[None]]


def sse(payloads: list[str]) -> bytes:
    return "".join(f"data: {p}\n\n" for p in payloads).encode()


class _Stall:
    """--sim-stall-after-tokens / --sim-stall-s: pause one stream once, mid-way."""

    def __init__(self, options: FaultOptions) -> None:
        self.after_tokens = options.stall_after_tokens
        self.stall_s = options.stall_s
        self.done = False

    def due(self, sent: int, finished: bool) -> bool:
        if (
            self.done
            or self.after_tokens is None
            or self.stall_s <= 0
            or sent < self.after_tokens
            or finished
        ):
            return False
        self.done = True
        return True


async def stream_sse(
    request: web.Request,
    req: SimRequest,
    scheduler: Scheduler,
    fault: FaultPlan,
    on_update: OnUpdate,
    on_end: OnEnd,
    output_turn: OutputTurn | None = None,
) -> web.StreamResponse:
    """Send SSE events as the scheduler emits tokens; inject faults when asked to.
    `output_turn`, when given, is awaited before each write (the frontend's output hold)."""
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await resp.prepare(request)
    sent = 0
    stall = _Stall(scheduler.settings.faults)
    half = max(1, req.target_tokens // 2)
    watcher = asyncio.create_task(_watch_client(request, req, scheduler))
    try:
        while True:
            await _next_update(req, scheduler, output_turn)
            if watcher.done() and not watcher.cancelled() and watcher.result():
                return resp  # aborted while it waited: the client is gone
            now, done = req.completion_tokens, req.finished
            if now > sent or (done and sent == 0):
                payloads = _updates(on_update, req, sent, now, done)
                if fault.breaks_stream_at(now, half):
                    fault.corrupt(payloads, req.rid)
                    if fault.truncate:
                        await _truncate(request, resp, req, scheduler, payloads)
                        return resp
                scheduler.lag.note_stream_write(time.monotonic())
                await resp.write(sse(payloads))
                sent = now
                if stall.due(sent, done):
                    await asyncio.sleep(stall.stall_s)
            if done:
                break
        await resp.write(sse([*on_end(), "[DONE]"]))
        await resp.write_eof()
    except asyncio.CancelledError:
        scheduler.cancel(req)
        raise
    except CLIENT_GONE:
        # The client went away mid-stream: free the slot, as SGLang aborts the request.
        scheduler.cancel(req)
    finally:
        watcher.cancel()
    return resp


def _updates(on_update: OnUpdate, req: SimRequest, sent: int, now: int, done: bool) -> list[str]:
    """The events for tokens [sent, now). The forward that finished the request keeps an
    event of its own even when a late stream covers earlier forwards too, so that what a
    last step looks like (only an EOS token, say) does not depend on the stream's timing."""
    split = req.last_step_from
    if done and sent < split < now:
        return on_update(sent, split, False) + on_update(split, now, True)
    return on_update(sent, now, done)


async def _watch_client(request: web.Request, req: SimRequest, scheduler: Scheduler) -> bool:
    """Until the first token, check the client every DISCONNECT_POLL_S of server time, as
    SGLang's TokenizerManager does (`_REQUEST_STATE_WAIT_TIMEOUT`, 4 s): a request whose client
    left while it was queued or in prefill is aborted then, not when its first token is written
    (later, each token's write finds a client that left). True when it aborted the request.
    A task beside the stream, so the stream's own wait for tokens stays a plain event wait."""
    poll_s = DISCONNECT_POLL_S / scheduler.time_scale
    while req.completion_tokens == 0 and not req.finished:
        await asyncio.sleep(poll_s)
        transport = request.transport
        if req.completion_tokens == 0 and (transport is None or transport.is_closing()):
            scheduler.cancel(req)
            req.event.set()  # wake the stream so it ends
            return True
    return False


async def _next_update(
    req: SimRequest, scheduler: Scheduler, output_turn: OutputTurn | None
) -> None:
    """Wait until the scheduler has news for this request and the server may write it."""
    await req.event.wait()
    if output_turn is not None:
        await output_turn()
    lag_s = scheduler.lag.lag_s
    if lag_s > COALESCE_LAG_S and not req.finished:
        # The scheduler is behind real time: step aside so it catches up, then send one
        # chunk covering every token emitted meanwhile.
        await asyncio.sleep(min(lag_s, COALESCE_MAX_WAIT_S))
    req.event.clear()


async def _truncate(
    request: web.Request,
    resp: web.StreamResponse,
    req: SimRequest,
    scheduler: Scheduler,
    payloads: list[str],
) -> None:
    """--sim-truncate-rate: send one more event, then drop the connection mid-stream."""
    await resp.write(sse(payloads[:1]))
    scheduler.cancel(req)
    if request.transport is not None:
        request.transport.close()
