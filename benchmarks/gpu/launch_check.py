"""Do a run's c* and T intervals hold what a second launch of its servers estimates?

Usage: python benchmarks/gpu/launch_check.py RUN_DIR RELAUNCH_DIR

The second launch's estimate is the run's own analysis with every point the relaunch measured
put in place of the first launch's (same configuration, prompt set and level); the other points
stay. Prints, per prompt set, c* (EAGLE-3 against the baseline) and T's crossing (EAGLE-3 against
zero-step): the run's estimate with its 95% interval (which carries the between-launch term when
RUN_DIR's analysis was written with `specbench report RUN_DIR --relaunch RELAUNCH_DIR`), the
second launch's estimate, and whether the interval holds it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from specbench import analysis, results


def _decisions(found: dict) -> dict[str, tuple[float | None, list[float] | None]]:
    plain, one = found.get("plain_server") or {}, found.get("one_server") or {}
    return {"c*": (plain.get("crossover_concurrency"), plain.get("interval")),
            "T crossing": (one.get("crossover_concurrency"), one.get("interval"))}


def main(run_dir: Path, relaunch_dir: Path) -> int:
    run = results.load_run(run_dir)
    stated = run.analysis or analysis.analyze(run)
    with tempfile.TemporaryDirectory() as tmp:
        hybrid = Path(tmp) / run_dir.name
        shutil.copytree(run_dir, hybrid, ignore=shutil.ignore_patterns("plots", "*.log*"))
        (hybrid / "analysis.json").unlink(missing_ok=True)
        swapped = 0
        for point in (relaunch_dir / "points").rglob("*.parquet"):
            shutil.copy(point, hybrid / point.relative_to(relaunch_dir))
            swapped += 1
        second = analysis.analyze(results.load_run(hybrid))
    print(f"{run_dir.name}: {swapped} points of {relaunch_dir.name} in place of the first's")
    print(f"{'set':<8} {'decision':<11} {'first':>7} {'95% interval':>16} {'second':>7}  holds")
    held = True
    for name, found in stated["prompt_sets"].items():
        other = _decisions(second["prompt_sets"][name])
        for decision, (value, interval) in _decisions(found).items():
            again = other[decision][0]
            if value is None or again is None or interval is None:
                continue
            inside = interval[0] <= again <= interval[1]
            held &= inside
            print(f"{name:<8} {decision:<11} {value:>7.1f} {interval[0]:>7.1f}-{interval[1]:<8.1f}"
                  f" {again:>7.1f}  {'yes' if inside else 'NO'}")
    return 0 if held else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
