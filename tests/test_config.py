from __future__ import annotations

from pathlib import Path

import pytest

from specbench import config as cfgmod
from specbench.config import ConfigError


@pytest.mark.parametrize(
    "text, expected",
    [("1,2,4", (1, 2, 4)), ("8, 1 ,8", (1, 8)), ("250", (250,))],
)
def test_parse_concurrency_ok(text: str, expected: tuple[int, ...]) -> None:
    assert cfgmod.parse_concurrency(text) == expected


@pytest.mark.parametrize(
    "text, needle",
    [("0", "at least 1"), ("-4", "at least 1"), ("a,b", "not a whole number"), ("", "empty")],
)
def test_parse_concurrency_bad(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        cfgmod.parse_concurrency(text)


def test_threshold_parsing() -> None:
    assert cfgmod.parse_threshold("auto") is None
    assert cfgmod.parse_threshold("32") == 32
    for bad in ("0", "-1", "x", "1.5"):
        with pytest.raises(ConfigError, match="positive integer"):
            cfgmod.parse_threshold(bad)


def test_toml_unknown_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("concurrency = [1, 2]\n[load]\nwindow_secs = 3\n")
    with pytest.raises(ConfigError, match=r"unknown key load\.window_secs"):
        cfgmod.load_toml(path)


def test_toml_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('concurrency = [1, 4]\nmodes = ["baseline"]\n[load]\nwindow_s = 3.5\n')
    cfg = cfgmod.build(cfgmod.load_toml(path))
    assert cfg.concurrency == (1, 4)
    assert cfg.modes == ("baseline",)
    assert cfg.load.window_s == 3.5
    assert cfgmod.from_dict(cfgmod.to_dict(cfg)) == cfg


def test_api_key_never_in_dict() -> None:
    cfg = cfgmod.build({"load": {"api_key": "sk-secret"}})
    assert "sk-secret" not in str(cfgmod.to_dict(cfg))
    assert "sk-secret" not in repr(cfg)


def test_validate_catches_draft_missing_and_limit() -> None:
    with pytest.raises(ConfigError, match="draft model"):
        cfgmod.validate(cfgmod.build({"server": {"draft_model_path": None}}))
    cfgmod.validate(cfgmod.build({"server": {"draft_model_path": None}, "modes": ("baseline",)}))
    with pytest.raises(ConfigError, match="above --max-running-requests"):
        cfgmod.validate(cfgmod.build({"server": {"max_running_requests": 64}}))


def test_differences_names_fields() -> None:
    a = cfgmod.SweepConfig()
    b = cfgmod.build({"concurrency": (1, 2), "load": {"window_s": 1.0}})
    assert cfgmod.differences(a, b) == ["concurrency", "load.window_s"]
