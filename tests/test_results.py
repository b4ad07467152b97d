"""The public summary format, pinned by a literal list (docs/reading-results.md, "Summary columns").

The list is written out here, not imported: renaming a column in the code must fail this test.
Each column is checked on real measured points (the runner against the fake SGLang server,
summarised by `specbench.metrics`, written and read back by `specbench.results`), because
`results.summary_frame` pads missing public columns with empty ones.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench import metrics, results
from specbench.load.runner import PointSpec, run_point
from specbench.prompts import PromptRequest
from tests.load.fakeserver import FakeOptions, FakeSGLang

# README.md, "Summary columns (a public format)", in this order; more may follow.
PUBLIC_COLUMNS = [
    "mode",
    "prompt_set",
    "concurrency",
    "repeat",
    "n_requests",
    "n_errors",
    "window_s",
    "output_tok_s",
    "requests_per_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "e2e_ms_p50",
    "accept_length",
    "server_output_tok_s",
    "server_running_reqs_mean",
    "flags",
]
# Filled once a request finished in the window (n_requests > 0)...
LATENCY_COLUMNS = ["ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "itl_ms_p99", "e2e_ms_p50"]
# ...accept_length only for a speculative server (NaN for a baseline)...
# ...and the rest on every measured point (the server_* columns come from /metrics, which every
# server specbench launches or attaches to answers).
ALWAYS_FILLED = [c for c in PUBLIC_COLUMNS if c not in [*LATENCY_COLUMNS, "accept_length"]]


def unfilled(summary: pd.DataFrame) -> list[str]:
    """'mode/set/cC: column' for every public value that should be filled and is empty."""
    finished = summary["n_requests"] > 0
    return [
        f"{row.mode}/{row.prompt_set}/c{row.concurrency}: {col}"
        for col in [*ALWAYS_FILLED, *LATENCY_COLUMNS]
        for row, empty in zip(summary.itertuples(), summary[col].isna(), strict=True)
        if empty and (col in ALWAYS_FILLED or finished[row.Index])
    ]


def _measure(spec: bool) -> dict[str, Any]:
    requests = [PromptRequest(id=f"p{i}", prompt_set="coding", category="edit",
                              messages=({"role": "user", "content": f"task {i}"},),
                              max_tokens=1000) for i in range(16)]
    opts = FakeOptions(output_tokens=30, tokens_per_step=(1, 3, 2) if spec else (1,),
                       step_s=0.003, spec=spec)

    async def go() -> dict[str, Any]:
        async with FakeSGLang(opts) as srv:
            point = PointSpec(base_url=srv.url, protocol="openai-chat", model="m",
                              concurrency=8, requests=requests, warmup_s=0.1, window_s=0.8)
            result = await run_point(point)
        return metrics.summarize_point(result, 1.0, max_running_requests=64, error_budget=0.01)

    return asyncio.run(go())


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory with one measured baseline point and one EAGLE-3 point."""
    run_dir = tmp_path_factory.mktemp("run")
    for mode in ("baseline", "eagle3"):
        key = results.PointKey(mode, "coding", 8)
        results.write_point(run_dir, key, pd.DataFrame({"prompt_id": ["p0"]}),
                            _measure(spec=mode == "eagle3"))
    return run_dir


def test_the_code_declares_the_public_columns() -> None:
    assert list(results.SUMMARY_COLUMNS) == PUBLIC_COLUMNS
    assert sorted([*ALWAYS_FILLED, *LATENCY_COLUMNS, "accept_length"]) == sorted(PUBLIC_COLUMNS)


@pytest.mark.parametrize("mode", ["baseline", "eagle3"])
def test_a_measured_point_fills_every_public_column(run_dir: Path, mode: str) -> None:
    # The point file's own row: what metrics produced, before any padding.
    path = results.point_path(run_dir, results.PointKey(mode, "coding", 8))
    row = results.read_point_summary(path)
    missing = [c for c in PUBLIC_COLUMNS if c not in row]
    assert missing == []
    empty = [c for c in [*ALWAYS_FILLED, *LATENCY_COLUMNS] if row[c] is None or pd.isna(row[c])]
    assert empty == []
    assert row["n_requests"] >= 5 and row["n_errors"] == 0 and row["output_tok_s"] > 0
    assert isinstance(row["flags"], str)
    if mode == "baseline":
        assert row["accept_length"] is None  # no drafting: NaN, stored as null
    else:
        assert math.isfinite(row["accept_length"]) and row["accept_length"] > 1.0


def test_summary_files_lead_with_the_public_columns_in_order(run_dir: Path) -> None:
    frame = results.rebuild_summary(run_dir)
    assert list(frame.columns[: len(PUBLIC_COLUMNS)]) == PUBLIC_COLUMNS
    header = (run_dir / "summary.csv").read_text().splitlines()[0].split(",")
    assert header[: len(PUBLIC_COLUMNS)] == PUBLIC_COLUMNS
    on_disk = pd.read_parquet(run_dir / "summary.parquet")
    assert list(on_disk.columns[: len(PUBLIC_COLUMNS)]) == PUBLIC_COLUMNS
    assert unfilled(on_disk) == []
    assert on_disk.set_index("mode")["accept_length"].isna().to_dict() == {
        "baseline": True, "eagle3": False}
