"""Why EAGLE-3 wins or loses at a level: acceptance x (plain step / speculative step) x the rest.

Per prompt set and level, EAGLE-3's tok/s over the baseline's (R, from the summary) splits as

    R = A x (t_plain / t_spec) x rest

- A: tokens per verify (the summary's ``accept_length``; the plain server's is 1);
- t_spec / t_plain: a speculative decode step's time over a plain one's at the same running
  batch, from the servers' steady ``Decode batch`` lines (:mod:`.steps`): decode alone;
- rest = R x (t_spec / t_plain) / A: everything that is not a decode step (prefill, admission,
  the frontend), which a server with fewer decode steps per request pays relatively more of.

The break-even acceptance is the A at which EAGLE-3 would tie the plain server there, the step
ratio and the rest held: A* = (t_spec / t_plain) / rest (= A / R). The largest term is the one
furthest from its ideal on the log scale: acceptance from K + 1 (every draft accepted), the
step ratio from 1, the rest from 1 (a rest above 1 holds nothing back).

Intervals: the step ratio from a block bootstrap over each server's steady lines (consecutive
lines share a batch and its contexts, so blocks of them are resampled); R from its per-level
error (:mod:`.intervals`, the one the crossover uses); A as measured (the stream's count).

Where the sweep profiled levels (``--profile-steps``, :mod:`.kernels`), each such level also
gets both servers' steps as SGLang's profiler split them (draft, verify attention, GEMMs,
communication, host idle; the slowest rank's step), and the step ratio that split gives beside
the one from the logs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from specbench.analysis.curves import level_stats, mean_by_level, slice_inflation
from specbench.analysis.intervals import PairedRequests, percentile_interval, ratio_curve
from specbench.analysis.kernels import PointProfile, StepSplit, TraceError, read_profiles
from specbench.analysis.steps import DecodeInterval, decode_log_interval, point_intervals
from specbench.engines.argv import flag_value
from specbench.errors import UserError
from specbench.results import PointKey, Run
from specbench.results.store import write_json
from specbench.stats import draw_log_ratios

EXPLAIN_FILE = "explain.json"
EXPLAIN_VERSION = 1
BASELINE = "baseline"
MIN_STEADY_LINES = 5  # per server at the compared batch; fewer say too little about a step
BOOTSTRAP_BLOCKS = 20
RESAMPLES = 2000
ONE_STEP_ARG = "--server-arg=--decode-log-interval=1"

# Each term: what it is in words, and what a user can try when it holds EAGLE-3 back most.
TERMS: dict[str, tuple[str, str]] = {
    "acceptance": ("acceptance",
                   "a better-trained draft head, or the chat template the head was trained with"),
    "step": ("the speculative step (draft forwards and the verify)",
             "fewer draft steps (--spec-steps) or a cheaper verify attention backend "
             "(--attention-backend)"),
    "rest": ("the rest (prefill, admission, the frontend)",
             "the frontend and prefill: the chat template and tokenizer, --chunked-prefill-size"),
}


class ExplainError(UserError, ValueError):
    """A run `specbench explain` cannot read; one line with the fix."""


@dataclass(frozen=True)
class LevelExplanation:
    """One level of one prompt set, split into its terms (None where not measured)."""

    concurrency: int
    tok_s_ratio: float  # EAGLE-3 / baseline output tok/s
    tok_s_ratio_interval: tuple[float, float]
    accept_length: float | None  # tokens per verify
    max_accept_length: int | None  # K + 1: every draft accepted
    batch: int | None = None  # the running batch both steps were read at
    spec_step_ms: float | None = None
    plain_step_ms: float | None = None
    steady_lines: tuple[int, int] = (0, 0)  # (speculative, plain) lines at that batch
    step_ratio: float | None = None  # spec step / plain step
    step_ratio_interval: tuple[float, float] | None = None
    rest: float | None = None
    rest_interval: tuple[float, float] | None = None
    break_even_accept: float | None = None
    break_even_interval: tuple[float, float] | None = None
    largest: str | None = None  # "acceptance" | "step" | "rest"

    @property
    def step_term(self) -> float | None:
        """plain step / speculative step: the factor of R the step costs."""
        return 1.0 / self.step_ratio if self.step_ratio else None


@dataclass(frozen=True)
class LevelProfile:
    """Both servers' profiled steps at one level (None: that server was not profiled there)."""

    concurrency: int
    spec: PointProfile | None
    plain: PointProfile | None
    log_step_ratio: float | None = None  # the logs' speculative step / plain step there

    def _ratio(self, ms: Callable[[StepSplit], float]) -> float | None:
        spec = self.spec.step if self.spec else None
        plain = self.plain.step if self.plain else None
        if spec is None or plain is None or ms(plain) <= 0:
            return None
        return ms(spec) / ms(plain)

    @property
    def step_ratio(self) -> float | None:
        """The profile's speculative step over its plain one (slowest ranks' steps, wall)."""
        return self._ratio(lambda split: split.step_ms)

    @property
    def kernel_ratio(self) -> float | None:
        """The same over the steps' GPU time (host idle left out): what compares with the logs'
        ratio, since the profiler's tracing lengthens the host's share of a step."""
        return self._ratio(lambda split: split.kernel_ms)


@dataclass(frozen=True)
class SetExplanation:
    prompt_set: str
    speculative: str  # the configuration explained against the baseline
    levels: list[LevelExplanation]
    notes: list[str] = field(default_factory=list)
    profiles: list[LevelProfile] = field(default_factory=list)


# -- the arithmetic -----------------------------------------------------------------------------

def shortfalls(accept: float, max_accept: int | None, step_ratio: float,
               rest: float) -> dict[str, float]:
    """How far each term sits from its ideal, on the log scale (0: nothing held back)."""
    return {
        "acceptance": math.log(max_accept / accept) if max_accept and accept > 0 else 0.0,
        "step": max(0.0, math.log(step_ratio)),
        "rest": max(0.0, -math.log(rest)) if rest > 0 else 0.0,
    }


def largest_term(accept: float, max_accept: int | None, step_ratio: float, rest: float) -> str:
    found = shortfalls(accept, max_accept, step_ratio, rest)
    return max(found, key=lambda term: found[term])


def _block_means(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Means of `values` (in log order) resampled by contiguous blocks."""
    blocks = np.array_split(values, min(BOOTSTRAP_BLOCKS, len(values)))
    sums = np.array([b.sum() for b in blocks])
    counts = np.array([len(b) for b in blocks], dtype=float)
    picks = rng.integers(0, len(blocks), size=(resamples, len(blocks)))
    return np.asarray(sums[picks].sum(axis=1) / counts[picks].sum(axis=1))


def _compared_batch(spec: Sequence[DecodeInterval], plain: Sequence[DecodeInterval]) -> int | None:
    """The running batch both servers logged most steady lines at (the fewer side counts)."""
    a, b = Counter(i.batch for i in spec), Counter(i.batch for i in plain)
    shared = [(min(a[k], b[k]), k) for k in set(a) & set(b)]
    return max(shared)[1] if shared else None


def explain_level(
    c: int, ratio: float, ratio_se_log: float, ratio_df: int, accept: float | None,
    max_accept: int | None, spec: Sequence[DecodeInterval], plain: Sequence[DecodeInterval],
    rng: np.random.Generator, resamples: int = RESAMPLES,
) -> LevelExplanation:
    """One level from its tok/s ratio (and its log-scale error) and both servers' decode lines."""
    r_draws = draw_log_ratios([math.log(ratio)], [ratio_se_log], [ratio_df], rng, resamples)[:, 0]
    base = LevelExplanation(c, ratio, percentile_interval(r_draws, ratio), accept, max_accept)
    steady_spec = [i for i in spec if i.steady]
    steady_plain = [i for i in plain if i.steady]
    batch = _compared_batch(steady_spec, steady_plain)
    if batch is None or accept is None or accept <= 0:
        return base
    s = np.array([i.step_ms for i in steady_spec if i.batch == batch])
    p = np.array([i.step_ms for i in steady_plain if i.batch == batch])
    base = LevelExplanation(**{**asdict(base), "batch": batch,
                               "steady_lines": (len(s), len(p))})
    if min(len(s), len(p)) < MIN_STEADY_LINES:
        return base
    q = float(s.mean() / p.mean())
    q_draws = _block_means(s, rng, resamples) / _block_means(p, rng, resamples)
    rest = ratio * q / accept
    rest_draws = r_draws * q_draws / accept
    return LevelExplanation(
        **{**asdict(base),
           "spec_step_ms": float(s.mean()), "plain_step_ms": float(p.mean()),
           "step_ratio": q, "step_ratio_interval": percentile_interval(q_draws, q),
           "rest": rest, "rest_interval": percentile_interval(rest_draws, rest),
           "break_even_accept": q / rest,
           "break_even_interval": percentile_interval(q_draws / rest_draws, q / rest),
           "largest": largest_term(accept, max_accept, q, rest)})


def _speculative_config(run: Run) -> str:
    modes = run.modes
    if "eagle3" in modes:
        return "eagle3"
    static = [m for m in modes if m.startswith("eagle3-k")]
    if static:
        return static[0]
    raise ExplainError(f"{run.path} has no EAGLE-3 points (configurations: {', '.join(modes)}); "
                       "explain compares eagle3 with baseline: sweep with --modes baseline,eagle3")


def _max_accept(run: Run, config: str) -> int | None:
    server = run.manifest.servers.get(config)
    argv = [str(a) for a in server.argv] if server else []
    tokens = flag_value(argv, "--speculative-num-draft-tokens")
    steps = flag_value(argv, "--speculative-num-steps")
    if tokens and tokens.isdigit():
        return int(tokens)
    return int(steps) + 1 if steps and steps.isdigit() else None


def _lines_by_level(points: Mapping[PointKey, list[DecodeInterval]],
                    prompt_set: str) -> dict[int, list[DecodeInterval]]:
    out: dict[int, list[DecodeInterval]] = {}
    for key, lines in sorted(points.items(), key=lambda kv: kv[0].repeat):
        if key.prompt_set == prompt_set:
            out.setdefault(key.concurrency, []).extend(lines)
    return out


def explain_run(run: Run, *, seed: int = 0) -> list[SetExplanation]:
    """Every prompt set's levels; ExplainError (one line) for a run explain cannot read."""
    if run.open_loop:
        raise ExplainError(f"{run.path} is an open-loop run (request rates); explain reads "
                           "closed-loop levels: sweep with --concurrency")
    spec = _speculative_config(run)
    if BASELINE not in run.modes:
        raise ExplainError(f"{run.path} has no baseline points; explain compares {spec} with a "
                           f"plain server: sweep with --modes baseline,{spec}")
    spec_points, spec_why = point_intervals(run.manifest, run.path, spec)
    plain_points, plain_why = point_intervals(run.manifest, run.path, BASELINE)
    if spec_why or plain_why:
        raise ExplainError(f"{spec_why or plain_why}; explain reads each server's decode log "
                           "lines (servers/<config>.log): run it on the run directory a sweep "
                           "wrote, with its servers/ folder")
    intervals = {decode_log_interval(s.argv) for name, s in run.manifest.servers.items()
                 if name in (spec, BASELINE)}
    inflation, _ = slice_inflation(run.summary)
    requests = PairedRequests(run)
    max_accept = _max_accept(run, spec)
    rng = np.random.default_rng(seed)
    profiles, profile_notes = _profiles(run)
    out = []
    for prompt_set in run.prompt_sets:
        num = level_stats(run.summary, spec, prompt_set, inflation)
        den = level_stats(run.summary, BASELINE, prompt_set, inflation)
        levels = sorted(set(num) & set(den))
        if not levels:
            continue
        curve = ratio_curve(num, den, levels, requests, (spec, BASELINE), prompt_set)
        accept = mean_by_level(run.summary, spec, prompt_set, "accept_length")
        spec_lines = _lines_by_level(spec_points, prompt_set)
        plain_lines = _lines_by_level(plain_points, prompt_set)
        found = [explain_level(c, curve.ratio[i], curve.se_log[i], curve.df[i], accept.get(c),
                               max_accept, spec_lines.get(c, []), plain_lines.get(c, []), rng)
                 for i, c in enumerate(levels)]
        level_profiles = _level_profiles(profiles, spec, prompt_set, found)
        notes = _notes(found, intervals) + _profile_notes(level_profiles) + profile_notes
        out.append(SetExplanation(prompt_set, spec, found, notes, level_profiles))
    if not out:
        raise ExplainError(f"{run.path} has no level where both {spec} and baseline were "
                           "measured; measure both at the same --concurrency levels")
    return out


def _profiles(run: Run) -> tuple[dict[tuple[str, str, int], PointProfile], list[str]]:
    """The run's step profiles by (configuration, prompt set, level), and a note for files that
    cannot be read (a report never fails for want of them)."""
    try:
        found = read_profiles(run.path)
    except TraceError as exc:
        return {}, [str(exc)]
    return {(p.mode, p.prompt_set, p.concurrency): p for p in found}, []


def _level_profiles(profiles: Mapping[tuple[str, str, int], PointProfile], spec: str,
                    prompt_set: str, levels: Sequence[LevelExplanation]) -> list[LevelProfile]:
    log_ratio = {lv.concurrency: lv.step_ratio for lv in levels}
    chosen = sorted({c for mode, name, c in profiles
                     if name == prompt_set and mode in (spec, BASELINE)})
    return [LevelProfile(c, profiles.get((spec, prompt_set, c)),
                         profiles.get((BASELINE, prompt_set, c)), log_ratio.get(c))
            for c in chosen]


def _profile_notes(levels: Sequence[LevelProfile]) -> list[str]:
    out = []
    for lv in levels:
        for profile in (p for p in (lv.spec, lv.plain) if p is not None):
            if profile.error:
                out.append(f"no step profile of {profile.mode} at c={lv.concurrency}: "
                           f"{profile.error}")
            expected = profile.ranks_expected or 0
            if profile.ranks and len(profile.ranks) < expected:
                out.append(f"the step profile of {profile.mode} at c={lv.concurrency} has "
                           f"{len(profile.ranks)} of its {expected} ranks' traces: the slowest "
                           "rank may be among those missing")
    return out


def profile_words(lv: LevelProfile) -> str | None:
    """The profile's step ratio beside the logs' at one level; None where either server's
    profile is missing."""
    ratio, kernels = lv.step_ratio, lv.kernel_ratio
    if ratio is None or kernels is None or lv.spec is None or lv.plain is None:
        return None
    spec, plain = lv.spec.step, lv.plain.step
    assert spec is not None and plain is not None
    logs = "the logs give no step ratio there"
    if lv.log_step_ratio is not None:
        off = kernels / lv.log_step_ratio - 1
        logs = (f"the logs give {lv.log_step_ratio:.2f}, and the kernels' ratio is {abs(off):.0%} "
                f"{'below' if off < 0 else 'above'} it")
    return (f"c={lv.concurrency}: SGLang's profiler puts a speculative step's kernels at "
            f"{kernels:.2f}x a plain one's ({spec.kernel_ms:.2f} against {plain.kernel_ms:.2f} "
            f"ms of GPU time, the slowest of {len(lv.spec.ranks)} and {len(lv.plain.ranks)} "
            f"rank(s)); {logs}. With host idle the profiled steps took {spec.step_ms:.2f} and "
            f"{plain.step_ms:.2f} ms ({ratio:.2f}x): the profiler's tracing slows the host, so "
            "its idle is longer than the server's.")


def _notes(levels: Sequence[LevelExplanation], log_intervals: set[int]) -> list[str]:
    short = [lv.concurrency for lv in levels if lv.step_ratio is None]
    if not short:
        return []
    shown = ", ".join(map(str, short))
    head = (f"too few steady decode log lines (one decode step with nothing else between two "
            f"lines) at c = {shown}")
    if set(log_intervals) == {1}:  # one-step lines already: prefills land between most of them
        return [f"{head}: a prefill ran between nearly every two decode steps there; a longer "
                "window (--window-s) holds more steady steps"]
    every = ", ".join(map(str, sorted(log_intervals))) or "40"
    return [f"{head}: the servers logged every {every} decode steps, and at load nearly every "
            f"such interval holds a prefill; sweep again with {ONE_STEP_ARG} for one-step lines"]


# -- words --------------------------------------------------------------------------------------

def level_words(lv: LevelExplanation) -> str | None:
    """The largest term at one level in words, with what to try; None where not measured."""
    if lv.largest is None or lv.step_ratio is None or lv.accept_length is None:
        return None
    assert lv.break_even_accept is not None and lv.rest is not None
    name, fix = TERMS[lv.largest]
    step = f"a speculative step costs {lv.step_ratio:.2f}x a plain one at batch {lv.batch}"
    of = f" (of {lv.max_accept_length})" if lv.max_accept_length else ""
    verdict = "clear" if lv.accept_length >= lv.break_even_accept else "fall short of"
    accept = (f"{lv.accept_length:.2f} tokens per verify{of} {verdict} the break-even "
              f"{lv.break_even_accept:.2f}")
    if lv.largest == "acceptance":
        why = f"{accept}; {step} (the draft's forwards and the verify)"
    elif lv.largest == "step":
        why = f"{step}; {accept}"
    else:
        why = (f"EAGLE-3 makes {lv.rest:.2f}x what its decode steps alone would against the "
               f"plain server, as fewer decode steps carry the same prefills; {accept}")
    return f"c={lv.concurrency}: the largest term is {name}: {why}; try {fix}."


def lowest_level_sentence(sets: Sequence[SetExplanation]) -> str | None:
    """One sentence for the finding where EAGLE-3 loses at its set's lowest level; None where
    it wins there everywhere or nothing was measured."""
    parts = []
    for s in sets:
        lv = s.levels[0] if s.levels else None
        if lv is None or lv.tok_s_ratio >= 1.0 or lv.largest is None:
            continue
        assert lv.step_ratio is not None and lv.accept_length is not None
        parts.append(f"{s.prompt_set} at c={lv.concurrency} ({lv.tok_s_ratio:.2f}x the plain "
                     f"server): a speculative step costs {lv.step_ratio:.2f}x a plain one and "
                     f"{lv.accept_length:.2f} tokens per verify do not pay for it (break-even "
                     f"{lv.break_even_accept:.2f}); the largest term is {TERMS[lv.largest][0]}")
    if not parts:
        return None
    return "Why EAGLE-3 loses at the lowest load measured: " + "; ".join(parts) + "."


def _crossing(levels: Sequence[LevelExplanation]) -> tuple[LevelExplanation, LevelExplanation,
                                                             float] | None:
    """The first pair of explained levels where EAGLE-3 falls from at least the plain server's
    tok/s to below it, and where between them it ties (log-linear in c and in the ratio)."""
    shown = [lv for lv in levels if lv.step_ratio is not None and lv.accept_length]
    for low, high in pairwise(shown):
        if low.tok_s_ratio >= 1.0 > high.tok_s_ratio:
            a, b = math.log(low.tok_s_ratio), math.log(high.tok_s_ratio)
            frac = a / (a - b)
            c = math.exp(math.log(low.concurrency)
                         + frac * (math.log(high.concurrency) - math.log(low.concurrency)))
            return low, high, c
    return None


def crossing_words(s: SetExplanation) -> str | None:
    """Why EAGLE-3 stops paying where it does: between the two levels that bracket its tie with
    the plain server, which term's change moved it below; None where no pair brackets it."""
    found = _crossing(s.levels)
    if found is None:
        return None
    low, high, c = found
    assert low.step_ratio and high.step_ratio and low.accept_length and high.accept_length
    assert low.rest and high.rest
    # log(R) = log(A) - log(step ratio) + log(rest): each term's share of R's fall
    moved = {"acceptance": math.log(high.accept_length / low.accept_length),
             "step": -math.log(high.step_ratio / low.step_ratio),
             "rest": math.log(high.rest / low.rest)}
    mover = min(moved, key=lambda term: moved[term])
    words = (f"{s.prompt_set}: {s.speculative} ties the plain server at about c = {c:.0f} "
             f"(log-linear between {low.concurrency} and {high.concurrency}). From "
             f"{low.concurrency} to {high.concurrency} its tok/s over the plain server's falls "
             f"from {low.tok_s_ratio:.2f} to {high.tok_s_ratio:.2f}: tokens per verify "
             f"{low.accept_length:.2f} to {high.accept_length:.2f}, a speculative step "
             f"{low.step_ratio:.2f}x to {high.step_ratio:.2f}x a plain one, the rest "
             f"{low.rest:.2f} to {high.rest:.2f}; the break-even acceptance rises from "
             f"{low.break_even_accept:.2f} to {high.break_even_accept:.2f}. "
             f"{TERMS[mover][0][0].upper() + TERMS[mover][0][1:]} moved it below: its "
             f"change alone multiplies EAGLE-3's ratio by {math.exp(moved[mover]):.2f}.")
    profiled = next((lv for lv in s.profiles if lv.concurrency == high.concurrency
                     and lv.spec is not None and lv.spec.step is not None
                     and lv.plain is not None and lv.plain.step is not None), None)
    if profiled is not None:
        assert profiled.spec is not None and profiled.plain is not None
        spec, plain = profiled.spec.step, profiled.plain.step
        assert spec is not None and plain is not None
        kinds = {k: v for k, v in spec.kinds_ms.items() if k not in ("idle", "prefill")}
        top = max(kinds, key=lambda k: kinds[k])
        words += (f" At c={high.concurrency} a speculative step's kernels take "
                  f"{spec.kernel_ms:.2f} ms against a plain step's {plain.kernel_ms:.2f}, "
                  f"{kinds[top]:.2f} ms of them {top.replace('_', ' ')}.")
    return words


def to_json(sets: Sequence[SetExplanation]) -> dict[str, Any]:
    return {
        "explain_version": EXPLAIN_VERSION,
        "finding": lowest_level_sentence(sets),
        "prompt_sets": {
            s.prompt_set: {
                "speculative": s.speculative,
                "baseline": BASELINE,
                "levels": [{**asdict(lv), "step_term": lv.step_term, "words": level_words(lv)}
                           for lv in s.levels],
                "crossing": crossing_words(s),
                "notes": s.notes,
                "profiles": [{"concurrency": lv.concurrency,
                              "step_ratio": lv.step_ratio,
                              "kernel_ratio": lv.kernel_ratio,
                              "log_step_ratio": lv.log_step_ratio,
                              "words": profile_words(lv),
                              s.speculative: lv.spec.to_json() if lv.spec else None,
                              BASELINE: lv.plain.to_json() if lv.plain else None}
                             for lv in s.profiles],
            }
            for s in sets
        },
    }


def write_explain(run: Run, *, seed: int = 0) -> tuple[list[SetExplanation], Path]:
    """Explain the run and write <run>/explain.json atomically."""
    sets = explain_run(run, seed=seed)
    return sets, write_json(run.path / EXPLAIN_FILE, to_json(sets))
