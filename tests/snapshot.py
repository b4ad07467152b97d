"""Golden-file snapshots of what users read (command output, report.md, tables).

``assert_snapshot("name.txt", text)`` compares `text` with ``tests/snapshots/name.txt`` and
fails with a diff when they differ. To accept a deliberate change, regenerate the files and
review them in the diff::

    SPECBENCH_UPDATE_SNAPSHOTS=1 python3 -m pytest tests/path/to/test.py

A missing snapshot file is an error too (it is written when regenerating), so a typo in a name
cannot pass silently. Normalise what varies by machine (paths, times) before comparing.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

SNAPSHOT_DIR = Path(__file__).resolve().parent / "snapshots"
UPDATE_ENV = "SPECBENCH_UPDATE_SNAPSHOTS"


def assert_snapshot(name: str, text: str) -> None:
    path = SNAPSHOT_DIR / name
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        raise AssertionError(f"no snapshot {path}; create it with {UPDATE_ENV}=1 and review it")
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(
            expected.splitlines(keepends=True), text.splitlines(keepends=True),
            fromfile=f"{path} (snapshot)", tofile="actual"))
        raise AssertionError(
            f"output differs from the snapshot (regenerate with {UPDATE_ENV}=1 if the change "
            f"is intended):\n{diff}")
