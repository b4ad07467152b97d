"""The config schema and named server configurations, end to end through the CLI.

Adding a configuration to a sweep is data: `--modes baseline,eagle3-k2,eagle3-k5` measures
three servers with no code that knows about them, and each lands in its own result paths.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from specbench import results
from specbench.engines.process import free_port

FAST = [
    "--prompts", "coding",
    "--concurrency", "2,8",
    "--warmup-s", "0.5",
    "--window-s", "1.5",
    "--sim-time-scale", "8",
]  # fmt: skip


def _cli(args: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specbench", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_sweep_of_baseline_and_two_static_k(tmp_path: Path) -> None:
    modes = "baseline,eagle3-k2,eagle3-k5"
    proc = _cli(
        ["sweep", "--modes", modes, *FAST, "--port", str(free_port()),
         "--results-dir", str(tmp_path), "--run-name", "k"],
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = results.load_run(tmp_path / "k")
    assert run.modes == ["baseline", "eagle3-k2", "eagle3-k5"]
    for name in run.modes:
        assert (tmp_path / "k" / "points" / name / "coding" / "c8-r0.parquet").is_file()
    manifest = run.manifest
    assert isinstance(manifest, results.Manifest)
    servers = manifest.servers
    steps = {name: rec.server_info.get("speculative_num_steps") for name, rec in servers.items()}
    assert steps == {"baseline": None, "eagle3-k2": 2, "eagle3-k5": 5}
    assert manifest.servers["eagle3-k5"].kind == "eagle3"
    assert all(p.status == "ok" for p in manifest.points.values()) and len(manifest.points) == 6
    summary = pd.read_parquet(tmp_path / "k" / "summary.parquet")
    by_mode = summary.groupby("mode")["accept_length"].mean()
    # More draft steps, more accepted tokens per verify step.
    assert by_mode["eagle3-k5"] > by_mode["eagle3-k2"] > 1.0
    assert json.loads((tmp_path / "k" / "manifest.json").read_text())["schema_version"] == 2


CONFIG_CASES = [
    ('[load]\nwindow_s = "8"\n', "load.window_s = '8'"),
    ("[load]\nrepeats = 2.5\n", "load.repeats = 2.5"),
    ('modes = "baseline"\n', "modes = 'baseline'"),
    ("[sim]\nspeed = 2\n", "unknown key sim.speed"),
]


@pytest.mark.parametrize("text, needle", CONFIG_CASES, ids=["string", "fraction", "list", "key"])
def test_bad_config_file_is_one_line_exit_2(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    proc = _cli(["sweep", "--config", str(path), "--results-dir", str(tmp_path / "r")], tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: config file {path}: "), proc.stderr
    assert needle in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "r").exists()


def test_bad_option_value_names_the_flag(tmp_path: Path) -> None:
    proc = _cli(["sweep", "--repeats", "0", "--dry-run"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: --repeats 0 is not valid (input should be greater than or equal to 1); "
        "use a value >= 1"
    )


def test_help_has_the_schema_panels_at_80_columns(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "specbench", "sweep", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "80", "PATH": "/usr/bin:/bin", "TERM": "dumb"},
    )
    assert proc.returncode == 0, proc.stderr
    for panel in ("Server", "Simulator", "Load", "Output"):
        assert f"─ {panel} ─" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    for flag in ("--spec-steps", "--sim-time-scale", "--window-s", "--results-dir", "--modes"):
        assert flag in proc.stdout
