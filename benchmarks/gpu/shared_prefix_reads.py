"""How much a running request's read of a prefix it shares with others costs (issue 37).

The simulator charges every running request's whole context at the attention's bandwidth.
Agentic requests share long prefixes, which SGLang's KV pool holds once (its log's ``#token``);
the real plain step at agentic contexts grows far less than the model says
(results/gpu/README.md, the `-agentic-steps` run). This fits, on the plain server's one-step
log lines of an H100's coding and agentic runs,

    step_ms = a + b * running + c * (pool_tokens + s * (summed_context - pool_tokens))

by least squares for each s on a grid, and prints each s's median relative error: s = 1 is the
model's charge (every read at full cost), s = 0 charges only the pool's distinct tokens. The
two sets together tell s apart; one alone does not (a free intercept and slope absorb it).
Longer requests reading their own context more cheaply per token would look the same here.

  python3 benchmarks/gpu/shared_prefix_reads.py [RUN_PREFIX]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from fit_profile import parse_decode_log  # type: ignore[import-not-found]  # this folder

RUNS = Path(__file__).resolve().parents[2] / "results" / "gpu"
DEFAULT_PREFIX = "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-"
SETS = {"coding": "coding-steps", "agentic": "agentic-steps"}
MIN_RUNNING = 8  # below it the step is the weights' read and the per-request walk


def lines(run_dir: Path) -> np.ndarray:
    """(running, summed context, pool tokens, step ms) of each steady one-step plain line."""
    samples = parse_decode_log(run_dir / "servers" / "baseline.log.xz", "baseline",
                               interval_steps=1)
    return np.array([[x.batch, x.kv_tokens, x.pool_tokens, x.step_ms] for x in samples
                     if x.batch >= MIN_RUNNING])


def median_errors(data: np.ndarray, grid: np.ndarray) -> list[float]:
    running, summed, pool, step_ms = data.T
    errors = []
    for s in grid:
        x = np.c_[np.ones_like(running), running, pool + s * (summed - pool)]
        coef, *_ = np.linalg.lstsq(x, step_ms, rcond=None)
        errors.append(float(np.median(np.abs(x @ coef - step_ms) / step_ms)))
    return errors


def main() -> None:
    prefix = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_PREFIX
    by_set = {name: lines(RUNS / f"{prefix}{tail}") for name, tail in SETS.items()}
    grid = np.linspace(0.0, 1.0, 11)
    print("median |relative error| of the plain step's linear fit, by s (the cost of a shared "
          "prefix's read by one more request, 1 = a first read)")
    print(f"{'lines':18s}{'n':>6s}{'summed/pool p50':>17s}"
          + "".join(f"{s:>7.1f}" for s in grid) + "   best s")
    for name, data in [*by_set.items(), ("both", np.vstack(list(by_set.values())))]:
        errors = median_errors(data, grid)
        ratio = float(np.median(data[:, 1] / data[:, 2]))
        print(f"{name:18s}{len(data):6d}{ratio:17.2f}" + "".join(f"{e:7.3f}" for e in errors)
              + f"   {grid[int(np.argmin(errors))]:.1f}")


if __name__ == "__main__":
    main()
