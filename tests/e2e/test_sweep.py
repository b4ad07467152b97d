"""The whole `specbench sweep` against the simulated server: results, failures, signals, resume."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pandas as pd
import pytest

from specbench import results
from specbench.results.manifest import gpu_time
from tests.harness import (
    assert_no_process_left,
    cli_env,
    point_keys,
    run_cli,
    spawn_sweep,
    sweep_cli,
)
from tests.test_results import unfilled

pytestmark = pytest.mark.slow


def test_the_default_sweep_end_to_end(tmp_path: Path, port: int) -> None:
    proc = sweep_cli(tmp_path, port, "--concurrency", "1,8,64", plots=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "res" / "run"
    run = results.load_run(run_dir)
    assert run.manifest.status == "complete"
    assert set(run.summary["mode"]) == {"baseline", "eagle3", "zero-step", "dynamic"}
    assert set(run.summary["prompt_set"]) == {"coding", "agentic"}
    assert unfilled(run.summary) == []  # every public column measured, none padded
    base = run.summary[run.summary["mode"] == "baseline"]
    assert (base["output_tok_s"] > 0).all()
    assert base["accept_length"].isna().all()
    eagle = run.summary[run.summary["mode"] == "eagle3"]
    assert (eagle["accept_length"] > 1.0).all()
    for name in (
        "summary.parquet",
        "summary.csv",
        "report.md",
        "analysis.json",
        "servers/baseline.log",
        "servers/dynamic.log",
    ):
        assert (run_dir / name).exists(), name
    assert any((run_dir / "plots").glob("*.png"))
    analysis = json.loads((run_dir / "analysis.json").read_text())
    # The combined recommendation is recorded; each prompt set's dynamic server ran with that
    # set's own threshold, written as SGLang's adaptive JSON.
    assert run.manifest.threshold is not None
    assert run.manifest.threshold.value == analysis["recommended_threshold"]
    per_set = run.manifest.threshold.per_prompt_set
    assert set(per_set) == {"coding", "agentic"}
    configs = [
        json.loads(p.read_text()) for p in (run_dir / "servers").glob("dynamic*.adaptive.json")
    ]
    for name, threshold in per_set.items():
        # The dynamic server runs at the one-server threshold: where EAGLE-3 meets zero-step
        # on the grid. The static servers then measure its T-1, T, T+1 too, and the crossing
        # read with those points lies within the interval of the one read without them.
        one_server = analysis["prompt_sets"][name]["one_server"]
        assert analysis["prompt_sets"][name]["applied_threshold"] == threshold
        if one_server["outcome"] == "crossover":
            low, high = one_server["threshold_interval"]
            assert low - 1 <= threshold <= high + 1, (threshold, one_server)
        else:  # EAGLE-3 ahead (or behind) at every level: the same T either way
            assert one_server["threshold_batch_size"] == threshold, one_server
        assert {"candidate_steps": [0]} in [c.get(str(threshold)) for c in configs]
        straddle = {threshold - 1, threshold, threshold + 1} & set(range(1, 65))
        for mode in ("dynamic", "eagle3", "zero-step"):
            measured = set(
                run.summary.query("mode == @mode and prompt_set == @name")["concurrency"])
            assert straddle <= measured, mode
        assert one_server["efficiency_interpolated"] == []
    # GPU time: one launch per server, every point's share; the report tabulates it.
    spent = gpu_time(run.manifest)
    assert set(spent) == {"baseline", "eagle3", "zero-step", "dynamic"}
    points = run.summary.groupby("mode").size()
    for name, t in spent.items():
        assert t.gpus == 1 and t.launches >= 1 and t.launch_gpu_s > 0
        assert t.points == points[name]
        # A point holds its server at least for its warmup and window (simulated seconds).
        assert t.point_gpu_s >= t.points * (run.manifest.config.load.warmup_s
                                            + run.manifest.config.load.window_s)
    report = (run_dir / "report.md").read_text()
    assert "## GPU time" in report and "| all |" in report
    assert "GPU-min" in proc.stdout
    assert_no_process_left(port)


def test_a_sweep_without_a_baseline_sets_the_dynamic_server_by_its_one_server_threshold(
        tmp_path: Path, port: int) -> None:
    # `--modes eagle3,zero-step,dynamic`: T comes from EAGLE-3 against zero-step alone, and the
    # dynamic server runs with it (not with the fixed default a run without curves gets).
    proc = sweep_cli(tmp_path, port, "--modes", "eagle3,zero-step,dynamic", "--prompts",
                     "coding", "--concurrency", "1,16,64")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = results.load_run(tmp_path / "res" / "run")
    coding = json.loads((run.path / "analysis.json").read_text())["prompt_sets"]["coding"]
    threshold = coding["one_server"]["threshold_batch_size"]
    assert coding["one_server"]["outcome"] is not None and coding["plain_server"]["outcome"] is None
    assert run.manifest.threshold is not None
    # The last straddle round chooses T again where its neighbours are measured; only a T
    # that walks past them (said in a note) leaves the dynamic server one level off.
    applied = run.manifest.threshold.per_prompt_set["coding"]
    walked = "would move again" in proc.stdout
    assert applied == threshold or (walked and abs(applied - threshold) <= 2), proc.stdout
    assert run.manifest.threshold.source != "default"
    assert set(run.summary["mode"]) == {"eagle3", "zero-step", "dynamic"}
    assert "One server: EAGLE-3" in (run.path / "report.md").read_text()


def test_a_given_schedule_is_measured_as_the_tuned_server(tmp_path: Path, port: int) -> None:
    # `--schedule 0:5,1:3`: no static curves to tune from; the server launches at the largest K
    # (a slot no batch reaches holds it) and runs K = 3 from batch size 1, as its JSON says.
    proc = sweep_cli(tmp_path, port, "--modes", "eagle3,zero-step,tuned", "--schedule",
                     "0:5,1:3", "--prompts", "coding", "--concurrency", "1,16")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = results.load_run(tmp_path / "res" / "run")
    assert run.manifest.tuned == {"coding": {"0": 5, "1": 3}}
    slots = json.loads((run.path / "servers" / "tuned.adaptive.json").read_text())
    assert slots == {"0": {"candidate_steps": [5]}, "1": {"candidate_steps": [3]}}
    log = (run.path / "servers" / "tuned.log").read_text()
    assert "--speculative-num-steps 5 " in log.splitlines()[0]
    accept = run.summary.set_index(["mode", "concurrency"])["accept_length"]
    assert accept[("tuned", 16)] == pytest.approx(accept[("eagle3", 16)], rel=0.05)
    # one drafting K and zero-step are enough to read the given schedule's server against: its
    # E per level (paired by request) with a 95% interval
    found = json.loads((run.path / "analysis.json").read_text())["prompt_sets"]["coding"]
    schedule = found["schedule"]
    assert schedule["applied_slots"] == {"0": 5, "1": 3}
    assert set(schedule["efficiency"]) == set(schedule["efficiency_interval"]) == {"1", "16"}
    for c, (low, high) in schedule["efficiency_interval"].items():
        assert low <= schedule["efficiency"][c] <= high, (c, schedule)
    assert "E tuned" in (run.path / "report.md").read_text()
    planned = sweep_cli(tmp_path, port, "--modes", "tuned", "--schedule", "0:5,1:3",
                        "--dry-run", name="dry")
    assert 'adaptive config (given): {"0": {"candidate_steps": [5]}, "1": ' in planned.stdout


def test_dropped_points_are_measured_again_on_resume(tmp_path: Path, port: int) -> None:
    # lab/gpu/drop_points.py (issue 40's tuned agentic server measured again): the tuned
    # points of one set and its schedule go, the old server's log stays under a new name, and
    # `--resume` measures them again with the schedule chosen again.
    import subprocess
    import sys

    proc = sweep_cli(tmp_path, port, "--modes", "eagle3,tuned", "--schedule", "1:3",
                     "--prompts", "coding", "--concurrency", "1,16")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "res" / "run"
    script = Path(__file__).parents[2] / "lab" / "gpu" / "drop_points.py"
    dropped = subprocess.run([sys.executable, str(script), str(run_dir), "tuned", "coding",
                              "--keep-log-as", "first"], capture_output=True, text=True)
    assert dropped.returncode == 0, dropped.stderr
    assert "dropped 2 points: tuned/coding/c1-r0, tuned/coding/c16-r0" in dropped.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["tuned"] == {} and manifest["status"] == "interrupted"
    assert [k for k in point_keys(run_dir) if k[0] == "tuned"] == []
    assert (run_dir / "servers" / "tuned.first.adaptive.json").exists()
    done = run_cli(["sweep", "--resume", str(run_dir)], cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = results.load_run(run_dir)
    assert run.manifest.status == "complete" and run.manifest.tuned == {"coding": {"1": 3}}
    assert [k for k in point_keys(run_dir) if k[0] == "tuned"] == [
        ("tuned", "coding", 1, 0), ("tuned", "coding", 16, 0)]
    assert (run_dir / "servers" / "tuned.adaptive.json").exists()


def test_server_killed_mid_point_names_the_log(tmp_path: Path, port: int) -> None:
    # The server crashes after 40 requests; with no retries the sweep stops with one message.
    proc = sweep_cli(
        tmp_path,
        port,
        "--modes",
        "baseline",
        "--prompts",
        "coding",
        "--concurrency",
        "1,4,16,64",
        "--sim-arg=--sim-crash-after-requests 40",
        "--max-point-retries",
        "0",
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    run_dir = tmp_path / "res" / "run"
    assert str(run_dir / "servers" / "baseline.log") in proc.stderr
    assert "--resume" in proc.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    failed = [k for k, v in manifest["points"].items() if v["status"] == "failed"]
    assert len(failed) == 1
    kept = point_keys(run_dir)
    assert kept, "points measured before the crash must stay on disk"
    assert all(manifest["points"][f"{m}/{s}/c{c}-r{r}"]["status"] == "ok" for m, s, c, r in kept)
    assert_no_process_left(port)


def test_server_crash_is_retried_with_a_restart(tmp_path: Path, port: int) -> None:
    proc = sweep_cli(
        tmp_path,
        port,
        "--modes",
        "baseline",
        "--prompts",
        "coding",
        "--concurrency",
        "1,4,16",
        "--sim-arg=--sim-crash-after-requests 48",
        "--max-point-retries",
        "5",
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run_dir = tmp_path / "res" / "run"
    assert point_keys(run_dir) == [("baseline", "coding", c, 0) for c in (1, 4, 16)]
    assert "restarting the baseline server" in proc.stdout
    # Each restart is a launch of its own in the GPU-time account.
    restarts = proc.stdout.count("restarting the baseline server")
    assert len(results.load_run(run_dir).manifest.servers["baseline"].launch_s) == 1 + restarts


@pytest.mark.parametrize(
    "sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)]
)
def test_signal_stops_servers_keeps_points(tmp_path: Path, port: int, sig: int, code: int) -> None:
    sweep = spawn_sweep(tmp_path, port, "--concurrency", "1,2,4,8,16,32")
    before = sweep.wait_for_points(2)
    assert sweep.stop(sig) < 10, "servers must be stopped within 10 s"
    err = sweep.stderr()
    assert sweep.returncode == code, err[-2000:]
    assert "Traceback" not in sweep.stdout() + err
    assert "--resume" in err
    manifest = json.loads((sweep.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert set(before) <= set(point_keys(sweep.run_dir))
    assert_no_process_left(port)


def test_sigkill_then_resume_completes_exactly_once(tmp_path: Path, port: int) -> None:
    sweep = spawn_sweep(
        tmp_path, port, "--concurrency", "1,2,4,8", "--modes", "baseline,eagle3",
        "--prompts", "coding",
    )
    sweep.wait_for_points(2)
    sweep.stop(signal.SIGKILL)
    # The servers die with their parent (PR_SET_PDEATHSIG), a moment later.
    assert_no_process_left(port, wait_s=5)
    run_dir = sweep.run_dir
    partial = point_keys(run_dir)
    assert 2 <= len(partial) < 8
    mtimes = {p: p.stat().st_mtime_ns for p in results.point_files(run_dir)}
    done = run_cli(["sweep", "--resume", str(run_dir)], cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    keys = point_keys(run_dir)
    assert keys == sorted((m, "coding", c, 0) for m in ("baseline", "eagle3") for c in (1, 2, 4, 8))
    for path, mtime in mtimes.items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was measured twice"
    summary = pd.read_parquet(run_dir / "summary.parquet")
    assert (
        len(summary) == 8
        and not summary.duplicated(["mode", "prompt_set", "concurrency", "repeat"]).any()
    )


def test_resume_refuses_a_different_config(tmp_path: Path, port: int) -> None:
    proc = sweep_cli(
        tmp_path, port, "--modes", "baseline", "--prompts", "coding", "--concurrency", "1"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = tmp_path / "res" / "run"
    again = run_cli(["sweep", "--resume", str(run_dir), "--concurrency", "1,2"], cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr.strip().splitlines() == [
        f"error: cannot resume {run_dir}: concurrency differs from the stored run "
        "((1,) vs (1, 2)); drop that option or start a new run"
    ]


@pytest.mark.parametrize("via", ["option", "environment"])
def test_api_key_never_reaches_the_run_directory(tmp_path: Path, port: int, via: str) -> None:
    secret = "sk-SECRET-" + via + "-4f2a9c"
    extra = ["--api-key", secret] if via == "option" else []
    env = cli_env(SPECBENCH_API_KEY=secret) if via == "environment" else None
    proc = sweep_cli(
        tmp_path, port, "--modes", "baseline", "--prompts", "coding", "--concurrency", "2",
        *extra, timeout=300, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run_dir = tmp_path / "res" / "run"
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.name == "manifest.json" for p in files) and any(p.suffix == ".log" for p in files)
    leaked = [str(p) for p in files if secret.encode() in p.read_bytes()]
    assert leaked == []
    assert secret not in proc.stdout + proc.stderr
    manifest = json.loads((run_dir / "manifest.json").read_text())
    if via == "option":
        assert "***" in manifest["command"]
    # Servers bind to loopback unless asked otherwise.
    argv = manifest["servers"]["baseline"]["argv"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert_no_process_left(port)


def test_no_shell_strings_in_the_package() -> None:
    # Commands are argv lists only: a model path or server flag can never be run by a shell.
    root = Path(__file__).resolve().parents[2] / "specbench"
    offenders = [
        f"{p}:{n}"
        for p in root.rglob("*.py")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if any(
            bad in line
            for bad in ("shell=True", "os.system(", "os.popen(", "create_subprocess_shell")
        )
    ]
    assert offenders == []


def test_a_sweep_without_plots_leaves_them_to_the_report(tmp_path: Path, port: int) -> None:
    proc = sweep_cli(tmp_path, port, "--modes", "baseline", "--concurrency", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = tmp_path / "res" / "run"
    assert not (run_dir / "plots").exists()
    assert "## Figures" not in (run_dir / "report.md").read_text()
    assert f"(no figures: specbench report {run_dir} draws them)" in " ".join(proc.stdout.split())
    done = run_cli(["report", str(run_dir)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (run_dir / "plots" / "throughput.png").exists()
    assert "(plots/throughput.png)" in (run_dir / "report.md").read_text()
