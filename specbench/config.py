"""The sweep configuration: layered, validated once, into a frozen :class:`SweepConfig`.

Presets, the TOML file and the command line are layered as plain dicts (later wins) and then
validated once, strictly, into a frozen :class:`SweepConfig`; the library never re-reads options.
pydantic (v2) was chosen over msgspec because it reports every problem with its key path, value
and reason, which is what a one-line error needs, and because its field metadata can carry the
CLI names the command line is generated from (`cli/options.py`). Validation goes through JSON-mode
strict parsing, so `window_s = "8"`, `repeats = 2.5` and `modes = "baseline"` are refused
instead of coerced, while TOML arrays still become tuples. Every problem raises
:class:`ConfigError` with one line: where, what was given, and the fix.

The schema itself (the sections, their fields and defaults) lives in `config_schema/`; its
names are re-exported here, so `from specbench.config import SweepConfig` stays the one import.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from specbench import configurations
from specbench.config_messages import COMMAND_LINE, one_line
from specbench.config_schema import (
    DEFAULT_CONCURRENCY,
    DEFAULT_FIXED_THRESHOLD,
    DEFAULT_PROMPT_SETS,
    ENGINES,
    PROTOCOLS,
    SECTIONS,
    SIM_DEFAULT_PROFILE,
    Engine,
    LoadConfig,
    Protocol,
    ServerConfig,
    SimConfig,
    SweepConfig,
    option,
)
from specbench.errors import ConfigError
from specbench.presets import PRESETS

# The schema's names and what callers take from here (`from specbench.config import X`).
__all__ = [
    "COMMAND_LINE",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_FIXED_THRESHOLD",
    "DEFAULT_PROMPT_SETS",
    "ENGINES",
    "PRESETS",
    "PROTOCOLS",
    "SECTIONS",
    "SIM_DEFAULT_PROFILE",
    "ConfigError",
    "Engine",
    "LoadConfig",
    "Protocol",
    "ServerConfig",
    "SimConfig",
    "SweepConfig",
    "auto_plan",
    "build",
    "cli_flags",
    "differences",
    "field_value",
    "from_dict",
    "load_toml",
    "merge",
    "option",
    "resolve",
    "to_dict",
    "validate",
]

# ---------------------------------------------------------------------------------------------
# Building: layers of plain dicts, validated once.


def to_dict(cfg: SweepConfig) -> dict[str, Any]:
    """A JSON-ready view for the manifest; secrets are left out."""
    return cfg.model_dump(mode="json")


def build(layers: dict[str, Any], source: str = "configuration") -> SweepConfig:
    """Validate merged option layers into a SweepConfig; one ConfigError line on a problem."""
    try:
        return SweepConfig.model_validate_json(json.dumps(layers, default=str), strict=True)
    except ValidationError as exc:
        raise ConfigError(
            one_line(exc, source, flags=cli_flags(), known=_known_keys())
        ) from None
    except ConfigError as exc:  # raised by a validator, wrapped by pydantic on some paths
        raise ConfigError(str(exc)) from None


def from_dict(raw: dict[str, Any]) -> SweepConfig:
    """Inverse of to_dict; used to resume a run from its manifest."""
    return build(raw, source="the stored run's manifest")


def cli_flags() -> dict[str, str]:
    """Dotted field path -> command-line flag, from the schema's field metadata."""
    flags: dict[str, str] = {}
    models: list[tuple[str, type[BaseModel]]] = [("", SweepConfig)]
    models += [(f"{name}.", model) for name, model in SECTIONS.items()]
    for prefix, model in models:
        for name, field in model.model_fields.items():
            extra = field.json_schema_extra
            if isinstance(extra, dict) and extra.get("cli"):
                flags[prefix + name] = str(extra["cli"])
    return flags


def _known_keys() -> dict[str, list[str]]:
    known = {"": sorted(SweepConfig.model_fields)}
    known.update({name: sorted(model.model_fields) for name, model in SECTIONS.items()})
    return known


def load_toml(path: Path) -> dict[str, Any]:
    """Read a config file as one option layer (validated later, with the other layers)."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; check the --config path") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"config file {path} cannot be read ({exc}); fix the TOML syntax"
        ) from None
    # Validate now, so a bad file is named as the source of the problem.
    build(data, source=f"config file {path}")
    return data


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Nested override merge of plain option dicts (sections merge key by key)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, value in overrides.items():
        if key in SECTIONS and isinstance(value, dict) and isinstance(out.get(key), dict):
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


def field_value(cfg: SweepConfig, dotted: str) -> Any:
    value: Any = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


# ---------------------------------------------------------------------------------------------
# Layering: preset < config file < command line; resume keeps the stored config.


def resolve(
    cli_values: dict[str, Any],
    *,
    preset: str | None = None,
    config_file: Path | None = None,
    stored: dict[str, Any] | None = None,
    base: dict[str, Any] | None = None,
) -> SweepConfig:
    """The one config of a sweep.

    `cli_values` are nested plain values of the options given on the command line. With
    `stored` (a resumed run's manifest config) the stored config is the base and only what this
    command says explicitly (preset and config file included) may differ from it: a difference
    is refused, naming the field, except for where results go and the secret key.
    """
    build(cli_values, source=COMMAND_LINE)  # so a bad value is named by its flag
    layers: dict[str, Any] = dict(base or {})  # a command's own defaults (`specbench tune`)
    if preset is not None:
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
        layers = merge(layers, PRESETS[preset])
    if config_file is not None:
        layers = merge(layers, load_toml(config_file))
    layers = merge(layers, cli_values)
    if stored is None:
        cfg = build(layers)
        if cfg.plan == "auto":
            cfg = build(merge(layers, {"plan": auto_plan(cfg, "concurrency" in layers)}))
        validate(cfg)
        return cfg
    old = from_dict(stored)
    wanted = build(merge(stored, layers))
    diffs = [d for d in differences(old, wanted) if d not in ("results_dir", "run_name")]
    if diffs:
        first = diffs[0]
        raise ConfigError(
            f"{first} differs from the stored run "
            f"({field_value(old, first)!r} vs {field_value(wanted, first)!r}); "
            "drop that option or start a new run"
        )
    return wanted


def auto_plan(cfg: SweepConfig, grid_given: bool) -> Literal["auto", "dense", "adaptive"]:
    """What `--plan auto` runs. Adaptive (lab/notes/benchmarks.md, adaptive_plan.py: 42% of the
    dense grid's GPU-seconds for the same decisions) where it can run: the default grid
    (levels someone listed are measured), one server at a time, a decision's two servers in
    the modes and no tuned server (its schedule needs every K at every level). For real SGLang
    it stays "auto": the launch time decides (run/plan.py, plan_for_launch)."""
    one_at_a_time = cfg.executor != "ray" and len(cfg.gpu_slots()) <= 1 and not cfg.only_config
    paired = any(set(pair) <= set(cfg.modes) for pair in configurations.DECISION_PAIRS.values())
    if grid_given or not one_at_a_time or not paired or "tuned" in cfg.modes \
            or cfg.load.request_rates:
        return "dense"
    if cfg.engine == "sglang":  # launches cost minutes: run/plan.py weighs them (plan_for_launch)
        return "auto"
    return "adaptive"


def validate(cfg: SweepConfig) -> None:
    """Checks across fields that need no server and no file system; raise ConfigError."""
    if (
        cfg.server.max_running_requests is not None
        and max(cfg.concurrency) > cfg.max_running_requests
    ):
        raise ConfigError(
            f"concurrency {max(cfg.concurrency)} is above --max-running-requests "
            f"{cfg.max_running_requests}; lower the levels or raise the server limit"
        )
    if cfg.engine != "attach" and not cfg.server.draft_model_path:
        needing = [c.name for c in cfg.configurations if c.speculative]
        if needing:
            raise ConfigError(
                f"the {needing[0]} server needs a draft model; "
                "pass --draft-model-path or drop the EAGLE-3 configurations from --modes"
            )
    if cfg.engine == "attach":
        attached = {name for name, _ in cfg.attach}
        missing = [m for m in cfg.modes if m not in attached]
        if missing:
            raise ConfigError(
                f"--engine attach needs a URL for mode {missing[0]}; "
                f"pass --attach {missing[0]}=http://HOST:PORT"
            )
    if cfg.run_name is not None:
        name = cfg.run_name
        if not name or "/" in name or "\\" in name or name in (".", "..") or name.startswith("."):
            raise ConfigError(
                f"run name {name!r} is not a plain directory name; use letters, digits, '-' and '_'"
            )
