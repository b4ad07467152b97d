"""An already-running server (a cluster, another team's deployment): nothing is launched.

The configuration each URL is attached as is checked against what its `/server_info` says, so a
run directory made by attaching means the same as one made by launching.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.config import SweepConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.engines import server_info
from specbench.engines.base import Server, verify
from specbench.engines.process import ServerStartError, wait_ready

if TYPE_CHECKING:
    from specbench.load.protocols import PromptRenderer

# An attached server is already up: waiting minutes for it would only hide a wrong URL.
_ATTACH_READY_S = 60.0


class AttachEngine:
    kind = "attach"
    can_restart = False  # not ours to restart
    start_estimate_s = 5.0
    time_scale = 1.0

    def __init__(self, cfg: SweepConfig) -> None:
        self.cfg = cfg
        self._renderers: dict[str, PromptRenderer] = {}  # by tokenizer path, loaded once

    def preflight(self) -> None:
        return None

    def prompt_renderer(self, info: dict[str, Any]) -> PromptRenderer | None:
        """How the text-in protocols render prompts for the server that sent `info`: with the
        chat template of the tokenizer it reports (SGLang applies none on those routes);
        a simulated server keeps specbench's own rendering."""
        from specbench.load.protocols import SPECBENCH_TEXT

        if self.cfg.load.protocol == "openai-chat":
            return None
        if "sim_profile" in info:
            return SPECBENCH_TEXT
        path = str(info.get("tokenizer_path") or info.get("model_path") or "")
        if not path:
            raise ServerStartError(
                "the attached server's /server_info names no tokenizer_path or model_path to "
                "load its chat template from; use --protocol openai-chat"
            )
        if path not in self._renderers:
            from specbench.load.chat_template import load_chat_template

            self._renderers[path] = load_chat_template(
                path,
                source="the tokenizer_path in the attached server's /server_info",
                trust_remote_code=bool(info.get("trust_remote_code")),
            )
        return self._renderers[path]

    def version(self) -> str | None:
        return None

    def describe(
        self, config: ServerConfiguration, adaptive_path: Path | None, schedule: Schedule | None
    ) -> str:
        return f"attach {dict(self.cfg.attach).get(config.name, '?')}"

    def start(
        self,
        config: ServerConfiguration,
        schedule: Schedule | None,
        run_dir: Path,
        label: str | None = None,
    ) -> Server:
        url = dict(self.cfg.attach)[config.name].rstrip("/")
        timeout_s = min(self.cfg.server.ready_timeout_s, _ATTACH_READY_S)
        if not wait_ready(url, timeout_s):
            raise ServerStartError(
                f"{url} did not answer /ready (or /health) with 200 within {timeout_s:.0f} s; "
                "check the server"
            )
        info = server_info.fetch_server_info(url, api_key=self.cfg.load.api_key)
        found = server_info.detect_mode(info)
        if found != config.kind:
            raise ServerStartError(
                f"--attach {config.name}={url} serves a {found} server according to "
                f"/server_info; attach it as {found}= or point {config.name}= at the right server"
            )
        launch = info.get("launch_command") or []
        argv = shlex.split(launch) if isinstance(launch, str) else [str(a) for a in launch]
        server = Server(
            config,
            url,
            argv=argv,
            env={},
            time_scale=float(info.get("sim_time_scale", 1.0)),
            info=info,
            schedule=schedule,
            label=label,
            api_key=self.cfg.load.api_key,
            admin_api_key=self.cfg.server.admin_api_key,
        )
        verify(server, self.cfg, launched=False)
        server.prompt_renderer = self.prompt_renderer(info)
        return server
