"""A sweep, top-down: the plan says which points, the sweep measures them, the analysis of
what is in decides the next ones.

1. the static servers (baseline, EAGLE-3 at each K, zero-step) at the plan's levels; in the
   adaptive plan, its rounds of bisection after the first level;
2. each set's threshold from their curves, and the static servers a dynamic one is compared
   with at T-1, T, T+1 (again, as often as `--straddle-rounds` allows, while T moves);
3. the dynamic and tuned servers at their chosen threshold or schedule.

On several GPU slots (:mod:`specbench.run.parallel`) the workers run step 1 of a dense plan
side by side; steps 2 and 3 then run here, on one slot.
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench import analysis
from specbench.configurations import ServerConfiguration
from specbench.engines.base import server_log
from specbench.results.analysis import Analysis
from specbench.results.manifest import gpu_time
from specbench.run import adaptive
from specbench.run.plan import plan_for_launch
from specbench.run.planner import Plan
from specbench.run.progress import SweepProgress
from specbench.run.sweep import Sweep


def analyzer(sweep: Sweep) -> Analysis:
    """The analysis of the points measured so far (nothing is written)."""
    return analysis.analyze(sweep.run())


def say(sweep: Sweep, lines: Sequence[str]) -> None:
    for line in lines:
        sweep.console.print(line, highlight=False)


def measure(sweep: Sweep, plan: Plan, configs: Sequence[ServerConfiguration],
            progress: SweepProgress, keep_last: bool = False) -> None:
    """The plan's points of `configs`, measured, once their thresholds or schedules are
    decided; the manifest keeps the plan's decisions."""
    say(sweep, plan.decide(configs, lambda: analyzer(sweep)))
    sweep.manifest.save(sweep.run_dir)
    sweep.measure(plan.jobs(configs), progress, plan.planned(), keep_last=keep_last)


def choose_plan(sweep: Sweep, plan: Plan, progress: SweepProgress) -> None:
    """`--plan auto` on real SGLang: dense or adaptive from the launch time (--launch-s, or
    the first server's, kept up to measure first), recorded in the manifest."""
    cfg = plan.cfg
    launch_s, measured = cfg.launch_s, False
    if launch_s is None:
        configs = plan.static()[:1]
        say(sweep, plan.decide(configs, lambda: analyzer(sweep)))
        first = plan.jobs(configs)[0]
        progress.launching(first.config.name, server_log(sweep.run_dir, first.config.name))
        sweep.start(first)  # measures first: the next measure() finds it running
        launch_s, measured = sweep.launches(first.config.name)[-1], True
    chosen, why = plan_for_launch(cfg, sweep.engine, launch_s, measured)
    plan.cfg = sweep.cfg = sweep.manifest.config = cfg.model_copy(update={"plan": chosen})
    sweep.manifest.save(sweep.run_dir)
    sweep.console.print(why, highlight=False)


def static(sweep: Sweep, plan: Plan, progress: SweepProgress) -> None:
    """Step 1 on this node: the static servers, and the adaptive plan's rounds."""
    configs = plan.static()
    if plan.cfg.plan == "adaptive":
        plan.start_adaptive(configs)
    measure(sweep, plan, configs, progress, keep_last=True)
    if plan.cfg.plan == "adaptive":
        refine(sweep, plan, configs, progress)


def refine(sweep: Sweep, plan: Plan, configs: Sequence[ServerConfiguration],
           progress: SweepProgress) -> None:
    """The adaptive plan's rounds after the start level (run/adaptive.py): each round places
    one level per decision not yet bracketed and measures it on that decision's two servers."""
    budget_min = plan.cfg.budget_gpu_min
    for _ in range(adaptive.MAX_ROUNDS):
        spent_min = sum(t.total_gpu_s for t in gpu_time(sweep.manifest).values()) / 60
        if budget_min is not None and spent_min >= budget_min:
            sweep.console.print(f"adaptive plan: {spent_min:.1f} GPU-min spent, the budget is "
                                f"{budget_min:g}; no more levels placed")
            return
        placed = plan.place_next(analyzer(sweep), configs)
        if not placed:
            return
        sweep.console.print("adaptive plan: next levels " + "; ".join(placed))
        measure(sweep, plan, _running_first(sweep, configs), progress, keep_last=True)


def straddles(sweep: Sweep, plan: Plan, progress: SweepProgress) -> None:
    """Step 2: once each set's threshold is chosen, the static servers a dynamic one is
    compared with measure its T-1, T and T+1 too (the server still up goes first), so that no
    efficiency at the switch rests on curves interpolated between grid levels."""
    if not plan.straddling():
        return
    chosen = plan.chooses_thresholds()
    if chosen:
        say(sweep, plan.choose_thresholds(lambda: analyzer(sweep)))
    compared = plan.compared_at_threshold(plan.static())
    # T chosen from the grid, then again with the points around it (a chord between grid
    # levels misplaces it by a level or two, a wide one by more). The last round chooses T
    # again too, keeping a new T whose neighbours are measured already: the dynamic server
    # then runs at the T the analysis reads off every point.
    for left in reversed(range(plan.cfg.straddle_rounds)):
        measure(sweep, plan, _running_first(sweep, compared), progress, keep_last=True)
        if not chosen:
            return
        moved, said = plan.threshold_moved(lambda: analyzer(sweep), bool(left), set(sweep.rows))
        say(sweep, said)
        if not moved:
            return


def dependent(sweep: Sweep, plan: Plan, progress: SweepProgress) -> None:
    """Step 3: the dynamic and tuned servers, at the threshold or schedule chosen for them."""
    configs = plan.dependent()
    if configs:
        measure(sweep, plan, configs, progress)


def _running_first(sweep: Sweep, configs: Sequence[ServerConfiguration]
                   ) -> list[ServerConfiguration]:
    """`configs` with the server still up first: one launch fewer."""
    running = sweep.server.config.name if sweep.server else None
    return sorted(configs, key=lambda config: config.name != running)
