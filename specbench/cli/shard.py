"""`specbench merge` and `specbench slurm`: a run measured in shards, and joined again.

Both are registered by `main.py`; what they do lives in `run/merge.py` and `run/slurm.py`,
imported only when a command runs.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from specbench.cli.guard import fail
from specbench.cli.options import cli_layer, sweep_signature
from specbench.errors import ConfigError, UserError


def merge(
    shards: Annotated[list[Path], typer.Argument(help="shard run directories (--only-config)")],
    out: Annotated[Path, typer.Option("--out", help="the merged run directory (new)")],
) -> None:
    """Join shards of one run spec into one run directory (plot, report, regress and
    sweep --resume accept it); refuses shards that disagree or hold a point twice."""
    from specbench.run import merge as merge_mod

    try:
        manifest = merge_mod.merge_runs(shards, out, sys.argv)
    except UserError as exc:
        fail(str(exc).strip())
    left = "" if manifest.status == "complete" else (
        f"; measure what is missing with: specbench sweep --resume {out}"
    )
    print(f"merged {len(shards)} shard(s), {len(manifest.points)} point(s) into {out}{left}")


def slurm(
    ctx: typer.Context,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="TOML run spec (as for specbench sweep)")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="job script to write (default SHARED/job.sh)")
    ] = None,
    shared: Annotated[
        Path | None,
        typer.Option(help="shared directory for shards, the merged run and logs "
                     "(default RESULTS_DIR/RUN_NAME, or RESULTS_DIR/slurm)"),
    ] = None,
    tune: Annotated[bool, typer.Option("--tune", help="the run spec of specbench tune")] = False,
    job_name: Annotated[str | None, typer.Option(help="SLURM job name")] = None,
    specbench_command: Annotated[
        str, typer.Option(help="how the job calls specbench, e.g. 'python -m specbench'")
    ] = "specbench",
    sbatch_arg: Annotated[
        list[str] | None,
        typer.Option(help="extra #SBATCH line, e.g. --sbatch-arg=--time=04:00:00 (repeatable)"),
    ] = None,
    gres: Annotated[
        bool, typer.Option("--gres", help="ask for GPUs with --gres=gpu:N, not --gpus-per-task")
    ] = False,
) -> None:
    """Write a SLURM job: an array task per independent configuration, then a dependent job
    that merges them and measures the rest. Any specbench sweep option may follow."""
    from specbench.run import slurm as slurm_mod

    try:
        cfg = _resolve_sweep_args(list(ctx.args), config_file, tune)
        target_shared = Path(os.path.abspath(shared)) if shared else slurm_mod.default_shared(cfg)
        job = slurm_mod.JobOptions(
            shared=target_shared,
            workdir=Path.cwd(),
            job_name=job_name or f"specbench-{target_shared.name}",
            specbench_command=tuple(shlex.split(specbench_command)),
            sbatch_args=tuple(sbatch_arg or ()),
            gres=gres,
        )
        path = slurm_mod.write_job(cfg, job, out or target_shared / "job.sh", _shown_command())
    except UserError as exc:
        fail(str(exc).strip())
    tasks = slurm_mod.independent_configurations(cfg)
    print(f"job script: {path} ({len(tasks)} array task(s): {', '.join(tasks)})")
    print(f"submit with: bash {path}")


# `slurm` takes the sweep's options as they are: register it with
# app.command(context_settings=SLURM_CONTEXT)(slurm).
SLURM_CONTEXT: dict[str, Any] = {"allow_extra_args": True, "ignore_unknown_options": True}


def _shown_command() -> list[str]:
    return ["specbench", *sys.argv[1:]]


def _sweep_parser() -> Any:
    """A command that only parses `specbench sweep`'s options (the same generated list)."""
    parser = typer.Typer()

    def sweep(**kwargs: Any) -> None:
        """Parse only."""

    sweep.__signature__ = sweep_signature()  # type: ignore[attr-defined]
    parser.command()(sweep)
    return typer.main.get_command(parser)


def _resolve_sweep_args(args: list[str], config_file: Path | None, tune: bool) -> Any:
    """The run spec: the sweep options in `args` parsed by `specbench sweep`'s own options."""
    from specbench import config as config_mod
    from specbench import presets

    try:
        parsed = _sweep_parser().make_context("sweep", list(args)).params
    except typer.TyperException as exc:  # click's usage errors, as typer ships click
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        raise ConfigError(f"{message}; see specbench sweep --help") from None
    for name, flag in (("resume", "--resume"), ("dry_run", "--dry-run")):
        if parsed.get(name):
            raise ConfigError(f"specbench slurm takes no {flag}; write the job for a new run")
    chosen = parsed.get("preset") or ("quick" if parsed.get("quick") else None)
    return config_mod.resolve(
        cli_layer(parsed),
        preset=chosen,
        config_file=config_file or parsed.get("config_file"),
        base=presets.TUNE_LAYER if tune else None,
    )
