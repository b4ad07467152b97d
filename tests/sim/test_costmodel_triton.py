"""The Triton-attention H200 profile against step times SGLang 0.5.17 logged on a real H200.

The profile was fitted by benchmarks/gpu/fit_profile.py to the run
results/gpu/h200-sglang-0.5.17-llama8b-shape-q0.3 (benchmarks/README.md, "Simulator against the
real H200 (Triton attention)"). The mechanism it encodes: SGLang's Triton backend verifies
through its extend kernel, whose attention costs ~12x a decode's per KV token whatever the row
count, so EAGLE-3's step grows with batch x context and stops paying past ~32 users.
"""

from __future__ import annotations

import pytest

from specbench.sim.costmodel import Profile, decode_step, load_profile, predict_output_tok_s

PROFILE = "llama-3.1-8b-1xh200-triton"
# Median steady step times from the real run's "Decode batch" lines (fit_profile.py's table):
# (mode, batch, mean KV tokens per request, real step ms, steady lines). Groups of >= 5 lines.
REAL_STEPS = (
    ("baseline", 1, 3418, 5.81, 23),
    ("baseline", 16, 1601, 6.31, 45),
    ("baseline", 64, 1409, 9.13, 28),
    ("baseline", 128, 1301, 12.68, 18),
    ("eagle3", 1, 3462, 13.28, 8),
    ("eagle3", 16, 1647, 23.15, 8),
    ("eagle3", 32, 1481, 35.56, 5),
    ("zero-step", 4, 1783, 11.30, 38),
    ("zero-step", 16, 1602, 21.83, 30),
)
TOLERANCE = 0.10  # the fit meets every group of >= 5 lines within 10 %


def _step_ms(profile: Profile, mode: str, batch: int, context: float) -> float:
    return decode_step(
        profile,
        batch,
        batch * context,
        speculative=mode != "baseline",
        num_steps=3 if mode == "eagle3" else 0,
    ).total_ms


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_profile(PROFILE)


@pytest.mark.parametrize(("mode", "batch", "context", "real_ms", "lines"), REAL_STEPS)
def test_step_time_matches_the_real_h200(
    profile, mode: str, batch: int, context: float, real_ms: float, lines: int
) -> None:
    model_ms = _step_ms(profile, mode, batch, context)
    assert model_ms == pytest.approx(real_ms, rel=TOLERANCE), (mode, batch, lines)


def test_eagle3_step_at_64_users_is_dominated_by_verify_attention(profile) -> None:
    # Real: 64.8 ms (3 lines, 51-70 ms) at B=64, 1.3k tokens each, where a plain step is 9.1 ms.
    cost = decode_step(profile, 64, 64 * 1308, speculative=True, num_steps=3)
    assert cost.total_ms == pytest.approx(64.84, rel=0.15)
    assert cost.parts["target_attention"] > 0.6 * cost.total_ms
    plain = decode_step(profile, 64, 64 * 1308, speculative=False).total_ms
    assert cost.total_ms > 5 * plain


def test_one_row_verify_costs_what_a_four_row_verify_costs(profile) -> None:
    # The extend kernel pads rows to its tile: zero-step (1 row) pays the K+1-row attention.
    zero = decode_step(profile, 16, 16 * 1600, speculative=True, num_steps=0)
    spec = decode_step(profile, 16, 16 * 1600, speculative=True, num_steps=3)
    assert zero.parts["target_attention"] == pytest.approx(spec.parts["target_attention"])
    # ...which the default (FA/SDPA-like) profile does not: its zero-step reads KV as a decode.
    default = load_profile("llama-3.1-8b-1xh200")
    d_zero = decode_step(default, 16, 16 * 1600, speculative=True, num_steps=0)
    d_plain = decode_step(default, 16, 16 * 1600, speculative=False)
    assert d_zero.parts["target_attention"] == d_plain.parts["target_attention"]


def test_eagle3_stops_scaling_past_32_users_and_the_baseline_does_not(profile) -> None:
    # Real coding: EAGLE-3 2102 -> 2429 tok/s from c=32 to c=128, the baseline 3796 -> 7681.
    def tok_s(b: int, spec: bool) -> float:
        return predict_output_tok_s(profile, b, 1400.0, speculative=spec, alpha=0.7)

    assert tok_s(128, True) / tok_s(32, True) < 1.2
    assert tok_s(128, False) / tok_s(32, False) > 1.8
    assert tok_s(1, True) > 1.2 * tok_s(1, False)  # still ahead for one user
