from __future__ import annotations

from pathlib import Path

import pytest

from specbench import config as cfgmod
from specbench import configurations
from specbench.cli import text as cli_text
from specbench.config import ConfigError


@pytest.mark.parametrize(
    "text, expected",
    [("1,2,4", (1, 2, 4)), ("8, 1 ", (1, 8)), ("250", (250,))],
)
def test_parse_concurrency_ok(text: str, expected: tuple[int, ...]) -> None:
    assert cli_text.parse_concurrency(text) == expected


@pytest.mark.parametrize(
    "text, needle",
    [("0", "at least 1"), ("-4", "at least 1"), ("a,b", "not a whole number"), ("", "empty"),
     ("8,1,8", "level 8 is given twice")],
)
def test_parse_concurrency_bad(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        cli_text.parse_concurrency(text)


def test_threshold_parsing() -> None:
    assert cli_text.parse_threshold("auto") is None
    assert cli_text.parse_threshold("32") == 32
    for bad in ("0", "-1", "x", "1.5"):
        with pytest.raises(ConfigError, match="positive integer"):
            cli_text.parse_threshold(bad)


# Each bad file gives one line naming the file, the key path and the value, and a fix.
BAD_TOML = [
    ("string for a number", '[load]\nwindow_s = "8"\n', "load.window_s = '8'", "without quotes"),
    ("fractional count", "[load]\nrepeats = 2.5\n", "load.repeats = 2.5", "whole number"),
    ("float for a count", "[load]\nrepeats = 2.0\n", "load.repeats = 2.0", "whole number"),
    ("string for a list", 'modes = "baseline"\n', "modes = 'baseline'", "write a list"),
    ("unknown top key", "windows = 3\n", "unknown key windows", "known keys are"),
    ("unknown section key", "[load]\nwindow_secs = 3\n", "key load.window_secs", "window_s"),
    ("unknown section", "[gpu]\nn = 1\n", "unknown key gpu", "known keys are"),
    ("table for a value", "[concurrency]\nx = 1\n", "concurrency", "write a list"),
    ("out of range", "[load]\nwindow_s = 0\n", "load.window_s = 0", "> 0"),
    ("negative temperature", "[load]\ntemperature = -1\n", "load.temperature = -1", ">= 0"),
    ("bad literal", 'engine = "tgi"\n', "unknown engine 'tgi'", "choose from"),
    ("bad port", "[server]\nport = 70000\n", "server.port = 70000", "<= 65535"),
    ("number for a string", '[server]\nhost = 127\n', "server.host = 127", "quoted string"),
    ("bad mode name", 'modes = ["eagle3-kx"]\n', "unknown mode 'eagle3-kx'", "eagle3-k<K>"),
    ("zero level", "concurrency = [0, 4]\n", "at least 1", "positive integers"),
    ("syntax", "[load\n", "cannot be read", "fix the TOML syntax"),
]


@pytest.mark.parametrize("name, text, where, fix", BAD_TOML, ids=[c[0] for c in BAD_TOML])
def test_bad_toml_is_one_line(tmp_path: Path, name: str, text: str, where: str, fix: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        cfgmod.resolve({}, config_file=path)
    message = str(info.value)
    assert "\n" not in message
    assert where in message and fix in message, message
    if name not in ("bad literal", "bad mode name", "zero level"):
        assert str(path) in message


def test_toml_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('concurrency = [4, 1]\nmodes = ["baseline"]\n[load]\nwindow_s = 3\n')
    cfg = cfgmod.resolve({}, config_file=path)
    assert cfg.concurrency == (1, 4)
    assert cfg.modes == ("baseline",)
    assert cfg.load.window_s == 3.0
    assert cfgmod.from_dict(cfgmod.to_dict(cfg)) == cfg


def test_layers_preset_file_cli(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[load]\nwindow_s = 5\nrepeats = 2\n")
    cfg = cfgmod.resolve({"load": {"repeats": 3}}, preset="ci", config_file=path)
    assert cfg.concurrency == (8, 16, 32, 64, 128)  # preset
    assert cfg.load.window_s == 5.0  # file over preset
    assert cfg.load.repeats == 3  # command line over file
    with pytest.raises(ConfigError, match="unknown preset 'fast'; choose from quick, ci"):
        cfgmod.resolve({}, preset="fast")


def test_command_line_values_are_named_by_their_flag() -> None:
    with pytest.raises(ConfigError, match=r"^--repeats 0 is not valid .*; use a value >= 1$"):
        cfgmod.resolve({"load": {"repeats": 0}})
    with pytest.raises(ConfigError, match=r"^--sim-time-scale -2\.0 is not valid"):
        cfgmod.resolve({"sim": {"time_scale": -2.0}})


def test_resume_refuses_a_different_option() -> None:
    stored = cfgmod.to_dict(cfgmod.SweepConfig())
    same = cfgmod.resolve({"results_dir": "elsewhere"}, stored=stored)
    assert same.concurrency == cfgmod.DEFAULT_CONCURRENCY
    with pytest.raises(ConfigError, match=r"load\.window_s differs from the stored run"):
        cfgmod.resolve({"load": {"window_s": 1.0}}, stored=stored)


def test_api_key_never_in_dict() -> None:
    cfg = cfgmod.resolve({"load": {"api_key": "sk-secret"}})
    assert cfg.load.api_key == "sk-secret"
    assert "sk-secret" not in str(cfgmod.to_dict(cfg))
    assert "sk-secret" not in repr(cfg)


def test_validate_catches_draft_missing_and_limit() -> None:
    with pytest.raises(ConfigError, match="draft model"):
        cfgmod.resolve({"server": {"draft_model_path": None}})
    cfgmod.resolve({"server": {"draft_model_path": None}, "modes": ["baseline"]})
    with pytest.raises(ConfigError, match="above --max-running-requests"):
        cfgmod.resolve({"server": {"max_running_requests": 64}})


def test_differences_names_fields() -> None:
    a = cfgmod.SweepConfig()
    b = cfgmod.build({"concurrency": [1, 2], "load": {"window_s": 1.0}})
    assert cfgmod.differences(a, b) == ["concurrency", "load.window_s"]


def test_named_configurations() -> None:
    names = ["tuned", "dynamic", "zero-step", "eagle3-k5", "baseline", "eagle3", "eagle3-k2"]
    order = [c.name for c in configurations.ordered(names, 3)]
    assert order == [
        "baseline", "eagle3", "eagle3-k2", "eagle3-k5", "zero-step", "dynamic", "tuned"
    ]
    k2 = configurations.parse("eagle3-k2")
    assert (k2.kind, k2.num_steps(3), k2.needs_analysis) == ("eagle3", 2, False)
    fixed = configurations.parse("dynamic-t40")
    assert (fixed.kind, fixed.threshold, fixed.needs_analysis) == ("dynamic", 40, False)
    assert configurations.parse("dynamic").needs_analysis
    assert configurations.parse("tuned").needs_analysis
    zero = configurations.parse("zero-step")
    assert (zero.threshold, zero.needs_analysis) == (1, False)
    assert configurations.parse("sglang-default").adaptive == "default"
    for bad in ("eagle3-k0", "dynamic-t", "turbo", "EAGLE3"):
        with pytest.raises(ConfigError, match="unknown mode"):
            configurations.parse(bad)


def test_every_cli_flag_maps_to_a_schema_field() -> None:
    flags = cfgmod.cli_flags()
    assert flags["server.speculative_num_steps"] == "--spec-steps"
    assert flags["prompt_sets"] == "--prompts"
    assert len(set(flags.values())) == len(flags)


def test_schedules() -> None:
    Schedule = configurations.Schedule
    plain = Schedule.from_threshold(3, 32)
    assert plain.to_json() == {"1": {"candidate_steps": [3]}, "32": {"candidate_steps": [0]}}
    assert (plain.threshold, plain.launch_steps) == (32, 3)
    assert [plain.steps_at(b) for b in (1, 31, 32, 200)] == [3, 3, 0, 0]
    zero = Schedule.from_threshold(3, 1)
    assert zero.to_json() == {"0": {"candidate_steps": [3]}, "1": {"candidate_steps": [0]}}
    assert zero.threshold == 1 and zero.steps_at(1) == 0
    tuned = Schedule(((1, 5), (17, 3), (129, 0)))
    assert (tuned.threshold, tuned.launch_steps) == (None, 5)
    assert Schedule.from_json(tuned.to_json()) == tuned
    assert Schedule.from_json({"1": {"candidate_steps": [1, 3]}}) is None


def test_config_re_exports_the_schema() -> None:
    """The schema lives in config_schema/; callers keep `from specbench.config import X`."""
    from specbench import config_schema

    for name in cfgmod.__all__:
        assert hasattr(cfgmod, name), name
    schema = ["DEFAULT_CONCURRENCY", "DEFAULT_FIXED_THRESHOLD", "DEFAULT_PROMPT_SETS", "ENGINES",
              "PROTOCOLS", "SECTIONS", "SIM_DEFAULT_PROFILE", "Engine", "LoadConfig", "Protocol",
              "ServerConfig", "SimConfig", "SweepConfig", "option"]
    for name in schema:
        assert name in cfgmod.__all__ and getattr(cfgmod, name) is getattr(config_schema, name)
