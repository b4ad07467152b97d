"""SGLang 0.5.14 to 0.5.23: the version table, readiness without /ready, acceptance without
per-request counts in the stream, and the real 0.5.17 start-up failures seen on an H200.

The 0.5.17 behaviour comes from the simulator run with `--sim-sglang-version 0.5.17` (its own
description of that release, separate from specbench.engines.versions) and from the logs of
real 0.5.17 servers that failed to start on the H200 (tests/engines/logs/).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from specbench.engines import versions
from specbench.engines.diagnose import explain_failure
from specbench.engines.process import http_get, wait_ready
from tests.harness import sim_server, sweep_cli

LOGS = Path(__file__).parent / "logs"


@pytest.mark.parametrize(
    "version, route, stream_counts, slot1",
    [
        ("0.5.14", "/health", False, (1, 3, 7)),
        ("0.5.17", "/health", False, (1, 3, 7)),
        ("0.5.17-sim", "/health", False, (1, 3, 7)),
        ("0.5.19", "/health", True, (1, 3, 7)),
        ("0.5.20.post1", "/ready", True, (1, 3, 5, 7)),
        ("0.5.23", "/ready", True, (1, 3, 5, 7)),
        (None, "/ready", True, (1, 3, 5, 7)),
    ],
)
def test_one_table_says_what_each_release_does(
    version: str | None, route: str, stream_counts: bool, slot1: tuple[int, ...]
) -> None:
    row = versions.release(version)
    assert (row.ready_route, row.stream_spec_counts, row.default_slot1_steps) == (
        route, stream_counts, slot1)


def test_release_numbers_parse_suffixes() -> None:
    assert versions.release_tuple("0.5.18rc0") == (0, 5, 18)
    assert versions.release_tuple("0.5.17.post1") == (0, 5, 17)
    assert versions.release_tuple("1.0") == (1, 0, 0)


@contextlib.contextmanager
def _sim_0_5_17(tmp_path: Path, mode: str) -> Iterator[str]:
    with sim_server(mode, tmp_path, sim_args=("--sim-sglang-version", "0.5.17")) as proc:
        yield proc.base_url


def test_a_server_with_only_health_is_waited_for(tmp_path: Path) -> None:
    # sim_server itself starts through ServerProcess.start, i.e. through the /ready -> /health
    # fallback; a server without /ready would otherwise never be ready.
    with _sim_0_5_17(tmp_path, "baseline") as url:
        assert http_get(f"{url}/ready")[0] == 404
        assert http_get(f"{url}/health")[0] == 200
        assert wait_ready(url, timeout_s=10.0)


def test_a_route_that_never_answers_200_is_not_ready_and_the_wait_ends(tmp_path: Path) -> None:
    # Only /ready's 404 switches to /health; any other route answering 404 is polled until
    # the deadline, which must end the wait on time.
    with _sim_0_5_17(tmp_path, "baseline") as url:
        assert not wait_ready(url, timeout_s=1.0, route="/no-such-route")


def _summary(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "summary.csv")


@pytest.mark.slow
def test_acceptance_comes_from_the_server_counters_when_the_stream_has_none(
    tmp_path: Path,
) -> None:
    from specbench.engines.process import free_port

    common = ("--modes", "baseline,eagle3", "--prompts", "coding", "--concurrency", "4,16")
    old = sweep_cli(tmp_path, free_port(), *common, "--sim-arg=--sim-sglang-version=0.5.17",
                    name="v0517")
    assert old.returncode == 0, old.stderr
    new = sweep_cli(tmp_path, free_port(), *common, name="v0523")
    assert new.returncode == 0, new.stderr

    manifest = (tmp_path / "res" / "v0517" / "manifest.json").read_text()
    assert '"version": "0.5.17-sim"' in manifest  # recorded from /server_info
    old_rows, new_rows = _summary(tmp_path / "res" / "v0517"), _summary(tmp_path / "res" / "v0523")
    for rows, source in ((old_rows, "server"), (new_rows, "stream")):
        spec = rows[rows["mode"] == "eagle3"]
        assert list(spec["accept_source"]) == [source, source]
        assert all(math.isfinite(a) and a > 1.5 for a in spec["accept_length"])
        base = rows[rows["mode"] == "baseline"]
        assert base["accept_length"].isna().all() and base["accept_source"].isna().all()
    # Where both exist, the stream's per-request figure and the server's counters agree (the
    # same requests finish between the scrapes, give or take one at each edge).
    spec = new_rows[new_rows["mode"] == "eagle3"]
    gap = (spec["accept_length"] / spec["server_accept_length"] - 1.0).abs()
    assert (gap < 0.02).all(), spec[["accept_length", "server_accept_length"]]


@pytest.mark.parametrize(
    "log, first_line_has",
    [
        ("wrong-draft-path", "Unrecognized model in /tmp/models/empty-draft"),
        ("mem-fraction-too-small", "Raise --mem-fraction-static above 0.098"),
        ("adaptive-config-refused", "candidate_steps must be a list of non-negative ints"),
    ],
)
def test_real_start_up_failures_give_one_line_with_sglangs_own_hint(
    log: str, first_line_has: str
) -> None:
    path = LOGS / f"sglang-0.5.17-h200-{log}.log"
    first = explain_failure(path).splitlines()[0]
    assert first_line_has in first
    assert "; " in first  # the cause, then what to do


def test_a_window_where_nothing_finished_takes_the_servers_gauge(tmp_path: Path) -> None:
    # c=1, answers far longer than the window (no EOS): no request finishes, the counters do
    # not move, and SGLang 0.5.17's stream carries no counts; its windowed gauge still does.
    from specbench.engines.process import free_port

    done = sweep_cli(
        tmp_path, free_port(), "--modes", "eagle3", "--prompts", "coding", "--concurrency", "1",
        "--ignore-eos", "--sim-time-scale", "2", "--warmup-s", "0.5", "--window-s", "1",
        "--max-window-s", "1",  # not held open for finished requests: none is to finish
        "--sim-arg=--sim-sglang-version=0.5.17", name="gauge",
    )
    assert done.returncode == 0, done.stderr
    row = _summary(tmp_path / "res" / "gauge").iloc[0]
    assert row["n_requests"] == 0 and math.isnan(row["server_accept_length"])
    assert row["accept_source"] == "server_gauge" and 1.5 < row["accept_length"] < 4.0
