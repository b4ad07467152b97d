"""`--help` says each option's type and default, read from the schema, as a user sees it.

The real command runs in a subprocess on a wide terminal, so that each option's row is read
whole; the rows are matched by flag, so the test does not depend on panel order or wrapping.
"""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from specbench import configurations, presets
from specbench.cli import main as cli_main
from specbench.cli import options as cli_options
from specbench.cli.shard import _sweep_parser
from specbench.config_schema import SweepConfig
from specbench.regress.thresholds import Thresholds
from tests.harness import cli_help

ROW_START = re.compile(r"^│\s*(?:\*\s+)?(--[a-z0-9-]+)\s")


def _help_rows(*command: str) -> dict[str, str]:
    """Flag -> its whole row (type, help and tags, wrapped lines joined) in `--help`."""
    text = cli_help(*command)
    rows: dict[str, list[str]] = {}
    flag = None
    for line in text.splitlines():
        if not line.startswith("│"):
            flag = None  # a panel's border
            continue
        match = ROW_START.match(line)
        if match:
            flag = match.group(1)
            rows[flag] = []
        if flag is not None:
            rows[flag].append(line.strip("│ ").removeprefix(flag))
    return {flag: " ".join(" ".join(parts).split()) for flag, parts in rows.items()}


@pytest.fixture(scope="module")
def sweep_help() -> dict[str, str]:
    return _help_rows("sweep")


def test_numbers_show_their_type_and_default(sweep_help: dict[str, str]) -> None:
    expected = {
        "--tp-size": ("<int>", "[default: 1]"),
        "--port": ("<int>", "[default: 30000]"),
        "--spec-steps": ("<int>", "[default: 3]"),
        "--repeats": ("<int>", "[default: 1]"),
        "--window-s": ("<float>", "[default: 8.0]"),
        "--warmup-s": ("<float>", "[default: 2.0]"),
        "--sim-time-scale": ("<float>", "[default: 4.0]"),
        "--concurrency": ("<list[int]>", "[default: 1, 2, 4, 8, 16, 32, 64, 128, 250]"),
        "--results-dir": ("<path>", "[default: results]"),
        "--threshold": ("<int|auto>", "[default: auto]"),
    }
    for flag, (kind, default) in expected.items():
        row = sweep_help[flag]
        assert row.startswith(kind + " "), f"{flag}: {row}"
        assert default in row, f"{flag}: {row}"
    assert "<str>" not in sweep_help["--budget-gpu-min"]


def test_every_option_with_a_default_shows_it(sweep_help: dict[str, str]) -> None:
    shown = [opt for opt in cli_options.SWEEP_OPTIONS if opt.default is not None]
    assert len(shown) >= 25
    for opt in shown:
        if not opt.hidden:
            assert f"[default: {opt.default}]" in sweep_help[opt.flag], opt.flag
    # What a None or empty default means is said where it means something; secrets show none.
    assert "[default:" not in sweep_help["--api-key"]
    assert "[default:" not in sweep_help["--server-arg"]
    assert "[default: largest concurrency]" in sweep_help["--max-running-requests"]


def test_modes_help_names_every_mode(sweep_help: dict[str, str]) -> None:
    row = sweep_help["--modes"]
    for name in [*configurations._NAMED, "eagle3-k<K>", "dynamic-t<T>"]:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", row), name
    assert f"[default: {', '.join(SweepConfig().modes)}]" in row


def test_tune_shows_its_own_defaults() -> None:
    rows = _help_rows("tune")
    assert f"[default: {', '.join(configurations.TUNE_NAMES)}]" in rows["--modes"]
    assert f"[default: {presets.TUNE_LAYER['load']['window_s']}]" in rows["--window-s"]
    assert "[default: 3]" in rows["--spec-steps"]  # not in tune's layer: the schema's


def test_regress_limits_show_the_gate_defaults() -> None:
    # main.py repeats them so that --help does not import the regress package.
    th = Thresholds()
    repeated = cli_main.REGRESS_DEFAULT_PCT
    assert repeated == {f.name: getattr(th, f.name) for f in fields(th) if f.name in repeated}
    assert set(repeated) == {"warn_pct", "fail_pct", "accept_fail_pct"}
    rows = _help_rows("regress")
    assert rows["--warn-pct"] == f"<float> throughput drop that warns (%) [default: {th.warn_pct}]"
    assert f"[default: {th.fail_pct}]" in rows["--fail-pct"]
    assert f"[default: {th.accept_fail_pct}]" in rows["--accept-fail-pct"]


def test_shown_defaults_are_not_given_values() -> None:
    """No option on the command line is no layer: the preset and config file still apply."""
    layer = cli_options.cli_layer(_sweep_parser().make_context("sweep", []).params)
    leaves = [v for v in layer.values() if not isinstance(v, dict)]
    leaves += [v for section in layer.values() if isinstance(section, dict)
               for v in section.values()]
    assert all(v == [] for v in leaves), layer
    given = ["--tp-size", "2", "--window-s", "3"]
    layer = cli_options.cli_layer(_sweep_parser().make_context("sweep", given).params)
    assert layer["server"]["tp_size"] == 2 and layer["load"] == {"window_s": 3.0}
