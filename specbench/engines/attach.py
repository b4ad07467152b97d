"""An already-running server (a cluster, another team's deployment): nothing is launched.

The configuration each URL is attached as is checked against what its `/server_info` says, so a
run directory made by attaching means the same as one made by launching.
"""

from __future__ import annotations

import json
import shlex
import urllib.error
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specbench.config import SweepConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.engines import server_info
from specbench.engines.process import ServerStartError, http_get, wait_ready

if TYPE_CHECKING:
    from specbench.engines.base import Server
    from specbench.load.protocols import PromptRenderer

# An attached server is already up: waiting minutes for it would only hide a wrong URL.
_ATTACH_READY_S = 60.0


def fetch_server_info(
    base_url: str, timeout_s: float = 10.0, api_key: str | None = None
) -> dict[str, Any]:
    """`GET /server_info` (it needs the API key when the server has one; /ready does not)."""
    url = f"{base_url.rstrip('/')}/server_info"
    try:
        status, body = http_get(url, timeout_s=timeout_s, token=api_key)
    except (OSError, urllib.error.URLError) as exc:
        if isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None),
                                                       TimeoutError):
            raise ServerStartError(
                f"{url} did not answer within {timeout_s:.0f} s although the server is up; "
                "check its log (a scheduler hung behind a live HTTP front?)"
            ) from None
        raise ServerStartError(
            f"cannot reach {base_url} ({exc}); check the --attach URL and that the server is up"
        ) from None
    if status in (401, 403):
        given = "was refused" if api_key else "is needed"
        raise ServerStartError(
            f"{url} answered HTTP {status}: the server's API key {given}; pass the server's "
            "--api-key KEY (or set SPECBENCH_API_KEY)"
        )
    if status != 200:
        raise ServerStartError(
            f"{base_url}/server_info answered HTTP {status}; is this an SGLang server?"
        )
    try:
        info = json.loads(body)
    except json.JSONDecodeError:
        raise ServerStartError(
            f"{base_url}/server_info did not return JSON; is this an SGLang server?"
        ) from None
    if not isinstance(info, dict):
        raise ServerStartError(
            f"{base_url}/server_info did not return an object; is this an SGLang server?"
        )
    if not isinstance(info.get("context_length"), int):
        # Unset unless launched with --context-length; the model's own limit is in /v1/models.
        info["max_model_len"] = _max_model_len(base_url, timeout_s, api_key)
    return info


def _max_model_len(base_url: str, timeout_s: float, api_key: str | None) -> int | None:
    try:
        status, body = http_get(f"{base_url.rstrip('/')}/v1/models", timeout_s=timeout_s,
                                token=api_key)
        cards = json.loads(body).get("data") if status == 200 else None
    except (OSError, urllib.error.URLError, json.JSONDecodeError, AttributeError):
        return None
    limits = [c.get("max_model_len") for c in cards or [] if isinstance(c, dict)]
    return next((n for n in limits if isinstance(n, int)), None)


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
        from specbench.engines.base import Server, verify

        url = dict(self.cfg.attach)[config.name].rstrip("/")
        timeout_s = min(self.cfg.server.ready_timeout_s, _ATTACH_READY_S)
        if not wait_ready(url, timeout_s):
            raise ServerStartError(
                f"{url} did not answer /ready (or /health) with 200 within {timeout_s:.0f} s; "
                "check the server"
            )
        info = fetch_server_info(url, api_key=self.cfg.load.api_key)
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
