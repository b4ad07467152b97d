"""Servers that fail requests (issue 27): no request storm, no silent success, one line.

Each case points the real `specbench sweep --engine attach` at a small aiohttp server started
here (tests/load/fakeserver.py), or launches the simulator with every request failing, and
checks what a user sees: the exit code, at most 3 lines on stderr and no traceback, the server's
own words in them, how hard the failing server was hit, and that no case runs past LIMIT_S.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path

import pytest

from specbench import results
from specbench.engines.process import free_port
from specbench.load.runner import (
    PointResult,
    failure_backoff_s,
    full_backoff_s,
    run_point,
)
from tests.harness import assert_no_process_left, run_cli, sweep_cli
from tests.load.fakeserver import FakeOptions, FakeSGLang, fake_in_thread
from tests.load.test_runner import spec_for

USERS = 2
# Backoff after a failed request: 0.1 s doubling to 2 s (docs/errors.md), so a user sends about
# 2 requests a second over a point's first seconds and fewer after. Without it, 2 users sent
# about 2,900 requests per user per second to a server answering 500 at once.
MAX_REQUESTS_PER_USER_S = 4.0
# What the server's clock may shift between two arrivals of one user (their transit times).
ARRIVAL_SLACK_S = 0.1
# warmup 0.5 s + the window's grace while users back off (2 s) + window 2 s, plus start-up.
LIMIT_S = 60


def test_the_backoff_doubles_to_its_cap_with_jitter() -> None:
    rng = random.Random(0)
    for failures in range(1, 40):
        full = full_backoff_s(failures)
        waits = [failure_backoff_s(failures, rng) for _ in range(50)]
        assert all(full / 2 <= w <= full for w in waits)
        assert max(waits) - min(waits) > 0.2 * full  # users that failed together spread out


def test_users_back_off_in_the_runner() -> None:
    # Every request fails at once: without the backoff, thousands a second per user.
    opts = FakeOptions(fault=lambda i: "http500")
    users = 4

    async def measure() -> tuple[PointResult, FakeSGLang]:
        async with FakeSGLang(opts) as srv:
            spec = spec_for(srv.url, concurrency=users, warmup_s=0.1, window_s=1.5)
            return await run_point(spec), srv

    result, srv = asyncio.run(measure())
    # No user can have sent more than its shortest waits fit into the span the server saw (a
    # rate would not do: a point that a starved machine closes early holds only the first,
    # shortest waits).
    span_s = srv.arrival_t[-1] - srv.arrival_t[0]
    most = users * _most_requests_per_user(span_s + ARRIVAL_SLACK_S)
    assert len(srv.arrival_t) <= most, f"{len(srv.arrival_t)} requests in {span_s:.2f} s"
    assert all(r.status == "error" for r in result.records)


def _most_requests_per_user(span_s: float) -> int:
    """Requests one failing user can send within span_s: the first, then one after each of the
    backoff's shortest waits (half the full wait, the jitter's least) that fit."""
    requests, waited_s = 1, full_backoff_s(1) / 2
    while waited_s <= span_s:
        requests += 1
        waited_s += full_backoff_s(requests) / 2
    return requests


def _sweep(tmp_path: Path, url: str, *extra: str) -> tuple[int, str, str]:
    proc = run_cli(
        ["sweep", "--engine", "attach", "--attach", f"baseline={url}", "--modes", "baseline",
         "--prompts", "coding", "--concurrency", f"{USERS}", "--results-dir",
         str(tmp_path / "res"), "--run-name", "run", "--warmup-s", "0.5", "--window-s", "2",
         "--request-timeout-s", "30", *extra],
        cwd=tmp_path, timeout=LIMIT_S,
    )
    return proc.returncode, proc.stdout, proc.stderr


def _quick_warmup(tmp_path: Path) -> Path:
    """A config that caps the warmup at 1 s (60 s by default): requests that never end would
    otherwise hold it that long."""
    config = tmp_path / "quick.toml"
    config.write_text("[load]\nwarmup_max_s = 1\n")
    return config


def _rate_per_user_s(srv: FakeSGLang) -> float:
    """Completion requests per user per second, over the span the server saw them."""
    t = srv.arrival_t
    assert len(t) >= 2
    return len(t) / USERS / (t[-1] - t[0])


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 3, stderr
    assert "Traceback" not in stderr
    return lines[-1]


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_every_request_500_is_backed_off_and_stops_with_the_servers_words(
    tmp_path: Path,
) -> None:
    with fake_in_thread(FakeOptions(fault=lambda i: "http500")) as srv:
        code, out, err = _sweep(tmp_path, srv.url)
        rate = _rate_per_user_s(srv)
    assert code == 2, out[-2000:] + err[-2000:]
    line = _one_line(err)
    assert line.startswith("error: ")
    assert 'HTTP 500: {"object": "error", "message": "injected"' in line
    assert "--resume" in line
    assert rate <= MAX_REQUESTS_PER_USER_S, f"{rate:.1f} requests per user per second"
    # The failed point is not a measurement: no point file, the manifest says why.
    run_dir = tmp_path / "res" / "run"
    assert results.measured_keys(run_dir) == set()
    manifest = results.read_manifest(run_dir)
    assert manifest.status == "failed"
    assert manifest.points["baseline/coding/c2-r0"].status == "failed"


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_an_overloaded_router_is_quoted_in_120_characters(tmp_path: Path) -> None:
    words = "Too many requests: all workers are at capacity " * 10
    opts = FakeOptions(fault=lambda i: "http500", error_status=429, error_message=words)
    with fake_in_thread(opts) as srv:
        code, out, err = _sweep(tmp_path, srv.url)
        rate = _rate_per_user_s(srv)
    assert code == 2, out[-2000:] + err[-2000:]
    line = _one_line(err)
    body = '{"object": "error", "message": "' + words
    assert f"HTTP 429: {body[:120]};" in line, line
    assert rate <= MAX_REQUESTS_PER_USER_S, f"{rate:.1f} requests per user per second"


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_streams_that_are_not_json_stop_with_one_line(tmp_path: Path) -> None:
    with fake_in_thread(FakeOptions(fault=lambda i: "malformed")) as srv:
        code, out, err = _sweep(tmp_path, srv.url)
    assert code == 2, out[-2000:] + err[-2000:]
    line = _one_line(err)
    assert "malformed_chunk" in line and "not JSON" in line, line


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_a_server_that_never_answers_is_not_a_measurement(tmp_path: Path) -> None:
    # It accepts every request and sends nothing. The warmup waits for requests to end up to
    # load.warmup_max_s (60 s by default), then the window runs: that is the limit it costs.
    with fake_in_thread(FakeOptions(fault=lambda i: "silent")) as srv:
        code, out, err = _sweep(tmp_path, srv.url, "--config", str(_quick_warmup(tmp_path)))
    assert code == 2, out[-2000:] + err[-2000:]
    line = _one_line(err)
    assert f"the server sent no token to any of {USERS} requests" in line, line
    assert "--resume" in line
    assert results.measured_keys(tmp_path / "res" / "run") == set()


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_streams_that_stall_for_good_are_not_a_measurement(tmp_path: Path) -> None:
    # Every stream stops half-way and never ends: tokens came in the warmup, none in the window.
    with fake_in_thread(FakeOptions(fault=lambda i: "stall", output_tokens=40)) as srv:
        code, out, err = _sweep(tmp_path, srv.url, "--config", str(_quick_warmup(tmp_path)))
    assert code == 2, out[-2000:] + err[-2000:]
    assert f"the server sent no token to any of {USERS} requests" in _one_line(err)


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_a_server_info_that_never_answers_is_one_line(tmp_path: Path) -> None:
    # /server_info is read with a 10 s timeout: the sweep names the URL and stops.
    with fake_in_thread(FakeOptions(server_info_delay_s=3600)) as srv:
        t0 = time.monotonic()
        code, out, err = _sweep(tmp_path, srv.url)
        took_s = time.monotonic() - t0
    assert code == 2, out[-2000:] + err[-2000:]
    line = _one_line(err)
    assert f"{srv.url}/server_info did not answer within 10 s" in line, line
    assert took_s < 30


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_a_slow_server_is_a_measurement(tmp_path: Path) -> None:
    # One step every 0.2 s, 6 s a request: the 2 s window cuts every stream, tokens flow.
    with fake_in_thread(FakeOptions(step_s=0.2, output_tokens=30)) as srv:
        code, out, err = _sweep(tmp_path, srv.url)
    assert code == 0, out[-2000:] + err[-2000:]
    row = results.load_run(tmp_path / "res" / "run").summary.iloc[0]
    assert row["n_errors"] == 0 and row["output_tok_s"] > 0


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_streams_that_ignore_max_tokens_are_flagged(tmp_path: Path) -> None:
    # Each stream goes on past its max_tokens (a million tokens): the window cuts them all.
    opts = FakeOptions(fault=lambda i: "endless", output_tokens=1_000_000)
    with fake_in_thread(opts) as srv:
        code, out, err = _sweep(tmp_path, srv.url, "--config", str(_quick_warmup(tmp_path)))
    assert code == 0, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err
    row = results.load_run(tmp_path / "res" / "run").summary.iloc[0]
    assert row["output_tok_s"] > 0
    assert {"token_mismatch", "too_few_requests"} <= set(row["flags"].split(";"))


def _sweep_with_a_restart(tmp_path: Path, down_s: float, window_s: float
                          ) -> tuple[int, str, str, str]:
    """A sweep whose server crashes 1.5 s into its point (warmup 0.5 s, then into the window),
    refuses connections for `down_s`, then serves again on the same port; and the server's URL."""
    with fake_in_thread(FakeOptions(output_tokens=40)) as srv:

        def crash() -> None:
            deadline = time.monotonic() + 20
            while srv.flushes < 1 and time.monotonic() < deadline:  # the point's cache flush
                time.sleep(0.05)
            time.sleep(1.5)
            assert srv.loop is not None
            asyncio.run_coroutine_threadsafe(srv.restart(down_s), srv.loop)

        killer = threading.Thread(target=crash)
        killer.start()
        code, out, err = _sweep(tmp_path, srv.url, "--window-s", f"{window_s:g}")
        killer.join()
    return code, out, err, srv.url


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_a_server_restarted_within_a_point_keeps_it_flagged(tmp_path: Path) -> None:
    # Down 1 s: refused connections for less than the 3 s after which a server is gone.
    code, out, err, _ = _sweep_with_a_restart(tmp_path, down_s=1.0, window_s=4)
    assert code == 0, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err
    row = results.load_run(tmp_path / "res" / "run").summary.iloc[0]
    assert row["n_errors"] > 0 and row["output_tok_s"] > 0
    assert "error_budget" in row["flags"]


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_a_server_down_for_longer_is_gone_in_one_line(tmp_path: Path) -> None:
    # Down 8 s: past the 3 s after which a server is gone; an attached one is not restarted.
    code, out, err, url = _sweep_with_a_restart(tmp_path, down_s=8.0, window_s=6)
    assert code == 2, out[-2000:] + err[-2000:]
    line = _one_line(err)
    assert f"went away mid-point; it stopped answering at {url}" in line, line


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
@pytest.mark.parametrize("fault", ["reset", "truncate"])
def test_streams_dropped_mid_way_stop_with_one_line(tmp_path: Path, fault: str) -> None:
    with fake_in_thread(FakeOptions(fault=lambda i: fault, output_tokens=40)) as srv:
        code, out, err = _sweep(tmp_path, srv.url)
        rate = _rate_per_user_s(srv)
    assert code == 2, out[-2000:] + err[-2000:]
    assert "stream_truncated" in _one_line(err)
    assert rate <= MAX_REQUESTS_PER_USER_S, f"{rate:.1f} requests per user per second"


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_a_web_page_instead_of_a_stream_stops_with_one_line(tmp_path: Path) -> None:
    # The wrong server on the port: 200 and text/html.
    with fake_in_thread(FakeOptions(fault=lambda i: "html")) as srv:
        code, out, err = _sweep(tmp_path, srv.url)
        rate = _rate_per_user_s(srv)
    assert code == 2, out[-2000:] + err[-2000:]
    line = _one_line(err)
    assert "the server said HTTP 200 text/html" in line and "not an event stream" in line, line
    assert "Welcome to nginx!" in line
    assert rate <= MAX_REQUESTS_PER_USER_S, f"{rate:.1f} requests per user per second"


@pytest.mark.slow
@pytest.mark.timeout(2 * LIMIT_S + 30)
def test_a_failed_level_keeps_the_points_measured_before_it(tmp_path: Path) -> None:
    # The first point is served, then every request fails (a server that broke mid-sweep):
    # the sweep flushes the cache before each point.
    opts = FakeOptions()
    with fake_in_thread(opts) as srv:
        opts.fault = lambda i: "http500" if srv.flushes >= 2 else None
        proc = run_cli(
            ["sweep", "--engine", "attach", "--attach", f"baseline={srv.url}", "--modes",
             "baseline", "--prompts", "coding", "--concurrency", "1,2", "--results-dir",
             str(tmp_path / "res"), "--run-name", "run", "--warmup-s", "0.5", "--window-s",
             "2", "--request-timeout-s", "30"],
            cwd=tmp_path, timeout=LIMIT_S,
        )
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "HTTP 500" in _one_line(proc.stderr)
        run_dir = tmp_path / "res" / "run"
        kept = {(k.mode, k.concurrency) for k in results.measured_keys(run_dir)}
        assert kept == {("baseline", 1)}
        # The server fixed, the command the line gives measures what is missing.
        opts.fault = lambda i: None
        resumed = run_cli(["sweep", "--resume", str(run_dir)], cwd=tmp_path, timeout=LIMIT_S)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert {k.concurrency for k in results.measured_keys(run_dir)} == {1, 2}


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_some_failures_keep_the_flag_and_exit_0(tmp_path: Path) -> None:
    with fake_in_thread(FakeOptions(fault=lambda i: "http500" if i % 20 == 7 else None)) as srv:
        code, out, err = _sweep(tmp_path, srv.url)
    assert code == 0, out[-2000:] + err[-2000:]
    assert "Traceback" not in out + err
    run = results.load_run(tmp_path / "res" / "run")
    assert len(run.summary) == 1
    row = run.summary.iloc[0]
    assert row["n_errors"] > 0 and row["n_requests"] > 10 * row["n_errors"]
    assert "error_budget" in row["flags"]


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_a_launched_server_failing_every_request_is_stopped_with_its_words(
    tmp_path: Path,
) -> None:
    port = free_port()
    proc = sweep_cli(tmp_path, port, "--modes", "baseline,eagle3", "--prompts", "coding",
                     "--concurrency", "2,4", "--sim-arg=--sim-error-rate 1.0",
                     # 3 s of wall time at 8x: longer than the longest backoff (2 s), so
                     # the window holds requests and their answer is quoted.
                     "--window-s", "24", timeout=LIMIT_S)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = _one_line(proc.stderr)
    assert line.startswith("error: baseline/coding/c2-r0: all ")
    assert "HTTP 500" in line and "specbench.sim injected error" in line, line
    assert "its log " in line and "--resume" in line
    assert_no_process_left(port, wait_s=10)  # the launched server was stopped
