"""The sweep's plan: which levels each configuration is measured at, and how long it takes.

The dry run prints this plan with every server command and launches nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from specbench import prompts
from specbench.config import DEFAULT_FIXED_THRESHOLD, SweepConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.engines import Engine, make_engine
from specbench.engines.base import adaptive_path
from specbench.prompts import context
from specbench.results.points import rate_text
from specbench.run import adaptive


def levels_for(
    config: ServerConfiguration,
    cfg: SweepConfig,
    schedule: Schedule | None,
    refined: Sequence[int] = (),
) -> list[int]:
    """The sweep's levels (in an adaptive run, the levels it `refined` for this server), plus
    a threshold server's levels around its threshold (T-1, T, T+1: batch sizes just below, at
    and just above the switch)."""
    levels = set(refined) if cfg.plan == "adaptive" else set(cfg.concurrency)
    threshold = schedule.threshold if schedule else None
    if config.adaptive == "threshold" and threshold is not None and threshold > 1:
        from specbench import analysis

        extra = analysis.threshold_levels(threshold, sorted(levels))
        levels |= {c for c in extra if 1 <= c <= cfg.max_running_requests}
    return sorted(levels)


def _shown_schedule(config: ServerConfiguration, cfg: SweepConfig) -> Schedule | None:
    """The schedule a configuration is launched with, or a stand-in where the sweep chooses it."""
    steps = config.num_steps(cfg.server.speculative_num_steps)
    if config.adaptive == "threshold":
        threshold = config.threshold or cfg.threshold or DEFAULT_FIXED_THRESHOLD
        return Schedule.from_threshold(steps, threshold)
    if config.adaptive == "schedule" and cfg.schedule:
        return Schedule.from_slots(cfg.schedule)
    if config.adaptive == "schedule":
        return Schedule.from_threshold(steps, DEFAULT_FIXED_THRESHOLD)
    return None


def _schedule_source(config: ServerConfiguration, cfg: SweepConfig, schedule: Schedule) -> str:
    if config.adaptive == "schedule" and cfg.schedule:
        return "given"
    if config.adaptive == "schedule":
        return "tuned after the static runs; shown with a placeholder"
    if schedule.threshold == 1:
        return "zero steps at every batch size"
    if config.threshold or cfg.threshold:
        return f"given T={schedule.threshold}"
    return f"computed from the measured static curves; shown with T={schedule.threshold}"


def point_estimate_s(cfg: SweepConfig, engine: Engine) -> float:
    """Wall seconds one point takes, before any was measured: warmup, window, a second more
    (an open-loop point also follows its window's requests to their end: a window more)."""
    windows = 2 if cfg.load.request_rates else 1
    return (cfg.load.warmup_s + windows * cfg.load.window_s) / engine.time_scale + 1.0


# Servers a run of the adaptive plan launches on the default grid: the median of 10 seeds of
# benchmarks/adaptive_plan.py (the dense grid launches one per configuration).
ADAPTIVE_LAUNCHES = 7


def break_even_launch_s(cfg: SweepConfig, engine: Engine) -> float:
    """The launch time above which the dense grid holds the GPUs for less time than the
    adaptive plan: the adaptive plan measures fewer points but launches more servers."""
    names = [c.name for c in cfg.configurations]
    n_sets = len(cfg.measured_sets)
    dense_points = len(set(cfg.concurrency)) * n_sets * len(names)
    saved_points = dense_points - adaptive.estimated_points(cfg.concurrency, n_sets, names)
    extra_launches = ADAPTIVE_LAUNCHES - len(names)
    if extra_launches <= 0:
        return float("inf")
    return saved_points * point_estimate_s(cfg, engine) * engine.time_scale / extra_launches


def plan_for_launch(cfg: SweepConfig, engine: Engine, launch_s: float,
                    measured: bool) -> tuple[str, str]:
    """(plan, why) for `--plan auto` on a server that takes `launch_s` to launch."""
    limit = break_even_launch_s(cfg, engine)
    what = "the first server launched" if measured else "--launch-s says a launch takes"
    if launch_s < limit:
        return "adaptive", (f"adaptive plan: {what} in {launch_s:.0f} s, under the "
                            f"{limit:.0f}-s break-even above which the dense grid's fewer "
                            "launches cost less than the points the adaptive plan saves")
    return "dense", (f"dense plan: {what} in {launch_s:.0f} s, over the {limit:.0f}-s "
                     f"break-even: the adaptive plan's ~{ADAPTIVE_LAUNCHES} launches would "
                     "cost more than the points it saves")


def estimate_s(cfg: SweepConfig, engine: Engine, n_points: int) -> float:
    launches = len(cfg.configurations)
    return n_points * point_estimate_s(cfg, engine) + launches * engine.start_estimate_s


def estimate_gpu_s(cfg: SweepConfig, engine: Engine, n_points: int) -> float:
    """GPU seconds the plan holds servers for, counted as the manifest counts them (points in
    the engine's time, launches in wall time), times each server's GPUs."""
    point_gpu_s = point_estimate_s(cfg, engine) * engine.time_scale
    launches = len(cfg.configurations)
    return (n_points * point_gpu_s + launches * engine.start_estimate_s) * cfg.server.tp_size


def _measured_sets(cfg: SweepConfig) -> tuple[str, ...]:
    """The sets a sweep will measure; with context buckets, only the buckets each set fills
    (the sets are loaded and sized for that)."""
    if not cfg.context_lengths:
        return cfg.measured_sets
    loaded = {ps.name: ps for ps in map(prompts.load_prompt_set, cfg.prompt_sets)}
    return tuple(context.bucketed_sets(loaded, cfg.context_lengths))


def dry_run(cfg: SweepConfig, console: Console) -> None:
    """Print the server commands and the plan; launch nothing."""
    engine = make_engine(cfg)
    console.print(f"[bold]specbench sweep plan[/] (engine {cfg.engine}, {cfg.plan} plan, "
                  "nothing launched)")
    sets = _measured_sets(cfg)
    first: dict[str, list[int]] = {}  # the adaptive plan's start: its first round's levels
    if cfg.plan == "adaptive":
        static = [c.name for c in cfg.configurations if not cfg.waits_for_analysis(c)]
        adaptive.first_levels(first, cfg.concurrency, sets, static)
    n_points = 0
    for config in cfg.configurations:
        schedule = _shown_schedule(config, cfg)
        path = adaptive_path(Path("<run>"), config, None) if schedule else None
        console.print(f"{config.name}: {engine.describe(config, path, schedule)}", soft_wrap=True)
        if schedule is not None:
            console.print(
                f"  adaptive config ({_schedule_source(config, cfg, schedule)}): "
                + json.dumps(schedule.to_json()),
                soft_wrap=True,
            )
        refined = adaptive.placed_levels(first, config.name, sets[0]) if sets else []
        levels = levels_for(config, cfg, schedule, refined)
        n = (len(cfg.load.request_rates) or len(levels)) * len(sets) * cfg.load.repeats
        n_points += n
        if not levels:
            console.print("  no level before the adaptive plan places one")
            continue
        grid = (f"request rates {','.join(map(rate_text, cfg.load.request_rates))}/s"
                if cfg.load.request_rates else f"concurrency {','.join(map(str, levels))}")
        console.print(
            f"  {n} points: prompt sets {','.join(sets)} x {grid} x {cfg.load.repeats} repeat(s)"
        )
    about = ""
    if cfg.plan == "adaptive":
        budget = f", until {cfg.budget_gpu_min:g} GPU-min" if cfg.budget_gpu_min else ""
        console.print(
            "  adaptive plan: the middle level above first; then, after each analysis, one "
            "grid level per decision, the middle of its crossing's bracket, on the two servers "
            "it compares (c*: baseline and eagle3; then T: eagle3 and zero-step, from above "
            f"c*'s bracket){budget}; --plan dense measures all {len(cfg.concurrency)} levels"
        )
        n_points = adaptive.estimated_points(cfg.concurrency, len(sets),
                                             [c.name for c in cfg.configurations])
        about = "about "
    if cfg.plan == "auto":
        console.print(f"  auto plan: adaptive if a launch takes under "
                      f"{break_even_launch_s(cfg, engine):.0f} s, else dense; decided from "
                      f"{'--launch-s' if cfg.launch_s else 'the first server launch'} "
                      "(the points below are the dense grid's)")
    minutes = estimate_s(cfg, engine, n_points) / 60
    gpu_minutes = estimate_gpu_s(cfg, engine, n_points) / 60
    console.print(f"{about}{n_points} points in all; estimated {minutes:.1f} min, "
                  f"{gpu_minutes:.1f} GPU-min")
