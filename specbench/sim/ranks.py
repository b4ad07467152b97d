"""Stand-ins for the tensor-parallel ranks of a simulated server (`--tp-size N`, N > 1).

What they stand for. SGLang 0.5.23's server process (HTTP server and tokenizer manager) runs
the scheduler of every TP rank in a process of its own, named ``scheduler_0`` to
``scheduler_{N-1}``, beside a detokenizer process. Once they are up, a daemon thread of the
server process looks at each of them once a second. When one has ended with a non-zero exit
code (killed by hand or by the OOM killer, aborted by NCCL), that thread logs an error naming
the process, its pid and its exit code, and sends SIGQUIT to the server process. SGLang's
SIGQUIT handler logs that a child failed, SIGKILLs all the server's descendants and then the
server process itself, so the server exits as killed by SIGKILL (status -9). SGLang never
restarts a rank inside the server: whoever launched the server has to start it again.

Here rank 0 is the simulator's own process (its asyncio scheduler models the whole server's
work); ranks 1..N-1 are forked children that compute nothing. Each blocks reading a pipe whose
write end only the server holds, so a rank ends when the server ends, however it ends: on a
SIGKILL the kernel closes the write end. Ranks ignore SIGINT and SIGTERM, which reach the whole
process group on Ctrl-C or when a harness stops the server: the server then closes the pipe
itself, and a rank that died of that signal first would look like a crash. A rank killed any
other way (``kill -9 PID``) is a rank that dies: the watchdog below polls as SGLang's does,
logs the same two lines, and ends the server the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from types import FrameType
from typing import NoReturn

from specbench.sim.logs import log

WATCHDOG_INTERVAL_S = 1.0  # SGLang's subprocess watchdog looks once a second
_REAP_TIMEOUT_S = 2.0  # a rank needs only to read EOF and exit
_REAP_POLL_S = 0.01


@dataclass
class Rank:
    """One stand-in rank process."""

    name: str  # SGLang's name for it: scheduler_<rank>
    pid: int
    exit_code: int | None = None  # None while it runs; -N when signal N ended it


def _wait_for_the_server(read_fd: int, write_fd: int) -> NoReturn:
    """A rank's whole life (in the forked child): wait for EOF on the pipe, then exit 0.

    It never returns into the server's code: whatever happens ends in ``os._exit``.
    """
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.close(write_fd)  # else this rank would hold its own pipe open
        while os.read(read_fd, 1):  # the server never writes: this returns b"" at EOF
            pass
    except BaseException:
        os._exit(1)
    os._exit(0)


class RankProcesses:
    """Ranks 1..N-1 of a server and the watchdog that ends the server when one dies."""

    def __init__(self, ranks: list[Rank], write_fd: int) -> None:
        self.ranks = ranks
        self._write_fd: int | None = write_fd
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def describe(self) -> str:
        """``scheduler_1 (pid=4101), scheduler_2 (pid=4102)``: for the start-up log."""
        return ", ".join(f"{r.name} (pid={r.pid})" for r in self.ranks)

    def watch(self) -> None:
        """Install the SIGQUIT handler and start the watchdog thread (call from the main
        thread: only it may set signal handlers)."""
        signal.signal(signal.SIGQUIT, self._on_sigquit)
        self._thread = threading.Thread(
            target=self._watch, name="subprocess-watchdog", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """The server ends normally: stop watching, close the pipe, reap the ranks."""
        self._stop_watching()
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None
        deadline = time.monotonic() + _REAP_TIMEOUT_S
        while self._running() and time.monotonic() < deadline:
            time.sleep(_REAP_POLL_S)
        self._kill_ranks()  # any that did not see EOF in time

    def _watch(self) -> None:
        while not self._stop.wait(WATCHDOG_INTERVAL_S):
            dead = self._first_crashed()
            if dead is not None:
                log(
                    "error",
                    f"Subprocess {dead.name} (pid={dead.pid}) crashed with exit code "
                    f"{dead.exit_code}. Triggering SIGQUIT for cleanup...",
                )
                os.kill(os.getpid(), signal.SIGQUIT)
                return

    def _first_crashed(self) -> Rank | None:
        """The first rank that has ended with a non-zero code (a rank that exited 0 saw the
        server close the pipe: not a crash)."""
        self._running()  # reaps the ranks that ended, recording their exit codes
        return next((r for r in self.ranks if r.exit_code not in (None, 0)), None)

    def _running(self) -> list[Rank]:
        """Reap the ranks that have ended (recording their codes); those still running."""
        for rank in self.ranks:
            if rank.exit_code is not None:
                continue
            try:
                pid, status = os.waitpid(rank.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its code is lost
                rank.exit_code = 0
                continue
            if pid:
                rank.exit_code = os.waitstatus_to_exitcode(status)
        return [r for r in self.ranks if r.exit_code is None]

    def _on_sigquit(self, signum: int, frame: FrameType | None) -> None:
        """SGLang's end of a server whose child failed: log, kill the ranks, SIGKILL itself."""
        log(
            "error",
            f"SIGQUIT received. signum={signum}, frame={frame}. It usually means one child "
            "failed.",
        )
        self._stop_watching()  # a rank killed below must not be reported as a crash
        me = os.getpid()
        log("info", f"kill_process_tree called: parent_pid={me}, include_parent=True, pid={me}")
        self._kill_ranks()
        logging.shutdown()  # the lines above must reach the log before the SIGKILL
        os.kill(me, signal.SIGKILL)

    def _kill_ranks(self) -> None:
        for rank in self._running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(rank.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(rank.pid, 0)
                rank.exit_code = os.waitstatus_to_exitcode(status)

    def _stop_watching(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * WATCHDOG_INTERVAL_S)


def start_ranks(tp_size: int) -> RankProcesses | None:
    """Fork ranks 1..tp_size-1 (None for one rank). Call before any thread or event loop
    starts: a fork copies only the calling thread."""
    if tp_size <= 1:
        return None
    read_fd, write_fd = os.pipe()
    ranks: list[Rank] = []
    try:
        for rank in range(1, tp_size):
            pid = os.fork()
            if pid == 0:
                _wait_for_the_server(read_fd, write_fd)
            ranks.append(Rank(f"scheduler_{rank}", pid))
    except OSError:
        RankProcesses(ranks, write_fd).stop()
        raise
    finally:
        os.close(read_fd)  # only the ranks read
    return RankProcesses(ranks, write_fd)
