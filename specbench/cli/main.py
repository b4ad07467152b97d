"""The `specbench` command: parse, build the config once, make one call into the library.

The sweep's options are generated from the config schema (`options.py`). Every error a user
can cause is a `UserError`; it ends as one line on stderr (`error: <cause>; <fix>`, `guard.py`)
and exit code 2. An interrupted sweep exits 130 (SIGINT) or 128+signal.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from specbench import config as config_mod
from specbench import presets
from specbench.cli.guard import fail, guard
from specbench.cli.options import cli_layer, default_text, help_with_default, sweep_signature

if TYPE_CHECKING:  # annotations only: --help imports neither pandas nor pydantic's models
    from specbench.configurations import Schedule
    from specbench.results import Run
    from specbench.results.analysis import Analysis

EXPLAIN_FILE_WIDTH = 150  # explain's widest table, intervals included, written to a file

app = typer.Typer(
    name="specbench",
    help="Find the load at which EAGLE-3 speculative decoding stops paying off in SGLang.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Set, not left to typer's version: option help carries rich-escaped `[default: ...]` tags.
    rich_markup_mode="rich",
)
reference_app = typer.Typer(
    help="Stored CI references (results/reference/<name>).", no_args_is_help=True
)
app.add_typer(reference_app, name="reference")


def _run_sweep(
    *,
    config_file: Path | None,
    resume: Path | None,
    quick: bool,
    preset: str | None,
    dry_run: bool,
    base: dict[str, Any] | None = None,
    **values: Any,
) -> None:
    """Launch the servers, sweep concurrency, and leave a complete run directory."""
    cli_values = guard(lambda: cli_layer(values))
    chosen = preset or ("quick" if quick else None)
    if resume is not None:
        from specbench.run import rundir

        cfg = guard(
            lambda: rundir.resume_config(
                resume, cli_values, preset=chosen, config_file=config_file
            )
        )
    else:
        cfg = guard(
            lambda: config_mod.resolve(
                cli_values, preset=chosen, config_file=config_file, base=base
            )
        )
    # Imported once the options are known good: a refused option costs no pandas or aiohttp
    # import (about 0.9 s of CPU).
    from specbench.run import execute, plan
    from specbench.run import sweep as sweep_mod

    console = Console()
    if dry_run:
        guard(lambda: plan.dry_run(cfg, console))
        return
    try:
        run_dir = guard(
            lambda: execute.run_sweep(cfg, console=console, command=sys.argv, resume=resume)
        )
    except sweep_mod.SweepInterrupted as exc:
        Console(stderr=True).print(
            f"interrupted ({exc.signame}): servers stopped, finished points kept; "
            f"continue with specbench sweep --resume {exc.run_dir or 'RUN_DIR'}"
        )
        raise typer.Exit(exc.exit_code) from None
    guard(lambda: _conclude(run_dir, console))


def _conclude(run_dir: Path, console: Console) -> None:
    """Analysis, plots and report once every point is in."""
    from specbench import analysis, configurations, results
    from specbench.report import document as report_mod
    from specbench.report.why import explained

    run = results.load_run(run_dir)
    if configurations.analyzable(run.modes):
        run.analysis = analysis.write_analysis(run)
    draw = not run.manifest.config.no_plots
    if draw:
        from specbench.report import plots  # matplotlib: most of a second, only to draw

        try:
            plots.plot_run(run)
        except Exception as exc:  # a figure failing must not hide the measured numbers
            console.print(f"[yellow]warning:[/] plots failed ({exc})")
    sets = explained(run)  # the logs read once for both
    report_mod.write_report(run, sets=sets, draw=draw)
    report_mod.render_terminal(run, console, sets=sets)
    console.print(f"report: {run_dir / 'report.md'}"
                  + ("" if draw else f" (no figures: specbench report {run_dir} draws them)"))


def sweep(**kwargs: Any) -> None:
    """Launch the servers, sweep concurrency, and leave a complete run directory."""
    _run_sweep(**kwargs)


sweep.__signature__ = sweep_signature()  # type: ignore[attr-defined]
app.command()(sweep)


def tune(**kwargs: Any) -> None:
    """Tune a steps schedule: EAGLE-3 at K = 1, 2, 3, 5, zero-step and SGLang's default
    adaptive, the best K (zero-step where faster) as SGLang's adaptive JSON, then that server."""
    _run_sweep(base=presets.TUNE_LAYER, **kwargs)


tune.__signature__ = sweep_signature(presets.TUNE_LAYER)  # type: ignore[attr-defined]
app.command()(tune)


# ---------------------------------------------------------------------------------------------
# Readers of a run directory.


def _load(run_dir: Path) -> Run:
    from specbench import results

    return guard(lambda: results.load_run(run_dir))


@app.command()
def plot(run_dir: Path) -> None:
    """Write the figures (PNG and SVG) into RUN_DIR/plots."""
    from specbench.report import plots

    run = _load(run_dir)
    for path in guard(lambda: plots.plot_run(run)):
        print(path)


@app.command()
def report(
    run_dir: Path,
    relaunch: Annotated[
        Path | None,
        typer.Option(help="a run of the same servers on another launch: the c* and T "
                          "intervals then carry how far each configuration moved between the two"),
    ] = None,
    no_plots: Annotated[
        bool, typer.Option("--no-plots", help="draw no figures: the report shows those already "
                                              "in RUN_DIR/plots (specbench plot draws them)")
    ] = False,
) -> None:
    """Print the summary tables and write RUN_DIR/report.md."""
    from specbench import analysis, configurations
    from specbench.report import document as report_mod
    from specbench.report.why import explained

    run = _load(run_dir)
    second = _load(relaunch) if relaunch is not None else None
    if configurations.analyzable(run.modes):
        guard(lambda: analysis.write_analysis(run, relaunch=second))
    console = Console()
    sets = explained(run)  # the logs read once for both
    report_mod.render_terminal(run, console, sets=sets)
    path = guard(lambda: report_mod.write_report(run, sets=sets, draw=not no_plots))
    console.print(f"report: {path}")


@app.command()
def threshold(
    run_dir: Path,
    write_adaptive_config: Annotated[
        Path | None, typer.Option(help="write SGLang's adaptive JSON here")
    ] = None,
    prompt_set: Annotated[
        str | None, typer.Option(help="the prompt set whose threshold or schedule to write")
    ] = None,
) -> None:
    """Print the decisions and write the adaptive JSON for one server (tuned schedule if any)."""
    from specbench import analysis

    run = _load(run_dir)
    found = guard(lambda: analysis.write_analysis(run))
    print(analysis.threshold_summary(run))
    if write_adaptive_config is not None:
        from specbench.analysis.context import context_text
        from specbench.engines.argv import write_adaptive_config as write_schedule

        name = guard(lambda: _chosen_set(found, prompt_set))
        schedule = guard(lambda: _chosen_schedule(run, found, name))
        context = context_text(name, found["prompt_sets"].get(name) or {})
        write_schedule(write_adaptive_config, schedule, context=context)
        print(f"adaptive config: {write_adaptive_config} {schedule.to_json()}")
        print(f"context: {context}")


@app.command()
def explain(run_dir: Path) -> None:
    """Why EAGLE-3 wins or loses per level: acceptance x step cost x the rest; writes
    RUN_DIR/explain.json."""
    from specbench.analysis import explain as explain_mod
    from specbench.report import why

    run = _load(run_dir)
    sets, path = guard(lambda: explain_mod.write_explain(run))
    console = Console()
    if not console.is_terminal:  # a file or a pipe: room for the tables' intervals
        console = Console(width=EXPLAIN_FILE_WIDTH)
    why.render_terminal(sets, console)
    console.print(f"explain: {path}", highlight=False)


def _chosen_set(found: Analysis, prompt_set: str | None) -> str:
    """The prompt set whose schedule to deploy: the one named, the run's only one, or the
    measured mix; one line when the run cannot say which."""
    from specbench.analysis.mix import MIX_SET
    from specbench.errors import ConfigError

    sets = found["prompt_sets"]
    if prompt_set is not None:
        if prompt_set not in sets:
            raise ConfigError(
                f"prompt set {prompt_set!r} is not in this run; choose from {', '.join(sets)}")
        return prompt_set
    if len(sets) == 1:
        return str(next(iter(sets)))
    if found.get("recommended_threshold") is None:
        raise ConfigError(
            f"this run has per-set thresholds ({', '.join(sets)}) and no measured mix; "
            "pass --prompt-set NAME, or measure a mix with specbench sweep --mix"
        )
    return MIX_SET


def _chosen_schedule(run: Run, found: Analysis, name: str) -> Schedule:
    """The schedule to deploy for a set (from :func:`_chosen_set`): its tuned schedule or
    one-server threshold, or for the mix the recommended threshold."""
    from specbench import analysis
    from specbench.analysis.mix import chosen_threshold
    from specbench.configurations import Schedule

    entry = found["prompt_sets"].get(name)
    if entry is None:  # the mix without a set of its own: the recommendation
        recommended = found["recommended_threshold"]
        if recommended is None:
            raise TypeError("a mix chosen without a recommended threshold")
        return Schedule.from_threshold(analysis.speculative_num_steps(run), int(recommended))
    slots = (entry.get("schedule") or {}).get("slots")
    if slots:
        return Schedule.from_slots(slots)
    return Schedule.from_threshold(analysis.speculative_num_steps(run), chosen_threshold(entry))


# regress/thresholds.py's Thresholds() defaults, repeated here so that --help does not import the
# regress package (and pandas with it); tests/test_cli_help.py holds the two together.
REGRESS_DEFAULT_PCT = {"warn_pct": 2.5, "fail_pct": 5.0, "accept_fail_pct": 10.0}
# The same for the latency and goodput limits (tests/test_regress_latency.py holds these).
REGRESS_LATENCY_DEFAULTS: dict[str, Any] = {
    "latency_fail_pct": 5.0, "goodput_fail_pct": 5.0,
    "latency_metrics": "ttft_ms_p50,ttft_ms_p90,tpot_ms_p50,tpot_ms_p90",
}


def _pct_help(text: str, name: str) -> str:
    return help_with_default(
        text, default_text({**REGRESS_DEFAULT_PCT, **REGRESS_LATENCY_DEFAULTS}[name]))


@app.command()
def regress(
    reference: Annotated[Path, typer.Option(help="reference run directory")],
    candidate: Annotated[Path, typer.Option(help="candidate run directory")],
    json_out: Annotated[
        Path | None, typer.Option("--json", help="write the verdict as JSON here")
    ] = None,
    warn_pct: Annotated[
        float | None, typer.Option(help=_pct_help("throughput drop that warns (%)", "warn_pct"))
    ] = None,
    fail_pct: Annotated[
        float | None, typer.Option(help=_pct_help("throughput drop that fails (%)", "fail_pct"))
    ] = None,
    accept_fail_pct: Annotated[
        float | None,
        typer.Option(help=_pct_help("acceptance drop that fails (%)", "accept_fail_pct")),
    ] = None,
    allow_config_change: Annotated[
        list[str] | None,
        typer.Option(help="manifest setting allowed to differ, e.g. sim.profile (repeatable)"),
    ] = None,
    latency: Annotated[
        str | None,
        typer.Option(help=_pct_help("latency columns gated, comma list", "latency_metrics")),
    ] = None,
    latency_fail_pct: Annotated[
        float | None,
        typer.Option(help=_pct_help("latency percentile rise that fails (%)", "latency_fail_pct")),
    ] = None,
    goodput_fail_pct: Annotated[
        float | None,
        typer.Option(help=_pct_help("goodput drop that fails (%)", "goodput_fail_pct")),
    ] = None,
    relaunch: Annotated[
        Path | None,
        typer.Option(help="the reference's second launch; default REFERENCE/relaunch if there"),
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
        relaunch_dir=relaunch,
        latency_fail_pct=latency_fail_pct,
        goodput_fail_pct=goodput_fail_pct,
        latency_metrics=None if latency is None else tuple(
            m.strip() for m in latency.split(",") if m.strip()),
    )
    raise typer.Exit(code)


@reference_app.command("update")
def reference_update(
    run_dir: Path,
    # No default: a default would silently overwrite `sim-ci`, the simulator's CI reference.
    # Optional to typer so that a missing --name is our one `error:` line, not click's box.
    name: Annotated[
        str | None,
        typer.Option(help="reference name under results/reference/ (required), e.g. sim-ci"),
    ] = None,
    reference_root: Annotated[Path, typer.Option(help="where references live")] = Path(
        "results/reference"
    ),
) -> None:
    """Store RUN_DIR's manifest and summary as the CI reference NAME (deliberately)."""
    from specbench import results

    if not name:
        fail(
            "reference update needs --name: no reference is written by default; "
            f"name the one to write, e.g. specbench reference update {run_dir} --name sim-ci"
        )
    run = _load(run_dir)
    target = guard(lambda: results.store_reference(run, reference_root / name))
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
    from specbench.cli.prompts import prompts_app

    app.add_typer(prompts_app, name="prompts")


_add_prompts_app()


def _add_feature_commands() -> None:
    # Each lives with its feature and imports its heavy parts only when run.
    from specbench.cli.compare import compare
    from specbench.cli.export import export
    from specbench.cli.shard import SLURM_CONTEXT, merge, slurm

    app.command()(compare)
    app.command()(export)
    app.command()(merge)
    app.command(context_settings=SLURM_CONTEXT)(slurm)


_add_feature_commands()


def main() -> None:  # pragma: no cover - console entry point for `python -m specbench`
    app()
