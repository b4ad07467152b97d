"""What goes into a request body: the conversation rendered for the text-in routes, a row's
sampling overrides (checked as SGLang checks them), `--extra-request-body` and `--ignore-eos`,
and one body builder per protocol (used by :mod:`specbench.load.protocols`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specbench.errors import ConfigError, UserError
from specbench.prompts import PromptRequest

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
