"""The load generator: closed-loop users against one base URL, speaking one protocol.

It knows nothing of engines or modes: :func:`run_point` gets a :class:`PointSpec` (URL,
protocol, model name, concurrency, requests, window) and returns a :class:`PointResult` of
per-request records that :mod:`specbench.metrics` turns into a summary row.
"""

from __future__ import annotations

from specbench.load.protocols import ERROR_CLASSES, PROTOCOLS, ParsedStream, Protocol, ProtocolError
from specbench.load.runner import (
    LoadError,
    MetricsSnapshot,
    PointResult,
    PointSpec,
    RequestRecord,
    run_point,
    run_point_sync,
)

__all__ = [
    "ERROR_CLASSES",
    "PROTOCOLS",
    "LoadError",
    "MetricsSnapshot",
    "ParsedStream",
    "PointResult",
    "PointSpec",
    "Protocol",
    "ProtocolError",
    "RequestRecord",
    "run_point",
    "run_point_sync",
]
