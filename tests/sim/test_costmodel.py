"""The step-time model against the measured H200 table, and the crossover it implies."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from specbench.sim.costmodel import (
    ProfileError,
    crossover_table,
    decode_step,
    expected_accept_length,
    load_profile,
    predict_output_tok_s,
    prefill_step,
)
from specbench.sim.layercost import AttentionModel

# Llama-3.1-8B GEMM times measured on one H200 (bf16, one CUDA graph), milliseconds.
MEASURED_N = (1, 16, 32, 64, 96, 128, 160, 192, 256, 384, 512, 1024, 2048, 4096)
MEASURED_TARGET_MS = (
    3.98,
    4.05,
    4.13,
    4.19,
    4.37,
    4.55,
    4.90,
    5.48,
    6.58,
    9.56,
    12.00,
    23.51,
    45.91,
    91.28,
)
MEASURED_HEAD_MS = (
    0.226,
    0.225,
    0.230,
    0.235,
    0.246,
    0.259,
    0.278,
    0.326,
    0.371,
    0.537,
    0.678,
    1.338,
    2.592,
    5.129,
)


@pytest.fixture(scope="module")
def profile():  # type: ignore[no-untyped-def]
    return load_profile("llama-3.1-8b-1xh200")


@pytest.mark.parametrize(
    ("n", "measured_ms"), list(zip(MEASURED_N, MEASURED_TARGET_MS, strict=True))
)
def test_target_linear_reproduces_measured_table(profile, n: int, measured_ms: float) -> None:
    assert profile.target_linear.time_ms(n) == pytest.approx(measured_ms, rel=0.05)


@pytest.mark.parametrize(("n", "measured_ms"), list(zip(MEASURED_N, MEASURED_HEAD_MS, strict=True)))
def test_draft_head_linear_reproduces_measured_table(profile, n: int, measured_ms: float) -> None:
    assert profile.draft_linear.time_ms(n) == pytest.approx(measured_ms, rel=0.05)


def test_knee_is_near_180_tokens(profile) -> None:
    assert 160 <= profile.target_linear.knee_tokens <= 200


def test_accept_length_formula() -> None:
    assert expected_accept_length(0.0, 3) == pytest.approx(1.0)
    assert expected_accept_length(0.7, 3) == pytest.approx(1 + 0.7 + 0.49 + 0.343)
    assert expected_accept_length(0.9, 0) == 1.0


def test_zero_step_costs_more_than_plain_decode_and_less_than_drafting(profile) -> None:
    b, kv = 64, 64 * 2000
    plain = decode_step(profile, b, kv, speculative=False).total_ms
    zero = decode_step(profile, b, kv, speculative=True, num_steps=0).total_ms
    zero_skip = decode_step(
        profile, b, kv, speculative=True, num_steps=0, skip_zero_step_draft_extend=True
    ).total_ms
    full = decode_step(profile, b, kv, speculative=True, num_steps=3).total_ms
    assert plain < zero_skip < zero < full
    # SGLang's zero-step tax: a one-token verify + draft extend over a plain decode. The real
    # H200 FlashInfer server's steady zero-step steps (draft extend skipped) took 1.49-1.62
    # times the plain server's at 16-128 running (lab/notes/benchmarks.md, the fitted lines).
    assert 1.02 < zero / plain < 1.65


def test_verify_reads_kv_at_kappa(profile) -> None:
    # Without the per-request walks (serial terms), attention is bandwidth: kappa x a decode's.
    walkless = {"serial_ns_per_token_layer": 0.0, "verify_serial_ns_per_token_layer": 0.0}
    profile = dataclasses.replace(
        profile,
        target_attention=dataclasses.replace(profile.target_attention, **walkless),
        draft_attention=dataclasses.replace(profile.draft_attention, **walkless),
    )
    b, kv = 32, 32 * 4000
    parts = decode_step(profile, b, kv, speculative=True, num_steps=3).parts
    plain = decode_step(profile, b, kv, speculative=False).parts
    fixed = profile.target_attention.n_layers * profile.target_attention.layer_fixed_ms
    ratio = (parts["target_attention"] - fixed) / (plain["target_attention"] - fixed)
    assert ratio == pytest.approx(profile.overheads.verify_kappa)


def test_a_shared_prefix_read_costs_its_fraction_of_the_bandwidth(profile) -> None:
    # Half of 64 x 4000 KV tokens are later reads of shared blocks: at shared_read_fraction 0.5
    # the attention's bandwidth share reads 3/4 of them; the walk (per request) is unchanged;
    # at the default 1 a shared block costs what any block does.
    walkless = {"serial_ns_per_token_layer": 0.0, "verify_serial_ns_per_token_layer": 0.0}
    plain = dataclasses.replace(
        profile, target_attention=dataclasses.replace(profile.target_attention, **walkless))
    b, kv = 64, 64 * 4000
    fixed = plain.target_attention.n_layers * plain.target_attention.layer_fixed_ms

    def attention(p, shared: float) -> float:
        parts = decode_step(p, b, kv, speculative=False, shared_read_tokens=shared).parts
        return parts["target_attention"] - fixed

    assert profile.overheads.shared_read_fraction == 1.0
    assert attention(plain, kv / 2) == pytest.approx(attention(plain, 0.0))
    half = dataclasses.replace(
        plain, overheads=dataclasses.replace(plain.overheads, shared_read_fraction=0.5))
    assert attention(half, kv / 2) == pytest.approx(0.75 * attention(half, 0.0))


def test_prefill_costs_grow_with_prompt_and_draft_extend(profile) -> None:
    short = prefill_step(profile, [(1000, 0)], speculative=False).total_ms
    long = prefill_step(profile, [(8000, 0)], speculative=False).total_ms
    spec = prefill_step(profile, [(8000, 0)], speculative=True).total_ms
    assert long > 6 * short
    assert long < spec < 1.1 * long


def test_batch_one_speedup_is_near_the_real_flashinfer_run(profile) -> None:
    # The real H200 run with FlashInfer (results/gpu/h200-...-flashinfer, coding c=1): plain
    # 212 tok/s (a 32k-vocab model of this shape), EAGLE-3 1.41x at 2.50 tokens per verify.
    # Chain K=3 at alpha 0.72 gives 2.46.
    base = predict_output_tok_s(profile, 1, 1000, speculative=False)
    spec = predict_output_tok_s(profile, 1, 1000, speculative=True, alpha=0.72)
    assert 190 < base < 240  # ~4.6-4.9 ms per token on an H200
    assert 1.3 < spec / base < 1.7


def test_crossover_table_shows_eagle3_ahead_low_and_baseline_ahead_at_250(profile) -> None:
    rows = crossover_table(profile, batches=(1, 16, 32, 48, 64, 96, 128, 192, 250))
    print("\nworkload  batch  baseline_tok_s  eagle3_tok_s  ratio")
    for r in rows:
        print(
            f"{r['workload']:8s} {r['batch']:6d} {r['baseline_tok_s']:14.0f} "
            f"{r['eagle3_tok_s']:13.0f} {r['ratio']:6.2f}"
        )
    by = {(r["workload"], r["batch"]): r["ratio"] for r in rows}
    for workload in ("coding", "agentic"):
        assert by[(workload, 1)] > 1.1
        assert by[(workload, 250)] < 0.95

    def crossover(workload: str) -> int:
        return min(b for (w, b), ratio in by.items() if w == workload and ratio < 1.0)

    # Decode only (no prefills): the real FlashInfer run's sweeps, prefills included, cross at
    # coding c* 18 and agentic 7 (its constructed pair accepts 2.5 tokens per verify on both).
    assert crossover("agentic") < crossover("coding")
    assert 8 <= crossover("agentic") <= 48
    assert 16 <= crossover("coding") <= 64


def test_kappa_moves_the_crossover(profile) -> None:
    ideal = dataclasses.replace(
        profile, overheads=dataclasses.replace(profile.overheads, verify_kappa=1.0)
    )
    slow = dataclasses.replace(
        profile, overheads=dataclasses.replace(profile.overheads, verify_kappa=3.2)
    )
    ratio = {
        k: predict_output_tok_s(p, 128, 4000, speculative=True, alpha=0.7)
        / predict_output_tok_s(p, 128, 4000, speculative=False)
        for k, p in (("ideal", ideal), ("slow", slow))
    }
    assert ratio["ideal"] > 1.0 > ratio["slow"]


def test_kv_capacity_is_smaller_with_a_draft(profile) -> None:
    kv = profile.target_attention.kv_bytes_per_token
    base = profile.memory.kv_capacity_tokens(kv, with_draft=False)
    spec = profile.memory.kv_capacity_tokens(
        kv + profile.draft_attention.kv_bytes_per_token, with_draft=True
    )
    assert 600_000 < spec < base < 900_000


def test_unknown_profile_names_the_choices() -> None:
    with pytest.raises(ProfileError, match=r"llama-3\.1-8b-1xh200"):
        load_profile("no-such-profile")


def test_profile_from_path_with_bad_keys(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    src = Path(load_profile().source_path).read_text()
    bad.write_text(src.replace("t_c0_ms = 0.6", "t_c0_ms = 0.6\nbogus_ms = 1"))
    with pytest.raises(ProfileError, match=r"bad keys in \[target_linear\]"):
        load_profile(str(bad))
    good = tmp_path / "good.toml"
    good.write_text(src)
    assert load_profile(str(good)).target_linear.t_mem_ms == pytest.approx(3.98)


def test_a_draft_hits_sequence_that_is_not_hexadecimal_is_refused(tmp_path: Path) -> None:
    src = Path(load_profile().source_path).read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(src.replace("[acceptance]\n", '[acceptance]\ndraft_hits_hex = "ff0g"\n'))
    with pytest.raises(ProfileError, match="draft_hits_hex is not hexadecimal; regenerate"):
        load_profile(str(bad))
    good = tmp_path / "good.toml"
    good.write_text(src.replace("[acceptance]\n", '[acceptance]\ndraft_hits_hex = "f0"\n'))
    assert load_profile(str(good)).workload.draft_hits == "11110000"


@pytest.mark.parametrize("key", ["prompt_tokens_per_piece", "round_max_requests"])
def test_a_negative_count_setting_is_refused(tmp_path: Path, key: str) -> None:
    import re

    src = Path(load_profile("llama-3.1-8b-1xh200-triton").source_path).read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(re.sub(rf"^{key} = .*$", f"{key} = -1", src, count=1, flags=re.M))
    with pytest.raises(ProfileError, match=f"{key} is -1; give 0"):
        load_profile(str(bad))


def test_every_bundled_profile_says_what_its_step_costs_rest_on() -> None:
    # Each report of a simulated run quotes this sentence (report/provenance.py): a user must
    # not take the default profile's crossover for a real server's (issue 37).
    from specbench.sim.profile import DEFAULT_PROFILE, bundled_profiles

    for name in bundled_profiles():
        truth = load_profile(name).ground_truth
        assert truth.endswith(".") and len(truth) > 60, (name, truth)
    assert "fitted to a real H200 run with FlashInfer" in load_profile(DEFAULT_PROFILE).ground_truth


def test_the_verify_walk_grows_in_where_the_kernel_stops_splitting_kv() -> None:
    """FlashInfer's verify kernel splits each request's KV over the SMs while the batch is small
    (verify_split_max_batch): no request's walk bounds it there; from there to twice that batch
    the walk grows in, and above it adds whole."""
    attention = AttentionModel(
        n_layers=32, kv_bytes_per_token=131072, bw_bytes_per_s=3e12, layer_fixed_ms=0.0,
        q_hidden=4096, prefill_flops_per_s=2e14, serial_ns_per_token_layer=0.5,
        verify_serial_ns_per_token_layer=100.0, verify_split_max_batch=16)
    walk_ms = 32 * 100.0 * 1500 / 1e6

    def verify(batch: int) -> float:
        read_ms = 1e3 * 3.0 * batch * 1500 * 131072 / 3e12
        return attention.decode_ms(
            batch * 1500, 3.0, context_tokens=1500, verify=True, batch=batch) - read_ms

    assert [verify(b) / walk_ms for b in (8, 16, 24, 32, 64)] == pytest.approx(
        [0.0, 0.0, 0.5, 1.0, 1.0])
    # A batch not given keeps the whole walk; the decode kernel keeps its own walk.
    read_ms = 1e3 * 16 * 1500 * 131072 / 3e12
    assert attention.decode_ms(16 * 1500, 3.0, context_tokens=1500, verify=True) == (
        pytest.approx(3.0 * read_ms + walk_ms))
    decode = attention.decode_ms(16 * 1500, context_tokens=1500, batch=16)
    assert decode == pytest.approx(read_ms + 32 * 0.5 * 1500 / 1e6)
