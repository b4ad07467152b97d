"""Dynamic-disable mode over HTTP: adaptive JSON, batch-size routing, padding, refusal."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
from pathlib import Path
from typing import Any

import aiohttp

from specbench.config import ServerConfig
from specbench.engines.argv import build_argv
from tests.sim.conftest import EAGLE3_FLAGS, SimProc, sse

FAST = ("--sim-time-scale", "20", "--max-running-requests", "64")


def write_cfg(tmp_path: Path, threshold: int) -> str:
    path = tmp_path / f"adaptive-{threshold}.json"
    path.write_text(
        json.dumps({"1": {"candidate_steps": [3]}, str(threshold): {"candidate_steps": [0]}})
    )
    return str(path)


def accept_lengths(sim: SimProc, n: int, max_tokens: int = 200) -> list[float]:
    """Run n equal requests at once; return each one's completion_tokens / spec_verify_ct."""
    body = {
        "model": "m",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "return_spec_tokens_details": True,
        "temperature": 0,
    }

    async def go() -> list[float]:
        async with aiohttp.ClientSession() as session:
            results = await asyncio.gather(
                *(
                    sse(
                        session,
                        sim.url + "/v1/chat/completions",
                        {**body, "messages": [{"role": "user", "content": f"Implement item {i}"}]},
                    )
                    for i in range(n)
                )
            )
        out = []
        for status, events in results:
            assert status == 200
            details = events[-2].json["sglext"]["spec_tokens_details"]
            out.append(details["spec_accept_length"])
        return out

    return asyncio.run(go())


def test_threshold_config_routes_by_exact_batch_size(start_sim, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cfg = write_cfg(tmp_path, 4)
    sim: SimProc = start_sim(
        *FAST,
        "--enable-metrics",
        *EAGLE3_FLAGS,
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        cfg,
    )
    info = sim.get_json("/server_info")
    assert info["speculative_adaptive"] is True
    assert info["speculative_adaptive_config"] == cfg
    assert info["speculative_num_steps"] == 3
    # Eight at once run at batch size >= 4 nearly all the time: one token per verify.
    assert statistics.fmean(accept_lengths(sim, 8)) < 1.3
    assert "Switch adaptive runtime state: steps 3 -> 0" in sim.log
    # Alone, the request runs in the K=3 slot.
    assert accept_lengths(sim, 1)[0] > 1.8
    assert sim.get_json("/server_info")["internal_states"][0]["speculative_num_steps"] == 3
    assert "spec_num_steps" in sim.get("/metrics")[1]


def test_graph_list_padding_moves_threshold(start_sim, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cfg = write_cfg(tmp_path, 6)
    exact: SimProc = start_sim(
        *FAST, *EAGLE3_FLAGS, "--speculative-adaptive", "--speculative-adaptive-config", cfg
    )
    padded: SimProc = start_sim(
        *FAST,
        *EAGLE3_FLAGS,
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        cfg,
        "--cuda-graph-bs-decode",
        "1",
        "2",
        "4",
        "8",
    )
    assert padded.get_json("/server_info")["cuda_graph_bs_decode"] == [1, 2, 4, 8]
    # Five running requests: below 6 when routed exactly, padded to 8 (>= 6) with the list.
    assert statistics.fmean(accept_lengths(exact, 5)) > 1.8
    assert statistics.fmean(accept_lengths(padded, 5)) < 1.3


def test_adaptive_refused_for_topk_above_one(start_sim, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cfg = write_cfg(tmp_path, 4)
    sim: SimProc = start_sim(
        *FAST,
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "d",
        "--speculative-num-steps",
        "5",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        cfg,
    )
    info = sim.get_json("/server_info")
    assert info["speculative_adaptive"] is False
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"]) == (5, 4)
    assert "speculative_adaptive disabled" in sim.log
    assert "Falling back to static speculative params" in sim.log
    # Static 5-step tree drafting keeps speculating at any batch size.
    assert statistics.fmean(accept_lengths(sim, 8)) > 2.0


def busy_model_seconds(sim: SimProc) -> float:
    text = sim.get("/metrics")[1]
    line = next(
        ln for ln in text.splitlines() if ln.startswith("sglang:sim_running_reqs_seconds_total{")
    )
    return float(line.rsplit(" ", 1)[1])


def test_skip_zero_step_draft_extend_env_makes_zero_steps_cheaper(
    start_sim, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "off.json"
    cfg.write_text('{"1": {"candidate_steps": [0]}}')
    flags = (
        *FAST,
        "--enable-metrics",
        "--skip-server-warmup",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "d",
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        str(cfg),
    )
    normal: SimProc = start_sim(*flags)
    skip: SimProc = start_sim(*flags, env={"SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND": "1"})
    info: dict[str, Any] = skip.get_json("/server_info")
    assert info["sim_skip_zero_step_draft_extend"] is True
    assert info["speculative_num_steps"] == 0
    assert normal.get_json("/server_info")["sim_skip_zero_step_draft_extend"] is False
    for sim in (normal, skip):
        assert accept_lengths(sim, 1, max_tokens=300)[0] < 1.01
    # One request running alone: busy model time = its forwards. The draft extend (~0.23 ms
    # per ~4.8 ms zero-step forward) is what the environment variable removes.
    ratio = busy_model_seconds(normal) / busy_model_seconds(skip)
    assert 1.02 < ratio < 1.10


def test_sglang_default_logs_its_ema_moves_as_sglang_does(start_sim) -> None:  # type: ignore[no-untyped-def]
    # As specbench launches `sglang-default`: K = 7, SGLang's built-in slots. Alone, a request
    # runs in the 1-7 slot, whose EMA of accepted drafts (about 1.5 at K = 3 here) leaves 7.
    argv = build_argv("sglang-default", ServerConfig(draft_model_path="draft"), port=0,
                      max_running_requests=64)
    sim: SimProc = start_sim(*FAST, *argv[argv.index("--speculative-algorithm"):])
    assert sim.get_json("/server_info")["speculative_num_steps"] == 7
    accept_lengths(sim, 1, max_tokens=400)
    # SGLang's own line (adaptive_spec_params.py), which names no slot.
    moves = re.findall(r"Adaptive spec params updated: steps (\d+) -> (\d+) "
                       r"\(ema_accept_len=-?\d+\.\d\d\)", sim.log)
    assert moves and moves[0][0] == "7" and int(moves[0][1]) < 7
