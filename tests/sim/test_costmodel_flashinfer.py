"""The FlashInfer profile against the real H200 run it was fitted to (coding points only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.analysis.steps import read_log
from specbench.sim.costmodel import decode_step, load_profile
from tests import fit_steps as fit

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results/gpu/h200-sglang-0.5.17-llama8b-shape-q0.3-flashinfer"
PROFILE = ROOT / "specbench/sim/profiles/llama-3.1-8b-1xh200-flashinfer.toml"


def test_a_prompt_sets_lines_are_the_points_after_its_flushes() -> None:
    paths = sorted((RUN / "servers").glob("zero-step*.log.xz"), key=fit.launch_order)
    assert [p.name for p in paths] == ["zero-step.1.log.xz", "zero-step.log.xz"]
    logs = [read_log(p) for p in paths]
    coding = fit.lines_of_set(RUN, "zero-step", logs, "coding")
    agentic = fit.lines_of_set(RUN, "zero-step", logs, "agentic")
    flushes = [[line for line in lines if fit.FLUSH_LINE in line] for lines in logs]
    # The first launch: 10 recorded points (6 coding, 4 agentic) and an 11th flush that opened a
    # point the device session's end cut short; the resumed launch measured it again, then one
    # more (agentic c = 64 and 128).
    assert [len(found) for found in flushes] == [11, 2]
    assert [sum(fit.FLUSH_LINE in line for line in part) for part in coding] == [6, 0]
    assert [sum(fit.FLUSH_LINE in line for line in part) for part in agentic] == [4, 2]
    assert set(coding[0]).isdisjoint(agentic[0])
    with pytest.raises(SystemExit, match="3 cache flushes in 1 log"):
        fit.lines_of_set(RUN, "zero-step", [flushes[0][:3]], "coding")
    # Two surplus flushes and one earlier launch: the newest's last point is unfinished.
    extra = fit.lines_of_set(RUN, "zero-step", [logs[0], logs[1] + flushes[1][:1]], "agentic")
    assert [sum(fit.FLUSH_LINE in line for line in part) for part in extra] == [4, 2]


def test_the_profile_holds_its_fit_to_the_coding_points(capsys: pytest.CaptureFixture[str]) -> None:
    # The fit of the coding points alone (its frontend kept) gives the profile's values within
    # 5%, and the profile meets every group of 5 or more steady lines within 20%.
    logs, by_mode = fit.read_run_logs(RUN, "coding")
    found = fit.fit_run(RUN, load_profile("llama-3.1-8b-1xh200-flashinfer"), logs, by_mode,
                        prompt_set="coding")
    assert found is not None
    code = fit.check(PROFILE, found.params, found.values, found.groups, tolerance=0.2)
    assert code == 0, capsys.readouterr().out[-3000:]
    eagle3 = [g for g in found.groups if g.mode == "eagle3"]
    assert (len(eagle3), sum(g.n_lines for g in eagle3)) == (10, 64)


def test_the_k_plus_one_verify_pays_kappa_and_the_one_token_verify_a_one_row_prefills() -> None:
    """On FlashInfer EAGLE-3's verify reads KV ~4x per token (fitted as Triton, padded rows,
    EAGLE-3 at 32-128 running was 31-43% above the model: lab/notes/benchmarks.md); zero-step's
    one-token verify, a one-row prefill kernel, reads it as the H100's kernel profiles measured
    against the plain decode's at the same load."""
    profile = load_profile("llama-3.1-8b-1xh200-flashinfer")
    assert not profile.overheads.verify_pads_query_rows
    assert 3.0 < profile.overheads.verify_kappa < 6.0
    gpu = ROOT / "results" / "gpu"
    prof = "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-coding-prof"
    rows = {**json.loads((gpu / prof / "profile-steps.json").read_text())["rows"],
            **json.loads((gpu / f"{prof}-zero-step" / "profile-steps.json").read_text())["rows"]}
    measured = [rows[f"zero-step-c{c}"]["attn_prefill"] / rows[f"baseline-c{c}"]["attn_prefill"]
                for c in (16, 32, 64, 128)]
    assert min(measured) > 1.15 and max(measured) < 1.4
    for b in (16, 32, 64, 128):
        kv = b * 1400.0
        plain = decode_step(profile, b, kv, speculative=False).parts["target_attention"]
        zero = decode_step(profile, b, kv, speculative=True, num_steps=0).parts["target_attention"]
        full = decode_step(profile, b, kv, speculative=True, num_steps=3).parts["target_attention"]
        assert min(measured) - 0.03 < zero / plain < max(measured) + 0.03
        assert full > 2.5 * plain


def test_the_verify_walks_one_request_only_above_the_split_batch() -> None:
    """The H100 profile of the verify's kernel (lab/notes/gpu-runs.md): 2.9 decodes' attention at
    16 running, 4.3-4.8 at 32-64. The model: kappa decodes while the kernel splits KV, one
    request's walk growing in from 16 to 32 running on top."""
    profile = load_profile("llama-3.1-8b-1xh200-flashinfer")
    ratio = {}
    for b in (16, 24, 32, 64):
        kv = b * 1450.0
        plain = decode_step(profile, b, kv, speculative=False).parts["target_attention"]
        full = decode_step(profile, b, kv, speculative=True, num_steps=3)
        ratio[b] = full.parts["target_attention"] / plain
    assert ratio[16] < 4.0 < ratio[24] < ratio[32]
    assert ratio[32] > 6.0 and ratio[64] < ratio[32]
