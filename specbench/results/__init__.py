"""Run directories: the typed manifest, point files, the summary, and the one loader.

- `store.py`: the one atomic writer every file goes through;
- `manifest.py`: the typed, versioned manifest (config, fingerprint, servers, point status);
- `points.py`: point files and the summary (the public summary columns);
- `analysis.py`: analysis.json's typed model, read and written through it;
- `run.py`: `load_run`, the loader every reader uses, and `store_reference`.
"""

from __future__ import annotations

from specbench.results.manifest import (
    SCHEMA_VERSION,
    Manifest,
    PointRecord,
    PromptSetRecord,
    RunDirError,
    ServerRecord,
    ThresholdRecord,
    read_manifest,
)
from specbench.results.points import (
    KEY_COLUMNS,
    SUMMARY_COLUMNS,
    PointKey,
    measured_keys,
    point_files,
    point_path,
    read_point_summary,
    rebuild_summary,
    summary_frame,
    write_point,
)
from specbench.results.run import ANALYSIS_FILE, Run, load_run, store_reference
from specbench.results.store import atomic_write, utc_now, write_json

__all__ = [
    "ANALYSIS_FILE",
    "KEY_COLUMNS",
    "SCHEMA_VERSION",
    "SUMMARY_COLUMNS",
    "Manifest",
    "PointKey",
    "PointRecord",
    "PromptSetRecord",
    "Run",
    "RunDirError",
    "ServerRecord",
    "ThresholdRecord",
    "atomic_write",
    "load_run",
    "measured_keys",
    "point_files",
    "point_path",
    "read_manifest",
    "read_point_summary",
    "rebuild_summary",
    "store_reference",
    "summary_frame",
    "utc_now",
    "write_json",
    "write_point",
]
