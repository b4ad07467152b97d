"""What SGLang accepts in a request's sampling and what specbench sets itself: the rules the
configuration checks an extra request body against before any load, and that the load
generator applies to every body it builds. A leaf: it imports nothing of specbench but errors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from specbench.errors import ConfigError

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

# The ranges SGLang 0.5.23's sampler refuses (srt/sampling/sampling_params.py, verify()):
# (key, is the value allowed, the rule as SGLang states it). Checked before any load, so a bad
# row is one line up front instead of a 400 on every request that uses it.
RANGES: tuple[tuple[str, Any, str], ...] = (
    ("temperature", lambda v: math.isfinite(v) and v >= 0, "a non-negative finite number"),
    ("top_p", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("min_p", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("top_k", lambda v: v == -1 or v >= 1, "-1 (disable) or at least 1"),
    ("frequency_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]"),
    ("presence_penalty", lambda v: -2 <= v <= 2, "in [-2, 2]"),
    ("repetition_penalty", lambda v: 0 < v <= 2, "in (0, 2] (1.0 = no penalty)"),
    ("min_tokens", lambda v: v >= 0, "at least 0"),
)


def range_problem(sampling: Mapping[str, Any]) -> tuple[str, Any, str] | None:
    """The first (key, value, rule) of `sampling` outside what SGLang's sampler accepts."""
    for key, allowed, rule in RANGES:
        value = sampling.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not allowed(value):
            return key, value, rule
    return None


NO_FIX = "drop it from --extra-request-body"
PROMPT_FIX = "put it in the prompt file's rows (--prompts FILE.jsonl)"
# Key -> (why specbench owns it, the fix). Checked on the top level of the extra body.
OWNED_KEYS: dict[str, tuple[str, str]] = {
    "stream": ("every request streams, which the token timing is read from", NO_FIX),
    "stream_options": ("every stream carries a token count in each chunk", NO_FIX),
    "return_spec_tokens_details": ("specbench asks for it to measure acceptance", NO_FIX),
    "model": ("requests name the model the server serves (/server_info)", NO_FIX),
    "messages": ("the conversation comes from the prompt set", PROMPT_FIX),
    "prompt": ("the prompt comes from the prompt set", PROMPT_FIX),
    "text": ("the prompt comes from the prompt set", PROMPT_FIX),
    "input_ids": ("the prompt comes from the prompt set", PROMPT_FIX),
    "tools": ("the tools are part of the prompt set", PROMPT_FIX),
    "max_tokens": ("each request's output cap is its row's max_tokens",
                   "set max_tokens in the prompt file's rows"),
    "max_completion_tokens": ("each request's output cap is its row's max_tokens",
                              "set max_tokens in the prompt file's rows"),
    "temperature": ("it is recorded as --temperature", "use --temperature"),
    "ignore_eos": ("it is recorded as --ignore-eos", "use --ignore-eos"),
    "n": ("specbench measures one answer per request", NO_FIX),
    "best_of": ("specbench measures one answer per request", NO_FIX),
}
# The same rule inside an explicit /generate `sampling_params`, under SGLang's names.
OWNED_PARAMS: dict[str, tuple[str, str]] = {
    "max_new_tokens": OWNED_KEYS["max_tokens"],
    "temperature": OWNED_KEYS["temperature"],
    "ignore_eos": OWNED_KEYS["ignore_eos"],
    "n": OWNED_KEYS["n"],
}


def check_extra_body(extra: Mapping[str, Any], protocol: str) -> None:
    """Refuse (ConfigError, one line) an extra body that would break measurement on `protocol`
    or that SGLang would refuse on every request."""
    owned = next((k for k in extra if k in OWNED_KEYS), None)
    if owned is not None:
        why, fix = OWNED_KEYS[owned]
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
    owned = next((k for k in params or {} if k in OWNED_PARAMS), None)
    if owned is not None:
        why, fix = OWNED_PARAMS[owned]
        raise ConfigError(f"--extra-request-body sets sampling_params.{owned}, which specbench "
                          f"sets itself ({why}); {fix}")
    problem = range_problem({k: v for k, v in extra.items() if k in SAMPLING_KEYS})
    problem = problem or range_problem(params or {})
    if problem is not None:
        key, value, rule = problem
        raise ConfigError(f"--extra-request-body {key}={value!r} would be refused by SGLang on "
                          f"every request ({key} must be {rule}); fix the value")
