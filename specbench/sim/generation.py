"""What the generation APIs share: request-body errors, the guarded handler, SGLang's shapes.

The OpenAI API (openai_api.py) and the native `/generate` API (native_api.py) differ in their
JSON, not in how a bad body is answered or in how SGLang reports speculative statistics; both
live here once. Errors in a request raise :class:`BadRequest`, which :func:`guarded` turns into
SGLang's JSON error body.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from specbench.sim.args import ServerSettings
from specbench.sim.bodies import SpecMeta, SpecTokensDetails, UsageInfo, WeightVersionSpan
from specbench.sim.request import SimRequest
from specbench.sim.streaming import CLIENT_GONE
from specbench.sim.workload import filler_ids, filler_json, filler_text

EOS_TOKEN_ID = 128009  # Llama-3 <|eot_id|>, reported as matched_stop
dumps = functools.partial(json.dumps, separators=(",", ":"))


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def error_json(message: str, status: int, err_type: str = "BadRequestError") -> web.Response:
    """SGLang's OpenAI-style error body."""
    body = {"object": "error", "message": message, "type": err_type, "param": None, "code": status}
    return web.json_response(body, status=status)


async def guarded(handler: Callable[[], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """Run a generation handler: request errors become JSON 400s, a vanished client a no-op."""
    try:
        return await handler()
    except BadRequest as exc:
        return error_json(str(exc), exc.status)
    except CLIENT_GONE:
        return web.Response(status=500, text="client went away")


async def json_body(request: web.Request) -> dict[str, object]:
    """The request's JSON object, its values as the client sent them (each route reads it as
    its request type and checks the values it uses)."""
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadRequest("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def spec_meta(req: SimRequest, settings: ServerSettings) -> SpecMeta:
    """The spec_* keys SGLang adds to a finished request's meta_info: none without a verify
    round, the rates only when drafts were proposed, the histogram only when non-empty."""
    if not settings.speculative or req.verify_ct <= 0:
        return {}
    meta: SpecMeta = {}
    proposed = req.verify_ct * ((settings.speculative_num_draft_tokens or 1) - 1)
    if proposed > 0:
        meta["spec_accept_rate"] = req.correct_drafts / proposed
        meta["spec_accept_length"] = req.completion_tokens / req.verify_ct
        meta["spec_num_correct_drafts"] = req.correct_drafts
        meta["spec_num_proposed_drafts"] = proposed
        meta["spec_verify_ct"] = req.verify_ct
    if any(req.drafts_hist):
        meta["spec_correct_drafts_histogram"] = list(req.drafts_hist)
    return meta


def spec_details(req: SimRequest, settings: ServerSettings) -> SpecTokensDetails | None:
    """`sglext.spec_tokens_details` of the OpenAI routes: every field, filled from meta_info
    (zeros for what it lacks); None, so no sglext at all, when meta_info has no spec key."""
    meta = spec_meta(req, settings)
    if not meta:
        return None
    return {
        "spec_accept_rate": meta.get("spec_accept_rate") or 0.0,
        "spec_accept_length": meta.get("spec_accept_length") or 0.0,
        "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": meta.get("spec_num_correct_drafts") or 0,
        "spec_num_proposed_drafts": meta.get("spec_num_proposed_drafts") or 0,
        "spec_verify_ct": meta.get("spec_verify_ct") or 0,
        "spec_correct_drafts_histogram": meta.get("spec_correct_drafts_histogram") or [],
        "spec_cap_lens_histogram": [],
    }


def weight_versions(req: SimRequest) -> list[WeightVersionSpan]:
    """meta_info.weight_versions of a finished request: one span, the default weights."""
    return [{"version": "default", "start": 0, "end": req.completion_tokens}]


# ---------------------------------------------------------------------------- output text
def text_of(req: SimRequest, start: int, stop: int) -> str:
    """Text of output tokens [start, stop): a final EOS token adds none."""
    return filler_text(req.seed, start, max(start, min(stop, req.text_end)))


def text_json(req: SimRequest, start: int, stop: int) -> str:
    """:func:`text_of` as a JSON string literal (quotes included)."""
    return filler_json(req.seed, start, max(start, min(stop, req.text_end)))


def output_ids(req: SimRequest, start: int, stop: int) -> list[int]:
    """Token ids of output tokens [start, stop); a request that stopped on EOS ends with
    the EOS id (SGLang's output_ids include the stop token)."""
    ids = filler_ids(req.seed, start, stop)
    if stop > req.text_end and ids and req.finish_kind == "stop":
        ids[-1] = EOS_TOKEN_ID
    return ids


def usage_info(prompt_tokens: int, completion_tokens: int, cached: int | None) -> UsageInfo:
    """SGLang's UsageInfo as its model dump has it (prompt_tokens_details only with a cache
    count, completion_tokens_details null without reasoning tokens)."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None if cached is None else {"cached_tokens": cached},
        "reasoning_tokens": 0,
        "completion_tokens_details": None,
    }
