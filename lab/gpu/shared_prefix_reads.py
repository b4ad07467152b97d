"""How much a running request's read of a prefix it shares with others costs (issue 37).

The simulator charged every running request's whole context at the attention's bandwidth.
Agentic requests share long prefixes, which SGLang's KV pool holds once (its log's ``#token``);
the real plain step where much is shared is far under the model (lab/notes/gpu-runs.md, the
`-agentic-steps` run). Two readings of the plain server's one-step log lines of an H100's coding
and agentic runs:

1. A linear fit, step_ms = a + b * running + c * (pool_tokens + s * (summed_context -
   pool_tokens)), by least squares for each s on a grid, and each s's median relative error:
   s = 1 charges every read in full, s = 0 only the pool's distinct tokens. The two sets
   together tell s apart; one alone does not (a free intercept and slope absorb it). Longer
   requests reading their own context more cheaply per token would look the same.
2. The simulator's own step (the FlashInfer profile: the H200's costs) with its
   ``shared_read_fraction`` at s and each line's shared reads (summed context - pool tokens):
   agentic real / model per running count, over the card's factor (coding real / model at
   16-64 running, where nothing is shared); 1.00 is the model right up to the card.

  python3 lab/gpu/shared_prefix_reads.py [RUN_PREFIX]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np
from fit_profile import parse_decode_log  # type: ignore[import-not-found]  # this folder

from specbench.sim.costmodel import load_profile
from tests.fit_steps import real_over_model  # on sys.path through fit_profile

RUNS = Path(__file__).resolve().parents[2] / "results" / "gpu"
DEFAULT_PREFIX = "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-"
SETS = {"coding": "coding-steps", "agentic": "agentic-steps"}
MIN_RUNNING = 8  # below it the step is the weights' read and the per-request walk
PROFILE = "llama-3.1-8b-1xh200-flashinfer"
LEVELS = (16, 32, 64, 128)


def samples(run_dir: Path, mode: str = "baseline") -> list[Any]:
    """The steady one-step lines of a run's server (fit_profile.StepSample), running >= 8."""
    found = parse_decode_log(run_dir / "servers" / f"{mode}.log.xz", mode, interval_steps=1)
    return [x for x in found if x.batch >= MIN_RUNNING]


def median_errors(found: list[Any], grid: np.ndarray) -> list[float]:
    running, summed, pool, step_ms = np.array(
        [[x.batch, x.kv_tokens, x.pool_tokens, x.step_ms] for x in found]).T
    errors = []
    for s in grid:
        x = np.c_[np.ones_like(running), running, pool + s * (summed - pool)]
        coef, *_ = np.linalg.lstsq(x, step_ms, rcond=None)
        errors.append(float(np.median(np.abs(x @ coef - step_ms) / step_ms)))
    return errors


def main() -> None:
    prefix = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_PREFIX
    by_set = {name: samples(RUNS / f"{prefix}{tail}") for name, tail in SETS.items()}
    grid = np.linspace(0.0, 1.0, 11)
    print("1. median |relative error| of the plain step's linear fit, by s (the cost of a shared "
          "prefix's read by one more request, 1 = a first read)")
    print(f"{'lines':10s}{'n':>6s}{'summed/pool p50':>17s}"
          + "".join(f"{s:>7.1f}" for s in grid) + "   best s")
    for name, found in [*by_set.items(), ("both", by_set["coding"] + by_set["agentic"])]:
        errors = median_errors(found, grid)
        ratio = statistics.median(x.kv_tokens / x.pool_tokens for x in found)
        print(f"{name:10s}{len(found):6d}{ratio:17.2f}" + "".join(f"{e:7.3f}" for e in errors)
              + f"   {grid[int(np.argmin(errors))]:.1f}")

    coding = [x for x in by_set["coding"] if x.batch <= 64]
    agentic = {"baseline": by_set["agentic"],
               "zero-step": samples(RUNS / f"{prefix}{SETS['agentic']}", "zero-step")}
    print(f"\n2. {PROFILE} at s: agentic real / model over the card's factor, plain / "
          "zero-step, by running count")
    profile = load_profile(PROFILE)
    for share in (1.0, 0.7, 0.5, 0.4, 0.3, 0.0):
        card = real_over_model(coding, profile, share)  # coding shares nothing: any s
        cells = "  ".join(
            f"{b:>3d}: " + " / ".join(
                f"{real_over_model([x for x in found if x.batch == b], profile, share) / card:.2f}"
                for found in agentic.values())
            for b in LEVELS)
        print(f"s = {share:.1f} (card {card:.3f})  {cells}")


if __name__ == "__main__":
    main()
