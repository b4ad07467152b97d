"""`specbench sweep`: servers up, points measured, results on disk, the decision at the end.

Order (DESIGN §2): baseline, eagle3, then the threshold from their curves, then the dynamic
server with that threshold (plus levels that straddle it). Every point is written the moment it
is measured; the manifest records each point's status, so an interrupted or crashed sweep keeps
everything finished and `--resume RUN_DIR` measures only what is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import shlex
import signal
import socket
import sys
import time
import urllib.error
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import specbench
from specbench import config as config_mod
from specbench import metrics, prompts, results
from specbench.config import ConfigError, SweepConfig
from specbench.engines import argv as argv_mod
from specbench.engines import attach as attach_mod
from specbench.engines import sglang as sglang_mod
from specbench.engines import simulated
from specbench.engines.process import ServerProcess, ServerStartError, http_get, port_is_free
from specbench.load import runner
from specbench.results import PointKey

MODE_ORDER = ("baseline", "eagle3", "dynamic")


class SweepError(RuntimeError):
    """The sweep cannot go on; the message says what happened and what to do."""


class SweepInterrupted(BaseException):
    """SIGINT / SIGTERM / SIGHUP during a sweep; carries the exit code to use."""

    def __init__(self, signame: str, exit_code: int) -> None:
        super().__init__(signame)
        self.signame = signame
        self.exit_code = exit_code


@dataclass
class Server:
    """A server the sweep measures against, launched or attached."""

    mode: str
    base_url: str
    argv: list[str]
    env: dict[str, str]
    time_scale: float
    info: dict[str, Any] = field(default_factory=dict)
    process: ServerProcess | None = None
    log_path: Path | None = None
    label: str | None = None  # prompt sets a per-set dynamic server serves, for file names

    def alive(self) -> bool:
        return self.process is None or self.process.alive()

    def stop(self, grace_s: float) -> None:
        if self.process is not None:
            self.process.stop(grace_s)


# ---------------------------------------------------------------------------------------------
# Preparation: everything that can be refused before a server starts.


def preflight(cfg: SweepConfig) -> dict[str, prompts.PromptSet]:
    """Validate inputs that need the file system or the network stack; raise ConfigError."""
    config_mod.validate(cfg)
    sets: dict[str, prompts.PromptSet] = {}
    for name in cfg.prompt_sets:
        try:
            ps = prompts.load_prompt_set(name)
        except prompts.PromptSetError as exc:
            raise ConfigError(str(exc)) from None
        if ps.name in sets:
            raise ConfigError(f"two prompt sets are named {ps.name!r}; rename one of the files")
        sets[ps.name] = ps  # a file path is keyed by its stem, the name results use
    if cfg.engine == "sglang":
        for label, path in (
            ("model", cfg.server.model_path),
            ("draft model", cfg.server.draft_model_path),
        ):
            if (
                path
                and path.startswith(("/", "./", "../", "~"))
                and not Path(path).expanduser().exists()
            ):
                raise ConfigError(
                    f"{label} path {path} does not exist; "
                    "pass an existing directory or a Hugging Face model id"
                )
    if cfg.engine in ("sim", "sglang") and not port_is_free(cfg.server.host, cfg.server.port):
        raise ConfigError(
            f"port {cfg.server.port} on {cfg.server.host} is already in use; stop what listens "
            "there or pass another --port"
        )
    return sets


def time_scale_of(cfg: SweepConfig) -> float:
    return cfg.sim.time_scale if cfg.engine == "sim" else 1.0


def server_command(mode: str, cfg: SweepConfig, adaptive_path: Path | None) -> list[str]:
    if cfg.engine == "sim":
        return simulated.sim_command(
            mode, cfg, port=cfg.server.port, adaptive_config_path=adaptive_path
        )
    return sglang_mod.launch_command(
        mode,
        cfg.server,
        port=cfg.server.port,
        max_running_requests=cfg.max_running_requests,
        adaptive_config_path=adaptive_path,
    )


def levels_for(mode: str, cfg: SweepConfig, threshold: int | None) -> list[int]:
    levels = set(cfg.concurrency)
    if mode == "dynamic" and threshold is not None:
        from specbench import analysis

        extra = analysis.threshold_levels(threshold, sorted(levels))
        levels |= {c for c in extra if 1 <= c <= cfg.max_running_requests}
    return sorted(levels)


def estimate_s(cfg: SweepConfig, n_points: int) -> float:
    per_point = (cfg.load.warmup_s + cfg.load.window_s) / time_scale_of(cfg) + 1.0
    start = 5.0 if cfg.engine == "sim" else 300.0
    return n_points * per_point + len(cfg.modes) * start


def dry_run(cfg: SweepConfig, console: Console) -> None:
    """Print the server commands and the plan; launch nothing."""
    config_mod.validate(cfg)
    threshold = cfg.threshold or config_mod.DEFAULT_FIXED_THRESHOLD
    console.print(f"[bold]specbench sweep plan[/] (engine {cfg.engine}, nothing launched)")
    n_points = 0
    for mode in [m for m in MODE_ORDER if m in cfg.modes]:
        adaptive = Path("<run>/servers/dynamic.adaptive.json") if mode == "dynamic" else None
        if cfg.engine == "attach":
            url = dict(cfg.attach).get(mode, "?")
            console.print(f"{mode}: attach {url}")
        else:
            cmd = server_command(mode, cfg, adaptive)
            env = argv_mod.server_env(mode, cfg.server)
            prefix = " ".join(f"{k}={v}" for k, v in env.items())
            console.print(
                f"{mode}: {prefix + ' ' if prefix else ''}{' '.join(cmd)}", soft_wrap=True
            )
        if mode == "dynamic":
            source = (
                "given"
                if cfg.threshold
                else "computed after the baseline and eagle3 runs; shown with"
            )
            console.print(
                f"  adaptive config ({source} T={threshold}): "
                + json.dumps(argv_mod.adaptive_config(cfg.server.speculative_num_steps, threshold))
            )
        levels = levels_for(mode, cfg, threshold)
        n = len(levels) * len(cfg.prompt_sets) * cfg.load.repeats
        n_points += n
        console.print(
            f"  {n} points: prompt sets {','.join(cfg.prompt_sets)} x concurrency "
            f"{','.join(map(str, levels))} x {cfg.load.repeats} repeat(s)"
        )
    minutes = estimate_s(cfg, n_points) / 60
    console.print(f"{n_points} points in all; estimated {minutes:.1f} min")


# ---------------------------------------------------------------------------------------------
# Run directory and manifest.


def _host_info() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_count": os.cpu_count(),
    }


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
    (run_dir / "servers").mkdir(parents=True, exist_ok=True)
    return run_dir


class Manifest:
    """The run's manifest.json, rewritten atomically after each change."""

    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    def save(self) -> None:
        results.write_json_atomic(self.path, self.data)

    def set_point(self, key: PointKey, **fields: Any) -> None:
        self.data.setdefault("points", {})[key.label] = fields
        self.save()


def create_manifest(
    run_dir: Path, cfg: SweepConfig, sets: dict[str, prompts.PromptSet], command: list[str]
) -> Manifest:
    engine_version = None
    gpu = None
    if cfg.engine == "sglang":
        engine_version = sglang_mod.sglang_version(sys.executable)
        gpu = sglang_mod.gpu_info()
    elif cfg.engine == "sim":
        engine_version = f"specbench.sim {specbench.__version__}"
    data = {
        "schema_version": results.SCHEMA_VERSION,
        "specbench_version": specbench.__version__,
        "command": redact(command),
        "config": config_mod.to_dict(cfg),
        "seed": cfg.load.seed,
        "host": _host_info(),
        "gpu": gpu,
        "engine": {"kind": cfg.engine, "version": engine_version},
        "time_scale": time_scale_of(cfg),
        "prompt_sets": {
            n: {"path": str(ps.path), "sha256": ps.sha256, "n_requests": len(ps.requests)}
            for n, ps in sets.items()
        },
        "modes": {},
        "threshold": None,
        "started_at": results.utc_now(),
        "ended_at": None,
        "status": "running",
        "points": {},
    }
    manifest = Manifest(run_dir / "manifest.json", data)
    manifest.save()
    return manifest


def redact(command: list[str]) -> list[str]:
    """Drop secrets from a recorded command line."""
    out: list[str] = []
    hide_next = False
    for arg in command:
        if hide_next:
            out.append("***")
            hide_next = False
        elif arg in ("--api-key",):
            out.append(arg)
            hide_next = True
        elif arg.startswith("--api-key="):
            out.append("--api-key=***")
        else:
            out.append(arg)
    return out


def open_resume(run_dir: Path, overrides: dict[str, Any]) -> tuple[SweepConfig, Manifest]:
    """Load a run to continue; refuse when the asked config differs from the stored one."""
    try:
        run = results.load_run(run_dir)
    except results.RunDirError as exc:
        raise ConfigError(f"cannot resume: {exc}") from None
    stored_raw = run.manifest.get("config")
    if not isinstance(stored_raw, dict):
        raise ConfigError(f"cannot resume {run_dir}: its manifest has no config; start a new run")
    stored = config_mod.from_dict(stored_raw)
    wanted = config_mod.from_dict(config_mod.merge(stored_raw, overrides))
    wanted = _keep_secrets(wanted, overrides)
    diffs = [
        d for d in config_mod.differences(stored, wanted) if d not in ("results_dir", "run_name")
    ]
    if diffs:
        first = diffs[0]
        raise ConfigError(
            f"cannot resume {run_dir}: {first} differs from the stored run "
            f"({_field(stored, first)!r} vs {_field(wanted, first)!r}); "
            "drop that option or start a new run"
        )
    return wanted, Manifest(run_dir / "manifest.json", run.manifest)


def _keep_secrets(cfg: SweepConfig, overrides: dict[str, Any]) -> SweepConfig:
    key = overrides.get("load", {}).get("api_key")
    if key:
        import dataclasses

        return dataclasses.replace(cfg, load=dataclasses.replace(cfg.load, api_key=key))
    return cfg


def _field(cfg: SweepConfig, dotted: str) -> Any:
    value: Any = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


# ---------------------------------------------------------------------------------------------
# Servers.


def start_server(
    mode: str, cfg: SweepConfig, run_dir: Path, threshold: int | None, label: str | None = None
) -> Server:
    if cfg.engine == "attach":
        url = dict(cfg.attach)[mode]
        attach_mod.wait_ready(url, timeout_s=min(cfg.server.ready_timeout_s, 60.0))
        info = attach_mod.fetch_server_info(url)
        found = sglang_mod.detect_mode(info)
        if found != mode:
            raise ServerStartError(
                f"--attach {mode}={url} serves a {found} server according to /server_info; "
                f"attach it as {found}= or point {mode}= at the right server"
            )
        launch = info.get("launch_command") or []
        argv = shlex.split(launch) if isinstance(launch, str) else [str(a) for a in launch]
        server = Server(
            mode,
            url.rstrip("/"),
            argv=argv,
            env={},
            time_scale=float(info.get("sim_time_scale", 1.0)),
            info=info,
        )
        _verify(server, cfg, threshold, launched=False)
        return server
    adaptive_path = None
    if mode == "dynamic":
        assert threshold is not None
        adaptive_path = argv_mod.write_adaptive_config(
            run_dir / "servers" / f"dynamic{'-' + label if label else ''}.adaptive.json",
            cfg.server.speculative_num_steps,
            threshold,
        )
    cmd = server_command(mode, cfg, adaptive_path)
    env = argv_mod.server_env(mode, cfg.server)
    log_path = run_dir / "servers" / f"{mode}.log"
    proc = ServerProcess(
        name=mode,
        argv=cmd,
        log_path=log_path,
        host=cfg.server.host,
        port=cfg.server.port,
        env=env,
        diagnose=_diagnose,
    )
    proc.start(cfg.server.ready_timeout_s)
    server = Server(
        mode,
        proc.base_url,
        argv=cmd,
        env=env,
        time_scale=time_scale_of(cfg),
        process=proc,
        log_path=log_path,
        label=label,
    )
    try:
        server.info = attach_mod.fetch_server_info(server.base_url)
        _verify(server, cfg, threshold, launched=True)
    except BaseException:
        proc.stop(cfg.server.stop_grace_s)
        raise
    return server


def _diagnose(log_text: str, log_path: Path) -> str | None:
    diag = sglang_mod.diagnose_failure(log_text)
    if diag is None:
        return None
    return sglang_mod.format_failure(diag, log_path, log_text.splitlines()[-10:])


def _verify(server: Server, cfg: SweepConfig, threshold: int | None, launched: bool) -> None:
    expected = sglang_mod.Expected(
        mode=server.mode,
        speculative_num_steps=cfg.server.speculative_num_steps,
        max_running_requests=cfg.max_running_requests if launched else None,
        largest_concurrency=max(cfg.concurrency),
        threshold=threshold,
    )
    problems = sglang_mod.check_server_info(server.info, expected)
    if problems:
        where = f" (log {server.log_path})" if server.log_path else ""
        raise ServerStartError(f"{server.mode} server{where} is not what was asked: {problems[0]}")


def flush_cache(server: Server, attempts: int = 50) -> None:
    """Reset KV cache and spec counters; SGLang refuses (400) until the server is idle."""
    for _ in range(attempts):
        try:
            status, _ = http_get(f"{server.base_url}/flush_cache", timeout_s=5.0)
        except (OSError, urllib.error.URLError):
            return
        if status == 200:
            return
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------
# The sweep.


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into SweepInterrupted so servers are stopped and points kept."""

    def handler(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        raise SweepInterrupted(name, 128 + signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_sweep(
    cfg: SweepConfig,
    *,
    console: Console,
    command: list[str],
    resume: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> Path:
    """Run (or continue) a sweep; return the run directory."""
    if resume is not None:
        cfg, manifest = open_resume(resume, overrides or {})
        sets = preflight(cfg)
        run_dir = resume
        stored_sets = manifest.data.get("prompt_sets", {})
        for name, ps in sets.items():
            old = stored_sets.get(name, {}).get("sha256")
            if old and old != ps.sha256:
                raise ConfigError(
                    f"cannot resume {run_dir}: prompt set {name} changed since the run started "
                    "(sha256 differs); restore the file or start a new run"
                )
        manifest.data["status"] = "running"
        manifest.data.setdefault("resumed_at", []).append(results.utc_now())
        manifest.save()
    else:
        sets = preflight(cfg)
        run_dir = new_run_dir(cfg)
        manifest = create_manifest(run_dir, cfg, sets, command)
    console.print(f"run directory: {run_dir}")

    current: list[Server] = []
    try:
        with _signals_raise():
            _measure_all(cfg, sets, run_dir, manifest, console, current)
    except KeyboardInterrupt:
        _stop_all(current, cfg)
        _finish(run_dir, manifest, "interrupted")
        raise SweepInterrupted("SIGINT", 130) from None
    except SweepInterrupted:
        _stop_all(current, cfg)
        _finish(run_dir, manifest, "interrupted")
        raise
    except BaseException:
        _stop_all(current, cfg)
        _finish(run_dir, manifest, "failed")
        raise
    _finish(run_dir, manifest, "complete")
    _conclude(run_dir, console)
    return run_dir


def _stop_all(current: list[Server], cfg: SweepConfig) -> None:
    for server in current:
        with contextlib.suppress(Exception):
            server.stop(min(cfg.server.stop_grace_s, 8.0))
    current.clear()


def _finish(run_dir: Path, manifest: Manifest, status: str) -> None:
    manifest.data["status"] = status
    manifest.data["ended_at"] = results.utc_now()
    manifest.save()
    with contextlib.suppress(Exception):
        results.rebuild_summary(run_dir)


def _measure_all(
    cfg: SweepConfig,
    sets: dict[str, prompts.PromptSet],
    run_dir: Path,
    manifest: Manifest,
    console: Console,
    current: list[Server],
) -> None:
    done = results.measured_keys(run_dir)
    modes = [m for m in MODE_ORDER if m in cfg.modes]
    ordered = {name: prompts.ordered_requests(ps, cfg.load.seed) for name, ps in sets.items()}
    stored = _stored_thresholds(manifest)
    # Points planned now; dynamic's straddle levels are added once its thresholds are known.
    planned = sum(
        len(levels_for(m, cfg, stored.get(s) if m == "dynamic" else None)) * cfg.load.repeats
        for m in modes
        for s in sets
    )
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("sweep", total=planned)
        for mode in modes:
            # One server per distinct threshold: the dynamic server of each prompt set runs with
            # that set's own threshold (unless one was given), the static modes with none.
            groups: dict[int | None, list[str]] = {None: list(sets)}
            if mode == "dynamic":
                per_set = _choose_thresholds(cfg, list(sets), run_dir, manifest, console)
                groups = {}
                for name in sets:
                    groups.setdefault(per_set[name], []).append(name)
                total = sum(
                    len(levels_for(m, cfg, per_set[s] if m == "dynamic" else None))
                    * cfg.load.repeats
                    for m in modes
                    for s in sets
                )
                progress.update(task, total=total)
            for threshold, names in groups.items():
                keys = [
                    PointKey(mode, name, c, r)
                    for name in names
                    for c in levels_for(mode, cfg, threshold)
                    for r in range(cfg.load.repeats)
                ]
                todo = [k for k in keys if k not in done]
                progress.advance(task, len(keys) - len(todo))
                if not todo:
                    continue
                progress.update(task, description=f"{mode}: starting server")
                label = None if len(groups) == 1 else "+".join(names)
                server = start_server(mode, cfg, run_dir, threshold, label)
                current.append(server)
                _record_mode(manifest, server, threshold, names)
                for key in todo:
                    progress.update(
                        task, description=f"{key.mode} {key.prompt_set} c={key.concurrency}"
                    )
                    server = _measure_point(
                        key,
                        cfg,
                        ordered[key.prompt_set],
                        run_dir,
                        manifest,
                        console,
                        current,
                        server,
                        threshold,
                    )
                    progress.advance(task)
                current.remove(server)
                server.stop(cfg.server.stop_grace_s)


def _stored_thresholds(manifest: Manifest) -> dict[str, int]:
    record = manifest.data.get("threshold")
    if isinstance(record, dict) and isinstance(record.get("per_prompt_set"), dict):
        return {k: int(v) for k, v in record["per_prompt_set"].items()}
    return {}


def _choose_thresholds(
    cfg: SweepConfig, names: list[str], run_dir: Path, manifest: Manifest, console: Console
) -> dict[str, int]:
    """The dynamic server's threshold per prompt set, chosen once and kept in the manifest.

    Given (`--threshold N`): N for every set. Auto: each set's own threshold from its measured
    crossover, so the dynamic check shows whether switching off at that set's threshold tracks
    the better static curve; the combined recommendation for a mixed deployment (the lowest
    over sets) is recorded beside them and reported.
    """
    stored = _stored_thresholds(manifest)
    if all(name in stored for name in names):
        return stored
    recommended: int
    if cfg.threshold is not None:
        per_set, recommended, source = dict.fromkeys(names, cfg.threshold), cfg.threshold, "given"
    elif {"baseline", "eagle3"} <= set(cfg.modes):
        from specbench import analysis

        results.rebuild_summary(run_dir)
        run = results.load_run(run_dir)
        found = analysis.write_analysis(run)
        per_set = {n: int(found["prompt_sets"][n]["threshold_batch_size"]) for n in names}
        recommended, source = int(found["recommended_threshold"]), "auto"
        shown = ", ".join(f"{n} {t}" for n, t in per_set.items())
        console.print(
            f"thresholds from the measured crossovers (batch size): {shown}; "
            f"recommended for a mixed deployment: {recommended}"
        )
    else:
        fixed = config_mod.DEFAULT_FIXED_THRESHOLD
        per_set, recommended, source = dict.fromkeys(names, fixed), fixed, "default"
        console.print(
            f"[yellow]no baseline+eagle3 curves to compute a threshold from; using {fixed}[/]"
        )
    manifest.data["threshold"] = {
        "value": recommended,
        "source": source,
        "per_prompt_set": per_set,
    }
    manifest.save()
    return per_set


def _record_mode(
    manifest: Manifest, server: Server, threshold: int | None, names: list[str]
) -> None:
    info_keys = (
        "version",
        "speculative_algorithm",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_adaptive",
        "max_running_requests",
        "sim_profile",
        "sim_time_scale",
    )
    modes = manifest.data.setdefault("modes", {})
    per_set = dict((modes.get(server.mode) or {}).get("per_prompt_set") or {})
    for name in names:
        per_set[name] = {"threshold": threshold, "argv": server.argv}
    modes[server.mode] = {
        "argv": server.argv,
        "env": server.env,
        "url": server.base_url,
        "log": str(server.log_path.name) if server.log_path else None,
        "threshold": threshold,
        "server_info": {k: server.info.get(k) for k in info_keys if k in server.info},
        "time_scale": server.time_scale,
        "per_prompt_set": per_set,
    }
    manifest.save()


def _measure_point(
    key: PointKey,
    cfg: SweepConfig,
    requests: list[prompts.PromptRequest],
    run_dir: Path,
    manifest: Manifest,
    console: Console,
    current: list[Server],
    server: Server,
    threshold: int | None,
) -> Server:
    attempts = 0
    # Messages of failed attempts stay in the manifest after a successful retry, so a point
    # measured on a restarted server says so (and where the crash is logged).
    errors: list[str] = []
    while True:
        attempts += 1
        flush_cache(server)
        spec = runner.PointSpec(
            base_url=server.base_url,
            protocol=cfg.load.protocol,
            model=str(server.info.get("served_model_name") or cfg.server.model_path),
            concurrency=key.concurrency,
            requests=requests,
            warmup_s=cfg.load.warmup_s / server.time_scale,
            warmup_min_requests=math.ceil(cfg.load.warmup_requests_per_user * key.concurrency),
            warmup_max_s=max(cfg.load.warmup_max_s, cfg.load.warmup_s) / server.time_scale,
            window_s=cfg.load.window_s / server.time_scale,
            window_max_requests=cfg.load.window_max_requests,
            request_timeout_s=cfg.load.request_timeout_s,
            temperature=cfg.load.temperature,
            api_key=cfg.load.api_key,
            scrape_metrics=True,
            planted_read_delay_us=cfg.load.planted_read_delay_us,
        )
        result = asyncio.run(runner.run_point(spec))
        if not result.server_gone and server.alive():
            frame = metrics.requests_frame(result, server.time_scale)
            summary = metrics.summarize_point(
                result,
                server.time_scale,
                max_running_requests=cfg.max_running_requests,
                error_budget=cfg.load.error_budget,
            )
            results.write_point(run_dir, key, frame, summary)
            manifest.set_point(key, status="ok", attempts=attempts, errors=errors)
            acc = summary.get("accept_length")
            acc_text = f", accept {acc:.2f}" if isinstance(acc, float) and acc == acc else ""
            flags = summary.get("flags") or ""
            console.print(
                f"{key.mode:8s} {key.prompt_set:8s} c={key.concurrency:<4d} "
                f"{summary['output_tok_s']:9.1f} tok/s{acc_text}, {summary['n_requests']} req"
                + (f"  [yellow]{flags}[/]" if flags else "")
            )
            return server
        log = server.log_path or server.base_url
        message = f"{key.label}: the {key.mode} server went away mid-point; see its log {log}"
        errors.append(message)
        manifest.set_point(key, status="failed", attempts=attempts, error=message, errors=errors)
        console.print(f"[red]error:[/] {message}")
        if cfg.engine == "attach" or attempts > cfg.max_point_retries:
            raise SweepError(
                f"{message}; gave up after {attempts} attempt(s). Fix the server, then continue "
                f"with: specbench sweep --resume {run_dir}"
            )
        console.print(f"restarting the {key.mode} server (attempt {attempts + 1})")
        current.remove(server)
        server.stop(cfg.server.stop_grace_s)
        server = start_server(key.mode, cfg, run_dir, threshold, server.label)
        current.append(server)


def _conclude(run_dir: Path, console: Console) -> None:
    """Analysis, plots and report once every point is in."""
    from specbench import analysis, plots, report

    run = results.load_run(run_dir)
    if {"baseline", "eagle3"} <= set(run.modes):
        run.analysis = analysis.write_analysis(run)
    try:
        plots.plot_run(run)
    except Exception as exc:  # a figure failing must not hide the measured numbers
        console.print(f"[yellow]warning:[/] plots failed ({exc})")
    report.write_report(run)
    report.render_terminal(run, console)
    console.print(f"report: {run_dir / 'report.md'}")
