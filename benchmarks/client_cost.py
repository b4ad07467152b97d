"""Client CPU per output token: specbench's load generator against SGLang's own benchmark client.

Both clients drive the same simulated server (baseline, time scale 1, the coding prompt set,
prefix cache flushed before each run) at the same concurrency, one run at a time, each in its
own process. An observer outside both clients measures the same thing for each:

- it waits until the server runs c requests (its ``sglang:num_running_reqs`` gauge), then
  ``--settle-s`` more, so start-up (imports, tokenizer, prompt preparation) is left out;
- over the next ``--measure-s`` wall seconds it reads the client's CPU time (user + system,
  every thread: ``/proc/<pid>/stat``) and, from the simulator's ``/sim/ground_truth``, the
  tokens the server emitted in exactly that interval;
- CPU us per token = client CPU / tokens; then the client is stopped.

specbench runs as a sweep point does: :func:`specbench.load.runner.run_point` with the live
progress line drawn on a terminal console (to /dev/null) and the server's gauges sampled.
SGLang's client is ``sglang.benchmark.serving`` (what ``python -m sglang.bench_serving`` runs),
0.5.23, ``--backend sglang-oai-chat``, its tqdm bar on, under ``$SPECBENCH_SGLANG_PYTHON``
(default ``.venv-contract/bin/python``), with the prompts as a ``custom`` dataset: each
prompt's messages joined into one user turn, and an assistant turn of exactly ``max_tokens``
tokens of the word-level tokenizer that tests/engines/oracle/launch.py builds, so that both
clients ask for the same output caps.

Usage::

    python benchmarks/client_cost.py                    # c = 16, 64, 250; 3 runs each
    python benchmarks/client_cost.py --levels 250 --runs 1 --measure-s 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ORACLE = ROOT / "tests" / "engines" / "oracle"
SGLANG_PYTHON = os.environ.get("SPECBENCH_SGLANG_PYTHON", str(ROOT / ".venv-contract/bin/python"))
PROMPT_SET = "coding"
WORD = "alpha"  # one token of the oracle tokenizer

# Runs under SGLang's Python: argv[1] the oracle folder, argv[2] where to build the tokenizer,
# the rest SGLang's client's flags (the contract test in tests/engines runs it the same way).
SGLANG_RUNNER = r'''
import runpy, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import launch
import import_stubs
import_stubs.install(("datasets",))  # imported at start-up, unused on this path
target, _ = launch.build_model(Path(sys.argv[2]), ["alpha", "beta", "gamma", "delta", "omega"])
sys.argv = ["sglang.benchmark.serving", "--tokenizer", str(target), *sys.argv[3:]]
runpy.run_module("sglang.benchmark.serving", run_name="__main__")
'''


# -- the specbench client (its own process) -----------------------------------------------

def specbench_client(url: str, model: str, concurrency: int, window_s: float) -> None:
    from rich.console import Console

    from specbench import prompts
    from specbench.load.runner import LiveView, PointSpec, run_point_sync
    from specbench.run.progress import SweepProgress

    ps = prompts.load_prompt_set(PROMPT_SET)
    live = LiveView()
    spec = PointSpec(base_url=url, protocol="openai-chat", model=model, concurrency=concurrency,
                     requests=prompts.ordered_requests(ps, 0), warmup_s=1.0, window_s=window_s,
                     warmup_min_requests=concurrency, warmup_max_s=60.0, live=live)
    with open(os.devnull, "w") as devnull:
        console = Console(file=devnull, force_terminal=True, width=150)
        with SweepProgress(console, total=1) as progress:
            progress.measuring(f"baseline {PROMPT_SET} c={concurrency}", live)
            run_point_sync(spec)


# -- the observer --------------------------------------------------------------------------

def _get(url: str, timeout_s: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return str(resp.read().decode())


def _running(url: str) -> float:
    for line in _get(url + "/metrics").splitlines():
        if line.startswith("sglang:num_running_reqs"):
            return float(line.split()[-1])
    return 0.0


def _cpu_s(pid: int) -> float:
    """User + system CPU of a process and all its threads, as /proc counts it."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def observe(proc: subprocess.Popen[bytes], url: str, concurrency: int, settle_s: float,
            measure_s: float, start_timeout_s: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + start_timeout_s
    while _running(url) < concurrency:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the client never ran {concurrency} requests (rc {proc.poll()})")
        time.sleep(0.2)
    time.sleep(settle_s)
    t0, cpu0 = time.monotonic(), _cpu_s(proc.pid)
    time.sleep(measure_s)
    t1, cpu1 = time.monotonic(), _cpu_s(proc.pid)
    running = _running(url)
    if proc.poll() is not None:
        raise RuntimeError("the client ended inside the measurement; raise its request count")
    truth = json.loads(_get(f"{url}/sim/ground_truth?start={t0!r}&end={t1!r}"))
    tokens = int(truth["output_tokens"])
    return {"cpu_s": cpu1 - cpu0, "tokens": tokens, "wall_s": t1 - t0,
            "us_per_token": (cpu1 - cpu0) / max(tokens, 1) * 1e6,
            "tok_s": tokens / (t1 - t0), "running_at_end": running}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


# -- the driver ----------------------------------------------------------------------------

def write_dataset(path: Path) -> int:
    """The prompt set as SGLang's custom dataset; returns the number of rows."""
    from specbench import prompts

    rows = prompts.ordered_requests(prompts.load_prompt_set(PROMPT_SET), 0)
    with open(path, "w") as fh:
        for r in rows:
            user = "\n\n".join(str(m.get("content") or "") for m in r.messages)
            fh.write(json.dumps({"conversations": [
                {"role": "user", "content": user},
                {"role": "assistant", "content": " ".join([WORD] * r.max_tokens)}]}) + "\n")
    return len(rows)


def client_command(kind: str, url: str, model: str, c: int, work: Path, dataset: Path,
                   n_rows: int, run_s: float) -> list[str]:
    if kind == "specbench":
        return [sys.executable, __file__, "--_specbench", url, model, str(c), str(run_s)]
    runner = work / "run_bench.py"
    runner.write_text(SGLANG_RUNNER)
    # Enough requests to outlast the measurement (about 600 tokens each at up to 60 tok/s per
    # request at time scale 1); rows repeat when there are fewer.
    n = max(n_rows, int(c * run_s / 8) + c)
    return [SGLANG_PYTHON, str(runner), str(ORACLE), str(work / "model"),
            "--backend", "sglang-oai-chat", "--base-url", url, "--model", model,
            "--dataset-name", "custom", "--dataset-path", str(dataset), "--num-prompts", str(n),
            "--max-concurrency", str(c), "--request-rate", "inf"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", default="16,64,250")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle-s", type=float, default=3.0)
    parser.add_argument("--measure-s", type=float, default=8.0)
    parser.add_argument("--clients", default="specbench,sglang")
    parser.add_argument("--json", action="store_true", help="print every run as JSON too")
    parser.add_argument("--_specbench", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._specbench:
        url, model, c, run_s = args._specbench
        specbench_client(url, model, int(c), float(run_s))
        return 0

    from specbench.config import ServerConfig
    from tests.harness import sim_server

    clients = args.clients.split(",")
    if "sglang" in clients:
        probe = subprocess.run([SGLANG_PYTHON, "-c", "import sglang, transformers"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            sys.exit(f"error: {SGLANG_PYTHON} cannot import sglang ({probe.stderr.strip()[-200:]}"
                     "); run scripts/install_sglang_contract.sh or set SPECBENCH_SGLANG_PYTHON")
    levels = [int(x) for x in args.levels.split(",")]
    model = ServerConfig().model_path
    run_s = args.settle_s + args.measure_s + 60.0
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    table: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        dataset = work / "prompts.jsonl"
        n_rows = write_dataset(dataset)
        with sim_server("baseline", work, max_running_requests=256, time_scale=1.0) as server:
            url = server.base_url
            for c in levels:
                for run in range(args.runs):
                    for kind in clients:
                        _get(url + "/flush_cache")
                        cmd = client_command(kind, url, model, c, work, dataset, n_rows, run_s)
                        proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL,
                                                stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL)
                        try:
                            m = observe(proc, url, c, args.settle_s, args.measure_s)
                        finally:
                            _stop(proc)
                        table.setdefault((kind, c), []).append(m["us_per_token"])
                        if args.json:
                            print(json.dumps({"client": kind, "c": c, "run": run, **m}))
                        time.sleep(1.0)  # let the server drain the aborted requests
    print(f"client CPU per output token, us (medians of {args.runs}); simulated baseline server "
          f"at time scale 1, {PROMPT_SET} prompts, {args.measure_s:g} s measured per run; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    header = f"{'c':>5} " + " ".join(f"{k:>10}" for k in clients)
    print(header + (f" {'ratio':>6}" if len(clients) == 2 else ""))
    for c in levels:
        meds = [statistics.median(table[(k, c)]) for k in clients]
        line = f"{c:>5} " + " ".join(f"{m:>10.1f}" for m in meds)
        if len(meds) == 2:
            line += f" {meds[0] / meds[1]:>6.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
