"""Windows sized by finished requests (issue 57): a closed-loop window holding fewer than
window_min_requests at window_s stays open until that many have finished, up to window_max_s,
and still ends at one instant (the metrics count tokens between the window's two edges)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from specbench import metrics, prompts
from specbench.load.runner import LoadError, PointResult, PointSpec, run_point, run_point_sync
from tests.harness import SIM_TIME_SCALE, sim_server
from tests.load.fakeserver import FakeOptions, FakeSGLang
from tests.load.test_runner import spec_for

N = 8


def test_a_simulated_c1_window_holds_n_finished_requests(tmp_path: Path) -> None:
    # Coding at c = 1 on the simulated H200: about 2 s per answer, so a 1-s window alone holds
    # at most one; held open, it holds N, and the point is not too_few_requests.
    requests = prompts.ordered_requests(prompts.load_prompt_set("coding"), 0)
    with sim_server("baseline", tmp_path, time_scale=SIM_TIME_SCALE) as sim:
        spec = PointSpec(
            base_url=sim.base_url, protocol="openai-chat", model="m", concurrency=1,
            requests=requests, warmup_s=0.5 / SIM_TIME_SCALE, window_s=1.0 / SIM_TIME_SCALE,
            window_min_requests=N, window_max_s=60.0 / SIM_TIME_SCALE,
        )
        result = run_point_sync(spec)
    row = metrics.summarize_point(result, SIM_TIME_SCALE, max_running_requests=64,
                                  error_budget=0.01)
    assert result.end_reason == "window_min_requests", result.end_reason
    assert row["n_requests"] >= N
    assert "too_few_requests" not in str(row["flags"]).split(";")
    # A clean cut: the window ends as its N-th request does, past window_s and below the cap.
    ended = sorted(r.t_end for r in result.records
                   if r.status == "ok" and result.window_start < r.t_end <= result.window_end)
    assert result.window_end - ended[N - 1] < 0.05
    assert spec.window_max_s is not None
    assert spec.window_s < result.window_wall_s < spec.window_max_s


async def _measure(opts: FakeOptions, **kw: object) -> PointResult:
    async with FakeSGLang(opts) as srv:
        return await run_point(spec_for(srv.url, **kw))


def test_the_cap_ends_a_window_that_never_holds_enough() -> None:
    # 40 tokens 10 ms apart: 0.4 s an answer, so 1,000 never finish before the 0.6-s cap.
    opts = FakeOptions(output_tokens=40, step_s=0.01)
    result = asyncio.run(_measure(opts, concurrency=1, window_s=0.2, window_min_requests=1000,
                                  window_max_s=0.6))
    assert result.end_reason == "max_window_s"
    assert result.window_wall_s == pytest.approx(0.6, abs=0.05)


def test_a_window_that_holds_enough_ends_at_window_s() -> None:
    # Four users finishing an answer every ~30 ms: N finished long before window_s.
    opts = FakeOptions(output_tokens=10, step_s=0.003)
    result = asyncio.run(_measure(opts, concurrency=4, window_s=0.4, window_min_requests=N,
                                  window_max_s=1.6))
    assert result.end_reason == "window_s"
    assert result.window_wall_s == pytest.approx(0.4, abs=0.05)


def test_fewer_than_one_request_is_refused() -> None:
    with pytest.raises(LoadError, match="window_min_requests must be at least 1"):
        run_point_sync(spec_for("http://127.0.0.1:9", window_min_requests=0, window_max_s=4.0))
