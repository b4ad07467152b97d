"""Making and reopening a run directory: the new run's manifest, and the checks of a resume.

A new run gets a fresh directory under the results directory (a run name may not escape it)
and a manifest written before anything is measured. A resumed run keeps its stored config:
what the command line says explicitly must agree with it (`config.resolve`), and every prompt
set must still hash to what was measured.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import specbench
from specbench import config as config_mod
from specbench import fingerprint, prompts
from specbench.config import SweepConfig
from specbench.engines import Engine
from specbench.errors import ConfigError
from specbench.redaction import redact
from specbench.results import Manifest, PromptSetRecord, RunDirError, read_manifest, utc_now
from specbench.results.manifest import EngineRecord


def new_run_dir(cfg: SweepConfig) -> Path:
    name = cfg.run_name or time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    root = cfg.results_dir.resolve()
    run_dir = (root / name).resolve()
    if run_dir.parent != root:
        raise ConfigError(f"run name {name!r} escapes the results directory; use a plain name")
    if (run_dir / "manifest.json").exists():
        raise ConfigError(
            f"{run_dir} already holds a run; pick another --run-name or continue it with "
            f"--resume {run_dir}"
        )
    try:
        (run_dir / "servers").mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".writable"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"cannot write the run directory {run_dir} ({exc.strerror or exc}); pass a "
            "--results-dir you can write to"
        ) from None
    return run_dir


def create_manifest(
    run_dir: Path,
    cfg: SweepConfig,
    sets: dict[str, prompts.PromptSet],
    command: list[str],
    engine: Engine,
) -> Manifest:
    manifest = Manifest(
        specbench_version=specbench.__version__,
        command=redact(command),
        config=cfg,
        seed=cfg.load.seed,
        fingerprint=fingerprint.collect(),
        engine=EngineRecord(kind=cfg.engine, version=engine.version()),
        time_scale=engine.time_scale,
        prompt_sets={
            n: PromptSetRecord(path=str(ps.path), sha256=ps.sha256, n_requests=len(ps.requests))
            for n, ps in sets.items()
        },
        started_at=utc_now(),
    )
    try:
        manifest.save(run_dir)
    except OSError as exc:
        raise ConfigError(
            f"cannot write {run_dir / 'manifest.json'} ({exc.strerror or exc}); free disk "
            "space or pass another --results-dir"
        ) from None
    return manifest


def stored_config(run_dir: Path) -> dict[str, Any]:
    """The config a run was started with, as plain values (the base of a resume)."""
    try:
        manifest = read_manifest(run_dir) if run_dir.is_dir() else None
    except RunDirError as exc:
        raise ConfigError(f"cannot resume: {exc}") from None
    if manifest is None:
        raise ConfigError(
            f"cannot resume: {run_dir} is not a directory; "
            "pass a run directory such as results/<run-id>"
        )
    return config_mod.to_dict(manifest.config)


def reopen(run_dir: Path, sets: dict[str, prompts.PromptSet]) -> Manifest:
    """The manifest of a run to continue; refuse prompt sets that changed since it started."""
    manifest = read_manifest(run_dir)
    for name, ps in sets.items():
        old = manifest.prompt_sets.get(name)
        if old and old.sha256 != ps.sha256:
            raise ConfigError(
                f"cannot resume {run_dir}: prompt set {name} changed since the run started "
                "(sha256 differs); restore the file or start a new run"
            )
    manifest.status = "running"
    manifest.resumed_at.append(utc_now())
    manifest.save(run_dir)
    return manifest


def resume_config(
    run_dir: Path,
    cli_values: dict[str, Any],
    *,
    preset: str | None = None,
    config_file: Path | None = None,
) -> SweepConfig:
    """The config of a resumed run: the stored one, with what this command says checked."""
    stored = stored_config(run_dir)
    try:
        return config_mod.resolve(
            cli_values, preset=preset, config_file=config_file, stored=stored
        )
    except ConfigError as exc:
        raise ConfigError(f"cannot resume {run_dir}: {exc}") from None
