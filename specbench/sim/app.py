"""The simulated SGLang server's aiohttp app: routes, readiness, introspection, cache flush.

:class:`SimServer` holds what every handler shares (settings, the scheduler, the trait model,
the server status, fault planning) and serves the endpoints a harness polls: `/ready`,
`/health`, `/health_generate`, `/ping`, `/model_info`, `/server_info`, `/v1/models`,
`/flush_cache`, Prometheus `/metrics` (prometheus.py) and the simulator's own
`/sim/ground_truth`. Generation lives in openai_api.py and native_api.py, which create
requests through :meth:`SimServer.new_request`, which applies SGLang's length and sampling
checks (validation.py). `--api-key` / `--admin-api-key` are checked as SGLang does (auth.py).
JSON shapes follow SGLang 0.5.23's HTTP server (the contract tests compare them with its
own); `sim_*` keys in `/server_info` are extensions. Times the server reports
(e2e_latency, histograms, gen throughput) are model time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid

from aiohttp import web

from specbench.sim.args import ServerSettings
from specbench.sim.auth import key_middleware
from specbench.sim.bodies import (
    ChatMessage,
    GraphPhaseLimits,
    InternalState,
    ResolvedExecution,
    SamplingParams,
    ServerArgs,
    ServerInfo,
    SimFrontendInfo,
    SimInfo,
)
from specbench.sim.costmodel import Profile
from specbench.sim.faults import FaultInjector
from specbench.sim.frontend import FrontendStage
from specbench.sim.generation import error_json
from specbench.sim.logs import log
from specbench.sim.native_api import NativeApi
from specbench.sim.openai_api import OpenAIApi
from specbench.sim.prefixcache import block_keys
from specbench.sim.prometheus import PrometheusExporter
from specbench.sim.request import SimRequest
from specbench.sim.scheduler import Scheduler
from specbench.sim.validation import check_sampling, fit_context, fit_scheduler
from specbench.sim.workload import TraitModel

READY_LINE = "The server is fired up and ready to roll!"
FLUSH_TEXT = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    "waiting requests, the operation will not be performed.)\n"
)
FLUSH_FAILED = "Flush cache failed.\n"
FLUSH_TIMED_OUT = "Timed out waiting for idle state."
FLUSH_BUSY = "Another flush_cache is already in progress."
_FLUSH_POLL_S = 0.005
_MAX_BODY_BYTES = 256 * 1024 * 1024  # long agentic prompts; aiohttp's default is 1 MiB
_HEALTH_TIMEOUT_S = 20.0
# /server_info's sim_lag.behind: the scheduler's latest forward ended this late or later.
_BEHIND_LAG_S = 0.05



# -- what SGLang 0.5.23 resolves and /server_info returns (server_args.resolved_dict) ------------

def _decode_graph_sizes(speculative: bool, max_bs: int) -> list[int]:
    """SGLang 0.5.23's decode CUDA-graph batch sizes up to max_bs
    (cuda_graph_hook.generate_decode_cuda_graph_batch_sizes): less padding when speculative."""
    if speculative:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8),
                 *range(272, max_bs + 1, 16)]
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16),
                 *range(512, max_bs + 1, 32)]
    sizes = [b for b in sizes if b <= max_bs]
    return sizes if max_bs in sizes else [*sizes, max_bs]


def _resolved_execution(s: ServerSettings) -> ResolvedExecution:
    """The attention backend, CUDA graphs and overlap scheduling as SGLang 0.5.23 on an H200
    resolves them: FA3 by default on Hopper (MHA with topk 1, and MLA); decode graphs up to 256
    rows below TP 4, else 512, capped at --max-running-requests unless given; overlap
    scheduling on (EAGLE-3 runs spec v2) unless --disable-overlap-schedule."""
    no_graphs = s.disable_cuda_graph
    if s.cuda_graph_bs_decode:
        sizes: list[int] | None = list(s.cuda_graph_bs_decode)
        max_bs: int | None = max(s.cuda_graph_bs_decode)
    else:
        max_bs = s.cuda_graph_max_bs_decode or min(256 if s.tp_size < 4 else 512,
                                                   s.max_running_requests)
        sizes = _decode_graph_sizes(s.speculative, max_bs)
    phase: GraphPhaseLimits = {"tc_compiler": "eager", "max_context_size": None,
                               "full_prefill_max_req": None,
                               "full_prefill_prefix_chunk_tokens": None, "max_seq_len": None}
    return {
        "attention_backend": s.attention_backend or "fa3",
        # The simulator takes no per-phase backend flag; SGLang reports None when not given.
        "decode_attention_backend": None,
        "prefill_attention_backend": None,
        "disable_cuda_graph": no_graphs,
        "disable_overlap_schedule": s.disable_overlap_schedule,
        "cuda_graph_config": {
            "decode": {"backend": "disabled" if no_graphs else "full", "max_bs": max_bs,
                       "bs": sizes, **phase},
            "prefill": {"backend": "disabled" if no_graphs else "breakable",
                        "max_bs": s.cuda_graph_max_bs_prefill or s.chunked_prefill_size,
                        "bs": None, **phase},
        },
    }

class SimServer:
    """State shared by the handlers: settings, the scheduler, counters, status."""

    def __init__(self, settings: ServerSettings, profile: Profile) -> None:
        self.settings = settings
        self.profile = profile
        self.scheduler = Scheduler(settings, profile, log)
        # Generation requests pass the tokenizer manager's serial stage (off unless the
        # profile has a [frontend] table); health probes and the warmup go straight in.
        self.frontend = FrontendStage(profile.frontend, self.scheduler, settings.sim_time_scale)
        self.traits = TraitModel(profile.workload, settings.sim_seed)
        self.status = "Starting"
        self.faults = FaultInjector(settings.faults)
        self.started_at = time.time()
        self.prometheus = PrometheusExporter(settings, self.scheduler)
        self._flush_pending = False

    def make_app(self) -> web.Application:
        s = self.settings
        middlewares = (
            [key_middleware(s.api_key, s.admin_api_key)] if (s.api_key or s.admin_api_key) else []
        )
        app = web.Application(client_max_size=_MAX_BODY_BYTES, middlewares=middlewares)
        openai, native = OpenAIApi(self), NativeApi(self)
        r = app.router
        if s.release.has_ready:
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
        r.add_post("/v1/chat/completions", openai.chat_completions)
        r.add_post("/v1/completions", openai.completions)
        r.add_post("/generate", native.generate)
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
            draft_tokens=self.settings.speculative_num_draft_tokens,
        )
        self.scheduler.submit(req)
        try:
            await asyncio.wait_for(self.wait_finished(req), timeout=_HEALTH_TIMEOUT_S)
        except TimeoutError:
            self.scheduler.cancel(req)
            return web.Response(status=503)
        return web.Response(status=200)

    async def ping(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.status == "Up" else 503)

    async def warmup(self) -> None:
        """SGLang's warmup: one /generate of 8 tokens; it counts toward the metrics."""
        traits = self.traits.traits("The capital city of France is", agentic=False)
        req = SimRequest(
            uuid.uuid4().hex, traits, max_new_tokens=8, ignore_eos=True, topk=self.scheduler.topk,
            draft_tokens=self.settings.speculative_num_draft_tokens,
        )
        self.scheduler.submit(req)
        await self.wait_finished(req)

    # ------------------------------------------------------------------ introspection
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
                        "root": s.served_model_name,
                        "parent": None,
                        "max_model_len": s.context_length,
                    }
                ],
            }
        )

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response(self.server_info_dict())

    def server_info_dict(self) -> ServerInfo:
        """SGLang's server args and internal state, then the simulator's `sim_*` keys."""
        return {
            **self._server_args(),
            "version": f"{self.settings.release.version}-sim",
            "status": self.status,
            "internal_states": [self._internal_state()],
            **self._sim_info(),
        }

    def _server_args(self) -> ServerArgs:
        s, sch = self.settings, self.scheduler
        return {
            "model_path": s.model_path,
            "tokenizer_path": s.model_path,
            "served_model_name": s.served_model_name,
            "host": s.host,
            "port": s.port,
            "tp_size": s.tp_size,
            "max_running_requests": s.max_running_requests,
            "chunked_prefill_size": s.chunked_prefill_size,
            # The flag as given: SGLang does not fill it in from the model's config.
            "context_length": s.context_length_arg,
            "allow_auto_truncate": s.allow_auto_truncate,
            "max_total_tokens": s.max_total_tokens,
            "api_key": s.api_key,
            "admin_api_key": s.admin_api_key,
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
            **_resolved_execution(s),
            "max_total_num_tokens": sch.kv_capacity_tokens,
            "disable_radix_cache": s.disable_radix_cache,
            "enable_cache_report": s.enable_cache_report,
            "max_req_input_len": sch.max_req_input_len,
            "launch_command": " ".join(["python", "-m", "specbench.sim", *s.argv]),
        }

    def _internal_state(self) -> InternalState:
        s, sch = self.settings, self.scheduler
        state: InternalState = {
            "effective_max_running_requests_per_dp": s.max_running_requests,
            "last_gen_throughput": sch.decode_log.last_gen_throughput,
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
        return state

    def _sim_info(self) -> SimInfo:
        s, sch, lag = self.settings, self.scheduler, self.scheduler.lag
        return {
            "sim_profile": self.profile.name,
            "sim_profile_path": self.profile.source_path,
            "sim_time_scale": s.sim_time_scale,
            "sim_seed": s.sim_seed,
            "sim_model_time_s": sch.model_time_now(),
            "sim_lag": {
                "last_s": lag.lag_s,
                "max_s": lag.max_lag_s,
                "late_forwards": lag.late_forwards,
                "forwards": lag.forwards,
                "behind": lag.lag_s > _BEHIND_LAG_S,
            },
            # Since start or /flush_cache: how long after a forward its tokens were written out
            # (server side); large values mean the simulator, not the client, is late.
            "sim_stream_delay": {
                "mean_ms": 1e3 * lag.stream_delay_sum_s / lag.stream_writes
                if lag.stream_writes
                else 0.0,
                "max_ms": 1e3 * lag.stream_delay_max_s,
                "writes": lag.stream_writes,
            },
            "sim_kv_tokens_in_use": sch.kv_tokens_in_use,
            # Never reset: the queue head waited for KV space / requests were retracted.
            "sim_kv_waits": sch.counters.kv_waits,
            "sim_retractions": sch.counters.retracted_requests,
            # Since start or /flush_cache: prompt tokens looked up and found in the prefix cache.
            "sim_prefix_cache": {
                "enabled": sch.cache.enabled,
                "hit_tokens": sch.cache.hit_tokens,
                "query_tokens": sch.cache.query_tokens,
                "size_tokens": sch.cache.size_tokens,
            },
            "sim_skip_zero_step_draft_extend": s.skip_zero_step_draft_extend,
            **self._frontend_info(),
        }

    def _frontend_info(self) -> SimFrontendInfo:
        """`sim_frontend` when the profile models the tokenizer manager's serial stage."""
        stage = self.frontend
        if not stage.enabled:
            return {}
        return {
            "sim_frontend": {
                "request_ms": stage.frontend.request_ms,
                "prompt_token_us": stage.frontend.prompt_token_us,
                # Not in #queue-req: SGLang's scheduler has not seen these yet.
                "waiting": stage.waiting,
                "served": stage.stats.served,
                "busy_model_s": stage.stats.busy_model_s,
                "wait_model_s": stage.stats.wait_model_s,
            }
        }

    # ------------------------------------------------------------------ cache, metrics, truth
    async def flush_cache(self, request: web.Request) -> web.Response:
        """SGLang's flush: only on an idle scheduler. `?timeout=S` (S >= 0 seconds) waits up
        to S for idle; otherwise a busy server answers 400 at once."""
        timeout_s = _flush_timeout(request)
        if isinstance(timeout_s, web.Response):
            return timeout_s
        if self._flush_pending:
            return web.Response(status=400, text=FLUSH_BUSY)
        sch = self.scheduler
        if timeout_s > 0 and not sch.idle:
            self._flush_pending = True
            try:
                deadline = time.monotonic() + timeout_s
                while not sch.idle and time.monotonic() < deadline:
                    await asyncio.sleep(_FLUSH_POLL_S)
            finally:
                self._flush_pending = False
            if not sch.idle:
                log("warning", "Deferred flush_cache timed out while waiting for idle state.")
                return web.Response(status=400, text=FLUSH_TIMED_OUT)
        if not sch.idle:
            log(
                "warning",
                "Cache not flushed because there are pending requests. "
                f"#queue-req: {sch.num_queued}, #running-req: {sch.num_running}",
            )
            return web.Response(status=400, text=FLUSH_FAILED)
        sch.flush_cache()
        sch.reset_spec_stats()
        log("info", "Cache flushed successfully!")
        return web.Response(status=200, text=FLUSH_TEXT)

    async def metrics(self, request: web.Request) -> web.Response:
        if not self.settings.enable_metrics:
            return web.Response(status=404, text="404: Not Found")
        text = self.prometheus.text()
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def ground_truth(self, request: web.Request) -> web.Response:
        try:
            start = float(request.query["start"])
            end = float(request.query.get("end", time.monotonic()))
        except (KeyError, ValueError):
            return error_json(
                "start (and optionally end) must be time.monotonic() seconds, e.g. "
                "/sim/ground_truth?start=123.4&end=130.0",
                400,
            )
        if end < start:
            return error_json("end is before start; pass start <= end", 400)
        body = self.scheduler.ground_truth(start, end).to_json()
        if request.query.get("requests") == "1":  # every finished request's own timings
            body["requests"] = self.scheduler.truth.finished_requests(start, end)
        return web.json_response(body)

    # ------------------------------------------------------------------ generation plumbing
    def new_request(
        self,
        text: str,
        *,
        agentic: bool,
        sampling: SamplingParams,
        stream: bool,
        prompt_tokens: int | None = None,
        messages: list[ChatMessage] | None = None,
    ) -> SimRequest:
        """Check a request as SGLang does (context length, then the sampling values, then
        the scheduler's input limit), then queue it. `sampling` uses SGLang's names; without
        a `max_new_tokens` key (a `/generate` body without one) the context check has no
        output budget to add and generation stops at SGLang's default of 128 tokens."""
        traits = self.traits.traits(
            text, agentic=agentic, prompt_tokens=prompt_tokens, messages=messages
        )
        s, sch = self.settings, self.scheduler
        n_prompt, max_new = fit_context(traits.prompt_tokens, sampling.get("max_new_tokens"), s)
        if "max_new_tokens" in sampling:
            sampling = {**sampling, "max_new_tokens": max_new}
        check_sampling(sampling, self.profile.vocab_size)
        max_new = sampling.get("max_new_tokens", 128)
        n_prompt, max_new_cap = fit_scheduler(n_prompt, max_new, s, sch.max_req_len)
        if n_prompt != traits.prompt_tokens:
            traits = dataclasses.replace(traits, prompt_tokens=n_prompt)
        req = SimRequest(
            uuid.uuid4().hex,
            traits,
            max_new_tokens=max_new_cap,
            ignore_eos=bool(sampling.get("ignore_eos")),
            min_new_tokens=int(sampling.get("min_new_tokens") or 0),
            is_streaming=stream,
            topk=sch.topk,
            draft_tokens=s.speculative_num_draft_tokens,
            block_keys=block_keys(text) if sch.cache.enabled else (),
        )
        self.frontend.submit(req, tokenized=prompt_tokens is None)
        return req

    async def wait_finished(self, req: SimRequest, request: web.Request | None = None) -> None:
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
        await self.frontend.output_turn()


def _flush_timeout(request: web.Request) -> float | web.Response:
    """`?timeout=` as SGLang's handler reads it: a number of seconds >= 0 (default 0), or a
    400 with FastAPI's validation text."""
    raw = request.query.get("timeout")
    if raw is None:
        return 0.0
    try:
        value = float(raw)
        problem = None if value >= 0 else "greater_than_equal"
    except ValueError:
        problem = "float_parsing"
    if problem is None:
        return value
    if problem == "float_parsing":
        msg = "Input should be a valid number, unable to parse string as a number"
        detail = f"{{'type': 'float_parsing', 'loc': ('query', 'timeout'), 'msg': '{msg}', "
        detail += f"'input': {raw!r}}}"
    else:
        msg = "Input should be greater than or equal to 0"
        detail = f"{{'type': 'greater_than_equal', 'loc': ('query', 'timeout'), 'msg': '{msg}', "
        detail += f"'input': {raw!r}, 'ctx': {{'ge': 0.0}}}}"
    message = f"1 validation error:\n  {detail}\n\n  {request.method} /flush_cache [{detail}]"
    return error_json(message, 400, "Bad Request")
