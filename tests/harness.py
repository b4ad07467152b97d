"""Run the real `specbench` command as a user would, and check what it leaves behind.

- :func:`run_cli` runs ``python -m specbench ...`` to the end; :func:`sweep_cli` does so for a
  sweep into ``<tmp>/res/<name>`` with the fast options :data:`FAST`.
- :func:`spawn_sweep` starts such a sweep in the background, for tests that signal it.
- :func:`specbench_processes` / :func:`assert_no_process_left`: no sweep or simulated server
  may outlive the command that started it.
- :func:`sim_server` starts a simulated server by hand (SGLang's argv from the one builder),
  for attach tests and for load tests that need the real simulator.
- :func:`default_sigint` is the ``preexec_fn`` of every process the tests start and may send
  SIGINT: it starts with SIGINT at its default, however the test run itself was started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from specbench import results
from specbench.config import ServerConfig
from specbench.engines.argv import build_argv
from specbench.engines.process import ServerProcess, free_port

# Short windows: a few dozen requests per point at low concurrency, seconds per point.
FAST_WINDOWS: tuple[str, ...] = (
    "--warmup-s", "0.5", "--window-s", "2", "--request-timeout-s", "30"
)
SIM_TIME_SCALE = 8.0
# Every fast sweep on the simulated engine: the windows above on a simulator at 8x real time.
FAST: tuple[str, ...] = ("--sim-time-scale", repr(SIM_TIME_SCALE), *FAST_WINDOWS)


def default_sigint() -> None:
    """In the child, before exec: SIGINT back to its default disposition.

    A test run started in the background (``nohup python3 -m pytest -q &``) has SIGINT
    ignored, and an ignored signal stays ignored across fork and exec; Python then does not
    install its KeyboardInterrupt handler, so a sweep the tests spawn would never see the
    Ctrl-C they send it. Pass as ``preexec_fn`` (it runs in the child only).
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli_env(columns: int = 200, **extra: str) -> dict[str, str]:
    """The environment of a CLI run: a fixed terminal width, unbuffered output."""
    return {**os.environ, "COLUMNS": str(columns), "PYTHONUNBUFFERED": "1", **extra}


def run_cli(
    args: Sequence[str],
    cwd: Path,
    timeout: float = 600,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m specbench ARGS`` to the end; returncode, stdout and stderr as text."""
    return subprocess.run(
        [sys.executable, "-m", "specbench", *args],
        cwd=cwd,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        preexec_fn=default_sigint,
    )


def sweep_args(tmp_path: Path, port: int, *extra: str, name: str = "run",
               plots: bool = False) -> list[str]:
    """A fast sweep on `port` into ``tmp_path/res/<name>``; `extra` may override anything.
    Without `plots` it draws no figures (``--no-plots``): a sweep's figures cost ~3 s of CPU,
    more than its points at these windows, and few tests read them."""
    return [
        "sweep",
        "--port",
        str(port),
        "--results-dir",
        str(tmp_path / "res"),
        "--run-name",
        name,
        *FAST,
        *(() if plots else ("--no-plots",)),
        *extra,
    ]


def sweep_cli(
    tmp_path: Path,
    port: int,
    *extra: str,
    name: str = "run",
    timeout: float = 600,
    env: dict[str, str] | None = None,
    plots: bool = False,
) -> subprocess.CompletedProcess[str]:
    return run_cli(sweep_args(tmp_path, port, *extra, name=name, plots=plots), tmp_path,
                   timeout, env)


def point_keys(run_dir: Path) -> list[tuple[str, str, int, int]]:
    """(mode, prompt set, concurrency, repeat) of every point file, sorted."""
    return sorted(
        (k.mode, k.prompt_set, k.concurrency, k.repeat) for k in results.measured_keys(run_dir)
    )


@dataclass
class SpawnedSweep:
    """A sweep running in the background; its output goes to files (no pipe can fill up)."""

    proc: subprocess.Popen[bytes]
    run_dir: Path
    port: int
    stdout_path: Path
    stderr_path: Path

    def wait_for_points(self, n: int, timeout_s: float = 120.0) -> list[tuple[str, str, int, int]]:
        """Block until `n` points are on disk; their keys."""
        deadline = time.monotonic() + timeout_s
        while len(results.point_files(self.run_dir)) < n:
            assert self.proc.poll() is None, f"the sweep exited early: {self.stderr()[-2000:]}"
            assert time.monotonic() < deadline, f"fewer than {n} points after {timeout_s:g} s"
            time.sleep(0.1)
        return point_keys(self.run_dir)

    def wait_for_server(self, timeout_s: float = 60.0) -> None:
        """Block until a simulated server for this sweep's port is running."""
        deadline = time.monotonic() + timeout_s
        while not any("specbench.sim" in cmd for cmd in specbench_processes(self.port)):
            assert self.proc.poll() is None, f"the sweep exited early: {self.stderr()[-2000:]}"
            assert time.monotonic() < deadline, "the server was never launched"
            time.sleep(0.1)

    def stop(self, sig: int, timeout_s: float = 30.0) -> float:
        """Send `sig` and wait for the sweep to exit; the seconds it took."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        self.proc.wait(timeout=timeout_s)
        return time.monotonic() - t0

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def spawn_sweep(tmp_path: Path, port: int, *extra: str, name: str = "run") -> SpawnedSweep:
    """Start :func:`sweep_args`'s sweep in the background."""
    out, err = tmp_path / f"{name}.stdout", tmp_path / f"{name}.stderr"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specbench", *sweep_args(tmp_path, port, *extra, name=name)],
            cwd=tmp_path,
            env=cli_env(),
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            preexec_fn=default_sigint,
        )
    return SpawnedSweep(proc, tmp_path / "res" / name, port, out, err)


def specbench_processes(port: int) -> list[str]:
    """Command lines of live specbench processes (sweeps, simulated servers) given `port`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "Z":
            continue
        ours = any(a in (b"specbench", b"specbench.sim") or a.endswith(b"/specbench") for a in argv)
        if ours and str(port).encode() in argv:
            found.append(" ".join(a.decode(errors="replace") for a in argv).strip())
    return found


def assert_no_process_left(port: int, wait_s: float = 0.0) -> None:
    """No sweep or simulated server on `port` is running (after up to `wait_s` of grace)."""
    deadline = time.monotonic() + wait_s
    while (left := specbench_processes(port)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], f"left running: {left}"


def nothing_lost_nothing_left(run_dir: Path, port: int) -> pd.DataFrame:
    """Manifest, point files and summary agree; no simulated server is still running."""
    assert_no_process_left(port)  # no server outlived the sweep
    manifest = json.loads((run_dir / "manifest.json").read_text())
    ok = {label for label, p in manifest["points"].items() if p["status"] == "ok"}
    on_disk = {k.label for k in results.measured_keys(run_dir)}
    assert ok == on_disk
    summary = pd.read_csv(run_dir / "summary.csv") if on_disk else pd.DataFrame()
    assert len(summary) == len(on_disk)
    return summary


@contextlib.contextmanager
def sim_server(
    mode: str,
    log_dir: Path,
    *,
    max_running_requests: int = 64,
    time_scale: float = SIM_TIME_SCALE,
    sim_args: Sequence[str] = (),
) -> Iterator[ServerProcess]:
    """A simulated server of `mode` started by hand, as a user would; stopped on exit.

    Its SGLang flags come from :func:`specbench.engines.argv.build_argv` with the default
    model and draft, so they are exactly what a sweep would pass.
    """
    server = ServerConfig()
    port = free_port()
    argv = build_argv(mode, server, port=port, max_running_requests=max_running_requests)
    command = [sys.executable, "-m", "specbench.sim", *argv,
               "--sim-time-scale", repr(time_scale), *sim_args]
    proc = ServerProcess(f"hand-started {mode}", command, log_dir / f"{mode}-{port}.log",
                         server.host, port)
    proc.start(ready_timeout_s=60)
    try:
        yield proc
    finally:
        proc.stop(grace_s=10)


def cli_help(*command: str) -> str:
    """`specbench COMMAND --help` as a wide terminal without colour prints it."""
    env = {**os.environ, "COLUMNS": "250", "TERM": "dumb", "NO_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", *command, "--help"],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
