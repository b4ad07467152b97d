"""Fault injection (--sim-*): the failures a benchmark harness must survive, on demand.

Which requests fail is deterministic (every k-th by rate, with a phase per kind so that the
kinds do not pick the same requests), so a robustness test can count what it should see.
The crash helpers end the process the way a crashed SGLang scheduler does: one log line, then
exit status 1 without cleanup.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NoReturn

from aiohttp import web

from specbench.sim.args import FaultOptions
from specbench.sim.logs import log

_dumps = functools.partial(json.dumps, separators=(",", ":"))
INJECTED_ERROR = "specbench.sim injected error (--sim-error-rate)"
# Inserted into a malformed stream: the start of a chunk that never ends.
_BROKEN_CHUNK_HEAD = '{{"id": "{rid}", "choices": [{{"delta": '


@dataclass
class FaultPlan:
    """What to do wrong with one generation request."""

    error: bool = False
    truncate: bool = False
    malformed: bool = False

    def breaks_stream_at(self, tokens: int, half: int) -> bool:
        """Whether a stream with `tokens` sent of about 2 * `half` is where it breaks."""
        return (self.truncate or self.malformed) and tokens >= half

    def corrupt(self, payloads: list[str], rid: str) -> None:
        """Insert one unterminated JSON chunk in the middle of `payloads` (once per stream)."""
        if self.malformed:
            payloads.insert(len(payloads) // 2, _BROKEN_CHUNK_HEAD.format(rid=rid))
            self.malformed = False


def _every(index: int, rate: float, phase: float) -> bool:
    """Deterministic selection of a fraction `rate` of request indices."""
    if rate <= 0.0:
        return False
    return math.floor((index + 1) * rate + phase) > math.floor(index * rate + phase)


def injected_crash(when: str) -> NoReturn:
    """Die like a crashed SGLang scheduler: log the exception line, exit 1 at once."""
    log("warning", f"Scheduler hit an exception: RuntimeError: specbench.sim injected crash {when}")
    logging.shutdown()
    os._exit(1)


class FaultInjector:
    """Counts generation requests and plans each one's fault (--sim-crash-after-requests,
    --sim-error-rate, --sim-truncate-rate, --sim-malformed-rate)."""

    def __init__(self, options: FaultOptions) -> None:
        self.options = options
        self.received = 0

    def on_generation_request(self) -> FaultPlan:
        """Count a received request and decide which fault (if any) it gets."""
        f = self.options
        index = self.received
        self.received += 1
        if f.crash_after_requests is not None and self.received >= f.crash_after_requests:
            injected_crash(f"after {self.received} requests (--sim-crash-after-requests)")
        return FaultPlan(
            error=_every(index, f.error_rate, 0.0),
            truncate=_every(index, f.truncate_rate, 1.0 / 3.0),
            malformed=_every(index, f.malformed_rate, 2.0 / 3.0),
        )


async def crash_after(seconds: float) -> NoReturn:
    """--sim-crash-after-s: counted from the moment the server is ready."""
    await asyncio.sleep(seconds)
    injected_crash(f"after {seconds} s (--sim-crash-after-s)")


def faulty_json(out: Mapping[str, object], fault: FaultPlan) -> web.Response:
    """A non-streaming JSON body; cut in half when the request was chosen to be malformed."""
    text = _dumps(out)
    if fault.malformed:
        text = text[: len(text) // 2]
    return web.Response(text=text, content_type="application/json")
