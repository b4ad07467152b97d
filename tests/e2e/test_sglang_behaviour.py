"""What a real SGLang server does that a sweep must handle: keys, context length, the cache flush.

Each test runs the CLI against the simulator, which follows SGLang 0.5.23's rules for these
(its auth rules, the 400 on an over-long request, `/flush_cache?timeout=S`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.engines.process import free_port

FAST = ["--concurrency", "2", "--warmup-s", "0.5", "--window-s", "1", "--sim-time-scale", "8"]


def _cli(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specbench", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def test_over_long_prompts_are_refused_per_set_before_any_load(tmp_path: Path) -> None:
    proc = _cli(
        ["sweep", "--modes", "baseline", *FAST, "--port", str(free_port()),
         "--server-arg=--context-length 4096", "--results-dir", str(tmp_path), "--run-name", "r"],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    errors = [
        line.removeprefix("error: ")
        for line in proc.stderr.splitlines()
        if "context length 4096" in line
    ]
    assert [line.split(":")[0] for line in errors] == ["prompt set coding", "prompt set agentic"]
    assert proc.stderr.splitlines()[-2].startswith("error: prompt set coding")
    assert all("--allow-auto-truncate" in line for line in errors)
    assert "Traceback" not in proc.stderr
    assert not list((tmp_path / "r").glob("points/**/*.parquet"))
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["points"] == {}


def test_the_models_own_context_length_is_used_when_none_was_set_at_launch(
        tmp_path: Path) -> None:
    # SGLang leaves /server_info context_length unset without --context-length; the model's
    # limit is /v1/models max_model_len. A profile whose model has a 4096-token context:
    from specbench.sim.costmodel import PROFILE_DIR

    text = (PROFILE_DIR / "llama-3.1-8b-1xh200.toml").read_text()
    assert "context_length = 131072" in text
    profile = tmp_path / "short-context.toml"
    profile.write_text(text.replace("context_length = 131072", "context_length = 4096"))
    proc = _cli(
        ["sweep", "--modes", "baseline", "--prompts", "coding", *FAST, "--port", str(free_port()),
         "--sim-profile", str(profile), "--results-dir", str(tmp_path), "--run-name", "r"],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: prompt set coding:") and "context length 4096" in last, last
    assert not list((tmp_path / "r").glob("points/**/*.parquet"))


@pytest.mark.slow
def test_points_record_a_confirmed_cache_flush(tmp_path: Path) -> None:
    proc = _cli(
        ["sweep", "--modes", "baseline", "--prompts", "coding", *FAST, "--port", str(free_port()),
         "--results-dir", str(tmp_path), "--run-name", "r"],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    points = json.loads((tmp_path / "r" / "manifest.json").read_text())["points"]
    assert points and all(p["cache_flushed"] is True for p in points.values())


KEY = "sk-test-7b1e"


def _no_key_left(run_dir: Path) -> None:
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_a_launched_server_with_an_api_key_is_measured_and_flushed(tmp_path: Path) -> None:
    proc = _cli(
        ["sweep", "--modes", "baseline", "--prompts", "coding", *FAST, "--port", str(free_port()),
         "--api-key", KEY, "--results-dir", str(tmp_path), "--run-name", "r"],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert all(p["cache_flushed"] for p in manifest["points"].values())
    assert "--api-key" in manifest["servers"]["baseline"]["argv"]
    _no_key_left(tmp_path / "r")
    assert KEY not in proc.stdout + proc.stderr


def test_a_server_whose_key_was_not_given_stops_with_one_line(tmp_path: Path) -> None:
    proc = _cli(
        ["sweep", "--modes", "baseline", "--prompts", "coding", *FAST, "--port", str(free_port()),
         f"--server-arg=--api-key {KEY}", "--results-dir", str(tmp_path), "--run-name", "r"],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "HTTP 401" in lines[0] and "--api-key KEY" in lines[0], proc.stderr
    _no_key_left(tmp_path / "r")


@pytest.mark.slow
def test_attach_with_an_api_key_and_without(tmp_path: Path) -> None:
    from tests.harness import sim_server

    with sim_server("baseline", tmp_path, sim_args=["--api-key", KEY]) as server:
        base = ["sweep", "--engine", "attach", "--modes", "baseline", "--prompts", "coding",
                *FAST, "--attach", f"baseline={server.base_url}", "--results-dir", str(tmp_path)]
        refused = _cli([*base, "--run-name", "no-key"], tmp_path)
        measured = _cli([*base, "--run-name", "key", "--api-key", KEY], tmp_path)
    assert refused.returncode == 2
    assert [line for line in refused.stderr.splitlines() if line.startswith("error:")] == [
        f"error: {server.base_url}/server_info answered HTTP 401: the server's API key is "
        "needed; pass the server's --api-key KEY (or set SPECBENCH_API_KEY)"
    ]
    assert measured.returncode == 0, measured.stderr[-2000:]
    points = json.loads((tmp_path / "key" / "manifest.json").read_text())["points"]
    assert points and all(p["cache_flushed"] for p in points.values())
    _no_key_left(tmp_path / "key")
