"""Step-time model of one GPU server: what each forward pass costs, given a profile (TOML).

The simulated SGLang server needs to know how long each forward pass would take on real
hardware, so that its throughput curves (and the concurrency at which EAGLE-3 stops paying
off) follow from physics rather than from a number written into the simulator. The model:

* linear layers are a soft roofline in tokens per forward pass:
  ``T_lin(N) = (t_mem^p + (t_c0 + N/R)^p)^(1/p)``: flat while weight reads dominate, then
  ``1/R`` per token once compute-bound (the knee is near ``t_mem·R`` tokens);
* attention is memory-bound on the KV cache it reads: a fixed cost per layer plus
  ``κ · KV bytes / BW``; ``κ`` is 1 for a one-token decode and ``verify_kappa`` for an EAGLE
  verify of K+1 query tokens (kernels that re-read KV per query row pay more); a tree's verify
  of N rows pays, per row beyond K+1, the share the fit shows between one row and K+1
  (:func:`tree_verify_kappa`);
* a kernel that gives each request only a few thread blocks cannot fill the GPU at small batch:
  then one request's KV walk sets the time, ``n_layers · serial · L`` for a request of L tokens
  (``serial_ns_per_token_layer``, and ``verify_serial_ns_per_token_layer`` for the verify
  kernel): the whole attention time at small batch, the last wave's tail on top of the
  bandwidth term at large batch, so the two add. The walk is the mean request's, plus a share
  ``min(1, walk_tail_batch / B)`` of the longest request's excess: with few requests the step
  waits for the longest one, with many the others' blocks fill the GPU meanwhile.
  Triton's decode kernel splits KV into at most 8 blocks per request; its extend kernel, which
  SGLang's Triton backend uses for the verify, gives a request one block per query head and
  walks the whole context in it. FlashInfer's verify (its prefill kernel) splits each request's
  KV over the SMs while the batch is small (``verify_split_max_batch``: no walk), and the walk
  grows in from there to twice that batch, as the blocks beyond one wave of SMs do. Both
  terms are 0 (off) unless the profile sets them;
* a verify kernel that pads its query rows to a tile (``verify_pads_query_rows``, Triton's
  extend kernel: 64 or more rows for 1 to K+1) costs the same for any row count: SGLang's
  zero-step one-token verify and the draft extend over the verified tokens then pay the verify's
  ``κ`` and serial walk too, not a decode's, and so does a prefill's extend over its cached
  prefix (the same kernel); a kernel that does not pad reads KV for the one-token verify
  ``one_token_verify_kappa`` times a decode's (FlashInfer's one-row prefill: about 1.3);
* an EAGLE-3 step is verify (target, B·(K+1) tokens) + draft extend over the verified tokens +
  (K-1) one-token draft steps + K draft attentions + per-draft-step launch cost + a speculative
  overhead that grows with the batch; a zero-step step (dynamic mode above its threshold) is a
  one-token verify plus a draft extend, *not* a plain decode, as in SGLang 0.5.23;
* a mixture-of-experts target (profile section ``[target_moe]``) reads the experts its
  tokens route to, ``E_act(N) = E·(1 − (1 − k/E)^N)`` per layer, plus a fixed per-forward cost
  (launches and collectives over the GPUs) that dominates at small batch.

Everything is a pure function of a :class:`Profile`, so tests can check it against the
measured table and the lead can print tok/s curves without starting a server.

Where the parts are: the layer models (linear, MoE, attention) in :mod:`specbench.sim.layercost`;
a profile's tables and their loading from TOML in :mod:`specbench.sim.profile`; here, the sum
of them for one forward (:func:`decode_step`, :func:`prefill_step`, :func:`extend_attention_ms`),
the steady-state decode throughput (:func:`predict_output_tok_s`) and the baseline vs EAGLE-3
table that ``python -m specbench.sim.costmodel`` prints. The public names of the other two
modules are importable from here too (``from specbench.sim.costmodel import load_profile``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

from specbench.sim.layercost import AttentionModel, LinearModel, MoeLinearModel
from specbench.sim.profile import (
    DEFAULT_PROFILE,
    PROFILE_DIR,
    AcceptanceRule,
    Frontend,
    Memory,
    Overheads,
    Profile,
    ProfileError,
    Scheduling,
    Workload,
    bundled_profiles,
    load_profile,
    resolve_profile_path,
)

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILE_DIR",
    "AcceptanceRule",
    "AttentionModel",
    "Frontend",
    "LinearModel",
    "Memory",
    "MoeLinearModel",
    "Overheads",
    "Profile",
    "ProfileError",
    "Scheduling",
    "StepCost",
    "Workload",
    "bundled_profiles",
    "crossover_table",
    "decode_step",
    "expected_accept_length",
    "extend_attention_ms",
    "load_profile",
    "main",
    "predict_output_tok_s",
    "prefill_step",
    "resolve_profile_path",
    "tree_verify_kappa",
]


@dataclass(frozen=True)
class StepCost:
    """Model time of one forward pass, with the parts that make it up (all in ms)."""

    total_ms: float
    parts: dict[str, float]


def decode_step(
    profile: Profile,
    batch: int,
    kv_tokens: float,
    *,
    speculative: bool,
    num_steps: int = 0,
    topk: int = 1,
    num_draft_tokens: int | None = None,
    skip_zero_step_draft_extend: bool = False,
    longest_context_tokens: float | None = None,
    shared_read_tokens: float = 0.0,
) -> StepCost:
    """One decode forward for `batch` requests reading `kv_tokens` KV entries in total, the
    longest request `longest_context_tokens` of them (None: all alike), `shared_read_tokens`
    of them blocks another running request also reads (charged at the profile's
    ``shared_read_fraction`` of a first read).

    `speculative` False is the plain (baseline) server. For a speculative server `num_steps`
    is the step count routed for this batch: 0 is SGLang's trivial one-token verify plus a
    draft extend. Tree drafting (topk > 1) verifies `num_draft_tokens` per request and
    drafts `topk` tokens per request per step.
    """
    if batch <= 0:
        return StepCost(0.0, {})
    o = profile.overheads
    tl, ta = profile.target_linear, profile.target_attention
    dl, da = profile.draft_linear, profile.draft_attention
    base_ms = o.o_base_ms + batch * o.o_base_per_req_us / 1e3
    context = kv_tokens / batch  # the walk's length: the mean request, plus the tail's share
    if longest_context_tokens is not None and o.walk_tail_batch > 0:
        context += max(0.0, longest_context_tokens - context) * min(1.0, o.walk_tail_batch / batch)
    # The bandwidth's share: a shared block's later reads at a fraction of the first.
    kv_tokens -= (1.0 - o.shared_read_fraction) * min(shared_read_tokens, kv_tokens)
    if not speculative:
        parts = {
            "target_linear": tl.time_ms(batch),
            "target_attention": ta.decode_ms(kv_tokens, context_tokens=context),
            "overhead": base_ms,
        }
        return StepCost(sum(parts.values()), parts)
    spec_ms = o.o_spec_ms + batch * o.o_spec_per_req_us / 1e3
    # What a pass of the verify kernel costs when it does not depend on the row count.
    padded = o.verify_pads_query_rows
    extend_kappa = o.verify_kappa if padded else 1.0
    if num_steps <= 0:
        one_row_kappa = o.verify_kappa if padded else o.one_token_verify_kappa
        parts = {
            "target_linear": tl.time_ms(batch),
            "target_attention": ta.decode_ms(
                kv_tokens, kappa=one_row_kappa, context_tokens=context, verify=padded, batch=batch
            ),
            "overhead": base_ms + spec_ms,
        }
        if not skip_zero_step_draft_extend:
            parts["draft_extend"] = dl.time_ms(batch) + da.decode_ms(
                kv_tokens, kappa=extend_kappa, context_tokens=context, verify=padded, batch=batch
            )
        return StepCost(sum(parts.values()), parts)
    verify_tokens = num_draft_tokens if num_draft_tokens else num_steps + 1
    if topk <= 1:
        verify_tokens = num_steps + 1
    draft_decode_ms = da.decode_ms(kv_tokens, context_tokens=context)
    parts = {
        "target_linear": tl.time_ms(batch * verify_tokens),
        "target_attention": ta.decode_ms(
            kv_tokens,
            kappa=tree_verify_kappa(profile, num_steps, verify_tokens),
            context_tokens=context,
            verify=True,
            batch=batch,
        ),
        # The draft extend runs over the verified tokens, then K-1 one-token draft steps.
        "draft_linear": dl.time_ms(batch * verify_tokens)
        + (num_steps - 1) * dl.time_ms(batch * max(1, topk)),
        "draft_attention": (
            (num_steps - 1) * draft_decode_ms
            + da.decode_ms(
                kv_tokens, kappa=extend_kappa, context_tokens=context, verify=True, batch=batch
            )
            if padded
            else num_steps * draft_decode_ms
        ),
        "overhead": base_ms + spec_ms + num_steps * o.o_step_ms,
    }
    return StepCost(sum(parts.values()), parts)


def tree_verify_kappa(profile: Profile, num_steps: int, verify_tokens: int) -> float:
    """The verify's KV-read factor for `verify_tokens` query rows per request at K steps.

    ``verify_kappa`` is the fitted factor of a chain's K+1 rows (any K); a tree verifies other
    row counts at the same K. Where the kernel does not pad rows to a tile, each row beyond
    (or short of) the chain's adds (or saves) the share per row that the fit shows between the
    one-row verify (``one_token_verify_kappa``) and the K+1-row one; a padding kernel (Triton's
    extend, 64-row tiles) costs the same for any tree of up to a tile of rows.
    """
    o = profile.overheads
    chain_rows = num_steps + 1
    if o.verify_pads_query_rows or verify_tokens == chain_rows or num_steps <= 0:
        return o.verify_kappa
    per_row = (o.verify_kappa - o.one_token_verify_kappa) / num_steps
    return max(o.one_token_verify_kappa, o.verify_kappa + (verify_tokens - chain_rows) * per_row)


def extend_attention_ms(
    profile: Profile, attention: AttentionModel, chunks: list[tuple[int, int]]
) -> float:
    """An extend forward's attention over `chunks` of (new tokens, tokens already cached).

    Where the verify pads its query rows (Triton: the verify *is* the extend kernel) a chunk's
    cached prefix also costs what a verify over it costs, on top of the FLOPs: each KV token
    read once per query head (``verify_kappa``) and one request's walk (the mean prefix, as for
    the decode), the blocks of several requests running side by side.
    """
    ms = sum(attention.prefill_ms(n, prefix) for n, prefix in chunks)
    prefixes = [prefix for _, prefix in chunks if prefix > 0]
    if profile.overheads.verify_pads_query_rows and prefixes:
        ms += attention.decode_ms(
            sum(prefixes),
            profile.overheads.verify_kappa,
            context_tokens=sum(prefixes) / len(prefixes),
            verify=True,
        ) - attention.n_layers * attention.layer_fixed_ms
    return ms


def prefill_step(
    profile: Profile, chunks: list[tuple[int, int]], *, speculative: bool, running: int = 0
) -> StepCost:
    """One extend (prefill) forward over `chunks` of (new tokens, tokens already cached),
    with `running` requests decoding beside it (they wait for it)."""
    n_new = sum(n for n, _ in chunks)
    if n_new <= 0:
        return StepCost(0.0, {})
    ta, da = profile.target_attention, profile.draft_attention
    parts = {
        "target_linear": profile.target_linear.time_ms(n_new),
        "target_attention": extend_attention_ms(profile, ta, chunks),
        "overhead": profile.overheads.o_base_ms
        + len(chunks) * profile.overheads.o_base_per_req_us / 1e3
        + profile.overheads.o_prefill_ms,
    }
    if speculative:
        # EAGLE keeps the draft's KV in step: every prefill also runs the draft over the chunk.
        parts["draft_extend"] = profile.draft_linear.time_ms(n_new) + extend_attention_ms(
            profile, da, chunks
        )
        per_running_ms = profile.overheads.o_spec_prefill_per_running_req_ms
        if per_running_ms and running > 0:
            parts["spec_running"] = per_running_ms * running
    return StepCost(sum(parts.values()), parts)


def expected_accept_length(alpha: float, num_steps: int) -> float:
    """Mean tokens per verify for a chain of `num_steps` drafts, i.i.d. acceptance alpha."""
    if num_steps <= 0:
        return 1.0
    if alpha >= 1.0:
        return float(num_steps + 1)
    return (1.0 - alpha ** (num_steps + 1)) / (1.0 - alpha)


def predict_output_tok_s(
    profile: Profile,
    batch: int,
    context_tokens: float,
    *,
    speculative: bool,
    alpha: float = 0.7,
    num_steps: int = 3,
) -> float:
    """Steady-state decode throughput (tokens per model second), prefill ignored.

    `context_tokens` is the mean KV length per running request.
    """
    steps = num_steps if speculative else 0
    cost = decode_step(
        profile, batch, batch * context_tokens, speculative=speculative, num_steps=steps
    )
    tokens = batch * (expected_accept_length(alpha, steps) if speculative else 1.0)
    return 1e3 * tokens / cost.total_ms


class CrossoverRow(TypedDict):
    """One row of :func:`crossover_table`: decode tok/s (model time) at one batch size."""

    workload: str
    batch: int
    context_tokens: float
    alpha: float
    baseline_tok_s: float
    eagle3_tok_s: float
    ratio: float


def crossover_table(
    profile: Profile,
    batches: tuple[int, ...] = (1, 16, 64, 128, 250),
    workloads: dict[str, tuple[float, float]] | None = None,
    num_steps: int = 3,
) -> list[CrossoverRow]:
    """Baseline vs EAGLE-3 decode tok/s per batch size for (context tokens, alpha) workloads."""
    if workloads is None:
        w = profile.workload
        workloads = {"coding": (1500.0, w.default_alpha), "agentic": (8000.0, w.agentic_alpha)}
    rows: list[CrossoverRow] = []
    for label, (context, alpha) in workloads.items():
        for b in batches:
            base = predict_output_tok_s(profile, b, context, speculative=False)
            spec = predict_output_tok_s(
                profile, b, context, speculative=True, alpha=alpha, num_steps=num_steps
            )
            rows.append(
                {
                    "workload": label,
                    "batch": b,
                    "context_tokens": context,
                    "alpha": alpha,
                    "baseline_tok_s": base,
                    "eagle3_tok_s": spec,
                    "ratio": spec / base if base else math.nan,
                }
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    """``python -m specbench.sim.costmodel``: print baseline vs EAGLE-3 decode tok/s per batch."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m specbench.sim.costmodel", description=main.__doc__
    )
    parser.add_argument("--profile", default=DEFAULT_PROFILE)
    parser.add_argument(
        "--coding-context", type=float, default=1500.0, help="mean KV tokens per request"
    )
    parser.add_argument(
        "--agentic-context", type=float, default=8000.0, help="mean KV tokens per request"
    )
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batches", default="1,16,64,128,250")
    args = parser.parse_args(argv)
    profile = load_profile(args.profile)
    w = profile.workload
    rows = crossover_table(
        profile,
        batches=tuple(int(b) for b in args.batches.split(",")),
        workloads={
            "coding": (args.coding_context, w.default_alpha),
            "agentic": (args.agentic_context, w.agentic_alpha),
        },
        num_steps=args.steps,
    )
    print(f"profile {profile.name}: decode-only tok/s (model time), EAGLE-3 chain K={args.steps}")
    print(
        f"{'workload':8s} {'context':>7s} {'alpha':>5s} {'batch':>5s} "
        f"{'baseline':>9s} {'eagle3':>9s} {'ratio':>6s}"
    )
    for r in rows:
        print(
            f"{r['workload']:8s} {r['context_tokens']:7.0f} {r['alpha']:5.2f} {r['batch']:5d} "
            f"{r['baseline_tok_s']:9.0f} {r['eagle3_tok_s']:9.0f} {r['ratio']:6.2f}"
        )


if __name__ == "__main__":
    main()
