"""Secrets never reach a run directory, a log line or the terminal.

The bearer keys (`--api-key`, `--admin-api-key`) are passed to launched servers and sent with
requests, but every command line specbench records or prints goes through :func:`redact`.
"""

from __future__ import annotations

import re

SECRET_FLAGS = ("--api-key", "--admin-api-key")
# A secret flag and its value inside one argument (`--server-arg=--api-key K`, `--api-key=K`).
_INLINE = re.compile(r"(--(?:admin-)?api-key)([ =])(\S+)")


def redact(command: list[str]) -> list[str]:
    """A command line with the value of every secret flag replaced by ***."""
    out: list[str] = []
    hide_next = False
    for arg in command:
        if hide_next:
            out.append("***")
            hide_next = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        else:
            out.append(_INLINE.sub(r"\1\2***", arg))
    return out
