"""Real SGLang: the launch command and the version probe.

The sweep launches `server_command(server) + build_argv(...)` (argv.py is the one flag builder).
The version is asked in a subprocess, under the interpreter the server will run with, so that
SGLang (and with it torch and CUDA) is never imported into specbench.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.config import ServerConfig, SweepConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.engines import versions
from specbench.engines.argv import build_argv
from specbench.engines.base import LaunchedEngine
from specbench.errors import ConfigError

if TYPE_CHECKING:
    from specbench.load.protocols import PromptRenderer

_PYTHON_NAMES = ("python", "python3")


def server_command(server: ServerConfig) -> list[str]:
    """The program part of the launch command (the argv from argv.build_argv follows it).

    A leading ``python``/``python3`` becomes this interpreter (``sys.executable``), so the
    server runs in the environment where specbench found SGLang rather than whatever ``python``
    is first on PATH. ``sglang serve`` probes the Hugging Face hub for a diffusion model unless
    told the model type, a network attempt on every launch: ``--model-type llm`` is added
    there (it is the launcher's own flag, stripped before SGLang's server flags are parsed).
    """
    command = list(server.server_command) or list(ServerConfig().server_command)
    if command[0] in _PYTHON_NAMES:
        command[0] = sys.executable
    is_sglang_serve = (
        len(command) >= 2 and Path(command[-2]).name == "sglang" and command[-1] == "serve"
    )
    if is_sglang_serve and not any(a.startswith("--model-type") for a in command):
        command += ["--model-type", "llm"]
    return command


def launch_command(
    config: ServerConfiguration | str,
    server: ServerConfig,
    *,
    port: int,
    max_running_requests: int,
    adaptive_config_path: Path | None = None,
    schedule: Schedule | None = None,
) -> list[str]:
    """The full command line of one configuration's real SGLang server."""
    return [
        *server_command(server),
        *build_argv(
            config,
            server,
            port=port,
            max_running_requests=max_running_requests,
            adaptive_config_path=adaptive_config_path,
            schedule=schedule,
        ),
    ]


_VERSION_SCRIPT = (
    "import importlib.metadata as m\n"
    "try:\n"
    "    print(m.version('sglang'))\n"
    "except m.PackageNotFoundError:\n"
    "    import sglang\n"  # a source checkout on PYTHONPATH has no metadata
    "    print(sglang.__version__)\n"
)


def sglang_version(python: str | None = None, timeout_s: float = 60.0) -> str | None:
    """SGLang's version as seen by interpreter `python` (default: this one); None if absent.

    Asked in a subprocess because the server runs under that interpreter, and because
    importing SGLang here would drag torch (and CUDA initialisation) into specbench.
    """
    try:
        done = subprocess.run(
            [python or sys.executable, "-c", _VERSION_SCRIPT],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return None
    return lines[-1].strip() or None


def _flag_value(argv: tuple[str, ...], flag: str) -> str | None:
    """The value of `flag` in an argv (`--flag V` or `--flag=V`; the last one wins)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
    return value


class SGLangEngine(LaunchedEngine):
    """Real SGLang, launched with `server_command + build_argv` and checked after start."""

    kind = "sglang"

    def __init__(self, cfg: SweepConfig) -> None:
        super().__init__(cfg)
        self._version: str | None = None
        self._version_asked = False
        self._renderer: PromptRenderer | None = None

    def preflight(self) -> None:
        server = self.cfg.server
        for label, path in (("model", server.model_path), ("draft model", server.draft_model_path)):
            if not path or not path.startswith(("/", "./", "../", "~")):
                continue
            if not Path(path).expanduser().exists():
                raise ConfigError(
                    f"{label} path {path} does not exist; "
                    "pass an existing directory or a Hugging Face model id"
                )
        self._check_adaptive_support()
        self.prompt_renderer()  # a missing transformers or tokenizer: one line before any launch
        super().preflight()

    def prompt_renderer(self) -> PromptRenderer | None:
        """The model's own chat template for the text-in protocols (SGLang applies none there),
        from the tokenizer the server will load: its --tokenizer-path, else --model-path."""
        if self.cfg.load.protocol == "openai-chat":
            return None
        if self._renderer is None:
            from specbench.load.chat_template import load_chat_template

            server = self.cfg.server
            path, source = server.model_path, "--model-path"
            given = _flag_value(server.extra_args, "--tokenizer-path")
            if given is not None:
                path, source = given, "--server-arg=--tokenizer-path"
            self._renderer = load_chat_template(
                path, source=source, trust_remote_code="--trust-remote-code" in server.extra_args
            )
        return self._renderer

    def _check_adaptive_support(self) -> None:
        adaptive = [c.name for c in self.cfg.configurations if c.kind == "dynamic"]
        version = self.version() if adaptive else None
        since = versions.SUPPORTED_FROM
        if version is None or versions.release_tuple(version) >= since:
            return
        static = ",".join(c.name for c in self.cfg.configurations if c.kind != "dynamic")
        raise ConfigError(
            f"SGLang {version} has no adaptive speculation with steps 0 (it first ships in "
            f"{versions.dotted(since)}), which the {adaptive[0]} server needs; upgrade SGLang "
            f"(pip install 'sglang>={versions.dotted(since)}') or measure the static servers "
            f"only (--modes {static or 'baseline,eagle3'})"
        )

    def version(self) -> str | None:
        if not self._version_asked:
            self._version = sglang_version(sys.executable)
            self._version_asked = True
        return self._version

    def command(
        self,
        config: ServerConfiguration,
        adaptive_path: Path | None,
        schedule: Schedule | None = None,
    ) -> list[str]:
        return launch_command(
            config,
            self.cfg.server,
            port=self.cfg.server.port,
            max_running_requests=self.cfg.max_running_requests,
            adaptive_config_path=adaptive_path,
            schedule=schedule,
        )
