"""The CI regression gate against planted regressions of the simulated server and the client.

Each planted fault must fail the gate (exit 1) with a message that names what regressed and
where; a mismatched setting must make it refuse (exit 2). To stay cheap, every run here is the
`ci` preset cut to one prompt set, four of its levels and the baseline and EAGLE-3 modes, and
the reference is swept here from the unmodified simulator (not the committed one, which the
simulator's own evolution may move). That an unchanged simulator passes is CI's regression job
itself (.ci/run: the whole `ci` preset against the committed reference), not swept again here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from specbench import regress
from specbench.engines.process import free_port
from tests.harness import run_cli

pytestmark = pytest.mark.slow

PROFILE = Path(__file__).resolve().parents[2] / "specbench/sim/profiles/llama-3.1-8b-1xh200.toml"
# The ci preset's windows and seeds; fewer levels, one prompt set, two modes, and the
# simulator at 6x real time rather than the preset's 4x (a sweep 21 s here, 37 s at 3x; the
# numbers are in simulated seconds either way, and these runs are only compared with one
# another).
# Four levels, not three: the geometric-mean z-test of a 10% slowdown then has p near 0.01
# rather than 0.03 (per-point uncertainty comes from each window's bootstrap interval).
REDUCED = ["--preset", "ci", "--prompts", "coding", "--concurrency", "16,32,64,128",
           "--modes", "baseline,eagle3", "--sim-time-scale", "6"]
STEP_SECTIONS = {"target_linear", "target_attention", "draft_linear", "draft_attention",
                 "overheads"}
ALPHA_KEYS = {"default_alpha", "agentic_alpha", "alpha"}
_LINE = re.compile(r"^(\s*)([A-Za-z_]+)(\s*=\s*)([0-9.eE+-]+)(.*)$")


def rewrite_profile(target: Path, step_factor: float = 1.0, alpha_factor: float = 1.0) -> Path:
    """Copy the default profile with every step cost times `step_factor` and alphas scaled.

    Times (``*_ms``, ``*_us``, and the walks' ``*_ns_per_token_layer``) are multiplied and
    rates (``*_per_s``) divided, so every forward takes `step_factor` as long; acceptance
    alphas are multiplied by `alpha_factor`.
    """
    section = ""
    out = []
    for line in PROFILE.read_text().splitlines():
        header = re.match(r"^\s*\[+([A-Za-z_.]+)\]+", line)
        if header:
            section = header.group(1)
        m = _LINE.match(line)
        if m:
            key, value = m.group(2), float(m.group(4))
            if section in STEP_SECTIONS and ("_ns_" in key or key.endswith(("_ms", "_us"))):
                value *= step_factor
            elif section in STEP_SECTIONS and key.endswith("_per_s"):
                value /= step_factor
            elif section.startswith("acceptance") and key in ALPHA_KEYS:
                value *= alpha_factor
            line = f"{m.group(1)}{key}{m.group(3)}{value!r}{m.group(5)}"
        out.append(line)
    target.write_text("\n".join(out) + "\n")
    return target


def sweep(results: Path, name: str, *extra: str) -> Path:
    proc = run_cli(["sweep", *REDUCED, "--results-dir", str(results), "--run-name", name,
                    "--port", str(free_port()), "--no-plots", *extra], cwd=results.parent)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return results / name


def gate(reference: Path, candidate: Path, *allow: str) -> tuple[int, str]:
    """`specbench regress` in process (the --allow-config-change path included)."""
    console = Console(record=True, width=200, force_terminal=False)
    code = regress.main(reference, candidate, json_path=candidate / "verdict.json",
                        console=console, allow_config_changes=allow)
    return code, console.export_text()


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gate") / "res"


@pytest.fixture(scope="module")
def reference(runs_dir: Path) -> Path:
    return sweep(runs_dir, "ref")


def test_ten_percent_slower_steps_fail(runs_dir: Path, reference: Path) -> None:
    slow = rewrite_profile(runs_dir.parent / "slow.toml", step_factor=1.1)
    candidate = sweep(runs_dir, "slow", "--sim-profile", str(slow))
    # A profile passed by path is another setting: refused unless the change is declared.
    code, text = gate(reference, candidate)
    assert code == 2, text
    assert "sim.profile" in text and "--allow-config-change sim.profile" in text
    code, text = gate(reference, candidate, "sim.profile")
    assert code == 1, text
    assert re.search(r"FAIL (baseline|eagle3)/coding: output tok/s -\d", text), text


def test_halved_acceptance_fails(runs_dir: Path, reference: Path) -> None:
    # alpha x 0.65 halves the expected accepted drafts per verify (alpha + alpha^2 + alpha^3).
    low = rewrite_profile(runs_dir.parent / "low-accept.toml", alpha_factor=0.65)
    candidate = sweep(runs_dir, "low-accept", "--sim-profile", str(low))
    code, text = gate(reference, candidate, "sim.profile")
    assert code == 1, text
    assert "FAIL eagle3/coding: accept length -" in text, text
    assert "baseline/coding" not in " ".join(
        line for line in text.splitlines() if line.startswith("FAIL")), text


def test_slow_client_fails(runs_dir: Path, reference: Path) -> None:
    # Reads coalesce whatever is buffered, so a small per-read cost only adds latency; the
    # client becomes the bottleneck once one pass over all c streams (c x delay) is a sizeable
    # part of a request's life and finished requests are noticed late. At 10 ms per read with
    # the simulator at 6x (60 simulated ms; here, 2 cores): the baseline c=64..128 -36..-62%
    # (-11% geomean), EAGLE-3 -14% geomean, and client_bound. At 5 ms one run on a busy
    # machine read the baseline only -9%: a warning, not the failure planted.
    candidate = sweep(runs_dir, "slow-client", "--planted-read-delay-us", "10000")
    code, text = gate(reference, candidate)
    assert code == 1, text
    assert re.search(r"FAIL (baseline|eagle3)/coding: output tok/s", text), text
    assert "client_bound" in text, text


def test_mismatched_levels_are_refused(runs_dir: Path, reference: Path, tmp_path: Path) -> None:
    # Cheap: two points. Everything else of the reference is missing and must be listed.
    candidate = sweep(runs_dir, "fewer", "--concurrency", "16,64", "--modes", "baseline")
    proc = run_cli(["regress", "--reference", str(reference), "--candidate", str(candidate)],
                   cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "6 reference point(s) missing in the candidate: baseline/coding c=32,128; " \
        "eagle3/coding c=16,32,64,128" in out, out
