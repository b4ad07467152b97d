"""Several server configurations at once on one node (`--gpus 0,1,2,3`).

The GPUs are cut into slots of `--tp-size` each. Every configuration that needs no analysis
(baseline, EAGLE-3 at any K, zero-step, SGLang's default adaptive) runs in a worker process of
its own on a free slot: its own server (`CUDA_VISIBLE_DEVICES` = the slot, its own port) and its
own load generator, so one client core does not limit several servers. The configurations that
need an analysis (the dynamic server's threshold, the tuned schedule) run after all of those,
one by one on the first slot, in this process.

One writer: workers write their point files (disjoint paths, `points/<config>/...`) and send
every server and point record to this process, which alone writes the manifest; so the run
directory ends exactly as a sequential run leaves it, plus the placement of each server.
A failing worker stops the others, and the sweep ends as a sequential one would (exit 2 with
the resume command); Ctrl-C and SIGTERM stop every worker's server first.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from rich.console import Console

from specbench.config import SweepConfig
from specbench.configurations import ServerConfiguration
from specbench.engines import make_engine
from specbench.errors import UserError
from specbench.results import PointKey, PointRecord, read_manifest
from specbench.results.manifest import PlacementRecord, ServerRecord
from specbench.run import phases
from specbench.run.planner import Plan
from specbench.run.preflight import preflight
from specbench.run.progress import SweepProgress
from specbench.run.sweep import Sweep, SweepError, SweepInterrupted, signals_raise

_POLL_S = 0.2
_STOP_WAIT_S = 30.0
def now_iso() -> str:
    # Microseconds: the test that no two servers held one GPU compares these intervals.
    return datetime.now(UTC).isoformat()


@contextlib.contextmanager
def visible_gpus(gpu_ids: tuple[int, ...]) -> Iterator[None]:
    """Servers started inside see only `gpu_ids` (the variable is inherited at launch)."""
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpu_ids))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old


class _Lines:
    """A file for a worker's Console: each line goes to the parent, printed above its bar."""

    def __init__(self, out: Any, name: str) -> None:
        self.out, self.name, self.buffer = out, name, ""

    def write(self, text: str) -> int:
        self.buffer += text
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            self.out.put(("line", self.name, line))
        return len(text)

    def flush(self) -> None:
        pass


class WorkerSweep(Sweep):
    """A Sweep whose manifest updates go to the parent (`out`, a queue) instead of the disk."""

    def __init__(self, *args: Any, out: Any) -> None:
        super().__init__(*args)
        self.out = out

    def store_server(self, name: str, record: ServerRecord) -> None:
        self.manifest.servers[name] = record
        self.out.put(("server", name, record.model_dump(mode="json")))

    def set_point(self, key: PointKey, record: PointRecord) -> None:
        self.manifest.points[key.label] = record
        self.out.put(("point", key.label, record.model_dump(mode="json")))


def run_worker(cfg_json: str, run_dir: str, name: str, gpu_ids: tuple[int, ...], port: int,
            out: Any) -> None:
    """One configuration on one slot (a spawned process): measure what is missing of it."""
    cfg = SweepConfig.model_validate_json(cfg_json)
    cfg = cfg.model_copy(update={"server": cfg.server.model_copy(update={"port": port})})
    console = Console(file=_Lines(out, name), width=160, soft_wrap=True,  # type: ignore[arg-type]
                      force_terminal=False, color_system=None)
    worker: WorkerSweep | None = None
    try:
        with visible_gpus(gpu_ids), signals_raise(), open(os.devnull, "w") as devnull:
            engine = make_engine(cfg)
            sets = preflight(cfg, engine)
            worker = WorkerSweep(cfg, engine, sets, Path(run_dir), read_manifest(Path(run_dir)),
                                 console, out=out)
            config = next(c for c in cfg.configurations if c.name == name)
            plan = Plan(cfg, sets, worker.manifest)
            with SweepProgress(Console(file=devnull), total=1) as progress:
                worker.measure(plan.jobs([config]), progress, plan.planned())
        out.put(("done", name, None))
    except (KeyboardInterrupt, SweepInterrupted):
        out.put(("interrupted", name, None))
    except Exception as exc:  # every failure must reach the parent as one line
        out.put(("error", name, str(exc) if isinstance(exc, UserError)
                 else f"{type(exc).__name__}: {exc}"))
    finally:
        if worker is not None:
            worker.stop_server()


def split(plan: Plan, done: set[PointKey]
          ) -> tuple[list[ServerConfiguration], list[ServerConfiguration], int]:
    """The configurations with points left that can start now, those that wait for an
    analysis, and how many points of the first kind are already measured (a resume)."""
    dependent, independent = plan.dependent(), plan.static()
    keys = {c.name: plan.config_keys(c) for c in independent}
    waiting = [c for c in independent if any(k not in done for k in keys[c.name])]
    return waiting, dependent, sum(k in done for ks in keys.values() for k in ks)


class Runner:
    """What every executor shares: the two phases, the placements, and applying the workers'
    messages to the one manifest. Subclasses run the independent phase (`independent`)."""

    def __init__(self, sweep: Sweep, plan: Plan, slots: list[tuple[int, ...]]) -> None:
        self.sweep = sweep
        self.plan = plan
        self.slots = slots

    def run(self, progress: SweepProgress) -> None:
        sweep, plan = self.sweep, self.plan
        # Decided here and saved: the workers read the plan's decisions from the manifest.
        phases.say(sweep, plan.decide(plan.static(), lambda: phases.analyzer(sweep)))
        sweep.manifest.save(sweep.run_dir)
        waiting, dependent, measured = split(plan, set(sweep.rows))
        progress.plan(plan.planned(), len(waiting) + len(dependent))
        progress.advance(measured)
        progress.parallel = max(1, len(self.slots))
        self.independent(waiting, progress)
        sweep.reload()  # the points the workers measured
        progress.parallel = 1
        if dependent:
            slot = self.slots[0] if self.slots else ()
            placement = self.placement(dependent[0].name, slot, sweep.cfg.slot_port(0))
            with visible_gpus(slot) if slot else contextlib.nullcontext():
                try:
                    phases.straddles(sweep, plan, progress)
                    phases.dependent(sweep, plan, progress)
                finally:
                    placement.stopped_at = now_iso()
                    sweep.manifest.save(sweep.run_dir)

    def independent(self, waiting: list[ServerConfiguration], progress: SweepProgress) -> None:
        raise NotImplementedError

    def placement(self, name: str, slot: tuple[int, ...], port: int) -> PlacementRecord:
        record = PlacementRecord(config=name, gpu_ids=list(slot), port=port, started_at=now_iso())
        self.sweep.manifest.placements.append(record)
        self.sweep.manifest.save(self.sweep.run_dir)
        return record

    def apply(self, kind: str, name: str, payload: Any, progress: SweepProgress | None) -> bool:
        """One worker message; True when it says the worker is done. A worker's failure or
        interruption is raised here, as the sequential sweep would raise it."""
        manifest, run_dir = self.sweep.manifest, self.sweep.run_dir
        if kind == "line":
            if progress is not None:
                self.sweep.console.print(f"[{name}] {payload}", markup=False, highlight=False)
        elif kind == "server":
            manifest.servers[name] = ServerRecord.model_validate(payload)
            manifest.save(run_dir)
        elif kind == "point":
            record = PointRecord.model_validate(payload)
            manifest.points[name] = record
            manifest.save(run_dir)
            if record.status == "ok" and progress is not None:
                progress.measured_elsewhere()
        elif kind == "done":
            return True
        elif kind == "interrupted" and progress is not None:
            raise SweepInterrupted("SIGINT", 130)
        elif kind == "error" and progress is not None:
            raise SweepError(str(payload))
        return False


class ParallelRunner(Runner):
    """The independent phase on this node: one spawned worker process per GPU slot."""

    def __init__(self, sweep: Sweep, plan: Plan, slots: list[tuple[int, ...]]) -> None:
        super().__init__(sweep, plan, slots)
        self.context = mp.get_context("spawn")
        self.out = self.context.Queue()
        self.running: dict[str, tuple[BaseProcess, int, PlacementRecord]] = {}

    def independent(self, waiting: list[ServerConfiguration], progress: SweepProgress) -> None:
        try:
            self._dispatch(list(waiting), progress)
        finally:
            self._stop_all()

    def _dispatch(self, waiting: list[ServerConfiguration], progress: SweepProgress) -> None:
        free = list(range(len(self.slots)))
        cfg_json = self.sweep.cfg.model_dump_json()
        while waiting or self.running:
            while waiting and free:
                config, index = waiting.pop(0), free.pop(0)
                self._start(config.name, index, cfg_json)
                progress.launched()
            names = sorted(self.running)
            progress.describe(f"{len(names)} servers: {', '.join(names)}")
            finished = self._handle(progress)
            if finished is not None:
                process, index, placement = self.running.pop(finished)
                process.join(_STOP_WAIT_S)
                placement.stopped_at = now_iso()
                self.sweep.manifest.save(self.sweep.run_dir)
                free.append(index)

    def _start(self, name: str, index: int, cfg_json: str) -> None:
        slot = self.slots[index]
        port = self.sweep.cfg.slot_port(index)
        placement = self.placement(name, slot, port)
        process = self.context.Process(
            target=run_worker, args=(cfg_json, str(self.sweep.run_dir), name, slot, port, self.out),
            name=f"specbench-{name}", daemon=False)
        process.start()
        self.running[name] = (process, index, placement)

    def _next(self, timeout_s: float) -> tuple[str, str, Any] | None:
        try:
            kind, name, payload = self.out.get(timeout=timeout_s)
        except queue.Empty:
            return None
        return str(kind), str(name), payload

    def _handle(self, progress: SweepProgress) -> str | None:
        """Apply the workers' messages; the name of a worker that finished, if one did."""
        deadline = time.monotonic() + _POLL_S
        while time.monotonic() < deadline:
            message = self._next(_POLL_S)
            if message is None:
                break
            if self.apply(*message, progress):
                return message[1]
        for name, (process, _, _) in self.running.items():
            if process.is_alive():
                continue
            # Its last messages may still be in the pipe: read them before calling it dead.
            message = self._next(1.0)
            if message is not None:
                return message[1] if self.apply(*message, progress) else None
            raise SweepError(
                f"the worker measuring {name} died (exit code {process.exitcode}); see its "
                f"server log, then continue with: specbench sweep --resume {self.sweep.run_dir}")
        return None

    def _stop_all(self) -> None:
        """Stop every worker (each stops its own server on SIGTERM), wait for them, and keep
        what they had measured and not yet reported."""
        for process, _, placement in self.running.values():
            if process.is_alive():
                process.terminate()
            placement.stopped_at = placement.stopped_at or now_iso()
        for process, _, _ in self.running.values():
            process.join(_STOP_WAIT_S)
            if process.is_alive():
                process.kill()
        self.running.clear()
        while (message := self._next(0.5)) is not None:
            self.apply(*message, None)
        with contextlib.suppress(OSError):
            self.sweep.manifest.save(self.sweep.run_dir)
