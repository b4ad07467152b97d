"""Continuous batching on a virtual GPU clock: the heart of the simulated SGLang server.

The scheduler does what SGLang's does at the level a throughput benchmark can see:

* a FIFO queue; at most R requests running (R = resolved --max-running-requests, optionally
  capped lower by --sim-cap-running) and no more KV than the pool holds;
* a prefix (radix) cache, on unless --disable-radix-cache: a new request prefills only the
  part of its prompt not already cached (prefixcache.py); cached blocks share the KV pool with
  running requests and are evicted least recently used when the pool needs room;
* forwards alternate between an extend (prefill) forward over up to --chunked-prefill-size
  new prompt tokens and a decode forward over every request that has its first token;
* a decode forward of a speculative server verifies K drafts per request; each request accepts
  a chain of drafts with its own per-token probability (seeded, so runs repeat), so one
  forward adds 1..K+1 tokens to a request;
* dynamic mode routes every decode forward to a step count by batch size exactly as SGLang
  0.5.23's ``_route`` does (pad to --cuda-graph-bs-decode when given, then the largest slot key
  <= padded size), with the EMA policy for slots that have several candidates.

Time: the cost model gives each forward a duration in model time. The scheduler keeps a
virtual model clock and sleeps until each forward's real deadline
``anchor_real + (model_time - anchor_model) / time_scale``, so CPU jitter does not accumulate;
when it cannot keep up it runs forwards back to back and reports the lag. Tokens of a forward
become visible (to HTTP handlers and to the ground-truth record) at its real end time.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import random
import time
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specbench.sim.args import ServerSettings, SlotConfig
from specbench.sim.costmodel import Profile, decode_step, prefill_step
from specbench.sim.prefixcache import BLOCK_TOKENS, PrefixCache
from specbench.sim.workload import RequestTraits

LogFn = Callable[[str, str], None]


class SimRequest:
    """One generation request as the scheduler sees it; handlers read its cumulative counters."""

    __slots__ = (
        "arrival_real",
        "block_keys",
        "cached_tokens",
        "cancelled",
        "completion_tokens",
        "correct_drafts",
        "count_metrics",
        "drafts_hist",
        "event",
        "finish_kind",
        "finish_real",
        "finished",
        "first_token_real",
        "is_streaming",
        "kv_private",
        "locked_keys",
        "log_alpha",
        "max_new_tokens",
        "prefill_done",
        "prompt_tokens",
        "reserved",
        "rid",
        "rng",
        "seed",
        "target_tokens",
        "traits",
        "verify_ct",
    )

    def __init__(
        self,
        rid: str,
        traits: RequestTraits,
        *,
        max_new_tokens: int,
        ignore_eos: bool = False,
        min_new_tokens: int = 0,
        is_streaming: bool = False,
        count_metrics: bool = True,
        topk: int = 1,
        block_keys: tuple[bytes, ...] = (),
    ) -> None:
        self.rid = rid
        self.traits = traits
        self.prompt_tokens = traits.prompt_tokens
        # Only blocks that lie wholly inside the prompt's token count can be cached.
        self.block_keys = block_keys[: self.prompt_tokens // BLOCK_TOKENS]
        self.cached_tokens = 0  # prompt tokens served from the prefix cache
        self.locked_keys: tuple[bytes, ...] = ()  # cache blocks this request holds
        self.kv_private = 0  # KV tokens this request holds outside the cache
        self.reserved = False  # KV space reserved (at admission) and not yet released
        self.max_new_tokens = max(0, max_new_tokens)
        natural = max(traits.natural_output_tokens, min_new_tokens)
        if ignore_eos or natural >= self.max_new_tokens:
            self.target_tokens, self.finish_kind = self.max_new_tokens, "length"
        else:
            self.target_tokens, self.finish_kind = natural, "stop"
        self.seed = traits.seed
        self.rng = random.Random(traits.seed)
        # A tree of topk branches per depth: a depth is accepted when any branch matches.
        alpha = 1.0 - (1.0 - traits.alpha) ** max(1, topk)
        self.log_alpha = math.log(min(max(alpha, 1e-9), 1.0 - 1e-9))
        self.is_streaming = is_streaming
        self.count_metrics = count_metrics
        self.arrival_real = time.monotonic()
        self.prefill_done = 0
        self.completion_tokens = 0
        self.verify_ct = 0
        self.correct_drafts = 0
        self.drafts_hist: list[int] = []
        self.first_token_real: float | None = None
        self.finish_real: float | None = None
        self.finished = False
        self.cancelled = False
        self.event = asyncio.Event()

    @property
    def finish_reason(self) -> dict[str, Any] | None:
        """SGLang's meta_info.finish_reason once finished."""
        if not self.finished:
            return None
        if self.cancelled:
            return {"type": "abort", "message": "client disconnected"}
        if self.finish_kind == "length":
            return {"type": "length", "length": self.completion_tokens}
        return {"type": "stop", "matched": None}

    def draw_accepted(self, num_steps: int) -> int:
        """Accepted drafts in one verify: P(at least j accepted) = alpha^j, capped at K."""
        u = self.rng.random()
        if u <= 0.0:
            return num_steps
        return min(num_steps, int(math.log(u) / self.log_alpha))


@dataclass
class SlotState:
    """Runtime state of one adaptive slot, with SGLang 0.5.23's AdaptiveStepSlot policy.

    The EMA tracks accepted drafts per request (bonus token excluded) and only moves while
    drafting. After `warmup_batches` verifies, every `update_interval` verifies: step down
    while the EMA is at or below the previous candidate - 0.5 (0.5 when that candidate is 0)
    plus `down_hysteresis`; otherwise step up while it is above the current step - 0.5 plus
    `up_hysteresis`; from zero steps, always probe the next candidate.
    """

    config: SlotConfig
    current: int
    ema: float
    batch_count: int = 0

    @classmethod
    def start(cls, config: SlotConfig, initial_steps: int) -> SlotState:
        cands = config.candidate_steps
        current = initial_steps if initial_steps in cands else cands[len(cands) // 2]
        return cls(config, current, float(current - 1))

    def on_verify(self, mean_accepted: float) -> int | None:
        """Feed one verify's mean accepted drafts; return the new step count if it changes."""
        cfg = self.config
        if self.current > 0:
            self.ema = (1.0 - cfg.ema_alpha) * self.ema + cfg.ema_alpha * mean_accepted
        self.batch_count += 1
        if self.batch_count <= cfg.warmup_batches:
            return None
        if (self.batch_count - cfg.warmup_batches) % cfg.update_interval != 0:
            return None
        new = self._target()
        if new == self.current:
            return None
        self.current = new
        return new

    def _target(self) -> int:
        cfg, cands = self.config, self.config.candidate_steps
        old_idx = idx = cands.index(self.current)
        if self.current == 0:
            idx = min(idx + 1, len(cands) - 1)
            if cands[idx] > 0 and self.ema < 0:
                self.ema = float(cands[idx] - 1)  # no acceptance history yet: neutral start
            return cands[idx]
        while idx > 0:
            prev = cands[idx - 1]
            if self.ema <= (0.5 if prev == 0 else prev - 0.5) + cfg.down_hysteresis:
                idx -= 1
            else:
                break
        if idx == old_idx:
            while idx < len(cands) - 1 and self.ema > cands[idx] - 0.5 + cfg.up_hysteresis:
                idx += 1
        target = cands[idx]
        if cfg.ceiling_coeff > 0:
            # The ceiling only caps a hold or a step down, never a step up.
            ceiling = max(1, math.ceil(self.ema * cfg.ceiling_coeff))
            if ceiling < target <= self.current:
                while idx > 0 and cands[idx] > ceiling:
                    idx -= 1
                target = cands[idx]
        return target


class AdaptiveRouter:
    """Batch size -> step count, as SGLang 0.5.23's AdaptiveSpeculativeParams._route."""

    def __init__(
        self,
        slots: tuple[SlotConfig, ...],
        cuda_graph_bs: tuple[int, ...] | None,
        initial_steps: int,
    ) -> None:
        self.keys = [s.key for s in slots]
        self.graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else []
        self.states = [SlotState.start(slot, initial_steps) for slot in slots]

    def padded(self, batch_size: int) -> int:
        if self.graph_bs:
            i = bisect.bisect_left(self.graph_bs, batch_size)
            if i < len(self.graph_bs):
                return self.graph_bs[i]
        return batch_size

    def route(self, batch_size: int) -> SlotState:
        i = bisect.bisect_right(self.keys, self.padded(batch_size)) - 1
        return self.states[max(i, 0)]

    def steps_for(self, batch_size: int) -> int:
        return self.route(batch_size).current


class _Ring:
    """Fixed-size columns of floats in insertion order (time-sorted), oldest overwritten."""

    def __init__(self, capacity: int, columns: int) -> None:
        self.capacity = capacity
        self.cols = [array("d", bytes(8 * capacity)) for _ in range(columns)]
        self.n = 0

    def append(self, *values: float) -> None:
        i = self.n % self.capacity
        for col, v in zip(self.cols, values, strict=True):
            col[i] = v
        self.n += 1

    def __len__(self) -> int:
        return min(self.n, self.capacity)

    def _index(self, k: int) -> int:
        start = self.n - len(self)
        return (start + k) % self.capacity

    def column(self, c: int) -> _ColumnView:
        return _ColumnView(self, c)

    def oldest(self, c: int) -> float | None:
        return self.cols[c][self._index(0)] if len(self) else None

    def rows(self, lo: int, hi: int) -> list[tuple[float, ...]]:
        return [tuple(col[self._index(k)] for col in self.cols) for k in range(lo, hi)]


class _ColumnView:
    def __init__(self, ring: _Ring, c: int) -> None:
        self.ring, self.c = ring, c

    def __len__(self) -> int:
        return len(self.ring)

    def __getitem__(self, k: int) -> float:
        return self.ring.cols[self.c][self.ring._index(k)]


@dataclass
class Counters:
    """Prometheus-style counters (never reset) and SGLang's resettable spec statistics."""

    prompt_tokens: dict[bool, int] = field(default_factory=lambda: {True: 0, False: 0})
    generation_tokens: dict[bool, int] = field(default_factory=lambda: {True: 0, False: 0})
    verify_calls: int = 0
    num_requests: int = 0
    emitted_tokens: int = 0  # sim extension: tokens at emission time (exact, per forward)
    running_seconds: float = 0.0  # sim extension: integral of running requests over model time
    # Since start or the last /flush_cache (SGLang's avg_spec_accept_length).
    spec_decode_tokens: int = 0
    spec_req_steps: int = 0
    e2e_s: list[float] = field(default_factory=list)
    ttft_s: list[float] = field(default_factory=list)


@dataclass
class _Forward:
    kind: str  # "prefill" | "decode"
    duration_s: float  # model time
    requests: list[SimRequest]
    chunks: list[int]  # prefill: new tokens per request
    steps: int = 0
    kv_tokens: int = 0
    decoding_before: int = 0  # requests in the decode batch when the forward was planned
    cached_tokens: int = 0  # prefill: prompt tokens of newly admitted requests found cached


class Scheduler:
    """Runs the model; HTTP handlers `submit` requests and wait on their events."""

    def __init__(self, settings: ServerSettings, profile: Profile, log: LogFn) -> None:
        self.settings = settings
        self.profile = profile
        self.log = log
        self.speculative = settings.speculative
        self.topk = settings.speculative_eagle_topk or 1
        self.static_steps = settings.speculative_num_steps or 0
        self.router = (
            AdaptiveRouter(
                settings.adaptive_slots, settings.cuda_graph_bs_decode, self.static_steps
            )
            if settings.speculative_adaptive
            else None
        )
        if self.router is not None:
            first = self.router.states[0]
            log(
                "info",
                f"AdaptiveSpeculativeParams initialized: steps={first.current}, "
                f"candidate_steps={list(first.config.candidate_steps)}",
            )
        cap = settings.faults.cap_running
        self.max_running = settings.max_running_requests
        self.effective_max_running = min(self.max_running, cap) if cap else self.max_running
        kv_bytes = profile.target_attention.kv_bytes_per_token
        if self.speculative:
            kv_bytes += profile.draft_attention.kv_bytes_per_token
        self.kv_capacity_tokens = profile.memory.kv_capacity_tokens(
            kv_bytes, with_draft=self.speculative, mem_fraction_static=settings.mem_fraction_static
        )
        self.time_scale = settings.sim_time_scale
        self.prefill_budget = (
            settings.chunked_prefill_size if settings.chunked_prefill_size > 0 else 1 << 30
        )

        self.queue: deque[SimRequest] = deque()
        self.prefilling: deque[SimRequest] = deque()
        self.decoding: list[SimRequest] = []
        # KV in use = used_tokens (held privately by admitted requests: uncached prompt and
        # output tokens) + the prefix cache's blocks (shared, and evictable when unlocked).
        self.used_tokens = 0
        self.cache = PrefixCache(enabled=not settings.disable_radix_cache)
        self.counters = Counters()
        self.current_steps = self.static_steps
        self._last_was_decode = True
        self._wake = asyncio.Event()
        self._stopping = False

        self.anchor_real = time.monotonic()
        self.anchor_model = 0.0
        self.model_now = 0.0
        self.lag_s = 0.0
        self.max_lag_s = 0.0
        self.late_forwards = 0
        self.last_commit_real = 0.0
        # Delay from a forward's commit to the stream write carrying its tokens (handler side).
        self.stream_delay_sum_s = 0.0
        self.stream_delay_max_s = 0.0
        self.stream_writes = 0
        self.forwards = 0
        self.decode_forwards = 0

        # Ground truth: one row per forward, one per finished request.
        self.steps_ring = _Ring(1 << 18, 5)  # end_real, start_real, tokens, running, decode(0/1)
        self.finish_ring = _Ring(1 << 16, 4)  # finish_real, completion_tokens, verify_ct, drafts

        # Decode log window (SGLang logs every --decode-log-interval decode forwards).
        self._win_tokens = 0
        self._win_req_steps = 0
        self._win_model_start = 0.0
        self.last_gen_throughput = 0.0
        self.last_accept_length = 0.0

    # ----------------------------------------------------------------- handler side
    @property
    def num_running(self) -> int:
        return len(self.prefilling) + len(self.decoding)

    @property
    def num_queued(self) -> int:
        return len(self.queue)

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
        """Model clock now (it runs with real time x scale when idle)."""
        if self.idle:
            return self.anchor_model + (time.monotonic() - self.anchor_real) * self.time_scale
        return self.model_now

    @property
    def kv_tokens_in_use(self) -> int:
        return self.used_tokens + self.cache.size_tokens

    def flush_cache(self) -> None:
        """/flush_cache on an idle server: the prefix cache empties (nothing holds a block)."""
        self.cache.flush()

    def reset_spec_stats(self) -> None:
        self.counters.spec_decode_tokens = 0
        self.counters.spec_req_steps = 0
        self.max_lag_s = 0.0
        self.late_forwards = 0
        self.stream_delay_sum_s = self.stream_delay_max_s = 0.0
        self.stream_writes = 0

    def note_stream_write(self, now: float) -> None:
        """A stream just wrote the tokens of the latest forward; track how late that was."""
        delay = max(0.0, now - self.last_commit_real)
        self.stream_delay_sum_s += delay
        self.stream_delay_max_s = max(self.stream_delay_max_s, delay)
        self.stream_writes += 1

    @property
    def avg_spec_accept_length(self) -> float | None:
        c = self.counters
        if not self.speculative or c.spec_req_steps == 0:
            return None
        return c.spec_decode_tokens / c.spec_req_steps

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    # ----------------------------------------------------------------- main loop
    async def run(self) -> None:
        while not self._stopping:
            fwd = self._plan()
            if fwd is None:
                self._wake.clear()
                await self._wake.wait()
                now = time.monotonic()
                # Idle time passes on the model clock too; lag from before the pause is forgiven.
                self.model_now = max(
                    self.model_now, self.anchor_model + (now - self.anchor_real) * self.time_scale
                )
                self.anchor_real, self.anchor_model = now, self.model_now
                continue
            start_real = time.monotonic()
            self.model_now += fwd.duration_s
            deadline = self.anchor_real + (self.model_now - self.anchor_model) / self.time_scale
            delay = deadline - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                await asyncio.sleep(0)  # let HTTP handlers run even when behind
            end_real = time.monotonic()
            self.lag_s = max(0.0, end_real - deadline)
            if self.lag_s > 0.005:
                self.late_forwards += 1
            self.max_lag_s = max(self.max_lag_s, self.lag_s)
            self.last_commit_real = end_real
            self._commit(fwd, start_real, end_real)

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

    def _reserve(self, req: SimRequest) -> bool:
        """Reserve KV for the head of the queue: lock its cached prefix, evict LRU blocks if
        the uncached rest does not fit. FIFO: the head waits for KV space (unless nothing
        runs, so nothing would free any)."""
        cache = self.cache
        matched = cache.match(req.block_keys)
        # SGLang always computes the last prompt token (its logits give the first output).
        cached = min(matched * BLOCK_TOKENS, req.prompt_tokens - 1)
        need = req.prompt_tokens - cached
        keys = req.block_keys[:matched]
        cache.lock(keys)
        free = self.kv_capacity_tokens - self.used_tokens - cache.size_tokens
        if need > free and need <= free + cache.evictable_tokens:
            free += cache.evict(need - free)
        if need > free and self.num_running > 0:
            cache.unlock(keys)
            return False
        req.locked_keys = keys
        req.cached_tokens = cached
        req.prefill_done = cached
        req.kv_private = need
        req.reserved = True
        self.used_tokens += need
        cache.hit_tokens += cached
        cache.query_tokens += req.prompt_tokens
        return True

    def _trim_cache(self) -> None:
        """Decode grew the running requests' KV: evict unlocked blocks to stay in the pool."""
        over = self.kv_tokens_in_use - self.kv_capacity_tokens
        if over > 0:
            self.cache.evict(over)

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
        if want_prefill and (self._last_was_decode or not self.decoding):
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
        for req in self.prefilling:
            if budget <= 0:
                break
            n = min(req.prompt_tokens - req.prefill_done, budget)
            reqs.append(req)
            chunks.append(n)
            cost_chunks.append((n, req.prefill_done))
            budget -= n
        new_cached = 0
        while budget > 0 and self._head_admissible():
            req = self.queue.popleft()
            self.prefilling.append(req)
            # Only the uncached rest is computed; attention still reads the cached prefix.
            n = min(req.prompt_tokens - req.prefill_done, budget)
            reqs.append(req)
            chunks.append(n)
            cost_chunks.append((n, req.prefill_done))
            new_cached += req.cached_tokens
            budget -= n
        cost = prefill_step(self.profile, cost_chunks, speculative=self.speculative)
        self._last_was_decode = False
        return _Forward(
            "prefill",
            cost.total_ms / 1e3,
            reqs,
            chunks,
            decoding_before=len(self.decoding),
            cached_tokens=new_cached,
        )

    def _plan_decode(self) -> _Forward:
        batch = list(self.decoding)
        bs = len(batch)
        kv_tokens = sum(r.prompt_tokens + r.completion_tokens for r in batch)
        steps = 0
        if self.speculative:
            steps = self.router.steps_for(bs) if self.router else self.static_steps
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
        )
        self._last_was_decode = True
        return _Forward("decode", cost.total_ms / 1e3, batch, [], steps, kv_tokens)

    # ----------------------------------------------------------------- commit
    def _commit(self, fwd: _Forward, start_real: float, end_real: float) -> None:
        running = self.num_running
        self.counters.running_seconds += running * fwd.duration_s
        self.forwards += 1
        emitted = 0
        if fwd.kind == "prefill":
            done: list[SimRequest] = []
            for req, n in zip(fwd.requests, fwd.chunks, strict=True):
                if req.cancelled:
                    continue
                req.prefill_done += n
                if req.prefill_done >= req.prompt_tokens:
                    done.append(req)
            for req in done:
                self.prefilling.remove(req)
                self._insert_prompt(req)
                req.first_token_real = end_real
                if req.target_tokens <= 0:
                    self._finish(req, end_real)
                    self._release(req)
                    continue
                # The extend forward samples the first output token.
                req.completion_tokens = 1
                req.kv_private += 1
                self.used_tokens += 1
                emitted += 1
                if req.target_tokens <= 1:
                    self._release(req)
                    self._finish(req, end_real)
                else:
                    self.decoding.append(req)
                    if req.is_streaming:  # others only need to hear about the finish
                        req.event.set()
            self._log_prefill(fwd)
        else:
            emitted = self._commit_decode(fwd, end_real)
        self.counters.emitted_tokens += emitted
        self.steps_ring.append(
            end_real,
            start_real,
            float(emitted),
            float(running),
            1.0 if fwd.kind == "decode" else 0.0,
        )

    def _commit_decode(self, fwd: _Forward, end_real: float) -> int:
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
                used = add - 1
                req.verify_ct += 1
                req.correct_drafts += used
                hist = req.drafts_hist
                while len(hist) <= used:
                    hist.append(0)
                hist[used] += 1
                accepted_total += acc
            else:
                add = 1
            req.completion_tokens += add
            req.kv_private += add
            emitted += add
            if add >= remaining:
                finished.append(req)
            elif req.is_streaming:
                req.event.set()
        self.used_tokens += emitted
        self._trim_cache()
        for req in finished:
            self._release(req)
            self._finish(req, end_real)
        if finished:
            done = set(map(id, finished))
            self.decoding = [r for r in self.decoding if id(r) not in done]
        self.decode_forwards += 1
        if spec and n_live:
            self.counters.spec_decode_tokens += emitted
            self.counters.spec_req_steps += n_live
            if self.router is not None:
                slot = self.router.route(len(fwd.requests))
                new = slot.on_verify(accepted_total / n_live)
                if new is not None:
                    self.log(
                        "info",
                        f"Adaptive spec params updated: slot {slot.config.key} steps -> {new}",
                    )
        self._win_tokens += emitted
        self._win_req_steps += n_live
        if self.decode_forwards % self.settings.decode_log_interval == 0:
            self._log_decode(fwd)
        return emitted

    def _insert_prompt(self, req: SimRequest) -> None:
        """After its prefill, a request's prompt blocks enter the cache (held while it runs);
        blocks another request inserted meanwhile are shared, their private copy freed."""
        if not self.cache.enabled:
            return
        new_keys = req.block_keys[len(req.locked_keys) :]
        if not new_keys:
            return
        self.cache.lock(new_keys)
        req.locked_keys = req.block_keys
        moved = min(len(new_keys) * BLOCK_TOKENS, req.kv_private)
        req.kv_private -= moved
        self.used_tokens -= moved

    def _release(self, req: SimRequest) -> None:
        """Give back a request's KV: private tokens freed, cached blocks become evictable."""
        if not req.reserved:
            return
        req.reserved = False
        self.used_tokens -= req.kv_private
        req.kv_private = 0
        self.cache.unlock(req.locked_keys)
        req.locked_keys = ()

    def _finish(self, req: SimRequest, now: float) -> None:
        if req.finished:
            return
        req.finished = True
        req.finish_real = now
        c = self.counters
        if req.count_metrics:
            c.prompt_tokens[req.is_streaming] += req.prompt_tokens
            c.generation_tokens[req.is_streaming] += req.completion_tokens
            c.verify_calls += req.verify_ct
            c.num_requests += 1
            scale = self.time_scale
            c.e2e_s.append((now - req.arrival_real) * scale)
            if req.first_token_real is not None:
                c.ttft_s.append((req.first_token_real - req.arrival_real) * scale)
            if len(c.e2e_s) > 4096:
                del c.e2e_s[:2048]
            if len(c.ttft_s) > 4096:
                del c.ttft_s[:2048]
            self.finish_ring.append(
                now, float(req.completion_tokens), float(req.verify_ct), float(req.correct_drafts)
            )
        req.event.set()

    # ----------------------------------------------------------------- logs
    def _log_prefill(self, fwd: _Forward) -> None:
        usage = self.kv_tokens_in_use / self.kv_capacity_tokens if self.kv_capacity_tokens else 0.0
        self.log(
            "info",
            f"Prefill batch, #new-seq: {len(fwd.requests)}, #new-token: {sum(fwd.chunks)}, "
            f"#cached-token: {fwd.cached_tokens}, token usage: {usage:.2f}, "
            f"#running-req: {fwd.decoding_before}, "
            f"#queue-req: {len(self.queue)}",
        )

    def _log_decode(self, fwd: _Forward) -> None:
        elapsed = self.model_now - self._win_model_start
        self.last_gen_throughput = self._win_tokens / elapsed if elapsed > 0 else 0.0
        usage = self.kv_tokens_in_use / self.kv_capacity_tokens if self.kv_capacity_tokens else 0.0
        spec = ""
        if self.speculative:
            self.last_accept_length = (
                self._win_tokens / self._win_req_steps if self._win_req_steps else 0.0
            )
            k = self.current_steps
            rate = (self.last_accept_length - 1.0) / k if k > 0 else 0.0
            spec = f"accept len: {self.last_accept_length:.2f}, accept rate: {rate:.2f}, "
        self.log(
            "info",
            f"Decode batch, #running-req: {len(fwd.requests)}, #token: {fwd.kv_tokens}, "
            f"token usage: {usage:.2f}, {spec}cuda graph: True, "
            f"gen throughput (token/s): {self.last_gen_throughput:.2f}, "
            f"#queue-req: {len(self.queue)}",
        )
        self._win_tokens = 0
        self._win_req_steps = 0
        self._win_model_start = self.model_now

    # ----------------------------------------------------------------- ground truth
    def ground_truth(self, start: float, end: float) -> dict[str, Any]:
        """What the scheduler really did between two time.monotonic() instants."""
        ring = self.steps_ring
        ends = ring.column(0)
        lo = bisect.bisect_left(ends, start)
        hi = bisect.bisect_right(ends, end)
        tokens = 0.0
        steps = decode_steps = 0
        for _end, _start, emitted, _running, is_decode in ring.rows(lo, hi):
            tokens += emitted
            steps += 1
            decode_steps += int(is_decode)
        # Running requests, time-weighted over the window (idle gaps count as zero).
        running_area = 0.0
        for end_real, start_real, _emitted, running, _d in ring.rows(
            max(lo - 1, 0), min(hi + 1, len(ring))
        ):
            overlap = min(end_real, end) - max(start_real, start)
            if overlap > 0:
                running_area += running * overlap
        fends = self.finish_ring.column(0)
        flo = bisect.bisect_left(fends, start)
        fhi = bisect.bisect_right(fends, end)
        done_tokens = done_verify = done_drafts = 0.0
        for _t, comp, verify, drafts in self.finish_ring.rows(flo, fhi):
            done_tokens += comp
            done_verify += verify
            done_drafts += drafts
        window_s = max(end - start, 1e-12)
        oldest = ring.oldest(0)
        return {
            "start": start,
            "end": end,
            "window_s": end - start,
            "model_window_s": (end - start) * self.time_scale,
            "time_scale": self.time_scale,
            "output_tokens": int(tokens),
            "output_tok_s": tokens / window_s,
            "output_tok_s_model": tokens / (window_s * self.time_scale),
            "steps": steps,
            "decode_steps": decode_steps,
            "running_reqs_mean": running_area / window_s,
            "finished_requests": fhi - flo,
            "finished_completion_tokens": int(done_tokens),
            "finished_verify_ct": int(done_verify),
            "finished_correct_drafts": int(done_drafts),
            "accept_length": (done_tokens / done_verify)
            if (self.speculative and done_verify)
            else None,
            "complete": oldest is None or oldest <= start or ring.n <= ring.capacity,
        }
