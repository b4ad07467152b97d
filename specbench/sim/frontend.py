"""The serial stage in front of the scheduler: SGLang's tokenizer manager, one process.

A real SGLang server parses every generation request, renders its chat template and tokenizes
the prompt in one Python process (the HTTP server and the tokenizer manager) before the
scheduler hears of it. That work is serial: a burst of long prompts waits there, in arrival
order, while the scheduler may sit idle with an empty queue. The profile's ``[frontend]``
table (costmodel.Frontend) gives each request a service time in model time; this module runs
the one worker that serves them, first come first served, and hands each request to the
scheduler when its service ends.

The same process writes every response. Its event loop takes ready work in order, so the
requests that arrived together are tokenized before it turns to the outputs again: with
``holds_output`` the worker serves in rounds (the requests waiting when a round starts, at most
``round_max_requests`` of them), and a stream with new tokens writes them only once the round in
progress ends. The limit is SGLang's output loop: it hands the event loop back after every
``--batch-notify-size`` streams it wakes (16 by default), so the waiting requests and the
outputs take turns, and first tokens come out in groups of about that size. The tokens were made
on time and reach the client late, together; that is what SGLang 0.5.17 showed under bursts of
agentic requests (lab/notes/benchmarks.md, "Simulator against the real H200"), whose chat adapter
renders and tokenizes on the event loop (0.5.23 moved that work to a worker thread).

Requests waiting here are not the scheduler's: they count in neither ``#queue-req`` nor
``num_queue_reqs``, as in SGLang. Their time here is part of the time to first token the
client sees and the server's own TTFT (both start at arrival). The worker keeps its own busy
clock in real time (model time / --sim-time-scale): when the event loop wakes it late, the
next service starts where the last one ended, so a loaded machine does not lower its rate.
With the stage off (the default) a request goes to the scheduler at once, as before.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass

from specbench.sim.costmodel import Frontend
from specbench.sim.request import SimRequest
from specbench.sim.scheduler import Scheduler


@dataclass
class FrontendStats:
    """Since start: requests served, rounds, model seconds busy and waited (/server_info)."""

    served: int = 0
    rounds: int = 0
    busy_model_s: float = 0.0
    wait_model_s: float = 0.0  # queueing only, service excluded


class FrontendStage:
    """One first-come-first-served worker between the HTTP handlers and the scheduler."""

    def __init__(self, frontend: Frontend, scheduler: Scheduler, time_scale: float) -> None:
        self.frontend = frontend
        self.scheduler = scheduler
        self.time_scale = time_scale
        self.stats = FrontendStats()
        self._queue: deque[tuple[SimRequest, float]] = deque()  # (request, service model s)
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # set between rounds: outputs may be written
        self._idle.set()
        self._busy_until_real_s = 0.0

    @property
    def enabled(self) -> bool:
        return self.frontend.enabled

    @property
    def waiting(self) -> int:
        """Requests not yet handed to the scheduler (the one in service included)."""
        return len(self._queue)

    def submit(self, req: SimRequest, *, tokenized: bool) -> None:
        """Queue `req` for the worker; `tokenized` False for a prompt given as token ids."""
        if not self.enabled:
            self.scheduler.submit(req)
            return
        service_ms = self.frontend.service_ms(req.prompt_tokens, tokenized=tokenized)
        self._queue.append((req, service_ms / 1e3))
        self._wake.set()

    async def output_turn(self) -> None:
        """Return once a response may be written: at once unless a round holds the output."""
        if self.frontend.holds_output and not self._idle.is_set():
            await self._idle.wait()

    async def run(self) -> None:
        """Serve the queue in rounds until cancelled."""
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            self._idle.clear()
            self.stats.rounds += 1
            limit = self.frontend.round_max_requests or len(self._queue)
            for _ in range(min(limit, len(self._queue))):
                await self._serve_head()
            # Streams held by the round write now, before the next round can start.
            self._idle.set()
            await asyncio.sleep(0)

    async def _serve_head(self) -> None:
        req, service_s = self._queue[0]
        # Service starts when the request arrived or the previous one ended, whichever is
        # later, so that a late wake-up does not stretch the stage's busy time.
        start_real_s = max(req.arrival_real_s, self._busy_until_real_s)
        end_real_s = start_real_s + service_s / self.time_scale
        delay_s = end_real_s - time.monotonic()
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        self._queue.popleft()
        self._busy_until_real_s = end_real_s
        self.stats.served += 1
        self.stats.busy_model_s += service_s
        self.stats.wait_model_s += (start_real_s - req.arrival_real_s) * self.time_scale
        # A request whose client left meanwhile still cost its service (the real process
        # tokenizes it all the same); the scheduler drops it at its next forward.
        self.scheduler.submit(req)
