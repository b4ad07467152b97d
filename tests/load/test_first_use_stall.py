"""A server that stalls on first use (issue 36): the warmup waits it out, the window measures.

SGLang with FlashInfer attention compiles its cascade kernel the first time a prefill hits the
prefix cache: on an H200 every request waited 8-9 s, and a sweep whose warmup ended at the first
finished request opened a 6-s window with no token in it and told the user to fix the server.
Here a small real server (tests/load/fakeserver.py) stops its whole batch for longer than the
window when an early request starts, and the real `specbench sweep --engine attach` runs.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from specbench import results
from tests.harness import run_cli
from tests.load.fakeserver import FakeOptions, fake_in_thread

PAUSE_S = 3.0  # longer than the window
WINDOW_S = 2.0
LIMIT_S = 90


def _sweep(tmp_path: Path, url: str, users: int, *extra: str) -> tuple[int, str, str]:
    proc = run_cli(
        ["sweep", "--engine", "attach", "--attach", f"baseline={url}", "--modes", "baseline",
         "--prompts", "coding", "--concurrency", str(users), "--results-dir",
         str(tmp_path / "res"), "--run-name", "run", "--warmup-s", "0.5", "--window-s",
         str(WINDOW_S), "--request-timeout-s", "30", "--no-plots", *extra],
        cwd=tmp_path, timeout=LIMIT_S,
    )
    return proc.returncode, proc.stdout, proc.stderr


def _summary(run_dir: Path) -> dict[str, float]:
    frame = pd.read_csv(run_dir / "summary.csv")
    assert len(frame) == 1
    return frame.iloc[0].to_dict()


# c=1: the second request is the first prefix hit. c=4: the first request of the second wave.
@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
@pytest.mark.parametrize("users", [1, 4])
def test_the_warmup_waits_out_a_first_use_stall(tmp_path: Path, users: int) -> None:
    opts = FakeOptions(output_tokens=40, step_s=0.005, pause_at=users, pause_s=PAUSE_S)
    with fake_in_thread(opts) as srv:
        code, out, err = _sweep(tmp_path, srv.url, users)
    assert code == 0, out[-2000:] + err[-2000:]
    run_dir = tmp_path / "res" / "run"
    row = _summary(run_dir)
    assert row["output_tok_s"] > 0 and row["n_requests"] >= 1
    # The window opened after the stall: the warmup ran past the pause's end.
    assert row["warmup_s"] >= PAUSE_S, row["warmup_s"]
    manifest = results.read_manifest(run_dir)
    assert manifest.points[f"baseline/coding/c{users}-r0"].attempts == 1


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_a_stall_past_the_warmup_cap_is_named_and_measured_again(tmp_path: Path) -> None:
    # The warmup may last 1 s: the window opens inside the 3-s stall and gets no token. The
    # server counts running requests all the while, so it is a stall, not a dead server: the
    # point is measured again on the same server, and the manifest keeps what happened.
    config = tmp_path / "cap.toml"
    config.write_text("[load]\nwarmup_max_s = 1\n")
    opts = FakeOptions(output_tokens=40, step_s=0.005, pause_at=1, pause_s=PAUSE_S)
    with fake_in_thread(opts) as srv:
        code, out, err = _sweep(tmp_path, srv.url, 1, "--config", str(config))
    assert code == 0, out[-2000:] + err[-2000:]
    record = results.read_manifest(tmp_path / "res" / "run").points["baseline/coding/c1-r0"]
    assert record.status == "ok" and record.attempts == 2
    said = record.errors[0]
    assert "sent no token" in said and "stall" in said and "fix" not in said, said
    assert "measuring it again" in out


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_a_stall_that_starts_inside_the_window_is_measured_again(tmp_path: Path) -> None:
    # The first prefix hit can come after the warmup's: on the H200 (q0.5 run, c = 1) the third
    # request set off FlashInfer's compile 3.5 s into an 8-s window, which then held one request
    # and 4.5 s of silence. Here the third request stops the batch for longer than the rest of
    # the window: more than half the window passes with a request in flight and no token
    # (requests take about 0.25 s here, so the sixth starts a few tenths into the window).
    opts = FakeOptions(output_tokens=40, step_s=0.005, pause_at=5, pause_s=PAUSE_S)
    with fake_in_thread(opts) as srv:
        code, out, err = _sweep(tmp_path, srv.url, 1)
    assert code == 0, out[-2000:] + err[-2000:]
    record = results.read_manifest(tmp_path / "res" / "run").points["baseline/coding/c1-r0"]
    assert record.status == "ok" and record.attempts == 2, record
    said = record.errors[0]
    assert "sent no token" in said and "of the" in said, said
    assert "measuring it again" in out
    assert _summary(tmp_path / "res" / "run")["output_tok_s"] > 0


@pytest.mark.slow
@pytest.mark.timeout(LIMIT_S + 30)
def test_long_prefills_are_not_a_stall(tmp_path: Path) -> None:
    # Every request waits 1.2 s for its first token (a long prompt's prefill), more than half
    # of the 2-s window: the silence is the point's ordinary time to first token, not a stall,
    # and the point is measured once.
    opts = FakeOptions(output_tokens=40, step_s=0.005, prefill_s=1.2)
    with fake_in_thread(opts) as srv:
        code, out, err = _sweep(tmp_path, srv.url, 1)
    assert code == 0, out[-2000:] + err[-2000:]
    record = results.read_manifest(tmp_path / "res" / "run").points["baseline/coding/c1-r0"]
    assert record.status == "ok" and record.attempts == 1 and not record.errors, record
