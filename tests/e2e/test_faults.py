"""Every fault the simulator can inject, through the real `specbench sweep` command.

Each test asserts the two promises of issue 8: no finished point is lost (every point the
manifest calls ok has its file, and the summary has one row per file) and no server process is
left behind. Per-request failures must be classified and counted in the summary's
`n_errors_<class>` columns; a server that dies or never starts must end in one clear message.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness import assert_no_process_left, nothing_lost_nothing_left, spawn_sweep, sweep_cli

pytestmark = pytest.mark.slow

ONE_MODE = ["--modes", "baseline", "--prompts", "coding"]


def _sweep(tmp_path: Path, port: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return sweep_cli(tmp_path, port, *ONE_MODE, *extra, timeout=300)


@pytest.mark.parametrize(
    "flag, column",
    [
        ("--sim-error-rate 0.25", "n_errors_http_status"),
        ("--sim-truncate-rate 0.25", "n_errors_stream_truncated"),
        ("--sim-malformed-rate 0.25", "n_errors_malformed_chunk"),
    ],
)
def test_bad_responses_are_classified_and_flagged(
    tmp_path: Path, port: int, flag: str, column: str
) -> None:
    proc = _sweep(tmp_path, port, "--concurrency", "4,16", f"--sim-arg={flag}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    summary = nothing_lost_nothing_left(tmp_path / "res" / "run", port)
    assert sorted(summary["concurrency"]) == [4, 16]
    big = summary[summary["concurrency"] == 16].iloc[0]
    assert big[column] > 0
    assert big["n_errors"] >= big[column]
    # A quarter of the requests failing is far over the default 1 % budget.
    assert "error_budget" in str(big["flags"]).split(";")
    other = [c for c in summary.columns if c.startswith("n_errors_") and c != column]
    assert (summary[other].fillna(0) == 0).all().all(), summary[other]


def test_stall_longer_than_timeout_gives_timeouts_and_keeps_the_point(
    tmp_path: Path, port: int
) -> None:
    # Every stream stops for 3 s after 5 tokens; the client gives up after 1 s.
    proc = _sweep(
        tmp_path,
        port,
        "--concurrency",
        "4",
        "--window-s",
        "16",
        "--request-timeout-s",
        "1",
        "--sim-arg=--sim-stall-after-tokens 5 --sim-stall-s 3",
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = nothing_lost_nothing_left(tmp_path / "res" / "run", port)
    row = summary.iloc[0]
    assert row["n_errors_timeout"] > 0
    assert "error_budget" in str(row["flags"]).split(";")


def test_slow_start_is_waited_for(tmp_path: Path, port: int) -> None:
    proc = _sweep(tmp_path, port, "--concurrency", "2", "--sim-arg=--sim-slow-start-s 3")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = nothing_lost_nothing_left(tmp_path / "res" / "run", port)
    assert summary.iloc[0]["n_errors"] == 0
    assert summary.iloc[0]["output_tok_s"] > 0


def test_fail_start_is_diagnosed_in_one_message(tmp_path: Path, port: int) -> None:
    line = "Not enough memory. Please try to increase --mem-fraction-static"
    # A config file carries the line as one argument (--sim-arg splits on whitespace).
    (tmp_path / "fail.toml").write_text(f'[sim]\nextra_args = ["--sim-fail-start", "{line}"]\n')
    proc = _sweep(tmp_path, port, "--concurrency", "2", "--config", str(tmp_path / "fail.toml"))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    run_dir = tmp_path / "res" / "run"
    log = run_dir / "servers" / "baseline.log"
    assert line in log.read_text()
    assert proc.stderr.count("error: ") == 1
    first = proc.stderr.strip().splitlines()[0]
    assert first.startswith("error: baseline server exited")
    assert str(log) in proc.stderr.replace("\n", "")
    assert "mem-fraction-static" in first
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    nothing_lost_nothing_left(run_dir, port)


def test_crash_after_seconds_restarts_and_completes(tmp_path: Path, port: int) -> None:
    # Each server lives 1.5 wall seconds: about two short points, then a crash mid-point.
    proc = _sweep(
        tmp_path,
        port,
        "--concurrency",
        "1,2,4,8",
        "--sim-arg=--sim-crash-after-s 1.5",
        "--max-point-retries",
        "4",
    )
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out
    run_dir = tmp_path / "res" / "run"
    summary = nothing_lost_nothing_left(run_dir, port)
    assert proc.returncode == 0, out[-3000:]
    assert sorted(summary["concurrency"]) == [1, 2, 4, 8]
    assert "restarting the baseline server" in proc.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    retried = [p for p in manifest["points"].values() if p["attempts"] > 1]
    assert retried
    for point in retried:
        # The error names the dead server's log where the restart kept it, and says why.
        kept = re.search(r"see its log (\S+\.\d+\.log)", point["errors"][0])
        assert kept is not None, point["errors"][0]
        assert "the scheduler raised an exception" in point["errors"][0]
        assert "injected crash" in Path(kept[1]).read_text()


def test_crash_after_seconds_without_retries_stops_cleanly(tmp_path: Path, port: int) -> None:
    proc = _sweep(
        tmp_path,
        port,
        "--concurrency",
        "1,2,4,8,16",
        "--window-s",
        "8",
        "--sim-arg=--sim-crash-after-s 1",
        "--max-point-retries",
        "0",
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    run_dir = tmp_path / "res" / "run"
    assert "gave up after 1 attempt(s)" in proc.stderr
    assert f"--resume {run_dir}" in proc.stderr.replace("\n", "")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert [p["status"] for p in manifest["points"].values()].count("failed") == 1
    nothing_lost_nothing_left(run_dir, port)


def test_silently_capped_server_is_flagged(tmp_path: Path, port: int) -> None:
    # The server claims 16 running requests but runs at most 4: the queue gives it away.
    proc = _sweep(tmp_path, port, "--concurrency", "16", "--sim-arg=--sim-cap-running 4")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = nothing_lost_nothing_left(tmp_path / "res" / "run", port)
    row = summary.iloc[0]
    assert "ran_below_c" in str(row["flags"]).split(";")
    assert row["server_running_reqs_mean"] <= 4.5


def test_interrupt_during_a_slow_start_stops_the_server(tmp_path: Path, port: int) -> None:
    # Ctrl-C while the server is still loading (no /ready yet): nothing may be left running.
    sweep = spawn_sweep(tmp_path, port, *ONE_MODE, "--concurrency", "2",
                        "--sim-arg=--sim-slow-start-s 60")
    sweep.wait_for_server()
    time.sleep(1.0)  # let it get into its slow start
    assert sweep.stop(signal.SIGINT) < 10, "servers must be stopped within 10 s"
    err = sweep.stderr()
    assert sweep.returncode == 130, err[-2000:]
    assert "Traceback" not in sweep.stdout() + err
    assert_no_process_left(port)
    manifest = json.loads((sweep.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
