"""Real SGLang: the launch command, version and GPU probes, /server_info checks, failure diagnosis.

The sweep launches ``server_command(server) + build_argv(...)`` (argv.py is the one flag
builder) and then needs three things this module provides:

* **Facts for the manifest**: :func:`sglang_version` (without importing SGLang into this
  process: importing it pulls in torch and CUDA) and :func:`gpu_info` (``nvidia-smi``).
* **Verification** (:func:`check_server_info`): SGLang resolves flags in ways a harness cannot
  see from the command line. It caps speculative servers at 48 running requests unless
  ``--max-running-requests`` is given, forces draft tokens to steps + 1 when topk is 1, and
  falls back *silently* from ``--speculative-adaptive`` to static steps (topk != 1, DP
  attention, two-batch overlap, PDMux, multi-layer EAGLE). ``GET /server_info`` returns the
  resolved values at the top level (the same keys as the flags, with underscores) plus
  ``internal_states[i]`` per data-parallel rank; each mismatch becomes one line that names the
  flag and the fix. The simulated server serves the same shape, so these checks serve both
  engines; :func:`detect_mode` classifies an attached server.
* **Diagnosis** (:func:`diagnose_failure`, :func:`format_failure`): when a server dies during
  start-up the user gets one message (what happened, what to do, the log path, the last log
  lines) instead of a 400-line traceback. The patterns are SGLang 0.5.23's own failure lines
  (shared/reference/sglang-0.5.23.md §3 "Failure messages to match"); the contract tests check
  that each ``sglang_text`` still occurs in the installed wheel.

Zero-step slots and ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND``
----------------------------------------------------------------
The dynamic-disable server stops drafting at batch size >= T through an adaptive slot with
``candidate_steps: [0]``. In SGLang 0.5.23 a zero-step batch is *not* a plain decode: it runs
the target's verify path with a one-token tree and, by default, a draft-model extend forward
on every step so that the draft's KV cache stays warm. ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1``
skips that extend (``ServerConfig.skip_zero_step_draft_extend``; ``argv.server_env`` sets it in
dynamic mode only). The trade-off:

* on: every step above T is cheaper (no draft forward), so the dynamic curve sits closer to
  the baseline at high load;
* off (SGLang's default): when the batch shrinks below T again, the draft resumes from a warm
  cache; with the extend skipped, the draft has not seen the tokens generated meanwhile and its
  first proposals after re-enabling are accepted less often.

Leave it off when the load crosses T often (bursty traffic); turn it on when the server spends
long stretches above T. Either way the manifest records the environment of each server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.config import ConfigError, ServerConfig

DEFAULT_SERVER_COMMAND: tuple[str, ...] = ("python", "-m", "sglang.launch_server")
# SGLang accepts EAGLE3 case-insensitively and maps NEXTN to EAGLE; specbench asks for EAGLE3.
_EAGLE_ALGORITHMS = ("EAGLE3",)
_PYTHON_NAMES = ("python", "python3")


# ---------------------------------------------------------------------------------------------
# Launch command and environment facts.


def server_command(server: ServerConfig) -> list[str]:
    """The program part of the launch command (the argv from argv.build_argv follows it).

    A leading ``python``/``python3`` becomes this interpreter (``sys.executable``), so the
    server runs in the environment where specbench found SGLang rather than whatever ``python``
    is first on PATH. ``sglang serve`` probes the Hugging Face hub for a diffusion model unless
    told the model type, a network attempt on every launch: ``--model-type llm`` is added
    there (it is the launcher's own flag, stripped before SGLang's server flags are parsed).
    """
    command = list(server.server_command) or list(DEFAULT_SERVER_COMMAND)
    if command[0] in _PYTHON_NAMES:
        command[0] = sys.executable
    is_sglang_serve = (
        len(command) >= 2 and Path(command[-2]).name == "sglang" and command[-1] == "serve"
    )
    if is_sglang_serve and not any(a.startswith("--model-type") for a in command):
        command += ["--model-type", "llm"]
    return command


def launch_command(
    mode: str,
    server: ServerConfig,
    *,
    port: int,
    max_running_requests: int,
    adaptive_config_path: Path | None = None,
) -> list[str]:
    """The full command line of one mode's real SGLang server."""
    from specbench.engines.argv import build_argv

    return [
        *server_command(server),
        *build_argv(
            mode,
            server,
            port=port,
            max_running_requests=max_running_requests,
            adaptive_config_path=adaptive_config_path,
        ),
    ]


_VERSION_SCRIPT = (
    "import importlib.metadata as m\n"
    "try:\n"
    "    print(m.version('sglang'))\n"
    "except m.PackageNotFoundError:\n"
    "    import sglang\n"  # a source checkout on PYTHONPATH has no metadata
    "    print(sglang.__version__)\n"
)


def sglang_version(python: str | None = None, timeout_s: float = 60.0) -> str | None:
    """SGLang's version as seen by interpreter `python` (default: this one); None if absent.

    Asked in a subprocess because the server runs under that interpreter, and because
    importing SGLang here would drag torch (and CUDA initialisation) into specbench.
    """
    try:
        done = subprocess.run(
            [python or sys.executable, "-c", _VERSION_SCRIPT],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return None
    return lines[-1].strip() or None


def gpu_info(timeout_s: float = 20.0) -> list[dict[str, Any]] | None:
    """One dict per GPU from ``nvidia-smi`` (name, memory_total_mib, driver_version).

    None when nvidia-smi is missing or fails (no driver): the manifest then says "no GPU seen"
    rather than guessing.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run(
            [
                exe,
                "--query-gpu=index,name,memory.total,driver_version",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    gpus: list[dict[str, Any]] = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4:
            continue
        index, name, memory, driver = parts[0], ", ".join(parts[1:-2]), parts[-2], parts[-1]
        gpus.append(
            {
                "index": int(index) if index.isdigit() else index,
                "name": name,
                "memory_total_mib": int(memory) if memory.isdigit() else None,
                "driver_version": driver,
            }
        )
    return gpus


# ---------------------------------------------------------------------------------------------
# /server_info verification.


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
    speculative_eagle_topk: int = 1
    speculative_num_draft_tokens: int | None = None  # None: steps + 1 (forced by topk 1)

    @property
    def draft_tokens(self) -> int:
        if self.speculative_num_draft_tokens is not None:
            return self.speculative_num_draft_tokens
        return self.speculative_num_steps + 1


def _algorithm(info: dict[str, Any]) -> str | None:
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


def detect_mode(info: dict[str, Any]) -> str:
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
    batch size (reference §2 "Routing a batch to a slot").
    """
    if not cuda_graph_bs:
        return threshold
    sizes = sorted(set(cuda_graph_bs))
    if threshold > sizes[-1]:
        return threshold  # batches above the largest captured size are not padded
    below = [c for c in sizes if c < threshold]
    return below[-1] + 1 if below else 1


def routing_from_adaptive_config(config: dict[str, Any]) -> tuple[int | None, int | None]:
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


def _capacity(info: dict[str, Any]) -> tuple[int | None, int | None]:
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


def check_server_info(info: dict[str, Any], expected: Expected) -> list[str]:
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
    info: dict[str, Any], expected: Expected, algorithm: str | None
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
    return problems


def _check_threshold(info: dict[str, Any], expected: Expected) -> list[str]:
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
    config_path = Path(str(path))
    if config_path.is_file():  # an attached server's path may be on another machine
        try:
            config = json.loads(config_path.read_text())
        except (OSError, json.JSONDecodeError):
            config = None
        if isinstance(config, dict):
            steps, found = routing_from_adaptive_config(config)
            want_steps = expected.speculative_num_steps
            # with T = 1 no batch ever drafts, so the steps below T do not matter
            if found != threshold or (threshold > 1 and steps != want_steps):
                problems.append(
                    f"the dynamic server's adaptive config {config_path} routes "
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


def _check_capacity(info: dict[str, Any], expected: Expected) -> list[str]:
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


# ---------------------------------------------------------------------------------------------
# Start-up failure diagnosis.


@dataclass(frozen=True)
class Diagnosis:
    """What a failed server's log says: a kind (stable, for code), a summary and a fix."""

    kind: str
    summary: str
    hint: str
    evidence: str = ""  # the log line that matched


@dataclass(frozen=True)
class FailureRule:
    """One recognisable failure. `sglang_text` is the literal SGLang 0.5.23 prints (checked
    against the installed wheel by the contract tests); None for text from other libraries."""

    kind: str
    pattern: re.Pattern[str]
    summary: str
    hint: str
    sglang_text: str | None = None


def _rule(
    kind: str, pattern: str, summary: str, hint: str, sglang_text: str | None = None
) -> FailureRule:
    return FailureRule(kind, re.compile(pattern, re.IGNORECASE | re.MULTILINE), summary, hint,
                       sglang_text)


# Ordered by specificity: a log often holds several of these lines (a capture failure is
# followed by "Scheduler hit an exception" and "Initialization failed"), and the first rule
# that matches anywhere names the root cause.
FAILURE_RULES: tuple[FailureRule, ...] = (
    _rule(
        "bad_argument",
        r"error: ambiguous option: (?P<detail>.+)$",
        "SGLang rejected an abbreviated flag (ambiguous option: {detail})",
        "spell the flag in full as SGLang 0.5.23 names it (e.g. --cuda-graph-max-bs-decode, "
        "not --cuda-graph-max-bs); argparse accepts a prefix only when it is unique",
    ),
    _rule(
        "bad_argument",
        r"error: unrecognized arguments: (?P<detail>.+)$",
        "SGLang does not know these flags: {detail}",
        "remove them from the server's extra args or fix their spelling; "
        "`python -m sglang.launch_server --help` lists the flags of the installed version",
    ),
    _rule(
        "bad_argument",
        r"error: (?P<detail>argument --\S+.*)$",
        "SGLang rejected a flag value ({detail})",
        "fix that flag's value in the server's extra args or the specbench config",
    ),
    _rule(
        "bad_argument",
        r"(?P<detail>--speculative-num-steps=\d+ is not in the adaptive config candidate_steps.*)$",
        "SGLang refused the adaptive config: {detail}",
        "use a --speculative-num-steps value that appears in the adaptive config "
        "(specbench writes its config with the same K)",
        "is not in the adaptive config candidate_steps",
    ),
    _rule(
        "bad_argument",
        r"(?P<detail>(candidate_steps must be a list of non-negative ints|"
        r"speculative_adaptive_config must contain at least one integer-string).*)$",
        "SGLang refused the adaptive config: {detail}",
        "write the config with `specbench threshold RUN_DIR --write-adaptive-config FILE`: "
        'keys are batch sizes, e.g. {{"1": {{"candidate_steps": [3]}}, "32": '
        '{{"candidate_steps": [0]}}}}',
        "candidate_steps must be a list of non-negative ints",
    ),
    _rule(
        "model_access_denied",
        r"(?P<detail>.*(gated repo|Access to model .* is restricted|401 Client Error).*)$",
        "the model repository refused access ({detail})",
        "accept the model's licence on its hub page and export HF_TOKEN, or point "
        "--model-path / --speculative-draft-model-path at a local copy",
    ),
    _rule(
        "model_not_found",
        r"(?P<detail>.*(does not appear to have a file named|Repository Not Found|"
        r"is not a local folder|is not a valid model identifier|HFValidationError|"
        r"LocalEntryNotFoundError|We couldn't connect to|Can't load the configuration of).*)$",
        "a model could not be found or downloaded ({detail})",
        "check --model-path and --speculative-draft-model-path: each must be a local "
        "directory with config.json and weights, or a hub id this machine can download "
        "(pre-download with `huggingface-cli download` where there is no internet)",
    ),
    _rule(
        "no_gpu",
        r"(?P<detail>.*(No CUDA GPUs are available|Found no NVIDIA driver|"
        r"Torch not compiled with CUDA enabled|no CUDA-capable device is detected|"
        r"CUDA driver version is insufficient|NVIDIA-SMI has failed).*)$",
        "SGLang found no usable NVIDIA GPU ({detail})",
        "run on a machine with a GPU and a CUDA build of torch (check `nvidia-smi` and "
        "CUDA_VISIBLE_DEVICES), or use --engine sim for the simulated server",
    ),
    _rule(
        "kv_cache_memory",
        r"(?P<detail>Not enough memory\. Please try to increase --mem-fraction-static.*)$",
        "no GPU memory was left for the KV cache after loading the weights ({detail})",
        "raise --mem-fraction-static (e.g. 0.9), or spread the model over more GPUs with "
        "--tp-size; the draft model's weights count too",
        "Not enough memory. Please try to increase --mem-fraction-static",
    ),
    _rule(
        "cuda_graph_capture",
        r"Capture cuda graph failed: ?(?P<detail>.*)$",
        "CUDA graph capture failed ({detail})",
        "lower --mem-fraction-static (e.g. 0.8) to leave room for the graphs, or cap them "
        "with --cuda-graph-max-bs-decode (there is no --cuda-graph-max-bs in 0.5.23); "
        "disabling decode graphs would distort the benchmark",
        "Capture cuda graph failed",
    ),
    _rule(
        "cuda_oom",
        r"(?P<detail>.*(CUDA out of memory|OutOfMemoryError).*)$",
        "the GPU ran out of memory ({detail})",
        "lower --mem-fraction-static to leave room for activations, or lower "
        "--max-running-requests / --chunked-prefill-size",
    ),
    _rule(
        "host_oom",
        r"(?P<detail>.*scheduler died during initialization \(exit code: -9\).*)$",
        "a scheduler process was killed during start-up, most likely by the OS "
        "out-of-memory killer ({detail})",
        "check `dmesg -T | grep -i oom`; free host memory (other servers, page cache of "
        "huge checkpoints) or load fewer models at once",
        "scheduler died during initialization",
    ),
    _rule(
        "scheduler_died",
        r"(?P<detail>.*scheduler died during initialization.*)$",
        "a scheduler process died during start-up ({detail})",
        "read the lines above it in the log for the cause (driver, NCCL or memory errors)",
        "scheduler died during initialization",
    ),
    _rule(
        "port_in_use",
        r"(?P<detail>.*(\[Errno 98\]|address already in use|Port is already in use).*)$",
        "the server's port is already taken ({detail})",
        "pass another --port or stop the process listening there (`ss -ltnp` shows it); "
        "SGLang binds the port only after loading the model, so it fails late",
    ),
    _rule(
        "watchdog_timeout",
        r"(?P<detail>.*watchdog timeout.*)$",
        "a server step hung and SGLang's watchdog stopped the server ({detail})",
        "look above in the log for NCCL or driver errors; raise --watchdog-timeout (default "
        "300 s) only if single steps are legitimately that slow",
        "watchdog timeout",
    ),
    _rule(
        "subprocess_crashed",
        r"(?P<detail>.*Subprocess .* crashed with exit code.*)$",
        "an SGLang worker process crashed ({detail})",
        "read the log above that line for the crash (often NCCL or a CUDA error)",
        "Subprocess {name} (pid={proc.pid}) crashed",
    ),
    _rule(
        "warmup_failed",
        r"Initialization failed\. warmup error",
        "the server loaded but its warm-up request failed{exception}",
        "read the traceback in the log; the first request exercises the whole decode path "
        "(attention backend, CUDA graphs, speculative steps)",
        "Initialization failed. warmup error",
    ),
    _rule(
        "scheduler_exception",
        r"Scheduler hit an exception",
        "the scheduler raised an exception{exception}",
        "read the traceback in the log; if it names a flag, fix that flag in the server's "
        "extra args",
        "Scheduler hit an exception",
    ),
    _rule(
        "initialization_failed",
        r"Initialization failed",
        "SGLang failed to initialise{exception}",
        "read the error messages above that line in the log",
        "Initialization failed",
    ),
)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_EXCEPTION_LINE = re.compile(
    r"^\s*(?:[\w.]+\.)?(?P<name>[A-Z]\w*(?:Error|Exception|Exit))(?::\s*(?P<msg>.*))?$",
    re.MULTILINE,
)
_MAX_DETAIL = 240
# "[2026-11-29 10:00:00 TP0] " (SGLang's logger) and "ERROR:    " (uvicorn's) say nothing.
_LINE_PREFIX = re.compile(r"^\s*(\[[^\]]*\]\s*)?((ERROR|WARNING|INFO|CRITICAL):\s*)?")


def _short(text: str) -> str:
    text = " ".join(_LINE_PREFIX.sub("", text).split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


def _exception_after(text: str, start: int) -> str:
    """The first 'SomeError: message' line after `start` (the cause behind a generic line)."""
    for match in _EXCEPTION_LINE.finditer(text, start):
        msg = (match.group("msg") or "").strip()
        name = match.group("name")
        if "Initialization failed" in msg:
            continue  # SGLang's own generic wrapper, not the cause
        return _short(f"{name}: {msg}" if msg else name)
    return ""


def diagnose_failure(log_text: str) -> Diagnosis | None:
    """Recognise why an SGLang server failed from its log; None when no known line is found."""
    text = _ANSI.sub("", log_text)
    for rule in FAILURE_RULES:
        match = rule.pattern.search(text)
        if match is None:
            continue
        groups = match.groupdict()
        detail = _short(groups.get("detail") or "")
        cause = _exception_after(text, match.end())
        summary = rule.summary.format(
            detail=detail or "no detail", exception=f" ({cause})" if cause else ""
        )
        if "{detail}" in rule.summary and not detail:
            summary = summary.replace(" (no detail)", "")
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        evidence = _short(text[line_start : line_end if line_end != -1 else len(text)])
        return Diagnosis(rule.kind, summary, rule.hint.format(), evidence)
    return None


_ADAPTIVE_FALLBACK = re.compile(r"speculative_adaptive disabled: (?P<reason>.+?)\. Falling back")


def adaptive_fallback_reason(log_text: str) -> str | None:
    """Why SGLang silently dropped --speculative-adaptive, from its log line; None if it did not."""
    match = _ADAPTIVE_FALLBACK.search(_ANSI.sub("", log_text))
    return match.group("reason") if match else None


def format_failure(
    diag: Diagnosis | None, log_path: Path | str, tail_lines: Sequence[str] | int = 10
) -> str:
    """The one message a user sees: cause; fix, then the log path and its last lines.

    `tail_lines` is either the lines to show or how many lines to read from the end of the log.
    The first line stands on its own (the sweep prefixes it with the server's name).
    """
    if isinstance(tail_lines, int):
        lines = read_tail(Path(log_path), tail_lines)
    else:
        lines = [_ANSI.sub("", line) for line in tail_lines]
    if diag is None:
        head = "it stopped without a failure line specbench recognises; read the log"
    else:
        head = f"{diag.summary}; {diag.hint}"
    parts = [head, f"log: {log_path}"]
    shown = [line.rstrip() for line in lines if line.strip()]
    if shown:
        parts.append("last lines of the log:")
        parts += [f"  {line}" for line in shown]
    return "\n".join(parts)


def read_tail(log_path: Path, max_lines: int = 30, max_bytes: int = 256 * 1024) -> list[str]:
    """The last `max_lines` lines of a (possibly huge) log, reading only its end."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if len(data) == max_bytes and lines:
        lines = lines[1:]  # the first line is probably cut
    return lines[-max_lines:] if max_lines > 0 else []


def explain_failure(log_path: Path, tail_count: int = 15) -> str:
    """Read a failed server's log and return the one message (diagnosis, log path, tail)."""
    text = "\n".join(read_tail(log_path, max_lines=2000, max_bytes=2 * 1024 * 1024))
    return format_failure(diagnose_failure(text), log_path, text.splitlines()[-tail_count:])
