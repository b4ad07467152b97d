"""What the scheduler really emitted, kept so a benchmark can check its own measurements.

`GET /sim/ground_truth?start=T0&end=T1` answers from this record: one row per forward (when it
ran, tokens emitted, requests running) and one per finished request, in fixed-size ring
buffers of floats so that a long sweep costs bounded memory and no allocation per forward.
Rows are appended in time order, so a window is found by bisection on the first column.
Times are `time.monotonic()` seconds, the clock the client also reads.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass

from specbench.sim.bodies import GroundTruthBody

# Columns of the per-forward ring.
END_S, START_S, TOKENS, RUNNING, IS_DECODE = range(5)
FORWARD_ROWS = 1 << 18
FINISH_ROWS = 1 << 16


class Ring:
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

    def column(self, c: int) -> ColumnView:
        return ColumnView(self, c)

    def oldest(self, c: int) -> float | None:
        return self.cols[c][self._index(0)] if len(self) else None

    def rows(self, lo: int, hi: int) -> list[tuple[float, ...]]:
        return [tuple(col[self._index(k)] for col in self.cols) for k in range(lo, hi)]


class ColumnView:
    """One column of a :class:`Ring`, oldest first, as a sequence `bisect` can search."""

    def __init__(self, ring: Ring, c: int) -> None:
        self.ring, self.c = ring, c

    def __len__(self) -> int:
        return len(self.ring)

    def __getitem__(self, k: int) -> float:
        return self.ring.cols[self.c][self.ring._index(k)]


@dataclass(frozen=True)
class GroundTruth:
    """The scheduler's own account of one window [start_s, end_s] (monotonic seconds)."""

    start_s: float
    end_s: float
    time_scale: float
    output_tokens: int
    # Per wall (client) second; the JSON key is `output_tok_s` for compatibility, although
    # everywhere else in specbench `output_tok_s` is per model second.
    output_tok_s_wall: float
    output_tok_s_model: float
    steps: int
    decode_steps: int
    running_reqs_mean: float
    finished_requests: int
    finished_completion_tokens: int
    finished_verify_ct: int
    finished_correct_drafts: int
    accept_length: float | None
    complete: bool  # the ring still held every forward of the window

    def to_json(self) -> GroundTruthBody:
        """The `/sim/ground_truth` body; its keys are part of the simulator's HTTP API."""
        return {
            "start": self.start_s,
            "end": self.end_s,
            "window_s": self.end_s - self.start_s,
            "model_window_s": (self.end_s - self.start_s) * self.time_scale,
            "time_scale": self.time_scale,
            "output_tokens": self.output_tokens,
            "output_tok_s": self.output_tok_s_wall,
            "output_tok_s_model": self.output_tok_s_model,
            "steps": self.steps,
            "decode_steps": self.decode_steps,
            "running_reqs_mean": self.running_reqs_mean,
            "finished_requests": self.finished_requests,
            "finished_completion_tokens": self.finished_completion_tokens,
            "finished_verify_ct": self.finished_verify_ct,
            "finished_correct_drafts": self.finished_correct_drafts,
            "accept_length": self.accept_length,
            "complete": self.complete,
        }


class GroundTruthRecord:
    """Rows the scheduler appends as forwards end and requests finish; windows read back."""

    def __init__(self) -> None:
        self.forwards = Ring(FORWARD_ROWS, 5)  # END_S, START_S, TOKENS, RUNNING, IS_DECODE
        # finish_s, completion_tokens, verify_ct, drafts, arrival_s, first_token_s (NaN: none)
        self.finishes = Ring(FINISH_ROWS, 6)

    def add_forward(
        self, end_s: float, start_s: float, tokens: int, running: int, is_decode: bool
    ) -> None:
        self.forwards.append(end_s, start_s, float(tokens), float(running), float(is_decode))

    def add_finish(
        self, finish_s: float, completion_tokens: int, verify_ct: int, correct_drafts: int,
        arrival_s: float = float("nan"), first_token_s: float | None = None,
    ) -> None:
        self.finishes.append(
            finish_s, float(completion_tokens), float(verify_ct), float(correct_drafts),
            arrival_s, float("nan") if first_token_s is None else first_token_s,
        )

    def finished_requests(self, start: float, end: float) -> list[list[float]]:
        """[arrival, first token, finish, completion tokens] of every request that finished in
        [start, end] (time.monotonic() seconds): what goodput is checked against."""
        fends = self.finishes.column(0)
        lo, hi = bisect.bisect_left(fends, start), bisect.bisect_right(fends, end)
        return [[arrival, first, finish, comp]
                for finish, comp, _v, _d, arrival, first in self.finishes.rows(lo, hi)]

    def window(
        self, start: float, end: float, *, time_scale: float, speculative: bool
    ) -> GroundTruth:
        """What the scheduler really did between two time.monotonic() instants."""
        ring = self.forwards
        ends = ring.column(END_S)
        lo = bisect.bisect_left(ends, start)
        hi = bisect.bisect_right(ends, end)
        tokens = 0.0
        steps = decode_steps = 0
        for _end, _start, emitted, _running, is_decode in ring.rows(lo, hi):
            tokens += emitted
            steps += 1
            decode_steps += int(is_decode)
        window_s = max(end - start, 1e-12)
        fends = self.finishes.column(0)
        flo = bisect.bisect_left(fends, start)
        fhi = bisect.bisect_right(fends, end)
        done_tokens = done_verify = done_drafts = 0.0
        for _t, comp, verify, drafts, _arrival, _first in self.finishes.rows(flo, fhi):
            done_tokens += comp
            done_verify += verify
            done_drafts += drafts
        oldest = ring.oldest(END_S)
        return GroundTruth(
            start_s=start,
            end_s=end,
            time_scale=time_scale,
            output_tokens=int(tokens),
            output_tok_s_wall=tokens / window_s,
            output_tok_s_model=tokens / (window_s * time_scale),
            steps=steps,
            decode_steps=decode_steps,
            running_reqs_mean=self._running_area(lo, hi, start, end) / window_s,
            finished_requests=fhi - flo,
            finished_completion_tokens=int(done_tokens),
            finished_verify_ct=int(done_verify),
            finished_correct_drafts=int(done_drafts),
            accept_length=(done_tokens / done_verify) if (speculative and done_verify) else None,
            complete=oldest is None or oldest <= start or ring.n <= ring.capacity,
        )

    def _running_area(self, lo: int, hi: int, start: float, end: float) -> float:
        """Running requests integrated over [start, end] (idle gaps count as zero)."""
        ring = self.forwards
        area = 0.0
        for end_real_s, start_real_s, _emitted, running, _d in ring.rows(
            max(lo - 1, 0), min(hi + 1, len(ring))
        ):
            overlap = min(end_real_s, end) - max(start_real_s, start)
            if overlap > 0:
                area += running * overlap
        return area
