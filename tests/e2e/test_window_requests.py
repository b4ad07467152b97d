"""--min-window-requests and --max-window-s on the command line and in the plan (issue 57)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench import config
from specbench.engines import make_engine
from specbench.run.plan import point_estimate_s
from tests.harness import run_cli


@pytest.mark.parametrize(("args", "expected"), [
    (["--min-window-requests", "0"], "--min-window-requests 0 is not valid"),
    (["--min-window-requests", "many"], "--min-window-requests 'many' is not a whole number"),
    (["--max-window-s", "4"], "--max-window-s 4 is below --window-s 8; give a cap >= --window-s"),
    (["--max-window-s", "0"], "--max-window-s 0.0 is not valid"),
])
def test_bad_values_are_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                           expected: str) -> None:
    proc = run_cli(["sweep", "--dry-run", *args], cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert expected in lines[0]


def test_defaults_hold_eight_requests_up_to_four_windows() -> None:
    load = config.resolve({}).load
    assert load.min_window_requests == 8 and load.max_window_s is None
    assert load.window_cap_s() == 4 * load.window_s
    assert config.resolve({"load": {"max_window_s": 10.0}}).load.window_cap_s() == 10.0


def test_the_estimate_counts_a_held_window_at_low_concurrency() -> None:
    def estimate(levels: list[int], **load: float) -> float:
        cfg = config.resolve({"concurrency": levels, "plan": "dense",
                              "load": {"warmup_s": 2.0, "window_s": 8.0, **load}})
        return point_estimate_s(cfg, make_engine(cfg)) * cfg.sim.time_scale

    one = 1.0 * config.resolve({}).sim.time_scale  # the estimate's extra wall second
    assert estimate([64]) == pytest.approx(2 + 8 + one)  # N finish inside window_s
    assert estimate([1]) == pytest.approx(2 + 32 + one)  # c = 1: the cap, 4 x window_s
    assert estimate([2]) == pytest.approx(2 + 16 + one)
    assert estimate([1, 64]) == pytest.approx(2 + (32 + 8) / 2 + one)  # per point, averaged
    assert estimate([1], max_window_s=8.0) == pytest.approx(2 + 8 + one)  # off
