"""The sweep configuration's schema: every option once, as a pydantic field.

Each field carries its default, its help text and, where it is also a command-line option, its
flag (`option(...)`), so that `cli/options.py` generates the command line and its `--help`
from here. Validation is strict (`config.py` builds and layers; see there why pydantic): the
models are frozen and refuse unknown keys, and a field validator raises :class:`ConfigError`
with one line: where, what was given, and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specbench import configurations
from specbench.errors import ConfigError
from specbench.prompts.context import BUCKET_SEP, parse_context_lengths

DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 250)
DEFAULT_PROMPT_SETS: tuple[str, ...] = ("coding", "agentic")
# Used for the dynamic server when the threshold cannot be computed from measured curves
# (e.g. `--modes dynamic` alone): SGLang 0.5.23's own default config stops drafting at 64.
DEFAULT_FIXED_THRESHOLD = 64
SIM_DEFAULT_PROFILE = "llama-3.1-8b-1xh200"
# Servers side by side on one node (--gpus) listen on ports of their own: the server on GPU
# slot k gets --port + PORT_STRIDE x k (SweepConfig.slot_port: run/parallel.py launches on
# it, the dry run in run/plan.py shows it).
PORT_STRIDE = 10

Engine = Literal["sim", "sglang", "attach"]
Protocol = Literal["openai-chat", "openai-completions", "sglang-native"]
ENGINES: tuple[str, ...] = ("sim", "sglang", "attach")
PROTOCOLS: tuple[str, ...] = ("openai-chat", "openai-completions", "sglang-native")


def option(
    default: Any,
    help: str,
    *,
    cli: str | None = None,
    panel: str | None = None,
    parse: str | None = None,
    hidden: bool = False,
    envvar: str | None = None,
    help_default: str | None = None,
    **constraints: Any,
) -> Any:
    """A schema field that is also a command-line option (`cli`, shown in `panel`).

    `parse` names how the option's text becomes the field's value: "csv" (names), "csv_int"
    (levels), "shlex" (one command line), "shlex_each" (repeatable flag strings), "threshold"
    (auto or a batch size), "attach" (repeatable MODE=URL). Fields without `cli` are TOML-only.
    `--help` shows `default` itself; `help_default` says what a None default means instead.
    """
    extra: dict[str, Any] = {
        "cli": cli,
        "panel": panel,
        "parse": parse,
        "hidden": hidden,
        "envvar": envvar,
        "help_default": help_default,
    }
    return Field(default, description=help, json_schema_extra=extra, **constraints)


def _secret(help: str, cli: str, envvar: str) -> Any:
    """An option that is never shown (repr) nor written (the manifest) anywhere."""
    extra: dict[str, Any] = {"cli": cli, "envvar": envvar}
    return Field(None, repr=False, exclude=True, description=help, json_schema_extra=extra)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ServerConfig(_Section):
    """What every launched server gets; equal across configurations so the comparison is fair."""

    model_path: str = option(
        "meta-llama/Llama-3.1-8B-Instruct", "target model (SGLang --model-path)", cli="--model-path"
    )
    draft_model_path: str | None = option(
        "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
        "EAGLE-3 draft model",
        cli="--draft-model-path",
    )
    tp_size: int = option(1, "tensor parallel size", cli="--tp-size", ge=1)
    # None means "the largest concurrency in the sweep"; always passed explicitly because
    # SGLang silently caps speculative servers at 48 otherwise.
    max_running_requests: int | None = option(
        None,
        "server limit, equal for all servers",
        cli="--max-running-requests",
        help_default="largest concurrency",
        ge=1,
    )
    speculative_num_steps: int = option(
        3, "EAGLE-3 draft steps K (topk 1, K+1 draft tokens)", cli="--spec-steps", ge=1
    )
    host: str = option("127.0.0.1", "server bind address", cli="--host")
    port: int = option(30000, "server port", cli="--port", ge=1, le=65535)
    extra_args: tuple[str, ...] = option(
        (), "extra SGLang flag(s), repeatable", cli="--server-arg", parse="shlex_each"
    )
    server_command: tuple[str, ...] = option(
        ("python", "-m", "sglang.launch_server"),
        "SGLang launcher, e.g. 'sglang serve'",
        cli="--server-command",
        parse="shlex",
    )
    # SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 for the dynamic server: cheaper steps above the
    # threshold, but a cold draft (lower acceptance) right after speculation resumes.
    skip_zero_step_draft_extend: bool = option(
        False,
        "dynamic server: SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1",
        cli="--skip-zero-step-draft-extend",
    )
    cuda_graph_bs_decode: tuple[int, ...] | None = option(
        None,
        "comma list passed as --cuda-graph-bs-decode",
        cli="--cuda-graph-bs-decode",
        parse="csv_int",
    )
    admin_api_key: str | None = _secret(
        "admin key for /flush_cache (SGLang --admin-api-key)",
        "--admin-api-key",
        "SPECBENCH_ADMIN_API_KEY",
    )
    ready_timeout_s: float = option(1800.0, "seconds a server may take to become ready", gt=0)
    stop_grace_s: float = option(10.0, "seconds between SIGTERM and SIGKILL", ge=0)


class SimConfig(_Section):
    """Options of the simulated server (`python -m specbench.sim ... --sim-*`)."""

    profile: str = option(
        SIM_DEFAULT_PROFILE, "simulator profile name or TOML path", cli="--sim-profile"
    )
    # >1 runs the model faster than real time; every reported time is converted back to
    # simulated-GPU time, so the numbers do not depend on this. 4x keeps a 2-core machine's
    # client within 1% of the simulator's ground truth at 250 users (tests/load) and a full
    # default sweep under 10 minutes.
    time_scale: float = option(
        4.0, "simulator speed-up over real time", cli="--sim-time-scale", gt=0
    )
    seed: int = option(0, "simulator seed", cli="--sim-seed")
    extra_args: tuple[str, ...] = option(
        (), "extra --sim-* flag(s), repeatable", cli="--sim-arg", parse="shlex_each"
    )


# A window kept open for --min-window-requests ends at this many times --window-s at the latest
# (--max-window-s unset): 32 s of an 8-s window, about eight answers at c = 1 from a model that
# takes 4 s per answer.
MAX_WINDOW_FACTOR = 4.0


class LoadConfig(_Section):
    """How each point is measured."""

    protocol: Protocol = option(
        "openai-chat", "openai-chat | openai-completions | sglang-native", cli="--protocol"
    )
    warmup_s: float = option(
        2.0, "unmeasured load before each window (GPU seconds)", cli="--warmup-s", ge=0
    )
    # ...and until about this many requests per user have ended (steady state, not the
    # cold-start prefill wave) and the server answers at its own pace (a first-use compile
    # is over: load/runner.py), capped at warmup_max_s in all.
    warmup_requests_per_user: float = option(1.0, "warmup: requests ended per user", ge=0)
    warmup_max_s: float = option(
        60.0, "warmup cap, first-use compiles included (GPU seconds)", cli="--warmup-max-s", ge=0
    )
    window_s: float = option(8.0, "measured window per point (GPU seconds)", cli="--window-s", gt=0)
    # At low load a window holds few answers (under two at c = 1 from a slow model),
    # so latency and acceptance rest on one or two requests. A closed-loop window stays open
    # past window_s until this many requests have finished in it, up to max_window_s; where N
    # finish inside window_s (most levels) nothing changes. Every engine: on the simulator
    # too, an 8-s window at coding c = 1 held 2-4 answers (`--plan dense`).
    min_window_requests: int = option(
        8,
        "closed loop: keep a window open past --window-s until this many requests finished "
        "in it, up to --max-window-s",
        cli="--min-window-requests",
        ge=1,
    )
    max_window_s: float | None = option(
        None,
        "longest a window kept open by --min-window-requests (GPU seconds; --window-s: off)",
        cli="--max-window-s",
        help_default=f"{MAX_WINDOW_FACTOR:g} x --window-s",
        gt=0,
    )
    window_max_requests: int | None = option(None, "end a window after this many requests", ge=1)
    request_timeout_s: float = option(
        600.0, "per-request timeout (s)", cli="--request-timeout-s", gt=0
    )
    temperature: float = option(0.0, "sampling temperature", cli="--temperature", ge=0)
    seed: int = option(0, "prompt order seed", cli="--seed")
    repeats: int = option(1, "repeats per point", cli="--repeats", ge=1)
    error_budget: float = option(
        0.01, "fraction of requests in the window that may fail", ge=0, le=1
    )
    api_key: str | None = _secret("bearer token for the server", "--api-key", "SPECBENCH_API_KEY")
    # One event loop per client process (load/procs.py); 0 picks one per 64 users, at most
    # half the cores.
    client_procs: int = option(
        1, "client processes per point (0: automatic)", cli="--client-procs", ge=0
    )
    # Test knob: CPU burnt per network read in the client, to plant a slow client.
    planted_read_delay_us: float = option(
        0.0, "test knob: client CPU burnt per read", cli="--planted-read-delay-us", hidden=True
    )
    # As SGLang's bench_serving --extra-request-body and vLLM's --extra-body: merged into the
    # top level of every body (on /generate, sampling keys go into sampling_params); keys
    # specbench sets itself are refused. Where they go and why: load/protocols.py.
    extra_request_body: dict[str, Any] = option(
        {},
        "JSON object merged into every request body, e.g. '{\"top_k\": 20}'",
        cli="--extra-request-body",
    )
    ignore_eos: bool = option(
        False, "generate exactly max_tokens per request (SGLang ignore_eos)", cli="--ignore-eos"
    )
    # Open loop (load/arrivals.py): the levels are request rates instead of --concurrency.
    request_rates: tuple[float, ...] = option(
        (),
        "open loop: comma list of request rates (requests per GPU second) to sweep instead of "
        "--concurrency; inf sends the top --concurrency level's requests at once",
        cli="--request-rates",
        parse="rates",
    )
    burstiness: float = option(
        1.0, "open loop: gamma shape of the gaps between arrivals (1: Poisson, < 1: burstier)",
        cli="--burstiness", gt=0,
    )
    max_concurrency: int | None = option(
        None, "open loop: at most this many requests in flight (arrivals wait)",
        cli="--max-concurrency", help_default="no cap", ge=1,
    )
    slo: dict[str, float] = option(
        {},
        "latency SLOs for goodput, e.g. ttft_ms=2000,tpot_ms=40,e2e_ms=20000 (model ms; a "
        "request counts when it meets every one)",
        cli="--slo",
        parse="slo",
    )
    percentiles: tuple[int, ...] = option(
        (50, 90, 99), "latency percentiles shown in the summary and report (of 50,90,95,99)",
        cli="--percentiles", parse="csv_int",
    )

    @field_validator("request_rates")
    @classmethod
    def _positive_rates(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(not r > 0 for r in value):
            raise ConfigError("--request-rates: every rate must be > 0 (or inf); "
                              "give e.g. --request-rates 2,8,32,inf")
        return tuple(sorted(set(value)))

    @field_validator("percentiles")
    @classmethod
    def _known_percentiles(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(q not in (50, 90, 95, 99) for q in value):
            raise ConfigError(f"--percentiles {','.join(map(str, value))}: specbench keeps "
                              "p50, p90, p95 and p99; give some of them, e.g. 50,90,99")
        return tuple(sorted(set(value)))

    @field_validator("slo")
    @classmethod
    def _known_slo(cls, value: dict[str, float]) -> dict[str, float]:
        from specbench.goodput import SLO_KEYS

        for key, limit in value.items():
            if key not in SLO_KEYS or not limit > 0:
                raise ConfigError(f"slo {key}={limit}: keys are {', '.join(SLO_KEYS)}, each "
                                  "> 0 ms; give e.g. --slo ttft_ms=2000,tpot_ms=40")
        return value

    @field_validator("extra_request_body", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """The command line gives the object as JSON text; a TOML table arrives parsed."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"--extra-request-body {value!r} is not JSON ({exc}); "
                    "give one JSON object, e.g. --extra-request-body '{\"top_k\": 20}'"
                ) from None
        if not isinstance(value, dict):
            raise ConfigError(
                f"--extra-request-body must be a JSON object, not {value!r}; "
                "give e.g. --extra-request-body '{\"top_k\": 20}'"
            )
        return value

    def window_cap_s(self) -> float:
        """The longest a closed-loop window may stay open (GPU seconds)."""
        if self.max_window_s is not None:
            return self.max_window_s
        return MAX_WINDOW_FACTOR * self.window_s

    @model_validator(mode="after")
    def _cap_not_below_window(self) -> LoadConfig:
        if self.max_window_s is not None and self.max_window_s < self.window_s:
            raise ConfigError(
                f"--max-window-s {self.max_window_s:g} is below --window-s {self.window_s:g}; "
                "give a cap >= --window-s (equal turns --min-window-requests off)"
            )
        return self

    @model_validator(mode="after")
    def _measurable_extra_body(self) -> LoadConfig:
        if self.extra_request_body:
            # Imported here: the rules live with the bodies, and the CLI starts without them.
            from specbench.load.protocols import check_extra_body

            check_extra_body(self.extra_request_body, self.protocol)
        return self


class SweepConfig(_Section):
    """Everything one sweep needs; built by :func:`resolve`, recorded in the manifest."""

    engine: Engine = option("sim", "sim | sglang | attach", cli="--engine")
    # Every name configurations.parse() takes (tests/test_cli_help.py holds the two together).
    modes: tuple[str, ...] = option(
        configurations.DEFAULT_NAMES,
        "comma list of server configurations: baseline, eagle3, dynamic, zero-step, "
        "sglang-default, tuned, eagle3-k<K> (static EAGLE-3 at K steps), dynamic-t<T> "
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


SECTIONS: dict[str, type[_Section]] = {"server": ServerConfig, "sim": SimConfig, "load": LoadConfig}
