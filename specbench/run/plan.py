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
from specbench.config_schema import PORT_STRIDE
from specbench.configurations import DECISION_PAIRS, Schedule, ServerConfiguration
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
    straddled: Sequence[int] = (),
) -> list[int]:
    """The sweep's levels (in an adaptive run, the levels it `refined` for this server), plus
    the levels around a threshold (T-1, T, T+1: batch sizes just below, at and just above the
    switch): a threshold server's own, and for a static server the thresholds it is
    `straddled` with (:func:`straddled_thresholds`), so that the switching server's
    efficiency there compares measured points, not a chord between grid levels."""
    levels = set(refined) if cfg.plan == "adaptive" else set(cfg.concurrency)
    thresholds = set(straddled)
    if config.adaptive == "threshold" and schedule is not None and schedule.threshold:
        thresholds.add(schedule.threshold)
    # Not above the servers' running-request limit: there the server caps the batch, not T.
    for threshold in (t for t in thresholds if t > 1):
        levels |= {c for c in (threshold - 1, threshold, threshold + 1)
                   if 1 <= c <= cfg.max_running_requests}
    return sorted(levels)


def compared_at_threshold(config: ServerConfiguration) -> bool:
    """Whether a switching server's efficiency is measured against `config` (the two static
    curves a dynamic server switches between: EAGLE-3 and its zero-step path)."""
    return config.name in DECISION_PAIRS["T"]


def straddled_thresholds(config: ServerConfiguration,
                         schedules: Sequence[Schedule | None]) -> list[int]:
    """The thresholds of the dynamic servers' `schedules` (one per threshold server of a
    prompt set, None where not known yet) at which `config` is measured too."""
    if not compared_at_threshold(config):
        return []
    return sorted({s.threshold for s in schedules if s is not None and s.threshold})


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


# A slow model's answers per user in one window, for the estimate of windows held open for
# --min-window-requests (an 8-s window can hold fewer than two answers at c = 1).
SLOW_ANSWERS_PER_WINDOW = 2.0


def point_estimate_s(cfg: SweepConfig, engine: Engine) -> float:
    """Wall seconds one point takes, before any was measured: warmup, window, a second more
    (an open-loop point also follows its window's requests to their end: a window more).

    A closed-loop window held open until --min-window-requests have finished needs about
    N / (c x answers per user per window) windows at level c, within [window_s, its cap]. The
    answers are a slow model's (SLOW_ANSWERS_PER_WINDOW), so the estimate leans long: with the
    defaults (N = 8, cap 4 x window_s) c = 1 counts the cap, c = 2 two windows, c >= 4 one;
    averaged over the grid's levels, as the estimate is per point. The measured points'
    median replaces it in the ETA once there are some (run/progress.py).
    """
    load = cfg.load
    if load.request_rates:
        return (load.warmup_s + 2 * load.window_s) / engine.time_scale + 1.0
    cap_s = max(load.window_s, load.window_cap_s())
    windows_s = [
        min(cap_s, max(load.window_s, load.window_s * load.min_window_requests
                       / (c * SLOW_ANSWERS_PER_WINDOW)))
        for c in cfg.concurrency
    ]
    return (load.warmup_s + sum(windows_s) / len(windows_s)) / engine.time_scale + 1.0


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


def launches_planned(cfg: SweepConfig) -> int:
    """Servers a run launches: one per configuration, and once more for each static server
    measured again around a threshold that is only known after the static curves (one round:
    a threshold that moves with those points costs another)."""
    again = 0
    if cfg.straddle_rounds and any(cfg.waits_for_analysis(c) and c.adaptive == "threshold"
                                   for c in cfg.configurations):
        again = sum(compared_at_threshold(c) for c in cfg.configurations)
    return len(cfg.configurations) + again


def estimate_s(cfg: SweepConfig, engine: Engine, n_points: int) -> float:
    launches = launches_planned(cfg)
    return n_points * point_estimate_s(cfg, engine) + launches * engine.start_estimate_s


def estimate_gpu_s(cfg: SweepConfig, engine: Engine, n_points: int) -> float:
    """GPU seconds the plan holds servers for, counted as the manifest counts them (points in
    the engine's time, launches in wall time), times each server's GPUs."""
    point_gpu_s = point_estimate_s(cfg, engine) * engine.time_scale
    launches = launches_planned(cfg)
    return (n_points * point_gpu_s + launches * engine.start_estimate_s) * cfg.server.tp_size


def _measured_sets(cfg: SweepConfig) -> tuple[str, ...]:
    """The sets a sweep will measure; with context buckets, only the buckets each set fills
    (the sets are loaded and sized for that)."""
    if not cfg.context_lengths:
        return cfg.measured_sets
    loaded = {ps.name: ps for ps in map(prompts.load_prompt_set, cfg.prompt_sets)}
    return tuple(context.bucketed_sets(loaded, cfg.context_lengths))


def _ids(gpus: Sequence[int]) -> str:
    return ",".join(map(str, gpus))


def _gpus(gpus: Sequence[int]) -> str:
    return f"GPU{'s' if len(gpus) > 1 else ''} {_ids(gpus)}"


def node_plan(cfg: SweepConfig) -> tuple[list[str], dict[str, int]]:
    """Where the servers run, as the dry run prints it, and the port of each configuration
    whose slot is known before the run starts. The runners' rule (run/execute.py,
    run/parallel.py): with several --gpus slots the configurations that need no analysis take
    the free slots in order (slot k listens on SweepConfig.slot_port(k)), the rest of them the
    first slot that frees up; those that wait for an analysis then run one at a time on slot 0,
    after the straddle points of the servers they are compared with. One slot (or none) runs
    every server one after another on --port."""
    slots = cfg.gpu_slots()
    waits = [c.name for c in cfg.configurations if cfg.waits_for_analysis(c)]
    static = [c.name for c in cfg.configurations if c.name not in waits]
    dynamic = any(c.adaptive == "threshold" for c in cfg.configurations)
    straddling = [c.name for c in cfg.configurations
                  if dynamic and c.name in static and compared_at_threshold(c)]
    around = f"{' and '.join(straddling)} at T-1, T, T+1, then " if straddling else ""
    last = f"{around}{', '.join(waits)} (they need the measured curves)" if waits else ""

    def after(where: str) -> str:
        return f"  then one server at a time on {where} (port {cfg.slot_port(0)}): {last}"
    if cfg.executor == "ray":
        ports = {name: cfg.slot_port(i) for i, name in enumerate(static)}
        placed = ", ".join(f"{name} (port {port})" for name, port in ports.items())
        lines = [f"node plan (--executor ray): side by side, each a Ray task of --tp-size "
                 f"{cfg.server.tp_size} GPU(s) where Ray places it: {placed}"]
        if last:
            lines.append(after(f"{_gpus(slots[0])} here" if slots else "this node"))
        return lines, ports | {name: cfg.slot_port(0) for name in waits}
    if not cfg.gpus:
        return [], {}
    tp = cfg.server.tp_size
    unused = cfg.gpus[len(slots) * tp:]
    spare = f" ({_gpus(unused)} unused)" if unused else ""
    if len(slots) <= 1:
        return [f"node plan: --gpus {_ids(cfg.gpus)} at --tp-size {tp} is one slot: the "
                f"servers run one after another on {_gpus(slots[0] if slots else ())}"
                f"{spare}, on port {cfg.slot_port(0)}"], {}
    lines = [f"node plan: --gpus {_ids(cfg.gpus)} in {len(slots)} slots of --tp-size {tp}"
             f"{spare}; one server per slot at a time, each slot on its own port "
             f"(--port + {PORT_STRIDE} per slot)"]
    lines += [f"  slot {i}: {_gpus(slot)}, port {cfg.slot_port(i)}"
              for i, slot in enumerate(slots)]
    first, rest = static[:len(slots)], static[len(slots):]
    ports = {name: cfg.slot_port(i) for i, name in enumerate(first)}
    if first:
        lines.append("  side by side: " + ", ".join(
            f"{name} on slot {i}" for i, name in enumerate(first)))
    if rest:
        order = ", in this order, each" if len(rest) > 1 else ""
        lines.append(f"  then {', '.join(rest)}{order} on the first slot that frees up, with "
                     "that slot's port")
    if last:
        lines.append(after("slot 0"))
    return lines, ports | {name: cfg.slot_port(0) for name in waits}


def _on_port(cfg: SweepConfig, engine: Engine, port: int | None) -> Engine:
    """The engine a configuration's server is launched by on `port` (a --gpus worker's:
    run/parallel.py, run_worker); `engine` where that is --port or not known yet."""
    if port is None or port == cfg.server.port:
        return engine
    return make_engine(cfg.model_copy(
        update={"server": cfg.server.model_copy(update={"port": port})}))


def dry_run(cfg: SweepConfig, console: Console) -> None:
    """Print the server commands and the plan; launch nothing."""
    engine = make_engine(cfg)
    console.print(f"[bold]specbench sweep plan[/] (engine {cfg.engine}, {cfg.plan} plan, "
                  "nothing launched)")
    placement, ports = node_plan(cfg)
    for line in placement:
        console.print(line, soft_wrap=True)
    sets = _measured_sets(cfg)
    first: dict[str, list[int]] = {}  # the adaptive plan's start: its first round's levels
    if cfg.plan == "adaptive":
        static = [c.name for c in cfg.configurations if not cfg.waits_for_analysis(c)]
        adaptive.first_levels(first, cfg.concurrency, sets, static)
    n_points = 0
    for config in cfg.configurations:
        schedule = _shown_schedule(config, cfg)
        path = adaptive_path(Path("<run>"), config, None) if schedule else None
        port = ports.get(config.name)
        command = _on_port(cfg, engine, port).describe(config, path, schedule)
        console.print(f"{config.name}: {command}", soft_wrap=True)
        if port is None and placement:
            either = " or ".join(str(cfg.slot_port(i)) for i in range(len(cfg.gpu_slots())))
            console.print(f"  port: that of the slot that frees up first ({either})")
        if schedule is not None:
            console.print(
                f"  adaptive config ({_schedule_source(config, cfg, schedule)}): "
                + json.dumps(schedule.to_json()),
                soft_wrap=True,
            )
        refined = adaptive.placed_levels(first, config.name, sets[0]) if sets else []
        straddled = straddled_thresholds(
            config, [_shown_schedule(c, cfg) for c in cfg.configurations
                     if c.adaptive == "threshold" and cfg.straddle_rounds])
        levels = levels_for(config, cfg, schedule, refined)
        extra = sorted(set(levels_for(config, cfg, schedule, refined, straddled)) - set(levels))
        if cfg.load.request_rates:
            extra = []
        n = (len(cfg.load.request_rates) or len(levels)) * len(sets) * cfg.load.repeats
        n_points += n + len(extra) * len(sets) * cfg.load.repeats
        if not levels:
            console.print("  no level before the adaptive plan places one")
        if extra:
            when = "" if cfg.threshold or not any(
                cfg.waits_for_analysis(c) for c in cfg.configurations) else (
                " with a stand-in T: measured once T is known")
            console.print(f"  + {len(extra) * len(sets) * cfg.load.repeats} points at the "
                          f"dynamic server's T-1, T, T+1 ({','.join(map(str, extra))}{when})")
        if not levels:
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
