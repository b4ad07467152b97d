"""Request bodies and stream parsers for the three ways of talking to SGLang.

One builder and one parser per protocol, looked up in the plain dict :data:`PROTOCOLS`:

- ``openai-chat``: ``POST /v1/chat/completions`` with the conversation as is;
- ``openai-completions``: ``POST /v1/completions`` with the conversation rendered to text;
- ``sglang-native``: ``POST /generate`` with the same text.

Token timing never comes from counting chunks: under speculative decoding one chunk may carry
several tokens. Every body asks the server for a cumulative count in each chunk (OpenAI
routes: ``stream_options.continuous_usage_stats``; ``/generate``: ``meta_info.completion_tokens``
is cumulative by design), and the parser turns the stream into (arrival time, cumulative
tokens) points. Stream formats are SGLang 0.5.23's (shared/reference/sglang-0.5.23.md §4).

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
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from specbench.errors import ConfigError, UserError
from specbench.prompts import PromptRequest

if TYPE_CHECKING:
    from specbench.config import LoadConfig

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


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def render_prompt(request: PromptRequest) -> str:
    """The conversation (and tools) as plain text for the text-in routes.

    A fixed, model-agnostic template: the same request always renders to the same text, so
    the completions and native protocols see identical prompts across modes. Tools are left
    out under ``tool_choice: "none"``, as SGLang's chat route leaves them out of its template.
    """
    parts: list[str] = []
    if request.tools and request.tool_choice != "none":
        parts.append("<|tools|>\n" + json.dumps(list(request.tools), sort_keys=True))
    for message in request.messages:
        role = str(message.get("role", "user"))
        header = f"<|{role}|>"
        if role == "tool" and message.get("tool_call_id"):
            header = f"<|tool id={message['tool_call_id']}|>"
        body = _text_of(message.get("content"))
        calls = message.get("tool_calls")
        if calls:
            body = (body + "\n" if body else "") + json.dumps(calls, sort_keys=True)
        parts.append(f"{header}\n{body}")
    parts.append("<|assistant|>\n")
    return "\n".join(parts)


_STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}

# The per-row `sampling` overrides specbench sends: the row's key (the OpenAI request name) ->
# the /generate `sampling_params` name. Every key is a field of SGLang 0.5.23's
# ChatCompletionRequest and CompletionRequest (entrypoints/openai/protocol.py), which both
# hand it to the sampler (`to_sampling_params`, serving_completions `_build_sampling_params`),
# and every value name is a key of `sampling_params` (api/v1/api_types.py SamplingParams,
# which rejects unknown keys). The output cap is the row's own `max_tokens`, not an override.
SAMPLING_KEYS: dict[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "repetition_penalty": "repetition_penalty",
    "seed": "sampling_seed",
    "stop": "stop",
    "stop_token_ids": "stop_token_ids",
    "stop_regex": "stop_regex",
    "min_tokens": "min_new_tokens",
    "ignore_eos": "ignore_eos",
    "no_stop_trim": "no_stop_trim",
    "skip_special_tokens": "skip_special_tokens",
    "logit_bias": "logit_bias",
}


class SamplingOverrideError(UserError, ValueError):
    """A prompt row's `sampling` has a key specbench cannot send on every route."""


# The ranges SGLang 0.5.23's sampler refuses (srt/sampling/sampling_params.py, verify()):
# (key, is the value allowed, the rule as SGLang states it). Checked before any load, so a bad
# row is one line up front instead of a 400 on every request that uses it.
_RANGES: tuple[tuple[str, Any, str], ...] = (
    ("temperature", lambda v: math.isfinite(v) and v >= 0, "a non-negative finite number"),
    ("top_p", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("min_p", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("top_k", lambda v: v == -1 or v >= 1, "-1 (disable) or at least 1"),
    ("frequency_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]"),
    ("presence_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]"),
    ("repetition_penalty", lambda v: 0 < v <= 2, "in (0, 2] (1.0 = no penalty)"),
    ("min_tokens", lambda v: v >= 0, "at least 0"),
)


def _range_problem(sampling: Mapping[str, Any]) -> tuple[str, Any, str] | None:
    """The first (key, value, rule) of `sampling` outside what SGLang's sampler accepts."""
    for key, allowed, rule in _RANGES:
        value = sampling.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not allowed(value):
            return key, value, rule
    return None


def sampling_overrides(request: PromptRequest) -> dict[str, Any]:
    """The row's `sampling` overrides under their OpenAI names, checked against
    :data:`SAMPLING_KEYS` and the ranges SGLang accepts."""
    sampling = dict(request.sampling or {})
    unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
    if unknown:
        raise SamplingOverrideError(
            f"prompt {request.id!r}: sampling key {unknown[0]!r} is not one specbench sends; "
            f"use {', '.join(SAMPLING_KEYS)} (max_tokens is a row key, not a sampling override)"
        )
    problem = _range_problem(sampling)
    if problem is not None:
        key, value, rule = problem
        raise SamplingOverrideError(
            f"prompt {request.id!r}: sampling {key}={value!r} would be refused by SGLang "
            f"({key} must be {rule}); fix the row's sampling"
        )
    if "min_tokens" in sampling and sampling["min_tokens"] > request.max_tokens:
        raise SamplingOverrideError(
            f"prompt {request.id!r}: sampling min_tokens={sampling['min_tokens']} is above the "
            f"row's max_tokens {request.max_tokens}; SGLang refuses it: lower min_tokens"
        )
    return sampling


def check_sampling(requests: Sequence[PromptRequest]) -> None:
    """Refuse, before any load, the first row whose sampling SGLang would refuse."""
    for request in requests:
        if request.sampling:
            sampling_overrides(request)


# ---------------------------------------------------------------------------------------------
# What every body gets beyond its row.
#
# `--extra-request-body` means what it means in SGLang's bench_serving (`--extra-request-body`)
# and vLLM's `bench serve` (`--extra-body`): a JSON object whose keys are merged into the top
# level of every request body. Those tools let it override anything (last wins). specbench
# refuses instead the keys it sets itself, because its numbers depend on them: the parsers need
# the stream with a count in every chunk, acceptance needs the spec details, and the manifest's
# temperature, --ignore-eos and prompt-set hashes must describe what was really sent (an
# override there would make runs look comparable when they are not). The row's own `sampling`
# and `tool_choice` still win over the extra keys, as SGLang's per-request extras win over its
# global ones.
#
# On `/generate` SGLang's bench_serving puts the extra keys at the top level too, where SGLang
# silently ignores a sampling key (`GenerateRequest` ignores unknown keys; only
# `sampling_params` has them). So that one `--extra-request-body '{"top_k": 20}'` means the same
# on every protocol, an OpenAI sampling name (:data:`SAMPLING_KEYS`) goes into `sampling_params`
# under SGLang's name there; an explicit `"sampling_params": {...}` is merged into it key by key
# (after those, so it wins); every other key stays at the top level, as bench_serving sends it.

_NO_FIX = "drop it from --extra-request-body"
_PROMPT_FIX = "put it in the prompt file's rows (--prompts FILE.jsonl)"
# Key -> (why specbench owns it, the fix). Checked on the top level of the extra body.
_OWNED_KEYS: dict[str, tuple[str, str]] = {
    "stream": ("every request streams, which the token timing is read from", _NO_FIX),
    "stream_options": ("every stream carries a token count in each chunk", _NO_FIX),
    "return_spec_tokens_details": ("specbench asks for it to measure acceptance", _NO_FIX),
    "model": ("requests name the model the server serves (/server_info)", _NO_FIX),
    "messages": ("the conversation comes from the prompt set", _PROMPT_FIX),
    "prompt": ("the prompt comes from the prompt set", _PROMPT_FIX),
    "text": ("the prompt comes from the prompt set", _PROMPT_FIX),
    "input_ids": ("the prompt comes from the prompt set", _PROMPT_FIX),
    "tools": ("the tools are part of the prompt set", _PROMPT_FIX),
    "max_tokens": ("each request's output cap is its row's max_tokens",
                   "set max_tokens in the prompt file's rows"),
    "max_completion_tokens": ("each request's output cap is its row's max_tokens",
                              "set max_tokens in the prompt file's rows"),
    "temperature": ("it is recorded as --temperature", "use --temperature"),
    "ignore_eos": ("it is recorded as --ignore-eos", "use --ignore-eos"),
    "n": ("specbench measures one answer per request", _NO_FIX),
    "best_of": ("specbench measures one answer per request", _NO_FIX),
}
# The same rule inside an explicit /generate `sampling_params`, under SGLang's names.
_OWNED_PARAMS: dict[str, tuple[str, str]] = {
    "max_new_tokens": _OWNED_KEYS["max_tokens"],
    "temperature": _OWNED_KEYS["temperature"],
    "ignore_eos": _OWNED_KEYS["ignore_eos"],
    "n": _OWNED_KEYS["n"],
}


def check_extra_body(extra: Mapping[str, Any], protocol: str) -> None:
    """Refuse (ConfigError, one line) an extra body that would break measurement on `protocol`
    or that SGLang would refuse on every request."""
    owned = next((k for k in extra if k in _OWNED_KEYS), None)
    if owned is not None:
        why, fix = _OWNED_KEYS[owned]
        raise ConfigError(f"--extra-request-body sets {owned!r}, which specbench sets itself "
                          f"({why}); {fix}")
    params = extra.get("sampling_params")
    if params is not None and protocol != "sglang-native":
        raise ConfigError(f"--extra-request-body sets sampling_params, which only /generate "
                          f"(--protocol sglang-native) reads; on {protocol} give the sampling "
                          "keys at the top level, e.g. '{\"top_k\": 20}'")
    if params is not None and not isinstance(params, dict):
        raise ConfigError(f"--extra-request-body sampling_params is {params!r}, not an object; "
                          "give it as e.g. '{\"sampling_params\": {\"top_k\": 20}}'")
    owned = next((k for k in params or {} if k in _OWNED_PARAMS), None)
    if owned is not None:
        why, fix = _OWNED_PARAMS[owned]
        raise ConfigError(f"--extra-request-body sets sampling_params.{owned}, which specbench "
                          f"sets itself ({why}); {fix}")
    problem = _range_problem({k: v for k, v in extra.items() if k in SAMPLING_KEYS})
    problem = problem or _range_problem(params or {})
    if problem is not None:
        key, value, rule = problem
        raise ConfigError(f"--extra-request-body {key}={value!r} would be refused by SGLang on "
                          f"every request ({key} must be {rule}); fix the value")


@dataclass(frozen=True)
class PromptRenderer:
    """How the text-in routes turn a row's conversation into prompt text; `name` is what the
    manifest records."""

    name: str
    render: Callable[[PromptRequest], str]


# The simulator's (and the default): specbench's own fixed template, the same on every server.
SPECBENCH_TEXT = PromptRenderer("specbench", render_prompt)


@dataclass(frozen=True)
class BodyOptions:
    """What every request body gets beyond its prompt row: the `--extra-request-body` keys
    (checked by :func:`check_extra_body` when the config is built), `--ignore-eos`, and the
    renderer of the text-in routes (chosen by the engine)."""

    extra: Mapping[str, Any] = field(default_factory=dict)
    ignore_eos: bool = False
    renderer: PromptRenderer = SPECBENCH_TEXT

    @classmethod
    def from_load(cls, load: LoadConfig, renderer: PromptRenderer | None) -> BodyOptions:
        return cls(dict(load.extra_request_body), load.ignore_eos, renderer or SPECBENCH_TEXT)


PLAIN_BODY = BodyOptions()


def chat_body(request: PromptRequest, model: str, temperature: float,
              options: BodyOptions = PLAIN_BODY) -> dict[str, Any]:
    body: dict[str, Any] = {**options.extra, "model": model, "messages": list(request.messages)}
    if request.tools:
        body["tools"] = list(request.tools)
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    # SGLang reads max_completion_tokens (max_tokens is deprecated but still honoured); other
    # OpenAI-compatible servers may know only one of them, so both carry the same cap.
    body["max_completion_tokens"] = request.max_tokens
    body["max_tokens"] = request.max_tokens
    body["temperature"] = temperature
    if options.ignore_eos:
        body["ignore_eos"] = True  # an SGLang extra field of ChatCompletionRequest
    body.update(sampling_overrides(request))
    body.update(stream=True, stream_options=_STREAM_OPTIONS, return_spec_tokens_details=True)
    return body


def completions_body(request: PromptRequest, model: str, temperature: float,
                     options: BodyOptions = PLAIN_BODY) -> dict[str, Any]:
    # max_tokens defaults to 16 on /v1/completions, so it is always sent.
    body: dict[str, Any] = {**options.extra, "model": model,
                            "prompt": options.renderer.render(request),
                            "max_tokens": request.max_tokens, "temperature": temperature}
    if options.ignore_eos:
        body["ignore_eos"] = True  # an SGLang extra field of CompletionRequest
    body.update(sampling_overrides(request))
    body.update(stream=True, stream_options=_STREAM_OPTIONS, return_spec_tokens_details=True)
    return body


def _native_extra(extra: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The extra body split for /generate: (top-level keys, sampling_params keys)."""
    top = {k: v for k, v in extra.items() if k not in SAMPLING_KEYS and k != "sampling_params"}
    params = {SAMPLING_KEYS[k]: v for k, v in extra.items() if k in SAMPLING_KEYS}
    params.update(extra.get("sampling_params") or {})
    return top, params


def native_body(request: PromptRequest, model: str, temperature: float,
                options: BodyOptions = PLAIN_BODY) -> dict[str, Any]:
    # sampling_params rejects unknown keys with 400: only SamplingParams' own names go in.
    top, extra_params = _native_extra(options.extra)
    params: dict[str, Any] = {"max_new_tokens": request.max_tokens, "temperature": temperature,
                              **extra_params}
    if options.ignore_eos:
        params["ignore_eos"] = True
    params.update((SAMPLING_KEYS[k], v) for k, v in sampling_overrides(request).items())
    return {**top, "text": options.renderer.render(request), "sampling_params": params,
            "stream": True}


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
