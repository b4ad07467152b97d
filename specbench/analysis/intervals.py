"""How sure a crossing is: the ratio of two curves per level, its standard error, and draws.

Per level the ratio of two configurations' mean tok/s gets a standard error on the log scale:

* **Paired repeats.** When both configurations measured the same repeats (>= 2; repeat r of
  every configuration uses the same prompt order), the log ratio of each repeat pair is one
  sample; its spread gives the error with n - 1 degrees of freedom.
* **Paired requests** (one repeat). Every configuration sends the same prompts in the same
  order, so request k of one server is request k of the other. A closed loop keeps c users
  busy, so a request's time inside the window tau_k (send or window start to last token or
  window end) adds up to c x window over the point, and the window's tok/s is
  c x sum y_k / sum tau_k, y_k the request's tokens inside the window. Linearised, the log
  ratio of two points' tok/s is sum_k (u_k(num) - u_k(den)), with
  u_k = (y_k - rho tau_k) / sum y (rho = sum y / sum tau): what request k added to its
  server's tok/s beyond the server's rate over the time it spent there. A request that only
  one window holds (the faster server reaches further into the order) counts on its side
  alone. The error is from the sums over :data:`PAIR_BLOCKS` blocks of consecutive request ids
  (requests sent close together share the server's state; blocks nearly do not), a Student t
  with blocks - 1 degrees of freedom. This is the windows' own ratio taken apart by request,
  so it sees what moves that ratio between reruns: the prompts each window holds, the ones
  only one of them reaches, and what a long prefill does to the requests beside it.
* **Otherwise** (no per-request rows, as in a committed reference) the two configurations'
  relative standard errors add in quadrature: each from batch means over the window's time
  slices (:func:`specbench.analysis.curves.level_stats`). This unpaired bound is wide: the
  prompts in a window move both servers' tok/s together (on the simulator by 2-10% per point,
  against 1-3% for the ratio), and an unpaired error keeps that shared part.

Measured on the simulator (benchmarks/interval_calibration.py; 190 reruns of 150 prompt-order
seeds on two machines): the spread over reruns of each level's log ratio is 1.1-2.0 times
this error (median 1.3), largest for the agentic set at 32-64 users, where a window holds
100-250 requests of prompts from a few hundred to 13k tokens. Requests far apart in the order
still share the server's state (a long prefill slows the batch it joins), so the error grows
with the blocks: by 1.2-1.7x from 20 blocks to 4. Fewer blocks leave fewer degrees of
freedom and wider t tails, so :data:`PAIR_BLOCKS` = 8 is the middle: 89-92% of the intervals
contain their set's median c* at a median 2.5-3.7 sd (10 blocks: 87-89% at 2.3-3.4 sd; 4
blocks: 93-98% at 4.3-6.3 sd). The error this replaced, from the durations of the requests
both servers finished, was 0.9-2.2 times off: it missed the requests only one window holds.
Batch means over time slices describe one point's spread well (0.8-1.0 of it) but cannot be
paired: the same slice serves other requests on a faster server.

:func:`ratio_draws` draws whole ratio curves from those errors (levels independent), times one
factor per curve for how far the servers move between launches when a second launch measured
it (:mod:`specbench.analysis.launches`), and the crossing rule applied to every draw gives the
interval of c* (:func:`percentile_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.analysis.curves import LevelStats
from specbench.results import PointKey, Run, point_path
from specbench.stats import draw_log_ratios

CONFIDENCE = 0.95
TAIL_PCT = (1 - CONFIDENCE) / 2 * 100  # each side of a percentile interval
PAIR_BLOCKS = 8  # blocks of consecutive request ids for the paired-request error
MIN_PER_BLOCK = 3  # fewer requests than 3 blocks of 3 in the two windows: no paired error
MIN_PAIRED = 5  # fewer shared requests: no paired tok/s ratio (the windows' ratio is used)
OUTLIER_MADS = 5.0  # a pair this far from the median ratio was held up by the client's machine
MAD_FLOOR = 0.002  # log-ratio MAD below this (identical servers) counts as this: cut-off 1%
_REQUEST_COLUMNS = ["request_id", "prompt_id", "finished_in_window", "t_send_s", "t_end_s",
                    "window_tokens"]


class PairedRequests:
    """Per-request rows of a run's points, read once (None where a point has no rows): the
    durations of the requests each finished in its window, and every request's share of it."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._cache: dict[PointKey, pd.DataFrame | None] = {}

    def rows(self, mode: str, prompt_set: str, concurrency: int,
             repeat: int) -> pd.DataFrame | None:
        """Every request with time in the window: prompt_id, y (tokens in the window), tau (its
        time in the window, GPU s), d (send to last token; NaN when it did not finish there)."""
        key = PointKey(mode, prompt_set, concurrency, repeat)
        if key not in self._cache:
            self._cache[key] = self._read(key)
        return self._cache[key]

    def get(self, mode: str, prompt_set: str, concurrency: int, repeat: int) -> pd.DataFrame | None:
        """The requests the point finished in its window, with their durations d."""
        rows = self.rows(mode, prompt_set, concurrency, repeat)
        return None if rows is None else rows[rows["d"].notna()]

    def _read(self, key: PointKey) -> pd.DataFrame | None:
        try:
            rows = pd.read_parquet(point_path(self.run.path, key), columns=_REQUEST_COLUMNS)
        except (OSError, ValueError, KeyError):
            return None  # no per-request rows (a committed reference) or an older format
        window_s = self._window_s(key)
        if window_s is None:
            return None
        send = pd.to_numeric(rows["t_send_s"]).to_numpy(float)
        end = pd.to_numeric(rows["t_end_s"]).to_numpy(float)
        done = rows["finished_in_window"].fillna(False).astype(bool).to_numpy()
        # A request still running at the close was cancelled there (or has no end): window end.
        tau = np.clip(np.nan_to_num(end, nan=window_s), 0, window_s) - np.clip(send, 0, window_s)
        y = pd.to_numeric(rows["window_tokens"]).fillna(0.0).to_numpy(float)
        keep = (tau > 0) | (y > 0)
        frame = pd.DataFrame({"prompt_id": rows["prompt_id"].astype(str).to_numpy(),
                              "y": y, "tau": np.maximum(tau, 0.0),
                              "d": np.where(done, end - send, np.nan)},
                             index=rows["request_id"].to_numpy())
        return frame[keep].sort_index()

    def _window_s(self, key: PointKey) -> float | None:
        s = self.run.summary
        at = s[(s["mode"] == key.mode) & (s["prompt_set"] == key.prompt_set)
               & (s["concurrency"].astype(int) == key.concurrency)
               & (s["repeat"].astype(int) == key.repeat)]
        window_s = float(at["window_s"].iloc[0]) if len(at) else math.nan
        return window_s if window_s > 0 else None

    def blocks(self, names: tuple[str, str], prompt_set: str, num: LevelStats,
               den: LevelStats) -> np.ndarray | None:
        """Block sums of the paired log ratio of two single-repeat points (None: unpairable)."""
        if num.n_repeats != 1 or den.n_repeats != 1 or not num.repeats or not den.repeats:
            return None
        a = self.rows(names[0], prompt_set, num.concurrency, num.repeats[0][0])
        b = self.rows(names[1], prompt_set, den.concurrency, den.repeats[0][0])
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


def _excess(rows: pd.DataFrame) -> pd.Series:
    """u_k: request k's tokens beyond its server's rate over its time there, / the window's."""
    y, tau = rows["y"], rows["tau"]
    total = float(y.sum())
    return (y - total / float(tau.sum()) * tau) / total


def paired_blocks(num: pd.DataFrame, den: pd.DataFrame) -> np.ndarray | None:
    """Block sums of u_k(num) - u_k(den) over request ids in either window (module docstring).

    None when the two points sent other prompts under the same request id (another order),
    or hold too few requests for 3 blocks of :data:`MIN_PER_BLOCK` (up to :data:`PAIR_BLOCKS`).
    """
    both = num.index.intersection(den.index)
    if (num.loc[both, "prompt_id"].to_numpy() != den.loc[both, "prompt_id"].to_numpy()).any():
        return None
    ids = num.index.union(den.index)
    blocks = min(PAIR_BLOCKS, len(ids) // MIN_PER_BLOCK)
    if blocks < 3 or num["y"].sum() <= 0 or den["y"].sum() <= 0:
        return None
    diff = (_excess(num).reindex(ids, fill_value=0.0).to_numpy()
            - _excess(den).reindex(ids, fill_value=0.0).to_numpy())
    return np.array([part.sum() for part in np.array_split(diff, blocks)])


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
    requests: PairedRequests | None, names: tuple[str, str], prompt_set: str,
    num: LevelStats, den: LevelStats,
) -> tuple[float, int] | None:
    sums = None if requests is None else requests.blocks(names, prompt_set, num, den)
    if sums is None:
        return None
    return float(sums.std(ddof=1) * math.sqrt(len(sums))), len(sums) - 1


def ratio_curve(
    num: Mapping[int, LevelStats], den: Mapping[int, LevelStats], levels: list[int],
    requests: PairedRequests | None = None, names: tuple[str, str] = ("", ""),
    prompt_set: str = "",
) -> RatioCurve:
    """The ratio num / den at `levels` (each in both), with its standard error per level.

    With `requests` (and the two configurations' `names`), single-repeat levels are compared
    by paired requests; otherwise, and where a point has no per-request rows, unpaired.
    """
    ratio, se_log, dfs, methods = [], [], [], []
    for c in levels:
        n, d = num[c], den[c]
        ratio.append(max(n.mean_tok_s, 1e-9) / d.mean_tok_s)
        paired = _paired(n, d)
        by_request = None if paired else _paired_requests(requests, names, prompt_set, n, d)
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


def ratio_draws(curve: RatioCurve, *, seed: int, resamples: int,
                launch_sd: float = 0.0) -> np.ndarray:
    """Seeded draws of the whole ratio curve (resamples x levels). `launch_sd` is how far the
    ratio's log moves between launches of the servers (launches.py): one draw per curve, shared
    by every level."""
    rng = np.random.default_rng(seed)
    draws = draw_log_ratios([math.log(r) for r in curve.ratio], curve.se_log, curve.df, rng,
                            resamples)
    if launch_sd > 0:
        draws = draws * np.exp(launch_sd * rng.standard_normal((resamples, 1)))
    return draws


def percentile_interval(values: np.ndarray, point: float) -> tuple[float, float]:
    """The central 95 % of `values`, widened to contain `point` (a percentile interval can
    miss a skewed point estimate; widening is better than excluding it)."""
    lo, hi = (float(v) for v in np.percentile(values, [TAIL_PCT, 100 - TAIL_PCT]))
    return min(lo, point), max(hi, point)


def band(draws: np.ndarray) -> np.ndarray:
    """Per-level 95 % band of drawn curves (2 x levels)."""
    return np.percentile(draws, [TAIL_PCT, 100 - TAIL_PCT], axis=0)
