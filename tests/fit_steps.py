"""The simulator's step-time model fitted to the step times a real SGLang server logged.

The tests that hold a bundled profile (specbench/sim/profiles) to the committed real runs it
was fitted to read those runs here, and the lab's fit script (lab/gpu/fit_profile.py,
which writes a profile's fitted values and prints the tables) fits with it. SGLang's log lines
themselves are the package's (:mod:`specbench.analysis.steps`).

A steady ``Decode batch`` line (the line before it a decode line of the same batch, nothing
queued) is one step's time over the interval, ``B * A / X``. Its context is its requests'
contexts summed at the middle of the interval (RunningContexts: each ``Prefill batch`` line's
new + cached tokens per sequence, plus the interval's output per decode line, the newest B
kept), not the pool's ``#token``, which counts a prefix shared by several requests once.

Steady steps are grouped by (mode, batch, context bucket) and the cost model is fitted to the
groups' median step times on log time, each group weighted by its line count: the plain decode
first (``baseline``), then the speculative step (``eagle3``, ``zero-step``) with the plain
numbers fixed, then the prefill's cost at load (from runs logged every step where given, else
the 40-step intervals) and the prompt-token count from the run's request rows.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.analysis.steps import DECODE_LINE, FLUSH_LINE, decode_log_interval, read_log
from specbench.prompts import load_prompt_set
from specbench.results import RunDirError, read_manifest
from specbench.sim.costmodel import Profile, decode_step, load_profile, prefill_step
from specbench.sim.workload import pre_tokenizer_pieces, render_chat, render_message_text

PREFILL_LINE_RE = re.compile(
    r"^\[[^\]]+\] Prefill batch, #new-seq: (?P<seqs>\d+), #new-token: (?P<new>\d+), "
    r"#cached-token: (?P<cached>\d+)"
)
LOG_INTERVAL_STEPS = 40  # SGLang's --decode-log-interval default
SPEC_STEPS = 3  # the run's --speculative-num-steps (zero-step routes every batch to 0)
MODES = ("baseline", "eagle3", "zero-step")
# Context buckets (mean KV tokens per running request): lower edges.
BUCKET_EDGES = (0, 1000, 2000, 3000, 4000, 6000, 8000, 12000)


@dataclass(frozen=True)
class StepSample:
    """One steady decode log line: the mean step over the 40 steps before it."""

    mode: str
    batch: int
    kv_tokens: float  # the requests' contexts summed, at the middle of the interval
    pool_tokens: float  # SGLang's #token there: a shared prefix counted once
    accept_length: float
    step_ms: float
    where: str  # file:line
    longest_tokens: float = 0.0  # the longest request's context there


@dataclass(frozen=True)
class StepGroup:
    mode: str
    batch: int
    bucket: str
    n_lines: int
    kv_tokens: float  # mean over the group's lines
    accept_length: float
    step_ms: float  # median over the group's lines
    longest_tokens: float = 0.0  # mean over the group's lines

    @property
    def context_tokens(self) -> float:
        return self.kv_tokens / self.batch


def mode_of(log: Path) -> str | None:
    """``eagle3.2.log`` (an earlier start of the same server) counts as ``eagle3``."""
    stem = log.name.split(".")[0]
    return stem if stem in MODES else None


def launch_order(log: Path) -> tuple[str, int]:
    """Sort key: a server's logs in the order it was launched. A new launch moves the log it
    finds to the next free ``<name>.<n>.log``, so ``.1``, ``.2``, ... are older and the plain
    ``<name>.log`` is the newest."""
    parts = log.name.split(".")
    return parts[0], int(parts[1]) if parts[1].isdigit() else 1 << 30


def lines_of_set(run_dir: Path, mode: str, logs: Sequence[Sequence[str]],
                 prompt_set: str) -> list[list[str]]:
    """Per log of one server (in launch order), the lines it logged while specbench measured
    `prompt_set`'s points.

    specbench flushes the prefix cache before every point, and the manifest keeps the points in
    the order they ran, so the n-th flush line opens the server's n-th point. A flush more than
    the points opened a point that was cut short: a resumed sweep measures it again on the next
    launch, so it is the last flush of an older log (one per older log; more than that must be
    the newest log's last, a run still unfinished). Its lines are left out. Fewer flushes than
    points (a restart that skipped its flush), or surplus flushes that fewer older logs than
    there are could hold, are refused: which launch measured what is then unknown.
    """
    manifest = json.loads((run_dir / "manifest.json").read_text())
    keys = [k for k in manifest["points"] if k.split("/")[0] == mode]
    starts = [[i for i, line in enumerate(lines) if FLUSH_LINE in line] for lines in logs]
    surplus = sum(map(len, starts)) - len(keys)
    older = len(logs) - 1
    if surplus < 0 or 0 < surplus < older:
        raise SystemExit(f"{mode}: {sum(map(len, starts))} cache flushes in {len(logs)} log(s) "
                         f"for {len(keys)} points in the manifest; --prompt-set needs one flush "
                         "per point, and one cut-short point per earlier launch at most")
    # Each log's kept flushes and where its last kept point ends: a cut-short point's flush.
    kept = [(found, len(lines)) for found, lines in zip(starts, logs, strict=True)]
    if surplus:  # an older launch's last point was cut short; the newest's extras are unfinished
        newest = len(starts[-1]) - (surplus - older)
        kept = [(found[:-1], found[-1]) for found in starts[:-1]] + [
            (starts[-1][:newest], starts[-1][newest] if surplus > older else len(logs[-1]))]
    out, taken = [], 0
    for lines, (found, end) in zip(logs, kept, strict=True):
        bounds = [*found, end]
        mine = keys[taken:taken + len(found)]
        taken += len(found)
        out.append([line for key, a, b in zip(mine, bounds, bounds[1:], strict=False)
                    if key.split("/")[1] == prompt_set for line in lines[a:b]])
    return out


class RunningContexts:
    """Each running request's context (prompt + output so far), followed through one log.

    ``#token`` in a decode line is the KV pool in use, which counts a prefix shared by several
    requests once; each request's attention still reads all of it, and the simulator charges
    each request's whole context. So the fit takes the context from the requests instead: a
    prefill line adds its sequences (new + cached tokens, split evenly), a decode line adds 40
    steps of output to every request and keeps the newest B (the line's batch; the requests
    that finished meanwhile are taken to be the oldest, as with equal output lengths).
    """

    def __init__(self, interval_steps: int = LOG_INTERVAL_STEPS) -> None:
        self.contexts: list[float] = []
        self.interval_steps = interval_steps  # decode steps per Decode batch line
        self.longest = 0.0  # the longest context at the middle of the last decode interval

    def prefill(self, seqs: int, new: int, cached: int) -> None:
        self.contexts += [(new + cached) / max(1, seqs)] * seqs

    def decode(self, batch: int, accept: float) -> float:
        """The batch's total context at the middle of the steps before the line."""
        kept = self.contexts[-batch:] if batch > 0 else []
        if len(kept) < batch:  # admitted before this log's first line: the mean of the rest
            fill = statistics.fmean(kept) if kept else 0.0
            kept = [fill] * (batch - len(kept)) + kept
        self.contexts = [c + self.interval_steps * accept for c in kept]
        self.longest = max(kept, default=0.0) + self.interval_steps / 2 * accept
        return sum(kept) + self.interval_steps / 2 * accept * batch


def parse_decode_log(
    path: Path, mode: str, interval_steps: int = LOG_INTERVAL_STEPS,
    lines: Sequence[str] | None = None,
) -> list[StepSample]:
    """Steady steps of one log (or of `lines` of it); `interval_steps` is the server's
    --decode-log-interval (a run with 1 logs every decode forward, so each steady line is one
    step)."""
    samples: list[StepSample] = []
    prev_batch: int | None = None  # batch of the previous line if it was a decode line
    running = RunningContexts(interval_steps)
    for lineno, line in enumerate(read_log(path) if lines is None else lines, 1):
        m = DECODE_LINE.search(line)
        if m is None:
            p = PREFILL_LINE_RE.match(line)
            if p is not None:
                prev_batch = None
                running.prefill(int(p["seqs"]), int(p["new"]), int(p["cached"]))
            continue
        batch, tok_s = int(m["batch"]), float(m["tok_s"])
        accept = float(m["accept"]) if m["accept"] else 1.0
        context = running.decode(batch, accept)
        steady = prev_batch == batch and int(m["queue"]) == 0 and tok_s > 0 and batch > 0
        prev_batch = batch
        if not steady:
            continue
        kv_mid = int(m["kv"]) - interval_steps / 2 * batch * accept
        samples.append(
            StepSample(
                mode=mode,
                batch=batch,
                kv_tokens=max(context, kv_mid, float(batch)),
                pool_tokens=max(kv_mid, float(batch)),
                accept_length=accept,
                step_ms=1e3 * batch * accept / tok_s,
                where=f"{path.name}:{lineno}",
                longest_tokens=running.longest,
            )
        )
    return samples


@dataclass(frozen=True)
class PrefillInterval:
    """A decode log interval with prefill forwards in it: its decode steps (40 by default) plus
    the prefills."""

    mode: str
    batch: int  # mean of the batch sizes at the interval's two ends
    kv_tokens: float
    accept_length: float
    interval_ms: float
    prefills: tuple[tuple[int, int, int], ...]  # (new sequences, new tokens, cached tokens)
    decode_steps: int = LOG_INTERVAL_STEPS
    decode_ms: float | None = None  # logged every step: the real step beside it


def parse_prefill_intervals(
    path: Path, mode: str, interval_steps: int = LOG_INTERVAL_STEPS,
    lines: Sequence[str] | None = None,
) -> list[PrefillInterval]:
    out: list[PrefillInterval] = []
    prev_batch: int | None = None
    prefills: list[tuple[int, int, int]] = []
    running = RunningContexts(interval_steps)
    # Logged every step: (decode line number, batch, step ms) of the steady steps, and the
    # decode line number of each interval, for the real step beside it (real_decode_ms).
    steady: list[tuple[int, int, float]] = []
    at: list[int] = []
    for line in read_log(path) if lines is None else lines:
        m = DECODE_LINE.search(line)
        if m is None:
            p = PREFILL_LINE_RE.match(line)
            if p is not None:
                prefills.append((int(p["seqs"]), int(p["new"]), int(p["cached"])))
                running.prefill(int(p["seqs"]), int(p["new"]), int(p["cached"]))
            continue
        batch, tok_s = int(m["batch"]), float(m["tok_s"])
        accept = float(m["accept"]) if m["accept"] else 1.0
        context = running.decode(batch, accept)
        if tok_s > 0 and batch > 0 and not prefills and prev_batch == batch:
            steady.append((len(at) + len(steady), batch, 1e3 * batch * accept / tok_s))
        if prev_batch is not None and prefills and tok_s > 0 and min(prev_batch, batch) > 0:
            mean_batch = (prev_batch + batch) / 2
            # One step made `batch` requests' tokens; 40 steps made the batch's mean's.
            made = batch if interval_steps == 1 else mean_batch
            at.append(len(at) + len(steady))
            out.append(
                PrefillInterval(
                    mode=mode,
                    batch=round(mean_batch),
                    kv_tokens=context * round(mean_batch) / batch,
                    accept_length=accept,
                    interval_ms=1e3 * made * accept * interval_steps / tok_s,
                    prefills=tuple(prefills),
                    decode_steps=interval_steps,
                )
            )
        prev_batch, prefills = batch, []
    if interval_steps != 1:
        return out
    return [
        dataclasses.replace(iv, decode_ms=real_decode_ms(steady, n, iv.batch))
        for iv, n in zip(out, at, strict=True)
    ]


def real_decode_ms(
    steady: Sequence[tuple[int, int, float]], n: int, batch: int, reach: int = 40
) -> float | None:
    """The median steady step within `reach` decode lines of line `n` at `batch` +- 2 (>= 5 of
    them), or None: the decode step an interval holds besides its prefills, measured beside it
    rather than modelled (the model is 20 % off at agentic B=128, more than a prefill costs)."""
    near = [ms for k, b, ms in steady if abs(k - n) <= reach and abs(b - batch) <= 2]
    return statistics.median(near) if len(near) >= 5 else None


def model_prefills_ms(profile: Profile, iv: PrefillInterval) -> float:
    """The interval's prefill forwards; each line's sequences as equal chunks."""
    total = 0.0
    for seqs, new, cached in iv.prefills:
        chunks = [(max(1, new // seqs), cached // seqs)] * seqs
        total += prefill_step(
            profile, chunks, speculative=iv.mode != "baseline",
            running=iv.batch if iv.mode == "eagle3" else 0,  # zero-step drafts nothing
        ).total_ms
    return total


def prefill_extra_ms(profile: Profile, iv: PrefillInterval) -> float:
    """What the interval took beyond its decode steps (the real ones beside it where the log has
    every step, else model steps): the prefills' cost."""
    if iv.decode_ms is not None:
        return iv.interval_ms - iv.decode_steps * iv.decode_ms
    step = decode_step(
        profile,
        iv.batch,
        max(iv.kv_tokens, float(iv.batch)),
        speculative=iv.mode != "baseline",
        num_steps=SPEC_STEPS if iv.mode == "eagle3" else 0,
        topk=1,
    ).total_ms
    return iv.interval_ms - iv.decode_steps * step


def fit_prefill_overhead(
    profile: Profile,
    intervals: Sequence[PrefillInterval],
    step_intervals: Sequence[PrefillInterval] = (),
) -> Profile:
    """``o_prefill_ms`` per prefill forward, from the baseline's intervals at batch >= 4: least
    absolute deviations of the real extra time less the model's prefills without it.

    Absolute deviations, because an interval that spans the pause between two load points
    holds idle time that no prefill explains.

    With `step_intervals` (runs logged every step, each interval one decode step beside real
    ones) it comes from those instead: a 40-step interval's extra is the small difference of
    two large times (40 steps of a model a few % off, batches changing inside it), one step's
    is measured next to the step it adds to. See fit_step_prefills.
    """
    if step_intervals:
        return fit_step_prefills(profile, step_intervals)
    used = [iv for iv in intervals if iv.mode == "baseline" and iv.batch >= 4]
    if used:
        bare = with_values(profile, (PREFILL_PARAM,), (0.0,))
        y = np.array([prefill_extra_ms(bare, iv) - model_prefills_ms(bare, iv) for iv in used])
        x = np.array([[float(len(iv.prefills))] for iv in used])
        profile = with_values(profile, (PREFILL_PARAM,), (max(0.0, least_absolute(x, y)[0]),))
    # EAGLE-3's prefill forwards cost more per running request (the plain server's do not):
    # the median of its intervals' remaining gap per prefill forward per running request.
    spec = [iv for iv in intervals if iv.mode == "eagle3" and iv.batch >= SPEC_PREFILL_MIN_BATCH]
    if not spec:
        return profile
    no_running = with_values(profile, (SPEC_PREFILL_PARAM,), (0.0,))
    per_running = [
        (prefill_extra_ms(no_running, iv) - model_prefills_ms(no_running, iv))
        / (len(iv.prefills) * iv.batch)
        for iv in spec
    ]
    return with_values(
        profile, (SPEC_PREFILL_PARAM,), (max(0.0, statistics.median(per_running)),)
    )


def is_short_step_interval(iv: PrefillInterval) -> bool:
    """One decode step with a real step beside it, whose prefill forwards each extend fewer than
    STEP_PREFILL_MAX_NEW new tokens a sequence."""
    return iv.decode_ms is not None and all(
        new < STEP_PREFILL_MAX_NEW * seqs for seqs, new, _ in iv.prefills)


def fit_step_prefills(profile: Profile, intervals: Sequence[PrefillInterval]) -> Profile:
    """From intervals of one decode step (``--decode-log-interval 1``) with the real step beside
    them: ``o_prefill_ms`` is the plain server's mean real extra per prefill forward beyond the
    model's prefill without it, and ``o_spec_prefill_per_running_req_ms`` what EAGLE-3's
    forwards take beyond that per running request (ratios of sums). Means, not medians: the
    throughput pays every forward's time, and the real extras are skewed (baseline at 48-96
    running agentic requests: median 4.8 ms, mean 9.5); no idle gap sits between two steps.
    Only forwards whose sequences each extend fewer than STEP_PREFILL_MAX_NEW tokens: a long
    chunk is its GEMMs and attention, which c=1's first tokens fit (fit_frontend.py)."""
    base = [iv for iv in intervals
            if iv.mode == "baseline" and iv.batch >= 8 and is_short_step_interval(iv)]
    if base:
        bare = with_values(profile, (PREFILL_PARAM, SPEC_PREFILL_PARAM), (0.0, 0.0))
        extra = sum(prefill_extra_ms(bare, iv) - model_prefills_ms(bare, iv) for iv in base)
        per_forward = extra / sum(len(iv.prefills) for iv in base)
        profile = with_values(profile, (PREFILL_PARAM,), (max(0.0, per_forward),))
    spec = [iv for iv in intervals
            if iv.mode == "eagle3" and iv.batch >= SPEC_PREFILL_MIN_BATCH
            and is_short_step_interval(iv)]
    if spec:
        no_running = with_values(profile, (SPEC_PREFILL_PARAM,), (0.0,))
        extra = sum(
            prefill_extra_ms(no_running, iv) - model_prefills_ms(no_running, iv) for iv in spec)
        per_running = extra / sum(len(iv.prefills) * iv.batch for iv in spec)
        profile = with_values(profile, (SPEC_PREFILL_PARAM,), (max(0.0, per_running),))
    return profile


def least_absolute(x: np.ndarray, y: np.ndarray, rounds: int = 50) -> np.ndarray:
    """argmin_b sum |y - x b| by iteratively reweighted least squares."""
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    for _ in range(rounds):
        w = 1.0 / np.sqrt(np.maximum(np.abs(y - x @ coef), 1e-3))
        coef = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)[0]
    return coef


def bucket_of(context_tokens: float) -> str:
    lo = max(e for e in BUCKET_EDGES if e <= context_tokens)
    higher = [e for e in BUCKET_EDGES if e > lo]
    return f"{lo / 1000:g}-{higher[0] / 1000:g}k" if higher else f"{lo / 1000:g}k+"


def group_samples(samples: Sequence[StepSample]) -> list[StepGroup]:
    by_key: dict[tuple[str, int, str], list[StepSample]] = defaultdict(list)
    for s in samples:
        by_key[(s.mode, s.batch, bucket_of(s.kv_tokens / s.batch))].append(s)
    groups = [
        StepGroup(
            mode=mode,
            batch=batch,
            bucket=bucket,
            n_lines=len(v),
            kv_tokens=statistics.fmean(s.kv_tokens for s in v),
            accept_length=statistics.fmean(s.accept_length for s in v),
            step_ms=statistics.median(s.step_ms for s in v),
            longest_tokens=statistics.fmean(s.longest_tokens for s in v),
        )
        for (mode, batch, bucket), v in by_key.items()
    ]
    order = {m: i for i, m in enumerate(MODES)}
    return sorted(groups, key=lambda g: (order[g.mode], g.batch, g.context_tokens))


def model_step_ms(profile: Profile, g: StepGroup) -> float:
    cost = decode_step(
        profile,
        g.batch,
        g.kv_tokens,
        speculative=g.mode != "baseline",
        num_steps=SPEC_STEPS if g.mode == "eagle3" else 0,
        topk=1,
        longest_context_tokens=g.longest_tokens or None,
    )
    return cost.total_ms


# ------------------------------------------------------------------------- prompt tokens
@dataclass(frozen=True)
class PromptCount:
    """One request row of the real run: the server's prompt tokens and the sim's rendering."""

    prompt_set: str
    real_tokens: int
    pieces: int  # pre-tokenizer pieces of what the simulator counts (workload.py)
    chars: int  # characters of the same text
    rendered_chars: int  # the whole rendering, tool schemas and tool-call JSON included


def prompt_counts(run_dir: Path, profile: Profile, prompt_set: str = "*") -> list[PromptCount]:
    """Every request row with a server-reported prompt_tokens, against the sim's rendering."""
    frames = [
        pd.read_parquet(f, columns=["prompt_id", "prompt_tokens"])
        for f in sorted(run_dir.glob(f"points/*/{prompt_set}/*.parquet"))
    ]
    if not frames:
        return []
    rows = pd.concat(frames).dropna(subset=["prompt_tokens"])
    requests = {}
    for name in sorted({str(pid).split("/")[0] for pid in rows["prompt_id"]}):
        requests.update({r.id: r for r in load_prompt_set(name).requests})
    out: list[PromptCount] = []
    for pid, real in zip(rows["prompt_id"], rows["prompt_tokens"], strict=True):
        req = requests.get(str(pid))
        if req is None:
            continue
        messages = [dict(m) for m in req.messages]
        text = render_chat(messages, list(req.tools) if req.tools else None)
        counted = text if profile.workload.prompt_renders_tools else render_message_text(messages)
        out.append(PromptCount(
            req.prompt_set, int(real), pre_tokenizer_pieces(counted), len(counted), len(text)))
    return out


def fit_tokens_per_piece(counts: Sequence[PromptCount]) -> float:
    """Tokens over pieces summed over every row (each request the server saw counts)."""
    return sum(c.real_tokens for c in counts) / sum(c.pieces for c in counts)


# ------------------------------------------------------------------ parameters and the fit
@dataclass(frozen=True)
class Param:
    """A fitted number: where it lives in the profile (section, key) and its search range."""

    section: str
    key: str
    lo: float
    hi: float
    # Sections that take the same value (the draft layer runs the target's kernels).
    tied: tuple[str, ...] = ()


DECODE_PARAMS = (
    Param("target_attention", "bw_bytes_per_s", 0.5e12, 5.0e12, tied=("draft_attention",)),
    Param("target_attention", "serial_ns_per_token_layer", 0.5, 100.0, tied=("draft_attention",)),
    Param("overheads", "o_base_ms", 0.05, 2.0),
)
SPEC_PARAMS = (
    Param("overheads", "verify_kappa", 1.0, 40.0),
    Param(
        "target_attention",
        "verify_serial_ns_per_token_layer",
        1.0,
        500.0,
        tied=("draft_attention",),
    ),
    Param("overheads", "o_spec_ms", 0.01, 5.0),
    Param("overheads", "o_step_ms", 0.01, 2.0),
)
PREFILL_PARAM = Param("overheads", "o_prefill_ms", 0.0, 100.0)
# From 40-step intervals, measured and printed but not written into the profile: those read
# batches that changed inside an interval as prefill time (2.4 ms per running request where a
# run logged every step measures ~0.03). Written when --steps-run gives such a run.
SPEC_PREFILL_PARAM = Param("overheads", "o_spec_prefill_per_running_req_ms", 0.0, 20.0)
# EAGLE-3 intervals used for it: at B < 16 the gap is within the noise (and a c=1 interval also
# holds the client's idle gap).
SPEC_PREFILL_MIN_BATCH = 16
# fit_step_prefills: forwards extending fewer new tokens per sequence than this.
STEP_PREFILL_MAX_NEW = 1000
PROMPT_PARAM = Param("workload", "prompt_tokens_per_piece", 0.1, 10.0)
SECTION_ATTR = {
    "frontend": "frontend",
    "workload": "workload",
    "target_attention": "target_attention",
    "draft_attention": "draft_attention",
    "overheads": "overheads",
}


def get_value(profile: Profile, p: Param) -> float:
    return float(getattr(getattr(profile, SECTION_ATTR[p.section]), p.key))


def with_values(profile: Profile, params: Sequence[Param], values: Sequence[float]) -> Profile:
    changes: dict[str, dict[str, float]] = defaultdict(dict)
    for p, v in zip(params, values, strict=True):
        for section in (p.section, *p.tied):
            changes[section][p.key] = float(v)
    for section, kv in changes.items():
        attr = SECTION_ATTR[section]
        profile = dataclasses.replace(
            profile, **{attr: dataclasses.replace(getattr(profile, attr), **kv)}
        )
    return profile


def log_residuals(profile: Profile, groups: Sequence[StepGroup]) -> np.ndarray:
    return np.array([math.log(model_step_ms(profile, g) / g.step_ms) for g in groups])


def nelder_mead(
    f: Callable[[np.ndarray], float], x0: np.ndarray, *, step: float = 0.3, iters: int = 4000
) -> np.ndarray:
    """Minimise f from x0 (a plain Nelder-Mead: the project does not depend on scipy)."""
    n = len(x0)
    simplex = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if values[-1] - values[0] < 1e-12 and np.ptp(np.array(simplex), axis=0).max() < 1e-7:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        reflected = centroid + (centroid - worst)
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2.0 * (centroid - worst)
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (worst - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [best + 0.5 * (x - best) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    return simplex[int(np.argmin(values))]


def fit(profile: Profile, params: Sequence[Param], groups: Sequence[StepGroup]) -> Profile:
    """Least squares on log step time over `groups`, parameters searched in log space."""
    weights = np.array([float(g.n_lines) for g in groups])
    lo = np.log([p.lo for p in params])
    hi = np.log([p.hi for p in params])

    def loss(x: np.ndarray) -> float:
        penalty = float(np.sum(np.clip(lo - x, 0, None) + np.clip(x - hi, 0, None)))
        values = np.exp(np.clip(x, lo, hi))
        res = log_residuals(with_values(profile, params, values), groups)
        return float(np.sum(weights * res**2)) + 100.0 * penalty

    x0 = np.log([min(max(get_value(profile, p), p.lo), p.hi) for p in params])
    best = x0
    for _ in range(3):  # restart from the optimum: Nelder-Mead can stall on a ridge
        best = nelder_mead(loss, best)
    return with_values(profile, params, np.exp(np.clip(best, lo, hi)))


def rounded(value: float) -> float:
    """Three significant digits: the data do not support more."""
    if value == 0:
        return 0.0
    return float(f"{value:.3g}")


def check(
    path: Path,
    params: Sequence[Param],
    values: Sequence[float],
    groups: Sequence[StepGroup],
    tolerance: float,
) -> int:
    """The TOML holds the fit (within 5 %) and meets the step times within `tolerance`."""
    profile = load_profile(str(path))
    problems = []
    for p, v in zip(params, values, strict=True):
        have = get_value(profile, p)
        off = have != 0.0 if v == 0.0 else abs(have / v - 1.0) > 0.05  # a fitted 0 must be 0
        if off:
            problems.append(f"[{p.section}] {p.key} = {have:g}, the fit gives {v:g}")
    for g in groups:
        err = model_step_ms(profile, g) / g.step_ms - 1.0
        if g.n_lines >= 5 and abs(err) > tolerance:
            problems.append(
                f"{g.mode} B={g.batch} {g.bucket}: model {100 * err:+.1f}% off the real step"
            )
    print(f"\ncheck {path}: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    for line in problems:
        print(f"  {line}")
    if problems:
        print("  re-fit with --write, or fix the profile by hand")
    return 1 if problems else 0


def run_log_interval(run_dir: Path) -> int:
    """The run's --decode-log-interval (its servers' argv in the manifest; SGLang's 40 if not
    given): a run logged every step read as 40-step lines would add 40 steps' output to every
    request's context at each line."""
    try:
        servers = read_manifest(run_dir).servers
    except RunDirError:
        return LOG_INTERVAL_STEPS
    given = [decode_log_interval(s.argv) for s in servers.values()]
    return next((n for n in given if n != LOG_INTERVAL_STEPS), LOG_INTERVAL_STEPS)


def read_run_logs(run_dir: Path, prompt_set: str | None = None,
                  ) -> tuple[list[Path], dict[str, list[list[str]]]]:
    """A run's server logs in launch order, and their lines by server name (eagle3.2.log is a
    restart of eagle3); with `prompt_set`, each log's lines of that set's points only."""
    servers = run_dir / "servers"
    logs = sorted([*servers.glob("*.log"), *servers.glob("*.log.xz")], key=launch_order)
    by_mode: dict[str, list[list[str]]] = defaultdict(list)
    for log in logs:
        by_mode[log.name.split(".")[0]].append(read_log(log))
    if prompt_set is not None:
        by_mode.update({name: lines_of_set(run_dir, name, found, prompt_set)
                        for name, found in by_mode.items() if name in MODES})
    return logs, dict(by_mode)


@dataclass(frozen=True)
class Fit:
    """What a fit found: the fitted profile, the values it fitted and what they came from."""

    start: Profile
    fitted: Profile
    params: tuple[Param, ...]
    values: list[float]
    groups: list[StepGroup]
    intervals: list[PrefillInterval]
    step_runs: list[tuple[str, list[PrefillInterval]]]  # runs logged every step
    step_samples: list[tuple[str, list[StepSample]]]
    counts: list[PromptCount]
    spec_prefill_ms: float  # EAGLE-3's prefill term as the 40-step intervals measure it


def _steps_run(run: Path) -> tuple[list[PrefillInterval], list[StepSample]]:
    logs = [(log, mode) for log in sorted((run / "servers").glob("*.log*"))
            if (mode := mode_of(log)) is not None]
    return ([iv for log, mode in logs for iv in parse_prefill_intervals(log, mode, 1)],
            [smp for log, mode in logs for smp in parse_decode_log(log, mode, 1)])


def fit_run(
    run_dir: Path, start: Profile, logs: Sequence[Path],
    logs_by_mode: dict[str, list[list[str]]], *, prompt_set: str | None = None,
    steps_runs: Sequence[Path] = (), first_token_fit: Callable[[Profile], Profile] | None = None,
    first_token_params: tuple[Param, ...] = (), first_token_rounds: int = 4,
) -> Fit | None:
    """Fit `start` to the run's steady steps (None: no steady line). `steps_runs` are runs
    logged every step (the prefill terms come from them); `first_token_fit` fits the frontend
    and the prefill FLOP rate in turn with the prefill overhead, `first_token_rounds` times."""
    interval = run_log_interval(run_dir)
    samples: list[StepSample] = []
    intervals: list[PrefillInterval] = []
    for name, found in logs_by_mode.items():
        if name not in MODES:
            continue
        for log, lines in zip([lg for lg in logs if lg.name.split(".")[0] == name], found,
                              strict=True):
            samples += parse_decode_log(log, name, interval, lines=lines)
            intervals += parse_prefill_intervals(log, name, interval, lines=lines)
    if not samples:
        return None
    read = [(run.name, *_steps_run(run)) for run in steps_runs]
    step_runs = [(name, ivs) for name, ivs, _ in read]
    step_samples = [(name, smps) for name, _, smps in read]
    step_intervals = [iv for _, ivs in step_runs for iv in ivs]
    groups = group_samples(samples)
    fitted = fit(start, DECODE_PARAMS, [g for g in groups if g.mode == "baseline"])
    fitted = fit(fitted, SPEC_PARAMS, [g for g in groups if g.mode != "baseline"])
    fitted = fit_prefill_overhead(fitted, intervals, step_intervals)
    params: tuple[Param, ...] = (*DECODE_PARAMS, *SPEC_PARAMS, PREFILL_PARAM)
    if step_intervals:  # measured one step at a time: written
        params = (*params, SPEC_PREFILL_PARAM)
    if first_token_fit is not None:
        for _ in range(first_token_rounds):
            fitted = first_token_fit(fitted)
            fitted = fit_prefill_overhead(fitted, intervals, step_intervals)
        params = (*params, *first_token_params)
    # From 40-step intervals: measured, not written (see SPEC_PREFILL_PARAM).
    spec_prefill_ms = get_value(fitted, SPEC_PREFILL_PARAM)
    if not step_intervals:
        fitted = with_values(
            fitted, (SPEC_PREFILL_PARAM,), (get_value(start, SPEC_PREFILL_PARAM),))
    counts = prompt_counts(run_dir, start, prompt_set or "*")
    if counts:
        fitted = with_values(fitted, (PROMPT_PARAM,), (fit_tokens_per_piece(counts),))
        params = (*params, PROMPT_PARAM)
    values = [rounded(get_value(fitted, p)) for p in params]
    return Fit(start, with_values(fitted, params, values), params, values, groups, intervals,
               step_runs, step_samples, counts, spec_prefill_ms)


# -- one-step lines of the plain server and shared prefixes ---------------------------------

MIN_RUNNING = 8  # below it the step is the weights' read and the per-request walk


def one_step_samples(run_dir: Path, mode: str = "baseline") -> list[StepSample]:
    """The steady one-step lines of a run's server, at 8 running requests or more."""
    found = parse_decode_log(run_dir / "servers" / f"{mode}.log.xz", mode, interval_steps=1)
    return [x for x in found if x.batch >= MIN_RUNNING]


def real_over_model(found: Sequence[StepSample], profile: Profile, share: float) -> float:
    """Median real step / the profile's at each line's own contexts, a running request's read
    of a prefix it shares with others charged at `share` of a first read."""
    profile = dataclasses.replace(
        profile, overheads=dataclasses.replace(profile.overheads, shared_read_fraction=share))
    return statistics.median(
        x.step_ms / decode_step(profile, x.batch, x.kv_tokens, speculative=x.mode != "baseline",
                                num_steps=0, skip_zero_step_draft_extend=True,
                                shared_read_tokens=max(0.0, x.kv_tokens - x.pool_tokens)).total_ms
        for x in found)
