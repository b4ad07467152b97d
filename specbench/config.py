"""Sweep configuration: one frozen object built once from CLI options and an optional TOML file.

Everything a sweep needs is in :class:`SweepConfig`; the CLI builds it, :func:`validate` checks it
once, and the library never re-reads options. Validation problems raise :class:`ConfigError`,
whose message is a single line naming the cause and the fix (the CLI prints it and exits 2).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from specbench.errors import ConfigError

MODES: tuple[str, ...] = ("baseline", "eagle3", "dynamic")
PROTOCOLS: tuple[str, ...] = ("openai-chat", "openai-completions", "sglang-native")
ENGINES: tuple[str, ...] = ("sim", "sglang", "attach")
DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 250)
QUICK_CONCURRENCY: tuple[int, ...] = (1, 8, 64, 250)
DEFAULT_PROMPT_SETS: tuple[str, ...] = ("coding", "agentic")
# Used for the dynamic server when the threshold cannot be computed from measured curves
# (e.g. `--modes dynamic` alone): SGLang 0.5.23's own default config stops drafting at 64.
DEFAULT_FIXED_THRESHOLD = 64
SIM_DEFAULT_PROFILE = "llama-3.1-8b-1xh200"


@dataclass(frozen=True)
class ServerConfig:
    """What every launched server gets; equal across modes so the comparison is fair."""

    model_path: str = "meta-llama/Llama-3.1-8B-Instruct"
    draft_model_path: str | None = "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B"
    tp_size: int = 1
    # None means "the largest concurrency in the sweep"; always passed explicitly because
    # SGLang silently caps speculative servers at 48 otherwise.
    max_running_requests: int | None = None
    speculative_num_steps: int = 3
    host: str = "127.0.0.1"
    port: int = 30000
    extra_args: tuple[str, ...] = ()
    server_command: tuple[str, ...] = ("python", "-m", "sglang.launch_server")
    # SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 in dynamic mode: cheaper steps above the
    # threshold, but a cold draft (lower acceptance) right after speculation resumes.
    skip_zero_step_draft_extend: bool = False
    cuda_graph_bs_decode: tuple[int, ...] | None = None
    ready_timeout_s: float = 1800.0
    stop_grace_s: float = 10.0


@dataclass(frozen=True)
class SimConfig:
    """Options of the simulated server (`python -m specbench.sim ... --sim-*`)."""

    profile: str = SIM_DEFAULT_PROFILE
    # >1 runs the model faster than real time; every reported time is converted back to
    # simulated-GPU time, so the numbers do not depend on this. 4x keeps a 2-core machine's
    # client within 1% of the simulator's ground truth at 250 users (tests/load) and a full
    # default sweep under 10 minutes.
    time_scale: float = 4.0
    seed: int = 0
    extra_args: tuple[str, ...] = ()  # fault injection etc., passed through verbatim


@dataclass(frozen=True)
class LoadConfig:
    """How each point is measured (DESIGN §5)."""

    protocol: str = "openai-chat"
    warmup_s: float = 2.0  # simulated-GPU seconds of unmeasured load before the window opens
    # ...and until about this many requests per user have ended (steady state, not the
    # cold-start prefill wave), capped at warmup_max_s in all.
    warmup_requests_per_user: float = 1.0
    warmup_max_s: float = 60.0
    window_s: float = 8.0  # simulated-GPU seconds of measured window
    window_max_requests: int | None = None
    request_timeout_s: float = 600.0
    temperature: float = 0.0
    seed: int = 0
    repeats: int = 1
    error_budget: float = 0.01  # fraction of requests in the window that may fail
    api_key: str | None = field(default=None, repr=False)
    # Test knob: CPU burnt per network read in the client, to plant a slow client.
    planted_read_delay_us: float = 0.0


@dataclass(frozen=True)
class SweepConfig:
    engine: str = "sim"
    modes: tuple[str, ...] = MODES
    prompt_sets: tuple[str, ...] = DEFAULT_PROMPT_SETS
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    threshold: int | None = None  # None = auto (from the measured crossover)
    server: ServerConfig = field(default_factory=ServerConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    load: LoadConfig = field(default_factory=LoadConfig)
    results_dir: Path = Path("results")
    run_name: str | None = None
    attach: tuple[tuple[str, str], ...] = ()  # (mode, url) for --engine attach
    max_point_retries: int = 1

    @property
    def max_running_requests(self) -> int:
        if self.server.max_running_requests is not None:
            return self.server.max_running_requests
        return max(self.concurrency)


def to_dict(cfg: SweepConfig) -> dict[str, Any]:
    """A JSON-ready view for the manifest; secrets are left out."""
    raw = dataclasses.asdict(cfg)
    raw["load"].pop("api_key", None)
    raw["results_dir"] = str(cfg.results_dir)
    return raw


def parse_concurrency(text: str) -> tuple[int, ...]:
    levels: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise ConfigError(
                f"concurrency level {part!r} is not a whole number; "
                "use a comma-separated list such as 1,2,4,8"
            ) from None
        if value <= 0:
            raise ConfigError(
                f"concurrency level {value} must be at least 1; "
                "use a comma-separated list of positive integers"
            )
        levels.append(value)
    if not levels:
        raise ConfigError("the concurrency list is empty; give at least one level, e.g. 1,8,64")
    return tuple(sorted(set(levels)))


def parse_names(text: str, allowed: tuple[str, ...] | None, what: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not names:
        raise ConfigError(f"no {what} given; name at least one")
    if allowed is not None:
        for name in names:
            if name not in allowed:
                raise ConfigError(f"unknown {what} {name!r}; choose from {', '.join(allowed)}")
    return names


def parse_threshold(text: str | None) -> int | None:
    if text is None or text.strip().lower() == "auto":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(
            f"threshold {text!r} is not a positive integer; "
            "use --threshold auto or a batch size such as 32"
        ) from None
    if value < 1:
        raise ConfigError(
            f"threshold {value} is not a positive integer; "
            "use --threshold auto or a batch size such as 32"
        )
    return value


_SECTIONS: dict[str, type] = {"server": ServerConfig, "sim": SimConfig, "load": LoadConfig}


def load_toml(path: Path) -> dict[str, Any]:
    """Read a config file into keyword overrides for SweepConfig; unknown keys are errors."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; check the --config path") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"config file {path} cannot be read ({exc}); fix the TOML syntax"
        ) from None
    top_fields = {f.name for f in dataclasses.fields(SweepConfig)}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in _SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"config file {path}: [{key}] must be a table")
            section_fields = {f.name for f in dataclasses.fields(_SECTIONS[key])}
            for sub in value:
                if sub not in section_fields:
                    raise ConfigError(
                        f"config file {path}: unknown key {key}.{sub}; "
                        f"known keys are {', '.join(sorted(section_fields))}"
                    )
            out[key] = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
        elif key in top_fields:
            out[key] = tuple(value) if isinstance(value, list) else value
        else:
            raise ConfigError(
                f"config file {path}: unknown key {key!r}; known keys are "
                f"{', '.join(sorted(top_fields | set(_SECTIONS)))}"
            )
    return out


def build(overrides: dict[str, Any]) -> SweepConfig:
    """Build a SweepConfig from nested overrides (file values first, CLI values on top)."""
    kwargs: dict[str, Any] = {}
    for key, value in overrides.items():
        if key in _SECTIONS:
            kwargs[key] = _SECTIONS[key](**value)
        elif key == "results_dir":
            kwargs[key] = Path(value)
        elif key == "attach" and isinstance(value, dict):
            kwargs[key] = tuple(value.items())
        else:
            kwargs[key] = value
    try:
        return SweepConfig(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"invalid configuration ({exc}); check option names") from None


def validate(cfg: SweepConfig) -> None:
    """Checks that need no server and no file system beyond the obvious; raise ConfigError."""
    if cfg.engine not in ENGINES:
        raise ConfigError(f"unknown engine {cfg.engine!r}; choose from {', '.join(ENGINES)}")
    for mode in cfg.modes:
        if mode not in MODES:
            raise ConfigError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if cfg.load.protocol not in PROTOCOLS:
        raise ConfigError(
            f"unknown protocol {cfg.load.protocol!r}; choose from {', '.join(PROTOCOLS)}"
        )
    if not cfg.concurrency or min(cfg.concurrency) < 1:
        raise ConfigError("concurrency levels must be positive integers, e.g. 1,2,4,8")
    if (
        cfg.server.max_running_requests is not None
        and max(cfg.concurrency) > cfg.max_running_requests
    ):
        raise ConfigError(
            f"concurrency {max(cfg.concurrency)} is above --max-running-requests "
            f"{cfg.max_running_requests}; lower the levels or raise the server limit"
        )
    if cfg.threshold is not None and cfg.threshold < 1:
        raise ConfigError("threshold must be a positive integer; use auto or e.g. 32")
    if cfg.load.window_s <= 0 or cfg.load.warmup_s < 0:
        raise ConfigError("window_s must be > 0 and warmup_s >= 0; fix the [load] values")
    if cfg.load.repeats < 1:
        raise ConfigError("repeats must be at least 1; use --repeats 1 or more")
    if cfg.sim.time_scale <= 0:
        raise ConfigError("sim time scale must be > 0; use e.g. --sim-time-scale 1")
    if cfg.server.speculative_num_steps < 1:
        raise ConfigError("speculative steps must be at least 1; use e.g. --spec-steps 3")
    if not 1 <= cfg.server.port <= 65535:
        raise ConfigError(f"port {cfg.server.port} is out of range; use 1024-65535")
    needs_draft = any(m in ("eagle3", "dynamic") for m in cfg.modes)
    if cfg.engine != "attach" and needs_draft and not cfg.server.draft_model_path:
        raise ConfigError(
            "EAGLE-3 modes need a draft model; "
            "pass --draft-model-path or drop eagle3/dynamic from --modes"
        )
    if cfg.engine == "attach":
        attached = {mode for mode, _ in cfg.attach}
        missing = [m for m in cfg.modes if m not in attached]
        if missing:
            raise ConfigError(
                f"--engine attach needs a URL for mode {missing[0]}; pass --attach {missing[0]}=http://HOST:PORT"
            )
    if cfg.run_name is not None:
        name = cfg.run_name
        if not name or "/" in name or "\\" in name or name in (".", "..") or name.startswith("."):
            raise ConfigError(
                f"run name {name!r} is not a plain directory name; use letters, digits, '-' and '_'"
            )


def from_dict(raw: dict[str, Any]) -> SweepConfig:
    """Inverse of to_dict (lists become tuples); used to resume a run from its manifest."""
    return build(_plain_to_overrides(raw))


def _plain_to_overrides(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _SECTIONS and isinstance(value, dict):
            out[key] = {k: _tupled(v) for k, v in value.items()}
        elif key == "attach":
            out[key] = tuple(tuple(pair) for pair in value)
        else:
            out[key] = _tupled(value)
    return out


def _tupled(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Nested override merge of plain option dicts (sections merge key by key)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, value in overrides.items():
        if key in _SECTIONS and isinstance(value, dict):
            out.setdefault(key, {})
            out[key].update(value)
        else:
            out[key] = value
    return out


def differences(old: SweepConfig, new: SweepConfig) -> list[str]:
    """Dotted names of fields whose values differ (for refusing a mismatched resume)."""
    diffs: list[str] = []
    a, b = to_dict(old), to_dict(new)
    for key in a:
        if isinstance(a[key], dict):
            diffs += [f"{key}.{sub}" for sub in a[key] if a[key][sub] != b[key].get(sub)]
        elif a[key] != b.get(key):
            diffs.append(key)
    return diffs


# Named option sets, applied under the config file and the command line. Windows are in
# simulated-GPU seconds; the sim time scale only changes wall time, not the numbers.
PRESETS: dict[str, dict[str, Any]] = {
    # A demo in about a minute: four levels spanning both crossovers, short windows, and a
    # slightly faster simulator (numbers stay in GPU time; the client_bound flag says where
    # the client could not keep up).
    "quick": {
        "concurrency": (1, 16, 64, 250),
        "load": {"warmup_s": 1.0, "warmup_max_s": 10.0, "window_s": 3.0},
        "sim": {"time_scale": 5.0},
    },
    # The CI regression job (issue 7): levels bracketing the simulated crossovers (agentic
    # near 32, coding between 64 and 128), fixed seeds, 3x real time so one sweep takes about
    # two minutes on a 2-core runner while the client stays below the client_bound flag.
    # 250 is left out: it costs the most warmup and the client is the bottleneck there.
    # A fixed threshold: the auto one moves 29..35 between identical runs (r(c) is flat near
    # the agentic crossover), which flips the dynamic server at c=32 between drafting and not;
    # 24 sits between grid levels, so every grid level is cleanly on one side of it.
    "ci": {
        "concurrency": (8, 16, 32, 64, 128),
        "threshold": 24,
        "load": {"warmup_s": 1.0, "warmup_max_s": 20.0, "window_s": 4.0, "seed": 0},
        "sim": {"seed": 0, "time_scale": 3.0},
    },
}
