"""`--engine sglang` through the real CLI: the dry-run commands and a start-up failure."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from specbench.engines.process import free_port
from tests.harness import cli_env, run_cli
from tests.snapshot import assert_snapshot


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # Wide enough that no command line wraps.
    return run_cli(args, cwd, timeout=120, env=cli_env(columns=400))


def test_dry_run_prints_three_correct_commands(tmp_path: Path) -> None:
    proc = _cli(
        [
            "sweep",
            "--engine",
            "sglang",
            "--dry-run",
            "--model-path",
            "org/target",
            "--draft-model-path",
            "org/draft",
            "--spec-steps",
            "4",
            "--threshold",
            "40",
            "--port",
            "30123",
            "--concurrency",
            "1,8,64,250",
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = {
        line.split(":", 1)[0]: line.split(":", 1)[1].strip()
        for line in proc.stdout.splitlines()
        if line.split(":", 1)[0] in ("baseline", "eagle3", "dynamic")
    }
    assert set(lines) == {"baseline", "eagle3", "dynamic"}
    common = (
        "-m sglang.launch_server --model-path org/target --host 127.0.0.1 --port 30123 "
        "--max-running-requests 250 --enable-metrics --decode-log-interval 1"
    )
    spec = (
        "--speculative-algorithm EAGLE3 --speculative-draft-model-path org/draft "
        "--speculative-num-steps 4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5"
    )
    assert lines["baseline"].endswith(common)
    assert lines["eagle3"].endswith(f"{common} {spec}")
    assert (
        f"{common} {spec} --speculative-adaptive --speculative-adaptive-config " in lines["dynamic"]
    )
    for command in lines.values():
        assert "--cuda-graph-max-bs " not in command
    assert '{"1": {"candidate_steps": [4]}, "40": {"candidate_steps": [0]}}' in proc.stdout
    assert "points" in proc.stdout and "estimated" in proc.stdout
    assert not (tmp_path / "results").exists()


def test_a_server_that_dies_at_start_gets_one_diagnosis(tmp_path: Path) -> None:
    fake = tmp_path / "fake_sglang.py"
    fake.write_text(
        textwrap.dedent("""
        import sys
        print("[2026-11-29 10:00:00] Load weight end. type=LlamaForCausalLM", flush=True)
        print("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
              flush=True)
        sys.exit(1)
    """)
    )
    proc = _cli(
        [
            "sweep",
            "--engine",
            "sglang",
            "--modes",
            "baseline",
            "--prompts",
            "coding",
            "--concurrency",
            "1",
            "--port",
            str(free_port()),
            "--model-path",
            "org/target",
            "--server-command",
            f"{sys.executable} {fake}",
            "--results-dir",
            str(tmp_path / "res"),
            "--run-name",
            "r",
        ],
        tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    err = proc.stderr
    assert err.startswith("error: ")
    assert "mem-fraction-static" in err  # the hint
    assert str(tmp_path / "res" / "r" / "servers" / "baseline.log") in err  # the log path
    assert "Not enough memory" in err  # the last lines of the log
    assert err.count("error: ") == 1


def test_dry_run_output_is_pinned(tmp_path: Path) -> None:
    # What a user sees at 100 columns, exactly; only the Python path varies by machine.
    proc = run_cli(
        [
            "sweep",
            "--engine",
            "sglang",
            "--dry-run",
            "--model-path",
            "org/target",
            "--draft-model-path",
            "org/draft",
            "--concurrency",
            "1,8,64",
            "--spec-steps",
            "3",
            "--max-running-requests",
            "64",
        ],
        tmp_path,
        timeout=120,
        env={k: v for k, v in cli_env(columns=100).items() if not k.startswith("SPECBENCH_")},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert_snapshot("sweep-dry-run-sglang.txt", proc.stdout.replace(sys.executable, "<python>"))
