"""Start-up failure diagnosis: a failed server's log turned into one message.

When a server dies during start-up the user gets what happened, what to do, the log path and
the last log lines instead of a 400-line traceback. The patterns are SGLang 0.5.23's own
failure lines (and a few from the libraries it loads); the contract tests check that each
`sglang_text` still occurs in the installed wheel.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


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
        "model_not_a_model",
        r"(?P<detail>Unrecognized model in (?P<path>\S+?)\. Should have a `model_type` key.*)$",
        "a model path holds no model SGLang can load ({detail})",
        "point --model-path / --draft-model-path at a directory with the model's config.json "
        "(with its model_type) and weights; for EAGLE-3 that is the draft head's own directory",
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
        r"(?P<detail>Loaded weights leave no GPU memory for the KV cache under "
        r"--mem-fraction-static=\S+ Raise --mem-fraction-static above [0-9.]+)",
        "no GPU memory was left for the KV cache after loading the weights; SGLang says: "
        "{detail}",
        "pass a larger --mem-fraction-static (--server-arg '--mem-fraction-static 0.85'), "
        "or spread the model over more GPUs with --tp-size",
        "Loaded weights leave no GPU memory for the KV cache under ",
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
        "prefill_cuda_graph_capture",
        r"Capture prefill CUDA graph failed: ?(?P<detail>.*)$",
        "prefill CUDA graph capture failed ({detail})",
        "disable prefill graphs with --cuda-graph-backend-prefill=disabled or cap them with "
        "--cuda-graph-max-bs-prefill, or lower --mem-fraction-static (e.g. 0.8)",
        "Capture prefill CUDA graph failed",
    ),
    _rule(
        # FlashInfer's workspace is a fixed buffer (SGLang's default 384 MiB), not part of
        # --mem-fraction-static: a verify of many requests x draft tokens can outgrow it while
        # the decode graphs are captured, and lowering the memory fraction does not help.
        "flashinfer_workspace",
        r"(?P<detail>Buffer overflow when allocating memory for \S+ with size (?P<size>\d+)"
        r".*only (?P<available>\d+) bytes available)",
        "FlashInfer's workspace buffer is too small for the largest captured batch "
        "(asked for {size} bytes, {available} available)",
        "export SGLANG_FLASHINFER_WORKSPACE_SIZE=<bytes above the size asked for, e.g. "
        "1073741824> before specbench starts the server, or lower --max-running-requests "
        "(the largest level) or --cuda-graph-max-bs-decode",
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
        r"(?P<detail>Subprocess \S+ \(pid=\d+\) crashed with exit code -?\d+)",
        "an SGLang worker process died ({detail})",
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
        summary = rule.summary.format(**{
            **groups, "detail": detail or "no detail", "exception": f" ({cause})" if cause else ""
        })
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
