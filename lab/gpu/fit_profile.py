"""Fit the simulator's step-time model to the step times a real SGLang server logged.

SGLang prints a ``Decode batch`` line every 40 decode steps::

    Decode batch, #running-req: B, #token: N, token usage: U, [accept len: A, accept rate: R, ]
    cuda graph: True, gen throughput (token/s): X, #queue-req: Q

``X`` is the tokens generated since the previous such line over the wall time since then, so
one decode step took ``B * A / X`` (A = 1 for a plain server) *if* nothing else ran in between.
A line is kept (steady) only when the line before it in the same log was a decode line with the
same batch size (no prefill forward, no finished or admitted request in the interval) and
nothing was queued. The line's context is its requests' contexts summed at the middle of the
interval (RunningContexts: each ``Prefill batch`` line's new + cached tokens per sequence, plus
40·A output per decode line, the newest B kept), not ``N``: the KV pool counts a prefix shared
by several requests once, while each request's attention reads all of it and the simulator
charges each request's whole context (agentic users share long prefixes; ``N`` put their
zero-step lines at B=64 40 % above the model).

The steady steps are grouped by (mode, batch, context bucket) and the cost model
(specbench/sim/costmodel.py) is fitted to the groups' median step times, on log time, each group
weighted by its line count (every steady line counts once):

1. the plain decode, from ``baseline.log``: the attention bandwidth, the per-request KV walk that
   bounds it at small batch, the per-forward and per-request overheads. The walk's tail (the
   longest request's share, ``walk_tail_batch``) is kept from the profile: each line's longest
   context is followed too, but only runs logged every step place it (the tail table);
2. the speculative step, from ``eagle3*.log`` (K=3 verify + 3 draft steps) and
   ``zero-step*.log`` (SGLang's steps-0 one-token verify + draft extend), with the plain-decode
   numbers fixed: the verify kernel's ``verify_kappa`` and walk, and the speculative overheads.

3. the prefill's interference at load. Best from runs logged every decode step
   (``--decode-log-interval 1``, given with ``--steps-run``; a coding and an agentic one are
   committed): a decode line with prefill lines before it is one decode step plus those
   prefill forwards, and the steady steps of the same batch beside it give the step, so the
   rest is what the forwards cost. The model's extend (prefill) is the verify's Triton kernel
   (costmodel.extend_attention_ms: a cached prefix costs a verify's read and one request's
   walk), so ``o_prefill_ms`` is all that is fitted: the mean extra per short forward of the
   plain server, and ``o_spec_prefill_per_running_req_ms`` what EAGLE-3's add per running
   request. Without such runs, the 40-step intervals: ``40 · B · A / X`` less 40 model decode
   steps, ``o_prefill_ms`` a least-absolute-deviations fit over the baseline's intervals at
   batch >= 4 (absolute deviations, because an interval across the pause between two load
   points holds idle time), and the EAGLE-3 term printed, not written: those intervals also
   hold batches that changed inside them, which this reads as prefill time (~2 ms per running
   request where one step at a time measures ~0).

4. the frontend stage (SGLang's tokenizer manager: HTTP, chat template, tokenizer, one process)
   and the prefill's attention FLOP rate, from the time to first token of every c=1 request row
   and its own ``Prefill batch`` lines: fit_frontend.py. The prefill overhead of step 3 depends
   on the FLOP rate and the other way round, so the two are fitted in turn until they settle.

5. the prompt-token count, from the run's per-request rows (``points/*/*/*.parquet``, the
   ``prompt_tokens`` the server reported): the simulator renders each request as it would
   (specbench/sim/workload.py: each message's text only when the profile's
   ``prompt_renders_tools`` is false) and ``prompt_tokens_per_piece`` is the real tokens over
   the rendering's pre-tokenizer pieces, summed over every request row.

Everything else (GEMM rooflines, memory, acceptance) comes from the profile given with
``--profile``. The script prints the real and model step time per group and the fitted values;
``--write`` puts them into a profile TOML (comments kept), ``--check`` exits 1 when a TOML's
values drift from the fit or miss the step times by more than ``--tolerance``.

    R=results/gpu/h200-sglang-0.5.17-llama8b-shape-q0.3
    python3 lab/gpu/fit_profile.py $R --steps-run $R-agentic-steps \\
        --steps-run $R-coding-steps --steps-run $R-agentic-c4 --steps-run $R-coding-small \\
        --check specbench/sim/profiles/llama-3.1-8b-1xh200-triton.toml

The fit (steps 1-3 and 5) is tests/fit_steps.py, which the tests that hold the bundled profiles
to these runs use too; this script adds the frontend fit (fit_frontend.py), the tables and
--write.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# The fit itself lives with the tests that hold the bundled profiles to the real runs.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from fit_frontend import (  # type: ignore[import-not-found]  # this script's folder
    first_tokens,
    fit_first_token,
    print_first_token_table,
    print_load_table,
    print_output_flow_table,
    print_output_hold_table,
)

from specbench.sim.costmodel import Profile, load_profile
from tests.fit_steps import (
    MODES,
    SPEC_PREFILL_PARAM,
    STEP_PREFILL_MAX_NEW,
    Param,
    PrefillInterval,
    PromptCount,
    StepGroup,
    StepSample,
    bucket_of,
    check,
    fit_run,
    get_value,
    is_short_step_interval,
    model_prefills_ms,
    model_step_ms,
    parse_decode_log,  # noqa: F401  # shared_prefix_reads.py reads it through here
    prefill_extra_ms,
    read_run_logs,
    rounded,
)

WINDOW_S = 8.0  # the run's --window-s (the load table's first tokens per second)
# Kept from the profile (the walk's tail, [overheads] walk_tail_batch): 40-step lines cannot
# place it; print_tail_table shows it against the runs logged every step.
TAIL_MAX_BATCH = 16
FIRST_TOKEN_PARAMS = (
    Param("frontend", "request_ms", 0.0, 1000.0),
    Param("frontend", "prompt_token_us", 0.0, 1000.0),
    Param("target_attention", "prefill_flops_per_s", 1e13, 1e16, tied=("draft_attention",)),
)
FIRST_TOKEN_ROUNDS = 4  # prefill overhead <-> FLOP rate: settled to 3 digits after 3


def print_prefill_table(profile: Profile, intervals: Sequence[PrefillInterval]) -> None:
    print("\nprefill at load: per prefill forward, median over the intervals with prefills")
    print(
        f"{'mode':9s} {'B':>4s} {'intervals':>9s} {'prefills':>8s} {'new tok':>8s} "
        f"{'real ms':>8s} {'model ms':>8s}"
    )
    buckets: dict[tuple[str, int], list[PrefillInterval]] = defaultdict(list)
    levels = (1, 4, 16, 32, 64, 128)
    for iv in intervals:
        level = min(levels, key=lambda c: abs(math.log(c / iv.batch)))
        buckets[(iv.mode, level)].append(iv)
    order = {m: i for i, m in enumerate(MODES)}
    for mode, level in sorted(buckets, key=lambda k: (order[k[0]], k[1])):
        ivs = buckets[(mode, level)]
        # Medians per prefill forward (idle pauses between load points make means useless).
        real = statistics.median(prefill_extra_ms(profile, iv) / len(iv.prefills) for iv in ivs)
        model = statistics.median(model_prefills_ms(profile, iv) / len(iv.prefills) for iv in ivs)
        note = "  (idle client gaps)" if level == 1 else ""
        print(
            f"{mode:9s} {level:4d} {len(ivs):9d} {sum(len(iv.prefills) for iv in ivs):8d} "
            f"{sum(n for iv in ivs for _, n, _ in iv.prefills):8d} {real:8.1f} {model:8.1f}"
            f"{note}"
        )


def print_tail_table(profile: Profile, step_runs: Sequence[tuple[str, list[StepSample]]]) -> None:
    """Small batches one step at a time: the real step, the model with the mean request's walk
    and with the profile's tail (the longest request's walk)."""
    print("\nthe KV walk's tail, one step at a time: median step ms at small batch")
    print(f"{'run':24s} {'mode':9s} {'B':>3s} {'lines':>5s} {'ctx/req':>7s} {'longest':>7s} "
          f"{'real':>6s} {'mean walk':>9s} {'tail':>6s}")
    flat = dataclasses.replace(
        profile, overheads=dataclasses.replace(profile.overheads, walk_tail_batch=0.0))
    for name, samples in step_runs:
        by_key: dict[tuple[str, int], list[StepSample]] = defaultdict(list)
        for smp in samples:
            if smp.batch <= TAIL_MAX_BATCH:
                by_key[(smp.mode, smp.batch)].append(smp)
        for (mode, batch), v in sorted(by_key.items()):
            if len(v) < 5:
                continue
            kv = statistics.fmean(x.kv_tokens for x in v)
            group = StepGroup(
                mode=mode, batch=batch, bucket=bucket_of(kv / batch), n_lines=len(v),
                kv_tokens=kv, accept_length=statistics.fmean(x.accept_length for x in v),
                step_ms=statistics.median(x.step_ms for x in v),
                longest_tokens=statistics.fmean(x.longest_tokens for x in v))
            print(f"{name[-24:]:24s} {mode:9s} {batch:3d} {len(v):5d} "
                  f"{group.context_tokens:7.0f} {group.longest_tokens:7.0f} {group.step_ms:6.2f} "
                  f"{model_step_ms(flat, group):9.2f} {model_step_ms(profile, group):6.2f}")


def print_step_prefill_table(
    profile: Profile, runs: Sequence[tuple[str, Sequence[PrefillInterval]]]
) -> None:
    """Per run logged every step, mode and level: the short prefill forwards' mean real cost
    (beyond the real step beside them) and the model's."""
    print("\nprefill at load, one step at a time: mean per short prefill forward "
          f"(< {STEP_PREFILL_MAX_NEW} new tokens a sequence)")
    print(f"{'run (end of name)':18s} {'mode':9s} {'B':>4s} {'intervals':>9s} {'forwards':>8s} "
          f"{'seqs':>5s} {'real ms':>8s} {'model ms':>8s}")
    levels = (8, 16, 32, 64, 128)
    for name, intervals in runs:
        buckets: dict[tuple[str, int], list[PrefillInterval]] = defaultdict(list)
        for iv in intervals:
            if iv.batch < 8 or not is_short_step_interval(iv):
                continue
            buckets[(iv.mode, min(levels, key=lambda c: abs(math.log(c / iv.batch))))].append(iv)
        for (mode, level), ivs in sorted(buckets.items()):
            forwards = sum(len(iv.prefills) for iv in ivs)
            real = sum(prefill_extra_ms(profile, iv) for iv in ivs) / forwards
            model = sum(model_prefills_ms(profile, iv) for iv in ivs) / forwards
            seqs = sum(n for iv in ivs for n, _, _ in iv.prefills)
            short_name = "-".join(name.split("-")[-2:])
            print(f"{short_name:18s} {mode:9s} {level:4d} {len(ivs):9d} {forwards:8d} "
                  f"{seqs:5d} {real:8.1f} {model:8.1f}")


def print_prompt_table(counts: Sequence[PromptCount], tokens_per_piece: float) -> None:
    print("\nprompt tokens per request row: the real server's count vs the simulator's")
    print(
        f"{'set':8s} {'rows':>5s} {'real':>7s} {'sim':>7s} {'gap':>7s} {'row p10':>7s} "
        f"{'row p90':>7s} {'chars p10':>9s} {'chars p90':>9s} {'chars/4 +tools':>14s}"
    )
    by_set: dict[str, list[PromptCount]] = defaultdict(list)
    for c in counts:
        by_set[c.prompt_set].append(c)
    for name, cs in sorted(by_set.items()):
        real = statistics.fmean(c.real_tokens for c in cs)
        sims = [max(1, math.ceil(c.pieces * tokens_per_piece)) for c in cs]
        # Per row, sim over real; the characters at the ratio that fits these rows as a whole.
        row = np.quantile([s / c.real_tokens for s, c in zip(sims, cs, strict=True)], [0.1, 0.9])
        chars_per_token = sum(c.chars for c in cs) / sum(c.real_tokens for c in cs)
        by_chars = np.quantile(
            [c.chars / chars_per_token / c.real_tokens for c in cs], [0.1, 0.9])
        generic = statistics.fmean(math.ceil(c.rendered_chars / 4) for c in cs)
        print(
            f"{name:8s} {len(cs):5d} {real:7.0f} {statistics.fmean(sims):7.0f} "
            f"{100 * (statistics.fmean(sims) / real - 1):+6.1f}% {row[0]:7.2f} {row[1]:7.2f} "
            f"{by_chars[0]:9.2f} {by_chars[1]:9.2f} {generic:14.0f}"
        )


def print_table(profile: Profile, groups: Sequence[StepGroup], title: str) -> list[float]:
    print(title)
    print(
        f"{'mode':9s} {'B':>4s} {'context':>8s} {'lines':>5s} {'ctx/req':>7s} {'accept':>6s} "
        f"{'real ms':>8s} {'model ms':>8s} {'gap':>7s}"
    )
    errors = []
    for g in groups:
        model = model_step_ms(profile, g)
        err = model / g.step_ms - 1.0
        errors.append(err)
        print(
            f"{g.mode:9s} {g.batch:4d} {g.bucket:>8s} {g.n_lines:5d} {g.context_tokens:7.0f} "
            f"{g.accept_length:6.2f} {g.step_ms:8.2f} {model:8.2f} {100 * err:+6.1f}%"
        )
    return errors


def summarize(errors: Sequence[float], groups: Sequence[StepGroup], label: str) -> None:
    lines = sum(g.n_lines for g in groups)
    abs_err = sorted(abs(e) for e in errors)
    print(
        f"{label}: {len(groups)} groups from {lines} steady lines; |gap| median "
        f"{100 * statistics.median(abs_err):.1f}%, max {100 * abs_err[-1]:.1f}%"
    )


def set_toml_value(text: str, section: str, key: str, value: float) -> str:
    """Replace `key = ...` inside `[section]` of a TOML text, keeping its comment."""
    head = re.search(rf"^\[{re.escape(section)}\]\s*$", text, flags=re.M)
    if head is None:
        raise SystemExit(f"no [{section}] table in the profile; add it before --write")
    nxt = re.search(r"^\[", text[head.end() :], flags=re.M)
    end = head.end() + (nxt.start() if nxt else len(text[head.end() :]))
    body = text[head.end() : end]
    pattern = re.compile(rf"^(?P<lhs>{re.escape(key)}\s*=\s*)(?P<val>[^\s#]+)", flags=re.M)
    if pattern.search(body) is None:
        raise SystemExit(f"no {key} in [{section}] of the profile; add it before --write")
    old_width = len(pattern.search(body)["val"])  # type: ignore[index]
    new = f"{value:g}".replace("e+", "e")
    body = pattern.sub(lambda m: m["lhs"] + new.ljust(old_width), body, count=1)
    return text[: head.end()] + body + text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a real run: RUN/servers/<mode>.log")
    parser.add_argument(
        "--profile",
        default="llama-3.1-8b-1xh200-triton",
        help="start values and the numbers not fitted (bundled name or TOML path)",
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--write", type=Path, help="write the fitted values into this profile TOML")
    out.add_argument("--check", type=Path, help="exit 1 if this TOML drifts from the fit")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.15,
        help="--check: largest step-time gap allowed for a group of >= 5 lines (default 0.15)",
    )
    parser.add_argument(
        "--flow-of",
        type=Path,
        action="append",
        default=[],
        metavar="RUN",
        help="a simulated run of the same levels: its output flow beside the real run's",
    )
    parser.add_argument(
        "--steps-run",
        type=Path,
        action="append",
        default=[],
        metavar="RUN",
        help="a run logged with --decode-log-interval 1: the prefill overheads come from it",
    )
    parser.add_argument(
        "--prompt-set",
        help="fit on this set's points only (the others are then held out: check them with a "
             "simulated sweep and `specbench compare`)",
    )
    parser.add_argument(
        "--keep-frontend",
        action="store_true",
        help="keep --profile's frontend and prefill FLOP rate (the c=1 rows are too few to fit "
             "them, or held a first-use compile)",
    )
    args = parser.parse_args(argv)

    # Every server's lines by mode (eagle3.2.log is a restart of eagle3), for the c=1 rows.
    logs, logs_by_mode = read_run_logs(args.run_dir, args.prompt_set)
    first, unmatched = ([], 0) if args.keep_frontend else first_tokens(
        args.run_dir, logs_by_mode, args.prompt_set or "*")
    start = load_profile(args.profile)
    found = fit_run(
        args.run_dir, start, logs, logs_by_mode, prompt_set=args.prompt_set,
        steps_runs=args.steps_run,
        first_token_fit=(lambda p: fit_first_token(p, first)) if first else None,
        first_token_params=FIRST_TOKEN_PARAMS, first_token_rounds=FIRST_TOKEN_ROUNDS)
    if found is None:
        print(f"no steady decode lines in {args.run_dir}/servers/*.log", file=sys.stderr)
        return 2
    fitted, groups, params, values = found.fitted, found.groups, found.params, found.values

    errors = print_table(fitted, groups, "steady decode steps, SGLang's log vs the fitted model")
    summarize(errors, groups, "all")
    for mode in MODES:
        idx = [i for i, g in enumerate(groups) if g.mode == mode]
        if idx:
            summarize([errors[i] for i in idx], [groups[i] for i in idx], f"  {mode}")
    print_prefill_table(fitted, found.intervals)
    if found.step_runs:
        print_step_prefill_table(fitted, found.step_runs)
        print_tail_table(fitted, found.step_samples)
    if first:
        print_first_token_table(fitted, first, unmatched)
        print_load_table(fitted, args.run_dir, WINDOW_S)
        print_output_hold_table(args.run_dir, WINDOW_S)
        print_output_flow_table([args.run_dir, *args.flow_of], WINDOW_S)
    if found.counts:
        print_prompt_table(found.counts, fitted.workload.prompt_tokens_per_piece)
    print("\nfitted parameters (3 significant digits):")
    for p, v in zip(params, values, strict=True):
        tied = f"  (also [{', '.join(p.tied)}])" if p.tied else ""
        print(f"  [{p.section}] {p.key} = {v:g}{tied}")

    if not found.step_runs:
        print(
            f"  [overheads] {SPEC_PREFILL_PARAM.key} = {rounded(found.spec_prefill_ms):g} "
            f"measured on 40-step intervals, {get_value(start, SPEC_PREFILL_PARAM):g} in the "
            "profile (not written: pass --steps-run for a run logged every step)"
        )

    if args.write:
        text = args.write.read_text()
        for p, v in zip(params, values, strict=True):
            for section in (p.section, *p.tied):
                text = set_toml_value(text, section, p.key, v)
        args.write.write_text(text)
        print(f"\nwrote {args.write}")
    if args.check:
        return check(args.check, params, values, groups, args.tolerance)
    return 0


if __name__ == "__main__":
    sys.exit(main())
