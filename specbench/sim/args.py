"""Command line of the simulated server: SGLang 0.5.23's flags (the subset it models) + --sim-*.

The simulator must accept exactly the argv that specbench builds for real SGLang and fail the
same way on the same mistakes, so the parser copies SGLang's behaviour where a harness can
trip over it:

* argparse with prefix abbreviations on, so ``--cuda-graph-max-bs`` is an *ambiguous option*
  (exit 2) because ``--cuda-graph-max-bs-decode`` and ``--cuda-graph-max-bs-prefill`` exist;
* `--context-length` and `--max-total-tokens` read token counts as SGLang does ("32k",
  "1Mi"); `--api-key`, `--admin-api-key` and `--allow-auto-truncate` act as in SGLang
  (auth.py, validation.py);
* speculative resolution in SGLang's order (:mod:`specbench.sim.speculative_args`): the
  adaptive block first (it may refuse and fall back to static steps with a warning), then the
  48-request cap, then the auto choice of (steps, topk, draft tokens) with its bare
  ``AssertionError`` when only some are given, then ``topk == 1`` forcing
  ``draft tokens = steps + 1``.

:func:`resolve` turns the parsed namespace into one frozen :class:`ServerSettings`; problems
raise :class:`StartupError` carrying the exit code and the lines SGLang would print.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TypedDict

from specbench.sim.adaptive import SlotConfig
from specbench.sim.costmodel import DEFAULT_PROFILE, Profile
from specbench.sim.speculative_args import (
    SIM_RELEASES,
    SimRelease,
    StartupError,
    resolve_speculative,
)

__all__ = ["SIM_RELEASES", "FaultOptions", "ServerSettings", "SimRelease", "StartupError",
           "build_parser", "resolve"]


SKIP_ZERO_STEP_ENV = "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"
@dataclass(frozen=True)
class FaultOptions:
    """--sim-* fault injection for robustness tests; all off by default."""

    crash_after_requests: int | None = None
    crash_after_s: float | None = None
    error_rate: float = 0.0
    truncate_rate: float = 0.0
    malformed_rate: float = 0.0
    stall_after_tokens: int | None = None
    stall_s: float = 0.0
    slow_start_s: float = 0.0
    fail_start: str | None = None
    cap_running: int | None = None


@dataclass(frozen=True)
class ServerSettings:
    """Resolved server arguments (SGLang names) plus the simulator's own options."""

    model_path: str
    served_model_name: str
    host: str
    port: int
    tp_size: int
    max_running_requests: int
    enable_metrics: bool
    log_level: str
    skip_server_warmup: bool
    random_seed: int
    chunked_prefill_size: int
    context_length: int
    mem_fraction_static: float | None
    load_format: str
    trust_remote_code: bool
    decode_log_interval: int
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    speculative_adaptive: bool
    speculative_adaptive_config: str | None
    adaptive_slots: tuple[SlotConfig, ...]
    cuda_graph_bs_decode: tuple[int, ...] | None
    cuda_graph_max_bs_decode: int | None
    cuda_graph_max_bs_prefill: int | None
    skip_zero_step_draft_extend: bool
    sim_profile: str
    sim_time_scale: float
    sim_seed: int
    faults: FaultOptions
    release: SimRelease = SIM_RELEASES["0.5.23"]
    disable_radix_cache: bool = False
    enable_cache_report: bool = False
    # --context-length as given (None: the profile's, as SGLang reads config.json); the
    # effective value is `context_len`.
    context_length_arg: int | None = None
    allow_auto_truncate: bool = False
    max_total_tokens: int | None = None
    api_key: str | None = field(default=None, repr=False)
    admin_api_key: str | None = field(default=None, repr=False)
    argv: tuple[str, ...] = ()
    ignored_flags: tuple[str, ...] = ()
    # Accepted with no effect on the model, but /server_info reports them as SGLang resolves them.
    attention_backend: str | None = None
    disable_cuda_graph: bool = False
    disable_overlap_schedule: bool = False
    # (level, message) lines that resolution logs once logging is set up, as SGLang does.
    startup_log: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def speculative(self) -> bool:
        return self.speculative_algorithm is not None

    @property
    def reserved_tokens(self) -> int:
        """Output slots SGLang's EAGLE family keeps per request on top of its input (its
        draft tokens live there), which the context-length check adds to the prompt."""
        if not self.speculative:
            return 0
        widest = self.speculative_num_draft_tokens or 0
        if self.speculative_adaptive and self.adaptive_slots:
            widest = max(s for slot in self.adaptive_slots for s in slot.candidate_steps) + 1
        steps, topk = self.speculative_num_steps or 0, self.speculative_eagle_topk or 1
        return max(topk * steps, widest)


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be >= 0")
    return value


def _token_count(text: str) -> int:
    """A token count written as SGLang accepts one: a plain integer, or a number with an SI
    suffix (k, M, G, T; decimals allowed) or an IEC one (Ki, Mi, Gi, Ti; whole numbers)."""
    text = text.strip()
    found = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", text)
    if found:
        number, suffix = found.groups()
        if suffix.endswith("i"):
            if "." not in number:
                return int(number) * 2 ** (10 * "KMGT".index(suffix[0]) + 10)
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with IEC suffixes like '{suffix}'. Use an integer "
                f"IEC value such as '{int(Decimal(number))}{suffix}', or an SI value such as "
                f"'{number}{suffix[0]}'."
            )
        return int(Decimal(number) * 10 ** (3 * "kMGT".index(suffix) + 3))
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{text}'. Use a plain integer, SI suffixes (1k, 1M), or "
            "IEC suffixes (1Ki, 1Mi). Suffixes are case-sensitive."
        ) from None


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} must be a fraction between 0 and 1")
    return value


class _FlagOptions(TypedDict, total=False):
    """The add_argument keywords the flag tables below use."""

    dest: str
    required: bool
    default: object
    type: Callable[[str], object]
    nargs: str
    action: str
    choices: tuple[str, ...]
    metavar: str
    help: str


_INT: _FlagOptions = {"type": int}
_SWITCH: _FlagOptions = {"action": "store_true"}
_NO_EFFECT = "accepted; no effect in the simulator"
# Real SGLang flags that change nothing in the model; accepted so a harness can pass them.
IGNORED_VALUE_FLAGS = (
    "--dtype",
    "--attention-backend",
    "--page-size",
    "--kv-cache-dtype",
    "--watchdog-timeout",
    "--speculative-draft-load-format",
)
IGNORED_SWITCHES = ("--disable-cuda-graph", "--disable-overlap-schedule")
# Shared by those flags (add_argument does not keep or change the dict it is given).
_IGNORED_VALUE: _FlagOptions = {"help": _NO_EFFECT}
_IGNORED_SWITCH: _FlagOptions = {**_SWITCH, "help": _NO_EFFECT}

# (option strings, add_argument keywords) in --help order. Prefix abbreviations stay on, as
# in SGLang, so the set of names decides which abbreviations are ambiguous.
SGLANG_FLAGS: tuple[tuple[str, _FlagOptions], ...] = (
    ("--model-path --model", {"dest": "model_path", "required": True}),
    ("--tokenizer-path", {}),
    ("--host", {"default": "127.0.0.1"}),
    ("--port", {"type": int, "default": 30000}),
    ("--tp-size --tensor-parallel-size", {"dest": "tp_size", "type": int, "default": 1}),
    ("--max-running-requests", _INT),
    ("--enable-metrics", _SWITCH),
    ("--speculative-algorithm", {}),
    (
        "--speculative-draft-model-path --speculative-draft-model",
        {"dest": "speculative_draft_model_path"},
    ),
    ("--speculative-num-steps", _INT),
    ("--speculative-eagle-topk", _INT),
    ("--speculative-num-draft-tokens", _INT),
    ("--speculative-adaptive", _SWITCH),
    ("--speculative-adaptive-config", {}),
    ("--cuda-graph-bs-decode", {"type": int, "nargs": "+"}),
    ("--cuda-graph-max-bs-decode", _INT),
    ("--cuda-graph-max-bs-prefill", _INT),
    ("--chunked-prefill-size", _INT),
    ("--random-seed", _INT),
    ("--log-level", {"default": "info"}),
    ("--served-model-name", {}),
    ("--skip-server-warmup", _SWITCH),
    ("--mem-fraction-static", {"type": float}),
    ("--trust-remote-code", _SWITCH),
    ("--load-format", {"default": "auto"}),
    ("--context-length", {"type": _token_count}),
    ("--max-total-tokens", {"type": _token_count}),
    ("--allow-auto-truncate", _SWITCH),
    ("--api-key", {}),
    ("--admin-api-key", {}),
    ("--decode-log-interval", {"type": int, "default": 40}),
    *((flag, _IGNORED_VALUE) for flag in IGNORED_VALUE_FLAGS),
    ("--disable-radix-cache", {**_SWITCH, "help": "no prefix cache"}),
    (
        "--enable-cache-report",
        {
            **_SWITCH,
            "help": "report usage.prompt_tokens_details.cached_tokens in OpenAI responses",
        },
    ),
    *((flag, _IGNORED_SWITCH) for flag in IGNORED_SWITCHES),
)
SIM_FLAGS: tuple[tuple[str, _FlagOptions], ...] = (
    (
        "--sim-profile",
        {"default": DEFAULT_PROFILE, "help": "bundled profile name or path to a profile TOML"},
    ),
    (
        "--sim-time-scale",
        {
            "type": _positive_float,
            "default": 1.0,
            "help": "S > 1 runs faster than real time: real sleep = model time / S",
        },
    ),
    (
        "--sim-seed",
        {
            "type": int,
            "default": 0,
            "help": "seed of output lengths, acceptance and text (same across modes)",
        },
    ),
    ("--sim-crash-after-requests", _INT),
    ("--sim-crash-after-s", {"type": _non_negative_float}),
    ("--sim-error-rate", {"type": _rate, "default": 0.0}),
    ("--sim-truncate-rate", {"type": _rate, "default": 0.0}),
    ("--sim-malformed-rate", {"type": _rate, "default": 0.0}),
    ("--sim-stall-after-tokens", _INT),
    ("--sim-stall-s", {"type": _non_negative_float, "default": 0.0}),
    ("--sim-slow-start-s", {"type": _non_negative_float, "default": 0.0}),
    ("--sim-fail-start", {"metavar": "LINE"}),
    ("--sim-cap-running", _INT),
    (
        "--sim-sglang-version",
        {
            "choices": tuple(SIM_RELEASES),
            "default": "0.5.23",
            "help": "behave like this SGLang release (/ready, spec counts in streams)",
        },
    ),
)


def build_parser() -> argparse.ArgumentParser:
    """SGLang-compatible flags (prefix abbreviations allowed, as in SGLang) and --sim-*."""
    parser = argparse.ArgumentParser(
        prog="python -m specbench.sim",
        description="Simulated SGLang 0.5.23 server (specbench). Same flags and HTTP API as "
        "`sglang serve` for what it models; --sim-* flags control the simulation.",
        allow_abbrev=True,
    )
    for names, kwargs in SGLANG_FLAGS:
        parser.add_argument(*names.split(), **kwargs)
    sim = parser.add_argument_group("simulation (specbench only)")
    for names, kwargs in SIM_FLAGS:
        sim.add_argument(*names.split(), **kwargs)
    return parser


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def resolve(
    ns: argparse.Namespace,
    profile: Profile,
    env: dict[str, str] | None = None,
    argv: tuple[str, ...] = (),
) -> ServerSettings:
    """Apply SGLang 0.5.23's resolution rules to the parsed flags."""
    env = dict(os.environ) if env is None else env
    log: list[tuple[str, str]] = []
    spec, max_running = resolve_speculative(ns, profile, log)
    if max_running is None:
        max_running = profile.memory.default_max_running_requests
    _check_sizes(ns, max_running)
    return ServerSettings(
        model_path=ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        host=ns.host,
        port=ns.port,
        tp_size=ns.tp_size,
        max_running_requests=int(max_running),
        enable_metrics=bool(ns.enable_metrics),
        log_level=str(ns.log_level),
        skip_server_warmup=bool(ns.skip_server_warmup),
        random_seed=ns.random_seed if ns.random_seed is not None else 0,
        chunked_prefill_size=ns.chunked_prefill_size
        if ns.chunked_prefill_size is not None
        else 8192,
        context_length=ns.context_length or profile.context_length,
        mem_fraction_static=ns.mem_fraction_static,
        load_format=ns.load_format,
        trust_remote_code=bool(ns.trust_remote_code),
        decode_log_interval=max(1, ns.decode_log_interval),
        speculative_algorithm=spec.algorithm,
        speculative_draft_model_path=ns.speculative_draft_model_path if spec.algorithm else None,
        speculative_num_steps=spec.num_steps,
        speculative_eagle_topk=spec.eagle_topk,
        speculative_num_draft_tokens=spec.num_draft_tokens,
        speculative_adaptive=spec.adaptive,
        speculative_adaptive_config=ns.speculative_adaptive_config,
        adaptive_slots=spec.adaptive_slots,
        cuda_graph_bs_decode=tuple(sorted(set(ns.cuda_graph_bs_decode)))
        if ns.cuda_graph_bs_decode
        else None,
        cuda_graph_max_bs_decode=ns.cuda_graph_max_bs_decode,
        cuda_graph_max_bs_prefill=ns.cuda_graph_max_bs_prefill,
        skip_zero_step_draft_extend=env.get(SKIP_ZERO_STEP_ENV, "").lower() in ("1", "true"),
        sim_profile=ns.sim_profile,
        sim_time_scale=ns.sim_time_scale,
        sim_seed=ns.sim_seed,
        faults=_faults(ns),
        release=SIM_RELEASES[ns.sim_sglang_version],
        disable_radix_cache=bool(ns.disable_radix_cache),
        enable_cache_report=bool(ns.enable_cache_report),
        context_length_arg=ns.context_length,
        allow_auto_truncate=bool(ns.allow_auto_truncate),
        max_total_tokens=ns.max_total_tokens,
        api_key=ns.api_key or None,
        admin_api_key=ns.admin_api_key or None,
        argv=argv,
        ignored_flags=_ignored(ns),
        attention_backend=_attention_backend(ns, spec.eagle_topk, profile),
        disable_cuda_graph=bool(ns.disable_cuda_graph),
        disable_overlap_schedule=bool(ns.disable_overlap_schedule),
        startup_log=tuple(log),
    )


# Targets with MLA attention, for which SGLang 0.5.23 picks FA3 on Hopper with a tree too.
_MLA_ARCHITECTURES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM")


def _attention_backend(ns: argparse.Namespace, topk: int | None, profile: Profile) -> str | None:
    """--attention-backend as given; unset, FlashInfer for a tree (topk > 1) on an MHA target,
    as SGLang 0.5.23 chooses on Hopper (its FA3 default is for topk 1; /server_info reports
    FA3 for None)."""
    if ns.attention_backend or (topk or 1) <= 1 or profile.architecture in _MLA_ARCHITECTURES:
        return ns.attention_backend
    return "flashinfer"


def _check_sizes(ns: argparse.Namespace, max_running: int) -> None:
    sizes = (
        ("--max-running-requests", max_running),
        ("--port", ns.port),
        ("--context-length", ns.context_length),
        ("--max-total-tokens", ns.max_total_tokens),
    )
    for name, value in sizes:
        if value is not None and value <= 0:
            raise StartupError(2, f"specbench.sim: {name} must be positive, got {value}")
    if ns.port > 65535:
        raise StartupError(
            2, f"specbench.sim: --port {ns.port} is out of range; use a port in 1-65535"
        )
    if ns.cuda_graph_bs_decode is not None and any(b <= 0 for b in ns.cuda_graph_bs_decode):
        raise StartupError(2, "specbench.sim: --cuda-graph-bs-decode sizes must be positive")


def _faults(ns: argparse.Namespace) -> FaultOptions:
    return FaultOptions(
        crash_after_requests=ns.sim_crash_after_requests,
        crash_after_s=ns.sim_crash_after_s,
        error_rate=ns.sim_error_rate,
        truncate_rate=ns.sim_truncate_rate,
        malformed_rate=ns.sim_malformed_rate,
        stall_after_tokens=ns.sim_stall_after_tokens,
        stall_s=ns.sim_stall_s,
        slow_start_s=ns.sim_slow_start_s,
        fail_start=ns.sim_fail_start,
        cap_running=ns.sim_cap_running,
    )


def _ignored(ns: argparse.Namespace) -> tuple[str, ...]:
    """The no-effect flags that were passed, in --help order (each is logged at start-up)."""
    given = [flag for flag in IGNORED_VALUE_FLAGS if getattr(ns, _dest(flag)) is not None]
    given += [flag for flag in IGNORED_SWITCHES if getattr(ns, _dest(flag))]
    return tuple(given)
