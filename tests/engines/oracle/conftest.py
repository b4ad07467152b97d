"""Session fixtures: SGLang's serving stack and the simulator, each given the scripted requests.

:func:`oracle` starts SGLang 0.5.23's own HTTP server twice (baseline and EAGLE-3, with
specbench's own argv from ``engines/argv.py`` plus ``--device cpu --skip-server-warmup``), in
``launch.py`` under the SGLang interpreter (``$SPECBENCH_SGLANG_PYTHON``, else this one), sends
every request specbench's own body builders make for the cases in :mod:`.streams`, keeps the
raw reads, and stops the servers before any test runs: nothing SGLang sends is stored beyond
the session. :func:`simulated` does the same against ``python -m specbench.sim``. Without an
interpreter that has sglang and the packages its HTTP app imports, the tests skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from specbench.config import ServerConfig
from specbench.engines import argv as argv_mod
from specbench.engines.process import free_port
from specbench.load.protocols import PROTOCOLS
from specbench.prompts import PromptRequest
from tests.engines.oracle.streams import (
    CASE_BY_NAME,
    MODEL,
    MODES,
    ROUTES,
    Capture,
    all_scripts,
    merged_a_step,
    params,
    request_for,
    sampled_request,
)

SGLANG_PYTHON = os.environ.get("SPECBENCH_SGLANG_PYTHON", sys.executable)
HERE = Path(__file__).resolve().parent
CONTRACT_VERSION = "0.5.23"
# What SGLang's HTTP app imports on top of what argument resolution needs; all installed by
# scripts/install_sglang_contract.sh.
HTTP_MODULES = ("fastapi", "uvicorn", "uvloop", "zmq", "prometheus_client", "jsonschema",
                "partial_json_parser", "xgrammar", "einops", "setproctitle", "soundfile",
                "multipart", "tokenizers", "transformers")
READY_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 60.0
MAX_RUNNING = 32
MERGE_RETRIES = 3
Key = tuple[str, str, str]  # (mode, route, case)


def missing_modules(python: str) -> list[str] | None:
    """Modules `python` lacks (sglang first), or None when it cannot be run at all."""
    probe = ("import importlib.util, json, sys\n"
             f"mods = ['sglang', *{list(HTTP_MODULES)!r}]\n"
             "print(json.dumps([m for m in mods if importlib.util.find_spec(m) is None]))\n"
             "import importlib.metadata as md\n"
             "print(md.version('sglang') if importlib.util.find_spec('sglang') else '')\n")
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60,
                             check=True).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    missing: list[str] = json.loads(out[0])
    if not missing and out[1] != CONTRACT_VERSION:
        missing.append(f"sglang=={CONTRACT_VERSION} (found {out[1]})")
    return missing


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def wait_ready(self, deadline: float) -> None:
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"server exited with {self.proc.returncode}; its log ends with:\n"
                            f"{self.log_tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    f"{self.url}/ready", timeout=2) as resp:
                if resp.status == 200:
                    return
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"server not ready after {READY_TIMEOUT_S:.0f} s; its log ends "
                            f"with:\n{self.log_tail()}")
            time.sleep(0.2)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the server's own process group (it was started in a new session), then
        SIGKILL what is left."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def start(argv: list[str], log_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = argv[argv.index("--port") + 1]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **env})
    return proc, f"http://127.0.0.1:{port}"


def specbench_argv(mode: str, model_dir: Path) -> list[str]:
    """What specbench launches for `mode` (the one argv builder), on a free port."""
    server = ServerConfig(model_path=str(model_dir / "target"),
                          draft_model_path=str(model_dir / "draft"), speculative_num_steps=3)
    return [*argv_mod.build_argv(mode, server, port=free_port(), max_running_requests=MAX_RUNNING),
            "--served-model-name", MODEL]


async def _capture_one(session: aiohttp.ClientSession, url: str, body: bytes) -> Capture:
    reads: list[bytes] = []
    times: list[float] = []
    async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
        while True:
            data = await resp.content.readany()
            if not data:
                break
            reads.append(data)
            times.append(time.monotonic())
        return Capture(resp.status, tuple(reads), tuple(times))


def capture_all(jobs: dict[Any, tuple[str, bytes]]) -> dict[Any, Capture]:
    """POST every (url, body) at once, as a load generator would; the raw reads of each."""
    async def run() -> dict[Any, Capture]:
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            results = await asyncio.gather(
                *(_capture_one(session, url, body) for url, body in jobs.values()))
        return dict(zip(jobs, results, strict=True))

    return asyncio.run(run())


def recapture_merged(jobs: dict[Any, tuple[str, bytes]], captured: dict[Any, Capture],
                     tries: int = MERGE_RETRIES) -> dict[Any, Capture]:
    """The streams in which SGLang merged two steps (the machine was too busy, see
    ``streams.merged_a_step``), sent again until none is merged or the tries
    run out; a stream still merged is kept as it is and the tests that read steps fail."""
    def merged(key: Any, capture: Capture) -> bool:
        return len(key) == 3 and merged_a_step(key[1], capture, CASE_BY_NAME[key[2]])

    again: dict[Any, Capture] = {}
    todo = [key for key, capture in captured.items() if merged(key, capture)]
    for _ in range(tries):
        if not todo:
            break
        again.update(capture_all({key: jobs[key] for key in todo}))
        todo = [key for key in todo if merged(key, again[key])]
    return again


def encode(route: str, request: PromptRequest) -> tuple[str, bytes]:
    protocol = PROTOCOLS[ROUTES[route]]
    return protocol.path, protocol.encode(request, MODEL, 0.0)


@dataclass(frozen=True)
class Run:
    """What one server (SGLang's own serving code, or the simulator) sent for every request,
    and for SGLang what its scheduler side received."""

    captures: dict[Key, Capture]
    sampled: dict[str, Capture]  # route -> the request with every sampling override
    unknown_tool_choice: Capture  # chat, tool_choice naming a tool not in `tools`
    received: dict[str, dict[str, Any]]  # script name -> SamplingParams the scheduler got



def requests(urls: dict[str, str], *, sim: bool) -> dict[Any, tuple[str, bytes]]:
    """Every request of a run: the cases (those the simulator can make, with `sim`), the
    sampled request per route and the chat request naming an undeclared tool."""
    jobs: dict[Any, tuple[str, bytes]] = {}
    for mode, route, name in params(sim=sim):
        path, body = encode(route, request_for(CASE_BY_NAME[name]))
        jobs[(mode, route, name)] = (urls[mode] + path, body)
    named = {"type": "function", "function": {"name": "run_tests"}}
    for route in ROUTES:
        path, body = encode(route, sampled_request(route, named if route == "chat" else None))
        jobs[("sampled", route)] = (urls["baseline"] + path, body)
    path, body = encode("chat", sampled_request(
        "chat", {"type": "function", "function": {"name": "no_such_tool"}}))
    jobs["unknown_tool_choice"] = (urls["baseline"] + path, body)
    return jobs


def as_run(captured: dict[Any, Capture], received: dict[str, dict[str, Any]]) -> Run:
    return Run(
        captures={key: cap for key, cap in captured.items() if len(key) == 3},
        sampled={key[1]: cap for key, cap in captured.items() if key[0] == "sampled"},
        unknown_tool_choice=captured["unknown_tool_choice"],
        received=received,
    )


@pytest.fixture(scope="session")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Run:
    missing = missing_modules(SGLANG_PYTHON)
    if missing is None or missing:
        pytest.skip(f"{SGLANG_PYTHON} cannot run SGLang's HTTP server (missing: "
                    f"{', '.join(missing or ['the interpreter'])}); run "
                    "scripts/install_sglang_contract.sh and set SPECBENCH_SGLANG_PYTHON")
    root = tmp_path_factory.mktemp("oracle")
    scripts = root / "scripts.json"
    scripts.write_text(json.dumps(all_scripts()))
    servers: dict[str, Server] = {}
    try:
        for mode in MODES:
            model_dir = root / mode
            model_dir.mkdir()
            argv = [SGLANG_PYTHON, str(HERE / "launch.py"), str(model_dir),
                    *specbench_argv(mode, model_dir), "--device", "cpu", "--skip-server-warmup"]
            proc, url = start(argv, root / f"{mode}.log", {
                "SPECBENCH_ORACLE_SCRIPTS": str(scripts),
                "SPECBENCH_ORACLE_RECEIVED": str(model_dir / "received.jsonl"),
                "TOKENIZERS_PARALLELISM": "false",
            })
            servers[mode] = Server(proc, url, root / f"{mode}.log")
        deadline = time.monotonic() + READY_TIMEOUT_S
        for server in servers.values():
            server.wait_ready(deadline)
        jobs = requests({mode: server.url for mode, server in servers.items()}, sim=False)
        captured = capture_all(jobs)
        captured.update(recapture_merged(jobs, captured))
    finally:
        for server in servers.values():
            server.stop()
    received: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        path = root / mode / "received.jsonl"
        for line in path.read_text().splitlines() if path.exists() else ():
            record = json.loads(line)
            received[record["script"]] = record["sampling"]
    return as_run(captured, received)


@pytest.fixture(scope="session")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The simulator's streams for the same requests (the cases it can make)."""
    root = tmp_path_factory.mktemp("oracle-sim")
    servers: dict[str, Server] = {}
    try:
        for mode in MODES:
            argv = [sys.executable, "-m", "specbench.sim", *specbench_argv(mode, root),
                    "--sim-time-scale", "20"]
            proc, url = start(argv, root / f"sim-{mode}.log", {})
            servers[mode] = Server(proc, url, root / f"sim-{mode}.log")
        deadline = time.monotonic() + 60
        for server in servers.values():
            server.wait_ready(deadline)
        captured = capture_all(
            requests({mode: server.url for mode, server in servers.items()}, sim=True))
    finally:
        for server in servers.values():
            server.stop()
    return as_run(captured, {})
