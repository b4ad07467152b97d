"""SGLang's own benchmark client against specbench on one simulated server: tok/s per level.

Issue 58: one ``python -m specbench.sim`` server (default profile, baseline, 256 running
requests at most, real time), prompts of 256 random words, every request 128 tokens (EOS
ignored), and two clients one after the other:

- SGLang 0.5.23's ``sglang.benchmark.serving --backend sglang-oai-chat --max-concurrency c``
  under ``$SPECBENCH_SGLANG_PYTHON`` (default ``.venv-contract/bin/python``), run with 4c and
  12c prompts (``--rounds``); the steady rate is the difference of the two runs' tokens over
  the difference of their lengths, so ramp-up and drain cancel;
- ``specbench sweep --engine attach``, one baseline point per level (4-s warmup, 20-s window).

The work is done by tests/engines/test_two_clients.py (its ``compare``), which asserts the
same agreement within 3% with shorter runs (``--rounds 1,4 --warmup-s 1 --window-s 8``); this
prints the table to quote. The simulator and the sweep run this checkout's code.

Measured (the shared 2-core machine, 208 s), SGLang / specbench tok/s:
c = 16: 2,402 / 2,390 (-0.5%); 64: 5,276 / 5,350 (+1.4%); 250: 7,397 / 7,410 (+0.2%). With the
window closed at window_s as before (this script on the code before): 2,402 / 2,396
(-0.2%), 5,299 / 5,573 (+5.2%), 7,366 / 7,900 (+7.3%).

Usage::

    python benchmarks/two_clients.py                       # c = 16, 64, 250 as issue 58 did
    python benchmarks/two_clients.py --rounds 1,4 --warmup-s 1 --window-s 8   # as the test
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.engines import test_two_clients as two  # noqa: E402  (after the path insert)
from tests.engines.test_contract_export import missing_modules  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", default=",".join(map(str, two.LEVELS)))
    parser.add_argument("--time-scale", type=float, default=two.TIME_SCALE,
                        help="the simulator's speed-up over real time")
    parser.add_argument("--rounds", default=",".join(map(str, two.ISSUE_ROUNDS)),
                        help="SGLang's two runs: requests per user in each")
    parser.add_argument("--warmup-s", type=float, default=two.ISSUE_WARMUP_S,
                        help="specbench's warmup (GPU seconds)")
    parser.add_argument("--window-s", type=float, default=two.ISSUE_WINDOW_S,
                        help="specbench's window (GPU seconds)")
    args = parser.parse_args(argv)
    python = os.environ.get("SPECBENCH_SGLANG_PYTHON", str(ROOT / ".venv-contract/bin/python"))
    # The simulator and the sweep run as subprocesses: this checkout's code, whatever is installed.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    missing = missing_modules(python)
    if missing:
        sys.exit(f"error: {python} cannot run SGLang's client (missing: {', '.join(missing)}); "
                 "run scripts/install_sglang_contract.sh or set SPECBENCH_SGLANG_PYTHON")
    levels = [int(x) for x in args.levels.split(",")]
    rounds = [int(x) for x in args.rounds.split(",")]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        result = two.compare(python, Path(tmp), levels, args.time_scale, rounds,
                             args.warmup_s, args.window_s)
    total_s = time.monotonic() - started
    print(f"one simulated baseline server (default profile) at time scale {args.time_scale:g}; "
          f"{two.PROMPT_WORDS}-word prompts, {two.OUTPUT_TOKENS} tokens each, EOS ignored; "
          f"SGLang's client: runs of {' and '.join(f'{n}c' for n in rounds)} prompts, "
          f"differenced; specbench: {args.warmup_s:g}-s warmup, {args.window_s:g}-s window "
          f"(GPU s)")
    print(f"{'c':>5} {'SGLang tok/s':>13} {'specbench tok/s':>16} {'difference':>11} "
          f"{'window s':>9}  flags")
    for row in result.rows:
        print(f"{row.concurrency:>5} {row.sglang_tok_s:>13,.0f} {row.specbench_tok_s:>16,.0f} "
              f"{row.difference:>+11.1%} {row.specbench_window_s:>9.1f}  "
              f"{row.specbench_flags or '-'}")
    print(f"wall: SGLang's client {result.sglang_wall_s:.0f} s, specbench "
          f"{result.specbench_wall_s:.0f} s, {total_s:.0f} s in all; python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
