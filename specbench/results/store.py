"""The one atomic writer: every file specbench leaves behind is written through it.

A file is written under a hidden temporary name in the same directory, flushed to disk and
renamed over the target, so a crash at any moment leaves either the old file or the new one,
never half of either. Point files, the summary, the manifest, analysis.json, the report,
figures, the adaptive JSON and the prompt generator's output all go through here.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def atomic_write(path: Path, data: bytes | str) -> Path:
    """Write `data` (text is UTF-8 encoded) to `path` atomically; create the parent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    payload = data.encode() if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        # A full disk or an interrupt: leave the old file, and no half of the new one.
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def write_json(path: Path, obj: Any) -> Path:
    """Write `obj` as indented JSON (non-JSON values as their str) atomically."""
    return atomic_write(path, json.dumps(obj, indent=2, default=str) + "\n")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
