"""OpenAI request fields as SGLang 0.5.23 turns them into its sampling parameters.

`ChatCompletionRequest.to_sampling_params` and `OpenAIServingCompletion.
_build_sampling_params` (`srt/entrypoints/openai/`) map the request onto SGLang's names
(`max_new_tokens`, `min_new_tokens`, `sampling_seed`, ...). Before that, pydantic has checked
the JSON types: a number field takes an integer or a float, an integer field a whole number.
The simulator does the same mapping so that :func:`validation.check_sampling` sees what
SGLang's `SamplingParams.verify` sees. Chat leaves unset knobs to the model's
generation_config, which the simulated model does not have: SGLang's defaults apply.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from specbench.sim.bodies import ChatRequest, CompletionRequest, SamplingParams
from specbench.sim.generation import BadRequest

# The SGLang names the table below fills (a Literal, so that each one is checked against
# SamplingParams).
_CommonName = Literal[
    "min_new_tokens", "stop", "stop_token_ids", "stop_regex", "top_p", "top_k", "min_p",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "regex", "ebnf", "n",
    "no_stop_trim", "ignore_eos", "skip_special_tokens", "logit_bias", "custom_params",
    "sampling_seed",
]  # fmt: skip
# (OpenAI field, SGLang name) of the fields both routes map the same way.
_COMMON: tuple[tuple[str, _CommonName], ...] = (
    ("min_tokens", "min_new_tokens"),
    ("stop", "stop"),
    ("stop_token_ids", "stop_token_ids"),
    ("stop_regex", "stop_regex"),
    ("top_p", "top_p"),
    ("top_k", "top_k"),
    ("min_p", "min_p"),
    ("presence_penalty", "presence_penalty"),
    ("frequency_penalty", "frequency_penalty"),
    ("repetition_penalty", "repetition_penalty"),
    ("regex", "regex"),
    ("ebnf", "ebnf"),
    ("n", "n"),
    ("no_stop_trim", "no_stop_trim"),
    ("ignore_eos", "ignore_eos"),
    ("skip_special_tokens", "skip_special_tokens"),
    ("logit_bias", "logit_bias"),
    ("custom_params", "custom_params"),
    ("seed", "sampling_seed"),
)
_FLOATS = frozenset(
    {"temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty",
     "repetition_penalty"}
)  # fmt: skip
_INTS = frozenset(
    {"max_tokens", "max_completion_tokens", "min_tokens", "top_k", "n", "seed"}
)  # fmt: skip
_BOOLS = frozenset({"no_stop_trim", "ignore_eos", "skip_special_tokens", "stream"})


@functools.cache
def _adapter(kind: type) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _typed(
    body: Mapping[str, object],
    name: str,
    default: Any = None,
    required: frozenset[str] = frozenset(),
) -> Any:
    """A request field as pydantic's lax mode reads it into SGLang's request model (a float
    field takes an integer, a bool or a numeric string; an integer field a whole number; a
    field in `required` no null); anything else is a 400."""
    value = body.get(name, default)
    if value is None:
        if name in body and name in required:
            raise BadRequest(f"{name}: Input should be a valid value, got None")
        return default
    kind = float if name in _FLOATS else int if name in _INTS else bool if name in _BOOLS else None
    if kind is None:
        return value
    try:
        return _adapter(kind).validate_python(value)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise BadRequest(f"{name}: {problem}, got {value!r}") from None


# Fields of SGLang's request models that have a default but take no null.
_CHAT_REQUIRED = frozenset(
    {"frequency_penalty", "presence_penalty", "n", "min_tokens", "no_stop_trim", "ignore_eos",
     "skip_special_tokens", "stream"}
)  # fmt: skip
_COMPLETION_REQUIRED = _CHAT_REQUIRED | {
    "max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
}  # fmt: skip


def _mapped(
    body: Mapping[str, object], defaults: Mapping[str, float], required: frozenset[str]
) -> SamplingParams:
    out: SamplingParams = {}
    for field, name in _COMMON:
        out[name] = _typed(body, field, defaults.get(field), required)
    _typed(body, "stream", False, required)
    return out


def chat_sampling(body: ChatRequest) -> SamplingParams:
    """SGLang's sampling parameters of a chat request (None where chat leaves them to the
    model's generation_config, which here means SGLang's defaults)."""
    out = _mapped(body, {"min_tokens": 0, "n": 1, "presence_penalty": 0.0,
                         "frequency_penalty": 0.0}, _CHAT_REQUIRED)  # fmt: skip
    out["temperature"] = _typed(body, "temperature")
    # `max_completion_tokens or max_tokens`: a 0 falls through, as in SGLang.
    out["max_new_tokens"] = _typed(body, "max_completion_tokens") or _typed(body, "max_tokens")
    return out


def completion_sampling(body: CompletionRequest) -> SamplingParams:
    """SGLang's sampling parameters of a completions request (its defaults filled in)."""
    out = _mapped(body, {
        "min_tokens": 0, "n": 1, "presence_penalty": 0.0, "frequency_penalty": 0.0,
        "top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0,
    }, _COMPLETION_REQUIRED)  # fmt: skip
    out["temperature"] = _typed(body, "temperature", 1.0, _COMPLETION_REQUIRED)
    max_tokens = _typed(body, "max_tokens", 16, _COMPLETION_REQUIRED)
    if max_tokens <= 0:
        raise BadRequest("max_tokens: Value error, max_tokens must be positive")
    out["max_new_tokens"] = max_tokens
    return out
