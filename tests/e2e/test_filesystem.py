"""The file system fails under a sweep: a results directory it cannot write, a disk that fills.

Both need a file system with a limit root cannot ignore, so they mount a small tmpfs (as root;
CI runs as root) and are skipped, saying why, where mounting is not allowed. Each failure must
be one line and exit 2, keep every finished point, and (for the full disk) say how to resume;
the resume then completes the run.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench import results
from tests.harness import assert_no_process_left, spawn_sweep, sweep_cli

ONE_MODE = ["--modes", "baseline", "--prompts", "coding"]


@contextlib.contextmanager
def tmpfs(path: Path, size: str, *options: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    opts = ",".join([f"size={size}", *options])
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}): needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip() and "warning" not in line]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, stderr[-3000:]
    assert "Traceback" not in stderr
    return errors[0]


def test_an_unwritable_results_dir_is_one_line_before_any_server(tmp_path: Path,
                                                                 port: int) -> None:
    with tmpfs(tmp_path / "res", "1m", "ro"):
        proc = sweep_cli(tmp_path, port, *ONE_MODE, timeout=60)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = one_error_line(proc.stderr)
    assert "cannot write the run directory" in line and "--results-dir" in line
    assert_no_process_left(port)


def _fill(path: Path) -> Path:
    """Take every free byte of the file system under `path`."""
    filler = path / "filler"
    with open(filler, "wb") as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * (1 << 16))
            fh.flush()
    return filler


def test_a_disk_that_fills_mid_run_keeps_the_points_and_resume_completes_it(
    tmp_path: Path, port: int
) -> None:
    # Eight short points: the disk fills after the first, long before the last.
    levels = ["--concurrency", "1,2,3,4,5,6,7,8"]
    with tmpfs(tmp_path / "res", "8m") as res:
        sweep = spawn_sweep(tmp_path, port, *ONE_MODE, *levels)
        done = sweep.wait_for_points(1, timeout_s=180)
        filler = _fill(res)
        sweep.proc.wait(timeout=180)
        err = sweep.stderr()
        assert sweep.returncode == 2, err[-3000:]
        line = one_error_line(err)
        run_dir = sweep.run_dir
        assert "free disk space" in line, line
        assert f"specbench sweep --resume {run_dir}" in line, line
        assert_no_process_left(port)
        # Every point that finished before the disk filled is still there and still listed.
        kept = results.measured_keys(run_dir)
        assert len(kept) >= len(done)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        ok = {label for label, p in manifest["points"].items() if p["status"] == "ok"}
        assert ok <= {k.label for k in kept}  # nothing is listed that is not on disk
        assert not list(run_dir.rglob(".*.tmp")), "a half-written file was left behind"

        # Space is back: the resume measures only what is missing and finishes the run.
        filler.unlink()
        proc = sweep_cli(tmp_path, port, "--resume", str(run_dir), timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        keys = results.measured_keys(run_dir)
        assert sorted(k.concurrency for k in keys) == list(range(1, 9))
        assert (run_dir / "report.md").is_file()
    assert_no_process_left(port)
