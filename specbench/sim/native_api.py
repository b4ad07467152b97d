"""SGLang's native `/generate`, streaming and not, with its exact JSON and meta_info.

Unlike the OpenAI API, `/generate` checks `sampling_params` against its JSON contract
(unknown keys and wrong types are a 400 with SGLang's message, validation.py) and streams
cumulative events: every event carries the whole text and all output ids so far (the EOS id
included, its text trimmed), with meta_info (e2e latency, the weight versions and, after a
verify round, the spec_* statistics in the last one). A request SGLang refuses later (its
sampling values, its length) is a 400 `{"error": {"message": ...}}` without streaming and an
error event in a 200 stream with it, because SGLang has already begun the response then.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, cast

from aiohttp import web

from specbench.sim.bodies import (
    FinishReason,
    GenerateRequest,
    GenerateResponse,
    MetaInfo,
    SamplingParams,
)
from specbench.sim.faults import INJECTED_ERROR, faulty_json
from specbench.sim.generation import (
    EOS_TOKEN_ID,
    BadRequest,
    dumps,
    guarded,
    json_body,
    output_ids,
    spec_meta,
    text_json,
    text_of,
    weight_versions,
)
from specbench.sim.request import SimRequest
from specbench.sim.streaming import SSE_HEADERS, sse, stream_sse
from specbench.sim.validation import (
    SAMPLING_FIELDS,
    InputTooLong,
    flag_error,
    generate_params_error,
)

if TYPE_CHECKING:
    from specbench.sim.app import SimServer

# /generate sampling_params keys of SGLang 0.5.23 (api/v1/api_types.py), in its order.
SAMPLING_KEYS = tuple(SAMPLING_FIELDS)


def _prompt(body: GenerateRequest) -> tuple[str, int | None]:
    """The prompt text and, when given as input_ids, its token count."""
    text = body.get("text")
    if isinstance(text, list) and len(text) == 1:
        text = text[0]
    ids = body.get("input_ids")
    if isinstance(text, str) and text:
        return text, None
    if isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
        return " ".join(map(str, ids)), len(ids)
    raise BadRequest("Either text or input_ids should be provided (one prompt per request).")


class NativeApi:
    """SGLang's `/generate` endpoint of one :class:`SimServer`."""

    def __init__(self, sim: SimServer) -> None:
        self.sim = sim
        self.settings = sim.settings

    async def generate(self, request: web.Request) -> web.StreamResponse:
        return await guarded(lambda: self._generate(request))

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        # Read as GenerateReqInput; sampling_params is checked against its contract next.
        body = cast(GenerateRequest, await json_body(request))
        params: SamplingParams | list[SamplingParams] = body.get("sampling_params") or {}
        contract = generate_params_error(params) or flag_error(body.get("stream"))
        if contract is not None:
            return web.json_response({"error": contract}, status=400)
        stream = bool(body.get("stream"))
        fault = self.sim.faults.on_generation_request()
        if fault.error:
            error = {"message": INJECTED_ERROR, "type": "InternalServerError", "code": 500}
            return web.json_response({"error": error}, status=500)
        try:
            req = self._new_request(body, params, stream)
        except BadRequest as exc:
            if not stream:
                return web.json_response({"error": {"message": str(exc)}}, status=exc.status)
            return await self._refused_stream(request, exc, body)
        if not stream:
            await self.sim.wait_finished(req, request)
            out: GenerateResponse = {
                "text": text_of(req, 0, req.completion_tokens),
                "output_ids": output_ids(req, 0, req.completion_tokens),
                "meta_info": self._meta_info(req, final=True),
            }
            return faulty_json(out, fault)

        text_esc = ""  # the text so far, JSON-escaped
        ids_txt = ""  # the output ids so far, comma-separated

        def on_update(sent: int, now: int, done: bool) -> list[str]:
            nonlocal text_esc, ids_txt
            if now > sent:
                text_esc += text_json(req, sent, now)[1:-1]
                new_ids = ",".join(str(i) for i in output_ids(req, sent, now))
                ids_txt = f"{ids_txt},{new_ids}" if ids_txt else new_ids
            meta = dumps(self._meta_info(req, final=done, completion=now))
            return [f'{{"text":"{text_esc}","output_ids":[{ids_txt}],"meta_info":{meta}}}']

        return await stream_sse(
            request,
            req,
            self.sim.scheduler,
            fault,
            on_update,
            lambda: [],
            self.sim.frontend.output_turn,
        )

    def _new_request(
        self, body: GenerateRequest, params: SamplingParams | list[SamplingParams], stream: bool
    ) -> SimRequest:
        if isinstance(params, list):
            if len(params) != 1:
                raise BadRequest("specbench.sim supports one prompt per request")
            params = params[0]
        text, prompt_tokens = _prompt(body)
        if (params.get("n") or 1) != 1:
            raise BadRequest("specbench.sim supports n = 1 only")
        return self.sim.new_request(
            text, agentic=False, sampling=params, stream=stream, prompt_tokens=prompt_tokens
        )

    async def _refused_stream(
        self, request: web.Request, exc: BadRequest, body: GenerateRequest
    ) -> web.StreamResponse:
        """The 200 stream of a request SGLang refused after starting the response: an error
        event, or for an input the scheduler refused, the aborted request's one update."""
        if isinstance(exc, InputTooLong):
            reason: FinishReason = {
                "type": "abort",
                "message": str(exc),
                "status_code": 400,
                "err_type": "BadRequestError",
            }
            meta = self._base_meta(uuid.uuid4().hex, reason, 1, 0, 0, 0)
            payload = dumps({"text": "", "output_ids": [], "meta_info": meta})
        else:
            error = {"message": str(exc), "type": "invalid_request_error", "code": exc.status}
            payload = dumps({"error": {**error, "retryable": False}})
        resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
        await resp.prepare(request)
        await resp.write(sse([payload, "[DONE]"]))
        await resp.write_eof()
        return resp

    @staticmethod
    def _base_meta(
        rid: str,
        reason: FinishReason | None,
        prompt: int,
        completion: int,
        cached: int,
        retractions: int,
    ) -> MetaInfo:
        return {
            "id": rid,
            "finish_reason": reason,
            "prompt_tokens": prompt,
            "weight_version": "default",
            "num_retractions": retractions,
            "reasoning_tokens": 0,
            "completion_tokens": completion,
            "cached_tokens": cached,
        }

    def _meta_info(
        self, req: SimRequest, final: bool, completion: int | None = None
    ) -> MetaInfo:
        """meta_info after `completion` output tokens (all of them by default)."""
        meta = self._base_meta(
            req.rid,
            _native_finish(req) if final and req.finished else None,
            req.prompt_tokens,
            req.completion_tokens if completion is None else completion,
            req.cached_tokens,
            req.retractions,
        )
        if final:
            meta["weight_versions"] = weight_versions(req)
        cached = req.cached_tokens
        meta["cached_tokens_details"] = {"device": cached, "host": 0} if cached else None
        meta["dp_rank"] = None
        if final:
            end = req.finish_real_s if req.finish_real_s is not None else time.monotonic()
            meta["e2e_latency"] = (end - req.arrival_real_s) * self.settings.sim_time_scale
            meta.update(spec_meta(req, self.settings))
        return meta


def _native_finish(req: SimRequest) -> FinishReason | None:
    reason = req.finish_reason
    if reason is not None and reason["type"] == "stop":
        reason = {"type": "stop", "matched": EOS_TOKEN_ID}
    return reason
