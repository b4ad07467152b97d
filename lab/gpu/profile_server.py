"""Profile a real SGLang server while a sweep measures it: py-spy and every thread's CPU.

Run it beside `lab/gpu/h200_sweep.sh` on the GPU machine (Python with psutil, which the
GPU image has; py-spy installed, e.g. from its wheel). It waits until the server answers
/health, then records until SIGINT (or until the server is gone):

- `pyspy.txt`: py-spy's collapsed stacks of the server and its subprocesses (tokenizer manager,
  scheduler, detokenizer), idle samples included, one line per stack and thread;
- `threads.tsv`: epoch seconds, pid, thread id, thread name and CPU ticks (100 a second) of
  every server thread, written whenever a thread's count moved (sampled at 10 Hz): a thread at
  a whole core gains 100 ticks a second;
- `gpu_util.csv`: nvidia-smi's utilisation every 200 ms, where nvidia-smi exists.

usage: profile_server.py OUT_DIR PY_SPY [--port 30000]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

SAMPLE_S = 0.1
STOPPED = False


def _stop(*_: Any) -> None:
    global STOPPED
    STOPPED = True


def healthy(port: int) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy
    try:
        return bool(opener.open(f"http://127.0.0.1:{port}/health", timeout=1).status == 200)
    except OSError:
        return False


def server_pid(port: int) -> int:
    """The process listening on the port: SGLang's HTTP server and tokenizer manager."""
    for conn in psutil.net_connections(kind="tcp"):
        listening = conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN
        if listening and conn.pid is not None:
            return conn.pid
    raise SystemExit(f"profile_server: nothing listens on port {port}")


def tree(root: int) -> list[int]:
    try:
        return [root, *(c.pid for c in psutil.Process(root).children(recursive=True))]
    except psutil.Error:
        return []


def thread_ticks(pid: int) -> list[tuple[int, str, int]]:
    """(thread id, name, user + system ticks) of each thread of `pid`."""
    found = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")].replace(" ", "_")
        fields = stat[stat.rindex(")") + 2:].split()
        found.append((int(tid), name, int(fields[11]) + int(fields[12])))  # utime, stime
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("py_spy")
    parser.add_argument("--port", type=int, default=30000)
    args = parser.parse_args()
    signal.signal(signal.SIGINT, _stop)
    while not STOPPED and not healthy(args.port):
        time.sleep(0.5)
    if STOPPED:
        return
    root = server_pid(args.port)
    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(
        [args.py_spy, "record", "--pid", str(root), "--subprocesses", "--idle", "--threads",
         "--nonblocking", "--rate", "100", "--format", "raw", "-o", str(out / "pyspy.txt")],
        stdout=(out / "pyspy.log").open("w"), stderr=subprocess.STDOUT)
    try:
        gpu: subprocess.Popen[bytes] | None = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=timestamp,utilization.gpu", "--format=csv,noheader",
             "-lms", "200"], stdout=(out / "gpu_util.csv").open("w"))
    except OSError:
        gpu = None
    last: dict[int, int] = {}
    with (out / "threads.tsv").open("w") as f:
        f.write(f"# ready_epoch {time.time():.3f} root {root}\n")
        while not STOPPED and (pids := tree(root)):
            now = time.time()
            for pid in pids:
                for tid, name, ticks in thread_ticks(pid):
                    if last.get(tid) != ticks:
                        last[tid] = ticks
                        f.write(f"{now:.2f}\t{pid}\t{tid}\t{name}\t{ticks}\n")
            time.sleep(max(0.0, SAMPLE_S - (time.time() - now)))
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(timeout=30)
    except subprocess.TimeoutExpired:
        spy.kill()
    if gpu is not None:
        gpu.terminate()


if __name__ == "__main__":
    main()
