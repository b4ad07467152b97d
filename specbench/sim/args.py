"""Command line of the simulated server: SGLang 0.5.23's flags (the subset it models) + --sim-*.

The simulator must accept exactly the argv that specbench builds for real SGLang and fail the
same way on the same mistakes, so the parser copies SGLang's behaviour where a harness can
trip over it (shared/reference/sglang-0.5.23.md §1-§2):

* argparse with prefix abbreviations on, so ``--cuda-graph-max-bs`` is an *ambiguous option*
  (exit 2) because ``--cuda-graph-max-bs-decode`` and ``--cuda-graph-max-bs-prefill`` exist;
* `--context-length` and `--max-total-tokens` read token counts as SGLang does ("32k",
  "1Mi"); `--api-key`, `--admin-api-key` and `--allow-auto-truncate` act as in SGLang
  (auth.py, validation.py);
* speculative resolution in SGLang's order: the adaptive block first (it may refuse and fall
  back to static steps with a warning), then the 48-request cap, then the auto choice of
  (steps, topk, draft tokens) with its bare ``AssertionError`` when only some are given,
  then ``topk == 1`` forcing ``draft tokens = steps + 1``.

:func:`resolve` turns the parsed namespace into one frozen :class:`ServerSettings`; problems
raise :class:`StartupError` carrying the exit code and the lines SGLang would print.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from specbench.sim.adaptive import (
    DEFAULT_ADAPTIVE_CONFIG,
    DEFAULT_ADAPTIVE_CONFIG_0_5_17,
    SlotConfig,
    load_adaptive_config,
)
from specbench.sim.costmodel import DEFAULT_PROFILE, Profile


@dataclass(frozen=True)
class SimRelease:
    """What --sim-sglang-version changes: the differences the first real server (0.5.17) showed
    against 0.5.23, read from those releases' wheels (not from specbench.engines)."""

    version: str
    has_ready: bool  # GET /ready exists (0.5.20 on); before it, only /health
    stream_spec_counts: bool  # return_spec_tokens_details honoured in OpenAI streams (0.5.19 on)
    default_adaptive_config: dict[str, Any]


SIM_RELEASES: dict[str, SimRelease] = {
    "0.5.23": SimRelease("0.5.23", True, True, DEFAULT_ADAPTIVE_CONFIG),
    "0.5.17": SimRelease("0.5.17", False, False, DEFAULT_ADAPTIVE_CONFIG_0_5_17),
}
EAGLE_FAMILY = ("EAGLE", "EAGLE3")
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
SKIP_ZERO_STEP_ENV = "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"
# What the EAGLE family caps --max-running-requests at when the user did not choose.
SPEC_MAX_RUNNING = 48


class StartupError(Exception):
    """The server cannot start; `lines` are printed to stderr, then the process exits."""

    def __init__(self, exit_code: int, *lines: str) -> None:
        super().__init__(lines[-1] if lines else "startup error")
        self.exit_code = exit_code
        self.lines = lines


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


_INT: dict[str, Any] = {"type": int}
_SWITCH: dict[str, Any] = {"action": "store_true"}
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

# (option strings, add_argument keywords) in --help order. Prefix abbreviations stay on, as
# in SGLang, so the set of names decides which abbreviations are ambiguous.
SGLANG_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
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
    *((flag, {"help": _NO_EFFECT}) for flag in IGNORED_VALUE_FLAGS),
    ("--disable-radix-cache", {**_SWITCH, "help": "no prefix cache"}),
    (
        "--enable-cache-report",
        {
            **_SWITCH,
            "help": "report usage.prompt_tokens_details.cached_tokens in OpenAI responses",
        },
    ),
    *((flag, {**_SWITCH, "help": _NO_EFFECT}) for flag in IGNORED_SWITCHES),
)
SIM_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
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


@dataclass(frozen=True)
class SpeculativeParams:
    """The speculative arguments after SGLang's resolution (all None when it is off)."""

    algorithm: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    adaptive: bool = False
    adaptive_slots: tuple[SlotConfig, ...] = ()


def resolve(
    ns: argparse.Namespace,
    profile: Profile,
    env: dict[str, str] | None = None,
    argv: tuple[str, ...] = (),
) -> ServerSettings:
    """Apply SGLang 0.5.23's resolution rules to the parsed flags."""
    env = dict(os.environ) if env is None else env
    log: list[tuple[str, str]] = []
    spec, max_running = _resolve_speculative(ns, profile, log)
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
        startup_log=tuple(log),
    )


def _resolve_speculative(
    ns: argparse.Namespace, profile: Profile, log: list[tuple[str, str]]
) -> tuple[SpeculativeParams, int | None]:
    """SGLang's four steps, in its order; returns the parameters and max running requests.

    Warnings and notes go to `log` in the order SGLang prints them.
    """
    algo = _algorithm(ns.speculative_algorithm)
    max_running: int | None = ns.max_running_requests
    if algo is None:
        if ns.speculative_adaptive:
            log.append(
                (
                    "warning",
                    "speculative_adaptive disabled: speculative decoding is off. "
                    "Falling back to static speculative params.",
                )
            )
        return SpeculativeParams(), max_running
    if not ns.speculative_draft_model_path:
        raise StartupError(
            1,
            f"ValueError: --speculative-draft-model-path is required for "
            f"--speculative-algorithm {algo}",
        )
    steps: int | None = ns.speculative_num_steps
    topk: int | None = ns.speculative_eagle_topk
    draft_tokens: int | None = ns.speculative_num_draft_tokens
    # 1. The adaptive block runs before the per-algorithm handler.
    slots = _adaptive_slots(ns, topk, log)
    if slots is not None:
        topk = 1
        steps = _adaptive_initial_steps(steps, slots)
        draft_tokens = steps + 1
    # 2. The EAGLE family caps the batch when the user did not choose.
    if max_running is None:
        max_running = SPEC_MAX_RUNNING
        log.append(
            (
                "info",
                f"Max running requests is reset to {SPEC_MAX_RUNNING} for speculative decoding. "
                "You can override this by explicitly setting --max-running-requests.",
            )
        )
    if slots is not None and steps is not None:
        _check_logits_buffer(ns, steps, slots, max_running, profile)
    # 3. Auto choice when nothing is given (only static gets here: adaptive has chosen).
    if steps is None:
        steps, topk, draft_tokens = _auto_choice(profile, topk, draft_tokens, log)
    if topk is None:
        topk = 1
    # 4. A chain (topk 1) verifies exactly steps + 1 tokens.
    draft_tokens = _chain_draft_tokens(steps, topk, draft_tokens, log)
    params = SpeculativeParams(
        algo, steps, topk, draft_tokens, slots is not None, slots if slots is not None else ()
    )
    return params, max_running


def _algorithm(name: str | None) -> str | None:
    """--speculative-algorithm, upper-cased, NEXTN as EAGLE; only the EAGLE family is modelled."""
    algo = name.upper() if name else None
    if algo == "NEXTN":
        algo = "EAGLE"
    if algo is None or algo in EAGLE_FAMILY:
        return algo
    if algo in SPEC_ALGORITHMS:
        raise StartupError(
            2,
            f"specbench.sim: --speculative-algorithm {algo} is not modelled; "
            "use EAGLE or EAGLE3 (or a real SGLang server)",
        )
    raise StartupError(
        2,
        "error: argument --speculative-algorithm: invalid choice: "
        f"{name!r} (choose from {', '.join(SPEC_ALGORITHMS)})",
    )


def _adaptive_slots(
    ns: argparse.Namespace, topk: int | None, log: list[tuple[str, str]]
) -> tuple[SlotConfig, ...] | None:
    """The adaptive config's slots, or None when adaptive is off or SGLang refuses it."""
    if not ns.speculative_adaptive:
        return None
    if topk is not None and topk != 1:
        log.append(
            (
                "warning",
                f"speculative_adaptive disabled: speculative_eagle_topk={topk} is not "
                "supported (adaptive requires topk == 1). "
                "Falling back to static speculative params.",
            )
        )
        return None
    try:
        release = SIM_RELEASES[ns.sim_sglang_version]
        return load_adaptive_config(ns.speculative_adaptive_config,
                                    release.default_adaptive_config)
    except (ValueError, FileNotFoundError) as exc:
        raise StartupError(1, f"{type(exc).__name__}: {exc}") from None


def _adaptive_initial_steps(steps: int | None, slots: tuple[SlotConfig, ...]) -> int:
    """--speculative-num-steps must be a candidate; unset, the middle candidate is used."""
    union = sorted({s for slot in slots for s in slot.candidate_steps})
    if steps is None:
        return union[len(union) // 2]
    if steps not in union:
        raise StartupError(
            1,
            f"ValueError: --speculative-num-steps={steps} is not in the adaptive config "
            f"candidate_steps {union}",
        )
    return steps


def _check_logits_buffer(
    ns: argparse.Namespace,
    steps: int,
    slots: tuple[SlotConfig, ...],
    max_running: int,
    profile: Profile,
) -> None:
    """SGLang 0.5.17 sizes the CUDA graphs' shared logits buffer by the launch's K + 1 rows per
    request, then builds a graph for every adaptive candidate: a candidate above the launch's K
    fails the start-up (seen on an H100 with bare --speculative-adaptive: candidates up to 7,
    K 3). 0.5.23 counts the candidates (ModelRunner.max_decode_logits_rows)."""
    largest = max(s for slot in slots for s in slot.candidate_steps)
    if ns.sim_sglang_version != "0.5.17" or largest <= steps or ns.disable_cuda_graph:
        return
    graph_bs = max(ns.cuda_graph_bs_decode) if ns.cuda_graph_bs_decode else max_running
    raise StartupError(
        1,
        "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "sglang/srt/model_executor/graph_shared_output.py", line 56, in '
        "get_logits_buffer  [simulated by specbench.sim: SGLang 0.5.17 sizes this buffer by "
        "--speculative-num-steps; launch at the largest adaptive candidate]",
        f"AssertionError: shared logits buffer holds {graph_bs * (steps + 1)} rows but caller "
        f"needs {graph_bs * (largest + 1)} (vocab_size={profile.vocab_size})",
    )


def _auto_choice(
    profile: Profile, topk: int | None, draft_tokens: int | None, log: list[tuple[str, str]]
) -> tuple[int, int, int]:
    """SGLang's automatic (steps, topk, draft tokens); it asserts nothing else was given."""
    if topk is not None or draft_tokens is not None:
        raise StartupError(
            1,
            "Traceback (most recent call last):",
            '  File "sglang/srt/arg_groups/speculative_hook.py", line 1160, in '
            "_handle_eagle_family  [simulated by specbench.sim: pass "
            "--speculative-num-steps together with --speculative-eagle-topk and "
            "--speculative-num-draft-tokens]",
            "AssertionError",
        )
    # SGLang picks (5, 4, 8) for Llama and Grok targets, (3, 1, 4) for everything else.
    if profile.architecture in ("LlamaForCausalLM", "Grok1ForCausalLM"):
        steps, topk, draft_tokens = 5, 4, 8
    else:
        steps, topk, draft_tokens = 3, 1, 4
    log.append(
        (
            "info",
            f"Auto-chosen speculative params: num_steps={steps}, eagle_topk={topk}, "
            f"num_draft_tokens={draft_tokens}",
        )
    )
    return steps, topk, draft_tokens


def _chain_draft_tokens(
    steps: int, topk: int, draft_tokens: int | None, log: list[tuple[str, str]]
) -> int:
    """Draft tokens per verify: steps + 1 when unset, and always for a chain (topk 1)."""
    if topk == 1 and draft_tokens is not None and draft_tokens != steps + 1:
        log.append(
            (
                "warning",
                f"speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 = "
                f"{steps + 1} because speculative_eagle_topk == 1 (was {draft_tokens}).",
            )
        )
        return steps + 1
    return steps + 1 if draft_tokens is None else draft_tokens


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
