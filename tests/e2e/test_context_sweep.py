"""A sweep with context buckets on the simulator: prompts land in their bucket (the server's
token counts, not characters), decisions per bucket, the surface, and the tools that read runs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from specbench import results
from specbench.results.points import point_path
from tests.harness import assert_no_process_left, run_cli, sweep_cli

pytestmark = pytest.mark.slow

BOUNDS = {"4k": (0, 4096), "12k": (4096, 12288)}
LEVELS = (1, 16)


@pytest.fixture(scope="module")
def bucketed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from specbench.engines.process import free_port

    tmp_path = tmp_path_factory.mktemp("ctx")
    port = free_port()
    # The Triton profile counts as the real H200 server did: pre-tokenizer pieces of each
    # message's text (its template drops tool schemas and tool calls). The buckets are aimed
    # from a 4-character estimate with the schemas, so landing in them is not by construction.
    proc = sweep_cli(tmp_path, port, "--context-lengths", "4k,12k", "--prompts", "coding,agentic",
                     "--modes", "baseline,eagle3,zero-step",
                     "--concurrency", ",".join(map(str, LEVELS)),
                     "--sim-profile", "llama-3.1-8b-1xh200-triton", plots=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert_no_process_left(port)
    return tmp_path / "res" / "run"


def test_every_request_carried_a_prompt_of_its_buckets_size(bucketed: Path) -> None:
    keys = results.measured_keys(bucketed)
    assert {k.prompt_set for k in keys} == {"coding@4k", "coding@12k", "agentic@4k",
                                            "agentic@12k"}
    for key in keys:
        low, high = BOUNDS[key.prompt_set.split("@")[1]]
        tokens = pd.read_parquet(point_path(bucketed, key), columns=["prompt_tokens"])
        counted = tokens["prompt_tokens"].dropna()
        assert len(counted) > 0 and low < counted.min() and counted.max() <= high, key.label


def test_decisions_per_bucket_and_the_surface(bucketed: Path) -> None:
    analysis = json.loads((bucketed / "analysis.json").read_text())
    surface = analysis["context_surface"]["coding"]
    assert [b["bucket"] for b in surface["buckets"]] == ["4k", "12k"]
    assert surface["levels"] == list(LEVELS)
    for bucket, row in zip(surface["buckets"], surface["over_zero_step"], strict=True):
        entry = analysis["prompt_sets"][f"coding@{bucket['bucket']}"]
        assert bucket["one_server"]["threshold_batch_size"] == \
            entry["one_server"]["threshold_batch_size"]
        assert row == [entry["one_server"]["ratio_by_concurrency"][str(c)] for c in LEVELS]
        assert entry["context_bucket"]["range"] in ("up to 4k prompt tokens",
                                                    "4k-12k prompt tokens")
    report = (bucketed / "report.md").read_text()
    assert "## Context length" in report and "(plots/context.png)" in report
    assert (bucketed / "plots" / "context.png").stat().st_size > 0


def test_the_threshold_file_names_its_context_range(bucketed: Path) -> None:
    out = bucketed / "t.json"
    proc = run_cli(["threshold", str(bucketed), "--prompt-set", "coding@12k",
                    "--write-adaptive-config", str(out)], bucketed.parent)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(out.read_text())
    assert "it holds for traffic like the coding@12k set's: 4k-12k prompt tokens" \
        in written["context"]
    assert all(key.isdigit() for key in written if key != "context")  # what SGLang reads


def test_gate_compare_and_export_read_a_bucketed_run(bucketed: Path, tmp_path: Path) -> None:
    gate = run_cli(["regress", "--reference", str(bucketed), "--candidate", str(bucketed)],
                   tmp_path)
    assert gate.returncode == 0, gate.stdout[-2000:] + gate.stderr[-2000:]
    assert "coding@12k" in gate.stdout
    compared = run_cli(["compare", str(bucketed), str(bucketed)], tmp_path)
    assert compared.returncode == 0 and "agentic@4k" in compared.stdout, compared.stderr
    exported = run_cli(["export", str(bucketed), "--format", "jsonl", "--prompts", "coding@12k"],
                       tmp_path)
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in exported.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 3 * len(LEVELS) and {r["prompt_set"] for r in rows} == {"coding@12k"}
