"""A small real aiohttp server that streams in SGLang 0.5.23's exact formats, for load tests.

It is not the simulator: it has no cost model, only a fixed cadence (``step_s`` per step,
``tokens_per_step`` cycled, so a chunk may carry several tokens as under EAGLE-3), fault
injection per request, and a ground-truth log of every token it wrote with the monotonic time
of the write. Tests compare what the client measured with that log.
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

FAULTS = ("http500", "truncate", "malformed", "error_event", "reset", "stall", "abort")


@dataclass
class FakeOptions:
    output_tokens: int = 12  # per request, capped by the request's max tokens
    tokens_per_step: tuple[int, ...] = (1,)  # cycled per decode step after the first token
    step_s: float = 0.002
    spec: bool = False  # report spec_verify_ct (one verify per decode step, +0 for prefill)
    fault: Callable[[int], str | None] = field(default=lambda i: None)  # request index -> fault
    hold_until: int | None = None  # hold every request until this many have arrived
    hold_timeout_s: float = 20.0
    api_key: str | None = None


class FakeSGLang:
    """``async with FakeSGLang(opts) as srv:`` serves on ``srv.url`` until the block ends."""

    def __init__(self, opts: FakeOptions | None = None) -> None:
        self.opts = opts or FakeOptions()
        self.emitted: list[tuple[float, int]] = []  # (monotonic time of write, new tokens)
        self.arrivals = 0
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
        self._counter = itertools.count()
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._transports: set[asyncio.Transport] = set()
        self.url = ""

    async def __aenter__(self) -> FakeSGLang:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/generate", self._native)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = self._site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def kill(self) -> None:
        """Die like a crashed process: stop listening and reset every open connection."""
        assert self._site is not None and self._site._server is not None
        self._site._server.close()
        for transport in self._transports:
            transport.abort()


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
            f"sglang:sim_running_reqs_seconds_total {self._running_integral}",
            'sglang:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} 3.0',
            'sglang:e2e_request_latency_seconds_count{model_name="m"} 3.0',
            "process_cpu_seconds_total 1.5",
        ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    # -- one request ----------------------------------------------------------------------
    async def _admit(self, request: web.Request) -> tuple[dict[str, Any], int, web.Response | None]:
        index = next(self._counter)
        self.arrivals += 1
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
        if fault == "http500":
            return body, index, web.json_response(
                {"object": "error", "message": "injected", "code": 500}, status=500)
        return body, index, None

    async def _stream(self, request: web.Request, max_tokens: int,
                      render: Callable[[int, int, int, bool], list[bytes]],
                      tail: Callable[[int, int], list[bytes]], index: int) -> web.StreamResponse:
        fault = self.opts.fault(index)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        self._running_changed(+1)
        total = min(self.opts.output_tokens, max_tokens)
        steps = itertools.cycle(self.opts.tokens_per_step)
        n, verify = 0, 0
        try:
            while n < total:
                await asyncio.sleep(self.opts.step_s)
                k = 1 if n == 0 else min(next(steps), total - n)
                if n > 0:
                    verify += 1
                n += k
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
                    await resp.write(b"data: [DONE]\n\n")
                    return resp
                self.emitted.append((time.monotonic(), k))
                for event in render(n, k, verify, n == total):
                    await resp.write(event)
            final = tail(n, verify)
            if fault == "abort":
                final = [b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "abort"}]}'
                         b"\n\n", b"data: [DONE]\n\n"]
            for event in final:
                await resp.write(event)
            self.gen_tokens_finished += n
            self.verify_calls_finished += verify
            return resp
        finally:
            self._running_changed(-1)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body, index, early = await self._admit(request)
        if early is not None:
            return early
        prompt = 7
        base = {"id": f"r{index}", "object": "chat.completion.chunk", "created": 1,
                "model": body.get("model")}
        continuous = body.get("stream_options", {}).get("continuous_usage_stats", False)
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 10**9

        def usage(n: int) -> dict[str, Any]:
            return {"prompt_tokens": prompt, "total_tokens": prompt + n, "completion_tokens": n,
                    "reasoning_tokens": 0}

        def sse(obj: dict[str, Any]) -> bytes:
            return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

        def render(n: int, k: int, verify: int, last: bool) -> list[bytes]:
            events = []
            if n == 1:  # the role chunk comes with the first output, without usage
                events.append(sse({**base, "choices": [{
                    "index": 0, "delta": {"reasoning_content": None, "role": "assistant",
                                          "content": ""},
                    "logprobs": None, "finish_reason": None, "matched_stop": None}]}))
            chunk: dict[str, Any] = {**base, "choices": [{
                "index": 0, "delta": {"content": "tok " * k}, "logprobs": None,
                "finish_reason": None, "matched_stop": None}]}
            if continuous:
                chunk["usage"] = usage(n)
            events.append(sse(chunk))
            return events

        def tail(n: int, verify: int) -> list[bytes]:
            finish: dict[str, Any] = {**base, "choices": [{
                "index": 0, "delta": {}, "logprobs": None,
                "finish_reason": "length" if n >= max_tokens else "stop", "matched_stop": None}]}
            if continuous:
                finish["usage"] = usage(n)
            events = [sse(finish)]
            if self.opts.spec and body.get("return_spec_tokens_details"):
                events.append(sse({**base, "choices": [], "sglext": {"spec_tokens_details": {
                    "spec_accept_length": n / max(verify, 1), "spec_verify_ct": verify,
                    "spec_accept_rate": 0.5, "spec_num_correct_drafts": n - verify}}}))
            if body.get("stream_options", {}).get("include_usage"):
                events.append(sse({**base, "choices": [], "usage": usage(n)}))
            events.append(b"data: [DONE]\n\n")
            return events

        return await self._stream(request, max_tokens, render, tail, index)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body, index, early = await self._admit(request)
        if early is not None:
            return early
        prompt = 9
        base = {"id": f"r{index}", "object": "text_completion", "created": 1,
                "model": body.get("model")}
        max_tokens = body.get("max_tokens", 16)

        def usage(n: int) -> dict[str, Any]:
            return {"prompt_tokens": prompt, "total_tokens": prompt + n, "completion_tokens": n}

        def sse(obj: dict[str, Any]) -> bytes:
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        def render(n: int, k: int, verify: int, last: bool) -> list[bytes]:
            return [sse({**base, "choices": [{
                "index": 0, "text": "tok " * k, "logprobs": None,
                "finish_reason": ("length" if n >= max_tokens else "stop") if last else None,
                "matched_stop": None}], "usage": usage(n)})]

        def tail(n: int, verify: int) -> list[bytes]:
            events = []
            if self.opts.spec:
                events.append(sse({**base, "choices": [], "sglext": {"spec_tokens_details": {
                    "spec_verify_ct": verify}}}))
            events.append(sse({**base, "choices": [], "usage": usage(n)}))
            events.append(b"data: [DONE]\n\n")
            return events

        return await self._stream(request, max_tokens, render, tail, index)

    async def _native(self, request: web.Request) -> web.StreamResponse:
        body, index, early = await self._admit(request)
        if early is not None:
            return early
        params = body.get("sampling_params", {})
        unknown = set(params) - {"max_new_tokens", "temperature"}
        if unknown:
            return web.json_response({"error": f"unknown field `{sorted(unknown)[0]}`"}, status=400)
        max_tokens = params.get("max_new_tokens", 128)

        def render(n: int, k: int, verify: int, last: bool) -> list[bytes]:
            meta: dict[str, Any] = {"id": f"r{index}", "finish_reason": None, "prompt_tokens": 11,
                                    "completion_tokens": n, "cached_tokens": 0}
            if last:
                meta["finish_reason"] = ({"type": "length", "length": n} if n >= max_tokens
                                         else {"type": "stop", "matched": 2})
                meta["e2e_latency"] = 0.1
                if self.opts.spec:
                    meta.update(spec_verify_ct=verify, spec_accept_length=n / max(verify, 1))
            obj = {"text": "tok " * n, "output_ids": list(range(n)), "meta_info": meta}
            return [b"data: " + json.dumps(obj).encode() + b"\n\n"]

        def tail(n: int, verify: int) -> list[bytes]:
            return [b"data: [DONE]\n\n"]

        return await self._stream(request, max_tokens, render, tail, index)


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
    try:
        yield box["srv"]
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)
