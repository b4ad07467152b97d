"""How far a configuration's speed moves from one launch of its server to the next.

A server launched twice serves the same requests at different speeds: on the H200 with
FlashInfer the baseline repeated within 0.5% across two launches while EAGLE-3 at c = 16 gave
2,695 and 3,246 tok/s. A point's interval covers its window's noise, not that, and
the paired ratio a decision rests on (EAGLE-3 / baseline, same launch) hides it entirely.

The model: each launch multiplies a configuration's whole curve by exp(b), b ~ N(0, sigma^2),
the same at every level (a launch that runs slow runs slow everywhere). A level measured on two
launches A and B gives d = log(t_B / t_A) with

    E[d^2] = 2 sigma^2 + se_A^2 + se_B^2

(se: each point's relative standard error), so over the levels both launches measured

    sigma^2 = max(0, mean(d^2 - se_A^2 - se_B^2) / 2).

Both launches send the same prompts in the same order, so where both points kept their
per-request rows, se_A^2 + se_B^2 is the paired error of d (request k of one launch against
request k of the other, as :mod:`.intervals` pairs two configurations). The unpaired errors keep
what the prompts in a window do to both launches alike: on the H200 (coding, 6-s windows of 14-33
requests) they were 5-10% a point and hid a relaunch that moved c* from 18.1 to 19.6 while the
paired interval was 17.5-18.7.

A ratio of two configurations then moves between launches by sqrt(sigma_num^2 + sigma_den^2),
one draw per resample shared by every level (:func:`specbench.analysis.intervals.ratio_draws`).
With two launches the estimate rests on one difference per level; it says how large the term is,
not precisely.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from specbench.analysis.curves import LevelStats, level_stats
from specbench.analysis.intervals import PairedRequests, paired_blocks
from specbench.results import Run
from specbench.results.analysis import BetweenLaunch, LaunchChange


@dataclass(frozen=True)
class LaunchSpread:
    """One configuration on one prompt set, measured on two launches."""

    mode: str
    prompt_set: str
    levels: tuple[int, ...]
    log_diff: tuple[float, ...]  # log(second / first) per level
    sd_log: float  # sigma: the between-launch standard deviation of log tok/s

    def as_json(self) -> LaunchChange:
        return {
            "levels": list(self.levels),
            "change_pct": [round(100 * math.expm1(d), 2) for d in self.log_diff],
            "sd_pct": round(100 * self.sd_log, 2),
        }


def _rel_se(stats: LevelStats) -> float:
    return stats.se_tok_s / stats.mean_tok_s if stats.mean_tok_s > 0 else 0.0


def spread_of(mode: str, prompt_set: str, first: dict[int, LevelStats],
              second: dict[int, LevelStats],
              paired_var: Mapping[int, float] | None = None) -> LaunchSpread | None:
    """sigma for one configuration from the levels both launches measured (None if none).
    `paired_var`: per level, the paired variance of d where the requests could be paired."""
    levels = sorted(c for c in first if c in second
                    and first[c].mean_tok_s > 0 and second[c].mean_tok_s > 0)
    if not levels:
        return None
    diffs = [math.log(second[c].mean_tok_s / first[c].mean_tok_s) for c in levels]
    paired = paired_var or {}
    excess = [d * d - paired.get(c, _rel_se(first[c]) ** 2 + _rel_se(second[c]) ** 2)
              for d, c in zip(diffs, levels, strict=True)]
    variance = max(0.0, sum(excess) / len(excess) / 2)
    return LaunchSpread(mode, prompt_set, tuple(levels), tuple(diffs), math.sqrt(variance))


def _paired_var(mode: str, prompt_set: str, first: tuple[Run, dict[int, LevelStats]],
                second: tuple[Run, dict[int, LevelStats]]) -> dict[int, float]:
    """Per shared single-repeat level: the variance of d from the same requests on both
    launches (levels whose rows are missing or cannot be paired are left out)."""
    (run_a, at_a), (run_b, at_b) = first, second
    rows_a, rows_b = PairedRequests(run_a), PairedRequests(run_b)
    out = {}
    for c in sorted(set(at_a) & set(at_b)):
        if at_a[c].n_repeats != 1 or at_b[c].n_repeats != 1:
            continue
        a = rows_a.rows(mode, prompt_set, c, at_a[c].repeats[0][0])
        b = rows_b.rows(mode, prompt_set, c, at_b[c].repeats[0][0])
        sums = None if a is None or b is None else paired_blocks(b, a)
        if sums is not None:
            out[c] = float(sums.var(ddof=1) * len(sums))
    return out


def launch_spreads(first: Run, second: Run, inflation: float = 1.0) -> list[LaunchSpread]:
    """Every (configuration, prompt set) that both runs measured at a shared level."""
    out = []
    for prompt_set in first.prompt_sets:
        for mode in first.modes:
            at_a = level_stats(first.summary, mode, prompt_set, inflation)
            at_b = level_stats(second.summary, mode, prompt_set, inflation)
            paired = _paired_var(mode, prompt_set, (first, at_a), (second, at_b))
            found = spread_of(mode, prompt_set, at_a, at_b, paired)
            if found is not None:
                out.append(found)
    return out


def between_launch_section(first: Run, second: Run, inflation: float = 1.0) -> BetweenLaunch:
    """analysis.json's ``between_launch``: where the second launch is and sigma per config
    (`inflation`: the analysis's factor on batch-means errors, curves.slice_inflation)."""
    spreads = launch_spreads(first, second, inflation)
    return {
        "relaunch": str(second.path),
        "by_configuration": {f"{s.mode}/{s.prompt_set}": s.as_json() for s in spreads},
    }


def sd_of(section: BetweenLaunch | None, label: str) -> float:
    """sigma of configuration `label` ("mode/prompt_set") in a stored ``between_launch``
    section (0 where it was not measured twice: nothing says it moves)."""
    found = section.get("by_configuration", {}).get(label) if section is not None else None
    return float(found.get("sd_pct", 0.0)) / 100 if found is not None else 0.0


def ratio_sd(section: BetweenLaunch | None, prompt_set: str, num: str, den: str) -> float:
    """The between-launch sd of log(num / den) on `prompt_set`."""
    return math.hypot(sd_of(section, f"{num}/{prompt_set}"), sd_of(section, f"{den}/{prompt_set}"))
