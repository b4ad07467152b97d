"""Bad input: one line naming cause and fix, exit code 2, no traceback, no server started."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.harness import assert_no_process_left, run_cli

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
    ("run directory is a file", ["--resume", "{tmp}/bad.toml"], "is not a directory"),
    ("config file missing", ["--config", "{tmp}/none.toml"], "does not exist"),
    ("draft model missing", ["--draft-model-path", ""], "draft model"),
    ("unknown protocol", ["--protocol", "grpc"], "unknown protocol"),
    ("run name escapes", ["--run-name", "../outside"], "run name"),
    ("run name absolute", ["--run-name", "{tmp}/elsewhere"], "run name"),
    ("bad attach", ["--engine", "attach", "--attach", "baseline"], "MODE=URL"),
]


@pytest.mark.parametrize("name, args, needle", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, port: int, name: str, args: list[str], needle: str
) -> None:
    (tmp_path / "bad.jsonl").write_text(BAD_PROMPTS_LINE)
    (tmp_path / "bad.toml").write_text("[load]\nwindow = 3\n")
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
    assert not (tmp_path / "res").exists() or not any((tmp_path / "res").rglob("*.log"))
    assert_no_process_left(port)


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
