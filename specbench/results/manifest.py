"""The typed manifest: what a run is, how it was made, and where every point stands.

`manifest.json` is the run's self-description (the pyperf habit): the command, the whole
validated config, the machine fingerprint, the engine, the prompt sets' hashes, each server
configuration's resolved command and /server_info, the thresholds chosen and the status of every
point. It is validated on load like the config (unknown keys refused), so readers get attributes
with one set of defaults instead of digging into a dict. The schema is versioned; a reader
refuses another version instead of guessing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specbench.config import SweepConfig
from specbench.errors import UserError
from specbench.redaction import redact
from specbench.results.store import utc_now, write_json

# 2: typed manifest (servers per configuration, fingerprint); 1 had modes/host/gpu dicts.
SCHEMA_VERSION = 2
MANIFEST_FILE = "manifest.json"

RunStatus = Literal["running", "complete", "interrupted", "failed"]


class RunDirError(UserError, ValueError):
    """A path that is not a usable run directory; the message says why and what to do."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromptSetRecord(_Record):
    path: str
    sha256: str
    n_requests: int


class EngineRecord(_Record):
    kind: str
    version: str | None = None


class PerSetServer(_Record):
    threshold: int | None = None
    argv: list[str] = Field(default_factory=list)


class ServerRecord(_Record):
    """One configuration's server as it was last started (launched or attached)."""

    kind: str
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    url: str
    log: str | None = None
    threshold: int | None = None
    slots: dict[str, int] | None = None  # a dynamic server's steps per batch-size slot
    server_info: dict[str, Any] = Field(default_factory=dict)
    time_scale: float = 1.0
    per_prompt_set: dict[str, PerSetServer] = Field(default_factory=dict)
    # How the text-in protocols rendered prompts ("specbench" or the model's chat template);
    # None on openai-chat, where the server applies its own template.
    prompt_renderer: str | None = None
    # Wall seconds of each launch of this configuration's server, from the command to ready
    # and verified, restarts and resumed runs included (the simulator's are its own start-up).
    launch_s: list[float] = Field(default_factory=list)


class ThresholdRecord(_Record):
    """The dynamic server's batch-size threshold: one per prompt set, and the recommendation."""

    value: int | None  # the mixed-deployment threshold (None: per-set thresholds only)
    source: Literal["given", "auto", "default"]
    per_prompt_set: dict[str, int] = Field(default_factory=dict)


class PointRecord(_Record):
    status: Literal["ok", "failed"]
    attempts: int
    errors: list[str] = Field(default_factory=list)
    error: str | None = None
    # Whether /flush_cache emptied the cache before the point, and what the server said.
    cache_flushed: bool | None = None
    flush_detail: str | None = None
    # GPU seconds the point held its server, every attempt from the cache flush to the last
    # scrape: wall seconds x the time scale (the simulator's) x the server's GPUs.
    gpu_s: float | None = None


class PlacementRecord(_Record):
    """Where one configuration's server ran in a parallel sweep (`--gpus`), and when."""

    config: str
    gpu_ids: list[int]
    port: int
    started_at: str
    stopped_at: str | None = None
    node: str | None = None  # the host, when Ray placed it (--executor ray)


class Manifest(_Record):
    schema_version: Literal[2] = 2
    specbench_version: str
    command: list[str]
    config: SweepConfig
    seed: int
    fingerprint: dict[str, Any]
    engine: EngineRecord
    time_scale: float
    prompt_sets: dict[str, PromptSetRecord]
    servers: dict[str, ServerRecord] = Field(default_factory=dict)
    threshold: ThresholdRecord | None = None
    # The tuned server's steps per batch-size slot, per prompt set (`specbench tune`).
    tuned: dict[str, dict[str, int]] = Field(default_factory=dict)
    # Levels the adaptive plan placed (--plan adaptive), per "<configuration>/<prompt set>".
    refined: dict[str, list[int]] = Field(default_factory=dict)
    started_at: str
    ended_at: str | None = None
    status: RunStatus = "running"
    resumed_at: list[str] = Field(default_factory=list)
    points: dict[str, PointRecord] = Field(default_factory=dict)
    placements: list[PlacementRecord] = Field(default_factory=list)  # --gpus runs only
    reference_of: str | None = None  # set on a stored CI reference

    def save(self, run_dir: Path) -> None:
        data = self.model_dump(mode="json")
        # A key passed through --server-arg or --sim-arg is recorded redacted too.
        for section in ("server", "sim"):
            extra = data["config"][section]["extra_args"]
            data["config"][section]["extra_args"] = redact(extra)
        write_json(run_dir / MANIFEST_FILE, data)

    def finish(self, run_dir: Path, status: RunStatus) -> None:
        self.status = status
        self.ended_at = utc_now()
        self.save(run_dir)

    def thresholds(self) -> dict[str, int]:
        """The stored per-prompt-set thresholds (empty before they are chosen)."""
        return dict(self.threshold.per_prompt_set) if self.threshold else {}


def read_manifest(run_dir: Path) -> Manifest:
    """Load and validate `run_dir/manifest.json`; RunDirError (one line) when it is unusable."""
    path = run_dir / MANIFEST_FILE
    if not path.exists():
        raise RunDirError(
            f"{run_dir} is not a specbench run directory (no manifest.json); "
            "pass a directory made by `specbench sweep`"
        )
    try:
        text = path.read_text()
    except OSError as exc:
        raise RunDirError(f"{path} cannot be read ({exc}); check its permissions") from None
    version = _schema_version(text)
    if version != SCHEMA_VERSION:
        raise RunDirError(
            f"{run_dir} has result schema version {version}, "
            f"this specbench reads {SCHEMA_VERSION}; "
            "use the specbench version that wrote it"
        )
    try:
        return Manifest.model_validate_json(text)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise RunDirError(
            f"{path} is damaged ({where}: {error['msg'].lower()}); "
            "re-run the sweep or restore the file"
        ) from None


def _schema_version(text: str) -> object:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunDirError(
            f"manifest.json is not JSON ({exc}); the run directory is damaged"
        ) from None
    return raw.get("schema_version") if isinstance(raw, dict) else None


@dataclass(frozen=True)
class GpuTime:
    """What one configuration cost in GPU time: its launches and its points."""

    gpus: int  # per server (--tp-size)
    launches: int
    launch_gpu_s: float
    points: int
    point_gpu_s: float

    @property
    def total_gpu_s(self) -> float:
        return self.launch_gpu_s + self.point_gpu_s


def gpu_time(manifest: Manifest) -> dict[str, GpuTime]:
    """GPU time per configuration, from what the sweep recorded (empty for runs made before
    specbench recorded it)."""
    gpus = manifest.config.server.tp_size
    point_s: dict[str, list[float]] = {}
    for label, point in manifest.points.items():
        if point.gpu_s is not None:
            point_s.setdefault(label.split("/", 1)[0], []).append(point.gpu_s)
    out = {}
    for name in [*manifest.servers, *(n for n in point_s if n not in manifest.servers)]:
        server = manifest.servers.get(name)
        launches = server.launch_s if server else []
        if not launches and name not in point_s:
            continue
        out[name] = GpuTime(gpus=gpus, launches=len(launches), launch_gpu_s=sum(launches) * gpus,
                            points=len(point_s.get(name, [])),
                            point_gpu_s=sum(point_s.get(name, [])))
    return out
