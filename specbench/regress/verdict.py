"""The verdict of a comparison: its records, as JSON (`--json`) and as Markdown.

Every text a user reads about a point, group or crossover is built from these records, so the
terminal table (:mod:`specbench.regress.render`), the JSON file and the Markdown step summary
say the same thing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from specbench.regress.thresholds import Thresholds
from specbench.results.points import level_text

JSON_SCHEMA = "specbench.regress/1"
EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_UNUSABLE = 2

# Severity order used to combine checks: the worst one decides.
RANK = {"ok": 0, "warn": 1, "insufficient": 2, "fail": 3}
WORD = {"ok": "ok", "warn": "warn", "insufficient": "insufficient data", "fail": "REGRESSION"}


def worst(statuses: Iterable[str]) -> str:
    """The most severe of some check statuses ("ok" for none)."""
    return max(statuses, key=RANK.__getitem__, default="ok")


def pct(ratio: float) -> str:
    """A ratio as a signed percentage change: 0.9 -> "-10.0%"."""
    return f"{(ratio - 1) * 100:+.1f}%"


def describe_crossover(outcome: str, c: float | None) -> str:
    """One run's crossover in a few words: "c*=32" or "EAGLE-3 never wins"."""
    if outcome == "crossover" and c is not None:
        return f"c*={c:.0f}"
    return {"eagle3_never_wins": "EAGLE-3 never wins",
            "eagle3_always_wins": "EAGLE-3 wins everywhere"}.get(outcome, outcome)


@dataclass(frozen=True)
class Finding:
    """One line a user reads: what regressed (or warns) and where."""

    status: str  # "fail" | "insufficient" | "warn"
    check: str  # "output_tok_s" | "accept_length" | "error_rate" | "crossover", or a latency
    # or goodput column ("tpot_ms_p90", "goodput_req_s")
    subject: str  # "eagle3/coding" or "crossover/coding"
    text: str


@dataclass(frozen=True)
class PointComparison:
    """One (mode, prompt set, concurrency) in both runs, repeats pooled."""

    mode: str
    prompt_set: str
    concurrency: float
    ref_repeats: int
    cand_repeats: int
    ref_output_tok_s: float  # median over repeats
    cand_output_tok_s: float
    ratio: float  # candidate / reference
    test: str  # "mann-whitney" | "ci-overlap" | "none"
    p_value: float | None  # one-sided, candidate below reference; None unless mann-whitney
    significant: bool | None  # None when no test was possible
    log_ratio_var: float | None  # variance of log(ratio), for the geometric-mean z-test
    ref_accept_length: float | None = None
    cand_accept_length: float | None = None
    accept_ratio: float | None = None
    accept_p_value: float | None = None
    accept_significant: bool | None = None
    accept_log_ratio_var: float | None = None
    status: str = "ok"

    @property
    def change_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0


def metric_label(metric: str) -> str:
    """A summary column as people say it: "tpot_ms_p90" -> "TPOT p90", "goodput_req_s" ->
    "goodput"."""
    if metric == "goodput_req_s":
        return "goodput"
    name, _, pctl = metric.partition("_ms_")
    return f"{name.upper()} {pctl}" if pctl else metric


@dataclass(frozen=True)
class MetricComparison:
    """One latency percentile or goodput of one mode and prompt set over its levels."""

    metric: str  # the summary column: "tpot_ms_p90", "goodput_req_s"
    rise_is_worse: bool  # True for a latency, False for goodput
    levels: tuple[float, ...]
    ratios: tuple[float, ...]  # candidate / reference (medians over repeats) per level
    geomean_ratio: float
    fail_pct: float  # the limit applied: the option's, or wider from the reference's launches
    warn_pct: float
    launch_sd_pct: float | None  # sd of the metric's log between the reference's two launches
    test: str  # the weakest point's: "mann-whitney" | "intervals" | "two-launch" | "none"
    status: str
    beyond_untested: bool = False  # beyond the fail limit where no point could be tested

    @property
    def label(self) -> str:
        return metric_label(self.metric)

    @property
    def worst_text(self) -> str:
        """The level that moved most the wrong way: "c=64 +20.1%"."""
        pick = max if self.rise_is_worse else min
        i = pick(range(len(self.ratios)), key=lambda k: self.ratios[k])
        return f"{level_text(self.levels[i])} {pct(self.ratios[i])}"

    @property
    def limit_text(self) -> str:
        """The fail limit as a signed change: "+5.0%" for a latency, "-5.0%" for goodput."""
        return f"{'+' if self.rise_is_worse else '-'}{self.fail_pct:.1f}%"


@dataclass(frozen=True)
class GroupComparison:
    """Verdict for one mode and prompt set over all matched concurrency levels."""

    mode: str
    prompt_set: str
    levels: tuple[float, ...]
    geomean_ratio: float
    geomean_p_value: float | None
    geomean_without_worst: float | None
    worst_concurrency: float
    worst_ratio: float
    accept_ratio: float | None  # geometric mean over levels; None for baseline
    ref_error_rate: float
    cand_error_rate: float
    throughput_status: str
    accept_status: str
    error_status: str
    status: str
    findings: tuple[Finding, ...]
    metrics: tuple[MetricComparison, ...] = ()  # latency percentiles and goodput

    @property
    def label(self) -> str:
        return f"{self.mode}/{self.prompt_set}"


@dataclass(frozen=True)
class CrossoverComparison:
    """Where EAGLE-3 stops beating another configuration, in both runs, for one prompt set:
    the baseline (decision "plain-server") or its zero-step path ("one-server")."""

    prompt_set: str
    source: str  # "analysis.json" | "computed"
    ref_outcome: str
    cand_outcome: str
    ref_concurrency: float | None
    cand_concurrency: float | None
    ref_interval: tuple[float, float] | None
    shift_levels: float  # candidate minus reference, in concurrency-grid levels
    status: str
    message: str
    decision: str = "plain-server"

    @property
    def subject(self) -> str:
        prefix = "crossover" if self.decision == "plain-server" else self.decision
        return f"{prefix}/{self.prompt_set}"


@dataclass(frozen=True)
class Verdict:
    """The whole comparison; `exit_code` is what `specbench regress` returns."""

    status: str  # "ok" | "warn" | "regression" | "insufficient"
    exit_code: int
    reference: str
    candidate: str
    thresholds: Thresholds
    groups: tuple[GroupComparison, ...]
    crossovers: tuple[CrossoverComparison, ...]
    points: tuple[PointComparison, ...]
    findings: tuple[Finding, ...]  # failures first, then insufficient data, then warnings
    notes: tuple[str, ...] = field(default=())

    @property
    def messages(self) -> tuple[str, ...]:
        return tuple(f.text for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        groups = []
        for g in self.groups:
            row = asdict(g)
            row["geomean_change_pct"] = (g.geomean_ratio - 1.0) * 100.0
            groups.append(row)
        points = []
        for p in self.points:
            row = asdict(p)
            row["change_pct"] = p.change_pct
            points.append(row)
        return _json_clean({
            "schema": JSON_SCHEMA,
            "status": self.status,
            "exit_code": self.exit_code,
            "reference": self.reference,
            "candidate": self.candidate,
            "thresholds": asdict(self.thresholds),
            "messages": list(self.messages),
            "findings": [asdict(f) for f in self.findings],
            "notes": list(self.notes),
            "groups": groups,
            "crossovers": [asdict(c) for c in self.crossovers],
            "points": points,
        })

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def to_markdown(self) -> str:
        return markdown(self)


def _json_clean(obj: Any) -> Any:
    """NaN and infinities become null so the verdict is strict JSON."""
    if isinstance(obj, dict):
        return {k: _json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def unusable_json(message: str) -> str:
    """The JSON verdict when the runs cannot be compared (exit 2)."""
    return json.dumps({"schema": JSON_SCHEMA, "status": "unusable",
                       "exit_code": EXIT_UNUSABLE, "messages": [message]}, indent=2) + "\n"


def accept_cell(g: GroupComparison) -> str:
    return "-" if g.accept_ratio is None else pct(g.accept_ratio)


def errors_cell(g: GroupComparison) -> str:
    return f"{g.ref_error_rate:.1%} -> {g.cand_error_rate:.1%}"


def metric_columns(verdict: Verdict) -> list[str]:
    """The latency and goodput columns any group compared, in the order they were judged."""
    return list(dict.fromkeys(m.metric for g in verdict.groups for m in g.metrics))


def metric_verdict(g: GroupComparison) -> str:
    """One group's latency and goodput verdict word: the worst status, or "untested" where no
    point of any of its metrics could be tested."""
    if g.metrics and all(m.test == "none" for m in g.metrics):
        return "untested"
    return WORD[worst(m.status for m in g.metrics)]


def metric_cells(g: GroupComparison, names: Sequence[str]) -> list[str]:
    """Each metric's geometric mean change in one group ("-" where it was not compared)."""
    by_name = {m.metric: m for m in g.metrics}
    return [pct(by_name[n].geomean_ratio) if n in by_name else "-" for n in names]


def markdown(verdict: Verdict) -> str:
    """The verdict as GitHub-flavoured Markdown (the job's step summary)."""
    heading = {"regression": "REGRESSION", "insufficient": "insufficient data",
               "warn": "ok (with warnings)", "ok": "ok"}[verdict.status]
    lines = [
        f"## specbench regression check: {heading}",
        "",
        f"Reference `{verdict.reference}` vs candidate `{verdict.candidate}` "
        f"(fail at -{verdict.thresholds.fail_pct:g}% output tok/s, "
        f"-{verdict.thresholds.accept_fail_pct:g}% accept length"
        + (f", +{verdict.thresholds.latency_fail_pct:g}% latency, "
           f"-{verdict.thresholds.goodput_fail_pct:g}% goodput" if metric_columns(verdict)
           else "") + ").",
        "",
        "| mode/prompt set | levels | output tok/s (geomean) | worst point | accept length "
        "| error rate | verdict |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for g in verdict.groups:
        lines.append(
            f"| {g.label} | {len(g.levels)} | {pct(g.geomean_ratio)} | "
            f"{level_text(g.worst_concurrency)} {pct(g.worst_ratio)} | {accept_cell(g)} | "
            f"{errors_cell(g)} | {WORD[g.status]} |"
        )
    metric_names = metric_columns(verdict)
    if metric_names:
        lines += ["", "| mode/prompt set | " + " | ".join(
            metric_label(m) for m in metric_names) + " | verdict |",
            "|---|" + "---:|" * len(metric_names) + "---|"]
        for g in verdict.groups:
            lines.append(f"| {g.label} | " + " | ".join(metric_cells(g, metric_names))
                         + f" | {metric_verdict(g)} |")
    if verdict.crossovers:
        lines += ["",
                  "| prompt set | decision | reference | candidate | shift (levels) | verdict |",
                  "|---|---|---|---|---:|---|"]
        for x in verdict.crossovers:
            lines.append(
                f"| {x.prompt_set} | {x.decision} | "
                f"{describe_crossover(x.ref_outcome, x.ref_concurrency)} | "
                f"{describe_crossover(x.cand_outcome, x.cand_concurrency)} | "
                f"{x.shift_levels:+.1f} | {WORD[x.status]} |"
            )
    if verdict.messages:
        lines += ["", *[f"- {m}" for m in verdict.messages]]
    if verdict.notes:
        lines += ["", "<details><summary>notes</summary>", "",
                  *[f"- {n}" for n in verdict.notes], "", "</details>"]
    lines.append("")
    return "\n".join(lines) + "\n"
