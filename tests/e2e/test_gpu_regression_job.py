"""The GPU regression job's own script (scripts/gpu_regression.py), run as the workflow runs it.

Its settings come in as the workflow passes its inputs, REGRESSION_* variables; the servers are
simulated, but started the way a user's command starts theirs: `--engine sglang` with a custom
`python -m specbench.sim` server command, TP 2 on two visible GPUs, an attention backend and a
server flag of the user's. The reference is made the job's way (two launches, stored with the
second inside it), then a 10% slower decode step (every forward of the profile x1.1, passed as a
server flag like any SGLang flag) must fail the gate on TPOT, and a relaunch must pass it.

The gate here reads TPOT and tok/s, not TTFT: on this simulator at 6x real time a TTFT is 6-9 ms
of wall clock, where the host's scheduling moved single points by 10-50% between identical
launches.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.engines.process import free_port
from tests.e2e.test_regress_gate import rewrite_profile
from tests.harness import assert_no_process_left, cli_env

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_regression.py"
NAME = "sim-tp2"


def job_env(work: Path, port: int, **settings: str) -> dict[str, str]:
    """The workflow's environment for the job: a two-GPU machine, the user's stack."""
    env = {k: v for k, v in cli_env().items() if not k.startswith("REGRESSION_")}
    return {
        **env,
        "CUDA_VISIBLE_DEVICES": "0,1",
        "REGRESSION_NAME": NAME,
        "REGRESSION_SERVER_COMMAND": "python -m specbench.sim",
        "REGRESSION_TP_SIZE": "2",
        "REGRESSION_SERVER_ARGS": "--sim-time-scale 6 --mem-fraction-static 0.85",
        "REGRESSION_ATTENTION_BACKEND": "flashinfer",
        "REGRESSION_PORT": str(port),
        "REGRESSION_LEVELS": "8,32",  # c = 1 (the default) holds its window for 8 answers
        # The preset's windows are GPU seconds, but a server launched by command does not tell
        # the sweep its simulated time scale: they run in wall seconds, each 6x the preset's
        # in model time. Half of that (12 and 3 GPU seconds) holds about 45-125 answers a point.
        "REGRESSION_SWEEP_ARGS": "--modes baseline,eagle3 --prompts coding "
                                 "--warmup-s 0.5 --window-s 2",
        "REGRESSION_GATE_ARGS": "--latency tpot_ms_p50,tpot_ms_p90",
        "REGRESSION_RESULTS_DIR": str(work / "results"),
        "REGRESSION_REFERENCE_ROOT": str(work / "reference"),
        **settings,
    }


def run_job(action: str, env: dict[str, str], *args: str,
            timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), action, *args], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def verdict_of(work: Path) -> dict[str, object]:
    return json.loads((work / "results" / "candidate" / "regress.json").read_text())


def failing(verdict: dict[str, object], check: str) -> set[str]:
    findings = verdict["findings"]
    assert isinstance(findings, list)
    return {f["subject"] for f in findings if f["check"] == check and f["status"] == "fail"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The reference the job's way: two launches, analysed together, stored by name."""
    work, port = tmp_path_factory.mktemp("job"), free_port()
    proc = run_job("reference", job_env(work, port))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    stored = work / "reference" / NAME
    assert (stored / "manifest.json").is_file()
    assert (stored / "relaunch" / "manifest.json").is_file()
    # Launched as the user's command launches it: their launcher, TP 2, their flags.
    manifest = json.loads((stored / "manifest.json").read_text())
    server = manifest["config"]["server"]
    assert server["server_command"] == ["python", "-m", "specbench.sim"]
    assert server["tp_size"] == 2 and manifest["config"]["engine"] == "sglang"
    assert server["extra_args"] == ["--sim-time-scale", "6", "--mem-fraction-static", "0.85",
                                    "--attention-backend", "flashinfer"]
    for record in manifest["servers"].values():
        assert record["server_info"]["tp_size"] == 2
        assert record["server_info"]["attention_backend"] == "flashinfer"
    assert sorted({(p["mode"], p["concurrency"]) for p in _points(stored)}) == [
        (m, c) for m in ("baseline", "eagle3") for c in (8, 32)]
    assert "limits from two launches of the reference" in proc.stdout
    assert_no_process_left(port)
    return work, port


def _points(run_dir: Path) -> list[dict[str, object]]:
    import pandas as pd

    frame = pd.read_parquet(run_dir / "summary.parquet")
    return list(frame[["mode", "concurrency"]].to_dict("records"))


def test_a_ten_percent_slower_decode_fails_the_job_on_tpot(reference: tuple[Path, int]) -> None:
    work, port = reference
    slow = rewrite_profile(work / "slow.toml", step_factor=1.1)
    env = job_env(work, port, REGRESSION_SERVER_ARGS=(
        f"--sim-time-scale 6 --mem-fraction-static 0.85 --sim-profile {slow}"))
    proc = run_job("check", env)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-4000:]
    # The gate does not compare server flags; the job says they changed.
    assert "::warning::server args" in proc.stdout and str(slow) in proc.stdout
    verdict = verdict_of(work)
    assert verdict["status"] == "regression"
    assert failing(verdict, "tpot_ms_p50") == {"baseline/coding", "eagle3/coding"}, verdict
    lines = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert any(line.startswith("FAIL eagle3/coding: TPOT p50 +") and "limit +" in line
               for line in lines), lines
    assert_no_process_left(port)


def test_a_relaunch_passes_the_job(reference: tuple[Path, int]) -> None:
    work, port = reference
    proc = run_job("check", job_env(work, port))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "::warning::" not in proc.stdout
    verdict = verdict_of(work)
    assert verdict["status"] in ("ok", "warn")
    groups = verdict["groups"]
    assert isinstance(groups, list)
    tested = {m["test"] for g in groups for m in g["metrics"]}
    assert tested == {"two-launch"}, tested  # the second launch is the TPOT noise model
    assert_no_process_left(port)


def test_the_jobs_plan_with_its_defaults(tmp_path: Path) -> None:
    # What the nightly job runs when no input or variable is set: c = 1 included, its GPU time.
    env = {k: v for k, v in cli_env().items() if not k.startswith("REGRESSION_")}
    proc = run_job("check", {**env, "REGRESSION_NAME": "none",
                             "REGRESSION_REFERENCE_ROOT": str(tmp_path)}, "--dry-run",
                   timeout=60)
    out = proc.stdout
    assert "+ specbench sweep --preset ci --model-path meta-llama/Llama-3.1-8B-Instruct " in out
    assert "--tp-size 1 --port 30000 --concurrency 1,8,16,32,64,128 --engine sglang " \
        "--server-command 'python -m sglang.launch_server'" in out
    assert "GPU-min" in out
    # No reference yet: one line, exit 2, nothing swept.
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: {tmp_path}/none/manifest.json is missing; make the reference first: "
        "scripts/gpu_regression.py reference --name none"]


def test_servers_the_job_started_are_attached(tmp_path: Path) -> None:
    env = {k: v for k, v in cli_env().items() if not k.startswith("REGRESSION_")}
    proc = run_job("reference", {
        **env, "REGRESSION_ATTACH": "baseline=http://127.0.0.1:30000,eagle3=http://127.0.0.1:30010",
        "REGRESSION_RESULTS_DIR": str(tmp_path)}, "--name", "c1", "--dry-run", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert "--engine attach --modes baseline,eagle3 --attach baseline=http://127.0.0.1:30000 " \
        "--attach eagle3=http://127.0.0.1:30010" in first and "--server-command" not in first
    assert "attach http://127.0.0.1:30010" in proc.stdout
