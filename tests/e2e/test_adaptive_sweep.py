"""A real sweep with the adaptive plan: levels placed at its crossing, and a resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench import results
from tests.harness import assert_no_process_left, run_cli, sweep_cli

pytestmark = pytest.mark.slow


def test_an_adaptive_sweep_places_levels_at_its_crossing_and_resumes_them(
    tmp_path: Path, port: int,
) -> None:
    grid = "1,2,4,8,16,32,64"
    proc = sweep_cli(tmp_path, port, "--plan", "adaptive", "--prompts", "agentic",
                     "--modes", "baseline,eagle3", "--concurrency", grid)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "res" / "run"
    run = results.load_run(run_dir)
    refined = run.manifest.refined.get("eagle3/agentic", [])
    assert refined, proc.stdout[-2000:]
    assert run.manifest.refined.get("baseline/agentic") == refined  # c*'s two servers
    assert "adaptive plan: next levels agentic c*" in proc.stdout
    measured = sorted(set(run.summary["concurrency"].astype(int)))
    assert measured == sorted({8, *refined})  # the grid's middle level and the placed ones
    assert len(measured) < len(grid.split(","))
    plain = json.loads((run_dir / "analysis.json").read_text())["prompt_sets"]["agentic"][
        "plain_server"]
    c_star = plain["crossover_concurrency"]
    levels = [int(c) for c in grid.split(",")]
    below = max(c for c in levels if c <= c_star)
    above = min(c for c in levels if c > c_star)
    assert {below, above} <= set(measured), (c_star, measured)
    # Each round measures first on the server the last one left up: one launch per round.
    rounds = proc.stdout.count("adaptive plan: next levels")
    launches = sum(len(server.launch_s) for server in run.manifest.servers.values())
    assert rounds >= 2 and launches == 2 + rounds, (rounds, launches)
    # A resume finds every placed level measured: nothing is launched again.
    again = run_cli(["sweep", "--resume", str(run_dir), "--port", str(port)], cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "launching" not in again.stdout.lower()
    assert results.load_run(run_dir).manifest.refined == run.manifest.refined
    assert_no_process_left(port)
