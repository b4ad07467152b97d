"""SGLang's torch-profiler traces, one per rank, as a decode step split into kinds of GPU time.

SGLang's ``/start_profile`` makes every tensor-parallel rank write its own Chrome trace,
``<profile id>-TP-<rank>[-DP-..][-PP-..][-EP-..].trace.json.gz``, of the forwards it ran while
profiling. Each rank is read on its own: the ranks meet at every all-reduce, so a rank that is
waiting for a slower one shows that wait as communication kernel time, and the step the server
runs at is the slowest rank's.

A rank's trace splits into, per decode step (milliseconds):

- ``draft``: every kernel of the draft model's forwards (its GEMMs and attention alike);
- ``verify_attention`` / ``decode_attention``: the target's attention kernels in a verify
  (speculative) or a plain decode forward;
- ``prefill``: every kernel of the prefill (extend) forwards that ran among the decode steps;
- ``gemm``, ``communication`` (all-reduce, all-gather: NCCL and custom all-reduce kernels),
  ``other`` (norms, activations, sampling, copies, the speculative bookkeeping);
- ``unknown``: kernels no rule names, listed by name beside the split;
- ``idle``: the wall time from the first kernel to the last with no kernel running: the GPU
  waiting for the host.

Which model and forward a kernel belongs to comes from the spans SGLang records around each
forward when the profile records CPU activity (``step[DRAFT ...]``, ``step[VERIFY ...]``,
``step[DECODE ...]``, ``step[EXTEND ...]`` and the coarse ``draft`` / ``verify`` stages), as
the trace's GPU-side ``gpu_user_annotation`` events. A trace without them (GPU activity only, or
an SGLang that names no forwards) is split by kernel name alone: its draft and prefill forwards
then count in the kinds of their kernels, and the number of steps is the number asked for.
Kernel kinds overlap where two streams run at once, so the kinds can sum to more than the busy
time; idle is always the wall less the union of the kernels' intervals.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specbench.errors import UserError
from specbench.results.store import write_json

SPLIT_FILE = "split.json"
SPLIT_VERSION = 1
PROFILES_DIR = "profiles"
# The kinds in the order they are shown; idle last.
KINDS: tuple[str, ...] = ("draft", "verify_attention", "decode_attention", "prefill", "gemm",
                          "communication", "other", "unknown", "idle")
UNKNOWN_SHOWN = 10  # unknown kernel names kept per rank, the longest first

# Kernel names by kind, first match wins. Communication first (NCCL and all-reduce kernels
# have GEMM-like tile names); attention before GEMMs, because FlashAttention-3 on Hopper and
# CUTLASS MLA / TRT-LLM FMHA on Blackwell are CUTLASS kernels too.
_COMMUNICATION = re.compile(
    r"nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|all2all|cross_device_reduce|"
    r"lamport|multimem|one_?shot|two_?shot|mscclpp|deep_?ep|nvshmem|moe_?a2a",
    re.I)
_ATTENTION = re.compile(
    r"attention|attn|fmha|flash_fwd|flash::|flashattn|flash_attn|batchprefill|batchdecode|"
    r"singleprefill|singledecode|mergestate|batchmla|\bmla_|_mla\b|mla_kernel|xqa|kernel_mha|"
    r"^_fwd_(?:grouped_)?kernel(?:_stage\d|_unified)?$|extend_attention|decode_attention|"
    r"paged_attention",
    re.I)
_GEMM = re.compile(
    r"gemm|gemv|nvjet|xmma|cublas|wgmma|tcgen05|matmul|\bbmm_|_bmm|cutlass3x_sm\d+|"
    r"s\d{4,6}gemm|splitkreduce|fused_moe_kernel|grouped_mm|\bmm_kernel",
    re.I)
_OTHER = re.compile(
    r"norm|rope|rotary|silu|gelu|swiglu|act_and_mul|activation|elementwise|vectorized|"
    r"unrolled|copy|memcpy|memset|fill|concat|cat_|index|gather|scatter|sampling|sample|"
    r"softmax|top_?k|argmax|sort|radix|cub::|at::native|reduce_kernel|embedding|"
    r"triton_(?:poi|red|per)_|kv_?cache|set_kv|store_kv|kv_indices|req_to_token|tree|eagle|"
    r"draft|verify|accept|assign|prepare|position|last_loc|seq_?lens|quant|penalt|logit|"
    r"moe_align|moe_sum|cumsum|arange|compute_|build_",
    re.I)
# Non-kernel GPU activity: copies and fills count as "other" GPU time.
_GPU_CATEGORIES = {"kernel": None, "gpu_memcpy": "other", "gpu_memset": "other"}

# SGLang's forward spans: the role of the kernels inside them.
_SPAN_ROLES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("draft", re.compile(r"^step\[DRAFT\b|^draft(?:_extend)?$")),
    ("prefill", re.compile(r"^step\[(?:EXTEND|MIXED|SPLIT_PREFILL)\b")),
    ("verify", re.compile(r"^step\[(?:TARGET_)?VERIFY\b|^verify$")),
    ("decode", re.compile(r"^step\[DECODE\b")),
)
_ROLE_ORDER = ("draft", "prefill", "verify", "decode")  # a kernel in two spans takes the first
_STEP_SPAN = re.compile(r"^step\[(?:(?:TARGET_)?VERIFY|DECODE)\b")
_COARSE_VERIFY = "verify"
_RANK = re.compile(r"-((?:TP|DP|PP|EP)-\d+(?:-(?:DP|PP|EP)-\d+)*)(?:-([A-Z_]+))?"
                   r"\.trace\.json(?:\.gz)?$")


class TraceError(UserError, ValueError):
    """A trace file that cannot be read; one line with the fix."""


def kernel_kind(name: str) -> str:
    """What a GPU kernel does, from its name: attention, gemm, communication, other or
    unknown."""
    for kind, pattern in (("communication", _COMMUNICATION), ("attention", _ATTENTION),
                          ("gemm", _GEMM), ("other", _OTHER)):
        if pattern.search(name):
            return kind
    return "unknown"


@dataclass(frozen=True)
class StepSplit:
    """One rank's profile as one decode step's time by kind (ms per step)."""

    steps: int  # decode steps the profile held
    steps_from: str  # "spans" (SGLang's forward spans counted) or "requested" (no spans)
    wall_ms: float  # first kernel start to last kernel end, per step
    kinds_ms: dict[str, float]  # KINDS, idle included
    kernels_per_step: float
    unknown_ms: dict[str, float] = field(default_factory=dict)  # by kernel name, per step

    @property
    def step_ms(self) -> float:
        """A decode step without the prefill forwards that ran among the profiled steps."""
        return self.wall_ms - self.kinds_ms.get("prefill", 0.0)

    @property
    def kernel_ms(self) -> float:
        """A decode step's GPU time: the step less host idle. The profiler's own CPU tracing
        slows the host, so the step's idle under it is not the server's; its kernels are."""
        return self.step_ms - self.kinds_ms.get("idle", 0.0)


@dataclass(frozen=True)
class PointProfile:
    """The profile taken at one point: each rank's split, or why there is none."""

    mode: str
    prompt_set: str
    concurrency: int
    speculative: bool
    steps_requested: int
    activities: tuple[str, ...]
    ranks: dict[str, StepSplit] = field(default_factory=dict)
    ranks_expected: int | None = None  # the server's TP x PP size, where it said
    running_requests: float | None = None  # the server's gauge when the profile was asked
    asked_in_window_s: float | None = None  # wall seconds into the window it was asked
    error: str | None = None

    @property
    def slowest_rank(self) -> str | None:
        """The rank whose step is longest: the step every rank runs at."""
        if not self.ranks:
            return None
        return max(sorted(self.ranks), key=lambda rank: self.ranks[rank].step_ms)

    @property
    def step(self) -> StepSplit | None:
        rank = self.slowest_rank
        return self.ranks[rank] if rank is not None else None

    @property
    def unknown_ms(self) -> dict[str, float]:
        """Unknown kernels over every rank, ms per step summed over ranks, longest first."""
        total: dict[str, float] = {}
        for split in self.ranks.values():
            for name, ms in split.unknown_ms.items():
                total[name] = total.get(name, 0.0) + ms
        return dict(sorted(total.items(), key=lambda kv: -kv[1]))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["split_version"] = SPLIT_VERSION
        out["slowest_rank"] = self.slowest_rank
        out["step_ms"] = {rank: split.step_ms for rank, split in self.ranks.items()}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PointProfile:
        ranks = {str(rank): StepSplit(**{k: v for k, v in split.items()
                                         if k in StepSplit.__dataclass_fields__})
                 for rank, split in (data.get("ranks") or {}).items()}
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["activities"] = tuple(fields.get("activities") or ())
        return cls(**{**fields, "ranks": ranks})


# -- reading a trace -----------------------------------------------------------------------------

def read_events(path: Path) -> list[dict[str, Any]]:
    """A Chrome trace's events (``{"traceEvents": [...]}`` or a bare list; gzip or not)."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt") as handle:
                data = json.load(handle)
        else:
            with path.open() as handle:
                data = json.load(handle)
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read the trace {path} ({exc}); a trace still being written "
                         "is cut short: read it once SGLang's log says the profile is saved"
                         ) from None
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict)]


def rank_traces(folder: Path) -> dict[str, Path]:
    """The rank label (``TP-0``, ``TP-1-PP-1``) of each trace SGLang wrote into `folder`; a
    merged trace (all ranks in one file) is left out, as each rank is read on its own."""
    out: dict[str, Path] = {}
    paths = sorted({*folder.glob("*.trace.json.gz"), *folder.glob("*.trace.json")})
    for path in paths:
        if path.name.startswith("merged-"):
            continue
        m = _RANK.search(path.name)
        if m is None:
            label = path.name.split(".trace.json")[0]
        else:
            label = m[1] + (f"-{m[2]}" if m[2] else "")
        out[label] = path
    return out


def _role_spans(events: Iterable[Mapping[str, Any]]) -> list[tuple[float, float, str]]:
    spans = []
    for e in events:
        if e.get("cat") != "gpu_user_annotation" or "dur" not in e:
            continue
        name = str(e.get("name", ""))
        for role, pattern in _SPAN_ROLES:
            if pattern.search(name):
                start = float(e["ts"])
                spans.append((start, start + float(e["dur"]), role))
                break
    return sorted(spans)


def _decode_steps(events: Sequence[Mapping[str, Any]]) -> int:
    """Decode steps SGLang named: its per-forward spans of the target's verify or decode, else
    its coarse verify stages (intervals that overlap count once)."""
    names = [(float(e["ts"]), float(e["ts"]) + float(e["dur"]), str(e.get("name", "")))
             for e in events if e.get("cat") == "gpu_user_annotation" and "dur" in e]
    for chosen in ([s for s in names if _STEP_SPAN.search(s[2])],
                   [s for s in names if s[2] == _COARSE_VERIFY]):
        if chosen:
            count, end = 0, float("-inf")
            for start, stop, _ in sorted(chosen):
                if start >= end:
                    count += 1
                end = max(end, stop)
            return count
    return 0


class _Roles:
    """Which forward's spans cover an instant: a lookup over the spans sorted by start."""

    def __init__(self, spans: list[tuple[float, float, str]]) -> None:
        self.spans = spans
        self.starts = [s[0] for s in spans]
        # the longest span ending before each index: no span left of it reaches past this
        self.reach: list[float] = []
        longest = 0.0
        for start, stop, _ in spans:
            longest = max(longest, stop - start)
            self.reach.append(longest)

    def at(self, ts: float) -> str | None:
        i = bisect.bisect_right(self.starts, ts)
        if i == 0:
            return None
        found: set[str] = set()
        j = i - 1
        while j >= 0 and self.spans[j][0] >= ts - self.reach[i - 1]:
            start, stop, role = self.spans[j]
            if start <= ts < stop:
                found.add(role)
            j -= 1
        return next((role for role in _ROLE_ORDER if role in found), None)


def split_events(events: Sequence[Mapping[str, Any]], *, speculative: bool,
                 steps_requested: int) -> StepSplit | None:
    """One rank's trace as a decode step's time by kind; None for a trace with no GPU work."""
    gpu = [(float(e["ts"]), float(e["dur"]), str(e.get("name", "")),
            _GPU_CATEGORIES[str(e["cat"])])
           for e in events if e.get("cat") in _GPU_CATEGORIES and "dur" in e and "ts" in e]
    if not gpu:
        return None
    gpu.sort()
    roles = _Roles(_role_spans(events))
    spanned = _decode_steps(events)
    steps = spanned or max(1, steps_requested)
    total_us = dict.fromkeys(KINDS, 0.0)
    unknown_us: dict[str, float] = {}
    busy_us, first_us, end_us = 0.0, gpu[0][0], gpu[0][0]
    for ts, dur, name, fixed in gpu:
        busy_us += max(0.0, ts + dur - max(ts, end_us))
        end_us = max(end_us, ts + dur)
        kind = _kind(fixed or kernel_kind(name), roles.at(ts), speculative)
        total_us[kind] += dur
        if kind == "unknown":
            unknown_us[name] = unknown_us.get(name, 0.0) + dur
    wall_us = end_us - first_us
    total_us["idle"] = wall_us - busy_us
    shown = sorted(unknown_us.items(), key=lambda kv: -kv[1])[:UNKNOWN_SHOWN]
    return StepSplit(
        steps=steps, steps_from="spans" if spanned else "requested",
        wall_ms=wall_us / steps / 1e3,
        kinds_ms={k: v / steps / 1e3 for k, v in total_us.items()},
        kernels_per_step=len(gpu) / steps,
        unknown_ms={name: us / steps / 1e3 for name, us in shown})


def _kind(kernel: str, role: str | None, speculative: bool) -> str:
    """A kernel's kind in the split: its forward where that is the draft or a prefill, else
    what the kernel does (attention by the forward it serves)."""
    if role in ("draft", "prefill"):
        return role
    if kernel == "attention":
        verify = role == "verify" or (role is None and speculative)
        return "verify_attention" if verify else "decode_attention"
    return kernel


def split_point(folder: Path, *, speculative: bool,
                steps_requested: int) -> dict[str, StepSplit]:
    """Every rank's split of the traces in `folder` ({} when there are none)."""
    out = {}
    for rank, path in rank_traces(folder).items():
        split = split_events(read_events(path), speculative=speculative,
                             steps_requested=steps_requested)
        if split is not None:
            out[rank] = split
    return out


# -- a run's profiles ----------------------------------------------------------------------------

def profile_dir(run_dir: Path, mode: str, prompt_set: str, concurrency: int) -> Path:
    """Where the profile of one level of one server goes: its traces and its split."""
    return run_dir / PROFILES_DIR / f"{mode}-{prompt_set}-c{concurrency}"


def write_profile(folder: Path, profile: PointProfile) -> Path:
    return write_json(folder / SPLIT_FILE, profile.to_json())


def read_profiles(run_dir: Path) -> list[PointProfile]:
    """Every profile a sweep with --profile-steps stored in `run_dir` ([] when none)."""
    out = []
    for path in sorted((run_dir / PROFILES_DIR).glob(f"*/{SPLIT_FILE}")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise TraceError(f"cannot read {path} ({exc}); remove it, or sweep the level again "
                             "with --profile-steps") from None
        out.append(PointProfile.from_json(data))
    return out
