"""`specbench export`: SGLang's, vLLM's and specbench's own records of every measured point.

The run is built from scripted per-request records (closed-loop users, multi-token chunks,
requests across both window edges, failures) that go through the real `specbench.metrics`
and `specbench.results`, so the export is checked against the summary the sweep would write.
The key lists below are written out from SGLang 0.5.23's `sglang/benchmark/serving.py` and
vLLM's `vllm/benchmarks/serve.py`; tests/engines/test_contract_export.py checks the SGLang one
against a file SGLang's own client writes.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specbench import configurations, metrics, results
from specbench.config import SweepConfig
from specbench.load.runner import PointResult, RequestRecord
from specbench.report import export
from specbench.results import PointKey, ServerRecord
from tests.builders import write_manifest
from tests.harness import run_cli
from tests.snapshot import assert_snapshot

WINDOW_WALL_S = (10.0, 15.0)
TIME_SCALE = 2.0  # a 10 s window in model time
LEVELS = (2, 4)
MODES = ("baseline", "eagle3")
SERVER_INFO = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
               "max_running_requests": 64}

SGLANG_KEYS = [
    "tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len",
    "random_input_len", "random_output_len", "random_range_ratio", "server_info", "duration",
    "completed", "total_input_tokens", "total_input_text_tokens", "total_input_vision_tokens",
    "total_output_tokens", "total_output_tokens_retokenized", "request_throughput",
    "input_throughput", "output_throughput", "total_throughput",
    *(f"{stat}_{name}_ms" for name in ("e2e_latency", "ttft", "tpot", "itl")
      for stat in ("mean", "median", "std", "p90", "p95", "p99")),
    "concurrency", "accept_length", "max_output_tokens_per_s", "max_concurrent_requests",
]
VLLM_KEYS = [
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
    "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
    "output_throughput", "total_token_throughput", "latencies", "queue_times",
    "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
    # --metric-percentiles as the run's --percentiles (default 50,90,99)
    *(f"{stat}_{name}_ms" for name in ("ttft", "tpot", "itl", "e2el", "client_queue_time")
      for stat in ("mean", "median", "std", "p50", "p90", "p99")),
]


# -- a run from scripted requests ---------------------------------------------------------------

def _request(rid: int, user: int, t_send: float, spec: bool) -> RequestRecord:
    """One user's request: a first token after 40 ms (+10 ms per user), then chunks of 1 token
    (baseline) or 3, 1, 2... (EAGLE-3) 6 ms per token apart (+2 ms every other chunk); every
    9th request fails."""
    end_wall = WINDOW_WALL_S[1] + 0.01  # the runner cancels what is still running then
    if rid % 9 == 4:
        return _record(rid, user, t_send, t_send + 0.05, [], [], status="error")
    n_chunks = 8 + (rid * 7) % 13
    sizes = [1] + [((3, 1, 2)[i % 3] if spec else 1) for i in range(n_chunks - 1)]
    gaps = [0.0, *(0.006 * k + 0.002 * (i % 2) for i, k in enumerate(sizes[1:]))]
    times = t_send + 0.04 + 0.01 * user + np.cumsum(gaps)
    if times[-1] + 0.002 > end_wall:
        keep = times <= end_wall
        return _record(rid, user, t_send, end_wall, times[keep], np.cumsum(sizes)[keep],
                       status="cancelled", spec=spec)
    return _record(rid, user, t_send, float(times[-1]) + 0.002, times, np.cumsum(sizes),
                   spec=spec)


def _record(rid: int, user: int, t_send: float, t_end: float, times: Any, cumulative: Any, *,
            status: str = "ok", spec: bool = False) -> RequestRecord:
    t = np.asarray(times, dtype=np.float64)
    n = np.asarray(cumulative, dtype=np.int64)
    error = status == "error"
    return RequestRecord(
        request_id=rid, user=user, prompt_id=f"p{rid}", category="edit", max_tokens=1000,
        t_send=t_send, t_first_token=float(t[0]) if len(t) else None, t_end=t_end,
        chunk_t=t, chunk_tokens=n, prompt_tokens=100 + rid,
        completion_tokens=int(n[-1]) if len(n) else 0,
        spec_verify_ct=len(t) if spec and status == "ok" else None, status=status,
        error_class="http_status" if error else None, error_detail="HTTP 500" if error else None,
        finish_reason="stop" if status == "ok" else None, http_status=500 if error else 200,
        n_chunks=len(t) + 1, n_reads=len(t), token_mismatch=False)


def _point(mode: str, concurrency: int) -> PointResult:
    start, end = WINDOW_WALL_S
    spec = mode != "baseline"
    records, rid = [], 0
    for user in range(concurrency):
        t = start - 1.0 - 0.3 * user  # the first requests straddle the window's start
        while t < end:
            rec = _request(rid, user, t, spec)
            rid += 1
            if rec.t_end > start:  # the runner keeps what is alive in the window
                records.append(rec)
            t = rec.t_end + 0.001
    return PointResult(
        records=records, window_start=start, window_end=end, warmup_records=3, warmup_errors=0,
        client_cpu_s=0.2, loop_lag_ms={"p50": 0.1, "p99": 0.3, "max": 1.0}, metrics_before=None,
        metrics_after=None, server_gone=False, concurrency=concurrency, protocol="openai-chat",
        end_reason="window_s")


def make_export_run(root: Path) -> Path:
    """<root>/run: baseline and EAGLE-3 on `coding` at LEVELS, as a sweep writes them."""
    run_dir = root / "run"
    cfg = SweepConfig(modes=MODES, prompt_sets=("coding",), concurrency=LEVELS)
    servers = {m: ServerRecord(kind=configurations.parse(m).kind, argv=["--model-path", "m"],
                               url="http://127.0.0.1:30000",
                               server_info=SERVER_INFO if m != "baseline" else {})
               for m in MODES}
    write_manifest(run_dir, cfg, {"coding": "sha-coding"}, servers)
    for mode in MODES:
        for c in LEVELS:
            result = _point(mode, c)
            summary = metrics.summarize_point(result, TIME_SCALE, max_running_requests=64,
                                              error_budget=0.5)
            results.write_point(run_dir, PointKey(mode, "coding", c),
                                metrics.requests_frame(result, TIME_SCALE), summary)
    results.rebuild_summary(run_dir)
    return run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_export_run(tmp_path_factory.mktemp("export"))


def _summary_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()}
            for row in results.load_run(run_dir).summary.to_dict("records")]


# -- the records ----------------------------------------------------------------------------------

def test_every_format_has_one_record_per_point_with_the_tools_keys(run_dir: Path) -> None:
    run = results.load_run(run_dir)
    for fmt, keys in (("sglang", SGLANG_KEYS), ("vllm", VLLM_KEYS)):
        records = export.build_records(run, fmt)
        assert len(records) == len(MODES) * len(LEVELS)
        assert [list(r) for r in records] == [keys] * len(records), fmt
    (jsonl,) = export.build_records(run, "jsonl", ["eagle3"])[:1]
    assert list(jsonl)[: 1 + len(results.SUMMARY_COLUMNS)] == [
        "run_id", *results.SUMMARY_COLUMNS]


def test_sglang_records_agree_with_the_summary(run_dir: Path) -> None:
    records = export.build_records(results.load_run(run_dir), "sglang")
    for rec, row in zip(records, _summary_rows(run_dir), strict=True):
        assert rec["tag"] == f"{row['mode']}/coding/c{row['concurrency']}-r0"
        # The same tokens over the same window: equal, not close.
        assert rec["output_throughput"] == row["output_tok_s"]
        assert rec["duration"] == row["window_s"]
        assert rec["completed"] == row["n_requests"] > 5
        assert rec["request_throughput"] == pytest.approx(row["requests_per_s"], rel=1e-12)
        pairs = [("median_ttft_ms", "ttft_ms_p50"), ("p90_ttft_ms", "ttft_ms_p90"),
                 ("p99_ttft_ms", "ttft_ms_p99"), ("median_itl_ms", "itl_ms_p50"),
                 ("p90_itl_ms", "itl_ms_p90"), ("p99_itl_ms", "itl_ms_p99"),
                 ("median_tpot_ms", "tpot_ms_p50"), ("median_e2e_latency_ms", "e2e_ms_p50"),
                 ("p90_e2e_latency_ms", "e2e_ms_p90"), ("p99_e2e_latency_ms", "e2e_ms_p99")]
        for ours, theirs in pairs:
            assert rec[ours] == pytest.approx(row[theirs], rel=1e-9), ours
        if row["mode"] == "baseline":
            assert rec["accept_length"] is None and math.isnan(row["accept_length"])
        else:
            assert rec["accept_length"] == pytest.approx(row["accept_length"], rel=1e-12)
            assert rec["server_info"] == SERVER_INFO
        # Closed loop: c users in flight all the time, less the moments between requests.
        assert row["concurrency"] - 0.2 < rec["concurrency"] <= row["concurrency"]
        assert rec["max_concurrent_requests"] == row["concurrency"]
        assert rec["max_output_tokens_per_s"] >= rec["output_throughput"]
        assert rec["total_output_tokens"] == round(row["output_tok_s"] * row["window_s"])
        assert rec["request_rate"] == math.inf and rec["backend"] == "sglang-oai-chat"


def test_vllm_records_agree_with_the_summary_and_are_strict_json(run_dir: Path) -> None:
    run = results.load_run(run_dir)
    records = export.build_records(run, "vllm")
    for rec, row in zip(records, _summary_rows(run_dir), strict=True):
        assert rec["output_throughput"] == row["output_tok_s"]
        assert (rec["completed"], rec["failed"]) == (row["n_requests"], row["n_errors"])
        assert rec["failed"] > 0
        assert rec["median_ttft_ms"] == pytest.approx(row["ttft_ms_p50"], rel=1e-9)
        assert rec["p99_itl_ms"] == pytest.approx(row["itl_ms_p99"], rel=1e-9)
        assert rec["median_e2el_ms"] == pytest.approx(row["e2e_ms_p50"], rel=1e-9)
        assert len(rec["latencies"]) == rec["completed"] == len(rec["queue_times"])
        assert (rec["request_rate"], rec["max_concurrency"]) == ("inf", row["concurrency"])
        assert rec["date"] == "20261201-000000"

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    for line in export.records_text(records, "vllm").splitlines():
        json.loads(line, parse_constant=no_constants)


def test_jsonl_records_are_the_summary_rows(run_dir: Path) -> None:
    run = results.load_run(run_dir)
    text = export.records_text(export.build_records(run, "jsonl"), "jsonl")
    rows = [json.loads(line) for line in text.splitlines()]
    assert [r["run_id"] for r in rows] == ["run"] * len(MODES) * len(LEVELS)
    for rec, row in zip(rows, _summary_rows(run_dir), strict=True):
        for key, value in row.items():
            if isinstance(value, float) and math.isnan(value):
                assert rec[key] is None, key
            else:
                assert rec[key] == value, key


def test_filters_pick_configurations_and_prompt_sets(run_dir: Path) -> None:
    run = results.load_run(run_dir)
    picked = export.build_records(run, "sglang", modes=["eagle3"], prompt_sets=["coding"])
    assert [r["tag"] for r in picked] == ["eagle3/coding/c2-r0", "eagle3/coding/c4-r0"]


# -- the command ----------------------------------------------------------------------------------

def _rounded_lines(text: str, digits: int = 10) -> str:
    """Each JSON line with floats cut to `digits` significant digits (see builders.rounded_json)."""

    def rounded(obj: Any) -> Any:
        if isinstance(obj, float) and math.isfinite(obj):
            # A spread of exactly equal samples comes out as rounding noise (1e-12).
            return float(f"{obj:.{digits}g}") if abs(obj) > 1e-9 else 0.0
        if isinstance(obj, list):
            return [rounded(v) for v in obj]
        if isinstance(obj, dict):
            return {k: rounded(v) for k, v in obj.items()}
        return obj

    return "".join(json.dumps(rounded(json.loads(line))) + "\n" for line in text.splitlines())


@pytest.mark.parametrize("fmt", ["sglang", "vllm", "jsonl"])
def test_the_command_prints_one_line_per_point(run_dir: Path, fmt: str) -> None:
    proc = run_cli(["export", str(run_dir), "--format", fmt], run_dir.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert_snapshot(f"export-{fmt}.jsonl", _rounded_lines(proc.stdout))


def _one_line_error(proc: Any) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "; " in lines[0], lines
    return str(lines[0])


def test_output_is_written_atomically_and_bad_input_is_one_line(run_dir: Path,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "exports" / "points.jsonl"
    proc = run_cli(["export", str(run_dir), "--format", "sglang", "--output", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    stdout = export.records_text(export.build_records(results.load_run(run_dir), "sglang"),
                                 "sglang")
    assert out.read_text() == stdout
    assert [p.name for p in out.parent.iterdir()] == ["points.jsonl"]  # no temporary left
    said = [proc.stdout.strip().replace(str(tmp_path), "<tmp>")]
    (tmp_path / "a-file").write_text("")
    for args in (
        [str(tmp_path / "missing"), "--format", "sglang"],
        [str(run_dir), "--format", "csv"],
        [str(run_dir), "--modes", "eagle3,dynamic"],
        [str(run_dir), "--output", str(tmp_path)],
        [str(run_dir), "--output", str(tmp_path / "a-file" / "x.jsonl")],
    ):
        line = _one_line_error(run_cli(["export", *args], tmp_path))
        said.append(line.replace(str(run_dir.parent), "<run-root>").replace(str(tmp_path),
                                                                            "<tmp>"))
    assert_snapshot("export-messages.txt", "\n".join(said) + "\n")


def test_a_reference_without_point_files_exports_only_its_summary(run_dir: Path,
                                                                  tmp_path: Path) -> None:
    reference = results.store_reference(results.load_run(run_dir), tmp_path / "ref")
    assert len(export.build_records(results.load_run(reference), "jsonl")) == 4
    line = _one_line_error(run_cli(["export", str(reference), "--format", "vllm"], tmp_path))
    assert re.search(r"no per-request point files .*; .*--format jsonl", line)
