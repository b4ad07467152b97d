"""The tuned schedule: the best draft length K per level, as batch-size slots.

From the static curves of one prompt set, EAGLE-3 at each K measured (``eagle3`` at the run's
K, ``eagle3-k<K>``) and ``zero-step`` as K = 0:

* **Per level** the K with the highest tok/s (a tie goes to the smaller K: less work for the
  same tokens), compared as the efficiency compares them: each K against the level's fastest
  window by the same requests' durations, where the points have per-request rows. Picking by
  the windows' tok/s and judging by durations disagreed by up to 5% (agentic, 8 users, about
  55 requests a window: K=2 and K=5 tied by windows, K=5 2.9% faster by durations), so the
  tuned server could lose to the K it did not pick. A run of levels whose best K differs from
  the K on both sides of it by less than :data:`SMOOTH_TOLERANCE` at each of its levels takes
  the neighbours' K (``measured_best`` keeps the raw winners): such a blip is within a level's
  run-to-run noise (1-3% on the simulator, benchmarks/interval_calibration.py), and a slot a
  few batch sizes wide would switch the steps back and forth as the running batch fluctuates
  around it.
* **One drafting K.** The slots hold one K >= 1, plus zero-step where it is the faster: SGLang
  launches an adaptive server at its largest K and runs every other K from a runtime state built
  after the launch's, and on SGLang 0.5.17 such a state's steps took 23-43% longer than a static
  server's at the same K and tokens per verify (an H100, one step a log line, 1-64 running:
  lab/notes/gpu-runs.md, the `-launch-k` run), while neighbouring K differed by 1-14% there.
  Zero-step's curve is measured on such a server (launched at K, run at 0), so it carries that
  cost; the static curves of other K do not. The K kept is the one whose schedule (it, or
  zero-step where that is faster) has the best geometric mean over the levels of the fastest
  configuration's tok/s; ``measured_best`` keeps each level's own winner.
* **Slots.** Where the best K changes between two neighbouring levels, the two curves cross
  between them; the crossing is interpolated in log2 c (as the crossover is) and mapped to the
  servers' measured batch size (mean running requests of the candidates, at most c); the slot
  of the new K starts at the smallest whole batch size at or above it. The first slot starts at
  batch size 1, neighbouring slots with the same K are merged, and a slot that a later one
  would start before is dropped. Each slot gets one candidate in the adaptive JSON, so SGLang's
  EMA never moves it.
* **Efficiency** (once the tuned server was measured): tuned / max over the static
  configurations (each K and zero-step) per level, and tuned / sglang-default (SGLang's EMA
  schedule: ``--speculative-adaptive`` without a config) with its 95% interval per level (the
  two points' ratio spread, as the crossover's) and its geometric mean over levels.
* **The steps they ran** (``steps_by_accept``): per level, the static K whose tokens per verify
  are nearest the tuned server's and SGLang default's (zero-step: 1). SGLang logs only the EMA's
  moves, not the steps per batch; at a fixed acceptance a chain's tokens per verify grow with K,
  so they say which K a server ran, and where SGLang's EMA left the best K.

The slots need at least two K >= 1 (the several-K curves of ``specbench tune``); without them
there is no schedule (None).
"""

from __future__ import annotations

import itertools
import math

from specbench import configurations
from specbench.analysis.curves import (
    batch_at,
    batch_sizes,
    level_stats,
    mean_by_level,
    threshold_from_batch,
)
from specbench.analysis.efficiency import relative_to_best
from specbench.analysis.intervals import PairedRequests, band, ratio_curve, ratio_draws
from specbench.errors import ConfigError
from specbench.results import Run
from specbench.results.analysis import Schedule
from specbench.stats import geomean

SMOOTH_TOLERANCE = 0.02
# The tuned server should be within 3% of the best static configuration at every level (issue
# 40); the report gives the levels under it their intervals.
EFFICIENCY_TARGET = 0.97
INTERVAL_SEED, INTERVAL_DRAWS = 0, 2000  # tuned / sglang-default intervals: seeded, repeatable
TUNED = "tuned"
SGLANG_DEFAULT = "sglang-default"
ZERO_STEP = "zero-step"
ZERO = 0  # zero-step's K in the curves


def k_curves(run: Run, prompt_set: str) -> dict[int, str]:
    """K -> the static configuration measuring it for this set (zero-step is K = 0)."""
    default_k = run.manifest.config.server.speculative_num_steps
    present = set(run.summary.loc[run.summary["prompt_set"] == prompt_set, "mode"])
    out: dict[int, str] = {}
    for name in present:
        try:
            config = configurations.parse(str(name))
        except ConfigError:
            continue
        if config.kind == "eagle3" and not config.tree:  # a tree is not the chain of its K
            k = config.num_steps(default_k)
        elif config.name == ZERO_STEP:
            k = 0
        else:
            continue
        # `eagle3` and `eagle3-k<its K>` measure the same server; keep `eagle3`.
        if k not in out or name == "eagle3":
            out[k] = str(name)
    return dict(sorted(out.items()))


def _paired_curves(curves: dict[int, dict[int, float]], names: dict[int, str], prompt_set: str,
                   levels: list[int], requests: PairedRequests) -> dict[int, dict[int, float]]:
    """tok/s per K and level, each K scaled to the level's fastest window by the same
    requests' durations (the windows' own where a point has no per-request rows)."""
    out: dict[int, dict[int, float]] = {k: dict(curve) for k, curve in curves.items()}
    for c in levels:
        fastest = max(curves, key=lambda k: (curves[k][c], -k))
        for k in curves:
            ratio = None if k == fastest else requests.ratio((names[k], names[fastest]),
                                                             prompt_set, c)
            if ratio is not None:
                out[k][c] = curves[fastest][c] * ratio
    return out


def _switch_key(
    curves: dict[int, dict[int, float]], pair: tuple[int, int], between: tuple[int, int],
    levels: list[int], batch: list[float],
) -> int:
    """The first batch size of K `pair[1]`'s slot: where its curve overtakes K `pair[0]`'s."""
    (ka, kb), (a, b) = pair, between
    ra = curves[ka][a] / curves[kb][a]  # >= 1: ka is the best at a
    rb = curves[ka][b] / curves[kb][b]  # <= 1: kb is the best at b
    frac = (ra - 1.0) / (ra - rb) if ra != rb else 0.5
    frac = min(max(frac, 0.0), 1.0)
    x = math.log2(a) + frac * (math.log2(b) - math.log2(a))
    return threshold_from_batch(batch_at(levels, batch, 2.0 ** x))


def _one_drafting_k(curves: dict[int, dict[int, float]], levels: list[int]) -> dict[int, int]:
    """Per level one K >= 1 for all, or zero-step where it is faster (module docstring)."""
    top = {c: max(curve[c] for curve in curves.values()) for c in levels}

    def plan(k: int) -> dict[int, int]:
        return {c: 0 if ZERO in curves and curves[0][c] > curves[k][c] else k for c in levels}

    def score(k: int) -> float:
        chosen = plan(k)
        return geomean([curves[chosen[c]][c] / top[c] for c in levels])

    return plan(max((k for k in curves if k > 0), key=lambda k: (score(k), -k)))


def _smooth(curves: dict[int, dict[int, float]], best: dict[int, int],
            levels: list[int]) -> dict[int, int]:
    """The per-level K with noise blips taken out (see the module docstring)."""
    segments: list[tuple[int, list[int]]] = []
    for c in levels:
        if segments and segments[-1][0] == best[c]:
            segments[-1][1].append(c)
        else:
            segments.append((best[c], [c]))
    i = 1
    while i < len(segments) - 1:
        k, at = segments[i]
        neighbour = segments[i - 1][0]
        close = all(curves[neighbour][c] >= (1 - SMOOTH_TOLERANCE) * curves[k][c] for c in at)
        if neighbour == segments[i + 1][0] and close:
            merged = segments[i - 1][1] + at + segments[i + 1][1]
            segments[i - 1:i + 2] = [(neighbour, merged)]
            i = max(1, i - 1)
        else:
            i += 1
    return {c: k for k, at in segments for c in at}


def _slots(curves: dict[int, dict[int, float]], best: dict[int, int], levels: list[int],
           batch: list[float]) -> list[tuple[int, int]]:
    slots = [(1, best[levels[0]])]
    for a, b in itertools.pairwise(levels):
        if best[a] == best[b]:
            continue
        key = _switch_key(curves, (best[a], best[b]), (a, b), levels, batch)
        while len(slots) > 1 and key <= slots[-1][0]:
            slots.pop()  # a later switch starts before this slot: the slot never runs
        if key <= slots[-1][0]:
            slots[-1] = (slots[-1][0], best[b])
        else:
            slots.append((key, best[b]))
    merged: list[tuple[int, int]] = []
    for key, k in slots:
        if not merged or merged[-1][1] != k:
            merged.append((key, k))
    return merged


def _measured(run: Run, prompt_set: str, tuned: dict[int, float],
              curves: dict[str, dict[int, float]], requests: PairedRequests) -> Schedule:
    """Efficiency of the tuned server (its tok/s by level) and its ratio to SGLang's default,
    where measured (from the same requests' durations where the points have them, as the
    one-server efficiency)."""
    default = mean_by_level(run.summary, SGLANG_DEFAULT, prompt_set, "output_tok_s")
    paired = requests.versus(TUNED, prompt_set)
    relative = relative_to_best(tuned, curves, paired=paired)
    vs = relative_to_best(tuned, {SGLANG_DEFAULT: default}, paired=paired) if default else None
    vs_default = {c: r for c, r in vs.by_level.items() if int(c) in default} if vs else {}
    return {
        "efficiency": relative.by_level,
        "efficiency_interval": ratio_interval(run, prompt_set, requests, relative.closest,
                                               relative.by_level),
        "efficiency_interpolated": relative.interpolated,
        "efficiency_min": relative.minimum,
        "vs_sglang_default": vs_default,
        "vs_sglang_default_interval": ratio_interval(
            run, prompt_set, requests, dict.fromkeys(map(int, vs_default), SGLANG_DEFAULT),
            vs_default),
        "vs_sglang_default_geomean": (round(geomean(list(vs_default.values())), 4)
                                      if vs_default else None),
    }


def ratio_interval(run: Run, prompt_set: str, requests: PairedRequests,
                   against: dict[int, str], shown: dict[str, float],
                   mode: str = TUNED) -> dict[str, list[float]]:
    """95% interval of `mode` / `against[c]` per level: the spread of the two points' ratio
    (paired requests where the points have them, as the crossover's), around the ratio shown.
    Within one launch of each server: the launch-to-launch term is not in it."""
    num = level_stats(run.summary, mode, prompt_set)
    out: dict[str, list[float]] = {}
    for other in sorted(set(against.values())):  # one curve per configuration, as drawn before
        den = level_stats(run.summary, other, prompt_set)
        levels = [c for c in sorted(num) if c in den and against.get(c) == other
                  and str(c) in shown]
        if not levels:
            continue
        curve = ratio_curve(num, den, levels, requests, (mode, other), prompt_set)
        low, high = band(ratio_draws(curve, seed=INTERVAL_SEED, resamples=INTERVAL_DRAWS))
        for i, c in enumerate(levels):
            out[str(c)] = [round(shown[str(c)] * low[i] / curve.ratio[i], 4),
                           round(shown[str(c)] * high[i] / curve.ratio[i], 4)]
    return dict(sorted(out.items(), key=lambda item: int(item[0])))


def _steps_by_accept(run: Run, prompt_set: str, names: dict[int, str],
                     levels: list[int]) -> dict[str, dict[str, int]]:
    """The K each adaptive server ran per level: the static K with the nearest tokens per
    verify at that level (see the module docstring)."""
    summary = run.summary
    static = {k: ({c: 1.0 for c in levels} if k == 0 else
                  mean_by_level(summary, name, prompt_set, "accept_length"))
              for k, name in names.items()}
    out: dict[str, dict[str, int]] = {}
    for server in (TUNED, SGLANG_DEFAULT):
        accept = mean_by_level(summary, server, prompt_set, "accept_length")
        ran = {}
        for c, value in accept.items():
            known = {k: by_level[c] for k, by_level in static.items() if c in by_level}
            if known:
                ran[str(c)] = min(known, key=lambda k: (abs(known[k] - value), k))
        if ran:
            out[server] = ran
    return out


def schedule(run: Run, prompt_set: str, requests: PairedRequests) -> Schedule | None:
    """The schedule entry of analysis.json for one prompt set; None without several K, unless
    a tuned server (its slots given with `--schedule`) was measured beside one K and zero-step:
    its efficiency is still read against them."""
    names = k_curves(run, prompt_set)
    tuned = mean_by_level(run.summary, TUNED, prompt_set, "output_tok_s")
    if sum(k > 0 for k in names) < 2 and not (tuned and names):
        return None
    summary = run.summary
    curves = {k: mean_by_level(summary, name, prompt_set, "output_tok_s")
              for k, name in names.items()}
    levels = sorted(set.intersection(*(set(c) for c in curves.values())))
    levels = [c for c in levels if all(curve[c] > 0 for curve in curves.values())]
    if not levels:
        return None
    window_curves = curves
    curves = _paired_curves(curves, names, prompt_set, levels, requests)
    measured = {c: max(curves, key=lambda k: (curves[k][c], -k)) for c in levels}
    best = _smooth(curves, _one_drafting_k(curves, levels), levels)
    batch, _ = batch_sizes(summary, prompt_set, levels, names.values())
    slots = _slots(curves, best, levels, batch)
    applied = run.manifest.tuned.get(prompt_set)
    return {
        "slots": {str(key): k for key, k in slots},
        "per_level": {str(c): best[c] for c in levels},
        "measured_best": {str(c): measured[c] for c in levels},
        "candidates": {str(k): name for k, name in names.items()},
        "levels": levels,
        "batch_size_by_concurrency": {str(c): round(b, 2)
                                      for c, b in zip(levels, batch, strict=True)},
        "applied_slots": dict(applied) if applied else None,
        "steps_by_accept": _steps_by_accept(run, prompt_set, names, levels),
        **_measured(run, prompt_set, tuned,
                    {names[k]: curve for k, curve in window_curves.items()}, requests),
    }
