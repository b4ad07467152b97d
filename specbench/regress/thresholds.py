"""When a difference between two runs warns or fails: the gate's thresholds."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from specbench.errors import ConfigError

GOODPUT = "goodput_req_s"
# A latency the summary keeps per point: TTFT, TPOT, ITL or E2E, at one percentile.
LATENCY_COLUMN = re.compile(r"^(ttft|tpot|itl|e2e)_ms_p(50|90|95|99)$")
DEFAULT_LATENCY = ("ttft_ms_p50", "ttft_ms_p90", "tpot_ms_p50", "tpot_ms_p90")


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
    # TTFT/TPOT percentiles and goodput: the same rules, limits widened by a second launch.
    # 5% as for tok/s: a 10% slower decode step (TPOT +10%) fails with room to spare. Two
    # launches moved TPOT p50 by sd 0.5-1.2% on the simulator (TP 2, 6x) and by sd 2.4-2.5% on
    # the H200 for coding (limit 5 and 7%), but 9-12% for agentic and TTFT more (coding 3%,
    # agentic 35-64%): where a launch moves more, its two-launch limit says by how much.
    latency_warn_pct: float = 2.5  # TTFT/TPOT percentile rise that warns
    latency_fail_pct: float = 5.0  # ... that fails (with a two-launch reference or repeats)
    goodput_warn_pct: float = 2.5  # goodput drop that warns
    goodput_fail_pct: float = 5.0  # ... that fails (with statistical support)
    latency_metrics: tuple[str, ...] = DEFAULT_LATENCY  # summary columns gated as latencies

    def validate(self) -> None:
        """Raise ConfigError (one line) for values that make no sense."""
        pairs = (
            ("warn_pct", "fail_pct", self.warn_pct, self.fail_pct),
            ("accept_warn_pct", "accept_fail_pct", self.accept_warn_pct, self.accept_fail_pct),
            ("error_warn_pp", "error_fail_pp", self.error_warn_pp, self.error_fail_pp),
            ("crossover_warn_levels", "crossover_fail_levels",
             self.crossover_warn_levels, self.crossover_fail_levels),
            ("latency_warn_pct", "latency_fail_pct", self.latency_warn_pct,
             self.latency_fail_pct),
            ("goodput_warn_pct", "goodput_fail_pct", self.goodput_warn_pct,
             self.goodput_fail_pct),
        )
        for warn_name, fail_name, warn, fail in pairs:
            if not (warn >= 0 and fail > 0):
                raise ConfigError(f"{warn_name} and {fail_name} must be positive; e.g. 3 and 7")
            if warn > fail:
                raise ConfigError(
                    f"{warn_name} {warn:g} is above {fail_name} {fail:g}; "
                    "set the warn threshold at or below the fail threshold"
                )
        for name, value in (("fail_pct", self.fail_pct), ("accept_fail_pct", self.accept_fail_pct),
                            ("goodput_fail_pct", self.goodput_fail_pct)):
            if value >= 100:
                raise ConfigError(f"{name} {value:g} must be below 100 (it is a drop in percent)")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"alpha {self.alpha:g} must be between 0 and 1; e.g. 0.05")
        if self.min_adjacent_levels < 1 or self.min_rank_repeats < 2:
            raise ConfigError("min_adjacent_levels must be >= 1 and min_rank_repeats >= 2")
        unknown = [m for m in self.latency_metrics if not LATENCY_COLUMN.match(m)]
        if unknown:
            raise ConfigError(
                f"--latency {','.join(unknown)}: not a latency column; give ttft, tpot, itl or "
                "e2e with _ms_p50, _p90, _p95 or _p99, e.g. --latency tpot_ms_p50,tpot_ms_p90")

    def with_overrides(
        self,
        *,
        warn_pct: float | None = None,
        fail_pct: float | None = None,
        accept_fail_pct: float | None = None,
        latency_fail_pct: float | None = None,
        goodput_fail_pct: float | None = None,
        latency_metrics: Sequence[str] | None = None,
    ) -> Thresholds:
        """These thresholds with the command line's values; None means "not given". A fail
        limit given below its warn limit pulls the warn limit down with it (the tok/s pair
        excepted: its warn limit has its own option)."""
        def keep(value: float | None, current: float) -> float:
            return current if value is None else value

        latency_fail = keep(latency_fail_pct, self.latency_fail_pct)
        goodput_fail = keep(goodput_fail_pct, self.goodput_fail_pct)
        return replace(
            self,
            warn_pct=keep(warn_pct, self.warn_pct),
            fail_pct=keep(fail_pct, self.fail_pct),
            accept_fail_pct=keep(accept_fail_pct, self.accept_fail_pct),
            latency_fail_pct=latency_fail,
            latency_warn_pct=min(self.latency_warn_pct, latency_fail),
            goodput_fail_pct=goodput_fail,
            goodput_warn_pct=min(self.goodput_warn_pct, goodput_fail),
            latency_metrics=(self.latency_metrics if latency_metrics is None
                             else tuple(latency_metrics)),
        )


def launch_floor_pct(launch_sd: float, rise: bool = False) -> float:
    """The change (a drop, or a rise for `rise`) that a relaunch alone reaches rarely, for a
    metric that moved by `launch_sd` (sd of its log) between two launches of a server: a
    candidate on another launch differs from the reference by ~N(0, 2 sd^2) on the log scale,
    so two sds of that, 2 sqrt(2) sd."""
    log_limit = 2 * math.sqrt(2) * launch_sd
    return 100 * (math.exp(log_limit) - 1 if rise else 1 - math.exp(-log_limit))


def widened(fail_pct: float, warn_pct: float, launch_sd: float,
            rise: bool = False) -> tuple[float, float]:
    """(fail, warn) limits never below the launch floor (:func:`launch_floor_pct`); the warn
    limit at least half the floor."""
    floor_pct = launch_floor_pct(launch_sd, rise)
    if floor_pct <= fail_pct:
        return fail_pct, warn_pct
    return floor_pct, max(warn_pct, floor_pct / 2)


def across_launches(th: Thresholds, launch_sd: float) -> Thresholds:
    """`th` for a configuration whose reference moved by `launch_sd` (sd of log tok/s) between
    two launches of its server (analysis.json's between_launch): it fails only below the launch
    floor, and warns at half of it. Never narrower than `th`."""
    fail_pct, warn_pct = widened(th.fail_pct, th.warn_pct, launch_sd)
    if fail_pct == th.fail_pct:
        return th
    return replace(th, fail_pct=fail_pct, warn_pct=warn_pct)


def launch_sd(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Between-launch sd of a metric's log from (first launch, second launch) values, one pair
    per level: sqrt(mean(d^2) / 2) with d = log(second / first). A percentile has no interval
    in the summary, so the window's own noise is not taken out: it is part of what a relaunch
    moves by. None without a pair of positive values."""
    diffs = [math.log(b / a) for a, b in pairs if a > 0 and b > 0]
    if not diffs:
        return None
    return math.sqrt(sum(d * d for d in diffs) / len(diffs) / 2)
