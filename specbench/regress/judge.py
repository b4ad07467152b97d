"""The judgement: per point, per mode and prompt set, and of the crossover.

The rules are in the package docstring (:mod:`specbench.regress`); the tests they rest on are
in :mod:`specbench.stats`, and the crossover is located with the same rule the report uses
(:func:`specbench.stats.find_crossing`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from specbench.regress.inputs import Key, Samples, analysis_entry
from specbench.regress.thresholds import GOODPUT, Thresholds, launch_sd, widened
from specbench.regress.verdict import (
    CrossoverComparison,
    Finding,
    GroupComparison,
    MetricComparison,
    PointComparison,
    describe_crossover,
    pct,
    worst,
)
from specbench.results import Run
from specbench.results.analysis import Decision as DecisionEntry
from specbench.results.points import level_text, levels_text
from specbench.stats import (
    find_crossing,
    finite_or_none,
    geomean,
    mann_whitney_u,
    p_below_zero,
    proportion_rise_p,
    se_from_ci95,
)

SPEC_MODES: tuple[str, ...] = ("eagle3", "dynamic")


# ---------------------------------------------------------------------------------------------
# one point


def _repeat_log_var(values: Sequence[float]) -> float | None:
    """Variance of the mean of log(values) over repeats; None with < 2 or non-positive values."""
    if len(values) < 2 or min(values) <= 0:
        return None
    return float(np.var(np.log(values), ddof=1)) / len(values)


def _log_ratio_var(ref: Samples, cand: Samples, min_rank_repeats: int) -> float | None:
    """Variance of log(candidate median / reference median), from repeats or CI columns."""

    def side(s: Samples, prefer_repeats: bool) -> float | None:
        n = len(s.output_tok_s)
        from_repeats = _repeat_log_var(s.output_tok_s)
        if prefer_repeats and from_repeats is not None:
            return from_repeats
        if s.ci_low is not None and s.ci_high is not None:
            ses = [
                se_from_ci95(math.log(lo), math.log(hi))
                for lo, hi in zip(s.ci_low, s.ci_high, strict=True)
                if hi > 0 and lo > 0
            ]
            if len(ses) == n:
                return sum(se * se for se in ses) / (n * n)
        return from_repeats

    prefer = min(len(ref.output_tok_s), len(cand.output_tok_s)) >= min_rank_repeats
    ref_var, cand_var = side(ref, prefer), side(cand, prefer)
    if ref_var is None or cand_var is None:
        return None
    return ref_var + cand_var


def _throughput_test(
    ref: Samples, cand: Samples, th: Thresholds
) -> tuple[str, float | None, bool | None]:
    """(test, p-value, significant) for "the candidate is slower at this point"."""
    if min(len(ref.output_tok_s), len(cand.output_tok_s)) >= th.min_rank_repeats:
        p_value = mann_whitney_u(cand.output_tok_s, ref.output_tok_s, "less").p_value
        return "mann-whitney", p_value, p_value <= th.alpha
    if (
        ref.ci_low is not None and ref.ci_high is not None
        and cand.ci_low is not None and cand.ci_high is not None
    ):
        # One repeat: the 95% bootstrap intervals over requests must not overlap.
        return "ci-overlap", None, max(cand.ci_high) < min(ref.ci_low)
    return "none", None, None


@dataclass(frozen=True)
class _Acceptance:
    """Accept length of one point in both runs (all None for the baseline or no data)."""

    ref: float | None = None
    cand: float | None = None
    ratio: float | None = None
    p_value: float | None = None
    significant: bool | None = None
    log_ratio_var: float | None = None


def _acceptance(mode: str, ref: Samples, cand: Samples, th: Thresholds) -> _Acceptance:
    if mode not in SPEC_MODES or not ref.accept_length or not cand.accept_length:
        return _Acceptance()
    ref_acc = float(np.median(ref.accept_length))
    cand_acc = float(np.median(cand.accept_length))
    if ref_acc <= 0:
        return _Acceptance(ref_acc, cand_acc)
    ratio = cand_acc / ref_acc
    if min(len(ref.accept_length), len(cand.accept_length)) < th.min_rank_repeats:
        return _Acceptance(ref_acc, cand_acc, ratio)
    p_value = mann_whitney_u(cand.accept_length, ref.accept_length, "less").p_value
    ref_var = _repeat_log_var(ref.accept_length)
    cand_var = _repeat_log_var(cand.accept_length)
    var = ref_var + cand_var if ref_var is not None and cand_var is not None else None
    return _Acceptance(ref_acc, cand_acc, ratio, p_value, p_value <= th.alpha, var)


def compare_point(key: Key, ref: Samples, cand: Samples, th: Thresholds) -> PointComparison:
    """One (mode, prompt set, concurrency): throughput and acceptance ratios and their tests."""
    mode, prompt_set, conc = key
    ref_med = float(np.median(ref.output_tok_s))
    cand_med = float(np.median(cand.output_tok_s))
    ratio = cand_med / ref_med
    test, p_value, significant = _throughput_test(ref, cand, th)
    acc = _acceptance(mode, ref, cand, th)
    status = "ok"
    if ratio <= 1 - th.fail_pct / 100:
        status = "fail" if significant else ("warn" if significant is False else "insufficient")
    elif ratio <= 1 - th.warn_pct / 100:
        status = "warn"
    if acc.ratio is not None and acc.ratio <= 1 - th.accept_warn_pct / 100:
        status = worst((status, "warn"))
    return PointComparison(
        mode=mode, prompt_set=prompt_set, concurrency=conc,
        ref_repeats=len(ref.output_tok_s), cand_repeats=len(cand.output_tok_s),
        ref_output_tok_s=ref_med, cand_output_tok_s=cand_med, ratio=ratio,
        test=test, p_value=p_value, significant=significant,
        log_ratio_var=_log_ratio_var(ref, cand, th.min_rank_repeats),
        ref_accept_length=acc.ref, cand_accept_length=acc.cand, accept_ratio=acc.ratio,
        accept_p_value=acc.p_value, accept_significant=acc.significant,
        accept_log_ratio_var=acc.log_ratio_var, status=status,
    )


# ---------------------------------------------------------------------------------------------
# one mode and prompt set


@dataclass(frozen=True)
class _Judgement:
    status: str
    run: tuple[int, ...]  # indices of the longest adjacent run of failing levels
    via_geomean: bool
    geomean: float
    geomean_p: float | None
    without_worst: float | None


def _runs(flags: Sequence[bool]) -> list[tuple[int, ...]]:
    runs: list[tuple[int, ...]] = []
    current: list[int] = []
    for i, flag in enumerate(flags):
        if flag:
            current.append(i)
        elif current:
            runs.append(tuple(current))
            current = []
    if current:
        runs.append(tuple(current))
    return runs


def _judge(
    ratios: Sequence[float],
    significant: Sequence[bool | None],
    log_vars: Sequence[float | None],
    *,
    fail_pct: float,
    warn_pct: float,
    th: Thresholds,
    untested_counts: bool,
) -> _Judgement:
    """Adjacent-levels rule or robust geometric-mean rule, each needing statistical support.

    `untested_counts`: a point with no possible test counts as supported (acceptance) rather
    than making the verdict insufficient (throughput).
    """
    fail_ratio, warn_ratio = 1 - fail_pct / 100, 1 - warn_pct / 100
    geo = geomean(ratios)
    worst_i = min(range(len(ratios)), key=lambda i: ratios[i])
    rest = [r for i, r in enumerate(ratios) if i != worst_i]
    without_worst = geomean(rest) if rest else None
    geo_p: float | None = None
    if all(v is not None for v in log_vars) and geo > 0:
        se = math.sqrt(sum(v for v in log_vars if v is not None)) / len(ratios)
        geo_p = p_below_zero(math.log(geo), se)

    def supported(sig: bool | None) -> bool:
        return bool(sig) or (sig is None and untested_counts)

    # Adjacent rule: levels with a fail-sized drop that no test contradicted.
    candidates = [
        r <= fail_ratio and s is not False for r, s in zip(ratios, significant, strict=True)
    ]
    runs = [run for run in _runs(candidates) if len(run) >= th.min_adjacent_levels]
    proven = [run for run in runs if all(supported(significant[i]) for i in run)]
    geo_effect = geo <= fail_ratio and (without_worst is None or without_worst <= fail_ratio)
    geo_proven = geo_effect and (
        (geo_p is not None and geo_p <= th.alpha) or (geo_p is None and untested_counts)
    )
    best_run = max(proven or runs or [()], key=len)
    if proven or geo_proven:
        return _Judgement("fail", best_run if proven else (), not proven, geo, geo_p,
                          without_worst)
    if runs or (geo_effect and geo_p is None):
        return _Judgement("insufficient", best_run, not runs, geo, geo_p, without_worst)
    status = "warn" if min(ratios) <= warn_ratio or geo <= warn_ratio else "ok"
    return _Judgement(status, (), False, geo, geo_p, without_worst)


def _drop_range(ratios: Sequence[float]) -> str:
    drops = sorted((1 - r) * 100 for r in ratios)
    lo, hi = drops[0], drops[-1]
    return f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}%"


def _throughput_message(label: str, points: Sequence[PointComparison], j: _Judgement) -> str:
    n = len(points)
    head = f"{label}: output tok/s {pct(j.geomean)} (geomean over {n} level{'s' * (n != 1)}"
    worst_point = min(points, key=lambda p: p.ratio)
    if j.run:
        run_pts = [points[i] for i in j.run]
        where = (f"{levels_text(run_pts[0].concurrency, run_pts[-1].concurrency)} below by "
                f"{_drop_range([p.ratio for p in run_pts])}")
        p_values = [p.p_value for p in run_pts if p.p_value is not None]
        if j.status == "insufficient":
            evidence = "untested"
        elif len(p_values) == len(run_pts):
            evidence = f"p<={max(p_values):.3g}"
        else:
            evidence = "95% bootstrap intervals apart"
        return f"{head}; {where}, {evidence})"
    if j.via_geomean:
        evidence = "untested" if j.geomean_p is None else f"p={j.geomean_p:.3g}"
        return (f"{head}, {evidence}; worst {level_text(worst_point.concurrency)} "
                f"{pct(worst_point.ratio)})")
    return f"{head}; worst {level_text(worst_point.concurrency)} {pct(worst_point.ratio)})"


def _throughput(
    label: str, points: Sequence[PointComparison], th: Thresholds, findings: list[Finding]
) -> _Judgement:
    j = _judge([p.ratio for p in points], [p.significant for p in points],
               [p.log_ratio_var for p in points], fail_pct=th.fail_pct, warn_pct=th.warn_pct,
               th=th, untested_counts=False)
    if j.status != "ok":
        text = _throughput_message(label, points, j)
        if j.status == "insufficient":
            text += (f"; no statistical test is possible (fewer than {th.min_rank_repeats} "
                     "repeats per side and no output_tok_s_ci_low/high columns): rerun both runs "
                     f"with --repeats {th.min_rank_repeats}")
        findings.append(Finding(j.status, "output_tok_s", label, text))
    return j


def _accept_message(label: str, points: Sequence[PointComparison], j: _Judgement) -> str:
    acc = [p for p in points if p.accept_ratio is not None]
    worst_point = min(acc, key=lambda p: p.accept_ratio or 0.0)
    ref_mean = float(np.mean([p.ref_accept_length for p in acc if p.ref_accept_length]))
    cand_mean = float(np.mean([p.cand_accept_length for p in acc if p.cand_accept_length]))
    return (
        f"{label}: accept length {pct(j.geomean)} (geomean over {len(acc)} levels, "
        f"{ref_mean:.2f} -> {cand_mean:.2f}; worst {level_text(worst_point.concurrency)} "
        f"{pct(worst_point.accept_ratio or 0.0)})"
    )


def _acceptance_check(
    label: str, points: Sequence[PointComparison], th: Thresholds,
    findings: list[Finding], notes: list[str],
) -> tuple[str, float | None]:
    """(status, geometric mean ratio) of acceptance over the levels that report it."""
    acc_points = [p for p in points if p.accept_ratio is not None]
    if not acc_points:
        return "ok", None
    j = _judge([p.accept_ratio or 0.0 for p in acc_points],
               [p.accept_significant for p in acc_points],
               [p.accept_log_ratio_var for p in acc_points],
               fail_pct=th.accept_fail_pct, warn_pct=th.accept_warn_pct, th=th,
               untested_counts=True)
    if j.status != "ok":
        findings.append(Finding(j.status, "accept_length", label,
                                _accept_message(label, acc_points, j)))
    if j.status == "fail" and any(p.accept_significant is None for p in acc_points):
        notes.append(f"{label}: acceptance judged on effect size alone "
                     f"(fewer than {th.min_rank_repeats} repeats per side)")
    return j.status, j.geomean


def _error_check(
    ref: Sequence[Samples], cand: Sequence[Samples], th: Thresholds
) -> tuple[str, float, float, float | None]:
    ref_err, cand_err = sum(s.n_errors for s in ref), sum(s.n_errors for s in cand)
    ref_total = ref_err + sum(s.n_requests for s in ref)
    cand_total = cand_err + sum(s.n_requests for s in cand)
    ref_rate = ref_err / ref_total if ref_total else 0.0
    cand_rate = cand_err / cand_total if cand_total else 0.0
    rise_pp = (cand_rate - ref_rate) * 100
    p = proportion_rise_p(ref_err, ref_total, cand_err, cand_total)
    if rise_pp >= th.error_fail_pp and p is not None and p <= th.alpha:
        status = "fail"
    elif rise_pp >= th.error_warn_pp:
        status = "warn"
    else:
        status = "ok"
    return status, ref_rate, cand_rate, p


def _noisy_note(
    label: str, keys: Sequence[Key], ref: dict[Key, Samples], cand: dict[Key, Samples],
    th: Thresholds,
) -> str | None:
    """A note when repeats spread more than half the fail threshold (the gate then misfires)."""
    noisy = []
    for k in keys:
        for side, s in (("reference", ref[k]), ("candidate", cand[k])):
            vals = s.output_tok_s
            if len(vals) >= 2 and np.mean(vals) > 0:
                cv_pct = float(np.std(vals, ddof=1) / np.mean(vals) * 100)
                if cv_pct > th.fail_pct / 2:
                    noisy.append(f"{level_text(k[2])} {side} CV {cv_pct:.1f}%")
    if not noisy:
        return None
    return (f"{label}: repeats are noisy ({', '.join(noisy)}), above half the fail "
            "threshold; lengthen the window or add repeats before trusting the gate")


# ---------------------------------------------------------------------------------------------
# latency percentiles and goodput


@dataclass(frozen=True)
class _MetricTest:
    """Whether the candidate is worse at one point on one metric, and how that was tested."""

    test: str  # "mann-whitney" | "intervals" | "two-launch" | "none"
    significant: bool | None
    log_ratio_var: float | None


def _pooled(values: Sequence[float], ses: Sequence[float]) -> tuple[float, float]:
    """Mean of a point's repeats and its standard error."""
    return float(np.mean(values)), math.sqrt(sum(se * se for se in ses)) / len(ses)


def _metric_test(metric: str, rise: bool, ref: Samples, cand: Samples, sd: float | None,
                 th: Thresholds) -> _MetricTest:
    """Repeats: the rank test. Standard errors on both sides (goodput): 95% intervals apart.
    A two-launch reference: its spread is the noise (a relaunch differs by ~N(0, 2 sd^2)).
    Else no test: a percentile has no interval in the summary."""
    a, b = ref.metrics[metric], cand.metrics[metric]
    if min(len(a), len(b)) >= th.min_rank_repeats:
        p_value = mann_whitney_u(b, a, "greater" if rise else "less").p_value
        var_a, var_b = _repeat_log_var(a), _repeat_log_var(b)
        var = None if var_a is None or var_b is None else var_a + var_b
        return _MetricTest("mann-whitney", p_value <= th.alpha, var)
    if metric in ref.metric_se and metric in cand.metric_se:
        (ref_v, ref_se), (cand_v, cand_se) = (_pooled(a, ref.metric_se[metric]),
                                              _pooled(b, cand.metric_se[metric]))
        apart = (cand_v - 1.96 * cand_se > ref_v + 1.96 * ref_se if rise
                 else cand_v + 1.96 * cand_se < ref_v - 1.96 * ref_se)
        return _MetricTest("intervals", apart, (ref_se / ref_v) ** 2 + (cand_se / cand_v) ** 2)
    if sd is not None:
        var = 2 * sd * sd
        bad_log = math.log(float(np.median(b)) / float(np.median(a))) * (1 if rise else -1)
        significant = bad_log > 0 and (var == 0 or p_below_zero(-bad_log, math.sqrt(var))
                                       <= th.alpha)
        return _MetricTest("two-launch", significant, var)
    return _MetricTest("none", None, None)


def _change_range(ratios: Sequence[float]) -> str:
    changes = sorted(abs(r - 1) * 100 for r in ratios)
    lo, hi = changes[0], changes[-1]
    return f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}%"


def _metric_message(label: str, m: MetricComparison, j: _Judgement, untested: bool,
                    repeats: int) -> str:
    n = len(m.levels)
    head = f"{label}: {m.label} {pct(m.geomean_ratio)} (geomean over {n} level{'s' * (n != 1)}"
    if j.run:
        lo, hi = m.levels[j.run[0]], m.levels[j.run[-1]]
        where = (f"{levels_text(lo, hi)} {'above' if m.rise_is_worse else 'below'} by "
                 f"{_change_range([m.ratios[i] for i in j.run])}")
    else:
        where = f"worst {m.worst_text}"
    limit = f"limit {m.limit_text}"
    if m.launch_sd_pct:
        limit += f", the reference's two launches apart by sd {m.launch_sd_pct:.1f}%"
    text = f"{head}; {where}; {limit})"
    if untested:
        text += ("; some levels could not be tested (not in the reference's second launch, "
                 f"fewer than {repeats} repeats a side)")
    return text


def compare_metric(
    metric: str, label: str, keys: Sequence[Key], ref: dict[Key, Samples],
    cand: dict[Key, Samples], relaunch: dict[Key, Samples] | None, th: Thresholds,
) -> tuple[MetricComparison, Finding | None] | None:
    """One latency percentile (a rise is worse) or goodput (a drop is) over a group's levels,
    by the throughput's rules, the limit widened by the reference's two launches; None where
    the two runs do not both carry it."""
    rise = metric != GOODPUT
    levels = [k for k in keys if metric in ref[k].metrics and metric in cand[k].metrics]
    if not levels:
        return None
    sd = None
    if relaunch is not None:
        sd = launch_sd([(float(np.median(ref[k].metrics[metric])),
                         float(np.median(relaunch[k].metrics[metric])))
                        for k in levels if k in relaunch and metric in relaunch[k].metrics])
    fail_pct, warn_pct = widened(*((th.latency_fail_pct, th.latency_warn_pct) if rise else
                                   (th.goodput_fail_pct, th.goodput_warn_pct)), sd or 0.0, rise)
    ratios = [float(np.median(cand[k].metrics[metric])) / float(np.median(ref[k].metrics[metric]))
              for k in levels]
    tests = [_metric_test(metric, rise, ref[k], cand[k], sd, th) for k in levels]

    def as_drop(limit_pct: float) -> float:  # _judge reads limits as drops of a ratio
        return 100 * (1 - 1 / (1 + limit_pct / 100)) if rise else limit_pct

    j = _judge([1 / r if rise else r for r in ratios], [t.significant for t in tests],
               [t.log_ratio_var for t in tests], fail_pct=as_drop(fail_pct),
               warn_pct=as_drop(warn_pct), th=th, untested_counts=False)
    # No noise model (one launch, one repeat, no interval): how far a percentile moves on its
    # own is unknown, and on the simulator TTFT moved 30-75% at single points between two
    # identical runs. Such a metric is shown, never judged; the caller names it once.
    untested = all(t.test == "none" for t in tests)
    status = "ok" if untested else ("warn" if j.status == "insufficient" else j.status)
    comparison = MetricComparison(
        metric=metric, rise_is_worse=rise, levels=tuple(k[2] for k in levels),
        ratios=tuple(ratios), geomean_ratio=geomean(ratios), fail_pct=fail_pct,
        warn_pct=warn_pct, launch_sd_pct=None if sd is None else 100 * sd,
        test=worst_test(tests), status=status,
        beyond_untested=untested and j.status == "insufficient",
    )
    finding = None if status == "ok" else Finding(
        status, metric, label,
        _metric_message(label, comparison, j, j.status == "insufficient", th.min_rank_repeats))
    return comparison, finding


def worst_test(tests: Sequence[_MetricTest]) -> str:
    """The weakest test a group's points had (what its verdict rests on at worst)."""
    order = ("none", "two-launch", "intervals", "mann-whitney")
    return min((t.test for t in tests), key=order.index)


def compare_group(
    mode: str,
    prompt_set: str,
    keys: Sequence[Key],
    ref: dict[Key, Samples],
    cand: dict[Key, Samples],
    th: Thresholds,
    relaunch: dict[Key, Samples] | None = None,
) -> tuple[GroupComparison, list[PointComparison], list[str]]:
    """One mode and prompt set over its levels: throughput, acceptance, error rate, latency
    percentiles and goodput (`relaunch`: the reference's second launch, if any); notes."""
    label = f"{mode}/{prompt_set}"
    points = [compare_point(k, ref[k], cand[k], th) for k in keys]
    findings: list[Finding] = []
    notes: list[str] = []
    tj = _throughput(label, points, th, findings)
    accept_status, accept_geo = _acceptance_check(label, points, th, findings, notes)
    metrics = []
    for metric in (*th.latency_metrics, GOODPUT):
        found = compare_metric(metric, label, keys, ref, cand, relaunch, th)
        if found is not None:
            metrics.append(found[0])
            if found[1] is not None:
                findings.append(found[1])
    err_status, ref_rate, cand_rate, err_p = _error_check(
        [ref[k] for k in keys], [cand[k] for k in keys], th)
    if err_status != "ok":
        p_text = "" if err_p is None else f", p={err_p:.3g}"
        findings.append(Finding(err_status, "error_rate", label,
                                f"{label}: error rate {ref_rate:.1%} -> {cand_rate:.1%}{p_text}"))
    worst_point = min(points, key=lambda p: p.ratio)
    group = GroupComparison(
        mode=mode, prompt_set=prompt_set, levels=tuple(p.concurrency for p in points),
        geomean_ratio=tj.geomean, geomean_p_value=tj.geomean_p,
        geomean_without_worst=tj.without_worst,
        worst_concurrency=worst_point.concurrency, worst_ratio=worst_point.ratio,
        accept_ratio=accept_geo, ref_error_rate=ref_rate, cand_error_rate=cand_rate,
        throughput_status=tj.status, accept_status=accept_status, error_status=err_status,
        status=worst((tj.status, accept_status, err_status, *(m.status for m in metrics))),
        findings=tuple(findings), metrics=tuple(metrics),
    )
    noisy = _noisy_note(label, keys, ref, cand, th)
    if noisy:
        notes.append(noisy)
    return group, points, notes


# ---------------------------------------------------------------------------------------------
# the crossover


def _grid_position(c: float, levels: Sequence[int]) -> float:
    """Where c sits on the concurrency grid, in levels (log-interpolated, clamped)."""
    if len(levels) == 1 or c <= levels[0]:
        return 0.0
    if c >= levels[-1]:
        return float(len(levels) - 1)
    for i in range(len(levels) - 1):
        lo, hi = levels[i], levels[i + 1]
        if lo <= c <= hi:
            return i + math.log(c / lo) / math.log(hi / lo)
    return float(len(levels) - 1)


def _position(outcome: str, c: float | None, levels: Sequence[int]) -> float:
    if outcome == "eagle3_never_wins" or (c is None and outcome != "eagle3_always_wins"):
        return 0.0
    if outcome == "eagle3_always_wins" or c is None:
        return float(len(levels) - 1)
    return _grid_position(c, levels)


@dataclass(frozen=True)
class Decision:
    """One crossing the gate judges: EAGLE-3 against `den`, stored under `key` in analysis.json
    (None: the set's own top-level keys)."""

    name: str  # "plain-server" | "one-server"
    den: str
    key: Literal["one_server"] | None
    subject: str  # finding subject prefix
    consequence: str  # what a moved crossing means, for a failure


DECISIONS: tuple[Decision, ...] = (
    Decision("plain-server", "baseline", None, "crossover",
             "a dynamic-disable threshold taken from the reference no longer fits"),
    Decision("one-server", "zero-step", "one_server", "one-server",
             "a one-server threshold taken from the reference no longer fits"),
)


@dataclass(frozen=True)
class _Ends:
    """The crossover of both runs for one prompt set, and where it came from."""

    source: str  # "analysis.json" | "computed"
    ref_outcome: str
    cand_outcome: str
    ref_c: float | None
    cand_c: float | None
    interval: tuple[float, float] | None  # the reference's, from analysis.json only


def _stored_ends(ref_entry: DecisionEntry, cand_entry: DecisionEntry) -> _Ends:
    interval: tuple[float, float] | None = None
    raw = ref_entry.get("interval")
    if isinstance(raw, list | tuple) and len(raw) == 2:
        low, high = finite_or_none(raw[0]), finite_or_none(raw[1])
        if low is not None and high is not None:
            interval = (low, high)
    return _Ends(
        "analysis.json", str(ref_entry["outcome"]), str(cand_entry["outcome"]),
        finite_or_none(ref_entry.get("crossover_concurrency")),
        finite_or_none(cand_entry.get("crossover_concurrency")), interval,
    )


def _computed_ends(
    prompt_set: str, den: str, levels: list[int], ref: dict[Key, Samples],
    cand: dict[Key, Samples],
) -> _Ends:
    """Both crossovers from r(c) = median eagle3 / median `den` tok/s, by the report's rule."""

    def curve(samples: dict[Key, Samples]) -> list[float]:
        out = []
        for c in levels:
            other = float(np.median(samples[(den, prompt_set, c)].output_tok_s))
            spec = float(np.median(samples[("eagle3", prompt_set, c)].output_tok_s))
            out.append(spec / other if other > 0 else math.inf)
        return out

    ref_x, cand_x = find_crossing(levels, curve(ref)), find_crossing(levels, curve(cand))
    return _Ends("computed", ref_x.outcome, cand_x.outcome, ref_x.crossover_concurrency,
                 cand_x.crossover_concurrency, None)


def _stored_entry(run: Run, prompt_set: str, decision: Decision) -> DecisionEntry | None:
    """The decision's entry in the run's analysis.json, when it has an outcome."""
    entry = analysis_entry(run, prompt_set)
    if entry is None or decision.key is None:
        return entry
    nested = entry.get(decision.key)
    if isinstance(nested, dict) and nested.get("outcome") is not None:
        return nested
    return None


def _status(shift: float, inside: bool, th: Thresholds) -> str:
    if abs(shift) > th.crossover_fail_levels and not inside:
        return "fail"
    if abs(shift) > th.crossover_warn_levels:
        return "warn"
    return "ok"


def compare_crossover(
    prompt_set: str,
    keys: set[Key],
    runs: tuple[Run, Run],
    samples: tuple[dict[Key, Samples], dict[Key, Samples]],
    th: Thresholds,
    decision: Decision = DECISIONS[0],
) -> CrossoverComparison | None:
    """One decision's crossover of one prompt set in (reference, candidate); None when the two
    configurations share no level.

    From ``analysis.json`` when both runs have it, else computed from the summaries.
    """
    # Concurrency levels: open-loop runs are judged by no crossover (regress/__init__.py).
    levels = sorted(
        int(c) for (m, s, c) in keys
        if m == decision.den and s == prompt_set and ("eagle3", s, c) in keys
    )
    if not levels:
        return None
    ref_entry, cand_entry = (_stored_entry(run, prompt_set, decision) for run in runs)
    if ref_entry is not None and cand_entry is not None:
        ends = _stored_ends(ref_entry, cand_entry)
    else:
        ends = _computed_ends(prompt_set, decision.den, levels, *samples)
    shift = (_position(ends.cand_outcome, ends.cand_c, levels)
             - _position(ends.ref_outcome, ends.ref_c, levels))
    interval = ends.interval
    inside = (
        interval is not None and ends.cand_c is not None and ends.cand_outcome == "crossover"
        and interval[0] <= ends.cand_c <= interval[1]
    )
    status = _status(shift, inside, th)
    interval_text = (
        "" if interval is None else f", reference interval {interval[0]:.0f}-{interval[1]:.0f}"
    )
    message = (
        f"{decision.subject}/{prompt_set}: {describe_crossover(ends.ref_outcome, ends.ref_c)} -> "
        f"{describe_crossover(ends.cand_outcome, ends.cand_c)} ({shift:+.1f} levels"
        f"{interval_text}; {ends.source})"
    )
    if status == "fail":
        # Either direction fails: a threshold deployed from the reference is now wrong.
        message += f"; {decision.consequence}"
    return CrossoverComparison(
        prompt_set=prompt_set, source=ends.source, ref_outcome=ends.ref_outcome,
        cand_outcome=ends.cand_outcome, ref_concurrency=ends.ref_c,
        cand_concurrency=ends.cand_c, ref_interval=interval, shift_levels=shift,
        status=status, message=message, decision=decision.name,
    )
