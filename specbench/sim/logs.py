"""The simulator's log: SGLang-style lines on stderr, which harnesses grep like SGLang's.

specbench's engine checks read the server log (the ready line, "Decode batch" lines, crash
lines), so every module logs through :func:`log` into one logger with SGLang's format.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("specbench.sim")
_LEVELS = {"info": logging.INFO, "error": logging.ERROR}


def log(level: str, message: str) -> None:
    """Log at "info", "error" (where SGLang logs an error) or (anything else) warning level."""
    logger.log(_LEVELS.get(level, logging.WARNING), message)


def setup_logging(level_name: str) -> None:
    """`[YYYY-mm-dd HH:MM:SS] message` on stderr, at --log-level (info when unknown)."""
    level = logging.getLevelName(level_name.upper())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
    logger.handlers[:] = [handler]
    logger.setLevel(level if isinstance(level, int) else logging.INFO)
    logger.propagate = False
