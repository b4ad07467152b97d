"""`--engine attach`: servers started by hand are measured like launched ones (issue 3).

A run directory made by attaching must mean the same as one made by launching: the same files,
the same summary columns, and each URL checked against the mode it is attached as.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench import results
from specbench.engines.process import free_port, http_get
from tests.e2e.conftest import run_cli

pytestmark = pytest.mark.slow

BASELINE = ["--model-path", "m", "--max-running-requests", "64", "--enable-metrics"]
EAGLE3 = [
    *BASELINE,
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "d",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
]
FAST = ["--warmup-s", "0.5", "--window-s", "2", "--request-timeout-s", "30"]


def _wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the hand-started simulator exited"
        try:
            if http_get(f"{url}/ready", timeout_s=1.0)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} never became ready")


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A baseline and an EAGLE-3 simulator, started by hand as a user would."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:
        for mode, flags in (("baseline", BASELINE), ("eagle3", EAGLE3)):
            port = free_port()
            log = open(tmp_path / f"{mode}.hand.log", "wb")  # noqa: SIM115 - closed with the process
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "specbench.sim",
                        *flags,
                        "--port",
                        str(port),
                        "--sim-time-scale",
                        "8",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            )
            log.close()
            urls[mode] = f"http://127.0.0.1:{port}"
            _wait_ready(urls[mode], procs[-1])
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


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
            *FAST,
        ],
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "res" / "run"
    run = results.load_run(run_dir)
    assert run.manifest["status"] == "complete"
    assert run.manifest["engine"]["kind"] == "attach"
    for col in results.SUMMARY_COLUMNS:
        assert col in run.summary.columns
    assert len(run.summary) == 2 * 2 * 3
    eagle = run.summary[run.summary["mode"] == "eagle3"]
    assert (eagle["accept_length"] > 1.0).all()
    assert run.summary[run.summary["mode"] == "baseline"]["accept_length"].isna().all()
    # The attached simulator runs 8x real time; the results are in GPU time like a launch.
    assert run.manifest["modes"]["eagle3"]["time_scale"] == 8.0
    assert run.manifest["modes"]["eagle3"]["url"] == servers["eagle3"]
    for name in ("summary.parquet", "summary.csv", "report.md", "analysis.json"):
        assert (run_dir / name).exists(), name
    assert any((run_dir / "plots").glob("*.png"))
    analysis = json.loads((run_dir / "analysis.json").read_text())
    assert set(analysis["prompt_sets"]) == {"coding", "agentic"}
    assert analysis["recommended_threshold"] >= 1
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
            *FAST,
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
