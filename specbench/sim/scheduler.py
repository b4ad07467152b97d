"""Continuous batching on a virtual GPU clock: the heart of the simulated SGLang server.

The scheduler does what SGLang's does at the level a throughput benchmark can see:

* a FIFO queue; at most R requests running (R = resolved --max-running-requests, optionally
  capped lower by --sim-cap-running) and no more KV than the pool holds (--max-total-tokens
  caps the pool); SGLang's admission reserve and decode retraction decide who waits when
  the pool is short (kvpool.py);
* a prefix (radix) cache, on unless --disable-radix-cache: a new request prefills only the
  part of its prompt not already cached (prefixcache.py); cached blocks share the KV pool with
  running requests and are evicted least recently used when the pool needs room;
* forwards alternate between an extend (prefill) forward over up to --chunked-prefill-size
  new prompt tokens and a decode forward over every request that has its first token;
* a decode forward of a speculative server verifies K drafts per request; each request accepts
  a chain of drafts with its own per-token probability (seeded, so runs repeat), so one
  forward adds 1..K+1 tokens to a request;
* dynamic mode routes every decode forward to a step count by batch size exactly as SGLang
  0.5.23's ``_route`` does (adaptive.py), with the EMA policy for slots that have several
  candidates.

Time: the cost model gives each forward a duration in model time. The scheduler keeps a
virtual model clock and sleeps until each forward's real deadline
``anchor_real_s + (model_now_s - anchor_model_s) / time_scale``, so CPU jitter does not
accumulate; when it cannot keep up it runs forwards back to back and reports the lag. Tokens
of a forward become visible (to HTTP handlers and to the ground-truth record) at its real end.

Around this core: request.py (the request object), groundtruth.py (what was emitted, when),
stats.py (counters and diagnostics that observers read).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from specbench.sim import kvpool
from specbench.sim.adaptive import AdaptiveRouter
from specbench.sim.args import ServerSettings
from specbench.sim.costmodel import Profile, decode_step, prefill_step
from specbench.sim.groundtruth import GroundTruth, GroundTruthRecord
from specbench.sim.prefixcache import PrefixCache
from specbench.sim.request import SimRequest
from specbench.sim.stats import Counters, DecodeLogWindow, LagStats, LoadGauges

LogFn = Callable[[str, str], None]
_NO_PREFILL_LIMIT = 1 << 30  # --chunked-prefill-size <= 0: one extend takes any prompt


@dataclass
class _Forward:
    """One planned forward: what it runs on and how long it takes in model time."""

    kind: str  # "prefill" | "decode"
    duration_s: float  # model time
    requests: list[SimRequest]
    chunks: list[int]  # prefill: new tokens per request
    steps: int = 0
    kv_tokens: int = 0
    decoding_before: int = 0  # requests in the decode batch when the forward was planned
    cached_tokens: int = 0  # prefill: prompt tokens of newly admitted requests found cached


class Scheduler(kvpool.PoolAccounting):
    """Runs the model; HTTP handlers `submit` requests and wait on their events."""

    def __init__(self, settings: ServerSettings, profile: Profile, log: LogFn) -> None:
        self.settings = settings
        self.profile = profile
        self.log = log
        self.speculative = settings.speculative
        self.topk = settings.speculative_eagle_topk or 1
        self.static_steps = settings.speculative_num_steps or 0
        self.router = self._make_router(settings)
        cap = settings.faults.cap_running
        self.max_running = settings.max_running_requests
        self.effective_max_running = min(self.max_running, cap) if cap else self.max_running
        kv_bytes = profile.target_attention.kv_bytes_per_token
        if self.speculative:
            kv_bytes += profile.draft_attention.kv_bytes_per_token
        self.kv_capacity_tokens = self._pool_size(
            profile.memory.kv_capacity_tokens(
                kv_bytes,
                with_draft=self.speculative,
                mem_fraction_static=settings.mem_fraction_static,
            )
        )
        # SGLang's longest request (input + output) and longest input.
        self.max_req_len = min(settings.context_length - 1, self.kv_capacity_tokens - 1)
        self.max_req_input_len = self.max_req_len - 5
        self.time_scale = settings.sim_time_scale
        chunk = settings.chunked_prefill_size
        self.prefill_budget = chunk if chunk > 0 else _NO_PREFILL_LIMIT

        self.queue: deque[SimRequest] = deque()
        self.prefilling: deque[SimRequest] = deque()
        self.decoding: list[SimRequest] = []
        # KV in use = used_tokens (held privately by admitted requests: uncached prompt and
        # output tokens) + the prefix cache's blocks (shared, and evictable when unlocked).
        self.used_tokens = 0
        self.cache = PrefixCache(enabled=not settings.disable_radix_cache)
        self.current_steps = self.static_steps
        self._last_was_decode = True
        self._wake = asyncio.Event()
        self._stopping = False
        # The model clock (seconds of simulated GPU time) and the real instant it was anchored.
        self.anchor_real_s = time.monotonic()
        self.anchor_model_s = 0.0
        self.model_now_s = 0.0

        self.ratio = kvpool.NewTokenRatio()
        self.gauges = LoadGauges()
        self._last_retraction = 0  # requests in the latest retraction not yet reported
        self.counters = Counters()
        self.lag = LagStats()
        self.decode_log = DecodeLogWindow(settings.decode_log_interval)
        self.truth = GroundTruthRecord()

    def _make_router(self, settings: ServerSettings) -> AdaptiveRouter | None:
        if not settings.speculative_adaptive:
            return None
        router = AdaptiveRouter(
            settings.adaptive_slots, settings.cuda_graph_bs_decode, self.static_steps
        )
        first = router.states[0]
        self.log(
            "info",
            f"AdaptiveSpeculativeParams initialized: steps={first.current}, "
            f"candidate_steps={list(first.config.candidate_steps)}",
        )
        return router

    # ----------------------------------------------------------------- handler side
    @property
    def idle(self) -> bool:
        return not (self.queue or self.prefilling or self.decoding)

    def submit(self, req: SimRequest) -> None:
        self.queue.append(req)
        self._wake.set()

    def cancel(self, req: SimRequest) -> None:
        """The client went away: drop the request at the next forward boundary."""
        if not req.finished:
            req.cancelled = True
            self._wake.set()

    def model_time_now(self) -> float:
        """Model clock now, in seconds (it runs with real time x scale when idle)."""
        if self.idle:
            return self.anchor_model_s + (time.monotonic() - self.anchor_real_s) * self.time_scale
        return self.model_now_s

    def flush_cache(self) -> None:
        """/flush_cache on an idle server: the prefix cache empties (nothing holds a block)."""
        self.cache.flush()

    def reset_spec_stats(self) -> None:
        self.counters.spec_decode_tokens = 0
        self.counters.spec_req_steps = 0
        self.lag.reset()

    @property
    def avg_spec_accept_length(self) -> float | None:
        c = self.counters
        if not self.speculative or c.spec_req_steps == 0:
            return None
        return c.spec_decode_tokens / c.spec_req_steps

    def ground_truth(self, start: float, end: float) -> GroundTruth:
        """What the scheduler really did between two time.monotonic() instants."""
        return self.truth.window(
            start, end, time_scale=self.time_scale, speculative=self.speculative
        )

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    # ----------------------------------------------------------------- main loop
    async def run(self) -> None:
        while not self._stopping:
            fwd = self._plan()
            if fwd is None:
                self._on_idle()
                self._wake.clear()
                await self._wake.wait()
                now = time.monotonic()
                # Idle time passes on the model clock too; lag from before the pause is forgiven.
                self.model_now_s = max(
                    self.model_now_s,
                    self.anchor_model_s + (now - self.anchor_real_s) * self.time_scale,
                )
                self.anchor_real_s, self.anchor_model_s = now, self.model_now_s
                continue
            start_real_s = time.monotonic()
            self.model_now_s += fwd.duration_s
            deadline_real_s = (
                self.anchor_real_s + (self.model_now_s - self.anchor_model_s) / self.time_scale
            )
            delay = deadline_real_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                await asyncio.sleep(0)  # let HTTP handlers run even when behind
            end_real_s = time.monotonic()
            self.lag.note_forward_end(end_real_s, deadline_real_s)
            self._commit(fwd, start_real_s, end_real_s)

    # ----------------------------------------------------------------- planning
    def _head_admissible(self) -> bool:
        """Whether the head of the queue may start its prefill now (cancelled heads dropped)."""
        while self.queue and self.queue[0].cancelled:
            head = self.queue.popleft()
            self._release(head)
            self._finish(head, time.monotonic())
        if not self.queue or self.num_running >= self.effective_max_running:
            return False
        head = self.queue[0]
        return head.reserved or self._reserve(head)

    def _drop_cancelled(self) -> None:
        now = time.monotonic()
        if any(r.cancelled for r in self.prefilling):
            for r in [r for r in self.prefilling if r.cancelled]:
                self.prefilling.remove(r)
                self._release(r)
                self._finish(r, now)
        if any(r.cancelled for r in self.decoding):
            keep = []
            for r in self.decoding:
                if r.cancelled:
                    self._release(r)
                    self._finish(r, now)
                else:
                    keep.append(r)
            self.decoding = keep

    def _plan(self) -> _Forward | None:
        self._drop_cancelled()
        want_prefill = bool(self.prefilling) or self._head_admissible()
        turn = self._last_was_decode or self.profile.scheduling.prefill_first
        if want_prefill and (turn or not self.decoding):
            return self._plan_prefill()
        if self.decoding:
            return self._plan_decode()
        return None

    def _plan_prefill(self) -> _Forward:
        """An extend forward: the chunked request in progress first, then new requests from
        the queue while the --chunked-prefill-size token budget, R and the KV pool allow."""
        budget = self.prefill_budget
        reqs: list[SimRequest] = []
        chunks: list[int] = []
        cost_chunks: list[tuple[int, int]] = []

        def take(req: SimRequest) -> None:
            nonlocal budget
            # Only the uncached rest is computed; attention still reads the cached prefix.
            n = min(req.prefill_len - req.prefill_done, budget)
            reqs.append(req)
            chunks.append(n)
            cost_chunks.append((n, req.prefill_done))
            budget -= n

        for req in self.prefilling:
            if budget <= 0:
                break
            take(req)
        new_cached = 0
        while budget > 0 and self._head_admissible():
            req = self.queue.popleft()
            self.prefilling.append(req)
            take(req)
            new_cached += req.cached_tokens
        # The running requests' share of a prefill is EAGLE's with drafts (the FlashInfer run's
        # zero-step intervals show none of it: o_spec_prefill_per_running_req_ms).
        drafting = len(self.decoding) if self.current_steps > 0 else 0
        cost = prefill_step(self.profile, cost_chunks, speculative=self.speculative,
                            running=drafting)
        self._last_was_decode = False
        return _Forward(
            "prefill",
            cost.total_ms / 1e3,
            reqs,
            chunks,
            decoding_before=len(self.decoding),
            cached_tokens=new_cached,
        )

    def _steps_for(self, bs: int) -> int:
        if not self.speculative:
            return 0
        return self.router.steps_for(bs) if self.router else self.static_steps

    def _plan_decode(self) -> _Forward:
        self._fit_decode()
        batch = list(self.decoding)
        bs = len(batch)
        contexts = [r.prompt_tokens + r.completion_tokens for r in batch]
        kv_tokens = sum(contexts)
        steps = 0
        if self.speculative:
            steps = self._steps_for(bs)
            if steps != self.current_steps and self.router is not None:
                self.log(
                    "info",
                    f"Switch adaptive runtime state: steps {self.current_steps} -> {steps}, "
                    f"draft_tokens {self.current_steps + 1} -> {steps + 1}",
                )
            self.current_steps = steps
        cost = decode_step(
            self.profile,
            bs,
            kv_tokens,
            speculative=self.speculative,
            num_steps=steps,
            topk=self.topk,
            num_draft_tokens=self.settings.speculative_num_draft_tokens,
            skip_zero_step_draft_extend=self.settings.skip_zero_step_draft_extend,
            longest_context_tokens=max(contexts, default=0),
            shared_read_tokens=self.cache.shared_read_tokens,
        )
        self._last_was_decode = True
        return _Forward("decode", cost.total_ms / 1e3, batch, [], steps, kv_tokens)

    # ----------------------------------------------------------------- commit
    def _commit(self, fwd: _Forward, start_real_s: float, end_real_s: float) -> None:
        running = self.num_running
        self.counters.running_seconds += running * fwd.duration_s
        self.lag.forwards += 1
        if fwd.kind == "prefill":
            emitted = self._commit_prefill(fwd, end_real_s)
        else:
            emitted = self._commit_decode(fwd, end_real_s)
        self.counters.emitted_tokens += emitted
        self.truth.add_forward(end_real_s, start_real_s, emitted, running, fwd.kind == "decode")

    def _commit_prefill(self, fwd: _Forward, end_real_s: float) -> int:
        """Advance the prefills; a request whose prompt is done samples its first token."""
        emitted = 0
        done: list[SimRequest] = []
        for req, n in zip(fwd.requests, fwd.chunks, strict=True):
            if req.cancelled:
                continue
            req.prefill_done += n
            if req.prefill_done >= req.prefill_len:
                done.append(req)
        for req in done:
            self.prefilling.remove(req)
            self._insert_prompt(req)
            if req.first_token_real_s is None:
                req.first_token_real_s = end_real_s
            if req.target_tokens <= 0:
                self._finish(req, end_real_s)
                self._release(req)
                continue
            # The extend forward samples the next output token (the first, unless the request
            # was retracted and is resuming).
            req.completion_tokens += 1
            req.kv_private += 1
            self.used_tokens += 1
            emitted += 1
            if req.completion_tokens >= req.target_tokens:
                req.last_step_from = req.completion_tokens - 1
                self._release(req)
                self._finish(req, end_real_s)
            else:
                self.decoding.append(req)
                if req.is_streaming:  # others only need to hear about the finish
                    req.event.set()
        self._log_prefill(fwd)
        self._report_gauges(fwd.decoding_before)
        return emitted

    def _commit_decode(self, fwd: _Forward, end_real_s: float) -> int:
        """Verify (or decode) one step for every live request of the batch."""
        steps = fwd.steps
        spec = self.speculative
        emitted = 0
        accepted_total = 0
        finished: list[SimRequest] = []
        n_live = 0
        for req in fwd.requests:
            if req.cancelled or req.finished:
                continue
            n_live += 1
            remaining = req.target_tokens - req.completion_tokens
            if spec:
                acc = req.draw_accepted(steps) if steps > 0 else 0
                add = min(acc + 1, remaining)
                req.note_verify(add - 1)
                accepted_total += acc
            else:
                add = 1
            req.completion_tokens += add
            req.kv_private += add
            emitted += add
            if add >= remaining:
                req.last_step_from = req.completion_tokens - add
                finished.append(req)
            elif req.is_streaming:
                req.event.set()
        self.used_tokens += emitted
        self._trim_cache()
        for req in finished:
            self._release(req)
            self._finish(req, end_real_s)
        if finished:
            done = set(map(id, finished))
            self.decoding = [r for r in self.decoding if id(r) not in done]
        if spec and n_live:
            self.counters.spec_decode_tokens += emitted
            self.counters.spec_req_steps += n_live
            self._adapt(len(fwd.requests), accepted_total / n_live)
        if self.decode_log.add(emitted, n_live):
            self._log_decode(fwd)
            self._report_gauges(len(fwd.requests))
        return emitted

    def _adapt(self, batch_size: int, mean_accepted: float) -> None:
        """Feed the verify's acceptance to the adaptive slot that served it."""
        if self.router is None:
            return
        slot = self.router.route(batch_size)
        old = slot.current
        new = slot.on_verify(mean_accepted)
        if new is not None:  # SGLang's line (0.5.17 and 0.5.23): it does not name the slot
            self.log("info", f"Adaptive spec params updated: steps {old} -> {new} "
                             f"(ema_accept_len={slot.ema:.2f})")

    def _finish(self, req: SimRequest, now: float) -> None:
        if req.finished:
            return
        req.finished = True
        req.finish_real_s = now
        if req.count_metrics:
            c = self.counters
            c.prompt_tokens[req.is_streaming] += req.prompt_tokens
            c.generation_tokens[req.is_streaming] += req.completion_tokens
            c.verify_calls += req.verify_ct
            c.num_requests += 1
            scale = self.time_scale
            c.e2e_s.append((now - req.arrival_real_s) * scale)
            if req.first_token_real_s is not None:
                c.ttft_s.append((req.first_token_real_s - req.arrival_real_s) * scale)
            self.truth.add_finish(now, req.completion_tokens, req.verify_ct, req.correct_drafts,
                                  req.arrival_real_s, req.first_token_real_s)
        req.event.set()

    # ----------------------------------------------------------------- logs
    def _log_prefill(self, fwd: _Forward) -> None:
        self.log(
            "info",
            f"Prefill batch, #new-seq: {len(fwd.requests)}, #new-token: {sum(fwd.chunks)}, "
            f"#cached-token: {fwd.cached_tokens}, token usage: {self.kv_usage:.2f}, "
            f"#running-req: {fwd.decoding_before}, "
            f"#queue-req: {len(self.queue)}",
        )

    @property
    def draft_tokens_now(self) -> int:
        """Tokens a verify checks per request now: a tree's N, else the chain's steps + 1."""
        if (self.settings.speculative_eagle_topk or 1) > 1:
            return self.settings.speculative_num_draft_tokens or self.current_steps + 1
        return self.current_steps + 1

    def _log_decode(self, fwd: _Forward) -> None:
        window = self.decode_log
        window.close(self.model_now_s, self.speculative)
        spec = ""
        if self.speculative:
            # SGLang's rate is over the drafts a verify checks: N - 1 (K for a chain).
            drafts = self.draft_tokens_now - 1
            rate = (window.last_accept_length - 1.0) / drafts if drafts > 0 else 0.0
            spec = f"accept len: {window.last_accept_length:.2f}, accept rate: {rate:.2f}, "
        self.log(
            "info",
            f"Decode batch, #running-req: {len(fwd.requests)}, #token: {fwd.kv_tokens}, "
            f"token usage: {self.kv_usage:.2f}, {spec}cuda graph: True, "
            f"gen throughput (token/s): {window.last_gen_throughput:.2f}, "
            f"#queue-req: {len(self.queue)}",
        )
