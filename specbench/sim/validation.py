"""What SGLang 0.5.23 refuses before it generates, with its messages, re-derived from its code.

* :func:`check_sampling`: `SamplingParams.__post_init__`, `normalize()` and `verify()`
  (`srt/sampling/sampling_params.py`): ranges of temperature, top_p, top_k, min_p, the
  penalties, max/min new tokens, logit_bias keys, the seed, one grammar at most;
* :func:`generate_params_error`: the `/generate` JSON contract on `sampling_params`
  (`api/v1/api_types.py`): unknown keys and wrong JSON types, in serde's words;
* :func:`tools_error`: chat's tool checks (`serving_chat.py` `_validate_request`): the
  `tool_choice` rules and each tool's `parameters` checked as a JSON Schema (draft 2020-12,
  after rewriting database-style type names), when `jsonschema` is installed;
* :func:`fit_context`: the context-length rules of the TokenizerManager and the scheduler
  (prompt + max_new_tokens against the context length, the input against
  `max_req_input_len`), or what `--allow-auto-truncate` cuts instead.

Each raises :class:`~specbench.sim.generation.BadRequest` (or returns the message), which the
endpoints turn into SGLang's error bodies.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any, Required, TypedDict, cast

from specbench.sim.args import ServerSettings
from specbench.sim.bodies import SamplingParams
from specbench.sim.generation import BadRequest

TOP_K_ALL = 1 << 30
_EPS = 1e-6
MAX_STOPS = 32
MAX_STOP_REGEX_BYTES = 256
GRAMMARS = ("json_schema", "regex", "ebnf", "structural_tag")
# The defaults SGLang substitutes for a null (or missing) value before checking.
_DEFAULTS: dict[str, float] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": -1,
    "min_p": 0.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
    "min_new_tokens": 0,
}


class _Resolved(TypedDict, total=False):
    """Sampling parameters as the checks read them: the defaulted numbers always present
    and never null (max_new_tokens null means no limit)."""

    temperature: Required[float]
    top_p: Required[float]
    top_k: Required[int]
    min_p: Required[float]
    frequency_penalty: Required[float]
    presence_penalty: Required[float]
    repetition_penalty: Required[float]
    min_new_tokens: Required[int]
    max_new_tokens: Required[int | None]
    stop: str | list[str]
    stop_regex: str | list[str]
    beam_width: int
    logit_bias: dict[str, float]
    sampling_seed: object  # checked for its type below
    json_schema: str
    regex: str
    ebnf: str
    structural_tag: str


class InputTooLong(BadRequest):
    """The scheduler's refusal of an input longer than `max_req_input_len`: SGLang aborts
    the request after accepting it, so a stream gets an error event, not an HTTP 400."""


# ---------------------------------------------------------------------------- sampling
def check_sampling(params: SamplingParams, vocab_size: int) -> None:
    """Raise what SGLang's SamplingParams raises for these values (SGLang's names).

    `choice` passes `/generate`'s contract but is no sampling parameter: SGLang fails on it
    with a TypeError, which reaches the client as a 500."""
    if "choice" in params:
        raise BadRequest("Unexpected keyword argument 'choice'", status=500)
    # An absent max_new_tokens is SGLang's 128; a null one means no limit.
    merged: dict[str, object] = {**_DEFAULTS, "max_new_tokens": 128}
    merged.update((k, v) for k, v in params.items() if v is not None or k == "max_new_tokens")
    # The defaults replace every null, and the route has already checked the numbers' JSON
    # types (sampling.py for the OpenAI routes, generate_params_error for /generate).
    p = cast(_Resolved, merged)
    if 0 <= p["temperature"] < _EPS:  # greedy: SGLang turns it into top_k = 1
        p["temperature"], p["top_k"] = 1.0, 1
    if p["top_k"] == -1:
        p["top_k"] = TOP_K_ALL
    _check_stops(p.get("stop"), p.get("stop_regex"))
    for check in _CHECKS:
        message = check(p, vocab_size)
        if message:
            raise BadRequest(message)


def _check_stops(stop: Any, stop_regex: Any) -> None:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > MAX_STOPS:
        raise BadRequest(f"at most {MAX_STOPS} stop strings are allowed, got {len(stops)}")
    patterns = [stop_regex] if isinstance(stop_regex, str) else list(stop_regex or [])
    if len(patterns) > MAX_STOPS:
        raise BadRequest(
            f"at most {MAX_STOPS} stop_regex patterns are allowed, got {len(patterns)}"
        )
    for pattern in patterns:
        size = len(str(pattern).encode("utf-8"))
        if size > MAX_STOP_REGEX_BYTES:
            raise BadRequest(
                f"stop_regex is {size} bytes, over the {MAX_STOP_REGEX_BYTES}-byte limit"
            )


def _beam(p: _Resolved, _: int) -> str | None:
    width = p.get("beam_width")
    if width is not None and width < 1:
        return f"beam_width must be at least 1, got {width}."
    return None


def _temperature(p: _Resolved, _: int) -> str | None:
    t = p["temperature"]
    if not math.isfinite(t) or t < 0.0:
        return f"temperature must be a non-negative finite number, got {t}."
    return None


def _ranges(p: _Resolved, _: int) -> str | None:
    if not 0.0 < p["top_p"] <= 1.0:
        return f"top_p must be in (0, 1], got {p['top_p']}."
    if not 0.0 <= p["min_p"] <= 1.0:
        return f"min_p must be in [0, 1], got {p['min_p']}."
    if p["top_k"] < 1 or p["top_k"] == -1:
        return f"top_k must be -1 (disable) or at least 1, got {p['top_k']}."
    for name in ("frequency_penalty", "presence_penalty"):
        if not -2.0 <= p[name] <= 2.0:
            return f"{name} must be in [-2, 2], got {p[name]}."
    if not 0.0 < p["repetition_penalty"] <= 2.0:
        return (
            "repetition_penalty must be in (0, 2] (1.0 = no penalty), "
            f"got {p['repetition_penalty']}."
        )
    return None


def _lengths(p: _Resolved, _: int) -> str | None:
    low, high = p["min_new_tokens"], p.get("max_new_tokens")
    if low < 0:
        return f"min_new_tokens must be in [0, max_new_tokens], got {low}."
    if high is not None:
        if high < 0:
            return f"max_new_tokens must be at least 0, got {high}."
        if not low <= high:
            return f"min_new_tokens must be in [0, max_new_tokens({high})], got {low}."
    return None


def _bias_and_seed(p: _Resolved, vocab_size: int) -> str | None:
    for token_id in p.get("logit_bias") or {}:
        try:
            value = int(token_id)
        except (TypeError, ValueError) as exc:
            return str(exc)
        if not 0 <= value < vocab_size:
            return f"logit_bias must has keys in [0, {vocab_size - 1}], got {token_id}."
    seed = p.get("sampling_seed")
    if seed is not None:
        if not isinstance(seed, int):
            return f"sampling_seed must be an integer, got {type(seed).__name__}."
        if not -(2**63) <= seed <= 2**63 - 1:
            return f"sampling_seed must be in [-2**63, 2**63 - 1], got {seed}."
    return None


def _grammars(p: _Resolved, _: int) -> str | None:
    if sum(1 for g in GRAMMARS if p.get(g)) > 1:
        return "Only one of json_schema, regex, ebnf, or structural_tag can be set."
    return None


_CHECKS: tuple[Callable[[_Resolved, int], str | None], ...] = (
    _beam,
    _temperature,
    _ranges,
    _lengths,
    _bias_and_seed,
    _grammars,
)


# ---------------------------------------------------------------------------- /generate
def _unexpected(v: Any) -> str:
    """serde's name for a JSON value of the wrong type."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"boolean `{'true' if v else 'false'}`"
    if isinstance(v, int):
        return f"integer `{v}`"
    if isinstance(v, float):
        return f"floating point `{v}`"
    if isinstance(v, str):
        return f'string "{v}"'
    return "sequence" if isinstance(v, list) else "map" if isinstance(v, dict) else "value"


class _Wrong(Exception):
    pass


def _expect(v: Any, ok: bool, expected: str) -> None:
    if not ok:
        raise _Wrong(f"invalid type: {_unexpected(v)}, expected {expected}")


def _int(v: Any) -> None:
    _expect(v, isinstance(v, int) and not isinstance(v, bool), "i64")


def _float(v: Any) -> None:
    _expect(v, isinstance(v, (int, float)) and not isinstance(v, bool), "f64")


def _bool(v: Any) -> None:
    _expect(v, isinstance(v, bool), "a boolean")


def _str(v: Any) -> None:
    _expect(v, isinstance(v, str), "a string")


def _str_or_list(v: Any) -> None:
    if isinstance(v, list):
        for item in v:
            _str(item)
    else:
        _expect(v, isinstance(v, str), "a value or an array of values for StringOrList")


def _int_list(v: Any) -> None:
    _expect(v, isinstance(v, list), "a sequence")
    for item in v:
        _int(item)


def _float_map(v: Any) -> None:
    _expect(v, isinstance(v, dict), "a map")
    for item in v.values():
        _float(item)


def _str_seq(v: Any) -> None:
    _expect(v, isinstance(v, list), "a sequence")
    for item in v:
        _str(item)


def _watermark(v: Any) -> None:
    _expect(v, isinstance(v, dict), "struct WatermarkRequestConfig")
    fields = {"enabled": _bool, "key": _str, "context_window": _int}
    for key, item in v.items():
        if key not in fields:
            raise _Wrong(_unknown(key, tuple(fields)))
        if item is not None:
            fields[key](item)


def _anything(v: Any) -> None:
    return None


# SGLang's /generate sampling_params fields in its order, each with its JSON type check.
SAMPLING_FIELDS: dict[str, Callable[[Any], None]] = {
    "max_new_tokens": _int,
    "stop": _str_or_list,
    "stop_token_ids": _int_list,
    "stop_regex": _str_or_list,
    "temperature": _float,
    "top_p": _float,
    "top_k": _int,
    "min_p": _float,
    "frequency_penalty": _float,
    "presence_penalty": _float,
    "repetition_penalty": _float,
    "min_new_tokens": _int,
    "n": _int,
    "json_schema": _str,
    "regex": _str,
    "ebnf": _str,
    "structural_tag": _str,
    "ignore_eos": _bool,
    "skip_special_tokens": _bool,
    "spaces_between_special_tokens": _bool,
    "no_stop_trim": _bool,
    "stream_interval": _int,
    "logit_bias": _float_map,
    "sampling_seed": _int,
    "custom_params": _anything,
    "beam_width": _int,
    "watermark": _watermark,
    "choice": _str_seq,
}


def _unknown(key: str, fields: tuple[str, ...]) -> str:
    listed = ", ".join(f"`{f}`" for f in fields)
    return f"unknown field `{key}`, expected one of {listed}"


def generate_params_error(params: Any) -> str | None:
    """The contract violation in a `/generate` body's `sampling_params` (an object or a list
    of objects), in SGLang's words, or None."""
    for one in params if isinstance(params, list) else [params]:
        if not isinstance(one, dict):
            return f"invalid type: {_unexpected(one)}, expected struct SamplingParams"
        for key, value in one.items():
            check = SAMPLING_FIELDS.get(key)
            if check is None:
                return _unknown(key, tuple(SAMPLING_FIELDS))
            if value is not None:
                try:
                    check(value)
                except _Wrong as exc:
                    return str(exc)
    return None


def flag_error(value: Any) -> str | None:
    """The contract's complaint about a top-level flag (`stream`) that is not a boolean."""
    if value is None or isinstance(value, bool):
        return None
    return f"invalid type: {_unexpected(value)}, expected a boolean"


# ---------------------------------------------------------------------------- tools
_STANDARD_TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
_TYPE_ALIASES = {
    **dict.fromkeys(
        ("str", "text", "varchar", "char", "enum", "uuid", "date", "datetime", "time"),
        "string",
    ),
    **dict.fromkeys(("timestamp", "binary", "blob", "bytea", "bytes", "varbinary"), "string"),
    "bool": "boolean",
    **dict.fromkeys(("bigint", "smallint", "tinyint"), "integer"),
    **dict.fromkeys(("double", "decimal", "real", "numeric"), "number"),
    **dict.fromkeys(("arr", "tuple", "set"), "array"),
    "map": "object",
}
# Type names matched by prefix when followed by nothing or a parameter (int32, list[str]).
_TYPE_PREFIXES = (
    (("int", "uint", "long", "short", "unsigned"), "integer"),
    (("num", "float"), "number"),
    (("list",), "array"),
    (("dict",), "object"),
)
_PREFIX_ENDS = frozenset("0123456789[<( \t")
_TOO_DEEP = "is too deeply nested or contains a cycle."
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONES = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)


def _standard_type(raw: Any) -> Any:
    """A database/ORM type name ("varchar(255)", "int64", ...) as its JSON Schema type; a
    name it does not know is kept, so that the schema check reports it."""
    if not isinstance(raw, str) or raw in _STANDARD_TYPES:
        return raw
    base = raw.split("(", 1)[0].strip().lower()
    if base in _STANDARD_TYPES:
        return base
    if base in _TYPE_ALIASES:
        return _TYPE_ALIASES[base]
    for prefixes, target in _TYPE_PREFIXES:
        for p in prefixes:
            rest = base[len(p) :] if base.startswith(p) else None
            if rest is not None and (not rest or rest[0] in _PREFIX_ENDS):
                return target
    return raw


def normalize_types(schema: Any) -> None:
    """Rewrite non-standard `type` values of a schema tree in place, as SGLang does first."""
    if isinstance(schema, list):
        for item in schema:
            normalize_types(item)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = _standard_type(kind)
    elif isinstance(kind, list):
        merged: list[Any] = []
        for item in map(_standard_type, kind):
            if item not in merged:
                merged.append(item)
        schema["type"] = merged
    for key in _SCHEMA_MAPS:
        if isinstance(schema.get(key), dict):
            for sub in schema[key].values():
                normalize_types(sub)
    for key in _SCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            for sub in schema[key]:
                normalize_types(sub)
    for key in _SCHEMA_ONES:
        if key in schema:
            normalize_types(schema[key])


@functools.lru_cache(maxsize=4096)
def _schema_error(schema_json: str) -> str | None:
    """jsonschema's complaint about a `parameters` schema (given as JSON), or None; None as
    well when jsonschema is not installed (then schemas are not checked)."""
    try:
        from jsonschema import Draft202012Validator, SchemaError
    except ImportError:
        return None
    schema = json.loads(schema_json)
    try:
        normalize_types(schema)
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"has invalid 'parameters' schema: {exc}"
    except RecursionError:
        return f"'parameters' schema {_TOO_DEEP}"
    return None


def _tool_name(tool: Any) -> str | None:
    function = tool.get("function") if isinstance(tool, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def tools_error(tools: Any, tool_choice: Any) -> str | None:
    """Chat's refusal of these tools and this tool_choice (SGLang's order), or None."""
    if tools is not None and not isinstance(tools, list):
        return "tools must be a list of {'type': 'function', 'function': {...}} objects"
    tools = tools or []
    for i, tool in enumerate(tools):
        if _tool_name(tool) is None:
            return f"tools[{i}].function.name: a tool needs a function with a string name"
    if isinstance(tool_choice, str) and tool_choice not in ("auto", "required", "none"):
        return f"tool_choice: expected 'auto', 'required', 'none' or a tool, got {tool_choice!r}"
    named = tool_choice is not None and not isinstance(tool_choice, str)
    if named and _tool_name(tool_choice) is None:
        return "tool_choice: a named tool choice needs function.name"
    if isinstance(tool_choice, str) and tool_choice.lower() == "required" and not tools:
        return "Tools cannot be empty if tool choice is set to required."
    if tool_choice is not None and not isinstance(tool_choice, str):
        if not tools:
            return "Tools cannot be empty if tool choice is set to a specific tool."
        wanted = _tool_name(tool_choice)
        if not any(_tool_name(t) == wanted for t in tools):
            return f"Tool '{wanted}' not found in tools list."
    for i, tool in enumerate(tools):
        parameters = tool["function"].get("parameters")
        if parameters is None:
            continue
        try:
            key = json.dumps(parameters)
        except (TypeError, ValueError, RecursionError):
            return f"Tool {i} function 'parameters' schema {_TOO_DEEP}"
        problem = _schema_error(key)
        if problem:
            return f"Tool {i} function {problem}"
    return None


# ---------------------------------------------------------------------------- context
def fit_context(
    prompt_tokens: int, max_new_tokens: int | None, settings: ServerSettings
) -> tuple[int, int | None]:
    """The TokenizerManager's length rules: (prompt tokens, max new tokens) to use, or a 400.

    The input counts the output slots the EAGLE family reserves; --allow-auto-truncate cuts
    the prompt (and then the output budget) instead of refusing.
    """
    ctx, auto = settings.context_length, settings.allow_auto_truncate
    counted = prompt_tokens + settings.reserved_tokens
    if counted >= ctx:
        if not auto:
            raise BadRequest(
                f"The input ({counted} tokens) is longer than the model's context length "
                f"({ctx} tokens)."
            )
        prompt_tokens = counted = min(prompt_tokens, ctx)
    if max_new_tokens is not None and max_new_tokens + counted > ctx:
        if not auto:
            raise BadRequest(
                "Requested token count exceeds the model's maximum context length of "
                f"{ctx} tokens. You requested a total of {max_new_tokens + counted} tokens: "
                f"{counted} tokens from the input messages and {max_new_tokens} tokens for "
                "the completion. Please reduce the number of tokens in the input messages or "
                "the completion to fit within the limit."
            )
        max_new_tokens = max(0, ctx - counted)
    return prompt_tokens, max_new_tokens


def fit_scheduler(
    prompt_tokens: int,
    max_new_tokens: int | None,
    settings: ServerSettings,
    max_req_len: int,
) -> tuple[int, int]:
    """The scheduler's rules once it has the request: the input must be shorter than
    `max_req_input_len` (else an abort, or a cut with --allow-auto-truncate), and the output
    budget is what is left of `max_req_len`."""
    limit = max_req_len - 5  # max_req_input_len
    if prompt_tokens >= limit:
        if not settings.allow_auto_truncate:
            raise InputTooLong(
                f"Input length ({prompt_tokens} tokens) exceeds the maximum allowed length "
                f"({limit} tokens). Use a shorter input or enable --allow-auto-truncate."
            )
        prompt_tokens = limit
    wanted = (1 << 30) if max_new_tokens is None else max_new_tokens
    return prompt_tokens, max(0, min(wanted, max_req_len - prompt_tokens - 1))
