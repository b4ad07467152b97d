"""`--plan auto` on a launched engine: the launch time chooses dense or adaptive (issue 36).

On an H200 a FlashInfer launch took 99-269 s: the adaptive plan's ~7 launches cost more than the
points it saves once a launch passes the break-even (docs/statistics.md). The choice is made from
`--launch-s` or from the first server's launch, and said.
"""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from specbench import config, results
from specbench.engines import make_engine
from specbench.run.execute import run_sweep
from specbench.run.plan import ADAPTIVE_LAUNCHES, break_even_launch_s, plan_for_launch

REAL = {"engine": "sglang", "server": {"model_path": "/m/target", "draft_model_path": "/m/draft"}}


def test_real_sglang_leaves_the_plan_to_the_launch_time() -> None:
    assert config.resolve(REAL).plan == "auto"
    assert config.resolve({**REAL, "concurrency": [1, 16, 64]}).plan == "dense"  # a listed grid
    assert config.resolve({"engine": "sim"}).plan == "adaptive"


def test_the_break_even_weighs_saved_points_against_extra_launches() -> None:
    cfg = config.resolve(REAL)
    engine = make_engine(cfg)
    limit = break_even_launch_s(cfg, engine)
    # Four servers x two sets x the default grid, against ~log2 levels per decision.
    assert 60 < limit < 600, limit
    fast, why_fast = plan_for_launch(cfg, engine, limit * 0.5, measured=True)
    slow, why_slow = plan_for_launch(cfg, engine, limit * 2.0, measured=False)
    assert (fast, slow) == ("adaptive", "dense")
    assert "the first server launched in" in why_fast and f"{limit:.0f}-s" in why_fast
    assert "--launch-s" in why_slow and f"~{ADAPTIVE_LAUNCHES} launches" in why_slow
    # More servers than the adaptive plan launches: the dense grid never loses on launches.
    tuned = cfg.model_copy(update={"modes": ("baseline", "eagle3", "eagle3-k1", "eagle3-k2",
                                             "zero-step", "dynamic", "dynamic-t8", "eagle3-k5")})
    assert break_even_launch_s(tuned, engine) == float("inf")


def test_a_sweep_left_to_auto_decides_after_its_first_launch(tmp_path: Path, port: int) -> None:
    # The simulated server stands in for a launched one; the sweep launches its first server,
    # times it, records the plan it chose and measures on that server without a second launch.
    cli = {"engine": "sim", "modes": ["baseline", "eagle3"], "prompt_sets": ["coding"],
           "concurrency": [1, 4, 16], "results_dir": str(tmp_path), "run_name": "auto",
           "server": {"port": port}, "load": {"warmup_s": 0.5, "window_s": 2.0},
           "sim": {"time_scale": 8.0}}
    cfg = config.resolve(cli).model_copy(update={"plan": "auto"})
    out = io.StringIO()
    run_dir = run_sweep(cfg, console=Console(file=out, width=200), command=["test"])
    text = out.getvalue()
    manifest = results.read_manifest(run_dir)
    assert manifest.config.plan in ("adaptive", "dense")
    assert f"{manifest.config.plan} plan: the first server launched in" in text, text[-2000:]
    # The server launched to time it measured first: no launch beyond the plan's own (the
    # adaptive plan launches two servers, then one per round; dense, one per server).
    launches = sum(len(server.launch_s) for server in manifest.servers.values())
    rounds = text.count("adaptive plan: next levels")
    assert launches == (2 + rounds if manifest.config.plan == "adaptive" else 2), text[-3000:]
    assert manifest.status == "complete"
