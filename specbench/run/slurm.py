"""`specbench slurm`: one run spec as a SLURM array job plus a dependent merge job.

The configurations of a run are independent until an analysis is needed, so each independent
one is an array task: `specbench sweep --only-config NAME` into `SHARED/shards/NAME` (its own
port, so tasks sharing a node do not collide). Once every task has succeeded
(`--dependency=afterok:<array job id>`, which waits for the whole array) one more job runs
`specbench merge` into `SHARED/run` and `specbench sweep --resume SHARED/run`, which measures the
configurations that needed the merged curves (the dynamic server, the tuned schedule), then
analyses, plots and reports.

The job is one bash file with three steps: `bash job.sh` (submit) calls `sbatch --parsable` for
the array and then for the merge job, each of which runs the same file (`job.sh task`,
`job.sh merge`). SLURM keeps a copy of the file at submission, and the resolved run spec is
written inside it (TOML), so every task measures exactly the config `specbench slurm` checked.
Keys are never written: they come from SPECBENCH_API_KEY / SPECBENCH_ADMIN_API_KEY in the
environment sbatch passes on. A task or merge job that is requeued continues its run directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench import config as config_mod
from specbench import config_schema
from specbench.config import SweepConfig
from specbench.errors import ConfigError
from specbench.redaction import redact
from specbench.results.store import atomic_write

# Fields each task sets on its own command line, so they are left out of the written spec.
_PER_TASK_FIELDS = ("results_dir", "run_name", "only_config")
# Ports of array task i: the spec's port + PORT_STRIDE * i (room for a server's side ports).
PORT_STRIDE = config_schema.PORT_STRIDE
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_SPEC_END = "SPECBENCH_SPEC"


@dataclass(frozen=True)
class JobOptions:
    """How the job runs on the cluster (nothing here changes what is measured)."""

    shared: Path  # absolute: shards/, run/ and logs/ go here
    workdir: Path  # absolute: where relative paths of the spec (prompt files) resolve
    job_name: str
    specbench_command: tuple[str, ...] = ("specbench",)
    sbatch_args: tuple[str, ...] = ()
    gres: bool = False  # request GPUs as --gres=gpu:N instead of --gpus-per-task=N


def independent_configurations(cfg: SweepConfig) -> list[str]:
    """The configurations an array task can measure on its own, in measuring order."""
    return [c.name for c in cfg.configurations if not cfg.waits_for_analysis(c)]


def dependent_configurations(cfg: SweepConfig) -> list[str]:
    return [c.name for c in cfg.configurations if cfg.waits_for_analysis(c)]


def check_shardable(cfg: SweepConfig) -> list[str]:
    """The array's configurations; ConfigError when the spec cannot be sharded."""
    if cfg.only_config:
        raise ConfigError(
            "specbench slurm makes one shard per configuration itself; drop --only-config"
        )
    names = independent_configurations(cfg)
    if not names:
        raise ConfigError(
            f"every configuration of --modes {','.join(cfg.modes)} needs an analysis of "
            "others; add the static ones it is computed from (baseline, eagle3, ...) to --modes"
        )
    return names


# ---------------------------------------------------------------------------------------------
# The run spec as TOML (the project reads TOML with tomllib, which does not write).


def spec_toml(cfg: SweepConfig) -> str:
    """The config as a `--config` file; refuses (one line) a value TOML cannot hold exactly."""
    for section, flag in (("server", "--server-arg"), ("sim", "--sim-arg")):
        extra = list(config_mod.field_value(cfg, f"{section}.extra_args"))
        if redact(extra) != extra:
            raise ConfigError(
                f"{flag} holds a key, which the job script would keep in clear; pass it as "
                "SPECBENCH_API_KEY / SPECBENCH_ADMIN_API_KEY in the environment instead"
            )
    raw = config_mod.to_dict(cfg)
    for name in _PER_TASK_FIELDS:
        raw.pop(name, None)
    top = [f"{_key(k)} = {_value(v, k)}" for k, v in raw.items()
           if k not in config_mod.SECTIONS and v is not None]
    lines = ["# The run spec, resolved by specbench slurm; every task runs exactly this.", *top]
    for section in config_mod.SECTIONS:
        lines += ["", f"[{section}]"]
        lines += [f"{_key(k)} = {_value(v, f'{section}.{k}')}"
                  for k, v in raw[section].items() if v is not None]
    text = "\n".join(lines) + "\n"
    _check_round_trip(cfg, text)
    return text


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else _string(name)


def _string(text: str) -> str:
    # JSON's escapes are TOML's basic-string escapes; DEL must be escaped in TOML only.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v, where) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v, where)}" for k, v in value.items()) + "}"
    raise ConfigError(
        f"{where} holds {value!r}, which a TOML run spec cannot; "
        "give that option another value for a SLURM run"
    )


def _check_round_trip(cfg: SweepConfig, text: str) -> None:
    """Every task reads the spec back: it must give the very config that was checked."""
    raw = config_mod.to_dict(cfg)
    read = config_mod.build({**tomllib.loads(text), **{k: raw[k] for k in _PER_TASK_FIELDS}})
    diffs = config_mod.differences(cfg, read)
    if diffs:
        raise ConfigError(
            f"{diffs[0]} = {config_mod.field_value(cfg, diffs[0])!r} cannot be written to a "
            "TOML run spec exactly; give that option another value for a SLURM run"
        )


# ---------------------------------------------------------------------------------------------
# The job script.


def _bash_array(words: Sequence[str]) -> str:
    return "(" + " ".join(shlex.quote(w) for w in words) + ")"


def _directives(cfg: SweepConfig, job: JobOptions) -> list[str]:
    lines = [f"--job-name={job.job_name}", "--ntasks=1"]
    if cfg.engine == "sglang":  # the simulator and attached servers need no GPU here
        tp = cfg.server.tp_size
        lines.append(f"--gres=gpu:{tp}" if job.gres else f"--gpus-per-task={tp}")
    lines.append(f"--output={job.shared / 'logs'}/%x-%A_%a.out")
    lines += list(job.sbatch_args)
    return [f"#SBATCH {line}" for line in lines]


def job_script(
    cfg: SweepConfig, job: JobOptions, command: Sequence[str], name: str = "job.sh"
) -> str:
    """The bash file: header and #SBATCH lines, the settings, the embedded spec, the steps."""
    names = check_shardable(cfg)
    later = dependent_configurations(cfg)
    shared = job.shared
    shard_dirs = [str(shared / "shards" / name) for name in names]
    header = [
        "#!/bin/bash",
        f"# A specbench run on SLURM, written by: {shlex.join(redact(list(command)))}",
        "#",
        f"#   bash {name}        submit: an array job, one task per configuration below, then",
        "#                      a job that starts once every task succeeded (afterok)",
        f"#   bash {name} task   what array task $SLURM_ARRAY_TASK_ID runs (sweep --only-config)",
        f"#   bash {name} merge  what the last job runs (merge, then sweep --resume)",
        "#",
        f"# Array tasks: {', '.join(names)}; measured after the merge: {', '.join(later) or '-'}.",
        f"# Shards: {shared}/shards/<config>",
        f"# The merged run: {shared}/run; job logs: {shared}/logs",
        "# Keys are not written here: export SPECBENCH_API_KEY (and SPECBENCH_ADMIN_API_KEY)",
        "# before submitting; sbatch passes the environment on.",
        *_directives(cfg, job),
        "set -euo pipefail",
        "",
        f"shared={shlex.quote(str(shared))}",
        f"workdir={shlex.quote(str(job.workdir))}",
        f"job_name={shlex.quote(job.job_name)}",
        f"specbench={_bash_array(job.specbench_command)}",
        f"configs={_bash_array(names)}",
        f"shards={_bash_array(shard_dirs)}",
        f"base_port={cfg.server.port}",
        f"port_stride={PORT_STRIDE}",
        "",
        "write_spec() {  # the resolved run spec, into a private file (tasks may share a node)",
        '  spec=$(mktemp "${TMPDIR:-/tmp}/specbench-spec.XXXXXX")',
        "  trap 'rm -f \"$spec\"' EXIT",
        f"  cat > \"$spec\" <<'{_SPEC_END}'",
        spec_toml(cfg).rstrip("\n"),
        _SPEC_END,
        "}",
    ]
    return "\n".join([*header, *_STEPS]) + "\n"


_STEPS = r"""
task() {  # one configuration into shards/<name>; a requeued task continues its shard
  local index=${SLURM_ARRAY_TASK_ID:?run as a SLURM array task, or set SLURM_ARRAY_TASK_ID}
  local name=${configs[$index]}
  local shard=$shared/shards/$name
  if [ -e "$shard/manifest.json" ]; then
    "${specbench[@]}" sweep --resume "$shard"
  else
    write_spec
    "${specbench[@]}" sweep --config "$spec" --only-config "$name" \
      --results-dir "$shared/shards" --run-name "$name" \
      --port $((base_port + port_stride * index))
  fi
}

merge() {  # the shards into run/, then what needed them, the analysis, plots and report
  local run=$shared/run
  if [ ! -e "$run/manifest.json" ]; then
    "${specbench[@]}" merge "${shards[@]}" --out "$run"
  fi
  "${specbench[@]}" sweep --resume "$run"
}

submit() {
  mkdir -p "$shared/logs"  # SLURM does not create the directory of --output
  local array_job merge_job
  array_job=$(sbatch --parsable --array=0-$((${#configs[@]} - 1)) "$script" task)
  array_job=${array_job%%;*}  # --parsable prints "id" or "id;cluster"
  merge_job=$(sbatch --parsable --dependency=afterok:"$array_job" \
    --job-name="$job_name-merge" --output="$shared/logs/%x-%j.out" "$script" merge)
  echo "submitted array job $array_job (${configs[*]}) and merge job ${merge_job%%;*}"
  echo "the merged run will be $shared/run"
}

script=$(readlink -f "$0")
cd "$workdir"
case "${1:-submit}" in
  submit) submit ;;
  task) task ;;
  merge) merge ;;
  *) echo "error: unknown step ${1}; use submit (no argument), task or merge" >&2; exit 2 ;;
esac""".splitlines()


def write_job(cfg: SweepConfig, job: JobOptions, out: Path, command: Sequence[str]) -> Path:
    """Write the job script (executable) through the one atomic writer."""
    text = job_script(cfg, job, command, out.name)
    try:
        atomic_write(out, text)
        out.chmod(out.stat().st_mode | 0o111)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the job script {out} ({exc.strerror or exc}); pass an --out you can "
            "write to"
        ) from None
    return out


def default_shared(cfg: SweepConfig) -> Path:
    """SHARED when --shared is not given: the spec's results directory / run name (or slurm)."""
    return Path(os.path.abspath(cfg.results_dir / (cfg.run_name or "slurm")))
