#!/usr/bin/env python3
"""The GPU regression job: sweep your servers the way you run them, then gate the run.

    python3 scripts/gpu_regression.py reference --name NAME   # once: two launches, stored
    python3 scripts/gpu_regression.py check --name NAME       # nightly: exit 0, 1 or 2

`reference` sweeps twice, each time with fresh servers, analyses the first launch with the
second (`specbench report --relaunch`) and stores both with `specbench reference update`:
``<reference-root>/NAME`` and ``NAME/relaunch``, where `specbench regress` finds the second
launch and widens every limit (tok/s, TTFT and TPOT percentiles, goodput) by what it moved.
`check` sweeps once into ``<results-dir>/candidate`` and runs `specbench regress` against
NAME; its exit code is the gate's: 0 ok, 1 regression, 2 runs that cannot be compared.

The servers: `--server-command` is your launcher, e.g. ``sglang serve``, a Python of your own
(``/opt/sglang/bin/python -m sglang.launch_server``) or your container (``docker run --rm
--gpus all --network host IMAGE python3 -m sglang.launch_server``); specbench appends SGLang's
flags and starts one server at a time. `--attach MODE=URL,...` measures servers the job
started itself instead (nothing is launched). Every option has an environment variable
(REGRESSION_<OPTION>, e.g. REGRESSION_TP_SIZE), which is how the workflow passes its inputs.
`--dry-run` prints the commands and the sweep's plan with its GPU minutes, and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# (option, default, help). Defaults: the Llama-3.1-8B pair on one GPU, c = 1 included.
SETTINGS: tuple[tuple[str, str, str], ...] = (
    ("model-path", "meta-llama/Llama-3.1-8B-Instruct", "target model"),
    ("draft-model-path", "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B", "EAGLE-3 draft model"),
    ("server-command", "python -m sglang.launch_server",
     "your SGLang launcher or container command; SGLang's flags are appended"),
    ("attach", "", "MODE=URL,... of servers already running: attach instead of launching"),
    ("tp-size", "1", "tensor parallel size of every server"),
    ("server-args", "", "SGLang flags every server gets, e.g. '--mem-fraction-static 0.85'"),
    ("attention-backend", "", "SGLang --attention-backend (empty: SGLang's default)"),
    ("port", "30000", "the servers' port"),
    ("levels", "1,8,16,32,64,128", "concurrency levels"),
    ("sweep-args", "", "more `specbench sweep` options, e.g. '--threshold 64 --window-s 8'"),
    ("gate-args", "", "more `specbench regress` options, e.g. '--fail-pct 8'"),
    ("results-dir", "results", "where the runs are written"),
    ("reference-root", "results/reference", "where references are stored"),
)
CANDIDATE = "candidate"


def env_name(option: str) -> str:
    return "REGRESSION_" + option.upper().replace("-", "_")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/gpu_regression.py",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("action", choices=("reference", "check"))
    parser.add_argument("--name", default=os.environ.get(env_name("name")) or "",
                        help=f"reference name under --reference-root (env {env_name('name')})")
    for option, default, text in SETTINGS:
        # An empty variable (a workflow input left blank) means the default.
        parser.add_argument(f"--{option}", default=os.environ.get(env_name(option)) or default,
                            help=f"{text} (env {env_name(option)})")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    return parser.parse_args(argv)


@dataclass(frozen=True)
class Job:
    """One run's settings and the specbench commands they make."""

    args: argparse.Namespace

    def server_args(self) -> list[str]:
        """Every server's extra SGLang flags, as specbench stores them (shlex-split)."""
        extra = shlex.split(self.args.server_args)
        if self.args.attention_backend:
            extra += ["--attention-backend", self.args.attention_backend]
        return extra

    def attached(self) -> list[tuple[str, str]]:
        pairs = [p.strip() for p in self.args.attach.split(",") if p.strip()]
        return [(name.strip(), url.strip()) for name, _, url in (p.partition("=") for p in pairs)]

    def sweep(self, run_name: str) -> list[str]:
        """The one `specbench sweep` this job runs per launch."""
        a = self.args
        argv = ["sweep", "--preset", "ci", "--model-path", a.model_path,
                "--draft-model-path", a.draft_model_path, "--tp-size", a.tp_size,
                "--port", a.port, "--concurrency", a.levels]
        if self.attached():
            argv += ["--engine", "attach", "--modes", ",".join(n for n, _ in self.attached())]
            for name, url in self.attached():
                argv += ["--attach", f"{name}={url}"]
        else:
            argv += ["--engine", "sglang", "--server-command", a.server_command]
            if self.server_args():
                argv.append("--server-arg=" + shlex.join(self.server_args()))
        return [*argv, *shlex.split(a.sweep_args), "--results-dir", a.results_dir,
                "--run-name", run_name]

    def reference_dir(self) -> Path:
        return Path(self.args.reference_root) / self.args.name

    def run_dir(self, run_name: str) -> Path:
        return Path(self.args.results_dir) / run_name


def specbench(argv: list[str], dry_run: bool = False) -> int:
    """Run `specbench ARGV` under this interpreter, the command echoed first."""
    print("+ specbench " + shlex.join(argv), flush=True)
    if dry_run:
        return 0
    return subprocess.run([sys.executable, "-m", "specbench", *argv], check=False).returncode


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def drift(job: Job) -> list[str]:
    """What this job passes its servers that the reference's did not get (the gate compares
    model, steps, TP size and prompts, not the launcher or SGLang flags)."""
    manifest = json.loads((job.reference_dir() / "manifest.json").read_text())
    server = manifest["config"]["server"]
    out = []
    if not job.attached() and server.get("server_command") != shlex.split(
            job.args.server_command):
        out.append(f"server command {shlex.join(server.get('server_command') or [])!r} in "
                   f"the reference, {job.args.server_command!r} now")
    now = [] if job.attached() else job.server_args()  # attached servers get no flags
    if list(server.get("extra_args") or []) != now:
        out.append(f"server args {shlex.join(server.get('extra_args') or [])!r} in the "
                   f"reference, {shlex.join(now)!r} now")
    return out


def make_reference(job: Job) -> int:
    first, second = f"{job.args.name}-launch1", f"{job.args.name}-launch2"
    for name in (first, second):
        if job.run_dir(name).exists() and not job.args.dry_run:
            return fail(f"{job.run_dir(name)} exists; remove it or choose another --name")
    for name in (first, second):  # each sweep launches its servers afresh
        if code := specbench(job.sweep(name), job.args.dry_run):
            return code
    root = job.args.reference_root
    steps = (
        ["report", str(job.run_dir(first)), "--relaunch", str(job.run_dir(second))],
        ["reference", "update", str(job.run_dir(first)), "--name", job.args.name,
         "--reference-root", root],
        ["reference", "update", str(job.run_dir(second)), "--name",
         f"{job.args.name}/relaunch", "--reference-root", root],
    )
    for argv in steps:
        if code := specbench(argv, job.args.dry_run):
            return code
    # The second launch against the stored reference: files that work, and a relaunch passes.
    code = specbench(["regress", "--reference", str(job.reference_dir()),
                      "--candidate", str(job.run_dir(second))], job.args.dry_run)
    if code == 0 and not job.args.dry_run:
        print(f"reference {job.reference_dir()} made from two launches; commit it, then run "
              f"`scripts/gpu_regression.py check --name {job.args.name}` with the same settings")
    return code


def check(job: Job) -> int:
    if not (job.reference_dir() / "manifest.json").is_file():
        return fail(f"{job.reference_dir()}/manifest.json is missing; make the reference "
                    f"first: scripts/gpu_regression.py reference --name {job.args.name}")
    for line in drift(job):
        # Not refused: a deliberate change (an SGLang flag under test) is what a gate is for.
        print(f"::warning::{line}; the gate compares them anyway", flush=True)
    candidate = job.run_dir(CANDIDATE)
    if candidate.exists() and not job.args.dry_run:
        shutil.rmtree(candidate)  # a self-hosted runner keeps the last night's run
    if code := specbench(job.sweep(CANDIDATE), job.args.dry_run):
        return code
    return specbench(["regress", "--reference", str(job.reference_dir()),
                      "--candidate", str(candidate), "--json", str(candidate / "regress.json"),
                      *shlex.split(job.args.gate_args)], job.args.dry_run)


def main(argv: list[str]) -> int:
    job = Job(parse_args(argv))
    if not job.args.name:
        return fail(f"no reference name; pass --name NAME (or set {env_name('name')})")
    # --dry-run: the sweep's own plan and GPU minutes first (a reference sweeps twice).
    if job.args.dry_run and (code := specbench([*job.sweep(CANDIDATE), "--dry-run"])):
        return code
    return make_reference(job) if job.args.action == "reference" else check(job)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
