"""The sweep itself: the servers, prompt sets and levels, the plan, where the servers run; it
holds the three sections and the rules that join them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import field_validator, model_validator

from specbench import configurations
from specbench.config_schema.fields import (
    DEFAULT_CONCURRENCY,
    DEFAULT_PROMPT_SETS,
    PORT_STRIDE,
    Engine,
    Section,
    option,
)
from specbench.config_schema.load import LoadConfig
from specbench.config_schema.server import ServerConfig
from specbench.config_schema.sim import SimConfig
from specbench.errors import ConfigError
from specbench.prompts.context import BUCKET_SEP, parse_context_lengths


class SweepConfig(Section):
    """Everything one sweep needs; built by :func:`resolve`, recorded in the manifest."""

    engine: Engine = option("sim", "sim | sglang | attach", cli="--engine")
    # Every name configurations.parse() takes (tests/test_cli_help.py holds the two together).
    modes: tuple[str, ...] = option(
        configurations.DEFAULT_NAMES,
        "comma list of server configurations: baseline, eagle3, dynamic, zero-step, "
        "sglang-default, tuned, eagle3-k<K> (static EAGLE-3 at K steps), "
        "eagle3-k<K>-t<TOPK>-d<N> (static EAGLE-3 drafting a tree), dynamic-t<T> "
        "(drafting stops at batch size T)",
        cli="--modes",
        parse="csv",
    )
    prompt_sets: tuple[str, ...] = option(
        DEFAULT_PROMPT_SETS,
        "comma list of prompt sets or JSONL paths",
        cli="--prompts",
        parse="csv",
    )
    concurrency: tuple[int, ...] = option(
        DEFAULT_CONCURRENCY,
        "comma list of concurrency levels (users sending at once)",
        cli="--concurrency",
        parse="csv_int",
    )
    mix: dict[str, float] | None = option(
        None,
        "measure a mixed workload too, e.g. coding=0.5,agentic=0.5 (its threshold is the "
        "mixed-deployment recommendation)",
        cli="--mix",
        parse="weights",
    )
    context_lengths: tuple[str, ...] = option(
        (),
        "comma list of context-length buckets, e.g. 2k,8k,32k: each prompt set is measured "
        "per bucket, its prompts more than the previous top and at most this one",
        cli="--context-lengths",
        parse="csv",
    )
    threshold: int | None = option(
        None,
        "auto (from the crossover) or a batch size",
        cli="--threshold",
        parse="threshold",
        help_default="auto",
        ge=1,
    )
    schedule: dict[str, int] | None = option(
        None,
        "the tuned server's batch-size slots, given instead of tuned, e.g. 1:3,25:5,44:3 "
        "(SLOT:K; it launches at the largest K, and a slot 0, which no batch reaches, can hold "
        "it); measured as `tuned` without the static curves",
        cli="--schedule",
        parse="schedule",
        help_default="tuned from the measured K",
    )
    plan: Literal["auto", "dense", "adaptive"] = option(
        "auto",
        "adaptive: the grid's middle level, then one level per decision and round, bisecting "
        "its crossing on its two servers, T after c* (run/adaptive.py); dense: every level on "
        "every server; auto: adaptive for the default grid, one server at a time, "
        "with a decision's two servers in --modes and no tuned server, dense otherwise; on "
        "--engine sglang also dense when a launch takes longer than the break-even (the first "
        "server's launch, or --launch-s)",
        cli="--plan",
    )
    launch_s: float | None = option(
        None,
        "--plan auto on --engine sglang: seconds one server takes to launch, to choose the "
        "plan before any launch",
        cli="--launch-s",
        help_default="the first server's measured launch",
        gt=0,
    )
    budget_gpu_min: float | None = option(
        None,
        "adaptive plan: place no more levels once the run has spent this many GPU-minutes "
        "(the middle level is always measured)",
        cli="--budget-gpu-min",
        gt=0,
    )
    straddle_rounds: int = option(
        3,
        "rounds of EAGLE-3 and zero-step points at the dynamic server's T-1, T, T+1, T chosen "
        "again after each (0: none; its efficiency there then rests on interpolated curves)",
        cli="--straddle-rounds",
        ge=0,
    )
    # SGLang's own torch profiler at these levels (engines/profiler.py); a real engine only.
    profile_steps: tuple[int, ...] = option(
        (),
        "comma list of --concurrency levels at which each server's steps are profiled by "
        "SGLang's own profiler (a real engine): draft, verify attention, GEMMs, communication "
        "and host idle per step and rank, shown by specbench explain",
        cli="--profile-steps",
        parse="csv_int",
    )
    server: ServerConfig = ServerConfig()
    sim: SimConfig = SimConfig()
    load: LoadConfig = LoadConfig()
    results_dir: Path = option(Path("results"), "where run directories go", cli="--results-dir")
    run_name: str | None = option(
        None, "run directory name", cli="--run-name", help_default="start time and a random id"
    )
    no_plots: bool = option(
        False,
        "leave the figures out when the sweep ends (a headless job); specbench report RUN_DIR "
        "draws them later",
        cli="--no-plots",
    )
    attach: tuple[tuple[str, str], ...] = option(
        (), "NAME=URL of a running server, repeatable", cli="--attach", parse="attach"
    )
    max_point_retries: int = option(
        1, "restarts of a server that dies mid-point", cli="--max-point-retries", ge=0
    )
    executor: Literal["local", "ray"] = option(
        "local", "local (one node; side by side with --gpus) or ray (a Ray cluster)",
        cli="--executor",
    )
    ray_address: str | None = option(
        None, "Ray cluster to join (auto, ray://host:10001)",
        cli="--ray-address",
        help_default="start a local one",
    )
    # Several configurations at once (specbench/run/parallel.py): slots of --tp-size GPUs each.
    gpus: tuple[int, ...] = option(
        (),
        "GPU ids (or all) for configurations side by side, --tp-size each",
        cli="--gpus",
        parse="gpus",
    )
    # A shard of a run spec (`specbench slurm`, `specbench merge`): the rest of the config stays
    # the run's own, so shards of one spec agree and merge; empty measures every mode.
    only_config: tuple[str, ...] = option(
        (),
        "comma list: measure only these configurations of --modes (a shard to merge later)",
        cli="--only-config",
        parse="csv",
    )

    @field_validator("modes")
    @classmethod
    def _known_modes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            configurations.parse(name)  # raises ConfigError naming the mode
        return tuple(dict.fromkeys(value))

    @field_validator("only_config")
    @classmethod
    def _unique_only_config(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(value))

    @field_validator("mix")
    @classmethod
    def _positive_weights(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is None:
            return None
        if not value or any(w <= 0 for w in value.values()):
            raise ConfigError(
                "--mix needs at least one prompt set with a positive weight; "
                "use e.g. --mix coding=0.5,agentic=0.5"
            )
        if "mix" in value:
            raise ConfigError("--mix cannot contain a set named mix; name the sets it mixes")
        return value

    @field_validator("schedule")
    @classmethod
    def _schedule_slots(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if value is None:
            return None
        if not all(key.isdigit() and steps >= 0 for key, steps in value.items()) or not any(
                value.values()):
            raise ConfigError(f"schedule {value} is not batch-size slots with a K >= 1 in one; "
                              "give e.g. --schedule 1:3,25:5,44:3 (schedule = {1 = 3} in a file)")
        return {str(int(key)): steps for key, steps in value.items()}

    @field_validator("context_lengths")
    @classmethod
    def _known_buckets(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return tuple(b.name for b in parse_context_lengths(value))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @field_validator("concurrency")
    @classmethod
    def _sorted_levels(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value:
            raise ConfigError("the concurrency list is empty; give at least one level, e.g. 1,8,64")
        if min(value) < 1:
            raise ConfigError(
                f"concurrency level {min(value)} must be at least 1; "
                "use a comma-separated list of positive integers"
            )
        return tuple(sorted(set(value)))

    @field_validator("profile_steps")
    @classmethod
    def _sorted_profile_levels(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _shardable_only_config(self) -> SweepConfig:
        for name in self.only_config:
            if name not in self.modes:
                raise ConfigError(
                    f"--only-config {name} is not in --modes ({','.join(self.modes)}); "
                    "add it to --modes or name one of those"
                )
            if self.waits_for_analysis(configurations.parse(name)):
                raise ConfigError(
                    f"--only-config {name}: the {name} server needs the analysis of the other "
                    "configurations' curves; leave it out of the shards and measure it after "
                    "merging them, with specbench sweep --resume MERGED_RUN"
                )
        return self

    @model_validator(mode="after")
    def _buckets_without_mix(self) -> SweepConfig:
        if self.context_lengths and self.mix:
            raise ConfigError("--mix and --context-lengths cannot be combined yet: a mix has no "
                              "single context; measure them in two runs")
        return self

    @model_validator(mode="after")
    def _gpus_fit(self) -> SweepConfig:
        tp = self.server.tp_size
        if self.executor == "ray" and self.engine == "attach":
            raise ConfigError("--executor ray launches servers on the cluster; attached servers "
                              "are measured from here: drop --executor ray")
        if self.gpus and self.engine == "attach":
            raise ConfigError("--gpus places servers specbench launches; attached servers run "
                              "where they were started: drop --gpus")
        if self.gpus and len(self.gpus) < tp:
            raise ConfigError(f"--gpus {','.join(map(str, self.gpus))}: fewer GPUs than one "
                              f"server's --tp-size {tp}; give at least {tp}")
        return self

    @model_validator(mode="after")
    def _open_loop(self) -> SweepConfig:
        if not self.load.request_rates:
            for flag, given in (("--burstiness", self.load.burstiness != 1.0),
                                ("--max-concurrency", self.load.max_concurrency is not None)):
                if given:
                    raise ConfigError(f"{flag} shapes open-loop arrivals; add --request-rates "
                                      f"(e.g. 2,8,32,inf) or drop {flag}")
            return self
        if self.plan == "adaptive":
            raise ConfigError("--plan adaptive bisects concurrency levels; an open-loop sweep "
                              "(--request-rates) measures every rate: use --plan dense")
        if self.load.client_procs > 1 or self.executor == "ray" or self.mix \
                or self.context_lengths:
            raise ConfigError("--request-rates runs on one client process, without --mix or "
                              "--context-lengths (not supported yet): drop those options")
        return self

    @model_validator(mode="after")
    def _profile_on_a_real_engine(self) -> SweepConfig:
        levels = self.profile_steps
        if not levels:
            return self
        if self.engine == "sim":
            raise ConfigError("--profile-steps asks SGLang's own profiler (/start_profile), "
                              "which the simulated server does not have; use --engine sglang "
                              "(or attach a real server), or drop --profile-steps")
        if self.load.request_rates:
            raise ConfigError("--profile-steps profiles concurrency levels, and an open-loop "
                              "sweep (--request-rates) has none; drop one of the two")
        missing = [c for c in levels if c not in self.concurrency]
        if missing:
            raise ConfigError(f"--profile-steps {','.join(map(str, missing))}: not a "
                              f"--concurrency level ({','.join(map(str, self.concurrency))}); "
                              "give levels the sweep measures")
        return self

    @model_validator(mode="after")
    def _schedule_for_tuned(self) -> SweepConfig:
        if self.schedule is not None and "tuned" not in self.modes:
            raise ConfigError("--schedule is the tuned server's: add tuned to --modes (e.g. "
                              "--modes eagle3,tuned) or drop --schedule")
        return self

    @model_validator(mode="after")
    def _adaptive_on_one_node(self) -> SweepConfig:
        if self.plan == "auto":  # chosen by resolve(): auto_plan
            return self
        if self.plan != "adaptive":
            if self.budget_gpu_min is not None:
                raise ConfigError("--budget-gpu-min limits the adaptive plan's extra levels; "
                                  "add --plan adaptive or drop --budget-gpu-min")
            return self
        if self.executor == "ray" or len(self.gpu_slots()) > 1 or self.only_config:
            raise ConfigError("--plan adaptive places levels from the analysis of every "
                              "configuration, one server at a time: drop --gpus, --executor "
                              "ray and --only-config, or use --plan dense")
        if "tuned" in self.modes:
            raise ConfigError("--plan adaptive places levels for the two decisions only, and the "
                              "tuned schedule needs every K at every level: use --plan dense "
                              "with specbench tune")
        return self

    def gpu_slots(self) -> list[tuple[int, ...]]:
        """Disjoint GPU sets of --tp-size each (GPUs left over stay unused); [] without --gpus."""
        gpus, tp = self.gpus, self.server.tp_size
        return [gpus[i:i + tp] for i in range(0, len(gpus) - tp + 1, tp)]

    def slot_port(self, index: int) -> int:
        """The port of the server on GPU slot `index` of `gpu_slots` (slot 0: --port itself)."""
        return self.server.port + PORT_STRIDE * index

    def waits_for_analysis(self, config: configurations.ServerConfiguration) -> bool:
        """Whether `config` can only be measured once the other curves are in: the tuned
        server, and a dynamic server whose threshold comes from the measured crossover (not
        given with --threshold, and not the fixed default a run without both curves uses)."""
        if not config.needs_analysis:
            return False
        if config.adaptive == "threshold":
            return self.threshold is None and configurations.analyzable(self.modes)
        return self.schedule is None

    @property
    def max_running_requests(self) -> int:
        if self.server.max_running_requests is not None:
            return self.server.max_running_requests
        return max(self.concurrency)

    @property
    def measured_sets(self) -> tuple[str, ...]:
        """The prompt sets points are measured for: the named ones (each once per context
        bucket, as set@bucket, where one is asked), and the mix if asked."""
        names = tuple(Path(n).stem if n.endswith((".jsonl", ".json")) else n
                      for n in self.prompt_sets)
        if self.context_lengths:
            names = tuple(f"{n}{BUCKET_SEP}{b}" for n in names for b in self.context_lengths)
        return (*names, "mix") if self.mix else names

    @property
    def configurations(self) -> list[configurations.ServerConfiguration]:
        """The server configurations this sweep measures, in measuring order: every mode, or
        only those of --only-config (a shard)."""
        names = self.only_config or self.modes
        return configurations.ordered(names, self.server.speculative_num_steps)
