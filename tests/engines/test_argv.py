from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.config import ServerConfig
from specbench.configurations import Schedule
from specbench.engines.argv import adaptive_config, build_argv, server_env, write_adaptive_config


def _flags(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            out[arg] = "" if nxt.startswith("--") else nxt
    return out


def test_baseline_has_no_speculative_flags() -> None:
    argv = build_argv(
        "baseline", ServerConfig(model_path="m"), port=31000, max_running_requests=250
    )
    flags = _flags(argv)
    assert flags["--max-running-requests"] == "250"
    assert flags["--port"] == "31000" and flags["--host"] == "127.0.0.1"
    assert "--enable-metrics" in argv
    assert not any(a.startswith("--speculative") for a in argv)


def test_eagle3_and_dynamic_share_everything_but_adaptive(tmp_path: Path) -> None:
    server = ServerConfig(model_path="m", draft_model_path="d", speculative_num_steps=4)
    eagle = build_argv("eagle3", server, port=1, max_running_requests=250)
    dyn = build_argv(
        "dynamic",
        server,
        port=1,
        max_running_requests=250,
        adaptive_config_path=tmp_path / "a.json",
    )
    f = _flags(eagle)
    assert f["--speculative-algorithm"] == "EAGLE3"
    assert f["--speculative-num-steps"] == "4"
    assert f["--speculative-eagle-topk"] == "1"
    assert f["--speculative-num-draft-tokens"] == "5"
    assert f["--max-running-requests"] == "250"
    assert dyn[: len(eagle)] == eagle
    assert dyn[len(eagle) :] == [
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        str(tmp_path / "a.json"),
    ]


def test_never_the_ambiguous_graph_flag() -> None:
    server = ServerConfig(model_path="m", cuda_graph_bs_decode=(1, 2, 4))
    for mode in ("baseline", "eagle3"):
        argv = build_argv(mode, server, port=1, max_running_requests=8)
        assert "--cuda-graph-max-bs" not in argv
        assert argv[
            argv.index("--cuda-graph-bs-decode") + 1 : argv.index("--cuda-graph-bs-decode") + 4
        ] == ["1", "2", "4"]


def test_adaptive_json_is_single_candidate_slots(tmp_path: Path) -> None:
    assert adaptive_config(3, 32) == {"1": {"candidate_steps": [3]}, "32": {"candidate_steps": [0]}}
    assert adaptive_config(3, 1) == {"0": {"candidate_steps": [3]}, "1": {"candidate_steps": [0]}}
    path = write_adaptive_config(tmp_path / "x" / "cfg.json", Schedule.from_threshold(5, 17))
    assert json.loads(path.read_text()) == {
        "1": {"candidate_steps": [5]},
        "17": {"candidate_steps": [0]},
    }


def test_skip_zero_step_env_only_in_dynamic() -> None:
    server = ServerConfig(skip_zero_step_draft_extend=True)
    assert server_env("dynamic", server) == {"SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND": "1"}
    assert server_env("eagle3", server) == {}


def test_modes_need_what_they_need() -> None:
    with pytest.raises(ValueError):
        build_argv("eagle3", ServerConfig(draft_model_path=None), port=1, max_running_requests=1)
    with pytest.raises(ValueError):
        build_argv("dynamic", ServerConfig(), port=1, max_running_requests=1)


H100_MIB = 81_559  # nvidia-smi's memory.total of an H100 80GB HBM3


@pytest.mark.parametrize(
    "version, fraction",
    # 0.5.17's default builds graphs for 0, 1, 3 and 7; 0.5.23's for 0, 1, 3, 5 and 7.
    [("0.5.17", "0.743"), ("0.5.23", "0.699"), (None, "0.699")],
)
def test_sglang_default_leaves_room_for_its_candidates_graphs(
    version: str | None, fraction: str
) -> None:
    server = ServerConfig(model_path="m", draft_model_path="d")
    argv = build_argv(
        "sglang-default",
        server,
        port=1,
        max_running_requests=128,
        gpu_memory_mib=H100_MIB,
        version=version,
    )
    assert _flags(argv)["--mem-fraction-static"] == fraction
    # Twice the graph rows, twice the room per extra candidate.
    wide = build_argv(
        "sglang-default", server, port=1, max_running_requests=256,
        gpu_memory_mib=H100_MIB, version="0.5.17",
    )
    assert float(_flags(wide)["--mem-fraction-static"]) < float(fraction)


def test_the_fraction_is_left_to_sglang_where_two_candidates_fit_or_the_user_chose(
    tmp_path: Path,
) -> None:
    server = ServerConfig(model_path="m", draft_model_path="d")
    two = Schedule.from_threshold(3, 32)  # K and 0: the dynamic server, which started as is
    four = Schedule(((1, 5), (8, 3), (32, 1), (64, 0)))
    path = tmp_path / "a.json"
    cases = [
        ("eagle3", server, None),
        ("dynamic", server, two),
        ("sglang-default", ServerConfig(model_path="m", draft_model_path="d",
                                        extra_args=("--mem-fraction-static", "0.8")), None),
    ]
    for mode, srv, schedule in cases:
        argv = build_argv(mode, srv, port=1, max_running_requests=128,
                          adaptive_config_path=path, schedule=schedule,
                          gpu_memory_mib=H100_MIB, version="0.5.17")
        assert argv.count("--mem-fraction-static") == (1 if srv.extra_args else 0), mode
    tuned = build_argv("tuned", server, port=1, max_running_requests=128,
                       adaptive_config_path=path, schedule=four, gpu_memory_mib=H100_MIB)
    assert _flags(tuned)["--mem-fraction-static"] == "0.743"
    # No GPU seen (the simulator, a machine without nvidia-smi): SGLang's own choice.
    unseen = build_argv("sglang-default", server, port=1, max_running_requests=128)
    assert "--mem-fraction-static" not in unseen
    # A small GPU: a pool under a third of it is not offered; SGLang's diagnosis says what to do.
    small = build_argv("sglang-default", server, port=1, max_running_requests=128,
                       gpu_memory_mib=24_000)
    assert "--mem-fraction-static" not in small
