"""What goes into a request body: the conversation rendered for the text-in routes, a row's
sampling overrides (checked as SGLang checks them), `--extra-request-body` and `--ignore-eos`,
and one body builder per protocol (used by :mod:`specbench.load.protocols`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specbench.errors import UserError
from specbench.prompts import PromptRequest
from specbench.rules.bodies import SAMPLING_KEYS, range_problem

if TYPE_CHECKING:
    from specbench.config import LoadConfig


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



class SamplingOverrideError(UserError, ValueError):
    """A prompt row's `sampling` has a key specbench cannot send on every route."""




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
    problem = range_problem(sampling)
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
# What it may not set is checked by :func:`specbench.rules.bodies.check_extra_body`.


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
