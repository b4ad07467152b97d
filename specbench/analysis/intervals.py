"""How sure a crossing is: the ratio of two curves per level, its standard error, and draws.

Per level the ratio of two configurations' mean tok/s gets a standard error on the log scale:

* **Paired repeats.** When both configurations measured the same repeats (>= 2; repeat r of
  every configuration uses the same prompt order), the log ratio of each repeat pair is one
  sample; its spread gives the error with n - 1 degrees of freedom.
* **Paired requests** (one repeat). Every configuration sends the same prompts in the same
  order, so request k of one server is request k of the other. By Little's law a closed loop of
  c users runs at c x tokens per request / time per request, and the two servers' requests
  carry the same tokens, so the log ratio of their tok/s moves as log(sum d_other / sum d_eagle3)
  over the requests both finished in the window (d: send to last token). Its error is the batch
  means of z_k = d_other,k / mean - d_eagle3,k / mean (the linearised log ratio) over
  :data:`PAIR_BLOCKS` blocks of consecutive requests (requests sent close together share the
  server's state, so single requests are not independent; blocks nearly are), a Student t with
  blocks - 1 degrees of freedom. Whether blocks are independent enough is checked: the lag-1
  autocorrelation of the block means, pooled over every paired comparison of the run, widens
  the errors by :func:`specbench.stats.ar1_inflation` (``intervals.block_lag1_mean`` and
  ``intervals.paired_inflation`` in analysis.json).
* **Otherwise** (no per-request rows, as in a committed reference) the two configurations'
  relative standard errors add in quadrature: each from batch means over the window's time
  slices (:func:`specbench.analysis.curves.level_stats`). This unpaired bound is wide: the
  prompts in a window move both servers' tok/s together (on the simulator by 2-10% per point,
  against 1-3% for the ratio), and an unpaired error keeps that shared part.

Why not slices for the ratio: measured on the simulator (benchmarks/interval_calibration.py,
10 reruns with other prompt-order and simulator seeds), batch means over time slices describe one
point's run-to-run spread well (0.9-1.0 of it), but unpaired they put the ratio's error at about
3x its spread, and slices of two servers cannot be paired (the same slice serves other requests
on a faster server; slices aligned on the prompt sequence still gave 1.5x). Paired request
blocks come out 20-40% below the spread (the window's edges and a request's time to first
token move the window's tok/s in ways its duration does not); the t tails with blocks - 1
degrees of freedom make up part of that. Coverage is 8-10 of 10 for every decision. Where a
coding window holds more requests than the set has prompts (c >= 128) the error is about 1.5x
the spread, and the coding one-server interval, whose crossing lies between the two highest
levels, is 5.0-8.5 sd wide against a 5 sd target (benchmarks/README.md).

:func:`ratio_draws` draws whole ratio curves from those errors (levels independent), and the
crossing rule applied to every draw gives the interval of c* (:func:`percentile_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.analysis.curves import LevelStats
from specbench.results import PointKey, Run, point_path
from specbench.stats import ar1_inflation, draw_log_ratios, lag1_autocorrelation

CONFIDENCE = 0.95
TAIL_PCT = (1 - CONFIDENCE) / 2 * 100  # each side of a percentile interval
PAIR_BLOCKS = 10  # blocks of consecutive requests for the paired-request error
MIN_PER_BLOCK = 3  # fewer matched requests than 3 blocks of 3: no paired error
MIN_PAIRED = 5  # fewer shared requests: no paired tok/s ratio (the windows' ratio is used)
OUTLIER_MADS = 5.0  # a pair this far from the median ratio was held up by the client's machine
MAD_FLOOR = 0.002  # log-ratio MAD below this (identical servers) counts as this: cut-off 1%
_REQUEST_COLUMNS = ["request_id", "prompt_id", "finished_in_window", "t_send_s", "t_end_s"]


class RequestDurations:
    """Per-request durations of a run's points, read once (None where a point has no rows),
    and the factor on paired-request errors from the run's block autocorrelation."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._cache: dict[PointKey, pd.DataFrame | None] = {}
        self.inflation = 1.0
        self.block_lag1: float | None = None

    def get(self, mode: str, prompt_set: str, concurrency: int, repeat: int) -> pd.DataFrame | None:
        key = PointKey(mode, prompt_set, concurrency, repeat)
        if key not in self._cache:
            self._cache[key] = self._read(key)
        return self._cache[key]

    def _read(self, key: PointKey) -> pd.DataFrame | None:
        path = point_path(self.run.path, key)
        try:
            rows = pd.read_parquet(path, columns=_REQUEST_COLUMNS)
        except (OSError, ValueError, KeyError):
            return None  # no per-request rows (a committed reference) or an older format
        done = rows[rows["finished_in_window"].fillna(False).astype(bool)]
        duration = pd.to_numeric(done["t_end_s"]) - pd.to_numeric(done["t_send_s"])
        return pd.DataFrame({"prompt_id": done["prompt_id"].astype(str).to_numpy(),
                             "d": duration.to_numpy(float)},
                            index=done["request_id"].to_numpy()).sort_index()

    def blocks(self, names: tuple[str, str], prompt_set: str, num: LevelStats,
               den: LevelStats) -> np.ndarray | None:
        """Block means of the paired requests of two single-repeat points (None: unpairable)."""
        if num.n_repeats != 1 or den.n_repeats != 1 or not num.repeats or not den.repeats:
            return None
        a = self.get(names[0], prompt_set, num.concurrency, num.repeats[0][0])
        b = self.get(names[1], prompt_set, den.concurrency, den.repeats[0][0])
        return None if a is None or b is None else paired_blocks(a, b)

    def ratio(self, names: tuple[str, str], prompt_set: str, concurrency: int) -> float | None:
        """names[0]'s tok/s over names[1]'s at one level, from the same requests' durations.

        By Little's law a closed loop's tok/s moves as 1 / its requests' mean duration, and the
        two servers' request k is the same prompt, so the ratio is sum d_1 / sum d_0 over the
        requests both finished. Unlike the ratio of two windows' tok/s it does not move when a
        timing hiccup pushes one request past a window's end (5% of a c=1 window). Geometric
        mean over the repeats both measured; None when a point has no per-request rows or fewer
        than :data:`MIN_PAIRED` shared requests.
        """
        rows = self.run.summary
        at = rows[(rows["prompt_set"] == prompt_set)
                  & (rows["concurrency"].astype(float) == float(concurrency))]
        repeats = [set(at.loc[at["mode"] == name, "repeat"].astype(int)) for name in names]
        shared = sorted(repeats[0] & repeats[1])
        logs = []
        for repeat in shared:
            a = self.get(names[0], prompt_set, concurrency, repeat)
            b = self.get(names[1], prompt_set, concurrency, repeat)
            ratio = None if a is None or b is None else duration_ratio(a, b)
            if ratio is None:
                return None
            logs.append(math.log(ratio))
        return math.exp(float(np.mean(logs))) if logs else None

    def versus(self, name: str, prompt_set: str) -> Callable[[str, int], float | None]:
        """`name`'s :meth:`ratio` to another configuration at a level, as efficiencies ask."""
        return lambda other, c: self.ratio((name, other), prompt_set, c)

    def calibrate(self, block_means: list[np.ndarray]) -> None:
        """Pool the lag-1 autocorrelation of every paired comparison's block means (one
        comparison's ten blocks say little; a run's tens of them do) into the factor."""
        lags = [lag1_autocorrelation(m) for m in block_means]
        lags = [v for v in lags if math.isfinite(v)]
        if lags:
            self.block_lag1 = float(np.mean(lags))
            self.inflation = ar1_inflation(self.block_lag1, PAIR_BLOCKS)


def _shared(num: pd.DataFrame, den: pd.DataFrame) -> pd.Index:
    """Request ids both points finished in their windows, with the same prompt."""
    shared = num.index.intersection(den.index)
    same = num.loc[shared, "prompt_id"].to_numpy() == den.loc[shared, "prompt_id"].to_numpy()
    return shared[same]


def duration_ratio(num: pd.DataFrame, den: pd.DataFrame) -> float | None:
    """num's tok/s over den's from the requests both finished: sum d_den / sum d_num.

    A pair whose duration ratio lies over :data:`OUTLIER_MADS` median absolute deviations from
    the median is left out: one request held up by a hiccup of the client's machine (0.44 s on
    a 0.56 s request, measured on the shared 2-core machine, while the other 16 requests of the
    window ran within 1% of the other server) is the measurement's fault, not the server's. A
    server that is slower for every request moves the median itself and keeps all its pairs.
    """
    shared = _shared(num, den)
    if len(shared) < MIN_PAIRED:
        return None
    d_num = num.loc[shared, "d"].to_numpy(float)
    d_den = den.loc[shared, "d"].to_numpy(float)
    if (d_num <= 0).any() or (d_den <= 0).any():
        return None
    log_r = np.log(d_den / d_num)
    deviation = np.abs(log_r - np.median(log_r))
    keep = deviation <= OUTLIER_MADS * max(float(np.median(deviation)), MAD_FLOOR)
    return float(d_den[keep].sum() / d_num[keep].sum())


def paired_blocks(num: pd.DataFrame, den: pd.DataFrame) -> np.ndarray | None:
    """Block means of z_k (see the module docstring) over the requests both finished."""
    shared = _shared(num, den)
    blocks = min(PAIR_BLOCKS, len(shared) // MIN_PER_BLOCK)
    if blocks < 3:
        return None
    d_num = num.loc[shared, "d"].to_numpy(float)
    d_den = den.loc[shared, "d"].to_numpy(float)
    if d_num.mean() <= 0 or d_den.mean() <= 0:
        return None
    z = d_den / d_den.mean() - d_num / d_num.mean()
    return np.array([part.mean() for part in np.array_split(z, blocks)])


@dataclass(frozen=True)
class RatioCurve:
    """numerator / denominator tok/s at shared levels, with the log-scale spread per level."""

    levels: list[int]
    ratio: list[float]
    se_log: list[float]
    df: list[int]  # 0: normal
    methods: list[str]  # per level: "paired_repeats" | "repeats" | "batch_means" | ...


def _paired(num: LevelStats, den: LevelStats) -> tuple[float, int] | None:
    """(se of the mean log ratio, df) from repeat pairs; None without two shared repeats."""
    a, b = dict(num.repeats), dict(den.repeats)
    shared = sorted(set(a) & set(b))
    logs = [math.log(a[r] / b[r]) for r in shared if a[r] > 0 and b[r] > 0]
    if len(logs) < 2:
        return None
    return float(np.std(logs, ddof=1) / math.sqrt(len(logs))), len(logs) - 1


def _unpaired(num: LevelStats, den: LevelStats) -> tuple[float, int]:
    rel = [s.se_tok_s / s.mean_tok_s if s.mean_tok_s > 0 else 0.0 for s in (num, den)]
    dfs = [s.df for s in (num, den) if s.df > 0]
    return math.sqrt(rel[0] ** 2 + rel[1] ** 2), min(dfs) if dfs else 0


def _paired_requests(
    durations: RequestDurations | None, names: tuple[str, str], prompt_set: str,
    num: LevelStats, den: LevelStats,
) -> tuple[float, int] | None:
    means = None if durations is None else durations.blocks(names, prompt_set, num, den)
    if means is None or durations is None:
        return None
    se = float(means.std(ddof=1) / math.sqrt(len(means))) * durations.inflation
    return se, len(means) - 1


def ratio_curve(
    num: Mapping[int, LevelStats], den: Mapping[int, LevelStats], levels: list[int],
    durations: RequestDurations | None = None, names: tuple[str, str] = ("", ""),
    prompt_set: str = "",
) -> RatioCurve:
    """The ratio num / den at `levels` (each in both), with its standard error per level.

    With `durations` (and the two configurations' `names`), single-repeat levels are compared
    by paired requests; otherwise, and where a point has no per-request rows, unpaired.
    """
    ratio, se_log, dfs, methods = [], [], [], []
    for c in levels:
        n, d = num[c], den[c]
        ratio.append(max(n.mean_tok_s, 1e-9) / d.mean_tok_s)
        paired = _paired(n, d)
        by_request = None if paired else _paired_requests(durations, names, prompt_set, n, d)
        if paired is not None:
            (se, df), method = paired, "paired_repeats"
        elif by_request is not None:
            (se, df), method = by_request, "paired_requests"
        else:
            (se, df), method = _unpaired(n, d), "+".join(sorted({n.method, d.method}))
        se_log.append(se)
        dfs.append(df)
        methods.append(method)
    return RatioCurve(list(levels), ratio, se_log, dfs, methods)


def ratio_draws(curve: RatioCurve, *, seed: int, resamples: int) -> np.ndarray:
    """Seeded draws of the whole ratio curve (resamples x levels)."""
    rng = np.random.default_rng(seed)
    return draw_log_ratios([math.log(r) for r in curve.ratio], curve.se_log, curve.df, rng,
                           resamples)


def percentile_interval(values: np.ndarray, point: float) -> tuple[float, float]:
    """The central 95 % of `values`, widened to contain `point` (a percentile interval can
    miss a skewed point estimate; widening is better than excluding it)."""
    lo, hi = (float(v) for v in np.percentile(values, [TAIL_PCT, 100 - TAIL_PCT]))
    return min(lo, point), max(hi, point)


def band(draws: np.ndarray) -> np.ndarray:
    """Per-level 95 % band of drawn curves (2 x levels)."""
    return np.percentile(draws, [TAIL_PCT, 100 - TAIL_PCT], axis=0)
