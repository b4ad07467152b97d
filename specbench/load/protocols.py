"""Request bodies and stream parsers for the three ways of talking to SGLang.

One builder and one parser per protocol, looked up in the plain dict :data:`PROTOCOLS`:

- ``openai-chat``: ``POST /v1/chat/completions`` with the conversation as is;
- ``openai-completions``: ``POST /v1/completions`` with the conversation rendered to text;
- ``sglang-native``: ``POST /generate`` with the same text.

Token timing never comes from counting chunks: under speculative decoding one chunk may carry
several tokens. Every body asks the server for a cumulative count in each chunk (OpenAI
routes: ``stream_options.continuous_usage_stats``; ``/generate``: ``meta_info.completion_tokens``
is cumulative by design), and the parser turns the stream into (arrival time, cumulative
tokens) points. Stream formats are SGLang 0.5.23's; the contract tests parse its own streams.

The parsers work on what the runner recorded on its hot path, the raw network reads and the
monotonic time each arrived, and run after the request (or the whole point) is over, so the
per-chunk cost while measuring is an append. An event's time is the time of the read that
completed its line: the client could not have seen it earlier.

A prompt row's ``tool_choice`` (chat) and ``sampling`` overrides (:data:`SAMPLING_KEYS`, every
route) are sent with its requests. What every body gets beyond its row (``--extra-request-body``,
``--ignore-eos``, and how the text-in routes render the conversation) is a :class:`BodyOptions`.
The oracle contract tests (``tests/engines/oracle``) run these parsers and bodies against SGLang
0.5.23's own serving code.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

# Body building lives in bodies.py; these names are re-exported for the callers of this module.
from specbench.load.bodies import (
    PLAIN_BODY,
    SAMPLING_KEYS,
    SPECBENCH_TEXT,
    BodyOptions,
    PromptRenderer,
    SamplingOverrideError,
    chat_body,
    check_sampling,
    completions_body,
    native_body,
    render_prompt,
    sampling_overrides,
)
from specbench.prompts import PromptRequest
from specbench.rules.bodies import check_extra_body

__all__ = [
    "ERROR_CLASSES",
    "PLAIN_BODY",
    "PROTOCOLS",
    "SAMPLING_KEYS",
    "SPECBENCH_TEXT",
    "BodyOptions",
    "ParsedStream",
    "PromptRenderer",
    "Protocol",
    "ProtocolError",
    "SamplingOverrideError",
    "chat_body",
    "check_extra_body",
    "check_sampling",
    "completions_body",
    "get_protocol",
    "native_body",
    "parse_chat",
    "parse_completions",
    "parse_native",
    "render_prompt",
    "sampling_overrides",
    "split_events",
]

if TYPE_CHECKING:
    pass

# Per-request failure classes (a request cancelled at the window end is not a failure).
ERROR_CLASSES: tuple[str, ...] = (
    "connect",  # no connection could be made and the server was never seen alive in the point
    "http_status",  # a status other than 200
    "timeout",  # request_timeout_s passed
    "stream_truncated",  # the stream ended without [DONE] or without a final chunk
    "malformed_chunk",  # an event that is not the JSON SGLang sends, or no token counts at all
    "server_error",  # a 200 stream that reported an error event or finish_reason "abort"
    "server_gone",  # connection refused/reset after the server answered in this point
)

_DONE = b"[DONE]"
_DETAIL_CHARS = 200


@dataclass(frozen=True)
class ParsedStream:
    """What one response stream said, in the numbers the metrics need.

    ``chunk_t`` and ``chunk_tokens`` are parallel arrays: arrival time (monotonic s) and the
    cumulative completion-token count the server reported at that time, one entry per distinct
    arrival time (events that arrived in the same network read share a time; the last count
    wins). They are the only source of token timing.
    """

    chunk_t: np.ndarray
    chunk_tokens: np.ndarray
    t_first_token: float | None
    prompt_tokens: int | None
    completion_tokens: int
    spec_verify_ct: int | None
    finish_reason: str | None
    n_events: int
    # The final usage disagreed with the last streamed cumulative count by more than the
    # stop that ended the stream explains (see _Accumulator.stop_explains).
    token_mismatch: bool
    error_class: str | None
    error_detail: str | None


def split_events(reads: Sequence[bytes], times: Sequence[float]) -> Iterator[tuple[float, bytes]]:
    """Yield (arrival time, payload) for every ``data:`` line of an SSE byte stream.

    SGLang writes each event as one ``data: <json>`` line followed by a blank line; comment
    lines (``:``) and other fields are skipped. A line split across reads gets the time of the
    read that completed it; an unterminated last line is yielded with the last read's time
    (a truncated stream still shows what it had).
    """
    pending = b""
    for data, t in zip(reads, times, strict=True):
        if pending:
            data = pending + data
        if b"\n" not in data:
            pending = data
            continue
        lines = data.split(b"\n")
        pending = lines.pop()
        for line in lines:
            if line.startswith(b"data:"):
                yield t, line[5:].strip()
    if pending.startswith(b"data:") and times:
        yield times[-1], pending[5:].strip()


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _preview(payload: bytes) -> str:
    return payload[:_DETAIL_CHARS].decode("utf-8", "replace")


def _error_message(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err)[:_DETAIL_CHARS]
    return str(err)[:_DETAIL_CHARS]


class _Accumulator:
    """Shared bookkeeping of the parsers: count points, first token, first error."""

    def __init__(self) -> None:
        self.t: list[float] = []
        self.n: list[int] = []
        self.t_first_token: float | None = None
        self.prompt_tokens: int | None = None
        self.spec_verify_ct: int | None = None
        self.finish_reason: str | None = None
        self.matched_stop: Any = None
        self.final_usage_tokens: int | None = None
        self.usage_t: float | None = None
        self.done = False
        self.n_events = 0
        self.error_class: str | None = None
        self.error_detail: str | None = None

    def fail(self, error_class: str, detail: str) -> None:
        if self.error_class is None:  # the first problem explains the rest
            self.error_class = error_class
            self.error_detail = detail

    def count(self, t: float, tokens: Any) -> None:
        n = _int_or_none(tokens)
        if n is None or n < 0:
            self.fail("malformed_chunk", f"completion_tokens is {tokens!r}, not a count")
            return
        if self.n and n < self.n[-1]:
            self.fail("malformed_chunk",
                      f"cumulative completion_tokens went down from {self.n[-1]} to {n}")
            return
        if self.t and self.t[-1] == t:
            self.n[-1] = n
        else:
            self.t.append(t)
            self.n.append(n)
        if n > 0 and self.t_first_token is None:
            self.t_first_token = t

    def content(self, t: float) -> None:
        # A chunk with output but no count yet (server without continuous usage) still marks
        # the first token for TTFT; it adds no count point.
        if self.t_first_token is None:
            self.t_first_token = t

    def spec(self, details: Any) -> None:
        if isinstance(details, list):
            details = details[0] if details else None
        if isinstance(details, dict):
            ct = _int_or_none(details.get("spec_verify_ct"))
            if ct is not None:
                self.spec_verify_ct = ct

    def stop_explains(self, gap: int) -> bool:
        """Whether the stop that ended a chat stream explains a final usage `gap` tokens above
        the last streamed count (completions streams send every update, so there it never does).

        SGLang counts the stop in ``completion_tokens`` ("Stop position is included",
        ``schedule_batch.py``), but the detokenizer trims a matched stop token (or string) from
        the text (``detokenizer_manager.py`` trim_matched_stop) and chat sends a content chunk
        only for a non-empty delta (``serving_chat.py``, ``if delta:``). So a step that adds
        only the stop sends no chunk: the last streamed count is N-1 and the usage chunk says N
        (the finish chunk carries no usage). A stop token is one token; a stop string at most
        one token per byte. Anything else (a lower final count, a larger gap, a gap on a
        length finish) is a real disagreement.
        """
        if self.finish_reason != "stop" or gap <= 0:
            return False
        if isinstance(self.matched_stop, str) and self.matched_stop:
            return gap <= len(self.matched_stop.encode())
        return gap == 1

    def result(self, need_usage: bool, skips_empty_deltas: bool = False) -> ParsedStream:
        if self.error_class is None:
            if not self.done:
                self.fail("stream_truncated",
                          f"stream ended without [DONE] after {self.n_events} events")
            elif self.finish_reason is None:
                self.fail("stream_truncated", "stream ended without a chunk carrying finish_reason")
            elif not self.n and self.final_usage_tokens is None:
                self.fail("malformed_chunk", "no completion_tokens anywhere in the stream; "
                          "the server ignored stream_options.include_usage")
            elif self.finish_reason == "abort":
                self.fail("server_error", "the server aborted the request (finish_reason abort)")
        last_streamed = self.n[-1] if self.n else None
        completion = last_streamed if self.final_usage_tokens is None else self.final_usage_tokens
        mismatch = (need_usage and self.final_usage_tokens is not None and last_streamed is not None
                    and last_streamed != self.final_usage_tokens
                    and not (skips_empty_deltas
                             and self.stop_explains(self.final_usage_tokens - last_streamed)))
        if (completion is not None and (not self.n or self.n[-1] < completion)
                and self.final_usage_tokens is not None and self.usage_t is not None):
            # Only the final usage knows the count (no continuous usage): it is the last point.
            self.count(self.usage_t, completion)
        return ParsedStream(
            chunk_t=np.asarray(self.t, dtype=np.float64),
            chunk_tokens=np.asarray(self.n, dtype=np.int64),
            t_first_token=self.t_first_token,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=completion or 0,
            spec_verify_ct=self.spec_verify_ct,
            finish_reason=self.finish_reason,
            n_events=self.n_events,
            token_mismatch=bool(mismatch),
            error_class=self.error_class,
            error_detail=self.error_detail,
        )


def _load_event(acc: _Accumulator, payload: bytes) -> dict[str, Any] | None:
    acc.n_events += 1
    if payload == _DONE:
        acc.done = True
        return None
    if acc.done:
        acc.fail("malformed_chunk", f"event after [DONE]: {_preview(payload)}")
        return None
    try:
        obj = json.loads(payload)
    except ValueError:
        acc.fail("malformed_chunk", f"event is not JSON: {_preview(payload)}")
        return None
    if not isinstance(obj, dict):
        acc.fail("malformed_chunk", f"event is not a JSON object: {_preview(payload)}")
        return None
    if "error" in obj:
        acc.fail("server_error", _error_message(obj["error"]))
        return None
    return obj


def _parse_openai(reads: Sequence[bytes], times: Sequence[float], text_key: str) -> ParsedStream:
    """Chat and completions streams: same envelope, output in delta.* or text."""
    acc = _Accumulator()
    for t, payload in split_events(reads, times):
        obj = _load_event(acc, payload)
        if obj is None:
            continue
        choices = obj.get("choices")
        if not isinstance(choices, list):
            acc.fail("malformed_chunk", f"event without a choices list: {_preview(payload)}")
            continue
        usage = obj.get("usage")
        if isinstance(usage, dict):
            prompt = _int_or_none(usage.get("prompt_tokens"))
            if prompt is not None:
                acc.prompt_tokens = prompt
            if choices:
                acc.count(t, usage.get("completion_tokens"))
            else:
                # The usage chunk (choices == []) closes the stream with the final counts.
                final = _int_or_none(usage.get("completion_tokens"))
                if final is None:
                    acc.fail("malformed_chunk", f"usage chunk without completion_tokens: "
                             f"{_preview(payload)}")
                else:
                    acc.final_usage_tokens = final
                    acc.usage_t = t
        elif usage is not None:
            acc.fail("malformed_chunk", f"usage is not an object: {_preview(payload)}")
        if "sglext" in obj:
            ext = obj["sglext"]
            if isinstance(ext, dict):
                acc.spec(ext.get("spec_tokens_details"))
        for choice in choices:
            if not isinstance(choice, dict):
                acc.fail("malformed_chunk", f"choice is not an object: {_preview(payload)}")
                continue
            if text_key == "delta":
                delta = choice.get("delta")
                if isinstance(delta, dict) and (delta.get("content") or delta.get("tool_calls")
                                                or delta.get("reasoning_content")):
                    acc.content(t)
            elif choice.get("text"):
                acc.content(t)
            reason = choice.get("finish_reason")
            if reason is not None:
                acc.finish_reason = str(reason)
                acc.matched_stop = choice.get("matched_stop")
    return acc.result(need_usage=True, skips_empty_deltas=text_key == "delta")


def parse_chat(reads: Sequence[bytes], times: Sequence[float]) -> ParsedStream:
    """Parse a ``/v1/chat/completions`` stream (role chunk, content, finish, sglext, usage)."""
    return _parse_openai(reads, times, "delta")


def parse_completions(reads: Sequence[bytes], times: Sequence[float]) -> ParsedStream:
    """Parse a ``/v1/completions`` stream (text chunks, finish on the last, sglext, usage)."""
    return _parse_openai(reads, times, "text")


def parse_native(reads: Sequence[bytes], times: Sequence[float]) -> ParsedStream:
    """Parse a ``/generate`` stream: every update carries cumulative ``meta_info``."""
    acc = _Accumulator()
    for t, payload in split_events(reads, times):
        obj = _load_event(acc, payload)
        if obj is None:
            continue
        meta = obj.get("meta_info")
        if not isinstance(meta, dict):
            acc.fail("malformed_chunk", f"update without meta_info: {_preview(payload)}")
            continue
        prompt = _int_or_none(meta.get("prompt_tokens"))
        if prompt is not None:
            acc.prompt_tokens = prompt
        acc.count(t, meta.get("completion_tokens"))
        if obj.get("text") and acc.t_first_token is None:
            acc.content(t)
        acc.spec(meta)
        reason = meta.get("finish_reason")
        if isinstance(reason, dict):
            acc.finish_reason = str(reason.get("type"))
        elif isinstance(reason, str):
            acc.finish_reason = reason
    return acc.result(need_usage=False)


@dataclass(frozen=True)
class Protocol:
    """How to send one request and read its stream."""

    name: str
    path: str
    build_body: Callable[[PromptRequest, str, float, BodyOptions], dict[str, Any]]
    parse: Callable[[Sequence[bytes], Sequence[float]], ParsedStream]

    def encode(self, request: PromptRequest, model: str, temperature: float,
               options: BodyOptions = PLAIN_BODY) -> bytes:
        return json.dumps(self.build_body(request, model, temperature, options)).encode()


PROTOCOLS: dict[str, Protocol] = {
    "openai-chat": Protocol("openai-chat", "/v1/chat/completions", chat_body, parse_chat),
    "openai-completions": Protocol("openai-completions", "/v1/completions", completions_body,
                                   parse_completions),
    "sglang-native": Protocol("sglang-native", "/generate", native_body, parse_native),
}


class ProtocolError(ValueError):
    """An unknown protocol name; the message names the choices."""


def get_protocol(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ProtocolError(
            f"unknown protocol {name!r}; choose from {', '.join(PROTOCOLS)}"
        ) from None
