"""ServerProcess against tiny real servers written here (no mocks)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from specbench.engines.process import PortInUseError, ServerProcess, ServerStartError, free_port

FAKE = textwrap.dedent(
    """
    import http.server, os, signal, subprocess, sys, time
    port, ignore_term, child_pid_file = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open(child_pid_file, "w").write(str(child.pid))
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/ready" else 404)
            self.end_headers()
        def log_message(self, *a):
            pass
    print("The server is fired up and ready to roll!", flush=True)
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); read its state.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("ignore_term", [False, True])
def test_start_ready_and_stop_kills_the_group(tmp_path: Path, ignore_term: bool) -> None:
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    port = free_port()
    pid_file = tmp_path / "child.pid"
    proc = ServerProcess(
        "fake",
        [sys.executable, str(script), str(port), "1" if ignore_term else "0", str(pid_file)],
        tmp_path / "fake.log",
        "127.0.0.1",
        port,
    )
    proc.start(ready_timeout_s=20)
    assert proc.alive()
    child = int(pid_file.read_text())
    leader = proc.proc.pid if proc.proc else -1
    assert os.getpgid(leader) == leader  # its own session/group
    t0 = time.monotonic()
    proc.stop(grace_s=1.0)
    assert time.monotonic() - t0 < 10
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)
    assert not _alive(leader)
    assert "launching fake" in (tmp_path / "fake.log").read_text()


def test_port_in_use_is_refused(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = ServerProcess(
            "x", [sys.executable, "-c", "pass"], tmp_path / "x.log", "127.0.0.1", port
        )
        with pytest.raises(PortInUseError, match=f"port {port}.*already in use"):
            proc.start(ready_timeout_s=5)


def test_early_exit_names_the_log(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-c", "print('boom: Not enough memory'); raise SystemExit(3)"]
    proc = ServerProcess("baseline", argv, tmp_path / "b.log", "127.0.0.1", port)
    with pytest.raises(ServerStartError) as err:
        proc.start(ready_timeout_s=20)
    message = str(err.value)
    assert "exited with code 3" in message
    assert str(tmp_path / "b.log") in message
    assert "boom: Not enough memory" in message


def test_never_ready_times_out_and_stops(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-c", "import time; time.sleep(60)"]
    proc = ServerProcess("slow", argv, tmp_path / "s.log", "127.0.0.1", port)
    with pytest.raises(ServerStartError, match="did not become ready within 1 s"):
        proc.start(ready_timeout_s=1)
    assert not proc.alive()


def test_server_dies_with_a_sigkilled_parent(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: the server goes when the process that launched it is SIGKILLed."""
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    port = free_port()
    pid_file = tmp_path / "server.pid"
    launcher = tmp_path / "launcher.py"
    launcher.write_text(
        textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from specbench.engines.process import ServerProcess
        argv = [sys.executable, {str(script)!r}, "{port}", "0", {str(tmp_path / "c.pid")!r}]
        p = ServerProcess("fake", argv,
                          Path({str(tmp_path / "f.log")!r}), "127.0.0.1", {port})
        p.start(20)
        Path({str(pid_file)!r}).write_text(str(p.proc.pid))
        time.sleep(600)
    """)
    )
    parent = subprocess.Popen([sys.executable, str(launcher)])
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    server_pid = int(pid_file.read_text())
    assert _alive(server_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server_pid)
