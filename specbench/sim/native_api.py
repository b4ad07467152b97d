"""SGLang's native `/generate`, streaming and not, with its exact JSON and meta_info.

Unlike the OpenAI API, `/generate` rejects unknown `sampling_params` keys (400 with SGLang's
message) and streams cumulative events: every event carries the whole text and all output ids
so far, with meta_info (e2e latency and spec_* statistics in the last one).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from specbench.sim.faults import INJECTED_ERROR, faulty_json
from specbench.sim.generation import (
    EOS_TOKEN_ID,
    BadRequest,
    dumps,
    guarded,
    json_body,
    opt_int,
    spec_details,
)
from specbench.sim.request import SimRequest
from specbench.sim.streaming import stream_sse
from specbench.sim.workload import filler_ids, filler_json, filler_text

if TYPE_CHECKING:
    from specbench.sim.app import SimServer

# /generate sampling_params keys of SGLang 0.5.23 (sglang-0.5.23.md §4); others are a 400.
SAMPLING_KEYS = (
    "max_new_tokens",
    "min_new_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "ignore_eos",
    "stop",
    "stop_token_ids",
    "n",
    "skip_special_tokens",
    "no_stop_trim",
    "sampling_seed",
    "stream_interval",
    "json_schema",
    "regex",
    "ebnf",
    "logit_bias",
    "custom_params",
)
# meta_info of /generate lacks these spec_tokens_details keys of the OpenAI sglext.
_NOT_IN_META = ("spec_cap_length", "spec_block_accept_length", "spec_cap_lens_histogram")


def _prompt(body: dict[str, Any]) -> tuple[str, int | None]:
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
        body = await json_body(request)
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise BadRequest("sampling_params must be an object")
        unknown = [k for k in params if k not in SAMPLING_KEYS]
        if unknown:
            expected = ", ".join(f"`{k}`" for k in SAMPLING_KEYS)
            return web.json_response(
                {"error": f"unknown field `{unknown[0]}`, expected one of {expected}"}, status=400
            )
        fault = self.sim.faults.on_generation_request()
        if fault.error:
            error = {"message": INJECTED_ERROR, "type": "InternalServerError", "code": 500}
            return web.json_response({"error": error}, status=500)
        text, prompt_tokens = _prompt(body)
        if int(params.get("n") or 1) != 1:
            raise BadRequest("specbench.sim supports n = 1 only")
        stream = bool(body.get("stream"))
        req = self.sim.new_request(
            text,
            agentic=False,
            max_new_tokens=opt_int(params.get("max_new_tokens", 128), "max_new_tokens"),
            ignore_eos=bool(params.get("ignore_eos")),
            min_new_tokens=opt_int(params.get("min_new_tokens"), "min_new_tokens") or 0,
            stream=stream,
            prompt_tokens=prompt_tokens,
        )
        if not stream:
            await self.sim.wait_finished(req, request)
            out = {
                "text": filler_text(req.seed, 0, req.completion_tokens),
                "output_ids": filler_ids(req.seed, 0, req.completion_tokens),
                "meta_info": self._meta_info(req, final=True),
            }
            return faulty_json(out, fault)

        text_esc = ""  # the text so far, JSON-escaped
        ids_txt = ""  # the output ids so far, comma-separated

        def on_update(sent: int, now: int, done: bool) -> list[str]:
            nonlocal text_esc, ids_txt
            if now > sent:
                text_esc += filler_json(req.seed, sent, now)[1:-1]
                new_ids = ",".join(str(i) for i in filler_ids(req.seed, sent, now))
                ids_txt = f"{ids_txt},{new_ids}" if ids_txt else new_ids
            meta = dumps(self._meta_info(req, final=done))
            return [f'{{"text":"{text_esc}","output_ids":[{ids_txt}],"meta_info":{meta}}}']

        return await stream_sse(request, req, self.sim.scheduler, fault, on_update, lambda: [])

    def _meta_info(self, req: SimRequest, final: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": _native_finish(req) if req.finished else None,
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.completion_tokens,
            "cached_tokens": req.cached_tokens,
            "reasoning_tokens": 0,
            "weight_version": "default",
            "num_retractions": 0,
        }
        if final:
            end = req.finish_real_s if req.finish_real_s is not None else time.monotonic()
            meta["e2e_latency"] = (end - req.arrival_real_s) * self.settings.sim_time_scale
            if self.settings.speculative:
                details = spec_details(req, self.settings)
                for key in _NOT_IN_META:
                    details.pop(key)
                meta.update(details)
        return meta


def _native_finish(req: SimRequest) -> dict[str, Any] | None:
    reason = req.finish_reason
    if reason is not None and reason["type"] == "stop":
        reason = {"type": "stop", "matched": EOS_TOKEN_ID}
    return reason
