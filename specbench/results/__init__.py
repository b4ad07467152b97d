"""Run directories: layout, atomic writes, and the one loader used by every reader.

Layout (DESIGN §6)::

    <run>/manifest.json
    <run>/points/<mode>/<prompt_set>/c<C>-r<R>.parquet   per-request rows; the point's summary
                                                         row rides in the file's metadata
    <run>/summary.parquet, summary.csv                   one row per point
    <run>/analysis.json, report.md, plots/, servers/

Each point file is complete on its own (rows + summary), written under a temporary name and
renamed, so a crash at any moment leaves only whole points behind and `summary.parquet` can
always be rebuilt from them. `plot`, `report`, `threshold`, `regress` and the notebook read a
run only through :func:`load_run`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from specbench.errors import UserError
from specbench.results.store import atomic_write, write_json
from specbench.results.store import utc_now as utc_now

SCHEMA_VERSION = 1
SUMMARY_META_KEY = b"specbench.summary"
POINT_FILE_RE = re.compile(r"^c(?P<c>\d+)-r(?P<r>\d+)\.parquet$")

# The public summary format; more columns may follow these, none may be renamed without
# bumping SCHEMA_VERSION.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "mode",
    "prompt_set",
    "concurrency",
    "repeat",
    "n_requests",
    "n_errors",
    "window_s",
    "output_tok_s",
    "requests_per_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "e2e_ms_p50",
    "accept_length",
    "server_output_tok_s",
    "server_running_reqs_mean",
    "flags",
)
KEY_COLUMNS: tuple[str, ...] = ("mode", "prompt_set", "concurrency", "repeat")


class RunDirError(UserError, ValueError):
    """A path that is not a usable run directory; the message says why and what to do."""


@dataclass(frozen=True)
class PointKey:
    mode: str
    prompt_set: str
    concurrency: int
    repeat: int = 0

    @property
    def label(self) -> str:
        return f"{self.mode}/{self.prompt_set}/c{self.concurrency}-r{self.repeat}"


def write_json_atomic(path: Path, obj: Any) -> None:
    write_json(path, obj)


def write_text_atomic(path: Path, text: str) -> None:
    atomic_write(path, text)


def point_path(run_dir: Path, key: PointKey) -> Path:
    return (
        run_dir / "points" / key.mode / key.prompt_set / f"c{key.concurrency}-r{key.repeat}.parquet"
    )


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and value != value:  # NaN -> null in JSON
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def write_point(
    run_dir: Path, key: PointKey, requests: pd.DataFrame, summary: dict[str, Any]
) -> Path:
    """Write one measured point atomically: per-request rows plus its summary row."""
    path = point_path(run_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {
        "mode": key.mode,
        "prompt_set": key.prompt_set,
        "concurrency": key.concurrency,
        "repeat": key.repeat,
        **{k: _json_safe(v) for k, v in summary.items()},
    }
    table = pa.Table.from_pandas(requests, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[SUMMARY_META_KEY] = json.dumps(row, default=str).encode()
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    atomic_write(path, sink.getvalue().to_pybytes())
    return path


def read_point_summary(path: Path) -> dict[str, Any]:
    meta = pq.read_schema(path).metadata or {}
    if SUMMARY_META_KEY not in meta:
        raise RunDirError(f"{path} has no specbench summary; it was not written by specbench")
    row: dict[str, Any] = json.loads(meta[SUMMARY_META_KEY])
    return row


def point_files(run_dir: Path) -> list[Path]:
    root = run_dir / "points"
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("*/*/c*-r*.parquet") if POINT_FILE_RE.match(p.name))


def measured_keys(run_dir: Path) -> set[PointKey]:
    keys = set()
    for p in point_files(run_dir):
        m = POINT_FILE_RE.match(p.name)
        assert m is not None
        keys.add(PointKey(p.parent.parent.name, p.parent.name, int(m["c"]), int(m["r"])))
    return keys


def summary_frame(rows: list[dict[Any, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for col in SUMMARY_COLUMNS:
        if col not in frame.columns:
            frame[col] = pd.Series(dtype="object")
    ordered = list(SUMMARY_COLUMNS) + [c for c in frame.columns if c not in SUMMARY_COLUMNS]
    frame = frame[ordered]
    if len(frame):
        frame = frame.sort_values(list(KEY_COLUMNS), kind="stable").reset_index(drop=True)
    frame["flags"] = frame["flags"].fillna("").astype(str)
    return frame


def rebuild_summary(run_dir: Path) -> pd.DataFrame:
    """Collect every point's summary row into summary.parquet and summary.csv."""
    frame = summary_frame([read_point_summary(p) for p in point_files(run_dir)])
    _write_summary(run_dir, frame)
    return frame


def _write_summary(directory: Path, frame: pd.DataFrame) -> None:
    atomic_write(directory / "summary.parquet", frame.to_parquet(index=False))
    atomic_write(directory / "summary.csv", frame.to_csv(index=False))


@dataclass
class Run:
    """A loaded run directory."""

    path: Path
    manifest: dict[str, Any]
    summary: pd.DataFrame
    analysis: dict[str, Any] | None = field(default=None)

    @property
    def modes(self) -> list[str]:
        return sorted(self.summary["mode"].unique().tolist())

    @property
    def prompt_sets(self) -> list[str]:
        return sorted(self.summary["prompt_set"].unique().tolist())

    def requests(
        self, mode: str, prompt_set: str, concurrency: int, repeat: int = 0
    ) -> pd.DataFrame:
        """Per-request rows of one point."""
        path = point_path(self.path, PointKey(mode, prompt_set, concurrency, repeat))
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
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.exists():
        raise RunDirError(
            f"{run_dir} is not a specbench run directory (no manifest.json); "
            "pass a directory made by `specbench sweep`"
        )
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RunDirError(
            f"{manifest_path} cannot be read ({exc}); the run directory is damaged"
        ) from None
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RunDirError(
            f"{run_dir} has result schema version {version}, "
            f"this specbench reads {SCHEMA_VERSION}; "
            "use the specbench version that wrote it"
        )
    files = point_files(run_dir)
    summary_path = run_dir / "summary.parquet"
    if summary_path.exists() and not files:
        summary = summary_frame(pd.read_parquet(summary_path).to_dict("records"))
    else:
        # Point files are the source of truth: a crash may have left summary.parquet stale.
        summary = summary_frame([read_point_summary(p) for p in files])
    analysis = None
    analysis_path = run_dir / "analysis.json"
    if analysis_path.exists():
        analysis = json.loads(analysis_path.read_text())
    return Run(path=run_dir, manifest=manifest, summary=summary, analysis=analysis)


def store_reference(run: Run, target: Path) -> Path:
    """Copy a run's manifest, summary and analysis (no per-request files) as a CI reference."""
    if not len(run.summary):
        raise RunDirError(f"{run.path} has no measured points; run a sweep first")
    target.mkdir(parents=True, exist_ok=True)
    write_json_atomic(target / "manifest.json", {**run.manifest, "reference_of": str(run.path)})
    frame = summary_frame(run.summary.to_dict("records"))
    _write_summary(target, frame)
    if run.analysis is not None:
        write_json_atomic(target / "analysis.json", run.analysis)
    return target
