"""Engines: how a named server configuration becomes a running server (see `base.py`)."""

from __future__ import annotations

from specbench.config import SweepConfig
from specbench.engines.attach import AttachEngine
from specbench.engines.base import Engine, Server
from specbench.engines.sglang import SGLangEngine
from specbench.engines.simulated import SimEngine

ENGINES: dict[str, type[SimEngine] | type[SGLangEngine] | type[AttachEngine]] = {
    "sim": SimEngine,
    "sglang": SGLangEngine,
    "attach": AttachEngine,
}


def make_engine(cfg: SweepConfig) -> Engine:
    return ENGINES[cfg.engine](cfg)


__all__ = ["ENGINES", "Engine", "Server", "make_engine"]
