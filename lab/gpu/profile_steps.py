"""GPU kernel time per decode step of a real SGLang server at load, by kind of kernel.

`specbench sweep --profile-steps 16,64` does this inside the sweep (specbench/engines/
profiler.py asks SGLang for the profile, specbench/analysis/kernels.py splits every rank's
trace) and `specbench explain` shows it. This script is the same beside a sweep that was
started without the option, or for traces taken by hand:

  # beside a sweep whose server listens on --port:
  python3 lab/gpu/profile_steps.py watch --port 30000 --levels 16,32,64 --out DIR \
      --until-pid PID
  python3 lab/gpu/profile_steps.py summarize DIR   # the table; writes DIR/steps.json

`watch` polls /metrics; once a server (named by /server_info: baseline, eagle3, zero-step) has held
between --min-frac c (0.9) and c running requests for --stable-s, it POSTs /start_profile with
--steps steps to DIR/<mode>-c<c>/, once per (mode, level). SGLang writes one chrome trace per
rank there (`*-TP-<rank>.trace.json.gz`) when the steps are done; `summarize` splits each
rank's into draft, verify and decode attention, prefill, GEMMs, communication, other, unknown
kernels (named) and host idle, per step, and takes the slowest rank's step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from specbench.analysis.kernels import KINDS, PointProfile, split_point
from specbench.engines.process import http_get
from specbench.engines.profiler import ACTIVITIES, ask_profile, running_requests


def server_mode(base: str) -> str | None:
    """The sweep's name for the server: baseline, eagle3, or, for an adaptive server, the stem of
    the schedule file specbench wrote for it (servers/<mode>.adaptive.json: zero-step, dynamic)."""
    try:
        status, page = http_get(base + "/server_info")
    except OSError:
        return None
    if status != 200:
        return None
    info = json.loads(page)
    if not info.get("speculative_algorithm"):
        return "baseline"
    schedule = info.get("speculative_adaptive_config")
    if info.get("speculative_adaptive") and schedule:
        return Path(str(schedule)).name.split(".")[0]
    return "eagle3"


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
          timeout_s: float | None = None, poll_s: float = 0.5, min_frac: float = 0.9,
          activities: tuple[str, ...] = ACTIVITIES) -> int:
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
                    error = ask_profile(base, where, steps, activities=activities)
                    print(f"profile {where.name}: {running:.0f} running, "
                          f"{error or 'asked'}", flush=True)
                    done.add((mode, c))
        time.sleep(poll_s)
    missed = [f"{m}-c{c}" for m in modes for c in levels if (m, c) not in done]
    if missed:
        print(f"not profiled (the load never held there): {', '.join(missed)}", flush=True)
    return 1 if missed else 0


def summarize(out: Path, steps: int) -> int:
    """The slowest rank's step of each <mode>-c<c> folder, by kind; DIR/steps.json keeps every
    rank's."""
    rows: dict[str, PointProfile] = {}
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        mode, _, level = folder.name.rpartition("-c")
        speculative = mode != "baseline"
        ranks = split_point(folder, speculative=speculative, steps_requested=steps)
        if ranks and level.isdigit():
            rows[folder.name] = PointProfile(mode, "", int(level), speculative, steps,
                                             ACTIVITIES, ranks)
    if not rows:
        print(f"error: no *.trace.json(.gz) under {out}/<mode>-c<c>/: did the server write its "
              "profile (its log says where)?", file=sys.stderr)
        return 2
    columns = ["step", *KINDS, "ranks"]
    print("ms per decode step on the slowest rank (GPU time by kind; idle = no kernel running)")
    print(f"{'server-level':16s}" + "".join(f"{c[:12]:>13s}" for c in columns))
    for name, profile in rows.items():
        step = profile.step
        assert step is not None
        cells = [step.step_ms, *(step.kinds_ms[k] for k in KINDS), float(len(profile.ranks))]
        print(f"{name:16s}" + "".join(f"{v:13.2f}" for v in cells))
        for kernel, ms in list(profile.unknown_ms.items())[:5]:
            print(f"{'':16s}  unknown kernel {ms:.3f} ms: {kernel[:100]}")
    (out / "steps.json").write_text(json.dumps(
        {"steps_per_profile": steps, "rows": {n: p.to_json() for n, p in rows.items()}},
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
    # GPU only: the kernels without SGLang's forward spans (draft and verify not told apart).
    w.add_argument("--activities", default=",".join(ACTIVITIES))
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
                     timeout_s=args.timeout_s, min_frac=args.min_frac,
                     activities=tuple(args.activities.split(",")))
    return summarize(args.out, args.steps)


if __name__ == "__main__":
    sys.exit(main())
