"""Per-level views of a run: mean tok/s and its uncertainty, batch sizes, interpolation.

Everything the decisions share: :func:`level_stats` (one configuration's curve with the spread
each level's mean carries), :func:`mean_by_level`, :func:`point_means` (the per-level table
the figures, report and notebook read), the batch sizes a level runs at
(:func:`batch_sizes`), and log-log interpolation of a curve between its levels
(:func:`value_at`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from specbench.errors import UserError
from specbench.results import Run
from specbench.stats import N_SLICES, ar1_inflation, finite_or_none, se_from_ci95


class AnalysisError(UserError, ValueError):
    """A run that cannot be analysed; the message is one line naming the cause and the fix."""


@dataclass(frozen=True)
class LevelStats:
    """Mean output tok/s of one (configuration, prompt set, concurrency) and its spread."""

    concurrency: int
    mean_tok_s: float
    se_tok_s: float  # standard error of mean_tok_s; 0 when nothing says how noisy it is
    df: int  # degrees of freedom of a Student t; 0 means normal
    n_repeats: int
    method: str  # "repeats" | "batch_means" | "ci_columns" | "none"
    repeats: tuple[tuple[int, float], ...] = ()  # (repeat, tok/s): the pairing of repeats


def level(value: Any) -> int:
    """A concurrency level from a summary cell or group key (a CSV round trip makes it 8.0)."""
    return int(float(value))


def _rows(summary: pd.DataFrame, mode: str, prompt_set: str) -> pd.DataFrame:
    return summary[(summary["mode"] == mode) & (summary["prompt_set"] == prompt_set)]


def _single_point_se(row: Mapping[str, Any], inflation: float) -> tuple[float, str]:
    """A one-repeat point's standard error: batch means over time slices, else its request
    bootstrap interval, else nothing."""
    se = finite_or_none(row.get("output_tok_s_se"))
    slices = finite_or_none(row.get("output_tok_s_slices"))
    if se is not None and (slices is None or slices >= 2):
        return se * inflation, "batch_means"
    lo = finite_or_none(row.get("output_tok_s_ci_low"))
    hi = finite_or_none(row.get("output_tok_s_ci_high"))
    if lo is not None and hi is not None:
        return se_from_ci95(lo, hi), "ci_columns"
    return 0.0, "none"


def level_stats(
    summary: pd.DataFrame, mode: str, prompt_set: str, inflation: float = 1.0,
) -> dict[int, LevelStats]:
    """Mean tok/s over repeats per concurrency, with the spread the bootstrap draws from.

    With >= 2 repeats the spread of the repeats (Student t, n - 1 degrees of freedom); with one,
    the batch-means standard error over the window's time slices times `inflation` (see
    :func:`slice_inflation`), else the point's bootstrap interval over requests.
    """
    rows = _rows(summary, mode, prompt_set)
    rows = rows[pd.to_numeric(rows["output_tok_s"], errors="coerce").notna()]
    out: dict[int, LevelStats] = {}
    for c, group in rows.groupby("concurrency"):
        values = pd.to_numeric(group["output_tok_s"], errors="coerce").to_numpy(float)
        repeats = tuple((int(r), float(v)) for r, v in zip(group["repeat"], values, strict=True))
        n = len(values)
        if n >= 2:
            se, df, method = float(values.std(ddof=1) / math.sqrt(n)), n - 1, "repeats"
        else:
            se, method = _single_point_se({str(k): v for k, v in group.iloc[0].items()},
                                          inflation)
            df = 0
        c_int = level(c)
        out[c_int] = LevelStats(c_int, float(values.mean()), max(se, 0.0), df, n, method, repeats)
    return out


def slice_inflation(summary: pd.DataFrame) -> tuple[float, float | None]:
    """(factor on batch-means errors, mean lag-1 autocorrelation of the run's slices).

    The autocorrelation is pooled over every point of the run: one window's ten slices give a
    lag-1 estimate with an sd of about 0.3, a run's tens of points a usable mean. None (factor
    1) when no point recorded slices.
    """
    if "output_tok_s_slice_lag1" not in summary.columns:
        return 1.0, None
    lag1 = pd.to_numeric(summary["output_tok_s_slice_lag1"], errors="coerce").dropna()
    if lag1.empty:
        return 1.0, None
    slices = (pd.to_numeric(summary["output_tok_s_slices"], errors="coerce").dropna()
              if "output_tok_s_slices" in summary.columns else pd.Series(dtype=float))
    n = int(slices.median()) if not slices.empty else N_SLICES
    mean = float(lag1.mean())
    return ar1_inflation(mean, n), mean


def mean_by_level(
    summary: pd.DataFrame, mode: str, prompt_set: str, column: str,
) -> dict[int, float]:
    """Mean of a summary column over repeats per concurrency (NaN rows ignored)."""
    rows = _rows(summary, mode, prompt_set)
    if column not in rows.columns or rows.empty:
        return {}
    values = pd.to_numeric(rows[column], errors="coerce")
    means = values.groupby(rows["concurrency"]).mean()
    return {level(c): float(v) for c, v in means.items() if finite_or_none(v) is not None}


def point_means(run: Run) -> pd.DataFrame:
    """Summary rows averaged over repeats: one row per (mode, prompt set, concurrency).

    Adds n_repeats, flagged (any repeat raised a flag), and tok_s_band_low/high: min/max over
    repeats when there are >= 2 (the run-to-run spread), else mean +- 1.96 batch-means
    standard errors when the run recorded slices, else the point's 95 % bootstrap CI.
    """
    summary = run.summary.copy()
    # An open-loop run's points are per request rate (its concurrency is the cap, or 0).
    keys = ["mode", "prompt_set", "concurrency", *(["request_rate"] if run.open_loop else [])]
    numeric = [c for c in summary.columns if c not in (*keys, "repeat", "flags")]
    for col in numeric:
        summary[col] = pd.to_numeric(summary[col], errors="coerce")
    grouped = summary.groupby(keys, sort=True)
    means = grouped[numeric].mean()
    tok_s = grouped["output_tok_s"]
    means["n_repeats"] = grouped["repeat"].count()
    means["flagged"] = (summary["flags"].astype(str).str.strip() != "").groupby(
        [summary[k] for k in keys]).any()
    means["tok_s_min"], means["tok_s_max"] = tok_s.min(), tok_s.max()
    means = means.reset_index()
    many = means["n_repeats"] >= 2
    nan = pd.Series(np.nan, index=means.index)
    se = means.get("output_tok_s_se", nan)
    low = np.where(se.notna(), means["output_tok_s"] - 1.96 * se,
                   means.get("output_tok_s_ci_low", nan))
    high = np.where(se.notna(), means["output_tok_s"] + 1.96 * se,
                    means.get("output_tok_s_ci_high", nan))
    means["tok_s_band_low"] = np.where(many, means["tok_s_min"], low)
    means["tok_s_band_high"] = np.where(many, means["tok_s_max"], high)
    return means


# ---------------------------------------------------------------------------------------------
# batch sizes


def batch_sizes(
    summary: pd.DataFrame, prompt_set: str, levels: list[int], modes: Iterable[str],
) -> tuple[list[float], list[int]]:
    """Measured mean running requests per level (mean over `modes`; c when absent).

    c closed-loop users cannot keep more than c requests running, so a larger measurement is
    capped at c; the levels where that happened are returned so the analysis can say so.
    """
    per_mode = [mean_by_level(summary, m, prompt_set, "server_running_reqs_mean") for m in modes]
    out: list[float] = []
    over: list[int] = []
    for c in levels:
        measured = [m[c] for m in per_mode if c in m and m[c] > 0]
        batch = float(np.mean(measured)) if measured else float(c)
        if batch > 1.02 * c:
            over.append(c)
        out.append(min(batch, float(c)))
    return out, over


def batch_at(levels: list[int], batch: list[float], concurrency: float) -> float:
    """The batch size at a concurrency, log-log between levels (b = c gives c back)."""
    log2_b = np.interp(math.log2(concurrency), np.log2(levels), np.log2(batch))
    return float(2.0 ** log2_b)


def threshold_from_batch(batch_size: float) -> int:
    """The smallest whole batch size at or above a crossing (the tolerance keeps 37.0 at 37)."""
    return max(1, math.ceil(batch_size - 1e-9))


# ---------------------------------------------------------------------------------------------
# interpolation


def value_at(curve: Mapping[int, float], c: int) -> float | None:
    """A curve's value at c: measured, else log-log between its levels; None outside them.

    Throughput grows about as a power of c between levels, so log-log is the natural
    interpolation; straddle levels (T-1, T, T+1) of a dynamic server fall between grid levels.
    """
    if c in curve:
        return curve[c]
    levels = sorted(k for k, v in curve.items() if v > 0)
    if not levels or not levels[0] < c < levels[-1]:
        return None
    log_v = np.log2([curve[k] for k in levels])
    return float(2.0 ** np.interp(math.log2(c), np.log2(levels), log_v))


def means(stats: Mapping[int, LevelStats]) -> dict[int, float]:
    return {c: s.mean_tok_s for c, s in stats.items()}
