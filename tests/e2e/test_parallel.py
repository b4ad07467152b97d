"""Configurations side by side on one node (`--gpus`), on the simulator (which records the GPU
ids it is given and runs on the CPU): the same run as a sequential one, no GPU shared by two
servers at once, and Ctrl-C or a crashed server ending as in a sequential run."""

from __future__ import annotations

import json
import re
import signal
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest

from specbench import results
from tests.harness import (
    FAST,
    assert_no_process_left,
    point_keys,
    run_cli,
    spawn_sweep,
    sweep_cli,
)

pytestmark = pytest.mark.slow

TUNE = ["--prompts", "coding", "--concurrency", "1,16"]  # two levels: enough for a schedule


def _tune(tmp_path: Path, port: int, name: str, *extra: str) -> Path:
    proc = run_cli(["tune", "--port", str(port), "--results-dir", str(tmp_path / "res"),
                    "--run-name", name, *FAST, *TUNE, "--no-plots", *extra], tmp_path,
                   timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    return tmp_path / "res" / name


def _intervals(manifest: dict[str, object]) -> list[tuple[str, set[int], datetime, datetime]]:
    out = []
    for p in manifest["placements"]:  # type: ignore[attr-defined]
        out.append((p["config"], set(p["gpu_ids"]), datetime.fromisoformat(p["started_at"]),
                    datetime.fromisoformat(p["stopped_at"])))
    return out


def test_a_tune_run_on_two_gpus_matches_the_sequential_one(tmp_path: Path, port: int) -> None:
    sequential = _tune(tmp_path, port, "seq")
    parallel = _tune(tmp_path, port, "par", "--gpus", "0,1")
    assert_no_process_left(port)
    assert point_keys(parallel) == point_keys(sequential)
    seq_m = json.loads((sequential / "manifest.json").read_text())
    par_m = json.loads((parallel / "manifest.json").read_text())
    assert par_m["status"] == "complete" and sorted(par_m["servers"]) == sorted(seq_m["servers"])
    assert {p["status"] for p in par_m["points"].values()} == {"ok"}
    assert set(par_m["tuned"]) == set(seq_m["tuned"]) == {"coding"}

    # Within noise: the same curves (short windows on a shared 2-core machine: 25 %).
    def tok_s(run: Path) -> pd.Series:
        summary = pd.read_csv(run / "summary.csv")
        return summary.set_index(["mode", "prompt_set", "concurrency"])["output_tok_s"]

    ratio = (tok_s(parallel) / tok_s(sequential)).dropna()
    assert len(ratio) == len(point_keys(parallel))
    assert 0.75 < ratio.median() < 1.25, ratio.describe()

    # The placement: every configuration on one slot, and no GPU held by two servers at once.
    spans = _intervals(par_m)
    assert {name for name, *_ in spans} == set(par_m["servers"])
    for i, (a, gpus_a, start_a, stop_a) in enumerate(spans):
        assert len(gpus_a) == 1 and gpus_a <= {0, 1}
        for b, gpus_b, start_b, stop_b in spans[i + 1:]:
            overlap = start_a < stop_b and start_b < stop_a
            assert not (overlap and gpus_a & gpus_b), f"{a} and {b} shared GPU {gpus_a & gpus_b}"
    assert any(s1 < t2 and s2 < t1 for (_, g1, s1, t1) in spans for (_, g2, s2, t2) in spans
               if g1 != g2), "nothing ran side by side"
    # Each server was really given its slot's GPUs (the simulator logs what it saw).
    for name, gpus, *_ in spans:
        log = (parallel / "servers" / f"{name}.log").read_text()
        seen = re.findall(r"CUDA_VISIBLE_DEVICES=([\d,]+)", log)
        assert seen and seen[-1] == ",".join(map(str, sorted(gpus))), (name, seen)
    summary = results.load_run(parallel).summary
    assert len(summary) == len(point_keys(parallel))


def test_interrupting_a_parallel_sweep_stops_every_server_and_resume_completes(
        tmp_path: Path, port: int) -> None:
    args = ["--modes", "baseline,eagle3,eagle3-k2", "--prompts", "coding",
            "--concurrency", "1,2,4,8", "--gpus", "0,1"]
    sweep = spawn_sweep(tmp_path, port, *args)
    sweep.wait_for_points(2, timeout_s=180)
    assert sweep.stop(signal.SIGINT) < 30
    assert sweep.returncode == 130, sweep.stderr()[-3000:]
    assert "Traceback" not in sweep.stdout() + sweep.stderr()
    assert_no_process_left(port, wait_s=5)
    for offset in (10, 20):  # the other slots' ports
        assert_no_process_left(port + offset, wait_s=5)
    kept = point_keys(sweep.run_dir)
    assert len(kept) >= 2
    manifest = json.loads((sweep.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    proc = sweep_cli(tmp_path, port, "--resume", str(sweep.run_dir), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert len(point_keys(sweep.run_dir)) == 12
    assert set(kept) <= set(point_keys(sweep.run_dir))


def test_a_server_crash_in_one_slot_ends_the_sweep_as_a_sequential_one(
        tmp_path: Path, port: int) -> None:
    args = ["--modes", "baseline,eagle3", "--prompts", "coding", "--concurrency", "1,2,4,8",
            "--gpus", "0,1", "--sim-arg=--sim-crash-after-s 2", "--max-point-retries", "0"]
    proc = sweep_cli(tmp_path, port, *args, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    run_dir = tmp_path / "res" / "run"
    assert f"--resume {run_dir}" in proc.stderr.replace("\n", "")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    ok = {label for label, p in manifest["points"].items() if p["status"] == "ok"}
    assert ok == {k.label for k in results.measured_keys(run_dir)}
    for offset in (0, 10):
        assert_no_process_left(port + offset, wait_s=5)
