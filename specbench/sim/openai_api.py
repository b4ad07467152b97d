"""`/v1/chat/completions` and `/v1/completions`, with SGLang 0.5.23's exact JSON and chunks.

Both endpoints take one path (:meth:`OpenAIApi._serve`) and read a request the same way
(:meth:`OpenAIApi._begin`: fault planning, the request checks, the sampling parameters as
SGLang maps them, stream options, the sglext opt-in, the model name); they differ in where
the prompt comes from and in the shape of a choice. Stream chunks are formatted directly
rather than through `json.dumps`, because under load the simulator writes thousands per
second; the text pieces come pre-escaped from workload.py.

The shapes follow SGLang's serialisers (`openai/sse_utils.py`, `openai/protocol.py`,
`serving_chat.py`, `serving_completions.py`):

* chat: a role chunk at the first update; a content chunk only for an update whose text is
  not empty (the step that adds only the EOS token, which the detokenizer trims, sends
  none); a finish chunk with no usage; then an sglext chunk (`"usage": null`) when asked for
  and the request had a verify round, and a usage chunk when asked for; then `[DONE]`.
  Deltas carry `"reasoning_content": null`;
* completions: a chunk for every update, empty text included, the last one carrying
  finish_reason (and `"usage"`: null or the running count); the sglext chunk; a usage chunk
  written without null fields.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from aiohttp import web

from specbench.sim.bodies import (
    ChatCompletionResponse,
    ChatMessage,
    ChatRequest,
    CompletionRequest,
    CompletionResponse,
    SamplingParams,
    UsageInfo,
)
from specbench.sim.faults import INJECTED_ERROR, FaultPlan, faulty_json
from specbench.sim.generation import (
    EOS_TOKEN_ID,
    BadRequest,
    dumps,
    error_json,
    guarded,
    json_body,
    spec_details,
    text_json,
    text_of,
    usage_info,
    weight_versions,
)
from specbench.sim.request import SimRequest
from specbench.sim.sampling import chat_sampling, completion_sampling
from specbench.sim.streaming import SSE_HEADERS, OnEnd, OnUpdate, sse, stream_sse
from specbench.sim.validation import InputTooLong, tools_error
from specbench.sim.workload import is_agentic, render_chat

if TYPE_CHECKING:
    from specbench.sim.app import SimServer

_CHAT_CHUNK = "chat.completion.chunk"
_TEXT_COMPLETION = "text_completion"
_Callbacks = tuple[OnUpdate, OnEnd]
# The request body of the route being served, and a non-streaming answer of either route.
_Req = TypeVar("_Req", ChatRequest, CompletionRequest)
_Answer = TypeVar("_Answer", ChatCompletionResponse, CompletionResponse)


@dataclass(frozen=True)
class _Prompt:
    """What an endpoint's own fields give: the prompt and SGLang's sampling parameters."""

    text: str
    agentic: bool
    sampling: SamplingParams
    prompt_tokens: int | None = None  # given when the prompt is token ids
    messages: list[ChatMessage] | None = None  # a chat request's, for the token count


@dataclass(frozen=True)
class _Call:
    """One accepted OpenAI request, queued in the scheduler."""

    req: SimRequest
    fault: FaultPlan
    model: str
    created: int
    stream: bool
    include_usage: bool
    continuous_usage: bool
    want_spec: bool


def _chat_prompt(body: ChatRequest, sim: SimServer) -> _Prompt:
    """The prompt of a chat request, after SGLang's request checks in its order (field
    types first, as its request model does)."""
    sampling = chat_sampling(body)
    messages = body.get("messages")
    if (
        not isinstance(messages, list)
        or not messages
        or not all(isinstance(m, dict) for m in messages)
    ):
        raise BadRequest("Messages cannot be empty.")
    tools, tool_choice = body.get("tools"), body.get("tool_choice")
    problem = tools_error(tools, tool_choice)
    if problem:
        raise BadRequest(problem)
    longest = body.get("max_completion_tokens") or body.get("max_tokens")
    ctx = sim.settings.context_length_arg
    if longest and ctx and longest > ctx and not sim.settings.allow_auto_truncate:
        raise BadRequest(
            f"max_completion_tokens is too large: {longest}."
            f"This model supports at most {ctx} completion tokens."
        )
    if tool_choice == "none":
        tools = None
    return _Prompt(
        render_chat(messages, tools), is_agentic(messages, tools), sampling, messages=messages
    )


def _completion_prompt(body: CompletionRequest, sim: SimServer) -> _Prompt:
    sampling = completion_sampling(body)
    prompt = body.get("prompt")
    if not prompt or (isinstance(prompt, list) and all(not p for p in prompt)):
        raise BadRequest("Prompt cannot be empty")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return _Prompt(" ".join(map(str, prompt)), False, sampling, prompt_tokens=len(prompt))
    if isinstance(prompt, str):
        return _Prompt(prompt, False, sampling)
    raise BadRequest("prompt must be a non-empty string (or a list of token ids)")


class OpenAIApi:
    """The OpenAI-compatible endpoints of one :class:`SimServer`."""

    def __init__(self, sim: SimServer) -> None:
        self.sim = sim
        self.settings = sim.settings

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await guarded(
            lambda: self._serve(request, _chat_prompt, self._chat_body, self._chat_stream)
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await guarded(
            lambda: self._serve(
                request, _completion_prompt, self._completion_body, self._completion_stream
            )
        )

    async def _serve(
        self,
        request: web.Request,
        prompt_of: Callable[[_Req, SimServer], _Prompt],
        body_of: Callable[[_Call], Mapping[str, object]],
        stream_of: Callable[[_Call], _Callbacks],
    ) -> web.StreamResponse:
        """One request, either endpoint: parse it, then one JSON body or an SSE stream."""
        call = await self._begin(request, prompt_of, stream_of is self._chat_stream)
        if isinstance(call, web.StreamResponse):
            return call
        if not call.stream:
            await self.sim.wait_finished(call.req, request)
            return faulty_json(body_of(call), call.fault)
        on_update, on_end = stream_of(call)
        return await stream_sse(
            request,
            call.req,
            self.sim.scheduler,
            call.fault,
            on_update,
            on_end,
            self.sim.frontend.output_turn,
        )

    async def _begin(
        self,
        request: web.Request,
        prompt_of: Callable[[_Req, SimServer], _Prompt],
        chat: bool,
    ) -> _Call | web.StreamResponse:
        """Parse and queue a request; an injected error, or an input the scheduler refuses
        on a stream, is answered at once (a response)."""
        # Read as the route's request type; the values are checked where they are used.
        body = cast(_Req, await json_body(request))
        fault = self.sim.faults.on_generation_request()
        if fault.error:
            return error_json(INJECTED_ERROR, 500, "InternalServerError")
        prompt = prompt_of(body, self.sim)
        if prompt.sampling.get("n", 1) != 1:
            raise BadRequest("specbench.sim supports n = 1 only")
        stream = bool(body.get("stream"))
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        model = str(body.get("model") or self.settings.served_model_name)
        try:
            req = self.sim.new_request(
                prompt.text,
                agentic=prompt.agentic,
                sampling=prompt.sampling,
                stream=stream,
                prompt_tokens=prompt.prompt_tokens,
                messages=prompt.messages,
            )
        except InputTooLong as exc:
            if not stream:
                raise
            return await _refused_stream(request, str(exc), model, chat, include_usage)
        return _Call(
            req=req,
            fault=fault,
            model=model,
            created=int(time.time()),
            stream=stream,
            include_usage=include_usage,
            continuous_usage=bool(opts.get("continuous_usage_stats")),
            want_spec=bool(body.get("return_spec_tokens_details"))
            and self.settings.release.stream_spec_counts,
        )

    # ------------------------------------------------------------------ chat
    def _chat_body(self, call: _Call) -> ChatCompletionResponse:
        req = call.req
        reason, matched = _openai_finish(req)
        out: ChatCompletionResponse = {
            "id": req.rid,
            "object": "chat.completion",
            "created": call.created,
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": text_of(req, 0, req.completion_tokens),
                        "reasoning_content": None,
                    },
                    "logprobs": None,
                    "finish_reason": reason,
                    "matched_stop": matched,
                }
            ],
            "usage": self._usage(req),
            "metadata": {"weight_version": "default", "weight_versions": weight_versions(req)},
        }
        return self._with_sglext(out, call)

    def _chat_stream(self, call: _Call) -> _Callbacks:
        req, cache_report = call.req, self.settings.enable_cache_report
        head = _chunk_head(req.rid, _CHAT_CHUNK, call.created, call.model)
        first = True

        def on_update(sent: int, now: int, done: bool) -> list[str]:
            nonlocal first
            payloads = []
            if first:
                first = False
                role = '{"reasoning_content":null,"role":"assistant","content":""}'
                payloads.append(head + _chat_choice(role) + "}")
            text = text_json(req, sent, now)
            if text != '""':
                usage = ""
                if call.continuous_usage:
                    cached = req.cached_tokens if cache_report else None
                    usage = f',"usage":{_usage_json(req, now, cached)}'
                delta = '{"reasoning_content":null,"content":' + text + "}"
                payloads.append(head + _chat_choice(delta) + usage + "}")
            return payloads

        def on_end() -> list[str]:
            reason, matched = _openai_finish(req)
            delta = '{"reasoning_content":null}'
            finish = head + _chat_choice(delta, dumps(reason), dumps(matched)) + "}"
            return [finish, *self._trailer(head, call, exclude_none=False)]

        return on_update, on_end

    # ------------------------------------------------------------------ completions
    def _completion_body(self, call: _Call) -> CompletionResponse:
        req = call.req
        reason, matched = _openai_finish(req)
        out: CompletionResponse = {
            "id": req.rid,
            "object": _TEXT_COMPLETION,
            "created": call.created,
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "text": text_of(req, 0, req.completion_tokens),
                    "logprobs": None,
                    "finish_reason": reason,
                    "matched_stop": matched,
                }
            ],
            "usage": self._usage(req),
            "metadata": {"weight_version": "default", "weight_versions": weight_versions(req)},
        }
        return self._with_sglext(out, call)

    def _completion_stream(self, call: _Call) -> _Callbacks:
        req = call.req
        head = _chunk_head(req.rid, _TEXT_COMPLETION, call.created, call.model)

        def on_update(sent: int, now: int, done: bool) -> list[str]:
            reason, matched = ("null", "null")
            if done:
                r, m = _openai_finish(req)
                reason, matched = dumps(r), dumps(m)
            # SGLang's running usage here never has a cache count.
            usage = _usage_json(req, now, None) if call.continuous_usage else "null"
            return [
                head
                + '"choices":[{"index":0,"text":'
                + text_json(req, sent, now)
                + f',"logprobs":null,"finish_reason":{reason},"matched_stop":{matched}}}],'
                + f'"usage":{usage}}}'
            ]

        return on_update, lambda: self._trailer(head, call, exclude_none=True)

    # ------------------------------------------------------------------ shared shapes
    def _with_sglext(self, out: _Answer, call: _Call) -> _Answer:
        details = spec_details(call.req, self.settings) if call.want_spec else None
        if details is not None:
            out["sglext"] = {"spec_tokens_details": details}
        return out

    def _trailer(self, head: str, call: _Call, exclude_none: bool) -> list[str]:
        """The chunks after the last choice: the sglext spec-details chunk (asked for, and
        the request had a verify round) and the usage chunk (asked for; completions writes
        it without null fields)."""
        payloads = []
        details = spec_details(call.req, self.settings) if call.want_spec else None
        if details is not None:
            ext = dumps({"spec_tokens_details": details})
            payloads.append(head + '"choices":[],"usage":null,"sglext":' + ext + "}")
        if call.include_usage:
            usage: Mapping[str, object] = self._usage(call.req)
            if exclude_none:
                usage = {k: v for k, v in usage.items() if v is not None}
            payloads.append(head + '"choices":[],"usage":' + dumps(usage) + "}")
        return payloads

    def _usage(self, req: SimRequest) -> UsageInfo:
        # SGLang fills prompt_tokens_details only with --enable-cache-report.
        cached = req.cached_tokens if self.settings.enable_cache_report else None
        return usage_info(req.prompt_tokens, req.completion_tokens, cached)


async def _refused_stream(
    request: web.Request, message: str, model: str, chat: bool, include_usage: bool
) -> web.StreamResponse:
    """A stream whose input the scheduler refused: SGLang has already answered 200, so the
    refusal is an error event, then (when asked for) a usage chunk of the aborted request
    (its input replaced by one token), then `[DONE]`."""
    error = {"object": "error", "message": message, "type": "BAD_REQUEST", "param": None}
    payloads = [dumps({"error": {**error, "code": 400}})]
    if include_usage:
        head = _chunk_head("", _CHAT_CHUNK if chat else _TEXT_COMPLETION, int(time.time()), model)
        usage: Mapping[str, object] = usage_info(1, 0, None)
        if not chat:
            usage = {k: v for k, v in usage.items() if v is not None}
        payloads.append(head + '"choices":[],"usage":' + dumps(usage) + "}")
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await resp.prepare(request)
    await resp.write(sse([*payloads, "[DONE]"]))
    await resp.write_eof()
    return resp


def _openai_finish(req: SimRequest) -> tuple[str, int | None]:
    if req.finish_kind == "length":
        return "length", None
    return "stop", EOS_TOKEN_ID


def _chat_choice(delta: str, finish: str = "null", matched: str = "null") -> str:
    return (
        f'"choices":[{{"index":0,"delta":{delta},"logprobs":null,'
        f'"finish_reason":{finish},"matched_stop":{matched}}}]'
    )


def _usage_json(req: SimRequest, completion: int, cached: int | None) -> str:
    """SGLang's usage object after `completion` output tokens, formatted directly (it is
    sent with every chunk under load)."""
    total = req.prompt_tokens + completion
    details = "null" if cached is None else f'{{"cached_tokens":{cached}}}'
    return (
        f'{{"prompt_tokens":{req.prompt_tokens},"total_tokens":{total},'
        f'"completion_tokens":{completion},"prompt_tokens_details":{details},'
        f'"reasoning_tokens":0,"completion_tokens_details":null}}'
    )


def _chunk_head(rid: str, obj: str, created: int, model: str) -> str:
    """The opening of every chunk's JSON object, up to and including the comma after model."""
    return f'{{"id":"{rid}","object":"{obj}","created":{created},"model":{dumps(model)},'
