"""One crossing decision: where EAGLE-3's curve falls below another configuration's.

The two decisions of a prompt set are the same computation on different pairs
(:data:`PLAIN` and :data:`ONE_SERVER`): r(c) = EAGLE-3 tok/s / other tok/s at the levels both
measured, c* by :func:`specbench.stats.find_crossing`, its interval from draws of the ratio
curve (:mod:`.intervals`), and c* mapped to the batch size the two servers ran at.

Its notes tell who chose the levels (:class:`Grid`): a note asks for another level only where
the user listed the grid (``--concurrency`` with the dense plan). Where the tool chose them
(the adaptive plan placing levels by bisection, or the default grid), the plan already stopped
where the decision was bracketed, so a note says only what a crossing at the grid's edge means.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.analysis.curves import (
    AnalysisError,
    LevelStats,
    batch_at,
    batch_sizes,
    threshold_from_batch,
)
from specbench.analysis.intervals import (
    PairedRequests,
    RatioCurve,
    band,
    percentile_interval,
    ratio_curve,
    ratio_draws,
)
from specbench.results.analysis import Decision
from specbench.stats import OUTCOMES, Crossing, crossings, find_crossing


@dataclass(frozen=True)
class Pair:
    """The configurations one decision compares: EAGLE-3 (num) against `den`."""

    num: str
    den: str
    ratio_name: str  # how notes call the ratio
    den_words: str  # how notes call the other configuration


PLAIN = Pair("eagle3", "baseline", "r(c)", "the baseline")
ONE_SERVER = Pair("eagle3", "zero-step", "EAGLE-3 / zero-step", "the zero-step path")


@dataclass(frozen=True)
class Grid:
    """The levels a run could measure, and who chose the ones it measured.

    `listed`: the user listed the levels and a dense plan measured each (a ``--concurrency``
    other than the default); only then may a note ask for another level. `adaptive`: the
    adaptive plan chose the levels inside the grid itself, stopping once each decision was
    bracketed. The default grid is the tool's, whichever plan measured it.
    """

    levels: tuple[int, ...]
    listed: bool
    adaptive: bool = False

    @classmethod
    def of(cls, levels: Sequence[int], plan: str, default: Sequence[int]) -> Grid:
        grid = tuple(sorted(set(levels)))
        adaptive = plan == "adaptive"
        return cls(grid, not adaptive and grid != tuple(sorted(set(default))), adaptive)


def shared_levels(
    pair: Pair, prompt_set: str, num: dict[int, LevelStats], den: dict[int, LevelStats],
    where: str, notes: list[str],
) -> list[int]:
    """Levels both configurations measured where the denominator made tokens."""
    levels = sorted(set(num) & set(den))
    if not levels:
        raise AnalysisError(
            f"prompt set {prompt_set!r}: {pair.num} and {pair.den} share no concurrency level "
            f"in {where}; measure both at the same levels (`--resume` fills missing points)"
        )
    dropped = [c for c in levels if den[c].mean_tok_s <= 0]
    if dropped:
        notes.append(f"levels with zero {pair.den} throughput left out: {dropped}")
        levels = [c for c in levels if c not in dropped]
        if not levels:
            raise AnalysisError(
                f"prompt set {prompt_set!r}: the {pair.den} server produced no tokens at any "
                f"level; check its log in servers/{pair.den}.log"
            )
    return levels


def _edge_meaning(level: int, above: bool, grid: Grid) -> str:
    """What a 95% interval reaching `level`, the highest (`above`) or lowest level measured,
    means where the tool chose the levels. At the grid's edge it says only that: the tool
    measures nothing beyond its grid. Inside the grid, that repeats narrow the interval: the
    plan places levels, never repeats."""
    side = "above" if above else "below"
    at_edge = level >= grid.levels[-1] if above else level <= grid.levels[0]
    if not at_edge:
        return (f"the 95% interval reaches {level}, the {'highest' if above else 'lowest'} "
                f"level measured, so the crossing may lie {side} it; repeats (--repeats 3) "
                "narrow the interval")
    which = "largest" if above else "smallest"
    if not above and level <= 1:
        return (f"the 95% interval reaches {level}, the grid's {which} level: EAGLE-3 may not "
                "be ahead at any level")
    return (f"the 95% interval reaches {level}, the grid's {which} level: the crossing may lie "
            f"{side} it")


@dataclass(frozen=True)
class _Outcome:
    """What the outcome of one decision sets: its threshold and the points that decide it."""

    fields: Decision  # keys only a crossover has
    threshold: int
    deciding: list[int]  # levels whose flags would put the outcome in doubt
    what: str  # those points, in words


# Below this share of the users running, the server held requests back (a running-request or
# KV limit) rather than losing a few to the gaps between a user's answers.
FULL_BATCH_SHARE = 0.9


def switch_batch(concurrency: float, mean_batch: float) -> float:
    """The batch size an adaptive server switches at for a crossing at `concurrency`.

    c closed-loop users keep c requests running at most decode steps: the mean running
    requests is lower by the time a user's next request spends in prefill, which the per-step
    switch never sees. A threshold at the mean batch stops drafting a level or two before
    EAGLE-3 falls behind, so the threshold is c* itself, unless the server ran far fewer
    requests than users (it queued them), where the mean batch is what it switches on.
    """
    return concurrency if mean_batch >= FULL_BATCH_SHARE * concurrency else mean_batch


def _threshold_at(concurrency: float, levels: list[int], batch: list[float]) -> int:
    return threshold_from_batch(switch_batch(concurrency, batch_at(levels, batch, concurrency)))


def chord_error_log2(levels: Sequence[int], ratio: Sequence[float],
                     bracket: tuple[int, int]) -> float | None:
    """How far, in log2 c, a crossing read off the chord between the two bracket levels can
    lie from where the curve itself crosses; None where nothing bounds the bend.

    Between two measured levels c* is read off a straight line in (log2 c, log r). The curve
    may bend there: with |curvature| at most k, it leaves the chord by up to k h^2 / 8 in
    log r over a bracket h doublings wide, which moves the crossing by that over the chord's
    slope. k is the largest bend of the measured curve over three adjacent levels that
    include a bracket level (a knee next to the bracket bends the bracket too). With fewer
    than three levels nothing bounds k: the crossing may then lie anywhere in the bracket.
    """
    x = np.log2(np.asarray(levels, dtype=float))
    y = np.log(np.maximum(np.asarray(ratio, dtype=float), 1e-9))
    i = list(levels).index(bracket[0])
    h, slope = x[i + 1] - x[i], (y[i + 1] - y[i]) / (x[i + 1] - x[i])
    bends = [2 * ((y[j + 1] - y[j]) / (x[j + 1] - x[j]) - (y[j] - y[j - 1]) / (x[j] - x[j - 1]))
             / (x[j + 1] - x[j - 1]) for j in (i, i + 1) if 1 <= j < len(x) - 1]
    if not bends or slope >= 0:
        return None
    return float(max(abs(b) for b in bends) * h * h / 8 / -slope)


def _with_chord(interval: tuple[float, float], bracket: tuple[int, int],
                error_log2: float | None, levels: Sequence[int]) -> tuple[float, float]:
    """The sampling interval widened on both sides by the chord's error (the two add: the
    draws move the chord, the bend moves the curve off it), within the levels measured (a
    draw that does not cross counts as the edge there too); unbounded, the whole bracket."""
    lo, hi = interval
    if error_log2 is None:
        return min(lo, bracket[0]), max(hi, bracket[1])
    factor = 2.0 ** error_log2
    return min(lo, max(levels[0], lo / factor)), max(hi, min(levels[-1], hi * factor))


def _crossover_fields(
    crossing: Crossing, boot_c: np.ndarray, levels: list[int], batch: list[float],
    ratio: list[float], pair: Pair, notes: list[str], grid: Grid,
) -> _Outcome:
    assert crossing.crossover_concurrency is not None and crossing.bracket is not None
    c_star = crossing.crossover_concurrency
    sampling = percentile_interval(boot_c, c_star)
    chord = chord_error_log2(levels, ratio, crossing.bracket)
    lo, hi = _with_chord(sampling, crossing.bracket, chord, levels)
    b_star = batch_at(levels, batch, c_star)
    fields: Decision = {
        "crossover_concurrency": round(c_star, 2),
        "interval": [round(lo, 2), round(hi, 2)],
        # The draws' interval alone, and the chord's share (None: nothing bounded the bend).
        "sampling_interval": [round(sampling[0], 2), round(sampling[1], 2)],
        "chord_error_log2": None if chord is None else round(chord, 4),
        "crossover_batch_size": round(b_star, 2),
        "threshold_interval": [_threshold_at(lo, levels, batch), _threshold_at(hi, levels, batch)],
    }
    if grid.listed and (hi >= levels[-1] or lo <= levels[0]):
        notes.append(
            "the interval reaches the edge of the measured grid, so the crossing may lie "
            "outside it; add levels beyond the edge or repeats (--repeats 3)"
        )
    elif not grid.listed:
        notes += [_edge_meaning(levels[-1], True, grid)] if hi >= levels[-1] else []
        notes += [_edge_meaning(levels[0], False, grid)] if lo <= levels[0] else []
    low_c, high_c = crossing.bracket
    if crossing.n_crossings > 1:
        notes.append(
            f"{pair.ratio_name} crosses 1 from above {crossing.n_crossings} times; the last "
            f"crossing (c={low_c}→{high_c}), after which EAGLE-3 stays behind, is used"
        )
    if not crossing.confirmed and grid.listed:
        # Where the tool chose the levels it stopped at the bracket on purpose: nothing to add.
        notes.append(
            f"the crossing lies between the two highest levels ({low_c} and "
            f"{high_c}), so no further level confirms it; add a higher level"
        )
    return _Outcome(fields, _threshold_at(c_star, levels, batch), [low_c, high_c],
                    "the points bracketing the crossover")


def _outcome(
    crossing: Crossing, boot_c: np.ndarray, levels: list[int], batch: list[float],
    ratio: list[float], pair: Pair, notes: list[str], grid: Grid,
) -> _Outcome:
    """Threshold, interval (for a crossover) and the notes that belong to the outcome."""
    if crossing.outcome == "eagle3_never_wins":
        if grid.listed and levels[0] > 1:
            notes.append(f"{pair.den_words} is as fast as EAGLE-3 already at {levels[0]}, the "
                         "smallest level listed; add a lower level (--concurrency) to see "
                         "whether EAGLE-3 wins below it")
        return _Outcome({}, 1, [levels[0]],
                        "the lowest-load points, where EAGLE-3 should win most,")
    if crossing.outcome == "eagle3_always_wins":
        if min(ratio) < 1.0:
            below = [c for c, r in zip(levels, ratio, strict=True) if r < 1.0]
            notes.append(f"{pair.ratio_name} dips below 1 at c={below} but EAGLE-3 is ahead "
                         "again at the top level; treated as noise, no switch-off")
        if grid.listed:
            notes.append(f"EAGLE-3 still beats {pair.den_words} at {levels[-1]}, the largest "
                         "level listed, so the crossing lies above it; add a higher level "
                         "(--concurrency) to locate it")
        return _Outcome({}, levels[-1] + 1, [levels[-1]],
                        f"the highest-load points, where {pair.den_words} should win,")
    return _crossover_fields(crossing, boot_c, levels, batch, ratio, pair, notes, grid)


def _reliability_notes(
    summary: pd.DataFrame, prompt_set: str, pair: Pair, decided: _Outcome, levels: list[int],
    methods: list[str], support: float, grid: Grid,
) -> list[str]:
    """Notes on how far the outcome can be trusted: flags, a single level, no spread, support."""
    notes = []
    rows = summary[(summary["prompt_set"] == prompt_set)
                   & summary["mode"].isin((pair.num, pair.den))
                   & summary["concurrency"].isin(decided.deciding)]
    raised = [f"{r.mode} c={r.concurrency}: {r.flags}" for r in rows.itertuples()
              if str(r.flags).strip()]
    if raised:
        notes.append(f"{decided.what} carry flags ({'; '.join(raised)}); check them (see the "
                     "report's Flags section) before trusting the outcome")
    if len(levels) == 1:
        if grid.adaptive and len(grid.levels) > 1:
            fix = ("the adaptive plan placed no more (its --budget-gpu-min was spent, or the "
                   "run stopped: --resume continues it)")
        elif grid.listed or len(grid.levels) <= 1:
            fix = "sweep several levels, e.g. --concurrency 1,8,64,250"
        else:
            fix = ("at the grid's other levels one of the two has no point (--resume measures "
                   "the missing ones)")
        notes.append(
            f"only one concurrency level (c={levels[0]}) was measured in both {pair.num} and "
            f"{pair.den}, so the crossover cannot be located; {fix}"
        )
    if methods == ["none"]:
        notes.append("no repeats, time slices or CI columns: the interval has zero width")
    if support < 0.8:
        notes.append(f"only {support:.0%} of bootstrap curves agree with this outcome; "
                     "add repeats (--repeats 3) or lengthen the window")
    return notes


def _methods(curve: RatioCurve) -> list[str]:
    return sorted({part for m in curve.methods for part in m.split("+")})


def decide(
    summary: pd.DataFrame, prompt_set: str, pair: Pair, stats: tuple[dict[int, LevelStats],
                                                                     dict[int, LevelStats]],
    levels: list[int], *, seed: int, resamples: int, requests: PairedRequests | None = None,
    grid: Grid | None = None, launch_sd: float = 0.0,
) -> Decision:
    """The crossing of EAGLE-3 with `pair.den` for one prompt set, as analysis.json keys.

    `grid` says who chose the levels (None: the user, the levels measured being theirs);
    `launch_sd` is how far the ratio's log moves between launches (0: not measured)."""
    notes: list[str] = []
    grid = grid if grid is not None else Grid(tuple(levels), listed=True)
    curve = ratio_curve(stats[0], stats[1], levels, requests, (pair.num, pair.den), prompt_set)
    crossing = find_crossing(levels, curve.ratio)
    draws = ratio_draws(curve, seed=seed, resamples=resamples, launch_sd=launch_sd)
    boot_outcome, boot_c, _ = crossings(np.log2(np.asarray(levels, dtype=float)), draws)
    support = float(np.mean(boot_outcome == OUTCOMES.index(crossing.outcome)))
    batch, over = batch_sizes(summary, prompt_set, levels, (pair.num, pair.den))
    if over:
        notes.append(
            f"the server reported more running requests than there were users at c={over}; "
            "batch sizes were capped at c (check the server's running-requests metric)"
        )
    decided = _outcome(crossing, boot_c, levels, batch, curve.ratio, pair, notes, grid)
    methods = _methods(curve) + (["between_launches"] if launch_sd > 0 else [])
    notes += _reliability_notes(summary, prompt_set, pair, decided, levels, methods, support,
                                grid)
    ratio_band = band(draws)
    return {
        "outcome": crossing.outcome,
        "crossover_concurrency": None,
        "interval": None,
        "confirmed": crossing.confirmed,
        **decided.fields,
        "threshold_batch_size": decided.threshold,
        "outcome_support": round(support, 3),
        "interval_method": methods,
        "levels": levels,
        "ratio_by_concurrency": {str(c): round(r, 4)
                                 for c, r in zip(levels, curve.ratio, strict=True)},
        "ratio_interval_by_concurrency": {
            str(c): [round(float(ratio_band[0, i]), 4), round(float(ratio_band[1, i]), 4)]
            for i, c in enumerate(levels)
        },
        "batch_size_by_concurrency": {str(c): round(b, 2)
                                      for c, b in zip(levels, batch, strict=True)},
        "notes": notes,
    }
