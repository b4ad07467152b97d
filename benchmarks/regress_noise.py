"""Run-to-run noise of the CI regression job, measured the way CI measures it.

Why: `specbench regress` fails on a throughput drop beyond ``Thresholds.fail_pct``. That number
is only safe when the gate's own noise is well below it (a gate whose noise CV exceeds about
half its threshold misfires often). This script repeats the CI-preset
sweep N times on this machine, compares each run with one reference (exit codes must all be 0),
and prints the per-point and per-group (geometric mean) spread that thresholds are chosen from.

    python benchmarks/regress_noise.py --runs 5 --reference results/reference/sim-ci
    python benchmarks/regress_noise.py --runs 5 --make-reference   # fresh reference first

Prints a table of per-point ratios candidate/reference (min, max, CV over runs) and a table of
group geometric means; exits 1 when any run did not pass the gate.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specbench import regress
from specbench.engines.process import free_port
from specbench.results import load_run


@dataclass(frozen=True)
class NoiseRun:
    """One candidate sweep and its verdict against the reference."""

    name: str
    sweep_wall_s: float
    regress_wall_s: float
    verdict: regress.Verdict


def sweep(results_dir: Path, run_name: str, extra: list[str]) -> float:
    """One `specbench sweep --preset ci`; returns its wall seconds."""
    started = time.monotonic()
    cmd = [sys.executable, "-m", "specbench", "sweep", "--preset", "ci",
           "--results-dir", str(results_dir), "--run-name", run_name,
           "--port", str(free_port()), *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def _pct(values: list[float]) -> str:
    return f"{(min(values) - 1) * 100:+6.2f}% .. {(max(values) - 1) * 100:+6.2f}%"


def _cv_pct(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / np.mean(values) * 100) if len(values) > 1 else 0.0


def print_spread(runs: list[NoiseRun]) -> None:
    """Per point and per group: the range of candidate/reference ratios and their CV."""
    by_point: dict[tuple[str, str, int], list[float]] = {}
    accept: dict[tuple[str, str, int], list[float]] = {}
    for run in runs:
        for p in run.verdict.points:
            by_point.setdefault((p.mode, p.prompt_set, p.concurrency), []).append(p.ratio)
            if p.accept_ratio is not None:
                accept.setdefault((p.mode, p.prompt_set, p.concurrency), []).append(
                    p.accept_ratio)
    print(f"\nper point: output tok/s ratio candidate/reference over {len(runs)} runs")
    print(f"{'point':<26} {'range':>22} {'CV over runs':>13} {'accept range':>24}")
    for key in sorted(by_point):
        ratios = by_point[key]
        acc = accept.get(key)
        acc_text = _pct(acc) if acc else "-"
        print(f"{key[0]}/{key[1]} c={key[2]:<6} {_pct(ratios):>22} {_cv_pct(ratios):12.2f}% "
              f"{acc_text:>24}")
    all_ratios = [r for v in by_point.values() for r in v]
    worst = max(abs(r - 1) for r in all_ratios) * 100
    print(f"worst single point |change|: {worst:.2f}%; pooled point-level sd of log ratio: "
          f"{float(np.std(np.log(all_ratios), ddof=1)) * 100:.2f}%")
    by_group: dict[str, list[float]] = {}
    for run in runs:
        for g in run.verdict.groups:
            by_group.setdefault(g.label, []).append(g.geomean_ratio)
    print("\nper mode/prompt set: geometric-mean ratio over levels")
    for label in sorted(by_group):
        print(f"{label:<26} {_pct(by_group[label]):>22} {_cv_pct(by_group[label]):12.2f}%")
    geo = [r for v in by_group.values() for r in v]
    print(f"worst geomean |change|: {max(abs(r - 1) for r in geo) * 100:.2f}%")
    print("\nverdicts: " + ", ".join(f"{r.name}={r.verdict.status}(exit {r.verdict.exit_code})"
                                     for r in runs))
    print("sweep wall s: " + ", ".join(f"{r.sweep_wall_s:.0f}" for r in runs)
          + "; regress wall s: " + ", ".join(f"{r.regress_wall_s:.2f}" for r in runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--reference", type=Path, default=Path("results/reference/sim-ci"))
    parser.add_argument("--make-reference", action="store_true",
                        help="sweep a fresh reference into the work dir first")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the candidate runs go (default: a temp dir)")
    parser.add_argument("--sweep-arg", action="append", default=[],
                        help="extra option for every sweep, e.g. --sweep-arg=--modes=baseline")
    args = parser.parse_args(argv)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="specbench-noise-"))
    work.mkdir(parents=True, exist_ok=True)
    reference_dir = args.reference
    if args.make_reference:
        wall = sweep(work, "ref", args.sweep_arg)
        print(f"reference sweep: {wall:.0f} s")
        reference_dir = work / "ref"
    reference = load_run(reference_dir)
    runs: list[NoiseRun] = []
    for i in range(args.runs):
        name = f"run{i + 1}"
        wall = sweep(work, name, args.sweep_arg)
        started = time.monotonic()
        verdict = regress.compare(reference, load_run(work / name))
        runs.append(NoiseRun(name, wall, time.monotonic() - started, verdict))
        print(f"{name}: {verdict.status} (exit {verdict.exit_code}), sweep {wall:.0f} s; "
              + "; ".join(verdict.messages), flush=True)
    print_spread(runs)
    print(f"\nruns kept in {work}")
    return 0 if all(r.verdict.exit_code == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
