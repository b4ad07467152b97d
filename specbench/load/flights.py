"""One request in flight: what the hot path writes while it streams, and the record it becomes.

The hot path appends only arrival times and raw bytes (``times``, ``reads``); parsing them into
a :class:`~specbench.load.records.RequestRecord` happens after the point's window closed.
"""

from __future__ import annotations

from specbench.load.protocols import ParsedStream, Protocol
from specbench.load.records import RequestRecord
from specbench.prompts import PromptRequest


class Flight:
    """A request in progress; the hot path writes only ``times`` and ``reads``."""

    __slots__ = ("error_class", "error_detail", "http_status", "in_window", "prompt_index",
                 "reads", "request_id", "status", "t_end", "t_send", "times", "user")

    def __init__(self, request_id: int, user: int, prompt_index: int) -> None:
        self.request_id = request_id
        self.user = user
        self.prompt_index = prompt_index
        self.t_send = 0.0
        self.t_end = 0.0
        self.times: list[float] = []
        self.reads: list[bytes] = []
        self.http_status: int | None = None
        self.status = "ok"
        self.error_class: str | None = None
        self.error_detail: str | None = None
        self.in_window = False  # open loop: arrived in the window (load/arrivals.py)

    def ended_cleanly(self) -> bool:
        """Cheap check, without parsing, that the stream reached its [DONE]."""
        if self.error_class is not None or not self.reads:
            return False
        tail = self.reads[-1] if len(self.reads[-1]) >= 16 else b"".join(self.reads[-2:])
        return tail.rstrip().endswith(b"[DONE]")

    def record(self, request: PromptRequest, protocol: Protocol, user_offset: int) -> RequestRecord:
        """What the client saw of this request, parsed (after the window: never on the hot path)."""
        reads, times = self.reads, self.times
        if self.status == "cancelled":
            # Cut at the window's end, the last read may stop inside an event: that is the
            # cancellation, not a malformed stream.
            reads, times = whole_events(reads, times)
        parsed: ParsedStream = protocol.parse(reads, times)
        status, error_class, error_detail = "ok", self.error_class, self.error_detail
        if self.status == "cancelled":
            status = "cancelled"
            if parsed.error_class in ("malformed_chunk", "server_error"):
                status, error_class, error_detail = "error", parsed.error_class, parsed.error_detail
        elif error_class is not None:
            status = "error"
        elif parsed.error_class is not None:
            status, error_class, error_detail = "error", parsed.error_class, parsed.error_detail
        if status == "cancelled":
            error_class = error_detail = None
        return RequestRecord(
            request_id=self.request_id,
            user=self.user + user_offset,
            prompt_id=request.id,
            category=request.category,
            max_tokens=request.max_tokens,
            t_send=self.t_send,
            t_first_token=parsed.t_first_token,
            t_end=self.t_end,
            chunk_t=parsed.chunk_t,
            chunk_tokens=parsed.chunk_tokens,
            prompt_tokens=parsed.prompt_tokens,
            completion_tokens=parsed.completion_tokens,
            spec_verify_ct=parsed.spec_verify_ct,
            status=status,
            error_class=error_class,
            error_detail=error_detail,
            finish_reason=parsed.finish_reason,
            http_status=self.http_status,
            n_chunks=parsed.n_events,
            n_reads=len(self.reads),
            token_mismatch=parsed.token_mismatch,
        )


def whole_events(reads: list[bytes], times: list[float]) -> tuple[list[bytes], list[float]]:
    """The reads up to the end of the last complete SSE event (a blank line)."""
    for index in range(len(reads) - 1, -1, -1):
        cut = reads[index].rfind(b"\n\n")
        if cut != -1:
            return [*reads[:index], reads[index][: cut + 2]], times[: index + 1]
    return [], []
