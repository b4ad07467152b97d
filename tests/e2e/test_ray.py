"""`--executor ray` on a local Ray cluster (the `ray` extra; skipped without it): the
configurations run as Ray tasks that each ask for a GPU, the driver writes the one manifest,
and the run is what a sequential run leaves behind, plus where each configuration ran."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from specbench import results
from tests.harness import assert_no_process_left, point_keys, sweep_cli

pytest.importorskip("ray")
pytestmark = pytest.mark.slow


def test_a_sweep_on_a_local_ray_cluster_completes_with_its_placements(
        tmp_path: Path, port: int) -> None:
    proc = sweep_cli(tmp_path, port, "--executor", "ray", "--gpus", "0,1",
                     "--modes", "baseline,eagle3,zero-step,dynamic", "--prompts", "coding",
                     "--concurrency", "1,4,16", timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    run_dir = tmp_path / "res" / "run"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert {p["status"] for p in manifest["points"].values()} == {"ok"}
    keys = point_keys(run_dir)
    assert {k[0] for k in keys} == {"baseline", "eagle3", "zero-step", "dynamic"}
    assert len(results.load_run(run_dir).summary) == len(keys)
    # Ray chose the GPUs: one each for the three independent servers, never one GPU for two
    # at once; the dynamic server ran afterwards in the driver.
    ray_placed = [p for p in manifest["placements"] if p["node"] is not None]
    assert sorted(p["config"] for p in ray_placed) == ["baseline", "eagle3", "zero-step"]
    spans = [(set(p["gpu_ids"]), datetime.fromisoformat(p["started_at"]),
              datetime.fromisoformat(p["stopped_at"])) for p in ray_placed]
    for i, (gpus_a, start_a, stop_a) in enumerate(spans):
        assert len(gpus_a) == 1 and gpus_a <= {0, 1}
        for gpus_b, start_b, stop_b in spans[i + 1:]:
            assert not (start_a < stop_b and start_b < stop_a and gpus_a & gpus_b)
    for name in ("baseline", "eagle3", "zero-step"):
        log = (run_dir / "servers" / f"{name}.log").read_text()
        assert "CUDA_VISIBLE_DEVICES=" in log
    for offset in (0, 10, 20):
        assert_no_process_left(port + offset, wait_s=5)


def test_an_unreachable_ray_cluster_is_one_line(tmp_path: Path, port: int) -> None:
    proc = sweep_cli(tmp_path, port, "--executor", "ray", "--ray-address", "ray://127.0.0.1:9",
                     "--modes", "baseline", "--prompts", "coding", "--concurrency", "1",
                     timeout=200)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "--ray-address" in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
