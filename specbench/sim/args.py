"""Command line of the simulated server: SGLang 0.5.23's flags (the subset it models) + --sim-*.

The simulator must accept exactly the argv that specbench builds for real SGLang and fail the
same way on the same mistakes, so the parser copies SGLang's behaviour where a harness can
trip over it (shared/reference/sglang-0.5.23.md §1-§2):

* argparse with prefix abbreviations on, so ``--cuda-graph-max-bs`` is an *ambiguous option*
  (exit 2) because ``--cuda-graph-max-bs-decode`` and ``--cuda-graph-max-bs-prefill`` exist;
* speculative resolution in SGLang's order: the adaptive block first (it may refuse and fall
  back to static steps with a warning), then the 48-request cap, then the auto choice of
  (steps, topk, draft tokens) with its bare ``AssertionError`` when only some are given,
  then ``topk == 1`` forcing ``draft tokens = steps + 1``.

:func:`resolve` turns the parsed namespace into one frozen :class:`ServerSettings`; problems
raise :class:`StartupError` carrying the exit code and the lines SGLang would print.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specbench.sim.costmodel import DEFAULT_PROFILE, Profile

SIM_VERSION = "0.5.23-sim"
EAGLE_FAMILY = ("EAGLE", "EAGLE3")
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
ADAPTIVE_SLOT_DEFAULTS: dict[str, float] = {
    "ema_alpha": 0.2,
    "update_interval": 5,
    "warmup_batches": 10,
    "down_hysteresis": -0.25,
    "up_hysteresis": 0.0,
    "ceiling_coeff": 0.0,
}
# SGLang's built-in adaptive config, used by a bare --speculative-adaptive.
DEFAULT_ADAPTIVE_CONFIG: dict[str, Any] = {
    "1": {"candidate_steps": [1, 3, 5, 7]},
    "8": {"candidate_steps": [0, 1, 3], "down_hysteresis": 0.0},
    "32": {"candidate_steps": [0, 1], "down_hysteresis": 0.0},
    "64": {"candidate_steps": [0]},
}
SKIP_ZERO_STEP_ENV = "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"


class StartupError(Exception):
    """The server cannot start; `lines` are printed to stderr, then the process exits."""

    def __init__(self, exit_code: int, *lines: str) -> None:
        super().__init__(lines[-1] if lines else "startup error")
        self.exit_code = exit_code
        self.lines = lines


@dataclass(frozen=True)
class SlotConfig:
    """One batch-size slot of the adaptive config (key = smallest batch size it serves)."""

    key: int
    candidate_steps: tuple[int, ...]
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    down_hysteresis: float = -0.25
    up_hysteresis: float = 0.0
    ceiling_coeff: float = 0.0


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
    disable_radix_cache: bool = False
    enable_cache_report: bool = False
    argv: tuple[str, ...] = ()
    ignored_flags: tuple[str, ...] = ()
    # (level, message) lines that resolution logs once logging is set up, as SGLang does.
    startup_log: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def speculative(self) -> bool:
        return self.speculative_algorithm is not None


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


def _rate(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} must be a fraction between 0 and 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    """SGLang-compatible flags (prefix abbreviations allowed, as in SGLang) and --sim-*."""
    parser = argparse.ArgumentParser(
        prog="python -m specbench.sim",
        description="Simulated SGLang 0.5.23 server (specbench). Same flags and HTTP API as "
        "`sglang serve` for what it models; --sim-* flags control the simulation.",
        allow_abbrev=True,
    )
    add = parser.add_argument
    add("--model-path", "--model", dest="model_path", required=True)
    add("--tokenizer-path", default=None)
    add("--host", default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    add("--max-running-requests", type=int, default=None)
    add("--enable-metrics", action="store_true")
    add("--speculative-algorithm", default=None)
    add(
        "--speculative-draft-model-path",
        "--speculative-draft-model",
        dest="speculative_draft_model_path",
        default=None,
    )
    add("--speculative-num-steps", type=int, default=None)
    add("--speculative-eagle-topk", type=int, default=None)
    add("--speculative-num-draft-tokens", type=int, default=None)
    add("--speculative-adaptive", action="store_true")
    add("--speculative-adaptive-config", default=None)
    add("--cuda-graph-bs-decode", type=int, nargs="+", default=None)
    add("--cuda-graph-max-bs-decode", type=int, default=None)
    add("--cuda-graph-max-bs-prefill", type=int, default=None)
    add("--chunked-prefill-size", type=int, default=None)
    add("--random-seed", type=int, default=None)
    add("--log-level", default="info")
    add("--served-model-name", default=None)
    add("--skip-server-warmup", action="store_true")
    add("--mem-fraction-static", type=float, default=None)
    add("--trust-remote-code", action="store_true")
    add("--load-format", default="auto")
    add("--context-length", type=int, default=None)
    add("--decode-log-interval", type=int, default=40)
    # Real SGLang flags that change nothing in the model; accepted so a harness can pass them.
    for flag in (
        "--dtype",
        "--attention-backend",
        "--page-size",
        "--kv-cache-dtype",
        "--watchdog-timeout",
        "--speculative-draft-load-format",
    ):
        add(flag, default=None, help="accepted; no effect in the simulator")
    add("--disable-radix-cache", action="store_true", help="no prefix cache")
    add(
        "--enable-cache-report",
        action="store_true",
        help="report usage.prompt_tokens_details.cached_tokens in OpenAI responses",
    )
    for flag in ("--disable-cuda-graph", "--disable-overlap-schedule"):
        add(flag, action="store_true", help="accepted; no effect in the simulator")

    sim = parser.add_argument_group("simulation (specbench only)")
    sim.add_argument(
        "--sim-profile",
        default=DEFAULT_PROFILE,
        help="bundled profile name or path to a profile TOML",
    )
    sim.add_argument(
        "--sim-time-scale",
        type=_positive_float,
        default=1.0,
        help="S > 1 runs faster than real time: real sleep = model time / S",
    )
    sim.add_argument(
        "--sim-seed",
        type=int,
        default=0,
        help="seed of output lengths, acceptance and text (same across modes)",
    )
    sim.add_argument("--sim-crash-after-requests", type=int, default=None)
    sim.add_argument("--sim-crash-after-s", type=_non_negative_float, default=None)
    sim.add_argument("--sim-error-rate", type=_rate, default=0.0)
    sim.add_argument("--sim-truncate-rate", type=_rate, default=0.0)
    sim.add_argument("--sim-malformed-rate", type=_rate, default=0.0)
    sim.add_argument("--sim-stall-after-tokens", type=int, default=None)
    sim.add_argument("--sim-stall-s", type=_non_negative_float, default=0.0)
    sim.add_argument("--sim-slow-start-s", type=_non_negative_float, default=0.0)
    sim.add_argument("--sim-fail-start", default=None, metavar="LINE")
    sim.add_argument("--sim-cap-running", type=int, default=None)
    return parser


def load_adaptive_config(path: str | None) -> tuple[SlotConfig, ...]:
    """Read SGLang's adaptive JSON: digit keys are slots; other top-level keys are defaults.

    Only `candidate_steps` is validated (non-empty list of ints >= 0), as in SGLang; anything
    wrong raises ValueError with SGLang-like wording.
    """
    if path is None:
        raw: Any = DEFAULT_ADAPTIVE_CONFIG
    else:
        try:
            raw = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"[Errno 2] No such file or directory: {path!r}") from None
    if not isinstance(raw, dict):
        raise ValueError(
            f"Adaptive speculative config must be a JSON object, got {type(raw).__name__}"
        )
    defaults = {k: v for k, v in raw.items() if not str(k).isdigit()}
    slots: list[SlotConfig] = []
    for key, entry in raw.items():
        if not str(key).isdigit():
            continue
        if not isinstance(entry, dict):
            raise ValueError(f"Adaptive config slot {key!r} must be an object with candidate_steps")
        merged = {**ADAPTIVE_SLOT_DEFAULTS, **defaults, **entry}
        steps = merged.get("candidate_steps")
        if (
            not isinstance(steps, list)
            or not steps
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps)
        ):
            raise ValueError(
                f"Adaptive config slot {key!r}: candidate_steps must be a non-empty list of "
                f"ints >= 0, got {steps!r}"
            )
        slots.append(
            SlotConfig(
                key=int(key),
                candidate_steps=tuple(sorted(set(steps))),
                ema_alpha=float(merged["ema_alpha"]),
                update_interval=max(1, int(merged["update_interval"])),
                warmup_batches=int(merged["warmup_batches"]),
                down_hysteresis=float(merged["down_hysteresis"]),
                up_hysteresis=float(merged["up_hysteresis"]),
                ceiling_coeff=float(merged["ceiling_coeff"]),
            )
        )
    if not slots:
        raise ValueError(
            'Adaptive speculative config has no batch-size slot (digit keys such as "1")'
        )
    return tuple(sorted(slots, key=lambda s: s.key))


def _auto_spec_params(profile: Profile) -> tuple[int, int, int]:
    # SGLang picks (5, 4, 8) for Llama and Grok targets, (3, 1, 4) for everything else.
    if profile.architecture in ("LlamaForCausalLM", "Grok1ForCausalLM"):
        return 5, 4, 8
    return 3, 1, 4


def resolve(
    ns: argparse.Namespace,
    profile: Profile,
    env: dict[str, str] | None = None,
    argv: tuple[str, ...] = (),
) -> ServerSettings:
    """Apply SGLang 0.5.23's resolution rules to the parsed flags."""
    env = dict(os.environ) if env is None else env
    log: list[tuple[str, str]] = []
    algo = ns.speculative_algorithm.upper() if ns.speculative_algorithm else None
    if algo == "NEXTN":
        algo = "EAGLE"
    if algo is not None and algo not in EAGLE_FAMILY:
        if algo in SPEC_ALGORITHMS:
            raise StartupError(
                2,
                f"specbench.sim: --speculative-algorithm {algo} is not modelled; "
                "use EAGLE or EAGLE3 (or a real SGLang server)",
            )
        raise StartupError(
            2,
            "error: argument --speculative-algorithm: invalid choice: "
            f"{ns.speculative_algorithm!r} (choose from {', '.join(SPEC_ALGORITHMS)})",
        )
    steps = ns.speculative_num_steps
    topk = ns.speculative_eagle_topk
    draft_tokens = ns.speculative_num_draft_tokens
    adaptive = bool(ns.speculative_adaptive)
    slots: tuple[SlotConfig, ...] = ()
    max_running = ns.max_running_requests

    if algo is None:
        if adaptive:
            log.append(
                (
                    "warning",
                    "speculative_adaptive disabled: speculative decoding is off. "
                    "Falling back to static speculative params.",
                )
            )
            adaptive = False
        steps = topk = draft_tokens = None
    else:
        if not ns.speculative_draft_model_path:
            raise StartupError(
                1,
                f"ValueError: --speculative-draft-model-path is required for "
                f"--speculative-algorithm {algo}",
            )
        # 1. The adaptive block runs before the per-algorithm handler.
        if adaptive and topk is not None and topk != 1:
            log.append(
                (
                    "warning",
                    f"speculative_adaptive disabled: speculative_eagle_topk={topk} is not "
                    "supported (adaptive requires topk == 1). "
                    "Falling back to static speculative params.",
                )
            )
            adaptive = False
        if adaptive:
            try:
                slots = load_adaptive_config(ns.speculative_adaptive_config)
            except (ValueError, FileNotFoundError) as exc:
                raise StartupError(1, f"{type(exc).__name__}: {exc}") from None
            union = sorted({s for slot in slots for s in slot.candidate_steps})
            topk = 1
            if steps is None:
                steps = union[len(union) // 2]
            elif steps not in union:
                raise StartupError(
                    1,
                    f"ValueError: --speculative-num-steps={steps} is not in the adaptive config "
                    f"candidate_steps {union}",
                )
            draft_tokens = steps + 1
        # 2. The EAGLE family caps the batch when the user did not choose.
        if max_running is None:
            max_running = 48
            log.append(
                (
                    "info",
                    "Max running requests is reset to 48 for speculative decoding. You can "
                    "override this by explicitly setting --max-running-requests.",
                )
            )
        # 3. Auto choice when nothing is given (static only).
        if not adaptive and steps is None:
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
            steps, topk, draft_tokens = _auto_spec_params(profile)
            log.append(
                (
                    "info",
                    f"Auto-chosen speculative params: num_steps={steps}, eagle_topk={topk}, "
                    f"num_draft_tokens={draft_tokens}",
                )
            )
        if topk is None:
            topk = 1
        # 4. A chain (topk 1) verifies exactly steps + 1 tokens.
        if topk == 1 and draft_tokens != steps + 1:
            if draft_tokens is not None:
                log.append(
                    (
                        "warning",
                        f"speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 = "
                        f"{steps + 1} because speculative_eagle_topk == 1 (was {draft_tokens}).",
                    )
                )
            draft_tokens = steps + 1
        if draft_tokens is None:
            draft_tokens = steps + 1
    if max_running is None:
        max_running = profile.memory.default_max_running_requests

    for name, value in (("--max-running-requests", max_running), ("--port", ns.port)):
        if value is not None and value <= 0:
            raise StartupError(2, f"specbench.sim: {name} must be positive, got {value}")
    if ns.cuda_graph_bs_decode is not None and any(b <= 0 for b in ns.cuda_graph_bs_decode):
        raise StartupError(2, "specbench.sim: --cuda-graph-bs-decode sizes must be positive")

    faults = FaultOptions(
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
    ignored = tuple(
        flag
        for flag, value in (
            ("--dtype", ns.dtype),
            ("--attention-backend", ns.attention_backend),
            ("--page-size", ns.page_size),
            ("--kv-cache-dtype", ns.kv_cache_dtype),
            ("--watchdog-timeout", ns.watchdog_timeout),
            ("--speculative-draft-load-format", ns.speculative_draft_load_format),
            ("--disable-cuda-graph", ns.disable_cuda_graph or None),
            ("--disable-overlap-schedule", ns.disable_overlap_schedule or None),
        )
        if value is not None
    )
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
        speculative_algorithm=algo,
        speculative_draft_model_path=ns.speculative_draft_model_path if algo else None,
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft_tokens,
        speculative_adaptive=adaptive,
        speculative_adaptive_config=ns.speculative_adaptive_config,
        adaptive_slots=slots,
        cuda_graph_bs_decode=tuple(sorted(set(ns.cuda_graph_bs_decode)))
        if ns.cuda_graph_bs_decode
        else None,
        cuda_graph_max_bs_decode=ns.cuda_graph_max_bs_decode,
        cuda_graph_max_bs_prefill=ns.cuda_graph_max_bs_prefill,
        skip_zero_step_draft_extend=env.get(SKIP_ZERO_STEP_ENV, "").lower() in ("1", "true"),
        sim_profile=ns.sim_profile,
        sim_time_scale=ns.sim_time_scale,
        sim_seed=ns.sim_seed,
        faults=faults,
        disable_radix_cache=bool(ns.disable_radix_cache),
        enable_cache_report=bool(ns.enable_cache_report),
        argv=argv,
        ignored_flags=ignored,
        startup_log=tuple(log),
    )
