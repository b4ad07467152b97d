"""/server_info verification: is the server what the sweep asked for?

SGLang resolves flags in ways a harness cannot see from the command line. It caps speculative
servers at 48 running requests unless `--max-running-requests` is given, forces draft tokens to
steps + 1 when topk is 1, and falls back *silently* from `--speculative-adaptive` to static
steps (topk != 1, DP attention, two-batch overlap, PDMux, multi-layer EAGLE). `GET
/server_info` returns the resolved values at the top level (the flags' names, with
underscores) plus `internal_states[i]` per data-parallel rank; each mismatch becomes one line
that names the flag and the fix. The simulated server serves the same shape, so these checks
serve every engine; :func:`detect_mode` classifies an attached server, and
:func:`fetch_server_info` reads it (for launched and attached servers alike). The checks take
the body as ``Mapping[str, object]``: it is another server's JSON, so each value is narrowed
where it is read.
"""

from __future__ import annotations

import json
import urllib.error
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.configurations import Schedule
from specbench.engines.process import ServerStartError, http_get
from specbench.errors import ConfigError

# SGLang accepts EAGLE3 case-insensitively and maps NEXTN to EAGLE; specbench asks for EAGLE3.
_EAGLE_ALGORITHMS = ("EAGLE3",)

@dataclass(frozen=True)
class Expected:
    """What one mode's server must have resolved to (compared with its /server_info).

    `max_running_requests` is None when specbench did not launch the server (attach mode): then
    only "at least the largest concurrency" is checked, not equality across modes.
    `threshold` is the dynamic server's batch size from which drafting stops.
    """

    mode: str
    speculative_num_steps: int
    largest_concurrency: int
    max_running_requests: int | None = None
    threshold: int | None = None
    schedule: Schedule | None = None  # a tuned schedule (not a single threshold)
    adaptive_default: bool = False  # bare --speculative-adaptive: SGLang's built-in slots
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int | None = None  # None: steps + 1 (forced by topk 1)

    @property
    def draft_tokens(self) -> int:
        if self.speculative_num_draft_tokens is not None:
            return self.speculative_num_draft_tokens
        return self.speculative_num_steps + 1


def _algorithm(info: Mapping[str, object]) -> str | None:
    value = info.get("speculative_algorithm")
    if value is None or str(value).strip().upper() in ("", "NONE"):
        return None
    return str(value).strip().upper()


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def detect_mode(info: Mapping[str, object]) -> str:
    """baseline | eagle3 | dynamic, from a server's /server_info (for --engine attach).

    Raises ConfigError (one line) for speculative algorithms specbench does not compare.
    """
    algorithm = _algorithm(info)
    if algorithm is None:
        return "baseline"
    if algorithm not in ("EAGLE", "EAGLE3"):
        raise ConfigError(
            f"the server runs speculative_algorithm={algorithm}; specbench compares EAGLE-3 "
            "only, so attach a server launched with --speculative-algorithm EAGLE3"
        )
    return "dynamic" if _as_bool(info.get("speculative_adaptive")) else "eagle3"


def effective_threshold(threshold: int, cuda_graph_bs: Sequence[int] | None) -> int:
    """The batch size from which SGLang really routes to the zero-step slot.

    SGLang 0.5.23 pads the batch size up to the next ``--cuda-graph-bs-decode`` entry before
    it picks the adaptive slot, so with a capture list the switch happens at
    ``max{c in list : c < T} + 1`` (or 1 if none). Without the flag it routes by the exact
    batch size, to the largest slot key at or below it.
    """
    if not cuda_graph_bs:
        return threshold
    sizes = sorted(set(cuda_graph_bs))
    if threshold > sizes[-1]:
        return threshold  # batches above the largest captured size are not padded
    below = [c for c in sizes if c < threshold]
    return below[-1] + 1 if below else 1


def routing_from_adaptive_config(config: Mapping[str, object]) -> tuple[int | None, int | None]:
    """(K, T) of a "K steps below T, zero from T on" adaptive JSON; None where it is not one.

    K is the single candidate of the slots below T; T the smallest slot key from which every
    slot has candidate_steps [0].
    """
    slots = sorted(
        (int(key), list(entry.get("candidate_steps", [])))
        for key, entry in config.items()
        if key.isdigit() and isinstance(entry, dict)
    )
    threshold: int | None = None
    for index, (key, _) in enumerate(slots):
        if all(steps == [0] for _, steps in slots[index:]):
            threshold = key if index > 0 else 1
            break
    below = {tuple(steps) for key, steps in slots if threshold is None or key < threshold}
    steps_below = None
    if len(below) == 1:
        (only,) = below
        if len(only) == 1:
            steps_below = only[0]
    return steps_below, threshold


def _capacity(info: Mapping[str, object]) -> tuple[int | None, int | None]:
    """(configured max_running_requests, effective capacity summed over DP ranks)."""
    configured = _as_int(info.get("max_running_requests"))
    states = info.get("internal_states")
    effective: int | None = None
    if isinstance(states, list):
        per_rank = [
            _as_int(s.get("effective_max_running_requests_per_dp"))
            for s in states
            if isinstance(s, dict)
        ]
        known = [v for v in per_rank if v is not None]
        if known:
            effective = sum(known)
    return configured, effective


def check_server_info(info: Mapping[str, object], expected: Expected) -> list[str]:
    """Problems found in /server_info, one line each: what the server has, the flag that fixes it.

    An empty list means the server is what the sweep asked for.
    """
    problems: list[str] = []
    mode = expected.mode
    algorithm = _algorithm(info)
    if mode == "baseline":
        if algorithm is not None:
            problems.append(
                f"the baseline server runs speculative decoding (speculative_algorithm="
                f"{algorithm}); launch it without --speculative-algorithm and the other "
                "--speculative-* flags"
            )
    elif mode in ("eagle3", "dynamic"):
        problems += _check_speculative(info, expected, algorithm)
    else:
        problems.append(f"unknown mode {mode!r}; use baseline, eagle3 or dynamic")
    problems += _check_capacity(info, expected)
    return problems


def _check_speculative(
    info: Mapping[str, object], expected: Expected, algorithm: str | None
) -> list[str]:
    problems: list[str] = []
    mode = expected.mode
    if algorithm not in _EAGLE_ALGORITHMS:
        problems.append(
            f"the {mode} server reports speculative_algorithm={algorithm}, expected EAGLE3; "
            "pass --speculative-algorithm EAGLE3 (or check that the URL/port is this server)"
        )
        return problems  # the step checks below would only repeat the same cause
    checks = (
        ("speculative_num_steps", expected.speculative_num_steps, "--speculative-num-steps"),
        ("speculative_eagle_topk", expected.speculative_eagle_topk, "--speculative-eagle-topk"),
        ("speculative_num_draft_tokens", expected.draft_tokens, "--speculative-num-draft-tokens"),
    )
    for key, want, flag in checks:
        got = _as_int(info.get(key))
        if got != want:
            problems.append(
                f"the {mode} server resolved {key}={info.get(key)}, expected {want}; pass "
                f"{flag} {want} (and remove any extra argument that overrides it)"
            )
    adaptive = _as_bool(info.get("speculative_adaptive"))
    if mode == "dynamic" and not adaptive:
        problems.append(
            "the dynamic server reports speculative_adaptive=false although "
            "--speculative-adaptive was passed: SGLang fell back to static speculation "
            "(it does so silently for topk != 1, DP attention, two-batch overlap, PDMux or "
            "multi-layer EAGLE); find 'speculative_adaptive disabled: <reason>' in its log and "
            "remove that setting"
        )
    if mode == "eagle3" and adaptive:
        problems.append(
            "the eagle3 server reports speculative_adaptive=true; launch it without "
            "--speculative-adaptive so that it drafts at every batch size"
        )
    if mode == "dynamic" and adaptive and expected.threshold is not None:
        problems += _check_threshold(info, expected)
    elif mode == "dynamic" and adaptive and expected.schedule is not None:
        problems += _check_schedule(info, expected.schedule)
    elif mode == "dynamic" and adaptive and expected.adaptive_default:
        path = info.get("speculative_adaptive_config")
        if path:
            problems.append(
                f"the dynamic server uses the adaptive config {path}, expected SGLang's built-in "
                "one; launch it with --speculative-adaptive and no --speculative-adaptive-config"
            )
    return problems


def _read_adaptive_config(path: object) -> dict[str, object] | None:
    """The adaptive JSON a server was launched with, when it is readable from here (an
    attached server's path may be on another machine)."""
    config_path = Path(str(path))
    if not config_path.is_file():
        return None
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return config if isinstance(config, dict) else None


def _check_schedule(info: Mapping[str, object], schedule: Schedule) -> list[str]:
    path = info.get("speculative_adaptive_config")
    if not path:
        return [
            "the dynamic server has no --speculative-adaptive-config, so it uses SGLang's "
            "built-in slots instead of the tuned schedule; pass --speculative-adaptive-config "
            "with specbench's JSON"
        ]
    config = _read_adaptive_config(path)
    if config is not None and Schedule.from_json(config) != schedule:
        return [
            f"the dynamic server's adaptive config {path} is not the tuned schedule "
            f"{schedule.to_json()}; write it with specbench threshold --write-adaptive-config"
        ]
    return []


def _check_threshold(info: Mapping[str, object], expected: Expected) -> list[str]:
    assert expected.threshold is not None
    problems: list[str] = []
    threshold = expected.threshold
    path = info.get("speculative_adaptive_config")
    if not path:
        problems.append(
            "the dynamic server has no --speculative-adaptive-config, so it uses SGLang's "
            "built-in slots (drafting varies up to batch size 64) instead of stopping at "
            f"{threshold}; pass --speculative-adaptive-config with specbench's JSON"
        )
        return problems
    config = _read_adaptive_config(path)
    if config is not None:
        steps, found = routing_from_adaptive_config(config)
        want_steps = expected.speculative_num_steps
        # with T = 1 no batch ever drafts, so the steps below T do not matter
        if found != threshold or (threshold > 1 and steps != want_steps):
            problems.append(
                f"the dynamic server's adaptive config {path} routes "
                f"{steps} steps below batch size {found}, expected {want_steps} below "
                f"{threshold}; write it with specbench threshold --write-adaptive-config"
            )
    graph_bs = info.get("cuda_graph_bs_decode")
    if isinstance(graph_bs, list) and graph_bs:
        sizes = [v for v in (_as_int(b) for b in graph_bs) if v is not None]
        real = effective_threshold(threshold, sizes)
        if real != threshold:
            problems.append(
                f"--cuda-graph-bs-decode pads batch sizes before SGLang picks the adaptive "
                f"slot, so drafting stops from batch size {real}, not {threshold}; add "
                f"{threshold - 1} to --cuda-graph-bs-decode or drop the flag"
            )
    return problems


def _check_capacity(info: Mapping[str, object], expected: Expected) -> list[str]:
    problems: list[str] = []
    configured, effective = _capacity(info)
    largest = expected.largest_concurrency
    want = expected.max_running_requests
    if configured is None and effective is None:
        return [
            f"the {expected.mode} server's /server_info has no max_running_requests; pass "
            f"--max-running-requests {want or largest} (is this an SGLang server?)"
        ]
    if want is not None and configured is not None and configured != want:
        problems.append(
            f"the {expected.mode} server resolved max_running_requests={configured}, expected "
            f"{want} (equal in every mode for a fair comparison); pass "
            f"--max-running-requests {want} and remove any extra argument that overrides it"
        )
    elif configured is not None and configured < largest:
        problems.append(
            f"the {expected.mode} server runs at most {configured} requests at once "
            f"(max_running_requests={configured}) but the sweep goes up to {largest} concurrent "
            f"users; pass --max-running-requests {largest} (SGLang caps speculative servers "
            "at 48 when it is not given)"
        )
    memory_bound = configured is None or configured >= largest
    if effective is not None and effective < largest and memory_bound:
        problems.append(
            f"the {expected.mode} server can hold only {effective} running requests "
            f"(internal_states effective_max_running_requests_per_dp) although "
            f"--max-running-requests is {configured}: the KV cache is too small for {largest} "
            "concurrent users; raise --mem-fraction-static, add GPUs (--tp-size) or lower the "
            "largest concurrency"
        )
    return problems


# -- what the manifest keeps --------------------------------------------------------------

# The resolved settings worth keeping per server: the speculative ones specbench checks, and what
# moves the answer without being on the command line (the attention backend SGLang picked, TP,
# the CUDA-graph batch sizes, overlap scheduling).
RECORDED_KEYS = (
    "version",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_adaptive",
    "max_running_requests",
    "attention_backend",
    "decode_attention_backend",
    "prefill_attention_backend",
    "tp_size",
    "disable_overlap_schedule",
    "disable_cuda_graph",
    "cuda_graph_bs",
    "cuda_graph_max_bs",
    "sim_profile",
    "sim_time_scale",
)


def _decode_graphs(info: Mapping[str, object]) -> tuple[Any, Any]:
    """(decode CUDA-graph batch sizes, their largest): SGLang 0.5.23 resolves them into
    cuda_graph_config.decode.{bs,max_bs}; 0.5.17 returned cuda_graph_bs and cuda_graph_max_bs."""
    config = info.get("cuda_graph_config")
    decode = config.get("decode") if isinstance(config, dict) else None
    if isinstance(decode, dict) and (decode.get("bs") or decode.get("max_bs")):
        if decode.get("backend") == "disabled":
            return [], 0
        return decode.get("bs"), decode.get("max_bs")
    sizes = info.get("cuda_graph_bs") or info.get("cuda_graph_bs_decode")
    return sizes, info.get("cuda_graph_max_bs") or info.get("cuda_graph_max_bs_decode")


def recorded(info: Mapping[str, object]) -> dict[str, object]:
    """The /server_info keys the manifest keeps (:data:`RECORDED_KEYS`, those the server gave),
    the decode CUDA-graph sizes under one name whichever release said them."""
    sizes, largest = _decode_graphs(info)
    flat = {**info, "cuda_graph_bs": sizes, "cuda_graph_max_bs": largest}
    return {k: flat[k] for k in RECORDED_KEYS if flat.get(k) is not None}


# -- reading it ---------------------------------------------------------------------------

def fetch_server_info(
    base_url: str, timeout_s: float = 10.0, api_key: str | None = None
) -> dict[str, Any]:
    """`GET /server_info` (it needs the API key when the server has one; /ready does not)."""
    url = f"{base_url.rstrip('/')}/server_info"
    try:
        status, body = http_get(url, timeout_s=timeout_s, token=api_key)
    except (OSError, urllib.error.URLError) as exc:
        if isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None),
                                                       TimeoutError):
            raise ServerStartError(
                f"{url} did not answer within {timeout_s:.0f} s although the server is up; "
                "check its log (a scheduler hung behind a live HTTP front?)"
            ) from None
        raise ServerStartError(
            f"cannot reach {base_url} ({exc}); check the --attach URL and that the server is up"
        ) from None
    if status in (401, 403):
        given = "was refused" if api_key else "is needed"
        raise ServerStartError(
            f"{url} answered HTTP {status}: the server's API key {given}; pass the server's "
            "--api-key KEY (or set SPECBENCH_API_KEY)"
        )
    if status != 200:
        raise ServerStartError(
            f"{base_url}/server_info answered HTTP {status}; is this an SGLang server?"
        )
    try:
        info = json.loads(body)
    except json.JSONDecodeError:
        raise ServerStartError(
            f"{base_url}/server_info did not return JSON; is this an SGLang server?"
        ) from None
    if not isinstance(info, dict):
        raise ServerStartError(
            f"{base_url}/server_info did not return an object; is this an SGLang server?"
        )
    if not isinstance(info.get("context_length"), int):
        # Unset unless launched with --context-length; the model's own limit is in /v1/models.
        info["max_model_len"] = _max_model_len(base_url, timeout_s, api_key)
    return info


def _max_model_len(base_url: str, timeout_s: float, api_key: str | None) -> int | None:
    try:
        status, body = http_get(f"{base_url.rstrip('/')}/v1/models", timeout_s=timeout_s,
                                token=api_key)
        cards = json.loads(body).get("data") if status == 200 else None
    except (OSError, urllib.error.URLError, json.JSONDecodeError, AttributeError):
        return None
    limits = [c.get("max_model_len") for c in cards or [] if isinstance(c, dict)]
    return next((n for n in limits if isinstance(n, int)), None)
