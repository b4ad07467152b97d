"""Crossover, its uncertainty, the disable threshold, and the dynamic-disable check.

This is where a sweep becomes an answer. Per prompt set:

* **Ratio.** r(c) = output tok/s of EAGLE-3 / output tok/s of the baseline at each concurrency
  c measured in both modes, each the mean over repeats.
* **Crossover.** c* is where r crosses 1 *from above*: the last level where EAGLE-3 is at
  least as fast (r >= 1) and the next level, where it is behind, bracket it, and c* is the
  linear interpolation of r in log2 c between them. Taking the *last* such bracket means every
  measured level beyond c* has r < 1, so a noisy curve that dips below 1 and comes back picks
  the crossing after which EAGLE-3 stays behind (the notes say when that happened). The
  crossing is *confirmed* when a further level exists beyond the bracket (r < 1 there too);
  a crossing between the two top levels is reported but marked unconfirmed.
  Outcomes: ``crossover``, ``eagle3_never_wins`` (r < 1 everywhere), ``eagle3_always_wins``
  (r >= 1 at the top level, so no switch-off is warranted within the measured range).
* **Uncertainty.** Each level's tok/s gets a sampling distribution: with >= 2 repeats, a
  Student t around the mean with the standard error of the repeats (n - 1 degrees of
  freedom; run-to-run spread is the noise that matters); with one repeat, a normal whose
  standard error comes from the point's 95 % bootstrap CI over requests
  (``output_tok_s_ci_low/high``; a point whose window held no request has none, and then no
  spread). A seeded parametric bootstrap (:func:`specbench.stats.draw_curves`)
  then draws whole baseline and EAGLE-3 curves, applies the same crossing rule to each, and
  reports the 2.5-97.5 percentiles of c* (draws without a crossing count as the edge of the
  grid they fall off), the per-level ratio band, and the share of draws that agree with the
  outcome (``outcome_support``).
* **Threshold.** SGLang switches drafting off by *batch size* (running requests), not by
  client concurrency, so c* is mapped to the server's measured mean running requests
  (``server_running_reqs_mean``, mean of baseline and EAGLE-3, interpolated log-log in c; c
  itself where the server did not report it, and at most c, since c closed-loop users cannot
  keep more requests running). The threshold is the smallest whole batch size
  at or above that point: at T and beyond the baseline is faster, below it EAGLE-3 is.
  ``eagle3_never_wins`` gives T = 1 (never draft), ``eagle3_always_wins`` gives the largest
  measured concurrency + 1 (draft everywhere that was measured).
* **Recommended threshold.** The minimum over prompt sets: a server cannot tell workloads
  apart by batch size, and drafting above any set's crossover loses throughput on that set,
  so the lowest threshold is the one that never makes a measured workload slower than the
  baseline (it gives up some EAGLE-3 gain on the sets that cross later).
* **Envelope efficiency.** With a dynamic-disable run, E(c) = tok/s(dynamic) /
  max(tok/s(baseline), tok/s(eagle3)): 1.0 means the switch captures the better of both
  static modes. Dynamic levels outside the static grid (the T-1, T, T+1 straddle levels)
  use static curves interpolated log-log in c and are listed as interpolated.

:func:`analyze` returns what ``analysis.json`` holds (keys are strings, no NaN), so the
in-memory result and the file read back by :func:`specbench.results.load_run` are the same.
The crossing rule is :func:`specbench.stats.find_crossing`, which the regression gate calls too.
:func:`point_means` is the per-level view of a run shared by the figures, report and notebook.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from specbench.engines.argv import adaptive_config  # the adaptive JSON's format, printed here
from specbench.errors import UserError
from specbench.results import Run
from specbench.results.store import write_json
from specbench.stats import (
    OUTCOMES,
    Crossing,
    crossings,
    draw_curves,
    find_crossing,
    finite_or_none,
    se_from_ci95,
)

ANALYSIS_VERSION = 1
ANALYSIS_FILE = "analysis.json"
STATIC_MODES: tuple[str, str] = ("baseline", "eagle3")
BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
COMBINE_RULE = (
    "minimum over prompt sets: a server cannot tell workloads apart by batch size, and drafting "
    "above any set's crossover loses throughput on that set"
)
_TAIL_PCT = (1 - CONFIDENCE) / 2 * 100  # each side of a percentile interval


class AnalysisError(UserError, ValueError):
    """A run that cannot be analysed; the message is one line naming the cause and the fix."""


@dataclass(frozen=True)
class LevelStats:
    """Mean output tok/s of one (mode, prompt set, concurrency) and its sampling spread."""

    concurrency: int
    mean_tok_s: float
    se_tok_s: float  # standard error of mean_tok_s; 0 when nothing says how noisy it is
    df: int  # degrees of freedom of a Student t; 0 means normal
    n_repeats: int
    method: str  # "repeats" | "ci_columns" | "none"


# ---------------------------------------------------------------------------------------------
# per-level statistics


def _level(value: Any) -> int:
    """A concurrency level from a summary cell or group key (a CSV round trip makes it 8.0)."""
    return int(float(value))


def level_stats(summary: pd.DataFrame, mode: str, prompt_set: str) -> dict[int, LevelStats]:
    """Mean tok/s over repeats per concurrency, with the spread the bootstrap draws from."""
    rows = summary[(summary["mode"] == mode) & (summary["prompt_set"] == prompt_set)]
    rows = rows[pd.to_numeric(rows["output_tok_s"], errors="coerce").notna()]
    out: dict[int, LevelStats] = {}
    for c, group in rows.groupby("concurrency"):
        values = pd.to_numeric(group["output_tok_s"], errors="coerce").to_numpy(float)
        mean = float(values.mean())
        n = len(values)
        if n >= 2:
            se, df, method = float(values.std(ddof=1) / math.sqrt(n)), n - 1, "repeats"
        else:
            row = group.iloc[0]
            lo = finite_or_none(row.get("output_tok_s_ci_low"))
            hi = finite_or_none(row.get("output_tok_s_ci_high"))
            if lo is not None and hi is not None:
                se, method = se_from_ci95(lo, hi), "ci_columns"
            else:
                se, method = 0.0, "none"
            df = 0
        level = _level(c)
        out[level] = LevelStats(level, mean, max(se, 0.0), df, n, method)
    return out


def mean_by_level(
    summary: pd.DataFrame, mode: str, prompt_set: str, column: str,
) -> dict[int, float]:
    """Mean of a summary column over repeats per concurrency (NaN rows ignored)."""
    rows = summary[(summary["mode"] == mode) & (summary["prompt_set"] == prompt_set)]
    if column not in rows.columns or rows.empty:
        return {}
    values = pd.to_numeric(rows[column], errors="coerce")
    means = values.groupby(rows["concurrency"]).mean()
    return {_level(c): float(v) for c, v in means.items() if finite_or_none(v) is not None}


def point_means(run: Run) -> pd.DataFrame:
    """Summary rows averaged over repeats: one row per (mode, prompt set, concurrency).

    Adds n_repeats, flagged (any repeat raised a flag), and tok_s_band_low/high: min/max over
    repeats when there are >= 2 (the run-to-run spread), else the point's 95 % bootstrap CI
    when the run recorded it.
    """
    summary = run.summary.copy()
    numeric = [c for c in summary.columns
               if c not in ("mode", "prompt_set", "concurrency", "repeat", "flags")]
    for col in numeric:
        summary[col] = pd.to_numeric(summary[col], errors="coerce")
    keys = ["mode", "prompt_set", "concurrency"]
    grouped = summary.groupby(keys, sort=True)
    means = grouped[numeric].mean()
    tok_s = grouped["output_tok_s"]
    means["n_repeats"] = grouped["repeat"].count()
    means["flagged"] = (summary["flags"].astype(str).str.strip() != "").groupby(
        [summary[k] for k in keys]).any()
    means["tok_s_min"], means["tok_s_max"] = tok_s.min(), tok_s.max()
    means = means.reset_index()
    many = means["n_repeats"] >= 2
    ci_low = means.get("output_tok_s_ci_low", pd.Series(np.nan, index=means.index))
    ci_high = means.get("output_tok_s_ci_high", pd.Series(np.nan, index=means.index))
    means["tok_s_band_low"] = np.where(many, means["tok_s_min"], ci_low)
    means["tok_s_band_high"] = np.where(many, means["tok_s_max"], ci_high)
    return means


# ---------------------------------------------------------------------------------------------
# threshold


def _batch_sizes(
    summary: pd.DataFrame, prompt_set: str, levels: list[int],
) -> tuple[list[float], list[int]]:
    """Measured mean running requests per level (mean over the static modes; c when absent).

    c closed-loop users cannot keep more than c requests running, so a larger measurement is
    capped at c; the levels where that happened are returned so the analysis can say so.
    """
    per_mode = [mean_by_level(summary, m, prompt_set, "server_running_reqs_mean")
                for m in STATIC_MODES]
    out: list[float] = []
    over: list[int] = []
    for c in levels:
        measured = [m[c] for m in per_mode if c in m and m[c] > 0]
        batch = float(np.mean(measured)) if measured else float(c)
        if batch > 1.02 * c:
            over.append(c)
        out.append(min(batch, float(c)))
    return out, over


def _batch_at(levels: list[int], batch: list[float], concurrency: float) -> float:
    # Log-log interpolation: where the server runs b = c it returns c itself.
    log2_b = np.interp(math.log2(concurrency), np.log2(levels), np.log2(batch))
    return float(2.0 ** log2_b)


def _threshold_from_batch(batch_size: float) -> int:
    # The smallest whole batch size at or above the crossing (the tolerance keeps 37.0 at 37).
    return max(1, math.ceil(batch_size - 1e-9))


def threshold_levels(threshold: int, levels: list[int] | tuple[int, ...]) -> list[int]:
    """Extra concurrency levels T-1, T, T+1 not yet in `levels`, for the dynamic straddle check.

    Closed-loop users keep about c requests running, so these levels put the dynamic server's
    batch size just below, at and just above the switch. Levels below 1 or above the grid's top
    are left out: the servers' max running requests is sized to the grid, so a higher level
    would be capped by the server rather than measure the switch.
    """
    top = max(levels) if levels else threshold + 1
    present = set(levels)
    return [c for c in (threshold - 1, threshold, threshold + 1)
            if 1 <= c <= top and c not in present]


def applied_threshold(run: Run, prompt_set: str | None = None) -> int | None:
    """The threshold the run's dynamic server used, as the manifest records it (None if none).

    With `prompt_set`, the one that set's dynamic server used (auto sweeps run each prompt
    set's dynamic server with that set's own threshold).
    """
    manifest = run.manifest
    record = manifest.threshold
    if prompt_set is not None and record is not None and prompt_set in record.per_prompt_set:
        return int(record.per_prompt_set[prompt_set])
    dynamic = manifest.servers.get("dynamic")
    for value in (dynamic.threshold if dynamic else None,
                  record.value if record else None,
                  manifest.config.threshold):
        if value is not None:
            return int(value)
    return None


def _stored_or_fresh(run: Run) -> dict[str, Any]:
    stored = run.analysis
    if stored is not None and stored.get("analysis_version") == ANALYSIS_VERSION:
        return stored
    return analyze(run)


def current_analysis(run: Run) -> dict[str, Any] | None:
    """The run's analysis: the one loaded or set on it, else computed; None if impossible.

    Readers that can show something without a crossover (plots, report of a baseline-only
    run) use this; `threshold` and the sweep call :func:`analyze` and let errors surface.
    """
    try:
        return _stored_or_fresh(run)
    except AnalysisError:
        return None


# ---------------------------------------------------------------------------------------------
# envelope efficiency


def _envelope(
    summary: pd.DataFrame, prompt_set: str, levels: list[int],
    base: dict[int, LevelStats], spec: dict[int, LevelStats],
) -> tuple[dict[str, float], list[int], list[int]]:
    """E(c) per dynamic level; also the levels interpolated and those outside the grid."""
    dynamic = mean_by_level(summary, "dynamic", prompt_set, "output_tok_s")
    log2_grid = np.log2(levels)
    # Throughput grows about as a power of c between levels, so interpolate in log-log.
    base_curve = np.log2([base[c].mean_tok_s for c in levels])
    spec_curve = np.log2([max(spec[c].mean_tok_s, 1e-9) for c in levels])
    efficiency: dict[str, float] = {}
    interpolated: list[int] = []
    outside: list[int] = []
    for c, tok_s in sorted(dynamic.items()):
        if c in base and c in spec:
            best = max(base[c].mean_tok_s, spec[c].mean_tok_s)
        elif levels[0] < c < levels[-1]:
            x = math.log2(c)
            best = 2.0 ** max(float(np.interp(x, log2_grid, base_curve)),
                              float(np.interp(x, log2_grid, spec_curve)))
            interpolated.append(c)
        else:
            outside.append(c)
            continue
        if best > 0:
            efficiency[str(c)] = round(tok_s / best, 4)
    return efficiency, interpolated, outside


# ---------------------------------------------------------------------------------------------
# one prompt set


def _c_words(value: float) -> str:
    """A concurrency for a sentence: whole from 9.5 up, else one decimal without a trailing 0."""
    return f"{value:.0f}" if value >= 9.5 else f"{value:.1f}".rstrip("0").rstrip(".")


def _claim(prompt_set: str, out: dict[str, Any], levels: list[int]) -> str:
    """What the curves show for one prompt set, without the advice."""
    grid = f"{levels[0]}–{levels[-1]}" if len(levels) > 1 else f"{levels[0]}"
    outcome = out["outcome"]
    if outcome == "crossover":
        lo, hi = out["interval"]
        return (f"EAGLE-3 wins below {_c_words(out['crossover_concurrency'])} concurrent requests "
                f"({prompt_set}; 95% interval {_c_words(lo)}–{_c_words(hi)})")
    if outcome == "eagle3_never_wins":
        return (f"EAGLE-3 never wins ({prompt_set}): the baseline is faster at every measured "
                f"level ({grid} concurrent requests)")
    return (f"EAGLE-3 wins at every measured level ({prompt_set}; {grid} concurrent requests), "
            "no crossover in range")


def _advice(threshold: int, top_level: int) -> str:
    """What to do with a threshold, in words."""
    if threshold <= 1:
        return "never draft (threshold 1)"
    if threshold > top_level:
        return f"keep drafting at every measured batch size (threshold {threshold})"
    return f"stop drafting at batch size {threshold}"


def bootstrap_ratios(
    levels: list[int], base: dict[int, LevelStats], spec: dict[int, LevelStats],
    *, seed: int, resamples: int,
) -> np.ndarray:
    """Seeded draws of whole r(c) curves (resamples x levels), see the module docstring."""
    rng = np.random.default_rng(seed)

    def draw(stats: dict[int, LevelStats]) -> np.ndarray:
        at = [stats[c] for c in levels]
        return draw_curves([s.mean_tok_s for s in at], [s.se_tok_s for s in at],
                           [s.df for s in at], rng, resamples)

    return draw(spec) / draw(base)


def _static_levels(
    run: Run, prompt_set: str, notes: list[str],
) -> tuple[dict[int, LevelStats], dict[int, LevelStats], list[int]]:
    """Both static modes' statistics and the levels they share where the baseline made tokens."""
    base = level_stats(run.summary, "baseline", prompt_set)
    spec = level_stats(run.summary, "eagle3", prompt_set)
    for mode, stats in (("baseline", base), ("eagle3", spec)):
        if not stats:
            raise AnalysisError(
                f"prompt set {prompt_set!r} has no {mode} points in {run.path}; measure them with "
                f"`specbench sweep --modes baseline,eagle3 --resume {run.path}`"
            )
    levels = sorted(set(base) & set(spec))
    if not levels:
        raise AnalysisError(
            f"prompt set {prompt_set!r}: baseline and eagle3 share no concurrency level in "
            f"{run.path}; measure both modes at the same levels (`--resume` fills missing points)"
        )
    dropped = [c for c in levels if base[c].mean_tok_s <= 0]
    if dropped:
        notes.append(f"levels with zero baseline throughput left out: {dropped}")
        levels = [c for c in levels if c not in dropped]
        if not levels:
            raise AnalysisError(
                f"prompt set {prompt_set!r}: the baseline produced no tokens at any level; "
                "check the baseline server log in servers/baseline.log"
            )
    return base, spec, levels


@dataclass(frozen=True)
class _Outcome:
    """What the outcome of one prompt set sets: its threshold and the points that decide it."""

    fields: dict[str, Any]  # keys of analysis.json only a crossover has
    threshold: int
    deciding: list[int]  # levels whose flags would put the outcome in doubt
    what: str  # those points, in words


def _outcome(
    crossing: Crossing, boot_c: np.ndarray, levels: list[int], batch: list[float],
    ratio: list[float], notes: list[str],
) -> _Outcome:
    """Threshold, interval (for a crossover) and the notes that belong to the outcome."""
    if crossing.outcome == "eagle3_never_wins":
        return _Outcome({}, 1, [levels[0]],
                        "the lowest-load points, where EAGLE-3 should win most,")
    if crossing.outcome == "eagle3_always_wins":
        if min(ratio) < 1.0:
            below = [c for c, r in zip(levels, ratio, strict=True) if r < 1.0]
            notes.append(f"r(c) dips below 1 at c={below} but EAGLE-3 is ahead again at the top "
                         "level; treated as noise, no switch-off")
        return _Outcome({}, levels[-1] + 1, [levels[-1]],
                        "the highest-load points, where the baseline should win,")
    assert crossing.crossover_concurrency is not None and crossing.bracket is not None
    c_star = crossing.crossover_concurrency
    lo, hi = (float(v) for v in np.percentile(boot_c, [_TAIL_PCT, 100 - _TAIL_PCT]))
    # Percentile intervals can miss a skewed point estimate; widen rather than exclude it.
    lo, hi = min(lo, c_star), max(hi, c_star)
    b_star = _batch_at(levels, batch, c_star)
    fields = {
        "crossover_concurrency": round(c_star, 2),
        "interval": [round(lo, 2), round(hi, 2)],
        "crossover_batch_size": round(b_star, 2),
        "threshold_interval": [_threshold_from_batch(_batch_at(levels, batch, lo)),
                               _threshold_from_batch(_batch_at(levels, batch, hi))],
    }
    if hi >= levels[-1] or lo <= levels[0]:
        notes.append(
            "the interval reaches the edge of the measured grid, so the crossing may lie "
            "outside it; add levels beyond the edge or repeats (--repeats 3)"
        )
    low_c, high_c = crossing.bracket
    if crossing.n_crossings > 1:
        notes.append(
            f"r(c) crosses 1 from above {crossing.n_crossings} times; the last crossing "
            f"(c={low_c}→{high_c}), after which EAGLE-3 stays behind, is used"
        )
    if not crossing.confirmed:
        notes.append(
            f"the crossing lies between the two highest levels ({low_c} and "
            f"{high_c}), so no further level confirms it; add a higher level"
        )
    return _Outcome(fields, _threshold_from_batch(b_star), [low_c, high_c],
                    "the points bracketing the crossover")


def _reliability_notes(
    summary: pd.DataFrame, prompt_set: str, decided: _Outcome, levels: list[int],
    methods: list[str], support: float,
) -> list[str]:
    """Notes on how far the outcome can be trusted: flags, a single level, no spread, support."""
    notes = []
    # Flags on the static points that decide the outcome.
    rows = summary[(summary["prompt_set"] == prompt_set)
                   & summary["mode"].isin(STATIC_MODES)
                   & summary["concurrency"].isin(decided.deciding)]
    raised = [f"{r.mode} c={r.concurrency}: {r.flags}" for r in rows.itertuples()
              if str(r.flags).strip()]
    if raised:
        notes.append(f"{decided.what} carry flags ({'; '.join(raised)}); check them (see the "
                     "report's Flags section) before trusting the outcome")
    if len(levels) == 1:
        notes.append(
            f"only one concurrency level (c={levels[0]}) was measured in both modes, so the "
            "crossover cannot be located; sweep several levels, e.g. --concurrency 1,8,64,250"
        )
    if methods == ["none"]:
        notes.append("no repeats, CI columns or per-request tokens: the interval has zero width")
    if support < 0.8:
        notes.append(f"only {support:.0%} of bootstrap curves agree with this outcome; "
                     "add repeats (--repeats 3) or lengthen the window")
    return notes


def analyze_prompt_set(
    run: Run, prompt_set: str, *, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict[str, Any]:
    """Outcome, c*, interval, threshold, ratio and envelope efficiency for one prompt set."""
    notes: list[str] = []
    base, spec, levels = _static_levels(run, prompt_set, notes)
    ratio = [spec[c].mean_tok_s / base[c].mean_tok_s for c in levels]
    crossing = find_crossing(levels, ratio)
    ratio_draws = bootstrap_ratios(levels, base, spec, seed=seed, resamples=resamples)
    boot_outcome, boot_c, _ = crossings(np.log2(np.asarray(levels, dtype=float)), ratio_draws)
    support = float(np.mean(boot_outcome == OUTCOMES.index(crossing.outcome)))
    methods = sorted({s.method for s in (*base.values(), *spec.values())
                      if s.concurrency in levels})
    batch, over = _batch_sizes(run.summary, prompt_set, levels)
    if over:
        notes.append(
            f"the server reported more running requests than there were users at c={over}; "
            "batch sizes were capped at c (check the server's running-requests metric)"
        )
    out: dict[str, Any] = {"outcome": crossing.outcome, "crossover_concurrency": None,
                           "interval": None, "confirmed": crossing.confirmed}
    decided = _outcome(crossing, boot_c, levels, batch, ratio, notes)
    out.update(decided.fields)
    notes += _reliability_notes(run.summary, prompt_set, decided, levels, methods, support)
    ratio_band = np.percentile(ratio_draws, [_TAIL_PCT, 100 - _TAIL_PCT], axis=0)
    envelope, interpolated, outside = _envelope(run.summary, prompt_set, levels, base, spec)
    if outside:
        notes.append(f"dynamic levels outside the static grid have no envelope value: {outside}")
    out.update(
        threshold_batch_size=decided.threshold,
        outcome_support=round(support, 3),
        interval_method=methods,
        levels=levels,
        ratio_by_concurrency={str(c): round(r, 4) for c, r in zip(levels, ratio, strict=True)},
        ratio_interval_by_concurrency={
            str(c): [round(float(ratio_band[0, i]), 4), round(float(ratio_band[1, i]), 4)]
            for i, c in enumerate(levels)
        },
        batch_size_by_concurrency={str(c): round(b, 2) for c, b in zip(levels, batch, strict=True)},
        envelope_efficiency=envelope,
        envelope_interpolated=interpolated,
        envelope_min=min(envelope.values()) if envelope else None,
        notes=notes,
    )
    out["claim"] = _claim(prompt_set, out, levels)
    out["sentence"] = f"{out['claim']}; {_advice(decided.threshold, levels[-1])}"
    return out


# ---------------------------------------------------------------------------------------------
# the whole run


def analyze(run: Run, *, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Any]:
    """The content of analysis.json for a run (see the module docstring for every rule)."""
    if run.summary.empty:
        raise AnalysisError(f"{run.path} has no measured points; run `specbench sweep` first")
    present = set(run.modes)
    for mode in STATIC_MODES:
        if mode not in present:
            raise AnalysisError(
                f"{run.path} has no {mode} points, and the crossover needs baseline and eagle3; "
                f"measure them with `specbench sweep --modes baseline,eagle3 --resume {run.path}`"
            )
    sets = {name: analyze_prompt_set(run, name, seed=seed, resamples=resamples)
            for name in run.prompt_sets}
    for name, found in sets.items():
        found["applied_threshold"] = applied_threshold(run, name)
    recommended = min(s["threshold_batch_size"] for s in sets.values())
    if len(sets) > 1:
        top = max(s["levels"][-1] for s in sets.values())
        finding = ("; ".join(s["claim"] for s in sets.values())
                   + f". Recommended: {_advice(recommended, top)} (the lowest over prompt sets).")
    else:
        finding = next(iter(sets.values()))["sentence"] + "."
    return {
        "analysis_version": ANALYSIS_VERSION,
        "finding": finding,
        "recommended_threshold": int(recommended),
        "combine_rule": COMBINE_RULE,
        "applied_threshold": applied_threshold(run),
        "bootstrap": {"resamples": resamples, "seed": seed, "confidence": CONFIDENCE},
        "prompt_sets": sets,
    }


def write_analysis(run: Run, *, seed: int = 0) -> dict[str, Any]:
    """Analyse the run and write <run>/analysis.json atomically; returns what was written."""
    result = analyze(run, seed=seed)
    write_json(run.path / ANALYSIS_FILE, result)
    run.analysis = result
    return result


def speculative_num_steps(run: Run) -> int:
    """K of the run's EAGLE-3 server (from the manifest's config)."""
    return run.manifest.config.server.speculative_num_steps


def threshold_summary(run: Run, analysis: dict[str, Any] | None = None) -> str:
    """Plain text for `specbench threshold RUN_DIR`: per set c*, interval, T, then the advice."""
    result = analysis if analysis is not None else _stored_or_fresh(run)
    lines = []
    for name, s in result["prompt_sets"].items():
        lines.append(f"{name}: {s['sentence']}")
        if s["outcome"] == "crossover":
            lo, hi = s["interval"]
            lines.append(
                f"  c* = {s['crossover_concurrency']:.1f} (95% interval {lo:.1f}–{hi:.1f}), "
                f"server batch size {s['crossover_batch_size']:.1f} -> threshold "
                f"{s['threshold_batch_size']} (interval {s['threshold_interval'][0]}–"
                f"{s['threshold_interval'][1]}), bootstrap support {s['outcome_support']:.0%}"
            )
        lines.extend(f"  note: {note}" for note in s["notes"])
    k = speculative_num_steps(run)
    t = result["recommended_threshold"]
    rule = f" ({result['combine_rule']})" if len(result["prompt_sets"]) > 1 else ""
    lines.append(f"recommended threshold: {t}{rule}")
    if t <= 1:
        lines.append("SGLang: run without speculative decoding, or draft zero steps at every "
                     "batch size:")
    else:
        lines.append(f"SGLang: draft {k} steps below batch size {t}, none from {t} on:")
    lines.append("  --speculative-adaptive --speculative-adaptive-config FILE  with FILE = "
                 + json.dumps(adaptive_config(k, t)))
    return "\n".join(lines)


