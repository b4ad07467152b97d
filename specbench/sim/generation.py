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
from typing import Any

from aiohttp import web

from specbench.sim.args import ServerSettings
from specbench.sim.request import SimRequest
from specbench.sim.streaming import CLIENT_GONE

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


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadRequest("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def opt_int(value: Any, name: str) -> int | None:
    """An optional integer field (a float with an integral value passes, a bool does not)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise BadRequest(f"{name} must be an integer, got {value!r}")
    return int(value)


def spec_details(req: SimRequest, settings: ServerSettings) -> dict[str, Any]:
    """SGLang's spec_* statistics of one request (sglext in OpenAI, meta_info in /generate)."""
    proposed = req.verify_ct * max((settings.speculative_num_draft_tokens or 1) - 1, 0)
    return {
        "spec_accept_rate": req.correct_drafts / proposed if proposed else 0.0,
        "spec_accept_length": req.completion_tokens / req.verify_ct if req.verify_ct else 0.0,
        "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": req.correct_drafts,
        "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": req.verify_ct,
        "spec_correct_drafts_histogram": list(req.drafts_hist),
        "spec_cap_lens_histogram": [],
    }
