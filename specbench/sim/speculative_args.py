"""The speculative half of the simulated server's command line: SGLang's resolution of the
EAGLE flags, in its order (the adaptive block, the 48-request cap, the auto choice, the chain's
draft tokens, a tree's limits), and what each modelled SGLang release changes
(--sim-sglang-version); and the draft tree SGLang builds from (steps, topk, draft tokens),
which sets how far a verify gets (:func:`draft_tree_reach`).

:mod:`specbench.sim.args` parses the whole command line and calls :func:`resolve_speculative`;
problems raise :class:`StartupError` with the exit code and the lines SGLang would print.
"""

from __future__ import annotations

import argparse
import functools
import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from specbench.sim.adaptive import (
    DEFAULT_ADAPTIVE_CONFIG,
    DEFAULT_ADAPTIVE_CONFIG_0_5_17,
    AdaptiveSlot,
    SlotConfig,
    load_adaptive_config,
)
from specbench.sim.costmodel import Profile


@dataclass(frozen=True)
class SimRelease:
    """What --sim-sglang-version changes: the differences the first real server (0.5.17) showed
    against 0.5.23, read from those releases' wheels (not from specbench.engines)."""

    version: str
    has_ready: bool  # GET /ready exists (0.5.20 on); before it, only /health
    stream_spec_counts: bool  # return_spec_tokens_details honoured in OpenAI streams (0.5.19 on)
    default_adaptive_config: Mapping[str, AdaptiveSlot]


SIM_RELEASES: dict[str, SimRelease] = {
    "0.5.23": SimRelease("0.5.23", True, True, DEFAULT_ADAPTIVE_CONFIG),
    "0.5.17": SimRelease("0.5.17", False, False, DEFAULT_ADAPTIVE_CONFIG_0_5_17),
}
EAGLE_FAMILY = ("EAGLE", "EAGLE3")
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
# What the EAGLE family caps --max-running-requests at when the user did not choose.
SPEC_MAX_RUNNING = 48


class StartupError(Exception):
    """The server cannot start; `lines` are printed to stderr, then the process exits."""

    def __init__(self, exit_code: int, *lines: str) -> None:
        super().__init__(lines[-1] if lines else "startup error")
        self.exit_code = exit_code
        self.lines = lines


@dataclass(frozen=True)
class SpeculativeParams:
    """The speculative arguments after SGLang's resolution (all None when it is off)."""

    algorithm: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    adaptive: bool = False
    adaptive_slots: tuple[SlotConfig, ...] = ()


def resolve_speculative(
    ns: argparse.Namespace, profile: Profile, log: list[tuple[str, str]]
) -> tuple[SpeculativeParams, int | None]:
    """SGLang's four steps, in its order; returns the parameters and max running requests.

    Warnings and notes go to `log` in the order SGLang prints them.
    """
    algo = _algorithm(ns.speculative_algorithm)
    max_running: int | None = ns.max_running_requests
    if algo is None:
        if ns.speculative_adaptive:
            log.append(
                (
                    "warning",
                    "speculative_adaptive disabled: speculative decoding is off. "
                    "Falling back to static speculative params.",
                )
            )
        return SpeculativeParams(), max_running
    if not ns.speculative_draft_model_path:
        raise StartupError(
            1,
            f"ValueError: --speculative-draft-model-path is required for "
            f"--speculative-algorithm {algo}",
        )
    steps: int | None = ns.speculative_num_steps
    topk: int | None = ns.speculative_eagle_topk
    draft_tokens: int | None = ns.speculative_num_draft_tokens
    # 1. The adaptive block runs before the per-algorithm handler.
    slots = _adaptive_slots(ns, topk, log)
    if slots is not None:
        topk = 1
        steps = _adaptive_initial_steps(steps, slots)
        draft_tokens = steps + 1
    # 2. The EAGLE family caps the batch when the user did not choose.
    if max_running is None:
        max_running = SPEC_MAX_RUNNING
        log.append(
            (
                "info",
                f"Max running requests is reset to {SPEC_MAX_RUNNING} for speculative decoding. "
                "You can override this by explicitly setting --max-running-requests.",
            )
        )
    if slots is not None and steps is not None:
        _check_logits_buffer(ns, steps, slots, max_running, profile)
    # 3. Auto choice when nothing is given (only static gets here: adaptive has chosen).
    if steps is None:
        steps, topk, draft_tokens = _auto_choice(profile, topk, draft_tokens, log)
    if topk is None:
        topk = 1
    if topk > 1:
        _check_tree_backend(ns)
    # 4. A chain (topk 1) verifies exactly steps + 1 tokens.
    draft_tokens = _chain_draft_tokens(steps, topk, draft_tokens, log)
    if topk > 1:
        _check_tree_size(steps, topk, draft_tokens)
    params = SpeculativeParams(
        algo, steps, topk, draft_tokens, slots is not None, slots if slots is not None else ()
    )
    return params, max_running


def _algorithm(name: str | None) -> str | None:
    """--speculative-algorithm, upper-cased, NEXTN as EAGLE; only the EAGLE family is modelled."""
    algo = name.upper() if name else None
    if algo == "NEXTN":
        algo = "EAGLE"
    if algo is None or algo in EAGLE_FAMILY:
        return algo
    if algo in SPEC_ALGORITHMS:
        raise StartupError(
            2,
            f"specbench.sim: --speculative-algorithm {algo} is not modelled; "
            "use EAGLE or EAGLE3 (or a real SGLang server)",
        )
    raise StartupError(
        2,
        "error: argument --speculative-algorithm: invalid choice: "
        f"{name!r} (choose from {', '.join(SPEC_ALGORITHMS)})",
    )


def _adaptive_slots(
    ns: argparse.Namespace, topk: int | None, log: list[tuple[str, str]]
) -> tuple[SlotConfig, ...] | None:
    """The adaptive config's slots, or None when adaptive is off or SGLang refuses it."""
    if not ns.speculative_adaptive:
        return None
    if topk is not None and topk != 1:
        # SGLang 0.5.23 drafts a chain only in adaptive mode: a tree falls back to static
        # drafting with this warning (adaptive_spec_params.adaptive_unsupported_reason).
        log.append(
            (
                "warning",
                f"speculative_adaptive disabled: speculative_eagle_topk={topk} "
                "(only topk=1 is supported). Falling back to static speculative params.",
            )
        )
        return None
    try:
        release = SIM_RELEASES[ns.sim_sglang_version]
        return load_adaptive_config(ns.speculative_adaptive_config,
                                    release.default_adaptive_config)
    except (ValueError, FileNotFoundError) as exc:
        raise StartupError(1, f"{type(exc).__name__}: {exc}") from None


def _adaptive_initial_steps(steps: int | None, slots: tuple[SlotConfig, ...]) -> int:
    """--speculative-num-steps must be a candidate; unset, the middle candidate is used."""
    union = sorted({s for slot in slots for s in slot.candidate_steps})
    if steps is None:
        return union[len(union) // 2]
    if steps not in union:
        raise StartupError(
            1,
            f"ValueError: --speculative-num-steps={steps} is not in the adaptive config "
            f"candidate_steps {union}",
        )
    return steps


def _check_logits_buffer(
    ns: argparse.Namespace,
    steps: int,
    slots: tuple[SlotConfig, ...],
    max_running: int,
    profile: Profile,
) -> None:
    """SGLang 0.5.17 sizes the CUDA graphs' shared logits buffer by the launch's K + 1 rows per
    request, then builds a graph for every adaptive candidate: a candidate above the launch's K
    fails the start-up (seen on an H100 with bare --speculative-adaptive: candidates up to 7,
    K 3). 0.5.23 counts the candidates (ModelRunner.max_decode_logits_rows)."""
    largest = max(s for slot in slots for s in slot.candidate_steps)
    if ns.sim_sglang_version != "0.5.17" or largest <= steps or ns.disable_cuda_graph:
        return
    graph_bs = max(ns.cuda_graph_bs_decode) if ns.cuda_graph_bs_decode else max_running
    raise StartupError(
        1,
        "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "sglang/srt/model_executor/graph_shared_output.py", line 56, in '
        "get_logits_buffer  [simulated by specbench.sim: SGLang 0.5.17 sizes this buffer by "
        "--speculative-num-steps; launch at the largest adaptive candidate]",
        f"AssertionError: shared logits buffer holds {graph_bs * (steps + 1)} rows but caller "
        f"needs {graph_bs * (largest + 1)} (vocab_size={profile.vocab_size})",
    )


def _auto_choice(
    profile: Profile, topk: int | None, draft_tokens: int | None, log: list[tuple[str, str]]
) -> tuple[int, int, int]:
    """SGLang's automatic (steps, topk, draft tokens); it asserts nothing else was given."""
    if topk is not None or draft_tokens is not None:
        raise StartupError(
            1,
            "Traceback (most recent call last):",
            '  File "sglang/srt/arg_groups/speculative_hook.py", line 1160, in '
            "_handle_eagle_family  [simulated by specbench.sim: pass "
            "--speculative-num-steps together with --speculative-eagle-topk and "
            "--speculative-num-draft-tokens]",
            "AssertionError",
        )
    # SGLang picks (5, 4, 8) for Llama and Grok targets, (3, 1, 4) for everything else.
    if profile.architecture in ("LlamaForCausalLM", "Grok1ForCausalLM"):
        steps, topk, draft_tokens = 5, 4, 8
    else:
        steps, topk, draft_tokens = 3, 1, 4
    log.append(
        (
            "info",
            f"Auto-chosen speculative params: num_steps={steps}, eagle_topk={topk}, "
            f"num_draft_tokens={draft_tokens}",
        )
    )
    return steps, topk, draft_tokens


def _chain_draft_tokens(
    steps: int, topk: int, draft_tokens: int | None, log: list[tuple[str, str]]
) -> int:
    """Draft tokens per verify: steps + 1 when unset, and always for a chain (topk 1)."""
    if topk == 1 and draft_tokens is not None and draft_tokens != steps + 1:
        log.append(
            (
                "warning",
                f"speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 = "
                f"{steps + 1} because speculative_eagle_topk == 1 (was {draft_tokens}).",
            )
        )
        return steps + 1
    return steps + 1 if draft_tokens is None else draft_tokens


# Attention backends that draft a tree over pages of more than one token (SGLang 0.5.23's
# speculative_hook: the others cannot express a page per branch).
PAGE_TREE_BACKENDS = ("flashinfer", "fa3", "triton")


def _check_tree_backend(ns: argparse.Namespace) -> None:
    """SGLang's refusals of a tree (topk > 1) by attention backend, with its words (exit 1)."""
    backend = ns.attention_backend
    if backend == "trtllm_mha":
        raise StartupError(
            1, "ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding."
        )
    try:
        page_size = int(ns.page_size) if ns.page_size is not None else 1
    except ValueError:
        page_size = 1  # not a number: the simulator takes --page-size without reading it
    # Unset, a Hopper target with MHA resolves a tree to FlashInfer, which can.
    if page_size > 1 and backend is not None and backend not in PAGE_TREE_BACKENDS:
        raise StartupError(
            1,
            f"ValueError: speculative_eagle_topk > 1 with page_size > 1 is only supported on "
            f"{PAGE_TREE_BACKENDS}; got attention_backend={backend!r}. Use page_size == 1 or "
            "one of those backends.",
        )


def tree_candidates(steps: int, topk: int) -> int:
    """Drafts SGLang proposes per request before it keeps the best draft tokens - 1: topk from
    the first step, then topk children of each of the topk branches it keeps, per step."""
    return topk + (steps - 1) * topk * topk


def _check_tree_size(steps: int, topk: int, draft_tokens: int) -> None:
    """SGLang keeps the draft tokens - 1 best of its candidates with a top-k over them; asking
    for more than there are fails in the draft's CUDA-graph capture (without graphs, in the
    warmup's first decode), so the server never comes up."""
    candidates = tree_candidates(steps, topk)
    if draft_tokens - 1 <= candidates:
        return
    raise StartupError(
        1,
        "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "sglang/srt/speculative/eagle_utils.py", line 110, in organize_draft_results  '
        f"[simulated by specbench.sim: {steps} steps of topk {topk} propose {candidates} drafts; "
        f"pass --speculative-num-draft-tokens {candidates + 1} or fewer]",
        "RuntimeError: selected index k out of range",
    )


@functools.lru_cache(maxsize=4096)
def draft_tree_reach(alpha: float, steps: int, topk: int, draft_tokens: int) -> tuple[float, ...]:
    """P(a verify accepts at least j drafts), j = 1, 2, ..., for the tree SGLang drafts.

    The draft ranks its candidates for a position; the target's token is its r-th choice with
    probability alpha (1 - alpha)^(r - 1) (alpha: a chain's per-token acceptance; a calibrated
    draft, so a node's score is the chance that its path is the target's). SGLang keeps all
    topk first-step drafts, extends the topk best paths of each step by topk, and verifies the
    draft tokens - 1 best-scoring of all of them. The target's path is one path, so the chance
    that a verify reaches depth j is the summed score of the kept nodes at depth j (a child never
    outscores its parent, so the kept nodes form a tree). A chain gets alpha^j.
    """
    rank = [alpha * (1.0 - alpha) ** r for r in range(topk)]
    beam = [(p, 1) for p in rank]  # (score, depth) of the paths extended next
    candidates = list(beam)
    for depth in range(2, steps + 1):
        children = [(score * p, depth) for score, _ in beam for p in rank]
        beam = heapq.nlargest(topk, children, key=lambda node: node[0])
        candidates += children
    kept = heapq.nlargest(draft_tokens - 1, candidates, key=lambda node: node[0])
    reach = [0.0] * steps
    for score, depth in kept:
        reach[depth - 1] += score
    while reach and reach[-1] <= 0.0:
        reach.pop()
    return tuple(min(1.0, p) for p in reach)
