"""A tree draft (topk > 1) in the simulator: SGLang 0.5.23's rules for its flags, the tree it
keeps, what a verify of it accepts and costs, and a running server that drafts one."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

from specbench.engines import diagnose
from specbench.sim.args import ServerSettings, StartupError, build_parser, resolve
from specbench.sim.costmodel import decode_step, load_profile, tree_verify_kappa
from specbench.sim.request import SimRequest
from specbench.sim.speculative_args import draft_tree_reach, tree_candidates
from specbench.sim.workload import TraitModel
from tests.sim.conftest import SimProc
from tests.sim.sglang_probe import require_sglang, run_probe
from tests.sim.test_server_adaptive import accept_lengths, write_cfg

EAGLE = ("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d")
TREE = ("--speculative-num-steps", "3", "--speculative-eagle-topk", "4",
        "--speculative-num-draft-tokens", "8")  # fmt: skip
CHAIN = ("--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
         "--speculative-num-draft-tokens", "4")  # fmt: skip
FAST = ("--sim-time-scale", "20", "--max-running-requests", "64")


def settings(*flags: str, profile: str | None = None) -> ServerSettings:
    ns = build_parser().parse_args(["--model-path", "m", *flags])
    return resolve(ns, load_profile(profile) if profile else load_profile(), env={})


# ------------------------------------------------------------------------------ the flags


def test_a_tree_resolves_as_given_and_on_flashinfer() -> None:
    s = settings(*EAGLE, *TREE)
    assert (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens) == (
        3, 4, 8)  # fmt: skip
    assert not s.speculative_adaptive
    # SGLang's Hopper default is FA3 for topk 1 only; a tree on an MHA target gets FlashInfer,
    # an MLA target keeps FA3 (reported for None), and a named backend is kept.
    assert s.attention_backend == "flashinfer"
    assert settings(*EAGLE, *CHAIN).attention_backend is None
    assert settings(*EAGLE, *TREE, profile="moe-8xh200").attention_backend is None
    assert settings(*EAGLE, *TREE, "--attention-backend", "fa3").attention_backend == "fa3"


def test_adaptive_with_a_tree_falls_back_to_static_in_sglangs_words(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, 32)
    s = settings(*EAGLE, *TREE, "--speculative-adaptive", "--speculative-adaptive-config", cfg)
    assert not s.speculative_adaptive and s.adaptive_slots == ()
    assert (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens) == (
        3, 4, 8)  # fmt: skip
    warnings = "\n".join(msg for level, msg in s.startup_log if level == "warning")
    # The reason SGLang 0.5.23 logs (tests/engines/test_contract_sglang.py reads it from SGLang).
    assert diagnose.adaptive_fallback_reason(warnings) == (
        "speculative_eagle_topk=4 (only topk=1 is supported)")


def test_more_draft_tokens_than_the_tree_proposes_fails_the_start() -> None:
    assert tree_candidates(3, 4) == 4 + 2 * 16
    settings(*EAGLE, "--speculative-num-steps", "2", "--speculative-eagle-topk", "2",
             "--speculative-num-draft-tokens", "7")  # 2 + 4 drafts: 6 fit  # fmt: skip
    with pytest.raises(StartupError) as err:
        settings(*EAGLE, "--speculative-num-steps", "2", "--speculative-eagle-topk", "2",
                 "--speculative-num-draft-tokens", "8")  # fmt: skip
    assert err.value.exit_code == 1
    assert err.value.lines[-1] == "RuntimeError: selected index k out of range"
    assert "--speculative-num-draft-tokens 7 or fewer" in err.value.lines[-2]


def test_backends_that_cannot_draft_a_tree_are_refused() -> None:
    with pytest.raises(StartupError) as err:
        settings(*EAGLE, *TREE, "--attention-backend", "trtllm_mha")
    assert err.value.exit_code == 1
    assert "trtllm_mha backend only supports topk = 1" in err.value.lines[-1]
    with pytest.raises(StartupError) as err:
        settings(*EAGLE, *TREE, "--page-size", "16", "--attention-backend", "flashmla")
    assert "page_size > 1 is only supported on" in err.value.lines[-1]
    settings(*EAGLE, *TREE, "--page-size", "16")  # FlashInfer, SGLang's choice, can
    settings(*EAGLE, *CHAIN, "--attention-backend", "trtllm_mha")  # a chain can there


# ----------------------------------------------------------------- what a verify reaches


def test_a_chain_reaches_depth_j_with_alpha_to_the_j() -> None:
    for alpha in (0.3, 0.7, 0.9):
        assert draft_tree_reach(alpha, 4, 1, 5) == pytest.approx([alpha**j for j in range(1, 5)])


def test_a_tree_reaches_further_than_the_chain_of_its_depth_within_its_budget() -> None:
    alpha = 0.7
    chain = draft_tree_reach(alpha, 3, 1, 4)
    tree = draft_tree_reach(alpha, 3, 4, 8)
    assert len(tree) == 3
    assert all(t > c for t, c in zip(tree, chain, strict=True))
    assert sum(tree) == pytest.approx(2.140, abs=0.001)  # 3.14 tokens per verify against 2.53
    # Only N - 1 drafts are verified: a tree as wide as the chain is the chain (alpha > 0.5),
    # more draft tokens reach further, and the depth never passes K.
    assert draft_tree_reach(alpha, 3, 4, 4) == pytest.approx(chain)
    assert sum(draft_tree_reach(alpha, 3, 4, 16)) > sum(tree)
    assert len(draft_tree_reach(alpha, 5, 4, 8)) == 5
    assert len(draft_tree_reach(0.5, 3, 4, 4)) == 2  # a bushy top: 3 drafts, two deep


def test_a_requests_draws_follow_the_tree_and_stay_within_it() -> None:
    traits = TraitModel(load_profile().workload, seed=0).traits("Implement a parser",
                                                                agentic=False)
    req = SimRequest("r", traits, max_new_tokens=10**6, topk=4, draft_tokens=8)
    draws = [req.draw_accepted(3) for _ in range(20000)]
    assert max(draws) == 3
    expected = sum(draft_tree_reach(traits.alpha, 3, 4, 8))
    assert statistics.fmean(draws) == pytest.approx(expected, abs=0.03)
    chain = SimRequest("c", traits, max_new_tokens=10**6)
    assert statistics.fmean(chain.draw_accepted(3) for _ in range(20000)) < expected - 0.3


@pytest.mark.contract
@pytest.mark.slow
def test_sglang_keeps_the_tree_the_simulator_verifies() -> None:
    """SGLang's own draft-tree code (select_top_k_tokens, organize_draft_results), fed a draft
    whose r-th choice is right with alpha (1 - alpha)^(r - 1), keeps nodes whose summed score
    per depth is what the simulator's verify reaches."""
    require_sglang()
    cases = [(0.7, 3, 4, 8), (0.7, 5, 4, 8), (0.5, 3, 2, 4), (0.8, 4, 3, 12), (0.6, 2, 8, 20)]
    real = run_probe(PROBE, cases)
    for case, got in zip(cases, real, strict=True):
        while got and got[-1] == 0.0:
            got.pop()
        assert draft_tree_reach(*case) == pytest.approx(got), case


PROBE = r"""
import os
os.environ["TORCHDYNAMO_DISABLE"] = "1"  # SGLang compiles a step of it; eager gives the same
import torch
from sglang.srt.speculative.eagle_utils import organize_draft_results
from sglang.srt.speculative.spec_utils import select_top_k_tokens

def reach(alpha, steps, topk, draft_tokens):
    p = torch.tensor([[alpha * (1 - alpha) ** r for r in range(topk)]], dtype=torch.float64)
    ids = torch.arange(topk).unsqueeze(0)
    topk_p, topk_index, hidden, scores = p, ids, torch.zeros(1, 1), None
    score_list, token_list, parents_list = [], [], []
    for i in range(steps):  # as EAGLEWorkerV2.draft_forward calls it
        _, hidden, scores, info = select_top_k_tokens(i, topk_p, topk_index, hidden, scores, topk)
        score_list.append(info[0]); token_list.append(info[1]); parents_list.append(info[2])
        topk_p, topk_index, hidden = p.repeat(topk, 1), ids.repeat(topk, 1), torch.zeros(topk, 1)
    _, kept, _ = organize_draft_results(score_list, token_list, parents_list, draft_tokens)
    flat = torch.cat(score_list, dim=1).flatten(1)[0]
    out = [0.0] * steps
    for j in kept[0].tolist():
        out[0 if j < topk else 1 + (j - topk) // (topk * topk)] += float(flat[j])
    return out

print(json.dumps([reach(*case) for case in JOB]))
"""


# ------------------------------------------------------------------------- what it costs


def test_a_tree_verify_costs_more_where_the_kernel_reads_kv_per_row() -> None:
    flashinfer = load_profile()
    o = flashinfer.overheads
    assert tree_verify_kappa(flashinfer, 3, 4) == o.verify_kappa  # the fitted chain
    per_row = (o.verify_kappa - o.one_token_verify_kappa) / 3
    assert tree_verify_kappa(flashinfer, 3, 8) == pytest.approx(o.verify_kappa + 4 * per_row)
    for batch in (1, 64, 250):
        chain = decode_step(flashinfer, batch, batch * 2000.0, speculative=True, num_steps=3)
        tree = decode_step(flashinfer, batch, batch * 2000.0, speculative=True, num_steps=3,
                           topk=4, num_draft_tokens=8)  # fmt: skip
        assert tree.parts["target_attention"] > chain.parts["target_attention"]
        assert tree.parts["target_linear"] >= chain.parts["target_linear"]
        assert tree.total_ms > chain.total_ms
    # Loaded, the wider verify costs more than the tree gains per verify (2.53 -> 3.14 tokens).
    assert tree.total_ms / chain.total_ms > 3.14 / 2.53
    # Triton's extend kernel pads any row count to its tile: the tree's attention is the chain's.
    triton = load_profile("llama-3.1-8b-1xh200-triton")
    chain = decode_step(triton, 64, 64 * 2000.0, speculative=True, num_steps=3)
    tree = decode_step(triton, 64, 64 * 2000.0, speculative=True, num_steps=3, topk=4,
                       num_draft_tokens=8)
    assert tree.parts["target_attention"] == pytest.approx(chain.parts["target_attention"])


# --------------------------------------------------------------------------- the server


def test_a_tree_server_reports_its_tree_and_accepts_more_per_verify(
    start_sim: Callable[..., SimProc],
) -> None:
    tree = start_sim(*FAST, *EAGLE, *TREE, "--enable-metrics")
    chain = start_sim(*FAST, *EAGLE, *CHAIN)
    info = tree.get_json("/server_info")
    assert (info["speculative_eagle_topk"], info["speculative_num_draft_tokens"]) == (4, 8)
    assert info["attention_backend"] == "flashinfer"
    tree_accept = statistics.fmean(accept_lengths(tree, 4))
    chain_accept = statistics.fmean(accept_lengths(chain, 4))
    assert tree_accept > chain_accept + 0.3
    assert tree_accept <= 4.0  # at most K drafts and the bonus token per verify
    status, body = tree.post("/generate", {"text": "Implement a queue", "sampling_params": {
        "max_new_tokens": 64, "ignore_eos": True}})
    assert status == 200
    meta = json.loads(body)["meta_info"]
    # SGLang counts N - 1 proposed drafts per verify, whatever the tree kept of them.
    assert meta["spec_num_proposed_drafts"] == 7 * meta["spec_verify_ct"]
    assert meta["spec_accept_rate"] <= 3 / 7
    # Its gauge and its decode log count the tree's N, as SGLang's do: the log's accept rate is
    # over the N - 1 drafts a verify checks, so it stays within [0, K / (N - 1)].
    status, metrics = tree.get("/metrics")
    assert status == 200
    gauge = next(line for line in metrics.splitlines()
                 if line.startswith("sglang:spec_num_draft_tokens"))
    assert float(gauge.rsplit(" ", 1)[1]) == 8.0
    rates = [float(m) for m in re.findall(r"accept rate: ([0-9.]+)", tree.log)]
    assert rates and all(0.0 <= r <= 3 / 7 + 0.01 for r in rates)
