"""Adaptive routing (SGLang 0.5.23's `_route` and EMA slots) and the batching scheduler."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import pytest

from specbench.sim.args import SlotConfig, build_parser, load_adaptive_config, resolve
from specbench.sim.costmodel import load_profile
from specbench.sim.scheduler import AdaptiveRouter, Scheduler, SimRequest, SlotState
from specbench.sim.workload import TraitModel

# SGLang's speculative CUDA-graph capture list: 1-8, 10-32 step 2, 40-64 step 4, 72-256 step 8.
SPEC_GRAPH_BS = (
    tuple(range(1, 9))
    + tuple(range(10, 33, 2))
    + tuple(range(40, 65, 4))
    + tuple(range(72, 257, 8))
)


def threshold_router(threshold: int, graph_bs: tuple[int, ...] | None = None) -> AdaptiveRouter:
    slots = (SlotConfig(1, (3,)), SlotConfig(threshold, (0,)))
    return AdaptiveRouter(slots, graph_bs, initial_steps=3)


def first_zero(router: AdaptiveRouter) -> int:
    return next(bs for bs in range(1, 300) if router.steps_for(bs) == 0)


def test_exact_batch_size_routing_without_graph_list() -> None:
    router = threshold_router(32)
    assert router.steps_for(1) == 3 and router.steps_for(31) == 3
    assert router.steps_for(32) == 0 and router.steps_for(250) == 0


def test_padding_to_graph_list_moves_threshold_down() -> None:
    # Default spec list: 30 is captured, 31 pads to 32, so key 32 applies from bs 31.
    assert first_zero(threshold_router(32, SPEC_GRAPH_BS)) == 31
    # [..., 24, 40]: 25 pads to 40 >= 32.
    assert first_zero(threshold_router(32, (1, 2, 4, 8, 16, 24, 40, 64))) == 25
    # Above the largest captured size the batch size is left unchanged.
    assert threshold_router(300, (1, 2, 4)).steps_for(299) == 3


def test_below_smallest_key_uses_smallest_slot() -> None:
    router = AdaptiveRouter((SlotConfig(4, (2,)), SlotConfig(16, (0,))), None, initial_steps=2)
    assert router.steps_for(1) == 2 and router.steps_for(16) == 0


def test_builtin_default_config_routing() -> None:
    router = AdaptiveRouter(load_adaptive_config(None), None, initial_steps=3)
    assert {bs: router.steps_for(bs) for bs in (1, 7, 8, 31, 32, 63, 64, 250)} == {
        1: 3,
        7: 3,
        8: 3,
        31: 3,
        32: 1,
        63: 1,
        64: 0,
        250: 0,
    }


def test_single_candidate_slot_never_changes() -> None:
    slot = SlotState(SlotConfig(1, (0,)), current=0, ema=0.0)
    assert all(slot.on_verify(0.0) is None for _ in range(100))
    assert slot.current == 0


def test_ema_slot_drops_on_zero_acceptance_then_reprobes() -> None:
    slot = SlotState(SlotConfig(1, (0, 3), down_hysteresis=-0.25), current=3, ema=2.0)
    history = []
    for _ in range(80):
        slot.on_verify(0.0)
        history.append(slot.current)
    assert history[0] == 3
    assert 0 in history
    first_off = history.index(0)
    assert 3 in history[first_off:], "a [0, 3] slot keeps re-probing 3"


def test_ema_slot_steps_up_on_full_acceptance() -> None:
    slot = SlotState(SlotConfig(1, (1, 3, 5, 7)), current=3, ema=2.0)
    for _ in range(60):
        slot.on_verify(float(slot.current))
    assert slot.current == 7


def make_scheduler(*flags: str, time_scale: float = 1000.0) -> tuple[Scheduler, TraitModel]:
    profile = load_profile()
    ns = build_parser().parse_args(
        ["--model-path", "m", "--sim-time-scale", str(time_scale), *flags]
    )
    s = resolve(ns, profile, env={})
    return Scheduler(s, profile, lambda level, msg: None), TraitModel(profile.workload, 0)


async def run_requests(sched: Scheduler, reqs: list[SimRequest]) -> None:
    task = asyncio.create_task(sched.run())
    for r in reqs:
        sched.submit(r)
    for r in reqs:
        while not r.finished:
            r.event.clear()
            await r.event.wait()
    sched.stop()
    await task


def requests(traits: TraitModel, n: int, max_new: int, topk: int = 1) -> list[SimRequest]:
    return [
        SimRequest(
            f"r{i}",
            traits.traits(f"Implement task {i % 7}", agentic=False),
            max_new_tokens=max_new,
            topk=topk,
        )
        for i in range(n)
    ]


def test_outputs_are_identical_across_modes() -> None:
    base, traits = make_scheduler("--max-running-requests", "8")
    spec, _ = make_scheduler(
        "--max-running-requests",
        "8",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "d",
        "--speculative-num-steps",
        "3",
    )
    a, b = requests(traits, 20, 300), requests(traits, 20, 300)
    asyncio.run(run_requests(base, a))
    asyncio.run(run_requests(spec, b))
    assert [r.completion_tokens for r in a] == [r.completion_tokens for r in b]
    assert [r.finish_kind for r in a] == [r.finish_kind for r in b]
    assert {r.finish_kind for r in a} == {"stop", "length"}
    assert all(r.verify_ct == 0 for r in a)
    accept = sum(r.completion_tokens for r in b) / sum(r.verify_ct for r in b)
    assert 2.0 < accept < 3.2  # tau(3) at alpha ~0.72 is 2.6 (+ the prefill token)


def test_running_requests_never_exceed_the_cap() -> None:
    sched, traits = make_scheduler("--max-running-requests", "5")
    asyncio.run(run_requests(sched, requests(traits, 30, 40)))
    running = sched.steps_ring.column(3)
    assert max(running[i] for i in range(len(running))) == 5


def test_zero_step_slot_emits_one_token_per_verify(tmp_path: Path) -> None:
    cfg = tmp_path / "a.json"
    cfg.write_text('{"1": {"candidate_steps": [3]}, "4": {"candidate_steps": [0]}}')
    sched, traits = make_scheduler(
        "--max-running-requests",
        "16",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "d",
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        str(cfg),
    )
    many = requests(traits, 8, 60)
    asyncio.run(run_requests(sched, many))
    # All 8 share the batch (>= 4) until the first ones finish: almost every verify adds 1 token.
    accept = statistics.fmean(r.completion_tokens / r.verify_ct for r in many)
    assert accept < 1.4
    sched2, _ = make_scheduler(
        "--max-running-requests",
        "16",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "d",
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        str(cfg),
    )
    one = requests(traits, 1, 60)
    asyncio.run(run_requests(sched2, one))
    assert one[0].completion_tokens / one[0].verify_ct > 1.8


def test_model_clock_follows_the_cost_model() -> None:
    sched, traits = make_scheduler(
        "--max-running-requests", "1", "--chunked-prefill-size", "8192", time_scale=20.0
    )
    reqs = [
        SimRequest(
            "r", traits.traits("x" * 400, agentic=False), max_new_tokens=100, ignore_eos=True
        )
    ]
    asyncio.run(run_requests(sched, reqs))
    # One request running throughout: busy model time = 1 prefill (100 tokens) + 99 decode
    # steps at ~4.3 ms each (the model clock also advances while idle, so use the integral).
    assert sched.counters.running_seconds == pytest.approx(0.005 + 99 * 0.0043, rel=0.1)
    assert sched.counters.emitted_tokens == 100


def test_bookkeeping_of_a_250_request_step_is_cheap() -> None:
    sched, traits = make_scheduler(
        "--max-running-requests",
        "256",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model-path",
        "d",
        "--speculative-num-steps",
        "3",
    )
    for i in range(250):
        req = SimRequest(
            f"r{i}", traits.traits(f"p{i}", agentic=False), max_new_tokens=10**6, ignore_eos=True
        )
        req.prefill_done, req.completion_tokens = req.prompt_tokens, 1
        sched.decoding.append(req)
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        fwd = sched._plan()
        assert fwd is not None and fwd.kind == "decode"
        sched._commit(fwd, 0.0, 0.0)
    per_step_ms = (time.perf_counter() - t0) / n * 1e3
    assert per_step_ms < 2.0  # ~0.25 ms measured; generous for a shared 2-core machine
