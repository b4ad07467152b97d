"""Run a script against SGLang 0.5.23's own code, in the interpreter that has it installed.

The contract tests of the simulator ask SGLang itself what it would answer: the script runs
under ``$SPECBENCH_SGLANG_PYTHON`` (the contract venv made by
scripts/install_sglang_contract.sh), else this interpreter, reads one JSON job on stdin and
prints one JSON answer as its last line. :func:`require_sglang` skips the calling test when
that interpreter has no sglang. torchvision, which some sglang modules import but these
tests never use, is stubbed when it is missing (tests/engines/oracle/import_stubs.py).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SGLANG_PYTHON = os.environ.get("SPECBENCH_SGLANG_PYTHON", sys.executable)

STUBS_DIR = Path(__file__).resolve().parents[1] / "engines" / "oracle"  # import_stubs.py

PRELUDE = f"""
import json, sys

sys.path.insert(0, {str(STUBS_DIR)!r})
import import_stubs

import_stubs.install()
JOB = json.load(sys.stdin)
"""


@functools.cache
def sglang_available() -> bool:
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('sglang') is None)"
    try:
        done = subprocess.run([SGLANG_PYTHON, "-c", code], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def require_sglang() -> None:
    if not sglang_available():
        pytest.skip(
            f"sglang is not installed for {SGLANG_PYTHON}; run "
            "scripts/install_sglang_contract.sh or set SPECBENCH_SGLANG_PYTHON"
        )


def run_probe(script: str, job: Any, timeout_s: float = 300.0) -> Any:
    """Run `script` (after :data:`PRELUDE`, which reads `JOB`) under SGLang's interpreter;
    return the JSON it prints last."""
    done = subprocess.run(
        [SGLANG_PYTHON, "-c", PRELUDE + script],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
