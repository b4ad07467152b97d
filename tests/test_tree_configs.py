"""Tree draft configurations (`eagle3-k<K>-t<TOPK>-d<N>`): their names, the argv a real SGLang
server gets, the check of what it resolved, the refusal of a tree for an adaptive server, and
a short simulated sweep that measures one beside the chain."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from specbench import config, configurations, results
from specbench.config import ServerConfig, SweepConfig
from specbench.configurations import ServerConfiguration
from specbench.engines import argv as argv_mod
from specbench.engines import diagnose
from specbench.engines.base import Server, verify
from specbench.engines.process import ServerStartError, free_port
from specbench.engines.simulated import SimEngine
from specbench.errors import ConfigError
from specbench.report import style
from tests.engines.test_contract_sglang import (  # noqa: F401 - fixtures
    MAX_RUNNING,
    Probe,
    models,
    probe,
)
from tests.harness import assert_no_process_left, run_cli, sweep_cli

SERVER = ServerConfig(draft_model_path="draft")


def flags(argv: list[str]) -> dict[str, str]:
    return {a: b for a, b in itertools.pairwise(argv) if a.startswith("--")}


# ---------------------------------------------------------------------------------- names


def test_a_tree_name_is_k_topk_and_draft_tokens() -> None:
    tree = configurations.parse("eagle3-k3-t4-d8")
    assert (tree.kind, tree.steps, tree.topk, tree.draft_tokens, tree.tree) == (
        "eagle3", 3, 4, 8, True)  # fmt: skip
    assert tree.num_draft_tokens(5) == 8
    assert tree.draft_words(5) == "a tree of 3 steps (topk 4, 8 draft tokens)"
    chain = configurations.parse("eagle3")
    assert (chain.topk, chain.tree, chain.num_draft_tokens(3)) == (1, False, 4)
    assert chain.draft_words(3) == "a chain of 3 steps (topk 1, 4 draft tokens)"
    names = ["eagle3-k5-t4-d8", "eagle3-k3-t4-d8", "eagle3-k3", "eagle3", "baseline",
             "eagle3-k3-t2-d6", "dynamic"]  # fmt: skip
    assert [c.name for c in configurations.ordered(names, 3)] == [
        "baseline", "eagle3", "eagle3-k3", "eagle3-k3-t2-d6", "eagle3-k3-t4-d8",
        "eagle3-k5-t4-d8", "dynamic"]  # fmt: skip
    assert style.label("eagle3-k3-t4-d8") == "EAGLE-3 tree K=3 topk=4 N=8"
    assert style.short_label("eagle3-k3-t4-d8") == "E3 k3t4d8"
    assert style.style("eagle3-k3-t4-d8")["ls"] == "-."


@pytest.mark.parametrize(("name", "says"), [
    ("eagle3-k3-t1-d4", "use eagle3-k3"),
    ("eagle3-k3-t4-d1", "give d of 2 or more"),
    ("eagle3-k2-t2-d8", "give d of at most 7"),  # 2 + 4 drafts proposed
])  # fmt: skip
def test_a_tree_sglang_would_not_run_is_refused_in_one_line(name: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        configurations.parse(name)
    message = str(err.value)
    assert says in message and "\n" not in message and "; " in message
    configurations.parse("eagle3-k2-t2-d7")  # the largest that fits
    with pytest.raises(ConfigError, match=says):  # --modes refuses it the same way
        config.build({"modes": ["eagle3", name]})


# ----------------------------------------------------------------------------------- argv


def test_the_argv_carries_the_tree_and_chains_keep_theirs(tmp_path: Path) -> None:
    tree = flags(argv_mod.build_argv("eagle3-k3-t4-d8", SERVER, port=1, max_running_requests=8))
    assert (tree["--speculative-num-steps"], tree["--speculative-eagle-topk"],
            tree["--speculative-num-draft-tokens"]) == ("3", "4", "8")  # fmt: skip
    assert "--speculative-adaptive" not in tree
    chain = flags(argv_mod.build_argv("eagle3-k5", SERVER, port=1, max_running_requests=8))
    assert (chain["--speculative-eagle-topk"], chain["--speculative-num-draft-tokens"]) == (
        "1", "6")  # fmt: skip
    path = tmp_path / "a.json"
    dynamic = flags(argv_mod.build_argv("dynamic-t40", SERVER, port=1, max_running_requests=8,
                                        adaptive_config_path=path))  # fmt: skip
    assert (dynamic["--speculative-eagle-topk"], dynamic["--speculative-num-draft-tokens"]) == (
        "1", "4")  # fmt: skip


def test_verify_expects_the_tree_the_name_asks_for() -> None:
    cfg = SweepConfig(concurrency=(8,), server=SERVER, modes=("eagle3-k3-t4-d8",))
    config = configurations.parse("eagle3-k3-t4-d8")
    info = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
            "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
            "speculative_adaptive": False, "max_running_requests": 8}  # fmt: skip
    verify(Server(config, "http://x", argv=[], env={}, time_scale=1.0, info=info), cfg,
           launched=True)  # fmt: skip
    chain_info = {**info, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    with pytest.raises(ServerStartError, match="--speculative-eagle-topk 4"):
        verify(Server(config, "http://x", argv=[], env={}, time_scale=1.0, info=chain_info), cfg,
               launched=True)  # fmt: skip


# ---------------------------------------------------------------- a tree for an adaptive server


def sweep_config(*modes: str, server_args: tuple[str, ...]) -> SweepConfig:
    server = ServerConfig(draft_model_path="draft", extra_args=server_args)
    return SweepConfig(modes=modes, server=server, concurrency=(1, 8))


def test_a_tree_in_server_args_is_refused_where_it_would_reach_an_adaptive_server() -> None:
    topk = ("--speculative-eagle-topk", "4")
    with pytest.raises(ConfigError) as err:
        SimEngine(sweep_config("eagle3", "zero-step", "dynamic", server_args=topk))
    message = str(err.value)
    assert message.startswith("--server-arg --speculative-eagle-topk 4: SGLang's "
                              "--speculative-adaptive drafts a chain only (topk 1)")
    assert "zero-step, dynamic would not switch" in message and "eagle3-k3-t4-d8" in message
    assert "\n" not in message
    # Static servers only: the mode names set the shape, so an override is refused too ...
    with pytest.raises(ConfigError, match="override the draft shape that the name of eagle3"):
        SimEngine(sweep_config("eagle3", server_args=topk))
    with pytest.raises(ConfigError, match="eagle3-k3-t4-d8 sets"):
        SimEngine(sweep_config("eagle3-k3-t4-d8", server_args=(
            "--speculative-num-draft-tokens=16",)))  # fmt: skip
    # ... but what only repeats them is not, and a chain's draft tokens SGLang forces anyway.
    SimEngine(sweep_config("eagle3", "dynamic", server_args=("--speculative-eagle-topk", "1")))
    SimEngine(sweep_config("eagle3", "dynamic", server_args=(
        "--speculative-num-draft-tokens", "8")))  # fmt: skip
    SimEngine(sweep_config("baseline", server_args=topk))


def test_the_sweep_refuses_it_in_one_line_before_anything_starts(tmp_path: Path) -> None:
    port = free_port()
    proc = sweep_cli(tmp_path, port, "--modes", "eagle3,zero-step,dynamic",
                     "--server-arg=--speculative-eagle-topk 4")  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--speculative-adaptive drafts a chain only" in lines[0], lines
    assert not (tmp_path / "res").exists()  # no run directory, no server
    assert_no_process_left(port)
    dry = run_cli(["sweep", "--modes", "eagle3,dynamic", "--dry-run",
                   "--server-arg=--speculative-eagle-topk 4"], tmp_path)  # fmt: skip
    assert dry.returncode == 2 and "drafts a chain only" in dry.stderr
    assert "sweep plan" not in dry.stdout


# -------------------------------------------------------------------- a short simulated sweep


@pytest.mark.slow
def test_a_tree_is_measured_beside_the_chain_on_the_simulator(tmp_path: Path) -> None:
    port = free_port()
    proc = sweep_cli(tmp_path, port, "--modes", "eagle3,eagle3-k3-t4-d8", "--prompts", "coding",
                     "--concurrency", "1,16")  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run_dir = tmp_path / "res" / "run"
    run = results.load_run(run_dir)
    servers = run.manifest.servers
    tree_info = servers["eagle3-k3-t4-d8"].server_info
    assert (tree_info["speculative_eagle_topk"], tree_info["speculative_num_draft_tokens"]) == (
        4, 8)  # fmt: skip
    assert "--speculative-num-draft-tokens" in servers["eagle3-k3-t4-d8"].argv
    accept = run.summary.set_index(["mode", "concurrency"])["accept_length"]
    for c in (1, 16):  # the tree's acceptance is recorded, higher than the chain's
        assert accept[("eagle3-k3-t4-d8", c)] > accept[("eagle3", c)] + 0.3
        assert accept[("eagle3-k3-t4-d8", c)] <= 4.0
    report = (run_dir / "report.md").read_text()
    assert "Drafts measured as static trees: eagle3-k3-t4-d8, a tree of 3 steps (topk 4, 8 " \
           "draft tokens)." in " ".join(report.split())
    assert "no threshold holds for a tree" in report
    assert_no_process_left(port)


# ------------------------------------------------------------- against SGLang 0.5.23's own code


@pytest.mark.contract
@pytest.mark.slow
def test_sglang_resolves_the_tree_argv_and_verify_accepts_it(
    probe: Probe, models: ServerConfig  # noqa: F811 - fixtures
) -> None:
    config = configurations.parse("eagle3-k5-t4-d8")  # SGLang's own choice for a Llama target
    argv = argv_mod.build_argv(config, models, port=free_port(), max_running_requests=MAX_RUNNING)
    answer = probe.run({"op": "resolve", "argv": [*argv, "--device", "cpu"]})
    assert answer["ok"], answer.get("error") or answer["stderr"][-800:]
    info = answer["server_info"]
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"],
            info["speculative_num_draft_tokens"], info["speculative_adaptive"]) == (
        5, 4, 8, False)  # fmt: skip
    cfg = SweepConfig(concurrency=(MAX_RUNNING,), server=models, modes=(config.name,))
    verify(Server(config, "http://127.0.0.1:1", argv=argv, env={}, time_scale=1.0, info=info),
           cfg, launched=True)  # fmt: skip


@pytest.mark.contract
@pytest.mark.slow
def test_sglang_drops_adaptive_for_a_tree_as_the_refusal_says(
    probe: Probe, models: ServerConfig, tmp_path: Path  # noqa: F811 - fixtures
) -> None:
    tree = argv_mod.build_argv("eagle3-k3-t4-d8", models, port=free_port(),
                               max_running_requests=MAX_RUNNING)  # fmt: skip
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"1": {"candidate_steps": [3]}, "32": {"candidate_steps": [0]}}))
    argv = [*tree, "--speculative-adaptive", "--speculative-adaptive-config", str(path),
            "--device", "cpu"]  # fmt: skip
    answer = probe.run({"op": "resolve", "argv": argv})
    assert answer["ok"], answer.get("error")
    assert answer["server_info"]["speculative_adaptive"] is False
    assert diagnose.adaptive_fallback_reason(answer["stderr"]) == (
        "speculative_eagle_topk=4 (only topk=1 is supported)")


def test_a_chain_configuration_is_unchanged() -> None:
    assert configurations.parse("eagle3-k2") == ServerConfiguration("eagle3-k2", "eagle3", steps=2)
