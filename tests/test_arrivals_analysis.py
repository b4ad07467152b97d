"""The open-loop analysis on synthetic runs: where EAGLE-3 stops winning, paired or not.

Each run is written through :mod:`specbench.results` as a sweep writes one: per rate and
configuration, 64 window arrivals with their tokens inside the window and their latencies.
EAGLE-3 gets 10% more tokens per arrival at low rates and falls behind above 10 req/s; on
goodput it meets the TPOT SLO up to 8 req/s and fails it at 16 and 32.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from specbench import analysis, config
from specbench.analysis.arrivals import analyze_arrivals
from specbench.analysis.text import rate_decision_words
from specbench.results import PointKey, load_run, rebuild_summary, write_point
from tests.builders import write_manifest

RATES = (2.0, 4.0, 8.0, 16.0, 32.0)
N = 64
WINDOW_S = 8.0


def tokens_per_arrival(mode: str, rate: float) -> float:
    if mode == "baseline":
        return 100.0
    return 110.0 if rate <= 8 else 100.0 * (10.0 / rate) ** 0.5


def tpot_ms(mode: str, rate: float) -> float:
    return 20.0 if mode == "baseline" or rate <= 8 else 60.0


def frame(mode: str, rate: float, noise: float, rng: np.random.Generator) -> pd.DataFrame:
    """N window arrivals; each arrival's own work (shared by both servers) times the server's."""
    shared = np.random.default_rng(int(rate)).lognormal(0.0, 0.3, N)  # arrival k's prompt
    tokens = tokens_per_arrival(mode, rate) * shared * (1 + noise * rng.standard_normal(N))
    return pd.DataFrame({
        "request_id": np.arange(N), "status": "ok", "completion_tokens": 200,
        "window_tokens": tokens, "arrived_in_window": True, "prompt_tokens": 500,
        "ttft_ms": 100.0, "tpot_ms": tpot_ms(mode, rate), "e2e_ms": 5000.0})


def make_open_run(tmp_path: Path, noise: float = 0.01, rows: bool = True) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    cfg = config.build({"modes": ["baseline", "eagle3"], "prompt_sets": ["coding"],
                        "plan": "dense", "load": {"request_rates": list(RATES),
                                                   "slo": {"tpot_ms": 40.0}}})
    write_manifest(run_dir, cfg, {"coding": "x"})
    rng = np.random.default_rng(0)
    for mode in ("baseline", "eagle3"):
        for rate in RATES:
            f = frame(mode, rate, noise, rng)
            good = int((f["tpot_ms"] <= 40).sum())
            tok_s = f["window_tokens"].sum() / WINDOW_S
            summary = {
                "n_requests": N, "n_errors": 0, "window_s": WINDOW_S, "output_tok_s": tok_s,
                "output_tok_s_se": 0.05 * tok_s, "requests_per_s": rate, "ttft_ms_p50": 100.0,
                "ttft_ms_p99": 100.0, "itl_ms_p50": 20.0, "itl_ms_p99": 20.0,
                "e2e_ms_p50": 5000.0, "accept_length": None, "server_output_tok_s": None,
                "server_running_reqs_mean": rate * 3.0, "flags": "",
                "achieved_rate_req_s": rate, "window_arrivals": N, "goodput_req_s": good / N * rate,
                "goodput_req_s_se": 0.05 * rate, "slo_met_frac": good / N, "slo_good": good,
                "tpot_ms_p99": tpot_ms(mode, rate)}
            key = PointKey(mode, "coding", 0, 0, rate)
            write_point(run_dir, key, f if rows else f.iloc[:0], summary)
    rebuild_summary(run_dir)
    return run_dir


def test_paired_arrivals_locate_the_crossing_tightly(tmp_path: Path) -> None:
    run = load_run(make_open_run(tmp_path))
    found = analyze_arrivals(run)["prompt_sets"]["coding"]
    tok = found["tok_s"]
    # 1.10 at 8 req/s, sqrt(10/16) = 0.79 at 16: the crossing in log2 rate between them.
    assert tok["outcome"] == "crossover" and tok["bracket"] == ["8", "16"]
    assert tok["interval_method"] == ["paired arrivals"]
    lo, hi = tok["interval"]
    assert 8.0 <= lo <= tok["rate_req_s"] <= hi <= 16.0 and hi - lo < 2.0
    assert tok["threshold_batch_size"] == math.ceil(tok["baseline_batch_size"])
    good = found["goodput"]
    assert good["outcome"] == "crossover" and good["tie_below"] and good["bracket"] == ["8", "16"]
    assert "keeps up with the baseline up to 8 req/s" in rate_decision_words(good)
    assert found["threshold_source"] == "goodput"
    assert found["threshold_batch_size"] == math.ceil(8 * 3.0)


def test_without_rows_the_errors_are_unpaired_and_wider(tmp_path: Path) -> None:
    paired = analyze_arrivals(load_run(make_open_run(tmp_path / "a")))
    unpaired = analyze_arrivals(load_run(make_open_run(tmp_path / "b", rows=False)))
    a, b = paired["prompt_sets"]["coding"]["tok_s"], unpaired["prompt_sets"]["coding"]["tok_s"]
    assert b["interval_method"] == ["unpaired"]
    assert b["interval"][1] - b["interval"][0] > 2 * (a["interval"][1] - a["interval"][0])


def test_the_finding_and_the_threshold_text_read_an_open_loop_run(tmp_path: Path) -> None:
    run = load_run(make_open_run(tmp_path))
    result = analysis.analyze(run)
    assert result["load"] == "open" and result["finding"].startswith("coding: on goodput")
    text = analysis.threshold_summary(run, result)
    assert "threshold 24 (from the goodput decision)" in text
