"""The CI regression gate: compare a candidate run with a committed reference run.

`specbench regress --reference DIR --candidate DIR` exits 0 (no regression), 1 (regression) or
2 (unusable input: the runs cannot be compared, or the data cannot support a verdict). Both runs
are read only through :func:`specbench.results.load_run`; a committed reference may keep only
``manifest.json`` and ``summary.parquet``, so nothing here needs per-request rows.

How "regressed" is decided (the asv / HUD pattern: an effect size and a significance test):

* Points are matched on (mode, prompt set, concurrency); repeats of a point are pooled.
* Per point, the throughput ratio is median(candidate) / median(reference) of output tok/s.
* A point *fails* only with both a minimum effect (ratio at or below ``1 - fail_pct``) and
  statistical support: a one-sided Mann-Whitney U test when each side has at least
  ``min_rank_repeats`` repeats, otherwise non-overlapping 95% bootstrap intervals from the
  ``output_tok_s_ci_low/high`` columns.
* A mode/prompt-set *fails* when failing points sit on ``min_adjacent_levels`` adjacent
  concurrency levels, or when the geometric mean ratio over all levels is beyond the fail
  threshold, stays there with its worst level left out (one level cannot carry it), and a
  z-test on the mean log ratio supports it. One bad level alone therefore only warns: with 9+
  levels per curve an isolated miss is what noise produces.
* Acceptance length (eagle3, dynamic) fails on the same shape of rule with its own threshold.
  It is a ratio of token counts, not a timing, so with fewer than ``min_rank_repeats`` repeats
  the effect size alone decides (its run-to-run noise under greedy decoding is far below 10%).
* Both crossovers of a prompt set, EAGLE-3 against the baseline (``plain-server``) and, when
  both runs measured it, against its zero-step path (``one-server``, the number a one-server
  deployment configures), come from ``analysis.json`` when both runs have them, else are
  computed from r(c) = eagle3 / other by the report's own rule
  (:func:`specbench.stats.find_crossing`). One fails when it moves by more than
  ``crossover_fail_levels`` grid levels and leaves the reference's interval: the threshold
  deployed from the reference would then be wrong.
* The error rate fails when it rises by ``error_fail_pp`` percentage points and a
  two-proportion z-test supports it.
* TTFT and TPOT percentiles (``latency_metrics``: a rise is worse) and goodput (open loop with
  SLOs: a drop is) follow the throughput's rules with their own limits. A percentile has no
  interval in the summary, so its noise comes from the reference's second launch (a
  candidate on another launch differs by about N(0, 2 sd^2) on the log scale), or from repeats
  (the rank test); goodput carries its standard error. With none of these a metric is shown
  and, beyond its limit, named in a note, but not judged.
* The second launch: ``<reference>/relaunch`` (``scripts/gpu_regression.py reference`` stores
  it there) or ``relaunch_dir``. Every limit of a configuration, tok/s included, is widened to
  what a relaunch reaches (2 sqrt(2) sd of that metric's move between the two launches); tok/s
  takes its sd from analysis.json's ``between_launch`` when the reference's analysis was made
  with ``specbench report --relaunch``, else from the two summaries.

When an effect beyond the fail threshold cannot be tested (one repeat and no CI columns), the
verdict is "insufficient" and the exit code 2, as the PyTorch HUD reports insufficient data
instead of pass or fail. The defaults (:class:`Thresholds`) are starting points; tune them from
measured run-to-run noise (a gate misfires often when noise CV exceeds about half the fail
threshold).

The package, by concern: :mod:`.thresholds` (the settings above), :mod:`.inputs` (reading and
checking the two runs), :mod:`.judge` (the rules), :mod:`.verdict` (the records, JSON and
Markdown) and :mod:`.render` (terminal, JSON file, step summary). :func:`compare` is the
library call; :func:`compare_dirs` adds the loading, and `specbench regress` is
``compare_dirs`` followed by :func:`render.publish` (or :func:`render.publish_unusable` on a
:class:`specbench.errors.UserError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from specbench.analysis.launches import between_launch_section, sd_of
from specbench.errors import UserError
from specbench.regress.inputs import (
    CI_HIGH_COLUMN,
    CI_LOW_COLUMN,
    RELAUNCH_DIR,
    Comparable,
    RegressInputError,
    allowed_config_fields,
    comparable,
    relaunch_of,
)
from specbench.regress.judge import DECISIONS, SPEC_MODES, compare_crossover, compare_group
from specbench.regress.render import publish, publish_unusable, render_terminal
from specbench.regress.thresholds import Thresholds, across_launches
from specbench.regress.verdict import (
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNUSABLE,
    JSON_SCHEMA,
    RANK,
    CrossoverComparison,
    Finding,
    GroupComparison,
    MetricComparison,
    PointComparison,
    Verdict,
    metric_label,
    worst,
)
from specbench.results import Run, load_run

__all__ = [
    "CI_HIGH_COLUMN",
    "CI_LOW_COLUMN",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_UNUSABLE",
    "JSON_SCHEMA",
    "RELAUNCH_DIR",
    "SPEC_MODES",
    "CrossoverComparison",
    "Finding",
    "GroupComparison",
    "MetricComparison",
    "PointComparison",
    "RegressInputError",
    "Thresholds",
    "Verdict",
    "allowed_config_fields",
    "compare",
    "compare_dirs",
    "main",
    "publish",
    "publish_unusable",
    "relaunch_of",
    "render_terminal",
]

# The verdict of the worst finding, and the exit code `specbench regress` returns for it.
_OUTCOME = {
    "fail": ("regression", EXIT_REGRESSION),
    "insufficient": ("insufficient", EXIT_UNUSABLE),
    "warn": ("warn", EXIT_OK),
    "ok": ("ok", EXIT_OK),
}


def _judge_all(
    runs: tuple[Run, Run], inputs: Comparable, th: Thresholds
) -> tuple[list[GroupComparison], list[PointComparison], list[CrossoverComparison], list[str]]:
    """Every mode/prompt set and every crossover of two comparable runs; their notes."""
    groups: list[GroupComparison] = []
    points: list[PointComparison] = []
    notes: list[str] = []
    between = (runs[0].analysis or {}).get("between_launch")
    if between is None and inputs.relaunch_run is not None:
        # A second launch but no `specbench report --relaunch` behind the reference's analysis:
        # the tok/s spread from the two summaries (unpaired: a reference keeps no requests).
        between = between_launch_section(runs[0], inputs.relaunch_run)
    for mode, prompt_set in sorted({(m, s) for m, s, _ in inputs.keys}):
        group_keys = [k for k in inputs.keys if k[0] == mode and k[1] == prompt_set]
        label = f"{mode}/{prompt_set}"
        launch_sd = sd_of(between, label)
        group_th = across_launches(th, launch_sd)
        if group_th is not th:
            notes.append(f"{label}: fails below -{group_th.fail_pct:.1f}%, not -{th.fail_pct:g}%: "
                         f"the reference moved by sd {100 * launch_sd:.1f}% between two "
                         "launches of its server, and a relaunch must not fail")
        group, group_points, group_notes = compare_group(
            mode, prompt_set, group_keys, inputs.ref, inputs.cand, group_th, inputs.relaunch)
        groups.append(group)
        points.extend(group_points)
        notes.extend(group_notes)
    base = {True: th.latency_fail_pct, False: th.goodput_fail_pct}
    wider = [f"{g.label} {m.label} {m.limit_text}" for g in groups for m in g.metrics
             if m.fail_pct > base[m.rise_is_worse]]
    if wider:
        notes.append("limits wider than the options', as far as the reference's two launches "
                     "moved apart (a relaunch must not fail): " + "; ".join(wider))
    untested = [f"{g.label} {m.label} (worst {m.worst_text})" for g in groups
                for m in g.metrics if m.beyond_untested]
    if untested:
        notes.append("beyond the latency or goodput limit but not gated, with one launch, one "
                     "repeat and no interval to test against: " + "; ".join(untested)
                     + "; to gate them, store the reference's second launch as "
                     f"<reference>/{RELAUNCH_DIR} (scripts/gpu_regression.py reference) or "
                     f"sweep both runs with --repeats {th.min_rank_repeats}")
    compared = {m.metric for g in groups for m in g.metrics}
    absent = [metric_label(m) for m in th.latency_metrics if m not in compared]
    if absent:
        notes.append(f"{', '.join(absent)}: not in both runs' summaries, not gated")
    # An open-loop run's decisions are per rate and judged by no crossover rule here.
    crossovers = [] if runs[0].open_loop else [
        x for x in (
            compare_crossover(s, set(inputs.keys), runs, (inputs.ref, inputs.cand), th, d)
            for s in inputs.prompt_sets for d in DECISIONS
        ) if x is not None
    ]
    return groups, points, crossovers, notes


def compare(
    reference: Run,
    candidate: Run,
    thresholds: Thresholds | None = None,
    allow_config_changes: Sequence[str] = (),
    relaunch_dir: str | Path | None = None,
) -> Verdict:
    """Compare two loaded runs; raise RegressInputError when they cannot be compared.

    `allow_config_changes`: dotted manifest paths (e.g. ``sim.profile``) whose difference is
    intended, as when a planted slow profile is passed by path; they are noted, not refused.
    `relaunch_dir`: the reference's second launch; the limits then widen by what it moved.
    """
    th = thresholds or Thresholds()
    th.validate()
    inputs = comparable(reference, candidate, allow_config_changes, relaunch_dir)
    groups, points, crossovers, group_notes = _judge_all((reference, candidate), inputs, th)
    findings = [f for g in groups for f in g.findings]
    findings += [Finding(x.status, "crossover", x.subject, x.message)
                 for x in crossovers if x.status != "ok"]
    findings.sort(key=lambda f: -RANK[f.status])  # stable: fail, insufficient, warn
    status, code = _OUTCOME[worst(f.status for f in findings)]
    return Verdict(
        status=status, exit_code=code,
        reference=str(reference.path), candidate=str(candidate.path), thresholds=th,
        groups=tuple(groups), crossovers=tuple(crossovers), points=tuple(points),
        findings=tuple(findings), notes=(*inputs.notes, *group_notes),
    )


def compare_dirs(
    reference_dir: str | Path,
    candidate_dir: str | Path,
    thresholds: Thresholds | None = None,
    allow_config_changes: Sequence[str] = (),
    relaunch_dir: str | Path | None = None,
) -> Verdict:
    """Validate the thresholds, load both run directories and compare them.

    `relaunch_dir` None: the reference's own ``relaunch/`` when it has one
    (:func:`relaunch_of`). Every problem the user can fix (bad thresholds, a path that is no
    run, runs that cannot be compared) raises a :class:`specbench.errors.UserError` with a
    one-line message.
    """
    th = thresholds or Thresholds()
    th.validate()
    return compare(load_run(reference_dir), load_run(candidate_dir), th, allow_config_changes,
                   relaunch_of(reference_dir, relaunch_dir))


def main(
    reference_dir: str | Path,
    candidate_dir: str | Path,
    json_path: str | Path | None = None,
    fail_pct: float | None = None,
    warn_pct: float | None = None,
    accept_fail_pct: float | None = None,
    thresholds: Thresholds | None = None,
    console: Console | None = None,
    allow_config_changes: Sequence[str] = (),
    relaunch_dir: str | Path | None = None,
    latency_fail_pct: float | None = None,
    goodput_fail_pct: float | None = None,
    latency_metrics: Sequence[str] | None = None,
) -> int:
    """`specbench regress`: compare, print, write the JSON verdict; return the exit code.

    `json_path` "-" prints only the JSON verdict (for piping into jq). Explicit values
    override those in `thresholds`. Unusable input prints one line and returns 2. A thin
    wrapper kept for callers of the old API: :func:`compare_dirs` plus :func:`publish`.
    """
    console = console or Console()
    th = (thresholds or Thresholds()).with_overrides(
        fail_pct=fail_pct, warn_pct=warn_pct, accept_fail_pct=accept_fail_pct,
        latency_fail_pct=latency_fail_pct, goodput_fail_pct=goodput_fail_pct,
        latency_metrics=latency_metrics)
    try:
        verdict = compare_dirs(reference_dir, candidate_dir, th, allow_config_changes,
                               relaunch_dir)
    except UserError as exc:
        return publish_unusable(str(exc), console, json_path)
    return publish(verdict, console, json_path)
