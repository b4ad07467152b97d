"""Point files and the summary: one file per measured point, one row per point.

Layout::

    <run>/points/<configuration>/<prompt_set>/c<C>-r<R>.parquet   per-request rows; the point's
                                                                  summary row rides in the
                                                                  file's metadata
    <run>/points/<configuration>/<prompt_set>/q<RATE>-r<R>.parquet  an open-loop point (RATE
                                                                  requests/s, or inf)
    <run>/summary.parquet, summary.csv                            one row per point

Each point file is complete on its own (rows + summary) and written atomically, so a crash at
any moment leaves only whole points behind and the summary can always be rebuilt from them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from specbench.results.manifest import RunDirError
from specbench.results.store import atomic_write

SUMMARY_META_KEY = b"specbench.summary"
POINT_FILE_RE = re.compile(r"^(?:c(?P<c>\d+)|q(?P<q>inf|\d+(?:\.\d+)?))-r(?P<r>\d+)\.parquet$")

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


def rate_text(rate: float) -> str:
    """A request rate as in file names and labels: 0.5, 8, inf."""
    return "inf" if rate == float("inf") else f"{rate:g}"


def level_text(level: float) -> str:
    """A level in a message: c=8 (users, an int), or 8 req/s (an open-loop rate, a float)."""
    return f"c={level}" if isinstance(level, int) else f"{rate_text(level)} req/s"


def levels_text(first: float, last: float) -> str:
    """A run of levels in a message: c=8..64, or 2..32 req/s."""
    if isinstance(first, int):
        return f"c={first}..{last}"
    return f"{rate_text(first)}..{rate_text(last)} req/s"


@dataclass(frozen=True)
class PointKey:
    mode: str
    prompt_set: str
    concurrency: int
    repeat: int = 0
    # Open loop: requests per second (inf: a burst); `concurrency` is then the cap or 0.
    request_rate: float | None = None

    @property
    def level(self) -> str:
        """The point's level as in file names: c8, or q8 for 8 requests/s."""
        if self.request_rate is not None:
            return f"q{rate_text(self.request_rate)}"
        return f"c{self.concurrency}"

    @property
    def label(self) -> str:
        return f"{self.mode}/{self.prompt_set}/{self.level}-r{self.repeat}"

    @property
    def shown(self) -> str:
        """The level for people: c=8, or 8 req/s."""
        return level_text(self.concurrency if self.request_rate is None else self.request_rate)

    @classmethod
    def of_row(cls, row: Any) -> PointKey:
        """The key of a summary row (a mapping); a missing or NaN request_rate: closed loop."""
        rate = row.get("request_rate")
        return cls(str(row["mode"]), str(row["prompt_set"]), int(float(row["concurrency"])),
                   int(float(row["repeat"])), None if rate is None or rate != rate else float(rate))


def point_path(run_dir: Path, key: PointKey) -> Path:
    return run_dir / "points" / key.mode / key.prompt_set / f"{key.level}-r{key.repeat}.parquet"


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
        **({"request_rate": key.request_rate} if key.request_rate is not None else {}),
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
    return sorted(p for p in root.glob("*/*/*-r*.parquet") if POINT_FILE_RE.match(p.name))


def measured_keys(run_dir: Path) -> set[PointKey]:
    keys = set()
    for p in point_files(run_dir):
        m = POINT_FILE_RE.match(p.name)
        assert m is not None
        if m["q"] is not None:
            cap = int(read_point_summary(p).get("concurrency") or 0)
            keys.add(PointKey(p.parent.parent.name, p.parent.name, cap, int(m["r"]),
                              float(m["q"])))
        else:
            keys.add(PointKey(p.parent.parent.name, p.parent.name, int(m["c"]), int(m["r"])))
    return keys


def summary_frame(rows: list[dict[Any, Any]], source: Path | None = None) -> pd.DataFrame:
    """One row per point, public columns first; refuses rows that lack a public column."""
    if not rows:
        return pd.DataFrame({col: pd.Series(dtype="object") for col in SUMMARY_COLUMNS})
    frame = pd.DataFrame(rows)
    missing = [col for col in SUMMARY_COLUMNS if col not in frame.columns]
    if missing:
        where = source or "the summary"
        raise RunDirError(
            f"{where} lacks the public summary column(s) {', '.join(missing)}; "
            "it was written by another specbench version: re-run the sweep"
        )
    ordered = list(SUMMARY_COLUMNS) + [c for c in frame.columns if c not in SUMMARY_COLUMNS]
    frame = frame[ordered]
    if len(frame):
        keys = [*KEY_COLUMNS[:3], *(["request_rate"] if "request_rate" in frame else []),
                KEY_COLUMNS[3]]
        frame = frame.sort_values(keys, kind="stable").reset_index(drop=True)
    frame["flags"] = frame["flags"].fillna("").astype(str)
    return frame


def rebuild_summary(run_dir: Path) -> pd.DataFrame:
    """Collect every point's summary row into summary.parquet and summary.csv."""
    frame = summary_frame([read_point_summary(p) for p in point_files(run_dir)])
    write_summary(run_dir, frame)
    return frame


def write_summary(directory: Path, frame: pd.DataFrame) -> None:
    atomic_write(directory / "summary.parquet", frame.to_parquet(index=False))
    atomic_write(directory / "summary.csv", frame.to_csv(index=False))


