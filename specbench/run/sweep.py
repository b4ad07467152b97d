"""A sweep's execution: servers up, the points the plan hands it measured, results on disk.

Which points, and in what order, is the plan's (:mod:`specbench.run.planner`), fed by
:mod:`specbench.run.phases`; this module starts servers, measures and records. Every point is
written the moment it is measured and kept in memory for the plan's next decision; the
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
from typing import Any

from rich.console import Console

from specbench import metrics, prompts, results
from specbench.config import SweepConfig
from specbench.engines import Engine, Server, profiler
from specbench.engines.base import server_log
from specbench.errors import UserError
from specbench.goodput import Slo
from specbench.load import arrivals, procs, protocols, runner
from specbench.results import Manifest, PointKey, PointRecord, Run
from specbench.results.manifest import ServerRecord
from specbench.results.points import point_files, point_path, read_point_summary, summary_frame
from specbench.run.job import Job
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
        self.rows = _stored_rows(run_dir)  # each measured point's summary row, kept as measured
        self.name_width = max([8, *(len(name) for name in cfg.modes)])

    def measure(self, jobs: list[Job], progress: SweepProgress, planned_points: int,
                keep_last: bool = False) -> None:
        """Measure what is missing of `jobs`, one server at a time. A server left running
        (`keep_last`, the adaptive plan's rounds) measures on if it is the one needed next."""
        done = set(self.rows)
        for index, job in enumerate(jobs):
            todo = [k for k in job.keys if k not in done]
            later = sum(1 for j in jobs[index + 1:] if any(k not in done for k in j.keys))
            progress.plan(planned_points, 1 + later)
            progress.advance(len(job.keys) - len(todo))
            if not todo:
                progress.launched()  # nothing to launch for this job
                continue
            running = self.server
            if running is None or (running.config, running.schedule) != (job.config,
                                                                          job.schedule):
                self.stop_server()
                progress.launching(job.config.name, server_log(self.run_dir, job.config.name))
                self.start(job)
            progress.launched()
            for key in todo:
                live = runner.LiveView(time_scale=self.engine.time_scale)
                progress.measuring(f"{key.mode} {key.prompt_set} {key.shown}", live)
                self._measure_point(key, live)
                progress.measured()
        if not keep_last:
            self.stop_server()

    def run(self) -> Run:
        """The run as measured so far, from memory (the analysis a decision reads)."""
        order = sorted(self.rows, key=lambda k: str(point_path(self.run_dir, k)))
        summary = summary_frame([self.rows[k] for k in order], self.run_dir / "points")
        return Run(path=self.run_dir, manifest=self.manifest, summary=summary)

    def reload(self) -> None:
        """Read the points other processes measured into this run (after parallel workers)."""
        self.rows = _stored_rows(self.run_dir)

    def start(self, job: Job, restart: bool = False) -> Server:
        """Start a job's server; record it for the job's prompt sets (unless a restart)."""
        config, schedule, label = job.config, job.schedule, job.label
        names = None if restart else job.prompt_sets
        t0 = time.monotonic()
        self.server = self.engine.start(config, schedule, self.run_dir, label)
        launch = [*self.launches(config.name), time.monotonic() - t0]
        previous = self.manifest.servers.get(config.name)
        if names is None:
            if previous is not None:
                self.store_server(config.name, previous.model_copy(update={"launch_s": launch}))
            return self.server
        check_context(self.server.info, {n: self.sets[n] for n in names})
        record = self.server.record(names, previous).model_copy(update={"launch_s": launch})
        self.store_server(config.name, record)
        return self.server

    def launches(self, name: str) -> list[float]:
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
                self.set_point(key, PointRecord(status="failed", attempts=attempts,
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
                self.set_point(key, PointRecord(status="failed", attempts=attempts,
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
            self.set_point(key, failed)
            self.console.print(f"[red]error:[/] {message}")
            if not restarting:
                raise SweepError(
                    f"{message}; gave up after {attempts} attempt(s). Fix the server, then "
                    f"continue with: specbench sweep --resume {self.run_dir}"
                )
            self.console.print(f"restarting the {key.mode} server (attempt {attempts + 1})")
            earlier_gpu_s = held_gpu_s
            self.stop_server()
            self.start(Job(server.config, server.schedule, [], [], server.label), restart=True)

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
            path = results.write_point(self.run_dir, key, frame, summary)
            self.rows[key] = read_point_summary(path)
            self.set_point(key, record)
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

    def set_point(self, key: PointKey, record: PointRecord) -> None:
        """Record a point's outcome (a parallel worker sends it to the manifest's owner)."""
        self.manifest.points[key.label] = record
        self.manifest.save(self.run_dir)



def _stored_rows(run_dir: Path) -> dict[PointKey, dict[str, Any]]:
    """Each point file's key and summary row."""
    rows = (read_point_summary(p) for p in point_files(run_dir))
    return {PointKey.of_row(row): row for row in rows}
