"""The statistics behind every interval, p-value and verdict specbench prints, in one file.

Each function states what it assumes about its sample sizes. specbench measures one window of
tens to hundreds of requests per point, one or a few repeats of a point, and 4 to 9 concurrency
levels per curve.

- :func:`find_crossing` (and :func:`crossings`, the same rule over many bootstrap draws): where
  the EAGLE-3/baseline ratio curve crosses 1, the c* of the report and of the regression gate.
- :func:`bootstrap_rate_ci`: 95% interval of one point's output tok/s, resampling requests
  (the ``output_tok_s_ci_low/high`` summary columns).
- :func:`se_from_ci95`: the standard error a 95% interval implies.
- :func:`slice_rates`, :func:`batch_means`: a point's output tok/s per time slice of its window
  and the standard error of the window's rate from them (the ``output_tok_s_se`` column, the
  per-point uncertainty the crossover intervals use), with the slices' lag-1 autocorrelation.
- :func:`ar1_inflation`: how much positively correlated slices widen that standard error.
- :func:`draw_curves`, :func:`draw_log_ratios`: seeded parametric draws of whole throughput
  curves and of ratio curves (the crossover's interval in :mod:`specbench.analysis`).
- :func:`mann_whitney_u`: exact rank test of repeats (the regression gate).
- :func:`geomean`, :func:`p_below_zero`, :func:`proportion_rise_p`: the gate's group tests.

Normal quantiles come from :class:`statistics.NormalDist`. Its ``cdf`` is computed as
``0.5 * (1 + erf(z))``, which rounds to 0 below z of about -8.3; the gate prints p-values that
far out (a 10% slowdown over nine tight levels), so :func:`normal_cdf` uses ``erfc``, which
keeps them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

NAN = float("nan")
# z of a two-sided 95% interval: the CI columns and the crossover interval are 95%.
Z95 = NormalDist().inv_cdf(0.975)

# The per-point bootstrap: 1000 resamples put the 2.5/97.5 percentiles within about 1% of
# their converged values for a few hundred requests; seeded so identical rows give identical
# intervals.
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
# The exact U distribution is cheap up to this many values in total; beyond it, and with
# ties, the normal approximation (with tie and continuity corrections) is used.
EXACT_MAX_SAMPLES = 60


def finite_or_none(value: Any) -> float | None:
    """The finite number a summary or manifest cell holds; None if missing, NaN or not a number.

    Summary cells arrive as floats, NaN, None or (from CSV) strings; every statistic here is
    fed through this, so a missing measurement is never averaged in as NaN.
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def normal_cdf(z: float) -> float:
    """P(Z <= z) for a standard normal Z, accurate far into the lower tail (see above)."""
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


# ---------------------------------------------------------------------------------------------
# the crossing rule

OUTCOMES: tuple[str, ...] = ("crossover", "eagle3_never_wins", "eagle3_always_wins")
_CROSS, _NEVER, _ALWAYS = 0, 1, 2  # outcome codes: indices into OUTCOMES


@dataclass(frozen=True)
class Crossing:
    """Where r(c) crosses 1 in one curve."""

    outcome: str
    crossover_concurrency: float | None
    bracket: tuple[int, int] | None  # the two levels around c*
    confirmed: bool | None
    n_crossings: int  # falls of r from >= 1 to < 1 along the grid


def crossings(log2_c: np.ndarray, ratio: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Apply the crossing rule to each row of `ratio` (draws x levels).

    The last level with r >= 1 and the level after it bracket c*, which is r interpolated
    linearly in log2 c to 1 between them; no level with r >= 1 is ``eagle3_never_wins``, r >= 1
    at the top level ``eagle3_always_wins`` (the rule in full: :mod:`specbench.analysis`). Any
    number of levels works; one level can only give the last two outcomes.

    Returns (outcome code, c* with draws off the grid put at its edge, bracket start index).
    """
    n_levels = ratio.shape[1]
    wins = ratio >= 1.0
    any_win = wins.any(axis=1)
    last_win = n_levels - 1 - np.argmax(wins[:, ::-1], axis=1)
    outcome = np.full(ratio.shape[0], _CROSS)
    outcome[~any_win] = _NEVER
    outcome[any_win & (last_win == n_levels - 1)] = _ALWAYS
    c_star = np.where(outcome == _NEVER, 2.0 ** log2_c[0], 2.0 ** log2_c[-1])
    j = np.clip(last_win, 0, max(n_levels - 2, 0))
    cross = outcome == _CROSS
    if n_levels >= 2 and cross.any():
        rows = np.nonzero(cross)[0]
        r_hi, r_lo = ratio[rows, j[rows]], ratio[rows, j[rows] + 1]
        frac = (r_hi - 1.0) / (r_hi - r_lo)  # r_hi >= 1 > r_lo, so the divisor is > 0
        x = log2_c[j[rows]] + frac * (log2_c[j[rows] + 1] - log2_c[j[rows]])
        c_star[rows] = 2.0 ** x
    return outcome, c_star, j


def find_crossing(levels: Sequence[int], ratio: Sequence[float]) -> Crossing:
    """The crossing rule on one measured curve (levels ascending)."""
    log2_c = np.log2(np.asarray(levels, dtype=float))
    r = np.asarray(ratio, dtype=float)[None, :]
    outcome, c_star, j = crossings(log2_c, r)
    n_crossings = int(np.sum((r[0, :-1] >= 1.0) & (r[0, 1:] < 1.0)))
    code = int(outcome[0])
    if code != _CROSS:
        return Crossing(OUTCOMES[code], None, None, None, n_crossings)
    lo = int(j[0])
    return Crossing(
        "crossover", float(c_star[0]), (levels[lo], levels[lo + 1]),
        lo + 2 < len(levels), n_crossings,
    )


# ---------------------------------------------------------------------------------------------
# intervals


def bootstrap_rate_ci(
    tokens: np.ndarray,
    window_s: float,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of sum(tokens) / window_s, resampling requests.

    `tokens` holds each request's tokens inside the window. Requests are treated as
    independent draws, which closed-loop users are not (a user sends its next request when
    the last one ends), so the interval describes the spread within this window, not proven
    run-to-run noise; repeats measure that. With fewer than about 20 requests the percentiles
    rest on few distinct sums (below 5 finished requests the point is also flagged
    `too_few_requests`). NaN, NaN for no requests.
    """
    n = len(tokens)
    if n == 0 or window_s <= 0:
        return NAN, NAN
    rng = np.random.default_rng(seed)
    totals = np.empty(resamples)
    batch = max(1, min(resamples, 2_000_000 // n))  # bound memory at ~16 MB of indices
    for lo in range(0, resamples, batch):
        hi = min(resamples, lo + batch)
        idx = rng.integers(0, n, size=(hi - lo, n))
        totals[lo:hi] = tokens[idx].sum(axis=1)
    low, high = np.percentile(totals / window_s, [2.5, 97.5])
    return float(low), float(high)


# Time slices per window for batch means: enough for a standard error (9 degrees of freedom),
# few enough that a slice (0.8 s of an 8 s window) outlasts the gaps between a stream's chunks.
N_SLICES = 10


def slice_rates(
    chunk_t: Sequence[np.ndarray], chunk_tokens: Sequence[np.ndarray], window_s: float,
    n_slices: int = N_SLICES,
) -> np.ndarray:
    """Output tok/s of every request together in each of `n_slices` equal slices of (0, window_s].

    `chunk_t` / `chunk_tokens` hold each request's chunk arrival times (seconds from the window
    start) and cumulative token counts. Tokens between chunks are interpolated linearly, as the
    window's own count is (:mod:`specbench.metrics`), so the slices add up to the window exactly.
    """
    if window_s <= 0 or n_slices < 1:
        return np.empty(0)
    edges = np.linspace(0.0, window_s, n_slices + 1)
    totals = np.zeros(n_slices)
    for t, k in zip(chunk_t, chunk_tokens, strict=True):
        t, k = np.asarray(t, dtype=float), np.asarray(k, dtype=float)
        if len(t):
            totals += np.diff(np.interp(edges, t, k, left=0.0))
    return totals / (window_s / n_slices)


def lag1_autocorrelation(values: np.ndarray) -> float:
    """Sample lag-1 autocorrelation; NaN for fewer than 3 values or no spread.

    Biased low by about 1/n for short series (about -0.1 for 10 uncorrelated slices).
    """
    x = np.asarray(values, dtype=float)
    if len(x) < 3:
        return NAN
    d = x - x.mean()
    denom = float((d * d).sum())
    return float((d[:-1] * d[1:]).sum() / denom) if denom > 0 else NAN


@dataclass(frozen=True)
class BatchMeans:
    """The batch-means summary of one window's slices."""

    mean: float
    se: float  # sd of the slice rates / sqrt(n): the standard error of the window's rate
    lag1: float  # lag-1 autocorrelation of the slices (NaN when undefined)
    n: int


def batch_means(rates: np.ndarray) -> BatchMeans:
    """Mean, standard error and lag-1 autocorrelation of per-slice rates.

    The standard simulation-output method: a window's mean rate varies run to run about as the
    mean of k slices would if the slices were independent draws. That holds when a slice is long
    against the time over which the rate is correlated (requests finishing and new ones starting
    with other prompts); the lag-1 autocorrelation says whether it does, and
    :func:`ar1_inflation` widens the error when it does not. NaN se below 2 slices.
    """
    x = np.asarray(rates, dtype=float)
    n = len(x)
    if n == 0:
        return BatchMeans(NAN, NAN, NAN, 0)
    se = float(x.std(ddof=1) / math.sqrt(n)) if n >= 2 else NAN
    return BatchMeans(float(x.mean()), se, lag1_autocorrelation(x), n)


def ar1_inflation(lag1: float, n: int, max_rho: float = 0.9) -> float:
    """Factor on a batch-means standard error for slices with lag-1 autocorrelation `lag1`.

    For an AR(1) series with coefficient rho, the variance of the mean is about (1 + rho) /
    (1 - rho) times what independent slices give. `lag1` is a sample estimate from `n`-slice
    windows, biased low by about (1 + 3 rho) / n (Kendall), so rho = (n lag1 + 1) / (n - 3);
    rho is clipped to [0, max_rho], so negative correlation never narrows the error. 1.0 for
    NaN or fewer than 4 slices.
    """
    if not math.isfinite(lag1) or n < 4:
        return 1.0
    rho = min(max((n * lag1 + 1.0) / (n - 3), 0.0), max_rho)
    return math.sqrt((1 + rho) / (1 - rho))


def se_from_ci95(low: float, high: float) -> float:
    """Standard error implied by a 95% interval (low, high): its width over 2 x 1.96.

    Exact for a normal sampling distribution. A bootstrap interval of a sum over a few hundred
    requests is close to one; pass logs of the bounds for a ratio scale, where throughput
    intervals are roughly symmetric.
    """
    return (high - low) / (2 * Z95)


def draw_curves(
    means: Sequence[float],
    ses: Sequence[float],
    dfs: Sequence[int],
    rng: np.random.Generator,
    resamples: int,
) -> np.ndarray:
    """Parametric draws of a curve (resamples x levels): mean + se x noise at each level.

    The noise at a level is Student t with `df` degrees of freedom when the mean is over
    df + 1 >= 2 repeats (their spread is the run-to-run noise; a t with n - 1 degrees of
    freedom keeps 2 or 3 repeats from looking certain), and standard normal when df is 0 (one
    repeat, its standard error from the bootstrap interval over requests). Levels are drawn
    independently. Draws at or below zero are clipped to 1e-9 so ratios stay finite.
    """
    cols = []
    for mean, se, df in zip(means, ses, dfs, strict=True):
        noise = rng.standard_t(df, resamples) if df > 0 else rng.standard_normal(resamples)
        cols.append(mean + se * noise)
    return np.clip(np.column_stack(cols), 1e-9, None)


def draw_log_ratios(
    log_ratio: Sequence[float],
    se_log: Sequence[float],
    dfs: Sequence[int],
    rng: np.random.Generator,
    resamples: int,
) -> np.ndarray:
    """Parametric draws of a ratio curve (resamples x levels), drawn on the log scale.

    log r + se x noise at each level, the noise Student t with `df` degrees of freedom when the
    standard error comes from df + 1 paired repeats, else standard normal. Levels are drawn
    independently. Returns the ratios (exp of the draws).
    """
    cols = []
    for mean, se, df in zip(log_ratio, se_log, dfs, strict=True):
        noise = rng.standard_t(df, resamples) if df > 0 else rng.standard_normal(resamples)
        cols.append(mean + se * noise)
    return np.exp(np.column_stack(cols))


# ---------------------------------------------------------------------------------------------
# tests


@dataclass(frozen=True)
class RankTest:
    """Mann-Whitney U of sample x against sample y."""

    u: float  # pairs (x_i, y_j) with x_i > y_j, ties counted one half
    p_value: float
    method: str  # "exact" | "normal"


def u_counts(m: int, n: int) -> list[int]:
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

    The gate uses it on repeats: per point when both runs have at least ``min_rank_repeats``
    (default 3) repeats, and on acceptance lengths likewise. 3 against 3 is the smallest
    design that can reach p = 0.05 (1 ordering in 20). The `ci` preset runs one repeat, so CI
    never takes this path: there the gate compares the points' bootstrap intervals instead.

    Exact distribution (:func:`u_counts`) when there are no ties and at most 60 values in all;
    otherwise the normal approximation with tie correction and a 0.5 continuity correction,
    which is close for 8 or more values a side and rough below that.
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
    if not has_ties and m + n <= EXACT_MAX_SAMPLES:
        counts = u_counts(m, n)
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
            p_less = normal_cdf((u - mu + 0.5) / sigma)
            p_greater = 1.0 - normal_cdf((u - mu - 0.5) / sigma)
        method = "normal"
    if alternative == "less":
        p = p_less
    elif alternative == "greater":
        p = p_greater
    else:
        p = min(1.0, 2.0 * min(p_less, p_greater))
    return RankTest(u=u, p_value=min(1.0, p), method=method)


def geomean(values: Sequence[float]) -> float:
    """Geometric mean of positive values; 0.0 when any value is 0 or below.

    The gate averages candidate/reference ratios this way, so a 10% drop and a 10% gain
    cancel on the log scale. A ratio of 0 (a point that measured nothing) makes the mean 0,
    which reads as the largest possible drop.
    """
    if any(v <= 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def p_below_zero(estimate: float, se: float) -> float:
    """One-sided z-test p-value that the true value is below 0, given a normal estimate.

    The gate applies it to the mean log ratio over a curve's levels, with the standard error
    from the per-level variances summed as if the levels were independent. With se 0 the
    estimate is taken as exact.
    """
    if se > 0:
        return normal_cdf(estimate / se)
    return 0.0 if estimate < 0 else 1.0


def proportion_rise_p(ref_k: int, ref_n: int, cand_k: int, cand_n: int) -> float | None:
    """One-sided pooled two-proportion z-test that cand_k / cand_n is above ref_k / ref_n.

    The normal approximation wants about 5 or more events expected on each side; with fewer
    errors it is approximate, which is why the gate also requires an effect of
    ``error_fail_pp`` percentage points. None when either side has no trials.
    """
    if not ref_n or not cand_n:
        return None
    ref_rate, cand_rate = ref_k / ref_n, cand_k / cand_n
    pooled = (ref_k + cand_k) / (ref_n + cand_n)
    se = math.sqrt(pooled * (1 - pooled) * (1 / ref_n + 1 / cand_n))
    return 1 - normal_cdf((cand_rate - ref_rate) / se) if se > 0 else 1.0
