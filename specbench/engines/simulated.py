"""The simulated engine: `python -m specbench.sim` launched with the same SGLang argv.

It is a drop-in for `sglang serve`: the argv comes from the one builder in argv.py, and the
`--sim-*` options (profile, time scale, seed, fault injection) are appended.
"""

from __future__ import annotations

import sys
from pathlib import Path

from specbench.config import SweepConfig
from specbench.engines.argv import build_argv


def sim_command(
    mode: str, cfg: SweepConfig, *, port: int, adaptive_config_path: Path | None
) -> list[str]:
    argv = build_argv(
        mode,
        cfg.server,
        port=port,
        max_running_requests=cfg.max_running_requests,
        adaptive_config_path=adaptive_config_path,
    )
    return [
        sys.executable,
        "-m",
        "specbench.sim",
        *argv,
        "--sim-profile",
        cfg.sim.profile,
        "--sim-time-scale",
        repr(cfg.sim.time_scale),
        "--sim-seed",
        str(cfg.sim.seed),
        *cfg.sim.extra_args,
    ]
