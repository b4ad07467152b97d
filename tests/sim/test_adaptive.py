"""Adaptive routing (SGLang 0.5.23's `_route`) and the EMA slots, on hand-picked cases.

tests/sim/test_scheduler_contract.py checks the same classes against SGLang's own code.
"""

from __future__ import annotations

from specbench.sim.adaptive import AdaptiveRouter, SlotConfig, SlotState, load_adaptive_config

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
