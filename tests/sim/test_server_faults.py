"""Fault injection (--sim-*) and process lifecycle: crashes, bad streams, signals, parent death."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.sim.conftest import MODEL, SimProc, launch, sse

FAST = ("--sim-time-scale", "20", "--max-running-requests", "64")


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": text}],
        "temperature": 0,
        **extra,
    }


async def raw_stream(url: str, body: dict[str, Any]) -> tuple[list[bytes], str | None]:
    """All raw lines of a stream, and the client error that ended it, if any."""
    lines: list[bytes] = []
    try:
        async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
            async for raw in resp.content:
                lines.append(raw)
    except aiohttp.ClientError as exc:
        return lines, type(exc).__name__
    return lines, None


def test_crash_after_requests(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim: SimProc = start_sim(*FAST, "--sim-crash-after-requests", "3")
    assert sim.post("/v1/chat/completions", chat("one", max_tokens=5))[0] == 200
    assert sim.post("/v1/chat/completions", chat("two", max_tokens=5))[0] == 200
    with pytest.raises(OSError):
        sim.post("/v1/chat/completions", chat("three", max_tokens=5), timeout_s=10)
    assert sim.wait_exit(10) == 1
    assert "injected crash after 3 requests" in sim.log


def test_crash_after_seconds(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim: SimProc = start_sim(*FAST, "--sim-crash-after-s", "0.5")
    t0 = time.monotonic()
    assert sim.wait_exit(10) == 1
    assert time.monotonic() - t0 < 5
    assert "Scheduler hit an exception" in sim.log


def test_error_rate_is_a_deterministic_fraction(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim: SimProc = start_sim(*FAST, "--sim-error-rate", "0.5")
    replies = [sim.post("/v1/chat/completions", chat(f"q{i}", max_tokens=3)) for i in range(10)]
    assert [status for status, _ in replies] == [200, 500] * 5
    assert json.loads(replies[1][1])["code"] == 500
    assert sim.get("/ready")[0] == 200


def test_truncated_stream_ends_without_done(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim: SimProc = start_sim(*FAST, "--sim-truncate-rate", "1")
    lines, error = asyncio.run(
        raw_stream(
            sim.url + "/v1/chat/completions",
            chat("cut me", max_tokens=200, ignore_eos=True, stream=True),
        )
    )
    assert error == "ClientPayloadError"
    assert lines and b"data: [DONE]\n" not in lines
    # The server survives and the next request is served (and truncated again).
    assert sim.get("/ready")[0] == 200


def test_malformed_chunk_is_not_json(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim: SimProc = start_sim(*FAST, "--sim-malformed-rate", "1")
    lines, error = asyncio.run(
        raw_stream(
            sim.url + "/v1/chat/completions",
            chat(
                "bad",
                max_tokens=50,
                ignore_eos=True,
                stream=True,
                stream_options={"include_usage": True, "continuous_usage_stats": True},
            ),
        )
    )
    assert error is None
    data = [ln[6:].strip() for ln in lines if ln.startswith(b"data: ")]
    assert data[-1] == b"[DONE]"
    bad = []
    for d in data[:-1]:
        try:
            json.loads(d)
        except json.JSONDecodeError:
            bad.append(d)
    assert len(bad) == 1
    usage = [json.loads(d)["usage"] for d in data[:-1] if d not in bad and b'"usage"' in d]
    assert usage[-1]["completion_tokens"] == 50


def test_stall_pauses_the_stream(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim: SimProc = start_sim(*FAST, "--sim-stall-after-tokens", "10", "--sim-stall-s", "0.6")

    async def go() -> list[Any]:
        async with aiohttp.ClientSession() as session:
            status, events = await sse(
                session,
                sim.url + "/v1/chat/completions",
                chat(
                    "slow",
                    max_tokens=40,
                    ignore_eos=True,
                    stream=True,
                    stream_options={"include_usage": True},
                ),
            )
            assert status == 200
            return events

    events = asyncio.run(go())
    gaps = [b.t - a.t for a, b in itertools.pairwise(events)]
    assert max(gaps) >= 0.5
    assert events[-2].json["usage"]["completion_tokens"] == 40


def test_slow_start_serves_model_info_but_not_ready(start_sim) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    sim: SimProc = start_sim(*FAST, "--sim-slow-start-s", "1.5", wait_ready=False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if sim.get("/model_info", timeout_s=1)[0] == 200:
                break
        except OSError:
            time.sleep(0.05)
    assert sim.get("/ready")[0] == 503
    assert sim.get("/health")[0] == 503
    while sim.get("/ready")[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert time.monotonic() - t0 >= 1.5
    assert sim.log.count("The server is fired up and ready to roll!") == 1


def test_fail_start_prints_the_line_and_exits_1(start_sim) -> None:  # type: ignore[no-untyped-def]
    line = "Not enough memory. Please try to increase --mem-fraction-static."
    sim: SimProc = start_sim(*FAST, "--sim-fail-start", line, wait_ready=False)
    assert sim.wait_exit(15) == 1
    assert line in sim.log and "ready to roll" not in sim.log


def test_cap_running_is_silent(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim: SimProc = start_sim(*FAST, "--sim-cap-running", "2")
    info = sim.get_json("/server_info")
    assert info["max_running_requests"] == 64
    assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 64

    async def go() -> dict[str, Any]:
        async with aiohttp.ClientSession() as session:
            t0 = time.monotonic()
            await asyncio.gather(
                *(
                    sse(
                        session,
                        sim.url + "/v1/chat/completions",
                        chat(f"job {i}", max_tokens=300, ignore_eos=True, stream=True),
                    )
                    for i in range(6)
                )
            )
            async with session.get(
                sim.url + f"/sim/ground_truth?start={t0}&end={time.monotonic()}"
            ) as r:
                return dict(await r.json())

    gt = asyncio.run(go())
    assert gt["finished_requests"] == 6
    assert 1.0 < gt["running_reqs_mean"] <= 2.0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_exit_cleanly_and_quickly(start_sim, sig: signal.Signals) -> None:  # type: ignore[no-untyped-def]
    sim: SimProc = start_sim(*FAST)

    async def busy() -> None:
        async with aiohttp.ClientSession() as session:
            task = asyncio.create_task(
                sse(
                    session,
                    sim.url + "/v1/chat/completions",
                    chat("x", max_tokens=100000, ignore_eos=True, stream=True),
                )
            )
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            sim.proc.send_signal(sig)
            code = await asyncio.get_running_loop().run_in_executor(None, sim.wait_exit, 10.0)
            assert code == 0
            assert time.monotonic() - t0 < 3.0
            task.cancel()

    asyncio.run(busy())


def test_port_in_use_fails_with_bind_error(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        sim = launch(FAST, tmp_path, wait_ready=False, port=port)
        assert sim.wait_exit(15) == 1
    assert "address already in use" in sim.log.lower()


def test_server_dies_with_its_parent(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    parent_code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-m', 'specbench.sim', '--model-path', {MODEL!r}, "
        "'--port', '0', '--skip-server-warmup'],\n"
        "    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child = int(pid_file.read_text())
        time.sleep(1.0)  # let the child install its parent-death signal and start serving
        assert Path(f"/proc/{child}").exists()
        parent.kill()
        parent.wait(timeout=5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                state = Path(f"/proc/{child}/stat").read_text().split()[2]
            except OSError:
                break
            if state == "Z":
                break
            time.sleep(0.05)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail("the simulator outlived its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
