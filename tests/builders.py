"""Synthetic run directories for the analysis, plot, report and regress tests.

Every builder writes a real run directory through :mod:`specbench.results` (point files with
per-request rows, manifest, summary), so the code under test reads it exactly as it reads a
measured run.

- :func:`make_run` (with :func:`static_curves`, :func:`baseline_curve` and
  :func:`ratio_crossing_at`): curves given per (mode, prompt set), for the analysis, the
  figures and the report.
- :func:`make_regress_run` (with :func:`model_tok_s`, :func:`scaled` and
  :func:`with_repeat_noise`): a run as `specbench sweep` leaves it, with prompt-set hashes and
  the settings the regression gate compares.
- :func:`rounded_json`: JSON with floats cut to ten digits, before a snapshot compares it
  (:func:`tests.snapshot.assert_snapshot`).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specbench import config, configurations, results
from specbench.config import SweepConfig
from specbench.results import (
    Manifest,
    PointKey,
    PromptSetRecord,
    ServerRecord,
    rebuild_summary,
    write_point,
)
from specbench.results.manifest import EngineRecord
from specbench.results.store import write_json

GRID = (1, 2, 4, 8, 16, 64, 128)
Curve = Mapping[int, "float | Sequence[float]"]


# ---------------------------------------------------------------------------------------------
# the manifest


def write_manifest(
    run_dir: Path,
    cfg: SweepConfig,
    hashes: Mapping[str, str | None],
    servers: Mapping[str, ServerRecord] | None = None,
    tuned: Mapping[str, Mapping[str, int]] | None = None,
) -> None:
    """A typed manifest as the sweep writes one; a set whose hash is None goes unrecorded."""
    Manifest(
        specbench_version="test",
        command=[],
        config=cfg,
        seed=cfg.load.seed,
        fingerprint={},
        engine=EngineRecord(kind=cfg.engine),
        time_scale=1.0,
        prompt_sets={name: PromptSetRecord(path=f"{name}.jsonl", sha256=digest, n_requests=100)
                     for name, digest in hashes.items() if digest is not None},
        servers=dict(servers or {}),
        tuned={name: dict(slots) for name, slots in (tuned or {}).items()},
        started_at="2026-12-01T00:00:00+00:00",
        status="complete",
    ).save(run_dir)


# ---------------------------------------------------------------------------------------------
# snapshot normalisation


def rounded_json(text: str, digits: int = 10) -> str:
    """JSON text with every float rounded to `digits` significant digits.

    The last digits of a float depend on the order of floating-point operations (and numpy's
    SIMD paths differ between machines), not on anything a user reads; ten digits still pin
    every printed number.
    """

    def rounded(obj: Any) -> Any:
        if isinstance(obj, float):
            return float(f"{obj:.{digits}g}")
        if isinstance(obj, list):
            return [rounded(v) for v in obj]
        if isinstance(obj, dict):
            return {k: rounded(v) for k, v in obj.items()}
        return obj

    return json.dumps(rounded(json.loads(text)), indent=2) + "\n"


# ---------------------------------------------------------------------------------------------
# curves for the analysis, figures and report


def baseline_curve(c: float) -> float:
    """A saturating baseline: 150 tok/s per user, knee at 64 users."""
    return 150.0 * c / (1.0 + c / 64.0)


def ratio_crossing_at(c_star: float, slope: float = 0.2) -> Callable[[float], float]:
    """r(c) linear in log2 c, equal to 1 at c_star."""
    return lambda c: 1.0 + slope * (math.log2(c_star) - math.log2(c))


def make_run(
    root: Path,
    curves: Mapping[tuple[str, str], Curve],
    *,
    running: Mapping[tuple[str, str], Mapping[int, float]] | None = None,
    ci_rel: float | None = 0.02,
    window_s: float = 10.0,
    n_requests: int = 24,
    accept_length: float = 3.0,
    accept_lengths: Mapping[str, float] | None = None,
    flags: Mapping[tuple[str, str, int], str] | None = None,
    threshold: int | None = None,
    se_rel: float | None = None,
    slice_lag1: float = -0.1,
    tuned: Mapping[str, Mapping[str, int]] | None = None,
    paired_noise: float | None = None,
) -> Path:
    """Write <root>/run; a curve maps c to tok/s (or one tok/s per repeat).

    ci_rel sets output_tok_s_ci_low/high to ±ci_rel of the value; None leaves the columns out,
    so a single repeat carries no measure of its noise. se_rel sets the batch-means standard
    error (output_tok_s_se, 10 slices with lag-1 autocorrelation slice_lag1; -0.1 is what
    independent slices give on average). `tuned` is the manifest's tuned schedules per set.
    accept_lengths: tokens per verify by configuration where it is not accept_length (category
    b accepts one less either way).
    paired_noise writes what request pairing needs: request k is prompt k in every
    configuration, with a duration (send to last token) of that prompt's work over the point's
    tok/s per user, times 1 + paired_noise x a standard normal of its own, and tokens inside the
    window at that rate over its time there, off by the same factor.
    """
    run_dir = root / "run"
    rng = np.random.default_rng(7)
    modes = sorted({m for m, _ in curves})
    sets = sorted({s for _, s in curves})
    levels = sorted({c for curve in curves.values() for c in curve})
    cfg = SweepConfig(modes=tuple(modes), prompt_sets=tuple(sets), concurrency=tuple(levels),
                      threshold=threshold)
    servers = {m: ServerRecord(kind=configurations.parse(m).kind, argv=["--model-path", "m"],
                               url="http://127.0.0.1:30000") for m in modes}
    write_manifest(run_dir, cfg, {s: f"sha-{s}" for s in sets}, servers, tuned)
    for (mode, prompt_set), curve in curves.items():
        for c, values in curve.items():
            per_repeat = [values] if isinstance(values, (int, float)) else list(values)
            for repeat, tok_s in enumerate(per_repeat):
                weights = rng.uniform(0.5, 1.5, n_requests)
                window_tokens = np.round(weights / weights.sum() * tok_s * window_s)
                completion = window_tokens + 20
                spec = mode != "baseline"
                # Category b accepts less, as agentic tool calls do.
                category = np.where(np.arange(n_requests) % 2 == 0, "a", "b")
                mode_accept = (accept_lengths or {}).get(mode, accept_length)
                accept = np.where(category == "a", mode_accept, mode_accept - 1.0)
                t_send_s = np.linspace(-1.0, window_s - 2.0, n_requests)
                t_end_s = t_send_s + 1.0
                ids: list[Any] = [f"r{i}" for i in range(n_requests)]
                extra: dict[str, Any] = {}
                if paired_noise is not None:
                    work = np.random.default_rng(c).uniform(0.5, 1.5, n_requests)
                    noise = 1 + paired_noise * rng.standard_normal(n_requests)
                    t_end_s = t_send_s + work * 100.0 / (tok_s / c) * np.maximum(noise, 0.1)
                    t_end_s = np.minimum(t_end_s, window_s)
                    # Tokens inside the window at the user's rate, off by the same noise.
                    in_window = np.clip(t_end_s, 0, window_s) - np.clip(t_send_s, 0, window_s)
                    window_tokens = tok_s / c * in_window * np.maximum(noise, 0.1)
                    ids = list(range(n_requests))
                    extra["prompt_id"] = [f"p{i}" for i in range(n_requests)]
                requests = pd.DataFrame({
                    "request_id": ids,
                    **extra,
                    "category": category,
                    "status": "ok",
                    "t_send_s": t_send_s,
                    "t_end_s": t_end_s,
                    "e2e_ms": np.full(n_requests, 1000.0),
                    "finished_in_window": (t_end_s > 0) & (t_end_s <= window_s),
                    "completion_tokens": completion,
                    "spec_verify_ct": np.round(completion / accept) if spec else np.nan,
                    "window_tokens": window_tokens,
                })
                run_c = (running or {}).get((mode, prompt_set), {}).get(c, float("nan"))
                summary = {
                    "n_requests": n_requests, "n_errors": 0, "window_s": window_s,
                    "output_tok_s": float(tok_s), "requests_per_s": n_requests / window_s,
                    "ttft_ms_p50": 20.0 + c, "ttft_ms_p99": 40.0 + 2 * c,
                    "itl_ms_p50": (5.0 if spec else 8.0) + 0.05 * c,
                    "itl_ms_p99": (9.0 if spec else 12.0) + 0.1 * c,
                    "e2e_ms_p50": 1000.0, "accept_length": mode_accept if spec else None,
                    "server_output_tok_s": float(tok_s), "server_running_reqs_mean": run_c,
                    "flags": (flags or {}).get((mode, prompt_set, c), ""),
                }
                if ci_rel is not None:
                    summary["output_tok_s_ci_low"] = tok_s * (1 - ci_rel)
                    summary["output_tok_s_ci_high"] = tok_s * (1 + ci_rel)
                if se_rel is not None:
                    summary.update(output_tok_s_se=tok_s * se_rel, output_tok_s_slices=10,
                                   output_tok_s_slice_lag1=slice_lag1)
                write_point(run_dir, PointKey(mode, prompt_set, c, repeat), requests, summary)
    rebuild_summary(run_dir)
    return run_dir


def static_curves(
    ratio: Callable[[float], float], prompt_set: str = "coding", levels: Sequence[int] = GRID,
    zero_step: float | None = None,
) -> dict[tuple[str, str], dict[int, float]]:
    """Baseline and EAGLE-3 (baseline x ratio); with `zero_step`, a zero-step curve at that
    fraction of the baseline (0.88: a 12% tax)."""
    curves = {
        ("baseline", prompt_set): {c: baseline_curve(c) for c in levels},
        ("eagle3", prompt_set): {c: baseline_curve(c) * ratio(c) for c in levels},
    }
    if zero_step is not None:
        curves[("zero-step", prompt_set)] = {c: baseline_curve(c) * zero_step for c in levels}
    return curves


# Speed-up over the baseline per K at c = 1, falling by `slope` per doubling of c: more steps
# win at low load and lose faster under load (so the best K moves 5 -> 3 -> 1 -> 0 with c).
# Best K: 5 at c <= 4, 3 at 8-16, 2 at 64, zero-step at 128 (crossings near c = 7.2, 32, 104).
K_CURVES: dict[int, tuple[float, float]] = {1: (1.3, 0.065), 2: (1.55, 0.1), 3: (1.8, 0.15),
                                            5: (2.0, 0.22)}
ZERO_STEP_FRACTION = 0.88


def k_speedup(k: int, c: float) -> float:
    """EAGLE-3 at K over the baseline at c (zero-step for K = 0)."""
    if k == 0:
        return ZERO_STEP_FRACTION
    at_1, slope = K_CURVES[k]
    return at_1 - slope * math.log2(c)


def tune_curves(
    prompt_set: str = "coding", levels: Sequence[int] = GRID, *, tuned: float | None = None,
    sglang_default: float | None = None,
) -> dict[tuple[str, str], dict[int, float]]:
    """The static curves `specbench tune` measures (baseline, K = 1, 2, 3, 5, zero-step); with
    `tuned` / `sglang_default`, those servers at that fraction of the best static curve."""
    names = {1: "eagle3-k1", 2: "eagle3-k2", 3: "eagle3", 5: "eagle3-k5", 0: "zero-step"}
    curves = {("baseline", prompt_set): {c: baseline_curve(c) for c in levels}}
    for k, name in names.items():
        curves[(name, prompt_set)] = {c: baseline_curve(c) * k_speedup(k, c) for c in levels}
    best = {c: baseline_curve(c) * max(k_speedup(k, c) for k in names) for c in levels}
    for name, fraction in (("tuned", tuned), ("sglang-default", sglang_default)):
        if fraction is not None:
            curves[(name, prompt_set)] = {c: best[c] * fraction for c in levels}
    return curves


# ---------------------------------------------------------------------------------------------
# runs for the regression gate

REGRESS_LEVELS = (1, 2, 4, 8, 16, 32, 64, 128)
REGRESS_SETS = ("coding", "agentic")
REGRESS_MODES = ("baseline", "eagle3")

Tok = Callable[[str, str, int, int], float]


def model_tok_s(mode: str, prompt_set: str, c: int, repeat: int) -> float:
    """Baseline saturating in c; EAGLE-3 speedup 1.6x at c=1 falling to 1.0 at c=32."""
    base = 90.0 * c / (1 + c / 64)
    if mode == "baseline":
        return base
    return base * (1.6 - 0.12 * math.log2(c))


def model_accept(mode: str, prompt_set: str, c: int, repeat: int) -> float | None:
    if mode == "baseline":
        return None
    return 3.2 if prompt_set == "coding" else 2.6


def make_regress_run(
    path: Path,
    tok: Tok = model_tok_s,
    *,
    accept: Callable[[str, str, int, int], float | None] = model_accept,
    levels: tuple[int, ...] = REGRESS_LEVELS,
    modes: tuple[str, ...] = REGRESS_MODES,
    sets: tuple[str, ...] = REGRESS_SETS,
    repeats: int = 1,
    ci_pct: float | None = 2.0,
    errors: Callable[[str, str, int], int] = lambda m, s, c: 0,
    sim_profile: str = config.SIM_DEFAULT_PROFILE,
    model_path: str = "meta-llama/Llama-3.1-8B-Instruct",
    hashes: dict[str, str | None] | None = None,
    analysis: dict[str, Any] | None = None,
    keep_points: bool = True,
) -> Path:
    """A run directory as `specbench sweep` writes it; ci_pct None leaves out the CI columns."""
    cfg = config.SweepConfig(
        modes=modes, prompt_sets=sets, concurrency=levels,
        server=config.ServerConfig(model_path=model_path),
        sim=config.SimConfig(profile=sim_profile),
        load=config.LoadConfig(repeats=repeats),
    )
    hashes = hashes if hashes is not None else {s: f"sha-{s}" for s in sets}
    write_manifest(path, cfg, hashes)
    for mode in modes:
        for pset in sets:
            for c in levels:
                for r in range(repeats):
                    value = tok(mode, pset, c, r)
                    summary: dict[str, Any] = {
                        "n_requests": 50, "n_errors": errors(mode, pset, c), "window_s": 8.0,
                        "output_tok_s": value, "requests_per_s": value / 200,
                        "accept_length": accept(mode, pset, c, r) or math.nan, "flags": "",
                        # what the gate does not read, present as in every real summary row
                        "ttft_ms_p50": 20.0, "ttft_ms_p99": 40.0, "itl_ms_p50": 6.0,
                        "itl_ms_p99": 10.0, "e2e_ms_p50": 1000.0, "server_output_tok_s": value,
                        "server_running_reqs_mean": float(c),
                    }
                    if ci_pct is not None:
                        summary["output_tok_s_ci_low"] = value * (1 - ci_pct / 100)
                        summary["output_tok_s_ci_high"] = value * (1 + ci_pct / 100)
                    rows = pd.DataFrame({"window_tokens": [100, 120, 90]})
                    key = results.PointKey(mode, pset, c, r)
                    results.write_point(path, key, rows, summary)
    results.rebuild_summary(path)
    if analysis is not None:
        write_json(path / "analysis.json", analysis)
    if not keep_points:
        # A committed reference keeps only manifest.json and the summary.
        shutil.rmtree(path / "points")
    return path


def scaled(factor: Callable[[str, str, int, int], float], tok: Tok = model_tok_s) -> Tok:
    return lambda m, s, c, r: tok(m, s, c, r) * factor(m, s, c, r)


def with_repeat_noise(tok: Tok, pct: float = 1.0) -> Tok:
    """Distinct values per repeat (no ties), within +-pct%."""
    return lambda m, s, c, r: tok(m, s, c, r) * (1 + pct / 100 * (r - 1))
