"""`--engine attach`: servers started by hand are measured like launched ones (issue 3).

A run directory made by attaching must mean the same as one made by launching: the same files,
the same summary columns, and each URL checked against the mode it is attached as.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench import results
from specbench.engines.process import http_get
from tests.harness import FAST_WINDOWS, SIM_TIME_SCALE, run_cli, sim_server
from tests.test_results import unfilled

pytestmark = pytest.mark.slow


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A baseline and an EAGLE-3 simulator, started by hand as a user would."""
    with contextlib.ExitStack() as stack:
        yield {
            mode: stack.enter_context(sim_server(mode, tmp_path)).base_url
            for mode in ("baseline", "eagle3")
        }


def test_attach_run_matches_a_launched_run(tmp_path: Path, servers: dict[str, str]) -> None:
    proc = run_cli(
        [
            "sweep",
            "--engine",
            "attach",
            "--attach",
            f"baseline={servers['baseline']}",
            "--attach",
            f"eagle3={servers['eagle3']}",
            "--modes",
            "baseline,eagle3",
            "--concurrency",
            "1,4,16",
            "--results-dir",
            str(tmp_path / "res"),
            "--run-name",
            "run",
            *FAST_WINDOWS,
        ],
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "res" / "run"
    run = results.load_run(run_dir)
    assert run.manifest.status == "complete"
    assert run.manifest.engine.kind == "attach"
    assert unfilled(run.summary) == []  # every public column measured, none padded
    assert len(run.summary) == 2 * 2 * 3
    eagle = run.summary[run.summary["mode"] == "eagle3"]
    assert (eagle["accept_length"] > 1.0).all()
    assert run.summary[run.summary["mode"] == "baseline"]["accept_length"].isna().all()
    # The attached simulator runs 8x real time; the results are in GPU time like a launch.
    assert run.manifest.servers["eagle3"].time_scale == SIM_TIME_SCALE
    assert run.manifest.servers["eagle3"].url == servers["eagle3"]
    for name in ("summary.parquet", "summary.csv", "report.md", "analysis.json"):
        assert (run_dir / name).exists(), name
    assert any((run_dir / "plots").glob("*.png"))
    analysis = json.loads((run_dir / "analysis.json").read_text())
    assert set(analysis["prompt_sets"]) == {"coding", "agentic"}
    # Without a measured mix there is no mixed-deployment threshold, only one per set.
    assert analysis["recommended_threshold"] is None
    assert all(s["threshold_batch_size"] >= 1 for s in analysis["prompt_sets"].values())
    # Attaching stops nothing: both servers still answer.
    for url in servers.values():
        assert http_get(f"{url}/ready", timeout_s=2.0)[0] == 200


def test_attach_as_the_wrong_mode_is_one_line(tmp_path: Path, servers: dict[str, str]) -> None:
    proc = run_cli(
        [
            "sweep",
            "--engine",
            "attach",
            "--attach",
            f"baseline={servers['eagle3']}",
            "--modes",
            "baseline",
            "--concurrency",
            "1",
            "--results-dir",
            str(tmp_path / "res"),
            "--run-name",
            "run",
            *FAST_WINDOWS,
        ],
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(
        f"error: --attach baseline={servers['eagle3']} serves a eagle3 server"
    )
    assert "Traceback" not in proc.stdout + proc.stderr
