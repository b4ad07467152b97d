"""When a difference between two runs warns or fails: the gate's thresholds."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from specbench.errors import ConfigError


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

    def with_overrides(
        self,
        *,
        warn_pct: float | None = None,
        fail_pct: float | None = None,
        accept_fail_pct: float | None = None,
    ) -> Thresholds:
        """These thresholds with the command line's percentages; None means "not given"."""
        return replace(
            self,
            warn_pct=self.warn_pct if warn_pct is None else warn_pct,
            fail_pct=self.fail_pct if fail_pct is None else fail_pct,
            accept_fail_pct=self.accept_fail_pct if accept_fail_pct is None else accept_fail_pct,
        )


def across_launches(th: Thresholds, launch_sd: float) -> Thresholds:
    """`th` for a configuration whose reference moved by `launch_sd` (sd of log tok/s) between
    two launches of its server (analysis.json's between_launch): a candidate on another launch
    differs from the reference by ~N(0, 2 sd^2) on the log scale, so it fails only below about
    two sds of that (2 sqrt(2) sd), and warns at half of it. Never narrower than `th`."""
    floor_pct = 100 * (1 - math.exp(-2 * math.sqrt(2) * launch_sd))
    if floor_pct <= th.fail_pct:
        return th
    return replace(th, fail_pct=floor_pct, warn_pct=max(th.warn_pct, floor_pct / 2))
