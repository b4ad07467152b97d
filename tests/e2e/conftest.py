"""Helpers for end-to-end tests that run the real `specbench` command against the simulator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.engines.process import free_port


def sim_processes(port: int) -> list[int]:
    """PIDs of live simulated servers bound to `port` (read from the process table)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split()[2]
        except OSError:
            continue
        if state == "Z":
            continue
        if b"specbench.sim" in cmd and str(port).encode() in cmd:
            pids.append(int(entry.name))
    return pids


def run_cli(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "specbench", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def port() -> int:
    return free_port()
