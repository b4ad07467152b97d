"""The sweep's progress display: the ETA's arithmetic, the live line, the launch line."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from rich.console import Console

from specbench.load.runner import LiveView, PointSpec, run_point
from specbench.run.progress import Eta, SweepProgress, format_duration, last_log_line, live_text
from tests.load.fakeserver import FakeOptions, FakeSGLang
from tests.load.test_runner import prompts


def test_the_eta_starts_from_the_plan_and_then_follows_the_measured_medians() -> None:
    eta = Eta(point_estimate_s=10.0, launch_estimate_s=60.0)
    assert eta.left_s(points_left=6, launches_left=2, current_started_s=0.0) == 6 * 10 + 2 * 60
    eta.point_s += [4.0, 5.0, 30.0]  # one slow point does not move the median much
    eta.launch_s.append(20.0)
    assert eta.left_s(6, 2, 0.0) == 6 * 5.0 + 2 * 20.0
    # The point in progress is partly done, but never counts as more than one point.
    assert eta.left_s(6, 0, current_started_s=3.0) == 6 * 5.0 - 3.0
    assert eta.left_s(6, 0, current_started_s=99.0) == 5 * 5.0


def test_durations_read_as_minutes_or_hours() -> None:
    assert [format_duration(s) for s in (0, 59.6, 61, 3725)] == ["0:00", "1:00", "1:01",
                                                                  "1:02:05"]


def test_the_live_line_is_in_model_time() -> None:
    live = LiveView(concurrency=64, in_flight=63, phase="warmup", time_scale=4.0)
    assert live_text(live) == "in flight 63/64, warming up"
    live.phase, live.window_elapsed_s, live.window_s, live.server_tok_s = "window", 0.5, 2.0, 4000
    assert live_text(live) == "in flight 63/64, window 2.0/8.0 s, 1,000 tok/s so far"


def test_a_launch_shows_the_last_line_of_the_server_log(tmp_path: Path) -> None:
    log = tmp_path / "servers" / "eagle3.log"
    assert last_log_line(log) == ""  # not written yet
    log.parent.mkdir()
    log.write_text("loading weights\n" + "x" * 200 + "\nCapturing cuda graph bs=64\n\n")
    assert last_log_line(log) == "Capturing cuda graph bs=64"
    console = Console(record=True, width=120, force_terminal=False)
    progress = SweepProgress(console, total=4, point_estimate_s=10.0, launch_estimate_s=60.0)
    progress.plan(total_points=4, launches_left=2)
    progress.launching("eagle3", log)
    assert progress.now_text().startswith("server starting 0:00 | Capturing cuda graph bs=64")
    progress.launched()
    assert progress.launches_left == 1 and len(progress.eta.launch_s) == 1
    live = LiveView(concurrency=8, in_flight=8, phase="warmup")
    progress.measuring("eagle3 coding c=8", live)
    assert progress.now_text() == "in flight 8/8, warming up"
    progress.measured()
    assert progress.now_text() == "" and len(progress.eta.point_s) == 1


def test_the_runner_keeps_the_live_view_up_to_date() -> None:
    live = LiveView(time_scale=1.0)
    seen: list[tuple[str, int]] = []
    windows_s: list[float] = []

    async def main() -> None:
        async with FakeSGLang(FakeOptions(output_tokens=30, step_s=0.003)) as srv:
            spec = PointSpec(base_url=srv.url, protocol="openai-chat", model="m", concurrency=6,
                             requests=prompts(), warmup_s=0.2, window_s=1.2, live=live)
            task = asyncio.create_task(run_point(spec))
            while not task.done():
                seen.append((live.phase, live.in_flight))
                await asyncio.sleep(0.05)
            windows_s.append((await task).window_wall_s)

    t0 = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - t0 < 10
    phases = [phase for phase, _ in seen]
    assert "warmup" in phases and "window" in phases
    assert live.phase == "done" and live.concurrency == 6
    # The window closes when the loop gets to it, late on a loaded machine (CI saw 1.33 s): the
    # live view shows the window the point really measured.
    assert windows_s[0] >= 1.2
    assert live.window_elapsed_s == pytest.approx(windows_s[0], abs=1e-6)
    assert max(n for _, n in seen) == 6
    assert live.server_tok_s is not None and live.server_tok_s > 0
