"""How much streaming the load generator can take: client CPU per chunk, tokens per CPU-second.

Runs specbench's real runner (:func:`specbench.load.runner.run_point`, protocol openai-chat)
against a server with zero step time, in separate processes so that the client's CPU and
memory are its own. The server is the test suite's fake SGLang (`tests/load/fakeserver.py`):
it keeps every open stream in one batch and, each step, writes one SSE chunk carrying one token
to every stream, in SGLang's chat format with continuous usage, as fast as it can (or one step
every --paced-step-ms). It costs no model time at all, so whatever limits a point here is the
client or the machine.

For each concurrency it reports, as medians of --runs runs:

- tok/cpu-s     tokens streamed in the window per client CPU-second (window CPU only);
- us/chunk      client CPU microseconds per token-bearing chunk, inside the window;
- parse us/chunk  CPU per chunk of the stream parsing that runs after the window;
- chunks/read   how many chunks one network read carried (1.0 = no coalescing);
- cpu frac      client CPU / window wall time (1.0 = the event loop's core is saturated);
- peak MB       the client process's peak resident memory.

On the paced server each level runs twice: closed loop (c users) and open loop
(:mod:`specbench.load.arrivals`: Poisson arrivals at the request rate the closed-loop run before
it achieved, so about c requests in flight once warm and the same tok/s), so that the client's
CPU per chunk of the two load paths can be compared at the same load.

Usage::

    python benchmarks/client_capacity.py            # c = 1, 64, 256, 1024; 3 runs; 3 s windows
    python benchmarks/client_capacity.py --quick    # 0.5 s windows, paced at c=256 only (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# The server is the test suite's fake (one copy of SGLang's stream format for the tests and
# this benchmark). It and the driver's helpers are imported only where they run, so the client
# process (whose memory is reported) holds only what the runner needs.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOKENS_PER_REQUEST = 256
# The body the runner sends for openai-chat, as far as the fake's chat format reads it.
CHAT_BODY = {"model": "m", "max_completion_tokens": TOKENS_PER_REQUEST,
             "stream_options": {"include_usage": True, "continuous_usage_stats": True}}


# -- the server: the test suite's fake SGLang in batch mode, no model time -----------------

def serve(port: int, step_s: float) -> None:
    from tests.load.fakeserver import BatchFake, FakeOptions

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    opts = FakeOptions(output_tokens=TOKENS_PER_REQUEST, step_s=step_s)
    asyncio.run(BatchFake(opts, port).serve_forever())


# -- one client run (its own process) ------------------------------------------------------

def client(url: str, concurrency: int, warmup_s: float, window_s: float,
           rate: float = 0.0, seed: int = 0) -> dict[str, Any]:
    """One point; `rate` > 0: open loop at that many requests per second, arrival times drawn
    with `seed`."""
    import numpy as np

    from specbench.load.arrivals import run_open_point
    from specbench.load.runner import PointSpec, run_point
    from specbench.prompts import PromptRequest

    requests = [PromptRequest(id=f"p{i}", prompt_set="bench", category="bench",
                              messages=({"role": "user", "content": f"question {i}"},),
                              max_tokens=TOKENS_PER_REQUEST) for i in range(64)]
    spec = PointSpec(base_url=url, protocol="openai-chat", model="m", concurrency=concurrency,
                     requests=requests, warmup_s=warmup_s, window_s=window_s,
                     scrape_metrics=False, request_timeout_s=60.0)
    if rate > 0:
        spec = PointSpec(base_url=url, protocol="openai-chat", model="m", concurrency=0,
                         requests=requests, warmup_s=warmup_s, window_s=window_s,
                         scrape_metrics=False, request_timeout_s=60.0, request_rate=rate,
                         drain_max_s=0.1, arrival_seed=seed)
    cpu0 = time.process_time()
    result = asyncio.run(run_open_point(spec) if rate > 0 else run_point(spec))
    cpu_total = time.process_time() - cpu0
    from specbench.metrics import window_tokens  # after the run: pandas is a slow import

    start, end = result.window_start, result.window_end
    tokens = sum(window_tokens(r.chunk_t, r.chunk_tokens, start, end) for r in result.records)
    reads = sum(int(np.count_nonzero((r.chunk_t > start) & (r.chunk_t <= end)))
                for r in result.records)
    errors = [r.error_class for r in result.records if r.status == "error"]
    return {
        "concurrency": concurrency,
        "loop": "open" if rate > 0 else "closed",
        "tokens": tokens,
        "window_wall_s": end - start,
        "client_cpu_s": result.client_cpu_s,
        "cpu_total_s": cpu_total,
        "reads": reads,
        "errors": len(errors),
        "error_classes": {c: errors.count(c) for c in sorted(set(errors), key=str)},
        "loop_lag_p99_ms": result.loop_lag_ms["p99"],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def parse_cost_us_per_chunk(n_chunks: int = 20000) -> float:
    """CPU microseconds the chat parser spends per token chunk (after the window)."""
    from specbench.load.protocols import parse_chat
    from tests.load.fakeserver import chat_format

    fmt = chat_format(CHAT_BODY, "r0", spec=False)
    # One read per event, as a paced server delivers them (the role chunk rides with token 1).
    reads = [event for n in range(1, n_chunks + 1)
             for event in fmt.chunk(n, 1, n - 1, n == n_chunks)]
    reads += fmt.tail(n_chunks, n_chunks - 1)
    times = [float(i) for i in range(len(reads))]
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        parse_chat(reads, times)
        best = min(best, time.process_time() - t0)
    return best / n_chunks * 1e6


# -- the driver ----------------------------------------------------------------------------

def _wait_port(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the benchmark server did not listen on port {port}")


def _measure(step_ms: float, levels: list[int], runs: int, warmup_s: float, window_s: float,
             raw: bool, open_loop: bool = False) -> list[dict[str, Any]]:
    """Start a server with this step time, run the client `runs` times per level (and, with
    `open_loop`, as many open-loop runs holding about as many requests in flight)."""
    from specbench.engines.process import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    server = subprocess.Popen(
        [sys.executable, __file__, "--_serve", str(port), str(step_ms / 1000.0)], env=env)
    rows = []
    try:
        _wait_port(port)
        # The two loops' runs alternate, so that the shared machine's drift hits both alike.
        # The open loop's rate is the request rate its closed-loop run just achieved: c in
        # flight at c / request duration per second, with the duration as measured (the paced
        # server's step stretches past step_ms as c grows; the nominal rate held 14% more in
        # flight at c = 256). Each run draws its own arrival times: one seed for every run put
        # 57 of 64 requests in flight when the window opened, each time (11% fewer chunks for
        # the same per-turn costs, which read as 10-14% more CPU per chunk).
        loops = ["closed", "open"] if open_loop else ["closed"]
        for c in levels:
            results: dict[str, list[dict[str, Any]]] = {loop: [] for loop in loops}
            for run_index in range(runs):
                rate, warm_s = 0.0, warmup_s
                for loop in loops:
                    out = subprocess.run(
                        [sys.executable, __file__, "--_client", f"http://127.0.0.1:{port}",
                         str(c), str(warm_s), str(window_s), str(rate), str(run_index)],
                        env=env, capture_output=True, text=True, timeout=120, check=True)
                    run = json.loads(out.stdout)
                    results[loop].append(run)
                    rate = run["tokens"] / run["window_wall_s"] / TOKENS_PER_REQUEST
                    # Arrivals fill the server over one request's duration (c / rate): the
                    # window opens after 1.5 of them, at the closed loop's load, not on the ramp
                    # (a window opened at the first request's end held 13-15% fewer tok/s at
                    # c = 1,024).
                    warm_s = max(warmup_s, 1.5 * c / rate) if rate > 0 else warmup_s
            for runs_of_loop in results.values():
                if raw:
                    print(json.dumps({"step_ms": step_ms, "runs": runs_of_loop}))
                rows.append({"step_ms": step_ms, **_row(c, runs_of_loop)})
    finally:
        server.terminate()
        server.wait(10)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="0.5 s windows, paced runs at c=256 only (CI report, < 60 s)")
    parser.add_argument("--levels", default="1,64,256,1024")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=None)
    parser.add_argument("--paced-step-ms", type=float, default=10.0,
                        help="step time of the paced server (one chunk per stream per step)")
    parser.add_argument("--json", action="store_true", help="print raw runs as JSON too")
    parser.add_argument("--_serve", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--_client", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._serve:
        serve(int(args._serve[0]), float(args._serve[1]))
        return 0
    if args._client:
        url, c, warmup, window, rate, seed = args._client
        print(json.dumps(client(url, int(c), float(warmup), float(window), float(rate),
                                int(seed))))
        return 0

    window_s = args.window_s or (0.5 if args.quick else 3.0)
    # The open loop's warmup waits for a first request to end: a paced one lasts 2.56 s.
    warmup_s = 0.2 if args.quick else 1.0
    levels = [int(x) for x in args.levels.split(",")]
    paced_levels = [c for c in levels if c == 256] if args.quick else levels
    rows = _measure(0.0, levels, args.runs, warmup_s, window_s, args.json)
    if paced_levels:
        rows += _measure(args.paced_step_ms, paced_levels, args.runs, warmup_s, window_s,
                         args.json, open_loop=True)
    parse_us = parse_cost_us_per_chunk()
    print(f"client capacity, openai-chat, one token per chunk, {args.runs} runs of "
          f"{window_s:g} s windows (medians); python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cpus")
    print(f"{'step ms':>7} {'load':>6} {'c':>5} {'tok/s':>8} {'tok/cpu-s':>10} {'us/chunk':>9} "
          f"{'chunks/read':>11} {'cpu frac':>8} {'lag p99 ms':>10} {'peak MB':>8} {'errors':>6}")
    for r in rows:
        print(f"{r['step_ms']:>7g} {r['loop']:>6} {r['c']:>5} {r['tok_s']:>8.0f} "
              f"{r['tok_per_cpu_s']:>10.0f} "
              f"{r['us_per_chunk']:>9.1f} {r['chunks_per_read']:>11.2f} {r['cpu_frac']:>8.2f} "
              f"{r['lag_p99_ms']:>10.2f} {r['peak_mb']:>8.0f} {r['errors']:>6d}")
    print(f"stream parsing after the window: {parse_us:.1f} us per chunk")
    for closed in (r for r in rows if r["loop"] == "closed" and r["step_ms"] > 0):
        opened = next((r for r in rows if r["loop"] == "open" and r["c"] == closed["c"]
                       and r["step_ms"] == closed["step_ms"]), None)
        if opened is not None:
            print(f"open loop / closed loop, us per chunk at c={closed['c']} (paced): "
                  f"{opened['us_per_chunk'] / closed['us_per_chunk']:.2f}")
    return 0


def _row(c: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(f: Any) -> float:
        return float(statistics.median(f(r) for r in runs))

    return {
        "c": c,
        "loop": runs[0]["loop"],
        "tok_s": med(lambda r: r["tokens"] / r["window_wall_s"]),
        "tok_per_cpu_s": med(lambda r: r["tokens"] / max(r["client_cpu_s"], 1e-9)),
        "us_per_chunk": med(lambda r: r["client_cpu_s"] / max(r["tokens"], 1) * 1e6),
        "chunks_per_read": med(lambda r: r["tokens"] / max(r["reads"], 1)),
        "cpu_frac": med(lambda r: r["client_cpu_s"] / r["window_wall_s"]),
        "lag_p99_ms": med(lambda r: r["loop_lag_p99_ms"]),
        "peak_mb": med(lambda r: r["peak_rss_mb"]),
        "errors": int(max(r["errors"] for r in runs)),
    }


if __name__ == "__main__":
    sys.exit(main())
