"""The report's detail tables: latency per level, request lengths, acceptance by category.

- **Latency** (TTFT, ITL, E2E at p50 and p99) comes from the summary's own columns
  (:func:`specbench.metrics.summarize_point` computes them per point, over the requests that
  finished OK inside the window), averaged over repeats by
  :func:`specbench.analysis.point_means`; nothing is recomputed here.
- **Request lengths** and **acceptance by category** come from the per-request rows of the
  same requests (finished OK inside the window): the summary carries neither. Percentiles
  interpolate linearly, as the summary's latency percentiles do (numpy's default).

A run whose point files are gone (a committed reference keeps only the summary) gets the
latency tables and no length or category tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specbench.analysis import point_means
from specbench.report.blocks import Block, Heading, Para, plain, table
from specbench.report.style import label, order, short_label
from specbench.results import Run, RunDirError
from specbench.stats import finite_or_none

# (summary column, header); all in milliseconds.
LATENCY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ttft_ms_p50", "TTFT p50"), ("ttft_ms_p99", "TTFT p99"),
    ("itl_ms_p50", "ITL p50"), ("itl_ms_p99", "ITL p99"),
    ("e2e_ms_p50", "E2E p50"), ("e2e_ms_p99", "E2E p99"),
)
# (request column, header prefix); tokens per request.
LENGTH_COLUMNS: tuple[tuple[str, str], ...] = (
    ("prompt_tokens", "in"), ("completion_tokens", "out"))
_REQUEST_COLUMNS = ("category", "prompt_tokens", "completion_tokens", "spec_verify_ct")


def _ms_cell(value_ms: Any) -> str:
    """Three significant figures or so: ITL of a few ms, TTFT of hundreds, E2E of thousands."""
    value = finite_or_none(value_ms)
    if value is None:
        return "–"
    if abs(value) < 10:
        return f"{value:.2f}"
    return f"{value:.1f}" if abs(value) < 1000 else f"{value:,.0f}"


def _tokens_cell(value_tokens: Any) -> str:
    value = finite_or_none(value_tokens)
    return "–" if value is None else f"{value:,.0f}"


# ---------------------------------------------------------------------------------------------
# latency


def latency_rows(run: Run, prompt_set: str) -> list[list[str]]:
    """One row per measured (level, configuration) of a set: c, configuration, then the
    latency columns (a column the summary lacks, as in older runs, shows "–")."""
    means = point_means(run)
    means = means[means["prompt_set"] == prompt_set]
    modes = order(means["mode"].unique(), run.manifest.config.server.speculative_num_steps)
    rows = []
    for c in sorted(int(c) for c in means["concurrency"].unique()):
        at_c = means[means["concurrency"] == c].set_index("mode")
        for mode in (m for m in modes if m in at_c.index):
            point = at_c.loc[mode]
            rows.append([str(c), label(mode),
                         *(_ms_cell(point.get(col)) for col, _ in LATENCY_COLUMNS)])
    return rows


def latency_section(run: Run) -> list[Block]:
    headers = ["c", "configuration", *(h for _, h in LATENCY_COLUMNS)]
    out: list[Block] = [
        Heading(2, "Latency"),
        Para(plain("Milliseconds, per point (averaged over repeats): time to first token, "
                   "inter-token latency per token (a chunk of k tokens counts k gaps of 1/k "
                   "its interval) and end-to-end latency, over the requests that finished OK "
                   "inside the window.")),
    ]
    for prompt_set in run.prompt_sets:
        out += [Heading(3, prompt_set), table(headers, latency_rows(run, prompt_set))]
    return out


# ---------------------------------------------------------------------------------------------
# the requests behind lengths and acceptance


def finished_requests(run: Run, prompt_set: str) -> pd.DataFrame | None:
    """Requests of a set that finished OK inside the window, every point and repeat pooled,
    with a mode column and whichever of category, prompt_tokens, completion_tokens and
    spec_verify_ct the point files carry (numbers as floats, NaN where missing). None when no
    point file of the set is readable or says which requests finished in the window."""
    points = run.summary[run.summary["prompt_set"] == prompt_set]
    frames = []
    for point in points.to_dict("records"):
        try:
            requests = run.requests(str(point["mode"]), prompt_set, int(point["concurrency"]),
                                    int(point["repeat"]))
        except (RunDirError, OSError):
            continue  # committed references keep only the summary
        if "finished_in_window" not in requests.columns:
            continue
        done = requests[requests["finished_in_window"].fillna(False).astype(bool)]
        kept = [c for c in _REQUEST_COLUMNS if c in done.columns]
        frames.append(done[kept].assign(mode=str(point["mode"])))
    if not frames:
        return None
    rows = pd.concat(frames, ignore_index=True)
    for col in _REQUEST_COLUMNS[1:]:
        rows[col] = (pd.to_numeric(rows[col], errors="coerce").astype(float)
                     if col in rows.columns else np.nan)
    return rows


def _spread_tokens(values: pd.Series) -> tuple[float | None, float | None, float | None]:
    """(mean, p50, p99) of the known values; None each when there are none."""
    known = values.dropna().to_numpy(dtype=float)
    if not len(known):
        return None, None, None
    return (float(known.mean()), float(np.percentile(known, 50)),
            float(np.percentile(known, 99)))


def length_table(requests: pd.DataFrame, default_steps: int = 3) -> pd.DataFrame:
    """Per configuration: requests, then input and output tokens (mean, p50, p99)."""
    rows = {}
    for mode in order(requests["mode"].unique(), default_steps):
        mine = requests[requests["mode"] == mode]
        row: dict[str, float | None] = {"requests": float(len(mine))}
        for col, prefix in LENGTH_COLUMNS:
            stats = _spread_tokens(mine[col])
            row.update(zip((f"{prefix} mean", f"{prefix} p50", f"{prefix} p99"), stats,
                           strict=True))
        rows[mode] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def length_section(run: Run, requests_by_set: dict[str, pd.DataFrame | None]) -> list[Block]:
    parts: list[Block] = []
    steps = run.manifest.config.server.speculative_num_steps
    for prompt_set in run.prompt_sets:
        requests = requests_by_set.get(prompt_set)
        if requests is None or requests.empty:
            continue
        lengths = length_table(requests, steps)
        headers = ["configuration", *lengths.columns]
        body = [[label(str(mode)), str(int(row["requests"])),
                 *(_tokens_cell(row[h]) for h in lengths.columns[1:])]
                for mode, row in lengths.iterrows()]
        parts += [Heading(3, prompt_set), table(headers, body)]
    if not parts:
        return []
    return [Heading(2, "Request lengths"),
            Para(plain("Tokens per request (in: the prompt as the server counted it; "
                       "out: completion tokens), over the requests that finished OK inside "
                       "the window, all levels and repeats pooled. Requests still running at "
                       "a window's end are left out, which favours shorter answers when "
                       "windows are short.")),
            *parts]


# ---------------------------------------------------------------------------------------------
# acceptance by category


def acceptance_by_category(run: Run, prompt_set: str,
                           requests: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """Verify-weighted accept length per category and speculative configuration, all levels.

    Sum of completion_tokens / sum of spec_verify_ct over requests that finished in the window,
    as the per-point accept length is defined. None when the rows carry no category.
    `requests`: :func:`finished_requests` of the set, when the caller has read them already.
    """
    rows = requests if requests is not None else finished_requests(run, prompt_set)
    if rows is None or "category" not in rows.columns:
        return None
    rows = rows[(rows["mode"] != "baseline") & (rows["spec_verify_ct"] > 0)
                & rows["completion_tokens"].notna() & rows["category"].notna()]
    if rows.empty:
        return None
    sums = rows.groupby(["category", "mode"])[["completion_tokens", "spec_verify_ct"]].sum()
    accept = (sums["completion_tokens"] / sums["spec_verify_ct"]).unstack("mode")
    accept = accept[order(accept.columns)]
    accept["requests"] = rows.groupby("category").size()
    return accept


def category_section(run: Run, requests_by_set: dict[str, pd.DataFrame | None]) -> list[Block]:
    parts: list[Block] = []
    for prompt_set in run.prompt_sets:
        accept = acceptance_by_category(run, prompt_set, requests_by_set.get(prompt_set))
        if accept is None:
            continue
        modes = [m for m in accept.columns if m != "requests"]
        headers = ["category", *(short_label(m) for m in modes), "requests"]
        body = [[str(cat), *(_accept_cell(row[m]) for m in modes), str(int(row["requests"]))]
                for cat, row in accept.iterrows()]
        parts += [Heading(3, prompt_set), table(headers, body)]
    if not parts:
        return []
    return [Heading(2, "Acceptance by category"),
            Para(plain("Accept length per speculative configuration, verify-weighted over "
                       "requests that finished in the window, all levels pooled: sum of "
                       "completion tokens / sum of verify steps.")),
            *parts]


def _accept_cell(value: Any) -> str:
    number = finite_or_none(value)
    return "–" if number is None else f"{number:.2f}"
