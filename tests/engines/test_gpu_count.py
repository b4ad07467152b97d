"""GPUs counted before any SGLang server starts (issue 36 item 2).

`--tp-size` (and `--gpus`) beyond the GPUs this process can see is one line in seconds, not a
CUDA traceback after the server's start-up. The count comes from CUDA_VISIBLE_DEVICES or
nvidia-smi (a fake one on PATH here); without either nothing is refused.
"""

from __future__ import annotations

import multiprocessing
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specbench import config
from specbench.engines import sglang as sg
from specbench.engines.process import free_port
from specbench.engines.simulated import SimEngine
from specbench.errors import ConfigError
from tests.harness import cli_env, run_cli


def _nvidia_smi(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


@pytest.mark.parametrize(
    "value, ids",
    [
        ("0", ("0",)),
        ("0,1", ("0", "1")),
        (" 2 , 3 ", ("2", "3")),
        ("", ()),
        ("-1", ()),
        ("0,-1,1", ("0",)),  # parsing stops at the first invalid entry
        ("0,,1", ("0",)),
        ("1,nope,2", ("1",)),
        ("0,1,0", ("0", "1")),  # a repeat is invalid too
        ("GPU-8e1a,GPU-77c0", ("GPU-8e1a", "GPU-77c0")),
        ("MIG-4f2b", ("MIG-4f2b",)),
    ],
)
def test_cuda_visible_devices_is_counted_as_cuda_reads_it(
    tmp_path: Path, value: str, ids: tuple[str, ...]
) -> None:
    # The variable wins: an nvidia-smi listing eight GPUs is not asked.
    path = _nvidia_smi(tmp_path / "bin", "seq 0 7")
    seen = sg.count_visible_gpus({"CUDA_VISIBLE_DEVICES": value, "PATH": str(path)})
    assert seen is not None
    assert seen.ids == ids
    assert seen.source == f"CUDA_VISIBLE_DEVICES={value or repr('')}"


def test_without_the_variable_nvidia_smi_counts(tmp_path: Path) -> None:
    path = _nvidia_smi(tmp_path / "bin", 'echo 0; echo 1')
    assert sg.count_visible_gpus({"PATH": str(path)}) == sg.VisibleGpus(
        ("0", "1"), "nvidia-smi lists GPUs 0,1"
    )


def test_nothing_to_count_with_is_none(tmp_path: Path) -> None:
    assert sg.count_visible_gpus({"PATH": str(tmp_path / "empty")}) is None
    failing = _nvidia_smi(tmp_path / "bin", "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    assert sg.count_visible_gpus({"PATH": str(failing)}) is None


def test_an_adaptive_launch_reads_the_gpus_memory_from_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two GPUs of different sizes: the smaller decides; only adaptive servers ask.
    path = _nvidia_smi(
        tmp_path / "bin",
        "echo '0, NVIDIA H200, 143771, 570.86, 1980'; echo '1, NVIDIA H100 80GB HBM3, 81559, "
        "570.86, 1980'",
    )
    monkeypatch.setenv("PATH", f"{path}:{Path(sys.executable).parent}")
    cfg = config.resolve(
        {
            "engine": "sglang",
            "server": {"model_path": "/m", "draft_model_path": "/d"},
            "modes": ["eagle3", "sglang-default"],
            "concurrency": [1, 128],
        }
    )
    engine = sg.SGLangEngine(cfg)
    eagle3, default = cfg.configurations
    assert "--mem-fraction-static" not in engine.command(eagle3, None)
    argv = engine.command(default, None)
    # No SGLang in this interpreter: the newest release's candidates (0, 1, 3, 5, 7).
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.699"
    assert engine.gpu_memory_mib() == 81_559


def _cfg(**values: Any) -> config.SweepConfig:
    tp = values.pop("tp", 1)
    return config.resolve({"engine": "sglang", "server": {"tp_size": tp}, **values})


def _cvd(value: str) -> sg.VisibleGpus:
    return sg.count_visible_gpus({"CUDA_VISIBLE_DEVICES": value}) or sg.VisibleGpus((), "")


@pytest.mark.parametrize(
    "cfg, seen, message",
    [
        (
            _cfg(tp=2),
            _cvd("0"),
            "--tp-size 2 needs 2 GPUs per server but 1 is visible (CUDA_VISIBLE_DEVICES=0); "
            "lower --tp-size to 1 or make more GPUs visible",
        ),
        (
            _cfg(tp=8),
            sg.VisibleGpus(("0", "1"), "nvidia-smi lists GPUs 0,1"),
            "--tp-size 8 needs 8 GPUs per server but 2 are visible (nvidia-smi lists GPUs 0,1); "
            "lower --tp-size to 2 or make more GPUs visible",
        ),
        (
            _cfg(),
            _cvd("-1"),
            "SGLang needs 1 GPU per server but none is visible (CUDA_VISIBLE_DEVICES=-1); "
            "make a GPU visible, or use --engine sim for the simulated server",
        ),
        (
            _cfg(gpus=(0, 1)),
            _cvd("0"),
            "--gpus 0,1: GPU 1 is not visible here (CUDA_VISIBLE_DEVICES=0); list only visible "
            "GPUs in --gpus (visible: 0) or make it visible",
        ),
        (
            _cfg(tp=2, gpus=(0, 1, 2, 3)),
            sg.VisibleGpus(("0", "1"), "nvidia-smi lists GPUs 0,1"),
            "--gpus 0,1,2,3: GPU 2,3 are not visible here (nvidia-smi lists GPUs 0,1); list "
            "only visible GPUs in --gpus (visible: 0,1) or make them visible",
        ),
    ],
)
def test_too_few_visible_gpus_is_one_line(
    cfg: config.SweepConfig, seen: sg.VisibleGpus, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        sg.check_gpu_count(cfg, seen)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "cfg, seen",
    [
        (_cfg(tp=2), None),  # nothing to count with: not refused
        (_cfg(tp=2), _cvd("0,1")),
        (_cfg(tp=2), _cvd("GPU-8e1a,GPU-77c0")),
        (_cfg(tp=2, gpus=(0, 1, 2, 3)), sg.VisibleGpus(tuple("01234567"), "nvidia-smi")),
        (_cfg(gpus=(4, 5)), _cvd("4,5")),
        # Ray counts the cluster's GPUs itself; this node may have none.
        (_cfg(tp=2, executor="ray"), _cvd("")),
    ],
)
def test_enough_or_uncountable_gpus_pass(
    cfg: config.SweepConfig, seen: sg.VisibleGpus | None
) -> None:
    sg.check_gpu_count(cfg, seen)


def test_a_gpus_worker_sees_only_its_own_slot() -> None:
    """parallel.py's workers are spawned processes whose CUDA_VISIBLE_DEVICES is their slot:
    the other slots' GPUs are not missing there. The same view in the parent is refused."""
    cfg, slot = _cfg(tp=2, gpus=(0, 1, 2, 3)), _cvd("2,3")
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pool.apply(sg.check_gpu_count, (cfg, slot))
    with pytest.raises(ConfigError, match="GPU 0,1 are not visible here"):
        sg.check_gpu_count(cfg, slot)


def test_the_simulated_engine_counts_no_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    cfg = config.resolve(
        {"engine": "sim", "gpus": (0, 1, 2, 3), "server": {"tp_size": 2, "port": free_port()}}
    )
    SimEngine(cfg).preflight()


@pytest.mark.serial  # "in under 5 s": timed against the wall clock
def test_tp_size_beyond_the_visible_gpus_ends_the_cli_in_seconds(tmp_path: Path) -> None:
    started = tmp_path / "server-started"
    fake = tmp_path / "fake_sglang.py"
    fake.write_text(f"open({str(started)!r}, 'w').close()\n")
    begin = time.monotonic()
    proc = run_cli(
        [
            "sweep", "--engine", "sglang", "--tp-size", "2",
            "--model-path", "/nonexistent-model", "--draft-model-path", "/nonexistent-draft",
            "--server-command", f"{sys.executable} {fake}",
            "--port", str(free_port()),
            "--results-dir", str(tmp_path / "res"), "--run-name", "r",
        ],
        tmp_path,
        timeout=60,
        env=cli_env(CUDA_VISIBLE_DEVICES="0"),
    )
    elapsed = time.monotonic() - begin
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        "error: --tp-size 2 needs 2 GPUs per server but 1 is visible (CUDA_VISIBLE_DEVICES=0); "
        "lower --tp-size to 1 or make more GPUs visible"
    ]
    assert elapsed < 5.0
    assert not started.exists()
    assert not (tmp_path / "res").exists()
