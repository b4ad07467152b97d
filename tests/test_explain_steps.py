"""`specbench explain`'s parts on bytes: SGLang's decode lines, the split of EAGLE-3 / baseline
into its terms, the /server_info keys the manifest keeps and the provenance that names them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from specbench.analysis.explain import explain_level, largest_term
from specbench.analysis.steps import DecodeInterval, decode_log_interval, parse_decode_lines
from specbench.engines.server_info import recorded
from specbench.report.provenance import resolved_settings


def _decode(batch: int, tok_s: float, accept: float | None = None, queue: int = 0) -> str:
    spec = f"accept len: {accept:.2f}, accept rate: 0.50, " if accept else ""
    return (f"[2026-01-01 00:00:00] Decode batch, #running-req: {batch}, #token: 1000, "
            f"token usage: 0.01, {spec}cuda graph: True, gen throughput (token/s): {tok_s:.2f}, "
            f"#queue-req: {queue}")


PREFILL = ("[2026-01-01 00:00:00] Prefill batch, #new-seq: 1, #new-token: 300, #cached-token: 0, "
           "token usage: 0.01, #running-req: 3, #queue-req: 0")


def test_steady_lines_are_decode_steps_of_one_batch_after_a_decode_line() -> None:
    lines = [PREFILL, _decode(4, 800.0), _decode(4, 800.0), PREFILL, _decode(4, 700.0),
             _decode(5, 1000.0), _decode(5, 1000.0, queue=2)]
    found = parse_decode_lines(lines)
    assert [i.steady for i in found] == [False, True, False, False, True]
    assert found[1].step_ms == pytest.approx(5.0)  # 4 requests x 1 token / 800 tok/s
    assert found[-1].queued == 2


def test_lines_under_sglangs_profiler_are_not_steady() -> None:
    # As a real H100 log had them: the profiler's CPU tracing slows each step, and the first
    # line after the trace is written covers the export (1.45 s at batch 64).
    lines = [_decode(64, 4000.0), _decode(64, 4000.0),
             "[2026-01-01 00:00:01] Profiling starts. Traces will be saved to: /tmp/p "
             "(with profile id: p)",
             _decode(64, 3000.0), _decode(64, 3000.0),
             "[2026-01-01 00:00:02] Stop profiling...",
             "[2026-01-01 00:00:03] Profiling done. Traces are saved to: /tmp/p",
             _decode(64, 100.0), _decode(64, 4000.0), _decode(64, 4000.0)]
    assert [i.steady for i in parse_decode_lines(lines)] == [
        False, True, False, False, False, True, True]


def test_sglang_0_5_23_lines_with_more_fields_are_read() -> None:
    line = ("[2026-01-01 00:00:00 TP0] Decode batch [812], #running-req: 8, #token: 9000, "
            "token usage: 0.10, #swa token: 10, accept len: 2.50, accept rate: 0.50, "
            "cap len: 3.00, cuda graph: True, gen throughput (token/s): 2000.00, "
            "#queue-req: 0, ")
    (found,) = parse_decode_lines([_decode(8, 2000.0, 2.5), line])[1:]
    assert found.accept_length == 2.5 and found.steady
    assert found.step_ms == pytest.approx(10.0)  # 8 x 2.5 tokens / 2000 tok/s


def test_the_log_interval_comes_from_the_servers_argv() -> None:
    assert decode_log_interval(["--port", "1"]) == 40
    assert decode_log_interval(["--decode-log-interval", "1"]) == 1
    assert decode_log_interval(["--decode-log-interval=10"]) == 10


def _steady(batch: int, step_ms: float, accept: float, n: int) -> list[DecodeInterval]:
    tok_s = batch * accept / (step_ms / 1e3)
    return [DecodeInterval(batch, 1000, accept, tok_s, 0, True, True) for _ in range(n)]


def test_a_level_splits_into_acceptance_step_and_rest() -> None:
    # EAGLE-3 at 2.5 tokens per verify, a step 3x a plain one, and 0.8x the baseline's tok/s.
    rng = np.random.default_rng(0)
    lv = explain_level(64, 0.8, 0.02, 0, 2.5, 4, _steady(64, 30.0, 2.5, 40),
                       _steady(64, 10.0, 1.0, 40), rng)
    assert lv.batch == 64 and lv.steady_lines == (40, 40)
    assert lv.step_ratio == pytest.approx(3.0)
    assert lv.rest == pytest.approx(0.8 * 3.0 / 2.5)
    assert lv.tok_s_ratio == pytest.approx(lv.accept_length / lv.step_ratio * lv.rest)
    assert lv.break_even_accept == pytest.approx(2.5 / 0.8)  # A / R, the step and rest held
    assert lv.largest == "step"  # log 3 against log(4 / 2.5) and -log 0.96
    assert lv.break_even_interval is not None
    assert lv.break_even_interval[0] <= lv.break_even_accept <= lv.break_even_interval[1]


def test_too_few_steady_lines_leave_the_step_unmeasured() -> None:
    rng = np.random.default_rng(0)
    lv = explain_level(16, 1.1, 0.02, 0, 2.5, 4, _steady(16, 12.0, 2.5, 2),
                       _steady(16, 6.0, 1.0, 40), rng)
    assert lv.step_ratio is None and lv.largest is None and lv.steady_lines == (2, 40)


def test_the_largest_term_is_the_one_furthest_from_its_ideal() -> None:
    assert largest_term(1.6, 4, 1.8, 1.0) == "acceptance"  # log 2.5 > log 1.8
    assert largest_term(3.5, 4, 3.0, 0.9) == "step"
    assert largest_term(3.5, 4, 1.1, 0.5) == "rest"


def test_the_manifest_keeps_what_sglang_0_5_23_resolved() -> None:
    info = {"attention_backend": "fa3", "tp_size": 8, "disable_overlap_schedule": False,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
            "cuda_graph_bs_decode": None, "model_path": "m",
            "cuda_graph_config": {"decode": {"backend": "full", "max_bs": 64, "bs": [1, 2, 64]},
                                  "prefill": {"backend": "breakable"}}}
    kept = recorded(info)
    assert kept["cuda_graph_bs"] == [1, 2, 64] and kept["cuda_graph_max_bs"] == 64
    assert kept["attention_backend"] == "fa3" and kept["tp_size"] == 8
    assert kept["disable_overlap_schedule"] is False and "model_path" not in kept
    # SGLang 0.5.17 returned the sizes at the top level
    old = recorded({"cuda_graph_bs": [1, 8], "cuda_graph_max_bs": 8, "attention_backend": "fa3"})
    assert old["cuda_graph_bs"] == [1, 8] and old["cuda_graph_max_bs"] == 8


def test_the_provenance_names_what_the_servers_resolved() -> None:
    server = SimpleNamespace(server_info=recorded({
        "tp_size": 8, "disable_overlap_schedule": False, "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "cuda_graph_config": {"decode": {"backend": "full", "max_bs": 64, "bs": [1, 2, 64]}}}))
    run = SimpleNamespace(manifest=SimpleNamespace(servers={"eagle3": server}))
    assert resolved_settings(run) == (  # type: ignore[arg-type]
        "TP 8, decode CUDA graphs at 3 batch sizes up to 64, overlap scheduling on, "
        "EAGLE-3 topk 1 with 4 draft tokens")
    empty = SimpleNamespace(manifest=SimpleNamespace(servers={}))
    assert resolved_settings(empty) is None  # type: ignore[arg-type]
