"""Secrets never reach a run directory, a log line or the terminal.

The bearer keys (`--api-key`, `--admin-api-key`) are passed to launched servers and sent with
requests, but every command line specbench records or prints goes through :func:`redact`.
"""

from __future__ import annotations

SECRET_FLAGS = ("--api-key", "--admin-api-key")


def redact(command: list[str]) -> list[str]:
    """A command line with the value of every secret flag replaced by ***."""
    out: list[str] = []
    hide_next = False
    for arg in command:
        flag = arg.split("=", 1)[0]
        if hide_next:
            out.append("***")
            hide_next = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif flag in SECRET_FLAGS and "=" in arg:
            out.append(f"{flag}=***")
        else:
            out.append(arg)
    return out
