"""report.md and the terminal tables; the notebook runs end to end on a synthetic run."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from rich.console import Console

from specbench import analysis, report
from specbench.metrics import explain_flag
from specbench.results import PointKey, load_run, rebuild_summary, write_point
from tests.builders import (
    baseline_curve,
    make_run,
    ratio_crossing_at,
    rounded_json,
    static_curves,
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
    assert "EAGLE-3 wins below 32 concurrent requests (coding" in first_para
    assert "EAGLE-3 wins below 12 concurrent requests (agentic" in first_para
    assert "stop drafting at batch size 12" in first_para
    # Summary row per set, then a table per set with the measured numbers.
    assert re.search(r"\| coding \| crossover \| 32\.0 \| [\d.]+–[\d.]+ \| 32 \|", text)
    assert "| c | baseline tok/s | EAGLE-3 tok/s | ratio | accept EAGLE-3 | flags |" in text
    # c=64 coding: baseline 150*64/2 = 4800, EAGLE-3 0.8 x 4800 = 3840.
    assert "| 64 | 4,800 | 3,840 | 0.80 | 3.00 |  |" in text
    assert "| 128 | 6,400 | 3,840 | 0.60 | 3.00 | client_bound (E3) |" in text
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
    assert out.index("stop drafting at batch size 12") < out.index("┃   c")
    assert "Threshold rule: minimum over prompt sets" in out
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


def _snapshot_run(tmp_path: Path) -> Path:
    """Two prompt sets, a dynamic-disable server on coding (with a straddle level), flags."""
    ratio = ratio_crossing_at(32.0)
    curves = {**static_curves(ratio, "coding", levels=LEVELS),
              **static_curves(ratio_crossing_at(12.0), "agentic", levels=LEVELS)}
    dynamic = {c: baseline_curve(c) * max(ratio(c), 1.0) * 0.97 for c in LEVELS}
    dynamic[33] = baseline_curve(33) * 0.9
    curves[("dynamic", "coding")] = dynamic
    flags = {("eagle3", "coding", 128): "client_bound",
             ("baseline", "agentic", 1): "too_few_requests;client_bound"}
    running = {(m, "agentic"): {c: 0.9 * c for c in LEVELS} for m in ("baseline", "eagle3")}
    return make_run(tmp_path, curves, flags=flags, running=running, threshold=32)


def _normalised(text: str, tmp_path: Path) -> str:
    return text.replace(str(tmp_path), "<tmp>")


def test_snapshot_terminal_tables(tmp_path: Path) -> None:
    run = load_run(_snapshot_run(tmp_path))
    out = io.StringIO()
    report.render_terminal(run, Console(width=100, file=out, color_system=None))
    assert_snapshot("report-terminal.txt", _normalised(out.getvalue(), tmp_path))


def test_snapshot_report_md_analysis_and_threshold(tmp_path: Path) -> None:
    run = load_run(_snapshot_run(tmp_path))
    result = analysis.write_analysis(run)
    assert_snapshot("report-analysis.json", rounded_json(json.dumps(result)))
    assert_snapshot("report-threshold.txt",
                    _normalised(analysis.threshold_summary(run) + "\n", tmp_path))
    text = report.write_report(run).read_text()
    assert_snapshot("report.md", _normalised(text, tmp_path))
