"""Where a user error becomes what the user sees: one line on stderr, `error: <cause>; <fix>`,
and exit code 2. Every command goes through here."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer
from rich.console import Console

from specbench.errors import UserError

T = TypeVar("T")


def fail(message: str, code: int = 2) -> NoReturn:
    Console(stderr=True, soft_wrap=True).print(f"error: {message}", markup=False, highlight=False)
    raise typer.Exit(code)


def guard(fn: Callable[[], T]) -> T:
    """Run a library call; user errors become one line and exit 2."""
    try:
        return fn()
    except UserError as exc:
        # Server failures carry the log's last lines after the first line; the rest is one line.
        fail(str(exc).strip())
