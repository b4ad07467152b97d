"""The simulated engine: `python -m specbench.sim` launched with the same SGLang argv.

It is a drop-in for `sglang serve`: the argv comes from the one builder in argv.py, and the
`--sim-*` options (profile, time scale, seed, fault injection) are appended.
"""

from __future__ import annotations

import sys
from pathlib import Path

import specbench
from specbench.config import SweepConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.engines.argv import build_argv
from specbench.engines.base import LaunchedEngine


class SimEngine(LaunchedEngine):
    kind = "sim"
    start_estimate_s = 5.0

    def __init__(self, cfg: SweepConfig) -> None:
        super().__init__(cfg)
        self.time_scale = cfg.sim.time_scale

    def version(self) -> str | None:
        return f"specbench.sim {specbench.__version__}"

    def command(
        self,
        config: ServerConfiguration,
        adaptive_path: Path | None,
        schedule: Schedule | None = None,
    ) -> list[str]:
        cfg = self.cfg
        argv = build_argv(
            config,
            cfg.server,
            port=cfg.server.port,
            max_running_requests=cfg.max_running_requests,
            adaptive_config_path=adaptive_path,
            schedule=schedule,
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
