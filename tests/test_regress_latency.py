"""The gate on TTFT and TPOT percentiles and goodput, on run directories written with
specbench.results (as `specbench sweep` leaves them).

A latency percentile has no interval in the summary, so it fails only where its noise is known:
from the reference's second launch (``<reference>/relaunch``, whose spread also widens the
limit) or from repeats (the rank test). Goodput carries its standard error and is tested on it.
"""

from __future__ import annotations

import io
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from rich.console import Console

from specbench import config, results
from specbench.cli import main as cli_main
from specbench.regress import RELAUNCH_DIR, Thresholds, main
from tests.builders import write_manifest
from tests.harness import run_cli

LEVELS = (1, 8, 32, 128)
MODES = ("baseline", "eagle3")
# (mode, level, repeat) -> factor on one metric
Factor = Callable[[str, float, int], float]
ONE: Factor = lambda m, c, r: 1.0  # noqa: E731


def _tok_s(mode: str, c: float) -> float:
    return (1.4 if mode == "eagle3" else 1.0) * 90.0 * c ** 0.8


def make_run(
    path: Path, *, tpot: Factor = ONE, ttft: Factor = ONE, tok: Factor = ONE,
    goodput: Factor | None = None, repeats: int = 1, tp_size: int = 1,
    rates: tuple[float, ...] = (),
) -> Path:
    """A closed-loop run at LEVELS (or an open-loop one at `rates`, with goodput) whose TPOT,
    TTFT and tok/s are a smooth model times the given factors."""
    cfg = config.SweepConfig(
        modes=MODES, prompt_sets=("coding",), concurrency=LEVELS,
        server=config.ServerConfig(tp_size=tp_size),
        load=config.LoadConfig(repeats=repeats, request_rates=rates,
                               slo={"tpot_ms": 40.0} if rates else {}),
    )
    write_manifest(path, cfg, {"coding": "sha-coding"})
    for mode in MODES:
        for level in rates or LEVELS:
            for r in range(repeats):
                tok_s = _tok_s(mode, level) * tok(mode, level, r)
                step_ms = (6.0 + 0.05 * level) * tpot(mode, level, r)
                first_ms = (30.0 + 2.0 * level) * ttft(mode, level, r)
                summary: dict[str, Any] = {
                    "n_requests": 60, "n_errors": 0, "window_s": 8.0, "output_tok_s": tok_s,
                    "requests_per_s": tok_s / 200, "accept_length": 2.6 if mode == "eagle3"
                    else math.nan, "flags": "", "itl_ms_p50": step_ms, "itl_ms_p99": step_ms,
                    "e2e_ms_p50": 1000.0, "server_output_tok_s": tok_s,
                    "server_running_reqs_mean": float(level),
                    "output_tok_s_ci_low": tok_s * 0.98, "output_tok_s_ci_high": tok_s * 1.02,
                    "ttft_ms_p50": first_ms, "ttft_ms_p90": 1.5 * first_ms,
                    "ttft_ms_p99": 2 * first_ms, "tpot_ms_p50": step_ms,
                    "tpot_ms_p90": 1.2 * step_ms,
                }
                if goodput is not None:
                    summary["goodput_req_s"] = 2.0 * level * goodput(mode, level, r)
                    summary["goodput_req_s_se"] = 0.02 * summary["goodput_req_s"]
                key = results.PointKey(mode, "coding", 0 if rates else int(level), r,
                                       float(level) if rates else None)
                results.write_point(path, key, pd.DataFrame({"window_tokens": [100]}), summary)
    results.rebuild_summary(path)
    return path


def gate(ref: Path, cand: Path, tmp_path: Path, **kwargs: Any) -> tuple[int, str, dict[str, Any]]:
    buf = io.StringIO()
    verdict_path = tmp_path / "verdict.json"
    code = main(ref, cand, json_path=verdict_path,
                console=Console(file=buf, width=250, color_system=None), **kwargs)
    return code, buf.getvalue(), json.loads(verdict_path.read_text())


def lines(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(word)]


def two_launch_reference(tmp_path: Path, relaunch: Factor, *, on: str = "tpot") -> Path:
    """A reference whose second launch (stored inside it, as the job stores it) moved `on`."""
    ref = make_run(tmp_path / "ref")
    make_run(ref / RELAUNCH_DIR, **{on: relaunch})
    return ref


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


# --- latency percentiles ------------------------------------------------------------------------


def test_a_ten_percent_tpot_rise_fails_against_a_two_launch_reference(tmp_path: Path) -> None:
    # The two launches' TPOT 1% apart at every level: the limit stays at 5%.
    ref = two_launch_reference(tmp_path, lambda m, c, r: 1.01 if c in (1, 32) else 0.99)
    slow = make_run(tmp_path / "slow", tpot=lambda m, c, r: 1.10 if m == "eagle3" else 1.0)
    code, text, verdict = gate(ref, slow, tmp_path)
    assert code == 1, text
    fails = lines(text, "FAIL")
    assert [line.split(":")[0] for line in fails] == ["FAIL eagle3/coding"] * 2, text
    assert fails[0].startswith("FAIL eagle3/coding: TPOT p50 +10.0% (geomean over 4 levels; "
                               "c=1..128 above by 10%; limit +5.0%, the reference's two "
                               "launches apart by sd 0.7%)"), text
    assert "FAIL eagle3/coding: TPOT p90 +10.0%" in fails[1]
    group = next(g for g in verdict["groups"] if g["mode"] == "eagle3")
    tpot = next(m for m in group["metrics"] if m["metric"] == "tpot_ms_p50")
    assert tpot["test"] == "two-launch" and tpot["status"] == "fail"
    assert tpot["fail_pct"] == 5.0 and tpot["launch_sd_pct"] == pytest.approx(0.707, abs=0.01)
    assert group["status"] == "fail" and group["throughput_status"] == "ok"
    assert any("limits from two launches of the reference" in n for n in verdict["notes"])
    # The same candidate against the second launch's twin passes: it is a relaunch.
    twin = make_run(tmp_path / "twin", tpot=lambda m, c, r: 1.01 if c in (1, 32) else 0.99)
    code, text, _ = gate(ref, twin, tmp_path)
    assert code == 0 and not lines(text, "WARN"), text


def test_a_reference_that_moved_between_launches_widens_the_limit(tmp_path: Path) -> None:
    # The second launch's TTFT 10% above the first at every level: sd of log 6.7%, so only a
    # rise beyond 2 sqrt(2) sd (+21%) fails.
    ref = two_launch_reference(tmp_path, lambda m, c, r: 1.10, on="ttft")
    relaunch = make_run(tmp_path / "relaunch", ttft=lambda m, c, r: 1.12)
    code, text, _ = gate(ref, relaunch, tmp_path)
    assert code == 0, text
    assert "baseline/coding TTFT p50 +21.0%" in text  # the widened limit, in the note
    slower = make_run(tmp_path / "slower", ttft=lambda m, c, r: 1.40)
    code, text, _ = gate(ref, slower, tmp_path)
    assert code == 1, text
    assert "FAIL baseline/coding: TTFT p50 +40.0% (geomean over 4 levels; c=1..128 above by " \
        "40%; limit +21.0%, the reference's two launches apart by sd 6.7%)" in text, text


def test_latency_without_its_noise_is_shown_not_judged(tmp_path: Path) -> None:
    # One launch, one repeat: nothing says how far a percentile moves on its own (on the
    # simulator TTFT moved 30-75% at single points between identical runs), so a rise is shown
    # in the table and named in one note, and the verdict rests on what can be tested.
    ref = make_run(tmp_path / "ref")
    slow = make_run(tmp_path / "slow", tpot=lambda m, c, r: 1.2)
    code, text, verdict = gate(ref, slow, tmp_path)
    assert code == 0 and verdict["status"] == "ok", text
    assert not lines(text, "WARN") and not lines(text, "FAIL"), text
    assert "│ baseline/coding │    +0.0% │    +0.0% │   +20.0% │   +20.0% │ untested │" in text
    note = next(n for n in verdict["notes"] if n.startswith("beyond the latency"))
    assert "eagle3/coding TPOT p90 (worst c=1 +20.0%)" in note
    assert "scripts/gpu_regression.py reference" in note and "--repeats 3" in note


def test_repeats_gate_latency_with_the_rank_test(tmp_path: Path) -> None:
    def jitter(factor: float) -> Factor:
        return lambda m, c, r: factor * (1 + 0.005 * (r - 1))

    ref = make_run(tmp_path / "ref", tpot=jitter(1.0), repeats=3)
    slow = make_run(tmp_path / "slow", tpot=jitter(1.08), repeats=3)
    code, text, verdict = gate(ref, slow, tmp_path)
    assert code == 1, text
    assert lines(text, "FAIL baseline/coding: TPOT p50 +8.0%"), text
    group = verdict["groups"][0]
    assert {m["metric"]: m["test"] for m in group["metrics"]}["tpot_ms_p50"] == "mann-whitney"


def test_the_latency_columns_and_limit_are_options(tmp_path: Path) -> None:
    ref = two_launch_reference(tmp_path, ONE)
    slow = make_run(tmp_path / "slow", tpot=lambda m, c, r: 1.04, ttft=lambda m, c, r: 1.5)
    code, text, _ = gate(ref, slow, tmp_path, latency_metrics=("tpot_ms_p50",))
    assert code == 0 and "TTFT" not in text, text
    code, text, _ = gate(ref, slow, tmp_path, latency_metrics=("tpot_ms_p50",),
                         latency_fail_pct=3.0)
    assert code == 1 and lines(text, "FAIL baseline/coding: TPOT p50 +4.0%"), text
    # A column the runs do not keep is named, not gated.
    code, text, _ = gate(ref, ref / RELAUNCH_DIR, tmp_path, latency_metrics=("e2e_ms_p90",))
    assert code == 0 and "E2E p90: not in both runs' summaries, not gated" in text, text


def test_a_column_that_is_no_latency_is_one_error_line(tmp_path: Path) -> None:
    ref = make_run(tmp_path / "ref")
    proc = run_cli(["regress", "--reference", str(ref), "--candidate", str(ref),
                    "--latency", "tpot_ms_p50,output_tok_s"], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout.strip().splitlines() == [
        "error: --latency output_tok_s: not a latency column; give ttft, tpot, itl or e2e "
        "with _ms_p50, _p90, _p95 or _p99, e.g. --latency tpot_ms_p50,tpot_ms_p90"]


def test_a_second_launch_measured_otherwise_is_refused(tmp_path: Path) -> None:
    ref = make_run(tmp_path / "ref")
    make_run(ref / RELAUNCH_DIR, tp_size=2)
    code, text, verdict = gate(ref, make_run(tmp_path / "cand"), tmp_path)
    assert code == 2 and verdict["status"] == "unusable"
    assert text.strip() == (
        f"error: the reference's second launch {ref / RELAUNCH_DIR} was not measured like the "
        "reference: tensor parallel size differs (server.tp_size: reference 1, second launch "
        "2); sweep both launches with the same settings (scripts/gpu_regression.py reference)"
    ), text
    # --relaunch names it explicitly; a missing one is one line too.
    code, text, _ = gate(ref, ref, tmp_path, relaunch_dir=tmp_path / "nowhere")
    assert code == 2 and len(text.strip().splitlines()) == 1, text


def test_tok_s_limits_come_from_the_second_launch_without_a_relaunch_analysis(
        tmp_path: Path) -> None:
    # EAGLE-3's second launch 10% slower (the H200 moved 17% at c = 16) and no
    # `specbench report --relaunch` behind analysis.json: the spread comes from the summaries.
    ref = make_run(tmp_path / "ref")
    slower = {"tok": lambda m, c, r: 0.9 if m == "eagle3" else 1.0}
    make_run(ref / RELAUNCH_DIR, **slower)
    cand = make_run(tmp_path / "cand", **slower)
    code, text, verdict = gate(ref, cand, tmp_path)
    assert code == 0, text
    assert any(n.startswith("eagle3/coding: fails below -") for n in verdict["notes"]), text
    shutil.rmtree(ref / RELAUNCH_DIR)
    assert gate(ref, cand, tmp_path)[0] == 1


# --- goodput ------------------------------------------------------------------------------------


def test_a_goodput_drop_fails_on_its_standard_errors(tmp_path: Path) -> None:
    rates = (2.0, 8.0, 32.0)
    ref = make_run(tmp_path / "ref", goodput=ONE, rates=rates)
    lower = make_run(tmp_path / "lower", goodput=lambda m, c, r: 0.85 if m == "eagle3" else 1.0,
                     rates=rates)
    code, text, verdict = gate(ref, lower, tmp_path)
    assert code == 1, text
    assert lines(text, "FAIL eagle3/coding: goodput -15.0% (geomean over 3 levels; 2..32 "
                 "req/s below by 15%; limit -5.0%"), text
    group = next(g for g in verdict["groups"] if g["mode"] == "eagle3")
    found = {m["metric"]: m for m in group["metrics"]}["goodput_req_s"]
    assert found["test"] == "intervals" and not found["rise_is_worse"]
    # 3% lower: inside the limit, within each point's interval.
    near = make_run(tmp_path / "near", goodput=lambda m, c, r: 0.97, rates=rates)
    code, text, _ = gate(ref, near, tmp_path)
    assert code == 0, text
    assert "goodput" in text.split("latency and goodput")[1].splitlines()[2], text


# --- the command line ---------------------------------------------------------------------------


def test_the_help_shows_the_gate_defaults() -> None:
    th = Thresholds()
    shown = cli_main.REGRESS_LATENCY_DEFAULTS
    assert shown == {"latency_fail_pct": th.latency_fail_pct,
                     "goodput_fail_pct": th.goodput_fail_pct,
                     "latency_metrics": ",".join(th.latency_metrics)}
    names = {f.name for f in fields(th)}
    assert {"latency_warn_pct", "goodput_warn_pct"} <= names
