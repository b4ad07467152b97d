"""Server subprocess lifecycle: port pre-check, launch, readiness, log capture, stop.

Facts this follows (SGLang 0.5.23's HTTP server and launcher):
- SGLang binds its HTTP port only after loading the model, so a port conflict would show up
  minutes late: the port is checked before launch.
- Readiness is `GET /ready` (200 only once the warmup request succeeded); `/model_info`
  answers earlier. SGLang before 0.5.20 has no `/ready` (engines/versions.py): a 404 there
  switches the poll to `/health`, which answers 503 while the server starts and 200 once a
  one-token generation went through (it injects that request, so it is the fallback only).
- SGLang creates no process group and drains requests on SIGTERM, possibly for minutes. The
  server is started in a new session; stop is SIGTERM to the group, then SIGKILL of the group
  after a grace period. Nothing is ever killed by name pattern.
- The server gets PR_SET_PDEATHSIG=SIGKILL so it dies with specbench even on SIGKILL of
  specbench (SGLang's own children already die with their parent).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specbench.errors import UserError
from specbench.redaction import redact

_PR_SET_PDEATHSIG = 1
# Grace for a server that never became ready: short, so an interrupted start still stops
# everything within the 10 s a user waits after Ctrl-C.
STOP_ON_FAILED_START_S = 5.0


class ServerStartError(UserError, RuntimeError):
    """The server did not come up; the message is complete and meant for the user."""


class PortInUseError(ServerStartError):
    """The port was taken between the preflight check and the launch."""


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


# Never through HTTP(S)_PROXY: the servers are on this host or the cluster's own network, and
# a proxy in the environment would make `/ready` time out while the server is up.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url: str, timeout_s: float = 2.0, token: str | None = None) -> tuple[int, bytes]:
    """A tiny synchronous GET (no event loop needed); `token` is sent as a bearer token."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with _DIRECT.open(request, timeout=timeout_s) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def kept_log_path(path: Path) -> Path:
    """Where `fresh_log` will keep the log now at `path`: the first free `<name>.<n>.log`."""
    n = 1
    while (older := path.with_name(f"{path.stem}.{n}{path.suffix}")).exists():
        n += 1
    return older


def fresh_log(path: Path) -> Path:
    """Keep an earlier start's log as `<name>.<n>.log` so this start's log holds only its own
    lines (a restart's diagnosis must not read the previous server's shutdown)."""
    if path.exists():
        path.rename(kept_log_path(path))
    return path


def wait_ready(
    base_url: str,
    timeout_s: float,
    check: Callable[[], None] | None = None,
    route: str = "/ready",
) -> bool:
    """Poll `GET route` until it answers 200 (True) or `timeout_s` passes (False).

    A 404 from `/ready` means a release without that route: polling goes on at `/health`.
    `check` runs before each poll and raises to give up early (a process that exited).
    """
    deadline = time.monotonic() + timeout_s
    base = base_url.rstrip("/")
    while time.monotonic() < deadline:
        if check is not None:
            check()
        try:
            status, _ = http_get(base + route, timeout_s=2.0)
            if status == 200:
                return True
            if status == 404 and route == "/ready":
                route = "/health"
                continue
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.1)
    return False


# Turns a failed start's log into one message (engines/diagnose.py).
Diagnoser = Callable[[str, Path], str | None]


@dataclass
class ServerProcess:
    """One launched server. `start()` returns when its readiness route answers 200."""

    name: str
    argv: list[str]
    log_path: Path
    host: str
    port: int
    env: dict[str, str] = field(default_factory=dict)
    diagnose: Diagnoser | None = None
    ready_route: str = "/ready"  # versions.Release.ready_route of the launched SGLang
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self, ready_timeout_s: float) -> None:
        if not port_is_free(self.host, self.port):
            raise PortInUseError(
                f"port {self.port} on {self.host} is already in use; stop what listens there "
                "or pass another --port"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        fresh_log(self.log_path)
        log = open(self.log_path, "wb")  # noqa: SIM115 - handed to the child, closed below
        shown = " ".join(redact(self.argv))
        log.write(f"# specbench: launching {self.name}: {shown}\n".encode())
        log.flush()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                start_new_session=True,
                preexec_fn=_die_with_parent,  # only prctl between fork and exec: no locks
            )
        except OSError as exc:
            log.close()
            raise ServerStartError(
                f"{self.name} server could not be started ({exc}); check the server command "
                f"({self.argv[0]})"
            ) from None
        finally:
            log.close()
        try:
            self._wait_ready(ready_timeout_s)
        except BaseException:
            # Ctrl-C or SIGTERM while waiting (minutes for a real model): the half-started
            # server is stopped here, since the caller never got a handle to stop it with.
            self.stop(STOP_ON_FAILED_START_S)
            raise

    def _wait_ready(self, timeout_s: float) -> None:
        def still_starting() -> None:
            assert self.proc is not None
            code = self.proc.poll()
            if code is not None:
                raise ServerStartError(
                    self._failure_message(f"exited with code {code} during start-up")
                )

        if not wait_ready(self.base_url, timeout_s, check=still_starting,
                          route=self.ready_route):
            self.stop()
            raise ServerStartError(
                self._failure_message(f"did not become ready within {timeout_s:.0f} s")
            )

    def _failure_message(self, what: str) -> str:
        if self.diagnose is not None:
            message = self.diagnose(log_tail(self.log_path, 400), self.log_path)
            if message:
                return f"{self.name} server {what}: {message}"
        tail = log_tail(self.log_path)
        return f"{self.name} server {what}; see the log {self.log_path}" + (
            f"; last lines:\n{tail}" if tail else ""
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout_s: float) -> None:
        """Give a dying process up to `timeout_s` to exit (its last log lines are then on
        disk); a process still running after that is left as it is."""
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout_s)

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL it after `grace_s`."""
        proc = self.proc
        if proc is None:
            return
        pgid = proc.pid  # new session: the leader's pid is the group id
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace_s)
        # Children that outlived the leader (or a leader that ignored SIGTERM) go now.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        self.proc = None
