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

from specbench import results
from specbench.config import SweepConfig
from specbench.configurations import ServerConfiguration
from specbench.engines import make_engine
from specbench.errors import UserError
from specbench.progress import SweepProgress
from specbench.results import PointKey, PointRecord, read_manifest
from specbench.results.manifest import PlacementRecord, ServerRecord
from specbench.sweep import Sweep, SweepError, SweepInterrupted, preflight, signals_raise

_POLL_S = 0.2
_STOP_WAIT_S = 30.0
# Each slot's server gets its own port: the configured one plus this times the slot index.
PORT_STRIDE = 10


def _now() -> str:
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
    """A Sweep whose manifest updates go to the parent instead of the disk."""

    out: Any = None

    def store_server(self, name: str, record: ServerRecord) -> None:
        self.manifest.servers[name] = record
        self.out.put(("server", name, record.model_dump(mode="json")))

    def _set_point(self, key: PointKey, record: PointRecord) -> None:
        self.manifest.points[key.label] = record
        self.out.put(("point", key.label, record.model_dump(mode="json")))


def _worker(cfg_json: str, run_dir: str, name: str, gpu_ids: tuple[int, ...], port: int,
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
                                 console)
            worker.out = out
            config = next(c for c in cfg.configurations if c.name == name)
            with SweepProgress(Console(file=devnull), total=1) as progress:
                worker.run_configurations([config], progress)
        out.put(("done", name, None))
    except (KeyboardInterrupt, SweepInterrupted):
        out.put(("interrupted", name, None))
    except Exception as exc:  # every failure must reach the parent as one line
        out.put(("error", name, str(exc) if isinstance(exc, UserError)
                 else f"{type(exc).__name__}: {exc}"))
    finally:
        if worker is not None:
            worker.stop_server()


class ParallelRunner:
    """Runs a sweep's independent configurations side by side, then the dependent ones."""

    def __init__(self, sweep: Sweep, slots: list[tuple[int, ...]]) -> None:
        self.sweep = sweep
        self.slots = slots
        self.context = mp.get_context("spawn")
        self.out = self.context.Queue()
        self.running: dict[str, tuple[BaseProcess, int, PlacementRecord]] = {}

    def run(self, progress: SweepProgress) -> None:
        sweep = self.sweep
        configs: list[ServerConfiguration] = sweep.cfg.configurations
        dependent = [c for c in configs if sweep.cfg.waits_for_analysis(c)]
        independent = [c for c in configs if c not in dependent]
        done = results.measured_keys(sweep.run_dir)
        keys = {c.name: sweep.config_keys(c) for c in independent}
        waiting = [c for c in independent if any(k not in done for k in keys[c.name])]
        progress.plan(sweep._planned(), len(waiting) + len(dependent))
        progress.advance(sum(k in done for ks in keys.values() for k in ks))
        progress.parallel = len(self.slots)
        try:
            self._dispatch(waiting, progress)
        finally:
            self._stop_all()
        progress.parallel = 1
        if dependent:
            slot = self.slots[0]
            placement = self._placement(dependent[0].name, slot, sweep.cfg.server.port)
            with visible_gpus(slot):
                try:
                    sweep.run_configurations(dependent, progress)
                finally:
                    placement.stopped_at = _now()
                    sweep.manifest.save(sweep.run_dir)

    # -- the independent phase ----------------------------------------------------------------
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
                placement.stopped_at = _now()
                self.sweep.manifest.save(self.sweep.run_dir)
                free.append(index)

    def _start(self, name: str, index: int, cfg_json: str) -> None:
        slot = self.slots[index]
        port = self.sweep.cfg.server.port + PORT_STRIDE * index
        placement = self._placement(name, slot, port)
        process = self.context.Process(
            target=_worker, args=(cfg_json, str(self.sweep.run_dir), name, slot, port, self.out),
            name=f"specbench-{name}", daemon=False)
        process.start()
        self.running[name] = (process, index, placement)

    def _placement(self, name: str, slot: tuple[int, ...], port: int) -> PlacementRecord:
        record = PlacementRecord(config=name, gpu_ids=list(slot), port=port,
                                 started_at=_now())
        self.sweep.manifest.placements.append(record)
        self.sweep.manifest.save(self.sweep.run_dir)
        return record

    def _handle(self, progress: SweepProgress) -> str | None:
        """Apply the workers' messages; the name of a worker that finished, if one did."""
        deadline = time.monotonic() + _POLL_S
        while time.monotonic() < deadline:
            try:
                kind, name, payload = self.out.get(timeout=_POLL_S)
            except queue.Empty:
                break
            manifest, run_dir = self.sweep.manifest, self.sweep.run_dir
            if kind == "line":
                self.sweep.console.print(f"[{name}] {payload}", markup=False, highlight=False)
            elif kind == "server":
                manifest.servers[name] = ServerRecord.model_validate(payload)
                manifest.save(run_dir)
            elif kind == "point":
                record = PointRecord.model_validate(payload)
                manifest.points[name] = record
                manifest.save(run_dir)
                if record.status == "ok":
                    progress.measured_elsewhere()
            elif kind == "done":
                return str(name)
            elif kind == "interrupted":
                raise SweepInterrupted("SIGINT", 130)
            elif kind == "error":
                raise SweepError(str(payload))
        for name, (process, _, _) in self.running.items():
            if not process.is_alive():  # died without a word (killed)
                raise SweepError(
                    f"the worker measuring {name} died (exit code {process.exitcode}); see "
                    f"its server log, then continue with: specbench sweep --resume "
                    f"{self.sweep.run_dir}")
        return None

    def _drain(self) -> None:
        """Keep what stopped workers had measured and not yet reported."""
        while True:
            try:
                kind, name, payload = self.out.get(timeout=0.5)
            except queue.Empty:
                return
            if kind == "point":
                self.sweep.manifest.points[name] = PointRecord.model_validate(payload)
            elif kind == "server":
                self.sweep.manifest.servers[name] = ServerRecord.model_validate(payload)

    def _stop_all(self) -> None:
        """Stop every worker (each stops its own server on SIGTERM) and wait for them."""
        for process, _, placement in self.running.values():
            if process.is_alive():
                process.terminate()
            placement.stopped_at = placement.stopped_at or _now()
        for process, _, _ in self.running.values():
            process.join(_STOP_WAIT_S)
            if process.is_alive():
                process.kill()
        self.running.clear()
        self._drain()
        with contextlib.suppress(OSError):
            self.sweep.manifest.save(self.sweep.run_dir)
