"""A SIGTERM during a point ends the point at once, wherever in the event loop it lands."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from specbench.run.sweep import SweepInterrupted, run_load, signals_raise
from tests.load.fakeserver import FakeOptions, fake_in_thread
from tests.load.test_runner import spec_for


def _term_after(delay_s: float) -> threading.Timer:
    timer = threading.Timer(delay_s, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    return timer


def test_a_sigterm_inside_a_busy_event_loop_ends_the_point() -> None:
    # The planted read delay burns CPU inside the users' tasks, so the handler runs inside a
    # task step, where an exception it raised would end only that task and the 30 s window
    # would run on.
    with fake_in_thread(FakeOptions(output_tokens=400, step_s=0.001)) as srv:
        spec = spec_for(srv.url, window_s=30.0, planted_read_delay_us=3000, concurrency=8)
        t0 = time.monotonic()
        with signals_raise(), pytest.raises(SweepInterrupted) as caught:
            timer = _term_after(1.0)
            try:
                run_load(spec)
            finally:
                timer.cancel()  # never a stray SIGTERM after the handler is gone
    assert caught.value.exit_code == 128 + signal.SIGTERM
    assert time.monotonic() - t0 < 6.0


def test_a_sigterm_outside_the_event_loop_raises_at_once() -> None:
    with signals_raise(), pytest.raises(SweepInterrupted):
        timer = _term_after(0.2)
        try:
            time.sleep(10)
        finally:
            timer.cancel()


def test_the_previous_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with signals_raise():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before
