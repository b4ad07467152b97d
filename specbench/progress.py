"""The sweep's progress display: points done of points planned, and what is being measured.

Kept apart from the sweep so the library does not hold terminal widgets; the sweep only says
how many points there are, which one is running and when one is done.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class SweepProgress:
    def __init__(self, console: Console, total: int) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._task: TaskID = self._progress.add_task("sweep", total=total)

    def __enter__(self) -> SweepProgress:
        self._progress.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.__exit__(exc_type, exc, tb)

    def set_total(self, total: int) -> None:
        self._progress.update(self._task, total=total)

    def describe(self, text: str) -> None:
        self._progress.update(self._task, description=text)

    def advance(self, points: int) -> None:
        self._progress.advance(self._task, points)
