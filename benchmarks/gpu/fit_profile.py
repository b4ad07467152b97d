"""Fit the simulator's step-time model to the step times a real SGLang server logged.

SGLang prints a ``Decode batch`` line every 40 decode steps::

    Decode batch, #running-req: B, #token: N, token usage: U, [accept len: A, accept rate: R, ]
    cuda graph: True, gen throughput (token/s): X, #queue-req: Q

``X`` is the tokens generated since the previous such line over the wall time since then, so
one decode step took ``B * A / X`` (A = 1 for a plain server) *if* nothing else ran in between.
A line is kept (steady) only when the line before it in the same log was a decode line with the
same batch size (no prefill forward, no finished or admitted request in the interval) and
nothing was queued. The line's context is its requests' contexts summed at the middle of the
interval (RunningContexts: each ``Prefill batch`` line's new + cached tokens per sequence, plus
40·A output per decode line, the newest B kept), not ``N``: the KV pool counts a prefix shared
by several requests once, while each request's attention reads all of it and the simulator
charges each request's whole context (agentic users share long prefixes; ``N`` put their
zero-step lines at B=64 40 % above the model).

The steady steps are grouped by (mode, batch, context bucket) and the cost model
(specbench/sim/costmodel.py) is fitted to the groups' median step times, on log time, each group
weighted by its line count (every steady line counts once):

1. the plain decode, from ``baseline.log``: the attention bandwidth, the per-request KV walk that
   bounds it at small batch, the per-forward and per-request overheads. The walk's tail (the
   longest request's share, ``walk_tail_batch``) is kept from the profile: each line's longest
   context is followed too, but only runs logged every step place it (the tail table);
2. the speculative step, from ``eagle3*.log`` (K=3 verify + 3 draft steps) and
   ``zero-step*.log`` (SGLang's steps-0 one-token verify + draft extend), with the plain-decode
   numbers fixed: the verify kernel's ``verify_kappa`` and walk, and the speculative overheads.

3. the prefill's interference at load. Best from runs logged every decode step
   (``--decode-log-interval 1``, given with ``--steps-run``; a coding and an agentic one are
   committed): a decode line with prefill lines before it is one decode step plus those
   prefill forwards, and the steady steps of the same batch beside it give the step, so the
   rest is what the forwards cost. The model's extend (prefill) is the verify's Triton kernel
   (costmodel.extend_attention_ms: a cached prefix costs a verify's read and one request's
   walk), so ``o_prefill_ms`` is all that is fitted: the mean extra per short forward of the
   plain server, and ``o_spec_prefill_per_running_req_ms`` what EAGLE-3's add per running
   request. Without such runs, the 40-step intervals: ``40 · B · A / X`` less 40 model decode
   steps, ``o_prefill_ms`` a least-absolute-deviations fit over the baseline's intervals at
   batch >= 4 (absolute deviations, because an interval across the pause between two load
   points holds idle time), and the EAGLE-3 term printed, not written: those intervals also
   hold batches that changed inside them, which this reads as prefill time (~2 ms per running
   request where one step at a time measures ~0).

4. the frontend stage (SGLang's tokenizer manager: HTTP, chat template, tokenizer, one process)
   and the prefill's attention FLOP rate, from the time to first token of every c=1 request row
   and its own ``Prefill batch`` lines: fit_frontend.py. The prefill overhead of step 3 depends
   on the FLOP rate and the other way round, so the two are fitted in turn until they settle.

5. the prompt-token count, from the run's per-request rows (``points/*/*/*.parquet``, the
   ``prompt_tokens`` the server reported): the simulator renders each request as it would
   (specbench/sim/workload.py: each message's text only when the profile's
   ``prompt_renders_tools`` is false) and ``prompt_tokens_per_piece`` is the real tokens over
   the rendering's pre-tokenizer pieces, summed over every request row.

Everything else (GEMM rooflines, memory, acceptance) comes from the profile given with
``--profile``. The script prints the real and model step time per group and the fitted values;
``--write`` puts them into a profile TOML (comments kept), ``--check`` exits 1 when a TOML's
values drift from the fit or miss the step times by more than ``--tolerance``.

    R=results/gpu/h200-sglang-0.5.17-llama8b-shape-q0.3
    python3 benchmarks/gpu/fit_profile.py $R --steps-run $R-agentic-steps \\
        --steps-run $R-coding-steps --steps-run $R-agentic-c4 --steps-run $R-coding-small \\
        --check specbench/sim/profiles/llama-3.1-8b-1xh200-triton.toml
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import lzma
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from fit_frontend import (  # type: ignore[import-not-found]  # this script's folder
    first_tokens,
    fit_first_token,
    print_first_token_table,
    print_load_table,
    print_output_flow_table,
    print_output_hold_table,
)

from specbench.prompts import load_prompt_set
from specbench.results import RunDirError, read_manifest
from specbench.sim.costmodel import Profile, decode_step, load_profile, prefill_step
from specbench.sim.workload import pre_tokenizer_pieces, render_chat, render_message_text

DECODE_RE = re.compile(
    r"^\[[^\]]+\] Decode batch, #running-req: (?P<batch>\d+), #token: (?P<kv>\d+), "
    r"token usage: [\d.]+, (?:accept len: (?P<accept>[\d.]+), accept rate: [\d.]+, )?"
    r"cuda graph: \w+, gen throughput \(token/s\): (?P<tok_s>[\d.]+), #queue-req: (?P<queue>\d+)"
)
PREFILL_RE = re.compile(r"^\[[^\]]+\] Prefill batch")
PREFILL_LINE_RE = re.compile(
    r"^\[[^\]]+\] Prefill batch, #new-seq: (?P<seqs>\d+), #new-token: (?P<new>\d+), "
    r"#cached-token: (?P<cached>\d+)"
)
LOG_INTERVAL_STEPS = 40  # SGLang's --decode-log-interval default
WINDOW_S = 8.0  # the run's --window-s (the load table's first tokens per second)
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


def decode_log_interval(run_dir: Path) -> int:
    """The run's --decode-log-interval (its servers' argv in the manifest; SGLang's 40 if not
    given): a run logged every step read as 40-step lines would add 40 steps' output to every
    request's context at each line."""
    try:
        servers = read_manifest(run_dir).servers
    except RunDirError:
        return LOG_INTERVAL_STEPS
    for server in servers.values():
        argv = [str(a) for a in server.argv]
        for i, arg in enumerate(argv[:-1]):
            if arg == "--decode-log-interval":
                return int(argv[i + 1])
    return LOG_INTERVAL_STEPS


def log_lines(path: Path) -> list[str]:
    """A server log's lines; committed runs keep their logs xz-compressed (``*.log.xz``)."""
    if path.suffix == ".xz":
        with lzma.open(path, "rt", errors="replace") as handle:
            return handle.read().splitlines()
    return path.read_text(errors="replace").splitlines()


FLUSH_LINE = "Cache flushed successfully!"  # specbench flushes the cache before each point


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
    for lineno, line in enumerate(log_lines(path) if lines is None else lines, 1):
        m = DECODE_RE.match(line)
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
    for line in log_lines(path) if lines is None else lines:
        m = DECODE_RE.match(line)
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


def print_prefill_table(profile: Profile, intervals: Sequence[PrefillInterval]) -> None:
    print("\nprefill at load: per prefill forward, median over the intervals with prefills")
    print(
        f"{'mode':9s} {'B':>4s} {'intervals':>9s} {'prefills':>8s} {'new tok':>8s} "
        f"{'real ms':>8s} {'model ms':>8s}"
    )
    buckets: dict[tuple[str, int], list[PrefillInterval]] = defaultdict(list)
    levels = (1, 4, 16, 32, 64, 128)
    for iv in intervals:
        level = min(levels, key=lambda c: abs(math.log(c / iv.batch)))
        buckets[(iv.mode, level)].append(iv)
    order = {m: i for i, m in enumerate(MODES)}
    for mode, level in sorted(buckets, key=lambda k: (order[k[0]], k[1])):
        ivs = buckets[(mode, level)]
        # Medians per prefill forward (idle pauses between load points make means useless).
        real = statistics.median(prefill_extra_ms(profile, iv) / len(iv.prefills) for iv in ivs)
        model = statistics.median(model_prefills_ms(profile, iv) / len(iv.prefills) for iv in ivs)
        note = "  (idle client gaps)" if level == 1 else ""
        print(
            f"{mode:9s} {level:4d} {len(ivs):9d} {sum(len(iv.prefills) for iv in ivs):8d} "
            f"{sum(n for iv in ivs for _, n, _ in iv.prefills):8d} {real:8.1f} {model:8.1f}"
            f"{note}"
        )


def print_tail_table(profile: Profile, step_runs: Sequence[tuple[str, list[StepSample]]]) -> None:
    """Small batches one step at a time: the real step, the model with the mean request's walk
    and with the profile's tail (the longest request's walk)."""
    print("\nthe KV walk's tail, one step at a time: median step ms at small batch")
    print(f"{'run':24s} {'mode':9s} {'B':>3s} {'lines':>5s} {'ctx/req':>7s} {'longest':>7s} "
          f"{'real':>6s} {'mean walk':>9s} {'tail':>6s}")
    flat = dataclasses.replace(
        profile, overheads=dataclasses.replace(profile.overheads, walk_tail_batch=0.0))
    for name, samples in step_runs:
        by_key: dict[tuple[str, int], list[StepSample]] = defaultdict(list)
        for smp in samples:
            if smp.batch <= TAIL_MAX_BATCH:
                by_key[(smp.mode, smp.batch)].append(smp)
        for (mode, batch), v in sorted(by_key.items()):
            if len(v) < 5:
                continue
            kv = statistics.fmean(x.kv_tokens for x in v)
            group = StepGroup(
                mode=mode, batch=batch, bucket=bucket_of(kv / batch), n_lines=len(v),
                kv_tokens=kv, accept_length=statistics.fmean(x.accept_length for x in v),
                step_ms=statistics.median(x.step_ms for x in v),
                longest_tokens=statistics.fmean(x.longest_tokens for x in v))
            print(f"{name[-24:]:24s} {mode:9s} {batch:3d} {len(v):5d} "
                  f"{group.context_tokens:7.0f} {group.longest_tokens:7.0f} {group.step_ms:6.2f} "
                  f"{model_step_ms(flat, group):9.2f} {model_step_ms(profile, group):6.2f}")


def print_step_prefill_table(
    profile: Profile, runs: Sequence[tuple[str, Sequence[PrefillInterval]]]
) -> None:
    """Per run logged every step, mode and level: the short prefill forwards' mean real cost
    (beyond the real step beside them) and the model's."""
    print("\nprefill at load, one step at a time: mean per short prefill forward "
          f"(< {STEP_PREFILL_MAX_NEW} new tokens a sequence)")
    print(f"{'run (end of name)':18s} {'mode':9s} {'B':>4s} {'intervals':>9s} {'forwards':>8s} "
          f"{'seqs':>5s} {'real ms':>8s} {'model ms':>8s}")
    levels = (8, 16, 32, 64, 128)
    for name, intervals in runs:
        buckets: dict[tuple[str, int], list[PrefillInterval]] = defaultdict(list)
        for iv in intervals:
            if iv.batch < 8 or not is_short_step_interval(iv):
                continue
            buckets[(iv.mode, min(levels, key=lambda c: abs(math.log(c / iv.batch))))].append(iv)
        for (mode, level), ivs in sorted(buckets.items()):
            forwards = sum(len(iv.prefills) for iv in ivs)
            real = sum(prefill_extra_ms(profile, iv) for iv in ivs) / forwards
            model = sum(model_prefills_ms(profile, iv) for iv in ivs) / forwards
            seqs = sum(n for iv in ivs for n, _, _ in iv.prefills)
            short_name = "-".join(name.split("-")[-2:])
            print(f"{short_name:18s} {mode:9s} {level:4d} {len(ivs):9d} {forwards:8d} "
                  f"{seqs:5d} {real:8.1f} {model:8.1f}")


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


def print_prompt_table(counts: Sequence[PromptCount], tokens_per_piece: float) -> None:
    print("\nprompt tokens per request row: the real server's count vs the simulator's")
    print(
        f"{'set':8s} {'rows':>5s} {'real':>7s} {'sim':>7s} {'gap':>7s} {'row p10':>7s} "
        f"{'row p90':>7s} {'chars p10':>9s} {'chars p90':>9s} {'chars/4 +tools':>14s}"
    )
    by_set: dict[str, list[PromptCount]] = defaultdict(list)
    for c in counts:
        by_set[c.prompt_set].append(c)
    for name, cs in sorted(by_set.items()):
        real = statistics.fmean(c.real_tokens for c in cs)
        sims = [max(1, math.ceil(c.pieces * tokens_per_piece)) for c in cs]
        # Per row, sim over real; the characters at the ratio that fits these rows as a whole.
        row = np.quantile([s / c.real_tokens for s, c in zip(sims, cs, strict=True)], [0.1, 0.9])
        chars_per_token = sum(c.chars for c in cs) / sum(c.real_tokens for c in cs)
        by_chars = np.quantile(
            [c.chars / chars_per_token / c.real_tokens for c in cs], [0.1, 0.9])
        generic = statistics.fmean(math.ceil(c.rendered_chars / 4) for c in cs)
        print(
            f"{name:8s} {len(cs):5d} {real:7.0f} {statistics.fmean(sims):7.0f} "
            f"{100 * (statistics.fmean(sims) / real - 1):+6.1f}% {row[0]:7.2f} {row[1]:7.2f} "
            f"{by_chars[0]:9.2f} {by_chars[1]:9.2f} {generic:14.0f}"
        )


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
# Kept from the profile (the walk's tail, [overheads] walk_tail_batch): 40-step lines cannot
# place it; print_tail_table shows it against the runs logged every step.
TAIL_MAX_BATCH = 16
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
FIRST_TOKEN_PARAMS = (
    Param("frontend", "request_ms", 0.0, 1000.0),
    Param("frontend", "prompt_token_us", 0.0, 1000.0),
    Param("target_attention", "prefill_flops_per_s", 1e13, 1e16, tied=("draft_attention",)),
)
FIRST_TOKEN_ROUNDS = 4  # prefill overhead <-> FLOP rate: settled to 3 digits after 3
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


# ------------------------------------------------------------------------------- output
def rounded(value: float) -> float:
    """Three significant digits: the data do not support more."""
    if value == 0:
        return 0.0
    return float(f"{value:.3g}")


def print_table(profile: Profile, groups: Sequence[StepGroup], title: str) -> list[float]:
    print(title)
    print(
        f"{'mode':9s} {'B':>4s} {'context':>8s} {'lines':>5s} {'ctx/req':>7s} {'accept':>6s} "
        f"{'real ms':>8s} {'model ms':>8s} {'gap':>7s}"
    )
    errors = []
    for g in groups:
        model = model_step_ms(profile, g)
        err = model / g.step_ms - 1.0
        errors.append(err)
        print(
            f"{g.mode:9s} {g.batch:4d} {g.bucket:>8s} {g.n_lines:5d} {g.context_tokens:7.0f} "
            f"{g.accept_length:6.2f} {g.step_ms:8.2f} {model:8.2f} {100 * err:+6.1f}%"
        )
    return errors


def summarize(errors: Sequence[float], groups: Sequence[StepGroup], label: str) -> None:
    lines = sum(g.n_lines for g in groups)
    abs_err = sorted(abs(e) for e in errors)
    print(
        f"{label}: {len(groups)} groups from {lines} steady lines; |gap| median "
        f"{100 * statistics.median(abs_err):.1f}%, max {100 * abs_err[-1]:.1f}%"
    )


def set_toml_value(text: str, section: str, key: str, value: float) -> str:
    """Replace `key = ...` inside `[section]` of a TOML text, keeping its comment."""
    head = re.search(rf"^\[{re.escape(section)}\]\s*$", text, flags=re.M)
    if head is None:
        raise SystemExit(f"no [{section}] table in the profile; add it before --write")
    nxt = re.search(r"^\[", text[head.end() :], flags=re.M)
    end = head.end() + (nxt.start() if nxt else len(text[head.end() :]))
    body = text[head.end() : end]
    pattern = re.compile(rf"^(?P<lhs>{re.escape(key)}\s*=\s*)(?P<val>[^\s#]+)", flags=re.M)
    if pattern.search(body) is None:
        raise SystemExit(f"no {key} in [{section}] of the profile; add it before --write")
    old_width = len(pattern.search(body)["val"])  # type: ignore[index]
    new = f"{value:g}".replace("e+", "e")
    body = pattern.sub(lambda m: m["lhs"] + new.ljust(old_width), body, count=1)
    return text[: head.end()] + body + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a real run: RUN/servers/<mode>.log")
    parser.add_argument(
        "--profile",
        default="llama-3.1-8b-1xh200-triton",
        help="start values and the numbers not fitted (bundled name or TOML path)",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--write", type=Path, help="write the fitted values into this profile TOML")
    out.add_argument("--check", type=Path, help="exit 1 if this TOML drifts from the fit")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.15,
        help="--check: largest step-time gap allowed for a group of >= 5 lines (default 0.15)",
    )
    parser.add_argument(
        "--flow-of",
        type=Path,
        action="append",
        default=[],
        metavar="RUN",
        help="a simulated run of the same levels: its output flow beside the real run's",
    )
    parser.add_argument(
        "--steps-run",
        type=Path,
        action="append",
        default=[],
        metavar="RUN",
        help="a run logged with --decode-log-interval 1: the prefill overheads come from it",
    )
    parser.add_argument(
        "--prompt-set",
        help="fit on this set's points only (the others are then held out: check them with a "
             "simulated sweep and `specbench compare`)",
    )
    parser.add_argument(
        "--keep-frontend",
        action="store_true",
        help="keep --profile's frontend and prefill FLOP rate (the c=1 rows are too few to fit "
             "them, or held a first-use compile)",
    )
    args = parser.parse_args(argv)

    servers = args.run_dir / "servers"
    interval = decode_log_interval(args.run_dir)
    logs = sorted([*servers.glob("*.log"), *servers.glob("*.log.xz")], key=launch_order)
    samples: list[StepSample] = []
    intervals: list[PrefillInterval] = []
    # Every server's lines by mode (eagle3.2.log is a restart of eagle3), for the c=1 rows.
    logs_by_mode: dict[str, list[list[str]]] = defaultdict(list)
    for log in logs:
        logs_by_mode[log.name.split(".")[0]].append(log_lines(log))
    if args.prompt_set is not None:
        logs_by_mode.update({
            name: lines_of_set(args.run_dir, name, found, args.prompt_set)
            for name, found in logs_by_mode.items() if name in MODES})
    for name, found in logs_by_mode.items():
        mode = name if name in MODES else None
        if mode is None:
            continue
        for log, lines in zip([lg for lg in logs if lg.name.split(".")[0] == name], found,
                              strict=True):
            samples += parse_decode_log(log, mode, interval, lines=lines)
            intervals += parse_prefill_intervals(log, mode, interval, lines=lines)
    if not samples:
        print(f"no steady decode lines in {args.run_dir}/servers/*.log", file=sys.stderr)
        return 2
    step_runs = [
        (run.name, [
            iv
            for log in sorted((run / "servers").glob("*.log*"))
            if (mode := mode_of(log)) is not None
            for iv in parse_prefill_intervals(log, mode, interval_steps=1)
        ])
        for run in args.steps_run
    ]
    step_intervals = [iv for _, ivs in step_runs for iv in ivs]
    step_samples = [
        (run.name, [
            smp
            for log in sorted((run / "servers").glob("*.log*"))
            if (mode := mode_of(log)) is not None
            for smp in parse_decode_log(log, mode, interval_steps=1)
        ])
        for run in args.steps_run
    ]
    groups = group_samples(samples)
    decode_groups = [g for g in groups if g.mode == "baseline"]
    spec_groups = [g for g in groups if g.mode != "baseline"]

    start = load_profile(args.profile)
    fitted = fit(start, DECODE_PARAMS, decode_groups)
    fitted = fit(fitted, SPEC_PARAMS, spec_groups)
    fitted = fit_prefill_overhead(fitted, intervals, step_intervals)
    params: tuple[Param, ...] = (*DECODE_PARAMS, *SPEC_PARAMS, PREFILL_PARAM)
    if step_intervals:  # measured one step at a time: written
        params = (*params, SPEC_PREFILL_PARAM)
    only = args.prompt_set or "*"
    first, unmatched = ([], 0) if args.keep_frontend else first_tokens(
        args.run_dir, logs_by_mode, only)
    if first:
        for _ in range(FIRST_TOKEN_ROUNDS):
            fitted = fit_first_token(fitted, first)
            fitted = fit_prefill_overhead(fitted, intervals, step_intervals)
        params = (*params, *FIRST_TOKEN_PARAMS)
    # From 40-step intervals: printed, not written (see SPEC_PREFILL_PARAM).
    spec_prefill_ms = get_value(fitted, SPEC_PREFILL_PARAM)
    if not step_intervals:
        fitted = with_values(
            fitted, (SPEC_PREFILL_PARAM,), (get_value(start, SPEC_PREFILL_PARAM),))
    counts = prompt_counts(args.run_dir, start, only)
    if counts:
        fitted = with_values(fitted, (PROMPT_PARAM,), (fit_tokens_per_piece(counts),))
        params = (*params, PROMPT_PARAM)
    values = [rounded(get_value(fitted, p)) for p in params]
    fitted = with_values(fitted, params, values)

    errors = print_table(fitted, groups, "steady decode steps, SGLang's log vs the fitted model")
    summarize(errors, groups, "all")
    for mode in MODES:
        idx = [i for i, g in enumerate(groups) if g.mode == mode]
        if idx:
            summarize([errors[i] for i in idx], [groups[i] for i in idx], f"  {mode}")
    print_prefill_table(fitted, intervals)
    if step_runs:
        print_step_prefill_table(fitted, step_runs)
        print_tail_table(fitted, step_samples)
    if first:
        print_first_token_table(fitted, first, unmatched)
        print_load_table(fitted, args.run_dir, WINDOW_S)
        print_output_hold_table(args.run_dir, WINDOW_S)
        print_output_flow_table([args.run_dir, *args.flow_of], WINDOW_S)
    if counts:
        print_prompt_table(counts, fitted.workload.prompt_tokens_per_piece)
    print("\nfitted parameters (3 significant digits):")
    for p, v in zip(params, values, strict=True):
        tied = f"  (also [{', '.join(p.tied)}])" if p.tied else ""
        print(f"  [{p.section}] {p.key} = {v:g}{tied}")

    if not step_intervals:
        print(
            f"  [overheads] {SPEC_PREFILL_PARAM.key} = {rounded(spec_prefill_ms):g} measured "
            f"on 40-step intervals, {get_value(start, SPEC_PREFILL_PARAM):g} in the profile "
            "(not written: pass --steps-run for a run logged every step)"
        )

    if args.write:
        text = args.write.read_text()
        for p, v in zip(params, values, strict=True):
            for section in (p.section, *p.tied):
                text = set_toml_value(text, section, p.key, v)
        args.write.write_text(text)
        print(f"\nwrote {args.write}")
    if args.check:
        return check(args.check, params, values, groups, args.tolerance)
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
