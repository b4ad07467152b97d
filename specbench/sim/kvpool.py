"""How SGLang 0.5.23 shares a KV pool that cannot hold every request: the rules, not the state.

The scheduler (scheduler.py) owns the pool's accounting; this module holds the policy it
applies, taken from SGLang's scheduler (`schedule_policy.PrefillAdder`, `ScheduleBatch.
retract_decode`, `NewTokenRatioTracker`):

* **admission**: a queued request starts only if its uncached input plus the output it may
  still produce (capped at :data:`CLIP_MAX_NEW_TOKENS`) fits in what is free or evictable,
  after setting aside, for every running request, its remaining output times the *new-token
  ratio* (1.0 for ``ignore_eos`` requests, which run to their cap);
* the ratio starts at :data:`INIT_RATIO`, decays linearly to its floor over
  :data:`DECAY_STEPS` decode steps, returns to the start when the server goes idle, and is
  re-estimated from the survivors after a retraction;
* **retraction**: when a decode step's new tokens do not fit, running requests go back to the
  queue, fewest output tokens first (then longest prompt), until the step fits or one is left.
  A retracted request keeps its output; resuming it prefills prompt and output again.

In a pool as large as a real GPU's none of this binds, and the simulator behaves as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from specbench.sim.args import ServerSettings
from specbench.sim.prefixcache import BLOCK_TOKENS, PrefixCache
from specbench.sim.request import SimRequest
from specbench.sim.stats import Counters, LoadGauges

CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
INIT_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO x --schedule-conservativeness 1.0
MIN_RATIO = INIT_RATIO * 0.14  # x SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
DECAY_STEPS = 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS


@dataclass
class NewTokenRatio:
    """The share of its remaining output a running request is expected to still produce."""

    current: float = INIT_RATIO

    def decay_step(self) -> None:
        self.current = max(self.current - (INIT_RATIO - MIN_RATIO) / DECAY_STEPS, MIN_RATIO)

    def reset(self) -> None:
        self.current = INIT_RATIO

    def after_retraction(self, survivors: Sequence[SimRequest]) -> None:
        """Re-estimate from the requests still running: what they produced so far (plus a
        margin of a few steps each) over what they may produce in all."""
        produced = sum(r.completion_tokens for r in survivors)
        allowed = sum(r.max_new_tokens for r in survivors)
        estimate = (produced + RETRACT_DECODE_STEPS * len(survivors)) / (allowed + 1)
        self.current = min(1.0, estimate)


def remaining_output(req: SimRequest) -> int:
    """Output tokens a request may still produce, as the admission estimate caps it."""
    return min(max(req.max_new_tokens - req.completion_tokens, 0), CLIP_MAX_NEW_TOKENS)


def running_reservation(running: Iterable[SimRequest], ratio: float) -> float:
    """KV tokens set aside for the future output of the running requests."""
    return sum(remaining_output(r) * (1.0 if r.ignore_eos else ratio) for r in running)


def step_tokens(decoding: Iterable[SimRequest], steps: int, speculative: bool) -> int:
    """KV tokens one decode step may add: one per request, or K + 1 per request when every
    draft of a speculative verify could be accepted (never past a request's last token)."""
    per_request = steps + 1 if speculative else 1
    return sum(min(per_request, r.target_tokens - r.completion_tokens) for r in decoding)


def keep_order(decoding: Sequence[SimRequest]) -> list[SimRequest]:
    """Running requests from most to least worth keeping: the most output first, then the
    shortest prompt. Retraction takes from the end."""
    return sorted(decoding, key=lambda r: (r.completion_tokens, -r.prompt_tokens), reverse=True)


class PoolAccounting:
    """The scheduler's KV-pool bookkeeping, as a mixin of :class:`~specbench.sim.scheduler.
    Scheduler`: capacity, admission, retraction, the prefix cache's share, the load gauges.

    KV in use = `used_tokens` (held privately by admitted requests: uncached input and output
    tokens) + the prefix cache's blocks (shared, and evictable when no request holds them).
    """

    settings: ServerSettings
    log: Callable[[str, str], None]
    cache: PrefixCache
    counters: Counters
    gauges: LoadGauges
    ratio: NewTokenRatio
    kv_capacity_tokens: int
    used_tokens: int
    speculative: bool
    queue: deque[SimRequest]
    prefilling: deque[SimRequest]
    decoding: list[SimRequest]
    _last_retraction: int

    @property
    def num_running(self) -> int:
        return len(self.prefilling) + len(self.decoding)

    @property
    def num_queued(self) -> int:
        return len(self.queue)

    def _steps_for(self, bs: int) -> int:
        raise NotImplementedError

    def _pool_size(self, profiled: int) -> int:
        """--max-total-tokens caps the profiled pool (a larger value is ignored, as SGLang
        does, with its warning); a pool shorter than the context length is warned about."""
        settings, capacity = self.settings, profiled
        limit = settings.max_total_tokens
        if limit is not None:
            if limit > profiled:
                self.log(
                    "warning",
                    f"max_total_tokens={limit} is larger than the profiled value {profiled}. "
                    "Use the profiled value instead.",
                )
            capacity = min(profiled, limit)
        if capacity < settings.context_length:
            self.log(
                "warning",
                f"KV pool holds {capacity} tokens, fewer than --context-length "
                f"{settings.context_length}. One full-length request cannot fit, so long "
                "requests will be refused or truncated at serving time. Lower "
                "--context-length, raise --mem-fraction-static, or free memory taken before "
                "the pool is sized.",
            )
        return capacity

    @property
    def kv_tokens_in_use(self) -> int:
        return self.used_tokens + self.cache.size_tokens

    @property
    def kv_usage(self) -> float:
        """SGLang's "token usage": the share of the pool neither free nor evictable (cached
        blocks no running request holds count as free)."""
        cap = self.kv_capacity_tokens
        held = self.kv_tokens_in_use - self.cache.evictable_tokens
        return held / cap if cap else 0.0

    def _reserve(self, req: SimRequest) -> bool:
        """Reserve KV for the head of the queue: lock its cached prefix, evict LRU blocks if
        the uncached rest does not fit. FIFO: the head waits while its input and the output
        it may produce do not fit beside what the running requests are expected to need
        (the module docstring), unless nothing runs, so nothing would free any."""
        cache = self.cache
        matched = cache.match(req.block_keys)
        # SGLang always computes the last input token (its logits give the next output).
        cached = min(matched * BLOCK_TOKENS, req.prefill_len - 1)
        need = req.prefill_len - cached
        keys = req.block_keys[:matched]
        cache.lock(keys)
        free = self.kv_capacity_tokens - self.used_tokens - cache.size_tokens
        if self.num_running > 0 and need + remaining_output(req) > (
            free + cache.evictable_tokens - self._running_reservation()
        ):
            cache.unlock(keys)
            self.counters.kv_waits += 1
            return False
        if need > free and need <= free + cache.evictable_tokens:
            free += cache.evict(need - free)
        if need > free and self.num_running > 0:
            cache.unlock(keys)
            self.counters.kv_waits += 1
            return False
        req.locked_keys = keys
        if req.completion_tokens == 0:  # a resumed request keeps its first prefill's count
            req.cached_tokens = cached
        req.prefill_done = cached
        req.kv_private = need
        req.reserved = True
        self.used_tokens += need
        cache.hit_tokens += cached
        cache.query_tokens += req.prompt_tokens
        return True

    def _running_reservation(self) -> float:
        running = (*self.prefilling, *self.decoding)
        return running_reservation(running, self.ratio.current)

    def _trim_cache(self) -> None:
        """Decode grew the running requests' KV: evict unlocked blocks to stay in the pool."""
        over = self.kv_tokens_in_use - self.kv_capacity_tokens
        if over > 0:
            self.cache.evict(over)

    def _fit_decode(self) -> None:
        """Make room for the next decode step: retract requests (SGLang's order) while the
        tokens it may add do not fit in the free and evictable part of the pool."""
        held_cache = self.cache.size_tokens - self.cache.evictable_tokens
        avail = self.kv_capacity_tokens - self.used_tokens - held_cache
        steps = self._steps_for(len(self.decoding))
        if step_tokens(self.decoding, steps, self.speculative) <= avail:
            self.ratio.decay_step()
            return
        keep = keep_order(self.decoding)
        retracted: list[SimRequest] = []
        before = avail
        while len(keep) > 1 and step_tokens(keep, steps, self.speculative) > avail:
            req = keep.pop()
            self._retract(req)
            retracted.append(req)
            held_cache = self.cache.size_tokens - self.cache.evictable_tokens
            avail = self.kv_capacity_tokens - self.used_tokens - held_cache
        if not retracted:
            return
        gone = set(map(id, retracted))
        self.decoding = [r for r in self.decoding if id(r) not in gone]
        self._last_retraction = len(retracted)
        old_ratio = self.ratio.current
        self.ratio.after_retraction(self.decoding)
        self.log(
            "warning",
            f"KV cache pool is full. Retract requests. #retracted_reqs: {len(retracted)}, "
            f"#new_tokens_gained: {avail - before}, "
            f"#new_token_ratio: {old_ratio:.4f} -> {self.ratio.current:.4f}",
        )

    def _retract(self, req: SimRequest) -> None:
        """Send a running request back to the queue: its KV is freed (its prompt blocks stay
        cached, unlocked) and its output so far is kept for the prefill that resumes it."""
        self._release(req)
        req.prefill_done = 0
        req.retractions += 1
        c = self.counters
        c.retracted_requests += 1
        c.retracted_input_tokens += req.prompt_tokens
        c.retracted_output_tokens += req.completion_tokens
        self.queue.append(req)

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

    def _report_gauges(self, running: int, idle: bool = False) -> None:
        """Publish the load gauges, as SGLang does at a prefill, on a decode log line and
        when it falls idle (which republishes the latest retraction count unchanged)."""
        g = self.gauges
        g.running, g.queued = running, len(self.queue)
        g.token_usage = round(self.kv_usage, 2)
        if not idle:
            g.retracted, self._last_retraction = self._last_retraction, 0

    def _on_idle(self) -> None:
        """Nothing to run: SGLang republishes gauges that still show load, and restarts its
        new-token estimate."""
        if self.gauges.running != self.num_running or self.gauges.queued != self.num_queued:
            self._report_gauges(self.num_running, idle=True)
        self.ratio.reset()
