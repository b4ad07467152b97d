"""report.md, report.html and the terminal tables; the notebook runs end to end on a synthetic
run. (tests/test_report_html.py checks what makes the page self-contained and safe.)"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from specbench import analysis
from specbench.metrics import explain_flag
from specbench.report import document as report
from specbench.report import tables as report_tables
from specbench.results import (
    PointKey,
    load_run,
    point_files,
    read_point_summary,
    rebuild_summary,
    store_reference,
    write_point,
)
from tests.builders import (
    baseline_curve,
    make_run,
    ratio_crossing_at,
    rounded_json,
    static_curves,
    tune_curves,
)
from tests.snapshot import assert_snapshot

LEVELS = (1, 2, 4, 8, 16, 32, 64, 128)
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "crossover.ipynb"


def _two_sets(tmp_path: Path) -> Path:
    curves = {**static_curves(ratio_crossing_at(32.0), "coding", levels=LEVELS),
              **static_curves(ratio_crossing_at(12.0), "agentic", levels=LEVELS)}
    return make_run(tmp_path, curves, flags={("eagle3", "coding", 128): "client_bound"})


def test_report_leads_with_the_finding_then_tables_figures_categories_flags(
    tmp_path: Path,
) -> None:
    run = load_run(_two_sets(tmp_path))
    path = report.write_report(run)
    text = path.read_text()
    assert path == run.path / "report.md"
    first_para = text.split("\n\n")[1]
    assert first_para.startswith("**Finding.**")
    # One short sentence per decision; the why is in each set's own section.
    assert "coding: above c* = 32 concurrent requests (95% interval " in first_para
    assert "agentic: stop drafting at batch size 12, from c*" in first_para
    assert "EAGLE-3 wins below 32 concurrent requests (coding" not in first_para
    coding_section = text.split("\n## coding\n", 1)[1]
    assert coding_section.lstrip().startswith("EAGLE-3 wins below 32 concurrent requests (coding")
    # Two sets and no mix: a mixed threshold needs --mix.
    assert "One threshold for all sets needs a measured mix (--mix agentic=0.5,coding=0.5)." \
        in first_para
    # Summary row per set, then a table per set with the measured numbers.
    assert re.search(r"\| coding \| 32 \| – \| – \| 32\.0 \| [\d.]+–[\d.]+ \| – \| 25%–67% \|",
                     text)
    assert "| c | base | E3 | E3/base | accept |" in text
    # c=64 coding: baseline 150*64/2 = 4800, EAGLE-3 0.8 x 4800 = 3840.
    assert "| 64 | 4,800 | 3,840 | 0.80 | 3.00 |" in text
    assert "- c=128: client_bound (E3)" in text
    # Figures are linked relatively and exist.
    for link in re.findall(r"\]\((plots/[a-z]+\.png)\)", text):
        assert (run.path / link).exists()
    assert "(plots/throughput.png)" in text and "(plots/ratio.png)" in text
    # make_run gives category a accept length 3 and category b 2.
    categories = text.split("## Acceptance by category")[1]
    assert "| a | 3.00 |" in categories and "| b | 2.00 |" in categories
    flags = text.split("## Flags")[1]
    assert "**client_bound**" in flags and "eagle3/coding/c128-r0" in flags
    assert explain_flag("client_bound") in flags  # the advice, not just the name
    assert text.index("## coding") > text.index("**Finding.**")


def test_report_is_written_even_when_figures_fail(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, static_curves(ratio_crossing_at(32.0), levels=LEVELS)))
    (run.path / "plots").write_text("not a folder")  # makes drawing fail
    text = report.write_report(run).read_text()
    assert "The figures could not be drawn (FileExistsError" in text
    assert "EAGLE-3 wins below 32 concurrent requests (coding" in text


def test_category_acceptance_counts_only_requests_finished_in_the_window(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, static_curves(lambda c: 1.5, levels=(1, 2)))
    # One eagle3 point: two category-a requests finished inside (accept 4), one cancelled at the
    # window end (accept 1, not finished) must not count.
    requests = pd.DataFrame({
        "category": ["a", "a", "a"],
        "status": ["ok", "ok", "cancelled"],
        "completion_tokens": [400, 200, 100],
        "spec_verify_ct": [100, 50, 100],
        "finished_in_window": [True, True, False],
        "window_tokens": [100.0, 100.0, 50.0],
    })
    summary = load_run(run_dir).summary

    def stored_summary(c: int) -> dict[str, object]:
        row = summary[(summary["mode"] == "eagle3") & (summary["concurrency"] == c)].iloc[0]
        return {str(k): v for k, v in row.items()
                if k not in ("mode", "prompt_set", "concurrency", "repeat")}

    write_point(run_dir, PointKey("eagle3", "coding", 1, 0), requests, stored_summary(1))
    # The other eagle3 point has no category column: skipped, not an error.
    write_point(run_dir, PointKey("eagle3", "coding", 2, 0), requests.drop(columns="category"),
                stored_summary(2))
    rebuild_summary(run_dir)
    table = report.acceptance_by_category(load_run(run_dir), "coding")
    assert table is not None
    assert table.loc["a", "eagle3"] == pytest.approx(600 / 150)
    assert table.loc["a", "requests"] == 2


def test_terminal_shows_finding_first_and_the_table(tmp_path: Path) -> None:
    run = load_run(_two_sets(tmp_path))
    console = Console(record=True, width=160, color_system=None)
    report.render_terminal(run, console)
    out = console.export_text()
    assert out.index("agentic: above c* = 12 concurrent requests") < out.index("┃   c")
    assert "One threshold for all sets needs a measured mix" in re.sub(r"[│\s]+", " ", out)
    # coding c=16: r = 1 + 0.2 * log2(32/16) = 1.2
    assert re.search(r"│\s+16 │\s+1,920 │\s+2,304 │\s+1\.20 │", out)
    assert "flags at c=128: client_bound (E3)" in out


def test_report_of_a_run_without_eagle3(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path, {("baseline", "coding"): {c: baseline_curve(c)
                                                                 for c in LEVELS}}))
    text = report.write_report(run).read_text()
    assert "No crossover" in text
    assert "| 8 | 1,067 |" in text  # 150*8/(1+8/64)
    console = Console(record=True, width=120, color_system=None)
    report.render_terminal(run, console)
    assert "No crossover" in console.export_text()


def _lines_within(text: str, width: int = report.MAX_WIDTH) -> None:
    wide = [line for line in text.splitlines()
            if line.startswith(("|", "┃", "│", "┏", "┡", "└")) and len(line) > width]
    assert not wide, f"table lines wider than {width}: {wide[:2]}"


def test_any_configurations_report_and_plot(tmp_path: Path) -> None:
    # No eagle3, so no decisions: tables and figures of whatever was measured.
    curves = tune_curves(levels=LEVELS)
    curves = {k: v for k, v in curves.items() if k[0] in ("baseline", "eagle3-k2", "eagle3-k5")}
    run = load_run(make_run(tmp_path, curves, flags={("eagle3-k5", "coding", 8): "client_bound",
                                                     ("eagle3-k2", "coding", 8): "client_bound"}))
    text = report.write_report(run).read_text()
    assert "| c | base | E3 k2 | E3 k5 | accept |" not in text  # accept is EAGLE-3's own
    assert "| c | base | E3 k2 | E3 k5 |" in text
    assert "- c=8: client_bound (E3 k2, E3 k5)" in text
    assert "E3 k2 = EAGLE-3 K=2" in text
    assert {p.name for p in (run.path / "plots").glob("*.png")} >= {
        "throughput.png", "latency.png", "acceptance.png"}
    _lines_within(text)
    out = io.StringIO()
    report.render_terminal(run, Console(width=100, file=out, color_system=None))
    assert "flags at c=8: client_bound (E3 k2, E3 k5)" in out.getvalue()
    _lines_within(out.getvalue())


def test_tune_run_report_splits_wide_tables_and_gives_the_schedule(tmp_path: Path) -> None:
    curves = tune_curves(levels=LEVELS, tuned=0.99, sglang_default=0.9)
    curves[("dynamic", "coding")] = {c: v * 0.98 for c, v in curves[("eagle3", "coding")].items()}
    accepts = {"eagle3-k1": 1.7, "eagle3-k2": 2.2, "eagle3": 2.5, "eagle3-k5": 2.9,
               "dynamic": 2.5, "tuned": 2.45, "sglang-default": 1.75}
    run = load_run(make_run(tmp_path, curves, se_rel=0.01, accept_lengths=accepts))
    text = report.write_report(run).read_text()
    assert ("| c | base | E3 | E3 k1 | E3 k2 | E3 k5 | 0-step | sgl-def | dyn | tuned |"
            in text)
    assert ("| c | E3/base | E3/0-step | tax | E dyn | best K | E tuned | tuned/sgl | tuned K "
            "| sgl K | accept |" in text)
    assert "| 1.100 | 3 | 1 | 2.50 |" in text  # tuned ran K = 3, SGLang's default K = 1
    assert "| 128 | 0.75 | 0.85 | 12% |" in text
    assert "Tuned schedule (batch size → steps): 1→3, 71→0" in text  # one drafting K
    assert "vs SGLang's default ×1.100 (geomean)" in text
    assert "(plots/schedule.png)" in text and "(plots/envelope.png)" in text
    _lines_within(text)
    out = io.StringIO()
    report.render_terminal(run, Console(width=100, file=out, color_system=None))
    assert "coding: decisions" in out.getvalue()
    _lines_within(out.getvalue())


def test_mix_report_quotes_the_loss_per_set(tmp_path: Path) -> None:
    curves = {**static_curves(ratio_crossing_at(32.0), "coding", LEVELS, zero_step=0.88),
              **static_curves(ratio_crossing_at(8.0), "agentic", LEVELS, zero_step=0.88),
              **static_curves(ratio_crossing_at(16.0), "mix", LEVELS, zero_step=0.88)}
    run = load_run(make_run(tmp_path, curves))
    text = report.write_report(run).read_text()
    assert "Mixed deployment (measured mix): stop drafting at batch size 25" in text
    assert "agentic up to 9.1%, coding up to 12.0%" in text
    coding = text.split("## coding")[1].split("## ")[0]
    assert "mix loss" in coding and "| 32 |" in coding and "12.0%" in coding
    _lines_within(text)


def test_moe_like_report_says_what_one_server_should_do(tmp_path: Path) -> None:
    curves = static_curves(ratio_crossing_at(0.5), levels=LEVELS, zero_step=0.75)
    text = report.write_report(load_run(make_run(tmp_path, curves))).read_text()
    assert "EAGLE-3 never wins (coding)" in text
    assert "serve without speculative decoding. If one adaptive server must serve it anyway: " \
        "EAGLE-3 beats its zero-step path below" in text
    assert "| coding |" in text and "never wins" in text.split("| coding |")[1].split("\n")[0]


def test_latency_table_quotes_the_summary_columns(tmp_path: Path) -> None:
    run = load_run(with_lengths_and_e2e_tail(_two_sets(tmp_path)))
    text = report.write_report(run).read_text()
    latency = text.split("## Latency")[1].split("\n## ")[0]
    assert "| c | configuration | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | E2E p50 | E2E p99 |" \
        in latency
    # make_run: TTFT p50 20 + c, p99 40 + 2c; EAGLE-3 ITL p50 5 + 0.05c, p99 9 + 0.1c; E2E p50
    # 1,000; with_lengths_and_e2e_tail: E2E p99 2,000 + 10c.
    coding = latency.split("### coding")[1]
    assert "| 64 | EAGLE-3 | 84.0 | 168.0 | 8.20 | 15.4 | 1,000 | 2,640 |" in coding
    assert "| 64 | baseline | 84.0 | 168.0 | 11.2 | 18.4 | 1,000 | 2,640 |" in coding
    assert coding.index("| 1 | baseline |") < coding.index("| 1 | EAGLE-3 |") \
        < coding.index("| 2 | baseline |")
    lengths = text.split("## Request lengths")[1].split("\n## ")[0]
    assert "| configuration | requests | in mean | in p50 | in p99 | out mean |" in lengths
    assert text.index("## Latency") < text.index("## Request lengths") \
        < text.index("## Acceptance by category")


def test_latency_of_older_runs_and_references_without_request_files(tmp_path: Path) -> None:
    # A summary without e2e_ms_p99 (older runs) shows "–"; a reference without point files
    # still gets latency, and no length or category tables.
    run = load_run(_two_sets(tmp_path))
    assert "| 64 | EAGLE-3 | 84.0 | 168.0 | 8.20 | 15.4 | 1,000 | – |" in \
        report.render_markdown(run, None)
    reference = load_run(store_reference(run, tmp_path / "reference"))
    text = report.render_markdown(reference, None)
    assert "| 64 | EAGLE-3 | 84.0 |" in text
    assert "## Request lengths" not in text and "## Acceptance by category" not in text


def test_length_table_pools_requests_finished_in_the_window(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, static_curves(lambda c: 1.5, levels=(1, 2)))
    summary = {k: v for k, v in read_point_summary(point_files(run_dir)[0]).items()
               if k not in ("mode", "prompt_set", "concurrency", "repeat")}
    rows = pd.DataFrame({
        "prompt_tokens": pd.array([100, 200, 300, 400, None], dtype="Int64"),
        "completion_tokens": [10, 20, 30, 40, 50],
        "finished_in_window": [True, True, True, False, True],  # 400/40 ran past the window
    })
    for c in (1, 2):
        write_point(run_dir, PointKey("eagle3", "coding", c, 0), rows, summary)
    rebuild_summary(run_dir)
    run = load_run(run_dir)
    requests = report_tables.finished_requests(run, "coding")
    assert requests is not None
    lengths = report_tables.length_table(requests)
    eagle3 = lengths.loc["eagle3"]
    assert eagle3["requests"] == 8
    # Input: 100, 200, 300 twice (one unknown left out); output: 10, 20, 30, 50 twice.
    assert eagle3["in mean"] == pytest.approx(200.0)
    assert eagle3["in p99"] == pytest.approx(float(np.percentile([100, 200, 300] * 2, 99)))
    assert eagle3["out mean"] == pytest.approx(27.5)
    assert eagle3["out p50"] == pytest.approx(25.0)
    assert eagle3["out p99"] == pytest.approx(float(np.percentile([10, 20, 30, 50] * 2, 99)))
    assert list(lengths.index) == ["baseline", "eagle3"]
    assert pd.isna(lengths.loc["baseline", "in mean"])  # make_run's rows carry no prompt_tokens
    text = report.render_markdown(run, None)
    assert "| EAGLE-3 | 8 | 200 | 200 | 300 | 28 | 25 | 50 |" in text
    assert "| baseline | 46 | – | – | – |" in text  # 2 of its 48 ended outside


@pytest.mark.slow
def test_notebook_executes_against_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nbclient import NotebookClient

    ratio = ratio_crossing_at(32.0)
    curves = static_curves(ratio, levels=LEVELS)
    curves[("dynamic", "coding")] = {c: baseline_curve(c) * max(ratio(c), 1.0) for c in LEVELS}
    run_dir = make_run(tmp_path, curves)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "the notebook is stored without outputs"
    monkeypatch.setenv("SPECBENCH_RUN", str(run_dir))
    monkeypatch.delenv("SPECBENCH_RUN_B", raising=False)
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    texts = " ".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/markdown", ""))
                     for o in outputs)
    assert "EAGLE-3 wins below 32 concurrent requests (coding" in texts
    assert "recommended threshold: 32" in texts
    n_images = sum("image/png" in o.get("data", {}) for o in outputs)
    assert n_images == 6  # five figures and the two-run comparison


# --- snapshots: the exact text users read -------------------------------------------------------


def with_lengths_and_e2e_tail(run_dir: Path) -> Path:
    """make_run's points plus what a measured run also has: prompt_tokens per request (request
    i of a point sends 100 + 10 i tokens; 1,000 for every other one of category b) and the
    summary's e2e_ms_p99 (2,000 + 10 c)."""
    for path in point_files(run_dir):
        row = read_point_summary(path)
        key = PointKey(*(row.pop(k) for k in ("mode", "prompt_set", "concurrency", "repeat")))
        requests = pd.read_parquet(path)
        n = len(requests)
        tokens = [1000 if i % 4 == 3 else 100 + 10 * i for i in range(n)]
        requests["prompt_tokens"] = pd.array(tokens, dtype="Int64")
        write_point(run_dir, key, requests, {**row, "e2e_ms_p99": 2000.0 + 10 * key.concurrency})
    rebuild_summary(run_dir)
    return run_dir


def _snapshot_run(tmp_path: Path) -> Path:
    """Two prompt sets with zero-step curves, a dynamic server on coding at its one-server
    threshold (with a straddle level), flags, paired requests, request lengths."""
    ratio = ratio_crossing_at(32.0)
    curves = {**static_curves(ratio, "coding", levels=LEVELS, zero_step=0.88),
              **static_curves(ratio_crossing_at(12.0), "agentic", levels=LEVELS, zero_step=0.88)}
    dynamic = {c: baseline_curve(c) * max(ratio(c), 0.88) * 0.97 for c in LEVELS}
    dynamic[49] = baseline_curve(49) * 0.88 * 0.9
    curves[("dynamic", "coding")] = dynamic
    flags = {("eagle3", "coding", 128): "client_bound",
             ("baseline", "agentic", 1): "too_few_requests;client_bound"}
    running = {(m, "agentic"): {c: 0.9 * c for c in LEVELS}
               for m in ("baseline", "eagle3", "zero-step")}
    return with_lengths_and_e2e_tail(make_run(
        tmp_path, curves, flags=flags, running=running, threshold=49, se_rel=0.02,
        paired_noise=0.05))


def _normalised(text: str, tmp_path: Path) -> str:
    return text.replace(str(tmp_path), "<tmp>")


def html_without_figures(text: str) -> str:
    """report.html with each inline SVG's body cut (matplotlib's path data is not what users
    read, and varies with its version); the <svg> element itself stays, one per figure."""
    return re.sub(r"<svg\b.*?</svg>", "<svg>…</svg>", text, flags=re.DOTALL)


def test_snapshot_terminal_tables(tmp_path: Path) -> None:
    run = load_run(_snapshot_run(tmp_path))
    out = io.StringIO()
    report.render_terminal(run, Console(width=100, file=out, color_system=None))
    assert_snapshot("report-terminal.txt", _normalised(out.getvalue(), tmp_path))


def test_snapshot_report_md_html_analysis_and_threshold(tmp_path: Path) -> None:
    run = load_run(_snapshot_run(tmp_path))
    result = analysis.write_analysis(run)
    assert_snapshot("report-analysis.json", rounded_json(json.dumps(result)))
    assert_snapshot("report-threshold.txt",
                    _normalised(analysis.threshold_summary(run) + "\n", tmp_path))
    text = report.write_report(run).read_text()
    assert_snapshot("report.md", _normalised(text, tmp_path))
    page = (run.path / "report.html").read_text()
    assert_snapshot("report.html", _normalised(html_without_figures(page), tmp_path))
