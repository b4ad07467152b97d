"""Real SGLang: the launch command, the version probe and the GPU count.

The sweep launches `server_command(server) + build_argv(...)` (argv.py is the one flag builder).
The version is asked in a subprocess, under the interpreter the server will run with, so that
SGLang (and with it torch and CUDA) is never imported into specbench. For the same reason the
GPUs are counted from `CUDA_VISIBLE_DEVICES` or `nvidia-smi`, never through torch: a server
that needs more GPUs than it can see is refused in the preflight, in a second, rather than
after SGLang's own start-up fails on them.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specbench import fingerprint
from specbench.config import ServerConfig, SweepConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.engines import versions
from specbench.engines.argv import build_argv, flag_value
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
    gpu_memory_mib: int | None = None,
    version: str | None = None,
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
            gpu_memory_mib=gpu_memory_mib,
            version=version,
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


@dataclass(frozen=True)
class VisibleGpus:
    """The GPUs a server launched from here would see, and where that was read."""

    ids: tuple[str, ...]  # CUDA_VISIBLE_DEVICES entries (ordinals or UUIDs), or nvidia-smi indexes
    source: str  # for the message: "CUDA_VISIBLE_DEVICES=0" or "nvidia-smi lists GPU 0"


def _cuda_visible_entries(value: str) -> tuple[str, ...]:
    """CUDA's reading of CUDA_VISIBLE_DEVICES: the entries before the first invalid one.

    An entry is an ordinal (read like strtoul: "1gpu" is 1) or a GPU-/MIG- UUID; anything else
    (-1, an empty entry, a repeat) ends the list, so "" and "-1" mean no GPU.
    """
    entries: list[str] = []
    for part in (p.strip() for p in value.split(",")):
        digits = re.match(r"\d+", part)
        entry = str(int(digits.group())) if digits else part
        if not (digits or part.startswith(("GPU-", "MIG-"))) or entry in entries:
            break
        entries.append(entry)
    return tuple(entries)


def count_visible_gpus(
    environ: Mapping[str, str] | None = None, timeout_s: float = 10.0
) -> VisibleGpus | None:
    """The GPUs this process's servers can use: CUDA_VISIBLE_DEVICES when it is set, else the
    ones `nvidia-smi` lists; None when neither can tell (no variable and no working
    nvidia-smi), where nothing should be refused."""
    env = os.environ if environ is None else environ
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        return VisibleGpus(_cuda_visible_entries(value), "CUDA_VISIBLE_DEVICES=" + (value or "''"))
    exe = shutil.which("nvidia-smi", path=env.get("PATH"))
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, "--query-gpu=index", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    ids = tuple(line.strip() for line in done.stdout.splitlines() if line.strip().isdigit())
    if done.returncode != 0 or not ids:
        return None
    return VisibleGpus(ids, f"nvidia-smi lists GPU{'s' if len(ids) > 1 else ''} {','.join(ids)}")


def check_gpu_count(cfg: SweepConfig, seen: VisibleGpus | None) -> None:
    """Refuse (ConfigError, one line) servers that need more GPUs than they will see.

    A local server sees `seen`; with several `--gpus` slots each server sees its slot of
    --tp-size GPUs (parallel.py sets CUDA_VISIBLE_DEVICES to it), so the ids must be visible
    here. Ray places servers on the cluster's GPUs and counts them itself (ray_executor.py).
    """
    if seen is None or cfg.executor == "ray":
        return
    tp = cfg.server.tp_size
    slots = [tuple(map(str, slot)) for slot in cfg.gpu_slots()]
    # A --gpus worker (a process parallel.py spawned, CUDA_VISIBLE_DEVICES set to its slot)
    # sees only that slot: a slot always holds --tp-size GPUs, and the parent checked the ids.
    if seen.ids in slots and multiprocessing.parent_process() is not None:
        return
    if cfg.gpus and all(i.isdigit() for i in seen.ids):
        hidden = [str(g) for g in cfg.gpus if str(g) not in seen.ids]
        if hidden:
            shown = ",".join(seen.ids) or "none"
            raise ConfigError(
                f"--gpus {','.join(map(str, cfg.gpus))}: GPU {','.join(hidden)} "
                f"{'is' if len(hidden) == 1 else 'are'} not visible here ({seen.source}); "
                f"list only visible GPUs in --gpus (visible: {shown}) or make "
                f"{'it' if len(hidden) == 1 else 'them'} visible"
            )
    have = len(seen.ids)
    if len(slots) > 1 or tp <= have:
        return
    need = f"--tp-size {tp} needs {tp} GPUs" if tp > 1 else "SGLang needs 1 GPU"
    if have == 0:
        fix = "make a GPU visible, or use --engine sim for the simulated server"
    else:
        fix = f"lower --tp-size to {have} or make more GPUs visible"
    raise ConfigError(
        f"{need} per server but {have or 'none'} {'is' if have <= 1 else 'are'} visible "
        f"({seen.source}); {fix}"
    )


class SGLangEngine(LaunchedEngine):
    """Real SGLang, launched with `server_command + build_argv` and checked after start."""

    kind = "sglang"

    def __init__(self, cfg: SweepConfig) -> None:
        super().__init__(cfg)
        self._version: str | None = None
        self._version_asked = False
        self._renderer: PromptRenderer | None = None
        self._gpu_memory_mib: int | None = None
        self._gpu_memory_asked = False

    def preflight(self) -> None:
        check_gpu_count(self.cfg, count_visible_gpus())
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
            given = flag_value(server.extra_args, "--tokenizer-path")
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

    def gpu_memory_mib(self) -> int | None:
        """The smallest GPU's memory as nvidia-smi reports it; None without nvidia-smi."""
        if not self._gpu_memory_asked:
            sizes = [g["memory_total_mib"] for g in fingerprint.gpu_info() or ()]
            self._gpu_memory_mib = min((s for s in sizes if s), default=None)
            self._gpu_memory_asked = True
        return self._gpu_memory_mib

    def command(
        self,
        config: ServerConfiguration,
        adaptive_path: Path | None,
        schedule: Schedule | None = None,
    ) -> list[str]:
        dynamic = config.kind == "dynamic"
        return launch_command(
            config,
            self.cfg.server,
            port=self.cfg.server.port,
            max_running_requests=self.cfg.max_running_requests,
            adaptive_config_path=adaptive_path,
            schedule=schedule,
            gpu_memory_mib=self.gpu_memory_mib() if dynamic else None,
            version=self.version() if dynamic else None,
        )
