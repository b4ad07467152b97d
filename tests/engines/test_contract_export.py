"""Contract: `specbench export --format sglang` writes the keys SGLang's own client writes.

SGLang 0.5.23's ``sglang.benchmark.serving`` (what ``python -m sglang.bench_serving`` runs)
is run once, under the SGLang interpreter (``$SPECBENCH_SGLANG_PYTHON``, else this one), against
the simulated EAGLE-3 server, with ``--output-file``; its line must have exactly the keys, in
the same order and with values of the same JSON types, as specbench's record of a point.

Offline, as everything here: ``--dataset-name random-ids`` draws token ids itself (``random``
would download ShareGPT), ``--tokenizer`` is the small word-level tokenizer that
tests/engines/oracle/launch.py builds, and HF_HUB_OFFLINE is set. The client imports the
``datasets`` package at start-up for datasets it then does not use here (MMMU, LongBench); the
contract environment does not install it, so the runner stubs it with the oracle's stub finder
(launch.py's, which stubs torchvision the same way).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specbench import results
from specbench.config import ServerConfig
from specbench.engines import sglang as sg
from specbench.report import export
from tests.harness import sim_server
from tests.test_export import make_export_run

# slow: SGLang's client imports torch and transformers (about 5 s) before it sends anything
pytestmark = [pytest.mark.contract, pytest.mark.slow]

SGLANG_PYTHON = os.environ.get("SPECBENCH_SGLANG_PYTHON", sys.executable)
CONTRACT_VERSION = "0.5.23"
ORACLE = Path(__file__).resolve().parent / "oracle"
NEEDED = ("sglang", "transformers", "tokenizers", "aiohttp", "requests")

# Runs under SGLANG_PYTHON: argv[1] is the oracle folder, argv[2] where to build the tokenizer,
# the rest SGLang's client's flags.
RUNNER = r'''
import importlib.util, runpy, sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
import launch  # tests/engines/oracle/launch.py: the tokenizer builder (it stubs torchvision)
import import_stubs

import_stubs.install(("datasets",))  # imported at start-up, never used on this path
target, _ = launch.build_model(Path(sys.argv[2]), ["alpha", "beta", "gamma", "delta", "omega"])
print(f"tokenizer: {target}", file=sys.stderr)
sys.argv = ["sglang.benchmark.serving", "--tokenizer", str(target), *sys.argv[3:]]
runpy.run_module("sglang.benchmark.serving", run_name="__main__")
'''


def missing_modules(python: str) -> list[str]:
    """What `python` lacks to run SGLang's client (the contract tests' probe)."""
    probe = ("import importlib.util, json\n"
             f"print(json.dumps([m for m in {list(NEEDED)!r} "
             "if importlib.util.find_spec(m) is None]))\n")
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return [f"a working {python}"]
    missing: list[str] = json.loads(out)
    return missing


def require_bench_serving() -> None:
    """Skip where SGLANG_PYTHON cannot run SGLang's client; fail where it is another SGLang."""
    missing = missing_modules(SGLANG_PYTHON)
    if missing:
        pytest.skip(f"{SGLANG_PYTHON} cannot run SGLang's bench_serving (missing: "
                    f"{', '.join(missing)}); run scripts/install_sglang_contract.sh or set "
                    "SPECBENCH_SGLANG_PYTHON")
    assert sg.sglang_version(SGLANG_PYTHON) == CONTRACT_VERSION


@pytest.fixture(scope="module")
def sglang_line(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The line SGLang's client wrote after 4 requests to the simulated EAGLE-3 server."""
    require_bench_serving()
    work = tmp_path_factory.mktemp("bench")
    runner = work / "run_bench.py"
    runner.write_text(RUNNER)
    out = work / "sglang.jsonl"
    with sim_server("eagle3", work) as server:
        proc = subprocess.run(
            [SGLANG_PYTHON, str(runner), str(ORACLE), str(work / "model"),
             "--backend", "sglang-oai-chat", "--base-url", server.base_url,
             "--model", ServerConfig().model_path, "--dataset-name", "random-ids",
             "--random-input-len", "16", "--random-output-len", "8", "--num-prompts", "4",
             "--max-concurrency", "2", "--disable-tqdm", "--output-file", str(out)],
            cwd=work, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                 "TOKENIZERS_PARALLELISM": "false"},
        )
    assert proc.returncode == 0 and out.exists(), (proc.stdout[-3000:], proc.stderr[-3000:])
    lines = out.read_text().splitlines()
    assert len(lines) == 1, lines
    line: dict[str, Any] = json.loads(lines[0])
    assert line["completed"] == 4  # every request came back: the line describes a real run
    return line


@pytest.fixture(scope="module")
def our_line(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """specbench's line for an EAGLE-3 point, read back from the text it writes."""
    run = results.load_run(make_export_run(tmp_path_factory.mktemp("run")))
    records = export.build_records(run, "sglang", modes=["eagle3"])
    line: dict[str, Any] = json.loads(export.records_text(records, "sglang").splitlines()[0])
    return line


def test_the_sglang_export_has_exactly_the_keys_of_sglangs_own_file(
        sglang_line: dict[str, Any], our_line: dict[str, Any]) -> None:
    ours, theirs = set(our_line), set(sglang_line)
    assert ours == theirs, f"only ours: {sorted(ours - theirs)}; only SGLang's: " \
                           f"{sorted(theirs - ours)}"
    assert list(our_line) == list(sglang_line)  # and in SGLang's order


def test_each_value_has_the_json_type_sglang_writes(
        sglang_line: dict[str, Any], our_line: dict[str, Any]) -> None:
    # SGLang writes null for an unset --tag; everything else it filled here has a type.
    differ = {key: (type(our_line[key]).__name__, type(value).__name__)
              for key, value in sglang_line.items()
              if value is not None and type(our_line[key]) is not type(value)}
    assert differ == {}
