"""The sweep configuration's schema: every option once, as a pydantic field.

Each field carries its default, its help text and, where it is also a command-line option, its
flag (`option(...)`), so that `cli/options.py` generates the command line and its `--help`
from here. Validation is strict (`config.py` builds and layers; see there why pydantic): the
models are frozen and refuse unknown keys, and a field validator raises :class:`ConfigError`
with one line: where, what was given, and the fix. One module per section (server, sim,
load) and the sweep that holds them; the rules a section shares with the load generator (SLO
keys, what an extra request body may set) live in :mod:`specbench.rules`.
"""

from __future__ import annotations

from specbench.config_schema.fields import (
    DEFAULT_CONCURRENCY,
    DEFAULT_FIXED_THRESHOLD,
    DEFAULT_PROMPT_SETS,
    ENGINES,
    PORT_STRIDE,
    PROTOCOLS,
    SIM_DEFAULT_PROFILE,
    Engine,
    Protocol,
    Section,
    option,
)
from specbench.config_schema.load import MAX_WINDOW_FACTOR, LoadConfig
from specbench.config_schema.server import ServerConfig
from specbench.config_schema.sim import SimConfig
from specbench.config_schema.sweep import SweepConfig

SECTIONS: dict[str, type[Section]] = {"server": ServerConfig, "sim": SimConfig, "load": LoadConfig}

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_FIXED_THRESHOLD",
    "DEFAULT_PROMPT_SETS",
    "ENGINES",
    "MAX_WINDOW_FACTOR",
    "PORT_STRIDE",
    "PROTOCOLS",
    "SECTIONS",
    "SIM_DEFAULT_PROFILE",
    "Engine",
    "LoadConfig",
    "Protocol",
    "Section",
    "ServerConfig",
    "SimConfig",
    "SweepConfig",
    "option",
]
