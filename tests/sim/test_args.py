"""Flag parsing and SGLang 0.5.23's resolution rules, as the simulator applies them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.config import ServerConfig
from specbench.engines.argv import build_argv
from specbench.sim.adaptive import load_adaptive_config
from specbench.sim.args import StartupError, build_parser, resolve
from specbench.sim.costmodel import load_profile

EAGLE = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"]


def settings(*flags: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    ns = build_parser().parse_args(["--model-path", "m", *flags])
    return resolve(ns, load_profile(), env=env or {})


def run_sim(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specbench.sim", *flags], capture_output=True, text=True, timeout=60
    )


def write_cfg(tmp_path: Path, cfg: object) -> str:
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_speculative_server_is_capped_at_48_when_not_given() -> None:
    s = settings(
        *EAGLE,
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    )
    assert s.max_running_requests == 48
    assert any("reset to 48" in msg for _, msg in s.startup_log)
    assert (
        settings(
            *EAGLE, "--speculative-num-steps", "3", "--max-running-requests", "250"
        ).max_running_requests
        == 250
    )
    assert settings("--max-running-requests", "250").max_running_requests == 250
    assert settings().max_running_requests == load_profile().memory.default_max_running_requests


def test_ambiguous_cuda_graph_max_bs_exits_2() -> None:
    proc = run_sim("--model-path", "m", "--cuda-graph-max-bs", "8")
    assert proc.returncode == 2
    assert "ambiguous option: --cuda-graph-max-bs could match" in proc.stderr
    assert (
        "--cuda-graph-max-bs-decode" in proc.stderr and "--cuda-graph-max-bs-prefill" in proc.stderr
    )


def test_unknown_flag_and_missing_model_exit_2() -> None:
    proc = run_sim("--model-path", "m", "--no-such-flag")
    assert proc.returncode == 2 and "unrecognized arguments: --no-such-flag" in proc.stderr
    proc = run_sim("--port", "1234")
    assert proc.returncode == 2 and "--model-path" in proc.stderr


def test_prefix_abbreviation_binds_like_argparse() -> None:
    s = settings("--max-running", "77", "--cuda-graph-max-bs-d", "16")
    assert s.max_running_requests == 77 and s.cuda_graph_max_bs_decode == 16


def test_algorithm_is_upper_cased_and_nextn_is_eagle() -> None:
    assert (
        settings(
            "--speculative-algorithm",
            "eagle3",
            "--speculative-draft-model-path",
            "d",
            "--speculative-num-steps",
            "2",
        ).speculative_algorithm
        == "EAGLE3"
    )
    assert (
        settings(
            "--speculative-algorithm",
            "nextn",
            "--speculative-draft-model-path",
            "d",
            "--speculative-num-steps",
            "2",
        ).speculative_algorithm
        == "EAGLE"
    )
    with pytest.raises(StartupError) as err:
        settings("--speculative-algorithm", "NGRAM")
    assert err.value.exit_code == 2 and "not modelled" in err.value.lines[-1]


def test_topk_one_forces_draft_tokens_to_steps_plus_one() -> None:
    s = settings(
        *EAGLE,
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "8",
    )
    assert (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens) == (
        3,
        1,
        4,
    )
    assert any(level == "warning" and "adjusted" in msg for level, msg in s.startup_log)


def test_steps_without_topk_means_a_chain() -> None:
    s = settings(*EAGLE, "--speculative-num-steps", "2")
    assert (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens) == (
        2,
        1,
        3,
    )


def test_no_params_auto_chooses_5_4_8_for_llama() -> None:
    s = settings(*EAGLE)
    assert (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens) == (
        5,
        4,
        8,
    )


def test_topk_without_steps_is_sglangs_bare_assertion_error() -> None:
    with pytest.raises(StartupError) as err:
        settings(*EAGLE, "--speculative-eagle-topk", "1")
    assert err.value.exit_code == 1 and err.value.lines[-1] == "AssertionError"
    proc = run_sim("--model-path", "m", *EAGLE, "--speculative-num-draft-tokens", "4")
    assert proc.returncode == 1 and proc.stderr.strip().endswith("AssertionError")


def test_adaptive_defaults_steps_to_middle_of_union(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, {"1": {"candidate_steps": [3]}, "32": {"candidate_steps": [0]}})
    s = settings(*EAGLE, "--speculative-adaptive", "--speculative-adaptive-config", cfg)
    assert s.speculative_adaptive
    assert (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens) == (
        3,
        1,
        4,
    )
    assert [slot.key for slot in s.adaptive_slots] == [1, 32]
    wide = write_cfg(
        tmp_path, {"1": {"candidate_steps": [1, 3, 5, 7]}, "64": {"candidate_steps": [0]}}
    )
    assert (
        settings(
            *EAGLE, "--speculative-adaptive", "--speculative-adaptive-config", wide
        ).speculative_num_steps
        == 3
    )
    # The built-in config of a bare --speculative-adaptive: union {0,1,3,5,7} -> 3.
    assert settings(*EAGLE, "--speculative-adaptive").speculative_num_steps == 3


def test_adaptive_explicit_steps_must_be_a_candidate(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, {"1": {"candidate_steps": [3]}, "32": {"candidate_steps": [0]}})
    with pytest.raises(StartupError) as err:
        settings(
            *EAGLE,
            "--speculative-adaptive",
            "--speculative-adaptive-config",
            cfg,
            "--speculative-num-steps",
            "2",
        )
    assert err.value.exit_code == 1
    assert (
        "--speculative-num-steps=2 is not in the adaptive config candidate_steps [0, 3]"
        in err.value.lines[-1]
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"1": {"candidate_steps": []}},
        {"1": {"candidate_steps": [-1]}},
        {"1": {"candidate_steps": [1.5]}},
        {"1": {"other": 1}},
        {"ema_alpha": 0.3},
    ],
)
def test_adaptive_config_validation(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError):
        load_adaptive_config(write_cfg(tmp_path, bad))


def test_bad_adaptive_config_exits_1_with_value_error(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, {"1": {"candidate_steps": []}})
    proc = run_sim(
        "--model-path", "m", *EAGLE, "--speculative-adaptive", "--speculative-adaptive-config", cfg
    )
    assert proc.returncode == 1
    assert (
        "ValueError: Adaptive config slot '1': candidate_steps must be a non-empty list"
        in proc.stderr
    )


def test_adaptive_global_defaults_merge_into_slots(tmp_path: Path) -> None:
    cfg = write_cfg(
        tmp_path,
        {
            "ema_alpha": 0.5,
            "1": {"candidate_steps": [0, 3]},
            "8": {"candidate_steps": [0], "ema_alpha": 0.1},
        },
    )
    slots = load_adaptive_config(cfg)
    assert [(s.key, s.candidate_steps, s.ema_alpha) for s in slots] == [
        (1, (0, 3), 0.5),
        (8, (0,), 0.1),
    ]


def test_adaptive_is_refused_when_topk_is_not_one(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, {"1": {"candidate_steps": [3]}, "32": {"candidate_steps": [0]}})
    s = settings(
        *EAGLE,
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        cfg,
        "--speculative-num-steps",
        "5",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
    )
    assert not s.speculative_adaptive
    assert (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens) == (
        5,
        4,
        8,
    )
    assert any(
        level == "warning" and "Falling back to static speculative params" in msg
        for level, msg in s.startup_log
    )
    # Without steps the fallback then hits SGLang's AssertionError.
    with pytest.raises(StartupError) as err:
        settings(
            *EAGLE,
            "--speculative-adaptive",
            "--speculative-adaptive-config",
            cfg,
            "--speculative-eagle-topk",
            "4",
        )
    assert err.value.lines[-1] == "AssertionError"


def test_skip_zero_step_env_and_graph_list() -> None:
    s = settings(
        *EAGLE,
        "--speculative-num-steps",
        "3",
        "--cuda-graph-bs-decode",
        "8",
        "1",
        "4",
        env={"SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND": "1"},
    )
    assert s.skip_zero_step_draft_extend
    assert s.cuda_graph_bs_decode == (1, 4, 8)
    assert not settings(*EAGLE, "--speculative-num-steps", "3").skip_zero_step_draft_extend


def test_sim_flags_validate_their_values() -> None:
    proc = run_sim("--model-path", "m", "--sim-time-scale", "0")
    assert proc.returncode == 2 and "--sim-time-scale" in proc.stderr
    proc = run_sim("--model-path", "m", "--sim-error-rate", "1.5")
    assert proc.returncode == 2 and "--sim-error-rate" in proc.stderr
    proc = run_sim("--model-path", "m", "--sim-profile", "nope")
    assert proc.returncode == 2 and "unknown sim profile 'nope'" in proc.stderr


def test_token_counts_and_serving_flags_read_like_sglang() -> None:
    s = settings("--context-length", "32k", "--max-total-tokens", "1Mi", "--allow-auto-truncate",
                 "--api-key", "K", "--admin-api-key", "A")  # fmt: skip
    assert (s.context_length, s.context_length_arg, s.max_total_tokens) == (32000, 32000, 2**20)
    assert s.allow_auto_truncate and (s.api_key, s.admin_api_key) == ("K", "A")
    assert "K" not in repr(s) and "A'" not in repr(s)
    plain = settings()
    assert plain.context_length_arg is None and plain.context_length == 131072
    assert plain.api_key is None and not plain.allow_auto_truncate
    bad = run_sim("--model-path", "m", "--context-length", "1.5Ki")
    assert bad.returncode == 2 and "Decimals are not allowed with IEC suffixes" in bad.stderr


def test_sglang_0_5_17_does_not_start_bare_adaptive_under_cuda_graphs() -> None:
    # Seen on an H100 (results/gpu/h100-...-flashinfer-tune, servers/sglang-default.log.xz):
    # launched at K = 3, the graphs of the built-in candidate 7 need twice the logits rows.
    bare = [*EAGLE, "--speculative-adaptive", "--max-running-requests", "128"]
    with pytest.raises(StartupError) as err:
        settings(*bare, "--sim-sglang-version", "0.5.17")
    assert err.value.exit_code == 1
    assert err.value.lines[-1] == (
        "AssertionError: shared logits buffer holds 512 rows but caller needs 1024 "
        f"(vocab_size={load_profile().vocab_size})"
    )
    assert settings(*bare, "--sim-sglang-version", "0.5.17", "--disable-cuda-graph")
    assert settings(*bare).speculative_num_steps == 3  # 0.5.23 counts the candidates


def test_sglang_default_launches_where_0_5_17_starts() -> None:
    server = ServerConfig(model_path="m", draft_model_path="d")
    argv = build_argv("sglang-default", server, port=30000, max_running_requests=128)
    for version in ("0.5.17", "0.5.23"):
        ns = build_parser().parse_args([*argv, "--sim-sglang-version", version])
        s = resolve(ns, load_profile(), env={})
        assert s.speculative_num_steps == 7 and s.speculative_num_draft_tokens == 8
        assert s.speculative_adaptive and s.speculative_adaptive_config is None
        assert s.adaptive_slots[0].candidate_steps == ((1, 3, 7) if version == "0.5.17"
                                                       else (1, 3, 5, 7))
