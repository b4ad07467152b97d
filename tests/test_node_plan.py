"""The dry run's node plan (issue 57): each --gpus slot's GPUs and port, the configurations that
run side by side, and one slot saying the servers run one after another. Nothing is launched."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from specbench import config
from specbench.run import parallel
from specbench.run.plan import node_plan
from tests.harness import cli_env, run_cli

EIGHT = "0-7"  # a range, as a user writes it


def _dry_run(tmp_path: Path, *args: str) -> list[str]:
    proc = run_cli(["sweep", "--dry-run", *args], tmp_path, timeout=120,
                   env={k: v for k, v in cli_env(columns=400).items()
                        if not k.startswith("SPECBENCH_")})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.replace(sys.executable, "<python>").splitlines()


def _port(lines: list[str], name: str) -> int:
    command = next(line for line in lines if line.startswith(f"{name}: "))
    found = re.search(r"--port (\d+)", command)
    assert found, command
    return int(found.group(1))


def test_two_slots_of_tp_4_show_their_gpus_and_ports(tmp_path: Path) -> None:
    lines = _dry_run(tmp_path, "--engine", "sglang", "--model-path", "org/target",
                     "--draft-model-path", "org/draft", "--gpus", EIGHT, "--tp-size", "4",
                     "--port", "31000")
    slots = [line.strip() for line in lines if line.startswith("  slot ")]
    assert slots == ["slot 0: GPUs 0,1,2,3, port 31000", "slot 1: GPUs 4,5,6,7, port 31010"]
    assert "  side by side: baseline on slot 0, eagle3 on slot 1" in lines
    assert any(line.startswith("  then zero-step on the first slot that frees up")
               for line in lines)
    # Each command carries the port its server is launched on, not --port for every one.
    assert _port(lines, "baseline") == 31000
    assert _port(lines, "eagle3") == 31010
    assert _port(lines, "dynamic") == 31000  # after the analysis, on slot 0
    zero_step = lines.index(next(line for line in lines if line.startswith("zero-step: ")))
    assert lines[zero_step + 1] == "  port: that of the slot that frees up first (31000 or 31010)"


def test_tp_size_of_every_gpu_runs_the_servers_one_after_another(tmp_path: Path) -> None:
    lines = _dry_run(tmp_path, "--gpus", "0-7", "--tp-size", "8")
    plan = [line for line in lines if line.startswith("node plan")]
    assert len(plan) == 1
    assert "is one slot: the servers run one after another on GPUs 0,1,2,3,4,5,6,7, on port "\
        "30000" in plan[0]
    assert not any(line.startswith(("  slot ", "  side by side")) for line in lines)
    assert {_port(lines, name) for name in ("baseline", "eagle3", "zero-step", "dynamic")} \
        == {30000}


def test_without_gpus_the_dry_run_has_no_node_plan(tmp_path: Path) -> None:
    assert not any(line.startswith("node plan") for line in _dry_run(tmp_path))


class _Process:
    def __init__(self, target: Any, args: tuple[Any, ...], name: str, daemon: bool) -> None:
        self.args = args

    def start(self) -> None:
        pass


def test_the_run_starts_each_slot_on_the_port_the_dry_run_shows(tmp_path: Path) -> None:
    cfg = config.build({"gpus": list(range(8)), "server": {"tp_size": 4, "port": 31000},
                        "plan": "dense"})
    manifest = SimpleNamespace(placements=[], save=lambda run_dir: None)
    sweep = SimpleNamespace(cfg=cfg, run_dir=tmp_path, manifest=manifest)
    runner = parallel.ParallelRunner(sweep, None, cfg.gpu_slots())  # type: ignore[arg-type]
    runner.context = SimpleNamespace(Process=_Process)  # type: ignore[assignment]
    _, shown = node_plan(cfg)
    for index, name in enumerate(("baseline", "eagle3")):
        runner._start(name, index, "{}")
        process = runner.running[name][0]
        _, _, _, gpu_ids, port, _ = process.args  # type: ignore[attr-defined]
        assert (gpu_ids, port) == (cfg.gpu_slots()[index], shown[name])
    assert [(p.config, p.gpu_ids, p.port) for p in manifest.placements] == [
        ("baseline", [0, 1, 2, 3], 31000), ("eagle3", [4, 5, 6, 7], 31010)]
