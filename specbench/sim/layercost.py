"""Time models of the layers in one forward pass: linear layers (dense or MoE) and attention.

* :class:`LinearModel`: the linear layers (plus lm_head) of a dense model as a soft roofline in
  tokens per forward pass, flat while weight reads dominate, then ``1/R`` per token;
* :class:`MoeLinearModel`: the linear layers of a mixture-of-experts model sharded over several
  GPUs, reading the experts its tokens route to, plus a fixed cost per forward;
* :class:`AttentionModel`: attention reading the KV cache during a decode or verify (bandwidth,
  plus one request's serial walk where the kernel cannot fill the GPU), and its FLOPs during
  a prefill.

Each class is one table of a profile TOML (``[target_linear]`` or ``[target_moe]``,
``[draft_linear]``, ``[target_attention]``, ``[draft_attention]``), its fields the table's keys.
The model as a whole, and why each term is there: the docstring of
:mod:`specbench.sim.costmodel`, which adds these times up into one step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinearModel:
    """Soft roofline for the linear layers (plus lm_head) of one model."""

    t_mem_ms: float  # time to stream the weights once (flat part of the curve)
    compute_tok_per_s: float  # R: tokens per second once compute-bound
    t_c0_ms: float  # fixed offset of the compute branch
    p: float = 4.0  # sharpness of the corner

    def time_ms(self, n_tokens: float) -> float:
        compute_ms = self.t_c0_ms + 1e3 * n_tokens / self.compute_tok_per_s
        return float((self.t_mem_ms**self.p + compute_ms**self.p) ** (1.0 / self.p))

    @property
    def knee_tokens(self) -> float:
        return self.t_mem_ms * self.compute_tok_per_s / 1e3


@dataclass(frozen=True)
class MoeLinearModel:
    """Linear layers of a mixture-of-experts model sharded over several GPUs.

    A step over N tokens reads the non-expert weights plus every expert that at least one
    token routes to: with uniform routing over E experts, top-k per token, the distinct
    experts touched per MoE layer are ``E_act(N) = E·(1 − (1 − k/E)^N)``. So one decode token
    reads k experts per layer, a verify of B·(K+1) tokens pulls in many more, and the weight
    read saturates once N·k ≫ E. Compute is a roofline over the *active* parameters, and a
    fixed cost per forward (kernel launches, tensor-parallel all-reduces or expert-parallel
    all-to-alls over the GPUs, sampling) sits on top: at small batch it dominates.
    """

    n_experts: int
    experts_per_token: int
    n_moe_layers: int
    expert_bytes: float  # one routed expert (gate, up, down) as stored (e.g. FP8)
    nonexpert_bytes: float  # attention, dense layers, shared experts, embeddings, lm_head
    bw_bytes_per_s: float  # weight-read bandwidth summed over the GPUs
    compute_tok_per_s: float  # R: tokens per second once compute-bound (all GPUs)
    t_fixed_ms: float  # per forward, independent of N
    p: float = 4.0

    def experts_touched(self, n_tokens: float) -> float:
        """Distinct experts per MoE layer for `n_tokens` tokens (uniform routing)."""
        e, k = self.n_experts, self.experts_per_token
        return float(e * (1.0 - (1.0 - k / e) ** max(n_tokens, 0.0)))

    def weight_bytes(self, n_tokens: float) -> float:
        touched = self.experts_touched(n_tokens)
        return self.nonexpert_bytes + self.n_moe_layers * touched * self.expert_bytes

    def time_ms(self, n_tokens: float) -> float:
        mem_ms = 1e3 * self.weight_bytes(n_tokens) / self.bw_bytes_per_s
        compute_ms = 1e3 * n_tokens / self.compute_tok_per_s
        return self.t_fixed_ms + float((mem_ms**self.p + compute_ms**self.p) ** (1.0 / self.p))


@dataclass(frozen=True)
class AttentionModel:
    """Attention cost: KV reads during decode, FLOPs during prefill."""

    n_layers: int
    kv_bytes_per_token: float
    bw_bytes_per_s: float
    layer_fixed_ms: float  # kernel launch + small-batch floor, per layer per forward
    q_hidden: int  # query heads x head dim (for prefill FLOPs)
    prefill_flops_per_s: float
    # Per-request KV walk when the kernel's blocks do not fill the GPU (0 = never the bound):
    # ns per KV token of one request, per layer; for the decode kernel and the verify kernel.
    serial_ns_per_token_layer: float = 0.0
    verify_serial_ns_per_token_layer: float = 0.0
    # The verify kernel splits each request's KV over the SMs while the batch holds at most this
    # many requests, so no request's walk bounds it then (0: it never does, the walk always
    # adds). FlashInfer's: 16, where 8 KV heads a request give 128 blocks for 132 SMs
    # (lab/notes/gpu-runs.md: its attention kernel costs 2.9 decodes at 16, 4.3-4.8 from 32).
    verify_split_max_batch: int = 0

    def decode_ms(
        self,
        kv_tokens: float,
        kappa: float = 1.0,
        *,
        context_tokens: float = 0.0,
        verify: bool = False,
        batch: int = 0,
    ) -> float:
        """One attention pass over `kv_tokens` KV entries in all, `context_tokens` per request,
        for `batch` requests (0: unknown, as if too many to split).

        `verify` picks the verify kernel's serial walk; `kappa` scales the bandwidth term.
        """
        read_ms = 1e3 * kappa * kv_tokens * self.kv_bytes_per_token / self.bw_bytes_per_s
        serial_ns = (
            self.verify_serial_ns_per_token_layer * self.verify_walk_share(batch)
            if verify
            else self.serial_ns_per_token_layer
        )
        # One request's walk is the whole time at small batch and the last wave's tail at
        # large batch, so it adds to the bandwidth term.
        walk_ms = self.n_layers * serial_ns * context_tokens / 1e6
        return self.n_layers * self.layer_fixed_ms + read_ms + walk_ms

    def verify_walk_share(self, batch: int) -> float:
        """How much of a request's walk bounds the verify kernel at `batch` requests: none while
        it splits KV over the SMs, then more as the blocks beyond one wave of SMs grow, all of it
        from twice the split batch on (a batch not given: all)."""
        split = self.verify_split_max_batch
        if split <= 0 or batch <= 0:
            return 1.0
        return min(1.0, max(0.0, (batch - split) / split))

    def prefill_ms(self, n_new: int, n_prefix: int) -> float:
        # Causal attention over the chunk: QK^T and PV, 2 FLOPs per MAC each.
        flops = 4.0 * self.n_layers * self.q_hidden * n_new * (n_prefix + n_new / 2.0)
        flops_ms = 1e3 * flops / self.prefill_flops_per_s
        return self.n_layers * self.layer_fixed_ms + flops_ms

