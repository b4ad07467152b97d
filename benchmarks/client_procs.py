"""Tokens per second one point streams with its users split over 1, 2 and 4 client processes.

The source must not be the limit, so it is several processes of the test suite's batch fake
(tests/load/fakeserver.py, ``BatchFake``: one SSE chunk of one token per stream per step, as
fast as it can at step 0) sharing one port through SO_REUSEPORT; the kernel spreads the
client's connections over them. The client is :func:`specbench.load.procs.run_point_procs`,
the code ``--client-procs`` runs, with no /metrics scrapes (the fake has none). Each row is the
median of --runs runs: window tokens per wall second, and the busiest client process's CPU
fraction.

Usage (16 cores: 8 server processes, c = 512, about 1 minute)::

    PYTHONPATH=. python3 benchmarks/client_procs.py
    PYTHONPATH=. python3 benchmarks/client_procs.py --procs 1,2,4 --servers 8 --concurrency 512
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TOKENS_PER_REQUEST = 256
NEEDED = ("aiohttp", "numpy")


def serve(port: int) -> None:
    from tests.load.fakeserver import BatchFake, FakeOptions

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    opts = FakeOptions(output_tokens=TOKENS_PER_REQUEST, step_s=0.0)
    asyncio.run(BatchFake(opts, port, reuse_port=True).serve_forever())


def measure(url: str, procs: int, concurrency: int, warmup_s: float, window_s: float
            ) -> tuple[float, float, int]:
    """(window tokens per wall second, busiest process's CPU fraction, errors)."""
    import numpy as np

    from specbench.load.procs import run_point_procs
    from specbench.load.records import PointSpec
    from specbench.prompts import PromptRequest

    requests = [PromptRequest(id=f"p{i}", prompt_set="bench", category="bench",
                              messages=({"role": "user", "content": f"question {i}"},),
                              max_tokens=TOKENS_PER_REQUEST) for i in range(64)]
    spec = PointSpec(base_url=url, protocol="openai-chat", model="m", concurrency=concurrency,
                     requests=requests, warmup_s=warmup_s, window_s=window_s,
                     scrape_metrics=False, request_timeout_s=60.0)
    result = run_point_procs(spec, procs)
    start, end = result.window_start, result.window_end
    tokens = 0
    for r in result.records:
        counts = np.concatenate([[0], r.chunk_tokens])
        lo, hi = np.searchsorted(r.chunk_t, [start, end], side="right")
        tokens += int(counts[hi] - counts[lo])
    errors = sum(r.status == "error" for r in result.records)
    return tokens / result.window_wall_s, result.client_cpu_s / result.window_wall_s, errors


def _wait_port(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the benchmark servers did not listen on port {port}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--procs", default="1,2,4")
    parser.add_argument("--servers", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--window-s", type=float, default=3.0)
    parser.add_argument("--_serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._serve:
        serve(args._serve)
        return 0
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"error: missing Python modules: {', '.join(missing)}; install them "
                 "(pip install -e . in this checkout) and run again")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    servers = [subprocess.Popen([sys.executable, __file__, "--_serve", str(port)], env=env)
               for _ in range(args.servers)]
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        _wait_port(port)
        time.sleep(0.5)  # every server process bound before the first connection
        for procs in [int(p) for p in args.procs.split(",")]:
            runs = [measure(url, procs, args.concurrency, args.warmup_s, args.window_s)
                    for _ in range(args.runs)]
            rows.append((procs, statistics.median(r[0] for r in runs),
                         statistics.median(r[1] for r in runs), max(r[2] for r in runs)))
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(10)
    print(f"one point, c = {args.concurrency}, {args.servers} BatchFake server processes at "
          f"step 0, {args.runs} runs of {args.window_s:g} s windows (medians); python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cpus")
    print(f"{'procs':>5} {'tok/s':>10} {'x 1 proc':>8} {'busiest cpu':>11} {'errors':>6}")
    for procs, tok_s, cpu, errors in rows:
        print(f"{procs:>5} {tok_s:>10.0f} {tok_s / rows[0][1]:>8.2f} {cpu:>11.2f} {errors:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
