"""`specbench merge`: shards of one run spec joined into one run directory.

A shard is a normal run directory made with `--only-config` (by a SLURM array task, or by hand
on any machine). Merging checks that the shards are parts of one run (the same config apart from
where results went, the port and the shard's own configurations; the same prompt-set hashes,
seeds, engine and specbench version) and that no point is held twice, then writes one run
directory: point files copied under `points/<config>/<set>/`, server logs under `servers/`, one
typed manifest with every server and point, and the summary. The merged config measures every
mode, so `specbench sweep --resume MERGED` measures what no shard could (the dynamic and tuned
servers, which need the merged curves) and then analyses, plots and reports.

What each shard was run on (its fingerprint, times and status) is kept in `shards.json`: the
manifest has one fingerprint, the first shard's.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench import config as config_mod
from specbench import results
from specbench.config import SweepConfig
from specbench.errors import UserError
from specbench.redaction import redact
from specbench.results import Manifest, PointKey, PointRecord, ServerRecord, ThresholdRecord
from specbench.results.manifest import RunStatus
from specbench.results.store import write_json

SHARDS_FILE = "shards.json"
# Config fields a shard may set on its own: where it wrote, its port and GPUs, its
# configurations. They say where a shard ran, not what it measured.
SHARD_OWN_FIELDS: tuple[str, ...] = (
    "only_config", "run_name", "results_dir", "server.port", "gpus"
)
_FIX = "merge only shards of one run spec (specbench slurm writes them)"


class MergeError(UserError, ValueError):
    """Shards that cannot be one run; the message names the shards and what disagrees."""


@dataclass(frozen=True)
class Shard:
    path: Path
    manifest: Manifest
    keys: frozenset[PointKey]

    @property
    def measures(self) -> list[str]:
        """The configurations this shard was run to measure (all modes without --only-config)."""
        return [c.name for c in self.manifest.config.configurations]


def merge_runs(shard_dirs: Sequence[Path], out: Path, command: Sequence[str]) -> Manifest:
    """Join `shard_dirs` into the new run directory `out`; its manifest."""
    shards = [_open_shard(path) for path in shard_dirs]
    _check_out(out, shards)
    _check_agree(shards)
    owners = _point_owners(shards)
    manifest = _merged_manifest(shards, out, owners, command)
    server_files = _server_files(shards)
    # Every refusal is above: nothing is written into `out` for shards that cannot merge.
    _copy_files(out, owners, server_files)
    manifest.save(out)
    results.rebuild_summary(out)
    write_json(out / SHARDS_FILE, [_shard_entry(shard) for shard in shards])
    return manifest


def _open_shard(path: Path) -> Shard:
    if not path.is_dir():
        raise MergeError(f"shard {path} is not a directory; pass run directories made by sweep")
    manifest = results.read_manifest(path)  # RunDirError: one line naming the directory
    return Shard(path, manifest, frozenset(results.measured_keys(path)))


def _check_out(out: Path, shards: list[Shard]) -> None:
    if (out / "manifest.json").exists():
        raise MergeError(
            f"{out} already holds a run; continue it with specbench sweep --resume {out}, "
            "or pass a new --out"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MergeError(f"{out} already exists and is not empty; remove it or pass a new --out")
    target = out.resolve()
    for shard in shards:
        if shard.path.resolve() in (target, *target.parents):
            raise MergeError(f"--out {out} lies inside shard {shard.path}; merge into a new path")
    seen: dict[Path, Path] = {}
    for shard in shards:
        real = shard.path.resolve()
        if real in seen:
            raise MergeError(f"shard {shard.path} is given twice; name each shard once")
        seen[real] = shard.path


def _comparable(cfg: SweepConfig) -> SweepConfig:
    """The config with the shard's own fields at their defaults, for comparing shards."""
    raw, defaults = config_mod.to_dict(cfg), config_mod.to_dict(SweepConfig())
    for dotted in SHARD_OWN_FIELDS:
        *section, name = dotted.split(".")
        target, default = raw, defaults
        for part in section:
            target, default = target[part], default[part]
        if name in default:
            target[name] = default[name]
    return config_mod.build(raw, source="a shard's manifest")


def _check_agree(shards: list[Shard]) -> None:
    first = shards[0]
    base = _comparable(first.manifest.config)
    for shard in shards[1:]:
        a, b = first.manifest, shard.manifest
        pair = f"{first.path} and {shard.path}"
        diffs = config_mod.differences(base, _comparable(b.config))
        if diffs:
            name = diffs[0]
            was = config_mod.field_value(a.config, name)
            now = config_mod.field_value(b.config, name)
            raise MergeError(f"shards {pair} disagree on {name} ({was!r} vs {now!r}); {_FIX}")
        for what, was, now in (
            ("seed", a.seed, b.seed),
            ("engine", a.engine.kind, b.engine.kind),
            ("engine version", a.engine.version, b.engine.version),
            ("time scale", a.time_scale, b.time_scale),
            ("specbench version", a.specbench_version, b.specbench_version),
        ):
            if was != now:
                raise MergeError(
                    f"shards {pair} disagree on the {what} ({was!r} vs {now!r}); {_FIX}"
                )
        _check_prompt_sets(first, shard)


def _check_prompt_sets(first: Shard, shard: Shard) -> None:
    a, b = first.manifest.prompt_sets, shard.manifest.prompt_sets
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            lacking = first.path if name not in a else shard.path
            raise MergeError(f"shard {lacking} has no prompt set {name}; {_FIX}")
        if a[name].sha256 != b[name].sha256:
            raise MergeError(
                f"shards {first.path} and {shard.path} measured different prompt set {name} "
                f"files (sha256 {a[name].sha256[:12]} vs {b[name].sha256[:12]}); "
                "re-run one shard with the other's prompt file"
            )


def _point_owners(shards: list[Shard]) -> dict[PointKey, Shard]:
    """Which shard each measured point comes from; refuses a point held twice."""
    owners: dict[PointKey, Shard] = {}
    for shard in shards:
        for key in sorted(shard.keys, key=lambda k: k.label):
            if key in owners:
                raise MergeError(
                    f"shards {owners[key].path} and {shard.path} both hold point {key.label}; "
                    "keep each point in one shard (drop or re-split one of them)"
                )
            owners[key] = shard
    return owners


def _merged_manifest(
    shards: list[Shard], out: Path, owners: dict[PointKey, Shard], command: Sequence[str]
) -> Manifest:
    first = shards[0].manifest
    raw = config_mod.to_dict(first.config)
    raw.update(only_config=[], run_name=out.name, results_dir=str(out.parent))
    raw["server"]["port"] = min(s.manifest.config.server.port for s in shards)
    cfg = config_mod.build(raw, source="the merged config")
    ended = [s.manifest.ended_at for s in shards if s.manifest.ended_at]
    return Manifest(
        specbench_version=first.specbench_version,
        command=redact(list(command)),
        config=cfg,
        seed=first.seed,
        fingerprint=first.fingerprint,
        engine=first.engine,
        time_scale=first.time_scale,
        prompt_sets=dict(first.prompt_sets),
        servers=_servers(shards),
        threshold=_threshold(shards),
        tuned=_tuned(shards),
        started_at=min(s.manifest.started_at for s in shards),
        ended_at=max(ended) if ended else None,
        status=_status(shards, cfg),
        points=_points(shards, owners),
        placements=[p for shard in shards for p in shard.manifest.placements],
    )


def _servers(shards: list[Shard]) -> dict[str, ServerRecord]:
    servers: dict[str, ServerRecord] = {}
    where: dict[str, Path] = {}
    for shard in shards:
        for name, record in shard.manifest.servers.items():
            if name in servers:
                raise MergeError(
                    f"shards {where[name]} and {shard.path} both ran the {name} server; "
                    "measure each configuration in one shard"
                )
            servers[name], where[name] = record, shard.path
    return servers


def _threshold(shards: list[Shard]) -> ThresholdRecord | None:
    """A threshold a shard chose (given with --threshold, or the default): all must agree."""
    chosen = [s for s in shards if s.manifest.threshold is not None]
    for shard in chosen[1:]:
        if shard.manifest.threshold != chosen[0].manifest.threshold:
            raise MergeError(
                f"shards {chosen[0].path} and {shard.path} chose different dynamic thresholds; "
                f"{_FIX}"
            )
    return chosen[0].manifest.threshold if chosen else None


def _tuned(shards: list[Shard]) -> dict[str, dict[str, int]]:
    tuned: dict[str, dict[str, int]] = {}
    for shard in shards:
        for name, slots in shard.manifest.tuned.items():
            if tuned.setdefault(name, slots) != slots:
                raise MergeError(
                    f"shard {shard.path} has another tuned schedule for {name}; {_FIX}"
                )
    return tuned


def _points(shards: list[Shard], owners: dict[PointKey, Shard]) -> dict[str, PointRecord]:
    """Every shard's point records; a measured point keeps the record of the shard holding it."""
    points: dict[str, PointRecord] = {}
    for shard in shards:
        for label, record in shard.manifest.points.items():
            points.setdefault(label, record)
    for key, shard in owners.items():
        if key.label in shard.manifest.points:
            points[key.label] = shard.manifest.points[key.label]
    return points


def _status(shards: list[Shard], cfg: SweepConfig) -> RunStatus:
    """Complete when every shard finished and together they measured every mode; otherwise
    the run is partial ("interrupted"): `sweep --resume` measures the rest."""
    measured = {name for shard in shards for name in shard.measures}
    finished = all(shard.manifest.status == "complete" for shard in shards)
    return "complete" if finished and set(cfg.modes) <= measured else "interrupted"


def _server_files(shards: list[Shard]) -> list[Path]:
    """Each shard's servers/ files (logs, adaptive JSON); refuses a name two shards share."""
    owners: dict[str, Path] = {}
    files: list[Path] = []
    for shard in shards:
        folder = shard.path / "servers"
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if not path.is_file():
                continue
            if path.name in owners:
                raise MergeError(
                    f"shards {owners[path.name]} and {shard.path} both have servers/{path.name}; "
                    "measure each configuration in one shard"
                )
            owners[path.name] = shard.path
            files.append(path)
    return files


def _copy_files(out: Path, owners: dict[PointKey, Shard], server_files: list[Path]) -> None:
    """Point files (hard-linked where the file system allows) and server files."""
    for key, shard in owners.items():
        _link_or_copy(results.point_path(shard.path, key), results.point_path(out, key))
    (out / "servers").mkdir(parents=True, exist_ok=True)
    for path in server_files:
        shutil.copy2(path, out / "servers" / path.name)


def _link_or_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        target.hardlink_to(source)  # point files are never rewritten in place: sharing is safe
    except OSError:
        shutil.copy2(source, target)


def _shard_entry(shard: Shard) -> dict[str, Any]:
    m = shard.manifest
    return {
        "path": str(shard.path.resolve()),
        "configurations": shard.measures,
        "status": m.status,
        "started_at": m.started_at,
        "ended_at": m.ended_at,
        "points": len(shard.keys),
        "fingerprint": m.fingerprint,
    }
