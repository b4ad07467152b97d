"""Bad input: one line naming cause and fix, exit code 2, no traceback, no server started."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import run_cli, specbench_processes

BAD_PROMPTS_LINE = '{"id": "x", "messages": [{"role": "user", "content": "hi"}]}\n{not json\n'

CASES = [
    ("unknown mode", ["--modes", "baseline,turbo"], "unknown mode 'turbo'"),
    ("unknown prompt set", ["--prompts", "poetry"], "poetry"),
    ("zero concurrency", ["--concurrency", "0,4"], "at least 1"),
    ("negative concurrency", ["--concurrency", "-2"], "at least 1"),
    ("non-numeric concurrency", ["--concurrency", "1,two"], "not a whole number"),
    (
        "above the server limit",
        ["--concurrency", "1,300", "--max-running-requests", "256"],
        "above --max-running-requests",
    ),
    ("unreadable prompt file", ["--prompts", "{tmp}/missing.jsonl"], "missing.jsonl"),
    ("invalid prompt file", ["--prompts", "{tmp}/bad.jsonl"], "bad.jsonl:2"),
    (
        "model path missing",
        ["--engine", "sglang", "--model-path", "/nonexistent/model"],
        "/nonexistent/model does not exist",
    ),
    ("not a run directory", ["--resume", "{tmp}"], "not a specbench run directory"),
    ("config unknown key", ["--config", "{tmp}/bad.toml"], "unknown key"),
    ("threshold not positive", ["--threshold", "0"], "positive integer"),
    ("threshold not a number", ["--threshold", "many"], "positive integer"),
    ("threshold negative", ["--threshold", "-3"], "positive integer"),
    ("threshold fractional", ["--threshold", "2.5"], "positive integer"),
    ("empty concurrency list", ["--concurrency", ",,"], "concurrency list is empty"),
    ("schedule not slots", ["--modes", "tuned", "--schedule", "1=3"], "is not SLOT:K"),
    ("schedule never drafts", ["--modes", "tuned", "--schedule", "1:0"], "drafts at no batch"),
    ("schedule without tuned", ["--modes", "eagle3", "--schedule", "1:3"], "add tuned to"),
    ("run directory is a file", ["--resume", "{tmp}/bad.toml"], "is not a directory"),
    ("config file missing", ["--config", "{tmp}/none.toml"], "does not exist"),
    ("draft model missing", ["--draft-model-path", ""], "draft model"),
    ("unknown protocol", ["--protocol", "grpc"], "unknown protocol"),
    ("run name escapes", ["--run-name", "../outside"], "run name"),
    ("run name absolute", ["--run-name", "{tmp}/elsewhere"], "run name"),
    ("bad attach", ["--engine", "attach", "--attach", "baseline"], "MODE=URL"),
    # option types and ranges (the schema, named by flag)
    ("fractional repeats", ["--repeats", "1.5"], "--repeats '1.5' is not a whole number"),
    ("zero repeats", ["--repeats", "0"], "--repeats 0 is not valid"),
    ("window not a number", ["--window-s", "abc"], "--window-s 'abc' is not a number"),
    ("zero window", ["--window-s", "0"], "use a value > 0"),
    ("negative warmup", ["--warmup-s", "-1"], "--warmup-s -1.0 is not valid"),
    ("negative temperature", ["--temperature", "-1"], "use a value >= 0"),
    ("zero request timeout", ["--request-timeout-s", "0"], "--request-timeout-s 0.0"),
    ("zero spec steps", ["--spec-steps", "0"], "--spec-steps 0 is not valid"),
    ("zero tp size", ["--tp-size", "0"], "--tp-size 0 is not valid"),
    ("zero max running", ["--max-running-requests", "0"], "--max-running-requests 0"),
    ("port out of range", ["--port", "70000"], "use a value <= 65535"),
    ("zero time scale", ["--sim-time-scale", "0"], "--sim-time-scale 0.0 is not valid"),
    ("negative retries", ["--max-point-retries", "-1"], "use a value >= 0"),
    ("unknown engine", ["--engine", "tgi"], "unknown engine 'tgi'"),
    ("unknown preset", ["--preset", "fast"], "unknown preset 'fast'"),
    ("duplicate level", ["--concurrency", "1,8,8"], "level 8 is given twice"),
    ("empty modes", ["--modes", ","], "no modes given"),
    ("empty prompt sets", ["--prompts", ","], "no prompts given"),
    ("bad configuration name", ["--modes", "eagle3-k0"], "unknown mode 'eagle3-k0'"),
    ("mix without weights", ["--mix", "coding"], "not SET=WEIGHT"),
    ("mix negative weight", ["--mix", "coding=-1,agentic=1"], "not SET=WEIGHT"),
    ("mix of mix", ["--mix", "mix=1"], "cannot contain a set named mix"),
    ("mix of unknown set", ["--mix", "poetry=1"], "--mix: unknown prompt set 'poetry'"),
    ("attach with ftp", ["--engine", "attach", "--attach", "baseline=ftp://x"], "MODE=URL"),
    ("attach without urls", ["--engine", "attach"], "needs a URL for mode baseline"),
    ("bad cuda graph list", ["--cuda-graph-bs-decode", "8,x"], "not a whole number"),
    # config files
    ("config string for a number", ["--config", "{tmp}/string.toml"], "load.window_s = '8'"),
    ("config fractional count", ["--config", "{tmp}/fraction.toml"], "load.repeats = 2.5"),
    ("config string for a list", ["--config", "{tmp}/list.toml"], "modes = 'baseline'"),
    ("config syntax", ["--config", "{tmp}/syntax.toml"], "fix the TOML syntax"),
    ("config not utf-8", ["--config", "{tmp}/latin1.toml"], "cannot be read"),
    # prompt files
    ("prompt file not utf-8", ["--prompts", "{tmp}/latin1.jsonl"], "latin1.jsonl"),
    ("prompt messages not a list", ["--prompts", "{tmp}/messages.jsonl"], "messages.jsonl:1"),
    ("prompt max_tokens a string", ["--prompts", "{tmp}/maxtok.jsonl"], "maxtok.jsonl:1"),
    ("prompt role unknown", ["--prompts", "{tmp}/role.jsonl"], "role.jsonl:1"),
    ("prompt tool call to no tool", ["--prompts", "{tmp}/tool.jsonl"], "tool.jsonl:1"),
    ("prompt file empty", ["--prompts", "{tmp}/empty.jsonl"], "empty.jsonl"),
    ("prompt sampling out of range", ["--prompts", "{tmp}/topp.jsonl"], "top_p must be in (0, 1]"),
    ("prompt sampling unknown key", ["--prompts", "{tmp}/samplekey.jsonl"], "sampling key 'beam'"),
    # what goes into a request body
    ("extra body not JSON", ["--extra-request-body", "{top_k: 20}"], "is not JSON"),
    ("extra body not an object", ["--extra-request-body", "[1]"], "must be a JSON object"),
    ("extra body sets stream", ["--extra-request-body", '{"stream": false}'], "sets 'stream'"),
    (
        "extra body sets the output cap",
        ["--extra-request-body", '{"max_tokens": 8}'],
        "set max_tokens in the prompt file's rows",
    ),
    ("extra body out of range", ["--extra-request-body", '{"top_k": 0}'], "top_k must be"),
    (
        "chat template not loadable",
        ["--engine", "sglang", "--protocol", "openai-completions", "--model-path", "{tmp}"],
        "the model's chat template",
    ),
    # placement on GPUs
    ("gpus not ids", ["--gpus", "0,x"], "--gpus: 'x' is not a GPU id"),
    ("gpus twice", ["--gpus", "0,1,1"], "GPU 1 is given twice"),
    ("gpus range backwards", ["--gpus", "3-0"], "the range '3-0' runs backwards"),
    ("gpus range and id twice", ["--gpus", "0-3,2"], "GPU 2 is given twice"),
    ("gpus fewer than tp", ["--gpus", "0", "--tp-size", "2"], "fewer GPUs than one server"),
    ("gpus all without gpus", ["--gpus", "all"], "nvidia-smi lists no GPU here"),
    ("gpus with attach", ["--engine", "attach", "--attach", "baseline=http://127.0.0.1:9",
                          "--modes", "baseline", "--gpus", "0,1"], "drop --gpus"),
    # open loop
    ("rate not a number", ["--request-rates", "2,fast"], "'fast' is not a rate > 0 or inf"),
    ("rate zero", ["--request-rates", "0,8"], "'0' is not a rate > 0 or inf"),
    ("slo key", ["--request-rates", "8", "--slo", "ttft=200"], "KEY one of ttft_ms"),
    ("slo value", ["--request-rates", "8", "--slo", "tpot_ms=fast"], "is not KEY=MS"),
    ("burstiness without rates", ["--burstiness", "0.5"], "add --request-rates"),
    ("rates with adaptive", ["--request-rates", "8", "--plan", "adaptive"], "use --plan dense"),
    ("percentile unknown", ["--percentiles", "50,75"], "specbench keeps p50, p90, p95"),
    # the file system
    ("results dir is a file", ["--results-dir", "{tmp}/bad.toml"], "cannot write the run dir"),
]

USER = '{"role": "user", "content": "hi"}'
FILES = {
    "string.toml": '[load]\nwindow_s = "8"\n',
    "fraction.toml": "[load]\nrepeats = 2.5\n",
    "list.toml": 'modes = "baseline"\n',
    "syntax.toml": "[load\n",
    "messages.jsonl": '{"id": "m", "messages": "hi"}\n',
    "maxtok.jsonl": '{"id": "t", "messages": [' + USER + '], "max_tokens": "many"}\n',
    "role.jsonl": '{"id": "r", "messages": [{"role": "wizard", "content": "hi"}]}\n',
    "tool.jsonl": (
        '{"id": "c", "messages": [' + USER + ', {"role": "assistant", "tool_calls": [{"id": '
        '"call_1", "type": "function", "function": {"name": "nope", "arguments": "{}"}}]}], '
        '"tools": [{"type": "function", "function": {"name": "read", "parameters": {}}}]}\n'
    ),
    "empty.jsonl": "",
    "topp.jsonl": '{"id": "p", "messages": [' + USER + '], "sampling": {"top_p": 1.5}}\n',
    "samplekey.jsonl": '{"id": "k", "messages": [' + USER + '], "sampling": {"beam": 2}}\n',
}


@pytest.mark.parametrize("name, args, needle", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, port: int, name: str, args: list[str], needle: str
) -> None:
    (tmp_path / "bad.jsonl").write_text(BAD_PROMPTS_LINE)
    (tmp_path / "bad.toml").write_text("[load]\nwindow = 3\n")
    for file_name, text in FILES.items():
        (tmp_path / file_name).write_text(text)
    (tmp_path / "latin1.toml").write_bytes("# caf\xe9\n[load]\n".encode("latin-1"))
    (tmp_path / "latin1.jsonl").write_bytes(b'{"id": "l", "messages": [{"role": "user", '
                                            b'"content": "caf\xe9"}]}\n')
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = run_cli(
        ["sweep", "--port", str(port), "--results-dir", str(tmp_path / "res"), *args],
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert needle in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    results = tmp_path / "res"
    assert not results.is_dir() or not any(results.rglob("*.log"))
    # This run's own processes: a refused run binds no port, so another worker's refused run
    # can be on the same free port at this moment.
    assert [p for p in specbench_processes(port) if str(tmp_path) in p] == []


def test_open_files_limit_too_low_is_one_line_before_any_server(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", "-c", f'ulimit -n 200 && exec "{sys.executable}" -m specbench sweep '
         f"--concurrency 1,250 --results-dir {tmp_path / 'res'}"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "ulimit -n" in lines[0] and "open files" in lines[0], lines
    assert not (tmp_path / "res").exists()


def test_port_in_use_is_refused_before_launch(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        busy = sock.getsockname()[1]
        proc = run_cli(
            ["sweep", "--port", str(busy), "--results-dir", str(tmp_path / "res")],
            cwd=tmp_path,
            timeout=60,
        )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: port {busy} on 127.0.0.1 is already in use; "
        "stop what listens there or pass another --port"
    ]
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("command", ["plot", "report", "threshold"])
def test_readers_refuse_a_non_run(tmp_path: Path, command: str) -> None:
    proc = run_cli([command, str(tmp_path)], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "not a specbench run directory" in proc.stderr


SIM_CASES = [
    ("port out of range", ["--port", "70000"], "--port 70000 is out of range"),
    ("zero running requests", ["--max-running-requests", "0"], "must be positive"),
    ("zero context length", ["--context-length", "0"], "must be positive"),
]


@pytest.mark.parametrize("name, args, needle", SIM_CASES, ids=[c[0] for c in SIM_CASES])
def test_simulator_flag_out_of_range_is_one_line(
    tmp_path: Path, name: str, args: list[str], needle: str
) -> None:
    proc = run_cli(["sim", "--model-path", "m", *args], cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
