"""Start the simulated server as a real subprocess on a free port, and talk to it over HTTP.

`start_sim(*flags)` (function scope) and `sim_module(*flags)` (module scope, shared by the
tests of one file) launch ``python -m specbench.sim --model-path M --port P <flags>``, wait for
``/ready`` and kill the process group on teardown. Other test folders may reuse the helpers
(``launch``, ``sse``, ``get_json``) by importing ``tests.sim.conftest``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from specbench.config import ServerConfig
from specbench.engines.argv import build_argv
from specbench.engines.process import free_port
from tests.harness import default_sigint

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
def _eagle3_flags() -> tuple[str, ...]:
    """The EAGLE-3 flags exactly as specbench launches a server (engines/argv.py): K = 3."""
    argv = build_argv(
        "eagle3", ServerConfig(draft_model_path="draft"), port=0, max_running_requests=1
    )
    return tuple(argv[argv.index("--speculative-algorithm") :])


EAGLE3_FLAGS = _eagle3_flags()


@dataclass
class SimProc:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str, timeout_s: float = 10.0) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout_s) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def get_json(self, path: str) -> Any:
        status, body = self.get(path)
        assert status == 200, f"GET {path} -> {status}: {body}"
        return json.loads(body)

    def post(self, path: str, body: Any, timeout_s: float = 30.0) -> tuple[int, str]:
        data = json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_exit(self, timeout_s: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def launch(
    flags: tuple[str, ...] | list[str],
    log_dir: Path,
    *,
    wait_ready: bool = True,
    env: dict[str, str] | None = None,
    timeout_s: float = 30.0,
    port: int | None = None,
) -> SimProc:
    """Start a simulated server; with `wait_ready` block until /ready answers 200."""
    port = free_port() if port is None else port
    log_path = log_dir / f"sim-{port}.log"
    argv = [
        sys.executable,
        "-m",
        "specbench.sim",
        "--model-path",
        MODEL,
        "--port",
        str(port),
        *flags,
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            preexec_fn=default_sigint,  # tests send it SIGINT; see tests/harness.py
        )
    sim = SimProc(proc, port, log_path)
    if not wait_ready:
        return sim
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"simulator exited with {proc.returncode}:\n{sim.log}")
        with contextlib.suppress(OSError):
            if sim.get("/ready", timeout_s=1.0)[0] == 200:
                return sim
        time.sleep(0.05)
    sim.kill()
    raise RuntimeError(f"simulator not ready after {timeout_s} s:\n{sim.log}")


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[Callable[..., SimProc]]:
    procs: list[SimProc] = []

    def start(*flags: str, **kwargs: Any) -> SimProc:
        sim = launch(flags, tmp_path, **kwargs)
        procs.append(sim)
        return sim

    yield start
    for sim in procs:
        sim.kill()


@pytest.fixture(scope="module")
def sim_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., SimProc]]:
    procs: dict[tuple[str, ...], SimProc] = {}
    log_dir = tmp_path_factory.mktemp("sim")

    def start(*flags: str) -> SimProc:
        if flags not in procs:
            procs[flags] = launch(flags, log_dir)
        return procs[flags]

    yield start
    for sim in procs.values():
        sim.kill()


@dataclass
class Event:
    t: float  # time.monotonic() when the event arrived
    data: str  # the text after "data: "

    @property
    def json(self) -> Any:
        return json.loads(self.data)


async def sse(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any]
) -> tuple[int, list[Event]]:
    """POST a streaming request; return the status and every `data:` event in order."""
    events: list[Event] = []
    async with session.post(url, json=body) as resp:
        if resp.status != 200:
            await resp.read()
            return resp.status, events
        async for raw in resp.content:
            line = raw.decode().rstrip("\n")
            if line.startswith("data: "):
                events.append(Event(time.monotonic(), line[6:]))
    return 200, events
