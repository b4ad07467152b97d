"""lockstep_ends on the simulator: equal output caps end together; natural ends do not.

A closed loop whose requests all run to the same cap prefills every user in one burst and ends
them together every cycle; the same prompts ending where the simulated model stops are
staggered. One short sweep measures both sets at c = 16.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from specbench.prompts import load_prompt_set
from tests.harness import sweep_cli

pytestmark = pytest.mark.slow

EQUAL_CAP_TOKENS = 64  # a cycle of ~0.5 GPU-s at c = 16: several bursts in the 2-s window


def equal_caps(path: Path) -> Path:
    """The built-in coding set's one-request rows, every one run to the same cap."""
    rows = []
    for line in load_prompt_set("coding").path.read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if isinstance(row.get("max_tokens"), int):
            row["max_tokens"] = EQUAL_CAP_TOKENS
            row["sampling"] = {**row.get("sampling", {}), "ignore_eos": True}
            rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n")
    return path


def test_equal_caps_are_flagged_and_natural_ends_are_not(tmp_path: Path, port: int) -> None:
    equal = equal_caps(tmp_path / "equal.jsonl")
    proc = sweep_cli(tmp_path, port, "--modes", "baseline", "--concurrency", "16",
                     "--prompts", f"{equal},coding")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = pd.read_parquet(tmp_path / "res" / "run" / "summary.parquet")
    flags = {row.prompt_set: str(row.flags).split(";") for row in summary.itertuples()}
    assert "lockstep_ends" in flags["equal"], flags
    assert "lockstep_ends" not in flags["coding"], flags
    assert "lockstep_ends (base)" in proc.stdout  # the terminal's flag line names it
