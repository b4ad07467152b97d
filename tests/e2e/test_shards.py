"""A run in shards, as SLURM would run it: `specbench slurm`, its tasks, `merge`, `--resume`.

The job script is executed as written: its submit step runs against a stand-in `sbatch` that
records each submission, and the test then does what SLURM would with them: every index of the
array submission runs `job.sh task` with SLURM_ARRAY_TASK_ID set, and once all succeeded, the
dependent submission runs `job.sh merge`. The merged run must be accepted by plot, report and
regress; merging shards that are not parts of one run is refused with one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from specbench import config as config_mod
from specbench import results
from specbench.engines.process import free_port
from specbench.run import slurm
from tests.harness import FAST, assert_no_process_left, cli_env, point_keys, run_cli

RUN_SPEC = ("--modes", "baseline,eagle3,dynamic", "--prompts", "coding", "--concurrency", "1,4")
# Stands in for sbatch: records its arguments, answers as `sbatch --parsable` does.
FAKE_SBATCH = """#!{python}
import json, os, sys
calls = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl")
with open(calls, "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
print("4242;cluster" if "--array=0-1" in " ".join(sys.argv) else "4243")
"""


def _run_bash(script: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script), *args], cwd=cwd, env=cli_env(**env),
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def _submit(script: Path, tmp: Path) -> list[list[str]]:
    """The script's submit step against the stand-in sbatch; the sbatch calls it made."""
    bin_dir = tmp / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH.format(python=sys.executable))
    (bin_dir / "sbatch").chmod(0o755)
    proc = _run_bash(script, cwd=tmp, PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert proc.returncode == 0, proc.stderr
    assert "submitted array job 4242 (baseline eagle3) and merge job 4243" in proc.stdout
    lines = (bin_dir / "calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _run_as_slurm(calls: list[list[str]], tmp: Path) -> None:
    """What SLURM does with the two submissions: every array index, then the dependent job."""
    array, dependent = calls
    indices = next(a for a in array if a.startswith("--array="))
    first, last = map(int, indices.removeprefix("--array=").split("-"))
    assert array[-1] == "task" and dependent[-1] == "merge"
    assert "--dependency=afterok:4242" in dependent  # the array job's id, cluster name cut
    for index in range(first, last + 1):
        proc = _run_bash(Path(array[-2]), "task", cwd=tmp, SLURM_ARRAY_TASK_ID=str(index))
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    proc = _run_bash(Path(dependent[-2]), "merge", cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One sharded run on the simulator: the job script, its submissions, the merged run."""
    tmp = tmp_path_factory.mktemp("shards")
    port = free_port()
    proc = run_cli(["slurm", *RUN_SPEC, *FAST, "--port", str(port), "--results-dir",
                    str(tmp / "res"), "--run-name", "job",
                    "--specbench-command", f"{sys.executable} -m specbench",
                    "--sbatch-arg=--time=01:00:00"], tmp)
    assert proc.returncode == 0, proc.stderr
    script = tmp / "res" / "job" / "job.sh"
    assert f"job script: {script} (2 array task(s): baseline, eagle3)" in proc.stdout
    calls = _submit(script, tmp)
    _run_as_slurm(calls, tmp)
    for used in (port, port + slurm.PORT_STRIDE):
        assert_no_process_left(used, wait_s=5)
    return {"tmp": tmp, "script": script, "calls": calls, "shared": tmp / "res" / "job",
            "port": port}


def test_the_job_script_asks_slurm_for_an_array_then_a_dependent_job(
    sharded: dict[str, Any],
) -> None:
    text = sharded["script"].read_text()
    directives = re.findall(r"^#SBATCH (.*)$", text, flags=re.M)
    shared = sharded["shared"]
    assert directives == ["--job-name=specbench-job", "--ntasks=1",
                          f"--output={shared}/logs/%x-%A_%a.out", "--time=01:00:00"]
    array, dependent = sharded["calls"]
    assert array[:2] == ["--parsable", "--array=0-1"]
    assert dependent[:2] == ["--parsable", "--dependency=afterok:4242"]
    assert "--job-name=specbench-job-merge" in dependent
    assert (shared / "logs").is_dir()  # SLURM needs the --output directory to exist


def test_tasks_measure_one_configuration_each_and_the_merge_measures_the_rest(
    sharded: dict[str, Any],
) -> None:
    shared, port = sharded["shared"], sharded["port"]
    for index, name in enumerate(("baseline", "eagle3")):
        manifest = results.read_manifest(shared / "shards" / name)
        assert manifest.config.only_config == (name,)
        assert manifest.config.server.port == port + slurm.PORT_STRIDE * index
        assert {k[0] for k in point_keys(shared / "shards" / name)} == {name}
    run = shared / "run"
    assert {k[0] for k in point_keys(run)} == {"baseline", "eagle3", "dynamic"}
    manifest = results.read_manifest(run)
    assert manifest.status == "complete"
    assert manifest.config.only_config == ()
    assert set(manifest.servers) == {"baseline", "eagle3", "dynamic"}
    assert manifest.threshold is not None and manifest.threshold.source == "auto"
    assert (run / "analysis.json").exists() and (run / "report.md").exists()
    assert {p.name for p in (run / "servers").iterdir()} >= {"baseline.log", "eagle3.log"}
    shards = json.loads((run / "shards.json").read_text())
    assert [entry["configurations"] for entry in shards] == [["baseline"], ["eagle3"]]


def test_plot_report_and_regress_accept_the_merged_run(sharded: dict[str, Any]) -> None:
    run, tmp = sharded["shared"] / "run", sharded["tmp"]
    for args in (["plot", str(run)], ["report", str(run)],
                 ["regress", "--reference", str(run), "--candidate", str(run)]):
        proc = run_cli(args, tmp)
        assert proc.returncode == 0, f"{args[0]}: {proc.stderr[-2000:]}"


def _edit_manifest(shard: Path, edit: Any) -> None:
    path = shard / "manifest.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _window(data: dict[str, Any]) -> None:
    data["config"]["load"]["window_s"] = 3.0


def _hash(data: dict[str, Any]) -> None:
    data["prompt_sets"]["coding"]["sha256"] = "0" * 64


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_window, r"disagree on load\.window_s \(2\.0 vs 3\.0\)"),
        (_hash, r"measured different prompt set coding files \(sha256 .* vs 000000000000\)"),
        (None, r"both hold point baseline/coding/c1-r0"),
    ],
    ids=["config", "prompt-hash", "same-point"],
)
def test_merge_refuses_shards_that_are_not_one_run(
    sharded: dict[str, Any], tmp_path: Path, edit: Any, expected: str
) -> None:
    shards = sharded["shared"] / "shards"
    other = tmp_path / "other"
    if edit is None:  # a second copy of the baseline shard: every point twice
        shutil.copytree(shards / "baseline", other)
    else:
        shutil.copytree(shards / "eagle3", other)
        _edit_manifest(other, edit)
    out = tmp_path / "merged"
    proc = run_cli(["merge", str(shards / "baseline"), str(other), "--out", str(out)], tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert re.search(expected, lines[0]), lines[0]
    assert not out.exists()


def test_slurm_asks_for_tp_size_gpus_on_a_gpu_engine(tmp_path: Path) -> None:
    out = tmp_path / "gpu.sh"
    proc = run_cli(["slurm", "--engine", "sglang", "--tp-size", "8", "--modes",
                    "baseline,eagle3,zero-step,dynamic", "--out", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "#SBATCH --gpus-per-task=8" in text
    assert "configs=(baseline eagle3 zero-step)" in text
    assert "measured after the merge: dynamic." in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--modes", "baseline,eagle3", "--only-config", "eagle3"],
         "error: specbench slurm makes one shard per configuration itself; drop --only-config"),
        (["--server-arg=--api-key SECRET"],
         "error: --server-arg holds a key, which the job script would keep in clear; pass it "
         "as SPECBENCH_API_KEY / SPECBENCH_ADMIN_API_KEY in the environment instead"),
        (["--modes", "tuned"],
         "error: every configuration of --modes tuned needs an analysis of others; add the "
         "static ones it is computed from (baseline, eagle3, ...) to --modes"),
    ],
    ids=["only-config", "key-in-server-arg", "nothing-independent"],
)
def test_slurm_refuses_what_cannot_be_sharded(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = run_cli(["slurm", *args, "--out", str(tmp_path / "job.sh")], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == message
    assert not (tmp_path / "job.sh").exists()


def test_sweep_refuses_a_shard_of_a_configuration_that_needs_the_analysis(
    tmp_path: Path,
) -> None:
    proc = run_cli(["sweep", "--modes", "baseline,eagle3,dynamic", "--only-config", "dynamic",
                    "--dry-run"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: --only-config dynamic: the dynamic server needs the analysis of the other "
        "configurations' curves; leave it out of the shards and measure it after merging "
        "them, with specbench sweep --resume MERGED_RUN"
    )


def test_the_written_spec_reads_back_as_the_same_config() -> None:
    cfg = config_mod.build({
        "modes": ["baseline", "eagle3-k2"],
        "mix": {"coding": 0.5, "agentic": 0.5},
        "server": {"extra_args": ["--trust-remote-code"], "cuda_graph_bs_decode": [1, 2, 4]},
        "load": {"extra_request_body": {"top_k": 20, "stop": ["\n\"end\"\x7f"]},
                 "window_s": 1e-3},
    })
    read = config_mod.build(tomllib.loads(slurm.spec_toml(cfg)))
    assert config_mod.differences(cfg, read) == []
