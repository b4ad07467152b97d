"""The machine fingerprint recorded in every manifest: what the numbers were measured on.

Two runs are comparable only on comparable machines; a nightly gate whose driver, SGLang or
CPU changed should be able to say so. Everything here is read cheaply and never fails: a
missing tool (no `nvidia-smi`, not a git checkout) leaves that entry empty.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import specbench

# Third-party packages whose versions can move a measured number.
_PACKAGES = ("aiohttp", "pandas", "pyarrow", "numpy", "pydantic", "sglang", "torch")


def _probe(argv: list[str], timeout_s: float, cwd: Path | None = None) -> str | None:
    """stdout of a short command, or None when it is missing, fails or hangs."""
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def gpu_info(timeout_s: float = 20.0) -> list[dict[str, Any]] | None:
    """One dict per GPU from ``nvidia-smi`` (name, memory, driver, max SM clock).

    None when nvidia-smi is missing or fails (no driver): the manifest then says "no GPU seen"
    rather than guessing.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    query = "index,name,memory.total,driver_version,clocks.max.sm"
    out = _probe([exe, f"--query-gpu={query}", "--format=csv,noheader,nounits"], timeout_s)
    if out is None:
        return None
    gpus: list[dict[str, Any]] = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        index, name = parts[0], ", ".join(parts[1:-3])
        memory, driver, clock = parts[-3], parts[-2], parts[-1]
        gpus.append(
            {
                "index": int(index) if index.isdigit() else index,
                "name": name,
                "memory_total_mib": int(memory) if memory.isdigit() else None,
                "driver_version": driver,
                "max_sm_clock_mhz": int(clock) if clock.isdigit() else None,
            }
        )
    return gpus


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        pages, page_bytes = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * page_bytes / 2**30, 1)


def _versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _git_commit() -> str | None:
    """The checkout's commit (with "-dirty" for local changes) when specbench runs from one."""
    root = Path(specbench.__file__).resolve().parent.parent
    if not (root / ".git").exists() or shutil.which("git") is None:
        return None
    commit = _probe(["git", "rev-parse", "HEAD"], 5.0, cwd=root)
    if commit is None:
        return None
    dirty = _probe(["git", "status", "--porcelain", "--untracked-files=no"], 5.0, cwd=root)
    return commit.strip() + ("-dirty" if dirty else "")


def collect(*, gpus: bool = True) -> dict[str, Any]:
    """The fingerprint as plain JSON values (the manifest's `fingerprint`)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "load_avg_1min": round(load[0], 2) if load else None,
        "gpus": gpu_info() if gpus else None,
        "packages": _versions(),
        "specbench_version": specbench.__version__,
        "git_commit": _git_commit(),
    }
