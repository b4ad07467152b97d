"""Run (or continue) a sweep from a config: the run directory, the executor, the end.

One node measures its configurations one server at a time (:class:`~specbench.run.sweep.Sweep`);
several GPU slots (`--gpus`) run independent configurations side by side in worker processes
(:mod:`specbench.run.parallel`), and `--executor ray` spreads them over a Ray cluster
(:mod:`specbench.run.ray_executor`). This module picks one and owns what happens at the end
whatever the outcome: servers stopped, manifest closed, summary rebuilt. The analysis, plots
and report that follow are the command's (`specbench sweep`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from rich.console import Console

from specbench import prompts, results
from specbench.config import SweepConfig
from specbench.engines import make_engine
from specbench.prompts import context
from specbench.results.manifest import RunStatus, gpu_time
from specbench.run import phases, rundir
from specbench.run.parallel import ParallelRunner, visible_gpus
from specbench.run.plan import point_estimate_s
from specbench.run.planner import Plan
from specbench.run.preflight import preflight
from specbench.run.progress import SweepProgress
from specbench.run.ray_executor import RayRunner
from specbench.run.sweep import Sweep, SweepInterrupted, signals_raise


def skipped_buckets(cfg: SweepConfig, sets: dict[str, prompts.PromptSet]) -> list[str]:
    """One line per (set, bucket) of --context-lengths that is not measured."""
    if not cfg.context_lengths:  # names differ only by a path's spelling then, not by bucket
        return []
    return [f"{name} is not measured: the set has fewer than {context.MIN_REQUESTS} requests "
            "in that context bucket" for name in cfg.measured_sets if name not in sets]


def run_sweep(
    cfg: SweepConfig, *, console: Console, command: list[str], resume: Path | None = None
) -> Path:
    """Run (or continue) a sweep; return the run directory, its summary rebuilt."""
    engine = make_engine(cfg)
    sets = preflight(cfg, engine)
    if resume is not None:
        run_dir = resume
        manifest = rundir.reopen(run_dir, sets)
    else:
        run_dir = rundir.new_run_dir(cfg)
        manifest = rundir.create_manifest(run_dir, cfg, sets, command, engine)
    console.print(f"run directory: {run_dir}")
    for line in skipped_buckets(cfg, sets):
        console.print(f"[yellow]note:[/] {line}", highlight=False)
    sweep = Sweep(cfg, engine, sets, run_dir, manifest, console)
    plan = Plan(cfg, sets, manifest)
    status: RunStatus = "failed"
    try:
        with signals_raise():
            execute(sweep, plan)
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise SweepInterrupted("SIGINT", 130, run_dir) from None
    except SweepInterrupted as exc:
        status = "interrupted"
        exc.run_dir = run_dir
        raise
    finally:
        sweep.stop_server(grace_s=min(cfg.server.stop_grace_s, 8.0))
        # On a full disk these writes fail too; the point files already written stay whole.
        with contextlib.suppress(OSError):
            manifest.finish(run_dir, status)
        with contextlib.suppress(Exception):
            results.rebuild_summary(run_dir)
    return run_dir


def execute(sweep: Sweep, plan: Plan) -> None:
    """Measure what is missing, on this node or over the configured GPU slots or Ray."""
    cfg = plan.cfg
    progress = SweepProgress(sweep.console, total=plan.planned(),
                             point_estimate_s=point_estimate_s(cfg, sweep.engine),
                             launch_estimate_s=sweep.engine.start_estimate_s)
    progress.gpu_spent_s = lambda: sum(t.total_gpu_s for t in gpu_time(sweep.manifest).values())
    slots = cfg.gpu_slots()
    # One slot (--gpus at a TP size that fills them): its servers see only its GPUs, as a
    # side-by-side slot's do.
    pinned = visible_gpus(slots[0]) if len(slots) == 1 and cfg.executor != "ray" else (
        contextlib.nullcontext())
    with progress, pinned:
        if cfg.plan == "auto":  # real SGLang: the launch time decides (run/plan.py)
            phases.choose_plan(sweep, plan, progress)
        if cfg.executor == "ray":
            RayRunner(sweep, plan, slots).run(progress)
        elif len(slots) > 1:
            ParallelRunner(sweep, plan, slots).run(progress)
        else:
            phases.static(sweep, plan, progress)
            phases.straddles(sweep, plan, progress)
            phases.dependent(sweep, plan, progress)
