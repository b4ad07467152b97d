"""The simulated SGLang server: aiohttp app speaking SGLang 0.5.23's HTTP API, and `main`.

It serves what a benchmark harness uses (shared/reference/sglang-0.5.23.md §3-§4): readiness
(`/ready`, `/health`, `/health_generate`, `/ping`), introspection (`/model_info`,
`/server_info`, `/v1/models`), `/flush_cache`, Prometheus `/metrics`, and generation on
`/v1/chat/completions`, `/v1/completions` and `/generate`, streaming and not, with SGLang's
exact chunk sequences. Streams send one SSE event per scheduler update per request; when a
handler falls behind the scheduler it sends one chunk covering all new tokens (cumulative
counts make that safe), as SGLang does.

Simulator extensions (not in SGLang): `GET /sim/ground_truth?start=T0&end=T1` (what the
scheduler really emitted between two `time.monotonic()` instants), the Prometheus counters
`sglang:sim_running_reqs_seconds_total` (integral of running requests over model time:
Δ / Δ`sglang:sim_model_seconds_total` = mean running requests), `sglang:sim_model_seconds_total`
and `sglang:sim_emitted_tokens_total` (tokens counted when emitted, not when a request
finishes), `sim_*` keys in `/server_info`, and the --sim-* fault injection.
Times reported by the server (e2e_latency, histograms, gen throughput) are model time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import os
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from specbench.sim.args import (
    SIM_VERSION,
    ServerSettings,
    StartupError,
    build_parser,
    resolve,
)
from specbench.sim.costmodel import Profile, ProfileError, load_profile
from specbench.sim.lifecycle import set_parent_death_signal
from specbench.sim.prefixcache import block_keys
from specbench.sim.scheduler import Scheduler, SimRequest
from specbench.sim.workload import (
    TraitModel,
    filler_ids,
    filler_json,
    filler_text,
    is_agentic,
    render_chat,
)

READY_LINE = "The server is fired up and ready to roll!"
EOS_TOKEN_ID = 128009  # Llama-3 <|eot_id|>, reported as matched_stop
FLUSH_TEXT = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    "waiting requests, the operation will not be performed.)\n"
)
# /generate sampling_params keys of SGLang 0.5.23 (sglang-0.5.23.md §4); others are a 400.
SAMPLING_KEYS = (
    "max_new_tokens",
    "min_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "ignore_eos",
    "stop",
    "stop_token_ids",
    "n",
    "skip_special_tokens",
    "no_stop_trim",
    "sampling_seed",
    "stream_interval",
    "json_schema",
    "regex",
    "ebnf",
    "logit_bias",
    "custom_params",
)
HIST_BUCKETS_S = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    320.0,
)
# A stream waits (and so coalesces) while the scheduler is later than this behind real time.
COALESCE_LAG_S = 0.004
COALESCE_MAX_WAIT_S = 0.05
_CLIENT_GONE = (ConnectionError,)  # aiohttp's ClientConnectionResetError is one

logger = logging.getLogger("specbench.sim")
_dumps = functools.partial(json.dumps, separators=(",", ":"))


def _log(level: str, message: str) -> None:
    logger.log(logging.INFO if level == "info" else logging.WARNING, message)


def _error_json(message: str, status: int, err_type: str = "BadRequestError") -> web.Response:
    body = {"object": "error", "message": message, "type": err_type, "param": None, "code": status}
    return web.json_response(body, status=status)


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class FaultPlan:
    """What to do wrong with one generation request."""

    error: bool = False
    truncate: bool = False
    malformed: bool = False


def _every(index: int, rate: float, phase: float) -> bool:
    """Deterministic selection of a fraction `rate` of request indices."""
    if rate <= 0.0:
        return False
    return math.floor((index + 1) * rate + phase) > math.floor(index * rate + phase)


@dataclass
class _Histogram:
    buckets: tuple[float, ...]
    counts: list[int]
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        self.n += 1
        self.total += value
        for i, b in enumerate(self.buckets):
            if value <= b:
                self.counts[i] += 1


class SimServer:
    """State shared by the handlers: settings, the scheduler, counters, status."""

    def __init__(self, settings: ServerSettings, profile: Profile) -> None:
        self.settings = settings
        self.profile = profile
        self.scheduler = Scheduler(settings, profile, _log)
        self.traits = TraitModel(profile.workload, settings.sim_seed)
        self.status = "Starting"
        self.received = 0
        self.started_at = time.time()
        self.e2e_hist = _Histogram(HIST_BUCKETS_S, [0] * len(HIST_BUCKETS_S))
        self.ttft_hist = _Histogram(HIST_BUCKETS_S, [0] * len(HIST_BUCKETS_S))

    # ------------------------------------------------------------------ app
    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        r = app.router
        r.add_get("/ready", self.ready)
        r.add_get("/health", self.health)
        r.add_get("/health_generate", self.health)
        r.add_get("/ping", self.ping)
        r.add_get("/model_info", self.model_info)
        r.add_get("/get_model_info", self.model_info)
        r.add_get("/server_info", self.server_info)
        r.add_get("/get_server_info", self.server_info)
        r.add_get("/v1/models", self.models)
        r.add_route("GET", "/flush_cache", self.flush_cache)
        r.add_route("POST", "/flush_cache", self.flush_cache)
        r.add_get("/metrics", self.metrics)
        r.add_post("/v1/chat/completions", self.chat_completions)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/generate", self.generate)
        r.add_get("/sim/ground_truth", self.ground_truth)
        return app

    # ------------------------------------------------------------------ readiness
    async def ready(self, request: web.Request) -> web.Response:
        if self.status == "Up":
            return web.Response(text="OK")
        return web.Response(status=503, text=f"Server is not ready (status: {self.status})")

    async def health(self, request: web.Request) -> web.Response:
        if self.status != "Up":
            return web.Response(status=503)
        # Like SGLang, a health probe runs a real one-token generation (not counted in metrics).
        traits = self.traits.traits("health check", agentic=False, prompt_tokens=1)
        req = SimRequest(
            uuid.uuid4().hex,
            traits,
            max_new_tokens=1,
            count_metrics=False,
            topk=self.scheduler.topk,
        )
        self.scheduler.submit(req)
        try:
            await asyncio.wait_for(self._wait_finished(req), timeout=20.0)
        except asyncio.TimeoutError:
            self.scheduler.cancel(req)
            return web.Response(status=503)
        return web.Response(status=200)

    async def ping(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.status == "Up" else 503)

    async def model_info(self, request: web.Request) -> web.Response:
        s = self.settings
        return web.json_response(
            {
                "model_path": s.model_path,
                "tokenizer_path": s.model_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": "llama" if "Llama" in self.profile.architecture else "unknown",
                "architectures": [self.profile.architecture],
                "served_model_name": s.served_model_name,
                "load_format": s.load_format,
            }
        )

    async def models(self, request: web.Request) -> web.Response:
        s = self.settings
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": s.served_model_name,
                        "object": "model",
                        "created": int(self.started_at),
                        "owned_by": "sglang",
                        "root": s.model_path,
                        "max_model_len": s.context_length,
                    }
                ],
            }
        )

    def server_info_dict(self) -> dict[str, Any]:
        s, sch = self.settings, self.scheduler
        state: dict[str, Any] = {
            "effective_max_running_requests_per_dp": s.max_running_requests,
            "last_gen_throughput": sch.last_gen_throughput,
            "memory_usage": {
                "weight": self.profile.memory.target_weights_bytes / 2**30,
                "token_capacity": sch.kv_capacity_tokens,
            },
        }
        if s.speculative:
            state["speculative_num_steps"] = sch.current_steps
            avg = sch.avg_spec_accept_length
            if avg is not None:
                state["avg_spec_accept_length"] = avg
        return {
            "model_path": s.model_path,
            "tokenizer_path": s.model_path,
            "served_model_name": s.served_model_name,
            "host": s.host,
            "port": s.port,
            "tp_size": s.tp_size,
            "max_running_requests": s.max_running_requests,
            "chunked_prefill_size": s.chunked_prefill_size,
            "context_length": s.context_length,
            "mem_fraction_static": s.mem_fraction_static
            if s.mem_fraction_static is not None
            else self.profile.memory.mem_fraction_static,
            "random_seed": s.random_seed,
            "enable_metrics": s.enable_metrics,
            "log_level": s.log_level,
            "skip_server_warmup": s.skip_server_warmup,
            "load_format": s.load_format,
            "trust_remote_code": s.trust_remote_code,
            "decode_log_interval": s.decode_log_interval,
            "speculative_algorithm": s.speculative_algorithm,
            "speculative_draft_model_path": s.speculative_draft_model_path,
            "speculative_num_steps": s.speculative_num_steps,
            "speculative_eagle_topk": s.speculative_eagle_topk,
            "speculative_num_draft_tokens": s.speculative_num_draft_tokens,
            "speculative_adaptive": s.speculative_adaptive,
            "speculative_adaptive_config": s.speculative_adaptive_config,
            "cuda_graph_bs_decode": list(s.cuda_graph_bs_decode)
            if s.cuda_graph_bs_decode
            else None,
            "cuda_graph_max_bs_decode": s.cuda_graph_max_bs_decode,
            "cuda_graph_max_bs_prefill": s.cuda_graph_max_bs_prefill,
            "max_total_num_tokens": sch.kv_capacity_tokens,
            "disable_radix_cache": s.disable_radix_cache,
            "enable_cache_report": s.enable_cache_report,
            "max_req_input_len": s.context_length - 1,
            "launch_command": " ".join(["python", "-m", "specbench.sim", *s.argv]),
            "version": SIM_VERSION,
            "status": self.status,
            "internal_states": [state],
            "sim_profile": self.profile.name,
            "sim_profile_path": self.profile.source_path,
            "sim_time_scale": s.sim_time_scale,
            "sim_seed": s.sim_seed,
            "sim_model_time_s": sch.model_time_now(),
            "sim_lag": {
                "last_s": sch.lag_s,
                "max_s": sch.max_lag_s,
                "late_forwards": sch.late_forwards,
                "forwards": sch.forwards,
                "behind": sch.lag_s > 0.05,
            },
            # Since start or /flush_cache: how long after a forward its tokens were written out
            # (server side); large values mean the simulator, not the client, is late.
            "sim_stream_delay": {
                "mean_ms": 1e3 * sch.stream_delay_sum_s / sch.stream_writes
                if sch.stream_writes
                else 0.0,
                "max_ms": 1e3 * sch.stream_delay_max_s,
                "writes": sch.stream_writes,
            },
            "sim_kv_tokens_in_use": sch.kv_tokens_in_use,
            # Since start or /flush_cache: prompt tokens looked up and found in the prefix cache.
            "sim_prefix_cache": {
                "enabled": sch.cache.enabled,
                "hit_tokens": sch.cache.hit_tokens,
                "query_tokens": sch.cache.query_tokens,
                "size_tokens": sch.cache.size_tokens,
            },
            "sim_skip_zero_step_draft_extend": s.skip_zero_step_draft_extend,
        }

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response(self.server_info_dict())

    async def flush_cache(self, request: web.Request) -> web.Response:
        try:
            timeout_s = float(request.query.get("timeout", "0") or 0)
        except ValueError:
            return web.Response(status=400, text="timeout must be a number of seconds\n")
        deadline = time.monotonic() + max(0.0, timeout_s)
        while not self.scheduler.idle and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if not self.scheduler.idle:
            return web.Response(status=400, text=FLUSH_TEXT)
        self.scheduler.flush_cache()
        self.scheduler.reset_spec_stats()
        _log("info", "Cache flushed successfully!")
        return web.Response(status=200, text=FLUSH_TEXT)

    # ------------------------------------------------------------------ metrics
    def _sync_histograms(self) -> None:
        """Fold the latencies the scheduler recorded since the last scrape into histograms."""
        c = self.scheduler.counters
        for hist, samples in ((self.e2e_hist, c.e2e_s), (self.ttft_hist, c.ttft_s)):
            for value in samples:
                hist.observe(value)
            samples.clear()

    async def metrics(self, request: web.Request) -> web.Response:
        if not self.settings.enable_metrics:
            return web.Response(status=404, text="404: Not Found")
        return web.Response(text=self.metrics_text(), content_type="text/plain", charset="utf-8")

    def metrics_text(self) -> str:
        self._sync_histograms()
        sch, c = self.scheduler, self.scheduler.counters
        name = self.settings.served_model_name.replace("\\", "\\\\").replace('"', '\\"')
        tok = f'model_name="{name}",engine_type="unified"'
        sched = f'{tok},tp_rank="0",pp_rank="0",moe_ep_rank="0"'
        lines: list[str] = []

        def metric(
            metric_name: str, kind: str, help_text: str, samples: list[tuple[str, float]]
        ) -> None:
            lines.append(f"# HELP {metric_name} {help_text}")
            lines.append(f"# TYPE {metric_name} {kind}")
            for labels, value in samples:
                lines.append(f"{metric_name}{{{labels}}} {float(value)!r}")

        metric(
            "sglang:num_running_reqs",
            "gauge",
            "The number of running requests.",
            [(sched, sch.num_running)],
        )
        metric(
            "sglang:num_queue_reqs",
            "gauge",
            "The number of requests in the waiting queue.",
            [(sched, sch.num_queued)],
        )
        metric(
            "sglang:gen_throughput",
            "gauge",
            "The generation throughput (token/s).",
            [(sched, sch.last_gen_throughput)],
        )
        usage = sch.kv_tokens_in_use / sch.kv_capacity_tokens if sch.kv_capacity_tokens else 0.0
        metric("sglang:token_usage", "gauge", "The token usage.", [(sched, usage)])
        cache = sch.cache
        hit_rate = cache.hit_tokens / cache.query_tokens if cache.query_tokens else 0.0
        metric("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", [(sched, hit_rate)])
        metric(
            "sglang:max_total_num_tokens",
            "gauge",
            "Maximum total number of tokens in the KV pool.",
            [(sched, sch.kv_capacity_tokens)],
        )
        if self.settings.speculative:
            metric(
                "sglang:spec_accept_length",
                "gauge",
                "The average acceptance length of speculative decoding.",
                [(sched, sch.last_accept_length)],
            )
            k = sch.current_steps
            rate = (sch.last_accept_length - 1.0) / k if k > 0 and sch.last_accept_length else 0.0
            metric(
                "sglang:spec_accept_rate",
                "gauge",
                "The average acceptance rate of speculative decoding.",
                [(sched, rate)],
            )
            metric(
                "sglang:spec_num_steps",
                "gauge",
                "The current number of speculative steps.",
                [(sched, k)],
            )
            metric(
                "sglang:spec_num_draft_tokens",
                "gauge",
                "The current number of draft tokens.",
                [(sched, k + 1)],
            )
        streaming = [(f'{tok},is_streaming="{str(v).lower()}"', v) for v in (False, True)]
        metric(
            "sglang:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            [(labels, c.prompt_tokens[v]) for labels, v in streaming],
        )
        metric(
            "sglang:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            [(labels, c.generation_tokens[v]) for labels, v in streaming],
        )
        metric(
            "sglang:spec_verify_calls_total",
            "counter",
            "Number of speculative verify calls (counted when a request finishes).",
            [(tok, c.verify_calls)],
        )
        metric(
            "sglang:num_requests_total",
            "counter",
            "Number of requests processed.",
            [(tok, c.num_requests)],
        )
        metric(
            "sglang:sim_emitted_tokens_total",
            "counter",
            "specbench.sim extension: output tokens counted at emission (per forward).",
            [(sched, c.emitted_tokens)],
        )
        metric(
            "sglang:sim_running_reqs_seconds_total",
            "counter",
            "specbench.sim extension: integral of running requests over model time "
            "(delta / delta sglang:sim_model_seconds_total = mean running requests).",
            [(sched, c.running_seconds)],
        )
        metric(
            "sglang:sim_model_seconds_total",
            "counter",
            "specbench.sim extension: model (simulated GPU) time elapsed.",
            [(sched, sch.model_time_now())],
        )
        for hist_name, hist, help_text in (
            (
                "sglang:e2e_request_latency_seconds",
                self.e2e_hist,
                "End-to-end request latency (model time).",
            ),
            (
                "sglang:time_to_first_token_seconds",
                self.ttft_hist,
                "Time to first token (model time).",
            ),
        ):
            lines.append(f"# HELP {hist_name} {help_text}")
            lines.append(f"# TYPE {hist_name} histogram")
            for b, count in zip(hist.buckets, hist.counts, strict=True):
                lines.append(f'{hist_name}_bucket{{{tok},le="{b}"}} {float(count)!r}')
            lines.append(f'{hist_name}_bucket{{{tok},le="+Inf"}} {float(hist.n)!r}')
            lines.append(f"{hist_name}_sum{{{tok}}} {hist.total!r}")
            lines.append(f"{hist_name}_count{{{tok}}} {float(hist.n)!r}")
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ ground truth
    async def ground_truth(self, request: web.Request) -> web.Response:
        try:
            start = float(request.query["start"])
            end = float(request.query.get("end", time.monotonic()))
        except (KeyError, ValueError):
            return _error_json(
                "start (and optionally end) must be time.monotonic() seconds, e.g. "
                "/sim/ground_truth?start=123.4&end=130.0",
                400,
            )
        if end < start:
            return _error_json("end is before start; pass start <= end", 400)
        return web.json_response(self.scheduler.ground_truth(start, end))

    # ------------------------------------------------------------------ generation plumbing
    def _on_generation_request(self) -> FaultPlan:
        """Count a received request and decide which fault (if any) it gets."""
        f = self.settings.faults
        index = self.received
        self.received += 1
        if f.crash_after_requests is not None and self.received >= f.crash_after_requests:
            _log(
                "warning",
                f"Scheduler hit an exception: RuntimeError: specbench.sim injected crash "
                f"after {self.received} requests (--sim-crash-after-requests)",
            )
            logging.shutdown()
            os._exit(1)
        return FaultPlan(
            error=_every(index, f.error_rate, 0.0),
            truncate=_every(index, f.truncate_rate, 1.0 / 3.0),
            malformed=_every(index, f.malformed_rate, 2.0 / 3.0),
        )

    async def _json_body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequest("request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        return body

    def _new_request(
        self,
        text: str,
        *,
        agentic: bool,
        max_new_tokens: int | None,
        ignore_eos: bool,
        min_new_tokens: int,
        stream: bool,
        prompt_tokens: int | None = None,
    ) -> SimRequest:
        traits = self.traits.traits(text, agentic=agentic, prompt_tokens=prompt_tokens)
        ctx = self.settings.context_length
        if traits.prompt_tokens >= ctx:
            raise BadRequest(
                f"The input ({traits.prompt_tokens} tokens) is longer than the model's context "
                f"length ({ctx} tokens)."
            )
        limit = ctx - traits.prompt_tokens
        max_new = limit if max_new_tokens is None else min(int(max_new_tokens), limit)
        if max_new < 0:
            raise BadRequest(f"max_tokens must be at least 0, got {max_new_tokens}")
        req = SimRequest(
            uuid.uuid4().hex,
            traits,
            max_new_tokens=max_new,
            ignore_eos=ignore_eos,
            min_new_tokens=min_new_tokens,
            is_streaming=stream,
            topk=self.scheduler.topk,
            block_keys=block_keys(text) if self.scheduler.cache.enabled else (),
        )
        self.scheduler.submit(req)
        return req

    async def _wait_finished(self, req: SimRequest, request: web.Request | None = None) -> None:
        """Wait for a non-streaming request; cancel it if its client disconnects meanwhile."""
        while not req.finished:
            req.event.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(req.event.wait(), timeout=0.5)
            if request is not None and not req.finished:
                transport = request.transport
                if transport is None or transport.is_closing():
                    self.scheduler.cancel(req)
                    raise ConnectionResetError("client went away")

    def _spec_details(self, req: SimRequest) -> dict[str, Any]:
        s = self.settings
        proposed = req.verify_ct * max((s.speculative_num_draft_tokens or 1) - 1, 0)
        return {
            "spec_accept_rate": req.correct_drafts / proposed if proposed else 0.0,
            "spec_accept_length": req.completion_tokens / req.verify_ct if req.verify_ct else 0.0,
            "spec_cap_length": 0.0,
            "spec_block_accept_length": 0.0,
            "spec_num_correct_drafts": req.correct_drafts,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": req.verify_ct,
            "spec_correct_drafts_histogram": list(req.drafts_hist),
            "spec_cap_lens_histogram": [],
        }

    def _meta_info(self, req: SimRequest, final: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": self._native_finish(req) if req.finished else None,
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.completion_tokens,
            "cached_tokens": req.cached_tokens,
            "reasoning_tokens": 0,
            "weight_version": "default",
            "num_retractions": 0,
        }
        if final:
            end = req.finish_real if req.finish_real is not None else time.monotonic()
            meta["e2e_latency"] = (end - req.arrival_real) * self.settings.sim_time_scale
            if self.settings.speculative:
                details = self._spec_details(req)
                details.pop("spec_cap_length")
                details.pop("spec_block_accept_length")
                details.pop("spec_cap_lens_histogram")
                meta.update(details)
        return meta

    @staticmethod
    def _native_finish(req: SimRequest) -> dict[str, Any] | None:
        reason = req.finish_reason
        if reason is not None and reason["type"] == "stop":
            reason = {"type": "stop", "matched": EOS_TOKEN_ID}
        return reason

    @staticmethod
    def _openai_finish(req: SimRequest) -> tuple[str, int | None]:
        if req.finish_kind == "length":
            return "length", None
        return "stop", EOS_TOKEN_ID

    def _usage(self, req: SimRequest) -> dict[str, Any]:
        return {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + req.completion_tokens,
            "completion_tokens": req.completion_tokens,
            "prompt_tokens_details": _cache_details(req, self.settings.enable_cache_report),
            "reasoning_tokens": 0,
        }

    @staticmethod
    async def _guarded(handler: Callable[[], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Run a generation handler: request errors become JSON 400s, a vanished client a no-op."""
        try:
            return await handler()
        except BadRequest as exc:
            return _error_json(str(exc), exc.status)
        except _CLIENT_GONE:
            return web.Response(status=500, text="client went away")

    # ------------------------------------------------------------------ streaming engine
    async def _stream(
        self,
        request: web.Request,
        req: SimRequest,
        fault: FaultPlan,
        on_update: Callable[[int, int, bool], list[str]],
        on_end: Callable[[], list[str]],
    ) -> web.StreamResponse:
        """Send SSE events as the scheduler emits tokens; inject faults when asked to.

        `on_update(sent, now, finished)` returns the data payloads for new tokens [sent, now);
        `on_end()` the payloads after the last token (finish, sglext, usage).
        """
        f = self.settings.faults
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        sent = 0
        stalled = False
        half = max(1, req.target_tokens // 2)
        try:
            while True:
                await req.event.wait()
                lag_s = self.scheduler.lag_s
                if lag_s > COALESCE_LAG_S and not req.finished:
                    # The scheduler is behind real time: step aside so it catches up, then send
                    # one chunk covering every token emitted meanwhile.
                    await asyncio.sleep(min(lag_s, COALESCE_MAX_WAIT_S))
                req.event.clear()
                now, done = req.completion_tokens, req.finished
                if now > sent or (done and sent == 0):
                    payloads = on_update(sent, now, done)
                    if (fault.truncate or fault.malformed) and now >= half:
                        if fault.malformed:
                            payloads.insert(
                                len(payloads) // 2 + 0,
                                '{"id": "' + req.rid + '", "choices": [{"delta": ',
                            )
                            fault.malformed = False
                        if fault.truncate:
                            await resp.write(_sse(payloads[:1]))
                            self.scheduler.cancel(req)
                            if request.transport is not None:
                                request.transport.close()
                            return resp
                    self.scheduler.note_stream_write(time.monotonic())
                    await resp.write(_sse(payloads))
                    sent = now
                    if (
                        not stalled
                        and f.stall_after_tokens is not None
                        and f.stall_s > 0
                        and sent >= f.stall_after_tokens
                        and not done
                    ):
                        stalled = True
                        await asyncio.sleep(f.stall_s)
                if done:
                    break
            await resp.write(_sse([*on_end(), "[DONE]"]))
            await resp.write_eof()
        except asyncio.CancelledError:
            self.scheduler.cancel(req)
            raise
        except _CLIENT_GONE:
            # The client went away mid-stream: free the slot, as SGLang aborts the request.
            self.scheduler.cancel(req)
        return resp

    # ------------------------------------------------------------------ /v1/chat/completions
    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._guarded(lambda: self._chat(request))

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._json_body(request)
        fault = self._on_generation_request()
        if fault.error:
            return _error_json(
                "specbench.sim injected error (--sim-error-rate)", 500, "InternalServerError"
            )
        messages = body.get("messages")
        if (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) for m in messages)
        ):
            raise BadRequest("Messages cannot be empty.")
        tools = body.get("tools") if body.get("tool_choice") != "none" else None
        if tools is not None and not isinstance(tools, list):
            raise BadRequest("tools must be a list")
        if int(body.get("n") or 1) != 1:
            raise BadRequest("specbench.sim supports n = 1 only")
        max_tokens = body.get("max_completion_tokens")
        if max_tokens is None:
            max_tokens = body.get("max_tokens")
        stream = bool(body.get("stream"))
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        continuous = bool(opts.get("continuous_usage_stats"))
        cache_report = self.settings.enable_cache_report
        want_spec = bool(body.get("return_spec_tokens_details")) and self.settings.speculative
        model = str(body.get("model") or self.settings.served_model_name)
        req = self._new_request(
            render_chat(messages, tools),
            agentic=is_agentic(messages, tools),
            max_new_tokens=_opt_int(max_tokens, "max_tokens"),
            ignore_eos=bool(body.get("ignore_eos")),
            min_new_tokens=_opt_int(body.get("min_tokens"), "min_tokens") or 0,
            stream=stream,
        )
        created = int(time.time())
        head = _chunk_head(req.rid, "chat.completion.chunk", created, model)
        if not stream:
            await self._wait_finished(req, request)
            reason, matched = self._openai_finish(req)
            out: dict[str, Any] = {
                "id": req.rid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": filler_text(req.seed, 0, req.completion_tokens),
                            "reasoning_content": None,
                        },
                        "logprobs": None,
                        "finish_reason": reason,
                        "matched_stop": matched,
                    }
                ],
                "usage": self._usage(req),
                "metadata": {"weight_version": "default"},
            }
            if want_spec:
                out["sglext"] = {"spec_tokens_details": self._spec_details(req)}
            return _faulty_json(out, fault)

        def choice(delta: str, finish: str = "null", matched: str = "null") -> str:
            return (
                f'"choices":[{{"index":0,"delta":{delta},"logprobs":null,'
                f'"finish_reason":{finish},"matched_stop":{matched}}}]'
            )

        first = [True]

        def on_update(sent: int, now: int, done: bool) -> list[str]:
            payloads = []
            if first[0]:
                first[0] = False
                payloads.append(
                    head
                    + choice('{"role":"assistant","content":"","reasoning_content":null}')
                    + "}"
                )
            if now > sent:
                usage = f',"usage":{_usage_json(req, cache_report)}' if continuous else ""
                delta = '{"content":' + filler_json(req.seed, sent, now) + "}"
                payloads.append(head + choice(delta) + usage + "}")
            return payloads

        def on_end() -> list[str]:
            reason, matched = self._openai_finish(req)
            finish = head + choice("{}", _dumps(reason), _dumps(matched)) + "}"
            return [finish, *self._openai_trailer(head, req, want_spec, include_usage)]

        return await self._stream(request, req, fault, on_update, on_end)

    def _openai_trailer(
        self, head: str, req: SimRequest, want_spec: bool, include_usage: bool
    ) -> list[str]:
        """The chunks after the last choice, shared by chat and completions streams: the
        sglext spec-details chunk (when asked for) and the usage chunk (when asked for)."""
        payloads = []
        if want_spec:
            payloads.append(
                head
                + '"choices":[],"sglext":'
                + _dumps({"spec_tokens_details": self._spec_details(req)})
                + "}"
            )
        if include_usage:
            payloads.append(head + '"choices":[],"usage":' + _dumps(self._usage(req)) + "}")
        return payloads

    # ------------------------------------------------------------------ /v1/completions
    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._guarded(lambda: self._completions(request))

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._json_body(request)
        fault = self._on_generation_request()
        if fault.error:
            return _error_json(
                "specbench.sim injected error (--sim-error-rate)", 500, "InternalServerError"
            )
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        prompt_tokens: int | None = None
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            prompt_tokens = len(prompt)
            text = " ".join(map(str, prompt))
        elif isinstance(prompt, str) and prompt:
            text = prompt
        else:
            raise BadRequest("prompt must be a non-empty string (or a list of token ids)")
        if int(body.get("n") or 1) != 1:
            raise BadRequest("specbench.sim supports n = 1 only")
        max_tokens = body.get("max_tokens", 16)
        stream = bool(body.get("stream"))
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        continuous = bool(opts.get("continuous_usage_stats"))
        cache_report = self.settings.enable_cache_report
        want_spec = bool(body.get("return_spec_tokens_details")) and self.settings.speculative
        model = str(body.get("model") or self.settings.served_model_name)
        req = self._new_request(
            text,
            agentic=False,
            max_new_tokens=_opt_int(max_tokens, "max_tokens"),
            ignore_eos=bool(body.get("ignore_eos")),
            min_new_tokens=_opt_int(body.get("min_tokens"), "min_tokens") or 0,
            stream=stream,
            prompt_tokens=prompt_tokens,
        )
        created = int(time.time())
        head = _chunk_head(req.rid, "text_completion", created, model)
        if not stream:
            await self._wait_finished(req, request)
            reason, matched = self._openai_finish(req)
            out: dict[str, Any] = {
                "id": req.rid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "text": filler_text(req.seed, 0, req.completion_tokens),
                        "logprobs": None,
                        "finish_reason": reason,
                        "matched_stop": matched,
                    }
                ],
                "usage": self._usage(req),
            }
            if want_spec:
                out["sglext"] = {"spec_tokens_details": self._spec_details(req)}
            return _faulty_json(out, fault)

        def on_update(sent: int, now: int, done: bool) -> list[str]:
            reason, matched = ("null", "null")
            if done:
                r, m = self._openai_finish(req)
                reason, matched = _dumps(r), _dumps(m)
            usage = _usage_json(req, cache_report) if continuous else "null"
            return [
                head
                + '"choices":[{"index":0,"text":'
                + filler_json(req.seed, sent, now)
                + f',"logprobs":null,"finish_reason":{reason},"matched_stop":{matched}}}],'
                + f'"usage":{usage}}}'
            ]

        def on_end() -> list[str]:
            return self._openai_trailer(head, req, want_spec, include_usage)

        return await self._stream(request, req, fault, on_update, on_end)

    # ------------------------------------------------------------------ /generate
    async def generate(self, request: web.Request) -> web.StreamResponse:
        return await self._guarded(lambda: self._generate(request))

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body = await self._json_body(request)
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise BadRequest("sampling_params must be an object")
        unknown = [k for k in params if k not in SAMPLING_KEYS]
        if unknown:
            expected = ", ".join(f"`{k}`" for k in SAMPLING_KEYS)
            return web.json_response(
                {"error": f"unknown field `{unknown[0]}`, expected one of {expected}"}, status=400
            )
        fault = self._on_generation_request()
        if fault.error:
            return web.json_response(
                {
                    "error": {
                        "message": "specbench.sim injected error (--sim-error-rate)",
                        "type": "InternalServerError",
                        "code": 500,
                    }
                },
                status=500,
            )
        text = body.get("text")
        prompt_tokens: int | None = None
        if isinstance(text, list) and len(text) == 1:
            text = text[0]
        ids = body.get("input_ids")
        if isinstance(text, str) and text:
            pass
        elif isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
            prompt_tokens = len(ids)
            text = " ".join(map(str, ids))
        else:
            raise BadRequest(
                "Either text or input_ids should be provided (one prompt per request)."
            )
        if int(params.get("n") or 1) != 1:
            raise BadRequest("specbench.sim supports n = 1 only")
        stream = bool(body.get("stream"))
        req = self._new_request(
            text,
            agentic=False,
            max_new_tokens=_opt_int(params.get("max_new_tokens", 128), "max_new_tokens"),
            ignore_eos=bool(params.get("ignore_eos")),
            min_new_tokens=_opt_int(params.get("min_new_tokens"), "min_new_tokens") or 0,
            stream=stream,
            prompt_tokens=prompt_tokens,
        )
        if not stream:
            await self._wait_finished(req, request)
            out = {
                "text": filler_text(req.seed, 0, req.completion_tokens),
                "output_ids": filler_ids(req.seed, 0, req.completion_tokens),
                "meta_info": self._meta_info(req, final=True),
            }
            return _faulty_json(out, fault)

        text_esc = [""]
        ids_txt = [""]

        def on_update(sent: int, now: int, done: bool) -> list[str]:
            if now > sent:
                text_esc[0] += filler_json(req.seed, sent, now)[1:-1]
                new_ids = ",".join(str(i) for i in filler_ids(req.seed, sent, now))
                ids_txt[0] = f"{ids_txt[0]},{new_ids}" if ids_txt[0] else new_ids
            meta = _dumps(self._meta_info(req, final=done))
            return [f'{{"text":"{text_esc[0]}","output_ids":[{ids_txt[0]}],"meta_info":{meta}}}']

        return await self._stream(request, req, fault, on_update, lambda: [])

    # ------------------------------------------------------------------ lifecycle
    async def warmup(self) -> None:
        """SGLang's warmup: one /generate of 8 tokens; it counts toward the metrics."""
        traits = self.traits.traits("The capital city of France is", agentic=False)
        req = SimRequest(
            uuid.uuid4().hex, traits, max_new_tokens=8, ignore_eos=True, topk=self.scheduler.topk
        )
        self.scheduler.submit(req)
        await self._wait_finished(req)


def _opt_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise BadRequest(f"{name} must be an integer, got {value!r}")
    return int(value)


def _cache_details(req: SimRequest, enabled: bool) -> dict[str, int] | None:
    """usage.prompt_tokens_details: SGLang fills it only with --enable-cache-report."""
    return {"cached_tokens": req.cached_tokens} if enabled else None


def _usage_json(req: SimRequest, cache_report: bool) -> str:
    """SGLang's usage object, formatted directly (it is sent with every chunk under load)."""
    total = req.prompt_tokens + req.completion_tokens
    details = f'{{"cached_tokens":{req.cached_tokens}}}' if cache_report else "null"
    return (
        f'{{"prompt_tokens":{req.prompt_tokens},"total_tokens":{total},'
        f'"completion_tokens":{req.completion_tokens},"prompt_tokens_details":{details},'
        f'"reasoning_tokens":0}}'
    )


def _chunk_head(rid: str, obj: str, created: int, model: str) -> str:
    """The opening of every chunk's JSON object, up to and including the comma after model."""
    return f'{{"id":"{rid}","object":"{obj}","created":{created},"model":{_dumps(model)},'


def _sse(payloads: list[str]) -> bytes:
    return "".join(f"data: {p}\n\n" for p in payloads).encode()


def _faulty_json(out: dict[str, Any], fault: FaultPlan) -> web.Response:
    text = _dumps(out)
    if fault.malformed:
        text = text[: len(text) // 2]
    return web.Response(text=text, content_type="application/json")


# ---------------------------------------------------------------------- main
def _setup_logging(level_name: str) -> None:
    level = logging.getLevelName(level_name.upper())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
    logger.handlers[:] = [handler]
    logger.setLevel(level if isinstance(level, int) else logging.INFO)
    logger.propagate = False


async def serve(settings: ServerSettings, profile: Profile) -> int:
    """Run the server until SIGTERM/SIGINT; return the exit code."""
    sim = SimServer(settings, profile)
    sch = sim.scheduler
    s = settings
    _log(
        "info",
        f"server_args=ServerArgs(model_path={s.model_path!r}, host={s.host!r}, port={s.port}, "
        f"tp_size={s.tp_size}, max_running_requests={s.max_running_requests}, "
        f"speculative_algorithm={s.speculative_algorithm!r}, speculative_num_steps="
        f"{s.speculative_num_steps}, speculative_eagle_topk={s.speculative_eagle_topk}, "
        f"speculative_num_draft_tokens={s.speculative_num_draft_tokens}, speculative_adaptive="
        f"{s.speculative_adaptive}, cuda_graph_bs_decode={s.cuda_graph_bs_decode}, "
        f"sim_profile={profile.name!r}, sim_time_scale={s.sim_time_scale})",
    )
    for level, message in s.startup_log:
        _log(level, message)
    for flag in s.ignored_flags:
        _log("info", f"specbench.sim: {flag} accepted; it has no effect in the simulator")
    _log("info", f"Load weight begin. avail mem={profile.memory.gpu_memory_bytes / 2**30:.2f} GB")
    if s.faults.fail_start is not None:
        print(s.faults.fail_start, file=sys.stderr, flush=True)
        return 1
    _log(
        "info",
        f"Load weight end. type={profile.architecture}, dtype=torch.bfloat16, "
        f"mem usage={profile.memory.target_weights_bytes / 2**30:.2f} GB.",
    )
    _log("info", f"KV Cache is allocated. #tokens: {sch.kv_capacity_tokens}")
    _log("info", "Capture cuda graph begin. This can take up to several minutes.")
    _log("info", "Capture cuda graph end. Time elapsed: 0.00 s.")
    _log(
        "info",
        f"max_total_num_tokens={sch.kv_capacity_tokens}, chunked_prefill_size="
        f"{s.chunked_prefill_size}, max_prefill_tokens=16384, max_running_requests="
        f"{s.max_running_requests}, context_len={s.context_length}",
    )
    if s.faults.cap_running:
        _log(
            "info",
            f"specbench.sim: running requests silently capped at {sch.effective_max_running} "
            "(--sim-cap-running)",
        )

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []

    def on_signal(name: str) -> None:
        received.append(name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)

    runner = web.AppRunner(sim.make_app(), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, s.host, s.port)
    try:
        await site.start()
    except OSError as exc:
        _log(
            "warning",
            f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
            f"({s.host!r}, {s.port}): {exc.strerror}",
        )
        await runner.cleanup()
        return 1
    _log("info", f"Uvicorn running on http://{s.host}:{s.port} (Press CTRL+C to quit)")
    sched_task = asyncio.create_task(sch.run())
    tasks: list[asyncio.Task[Any]] = [sched_task]

    async def start_up() -> None:
        if s.faults.slow_start_s > 0:
            await asyncio.sleep(s.faults.slow_start_s)
        if not s.skip_server_warmup:
            await sim.warmup()
            _log("info", "End of prefill warmup with status 200, resp: [{...}]")
        sim.status = "Up"
        _log("info", READY_LINE)
        if s.faults.crash_after_s is not None:
            await asyncio.sleep(s.faults.crash_after_s)
            _log(
                "warning",
                f"Scheduler hit an exception: RuntimeError: specbench.sim injected crash "
                f"after {s.faults.crash_after_s} s (--sim-crash-after-s)",
            )
            logging.shutdown()
            os._exit(1)

    tasks.append(asyncio.create_task(start_up()))
    stop_wait = asyncio.create_task(stop.wait())
    await asyncio.wait([stop_wait, sched_task], return_when=asyncio.FIRST_COMPLETED)
    if sched_task.done() and sched_task.exception() is not None:
        crash = sched_task.exception()
        _log("warning", f"Scheduler hit an exception: {type(crash).__name__}: {crash}")
        return 1
    _log("info", f"Received {received[0] if received else 'stop'}; shutting down.")
    sim.status = "Shutting down"
    sch.stop()
    for task in tasks:
        task.cancel()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(runner.cleanup(), timeout=2.0)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m specbench.sim``; returns the process exit code."""
    set_parent_death_signal()
    args = list(sys.argv[1:] if argv is None else argv)
    ns = build_parser().parse_args(args)  # exits 2 on unknown/ambiguous flags, like SGLang
    try:
        profile = load_profile(ns.sim_profile)
    except ProfileError as exc:
        print(f"specbench.sim: {exc}", file=sys.stderr, flush=True)
        return 2
    _setup_logging(ns.log_level)
    try:
        settings = resolve(ns, profile, argv=tuple(args))
    except StartupError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr, flush=True)
        return exc.exit_code
    try:
        return asyncio.run(serve(settings, profile))
    except KeyboardInterrupt:
        return 0
