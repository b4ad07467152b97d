"""`specbench sweep`: servers up, points measured, results on disk, the decision at the end.

Order: the static configurations (baseline, EAGLE-3 at each K), then the threshold from their
curves, the static servers the dynamic one is compared with at T-1, T, T+1, then the dynamic
servers with it (at the same levels). Every point is written the moment it is measured; the
manifest records each point's status, so an interrupted or crashed sweep keeps everything
finished and `--resume RUN_DIR` measures only what is missing. The engine (simulated, real
SGLang, attached) is behind `engines.Engine`: this module never asks which one it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from rich.console import Console

from specbench import configurations, metrics, prompts, results
from specbench.config import DEFAULT_FIXED_THRESHOLD, SweepConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.engines import Engine, Server, profiler
from specbench.engines.base import server_log
from specbench.errors import UserError
from specbench.goodput import Slo
from specbench.load import arrivals, procs, protocols, runner
from specbench.results import Manifest, PointKey, PointRecord, ThresholdRecord
from specbench.results.analysis import Analysis
from specbench.results.manifest import ServerRecord
from specbench.run import adaptive
from specbench.run.plan import compared_at_threshold, levels_for, straddled_thresholds
from specbench.run.progress import SweepProgress
from specbench.run.verdicts import (
    check_context,
    failed_requests,
    log_size,
    stalled,
    switches_since,
    went_away,
)


class SweepError(UserError, RuntimeError):
    """The sweep cannot go on; the message says what happened and what to do."""


class SweepInterrupted(BaseException):
    """SIGINT / SIGTERM / SIGHUP during a sweep; carries the exit code to use."""

    def __init__(self, signame: str, exit_code: int, run_dir: Path | None = None) -> None:
        super().__init__(signame)
        self.signame = signame
        self.exit_code = exit_code
        self.run_dir = run_dir


# A SIGTERM/SIGHUP that arrives while a point's event loop runs, kept until the loop is done.
_interrupts: list[SweepInterrupted] = []


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into SweepInterrupted so servers are stopped and points kept.

    Outside an event loop the handler raises at once. Inside one it must not: asyncio logs and
    drops a BaseException raised in a callback, and one raised in a task ends only that task
    (the window timer, say), so the point would wait forever. There the load is cancelled, as
    asyncio.run does for SIGINT, and :func:`run_load` raises the interrupt once the loop is done.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        interrupt = SweepInterrupted(signal.Signals(signum).name, 128 + signum)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise interrupt from None
        _interrupts.append(interrupt)
        loop.call_soon_threadsafe(_cancel_all, loop)

    _interrupts.clear()
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


def run_load(spec: runner.PointSpec, client_procs: int = 1) -> runner.PointResult:
    """One point's load on its own event loop(s); a signal during it is raised after them.
    `client_procs` 0: one process per 64 users, at most half the cores."""
    if client_procs == 0:
        client_procs = procs.auto_procs(spec.concurrency, os.cpu_count() or 1)
    try:
        if spec.request_rate is not None:
            result = arrivals.run_open_point_sync(spec)
        else:
            result = procs.run_point_procs(spec, client_procs)
    except asyncio.CancelledError:
        if _interrupts:
            raise _interrupts.pop() from None
        raise
    if _interrupts:  # the signal came as the point was ending: its result is not kept
        raise _interrupts.pop()
    return result


class Sweep:
    """One sweep's state: the config, the engine, where results go, and the live server."""

    def __init__(
        self,
        cfg: SweepConfig,
        engine: Engine,
        sets: dict[str, prompts.PromptSet],
        run_dir: Path,
        manifest: Manifest,
        console: Console,
    ) -> None:
        self.cfg = cfg
        self.engine = engine
        self.sets = sets
        self.run_dir = run_dir
        self.manifest = manifest
        self.console = console
        self._orders: dict[tuple[str, int], list[prompts.PromptRequest]] = {}
        self.server: Server | None = None  # the one running server, stopped on any exit
        self.name_width = max([8, *(len(name) for name in cfg.modes)])

    def config_keys(self, config: ServerConfiguration) -> list[PointKey]:
        """Every point of a configuration whose schedules are known without an analysis."""
        return [key for schedule, names in self._server_groups(config).items()
                for key in self._keys(config, schedule, names)]

    def run_configurations(self, configs: list[ServerConfiguration],
                           progress: SweepProgress, keep_last: bool = False) -> None:
        """Measure what is missing of `configs`, one server at a time. A server left running
        (`keep_last`, the adaptive plan's rounds) measures on if it is the one needed next."""
        done = results.measured_keys(self.run_dir)
        for index, config in enumerate(configs):
            groups = self._server_groups(config)
            for position, (schedule, names) in enumerate(groups.items()):
                keys = self._keys(config, schedule, names)
                todo = [k for k in keys if k not in done]
                later = self._launches_left(configs[index + 1:], done)
                progress.plan(self._planned(), len(groups) - position + later)
                progress.advance(len(keys) - len(todo))
                if not todo:
                    progress.launched()  # nothing to launch for this group
                    continue
                running = self.server
                if running is None or (running.config, running.schedule) != (config, schedule):
                    self.stop_server()
                    label = "+".join(names) if len(groups) > 1 else None
                    progress.launching(config.name, server_log(self.run_dir, config.name))
                    self._start(config, schedule, names, label)
                progress.launched()
                for key in todo:
                    live = runner.LiveView(time_scale=self.engine.time_scale)
                    progress.measuring(f"{key.mode} {key.prompt_set} {key.shown}", live)
                    self._measure_point(key, live)
                    progress.measured()
        if not keep_last:
            self.stop_server()

    def choose_plan(self, progress: SweepProgress) -> None:
        """`--plan auto` on real SGLang: dense or adaptive from the launch time (--launch-s, or
        the first server's, kept up to measure first), recorded in the manifest."""
        from specbench.run.plan import plan_for_launch

        launch_s, measured = self.cfg.launch_s, False
        if launch_s is None:
            first = next(c for c in self.cfg.configurations
                         if not self.cfg.waits_for_analysis(c))
            schedule, names = next(iter(self._server_groups(first).items()))
            progress.launching(first.name, server_log(self.run_dir, first.name))
            self._start(first, schedule, names, None)  # measures first: run_configurations
            launch_s, measured = self._launches(first.name)[-1], True
        plan, why = plan_for_launch(self.cfg, self.engine, launch_s, measured)
        self.cfg = self.cfg.model_copy(update={"plan": plan})
        self.manifest.config = self.cfg
        self.manifest.save(self.run_dir)
        self.console.print(why, highlight=False)

    def _launches_left(self, configs: list[ServerConfiguration], done: set[PointKey]) -> int:
        """Servers still to start for `configs`: one per schedule with points left; a dynamic
        server whose thresholds are not known yet counts one per prompt set."""
        launches = 0
        for config in configs:
            known = self._known_schedules(config)
            groups: dict[object, list[str]] = {}
            for name in self.sets:
                groups.setdefault(known.get(name, name), []).append(name)
            for group, names in groups.items():
                schedule = group if isinstance(group, Schedule) else None  # a name: unknown
                if any(k not in done for k in self._keys(config, schedule, names)):
                    launches += 1
        return launches

    def _keys(
        self, config: ServerConfiguration, schedule: Schedule | None, names: list[str]
    ) -> list[PointKey]:
        load = self.cfg.load
        if load.request_rates:  # open loop: a point per rate (load/arrivals.py)
            return [PointKey(config.name, name, load.max_concurrency or 0, r, rate)
                    for name in names for rate in load.request_rates
                    for r in range(load.repeats)]
        return [
            PointKey(config.name, name, c, r)
            for name in names
            for c in levels_for(config, self.cfg, schedule, self._refined(config, name),
                                self._straddled(config, name))
            for r in range(self.cfg.load.repeats)
        ]

    def _straddled(self, config: ServerConfiguration, name: str) -> list[int]:
        """The thresholds known now of the dynamic servers of set `name` that `config`, a
        static server they are compared with, is also measured around."""
        if not self.cfg.straddle_rounds:
            return []
        schedules = [self._known_schedules(c).get(name) for c in self.cfg.configurations
                     if c.adaptive == "threshold"]
        return straddled_thresholds(config, schedules)

    def measure_straddles(self, static: list[ServerConfiguration],
                          progress: SweepProgress) -> None:
        """Once each set's threshold is chosen, the static servers a dynamic one is compared
        with measure its T-1, T and T+1 too (the server still up goes first), so that no
        efficiency at the switch rests on curves interpolated between grid levels."""
        if not self.cfg.straddle_rounds or not any(
                c.adaptive == "threshold" for c in self.cfg.configurations):
            return
        chosen = any(c.adaptive == "threshold" and c.needs_analysis
                     for c in self.cfg.configurations)
        if chosen:
            self._choose_thresholds()
        compared = [c for c in static if compared_at_threshold(c)]
        # T chosen from the grid, then again with the points around it (a chord between grid
        # levels misplaces it by a level or two, a wide one by more).
        # The last round chooses T again too, keeping a new T whose neighbours are measured
        # already: the dynamic server then runs at the T the analysis reads off every point.
        for left in reversed(range(self.cfg.straddle_rounds)):
            running = self.server.config.name if self.server else None
            self.run_configurations(sorted(compared, key=lambda c: c.name != running), progress,
                                    keep_last=True)
            if not chosen or not self._threshold_moved(measure_again=bool(left)):
                return

    def _threshold_moved(self, measure_again: bool) -> bool:
        """Choose the auto thresholds again with the points measured around them; True (and
        the new ones kept) where one moved: the chord between grid levels had misplaced it."""
        record = self.manifest.threshold
        if record is None or record.source != "auto" or not configurations.analyzable(
                self.cfg.modes):
            return False
        again = self._thresholds_from_crossovers(list(self.sets))
        if again.per_prompt_set == record.per_prompt_set:
            return False
        if not measure_again and not self._straddles_measured(again):
            # T walked past the points measured: the dynamic server keeps the T they bracket.
            self.console.print("[yellow]note:[/] thresholds would move again with the last "
                               "points, beyond those measured; raise --straddle-rounds to "
                               "follow them", highlight=False)
            return False
        moved = ", ".join(f"{n} {record.per_prompt_set.get(n)} -> {t}"
                          for n, t in again.per_prompt_set.items()
                          if t != record.per_prompt_set.get(n))
        then = "measuring around the new ones" if measure_again else "all measured already"
        self.console.print(f"thresholds moved with the points around them: {moved}; {then}",
                           highlight=False)
        self.manifest.threshold = again
        self.manifest.save(self.run_dir)
        return True

    def _straddles_measured(self, record: ThresholdRecord) -> bool:
        """Whether the static servers compared at threshold have T-1, T and T+1 measured for
        each set's threshold in `record`."""
        done = results.measured_keys(self.run_dir)
        for config in (c for c in self.cfg.configurations if compared_at_threshold(c)):
            for name, threshold in record.per_prompt_set.items():
                levels = levels_for(config, self.cfg, None, self._refined(config, name),
                                    [threshold])
                if any(PointKey(config.name, name, c, r) not in done for c in levels
                       for r in range(self.cfg.load.repeats)):
                    return False
        return True

    def _refined(self, config: ServerConfiguration, name: str) -> list[int]:
        """The adaptive plan's levels for one server and prompt set ([] in a dense run)."""
        if self.cfg.plan != "adaptive":
            return []
        return adaptive.placed_levels(self.manifest.refined, config.name, name)

    def _planned(self) -> int:
        """Points planned now; a dynamic server's straddle levels count once its T is known."""
        total = 0
        for config in self.cfg.configurations:
            known = self._known_schedules(config)
            for name in self.sets:
                levels = levels_for(config, self.cfg, known.get(name),
                                    self._refined(config, name), self._straddled(config, name))
                total += (len(self.cfg.load.request_rates) or len(levels)) * self.cfg.load.repeats
        return total

    def _steps(self, config: ServerConfiguration) -> int:
        return config.num_steps(self.cfg.server.speculative_num_steps)

    def _known_schedules(self, config: ServerConfiguration) -> dict[str, Schedule | None]:
        """Each prompt set's schedule for `config` as far as it is known now (no analysis)."""
        given = config.threshold if config.threshold is not None else self.cfg.threshold
        if config.adaptive == "threshold" and given is not None:
            fixed = Schedule.from_threshold(self._steps(config), given)
            return dict.fromkeys(self.sets, fixed)
        if config.adaptive == "threshold":
            stored = self.manifest.thresholds()
            return {
                n: Schedule.from_threshold(self._steps(config), stored[n])
                for n in self.sets
                if n in stored
            }
        if config.adaptive == "schedule":
            return {n: Schedule.from_slots(slots)
                    for n, slots in self.manifest.tuned.items() if n in self.sets}
        return dict.fromkeys(self.sets)

    def _server_groups(self, config: ServerConfiguration) -> dict[Schedule | None, list[str]]:
        """One server per distinct schedule: the default dynamic server of each prompt set runs
        with that set's own threshold (unless one was given), a tuned one with that set's own
        schedule, the others with one schedule or none."""
        if config.needs_analysis:
            if config.adaptive == "threshold":
                self._choose_thresholds()
            else:
                self._choose_schedules()
        known = self._known_schedules(config)
        groups: dict[Schedule | None, list[str]] = {}
        for name in self.sets:
            groups.setdefault(known[name], []).append(name)
        return groups

    def _start(
        self,
        config: ServerConfiguration,
        schedule: Schedule | None,
        names: list[str] | None,
        label: str | None,
    ) -> Server:
        """Start a configuration's server; record it for `names` (None: a restart)."""
        t0 = time.monotonic()
        self.server = self.engine.start(config, schedule, self.run_dir, label)
        launch = [*self._launches(config.name), time.monotonic() - t0]
        previous = self.manifest.servers.get(config.name)
        if names is None:
            if previous is not None:
                self.store_server(config.name, previous.model_copy(update={"launch_s": launch}))
            return self.server
        check_context(self.server.info, {n: self.sets[n] for n in names})
        record = self.server.record(names, previous).model_copy(update={"launch_s": launch})
        self.store_server(config.name, record)
        return self.server

    def _launches(self, name: str) -> list[float]:
        server = self.manifest.servers.get(name)
        return list(server.launch_s) if server else []

    def store_server(self, name: str, record: ServerRecord) -> None:
        """Record a started server (a parallel worker sends it to the manifest's owner)."""
        self.manifest.servers[name] = record
        self.manifest.save(self.run_dir)

    def stop_server(self, grace_s: float | None = None) -> None:
        server, self.server = self.server, None
        if server is not None:
            with contextlib.suppress(Exception):
                server.stop(grace_s)

    def _choose_thresholds(self) -> dict[str, int]:
        """The default dynamic server's threshold per prompt set, chosen once and kept.

        Given (`--threshold N`): N for every set. Auto: each set's own threshold from its
        measured crossover, so the dynamic check shows whether switching off at that set's
        threshold tracks the better static curve; the combined recommendation for a mixed
        deployment (the lowest over sets) is recorded beside them and reported.
        """
        names = list(self.sets)
        stored = self.manifest.thresholds()
        if all(name in stored for name in names):
            return stored
        cfg = self.cfg
        if cfg.threshold is not None:
            given = cfg.threshold
            record = ThresholdRecord(
                value=given, source="given", per_prompt_set=dict.fromkeys(names, given)
            )
        elif configurations.analyzable(cfg.modes):
            record = self._thresholds_from_crossovers(names)
        else:
            fixed = DEFAULT_FIXED_THRESHOLD
            record = ThresholdRecord(
                value=fixed, source="default", per_prompt_set=dict.fromkeys(names, fixed)
            )
            self.console.print(
                f"[yellow]no eagle3 curve with a baseline or zero-step one to compute a threshold "
                f"from; using {fixed}[/]"
            )
        self.manifest.threshold = record
        self.manifest.save(self.run_dir)
        return dict(record.per_prompt_set)

    def analysis(self) -> Analysis:
        from specbench import analysis

        results.rebuild_summary(self.run_dir)
        return analysis.write_analysis(results.load_run(self.run_dir))

    def _thresholds_from_crossovers(self, names: list[str]) -> ThresholdRecord:
        """Each set's one-server threshold: where EAGLE-3 meets the zero-step curve (what the
        dynamic server switches to). Without a zero-step curve, where it meets the baseline."""
        found = self.analysis()
        per_set: dict[str, int] = {}
        for name in names:
            entry = found["prompt_sets"][name]
            one_server = entry.get("one_server") or {}
            chosen = one_server.get("threshold_batch_size") or entry["threshold_batch_size"]
            # None: an open-loop run with no finite rate to decide at (--request-rates inf).
            per_set[name] = int(chosen) if chosen is not None else DEFAULT_FIXED_THRESHOLD
        recommended = found.get("recommended_threshold")
        shown = ", ".join(f"{n} {t}" for n, t in per_set.items())
        mixed = (
            f"recommended for a mixed deployment: {recommended}"
            if recommended is not None
            else "a mixed-deployment threshold needs a measured mix (--mix)"
        )
        self.console.print(
            f"thresholds from the measured crossovers (batch size): {shown}; {mixed}"
        )
        plain = [n for n in names if not (found["prompt_sets"][n].get("one_server") or {})
                 .get("threshold_batch_size")]
        if plain:  # a real H200 run's dynamic server ran as a slow plain server above it
            self.console.print(
                f"[yellow]note:[/] {', '.join(plain)}: the threshold is the plain server's "
                "crossover (no zero-step curve); above it the dynamic server runs its zero-step "
                "path, slower than a plain server; add zero-step to --modes for the one-server "
                "threshold"
            )
        value = int(recommended) if recommended is not None else None
        return ThresholdRecord(value=value, source="auto", per_prompt_set=per_set)

    def _choose_schedules(self) -> None:
        """The tuned server's schedule per prompt set (the best K per level, as batch-size
        slots), chosen once from the measured static curves and kept in the manifest."""
        if self.cfg.schedule and not self.manifest.tuned:  # the user's, measured as given
            self.manifest.tuned = {name: dict(self.cfg.schedule) for name in self.sets}
            self.manifest.save(self.run_dir)
        if all(name in self.manifest.tuned for name in self.sets):
            return
        found = self.analysis()
        for name in self.sets:
            schedule = (found["prompt_sets"][name].get("schedule") or {}).get("slots")
            if not schedule:
                raise SweepError(
                    f"no tuned schedule for {name}: tuning needs the static EAGLE-3 curves at "
                    "several K and zero-step; run specbench tune (or add eagle3-k<K> and "
                    "zero-step to --modes)"
                )
            slots = {str(k): int(v) for k, v in schedule.items()}
            if not any(slots.values()):
                # All zero: SGLang still needs a K among the candidates (a slot no batch reaches).
                slots = {"0": self._steps(configurations.parse("tuned")), **slots}
            self.manifest.tuned[name] = slots
        shown = "; ".join(f"{n} {slots}" for n, slots in self.manifest.tuned.items())
        self.console.print(f"tuned schedules (batch size: steps): {shown}")
        self.manifest.save(self.run_dir)

    def _requests(self, name: str, repeat: int) -> list[prompts.PromptRequest]:
        """The send order of a set for one repeat: seed + repeat, the same for every
        configuration, so repeats vary the prompts and configurations stay paired."""
        if (name, repeat) not in self._orders:
            ps = self.sets[name]
            if ps.source == "mix":  # a mix is built in its own order (seeded at load)
                order = list(ps.requests)
            else:
                order = prompts.ordered_requests(ps, self.cfg.load.seed + repeat)
            self._orders[(name, repeat)] = order
        return self._orders[(name, repeat)]

    def _point_spec(self, key: PointKey, server: Server) -> runner.PointSpec:
        load = self.cfg.load
        spec = self._closed_spec(key, server)
        if key.request_rate is None:
            return spec
        # Open loop: rates per GPU second become per wall second; the window's requests are
        # followed for up to four windows after it.
        return dataclasses.replace(
            spec, concurrency=key.concurrency, request_rate=key.request_rate * server.time_scale,
            burstiness=load.burstiness, max_concurrency=load.max_concurrency,
            burst_requests=max(self.cfg.concurrency), arrival_seed=load.seed + key.repeat,
            drain_max_s=4 * load.window_s / server.time_scale, window_max_requests=None,
            window_min_requests=None, warmup_min_requests=0)

    def _closed_spec(self, key: PointKey, server: Server) -> runner.PointSpec:
        load = self.cfg.load
        return runner.PointSpec(
            base_url=server.base_url,
            protocol=load.protocol,
            model=server.model_name(self.cfg.server.model_path),
            concurrency=key.concurrency,
            requests=self._requests(key.prompt_set, key.repeat),
            warmup_s=load.warmup_s / server.time_scale,
            warmup_min_requests=math.ceil(load.warmup_requests_per_user * key.concurrency),
            warmup_max_s=max(load.warmup_max_s, load.warmup_s) / server.time_scale,
            window_s=load.window_s / server.time_scale,
            window_max_requests=load.window_max_requests,
            window_min_requests=load.min_window_requests,
            window_max_s=load.window_cap_s() / server.time_scale,
            request_timeout_s=load.request_timeout_s,
            temperature=load.temperature,
            api_key=load.api_key,
            scrape_metrics=True,
            planted_read_delay_us=load.planted_read_delay_us,
            body=protocols.BodyOptions.from_load(load, server.prompt_renderer),
        )

    def _measure_point(self, key: PointKey, live: runner.LiveView | None = None) -> None:
        """Measure one point, restarting a server that dies mid-point (up to the retries)."""
        attempts = 0
        # Messages of failed attempts stay in the manifest after a successful retry, so a point
        # measured on a restarted server says so (and where the crash is logged).
        errors: list[str] = []
        earlier_gpu_s = 0.0  # held by earlier attempts (a restart's launch is a launch)
        while True:
            attempts += 1
            server = self.server
            assert server is not None
            started = time.monotonic()
            # A server can die between points too (in the flush): its crash line lies before
            # the point's own log.
            crash_from = log_size(server.log_path)
            flush = server.flush_cache()
            if not flush.ok:
                self.console.print(
                    f"[yellow]warning:[/] {key.label}: the cache was not flushed ({flush.detail})"
                )
            spec = dataclasses.replace(self._point_spec(key, server), live=live)
            log_from = log_size(server.log_path)
            with profiler.during_point(self.cfg.profile_steps, key, server, self.run_dir, spec,
                                       self.console.print):
                result = run_load(spec, self.cfg.load.client_procs)
            switches = switches_since(server.log_path, log_from)
            held_gpu_s = earlier_gpu_s + self._gpu_s(started, server)
            alive = not result.server_gone and server.alive()
            stall = stalled(result) if alive else None
            if stall is not None:
                message = f"{key.label}: {stall}"
                errors.append(message)
                if attempts <= self.cfg.max_point_retries:
                    # A first-use stall ends by itself: the same server measures again.
                    self.console.print(f"[yellow]warning:[/] {message}; measuring it again")
                    earlier_gpu_s = held_gpu_s
                    continue
                self._set_point(key, PointRecord(status="failed", attempts=attempts,
                                                 error=message, errors=errors,
                                                 gpu_s=held_gpu_s))
                where = f"its log {server.log_path}" if server.log_path else server.base_url
                raise SweepError(
                    f"{message}, on {attempts} attempts; if the server was still warming up, "
                    f"give the warmup longer (--warmup-max-s, now {self.cfg.load.warmup_max_s:g} "
                    f"s), else look at the {key.mode} server ({where}); then continue with: "
                    f"specbench sweep --resume {self.run_dir}"
                )
            said = failed_requests(result) if alive else None
            if said is not None:
                message = f"{key.label}: {said}"
                self._set_point(key, PointRecord(status="failed", attempts=attempts,
                                                 error=message, errors=[*errors, message],
                                                 gpu_s=held_gpu_s))
                where = f"its log {server.log_path}" if server.log_path else server.base_url
                raise SweepError(
                    f"{message}; fix the {key.mode} server ({where}), then continue with: "
                    f"specbench sweep --resume {self.run_dir}"
                )
            if alive:
                record = PointRecord(
                    status="ok",
                    attempts=attempts,
                    errors=errors,
                    cache_flushed=flush.ok,
                    flush_detail=flush.detail,
                    gpu_s=held_gpu_s,
                )
                self._record_point(key, server, result, record, switches)
                return
            restarting = self.engine.can_restart and attempts <= self.cfg.max_point_retries
            message = f"{key.label}: " + went_away(key.mode, server, crash_from, restarting)
            errors.append(message)
            failed = PointRecord(status="failed", attempts=attempts, error=message, errors=errors,
                                 gpu_s=held_gpu_s)
            self._set_point(key, failed)
            self.console.print(f"[red]error:[/] {message}")
            if not restarting:
                raise SweepError(
                    f"{message}; gave up after {attempts} attempt(s). Fix the server, then "
                    f"continue with: specbench sweep --resume {self.run_dir}"
                )
            self.console.print(f"restarting the {key.mode} server (attempt {attempts + 1})")
            earlier_gpu_s = held_gpu_s
            self.stop_server()
            self._start(server.config, server.schedule, None, server.label)

    def _gpu_s(self, since: float, server: Server) -> float:
        """GPU seconds a server has been held since `since`: wall x time scale x its GPUs."""
        return (time.monotonic() - since) * server.time_scale * self.cfg.server.tp_size

    def _record_point(
        self, key: PointKey, server: Server, result: runner.PointResult, record: PointRecord,
        switches: int | None = None,
    ) -> None:
        frame = metrics.requests_frame(result, server.time_scale)
        slo = Slo.from_mapping(self.cfg.load.slo) if self.cfg.load.slo else None
        summary = metrics.summarize_point(
            result,
            server.time_scale,
            max_running_requests=self.cfg.max_running_requests,
            error_budget=self.cfg.load.error_budget,
            slo=slo,
            frame=frame,
        )
        summary["server_switches"] = switches
        try:
            results.write_point(self.run_dir, key, frame, summary)
            self._set_point(key, record)
        except OSError as exc:
            raise SweepError(
                f"cannot write {key.label} into {self.run_dir} ({exc.strerror or exc}); free "
                f"disk space or fix permissions, then continue with: specbench sweep --resume "
                f"{self.run_dir}"
            ) from None
        acc = summary.get("accept_length")
        acc_text = f", accept {acc:.2f}" if isinstance(acc, float) and acc == acc else ""
        flags = summary.get("flags") or ""
        self.console.print(
            f"{key.mode:{self.name_width}s} {key.prompt_set:8s} {key.shown:<9s} "
            f"{summary['output_tok_s']:9.1f} tok/s{acc_text}, {summary['n_requests']} req"
            + (f"  [yellow]{flags}[/]" if flags else "")
        )

    def _set_point(self, key: PointKey, record: PointRecord) -> None:
        """Record a point's outcome (a parallel worker sends it to the manifest's owner)."""
        self.manifest.points[key.label] = record
        self.manifest.save(self.run_dir)


def conclude(run_dir: Path, console: Console) -> None:
    """Analysis, plots and report once every point is in."""
    from specbench import analysis
    from specbench.report import document as report
    from specbench.report import plots
    from specbench.report.why import explained

    run = results.load_run(run_dir)
    if configurations.analyzable(run.modes):
        run.analysis = analysis.write_analysis(run)
    try:
        plots.plot_run(run)
    except Exception as exc:  # a figure failing must not hide the measured numbers
        console.print(f"[yellow]warning:[/] plots failed ({exc})")
    sets = explained(run)  # the logs read once for both
    report.write_report(run, sets=sets)
    report.render_terminal(run, console, sets=sets)
    console.print(f"report: {run_dir / 'report.md'}")
