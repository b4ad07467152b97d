"""The sweep's progress display: points done of planned, elapsed, an ETA for the whole sweep,
and a live line for what is happening now (a server starting, with its log's last line; or the
point being measured, with users in flight and tok/s so far).

Kept apart from the sweep so the library does not hold terminal widgets; the sweep says what
it plans, what starts and what ends. The ETA starts from the plan's estimates (a point's warmup
plus window, a launch's engine estimate) and replaces each with the median of what was
measured as soon as there is a measurement.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from specbench.load.runner import LiveView

_LOG_LINE_CHARS = 70
_TAIL_BYTES = 4096
_REDRAWS_PER_S = 2.0


def last_log_line(path: Path | None) -> str:
    """The last non-empty line of a server log, shortened; "" when there is none yet."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - _TAIL_BYTES))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    if not lines:
        return ""
    line = lines[-1]
    return line if len(line) <= _LOG_LINE_CHARS else line[: _LOG_LINE_CHARS - 1] + "…"


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Eta:
    """Time left for the sweep: points and launches left, each at its measured median (the
    plan's estimate until something was measured)."""

    def __init__(self, point_estimate_s: float, launch_estimate_s: float) -> None:
        self.point_estimate_s = point_estimate_s
        self.launch_estimate_s = launch_estimate_s
        self.point_s: list[float] = []
        self.launch_s: list[float] = []

    def per_point_s(self) -> float:
        return statistics.median(self.point_s) if self.point_s else self.point_estimate_s

    def per_launch_s(self) -> float:
        return statistics.median(self.launch_s) if self.launch_s else self.launch_estimate_s

    def left_s(self, points_left: int, launches_left: int, current_started_s: float,
               parallel: int = 1) -> float:
        """`current_started_s`: how long the point in progress has run (it counts as left);
        `parallel`: servers measuring side by side (`--gpus`)."""
        point_s = self.per_point_s()
        in_progress = min(current_started_s, point_s)
        work_s = max(0.0, points_left * point_s - in_progress) + launches_left * self.per_launch_s()
        return work_s / max(1, parallel)


class _EtaColumn(ProgressColumn):
    def __init__(self, owner: SweepProgress) -> None:
        super().__init__()
        self.owner = owner

    def render(self, task: Task) -> Text:
        text = f"ETA {format_duration(self.owner.left_s(task))}"
        if self.owner.gpu_spent_s is not None:
            text += f" · {self.owner.gpu_spent_s() / 60:.1f} GPU-min spent"
        return Text(text, style="cyan")


class _Display(Progress):
    """The progress row, and under it a line for what is happening now."""

    def __init__(self, owner: SweepProgress, *args: Any, **kwargs: Any) -> None:
        self.owner = owner  # before Progress starts rendering
        super().__init__(*args, **kwargs)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield from super().get_renderables()
        now = self.owner.now_text()
        if now:
            yield Text("  " + now, overflow="ellipsis", no_wrap=True, style="dim")


class SweepProgress:
    def __init__(self, console: Console, total: int, point_estimate_s: float = 10.0,
                 launch_estimate_s: float = 30.0) -> None:
        self.eta = Eta(point_estimate_s, launch_estimate_s)
        self.launches_left = 0
        self.parallel = 1  # servers measuring side by side (--gpus)
        # GPU seconds the run has spent so far (launches and points, from its manifest).
        self.gpu_spent_s: Callable[[], float] | None = None
        self._launch: tuple[Path | None, float] | None = None
        self._point: tuple[LiveView, float] | None = None
        self._progress = _Display(
            self,
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _EtaColumn(self),
            console=console,
            transient=False,
            # Rich redraws from a thread in the client's process: at its default 10 Hz the
            # line cost the client more CPU than a 250-user point's streams.
            refresh_per_second=_REDRAWS_PER_S,
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

    # -- what the sweep says ----------------------------------------------------------------
    def plan(self, total_points: int, launches_left: int) -> None:
        self.launches_left = launches_left
        self._progress.update(self._task, total=total_points)

    def advance(self, points: int) -> None:
        """Points found already measured (a resume): done, but not timed."""
        self._progress.advance(self._task, points)

    def launching(self, name: str, log_path: Path | None) -> None:
        self._launch = (log_path, time.monotonic())
        self._progress.update(self._task, description=f"{name}: starting server")

    def launched(self) -> None:
        if self._launch is not None:
            self.eta.launch_s.append(time.monotonic() - self._launch[1])
        self._launch = None
        self.launches_left = max(0, self.launches_left - 1)

    def measuring(self, description: str, live: LiveView) -> None:
        self._point = (live, time.monotonic())
        self._progress.update(self._task, description=description)

    def describe(self, text: str) -> None:
        self._progress.update(self._task, description=text)

    def measured_elsewhere(self) -> None:
        """A point measured by a parallel worker (not timed here)."""
        self._progress.advance(self._task, 1)

    def measured(self) -> None:
        if self._point is not None:
            self.eta.point_s.append(time.monotonic() - self._point[1])
        self._point = None
        self._progress.advance(self._task, 1)

    # -- what the display shows -------------------------------------------------------------
    def left_s(self, task: Task) -> float:
        points_left = max(0, int(task.total or 0) - int(task.completed))
        now = time.monotonic()
        running_s = now - self._point[1] if self._point else 0.0
        left_s = self.eta.left_s(points_left, self.launches_left, running_s, self.parallel)
        if self._launch is not None:  # the launch in progress counts as partly done
            left_s = max(0.0, left_s - min(now - self._launch[1], self.eta.per_launch_s()))
        return left_s

    def now_text(self) -> str:
        if self._launch is not None:
            log_path, started = self._launch
            line = last_log_line(log_path)
            return f"server starting {format_duration(time.monotonic() - started)}" + (
                f" | {line}" if line else "")
        if self._point is not None:
            return live_text(self._point[0])
        return ""


def live_text(live: LiveView) -> str:
    """`in flight 250/250, window 3.1/8.0 s, 1,234 tok/s so far`, in model time like every
    other number (the tok/s is the server's counter, which moves as requests end)."""
    # An open-loop point (concurrency 0) has no number of users to be in flight out of.
    text = (f"in flight {live.in_flight}/{live.concurrency}" if live.concurrency
            else f"in flight {live.in_flight}")
    if live.phase == "warmup":
        return text + ", warming up"
    scale = live.time_scale
    if live.phase in ("window", "done"):
        text += f", window {live.window_elapsed_s * scale:.1f}/{live.window_s * scale:.1f} s"
    if live.server_tok_s is not None:
        text += f", {live.server_tok_s / scale:,.0f} tok/s so far"
    return text
