"""Do a run's c* and T intervals hold what a second launch of its servers estimates?

Usage: python lab/gpu/launch_check.py RUN_DIR RELAUNCH_DIR

The second launch's estimate is the run's own analysis with every point the relaunch measured
put in place of the first launch's (same configuration, prompt set and level); the other points
stay. Prints, per prompt set, c* (EAGLE-3 against the baseline) and T's crossing (EAGLE-3 against
zero-step): the run's estimate with its 95% interval (which carries the between-launch term when
RUN_DIR's analysis was written with `specbench report RUN_DIR --relaunch RELAUNCH_DIR`), the
second launch's estimate, and whether the interval holds it (a second launch with no crossing
inside the grid, e.g. EAGLE-3 ahead at every level, is held by an interval that reaches that edge
of the grid).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from specbench import analysis, results


def _decisions(found: dict) -> dict[str, tuple[float | None, list[float] | None, str, list[int]]]:
    """Per decision: (crossing, 95% interval, outcome, levels)."""
    out = {}
    for decision, key in (("c*", "plain_server"), ("T crossing", "one_server")):
        entry = found.get(key) or {}
        out[decision] = (entry.get("crossover_concurrency"), entry.get("interval"),
                         entry.get("outcome", ""), entry.get("levels") or [])
    return out


def _second_words(value: float | None, outcome: str, levels: list[int]) -> str:
    if value is not None:
        return f"{value:.1f}"
    top, bottom = (max(levels), min(levels)) if levels else (0, 0)
    return {"eagle3_always_wins": f">{top}", "eagle3_never_wins": f"<{bottom}"}.get(outcome, "-")


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
        for decision, (value, interval, _, _) in _decisions(found).items():
            again, _, outcome, levels = other[decision]
            if value is None or interval is None or (again is None and not levels):
                continue
            if again is not None:
                inside = interval[0] <= again <= interval[1]
            else:  # no crossing inside the second's grid: the interval must reach that edge
                inside = (outcome == "eagle3_always_wins" and interval[1] >= max(levels)) or (
                    outcome == "eagle3_never_wins" and interval[0] <= min(levels))
            held &= inside
            print(f"{name:<8} {decision:<11} {value:>7.1f} {interval[0]:>7.1f}-{interval[1]:<8.1f}"
                  f" {_second_words(again, outcome, levels):>7}  {'yes' if inside else 'NO'}")
    return 0 if held else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
