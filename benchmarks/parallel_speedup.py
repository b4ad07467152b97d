"""Wall-clock speed-up of a parallel tune run (`--gpus`) over the same run one server at a time.

    python3 benchmarks/parallel_speedup.py --gpus 0,1,2,3 [--runs sequential,parallel]
        [--work-dir DIR] [-- extra tune options]

Runs `specbench tune` on the simulated engine (which records the GPU ids and runs on the CPU)
once sequentially and once with `--gpus`, into DIR/sequential and DIR/parallel, then prints
each run's wall time, the speed-up, and whether the two runs agree: the same points, the same
servers, and tok/s per point (median ratio). It needs cores for several simulators and clients
at once (one simulator and one client per slot); on a 2-core machine it measures the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd


def tune(work: Path, name: str, port: int, extra: list[str]) -> float:
    command = [sys.executable, "-m", "specbench", "tune", "--results-dir", str(work),
               "--run-name", name, "--port", str(port), *extra]
    started = time.monotonic()
    with open(work / f"{name}.log", "w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    took_s = time.monotonic() - started
    if done.returncode != 0:
        tail = (work / f"{name}.log").read_text()[-3000:]
        raise SystemExit(f"{name} run failed (exit {done.returncode}):\n{tail}")
    return took_s


def tok_s(run: Path) -> pd.Series:
    summary = pd.read_csv(run / "summary.csv")
    keys = ["mode", "prompt_set", "concurrency", "repeat"]
    return summary.set_index(keys)["output_tok_s"]


def compare(seq: Path, par: Path) -> dict[str, object]:
    seq_m = json.loads((seq / "manifest.json").read_text())
    par_m = json.loads((par / "manifest.json").read_text())
    ratio = (tok_s(par) / tok_s(seq)).dropna()
    return {
        "same_points": sorted(seq_m["points"]) == sorted(par_m["points"]),
        "same_servers": sorted(seq_m["servers"]) == sorted(par_m["servers"]),
        "points": len(par_m["points"]),
        "tok_s_ratio_median": round(float(ratio.median()), 4),
        "tok_s_ratio_p10_p90": [round(float(ratio.quantile(q)), 4) for q in (0.1, 0.9)],
        "tuned_sequential": seq_m["tuned"],
        "tuned_parallel": par_m["tuned"],
        "placements": [(p["config"], p["gpu_ids"]) for p in par_m["placements"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpus", default="0,1,2,3")
    parser.add_argument("--runs", default="sequential,parallel")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/parallel-speedup"))
    parser.add_argument("--port", type=int, default=33000)
    parser.add_argument("extra", nargs="*", help="more `specbench tune` options (after --)")
    args = parser.parse_args()
    work: Path = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    times = {}
    for run in args.runs.split(","):
        extra = list(args.extra) + (["--gpus", args.gpus] if run == "parallel" else [])
        times[run] = tune(work, run, args.port, extra)
        print(f"{run}: {times[run]:.1f} s", flush=True)
    if {"sequential", "parallel"} <= times.keys():
        print(f"speed-up with --gpus {args.gpus}: {times['sequential'] / times['parallel']:.2f}x")
        print(json.dumps(compare(work / "sequential", work / "parallel"), indent=1))


if __name__ == "__main__":
    main()
