"""The simulator's adaptive routing and EMA slots against SGLang 0.5.23's own classes.

Runs `AdaptiveSpeculativeParams` / `AdaptiveStepSlot` from the sglang wheel (installed by
scripts/install_sglang_contract.sh; `SPECBENCH_SGLANG_PYTHON` may name a venv that has it) on
random configurations, graph lists and acceptance feeds, and requires the simulator's
`AdaptiveRouter` / `SlotState` to pick the same step count at every batch size and verify.
Skipped when sglang is not installed.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specbench.sim.adaptive import AdaptiveRouter, SlotConfig, SlotState, load_adaptive_config
from tests.sim.sglang_probe import PRELUDE

pytestmark = pytest.mark.contract

SGLANG_PYTHON = os.environ.get("SPECBENCH_SGLANG_PYTHON", sys.executable)

# Runs under SGLANG_PYTHON, after the shared prelude that stubs torchvision when it is missing.
PROBE = PRELUDE + r"""
from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams, AdaptiveStepSlot

job = JOB
out = {"ema": [], "route": []}
for case in job["ema"]:
    slot = AdaptiveStepSlot(case["initial"], case["cfg"])
    seq = [slot.current_steps]
    for value in case["feed"]:
        slot.update([value])
        seq.append(slot.current_steps)
    out["ema"].append(seq)
for case in job["route"]:
    params = AdaptiveSpeculativeParams(case["initial"], case["path"])
    if case["graph"]:
        params.set_cuda_graph_bs(case["graph"])
    out["route"].append([params.get_steps_for_batch(b) for b in range(1, 300)])
print(json.dumps(out))
"""


def sglang_available() -> bool:
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('sglang') is None)"
    return subprocess.run([SGLANG_PYTHON, "-c", code], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    if not sglang_available():
        pytest.skip(
            f"sglang is not installed for {SGLANG_PYTHON}; run "
            "scripts/install_sglang_contract.sh or set SPECBENCH_SGLANG_PYTHON"
        )
    rng = random.Random(20261129)
    ema = []
    for _ in range(200):
        cfg: dict[str, Any] = {
            "candidate_steps": sorted(set(rng.sample([0, 1, 2, 3, 5, 7], rng.randint(1, 4))))
        }
        for key, choices in (
            ("down_hysteresis", [0.0, -0.25, -0.5]),
            ("ceiling_coeff", [0.5, 1.5]),
            ("update_interval", [1, 3]),
            ("warmup_batches", [0, 3]),
        ):
            if rng.random() < 0.3:
                cfg[key] = rng.choice(choices)
        feed = [rng.choice([0, 0, 1, 2, 3, 5]) for _ in range(80)]
        ema.append({"cfg": cfg, "initial": rng.choice([0, 1, 3, 4]), "feed": feed})
    route = []
    folder = tmp_path_factory.mktemp("adaptive")
    for i in range(100):
        keys = sorted(rng.sample(range(1, 260), rng.randint(1, 4)))
        cfg = {
            str(k): {"candidate_steps": sorted(set(rng.sample([0, 1, 3, 5], rng.randint(1, 2))))}
            for k in keys
        }
        path = folder / f"cfg{i}.json"
        path.write_text(json.dumps(cfg))
        graph = (
            sorted(set(rng.sample(range(1, 257), rng.randint(3, 30))))
            if rng.random() < 0.6
            else None
        )
        route.append({"path": str(path), "initial": rng.choice([0, 1, 3, 5]), "graph": graph})
    job = {"ema": ema, "route": route}
    proc = subprocess.run(
        [SGLANG_PYTHON, "-c", PROBE],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return job, json.loads(proc.stdout.strip().splitlines()[-1])


def test_ema_slots_step_like_sglang(cases: tuple[dict[str, Any], dict[str, Any]]) -> None:
    job, real = cases
    for case, expected in zip(job["ema"], real["ema"], strict=True):
        cfg = case["cfg"]
        slot = SlotState.start(
            SlotConfig(
                1,
                tuple(cfg["candidate_steps"]),
                update_interval=cfg.get("update_interval", 5),
                warmup_batches=cfg.get("warmup_batches", 10),
                down_hysteresis=cfg.get("down_hysteresis", -0.25),
                ceiling_coeff=cfg.get("ceiling_coeff", 0.0),
            ),
            case["initial"],
        )
        seq = [slot.current]
        for value in case["feed"]:
            slot.on_verify(float(value))
            seq.append(slot.current)
        assert seq == expected, case


def test_routing_matches_sglang(cases: tuple[dict[str, Any], dict[str, Any]]) -> None:
    job, real = cases
    for case, expected in zip(job["route"], real["route"], strict=True):
        router = AdaptiveRouter(
            load_adaptive_config(case["path"]),
            tuple(case["graph"]) if case["graph"] else None,
            case["initial"],
        )
        assert [router.steps_for(b) for b in range(1, 300)] == expected, Path(
            case["path"]
        ).read_text()
