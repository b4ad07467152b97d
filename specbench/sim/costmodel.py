"""Step-time model of one GPU server, and the profiles (TOML) that parameterise it.

The simulated SGLang server needs to know how long each forward pass would take on real
hardware, so that its throughput curves (and the concurrency at which EAGLE-3 stops paying
off) follow from physics rather than from a number written into the simulator. The model is
the one in shared/reference/speculation-under-load.md §4.1:

* linear layers are a soft roofline in tokens per forward pass:
  ``T_lin(N) = (t_mem^p + (t_c0 + N/R)^p)^(1/p)``: flat while weight reads dominate, then
  ``1/R`` per token once compute-bound (the knee is near ``t_mem·R`` tokens);
* attention is memory-bound on the KV cache it reads: a fixed cost per layer plus
  ``κ · KV bytes / BW``; ``κ`` is 1 for a one-token decode and ``verify_kappa`` for an EAGLE
  verify of K+1 query tokens (kernels that re-read KV per query row pay more);
* a kernel that gives each request only a few thread blocks cannot fill the GPU at small batch:
  then one request's KV walk sets the time, ``n_layers · serial · L`` for a request of L tokens
  (``serial_ns_per_token_layer``, and ``verify_serial_ns_per_token_layer`` for the verify
  kernel): the whole attention time at small batch, the last wave's tail on top of the
  bandwidth term at large batch, so the two add. The walk is the mean request's, plus a share
  ``min(1, walk_tail_batch / B)`` of the longest request's excess: with few requests the step
  waits for the longest one, with many the others' blocks fill the GPU meanwhile.
  Triton's decode kernel splits KV into at most 8 blocks per request; its extend kernel, which
  SGLang's Triton backend uses for the verify, gives a request one block per query head and
  walks the whole context in it. Both terms are 0 (off) unless the profile sets them;
* a verify kernel that pads its query rows to a tile (``verify_pads_query_rows``, Triton's
  extend kernel: 64 or more rows for 1 to K+1) costs the same for any row count: SGLang's
  zero-step one-token verify and the draft extend over the verified tokens then pay the verify's
  ``κ`` and serial walk too, not a decode's, and so does a prefill's extend over its cached
  prefix (the same kernel);
* an EAGLE-3 step is verify (target, B·(K+1) tokens) + draft extend over the verified tokens +
  (K-1) one-token draft steps + K draft attentions + per-draft-step launch cost + a speculative
  overhead that grows with the batch; a zero-step step (dynamic mode above its threshold) is a
  one-token verify plus a draft extend, *not* a plain decode, as in SGLang 0.5.23;
* a mixture-of-experts target (profile section ``[target_moe]``, §4.2) reads the experts its
  tokens route to, ``E_act(N) = E·(1 − (1 − k/E)^N)`` per layer, plus a fixed per-forward cost
  (launches and collectives over the GPUs) that dominates at small batch.

Everything is a pure function of a :class:`Profile`, so tests can check it against the
measured table (§4.3) and the lead can print tok/s curves without starting a server.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

PROFILE_DIR = Path(__file__).with_name("profiles")
DEFAULT_PROFILE = "llama-3.1-8b-1xh200"


class ProfileError(ValueError):
    """A profile that cannot be found or read; the message names the file and the fix."""


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
    """Linear layers of a mixture-of-experts model sharded over several GPUs (§4.2).

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

    def decode_ms(
        self,
        kv_tokens: float,
        kappa: float = 1.0,
        *,
        context_tokens: float = 0.0,
        verify: bool = False,
    ) -> float:
        """One attention pass over `kv_tokens` KV entries in all, `context_tokens` per request.

        `verify` picks the verify kernel's serial walk; `kappa` scales the bandwidth term.
        """
        read_ms = 1e3 * kappa * kv_tokens * self.kv_bytes_per_token / self.bw_bytes_per_s
        serial_ns = (
            self.verify_serial_ns_per_token_layer if verify else self.serial_ns_per_token_layer
        )
        # One request's walk is the whole time at small batch and the last wave's tail at
        # large batch, so it adds to the bandwidth term.
        walk_ms = self.n_layers * serial_ns * context_tokens / 1e6
        return self.n_layers * self.layer_fixed_ms + read_ms + walk_ms

    def prefill_ms(self, n_new: int, n_prefix: int) -> float:
        # Causal attention over the chunk: QK^T and PV, 2 FLOPs per MAC each.
        flops = 4.0 * self.n_layers * self.q_hidden * n_new * (n_prefix + n_new / 2.0)
        flops_ms = 1e3 * flops / self.prefill_flops_per_s
        return self.n_layers * self.layer_fixed_ms + flops_ms


@dataclass(frozen=True)
class Overheads:
    """Per-forward costs outside the GEMMs and attention (launch, sampling, CPU sync)."""

    o_base_ms: float  # every forward (scheduler, sampling, graph replay)
    o_base_per_req_us: float  # batch assembly per running request
    o_spec_ms: float  # speculative bookkeeping per verify (tree metadata, CPU sync)
    o_spec_per_req_us: float  # acceptance / metadata per request per verify
    o_step_ms: float  # per draft step (launch + top-k sampling)
    verify_kappa: float  # attention cost multiplier of a K+1-token verify vs a 1-token decode
    # True: the verify kernel pads query rows to a tile, so the zero-step one-token verify and
    # the draft extend cost what a K+1-row verify costs (verify_kappa, verify serial walk), and
    # an extend (prefill) forward, the same kernel, pays that over its chunks' cached prefixes.
    verify_pads_query_rows: bool = False
    # Per extend (prefill) forward on top of o_base_ms: the scheduler's merge of the new requests
    # into the running batch and the prefill's launches outside the decode's CUDA graph.
    o_prefill_ms: float = 0.0
    # Per extend forward of a speculative server, per request already decoding: what EAGLE-3's
    # prefill forwards cost beyond the plain server's (SGLang 0.5.17 + Triton, one step at a
    # time: ~0.04 ms; benchmarks/gpu/fit_profile.py, step 3). 0 = none.
    o_spec_prefill_per_running_req_ms: float = 0.0
    # The per-request walk is the step's tail, so the batch's longest request sets it while its
    # blocks are most of the GPU's work; with more requests the others fill the GPU meanwhile.
    # The walk is over mean + (longest - mean) x min(1, walk_tail_batch / B) tokens. 0 = the
    # mean request's walk at every batch.
    walk_tail_batch: float = 0.0


@dataclass(frozen=True)
class Memory:
    """KV-cache capacity, which caps how many requests can run at once."""

    gpu_memory_bytes: float
    mem_fraction_static: float  # default for this GPU when --mem-fraction-static is not given
    target_weights_bytes: float
    draft_weights_bytes: float
    activation_reserve_bytes: float  # CUDA graphs, activations, workspace
    default_max_running_requests: int

    def kv_capacity_tokens(
        self,
        kv_bytes_per_token: float,
        *,
        with_draft: bool,
        mem_fraction_static: float | None = None,
    ) -> int:
        """Tokens the KV pool holds (SGLang's max_total_num_tokens)."""
        frac = self.mem_fraction_static if mem_fraction_static is None else mem_fraction_static
        pool = (
            self.gpu_memory_bytes * frac
            - self.target_weights_bytes
            - (self.draft_weights_bytes if with_draft else 0.0)
            - self.activation_reserve_bytes
        )
        return max(0, int(pool // kv_bytes_per_token))


@dataclass(frozen=True)
class AcceptanceRule:
    """A regex searched in the rendered prompt; the first match sets the mean acceptance."""

    pattern: str
    alpha: float
    name: str = ""
    output_tokens_mean: float | None = None  # overrides the workload mean when set


@dataclass(frozen=True)
class Workload:
    """How long outputs are and how well the draft head guesses them."""

    coding_output_tokens_mean: float
    agentic_output_tokens_mean: float
    output_tokens_sigma: float  # spread of log(length) around the mean
    default_alpha: float
    agentic_alpha: float
    alpha_jitter_sd: float
    alpha_min: float
    alpha_max: float
    rules: tuple[AcceptanceRule, ...] = ()
    # How the served model counts prompt tokens (workload.py): whether its chat template renders
    # the tool schemas and tool-call JSON (false: each message's text only), and characters per
    # token, or tokens per pre-tokenizer piece where that is set (> 0). The defaults are the
    # simulator's generic count (4 characters, tools rendered); a profile fitted to a real
    # server sets them from the prompt_tokens that server reported.
    prompt_chars_per_token: float = 4.0
    prompt_renders_tools: bool = True
    prompt_tokens_per_piece: float = 0.0
    # A draft whose hits do not depend on the prompt (benchmarks/gpu/constructed_draft_hits.py):
    # bit k (hex, most significant bit first) is 1 where its proposal for output token k+1 is
    # right, the same for every request. Empty: each request draws its own hits with alpha.
    draft_hits_hex: str = ""

    @property
    def draft_hits(self) -> str:
        """`draft_hits_hex` as one '0'/'1' character per output position."""
        return "".join(f"{int(ch, 16):04b}" for ch in self.draft_hits_hex)


@dataclass(frozen=True)
class Frontend:
    """The serial stage every generation request passes before the scheduler sees it.

    SGLang's HTTP server and tokenizer manager are one Python process: it parses each request,
    renders the chat template and tokenizes the prompt, one request at a time, while the
    scheduler runs the GPU. A request's service there is ``request_ms`` plus
    ``prompt_token_us`` per prompt token it tokenizes (none for a prompt given as token ids),
    in model time. 0 and 0 (the default) is no stage: requests reach the scheduler at once.
    ``holds_output``: the same process streams every response, so while it works through the
    requests that arrived together it writes no output (frontend.py); ``round_max_requests``
    (0: no limit) lets the output through after at most that many requests.
    """

    request_ms: float = 0.0
    prompt_token_us: float = 0.0
    holds_output: bool = False
    round_max_requests: int = 0

    @property
    def enabled(self) -> bool:
        return self.request_ms > 0.0 or self.prompt_token_us > 0.0

    def service_ms(self, prompt_tokens: int, *, tokenized: bool) -> float:
        per_token_ms = self.prompt_token_us / 1e3 if tokenized else 0.0
        return self.request_ms + per_token_ms * prompt_tokens


@dataclass(frozen=True)
class Scheduling:
    """How the scheduler picks the next forward (optional ``[scheduler]`` table).

    ``prefill_first``: run a prefill whenever one is admissible, as SGLang's
    ``get_next_batch_to_run`` does ("Run prefill first if possible"), so arrivals that come one
    at a time hold the running batch's decode back once each. False (the default) alternates a
    prefill and a decode step while requests wait.
    """

    prefill_first: bool = False


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    architecture: str
    context_length: int
    target_linear: LinearModel | MoeLinearModel
    target_attention: AttentionModel
    draft_linear: LinearModel
    draft_attention: AttentionModel
    overheads: Overheads
    memory: Memory
    workload: Workload
    source_path: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    vocab_size: int = 128256  # the target's vocabulary (bounds logit_bias keys); Llama-3's
    frontend: Frontend = Frontend()  # optional [frontend] table; off by default
    scheduling: Scheduling = Scheduling()  # optional [scheduler] table


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
) -> StepCost:
    """One decode forward for `batch` requests reading `kv_tokens` KV entries in total, the
    longest request `longest_context_tokens` of them (None: all alike).

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
        parts = {
            "target_linear": tl.time_ms(batch),
            "target_attention": ta.decode_ms(
                kv_tokens, kappa=extend_kappa, context_tokens=context, verify=padded
            ),
            "overhead": base_ms + spec_ms,
        }
        if not skip_zero_step_draft_extend:
            parts["draft_extend"] = dl.time_ms(batch) + da.decode_ms(
                kv_tokens, kappa=extend_kappa, context_tokens=context, verify=padded
            )
        return StepCost(sum(parts.values()), parts)
    verify_tokens = num_draft_tokens if num_draft_tokens else num_steps + 1
    if topk <= 1:
        verify_tokens = num_steps + 1
    draft_decode_ms = da.decode_ms(kv_tokens, context_tokens=context)
    parts = {
        "target_linear": tl.time_ms(batch * verify_tokens),
        "target_attention": ta.decode_ms(
            kv_tokens, kappa=o.verify_kappa, context_tokens=context, verify=True
        ),
        # The draft extend runs over the verified tokens, then K-1 one-token draft steps.
        "draft_linear": dl.time_ms(batch * verify_tokens)
        + (num_steps - 1) * dl.time_ms(batch * max(1, topk)),
        "draft_attention": (
            (num_steps - 1) * draft_decode_ms
            + da.decode_ms(kv_tokens, kappa=extend_kappa, context_tokens=context, verify=True)
            if padded
            else num_steps * draft_decode_ms
        ),
        "overhead": base_ms + spec_ms + num_steps * o.o_step_ms,
    }
    return StepCost(sum(parts.values()), parts)


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


def resolve_profile_path(name_or_path: str) -> Path:
    """A bundled profile name (``llama-3.1-8b-1xh200``) or a path to a TOML file."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or "/" in name_or_path:
        if candidate.is_file():
            return candidate
        raise ProfileError(
            f"sim profile file {name_or_path} does not exist; pass a bundled name "
            f"({', '.join(bundled_profiles())}) or an existing .toml path"
        )
    bundled = PROFILE_DIR / f"{name_or_path}.toml"
    if bundled.is_file():
        return bundled
    raise ProfileError(
        f"unknown sim profile {name_or_path!r}; choose one of {', '.join(bundled_profiles())} "
        "or pass a path to a .toml file"
    )


def bundled_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def _section(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise ProfileError(
            f"sim profile {path} has no [{key}] table; add it (see the bundled profiles)"
        )
    return value


def _optional_section(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    return _section(data, key, path) if key in data else {}


def _build(cls: type, raw: dict[str, Any], where: str, path: Path) -> Any:
    try:
        return cls(**raw)
    except TypeError as exc:
        raise ProfileError(
            f"sim profile {path}: bad keys in [{where}] ({exc}); fix the TOML"
        ) from None


def load_profile(name_or_path: str = DEFAULT_PROFILE) -> Profile:
    """Read a profile TOML (bundled name or path) into a :class:`Profile`."""
    path = resolve_profile_path(name_or_path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(
            f"sim profile {path} cannot be read ({exc}); fix the TOML syntax"
        ) from None
    workload_raw = dict(_section(data, "workload", path))
    acceptance = _section(data, "acceptance", path)
    rules = tuple(
        _build(AcceptanceRule, dict(r), "acceptance.rule", path) for r in acceptance.get("rule", [])
    )
    for rule in rules:
        try:
            re.compile(rule.pattern)
        except re.error as exc:
            raise ProfileError(
                f"sim profile {path}: acceptance rule pattern {rule.pattern!r} is not a valid "
                f"regex ({exc}); fix the pattern"
            ) from None
    workload_raw.update({k: v for k, v in acceptance.items() if k != "rule"})
    workload = _build(Workload, {**workload_raw, "rules": rules}, "workload/acceptance", path)
    hits = "".join(str(workload.draft_hits_hex).split())
    if any(ch not in "0123456789abcdefABCDEF" for ch in hits):
        raise ProfileError(
            f"sim profile {path}: [acceptance] draft_hits_hex is not hexadecimal; regenerate it "
            "with benchmarks/gpu/constructed_draft_hits.py"
        )
    workload = replace(workload, draft_hits_hex=hits)
    frontend = _build(Frontend, _optional_section(data, "frontend", path), "frontend", path)
    # Zero turns a count off; a negative one would count nothing (or serve no request).
    for where, key, value in (
        ("workload", "prompt_tokens_per_piece", workload.prompt_tokens_per_piece),
        ("frontend", "round_max_requests", frontend.round_max_requests),
    ):
        if value < 0:
            raise ProfileError(
                f"sim profile {path}: [{where}] {key} is {value}; give 0 (off) or more"
            )
    # A mixture-of-experts target gives [target_moe] instead of [target_linear].
    target_linear: LinearModel | MoeLinearModel
    if "target_moe" in data:
        target_linear = _build(
            MoeLinearModel, _section(data, "target_moe", path), "target_moe", path
        )
    else:
        target_linear = _build(
            LinearModel, _section(data, "target_linear", path), "target_linear", path
        )
    known = {
        "name",
        "description",
        "architecture",
        "context_length",
        "vocab_size",
        "target_linear",
        "target_moe",
        "target_attention",
        "draft_linear",
        "draft_attention",
        "overheads",
        "memory",
        "workload",
        "acceptance",
        "frontend",
        "scheduler",
    }
    return Profile(
        name=str(data.get("name", path.stem)),
        description=str(data.get("description", "")),
        architecture=str(data.get("architecture", "LlamaForCausalLM")),
        context_length=int(data.get("context_length", 131072)),
        vocab_size=int(data.get("vocab_size", 128256)),
        target_linear=target_linear,
        target_attention=_build(
            AttentionModel, _section(data, "target_attention", path), "target_attention", path
        ),
        draft_linear=_build(
            LinearModel, _section(data, "draft_linear", path), "draft_linear", path
        ),
        draft_attention=_build(
            AttentionModel, _section(data, "draft_attention", path), "draft_attention", path
        ),
        overheads=_build(Overheads, _section(data, "overheads", path), "overheads", path),
        memory=_build(Memory, _section(data, "memory", path), "memory", path),
        workload=workload,
        frontend=frontend,
        scheduling=_build(
            Scheduling, _optional_section(data, "scheduler", path), "scheduler", path
        ),
        source_path=str(path),
        extra={k: v for k, v in data.items() if k not in known},
    )


def crossover_table(
    profile: Profile,
    batches: tuple[int, ...] = (1, 16, 64, 128, 250),
    workloads: dict[str, tuple[float, float]] | None = None,
    num_steps: int = 3,
) -> list[dict[str, Any]]:
    """Baseline vs EAGLE-3 decode tok/s per batch size for (context tokens, alpha) workloads."""
    if workloads is None:
        w = profile.workload
        workloads = {"coding": (1500.0, w.default_alpha), "agentic": (8000.0, w.agentic_alpha)}
    rows: list[dict[str, Any]] = []
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
