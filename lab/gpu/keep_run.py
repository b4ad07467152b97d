"""Make a run directory brought back from a GPU machine small enough to commit and to travel.

Usage: python lab/gpu/keep_run.py RUN_DIR [RUN_DIR ...]

In place: every parquet file rewritten with zstd compression, server logs xz-compressed
(`servers/*.log` -> `*.log.xz`), the figures and report.html removed (`specbench report RUN_DIR`
writes them again). lab/notes/gpu-runs.md says why: a device call carries 64 MiB, the SGLang
bundle 55 of them.
"""

from __future__ import annotations

import lzma
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq


def keep(run_dir: Path) -> None:
    for path in run_dir.rglob("*.parquet"):
        table = pq.read_table(path)
        pq.write_table(table, path, compression="zstd")
    for log in (run_dir / "servers").glob("*.log"):
        with lzma.open(log.with_suffix(".log.xz"), "wb", preset=9) as out:
            out.write(log.read_bytes())
        log.unlink()
    shutil.rmtree(run_dir / "plots", ignore_errors=True)
    (run_dir / "report.html").unlink(missing_ok=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for name in sys.argv[1:]:
        keep(Path(name))
