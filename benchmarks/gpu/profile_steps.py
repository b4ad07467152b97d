"""GPU kernel time per decode step of a real SGLang server at load, by kind of kernel (issue 37).

EAGLE-3's step at 32-64 running requests costs more than the simulator's verify (a multiple of a
decode's KV read) and the same on an H100 and an H200 (results/gpu/README.md). Whether that time
is the verify's attention kernel, the GEMMs or the host (the GPU idle between kernels) needs the
kernels themselves: this script asks the server for a torch profile of a few steps at each load
level while a sweep runs, then splits each step's wall time into kernel kinds and idle time.

  # beside a sweep whose server listens on --port (device_call.sh's `fiprof` step):
  python3 benchmarks/gpu/profile_steps.py watch --port 30000 --levels 16,32,64 --out DIR \
      --until-pid PID
  python3 benchmarks/gpu/profile_steps.py summarize DIR   # the table; writes DIR/steps.json

`watch` polls /metrics; once a server (named by /server_info: baseline, eagle3, zero-step) has held
between --min-frac c (0.9) and c running requests for --stable-s, it POSTs /start_profile with
--steps steps and GPU activity only, to DIR/<mode>-c<c>/, once per (mode, level). SGLang writes a
chrome trace there (`*.trace.json.gz`) when the steps are done. Its steps are scheduler
iterations, so the prefill forwards that run at load are among them: the plain server's
`attn_prefill` is theirs, EAGLE-3's is theirs plus the verify's (the same FlashInfer kernel).
Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# Kernel kinds by name, first match wins (FlashInfer 0.6 and SGLang 0.5.17 kernel names).
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("attn_prefill", re.compile(r"BatchPrefill|SinglePrefill|prefill", re.I)),
    ("attn_decode", re.compile(r"BatchDecode|decode", re.I)),
    ("gemm", re.compile(r"gemm|nvjet|cutlass|xmma|sm90_|cublas", re.I)),
)
RUNNING = "sglang:num_running_reqs"


def _get(url: str, timeout_s: float = 2.0) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return bytes(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def running_requests(base: str) -> float | None:
    """SGLang's running-requests gauge, summed over its label sets; None if unreadable."""
    page = _get(base + "/metrics")
    if page is None:
        return None
    total = None
    for line in page.decode(errors="replace").splitlines():
        if line.startswith(RUNNING + "{") or line.startswith(RUNNING + " "):
            total = (total or 0.0) + float(line.rsplit(maxsplit=1)[-1])
    return total


def server_mode(base: str) -> str | None:
    """The sweep's name for the server: baseline, eagle3, or, for an adaptive server, the stem of
    the schedule file specbench wrote for it (servers/<mode>.adaptive.json: zero-step, dynamic)."""
    page = _get(base + "/server_info")
    if page is None:
        return None
    info = json.loads(page)
    if not info.get("speculative_algorithm"):
        return "baseline"
    schedule = info.get("speculative_adaptive_config")
    if info.get("speculative_adaptive") and schedule:
        return Path(str(schedule)).name.split(".")[0]
    return "eagle3"


def start_profile(base: str, out_dir: Path, steps: int) -> str:
    body = json.dumps({"output_dir": str(out_dir), "num_steps": steps, "activities": ["GPU"],
                       "profile_id": out_dir.name}).encode()
    request = urllib.request.Request(base + "/start_profile", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return f"{response.status} {response.read().decode(errors='replace').strip()}"
    except (urllib.error.URLError, OSError) as exc:
        return f"failed: {exc}"


def _alive(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def watch(port: int, levels: list[int], out: Path, *, modes: tuple[str, ...] = ("baseline",
          "eagle3"), steps: int = 20, stable_s: float = 3.0, until_pid: int | None = None,
          timeout_s: float | None = None, poll_s: float = 0.5, min_frac: float = 0.9) -> int:
    """Profile each of `modes` once at each level; return when all are asked for, the process
    `until_pid` (the sweep) has ended or `timeout_s` has passed (1 if some were not asked)."""
    base = f"http://127.0.0.1:{port}"
    out.mkdir(parents=True, exist_ok=True)
    done: set[tuple[str, int]] = set()
    since: dict[int, float] = {}
    mode: str | None = None
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while (_alive(until_pid) and len(done) < len(modes) * len(levels)
           and (deadline is None or time.monotonic() < deadline)):
        running = running_requests(base)
        if running is None:
            mode = None  # between servers: ask again when the next one answers
            since.clear()
        else:
            mode = mode or server_mode(base)
            now = time.monotonic()
            for c in levels:
                if (mode not in modes or (mode, c) in done
                        or not min_frac * c <= running <= c):
                    since.pop(c, None)
                    continue
                since.setdefault(c, now)
                if now - since[c] >= stable_s:
                    where = out / f"{mode}-c{c}"
                    answer = start_profile(base, where, steps)
                    print(f"profile {where.name}: {running:.0f} running, {answer}", flush=True)
                    done.add((mode, c))
        time.sleep(poll_s)
    missed = [f"{m}-c{c}" for m in modes for c in levels if (m, c) not in done]
    if missed:
        print(f"not profiled (the load never held there): {', '.join(missed)}", flush=True)
    return 1 if missed else 0


def _kind(name: str) -> str:
    for kind, pattern in KINDS:
        if pattern.search(name):
            return kind
    return "other"


def step_breakdown(trace_path: Path, steps: int) -> dict[str, float]:
    """Per step (ms): wall time from the first kernel to the last, time in each kernel kind,
    and idle (wall less the union of the kernels' intervals)."""
    with gzip.open(trace_path, "rt") if trace_path.suffix == ".gz" else open(trace_path) as f:
        events = json.load(f)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    kernels = [(float(e["ts"]), float(e["dur"]), str(e.get("name", ""))) for e in events
               if e.get("cat") == "kernel" and "dur" in e]
    if not kernels:
        return {}
    kernels.sort()
    out: dict[str, float] = {kind: 0.0 for kind, _ in KINDS} | {"other": 0.0}
    busy_us, end_us = 0.0, kernels[0][0]
    for ts, dur, name in kernels:
        out[_kind(name)] += dur
        busy_us += max(0.0, ts + dur - max(ts, end_us))
        end_us = max(end_us, ts + dur)
    wall_us = end_us - kernels[0][0]
    per_step = {k: v / steps / 1e3 for k, v in out.items()}
    per_step["wall"] = wall_us / steps / 1e3
    per_step["idle"] = (wall_us - busy_us) / steps / 1e3
    per_step["kernels"] = len(kernels) / steps
    return per_step


def summarize(out: Path, steps: int) -> int:
    rows: dict[str, dict[str, float]] = {}
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        traces = sorted(folder.rglob("*.trace.json*"))
        if traces:
            rows[folder.name] = step_breakdown(traces[0], steps)
    if not rows:
        print(f"error: no *.trace.json(.gz) under {out}/<mode>-c<c>/: did the server write its "
              "profile (its log says where)?", file=sys.stderr)
        return 2
    columns = ["wall", "attn_prefill", "attn_decode", "gemm", "other", "idle", "kernels"]
    print("ms per step (GPU kernel time by kind; idle = wall less the kernels' union)")
    print(f"{'server-level':16s}" + "".join(f"{c:>13s}" for c in columns))
    for name, row in rows.items():
        print(f"{name:16s}" + "".join(f"{row.get(c, float('nan')):13.2f}" for c in columns))
    (out / "steps.json").write_text(json.dumps({"steps_per_profile": steps, "rows": rows},
                                               indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("watch", help="profile each server at each level while a sweep runs")
    w.add_argument("--port", type=int, default=30000)
    w.add_argument("--levels", default="16,32,64")
    w.add_argument("--modes", default="baseline,eagle3")
    w.add_argument("--out", type=Path, required=True)
    w.add_argument("--steps", type=int, default=20)
    w.add_argument("--stable-s", type=float, default=3.0)
    w.add_argument("--until-pid", type=int, default=None)
    w.add_argument("--timeout-s", type=float, default=None)
    # Agentic's long prompts keep more requests in prefill: 27-29 of 32 run at once.
    w.add_argument("--min-frac", type=float, default=0.9)
    s = sub.add_parser("summarize", help="per-step kernel time by kind from the traces")
    s.add_argument("out", type=Path)
    s.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    if args.command == "watch":
        levels = [int(x) for x in args.levels.split(",")]
        return watch(args.port, levels, args.out, modes=tuple(args.modes.split(",")),
                     steps=args.steps, stable_s=args.stable_s, until_pid=args.until_pid,
                     timeout_s=args.timeout_s, min_frac=args.min_frac)
    return summarize(args.out, args.steps)


if __name__ == "__main__":
    sys.exit(main())

