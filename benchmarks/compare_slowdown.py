"""Does `specbench compare` report a planted slowdown per level, within 2 points of the truth?

Sweeps of the simulated server: A with the default profile, B with a copy whose every step
takes `--step-factor` (default 1.1) times as long (every ``*_ms``/``*_us`` cost of the step
sections multiplied, every ``*_per_s`` rate divided, acceptance unchanged). "10% slower" here
means exactly that: each forward pass takes 10% longer, so B's true throughput is 1/1.1 =
0.909 of A's, a slowdown of 9.09% at every level and for every configuration.

B's warmup and window are the step factor times A's (in GPU seconds), so B's window holds the
same requests as A's (same prompt order, every step 1.1x as long): what is left between the two
is the planted step time and the simulator's timing jitter. With the same 3 s windows in both
runs, B's window would hold other requests than A's and a single window's sampling noise
(2-19% per point by the runs' own standard errors on the agentic set) would swamp the 2-point
check; `--same-windows` runs that B too and prints its table, without gating on it.

The script runs `specbench compare A B --out DIR` as a user would, reads the per-level ratios
from DIR/compare.json and prints, per prompt set, configuration and level, the measured
slowdown, the truth and the difference in percentage points; exit 1 if any level is more than
`--tolerance-pp` (default 2) from the truth. The sweeps are `--quick` with baseline and EAGLE-3
at 2x real time (at the quick preset's 5x, a busy 2-core machine adds a few points of jitter).

    python benchmarks/compare_slowdown.py                    # two sweeps, about 2 min each
    python benchmarks/compare_slowdown.py --work-dir /tmp/cs --reuse   # compare kept runs again
    python benchmarks/compare_slowdown.py --same-windows     # and B with A's windows (a third)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from specbench.config import PRESETS
from specbench.engines.process import free_port

# The planted-profile writer is the regression gate test's (one copy of the rewrite rule).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
SWEEP = ["--quick", "--modes", "baseline,eagle3", "--sim-time-scale", "2"]
QUICK_LOAD_S: dict[str, float] = PRESETS["quick"]["load"]  # warmup_s, warmup_max_s, window_s


def sweep(work: Path, name: str, extra: list[str]) -> float:
    """One sweep into work/<name>; its wall seconds."""
    started = time.monotonic()
    cmd = [sys.executable, "-m", "specbench", "sweep", *SWEEP, "--results-dir", str(work),
           "--run-name", name, "--port", str(free_port()), *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def matched_windows(path: Path, step_factor: float) -> Path:
    """A config file with the quick preset's warmup and window times the step factor."""
    lines = ["[load]", *(f"{key} = {round(value * step_factor, 6)!r}" for key, value in
                         QUICK_LOAD_S.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def compare(work: Path, base: str, other: str) -> dict[str, Any]:
    """`specbench compare work/base work/other --out ...`, as a user runs it; compare.json."""
    out = work / f"compare-{other}"
    cmd = [sys.executable, "-m", "specbench", "compare", str(work / base), str(work / other),
           "--out", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    result: dict[str, Any] = json.loads((out / "compare.json").read_text())
    return result


def report(result: dict[str, Any], truth_ratio: float) -> float:
    """Print measured vs true slowdown per level; returns the worst |error| in points."""
    truth_pp = (1 - truth_ratio) * 100
    print(f"{'prompt set':<10} {'configuration':<14} {'c':>5} {'B/A':>7} {'slowdown':>9} "
          f"{'truth':>7} {'error pp':>9}  flags")
    worst_pp = 0.0
    for g in result["groups"]:
        for lv in g["levels"]:
            ratio = lv["ratio"][0]
            slowdown_pp = (1 - ratio) * 100
            worst_pp = max(worst_pp, abs(slowdown_pp - truth_pp))
            flags = "; ".join(f"{run}: {', '.join(fs)}" for run, fs in zip("AB", lv["flags"],
                                                                          strict=True) if fs)
            print(f"{g['prompt_set']:<10} {g['mode']:<14} {lv['concurrency']:>5} {ratio:>7.4f} "
                  f"{slowdown_pp:>8.2f}% {truth_pp:>6.2f}% {slowdown_pp - truth_pp:>+9.2f}  "
                  f"{flags}")
    summary = result["summary"][0]
    print(f"geometric mean B/A {summary['geomean_ratio']:.4f} over {summary['n_points']} "
          f"points; worst |error| {worst_pp:.2f} pp")
    return worst_pp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step-factor", type=float, default=1.1)
    parser.add_argument("--tolerance-pp", type=float, default=2.0)
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the runs go (default: a temp dir)")
    parser.add_argument("--reuse", action="store_true",
                        help="compare the runs already in --work-dir, no sweeps")
    parser.add_argument("--same-windows", action="store_true",
                        help="also sweep B with A's windows and print it (not gated)")
    parser.add_argument("--sweep-arg", action="append", default=[],
                        help="extra option for every sweep (not the warmup or window)")
    args = parser.parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="specbench-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    others = ["b", "b-same-windows"] if args.same_windows else ["b"]
    if not args.reuse:
        from tests.e2e.test_regress_gate import rewrite_profile

        slower = ["--sim-profile", str(rewrite_profile(work / "slower.toml", args.step_factor))]
        windows = ["--config", str(matched_windows(work / "matched.toml", args.step_factor))]
        walls = [sweep(work, "a", args.sweep_arg),
                 sweep(work, "b", [*args.sweep_arg, *slower, *windows])]
        if args.same_windows:
            walls.append(sweep(work, "b-same-windows", [*args.sweep_arg, *slower]))
        print("sweep wall s: " + ", ".join(f"{n} {w:.0f}" for n, w in zip(
            ["a", *others], walls, strict=True)))
    truth = 1 / args.step_factor
    print(f"truth: every step x{args.step_factor}, so B/A = {truth:.4f}, a slowdown of "
          f"{(1 - truth) * 100:.2f}% at every level")
    worst_pp = 0.0
    for other in others:
        print(f"\n{other} (B) against a (A)"
              + (": same windows as A, not gated" if other != "b" else ": matched windows"))
        worst = report(compare(work, "a", other), truth)
        worst_pp = worst if other == "b" else worst_pp
    ok = worst_pp <= args.tolerance_pp
    print(f"\nmatched windows: worst |error| {worst_pp:.2f} pp, tolerance {args.tolerance_pp} "
          f"pp: {'ok' if ok else 'FAIL'}; runs and compare output kept in {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
