"""Configurations across the nodes of a Ray cluster (`--executor ray`; the `ray` extra).

Each independent configuration is one Ray task that asks for `--tp-size` GPUs; Ray picks the
node and sets `CUDA_VISIBLE_DEVICES`, and the task runs the same worker as a local parallel
sweep (`parallel.run_worker`: its own server and load generator) with the run directory on
storage every node sees. The task returns its server and point records; the driver alone
writes the manifest, so the run directory ends as a sequential run leaves it, plus where each
configuration ran. The configurations that need an analysis run afterwards in the driver.

`--ray-address` joins an existing cluster (`auto` or `ray://host:10001`); without it a local
cluster is started with the `--gpus` ids as its GPUs (logical ones on the simulator).
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from specbench.configurations import ServerConfiguration
from specbench.errors import ConfigError
from specbench.results.manifest import PlacementRecord
from specbench.run.parallel import Runner, now_iso, run_worker
from specbench.run.planner import Plan
from specbench.run.progress import SweepProgress
from specbench.run.sweep import Sweep, SweepError

_WAIT_S = 0.5
_STOP_WAIT_S = 60.0


class _Collect:
    """A worker's messages, kept to be returned with the task's result."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, Any]] = []

    def put(self, item: tuple[str, str, Any]) -> None:
        self.items.append(item)


def _task(cfg_json: str, run_dir: str, name: str, port: int) -> dict[str, Any]:
    """One configuration, on whichever node and GPUs Ray gave this task."""
    import ray

    gpu_ids = tuple(int(g) for g in ray.get_gpu_ids())
    out = _Collect()
    started_at = now_iso()
    run_worker(cfg_json, run_dir, name, gpu_ids, port, out)
    return {"gpu_ids": list(gpu_ids), "node": socket.gethostname(), "started_at": started_at,
            "stopped_at": now_iso(), "messages": out.items}


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "--executor ray needs Ray: pip install 'specbench[ray]' (or run without "
            "--executor ray)"
        ) from None
    return ray


class RayRunner(Runner):
    def __init__(self, sweep: Sweep, plan: Plan, slots: list[tuple[int, ...]]) -> None:
        super().__init__(sweep, plan, slots)
        self.ray = _import_ray()

    def _connect(self) -> None:
        cfg = self.sweep.cfg
        try:
            if cfg.ray_address:
                self.ray.init(address=cfg.ray_address, log_to_driver=False)
            else:
                self.ray.init(num_gpus=len(cfg.gpus), include_dashboard=False,
                              log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = cfg.ray_address or "a local cluster"
            raise ConfigError(f"cannot start or join Ray at {where} ({exc}); check "
                              "--ray-address, or run without --executor ray") from None
        gpus = self.ray.cluster_resources().get("GPU", 0)
        if gpus < cfg.server.tp_size:
            raise ConfigError(
                f"the Ray cluster has {gpus:g} GPUs and one server needs --tp-size "
                f"{cfg.server.tp_size}; use a cluster with GPUs, or --gpus ids for a local one"
            )

    def independent(self, waiting: list[ServerConfiguration], progress: SweepProgress) -> None:
        if not waiting:
            return
        self._connect()
        sweep = self.sweep
        remote = self.ray.remote(num_gpus=sweep.cfg.server.tp_size, max_retries=0)(_task)
        cfg_json, run_dir = sweep.cfg.model_dump_json(), str(sweep.run_dir)
        pending: dict[Any, tuple[str, PlacementRecord]] = {}
        for index, config in enumerate(waiting):
            port = sweep.cfg.slot_port(index)
            placement = self.placement(config.name, (), port)  # GPUs known when it returns
            pending[remote.remote(cfg_json, run_dir, config.name, port)] = (config.name,
                                                                           placement)
        progress.describe(f"{len(pending)} configurations on Ray")
        try:
            while pending:
                ready, _ = self.ray.wait(list(pending), num_returns=1, timeout=_WAIT_S)
                for ref in ready:
                    name, placement = pending.pop(ref)
                    self._finish(ref, name, placement, progress)
                    progress.launched()
        finally:
            self._stop(pending)
            self.ray.shutdown()

    def _finish(self, ref: Any, name: str, placement: PlacementRecord,
                progress: SweepProgress) -> None:
        try:
            result = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            raise SweepError(
                f"the Ray task measuring {name} failed ({type(exc).__name__}); see the "
                f"cluster's logs, then continue with: specbench sweep --resume "
                f"{self.sweep.run_dir}") from None
        placement.gpu_ids = result["gpu_ids"]
        placement.node = result["node"]
        placement.started_at, placement.stopped_at = result["started_at"], result["stopped_at"]
        for kind, what, payload in result["messages"]:
            self.apply(kind, what, payload, progress)

    def _stop(self, pending: dict[Any, tuple[str, PlacementRecord]]) -> None:
        """Cancel what still runs (KeyboardInterrupt in the task: it stops its server) and
        keep whatever those tasks had measured."""
        for ref in pending:
            self.ray.cancel(ref, force=False)
        for ref, (_, placement) in pending.items():
            with contextlib.suppress(Exception):
                result = self.ray.get(ref, timeout=_STOP_WAIT_S)
                for kind, what, payload in result["messages"]:
                    self.apply(kind, what, payload, None)
            placement.stopped_at = placement.stopped_at or now_iso()
        with contextlib.suppress(OSError):
            self.sweep.manifest.save(self.sweep.run_dir)
