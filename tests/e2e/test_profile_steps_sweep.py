"""`--profile-steps` inside a real sweep: the point at the chosen level is measured as any other,
and the profile's outcome is stored beside the run. The simulated server has no SGLang profiler,
so attached to one the sweep says so in one warning and keeps the point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench import results
from tests.harness import SIM_TIME_SCALE, run_cli, sim_server

pytestmark = pytest.mark.slow


def test_a_server_without_a_profiler_keeps_the_profiled_point(tmp_path: Path) -> None:
    with sim_server("eagle3", tmp_path) as server:
        proc = run_cli(
            ["sweep", "--engine", "attach", "--attach", f"eagle3={server.base_url}",
             "--modes", "eagle3", "--prompts", "coding", "--concurrency", "1,4",
             "--profile-steps", "4", "--results-dir", str(tmp_path / "res"),
             "--run-name", "run", "--warmup-s", "0.5", "--request-timeout-s", "30",
             # 1 s of wall time at the simulator's 8x: the profile is due in its second half
             "--window-s", "8"],
            cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "res" / "run"
    run = results.load_run(run_dir)
    assert run.manifest.points["eagle3/coding/c4-r0"].status == "ok"
    assert run.manifest.config.profile_steps == (4,)
    split = json.loads((run_dir / "profiles" / "eagle3-coding-c4" / "split.json").read_text())
    assert split["ranks"] == {} and "/start_profile" in split["error"]
    assert "step profile eagle3 coding c=4:" in proc.stdout
    assert not (run_dir / "profiles" / "eagle3-coding-c1").exists()  # not a chosen level
    assert SIM_TIME_SCALE == 8.0
