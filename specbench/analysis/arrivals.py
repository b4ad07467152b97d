"""Decisions under arrivals: an open-loop run (``--request-rates``) read per prompt set.

Every configuration got the same arrivals at each rate (one seed), so per rate the two
curves compare the same requests:

* **Where EAGLE-3 stops winning**, on output tok/s and, with ``--slo``, on goodput: r(rate) =
  EAGLE-3 / baseline, and the crossing rule of the closed loop (:func:`specbench.stats.crossings`:
  the last rate where r >= 1 and the next bracket it, interpolated in log2 rate) over the finite
  rates. Below saturation both servers deliver what arrives, so tok/s differs only once one of
  them falls behind; goodput differs earlier, through latency. Goodput's ratio is of the shares
  of arrivals that met every SLO, with half a request added on each side so a share of 0 stays
  finite; a rate where neither server met the SLOs with any request says nothing and is left
  out. The interval: seeded draws of each rate's log ratio from its standard error, the rule
  applied to each draw, the 2.5-97.5 percentiles. The error is paired where the points have
  their request rows: the window's k-th arrival is the same prompt at the same moment on both
  servers, so the ratio is then of what those same arrivals got: their tokens inside the
  window (the tokens of requests left over from each server's own warmup are not paired), or
  how many met the SLOs. Linearised, its log is a sum over arrivals of what each added on one
  server less the other, and its error comes from the sums over up to 8 blocks of consecutive
  arrivals (:data:`specbench.analysis.intervals.PAIR_BLOCKS`; at least 4 of 3). Below
  saturation both servers see the same requests through, and the pairing keeps that shared part
  out of the error. Without rows (a
  stored reference) the two points' own errors add: tok/s from batch means over the window's
  slices, goodput from blocks of arrivals (:mod:`specbench.goodput`).
* **Mapped to a batch size**: the baseline's mean running batch at that rate (interpolated in
  log2 rate) is where SGLang's switch would sit; its ceiling is the decision's threshold. The
  dynamic server of an open-loop run takes the goodput decision's (tok/s without SLOs).
* **The dynamic server per rate**: E = dynamic / max(baseline, EAGLE-3), on tok/s and on
  goodput, beside how often its log says it switched state during the point and the share of
  the window its batch spent above its T (gauge samples).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench import configurations
from specbench.analysis import context
from specbench.analysis.intervals import (
    CONFIDENCE,
    MIN_PER_BLOCK,
    PAIR_BLOCKS,
    percentile_interval,
)
from specbench.goodput import Slo, share_above
from specbench.results import Run
from specbench.results.analysis import (
    Analysis,
    DynamicRate,
    PromptSetAnalysis,
    RateDecision,
    RatePoint,
)
from specbench.results.manifest import RunDirError
from specbench.results.points import rate_text
from specbench.stats import OUTCOMES, crossings, finite_or_none

NUM, DEN = "eagle3", "baseline"
MIN_BLOCKS = 4  # fewer blocks of arrivals than this: no paired error
_COLUMNS = ("output_tok_s", "output_tok_s_se", "achieved_rate_req_s", "goodput_req_s",
            "goodput_req_s_se", "slo_met_frac", "slo_good", "window_arrivals",
            "server_running_reqs_mean", "server_running_reqs_p10", "server_running_reqs_p90",
            "server_switches", "n_unfinished", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p95",
            "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p95", "tpot_ms_p99",
            "itl_ms_p50", "itl_ms_p90", "itl_ms_p95", "itl_ms_p99", "e2e_ms_p50",
            "e2e_ms_p90", "e2e_ms_p95", "e2e_ms_p99")


def _threshold_of(run: Run, mode: str, prompt_set: str) -> int | None:
    """The T a point's batch is held against: a threshold server's own; for the others the
    set's dynamic server's (how often a dynamic server would have stopped drafting there)."""
    config = configurations.parse(mode)
    if config.adaptive == "threshold" and config.threshold is not None:
        return None if config.threshold == 1 else config.threshold
    return run.manifest.thresholds().get(prompt_set) or run.manifest.config.threshold


@dataclass(frozen=True)
class _Point:
    """One configuration at one rate: the repeats' mean of each column (NaN where none)."""

    means: dict[str, float]
    threshold: int | None  # the T its batch is held against
    above_threshold_share: float
    flags: str  # the repeats' flags, joined

    def as_json(self, rate: float) -> RatePoint:
        """The point as analysis.json lists it: the rate, the columns, NaN as None."""
        return {"rate": rate_text(rate), **{k: finite_or_none(v) for k, v in self.means.items()},
                "threshold": self.threshold,
                "above_threshold_share": finite_or_none(self.above_threshold_share),
                "flags": self.flags}


def _points(run: Run, prompt_set: str) -> dict[str, dict[float, _Point]]:
    """Per configuration and rate: the repeats' mean of each column, the flags joined."""
    rows = run.summary[run.summary["prompt_set"] == prompt_set]
    out: dict[str, dict[float, _Point]] = {}
    for (mode, rate), group in rows.groupby(["mode", "request_rate"], sort=True):
        means: dict[str, float] = {}
        for col in _COLUMNS:
            if col in group:
                values = pd.to_numeric(group[col], errors="coerce").astype(float)
                means[col] = float(values.mean()) if values.notna().any() else math.nan
        threshold = _threshold_of(run, str(mode), prompt_set)
        shares = [share_above(s, threshold) for s in group.get("server_running_reqs_samples",
                                                                 [None] * len(group))]
        share = float(np.nanmean(shares)) if threshold and any(
            math.isfinite(s) for s in shares) else math.nan
        flags = ";".join(sorted({f for fl in group["flags"] for f in fl.split(";") if f}))
        point = _Point(means, threshold, share, flags)
        out.setdefault(str(mode), {})[float(rate)] = point  # type: ignore[arg-type]
    return out


def _arrivals(run: Run, mode: str, prompt_set: str, rate: float) -> pd.DataFrame | None:
    """The window's arrivals of one point (repeat 0) in arrival order; None without rows."""
    rows = run.summary[(run.summary["mode"] == mode) & (run.summary["prompt_set"] == prompt_set)
                       & (run.summary["request_rate"] == rate) & (run.summary["repeat"] == 0)]
    if rows.empty:
        return None
    try:
        frame = run.requests(mode, prompt_set, int(rows["concurrency"].iloc[0]), 0, rate)
    except RunDirError:
        return None
    return frame[frame["arrived_in_window"]].sort_values("request_id").reset_index(drop=True)


def _paired(run: Run, prompt_set: str, rate: float, metric: str, slo: Slo | None
            ) -> tuple[float, float] | None:
    """(log ratio, its error) of one rate from the window's arrivals paired (see the module
    docstring), or None."""
    num, den = _arrivals(run, NUM, prompt_set, rate), _arrivals(run, DEN, prompt_set, rate)
    if num is None or den is None:
        return None
    n = min(len(num), len(den))
    blocks = min(PAIR_BLOCKS, n // MIN_PER_BLOCK)  # a low rate's short window: fewer blocks
    if blocks < MIN_BLOCKS:
        return None
    if metric == "goodput":
        if slo is None:
            return None
        a = slo.meets(num.iloc[:n]).astype(float)
        b = slo.meets(den.iloc[:n]).astype(float)
        a_sum, b_sum = a.sum() + 0.5, b.sum() + 0.5
    else:
        a = num["window_tokens"].to_numpy(dtype=float)[:n]
        b = den["window_tokens"].to_numpy(dtype=float)[:n]
        a_sum, b_sum = a.sum(), b.sum()
        if a_sum <= 0 or b_sum <= 0:
            return None
    u = a / a_sum - b / b_sum
    sums = np.array([block.sum() for block in np.array_split(u, blocks)])
    se = math.sqrt(blocks / (blocks - 1) * float(np.sum((sums - sums.mean()) ** 2)))
    return math.log(a_sum / b_sum), se


def _ratio(num_point: _Point, den_point: _Point, metric: str) -> tuple[float, float] | None:
    """(log ratio, its standard error) of one rate, or None where it says nothing."""
    num, den = num_point.means, den_point.means
    if metric == "goodput":
        n_num, n_den = num.get("window_arrivals", 0), den.get("window_arrivals", 0)
        if not (n_num and n_den) or (num.get("slo_good", 0) == 0 and den.get("slo_good", 0) == 0):
            return None
        logs, ses = [], []
        for p, n in ((num, n_num), (den, n_den)):
            share = (p["slo_good"] + 0.5) / (n + 1)
            logs.append(math.log(share))
            se = p["goodput_req_s_se"] / p["achieved_rate_req_s"] if p.get(
                "achieved_rate_req_s") else math.nan
            ses.append(se / share if math.isfinite(se) else math.sqrt((1 - share) / (share * n)))
        return logs[0] - logs[1], math.hypot(*ses)
    a, b = num["output_tok_s"], den["output_tok_s"]
    if not (a > 0 and b > 0):
        return None
    se = math.hypot(num["output_tok_s_se"] / a, den["output_tok_s_se"] / b)
    return math.log(a / b), se if math.isfinite(se) else 0.0


def decide(run: Run, prompt_set: str, points: dict[str, dict[float, _Point]],
           metric: str, *, seed: int, resamples: int) -> RateDecision | None:
    """Where EAGLE-3 stops winning on `metric` (tok_s | goodput) over the finite rates."""
    load = run.manifest.config.load
    slo = Slo.from_mapping(load.slo) if load.slo else None
    if NUM not in points or DEN not in points:
        return None
    rates, logs, ses, left_out, methods = [], [], [], [], set()
    for rate in sorted(set(points[NUM]) & set(points[DEN])):
        if not math.isfinite(rate):
            continue
        found = _ratio(points[NUM][rate], points[DEN][rate], metric)
        if found is None:
            left_out.append(rate_text(rate))
            continue
        paired = _paired(run, prompt_set, rate, metric, slo)
        methods.add("paired arrivals" if paired is not None else "unpaired")
        rates.append(rate)
        logs.append(found[0] if paired is None else paired[0])
        ses.append(found[1] if paired is None else paired[1])
    if not rates:
        return None
    log2_rate = np.log2(np.asarray(rates))
    ratio = np.exp(np.asarray(logs))
    code, star, j = crossings(log2_rate, ratio[None, :])
    rng = np.random.default_rng(seed)
    draws = np.exp(np.asarray(logs) + rng.standard_normal((resamples, len(rates))) * ses)
    codes, stars, _ = crossings(log2_rate, draws)
    outcome = OUTCOMES[int(code[0])]
    baseline = points[DEN]
    batch = [baseline[r].means.get("server_running_reqs_mean", math.nan) for r in rates]
    decision: RateDecision = {
        "metric": metric,
        "outcome": outcome,
        "rates": [rate_text(r) for r in rates],
        "ratio": [round(float(r), 4) for r in ratio],
        "ratio_se_log": [round(s, 4) for s in ses],
        "outcome_support": round(float(np.mean(codes == code[0])), 3),
        "interval_method": sorted(methods),
        "left_out": left_out,
    }
    if outcome == "crossover":
        r_star = float(star[0])
        lo, hi = percentile_interval(stars, r_star)
        b_star = _batch_at(rates, batch, r_star)
        below = int(j[0])
        decision |= {"rate_req_s": round(r_star, 3), "interval": [round(lo, 3), round(hi, 3)],
                     "bracket": [rate_text(rates[below]), rate_text(rates[below + 1])],
                     # Both servers equal below (every arrival met the SLOs on both, say): the
                     # rule puts the crossing at the lower rate; it lies somewhere up to the next.
                     "tie_below": bool(ratio[below] == 1.0),
                     "baseline_batch_size": finite_or_none(b_star),
                     "threshold_batch_size": math.ceil(b_star) if math.isfinite(b_star)
                     else None}
    elif outcome == "eagle3_never_wins":
        decision["threshold_batch_size"] = 1
    else:
        top = batch[-1]
        decision["threshold_batch_size"] = math.ceil(top) + 1 if math.isfinite(top) else None
    return decision


def _batch_at(rates: list[float], batch: list[float], rate: float) -> float:
    known = [(math.log2(r), b) for r, b in zip(rates, batch, strict=True) if math.isfinite(b)]
    if not known:
        return math.nan
    xs, ys = zip(*known, strict=True)
    return float(np.interp(math.log2(rate), xs, ys))


def _dynamic(points: dict[str, dict[float, _Point]]) -> dict[str, list[DynamicRate]]:
    """E per rate of every switching server, on tok/s and goodput, with its switches."""
    out: dict[str, list[DynamicRate]] = {}
    statics = [points[m] for m in (NUM, DEN) if m in points]
    for mode, curve in points.items():
        config = configurations.parse(mode)
        # zero-step is a threshold server at T = 1: it never switches, it is a static curve.
        if config.adaptive != "threshold" or config.threshold == 1 or not statics:
            continue
        rows: list[DynamicRate] = []
        for rate, p in sorted(curve.items()):
            best_tok = max((s[rate].means["output_tok_s"] for s in statics if rate in s),
                           default=0.0)
            best_good = max((s[rate].means.get("goodput_req_s", math.nan) for s in statics
                             if rate in s), default=math.nan)
            good = p.means.get("goodput_req_s", math.nan)
            rows.append({
                "rate": rate_text(rate),
                "efficiency_tok_s": finite_or_none(p.means["output_tok_s"] / best_tok)
                if best_tok > 0 else None,
                "efficiency_goodput": finite_or_none(good / best_good)
                if best_good and best_good > 0 else None,
                "switches": finite_or_none(p.means.get("server_switches", math.nan)),
                "threshold": p.threshold,
                "above_threshold_share": finite_or_none(p.above_threshold_share),
            })
        out[mode] = rows
    return out


def analyze_arrivals(run: Run, *, seed: int = 0, resamples: int = 2000) -> Analysis:
    """analysis.json of an open-loop run."""
    load = run.manifest.config.load
    sets: dict[str, PromptSetAnalysis] = {}
    for name in run.prompt_sets:
        points = _points(run, name)
        tok = decide(run, name, points, "tok_s", seed=seed, resamples=resamples)
        good = (decide(run, name, points, "goodput", seed=seed, resamples=resamples)
                if load.slo else None)
        chosen = good or tok
        sets[name] = {
            "points": {mode: [p.as_json(r) for r, p in sorted(c.items())]
                       for mode, c in points.items()},
            "tok_s": tok,
            "goodput": good,
            "threshold_batch_size": chosen.get("threshold_batch_size") if chosen else None,
            "threshold_source": chosen["metric"] if chosen else None,
            "dynamic": _dynamic(points),
            "prompt_tokens": context.prompt_tokens(run, name),
        }
    return {
        "load": "open",
        "request_rates": [rate_text(r) for r in load.request_rates],
        "burstiness": load.burstiness,
        "max_concurrency": load.max_concurrency,
        "slo": dict(load.slo),
        "bootstrap": {"resamples": resamples, "seed": seed, "confidence": CONFIDENCE},
        "prompt_sets": sets,
    }
