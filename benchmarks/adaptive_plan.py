"""The adaptive plan against the dense grid: GPU-seconds and decisions over prompt-order seeds.

For each seed the same sweep runs twice on the simulator, `--plan dense` and `--plan adaptive`
(default grid 1..250, coding and agentic; by default the static servers only, which are what
both decisions are computed from: add `--modes ...,dynamic` to count the dynamic server too).
Each run's seed is both its prompt-order seed and its simulator seed. The table gives, per
prompt set and decision (c*: EAGLE-3 over the baseline; T: EAGLE-3 over its zero-step path):

- median GPU-seconds per run of each plan (points and launches, as the manifest counts them);
- how many seeds' adaptive decision lies in the same seed's dense 95% interval;
- how many adaptive intervals contain the dense plan's median decision over the seeds.

Targets (issue 26): adaptive GPU-seconds <= 50% of dense; >= 8 of 10 seeds inside; >= 80%
containment. One seed pair takes about 6 minutes on the 2-core machine (dense 3.5, adaptive
about 2.5); a dense run already in --out is read, not run again. Also printed: points and
launches per run, the GPU-seconds again with every launch charged `--launch-gpu-s` (a real
server's load; the simulator's takes half a second), since the adaptive plan launches servers
for its rounds, and the launch cost at which the two plans break even.

`--control-out DIR` runs each seed's dense sweep a second time and prints the same table for
dense against dense: two runs that measure the same levels agree only as often as their noise
lets them (two independent estimates with equal 95% intervals: one lies inside the other's
interval ~83% of the time), which is the floor the adaptive plan's counts are read against.

    python3 benchmarks/adaptive_plan.py --seeds 10
    python3 benchmarks/adaptive_plan.py --reuse       # re-read the runs already in --out
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specbench.results.manifest import gpu_time, read_manifest  # noqa: E402

DECISIONS = (("plain_server", "c*"), ("one_server", "T"))
# (set, decision) -> (crossing, 95% low, 95% high), or None where the run found no crossing
Decisions = dict[tuple[str, str], tuple[float, float, float] | None]


def run(out: Path, plan: str, seed: int, modes: str, port: int) -> Path:
    run_dir = out / f"{plan}-s{seed}"
    if (run_dir / "analysis.json").exists():
        return run_dir
    cmd = [sys.executable, "-m", "specbench", "sweep", "--plan", plan, "--modes", modes,
           "--seed", str(seed), "--sim-seed", str(seed), "--results-dir", str(out),
           "--run-name", run_dir.name, "--port", str(port)]
    if run_dir.exists():
        cmd = [sys.executable, "-m", "specbench", "sweep", "--resume", str(run_dir),
               "--port", str(port)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return run_dir


def decisions(run_dir: Path) -> Decisions:
    analysis = json.loads((run_dir / "analysis.json").read_text())
    out: Decisions = {}
    for name, entry in analysis["prompt_sets"].items():
        for field, shown in DECISIONS:
            d = entry.get(field) or {}
            c, interval = d.get("crossover_concurrency"), d.get("interval")
            ok = d.get("outcome") == "crossover" and c is not None and interval
            out[(name, shown)] = (c, *interval) if ok else None
    return out


def counts(run_dir: Path) -> tuple[int, int]:
    """Points measured and servers launched in a run."""
    spent = gpu_time(read_manifest(run_dir)).values()
    return sum(t.points for t in spent), sum(t.launches for t in spent)


def gpu_s(run_dir: Path, launch_gpu_s: float | None = None) -> float:
    """A run's GPU-seconds as its manifest counts them; with `launch_gpu_s`, each launch is
    charged that much instead of the simulator's own (about a second)."""
    spent = gpu_time(read_manifest(run_dir)).values()
    if launch_gpu_s is None:
        return sum(t.total_gpu_s for t in spent)
    return sum(t.point_gpu_s + t.launches * launch_gpu_s * t.gpus for t in spent)


def agreement_table(dense_runs: list[Decisions], other_runs: list[Decisions], name: str) -> bool:
    """Per set and decision: the medians, how many seeds' `name` decision lies in the same
    seed's dense 95% interval, and how many `name` intervals hold the dense median. A seed
    whose dense run found no crossing in the grid counts as a miss (and is counted apart).
    True when both counts reach 80% of the seeds for every decision."""
    n = len(dense_runs)
    print(f"{'set':8s} {'dec':3s} {'dense median':>12s} {name + ' median':>15s} "
          f"{'in dense 95%':>12s} {'contain dense median':>20s}  dense without a crossing")
    ok = True
    for key in sorted({k for d in dense_runs for k in d}):
        dense = [d.get(key) for d in dense_runs]
        other = [o.get(key) for o in other_runs]
        found = [d[0] for d in dense if d]
        if not found:
            print(f"{key[0]:8s} {key[1]:3s} no crossing in the dense runs")
            continue
        median = statistics.median(found)
        inside = sum(1 for d, o in zip(dense, other, strict=True)
                     if d and o and d[1] <= o[0] <= d[2])
        contain = sum(1 for o in other if o and o[1] <= median <= o[2])
        o_found = [o[0] for o in other if o]
        o_median = f"{statistics.median(o_found):.1f}" if o_found else "-"
        print(f"{key[0]:8s} {key[1]:3s} {median:12.1f} {o_median:>15s} {inside:>9d}/{n} "
              f"{contain:>17d}/{n}  {n - len(found)}")
        ok &= inside >= 0.8 * n and contain >= 0.8 * n
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--modes", default="baseline,eagle3,zero-step")
    parser.add_argument("--out", type=Path, default=Path("/tmp/specbench-adaptive"))
    parser.add_argument("--port", type=int, default=31870)
    parser.add_argument("--reuse", action="store_true", help="only read runs already in --out")
    parser.add_argument("--control-out", type=Path, default=None,
                        help="also run each seed's dense sweep again here and print the same "
                        "table for dense against dense (what two runs of one plan agree on)")
    parser.add_argument("--launch-gpu-s", type=float, default=88.0,
                        help="a real launch's GPU-seconds for the second accounting (default: "
                        "the dynamic server's launch in results/gpu/h200-*, the bundle warm)")
    args = parser.parse_args()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    pairs = []
    for seed in seeds:
        dirs = {}
        for plan in ("dense", "adaptive"):
            path = args.out / f"{plan}-s{seed}"
            if args.reuse and not (path / "analysis.json").exists():
                break
            dirs[plan] = path if args.reuse else run(args.out, plan, seed, args.modes, args.port)
            print(f"seed {seed} {plan}: {gpu_s(dirs[plan]):.0f} GPU-s", flush=True)
        if len(dirs) == 2:
            pairs.append((seed, {p: (gpu_s(d), decisions(d), gpu_s(d, args.launch_gpu_s),
                                     counts(d), gpu_s(d, 0.0)) for p, d in dirs.items()}))
    if not pairs:
        print("no finished pairs")
        return 1
    dense_s = statistics.median(p["dense"][0] for _, p in pairs)
    adaptive_s = statistics.median(p["adaptive"][0] for _, p in pairs)
    n = len(pairs)
    print(f"\n{n} seeds ({', '.join(str(s) for s, _ in pairs)}); modes {args.modes}")
    print(f"median GPU-s per run: dense {dense_s:.0f}, adaptive {adaptive_s:.0f} "
          f"({adaptive_s / dense_s:.0%} of dense)")
    for plan in ("dense", "adaptive"):
        points = statistics.median(p[plan][3][0] for _, p in pairs)
        launches = statistics.median(p[plan][3][1] for _, p in pairs)
        print(f"{plan}: median {points:g} points and {launches:g} launches per run")
    print("adaptive / dense GPU-s per seed: " + ", ".join(
        f"{s} {p['adaptive'][0] / p['dense'][0]:.0%}" for s, p in pairs))
    real_dense = statistics.median(p["dense"][2] for _, p in pairs)
    real_adaptive = statistics.median(p["adaptive"][2] for _, p in pairs)
    print(f"with each launch charged {args.launch_gpu_s:g} GPU-s (a real one): dense "
          f"{real_dense:.0f}, adaptive {real_adaptive:.0f} ({real_adaptive / real_dense:.0%})")
    # The launch cost at which the two plans cost the same: points saved / launches added.
    points_s = {plan: statistics.median(p[plan][4] for _, p in pairs)
                for plan in ("dense", "adaptive")}
    launches_n = {plan: statistics.median(p[plan][3][1] for _, p in pairs)
                  for plan in ("dense", "adaptive")}
    extra = launches_n["adaptive"] - launches_n["dense"]
    if extra > 0:
        print(f"break-even launch: {(points_s['dense'] - points_s['adaptive']) / extra:.0f} "
              "GPU-s (the adaptive plan costs less on a GPU whose launches take less)")
    failed = adaptive_s > 0.5 * dense_s
    dense_runs = [p["dense"][1] for _, p in pairs]
    failed |= not agreement_table(dense_runs, [p["adaptive"][1] for _, p in pairs], "adaptive")
    if args.control_out:
        # The same dense run again: how often two runs that measure the same levels agree.
        seeds = [seed for seed, _ in pairs if not args.reuse
                 or (args.control_out / f"dense-s{seed}" / "analysis.json").exists()]
        first = {seed: p["dense"][1] for seed, p in pairs}
        again = [decisions(run(args.control_out, "dense", seed, args.modes, args.port))
                 for seed in seeds]
        print(f"\nthe noise floor: the dense run again ({args.control_out}), seeds "
              f"{', '.join(map(str, seeds))}")
        agreement_table([first[seed] for seed in seeds], again, "again")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
