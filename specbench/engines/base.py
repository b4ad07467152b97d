"""What the sweep needs from an engine: start a configuration's server, and the server it gets.

An :class:`Engine` turns a named server configuration into a running, verified :class:`Server`
(a context manager that stops it); the sweep never asks which engine it has. Three engines
implement it (`engines/__init__.py` holds the plain dict that picks one):

- `sim`: specbench's simulated SGLang server, launched with the same argv as real SGLang;
- `sglang`: real SGLang, launched;
- `attach`: servers someone else started; nothing is launched or stopped.

The two launching engines share :class:`LaunchedEngine`: write the adaptive JSON when the
configuration needs one, start the process, wait until it is ready, read `/server_info` and check it
is what was asked (`server_info.check_server_info`).
"""

from __future__ import annotations

import urllib.error
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from specbench.config import SweepConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.engines import argv as argv_mod
from specbench.engines import diagnose, server_info, versions
from specbench.engines.process import ServerProcess, ServerStartError, http_get
from specbench.redaction import redact
from specbench.results.manifest import PerSetServer, ServerRecord

if TYPE_CHECKING:
    from specbench.load.protocols import PromptRenderer


def server_log(run_dir: Path, name: str) -> Path:
    """Where a launched server of configuration `name` writes its log."""
    return run_dir / "servers" / f"{name}.log"


@dataclass
class Server:
    """A server the sweep measures against, launched or attached; `with` stops it."""

    config: ServerConfiguration
    base_url: str
    argv: list[str]
    env: dict[str, str]
    time_scale: float
    info: dict[str, Any] = field(default_factory=dict)
    schedule: Schedule | None = None  # a dynamic server's adaptive slots (None: SGLang's own)
    process: ServerProcess | None = None
    log_path: Path | None = None
    label: str | None = None  # prompt sets a per-set dynamic server serves, for file names
    stop_grace_s: float = 10.0
    api_key: str | None = field(default=None, repr=False)
    admin_api_key: str | None = field(default=None, repr=False)
    # How the text-in protocols render prompts for this server (None: the chat protocol, where
    # the server applies its own template); chosen by the engine.
    prompt_renderer: PromptRenderer | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def threshold(self) -> int | None:
        return self.schedule.threshold if self.schedule else None

    def model_name(self, default: str) -> str:
        return str(self.info.get("served_model_name") or default)

    def alive(self) -> bool:
        return self.process is None or self.process.alive()

    def wait_exit(self, timeout_s: float) -> None:
        """Let a server that went away finish exiting (and writing its log) for `timeout_s`."""
        if self.process is not None:
            self.process.wait_exit(timeout_s)

    def stop(self, grace_s: float | None = None) -> None:
        if self.process is not None:
            self.process.stop(self.stop_grace_s if grace_s is None else grace_s)

    def flush_cache(self, wait_s: float = 60.0) -> Flush:
        """Reset the KV cache and spec counters before a point.

        SGLang answers 400 ("Flush cache failed.") while requests are still running; with
        `?timeout=S` it waits up to S seconds for idle. The route needs the admin key when the
        server has one, else the API key. A refused key stops the sweep (every point would run
        on a warm cache); a flush that does not happen is recorded with the point.
        """
        url = f"{self.base_url}/flush_cache?timeout={wait_s:g}"
        try:
            status, body = http_get(url, timeout_s=wait_s + 10.0, token=self._flush_key)
        except (OSError, urllib.error.URLError) as exc:
            return Flush(False, f"no answer ({exc})")
        if status in (401, 403):
            raise ServerStartError(
                f"{self.name} server refused /flush_cache (HTTP {status}): it needs the admin "
                "key when it has one, else the API key; pass --admin-api-key KEY or --api-key KEY"
            )
        text = body.decode(errors="replace").strip()
        return Flush(status == 200, text if status == 200 else f"HTTP {status}: {text}")

    @property
    def _flush_key(self) -> str | None:
        return self.admin_api_key or self.api_key

    def record(self, names: list[str], previous: ServerRecord | None) -> ServerRecord:
        """This server for the manifest, keeping what earlier servers of the same
        configuration recorded for other prompt sets."""
        per_set = dict(previous.per_prompt_set) if previous else {}
        for name in names:
            per_set[name] = PerSetServer(threshold=self.threshold, argv=redact(self.argv))
        return ServerRecord(
            kind=self.config.kind,
            argv=redact(self.argv),
            env=self.env,
            url=self.base_url,
            log=self.log_path.name if self.log_path else None,
            threshold=self.threshold,
            slots={str(k): v for k, v in self.schedule.slots} if self.schedule else None,
            server_info=server_info.recorded(self.info),
            time_scale=self.time_scale,
            per_prompt_set=per_set,
            prompt_renderer=self.prompt_renderer.name if self.prompt_renderer else None,
        )

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class Flush:
    """What `/flush_cache` said before a point: flushed or not, and the server's words."""

    ok: bool
    detail: str


class Engine(Protocol):
    """Starts servers for named configurations; the sweep's only view of an engine."""

    kind: str
    can_restart: bool  # a server that died mid-point can be started again
    start_estimate_s: float  # for the plan's time estimate
    time_scale: float  # model seconds per wall second, for the plan's estimate

    def preflight(self) -> None:
        """Refuse what is certain to fail before any server starts (ConfigError)."""

    def version(self) -> str | None:
        """The engine's version for the manifest, if known."""

    def describe(
        self, config: ServerConfiguration, adaptive_path: Path | None, schedule: Schedule | None
    ) -> str:
        """What starting this configuration would do (the dry run's line)."""

    def start(
        self,
        config: ServerConfiguration,
        schedule: Schedule | None,
        run_dir: Path,
        label: str | None = None,
    ) -> Server:
        """A ready server (a dynamic one following `schedule`), checked against what was asked."""


def adaptive_path(run_dir: Path, config: ServerConfiguration, label: str | None) -> Path:
    return run_dir / "servers" / f"{config.name}{'-' + label if label else ''}.adaptive.json"


def verify(server: Server, cfg: SweepConfig, *, launched: bool) -> None:
    """Raise ServerStartError (one line) when /server_info is not what the sweep asked for."""
    config, schedule = server.config, server.schedule
    steps = argv_mod.launch_steps(config, cfg.server, schedule)
    expected = server_info.Expected(
        mode=config.kind,
        speculative_num_steps=steps,
        max_running_requests=cfg.max_running_requests if launched else None,
        largest_concurrency=max(cfg.concurrency),
        threshold=server.threshold,
        schedule=schedule if schedule is not None and schedule.threshold is None else None,
        adaptive_default=config.adaptive == "default",
        speculative_eagle_topk=config.topk,
        speculative_num_draft_tokens=config.draft_tokens,
    )
    problems = server_info.check_server_info(server.info, expected)
    reason = _fallback_reason(server) if problems else None
    if reason:
        problems[0] = (
            f"the {config.kind} server reports speculative_adaptive=false although "
            f"--speculative-adaptive was passed: SGLang fell back to static speculation "
            f"because {reason}; remove that setting"
        )
    if problems:
        where = f" (log {server.log_path})" if server.log_path else ""
        raise ServerStartError(f"{server.name} server{where} is not what was asked: {problems[0]}")


def _fallback_reason(server: Server) -> str | None:
    """Why SGLang dropped --speculative-adaptive, from the server's own log line."""
    adaptive_asked = server.config.kind == "dynamic"
    if not adaptive_asked or server.info.get("speculative_adaptive") or server.log_path is None:
        return None
    return diagnose.adaptive_fallback_reason("\n".join(diagnose.read_tail(server.log_path, 400)))


def _diagnose(log_text: str, log_path: Path) -> str | None:
    found = diagnose.diagnose_failure(log_text)
    if found is None:
        return None
    return diagnose.format_failure(found, log_path, log_text.splitlines()[-10:])


class LaunchedEngine:
    """Shared by the engines that start server processes themselves (sim and sglang)."""

    kind = "launched"
    can_restart = True
    start_estimate_s = 300.0

    def __init__(self, cfg: SweepConfig) -> None:
        # A draft shape in --server-arg is refused before a plan is printed or a server starts.
        argv_mod.check_draft_flags(cfg.configurations, cfg.server)
        self.cfg = cfg
        self.time_scale = 1.0

    def command(
        self,
        config: ServerConfiguration,
        adaptive_path: Path | None,
        schedule: Schedule | None = None,
    ) -> list[str]:
        raise NotImplementedError

    def _key_flags(self) -> list[str]:
        """The bearer keys, passed to a launched server so that it checks them as SGLang does
        (recorded and printed only through `redaction.redact`)."""
        flags = []
        if self.cfg.load.api_key:
            flags += ["--api-key", self.cfg.load.api_key]
        if self.cfg.server.admin_api_key:
            flags += ["--admin-api-key", self.cfg.server.admin_api_key]
        return flags

    def preflight(self) -> None:
        from specbench.engines.process import port_is_free
        from specbench.errors import ConfigError

        server = self.cfg.server
        if not port_is_free(server.host, server.port):
            raise ConfigError(
                f"port {server.port} on {server.host} is already in use; stop what listens "
                "there or pass another --port"
            )

    def version(self) -> str | None:
        return None

    def prompt_renderer(self) -> PromptRenderer | None:
        """How prompts are rendered for the text-in protocols: specbench's own fixed template
        here (the simulator's); real SGLang overrides it with the model's chat template."""
        from specbench.load.protocols import SPECBENCH_TEXT

        return None if self.cfg.load.protocol == "openai-chat" else SPECBENCH_TEXT

    def describe(
        self, config: ServerConfiguration, adaptive_path: Path | None, schedule: Schedule | None
    ) -> str:
        env = argv_mod.server_env(config, self.cfg.server)
        prefix = " ".join(f"{k}={v}" for k, v in env.items())
        command = redact(self.command(config, adaptive_path, schedule) + self._key_flags())
        return f"{prefix + ' ' if prefix else ''}{' '.join(command)}"

    def start(
        self,
        config: ServerConfiguration,
        schedule: Schedule | None,
        run_dir: Path,
        label: str | None = None,
    ) -> Server:
        cfg = self.cfg
        renderer = self.prompt_renderer()  # before the launch: loading it may fail
        path = None
        if schedule is not None:
            path = argv_mod.write_adaptive_config(adaptive_path(run_dir, config, label), schedule)
        argv = self.command(config, path, schedule) + self._key_flags()
        env = argv_mod.server_env(config, cfg.server)
        log_path = server_log(run_dir, config.name)
        proc = ServerProcess(
            name=config.name,
            argv=argv,
            log_path=log_path,
            host=cfg.server.host,
            port=cfg.server.port,
            env=env,
            diagnose=_diagnose,
            ready_route=versions.release(self.version()).ready_route,
        )
        proc.start(cfg.server.ready_timeout_s)
        server = Server(
            config,
            proc.base_url,
            argv=argv,
            env=env,
            time_scale=self.time_scale,
            schedule=schedule,
            process=proc,
            log_path=log_path,
            label=label,
            stop_grace_s=cfg.server.stop_grace_s,
            api_key=cfg.load.api_key,
            admin_api_key=cfg.server.admin_api_key,
            prompt_renderer=renderer,
        )
        try:
            server.info = server_info.fetch_server_info(server.base_url, api_key=cfg.load.api_key)
            verify(server, cfg, launched=True)
        except BaseException:
            server.stop()
            raise
        return server
