"""One generation request inside the simulator: what the scheduler advances and handlers read.

A :class:`SimRequest` is created by an HTTP handler, queued in the scheduler and advanced by
it forward by forward. Handlers never change it; they wait on its `event` and read its
cumulative counters (`completion_tokens`, `verify_ct`, ...), so a handler that falls behind
can send everything new in one chunk. It is a `__slots__` class rather than a dataclass
because the scheduler touches every running request on every forward.
"""

from __future__ import annotations

import asyncio
import math
import random
import time

from specbench.sim.bodies import FinishReason
from specbench.sim.prefixcache import BLOCK_TOKENS
from specbench.sim.speculative_args import draft_tree_reach
from specbench.sim.workload import RequestTraits


class SimRequest:
    """One generation request as the scheduler sees it; handlers read its cumulative counters."""

    __slots__ = (
        "arrival_real_s",
        "block_keys",
        "cached_tokens",
        "cancelled",
        "completion_tokens",
        "correct_drafts",
        "count_metrics",
        "drafts_hist",
        "event",
        "finish_kind",
        "finish_real_s",
        "finished",
        "first_token_real_s",
        "ignore_eos",
        "is_streaming",
        "kv_private",
        "last_step_from",
        "locked_keys",
        "log_alpha",
        "max_new_tokens",
        "prefill_done",
        "prompt_tokens",
        "reserved",
        "retractions",
        "rid",
        "rng",
        "seed",
        "target_tokens",
        "topk",
        "traits",
        "tree_tokens",
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
        draft_tokens: int | None = None,
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
        self.ignore_eos = ignore_eos
        natural = max(traits.natural_output_tokens, min_new_tokens)
        if ignore_eos or natural >= self.max_new_tokens:
            self.target_tokens, self.finish_kind = self.max_new_tokens, "length"
        else:
            self.target_tokens, self.finish_kind = natural, "stop"
        self.seed = traits.seed
        self.rng = random.Random(traits.seed)
        # A tree of topk branches per depth: a depth is accepted when any branch matches
        # (every branch verified; with `draft_tokens`, only the N - 1 SGLang keeps).
        alpha = 1.0 - (1.0 - traits.alpha) ** max(1, topk)
        self.topk = max(1, topk)
        self.tree_tokens = draft_tokens if topk > 1 else None
        self.log_alpha = math.log(min(max(alpha, 1e-9), 1.0 - 1e-9))
        self.is_streaming = is_streaming
        self.count_metrics = count_metrics
        # Instants on the time.monotonic() clock, in seconds.
        self.arrival_real_s = time.monotonic()
        self.first_token_real_s: float | None = None
        self.finish_real_s: float | None = None
        self.prefill_done = 0
        self.completion_tokens = 0
        self.verify_ct = 0
        self.correct_drafts = 0
        self.drafts_hist: list[int] = []
        self.finished = False
        self.cancelled = False
        self.retractions = 0  # times the scheduler took it back to the queue (KV pool full)
        self.last_step_from = 0  # output tokens before the forward that finished it
        self.event = asyncio.Event()

    @property
    def prefill_len(self) -> int:
        """Tokens its next prefill covers: the prompt, plus the output so far when it was
        retracted (SGLang recomputes both when it resumes a request)."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def text_end(self) -> int:
        """Output tokens that carry text: all of them, except a final EOS token, which the
        detokenizer trims (SGLang still counts it in completion_tokens)."""
        return self.target_tokens - 1 if self.finish_kind == "stop" else self.target_tokens

    @property
    def finish_reason(self) -> FinishReason | None:
        """SGLang's meta_info.finish_reason once finished."""
        if not self.finished:
            return None
        if self.cancelled:
            return {"type": "abort", "message": "client disconnected"}
        if self.finish_kind == "length":
            return {"type": "length", "length": self.completion_tokens}
        return {"type": "stop", "matched": None}

    def draw_accepted(self, num_steps: int) -> int:
        """Accepted drafts in one verify: P(at least j accepted) = alpha^j, capped at K; for a
        tree of N draft tokens, the share of the kept tree that reaches depth j
        (speculative_args.draft_tree_reach); or, where the profile gives the draft's hits by
        output position, the hits in a row from the last verified token on."""
        reach = None
        if self.tree_tokens is not None and num_steps > 0:
            reach = draft_tree_reach(self.traits.alpha, num_steps, self.topk, self.tree_tokens)
        hits = self.traits.draft_hits
        start = self.completion_tokens - 1
        if start >= 0 and start + num_steps <= len(hits):
            # The hits are the draft's first choice only: a tree accepts along that path.
            depth = num_steps if reach is None else len(reach)
            accepted = 0
            while accepted < depth and hits[start + accepted] == "1":
                accepted += 1
            return accepted
        u = self.rng.random()
        if reach is not None:
            return sum(1 for p in reach if u < p)
        if u <= 0.0:
            return num_steps
        return min(num_steps, int(math.log(u) / self.log_alpha))

    def note_verify(self, correct_drafts: int) -> None:
        """Count one verify that kept `correct_drafts` drafts (SGLang's spec_* meta_info)."""
        self.verify_ct += 1
        self.correct_drafts += correct_drafts
        hist = self.drafts_hist
        while len(hist) <= correct_drafts:
            hist.append(0)
        hist[correct_drafts] += 1
