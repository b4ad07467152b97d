"""Contract tests: specbench's argv, adaptive JSON, checks and simulator against SGLang's own code.

These run SGLang 0.5.23's real argument parser and resolution (``prepare_server_args`` then
``resolve_once`` on ``--device cpu`` with a fake local Llama target and EAGLE-3 draft), its
adaptive router (``AdaptiveSpeculativeParams``) and its OpenAI stream models, so that a change
in ``engines/argv.py`` that SGLang would reject or resolve differently fails here rather than
on a GPU an hour into a sweep. ``scripts/install_sglang_contract.sh`` installs what they need
(the sglang wheel with ``--no-deps`` plus CPU torch and the light packages its argument code
imports); without sglang they are skipped.

SGLang runs in a separate *probe* process (importing it pulls in torch and sets up logging),
started once per module; each job runs in a fork of it so that one resolution cannot leak
state into the next and an argparse ``exit(2)`` is a real exit code. Set
``SPECBENCH_SGLANG_PYTHON`` to run the probe under another interpreter (a venv with sglang).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specbench import configurations
from specbench.config import ServerConfig, SweepConfig
from specbench.configurations import Schedule
from specbench.engines import argv as argv_mod
from specbench.engines import diagnose, server_info, versions
from specbench.engines import sglang as sg
from specbench.engines.base import Server, verify
from specbench.engines.process import free_port

# slow: the probe imports SGLang and torch once (about 5 s) before the first test
pytestmark = [pytest.mark.contract, pytest.mark.slow]

SGLANG_PYTHON = os.environ.get("SPECBENCH_SGLANG_PYTHON", sys.executable)
CONTRACT_VERSION = "0.5.23"
MAX_RUNNING = 250
STEPS = 3

# Runs under SGLANG_PYTHON. Reads one JSON job per line on stdin, answers one JSON line on
# the private results fd; everything SGLang prints goes to stderr (a file).
PROBE = r'''
import json, os, sys, tempfile, traceback

results = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # stray prints must not corrupt the results stream

sys.path.insert(0, sys.argv[1])  # tests/engines/oracle: import_stubs.py
import import_stubs

import_stubs.install()

import sglang
from sglang.srt.entrypoints.openai import protocol
from sglang.srt.server_args import prepare_server_args
from sglang.srt.speculative.adaptive_spec_params import AdaptiveSpeculativeParams
from sglang.srt.utils.common import msgspec_to_builtins
import sglang.srt.arg_groups.pipeline  # imported once here, not in every forked job


def job_resolve(job):
    server_args = prepare_server_args(job["argv"])
    server_args.resolve_once()
    # /server_info's top level is exactly this (build_server_info in utils/common.py)
    info = msgspec_to_builtins(server_args.resolved_dict())
    info["launch_command"] = server_args.launch_command
    return {"server_info": json.loads(json.dumps(info, default=str))}


def job_route(job):
    params = AdaptiveSpeculativeParams(job["initial_steps"], job["config_path"])
    if job.get("cuda_graph_bs"):
        params.set_cuda_graph_bs(job["cuda_graph_bs"])
    return {"steps": [params.get_steps_for_batch(bs) for bs in job["batch_sizes"]]}


MODELS = {
    ("chat", True): protocol.ChatCompletionStreamResponse,
    ("completions", True): protocol.CompletionStreamResponse,
    ("chat", False): protocol.ChatCompletionResponse,
    ("completions", False): protocol.CompletionResponse,
}


def extra_keys(sent, parsed, where):
    """Keys the server sent that SGLang's model does not define (pydantic drops them)."""
    found = []
    if isinstance(sent, dict) and isinstance(parsed, dict):
        for key, value in sent.items():
            if key not in parsed:
                found.append(f"{where}.{key}")
            else:
                found += extra_keys(value, parsed[key], f"{where}.{key}")
    elif isinstance(sent, list) and isinstance(parsed, list):
        for index, (a, b) in enumerate(zip(sent, parsed)):
            found += extra_keys(a, b, f"{where}[{index}]")
    return found


def job_validate(job):
    model = MODELS[(job["kind"], job["stream"])]
    errors, extras = [], []
    for index, item in enumerate(job["items"]):
        try:
            parsed = model.model_validate(item)
        except Exception as exc:
            errors.append(f"item {index}: {exc}")
            continue
        extras += extra_keys(item, parsed.model_dump(mode="json"), f"item{index}")
    return {"errors": errors, "extra_keys": extras, "model": model.__name__}


def job_where(job):
    return {"package_dir": os.path.dirname(sglang.__file__), "version": sglang.__version__}


def job_default_slots(job):
    from sglang.srt.speculative.adaptive_spec_params import DEFAULT_ADAPTIVE_CONFIG
    return {"slots": {key: slot["candidate_steps"] for key, slot in DEFAULT_ADAPTIVE_CONFIG.items()
                      if key.isdigit()}}


JOBS = {"resolve": job_resolve, "route": job_route, "validate": job_validate,
        "where": job_where, "default_slots": job_default_slots}


def run_forked(job):
    read_fd, write_fd = os.pipe()
    err = tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        os.dup2(err.fileno(), 2)
        sys.stderr = os.fdopen(2, "w", closefd=False)
        try:
            out = {"ok": True, **JOBS[job["op"]](job)}
        except SystemExit as exc:
            out = {"ok": False, "exit_code": exc.code}
        except BaseException:
            out = {"ok": False, "error": traceback.format_exc()}
        sys.stderr.flush()
        with os.fdopen(write_fd, "w") as pipe:
            pipe.write(json.dumps(out))
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    out = json.loads(data) if data else {"ok": False, "error": f"probe child died ({status})"}
    err.seek(0)
    out["stderr"] = err.read().decode("utf-8", "replace")[-20000:]
    return out


results.write(json.dumps({"ready": True, "version": sglang.__version__}) + "\n")
results.flush()
for line in sys.stdin:
    results.write(json.dumps(run_forked(json.loads(line))) + "\n")
    results.flush()
'''


class Probe:
    """The running probe process; `run(job)` returns its JSON answer."""

    def __init__(self, python: str, stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [python, "-c", PROBE, str(Path(__file__).resolve().parent / "oracle")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"},
        )
        hello = self._read(timeout_s=180)
        self.version = str(hello["version"])

    def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            tail = "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-30:])
            pytest.fail(f"the SGLang probe gave no answer; its stderr ends with:\n{tail}")
        return dict(json.loads(line))

    def run(self, job: dict[str, Any], timeout_s: float = 120) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout_s)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probe]:
    if sg.sglang_version(SGLANG_PYTHON) is None:
        pytest.skip(
            f"sglang is not installed for {SGLANG_PYTHON}; run scripts/install_sglang_contract.sh "
            "(or set SPECBENCH_SGLANG_PYTHON to an interpreter that has it)"
        )
    running = Probe(SGLANG_PYTHON, tmp_path_factory.mktemp("probe") / "stderr.log")
    yield running
    running.close()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> ServerConfig:
    """A fake local Llama-3.1-8B-shaped target and an EAGLE-3 draft: config.json is all that
    argument resolution reads."""
    root = tmp_path_factory.mktemp("models")
    common = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16",
    }
    configs = {
        "target": {**common, "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32},
        "draft": {**common, "architectures": ["LlamaForCausalLMEagle3"],
                  "num_hidden_layers": 1, "draft_vocab_size": 32000},
    }
    for name, config in configs.items():
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps(config))
    return ServerConfig(
        model_path=str(root / "target"),
        draft_model_path=str(root / "draft"),
        speculative_num_steps=STEPS,
    )


def specbench_argv(
    mode: str, server: ServerConfig, tmp_path: Path, *, threshold: int = 32,
    max_running_requests: int = MAX_RUNNING,
) -> list[str]:
    adaptive = None
    if mode == "dynamic":
        schedule = Schedule.from_threshold(server.speculative_num_steps, threshold)
        adaptive = argv_mod.write_adaptive_config(tmp_path / "dynamic.adaptive.json", schedule)
    argv = argv_mod.build_argv(
        mode, server, port=free_port(), max_running_requests=max_running_requests,
        adaptive_config_path=adaptive,
    )
    return [*argv, "--device", "cpu"]  # resolution on a machine without a GPU


def resolve(probe: Probe, argv: list[str]) -> dict[str, Any]:
    answer = probe.run({"op": "resolve", "argv": argv})
    assert answer["ok"], answer.get("error") or answer
    return dict(answer["server_info"])


def assert_resolves_as_intended(
    probe: Probe, argv: list[str], mode: str, *, steps: int = STEPS,
    max_running_requests: int = MAX_RUNNING, threshold: int | None = None,
) -> dict[str, Any]:
    """SGLang accepts `argv` and resolves it to what specbench means by `mode`; the same
    /server_info then passes specbench's own checks."""
    answer = probe.run({"op": "resolve", "argv": argv})
    assert answer["ok"], (
        f"SGLang refused the {mode} argv (exit code {answer.get('exit_code')}): "
        f"{answer.get('error') or answer['stderr'][-800:]}"
    )
    info = answer["server_info"]
    assert info["max_running_requests"] == max_running_requests
    if mode == "baseline":
        assert info["speculative_algorithm"] is None
    else:
        assert info["speculative_algorithm"] == "EAGLE3"
        assert info["speculative_num_steps"] == steps
        assert info["speculative_eagle_topk"] == 1
        assert info["speculative_num_draft_tokens"] == steps + 1
    assert info["speculative_adaptive"] is (mode == "dynamic")
    assert info["cuda_graph_bs_decode"] is None  # exact-batch-size routing in dynamic mode
    expected = server_info.Expected(
        mode=mode, speculative_num_steps=steps, max_running_requests=max_running_requests,
        largest_concurrency=max_running_requests, threshold=threshold,
    )
    assert server_info.check_server_info(info, expected) == []
    assert server_info.detect_mode(info) == mode
    return dict(info)


# --------------------------------------------------------------------------------------------
# The installed SGLang is the one the contract is with.


def test_installed_sglang_is_the_contract_version(probe: Probe):
    assert probe.version == CONTRACT_VERSION
    assert sg.sglang_version(SGLANG_PYTHON) == CONTRACT_VERSION


# --------------------------------------------------------------------------------------------
# Argument resolution


@pytest.mark.parametrize("mode", ["baseline", "eagle3", "dynamic"])
def test_sglang_resolves_specbench_argv_as_intended(
    probe: Probe, models: ServerConfig, tmp_path: Path, mode: str
):
    argv = specbench_argv(mode, models, tmp_path)
    assert_resolves_as_intended(probe, argv, mode, threshold=32 if mode == "dynamic" else None)


# Every named configuration a sweep or `specbench tune` can launch, with the schedule the
# engine would give it (a tuned one stands in for the tuned server's).
CONFIGURATION_NAMES = sorted({*configurations.DEFAULT_NAMES, *configurations.TUNE_NAMES,
                              "eagle3-k5", "dynamic-t40"})
TUNED = Schedule(((1, 5), (17, 3), (129, 0)))


@pytest.mark.parametrize("name", CONFIGURATION_NAMES)
def test_every_configuration_is_accepted_by_sglang_and_passes_verify(
    probe: Probe, models: ServerConfig, tmp_path: Path, name: str
):
    config = configurations.parse(name)
    steps = config.num_steps(models.speculative_num_steps)
    schedule = None
    if config.adaptive == "threshold":
        schedule = Schedule.from_threshold(steps, config.threshold or 32)
    elif config.adaptive == "schedule":
        schedule = TUNED
    path = argv_mod.write_adaptive_config(tmp_path / f"{name}.json", schedule) if schedule else None
    argv = argv_mod.build_argv(config, models, port=free_port(), max_running_requests=MAX_RUNNING,
                               adaptive_config_path=path, schedule=schedule)
    answer = probe.run({"op": "resolve", "argv": [*argv, "--device", "cpu"]})
    assert answer["ok"], f"SGLang refused the {name} argv: {answer.get('error') or answer}"
    cfg = SweepConfig(concurrency=(MAX_RUNNING,), server=models)
    server = Server(config, "http://127.0.0.1:1", argv=argv, env={}, time_scale=1.0,
                    info=answer["server_info"], schedule=schedule)
    verify(server, cfg, launched=True)  # raises, naming the flag, when SGLang resolved otherwise


def test_other_steps_and_cap_resolve_too(probe: Probe, models: ServerConfig, tmp_path: Path):
    server = ServerConfig(model_path=models.model_path, draft_model_path=models.draft_model_path,
                          speculative_num_steps=5)
    argv = specbench_argv("dynamic", server, tmp_path, threshold=8, max_running_requests=64)
    assert_resolves_as_intended(probe, argv, "dynamic", steps=5, max_running_requests=64,
                                threshold=8)


def test_dynamic_threshold_one_resolves(probe: Probe, models: ServerConfig, tmp_path: Path):
    # --threshold 1 means "never draft"; the config must still admit --speculative-num-steps K.
    argv = specbench_argv("dynamic", models, tmp_path, threshold=1)
    assert_resolves_as_intended(probe, argv, "dynamic", threshold=1)


def test_sglang_caps_speculative_servers_at_48_without_the_flag(
    probe: Probe, models: ServerConfig, tmp_path: Path
):
    argv = without_max_running_requests(specbench_argv("eagle3", models, tmp_path))
    info = resolve(probe, argv)
    assert info["max_running_requests"] == 48
    problems = server_info.check_server_info(info, server_info.Expected(
        mode="eagle3", speculative_num_steps=STEPS, max_running_requests=MAX_RUNNING,
        largest_concurrency=MAX_RUNNING))
    assert len(problems) == 1 and "max_running_requests=48" in problems[0]
    assert "--max-running-requests 250" in problems[0]


def test_cuda_graph_max_bs_is_an_ambiguous_option(probe: Probe, models: ServerConfig,
                                                  tmp_path: Path):
    answer = probe.run({"op": "resolve", "argv": with_cuda_graph_max_bs(
        specbench_argv("eagle3", models, tmp_path))})
    assert answer["ok"] is False and answer["exit_code"] == 2
    assert "ambiguous option: --cuda-graph-max-bs could match" in answer["stderr"]
    diag = diagnose.diagnose_failure(answer["stderr"])
    assert diag is not None and diag.kind == "bad_argument"
    assert "--cuda-graph-max-bs-decode" in diag.hint


def test_cuda_graph_max_bs_decode_is_accepted(probe: Probe, models: ServerConfig,
                                              tmp_path: Path):
    info = resolve(probe, [*specbench_argv("eagle3", models, tmp_path),
                           "--cuda-graph-max-bs-decode", "256"])
    assert info["cuda_graph_max_bs_decode"] == 256


def test_simulator_flags_never_reach_sglang(probe: Probe, models: ServerConfig, tmp_path: Path):
    argv = specbench_argv("baseline", models, tmp_path)
    assert not [a for a in argv if a.startswith("--sim-")]
    answer = probe.run({"op": "resolve", "argv": [*argv, "--sim-time-scale", "20"]})
    assert answer["ok"] is False and answer["exit_code"] == 2
    diag = diagnose.diagnose_failure(answer["stderr"])
    assert diag is not None and diag.kind == "bad_argument"
    assert "--sim-time-scale 20" in diag.summary


def test_adaptive_with_topk_above_one_falls_back_silently(
    probe: Probe, models: ServerConfig, tmp_path: Path
):
    # What check_server_info exists for: SGLang only logs a warning and runs static steps.
    argv = specbench_argv("dynamic", models, tmp_path)
    argv[argv.index("--speculative-eagle-topk") + 1] = "2"
    answer = probe.run({"op": "resolve", "argv": argv})
    assert answer["ok"], answer.get("error")
    info = answer["server_info"]
    assert info["speculative_adaptive"] is False
    assert diagnose.adaptive_fallback_reason(answer["stderr"]) == (
        "speculative_eagle_topk=2 (only topk=1 is supported)"
    )
    problems = server_info.check_server_info(info, server_info.Expected(
        mode="dynamic", speculative_num_steps=STEPS, max_running_requests=MAX_RUNNING,
        largest_concurrency=MAX_RUNNING, threshold=32))
    assert any("speculative_adaptive=false" in p for p in problems)
    assert any("--speculative-eagle-topk 1" in p for p in problems)


# The two builder bugs these contract tests exist to catch, shown on deliberately broken argvs:
# the same helper that passes specbench's argv above must fail on them.


def without_max_running_requests(argv: list[str]) -> list[str]:
    index = argv.index("--max-running-requests")
    return argv[:index] + argv[index + 2:]


def with_cuda_graph_max_bs(argv: list[str]) -> list[str]:
    return [*argv, "--cuda-graph-max-bs", "256"]


@pytest.mark.parametrize("mode", ["eagle3", "dynamic"])
def test_a_builder_that_drops_max_running_requests_fails_the_contract(
    probe: Probe, models: ServerConfig, tmp_path: Path, mode: str
):
    broken = without_max_running_requests(specbench_argv(mode, models, tmp_path))
    with pytest.raises(AssertionError, match="48"):
        assert_resolves_as_intended(probe, broken, mode, threshold=32)


@pytest.mark.parametrize("mode", ["baseline", "dynamic"])
def test_a_builder_that_emits_cuda_graph_max_bs_fails_the_contract(
    probe: Probe, models: ServerConfig, tmp_path: Path, mode: str
):
    broken = with_cuda_graph_max_bs(specbench_argv(mode, models, tmp_path))
    with pytest.raises(AssertionError, match="exit code 2"):
        assert_resolves_as_intended(probe, broken, mode, threshold=32)


# --------------------------------------------------------------------------------------------
# Adaptive routing of specbench's JSON


def route(probe: Probe, config_path: Path, steps: int, batch_sizes: list[int],
          cuda_graph_bs: list[int] | None = None) -> list[int]:
    answer = probe.run({"op": "route", "config_path": str(config_path), "initial_steps": steps,
                        "batch_sizes": batch_sizes, "cuda_graph_bs": cuda_graph_bs})
    assert answer["ok"], answer.get("error")
    return [int(s) for s in answer["steps"]]


@pytest.mark.parametrize(("steps", "threshold"), [(3, 32), (5, 2), (1, 250), (3, 64)])
def test_sglang_routes_below_threshold_to_k_steps_and_from_it_to_zero(
    probe: Probe, tmp_path: Path, steps: int, threshold: int
):
    schedule = Schedule.from_threshold(steps, threshold)
    path = argv_mod.write_adaptive_config(tmp_path / "a.json", schedule)
    batch_sizes = list(range(1, 301))
    routed = route(probe, path, steps, batch_sizes)
    assert routed == [steps if bs < threshold else 0 for bs in batch_sizes]
    routing = server_info.routing_from_adaptive_config(json.loads(path.read_text()))
    assert routing == (steps, threshold)


@pytest.mark.parametrize(
    "cuda_graph_bs",
    [
        [1, 2, 4, 8, 16, 24, 40, 64, 128, 256],
        # SGLang's speculative default capture list up to 256
        [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8)],
        [1, 2, 4, 8, 16, 24, 31, 32, 64],
        [8, 16],
    ],
)
def test_effective_threshold_matches_sglang_padding(
    probe: Probe, tmp_path: Path, cuda_graph_bs: list[int]
):
    threshold = 32
    schedule = Schedule.from_threshold(STEPS, threshold)
    path = argv_mod.write_adaptive_config(tmp_path / "a.json", schedule)
    batch_sizes = list(range(1, 301))
    routed = route(probe, path, STEPS, batch_sizes, cuda_graph_bs)
    by_bs = dict(zip(batch_sizes, routed, strict=True))
    first_zero = min(bs for bs, steps in by_bs.items() if steps == 0)
    assert first_zero == server_info.effective_threshold(threshold, cuda_graph_bs)
    assert all(steps == 0 for bs, steps in by_bs.items() if bs >= first_zero)
    assert all(steps == STEPS for bs, steps in by_bs.items() if bs < first_zero)


# --------------------------------------------------------------------------------------------
# The failure lines diagnose_failure matches are SGLang's own


def test_failure_texts_occur_in_the_installed_sglang(probe: Probe):
    answer = probe.run({"op": "where"})
    package = Path(answer["package_dir"])
    source = "\n".join(
        p.read_text(errors="replace") for p in (package / "srt").rglob("*.py")
    )
    literals = [r.sglang_text for r in diagnose.FAILURE_RULES if r.sglang_text]
    literals += [
        "speculative_adaptive disabled: ",  # adaptive_fallback_reason
        "Falling back to static speculative params",
        "effective_max_running_requests_per_dp",  # read by check_server_info
        "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND",  # argv.server_env
    ]
    missing = [text for text in literals if text not in source]
    assert missing == []
    assert len(literals) >= 12


# --------------------------------------------------------------------------------------------
# The simulated server's responses validate against SGLang's protocol models


def sim_available() -> bool:
    return (Path(__file__).resolve().parents[2] / "specbench" / "sim" / "__main__.py").is_file()


@pytest.fixture(scope="module")
def sim_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not sim_available():
        pytest.skip("specbench.sim has no __main__ yet")
    port = free_port()
    log_path = tmp_path_factory.mktemp("sim") / "sim.log"
    argv = [
        sys.executable, "-m", "specbench.sim", "--model-path", "m", "--port", str(port),
        "--max-running-requests", "64", "--enable-metrics",
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--sim-time-scale", "20",
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the simulated server exited: {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/ready", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the simulated server never became ready: {log_path.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def post(url: str, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as resp:
        return bytes(resp.read())


def sse_chunks(raw: bytes) -> list[dict[str, Any]]:
    chunks = []
    events = [e for e in re.split(r"\r?\n\r?\n", raw.decode()) if e.strip()]
    assert events[-1].strip() == "data: [DONE]"
    for event in events[:-1]:
        assert event.startswith("data: "), event
        chunks.append(json.loads(event[len("data: "):]))
    return chunks


STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_simulated_stream_chunks_validate_against_sglang_models(
    probe: Probe, sim_url: str, kind: str
):
    common = {"model": "m", "max_tokens": 24, "temperature": 0, "stream": True,
              "stream_options": STREAM_OPTIONS, "return_spec_tokens_details": True,
              "ignore_eos": True}
    if kind == "chat":
        body = {**common, "messages": [{"role": "user", "content": "Write a sort in Python."}]}
        raw = post(f"{sim_url}/v1/chat/completions", body)
    else:
        body = {**common, "prompt": "def quicksort(xs):"}
        raw = post(f"{sim_url}/v1/completions", body)
    chunks = sse_chunks(raw)
    answer = probe.run({"op": "validate", "kind": kind, "stream": True, "items": chunks})
    assert answer["ok"], answer.get("error")
    assert answer["errors"] == []
    assert answer["extra_keys"] == []  # nothing SGLang would not send either
    # the chunks carry what specbench reads: cumulative usage and the spec details
    assert any(c.get("usage") and c["usage"].get("completion_tokens") == 24 for c in chunks)
    assert any((c.get("sglext") or {}).get("spec_tokens_details") for c in chunks)


@pytest.mark.parametrize("kind", ["chat", "completions"])
def test_simulated_responses_validate_against_sglang_models(
    probe: Probe, sim_url: str, kind: str
):
    common = {"model": "m", "max_tokens": 8, "temperature": 0, "ignore_eos": True,
              "return_spec_tokens_details": True}
    if kind == "chat":
        body = {**common, "messages": [{"role": "user", "content": "hi"}]}
        raw = post(f"{sim_url}/v1/chat/completions", body)
    else:
        raw = post(f"{sim_url}/v1/completions", {**common, "prompt": "hi"})
    answer = probe.run({"op": "validate", "kind": kind, "stream": False,
                        "items": [json.loads(raw)]})
    assert answer["ok"], answer.get("error")
    assert answer["errors"] == []
    assert answer["extra_keys"] == []


# --------------------------------------------------------------------------------------------
# The simulated server resolves the same argv to the same /server_info values as SGLang


RESOLVED_KEYS = (
    "max_running_requests",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_adaptive",
    "cuda_graph_bs_decode",
)
# Top-level /server_info keys SGLang adds to the resolved flags (build_server_info,
# scheduler init info, the /server_info handler).
SERVER_INFO_EXTRAS = {
    "launch_command", "status", "max_total_num_tokens", "max_req_input_len", "startup_time",
    "hicache_object_layout", "kv_events", "internal_states", "version", "frontend",
}


def run_sim(argv: list[str], log_path: Path) -> tuple[int | None, dict[str, Any] | None, str]:
    """(exit code or None, /server_info or None, log) of the simulator started with `argv`."""
    port = argv[argv.index("--port") + 1]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specbench.sim", *argv, "--sim-time-scale", "20"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                return code, None, log_path.read_text(errors="replace")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2):
                    pass
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info",
                                            timeout=5) as resp:
                    return None, json.loads(resp.read()), log_path.read_text(errors="replace")
            except OSError:
                time.sleep(0.05)
        pytest.fail(f"the simulator neither started nor exited: {log_path.read_text()[-2000:]}")
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def topk_two(argv: list[str]) -> list[str]:
    argv = list(argv)
    argv[argv.index("--speculative-eagle-topk") + 1] = "2"
    return argv


SIM_CASES = {
    "baseline": ("baseline", lambda a: a),
    "eagle3": ("eagle3", lambda a: a),
    "dynamic": ("dynamic", lambda a: a),
    "eagle3-no-max-running": ("eagle3", without_max_running_requests),
    "dynamic-topk-2-falls-back": ("dynamic", topk_two),
    "dynamic-capture-list": ("dynamic", lambda a: [*a, "--cuda-graph-bs-decode", "1", "8", "24"]),
    "cuda-graph-max-bs": ("eagle3", with_cuda_graph_max_bs),
    "unknown-flag": ("baseline", lambda a: [*a, "--no-such-flag"]),
}


@pytest.mark.parametrize("case", list(SIM_CASES))
def test_simulator_resolves_like_sglang(
    probe: Probe, models: ServerConfig, tmp_path: Path, case: str
):
    if not sim_available():
        pytest.skip("specbench.sim has no __main__ yet")
    mode, change = SIM_CASES[case]
    argv = change(specbench_argv(mode, models, tmp_path)[:-2])  # without --device cpu
    real = probe.run({"op": "resolve", "argv": [*argv, "--device", "cpu"]})
    code, sim_info, log = run_sim(argv, tmp_path / "sim.log")
    if not real["ok"]:
        assert real.get("exit_code") == 2, real.get("error")
        assert code == 2, f"SGLang exits 2 on this argv, the simulator did not: {log[-1500:]}"
        return
    assert code is None and sim_info is not None, f"SGLang accepts this argv: {log[-1500:]}"
    sglang_info = real["server_info"]
    assert {k: sim_info.get(k) for k in RESOLVED_KEYS} == {k: sglang_info[k] for k in RESOLVED_KEYS}
    served = {k for k in sim_info if not k.startswith("sim_")}
    assert served - set(sglang_info) - SERVER_INFO_EXTRAS == set()


def test_the_built_in_adaptive_slots_are_sglangs(probe: Probe) -> None:
    """What specbench sizes SGLang's default adaptive server's memory by (engines/argv.py) is
    the wheel's own built-in config: slot 1's candidates by release, the slots above it the same
    in every supported release."""
    slots = probe.run({"op": "default_slots"})["slots"]
    assert tuple(slots["1"]) == versions.release(CONTRACT_VERSION).default_slot1_steps
    upper = {step for key, steps in slots.items() if key != "1" for step in steps}
    assert tuple(sorted(upper)) == versions.DEFAULT_UPPER_SLOTS_STEPS
