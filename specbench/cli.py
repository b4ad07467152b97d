"""The `specbench` command: parse, validate once, call the library. No logic lives here.

Every error a user can cause ends as one line on stderr (`error: <cause>; <fix>`) and exit
code 2; an interrupted sweep exits 130 (SIGINT) or 128+signal.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from specbench import config as config_mod
from specbench.config import ConfigError

app = typer.Typer(
    name="specbench",
    help="Find the load at which EAGLE-3 speculative decoding stops paying off in SGLang.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
reference_app = typer.Typer(
    help="Stored CI references (results/reference/<name>).", no_args_is_help=True
)
app.add_typer(reference_app, name="reference")

T = TypeVar("T")


def _fail(message: str, code: int = 2) -> None:
    Console(stderr=True, soft_wrap=True).print(f"error: {message}", markup=False, highlight=False)
    raise typer.Exit(code)


def _user_errors() -> tuple[type[BaseException], ...]:
    from specbench import prompts, results
    from specbench.engines.process import ServerStartError
    from specbench.sweep import SweepError

    errors: list[type[BaseException]] = [
        ConfigError,
        results.RunDirError,
        ServerStartError,
        SweepError,
        prompts.PromptSetError,
    ]
    try:
        from specbench.analysis import AnalysisError

        errors.append(AnalysisError)
    except ImportError:
        pass
    return tuple(errors)


def _guard(fn: Callable[[], T]) -> T:
    """Run a library call; user errors become one line and exit 2."""
    try:
        return fn()
    except _user_errors() as exc:
        # Server failures carry the log's last lines after the first line; the rest is one line.
        _fail(str(exc).strip())
        raise AssertionError("unreachable") from None


def _given(**values: Any) -> dict[str, Any]:
    """Only the options given on the command line (None means "not given")."""
    return {k: v for k, v in values.items() if v is not None}


def _split(values: list[str] | None) -> tuple[str, ...] | None:
    """Flags given as one string each (`--sim-arg="--sim-stall-s 3"`), parsed like a shell
    would quote them; nothing is ever run through a shell."""
    if not values:
        return None
    return tuple(v for value in values for v in shlex.split(value))


@app.command()
def sweep(
    engine: Annotated[str | None, typer.Option(help="sim (default) | sglang | attach")] = None,
    modes: Annotated[str | None, typer.Option(help="comma list of baseline,eagle3,dynamic")] = None,
    prompts: Annotated[
        str | None, typer.Option("--prompts", help="comma list of prompt sets or JSONL paths")
    ] = None,
    concurrency: Annotated[
        str | None, typer.Option(help="comma list, default 1,2,4,8,16,32,64,128,250")
    ] = None,
    threshold: Annotated[
        str | None, typer.Option(help="auto (from the crossover) or a batch size")
    ] = None,
    config_file: Annotated[
        Path | None, typer.Option("--config", help="TOML file with sweep options")
    ] = None,
    resume: Annotated[Path | None, typer.Option(help="continue this run directory")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="a short sweep for demos and CI")] = False,
    preset: Annotated[str | None, typer.Option(help="named option set: quick | ci")] = None,
    repeats: Annotated[int | None, typer.Option(help="repeats per point")] = None,
    protocol: Annotated[
        str | None, typer.Option(help="openai-chat | openai-completions | sglang-native")
    ] = None,
    model_path: Annotated[
        str | None, typer.Option(help="target model (SGLang --model-path)")
    ] = None,
    draft_model_path: Annotated[str | None, typer.Option(help="EAGLE-3 draft model")] = None,
    tp_size: Annotated[int | None, typer.Option(help="tensor parallel size")] = None,
    max_running_requests: Annotated[
        int | None,
        typer.Option(help="server limit, equal for all modes (default: largest concurrency)"),
    ] = None,
    spec_steps: Annotated[
        int | None, typer.Option(help="EAGLE-3 draft steps K (topk 1, K+1 draft tokens)")
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="server bind address (default 127.0.0.1)")
    ] = None,
    port: Annotated[int | None, typer.Option(help="server port")] = None,
    server_command: Annotated[
        str | None, typer.Option(help="SGLang launcher, e.g. 'sglang serve'")
    ] = None,
    server_arg: Annotated[
        list[str] | None, typer.Option(help="extra SGLang flag(s), repeatable")
    ] = None,
    skip_zero_step_draft_extend: Annotated[
        bool | None, typer.Option(help="dynamic mode: SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1")
    ] = None,
    cuda_graph_bs_decode: Annotated[
        str | None, typer.Option(help="comma list passed as --cuda-graph-bs-decode")
    ] = None,
    sim_profile: Annotated[
        str | None, typer.Option(help="simulator profile name or TOML path")
    ] = None,
    sim_time_scale: Annotated[
        float | None, typer.Option(help="simulator speed-up over real time")
    ] = None,
    sim_seed: Annotated[int | None, typer.Option(help="simulator seed")] = None,
    sim_arg: Annotated[
        list[str] | None, typer.Option(help="extra --sim-* flag(s), repeatable")
    ] = None,
    attach: Annotated[
        list[str] | None, typer.Option(help="MODE=URL of a running server, repeatable")
    ] = None,
    warmup_s: Annotated[
        float | None, typer.Option(help="unmeasured load before each window (GPU seconds)")
    ] = None,
    window_s: Annotated[
        float | None, typer.Option(help="measured window per point (GPU seconds)")
    ] = None,
    request_timeout_s: Annotated[float | None, typer.Option(help="per-request timeout")] = None,
    temperature: Annotated[
        float | None, typer.Option(help="sampling temperature (default 0)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="prompt order seed")] = None,
    results_dir: Annotated[Path | None, typer.Option(help="where run directories go")] = None,
    run_name: Annotated[str | None, typer.Option(help="run directory name")] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="SPECBENCH_API_KEY", help="bearer token for the server")
    ] = None,
    max_point_retries: Annotated[
        int | None, typer.Option(help="restarts of a server that dies mid-point")
    ] = None,
    planted_read_delay_us: Annotated[
        float | None, typer.Option(hidden=True, help="test knob: client CPU burnt per read")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print server commands and the plan only")
    ] = False,
) -> None:
    """Launch the servers, sweep concurrency, and leave a complete run directory."""
    from specbench import sweep as sweep_mod

    def parse() -> tuple[config_mod.SweepConfig, dict[str, Any]]:
        layers: dict[str, Any] = {}
        chosen = preset or ("quick" if quick else None)
        if chosen:
            if chosen not in config_mod.PRESETS:
                raise ConfigError(
                    f"unknown preset {chosen!r}; choose from {', '.join(config_mod.PRESETS)}"
                )
            layers = config_mod.merge(layers, config_mod.PRESETS[chosen])
        if config_file is not None:
            layers = config_mod.merge(layers, config_mod.load_toml(config_file))
        cli: dict[str, Any] = {}
        if engine is not None:
            cli["engine"] = engine
        if modes is not None:
            cli["modes"] = config_mod.parse_names(modes, config_mod.MODES, "mode")
        if prompts is not None:
            cli["prompt_sets"] = config_mod.parse_names(prompts, None, "prompt set")
        if concurrency is not None:
            cli["concurrency"] = config_mod.parse_concurrency(concurrency)
        if threshold is not None:
            cli["threshold"] = config_mod.parse_threshold(threshold)
        if results_dir is not None:
            cli["results_dir"] = results_dir
        if run_name is not None:
            cli["run_name"] = run_name
        if max_point_retries is not None:
            cli["max_point_retries"] = max_point_retries
        if attach:
            pairs = []
            for item in attach:
                mode, sep, url = item.partition("=")
                if not sep or not url.startswith(("http://", "https://")):
                    raise ConfigError(
                        f"--attach {item!r} is not MODE=URL; use e.g. --attach baseline=http://10.0.0.5:30000"
                    )
                pairs.append((mode, url))
            cli["attach"] = tuple(pairs)
        server = _given(
            model_path=model_path,
            draft_model_path=draft_model_path,
            tp_size=tp_size,
            max_running_requests=max_running_requests,
            speculative_num_steps=spec_steps,
            host=host,
            port=port,
            skip_zero_step_draft_extend=skip_zero_step_draft_extend,
        )
        if server_command is not None:
            server["server_command"] = tuple(server_command.split())
        if server_arg:
            server["extra_args"] = _split(server_arg)
        if cuda_graph_bs_decode is not None:
            server["cuda_graph_bs_decode"] = config_mod.parse_concurrency(cuda_graph_bs_decode)
        sim = _given(profile=sim_profile, time_scale=sim_time_scale, seed=sim_seed)
        if sim_arg:
            sim["extra_args"] = _split(sim_arg)
        load = _given(
            protocol=protocol,
            warmup_s=warmup_s,
            window_s=window_s,
            request_timeout_s=request_timeout_s,
            temperature=temperature,
            seed=seed,
            repeats=repeats,
            api_key=api_key,
            planted_read_delay_us=planted_read_delay_us,
        )
        for name, section in (("server", server), ("sim", sim), ("load", load)):
            if section:
                cli[name] = section
        if resume is not None:
            # The stored config is the base; only what this command line says explicitly
            # (preset and config file included) must match it.
            return config_mod.SweepConfig(), config_mod.merge(layers, cli)
        cfg = config_mod.build(config_mod.merge(layers, cli))
        config_mod.validate(cfg)
        return cfg, {}

    cfg, overrides = _guard(parse)
    console = Console()
    if dry_run:
        _guard(lambda: sweep_mod.dry_run(cfg, console))
        return
    try:
        _guard(
            lambda: sweep_mod.run_sweep(
                cfg, console=console, command=sys.argv, resume=resume, overrides=overrides
            )
        )
    except sweep_mod.SweepInterrupted as exc:
        Console(stderr=True).print(
            f"interrupted ({exc.signame}): servers stopped, finished points kept; "
            "continue with specbench sweep --resume RUN_DIR"
        )
        raise typer.Exit(exc.exit_code) from None


def _load(run_dir: Path) -> Any:
    from specbench import results

    return _guard(lambda: results.load_run(run_dir))


@app.command()
def plot(run_dir: Path) -> None:
    """Write the figures (PNG and SVG) into RUN_DIR/plots."""
    from specbench import plots

    run = _load(run_dir)
    paths = _guard(lambda: plots.plot_run(run))
    for path in paths:
        print(path)


@app.command()
def report(run_dir: Path) -> None:
    """Print the summary tables and write RUN_DIR/report.md."""
    from specbench import analysis
    from specbench import report as report_mod

    run = _load(run_dir)
    if {"baseline", "eagle3"} <= set(run.modes):
        run.analysis = _guard(lambda: analysis.write_analysis(run))
    console = Console()
    report_mod.render_terminal(run, console)
    path = _guard(lambda: report_mod.write_report(run))
    console.print(f"report: {path}")


@app.command()
def threshold(
    run_dir: Path,
    write_adaptive_config: Annotated[
        Path | None, typer.Option(help="write SGLang's adaptive JSON here")
    ] = None,
) -> None:
    """Print the crossover and the recommended batch-size threshold."""
    from specbench import analysis
    from specbench.engines.argv import write_adaptive_config as write_cfg

    run = _load(run_dir)
    found = _guard(lambda: analysis.write_analysis(run))
    run.analysis = found
    print(analysis.threshold_summary(run))
    if write_adaptive_config is not None:
        steps = int(
            run.manifest.get("config", {}).get("server", {}).get("speculative_num_steps", 3)
        )
        write_cfg(write_adaptive_config, steps, int(found["recommended_threshold"]))
        print(f"adaptive config: {write_adaptive_config}")


@app.command()
def regress(
    reference: Annotated[Path, typer.Option(help="reference run directory")],
    candidate: Annotated[Path, typer.Option(help="candidate run directory")],
    json_out: Annotated[
        Path | None, typer.Option("--json", help="write the verdict as JSON here")
    ] = None,
    warn_pct: Annotated[float | None, typer.Option(help="throughput drop that warns (%)")] = None,
    fail_pct: Annotated[float | None, typer.Option(help="throughput drop that fails (%)")] = None,
    accept_fail_pct: Annotated[
        float | None, typer.Option(help="acceptance drop that fails (%)")
    ] = None,
    allow_config_change: Annotated[
        list[str] | None,
        typer.Option(help="manifest setting allowed to differ, e.g. sim.profile (repeatable)"),
    ] = None,
) -> None:
    """Compare a candidate run with a reference: exit 0 ok, 1 regression, 2 unusable input."""
    from specbench import regress as regress_mod

    code = regress_mod.main(
        reference,
        candidate,
        json_path=json_out,
        warn_pct=warn_pct,
        fail_pct=fail_pct,
        accept_fail_pct=accept_fail_pct,
        console=Console(),
        allow_config_changes=tuple(allow_config_change or ()),
    )
    raise typer.Exit(code)


@reference_app.command("update")
def reference_update(
    run_dir: Path,
    name: Annotated[str, typer.Option(help="reference name under results/reference/")] = "sim-ci",
    reference_root: Annotated[Path, typer.Option(help="where references live")] = Path(
        "results/reference"
    ),
) -> None:
    """Store RUN_DIR's manifest and summary as the CI reference NAME (deliberately)."""
    from specbench import results

    run = _load(run_dir)
    target = _guard(lambda: results.store_reference(run, reference_root / name))
    print(f"reference written: {target}")


@app.command(
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    }
)
def sim(ctx: typer.Context) -> None:
    """Run the simulated SGLang server on its own: specbench sim <sglang flags> [--sim-*]."""
    from specbench.sim.__main__ import main as sim_main

    raise typer.Exit(sim_main(list(ctx.args)) or 0)


def _add_prompts_app() -> None:
    try:
        from specbench.prompts_cli import prompts_app
    except ImportError:
        return
    app.add_typer(prompts_app, name="prompts")


_add_prompts_app()


def main() -> None:  # pragma: no cover - console entry point for `python -m specbench`
    app()
