"""Where EAGLE-3 should be switched off: two decisions per prompt set, a schedule, a mix.

This is where a sweep becomes an answer. Per prompt set there are two decisions, because there
are two ways to stop drafting:

* **One server** (``one_server``): an adaptive SGLang server that drafts K steps below a
  batch-size threshold and zero steps from it on. Above the threshold it does not become a
  plain server: it runs SGLang's zero-step path (a one-token verify plus a draft-model extend,
  slower than a plain server). So its switch point is where EAGLE-3 meets the **zero-step**
  curve: r(c) = tok/s(eagle3) / tok/s(zero-step). Its efficiency, with a ``dynamic`` server
  measured at that threshold, is E(c) = dynamic / max(EAGLE-3, zero-step): the two curves it
  switches between (from the same requests' durations where the points have them:
  :func:`.efficiency.relative_to_best`).
* **Plain server** (``plain_server``; also the top-level keys of a set, as before): where
  EAGLE-3 meets the **baseline**, r(c) = tok/s(eagle3) / tok/s(baseline). Above that c* a
  separate plain server beats any speculative configuration; the zero-step tax
  1 - zero-step / baseline per level says what one adaptive server pays for not being one.

Both decisions use the same rules (:mod:`.crossover`):

* **Crossover.** c* is where r crosses 1 *from above*: the last level where EAGLE-3 is at
  least as fast (r >= 1) and the next level, where it is behind, bracket it, and c* is the
  linear interpolation of r in log2 c between them (:func:`specbench.stats.find_crossing`, the
  rule the regression gate uses too). Taking the *last* such bracket means every measured level
  beyond c* has r < 1 (the notes say when r crossed more than once). The crossing is
  *confirmed* when a further level exists beyond the bracket. Outcomes: ``crossover``,
  ``eagle3_never_wins`` (r < 1 everywhere), ``eagle3_always_wins`` (r >= 1 at the top level).
* **Uncertainty** (:mod:`.intervals`). Each level's ratio gets a standard error on the log
  scale: from paired repeats when both configurations have >= 2 (same prompt order per
  repeat); with one repeat from paired requests (request k is the same prompt on both
  servers: the windows' ratio taken apart by request, summed over blocks of request ids);
  else from each configuration's own spread: its repeats, or batch means over ten time
  slices of the window (``output_tok_s_se``), widened when the run's slices are
  autocorrelated (:func:`specbench.stats.ar1_inflation`; ``intervals`` in analysis.json says
  by how much). Requests are not the resampling unit: resampling them says
  how requests differ inside a window, not how a window's rate varies from run to run. Seeded
  draws of the whole ratio curve, the crossing rule applied to each, give the 2.5-97.5
  percentiles of c* (draws without a crossing count as the edge of the grid), the per-level
  ratio band, and the share of draws that agree with the outcome (``outcome_support``).
* **Threshold.** SGLang switches by *batch size* (the running requests of each decode step).
  c closed-loop users keep c requests running at most steps, so the threshold is the smallest
  whole batch size at or above c* itself; only where the two servers' mean measured running
  requests (``server_running_reqs_mean``, interpolated log-log in c) lies far under c (the
  server held requests back) is c* mapped to that mean (:func:`.crossover.switch_batch`).
  The mean at c* is kept as ``crossover_batch_size``. ``eagle3_never_wins`` gives 1 (never
  draft), ``eagle3_always_wins`` the largest measured concurrency + 1.
* **Envelope efficiency** (kept): dynamic / max(baseline, EAGLE-3). The baseline is not
  measured at the T-1, T, T+1 levels (EAGLE-3 and zero-step are), so there the baseline curve
  is interpolated log-log.

Beyond the two decisions: the **tuned schedule** (:mod:`.schedule`: the best K per level as
batch-size slots, and how the tuned server compares with the static curves and with SGLang's
default EMA schedule), and the **mixed deployment** (:mod:`.mix`: the recommendation is the
measured ``mix`` set's one-server threshold, with each set's loss there; no mix, no
recommendation beyond the per-set thresholds), and across **context buckets**
(:mod:`.surface`: a run with ``--context-lengths`` analyses each ``set@bucket`` as a set; the
``context_surface`` puts a set's buckets side by side).

In words (:mod:`.text`): the ``finding`` is one short sentence per decision (each set's T, then
its c*, with their intervals), then the mixed-deployment one; each set's ``sentence`` says why.
A decision's ``notes`` are for what the user can act on: advice to add a level only where the
user listed the grid, never about levels the adaptive plan chose (:class:`.crossover.Grid`).

:func:`analyze` returns what ``analysis.json`` holds (keys are strings, no NaN), so the
in-memory result and the file read back by :func:`specbench.results.load_run` are the same.
:func:`point_means` is the per-level view of a run shared by the figures, report and notebook.
"""

from __future__ import annotations

from specbench import configurations
from specbench.analysis import arrivals, launches, surface, text
from specbench.analysis import mix as mix_mod
from specbench.analysis.crossover import ONE_SERVER, PLAIN, Pair
from specbench.analysis.curves import (
    AnalysisError,
    LevelStats,
    level_stats,
    mean_by_level,
    point_means,
    slice_inflation,
)
from specbench.analysis.intervals import CONFIDENCE, PAIR_BLOCKS, PairedRequests
from specbench.analysis.prompt_set import analyze_prompt_set
from specbench.results import Run
from specbench.results.analysis import Analysis, BetweenLaunch, Intervals, write_analysis_file
from specbench.stats import N_SLICES

__all__ = [
    "ANALYSIS_FILE",
    "ANALYSIS_VERSION",
    "BOOTSTRAP_RESAMPLES",
    "COMBINE_RULE",
    "CONFIDENCE",
    "ONE_SERVER",
    "PLAIN",
    "STATIC_MODES",
    "AnalysisError",
    "LevelStats",
    "Pair",
    "analyze",
    "analyze_prompt_set",
    "applied_threshold",
    "current_analysis",
    "level_stats",
    "mean_by_level",
    "point_means",
    "speculative_num_steps",
    "threshold_summary",
    "write_analysis",
]

# 2: one_server, plain_server, schedule, mix, intervals; recommended_threshold may be None.
ANALYSIS_VERSION = 4
ANALYSIS_FILE = "analysis.json"
STATIC_MODES: tuple[str, str] = ("baseline", "eagle3")
BOOTSTRAP_RESAMPLES = 2000
COMBINE_RULE = mix_mod.RULE


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


def _intervals(run: Run) -> tuple[Intervals, float]:
    """How the run's errors were made, and the factor on batch-means errors."""
    inflation, lag1 = slice_inflation(run.summary)
    info: Intervals = {
        "per_point": "repeats when >= 2, else batch means over time slices of the window",
        "ratio": "paired repeats when >= 2, else paired requests (the windows' ratio taken "
                 "apart by request, summed over blocks of consecutive request ids), else "
                 "unpaired",
        "slices": N_SLICES,
        "slice_lag1_mean": None if lag1 is None else round(lag1, 3),
        "inflation": round(inflation, 3),
        "pair_blocks": PAIR_BLOCKS,
    }
    return info, inflation


def analyze(run: Run, *, seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES,
            relaunch: Run | None = None) -> Analysis:
    """The content of analysis.json for a run (see the module docstring for every rule).

    `relaunch` is a run of the same servers on another launch: the intervals then carry how
    far each configuration moved between the two (:mod:`.launches`). Without it, the term a
    stored analysis carries is kept."""
    if run.summary.empty:
        raise AnalysisError(f"{run.path} has no measured points; run `specbench sweep` first")
    if run.open_loop:
        open_loop = arrivals.analyze_arrivals(run, seed=seed, resamples=resamples)
        return {"analysis_version": ANALYSIS_VERSION,
                "finding": text.arrivals_finding(open_loop), **open_loop}
    present = set(run.modes)
    if not configurations.analyzable(present):
        missing = next(mode for mode in STATIC_MODES if mode not in present)
        raise AnalysisError(
            f"{run.path} has no {missing} points, and the crossover needs baseline and eagle3; "
            f"measure them with `specbench sweep --modes baseline,eagle3 --resume {run.path}`"
        )
    requests = PairedRequests(run)
    intervals, inflation = _intervals(run)
    between: BetweenLaunch | None = (
        launches.between_launch_section(run, relaunch, inflation) if relaunch is not None
        else (run.analysis or {}).get("between_launch"))
    sets = {name: analyze_prompt_set(run, name, seed=seed, resamples=resamples,
                                     inflation=inflation, requests=requests, between=between)
            for name in run.prompt_sets}
    buckets = run.manifest.config.context_lengths
    for name, found in sets.items():
        found["applied_threshold"] = applied_threshold(run, name)
        if buckets:
            found["context_bucket"] = surface.bucket_of(name, buckets)
    recommended, source = mix_mod.recommendation(sets)
    mix = mix_mod.mix_section(run, sets)
    if mix is not None:
        for name, loss in mix["loss_by_set"].items():
            sets[name]["loss_at_mix_threshold"] = loss
    result: Analysis = {
        "analysis_version": ANALYSIS_VERSION,
        "finding": text.finding(sets, recommended, source, mix),
        "recommended_threshold": recommended,
        "recommendation_source": source,
        "combine_rule": COMBINE_RULE,
        "applied_threshold": applied_threshold(run),
        "bootstrap": {"resamples": resamples, "seed": seed, "confidence": CONFIDENCE},
        "intervals": intervals,
        "mix": mix,
        "prompt_sets": sets,
        "context_surface": surface.context_surface(sets, buckets),
    }
    if between:  # measured on a second launch (kept out of every other run's analysis)
        result["between_launch"] = between
    return result


def write_analysis(run: Run, *, seed: int = 0, relaunch: Run | None = None) -> Analysis:
    """Analyse the run and write <run>/analysis.json atomically; returns what was written."""
    result = analyze(run, seed=seed, relaunch=relaunch)
    write_analysis_file(run.path / ANALYSIS_FILE, result)
    run.analysis = result
    return result


def _stored_or_fresh(run: Run) -> Analysis:
    stored = run.analysis
    if stored is not None and stored.get("analysis_version") == ANALYSIS_VERSION:
        return stored
    return analyze(run)


def current_analysis(run: Run) -> Analysis | None:
    """The run's analysis: the one loaded or set on it, else computed; None if impossible.

    Readers that can show something without a crossover (plots, report of a baseline-only
    run) use this; `threshold` and the sweep call :func:`analyze` and let errors surface.
    """
    try:
        return _stored_or_fresh(run)
    except AnalysisError:
        return None


def speculative_num_steps(run: Run) -> int:
    """K of the run's EAGLE-3 server (from the manifest's config)."""
    return run.manifest.config.server.speculative_num_steps


def threshold_summary(run: Run, analysis: Analysis | None = None) -> str:
    """Plain text for `specbench threshold RUN_DIR`: per set both decisions, then the advice."""
    result = analysis if analysis is not None else _stored_or_fresh(run)
    return text.threshold_summary_text(result, speculative_num_steps(run))
