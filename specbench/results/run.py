"""The one loader: every reader (plot, report, threshold, regress, the notebook) opens a run here.

A run directory is its typed manifest, the summary rebuilt from the point files (they are the
source of truth: a crash may leave `summary.parquet` stale), and `analysis.json` when written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from specbench.results.analysis import Analysis, load_analysis, write_analysis_file
from specbench.results.manifest import Manifest, RunDirError, read_manifest
from specbench.results.points import (
    PointKey,
    point_files,
    point_path,
    read_point_summary,
    summary_frame,
    write_summary,
)

ANALYSIS_FILE = "analysis.json"


@dataclass
class Run:
    """A loaded run directory."""

    path: Path
    manifest: Manifest
    summary: pd.DataFrame
    analysis: Analysis | None = field(default=None)

    @property
    def modes(self) -> list[str]:
        return sorted(self.summary["mode"].unique().tolist())

    @property
    def prompt_sets(self) -> list[str]:
        return sorted(self.summary["prompt_set"].unique().tolist())

    @property
    def open_loop(self) -> bool:
        """Whether the run's points are open-loop (request rates, not users)."""
        return bool(self.manifest.config.load.request_rates)

    def requests(
        self, mode: str, prompt_set: str, concurrency: int, repeat: int = 0,
        request_rate: float | None = None,
    ) -> pd.DataFrame:
        """Per-request rows of one point."""
        key = PointKey(mode, prompt_set, concurrency, repeat, request_rate)
        path = point_path(self.path, key)
        if not path.exists():
            raise RunDirError(f"{path} is missing; the point was not measured in this run")
        return pd.read_parquet(path)


def load_run(path: Path | str) -> Run:
    """Load a run directory; raises RunDirError (one line) when it is not one."""
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise RunDirError(
            f"{run_dir} is not a directory; pass a run directory such as results/<run-id>"
        )
    manifest = read_manifest(run_dir)
    files = point_files(run_dir)
    summary_path = run_dir / "summary.parquet"
    if summary_path.exists() and not files:
        summary = summary_frame(pd.read_parquet(summary_path).to_dict("records"), summary_path)
    else:
        # Point files are the source of truth: a crash may have left summary.parquet stale.
        summary = summary_frame([read_point_summary(p) for p in files], run_dir / "points")
    analysis = None
    analysis_path = run_dir / ANALYSIS_FILE
    if analysis_path.exists():
        analysis = load_analysis(analysis_path)
    return Run(path=run_dir, manifest=manifest, summary=summary, analysis=analysis)


def store_reference(run: Run, target: Path) -> Path:
    """Copy a run's manifest, summary and analysis (no per-request files) as a CI reference."""
    if not len(run.summary):
        raise RunDirError(f"{run.path} has no measured points; run a sweep first")
    target.mkdir(parents=True, exist_ok=True)
    run.manifest.model_copy(update={"reference_of": str(run.path)}).save(target)
    write_summary(target, summary_frame(run.summary.to_dict("records")))
    if run.analysis is not None:
        write_analysis_file(target / ANALYSIS_FILE, run.analysis)
    return target
