"""Several client processes measure one point as one process does (specbench/load/procs.py)."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
from typing import Any

import pytest

from specbench import metrics
from specbench.load.procs import _forward, auto_procs, run_point_procs
from specbench.load.runner import run_point_sync
from tests.load.fakeserver import FakeOptions, fake_in_thread
from tests.load.test_runner import spec_for, summary


def test_two_processes_give_one_point_with_every_user_and_request_once() -> None:
    with fake_in_thread(FakeOptions(output_tokens=40, step_s=0.004)) as srv:
        result = run_point_procs(spec_for(srv.url, concurrency=8, window_s=1.0), 2)
        truth = srv.tokens_between(result.window_start, result.window_end)
    ids = [r.request_id for r in result.records]
    assert ids == sorted(set(ids))  # one shared cursor: no id twice
    assert {r.user for r in result.records} == set(range(8))
    assert result.concurrency == 8 and result.end_reason == "window_s"
    assert result.metrics_before is not None and result.metrics_after is not None
    s = summary(result)
    # client_bound may fire on a loaded 2-core machine (two clients and the fake share it):
    # it says the client set the pace, which there it did. No other flag may.
    assert s["n_errors"] == 0
    # The fake gives every request 40 tokens: they end in step.
    assert set(filter(None, s["flags"].split(";"))) <= {"client_bound", "lockstep_ends"}
    window_tokens = s["output_tok_s"] * s["window_s"]
    assert window_tokens == pytest.approx(truth, rel=0.05)


def test_window_max_requests_ends_every_process_at_once() -> None:
    with fake_in_thread(FakeOptions(output_tokens=5, step_s=0.002)) as srv:
        result = run_point_procs(spec_for(srv.url, concurrency=6, window_s=30.0,
                                          window_max_requests=20), 3)
    assert result.end_reason == "window_max_requests"
    assert result.window_wall_s < 10.0
    assert sum(r.status == "ok" for r in result.records) >= 20


async def _forwarded(last: tuple[Any, ...] | None) -> list[tuple[int, tuple[Any, ...]]]:
    """What the coordinator's inbox holds after a child sent `last` (or nothing) and exited."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[int, tuple[Any, ...]]] = asyncio.Queue()
    mine, theirs = mp.Pipe()
    loop.add_reader(mine.fileno(), _forward, 0, mine, inbox, loop)
    theirs.send(("warm", False))
    if last is not None:
        theirs.send(last)
    theirs.close()  # the child exits: its end of the pipe closes
    await asyncio.sleep(0.05)
    loop.remove_reader(mine.fileno())
    mine.close()
    return [inbox.get_nowait() for _ in range(inbox.qsize())]


def test_a_child_that_exits_after_its_result_is_not_an_error() -> None:
    # The pipe's end-of-file after the result once reached the inbox as an error while other
    # children were still sending theirs, and the point failed.
    assert asyncio.run(_forwarded(("result", "r"))) == [(0, ("warm", False)), (0, ("result", "r"))]
    ended = asyncio.run(_forwarded(None))
    assert ended[-1] == (0, ("error", "the client process ended without a result"))


def test_one_process_is_the_plain_runner() -> None:
    with fake_in_thread(FakeOptions(output_tokens=6)) as srv:
        one = run_point_procs(spec_for(srv.url, window_s=0.4), 1)
        plain = run_point_sync(spec_for(srv.url, window_s=0.4))
    assert set(metrics.summarize_point(one, 1.0, None, 0.01)) == set(
        metrics.summarize_point(plain, 1.0, None, 0.01))


def test_automatic_processes_follow_users_and_cores() -> None:
    assert auto_procs(16, 2) == 1
    assert auto_procs(250, 16) == 4
    assert auto_procs(1024, 16) == 8
