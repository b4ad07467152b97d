"""engines/sglang.py without SGLang: failure diagnosis, the failure message, /server_info checks.

The log snippets are SGLang 0.5.23's own failure lines (reference §3, and the contract tests
check that each literal still occurs in the wheel); the /server_info dicts have SGLang's shape:
resolved flags at the top level plus `internal_states` per data-parallel rank.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from specbench import config, fingerprint
from specbench.config import ConfigError, ServerConfig
from specbench.configurations import Schedule
from specbench.engines import argv as argv_mod
from specbench.engines import diagnose
from specbench.engines import server_info as si
from specbench.engines import sglang as sg
from specbench.engines.process import free_port

PREFIX = "[2026-11-29 10:00:00 TP0] "

# --------------------------------------------------------------------------------------------
# diagnose_failure


FAILURE_LOGS: list[tuple[str, str, list[str]]] = [
    (
        "usage: sglang serve [-h] --model-path MODEL_PATH ...\n"
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill\n",
        "bad_argument",
        ["--cuda-graph-max-bs could match", "--cuda-graph-max-bs-decode"],
    ),
    (
        "usage: sglang serve [-h] ...\nsglang serve: error: unrecognized arguments: --foo 3\n",
        "bad_argument",
        ["--foo 3", "--help"],
    ),
    (
        "sglang serve: error: argument --port: invalid int value: 'abc'\n",
        "bad_argument",
        ["--port", "invalid int value"],
    ),
    (
        PREFIX + "Load weight begin.\n"
        "Traceback (most recent call last):\n"
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.5\n"
        + PREFIX + "Scheduler hit an exception: Traceback (most recent call last):\n"
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
        + PREFIX + "Initialization failed. Please see the error messages above.\n",
        "kv_cache_memory",
        ["KV cache", "mem_fraction_static=0.5", "raise --mem-fraction-static"],
    ),
    (
        PREFIX + "Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "decode_cuda_graph_runner.py", line 603, in __init__\n'
        "Exception: Capture cuda graph failed: CUDA error: out of memory\n"
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        + PREFIX + "Initialization failed. Please see the error messages above.\n",
        "cuda_graph_capture",
        ["CUDA error: out of memory", "--cuda-graph-max-bs-decode", "lower --mem-fraction-static"],
    ),
    (
        PREFIX + "Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "prefill_cuda_graph_runner.py", line 520, in capture\n'
        "Exception: Capture prefill CUDA graph failed: CUDA error: out of memory\n"
        + PREFIX + "Initialization failed. Please see the error messages above.\n",
        "prefill_cuda_graph_capture",
        ["CUDA error: out of memory", "--cuda-graph-backend-prefill=disabled"],
    ),
    (
        PREFIX + "Scheduler hit an exception: Traceback (most recent call last):\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
        "cuda_oom",
        ["Tried to allocate 2.00 GiB", "--mem-fraction-static"],
    ),
    (
        "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit "
        "code is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i "
        "oom` to check.\n",
        "host_oom",
        ["out-of-memory killer", "dmesg"],
    ),
    (
        "RuntimeError: Rank 1 scheduler died during initialization (exit code: 1). If exit "
        "code is -9 (SIGKILL), a common cause is the OS OOM killer.\n",
        "scheduler_died",
        ["exit code: 1", "lines above"],
    ),
    (
        PREFIX + "The server is fired up\n"
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): "
        "address already in use\n",
        "port_in_use",
        ["30000", "another --port"],
    ),
    (
        PREFIX + "Initialization failed. Please see the error messages above.\n",
        "initialization_failed",
        ["failed to initialise", "above that line"],
    ),
    (
        PREFIX + "Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "scheduler.py", line 6360, in run_scheduler_process\n'
        "    scheduler.event_loop_overlap()\n"
        "ValueError: boom in the decode loop\n"
        + PREFIX + "Received sigquit from a child process. It usually means the child failed.\n",
        "scheduler_exception",
        ["ValueError: boom in the decode loop", "traceback"],
    ),
    (
        PREFIX + "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)\n",
        "watchdog_timeout",
        ["watchdog", "--watchdog-timeout"],
    ),
    (
        PREFIX + "Subprocess scheduler_0 (pid=4242) crashed with exit code -6. "
        "Triggering SIGQUIT for cleanup...\n",
        "subprocess_crashed",
        ["pid=4242", "exit code -6"],
    ),
    (
        PREFIX + "Initialization failed. warmup error: Traceback (most recent call last):\n"
        "AssertionError: page size mismatch\n",
        "warmup_failed",
        ["warm-up request failed", "AssertionError: page size mismatch"],
    ),
    (
        "OSError: /models/llama does not appear to have a file named config.json. Checkout "
        "'https://huggingface.co//models/llama/tree/None' for available files.\n",
        "model_not_found",
        ["config.json", "--model-path", "--speculative-draft-model-path"],
    ),
    (
        "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. "
        "Repository Not Found for url: https://huggingface.co/api/models/nobody/none.\n",
        "model_not_found",
        ["Repository Not Found", "--model-path"],
    ),
    (
        "OSError: nobody/none is not a local folder and is not a valid model identifier listed "
        "on 'https://huggingface.co/models'\n",
        "model_not_found",
        ["is not a local folder", "huggingface-cli download"],
    ),
    (
        "OSError: You are trying to access a gated repo.\n401 Client Error.\n",
        "model_access_denied",
        ["gated repo", "HF_TOKEN"],
    ),
    (
        "RuntimeError: No CUDA GPUs are available\n",
        "no_gpu",
        ["No CUDA GPUs are available", "--engine sim"],
    ),
    (
        "AssertionError: Torch not compiled with CUDA enabled\n",
        "no_gpu",
        ["Torch not compiled with CUDA enabled", "nvidia-smi"],
    ),
    (
        "ValueError: --speculative-num-steps=2 is not in the adaptive config candidate_steps "
        "[0, 3]\n",
        "bad_argument",
        ["--speculative-num-steps=2", "[0, 3]"],
    ),
    (
        "  File \"/site/transformers/models/auto/configuration_auto.py\", line 421\n"
        "ValueError: Unrecognized model in /models/empty-draft. Should have a `model_type` key "
        "in its config.json.\n",
        "model_not_a_model",
        ["/models/empty-draft", "--draft-model-path"],
    ),
    (
        # EAGLE-3 on FlashInfer with 250 running requests on an H100: the verify's temporary
        # buffer outgrows FlashInfer's fixed workspace while the decode graphs are captured.
        PREFIX + "Scheduler hit an exception: Traceback (most recent call last):\n"
        "Exception: Capture cuda graph failed: Error in function 'aligned_alloc' at "
        "flashinfer/allocator.h:71: Buffer overflow when allocating memory for "
        "batch_prefill_tmp_v with size 589299712 and alignment 16, but only 402653184 bytes "
        "available in AlignedAllocator. Increase the workspace buffer size.\n"
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        + PREFIX + "Initialization failed. Please see the error messages above.\n",
        "flashinfer_workspace",
        ["asked for 589299712 bytes, 402653184 available", "SGLANG_FLASHINFER_WORKSPACE_SIZE"],
    ),
]


@pytest.mark.parametrize(("log", "kind", "words"), FAILURE_LOGS,
                         ids=[f"{i}-{k}" for i, (_, k, _) in enumerate(FAILURE_LOGS)])
def test_diagnose_failure_recognises_each_sglang_failure(log: str, kind: str, words: list[str]):
    diag = diagnose.diagnose_failure(log)
    assert diag is not None
    assert diag.kind == kind
    shown = f"{diag.summary}; {diag.hint}"
    for word in words:
        assert word in shown, (word, shown)
    assert "\n" not in shown  # one line: cause and fix
    # the log line that matched, shortened around "..." where it is long
    assert diag.evidence and all(part in " ".join(log.split())
                                 for part in diag.evidence.split("..."))


def test_every_rule_kind_has_a_test_case():
    tested = {kind for _, kind, _ in FAILURE_LOGS}
    assert {rule.kind for rule in diagnose.FAILURE_RULES} == tested


def test_root_cause_wins_over_the_generic_lines_that_follow_it():
    # SGLang prints the capture failure, then the scheduler exception, then the engine's
    # generic "Initialization failed": the first one is what the user must fix.
    log = (
        PREFIX + "Capture cuda graph failed: CUDA error: out of memory\n"
        + PREFIX + "Scheduler hit an exception: ...\n"
        + PREFIX + "Initialization failed. Please see the error messages above.\n"
    )
    diag = diagnose.diagnose_failure(log)
    assert diag is not None and diag.kind == "cuda_graph_capture"


def test_colour_codes_do_not_hide_a_failure_line():
    log = "\x1b[31m[2026] Not enough memory. Please try to increase --mem-fraction-static.\x1b[0m"
    diag = diagnose.diagnose_failure(log)
    assert diag is not None and diag.kind == "kv_cache_memory"
    assert "\x1b" not in diag.summary + diag.evidence


def test_clean_start_up_log_has_no_diagnosis():
    log = (
        PREFIX + "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16\n"
        + PREFIX + "Capture cuda graph end. Time elapsed: 12.3 s\n"
        + PREFIX + "The server is fired up and ready to roll!\n"
    )
    assert diagnose.diagnose_failure(log) is None


def test_adaptive_fallback_reason_is_read_from_the_warning():
    log = (
        PREFIX + "speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 is "
        "supported). Falling back to static speculative params.\n"
    )
    assert diagnose.adaptive_fallback_reason(log) == (
        "speculative_eagle_topk=4 (only topk=1 is supported)"
    )
    assert diagnose.adaptive_fallback_reason(PREFIX + "all good\n") is None


# --------------------------------------------------------------------------------------------
# format_failure / read_tail / explain_failure


def test_format_failure_is_one_message_with_cause_fix_log_and_tail(tmp_path: Path):
    log_path = tmp_path / "servers" / "eagle3.log"
    log = FAILURE_LOGS[4][0]
    diag = diagnose.diagnose_failure(log)
    message = diagnose.format_failure(diag, log_path, log.splitlines()[-3:])
    lines = message.splitlines()
    assert lines[0].startswith("CUDA graph capture failed (CUDA error: out of memory); lower")
    assert "--cuda-graph-max-bs-decode" in lines[0]
    assert lines[1] == f"log: {log_path}"
    assert lines[2] == "last lines of the log:"
    assert lines[-1].endswith("Initialization failed. Please see the error messages above.")
    assert len(lines) == 3 + 3


def test_format_failure_without_a_diagnosis_still_points_at_the_log(tmp_path: Path):
    log_path = tmp_path / "baseline.log"
    log_path.write_text("line one\nsegmentation fault (core dumped)\n")
    message = diagnose.format_failure(None, log_path, 5)
    assert "read the log" in message.splitlines()[0]
    assert f"log: {log_path}" in message
    assert message.splitlines()[-1] == "  segmentation fault (core dumped)"


def test_read_tail_reads_only_the_end_of_a_big_log(tmp_path: Path):
    log_path = tmp_path / "big.log"
    log_path.write_text("".join(f"decode batch {i}\n" for i in range(200_000)))
    tail = diagnose.read_tail(log_path, max_lines=3, max_bytes=4096)
    assert tail == ["decode batch 199997", "decode batch 199998", "decode batch 199999"]
    assert diagnose.read_tail(tmp_path / "missing.log") == []


def test_explain_failure_reads_the_log_and_diagnoses_it(tmp_path: Path):
    log_path = tmp_path / "dynamic.log"
    log_path.write_text(
        "# specbench: launching dynamic\n" + "noise\n" * 50 + FAILURE_LOGS[9][0]
    )
    message = diagnose.explain_failure(log_path, tail_count=2)
    assert message.startswith("the server's port is already taken")
    assert f"log: {log_path}" in message
    assert "address already in use" in message.splitlines()[-1]


# --------------------------------------------------------------------------------------------
# check_server_info / detect_mode


def server_info(
    mode: str,
    *,
    steps: int = 3,
    max_running: int = 250,
    effective: int | None = None,
    adaptive_config: str | None = None,
) -> dict[str, Any]:
    """A /server_info of SGLang's shape (top-level resolved flags + internal_states)."""
    speculative = mode != "baseline"
    info: dict[str, Any] = {
        "model_path": "meta-llama/Llama-3.1-8B-Instruct",
        "max_running_requests": max_running,
        "speculative_algorithm": "EAGLE3" if speculative else None,
        "speculative_draft_model_path": "draft" if speculative else None,
        "speculative_num_steps": steps if speculative else None,
        "speculative_eagle_topk": 1 if speculative else None,
        "speculative_num_draft_tokens": steps + 1 if speculative else None,
        "speculative_adaptive": mode == "dynamic",
        "speculative_adaptive_config": adaptive_config,
        "cuda_graph_bs_decode": None,
        "dp_size": 1,
        "version": "0.5.23",
        "internal_states": [
            {
                "effective_max_running_requests_per_dp": (
                    max_running if effective is None else effective
                ),
                "last_gen_throughput": 0.0,
            }
        ],
    }
    return info


def expected(mode: str, **kw: Any) -> si.Expected:
    args: dict[str, Any] = {
        "mode": mode,
        "speculative_num_steps": 3,
        "max_running_requests": 250,
        "largest_concurrency": 250,
        "threshold": 32 if mode == "dynamic" else None,
    }
    args.update(kw)
    return si.Expected(**args)


@pytest.fixture
def dynamic_config(tmp_path: Path) -> str:
    path = tmp_path / "dynamic.adaptive.json"
    return str(argv_mod.write_adaptive_config(path, Schedule.from_threshold(3, 32)))


def test_each_mode_with_the_asked_settings_passes(dynamic_config: str):
    assert si.check_server_info(server_info("baseline"), expected("baseline")) == []
    assert si.check_server_info(server_info("eagle3"), expected("eagle3")) == []
    info = server_info("dynamic", adaptive_config=dynamic_config)
    assert si.check_server_info(info, expected("dynamic")) == []


def only_problem(info: dict[str, Any], exp: si.Expected) -> str:
    problems = si.check_server_info(info, exp)
    assert len(problems) == 1, problems
    assert "\n" not in problems[0]
    return problems[0]


def test_speculative_cap_of_48_is_reported_with_the_flag():
    problem = only_problem(server_info("eagle3", max_running=48), expected("eagle3"))
    assert "max_running_requests=48" in problem
    assert "--max-running-requests 250" in problem


def test_too_small_cap_for_the_sweep_in_attach_mode():
    exp = expected("eagle3", max_running_requests=None, largest_concurrency=128)
    problem = only_problem(server_info("eagle3", max_running=64), exp)
    assert "at most 64 requests" in problem and "up to 128" in problem
    assert "--max-running-requests 128" in problem
    assert si.check_server_info(server_info("eagle3", max_running=500), exp) == []


def test_kv_cache_too_small_for_the_concurrency_names_mem_fraction():
    problem = only_problem(server_info("baseline", effective=120), expected("baseline"))
    assert "only 120 running requests" in problem
    assert "--mem-fraction-static" in problem


def test_capacity_sums_data_parallel_ranks():
    info = server_info("baseline")
    info["internal_states"] = [{"effective_max_running_requests_per_dp": 125}] * 2
    assert si.check_server_info(info, expected("baseline")) == []


@pytest.mark.parametrize(
    ("key", "value", "flag"),
    [
        ("speculative_num_steps", 5, "--speculative-num-steps 3"),
        ("speculative_eagle_topk", 4, "--speculative-eagle-topk 1"),
        ("speculative_num_draft_tokens", 8, "--speculative-num-draft-tokens 4"),
    ],
)
def test_each_speculative_mismatch_names_its_flag(key: str, value: int, flag: str):
    info = server_info("eagle3")
    info[key] = value
    problem = only_problem(info, expected("eagle3"))
    assert f"{key}={value}" in problem and flag in problem


def test_silent_adaptive_fallback_is_caught(dynamic_config: str):
    info = server_info("dynamic", adaptive_config=dynamic_config)
    info["speculative_adaptive"] = False
    problem = only_problem(info, expected("dynamic"))
    assert "speculative_adaptive=false" in problem
    assert "speculative_adaptive disabled" in problem


def test_adaptive_eagle3_server_is_not_a_static_one():
    info = server_info("eagle3")
    info["speculative_adaptive"] = True
    assert "--speculative-adaptive" in only_problem(info, expected("eagle3"))


def test_baseline_that_speculates_is_reported():
    problem = only_problem(server_info("eagle3"), expected("baseline"))
    assert "speculative_algorithm=EAGLE3" in problem and "--speculative-algorithm" in problem


def test_missing_algorithm_is_one_problem_not_four():
    problem = only_problem(server_info("baseline"), expected("eagle3"))
    assert "--speculative-algorithm EAGLE3" in problem


def test_dynamic_server_with_another_threshold_in_its_config(tmp_path: Path):
    path = argv_mod.write_adaptive_config(tmp_path / "a.json", Schedule.from_threshold(3, 64))
    problem = only_problem(server_info("dynamic", adaptive_config=str(path)), expected("dynamic"))
    assert "below batch size 64" in problem and "below 32" in problem


def test_dynamic_server_without_a_config_uses_sglang_defaults():
    problem = only_problem(server_info("dynamic"), expected("dynamic"))
    assert "--speculative-adaptive-config" in problem


def test_capture_list_that_moves_the_threshold_is_reported(dynamic_config: str):
    info = server_info("dynamic", adaptive_config=dynamic_config)
    info["cuda_graph_bs_decode"] = [1, 2, 4, 8, 16, 24, 40, 64, 128, 256]
    problem = only_problem(info, expected("dynamic"))
    assert "from batch size 25, not 32" in problem and "add 31" in problem
    info["cuda_graph_bs_decode"] = [1, 2, 4, 8, 16, 24, 31, 32, 64, 128, 256]
    assert si.check_server_info(info, expected("dynamic")) == []


def test_an_unreadable_remote_config_path_is_not_a_problem():
    info = server_info("dynamic", adaptive_config="/elsewhere/on/the/cluster.json")
    assert si.check_server_info(info, expected("dynamic")) == []


def test_something_that_is_not_sglang_is_reported():
    problem = only_problem({"object": "list"}, expected("baseline"))
    assert "--max-running-requests 250" in problem


def test_detect_mode_classifies_attached_servers(dynamic_config: str):
    assert si.detect_mode(server_info("baseline")) == "baseline"
    assert si.detect_mode({"model_path": "m"}) == "baseline"
    assert si.detect_mode(server_info("eagle3")) == "eagle3"
    assert si.detect_mode({**server_info("eagle3"), "speculative_algorithm": "eagle3"}) == "eagle3"
    assert si.detect_mode(server_info("dynamic", adaptive_config=dynamic_config)) == "dynamic"
    with pytest.raises(ConfigError, match="speculative_algorithm=NGRAM"):
        si.detect_mode({"speculative_algorithm": "NGRAM"})


@pytest.mark.parametrize(
    ("threshold", "graph_bs", "effective"),
    [
        (32, None, 32),
        (32, [1, 2, 4, 8, 16, 24, 40], 25),
        (32, [1, 2, 4, 8, 16, 24, 31, 32], 32),
        (32, [1, 2, 4, 8, 10, 12, 30, 32], 31),  # SGLang's speculative default list near 32
        (300, [1, 2, 4, 256], 300),  # above the largest captured size: no padding
        (4, [8, 16], 1),
    ],
)
def test_effective_threshold_follows_cuda_graph_padding(threshold, graph_bs, effective):
    assert si.effective_threshold(threshold, graph_bs) == effective


@pytest.mark.parametrize(("steps", "threshold"), [(3, 32), (5, 2), (1, 250)])
def test_routing_from_adaptive_config_reads_specbench_json(steps: int, threshold: int):
    assert si.routing_from_adaptive_config(argv_mod.adaptive_config(steps, threshold)) == (
        steps,
        threshold,
    )


def test_routing_from_sglang_default_config_is_not_a_plain_threshold():
    default = {
        "1": {"candidate_steps": [1, 3, 5, 7]},
        "8": {"candidate_steps": [0, 1, 3]},
        "32": {"candidate_steps": [0, 1]},
        "64": {"candidate_steps": [0]},
    }
    assert si.routing_from_adaptive_config(default) == (None, 64)


# --------------------------------------------------------------------------------------------
# launch command and environment probes


def test_server_command_runs_sglang_under_this_interpreter():
    assert sg.server_command(ServerConfig()) == [sys.executable, "-m", "sglang.launch_server"]
    cmd = sg.server_command(ServerConfig(server_command=("python3", "-m", "sglang.launch_server")))
    assert cmd[0] == sys.executable


def test_sglang_serve_skips_the_hub_probe():
    cmd = sg.server_command(ServerConfig(server_command=("/opt/venv/bin/sglang", "serve")))
    assert cmd == ["/opt/venv/bin/sglang", "serve", "--model-type", "llm"]
    for kept in (("sglang", "serve", "--model-type", "auto"),
                 ("sglang", "serve", "--model-type=vlm")):
        assert sg.server_command(ServerConfig(server_command=kept)) == list(kept)


def test_launch_command_is_program_plus_the_one_argv(tmp_path: Path):
    server = ServerConfig(model_path="/m", draft_model_path="/d")
    config = tmp_path / "a.json"
    cmd = sg.launch_command("dynamic", server, port=31000, max_running_requests=64,
                            adaptive_config_path=config)
    assert cmd[:3] == [sys.executable, "-m", "sglang.launch_server"]
    assert cmd[3:] == argv_mod.build_argv("dynamic", server, port=31000,
                                          max_running_requests=64, adaptive_config_path=config)


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_sglang_version_reads_the_interpreter_metadata(tmp_path: Path):
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text("__version__ = '9.9.9'\n")
    dist = site / "sglang-9.9.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 9.9.9\n")
    python = executable(
        tmp_path / "python",
        f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n',
    )
    assert sg.sglang_version(str(python)) == "9.9.9"


def test_sglang_version_is_none_without_sglang(tmp_path: Path):
    # -S: no site-packages, so no sglang whatever this machine has installed
    python = executable(tmp_path / "python", f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    assert sg.sglang_version(str(python)) is None
    assert sg.sglang_version(str(tmp_path / "no-such-python")) is None


def test_gpu_info_parses_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    executable(
        tmp_path / "nvidia-smi",
        "#!/bin/sh\n"
        'echo "0, NVIDIA H200, 143771, 570.124.06, 1980"\n'
        'echo "1, NVIDIA H200, 143771, 570.124.06, [N/A]"\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert fingerprint.gpu_info() == [
        {"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771,
         "driver_version": "570.124.06", "max_sm_clock_mhz": 1980},
        {"index": 1, "name": "NVIDIA H200", "memory_total_mib": 143771,
         "driver_version": "570.124.06", "max_sm_clock_mhz": None},
    ]
    assert fingerprint.collect()["gpus"] == fingerprint.gpu_info()


def test_gpu_info_is_none_when_nvidia_smi_fails_or_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    executable(
        tmp_path / "nvidia-smi",
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path))
    assert fingerprint.gpu_info() is None
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert fingerprint.gpu_info() is None


def _fake_sglang(tmp_path: Path, version: str) -> Path:
    site = tmp_path / f"site-{version}"
    dist = site / f"sglang-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return site


@pytest.mark.parametrize("version, refused", [("0.5.9", True), ("0.5.13", True),
                                              ("0.5.14", False), ("0.5.17", False),
                                              ("0.5.23", False)])
def test_dynamic_servers_need_an_sglang_with_adaptive_speculation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, refused: bool
):
    monkeypatch.setenv("PYTHONPATH", str(_fake_sglang(tmp_path, version)))
    cfg = config.resolve({"engine": "sglang", "server": {"port": free_port()}})
    engine = sg.SGLangEngine(cfg)
    if not refused:
        engine.preflight()
        return
    with pytest.raises(ConfigError) as info:
        engine.preflight()
    assert str(info.value) == (
        f"SGLang {version} has no adaptive speculation with steps 0 (it first ships in 0.5.14), "
        "which the zero-step server needs; upgrade SGLang (pip install 'sglang>=0.5.14') or "
        "measure the static servers only (--modes baseline,eagle3)"
    )
    static_only = config.resolve(
        {"engine": "sglang", "modes": ["baseline", "eagle3"], "server": {"port": free_port()}}
    )
    sg.SGLangEngine(static_only).preflight()
