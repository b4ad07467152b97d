"""`/v1/chat/completions` and `/v1/completions`, with SGLang 0.5.23's exact JSON and chunks.

Both endpoints take one path (:meth:`OpenAIApi._serve`) and read a request the same way
(:meth:`OpenAIApi._begin`: fault planning, the n = 1 check, stream options, the sglext opt-in,
the model name); they differ only in where the prompt comes from and in the shape of a choice.
Stream chunks are formatted directly rather than through `json.dumps`, because under load the
simulator writes thousands per second; the text pieces come pre-escaped from workload.py.

SGLang's choices: a chat stream opens with an empty assistant delta, a finish chunk follows
the last content, then (when asked for) an sglext chunk with the speculative statistics and a
usage chunk, then `[DONE]`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from specbench.sim.faults import INJECTED_ERROR, FaultPlan, faulty_json
from specbench.sim.generation import (
    EOS_TOKEN_ID,
    BadRequest,
    dumps,
    error_json,
    guarded,
    json_body,
    opt_int,
    spec_details,
)
from specbench.sim.request import SimRequest
from specbench.sim.streaming import OnEnd, OnUpdate, stream_sse
from specbench.sim.workload import filler_json, filler_text, is_agentic, render_chat

if TYPE_CHECKING:
    from specbench.sim.app import SimServer

_CHAT_CHUNK = "chat.completion.chunk"
_TEXT_COMPLETION = "text_completion"
_Callbacks = tuple[OnUpdate, OnEnd]


@dataclass(frozen=True)
class _Prompt:
    """What an endpoint's own fields give: the prompt text and the raw max-tokens value."""

    text: str
    agentic: bool
    max_tokens: Any  # checked by opt_int when the request is created
    prompt_tokens: int | None = None  # given when the prompt is token ids


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


def _chat_prompt(body: dict[str, Any]) -> _Prompt:
    messages = body.get("messages")
    if (
        not isinstance(messages, list)
        or not messages
        or not all(isinstance(m, dict) for m in messages)
    ):
        raise BadRequest("Messages cannot be empty.")
    tools = body.get("tools") if body.get("tool_choice") != "none" else None
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("tools must be a list")
    max_tokens = body.get("max_completion_tokens")
    if max_tokens is None:
        max_tokens = body.get("max_tokens")
    return _Prompt(render_chat(messages, tools), is_agentic(messages, tools), max_tokens)


def _completion_prompt(body: dict[str, Any]) -> _Prompt:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    max_tokens = body.get("max_tokens", 16)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return _Prompt(" ".join(map(str, prompt)), False, max_tokens, prompt_tokens=len(prompt))
    if isinstance(prompt, str) and prompt:
        return _Prompt(prompt, False, max_tokens)
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
        prompt_of: Callable[[dict[str, Any]], _Prompt],
        body_of: Callable[[_Call], dict[str, Any]],
        stream_of: Callable[[_Call], _Callbacks],
    ) -> web.StreamResponse:
        """One request, either endpoint: parse it, then one JSON body or an SSE stream."""
        call = await self._begin(request, prompt_of)
        if isinstance(call, web.Response):
            return call
        if not call.stream:
            await self.sim.wait_finished(call.req, request)
            return faulty_json(body_of(call), call.fault)
        on_update, on_end = stream_of(call)
        return await stream_sse(
            request, call.req, self.sim.scheduler, call.fault, on_update, on_end
        )

    async def _begin(
        self, request: web.Request, prompt_of: Callable[[dict[str, Any]], _Prompt]
    ) -> _Call | web.Response:
        """Parse and queue a request; an injected error is answered at once (a Response)."""
        body = await json_body(request)
        fault = self.sim.faults.on_generation_request()
        if fault.error:
            return error_json(INJECTED_ERROR, 500, "InternalServerError")
        prompt = prompt_of(body)
        if int(body.get("n") or 1) != 1:
            raise BadRequest("specbench.sim supports n = 1 only")
        stream = bool(body.get("stream"))
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage"))
        continuous_usage = bool(opts.get("continuous_usage_stats"))
        want_spec = bool(body.get("return_spec_tokens_details")) and self.settings.speculative
        model = str(body.get("model") or self.settings.served_model_name)
        req = self.sim.new_request(
            prompt.text,
            agentic=prompt.agentic,
            max_new_tokens=opt_int(prompt.max_tokens, "max_tokens"),
            ignore_eos=bool(body.get("ignore_eos")),
            min_new_tokens=opt_int(body.get("min_tokens"), "min_tokens") or 0,
            stream=stream,
            prompt_tokens=prompt.prompt_tokens,
        )
        return _Call(
            req=req,
            fault=fault,
            model=model,
            created=int(time.time()),
            stream=stream,
            include_usage=include_usage,
            continuous_usage=continuous_usage,
            want_spec=want_spec,
        )

    # ------------------------------------------------------------------ chat
    def _chat_body(self, call: _Call) -> dict[str, Any]:
        req = call.req
        reason, matched = _openai_finish(req)
        out: dict[str, Any] = {
            "id": req.rid,
            "object": "chat.completion",
            "created": call.created,
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": filler_text(req.seed, 0, req.completion_tokens),
                        "reasoning_content": None,
                    },
                    "logprobs": None,
                    "finish_reason": reason,
                    "matched_stop": matched,
                }
            ],
            "usage": self._usage(req),
            "metadata": {"weight_version": "default"},
        }
        if call.want_spec:
            out["sglext"] = {"spec_tokens_details": spec_details(req, self.settings)}
        return out

    def _chat_stream(self, call: _Call) -> _Callbacks:
        req, cache_report = call.req, self.settings.enable_cache_report
        head = _chunk_head(req.rid, _CHAT_CHUNK, call.created, call.model)
        first = True

        def on_update(sent: int, now: int, done: bool) -> list[str]:
            nonlocal first
            payloads = []
            if first:
                first = False
                role = '{"role":"assistant","content":"","reasoning_content":null}'
                payloads.append(head + _chat_choice(role) + "}")
            if now > sent:
                usage = (
                    f',"usage":{_usage_json(req, cache_report)}' if call.continuous_usage else ""
                )
                delta = '{"content":' + filler_json(req.seed, sent, now) + "}"
                payloads.append(head + _chat_choice(delta) + usage + "}")
            return payloads

        def on_end() -> list[str]:
            reason, matched = _openai_finish(req)
            finish = head + _chat_choice("{}", dumps(reason), dumps(matched)) + "}"
            return [finish, *self._trailer(head, call)]

        return on_update, on_end

    # ------------------------------------------------------------------ completions
    def _completion_body(self, call: _Call) -> dict[str, Any]:
        req = call.req
        reason, matched = _openai_finish(req)
        out: dict[str, Any] = {
            "id": req.rid,
            "object": _TEXT_COMPLETION,
            "created": call.created,
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "text": filler_text(req.seed, 0, req.completion_tokens),
                    "logprobs": None,
                    "finish_reason": reason,
                    "matched_stop": matched,
                }
            ],
            "usage": self._usage(req),
        }
        if call.want_spec:
            out["sglext"] = {"spec_tokens_details": spec_details(req, self.settings)}
        return out

    def _completion_stream(self, call: _Call) -> _Callbacks:
        req, cache_report = call.req, self.settings.enable_cache_report
        head = _chunk_head(req.rid, _TEXT_COMPLETION, call.created, call.model)

        def on_update(sent: int, now: int, done: bool) -> list[str]:
            reason, matched = ("null", "null")
            if done:
                r, m = _openai_finish(req)
                reason, matched = dumps(r), dumps(m)
            usage = _usage_json(req, cache_report) if call.continuous_usage else "null"
            return [
                head
                + '"choices":[{"index":0,"text":'
                + filler_json(req.seed, sent, now)
                + f',"logprobs":null,"finish_reason":{reason},"matched_stop":{matched}}}],'
                + f'"usage":{usage}}}'
            ]

        return on_update, lambda: self._trailer(head, call)

    # ------------------------------------------------------------------ shared shapes
    def _trailer(self, head: str, call: _Call) -> list[str]:
        """The chunks after the last choice, shared by chat and completions streams: the
        sglext spec-details chunk (when asked for) and the usage chunk (when asked for)."""
        payloads = []
        if call.want_spec:
            details = dumps({"spec_tokens_details": spec_details(call.req, self.settings)})
            payloads.append(head + '"choices":[],"sglext":' + details + "}")
        if call.include_usage:
            payloads.append(head + '"choices":[],"usage":' + dumps(self._usage(call.req)) + "}")
        return payloads

    def _usage(self, req: SimRequest) -> dict[str, Any]:
        cache_report = self.settings.enable_cache_report
        return {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + req.completion_tokens,
            "completion_tokens": req.completion_tokens,
            # SGLang fills prompt_tokens_details only with --enable-cache-report.
            "prompt_tokens_details": {"cached_tokens": req.cached_tokens} if cache_report else None,
            "reasoning_tokens": 0,
        }


def _openai_finish(req: SimRequest) -> tuple[str, int | None]:
    if req.finish_kind == "length":
        return "length", None
    return "stop", EOS_TOKEN_ID


def _chat_choice(delta: str, finish: str = "null", matched: str = "null") -> str:
    return (
        f'"choices":[{{"index":0,"delta":{delta},"logprobs":null,'
        f'"finish_reason":{finish},"matched_stop":{matched}}}]'
    )


def _usage_json(req: SimRequest, cache_report: bool) -> str:
    """SGLang's usage object, formatted directly (it is sent with every chunk under load)."""
    total = req.prompt_tokens + req.completion_tokens
    details = f'{{"cached_tokens":{req.cached_tokens}}}' if cache_report else "null"
    return (
        f'{{"prompt_tokens":{req.prompt_tokens},"total_tokens":{total},'
        f'"completion_tokens":{req.completion_tokens},"prompt_tokens_details":{details},'
        f'"reasoning_tokens":0}}'
    )


def _chunk_head(rid: str, obj: str, created: int, model: str) -> str:
    """The opening of every chunk's JSON object, up to and including the comma after model."""
    return f'{{"id":"{rid}","object":"{obj}","created":{created},"model":{dumps(model)},'
