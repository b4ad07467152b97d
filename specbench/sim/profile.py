"""Simulator profiles: the tables of one profile TOML, and how a profile is found, read and checked.

A profile (a bundled ``specbench/sim/profiles/<name>.toml`` or any TOML path) parameterises the
step-time model (:mod:`specbench.sim.costmodel`) for one model pair on one GPU server. Its tables:

* ``[target_linear]`` (or ``[target_moe]`` for a mixture-of-experts target),
  ``[target_attention]``, ``[draft_linear]``, ``[draft_attention]``: the layer models of
  :mod:`specbench.sim.layercost`;
* ``[overheads]`` (:class:`Overheads`): per-forward costs outside the GEMMs and attention;
* ``[memory]`` (:class:`Memory`): the KV-cache capacity;
* ``[workload]`` and ``[acceptance]`` (one :class:`Workload`, with ``[[acceptance.rule]]`` as
  :class:`AcceptanceRule`): output lengths, draft acceptance, how prompt tokens are counted;
* optional ``[frontend]`` (:class:`Frontend`, the tokenizer manager's serial stage) and
  ``[scheduler]`` (:class:`Scheduling`).

:func:`load_profile` turns a bundled name (``PROFILE_DIR``; ``DEFAULT_PROFILE`` when none is
given) or a path into a :class:`Profile`. It refuses, with a :class:`ProfileError` that names
the file and the fix: a name or path that is not there, TOML it cannot read, a missing required
table, a table with a key its class does not have or without one it needs, an acceptance-rule
pattern that is not a regex, a ``draft_hits_hex`` that is not hexadecimal, a negative count.
Top-level keys it does not know are kept in :attr:`Profile.extra`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from specbench.sim.layercost import AttentionModel, LinearModel, MoeLinearModel

PROFILE_DIR = Path(__file__).with_name("profiles")
DEFAULT_PROFILE = "llama-3.1-8b-1xh200"


class ProfileError(ValueError):
    """A profile that cannot be found or read; the message names the file and the fix."""


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
    # Zero-step's one-token verify against a decode of the same KV, where the kernel does not
    # pad (FlashInfer runs it as a one-row prefill: 1.21-1.34 decodes' read on an H100, 16-128
    # running). 1 = a decode's read.
    one_token_verify_kappa: float = 1.0
    # Per extend (prefill) forward on top of o_base_ms: the scheduler's merge of the new requests
    # into the running batch and the prefill's launches outside the decode's CUDA graph.
    o_prefill_ms: float = 0.0
    # Per extend forward of a speculative server, per request already decoding: what EAGLE-3's
    # prefill forwards cost beyond the plain server's (SGLang 0.5.17 + Triton, one step at a
    # time: ~0.04 ms; lab/gpu/fit_profile.py, step 3). 0 = none.
    o_spec_prefill_per_running_req_ms: float = 0.0
    # The per-request walk is the step's tail, so the batch's longest request sets it while its
    # blocks are most of the GPU's work; with more requests the others fill the GPU meanwhile.
    # The walk is over mean + (longest - mean) x min(1, walk_tail_batch / B) tokens. 0 = the
    # mean request's walk at every batch.
    walk_tail_batch: float = 0.0
    # What a running request's read of a prefix block that another running request also holds
    # costs, against a first read: 1 = every request's whole context at the attention's
    # bandwidth. Agentic requests share long prefixes; an H100's one-step lines put it at
    # 0.3-0.5 (lab/gpu/shared_prefix_reads.py). The walk is unchanged. No bundled
    # profile sets it: at 0.4 the FlashInfer profile's held-out agentic tok/s went from 15 to
    # 13 of 18 levels within 15% (lab/notes/benchmarks.md, "The mechanism from the logs").
    shared_read_fraction: float = 1.0


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
    # A draft whose hits do not depend on the prompt (lab/gpu/constructed_draft_hits.py):
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
    # What the step costs rest on, in one sentence for every report of a simulated run: fitted
    # to a real server (which, how close, on what data), or taken from published figures.
    ground_truth: str = ""
    extra: dict[str, object] = field(default_factory=dict, compare=False)  # TOML, kept as read
    vocab_size: int = 128256  # the target's vocabulary (bounds logit_bias keys); Llama-3's
    frontend: Frontend = Frontend()  # optional [frontend] table; off by default
    scheduling: Scheduling = Scheduling()  # optional [scheduler] table


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


def _section(data: Mapping[str, object], key: str, path: Path) -> dict[str, object]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise ProfileError(
            f"sim profile {path} has no [{key}] table; add it (see the bundled profiles)"
        )
    return value


def _optional_section(data: Mapping[str, object], key: str, path: Path) -> dict[str, object]:
    return _section(data, key, path) if key in data else {}


def _build(cls: type, raw: Mapping[str, object], where: str, path: Path) -> Any:
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
    # tomllib reads [[acceptance.rule]] as a list of tables.
    rule_tables = cast("list[dict[str, object]]", acceptance.get("rule", []))
    rules = tuple(_build(AcceptanceRule, dict(r), "acceptance.rule", path) for r in rule_tables)
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
            "with lab/gpu/constructed_draft_hits.py"
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
        "ground_truth",
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
        ground_truth=str(data.get("ground_truth", "")),
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

