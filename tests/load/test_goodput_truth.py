"""Goodput as the client measures it against the simulator's own record of every request.

An open-loop point runs against the simulator near its saturation, so that the SLOs split the
requests; the simulator's record (``/sim/ground_truth?requests=1``: when each request arrived,
got its first token and finished, in its own clock) gives the same requests' TTFT, TPOT and E2E,
and the goodput both count must agree. The client sees every latency a little later than the
simulator stamps it: the request and the stream's bytes cross a socket and an event loop, about
2 ms of wall time here, which the simulator's 2x speed-up makes 4 ms of a 24-ms model TTFT
(at 4x the client's own event loop, serving twice the wall-clock rate beside CI's other lane,
read a median of 5 ms now and then).
So goodput is compared on SLOs that delay hardly moves, TPOT (both its ends shift alike) and
E2E (1.6 s), each at the record's median, where a miscount moves goodput the most; and each
request's TTFT is matched with its own record (same arrival, same length) and must be late by
that transport alone.
"""

from __future__ import annotations

import json
import math
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specbench import metrics
from specbench.goodput import Slo, goodput
from specbench.load.arrivals import run_open_point_sync
from specbench.load.records import PointSpec
from tests.load.test_sim_fidelity import REQUESTS
from tests.sim.conftest import launch

pytestmark = pytest.mark.slow
TIME_SCALE = 2.0
RATE = 24.0  # requests per model second: the default profile's coding-like point saturates near
WINDOW_S = 8.0  # model seconds


def test_goodput_matches_the_simulators_record(tmp_path: Path) -> None:
    sim = launch(["--max-running-requests", "256", "--enable-metrics",
                  "--sim-time-scale", str(TIME_SCALE)], tmp_path)
    try:
        spec = PointSpec(base_url=sim.url, protocol="openai-chat", model="m", concurrency=0,
                         requests=REQUESTS, warmup_s=2 / TIME_SCALE, window_s=WINDOW_S / TIME_SCALE,
                         warmup_max_s=30 / TIME_SCALE, request_rate=RATE * TIME_SCALE,
                         drain_max_s=40 / TIME_SCALE)
        result = run_open_point_sync(spec)
        url = (f"{sim.url}/sim/ground_truth?start={result.window_start!r}"
               f"&end={result.window_end + 60!r}&requests=1")
        with urllib.request.urlopen(url, timeout=10) as resp:
            truth = json.loads(resp.read())["requests"]
    finally:
        sim.kill()
    assert result.unfinished == 0
    rows = np.array(sorted(r for r in truth if result.window_start <= r[0] < result.window_end))
    arrival, first, finish, tokens = rows.T
    ms = TIME_SCALE * 1000.0
    served = pd.DataFrame({
        "request_id": range(len(rows)), "status": "ok", "completion_tokens": tokens,
        "ttft_ms": (first - arrival) * ms, "e2e_ms": (finish - arrival) * ms,
        "tpot_ms": np.where(tokens > 1, (finish - first) * ms / np.maximum(tokens - 1, 1),
                            math.nan)})
    slo = Slo(tpot_ms=float(served["tpot_ms"].median()),
              e2e_ms=float(served["e2e_ms"].median()))
    frame = metrics.requests_frame(result, TIME_SCALE)
    arrived = frame[frame["arrived_in_window"]]
    client = goodput(arrived, WINDOW_S, slo)
    server = goodput(served, WINDOW_S, slo)
    assert abs(len(rows) - result.window_arrivals) <= 2
    assert 0.2 < server.met_frac < 0.8  # the SLOs split the requests
    # E2E as the client sees it is a few model ms later: a request or two at the median flips.
    allowed = max(3, 0.05 * server.arrived)
    assert abs(client.good - server.good) <= allowed
    assert client.req_s == pytest.approx(server.req_s, abs=allowed / WINDOW_S)

    # Request by request: the one the simulator received just after the client sent it.
    sent = sorted((r for r in result.records if r.request_id in result.window_request_ids
                   and r.t_first_token is not None), key=lambda r: r.t_send)
    pairs, used = [], set()
    for r in sent:  # the first unmatched record of the same length within 20 ms of the send
        for i in range(int(np.searchsorted(arrival, r.t_send)), len(arrival)):
            if arrival[i] - r.t_send > 0.02:
                break
            if i not in used and tokens[i] == r.completion_tokens:
                pairs.append((r, i))
                used.add(i)
                break
    assert len(pairs) >= 0.97 * len(sent)
    # TTFT as the client saw it minus the simulator's, in wall ms: the transport alone, never
    # negative, a millisecond or two (a fresh-clone CI beside other jobs read p95 5.03 ms).
    late_ms = np.array([((r.t_first_token - r.t_send) - (first[i] - arrival[i])) * 1000
                        for r, i in pairs])
    assert late_ms.min() > 0.0
    assert np.median(late_ms) < 5.0 and np.percentile(late_ms, 95) < 15.0
