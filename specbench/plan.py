"""The sweep's plan: which levels each configuration is measured at, and how long it takes.

The dry run prints this plan with every server command and launches nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from specbench.config import DEFAULT_FIXED_THRESHOLD, SweepConfig
from specbench.configurations import ServerConfiguration
from specbench.engines import Engine, make_engine
from specbench.engines.argv import adaptive_config
from specbench.engines.base import adaptive_path


def levels_for(config: ServerConfiguration, cfg: SweepConfig, threshold: int | None) -> list[int]:
    """The sweep's levels, plus a dynamic server's levels around its threshold."""
    levels = set(cfg.concurrency)
    if config.kind == "dynamic" and threshold is not None:
        from specbench import analysis

        extra = analysis.threshold_levels(threshold, sorted(levels))
        levels |= {c for c in extra if 1 <= c <= cfg.max_running_requests}
    return sorted(levels)


def estimate_s(cfg: SweepConfig, engine: Engine, n_points: int) -> float:
    per_point = (cfg.load.warmup_s + cfg.load.window_s) / engine.time_scale + 1.0
    return n_points * per_point + len(cfg.modes) * engine.start_estimate_s


def dry_run(cfg: SweepConfig, console: Console) -> None:
    """Print the server commands and the plan; launch nothing."""
    engine = make_engine(cfg)
    console.print(f"[bold]specbench sweep plan[/] (engine {cfg.engine}, nothing launched)")
    n_points = 0
    for config in cfg.configurations:
        threshold = config.threshold or cfg.threshold or DEFAULT_FIXED_THRESHOLD
        path = adaptive_path(Path("<run>"), config, None) if config.kind == "dynamic" else None
        console.print(f"{config.name}: {engine.describe(config, path)}", soft_wrap=True)
        if config.kind == "dynamic":
            given = config.threshold or cfg.threshold
            source = "given" if given else "computed after the baseline and eagle3 runs; shown with"
            steps = config.num_steps(cfg.server.speculative_num_steps)
            console.print(
                f"  adaptive config ({source} T={threshold}): "
                + json.dumps(adaptive_config(steps, threshold))
            )
        levels = levels_for(config, cfg, threshold if config.kind == "dynamic" else None)
        n = len(levels) * len(cfg.prompt_sets) * cfg.load.repeats
        n_points += n
        console.print(
            f"  {n} points: prompt sets {','.join(cfg.prompt_sets)} x concurrency "
            f"{','.join(map(str, levels))} x {cfg.load.repeats} repeat(s)"
        )
    minutes = estimate_s(cfg, engine, n_points) / 60
    console.print(f"{n_points} points in all; estimated {minutes:.1f} min")
