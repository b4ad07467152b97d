"""A tensor-parallel rank that dies mid-point (issue 41), rehearsed on the simulator.

A sweep with ``--tp-size 2`` runs the simulator with one stand-in process for rank 1
(specbench/sim/ranks.py). The test kills that process with SIGKILL, as a person would kill a
scheduler on a GPU node; the server's watchdog logs SGLang 0.5.23's crash line and the
server kills itself. The sweep must then say so in one line with the log's path, keep every
finished point, leave no process behind, and either stop with a `--resume` hint that works
or restart the server and finish.

Timed against the wall clock (the server must die inside the point being measured: 2-s
windows against a watchdog that looks once a second), so the file runs in the serial pass.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from tests.harness import SpawnedSweep, nothing_lost_nothing_left, run_cli, spawn_sweep

pytestmark = pytest.mark.slow

# Three points of 2 wall seconds each (16 s of model time at the harness's 8x): the rank is
# killed once the first is on disk, so the server dies during the second.
THREE_POINTS = ["--modes", "baseline", "--prompts", "coding", "--tp-size", "2",
                "--concurrency", "1,2,4", "--window-s", "16"]
_RANKS_LINE = re.compile(r"stand-in rank processes (?P<ranks>.*), checked every")


def _children(pid: int) -> set[int]:
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # it ended between the listing and now
        return []


def _kill_rank_1(sweep: SpawnedSweep) -> int:
    """SIGKILL the server's rank-1 process once the first point is on disk; its pid."""
    sweep.wait_for_points(1)
    servers = [p for p in _children(sweep.proc.pid) if b"specbench.sim" in _argv(p)]
    assert len(servers) == 1, servers
    log = (sweep.run_dir / "servers" / "baseline.log").read_text()
    line = _RANKS_LINE.search(log)
    assert line is not None, log[-2000:]
    named = {m[1]: int(m[2]) for m in re.finditer(r"(\w+) \(pid=(\d+)\)", line["ranks"])}
    # The log names exactly the server's children (pids are checked before one is killed).
    assert set(named) == {"scheduler_1"} and set(named.values()) == _children(servers[0])
    os.kill(named["scheduler_1"], signal.SIGKILL)
    return named["scheduler_1"]


def _crash_named(text: str, pid: int, log: Path) -> bool:
    """Whether `text` (a console's output, wrapped or not) names the crash and its log."""
    flat = " ".join(text.split())
    return f"scheduler_1 (pid={pid}) crashed with exit code -9" in flat and str(log) in flat


def _assert_crash_logged(log: Path, pid: int) -> None:
    """SGLang's watchdog line for the killed rank, then its SIGQUIT line, are in `log`."""
    text = log.read_text()
    crash = (f"Subprocess scheduler_1 (pid={pid}) crashed with exit code -9. "
             "Triggering SIGQUIT for cleanup...")
    assert crash in text, text[-2000:]
    assert "SIGQUIT received. signum=3, frame=" in text.split(crash, 1)[1]


def _sweep_losing_rank_1(tmp_path: Path, port: int, retries: int,
                         returncode: int) -> tuple[SpawnedSweep, int, str, str]:
    """A three-point sweep whose rank 1 is SIGKILLed mid-run, ended with `returncode` and no
    Traceback; (the sweep, the killed pid, its stdout, its stderr)."""
    sweep = spawn_sweep(tmp_path, port, *THREE_POINTS, "--max-point-retries", str(retries))
    pid = _kill_rank_1(sweep)
    sweep.proc.wait(timeout=60)
    out, err = sweep.stdout(), sweep.stderr()
    assert sweep.returncode == returncode, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err
    return sweep, pid, out, err


def test_a_dead_rank_stops_the_sweep_and_resume_finishes(tmp_path: Path, port: int) -> None:
    sweep, pid, _, err = _sweep_losing_rank_1(tmp_path, port, retries=0, returncode=2)
    run_dir = sweep.run_dir
    log = run_dir / "servers" / "baseline.log"
    _assert_crash_logged(log, pid)
    # One line: the cause, where it is logged, and how to go on.
    assert err.count("error: ") == 1, err
    assert _crash_named(err, pid, log), err
    assert f"--resume {run_dir}" in err.replace("\n", "")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    statuses = [p["status"] for p in manifest["points"].values()]
    assert statuses.count("failed") == 1 and statuses.count("ok") >= 1, statuses
    nothing_lost_nothing_left(run_dir, port)

    done = run_cli(["sweep", "--resume", str(run_dir)], cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
    summary = nothing_lost_nothing_left(run_dir, port)
    assert sorted(summary["concurrency"]) == [1, 2, 4]


def test_a_dead_rank_is_restarted_and_the_sweep_completes(tmp_path: Path, port: int) -> None:
    sweep, pid, out, _ = _sweep_losing_rank_1(tmp_path, port, retries=2, returncode=0)
    run_dir = sweep.run_dir
    # The restart started a fresh log; the dead server's log was kept beside it.
    _assert_crash_logged(run_dir / "servers" / "baseline.1.log", pid)
    assert _crash_named(out, pid, run_dir / "servers" / "baseline.1.log"), out
    assert "restarting the baseline server (attempt 2)" in out
    summary = nothing_lost_nothing_left(run_dir, port)
    assert sorted(summary["concurrency"]) == [1, 2, 4]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    retried = [p for p in manifest["points"].values() if p["attempts"] > 1]
    assert len(retried) == 1 and f"scheduler_1 (pid={pid}) crashed" in retried[0]["errors"][0]
