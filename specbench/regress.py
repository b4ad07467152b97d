"""The CI regression gate: compare a candidate run with a committed reference run.

`specbench regress --reference DIR --candidate DIR` exits 0 (no regression), 1 (regression) or
2 (unusable input: the runs cannot be compared, or the data cannot support a verdict). Both runs
are read only through :func:`specbench.results.load_run`; a committed reference may keep only
``manifest.json`` and ``summary.parquet``, so nothing here needs per-request rows.

How "regressed" is decided (shared/reference/regression-statistics.md, the asv / HUD pattern):

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
* The crossover concurrency (from ``analysis.json`` when both runs have one, else computed
  here from r(c) = eagle3 / baseline) fails when it moves by more than
  ``crossover_fail_levels`` grid levels and leaves the reference's interval: the threshold
  deployed from the reference would then be wrong.
* The error rate fails when it rises by ``error_fail_pp`` percentage points and a
  two-proportion z-test supports it.

When an effect beyond the fail threshold cannot be tested (one repeat and no CI columns), the
verdict is "insufficient" and the exit code 2, as the PyTorch HUD reports insufficient data
instead of pass or fail. The defaults below are starting points; tune them from measured
run-to-run noise (a gate misfires often when noise CV exceeds about half the fail threshold).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from specbench.config import ConfigError
from specbench.results import Run, RunDirError, load_run, write_text_atomic

JSON_SCHEMA = "specbench.regress/1"
EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_UNUSABLE = 2

CI_LOW_COLUMN = "output_tok_s_ci_low"
CI_HIGH_COLUMN = "output_tok_s_ci_high"
SPEC_MODES: tuple[str, ...] = ("eagle3", "dynamic")

# Severity order used to combine the checks of one mode/prompt set.
_RANK = {"ok": 0, "warn": 1, "insufficient": 2, "fail": 3}
# z of a two-sided 95% interval: the CI columns are 95% bootstrap intervals.
_Z95 = 1.959963984540054
# The exact U distribution is cheap up to this many samples in total; beyond it, and with
# ties, the normal approximation (with tie and continuity corrections) is used.
_EXACT_MAX_SAMPLES = 60


class RegressInputError(ValueError):
    """The two runs cannot be compared; the message says exactly what does not match."""


@dataclass(frozen=True)
class Thresholds:
    """When a difference warns or fails. Percentages are drops relative to the reference.

    Chosen from measured run-to-run noise of the `ci` preset on the simulated server
    (benchmarks/regress_noise.py, 5 runs against one reference; results/reference/README.md):
    on the 2-core CI machine the candidate/reference ratio of a point moved by at most 1.9%
    (sd of log ratio 0.4%), the geometric mean of a mode/prompt set by at most 0.43%.
    warn_pct 2.5 sits above the worst single point seen; fail_pct 5 is 12 point sds, and 4
    sds of a 5-level geometric mean even at the 2.7% CV CodSpeed measured on hosted runners,
    and the gate also needs statistical support, so noise alone
    does not fail, while a 10% slower server (about -9% tok/s) fails with room to spare.
    Acceptance is a ratio of token counts (spread under 0.1% here) and keeps wider limits for
    real GPUs, where sampling kernels are not bit-reproducible.
    """

    warn_pct: float = 2.5  # output tok/s drop that warns
    fail_pct: float = 5.0  # output tok/s drop that fails (with statistical support)
    accept_warn_pct: float = 5.0  # accept length drop that warns
    accept_fail_pct: float = 10.0  # accept length drop that fails
    error_warn_pp: float = 0.5  # error-rate rise, percentage points, that warns
    error_fail_pp: float = 2.0  # error-rate rise, percentage points, that fails
    crossover_warn_levels: float = 0.5  # crossover shift, in concurrency-grid levels, that warns
    crossover_fail_levels: float = 1.0  # ... that fails when also outside the reference interval
    alpha: float = 0.05  # one-sided significance level of every test
    min_adjacent_levels: int = 2  # failing points needed side by side on the concurrency grid
    min_rank_repeats: int = 3  # repeats per side for the rank test (3 vs 3 reaches p = 0.05)

    def validate(self) -> None:
        """Raise ConfigError (one line) for values that make no sense."""
        pairs = (
            ("warn_pct", "fail_pct", self.warn_pct, self.fail_pct),
            ("accept_warn_pct", "accept_fail_pct", self.accept_warn_pct, self.accept_fail_pct),
            ("error_warn_pp", "error_fail_pp", self.error_warn_pp, self.error_fail_pp),
            ("crossover_warn_levels", "crossover_fail_levels",
             self.crossover_warn_levels, self.crossover_fail_levels),
        )
        for warn_name, fail_name, warn, fail in pairs:
            if not (warn >= 0 and fail > 0):
                raise ConfigError(f"{warn_name} and {fail_name} must be positive; e.g. 3 and 7")
            if warn > fail:
                raise ConfigError(
                    f"{warn_name} {warn:g} is above {fail_name} {fail:g}; "
                    "set the warn threshold at or below the fail threshold"
                )
        for name, value in (("fail_pct", self.fail_pct), ("accept_fail_pct", self.accept_fail_pct)):
            if value >= 100:
                raise ConfigError(f"{name} {value:g} must be below 100 (it is a drop in percent)")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"alpha {self.alpha:g} must be between 0 and 1; e.g. 0.05")
        if self.min_adjacent_levels < 1 or self.min_rank_repeats < 2:
            raise ConfigError("min_adjacent_levels must be >= 1 and min_rank_repeats >= 2")


# ---------------------------------------------------------------------------------------------
# Statistics


@dataclass(frozen=True)
class RankTest:
    """Mann-Whitney U of sample x against sample y."""

    u: float  # pairs (x_i, y_j) with x_i > y_j, ties counted one half
    p_value: float
    method: str  # "exact" | "normal"


def _normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _u_counts(m: int, n: int) -> list[int]:
    """Number of orderings of m x's and n y's giving each U = 0..m*n (no ties).

    These are the coefficients of the Gaussian binomial [m+n choose m](q), built as
    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i); truncating at degree m*n is exact because
    power-series products and quotients only look at lower coefficients.
    """
    size = m * n + 1
    poly = [1] + [0] * (size - 1)
    for i in range(1, m + 1):
        shift = n + i
        for k in range(size - 1, shift - 1, -1):
            poly[k] -= poly[k - shift]
        for k in range(i, size):
            poly[k] += poly[k - i]
    return poly


def mann_whitney_u(x: Sequence[float], y: Sequence[float], alternative: str = "less") -> RankTest:
    """Mann-Whitney U rank test; ``alternative="less"`` asks whether x tends to be below y.

    Exact distribution when there are no ties and at most 60 values in all; otherwise the
    normal approximation with tie correction and a 0.5 continuity correction.
    """
    if alternative not in ("less", "greater", "two-sided"):
        raise ValueError(f"alternative {alternative!r}: use less, greater or two-sided")
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        raise ValueError("mann_whitney_u needs at least one value on each side")
    values = np.concatenate([np.asarray(x, dtype=float), np.asarray(y, dtype=float)])
    ranks = pd.Series(values).rank(method="average").to_numpy()
    u = float(ranks[:m].sum() - m * (m + 1) / 2)
    _, tie_counts = np.unique(values, return_counts=True)
    has_ties = bool((tie_counts > 1).any())
    if not has_ties and m + n <= _EXACT_MAX_SAMPLES:
        counts = _u_counts(m, n)
        total = math.comb(m + n, m)
        k = round(u)
        p_less = sum(counts[: k + 1]) / total
        p_greater = sum(counts[k:]) / total
        method = "exact"
    else:
        big_n = m + n
        tie_term = float((tie_counts**3 - tie_counts).sum()) / (big_n * (big_n - 1))
        sigma = math.sqrt(m * n / 12.0 * ((big_n + 1) - tie_term))
        mu = m * n / 2.0
        if sigma == 0.0:  # every value tied: no evidence either way
            p_less = p_greater = 1.0
        else:
            p_less = _normal_cdf((u - mu + 0.5) / sigma)
            p_greater = 1.0 - _normal_cdf((u - mu - 0.5) / sigma)
        method = "normal"
    if alternative == "less":
        p = p_less
    elif alternative == "greater":
        p = p_greater
    else:
        p = min(1.0, 2.0 * min(p_less, p_greater))
    return RankTest(u=u, p_value=min(1.0, p), method=method)


def _geomean(ratios: Sequence[float]) -> float:
    if any(r <= 0 for r in ratios):
        return 0.0
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


# ---------------------------------------------------------------------------------------------
# Result records


@dataclass(frozen=True)
class Finding:
    """One line a user reads: what regressed (or warns) and where."""

    status: str  # "fail" | "insufficient" | "warn"
    check: str  # "output_tok_s" | "accept_length" | "error_rate" | "crossover"
    subject: str  # "eagle3/coding" or "crossover/coding"
    text: str


@dataclass(frozen=True)
class PointComparison:
    """One (mode, prompt set, concurrency) in both runs, repeats pooled."""

    mode: str
    prompt_set: str
    concurrency: int
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


@dataclass(frozen=True)
class GroupComparison:
    """Verdict for one mode and prompt set over all matched concurrency levels."""

    mode: str
    prompt_set: str
    levels: tuple[int, ...]
    geomean_ratio: float
    geomean_p_value: float | None
    geomean_without_worst: float | None
    worst_concurrency: int
    worst_ratio: float
    accept_ratio: float | None  # geometric mean over levels; None for baseline
    ref_error_rate: float
    cand_error_rate: float
    throughput_status: str
    accept_status: str
    error_status: str
    status: str
    findings: tuple[Finding, ...]

    @property
    def label(self) -> str:
        return f"{self.mode}/{self.prompt_set}"


@dataclass(frozen=True)
class CrossoverComparison:
    """Where EAGLE-3 stops beating the baseline, in both runs, for one prompt set."""

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
        return _markdown(self)


def _json_clean(obj: Any) -> Any:
    """NaN and infinities become null so the verdict is strict JSON."""
    if isinstance(obj, dict):
        return {k: _json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# ---------------------------------------------------------------------------------------------
# Reading the runs


@dataclass(frozen=True)
class _Samples:
    output_tok_s: tuple[float, ...]
    ci_low: tuple[float, ...] | None  # None when any repeat lacks its interval
    ci_high: tuple[float, ...] | None
    accept_length: tuple[float, ...]  # NaN repeats dropped
    n_requests: int
    n_errors: int
    flags: frozenset[str]


_Key = tuple[str, str, int]


def _finite(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _samples(summary: pd.DataFrame) -> dict[_Key, _Samples]:
    out: dict[_Key, _Samples] = {}
    if summary.empty:
        return out
    has_ci = CI_LOW_COLUMN in summary.columns and CI_HIGH_COLUMN in summary.columns
    # Parquet and CSV round trips may turn the level into a float; the key is an int.
    frame = summary.assign(concurrency=pd.to_numeric(summary["concurrency"]).astype(int))
    for (mode, prompt_set, conc), rows in frame.groupby(
        ["mode", "prompt_set", "concurrency"], sort=True
    ):
        tok = tuple(_finite(v) for v in rows["output_tok_s"])
        ci_low: tuple[float, ...] | None = None
        ci_high: tuple[float, ...] | None = None
        if has_ci:
            lows = [_finite(v) for v in rows[CI_LOW_COLUMN]]
            highs = [_finite(v) for v in rows[CI_HIGH_COLUMN]]
            if all(v is not None and v > 0 for v in lows) and all(v is not None for v in highs):
                ci_low = tuple(float(v) for v in lows if v is not None)
                ci_high = tuple(float(v) for v in highs if v is not None)
        accept = tuple(v for v in (_finite(a) for a in rows["accept_length"]) if v is not None)
        flags = frozenset(
            f for text in rows["flags"].astype(str) for f in text.split(";") if f.strip()
        )
        out[(str(mode), str(prompt_set), int(cast(int, conc)))] = _Samples(
            # A point that produced no number (every request failed) measured nothing: 0 tok/s.
            output_tok_s=tuple(0.0 if v is None else v for v in tok),
            ci_low=ci_low,
            ci_high=ci_high,
            accept_length=accept,
            n_requests=int(pd.to_numeric(rows["n_requests"], errors="coerce").fillna(0).sum()),
            n_errors=int(pd.to_numeric(rows["n_errors"], errors="coerce").fillna(0).sum()),
            flags=flags,
        )
    return out


def _describe_points(keys: Iterable[_Key]) -> str:
    """'eagle3/coding c=64,128; baseline/agentic c=250'."""
    by_group: dict[tuple[str, str], list[int]] = {}
    for mode, prompt_set, conc in sorted(keys):
        by_group.setdefault((mode, prompt_set), []).append(conc)
    return "; ".join(
        f"{mode}/{pset} c={','.join(str(c) for c in levels)}"
        for (mode, pset), levels in by_group.items()
    )


# (path in the manifest config, label). These change what is measured, so a reference made
# with other values says nothing about the candidate.
_CONFIG_FIELDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("engine",), "engine"),
    (("server", "model_path"), "model path"),
    (("server", "draft_model_path"), "draft model path"),
    (("server", "speculative_num_steps"), "speculative steps"),
    (("server", "tp_size"), "tensor parallel size"),
    (("load", "protocol"), "protocol"),
    (("load", "temperature"), "temperature"),
)
_SIM_PROFILE_FIELD: tuple[tuple[str, ...], str] = (("sim", "profile"), "sim profile")


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _config_problems(
    reference: Run, candidate: Run, allowed: Sequence[str] = (), notes: list[str] | None = None
) -> list[str]:
    ref_cfg = reference.manifest.get("config")
    cand_cfg = candidate.manifest.get("config")
    problems = []
    for name, cfg in (("reference", ref_cfg), ("candidate", cand_cfg)):
        if not isinstance(cfg, dict):
            problems.append(f"the {name} manifest has no 'config' (not written by specbench sweep)")
    if problems:
        return problems
    fields = list(_CONFIG_FIELDS)
    if "sim" in (_dig(ref_cfg, ("engine",)), _dig(cand_cfg, ("engine",))):
        fields.append(_SIM_PROFILE_FIELD)
    for path, label in fields:
        ref_value, cand_value = _dig(ref_cfg, path), _dig(cand_cfg, path)
        if ref_value == cand_value:
            continue
        dotted = ".".join(path)
        text = f"{label} differs ({dotted}: reference {ref_value!r}, candidate {cand_value!r})"
        if dotted in allowed:
            if notes is not None:
                notes.append(f"{text}; compared anyway (--allow-config-change {dotted})")
            continue
        problems.append(text + f" (if intended, pass --allow-config-change {dotted})")
    return problems


def allowed_config_fields() -> tuple[str, ...]:
    """Dotted manifest paths that `--allow-config-change` accepts."""
    return tuple(".".join(path) for path, _ in (*_CONFIG_FIELDS, _SIM_PROFILE_FIELD))


def _threshold_only_levels(run: Run, keys: Iterable[_Key]) -> set[_Key]:
    """Dynamic-mode points at levels outside the configured grid.

    The sweep adds T-1, T, T+1 for the dynamic mode only. There the running batch size
    straddles the switch, so whether a step drafts depends on request timing and the
    throughput does not repeat between identical runs (measured: up to 50% apart); with an
    auto threshold the levels themselves move. They are reported in the run, not gated.
    """
    grid = _dig(run.manifest, ("config", "concurrency"))
    if not isinstance(grid, list | tuple) or not grid:
        return set()
    levels = {int(c) for c in grid}
    return {k for k in keys if k[0] == "dynamic" and k[2] not in levels}


def _prompt_set_problems(
    reference: Run, candidate: Run, ref_sets: set[str], cand_sets: set[str], notes: list[str]
) -> list[str]:
    problems = []
    missing_sets = sorted(ref_sets - cand_sets)
    if missing_sets:
        problems.append(
            f"the candidate has no prompt set {', '.join(missing_sets)} "
            f"(reference has {', '.join(sorted(ref_sets))})"
        )
    unverified = []
    for name in sorted(ref_sets & cand_sets):
        ref_hash = _dig(reference.manifest, ("prompt_sets", name, "sha256"))
        cand_hash = _dig(candidate.manifest, ("prompt_sets", name, "sha256"))
        if ref_hash is None and cand_hash is None:
            unverified.append(name)
        elif ref_hash is None or cand_hash is None:
            side = "reference" if ref_hash is None else "candidate"
            problems.append(
                f"prompt set {name!r} has no sha256 in the {side} manifest, so it cannot be "
                "shown to be the same prompts"
            )
        elif ref_hash != cand_hash:
            problems.append(
                f"prompt set {name!r} differs (sha256 {str(ref_hash)[:12]} in the reference, "
                f"{str(cand_hash)[:12]} in the candidate)"
            )
    if unverified:
        notes.append(
            f"prompt set(s) {', '.join(unverified)} carry no sha256 in either manifest; "
            "assumed identical"
        )
    return problems


# ---------------------------------------------------------------------------------------------
# Per-point and per-group judgement


def _repeat_log_var(values: Sequence[float]) -> float | None:
    """Variance of the mean of log(values) over repeats; None with < 2 or non-positive values."""
    if len(values) < 2 or min(values) <= 0:
        return None
    return float(np.var(np.log(values), ddof=1)) / len(values)


def _log_ratio_var(ref: _Samples, cand: _Samples, min_rank_repeats: int) -> float | None:
    """Variance of log(candidate median / reference median), from repeats or CI columns."""

    def side(s: _Samples, prefer_repeats: bool) -> float | None:
        n = len(s.output_tok_s)
        from_repeats = _repeat_log_var(s.output_tok_s)
        if prefer_repeats and from_repeats is not None:
            return from_repeats
        if s.ci_low is not None and s.ci_high is not None:
            # A 95% interval spans 2 * 1.96 standard errors; on the log scale it is
            # roughly symmetric for throughput.
            ses = [
                (math.log(hi) - math.log(lo)) / (2 * _Z95)
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


def _compare_point(key: _Key, ref: _Samples, cand: _Samples, th: Thresholds) -> PointComparison:
    mode, prompt_set, conc = key
    ref_med = float(np.median(ref.output_tok_s))
    cand_med = float(np.median(cand.output_tok_s))
    ratio = cand_med / ref_med
    test, p_value, significant = "none", None, None
    if min(len(ref.output_tok_s), len(cand.output_tok_s)) >= th.min_rank_repeats:
        test = "mann-whitney"
        p_value = mann_whitney_u(cand.output_tok_s, ref.output_tok_s, "less").p_value
        significant = p_value <= th.alpha
    elif (
        ref.ci_low is not None and ref.ci_high is not None
        and cand.ci_low is not None and cand.ci_high is not None
    ):
        # One repeat: the 95% bootstrap intervals over requests must not overlap.
        test = "ci-overlap"
        significant = max(cand.ci_high) < min(ref.ci_low)
    accept_ratio = accept_p = accept_sig = ref_acc = cand_acc = accept_var = None
    if mode in SPEC_MODES and ref.accept_length and cand.accept_length:
        ref_acc = float(np.median(ref.accept_length))
        cand_acc = float(np.median(cand.accept_length))
        if ref_acc > 0:
            accept_ratio = cand_acc / ref_acc
            if min(len(ref.accept_length), len(cand.accept_length)) >= th.min_rank_repeats:
                accept_p = mann_whitney_u(cand.accept_length, ref.accept_length, "less").p_value
                accept_sig = accept_p <= th.alpha
                ref_var = _repeat_log_var(ref.accept_length)
                cand_var = _repeat_log_var(cand.accept_length)
                if ref_var is not None and cand_var is not None:
                    accept_var = ref_var + cand_var
    status = "ok"
    if ratio <= 1 - th.fail_pct / 100:
        status = "fail" if significant else ("warn" if significant is False else "insufficient")
    elif ratio <= 1 - th.warn_pct / 100:
        status = "warn"
    if accept_ratio is not None and accept_ratio <= 1 - th.accept_warn_pct / 100:
        status = max(status, "warn", key=_RANK.__getitem__)
    return PointComparison(
        mode=mode, prompt_set=prompt_set, concurrency=conc,
        ref_repeats=len(ref.output_tok_s), cand_repeats=len(cand.output_tok_s),
        ref_output_tok_s=ref_med, cand_output_tok_s=cand_med, ratio=ratio,
        test=test, p_value=p_value, significant=significant,
        log_ratio_var=_log_ratio_var(ref, cand, th.min_rank_repeats),
        ref_accept_length=ref_acc, cand_accept_length=cand_acc, accept_ratio=accept_ratio,
        accept_p_value=accept_p, accept_significant=accept_sig, accept_log_ratio_var=accept_var,
        status=status,
    )


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
    geo = _geomean(ratios)
    worst = min(range(len(ratios)), key=lambda i: ratios[i])
    rest = [r for i, r in enumerate(ratios) if i != worst]
    without_worst = _geomean(rest) if rest else None
    geo_p: float | None = None
    if all(v is not None for v in log_vars) and geo > 0:
        se = math.sqrt(sum(v for v in log_vars if v is not None)) / len(ratios)
        mean_log = math.log(geo)
        geo_p = _normal_cdf(mean_log / se) if se > 0 else (0.0 if mean_log < 0 else 1.0)

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


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def _drop_range(ratios: Sequence[float]) -> str:
    drops = sorted((1 - r) * 100 for r in ratios)
    lo, hi = drops[0], drops[-1]
    return f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}%"


def _throughput_message(label: str, points: Sequence[PointComparison], j: _Judgement) -> str:
    n = len(points)
    head = f"{label}: output tok/s {_pct(j.geomean)} (geomean over {n} level{'s' * (n != 1)}"
    worst = min(points, key=lambda p: p.ratio)
    if j.run:
        run_pts = [points[i] for i in j.run]
        span = (f"c={run_pts[0].concurrency}..{run_pts[-1].concurrency} below by "
                f"{_drop_range([p.ratio for p in run_pts])}")
        p_values = [p.p_value for p in run_pts if p.p_value is not None]
        if j.status == "insufficient":
            evidence = "untested"
        elif len(p_values) == len(run_pts):
            evidence = f"p<={max(p_values):.3g}"
        else:
            evidence = "95% bootstrap intervals apart"
        return f"{head}; {span}, {evidence})"
    if j.via_geomean:
        evidence = "untested" if j.geomean_p is None else f"p={j.geomean_p:.3g}"
        return f"{head}, {evidence}; worst c={worst.concurrency} {_pct(worst.ratio)})"
    return f"{head}; worst c={worst.concurrency} {_pct(worst.ratio)})"


def _accept_message(label: str, points: Sequence[PointComparison], j: _Judgement) -> str:
    acc = [p for p in points if p.accept_ratio is not None]
    worst = min(acc, key=lambda p: p.accept_ratio or 0.0)
    ref_mean = float(np.mean([p.ref_accept_length for p in acc if p.ref_accept_length]))
    cand_mean = float(np.mean([p.cand_accept_length for p in acc if p.cand_accept_length]))
    return (
        f"{label}: accept length {_pct(j.geomean)} (geomean over {len(acc)} levels, "
        f"{ref_mean:.2f} -> {cand_mean:.2f}; worst c={worst.concurrency} "
        f"{_pct(worst.accept_ratio or 0.0)})"
    )


def _error_check(
    ref: Sequence[_Samples], cand: Sequence[_Samples], th: Thresholds
) -> tuple[str, float, float, float | None]:
    ref_err, cand_err = sum(s.n_errors for s in ref), sum(s.n_errors for s in cand)
    ref_total = ref_err + sum(s.n_requests for s in ref)
    cand_total = cand_err + sum(s.n_requests for s in cand)
    ref_rate = ref_err / ref_total if ref_total else 0.0
    cand_rate = cand_err / cand_total if cand_total else 0.0
    rise_pp = (cand_rate - ref_rate) * 100
    p: float | None = None
    if ref_total and cand_total:
        pooled = (ref_err + cand_err) / (ref_total + cand_total)
        se = math.sqrt(pooled * (1 - pooled) * (1 / ref_total + 1 / cand_total))
        p = 1 - _normal_cdf((cand_rate - ref_rate) / se) if se > 0 else 1.0
    if rise_pp >= th.error_fail_pp and p is not None and p <= th.alpha:
        status = "fail"
    elif rise_pp >= th.error_warn_pp:
        status = "warn"
    else:
        status = "ok"
    return status, ref_rate, cand_rate, p


def _compare_group(
    mode: str,
    prompt_set: str,
    keys: Sequence[_Key],
    ref: dict[_Key, _Samples],
    cand: dict[_Key, _Samples],
    th: Thresholds,
) -> tuple[GroupComparison, list[PointComparison], list[str]]:
    label = f"{mode}/{prompt_set}"
    points = [_compare_point(k, ref[k], cand[k], th) for k in keys]
    notes: list[str] = []
    tj = _judge([p.ratio for p in points], [p.significant for p in points],
                [p.log_ratio_var for p in points], th.fail_pct, th.warn_pct, th, False)
    findings: list[Finding] = []
    if tj.status != "ok":
        text = _throughput_message(label, points, tj)
        if tj.status == "insufficient":
            text += (f"; no statistical test is possible (fewer than {th.min_rank_repeats} "
                     "repeats per side and no output_tok_s_ci_low/high columns): rerun both runs "
                     f"with --repeats {th.min_rank_repeats}")
        findings.append(Finding(tj.status, "output_tok_s", label, text))
    acc_points = [p for p in points if p.accept_ratio is not None]
    accept_status, accept_geo = "ok", None
    if acc_points:
        aj = _judge([p.accept_ratio or 0.0 for p in acc_points],
                    [p.accept_significant for p in acc_points],
                    [p.accept_log_ratio_var for p in acc_points],
                    th.accept_fail_pct, th.accept_warn_pct, th, True)
        accept_status, accept_geo = aj.status, aj.geomean
        if aj.status != "ok":
            findings.append(Finding(aj.status, "accept_length", label,
                                    _accept_message(label, acc_points, aj)))
        if aj.status == "fail" and any(p.accept_significant is None for p in acc_points):
            notes.append(f"{label}: acceptance judged on effect size alone "
                         f"(fewer than {th.min_rank_repeats} repeats per side)")
    err_status, ref_rate, cand_rate, err_p = _error_check(
        [ref[k] for k in keys], [cand[k] for k in keys], th)
    if err_status != "ok":
        p_text = "" if err_p is None else f", p={err_p:.3g}"
        findings.append(Finding(err_status, "error_rate", label,
                                f"{label}: error rate {ref_rate:.1%} -> {cand_rate:.1%}{p_text}"))
    status = max(tj.status, accept_status, err_status, key=_RANK.__getitem__)
    worst = min(points, key=lambda p: p.ratio)
    group = GroupComparison(
        mode=mode, prompt_set=prompt_set, levels=tuple(p.concurrency for p in points),
        geomean_ratio=tj.geomean, geomean_p_value=tj.geomean_p,
        geomean_without_worst=tj.without_worst,
        worst_concurrency=worst.concurrency, worst_ratio=worst.ratio, accept_ratio=accept_geo,
        ref_error_rate=ref_rate, cand_error_rate=cand_rate,
        throughput_status=tj.status, accept_status=accept_status, error_status=err_status,
        status=status, findings=tuple(findings),
    )
    noisy = []
    for k in keys:
        for side, s in (("reference", ref[k]), ("candidate", cand[k])):
            vals = s.output_tok_s
            if len(vals) >= 2 and np.mean(vals) > 0:
                cv_pct = float(np.std(vals, ddof=1) / np.mean(vals) * 100)
                if cv_pct > th.fail_pct / 2:
                    noisy.append(f"c={k[2]} {side} CV {cv_pct:.1f}%")
    if noisy:
        notes.append(f"{label}: repeats are noisy ({', '.join(noisy)}), above half the fail "
                     "threshold; lengthen the window or add repeats before trusting the gate")
    return group, points, notes


# ---------------------------------------------------------------------------------------------
# Crossover


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


def _computed_crossover(
    levels: Sequence[int], ratios: Sequence[float]
) -> tuple[str, float | None]:
    """c* where r(c) last falls through 1 and stays below (log-linear between levels)."""
    above = [i for i, r in enumerate(ratios) if r >= 1.0]
    if not above:
        return "eagle3_never_wins", None
    j = above[-1]
    if j == len(levels) - 1:
        return "eagle3_always_wins", None
    r0, r1 = ratios[j], ratios[j + 1]
    frac = (r0 - 1.0) / (r0 - r1)
    log_c = math.log(levels[j]) + frac * (math.log(levels[j + 1]) - math.log(levels[j]))
    return "crossover", math.exp(log_c)


def _analysis_entry(analysis: dict[str, Any] | None, prompt_set: str) -> dict[str, Any] | None:
    if not analysis:
        return None
    holder = analysis.get("prompt_sets")
    entry = holder.get(prompt_set) if isinstance(holder, dict) else analysis.get(prompt_set)
    if isinstance(entry, dict) and "outcome" in entry:
        return entry
    return None


def _position(outcome: str, c: float | None, levels: Sequence[int]) -> float:
    if outcome == "eagle3_never_wins" or (c is None and outcome != "eagle3_always_wins"):
        return 0.0
    if outcome == "eagle3_always_wins" or c is None:
        return float(len(levels) - 1)
    return _grid_position(c, levels)


def _describe_crossover(outcome: str, c: float | None) -> str:
    if outcome == "crossover" and c is not None:
        return f"c*={c:.0f}"
    return {"eagle3_never_wins": "EAGLE-3 never wins",
            "eagle3_always_wins": "EAGLE-3 wins everywhere"}.get(outcome, outcome)


def _compare_crossover(
    prompt_set: str,
    keys: set[_Key],
    reference: Run,
    candidate: Run,
    ref: dict[_Key, _Samples],
    cand: dict[_Key, _Samples],
    th: Thresholds,
) -> CrossoverComparison | None:
    levels = sorted(
        c for (m, s, c) in keys
        if m == "baseline" and s == prompt_set and ("eagle3", s, c) in keys
    )
    if not levels:
        return None
    ref_entry = _analysis_entry(reference.analysis, prompt_set)
    cand_entry = _analysis_entry(candidate.analysis, prompt_set)
    interval: tuple[float, float] | None = None
    if ref_entry is not None and cand_entry is not None:
        source = "analysis.json"
        ref_outcome, cand_outcome = str(ref_entry["outcome"]), str(cand_entry["outcome"])
        ref_c = _finite(ref_entry.get("crossover_concurrency"))
        cand_c = _finite(cand_entry.get("crossover_concurrency"))
        raw = ref_entry.get("interval")
        if isinstance(raw, list | tuple) and len(raw) == 2:
            low, high = _finite(raw[0]), _finite(raw[1])
            if low is not None and high is not None:
                interval = (low, high)
    else:
        source = "computed"

        def curve(samples: dict[_Key, _Samples]) -> list[float]:
            out = []
            for c in levels:
                base = float(np.median(samples[("baseline", prompt_set, c)].output_tok_s))
                spec = float(np.median(samples[("eagle3", prompt_set, c)].output_tok_s))
                out.append(spec / base if base > 0 else math.inf)
            return out

        ref_outcome, ref_c = _computed_crossover(levels, curve(ref))
        cand_outcome, cand_c = _computed_crossover(levels, curve(cand))
    shift = _position(cand_outcome, cand_c, levels) - _position(ref_outcome, ref_c, levels)
    inside = (
        interval is not None and cand_c is not None and cand_outcome == "crossover"
        and interval[0] <= cand_c <= interval[1]
    )
    if abs(shift) > th.crossover_fail_levels and not inside:
        status = "fail"
    elif abs(shift) > th.crossover_warn_levels:
        status = "warn"
    else:
        status = "ok"
    interval_text = (
        "" if interval is None else f", reference interval {interval[0]:.0f}-{interval[1]:.0f}"
    )
    message = (
        f"crossover/{prompt_set}: {_describe_crossover(ref_outcome, ref_c)} -> "
        f"{_describe_crossover(cand_outcome, cand_c)} ({shift:+.1f} levels{interval_text}; "
        f"{source})"
    )
    if status == "fail":
        # Either direction fails: a threshold deployed from the reference is now wrong.
        message += "; a dynamic-disable threshold taken from the reference no longer fits"
    return CrossoverComparison(
        prompt_set=prompt_set, source=source, ref_outcome=ref_outcome, cand_outcome=cand_outcome,
        ref_concurrency=ref_c, cand_concurrency=cand_c, ref_interval=interval,
        shift_levels=shift, status=status, message=message,
    )


# ---------------------------------------------------------------------------------------------
# The comparison


def compare(
    reference: Run,
    candidate: Run,
    thresholds: Thresholds | None = None,
    allow_config_changes: Sequence[str] = (),
) -> Verdict:
    """Compare two loaded runs; raise RegressInputError when they cannot be compared.

    `allow_config_changes`: dotted manifest paths (e.g. ``sim.profile``) whose difference is
    intended, as when a planted slow profile is passed by path; they are noted, not refused.
    """
    th = thresholds or Thresholds()
    th.validate()
    unknown = sorted(set(allow_config_changes) - set(allowed_config_fields()))
    if unknown:
        raise ConfigError(f"--allow-config-change {', '.join(unknown)} is not a compared "
                          f"setting; choose from {', '.join(allowed_config_fields())}")
    ref = _samples(reference.summary)
    cand = _samples(candidate.summary)
    if not ref:
        raise RegressInputError(
            f"the reference run {reference.path} has no measured points "
            "(a committed reference needs summary.parquet or points/); make a new reference"
        )
    notes: list[str] = []
    problems = _config_problems(reference, candidate, allow_config_changes, notes)
    ref_sets = {s for _, s, _ in ref}
    cand_sets = {s for _, s, _ in cand}
    problems += _prompt_set_problems(reference, candidate, ref_sets, cand_sets, notes)
    missing = sorted(k for k in ref if k not in cand and k[1] in cand_sets)
    optional = _threshold_only_levels(reference, ref)
    if optional:
        notes.append(f"{len(optional)} dynamic point(s) at levels the sweep added around the "
                     f"threshold, not gated (the server switches there, so they do not repeat "
                     f"run to run): {_describe_points(optional)}")
        missing = [k for k in missing if k not in optional]
    if missing:
        problems.append(f"{len(missing)} reference point(s) missing in the candidate: "
                        f"{_describe_points(missing)}")
    if problems:
        raise RegressInputError(
            "cannot compare: " + "; ".join(problems)
            + "; rerun the candidate with the reference's settings or make a new reference"
        )
    extra = sorted(k for k in cand if k not in ref)
    if extra:
        notes.append(f"{len(extra)} candidate point(s) not in the reference, ignored: "
                     f"{_describe_points(extra)}")
    skipped = sorted(k for k in ref if float(np.median(ref[k].output_tok_s)) <= 0)
    if skipped:
        notes.append(f"reference point(s) with no throughput, skipped: {_describe_points(skipped)}")
    keys = [k for k in sorted(ref) if k not in skipped and k in cand and k not in optional]
    if not keys:
        raise RegressInputError(
            f"the reference run {reference.path} has no point with a positive output tok/s; "
            "make a new reference"
        )
    flagged = [
        f"{k[0]}/{k[1]} c={k[2]} ({side}: {','.join(sorted(s.flags))})"
        for k in keys for side, s in (("reference", ref[k]), ("candidate", cand[k])) if s.flags
    ]
    if flagged:
        notes.append("flagged points (their numbers may not reflect the server): "
                     + "; ".join(flagged))

    groups: list[GroupComparison] = []
    points: list[PointComparison] = []
    for mode, prompt_set in sorted({(m, s) for m, s, _ in keys}):
        group_keys = [k for k in keys if k[0] == mode and k[1] == prompt_set]
        group, group_points, group_notes = _compare_group(mode, prompt_set, group_keys,
                                                          ref, cand, th)
        groups.append(group)
        points.extend(group_points)
        notes.extend(group_notes)
    crossovers = [
        x for x in (
            _compare_crossover(s, set(keys), reference, candidate, ref, cand, th)
            for s in sorted(ref_sets)
        ) if x is not None
    ]

    findings = [f for g in groups for f in g.findings]
    findings += [Finding(x.status, "crossover", f"crossover/{x.prompt_set}", x.message)
                 for x in crossovers if x.status != "ok"]
    findings.sort(key=lambda f: -_RANK[f.status])  # stable: fail, insufficient, warn
    worst = max((f.status for f in findings), key=_RANK.__getitem__, default="ok")
    status, code = {
        "fail": ("regression", EXIT_REGRESSION),
        "insufficient": ("insufficient", EXIT_UNUSABLE),
        "warn": ("warn", EXIT_OK),
        "ok": ("ok", EXIT_OK),
    }[worst]
    return Verdict(
        status=status, exit_code=code,
        reference=str(reference.path), candidate=str(candidate.path), thresholds=th,
        groups=tuple(groups), crossovers=tuple(crossovers), points=tuple(points),
        findings=tuple(findings), notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------------
# Output


_STYLE = {"ok": "green", "warn": "yellow", "insufficient": "magenta", "fail": "bold red",
          "regression": "bold red"}
_WORD = {"ok": "ok", "warn": "warn", "insufficient": "insufficient data", "fail": "REGRESSION"}


def _accept_cell(g: GroupComparison) -> str:
    return "-" if g.accept_ratio is None else _pct(g.accept_ratio)


def _errors_cell(g: GroupComparison) -> str:
    return f"{g.ref_error_rate:.1%} -> {g.cand_error_rate:.1%}"


def render_terminal(verdict: Verdict, console: Console) -> None:
    """Rich tables: per mode/prompt set, then crossovers, then the messages and the verdict."""
    table = Table(title="specbench regress: candidate vs reference", title_justify="left")
    for name in ("mode/prompt set", "levels", "output tok/s (geomean)", "worst point",
                 "accept length", "error rate", "verdict"):
        left = name in ("mode/prompt set", "verdict")
        table.add_column(name, justify="left" if left else "right")
    for g in verdict.groups:
        levels = f"{len(g.levels)} (c={g.levels[0]}..{g.levels[-1]})"
        table.add_row(
            g.label, levels, _pct(g.geomean_ratio),
            f"c={g.worst_concurrency} {_pct(g.worst_ratio)}", _accept_cell(g), _errors_cell(g),
            f"[{_STYLE[g.status]}]{_WORD[g.status]}[/]",
        )
    console.print(table)
    if verdict.crossovers:
        xt = Table(title="crossover (EAGLE-3 stops beating the baseline)", title_justify="left")
        for name in ("prompt set", "reference", "candidate", "shift (levels)", "source",
                     "verdict"):
            xt.add_column(name)
        for x in verdict.crossovers:
            xt.add_row(
                x.prompt_set, _describe_crossover(x.ref_outcome, x.ref_concurrency),
                _describe_crossover(x.cand_outcome, x.cand_concurrency),
                f"{x.shift_levels:+.1f}", x.source, f"[{_STYLE[x.status]}]{_WORD[x.status]}[/]",
            )
        console.print(xt)
    for f in verdict.findings:
        style = _STYLE[f.status]
        word = {"fail": "FAIL", "insufficient": "INSUFFICIENT", "warn": "WARN"}[f.status]
        console.print(f"[{style}]{word}[/] {escape(f.text)}", highlight=False, soft_wrap=True)
    for text in verdict.notes:
        console.print(f"[dim]note: {escape(text)}[/]", highlight=False, soft_wrap=True)
    console.print(_summary_line(verdict), style=_STYLE.get(verdict.status, ""), highlight=False)


def _summary_line(verdict: Verdict) -> str:
    n = len(verdict.points)
    return {
        "regression": f"Regression: {sum(f.status == 'fail' for f in verdict.findings)} "
                      f"failing finding(s) over {n} points; exit 1",
        "insufficient": f"Insufficient data to decide over {n} points; exit 2",
        "warn": f"No regression beyond the fail thresholds ({n} points; warnings above); exit 0",
        "ok": f"No regression ({n} points compared); exit 0",
    }[verdict.status]


def _markdown(verdict: Verdict) -> str:
    heading = {"regression": "REGRESSION", "insufficient": "insufficient data",
               "warn": "ok (with warnings)", "ok": "ok"}[verdict.status]
    lines = [
        f"## specbench regression check: {heading}",
        "",
        f"Reference `{verdict.reference}` vs candidate `{verdict.candidate}` "
        f"(fail at -{verdict.thresholds.fail_pct:g}% output tok/s, "
        f"-{verdict.thresholds.accept_fail_pct:g}% accept length).",
        "",
        "| mode/prompt set | levels | output tok/s (geomean) | worst point | accept length "
        "| error rate | verdict |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for g in verdict.groups:
        lines.append(
            f"| {g.label} | {len(g.levels)} | {_pct(g.geomean_ratio)} | "
            f"c={g.worst_concurrency} {_pct(g.worst_ratio)} | {_accept_cell(g)} | "
            f"{_errors_cell(g)} | {_WORD[g.status]} |"
        )
    if verdict.crossovers:
        lines += ["", "| prompt set | reference | candidate | shift (levels) | verdict |",
                  "|---|---|---|---:|---|"]
        for x in verdict.crossovers:
            lines.append(
                f"| {x.prompt_set} | {_describe_crossover(x.ref_outcome, x.ref_concurrency)} | "
                f"{_describe_crossover(x.cand_outcome, x.cand_concurrency)} | "
                f"{x.shift_levels:+.1f} | {_WORD[x.status]} |"
            )
    if verdict.messages:
        lines += ["", *[f"- {m}" for m in verdict.messages]]
    if verdict.notes:
        lines += ["", "<details><summary>notes</summary>", "",
                  *[f"- {n}" for n in verdict.notes], "", "</details>"]
    lines.append("")
    return "\n".join(lines) + "\n"


def _unusable_markdown(message: str) -> str:
    return f"## specbench regression check: unusable input\n\n{message}\n\n"


def _append_step_summary(text: str) -> None:
    """GitHub Actions shows Markdown appended to $GITHUB_STEP_SUMMARY on the run page."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


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
) -> int:
    """`specbench regress`: compare, print, write the JSON verdict; return the exit code.

    `json_path` "-" prints only the JSON verdict (for piping into jq). Explicit percentages
    override those in `thresholds`. Unusable input prints one line and returns 2.
    """
    console = console or Console()
    json_only = json_path is not None and str(json_path) == "-"
    th = thresholds or Thresholds()
    overrides = {k: v for k, v in (("fail_pct", fail_pct), ("warn_pct", warn_pct),
                                   ("accept_fail_pct", accept_fail_pct)) if v is not None}
    if overrides:
        th = Thresholds(**{**asdict(th), **overrides})
    try:
        th.validate()
        reference = load_run(reference_dir)
        candidate = load_run(candidate_dir)
        verdict = compare(reference, candidate, th, allow_config_changes)
    except (ConfigError, RunDirError, RegressInputError) as exc:
        message = str(exc)
        payload = json.dumps({"schema": JSON_SCHEMA, "status": "unusable",
                              "exit_code": EXIT_UNUSABLE, "messages": [message]}, indent=2) + "\n"
        if json_only:
            console.print(payload, markup=False, highlight=False, soft_wrap=True, end="")
        else:
            console.print(f"[bold red]error:[/] {escape(message)}", highlight=False,
                          soft_wrap=True)
            if json_path is not None:
                write_text_atomic(Path(json_path), payload)
        _append_step_summary(_unusable_markdown(message))
        return EXIT_UNUSABLE
    if json_only:
        console.print(verdict.to_json(), markup=False, highlight=False, soft_wrap=True, end="")
    else:
        render_terminal(verdict, console)
        if json_path is not None:
            write_text_atomic(Path(json_path), verdict.to_json())
    _append_step_summary(verdict.to_markdown())
    return verdict.exit_code
