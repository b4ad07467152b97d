"""A small real server that streams in SGLang 0.5.23's exact formats, for tests and benchmarks.

It is not the simulator: it has no cost model, only a fixed cadence. Every open stream advances
on the same step, as in SGLang's continuous batching: each ``step_s`` (0 = as fast as the event
loop goes) every stream gets one chunk, of ``tokens_per_step`` tokens cycled per request, so a
chunk may carry several tokens as under EAGLE-3. The byte formats are built once, by
:func:`chat_format`, :func:`completions_format` and :func:`native_format`; two servers send them:

- :class:`FakeSGLang` (aiohttp): all three routes, ``/metrics``, fault injection per request,
  holding requests until N arrive, an API key, and a ground-truth log of every token it wrote
  with the monotonic time of the write; tests compare what the client measured with that log
  (tests/load/test_runner.py, tests/test_results.py). It also answers what ``--engine attach``
  reads of a baseline SGLang (``/ready``, ``/health``, ``/server_info``, ``/v1/models``,
  ``/flush_cache``), so a real sweep can be pointed at it (tests/load/test_failing_servers.py).
- :class:`BatchFake` (bare asyncio, chat only): the same streams at the lowest server CPU per
  chunk, for benchmarks/client_capacity.py, which measures the client alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

FAULTS = ("http500", "truncate", "malformed", "error_event", "reset", "stall", "abort", "silent",
          "html", "endless")
DONE = b"data: [DONE]\n\n"


@dataclass
class FakeOptions:
    output_tokens: int = 12  # per request, capped by the request's max tokens
    tokens_per_step: tuple[int, ...] = (1,)  # cycled per decode step after the first token
    step_s: float = 0.002  # one batch step; 0 steps as fast as the event loop can
    spec: bool = False  # report spec_verify_ct (one verify per decode step, +0 for prefill)
    fault: Callable[[int], str | None] = field(default=lambda i: None)  # request index -> fault
    hold_until: int | None = None  # hold every request until this many have arrived
    hold_timeout_s: float = 20.0
    api_key: str | None = None
    error_status: int = 500  # what the http500 fault answers: its status and message
    error_message: str = "injected"
    server_info_delay_s: float = 0.0  # /server_info answers this late
    # A first-use compile: when request `pause_at` (an index) starts, the whole batch stops
    # for pause_s before its first token, as SGLang does while FlashInfer compiles a kernel.
    pause_at: int | None = None
    pause_s: float = 0.0
    prefill_s: float = 0.0  # every request waits this long for its first token (a long prompt)
    server_info: dict[str, Any] = field(default_factory=lambda: {
        "version": "fake", "max_running_requests": 256, "context_length": 65536,
        "served_model_name": "fake", "model_path": "fake"})  # a baseline SGLang's essentials


@dataclass(frozen=True)
class StreamFormat:
    """How one route writes a stream.

    ``chunk(n, k, verify, last)`` is the events of the step that brings the request to ``n``
    tokens (``k`` new, ``verify`` verify steps so far); ``tail(n, verify)`` closes the stream.
    """

    max_tokens: int
    chunk: Callable[[int, int, int, bool], list[bytes]]
    tail: Callable[[int, int], list[bytes]]


def _sse(obj: dict[str, Any], compact: bool = True) -> bytes:
    # SGLang's chat route serialises with pydantic (compact); its completions route does not.
    separators = (",", ":") if compact else None
    return b"data: " + json.dumps(obj, separators=separators).encode() + b"\n\n"


def chat_format(body: dict[str, Any], request_id: str, spec: bool) -> StreamFormat:
    """``/v1/chat/completions``: a role chunk first, content chunks, finish, sglext, usage."""
    prompt = 7
    base = {"id": request_id, "object": "chat.completion.chunk", "created": 1,
            "model": body.get("model")}
    options = body.get("stream_options") or {}
    continuous = options.get("continuous_usage_stats", False)
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 10**9

    def usage(n: int) -> dict[str, Any]:
        return {"prompt_tokens": prompt, "total_tokens": prompt + n, "completion_tokens": n,
                "reasoning_tokens": 0}

    def chunk(n: int, k: int, verify: int, last: bool) -> list[bytes]:
        events = []
        if n == 1:  # the role chunk comes with the first output, without usage
            events.append(_sse({**base, "choices": [{
                "index": 0, "delta": {"reasoning_content": None, "role": "assistant",
                                      "content": ""},
                "logprobs": None, "finish_reason": None, "matched_stop": None}]}))
        obj: dict[str, Any] = {**base, "choices": [{
            "index": 0, "delta": {"content": "tok " * k}, "logprobs": None,
            "finish_reason": None, "matched_stop": None}]}
        if continuous:
            obj["usage"] = usage(n)
        events.append(_sse(obj))
        return events

    def tail(n: int, verify: int) -> list[bytes]:
        finish: dict[str, Any] = {**base, "choices": [{
            "index": 0, "delta": {}, "logprobs": None,
            "finish_reason": "length" if n >= max_tokens else "stop", "matched_stop": None}]}
        if continuous:
            finish["usage"] = usage(n)
        events = [_sse(finish)]
        if spec and body.get("return_spec_tokens_details"):
            events.append(_sse({**base, "choices": [], "sglext": {"spec_tokens_details": {
                "spec_accept_length": n / max(verify, 1), "spec_verify_ct": verify,
                "spec_accept_rate": 0.5, "spec_num_correct_drafts": n - verify}}}))
        if options.get("include_usage"):
            events.append(_sse({**base, "choices": [], "usage": usage(n)}))
        events.append(DONE)
        return events

    return StreamFormat(max_tokens, chunk, tail)


def completions_format(body: dict[str, Any], request_id: str, spec: bool) -> StreamFormat:
    """``/v1/completions``: usage in every chunk, finish on the last token, sglext, usage."""
    prompt = 9
    base = {"id": request_id, "object": "text_completion", "created": 1,
            "model": body.get("model")}
    max_tokens = body.get("max_tokens", 16)

    def usage(n: int) -> dict[str, Any]:
        return {"prompt_tokens": prompt, "total_tokens": prompt + n, "completion_tokens": n}

    def chunk(n: int, k: int, verify: int, last: bool) -> list[bytes]:
        return [_sse({**base, "choices": [{
            "index": 0, "text": "tok " * k, "logprobs": None,
            "finish_reason": ("length" if n >= max_tokens else "stop") if last else None,
            "matched_stop": None}], "usage": usage(n)}, compact=False)]

    def tail(n: int, verify: int) -> list[bytes]:
        events = []
        if spec:
            events.append(_sse({**base, "choices": [], "sglext": {"spec_tokens_details": {
                "spec_verify_ct": verify}}}, compact=False))
        events.append(_sse({**base, "choices": [], "usage": usage(n)}, compact=False))
        events.append(DONE)
        return events

    return StreamFormat(max_tokens, chunk, tail)


def native_format(body: dict[str, Any], request_id: str, spec: bool) -> StreamFormat:
    """``/generate``: the whole text so far in every chunk, cumulative meta_info."""
    max_tokens = body.get("sampling_params", {}).get("max_new_tokens", 128)

    def chunk(n: int, k: int, verify: int, last: bool) -> list[bytes]:
        meta: dict[str, Any] = {"id": request_id, "finish_reason": None, "prompt_tokens": 11,
                                "completion_tokens": n, "cached_tokens": 0}
        if last:
            meta["finish_reason"] = ({"type": "length", "length": n} if n >= max_tokens
                                     else {"type": "stop", "matched": 2})
            meta["e2e_latency"] = 0.1
            if spec:
                meta.update(spec_verify_ct=verify, spec_accept_length=n / max(verify, 1))
        obj = {"text": "tok " * n, "output_ids": list(range(n)), "meta_info": meta}
        return [_sse(obj, compact=False)]

    def tail(n: int, verify: int) -> list[bytes]:
        return [DONE]

    return StreamFormat(max_tokens, chunk, tail)


class Cadence:
    """One request's decode steps: the first token alone (prefill), then `pattern` cycled."""

    def __init__(self, total: int, pattern: tuple[int, ...]) -> None:
        self.total = total
        self.n = 0  # tokens so far
        self.verify = 0  # decode (verify) steps so far
        self._pattern = itertools.cycle(pattern)

    @property
    def done(self) -> bool:
        return self.n >= self.total

    def advance(self) -> tuple[int, int, int]:
        """One step: (tokens so far, new tokens, verify steps so far)."""
        k = 1 if self.n == 0 else min(next(self._pattern), self.total - self.n)
        if self.n > 0:
            self.verify += 1
        self.n += k
        return self.n, k, self.verify


class FakeSGLang:
    """``async with FakeSGLang(opts) as srv:`` serves on ``srv.url`` until the block ends."""

    def __init__(self, opts: FakeOptions | None = None) -> None:
        self.opts = opts or FakeOptions()
        self.port = 0
        self.emitted: list[tuple[float, int]] = []  # (monotonic time of write, new tokens)
        self.arrivals = 0
        self.arrival_t: list[float] = []  # monotonic time of each completion request
        self.flushes = 0
        self.waiting = 0  # requests held by hold_until right now
        self.peak_waiting = 0
        self.max_in_flight = 0
        self.in_flight = 0
        self.faults_sent: dict[str, int] = {}
        self.gen_tokens_finished = 0
        self.verify_calls_finished = 0
        self._running_integral = 0.0
        self._running_since = time.monotonic()
        self._all_arrived = asyncio.Event()
        self._busy = asyncio.Event()  # set while a stream is open
        self._next_step = asyncio.Event()  # set (and replaced) by each batch step
        self._paused_until = 0.0  # monotonic time a first-use pause ends (pause_at)
        self._stepper: asyncio.Task[None] | None = None
        self._counter = itertools.count()
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._transports: set[asyncio.Transport] = set()
        self.url = ""
        self.loop: asyncio.AbstractEventLoop | None = None  # set by fake_in_thread

    async def __aenter__(self) -> FakeSGLang:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._route(chat_format))
        app.router.add_post("/v1/completions", self._route(completions_format))
        app.router.add_post("/generate", self._native)
        app.router.add_get("/metrics", self._metrics)
        for path in ("/ready", "/health"):
            app.router.add_get(path, self._ok)
        app.router.add_get("/flush_cache", self._flush)
        app.router.add_get("/server_info", self._server_info)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = self._site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stepper = asyncio.create_task(self._step_loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        if self._stepper is not None:
            self._stepper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stepper
            self._stepper = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def kill(self) -> None:
        """Die like a crashed process: stop listening and reset every open connection."""
        assert self._site is not None and self._site._server is not None
        self._site._server.close()
        for transport in self._transports:
            transport.abort()

    async def restart(self, down_s: float) -> None:
        """Crash (see :meth:`kill`), refuse connections for ``down_s``, then serve again on the
        same port, as a server restarted by its supervisor."""
        assert self._runner is not None
        self.kill()
        await asyncio.sleep(down_s)
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port, backlog=4096)
        await self._site.start()

    def tokens_between(self, start: float, end: float) -> int:
        """Ground truth: tokens written in (start, end]."""
        return sum(k for t, k in self.emitted if start < t <= end)

    # -- bookkeeping ----------------------------------------------------------------------
    def _running_changed(self, delta: int) -> None:
        now = time.monotonic()
        self._running_integral += self.in_flight * (now - self._running_since)
        self._running_since = now
        self.in_flight += delta
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.in_flight:
            self._busy.set()
        else:
            self._busy.clear()

    async def _step_loop(self) -> None:
        """The batch: one step every ``step_s`` while any stream is open."""
        while True:
            await self._busy.wait()
            await asyncio.sleep(self.opts.step_s)
            paused_s = self._paused_until - time.monotonic()
            if paused_s > 0:
                await asyncio.sleep(paused_s)
            step, self._next_step = self._next_step, asyncio.Event()
            step.set()

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def _flush(self, request: web.Request) -> web.Response:
        self.flushes += 1  # a sweep flushes before each point: tests count points by it
        return web.Response(text="")

    async def _server_info(self, request: web.Request) -> web.Response:
        await asyncio.sleep(self.opts.server_info_delay_s)
        return web.json_response(self.opts.server_info)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": "fake", "object": "model", "max_model_len": 65536}]})

    async def _metrics(self, request: web.Request) -> web.Response:
        self._running_changed(0)
        lines = [
            "# HELP sglang:generation_tokens_total Number of generation tokens processed.",
            "# TYPE sglang:generation_tokens_total counter",
            f'sglang:generation_tokens_total{{model_name="m",is_streaming="true"}} '
            f"{float(self.gen_tokens_finished)}",
            'sglang:generation_tokens_total{model_name="m",is_streaming="false"} 0.0',
            f'sglang:spec_verify_calls_total{{model_name="m"}} {float(self.verify_calls_finished)}',
            f'sglang:num_running_reqs{{model_name="m",tp_rank="0"}} {float(self.in_flight)}',
            'sglang:num_queue_reqs{model_name="m",tp_rank="0"} 0.0',
            'sglang:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} 3.0',
            'sglang:e2e_request_latency_seconds_count{model_name="m"} 3.0',
            "process_cpu_seconds_total 1.5",
        ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    # -- one request ----------------------------------------------------------------------
    async def _admit(self, request: web.Request) -> tuple[dict[str, Any], int, web.Response | None]:
        index = next(self._counter)
        self.arrivals += 1
        self.arrival_t.append(time.monotonic())
        if request.transport is not None:
            self._transports.add(request.transport)
        expected_auth = f"Bearer {self.opts.api_key}"
        if self.opts.api_key and request.headers.get("Authorization") != expected_auth:
            return {}, index, web.json_response({"error": "bad key"}, status=401)
        body = await request.json()
        if self.opts.hold_until is not None and not self._all_arrived.is_set():
            self.waiting += 1
            self.peak_waiting = max(self.peak_waiting, self.waiting)
            if self.waiting >= self.opts.hold_until:
                self._all_arrived.set()
            try:
                await asyncio.wait_for(self._all_arrived.wait(), self.opts.hold_timeout_s)
            except TimeoutError:
                return body, index, web.json_response(
                    {"error": f"only {self.waiting} requests arrived together"}, status=503)
            finally:
                self.waiting -= 1
        fault = self.opts.fault(index)
        if fault:
            self.faults_sent[fault] = self.faults_sent.get(fault, 0) + 1
        if fault == "silent":  # accepts the request, never answers
            await asyncio.sleep(3600)
        if fault == "html":  # a 200 that is not a stream: some other web server
            return body, index, web.Response(
                text="<html><body><h1>Welcome to nginx!</h1></body></html>",
                content_type="text/html")
        if fault == "http500":
            status = self.opts.error_status
            return body, index, web.json_response(
                {"object": "error", "message": self.opts.error_message, "code": status},
                status=status)
        return body, index, None

    def _route(self, make: Callable[[dict[str, Any], str, bool], StreamFormat]
               ) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.StreamResponse:
            body, index, early = await self._admit(request)
            if early is not None:
                return early
            return await self._stream(request, index, make(body, f"r{index}", self.opts.spec))

        return handle

    async def _native(self, request: web.Request) -> web.StreamResponse:
        body, index, early = await self._admit(request)
        if early is not None:
            return early
        unknown = set(body.get("sampling_params", {})) - {"max_new_tokens", "temperature"}
        if unknown:
            return web.json_response({"error": f"unknown field `{sorted(unknown)[0]}`"}, status=400)
        return await self._stream(request, index, native_format(body, f"r{index}", self.opts.spec))

    async def _stream(self, request: web.Request, index: int,
                      fmt: StreamFormat) -> web.StreamResponse:
        fault = self.opts.fault(index)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        self._running_changed(+1)
        if index == self.opts.pause_at:
            self._paused_until = time.monotonic() + self.opts.pause_s
        await asyncio.sleep(self.opts.prefill_s)
        cap = fmt.max_tokens if fault != "endless" else self.opts.output_tokens  # ignores it
        steps = Cadence(min(self.opts.output_tokens, cap), self.opts.tokens_per_step)
        n, verify, total = 0, 0, steps.total
        try:
            while n < total:
                await self._next_step.wait()
                n, k, verify = steps.advance()
                if fault == "stall" and n > total // 2:
                    await asyncio.sleep(3600)
                if fault == "truncate" and n > total // 2:
                    return resp
                if fault == "reset" and n > total // 2:
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                if fault == "malformed" and n > total // 2:
                    await resp.write(b'data: {"id": "x", "choices": [\n\n')
                    fault = None
                if fault == "error_event" and n > total // 2:
                    await resp.write(b'data: {"error": {"message": "injected failure", '
                                     b'"type": "InternalServerError", "code": 500}}\n\n')
                    await resp.write(DONE)
                    return resp
                self.emitted.append((time.monotonic(), k))
                for event in fmt.chunk(n, k, verify, n == total):
                    await resp.write(event)
            final = fmt.tail(n, verify)
            if fault == "abort":
                final = [b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "abort"}]}'
                         b"\n\n", DONE]
            for event in final:
                await resp.write(event)
            self.gen_tokens_finished += n
            if self.opts.spec:  # SGLang counts verify calls only when there were any
                self.verify_calls_finished += verify
            return resp
        except ConnectionResetError:  # the client went away (a request cancelled at window end)
            return resp
        finally:
            self._running_changed(-1)


class BatchFake:
    """The fake's batch mode: chat streams at the lowest server CPU per chunk Python allows.

    For benchmarks/client_capacity.py, which measures the client and needs a server that costs
    less per chunk than the client does: through FakeSGLang, aiohttp's per-request machinery and
    the JSON rendering cost more than the socket write itself. A bare asyncio protocol answers
    any POST with :func:`chat_format`'s stream; the whole response is rendered once per distinct
    request body (request ids are all "r"), and one step loop writes the next step of every
    open stream every ``step_s``.
    No faults, no ground-truth log, no ``/metrics`` (404).
    """

    def __init__(self, opts: FakeOptions, port: int = 0, reuse_port: bool = False) -> None:
        self.opts = opts
        self.port = port
        self.reuse_port = reuse_port
        self.active: set[_BatchStream] = set()
        self.wake = asyncio.Event()
        self._responses: dict[bytes, list[bytes]] = {}

    async def serve_forever(self) -> None:
        loop = asyncio.get_running_loop()
        # reuse_port: several processes may serve one port (benchmarks/client_procs.py), so
        # that the stream source is not the limit; the kernel spreads connections over them.
        server = await loop.create_server(lambda: _BatchStream(self), "127.0.0.1", self.port,
                                          backlog=4096, reuse_port=self.reuse_port)
        self.port = server.sockets[0].getsockname()[1]
        async with server:
            while True:
                if not self.active:
                    self.wake.clear()
                    await self.wake.wait()
                for stream in list(self.active):
                    stream.step()
                # At step 0: yield so requests get in and writes flush, then step again.
                await asyncio.sleep(self.opts.step_s)

    def response(self, body: bytes) -> list[bytes]:
        """The HTTP chunks of the stream for `body`, one per step; the last ends the response."""
        if body not in self._responses:
            fmt = chat_format(json.loads(body), "r", self.opts.spec)
            cadence = Cadence(min(self.opts.output_tokens, fmt.max_tokens),
                              self.opts.tokens_per_step)
            steps = []
            n = verify = 0
            while not cadence.done:
                n, k, verify = cadence.advance()
                steps.append(_http_chunk(b"".join(fmt.chunk(n, k, verify, cadence.done))))
            end = _http_chunk(b"".join(fmt.tail(n, verify))) + b"0\r\n\r\n"
            steps = [*steps[:-1], steps[-1] + end] if steps else [end]
            self._responses[body] = steps
        return self._responses[body]


def _http_chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


_STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")


class _BatchStream(asyncio.Protocol):
    """One keep-alive connection of :class:`BatchFake`; at most one request at a time."""

    def __init__(self, server: BatchFake) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.steps: list[bytes] = []
        self.next = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = self.buf[:head_end].decode("latin-1").lower()
        length = 0
        for line in head.split("\r\n"):
            if line.startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        end = head_end + 4 + length
        if len(self.buf) < end:
            return
        body, self.buf = self.buf[head_end + 4:end], self.buf[end:]
        assert self.transport is not None
        if not head.startswith("post "):
            self.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        self.steps, self.next = self.server.response(body), 0
        self.transport.write(_STREAM_HEAD)
        self.server.active.add(self)
        self.server.wake.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.active.discard(self)

    def step(self) -> None:
        assert self.transport is not None
        self.transport.write(self.steps[self.next])
        self.next += 1
        if self.next == len(self.steps):
            self.server.active.discard(self)


@contextlib.contextmanager
def fake_in_thread(opts: FakeOptions) -> Iterator[FakeSGLang]:
    """The fake on its own event loop in a thread, for callers that run their own loop."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    def main() -> None:
        async def serve() -> None:
            async with FakeSGLang(opts) as srv:
                box["srv"], box["stop"] = srv, asyncio.Event()
                box["loop"] = asyncio.get_running_loop()
                ready.set()
                await box["stop"].wait()

        asyncio.run(serve())

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    ready.wait(10)
    srv = box["srv"]
    srv.loop = box["loop"]  # where a test schedules srv.restart(...)
    try:
        yield srv
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)
