"""The frontend stage and the prefill FLOP rate, from a real run's time to first token at c=1.

At one user, a request's time to first token is the tokenizer manager's serial work on it
(HTTP, chat template, tokenizer: specbench/sim/frontend.py) plus the GPU prefill of its
uncached tokens. SGLang's own ``Prefill batch`` log line of each c=1 request gives the new and
cached tokens of every prefill forward (a prompt over --chunked-prefill-size takes two), so the
GPU part is the cost model's ``prefill_step`` over exactly those chunks, and

    ttft = request_ms + prompt_token_us * prompt_tokens / 1000 + fixed GPU part + FLOPs / F

is linear in (request_ms, prompt_token_us, 1/F): one least squares over every c=1 request row
of the run, all modes (the draft's prefill included for the speculative ones). The per-token
part is per prompt token (the whole prompt is tokenized, cached or not); a prompt's tokens and
its rendered characters are proportional to within a few per cent here, and the tool schemas,
which the template drops, cost nothing measurable to parse.

Two checks print beside the fit, from the run's busier points:

* the stage's load at each level: first tokens per second over the window (the rate at which
  requests got through) times the fitted service of their prompts; at 1 the stage would be the
  bottleneck;
* the output hold: requests that waited long for their first token, and how fast the next
  chunks followed. Chunks 1-3 ms apart, where a decode step takes ~10, were made earlier and
  held back by the busy process: the profile's ``holds_output``.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.sim.costmodel import Profile, prefill_step

PREFILL_RE = re.compile(
    r"^\[[^\]]+\] Prefill batch, #new-seq: (?P<seqs>\d+), #new-token: (?P<new>\d+), "
    r"#cached-token: (?P<cached>\d+), token usage: [\d.]+, #running-req: (?P<running>\d+)"
)
# A first token this late counts as waited-for in the output-hold table.
LATE_FIRST_TOKEN_MS = 500.0


@dataclass(frozen=True)
class FirstToken:
    """One c=1 request row with the prefill forwards SGLang logged for it."""

    mode: str
    prompt_id: str
    prompt_tokens: int
    ttft_ms: float
    chunks: tuple[tuple[int, int], ...]  # (new tokens, cached tokens) per prefill forward


def _idle_prefills(lines: Sequence[str]) -> list[tuple[int, int]]:
    """(new, cached) of the one-request prefill forwards with nothing else running."""
    out = []
    for line in lines:
        m = PREFILL_RE.match(line)
        if m and m["seqs"] == "1" and m["running"] == "0":
            out.append((int(m["new"]), int(m["cached"])))
    return out


def _chunkings(prefills: Sequence[tuple[int, int]], tokens: int) -> set[tuple]:
    """Every way the log shows a prompt of `tokens` prefilled: one line, or two in a row."""
    found: set[tuple] = set()
    for i, (new, cached) in enumerate(prefills):
        if new + cached == tokens:
            found.add(((new, cached),))
        if i + 1 < len(prefills):
            nxt = prefills[i + 1]
            if new + cached + nxt[0] == tokens and nxt[1] == 0:
                found.add(((new, cached), (nxt[0], new + cached)))
    return found


def first_tokens(
    run_dir: Path, logs_by_mode: dict[str, list[list[str]]], prompt_set: str = "*"
) -> tuple[list[FirstToken], int]:
    """The run's c=1 rows (of `prompt_set`, or all) matched to their prefill lines; also how
    many rows found no single match (a prompt prefilled twice with different cache hits is
    left out)."""
    rows: list[FirstToken] = []
    unmatched = 0
    for path in sorted(run_dir.glob(f"points/*/{prompt_set}/c1-*.parquet")):
        mode = path.parts[-3]
        prefills = [p for lines in logs_by_mode.get(mode, []) for p in _idle_prefills(lines)]
        frame = pd.read_parquet(path, columns=["prompt_id", "prompt_tokens", "ttft_ms"])
        for pid, tokens, ttft in frame.dropna().itertuples(index=False):
            found = _chunkings(prefills, int(tokens))
            if len(found) != 1:
                unmatched += 1
                continue
            rows.append(FirstToken(mode, str(pid), int(tokens), float(ttft), found.pop()))
    return rows, unmatched


def _with_flops(profile: Profile, flops_per_s: float) -> Profile:
    return dataclasses.replace(
        profile,
        target_attention=dataclasses.replace(
            profile.target_attention, prefill_flops_per_s=flops_per_s
        ),
        draft_attention=dataclasses.replace(
            profile.draft_attention, prefill_flops_per_s=flops_per_s
        ),
    )


def gpu_ms(profile: Profile, row: FirstToken) -> float:
    spec = row.mode != "baseline"
    return sum(prefill_step(profile, [c], speculative=spec).total_ms for c in row.chunks)


def _gpu_split(profile: Profile, row: FirstToken) -> tuple[float, float]:
    """(the prefill's ms that do not depend on F, its attention FLOPs): time is linear in 1/F,
    so two evaluations of the cost model separate them."""
    flops = profile.target_attention.prefill_flops_per_s
    t1 = gpu_ms(profile, row)
    t2 = gpu_ms(_with_flops(profile, 2.0 * flops), row)
    attention_flops = 2.0 * (t1 - t2) / 1e3 * flops
    return t1 - 2.0 * (t1 - t2), attention_flops


def fit_first_token(profile: Profile, rows: Sequence[FirstToken]) -> Profile:
    """Least squares on c=1 TTFT for request_ms, prompt_token_us and prefill_flops_per_s;
    a coefficient the data drive below 0 is held at 0 and the others refitted."""
    split = [_gpu_split(profile, r) for r in rows]
    y = np.array([r.ttft_ms - fixed for r, (fixed, _) in zip(rows, split, strict=True)])
    columns = [
        np.ones(len(rows)),  # request_ms
        np.array([r.prompt_tokens / 1e3 for r in rows]),  # prompt_token_us
        np.array([1e3 * f / 1e14 for _, f in split]),  # ms per 1e14 FLOP/s of 1/F
    ]
    active = [0, 1, 2]
    coef = np.zeros(3)
    while active:
        x = np.column_stack([columns[i] for i in active])
        sol = np.linalg.lstsq(x, y, rcond=None)[0]
        if (sol >= 0).all():
            coef[active] = sol
            break
        active.remove(active[int(np.argmin(sol))])
    flops = 1e14 / coef[2] if coef[2] > 0 else profile.target_attention.prefill_flops_per_s
    profile = _with_flops(profile, float(flops))
    frontend = dataclasses.replace(
        profile.frontend, request_ms=float(coef[0]), prompt_token_us=float(coef[1])
    )
    return dataclasses.replace(profile, frontend=frontend)


def model_ttft_ms(profile: Profile, row: FirstToken) -> float:
    service = profile.frontend.service_ms(row.prompt_tokens, tokenized=True)
    return service + gpu_ms(profile, row)


def print_first_token_table(profile: Profile, rows: Sequence[FirstToken], unmatched: int) -> None:
    print(
        f"\ntime to first token at c=1: {len(rows)} request rows matched to their prefill lines "
        f"({unmatched} left out: no single match)"
    )
    print(
        f"{'mode':9s} {'prompt':34s} {'tokens':>6s} {'new':>6s} {'real ms':>8s} "
        f"{'frontend':>8s} {'GPU ms':>7s} {'model':>7s} {'gap':>7s}"
    )
    gaps = []
    for r in sorted(rows, key=lambda r: (r.mode, r.prompt_tokens)):
        front = profile.frontend.service_ms(r.prompt_tokens, tokenized=True)
        gpu = gpu_ms(profile, r)
        gap = front + gpu - r.ttft_ms
        gaps.append(gap)
        print(
            f"{r.mode:9s} {r.prompt_id[:34]:34s} {r.prompt_tokens:6d} "
            f"{sum(n for n, _ in r.chunks):6d} {r.ttft_ms:8.1f} {front:8.1f} {gpu:7.1f} "
            f"{front + gpu:7.1f} {gap:+6.1f}"
        )
    if gaps:
        rms = float(np.sqrt(np.mean(np.square(gaps))))
        median = statistics.median(map(abs, gaps))
        print(f"model - real: rms {rms:.1f} ms, median |gap| {median:.1f}")


def print_load_table(profile: Profile, run_dir: Path, window_s: float) -> None:
    """The fitted stage's share of each baseline level's time, at the rate requests got their
    first token in the real window."""
    print("\nfrontend load at the real rate (baseline): first tokens/s x fitted service")
    print(f"{'set':8s} {'c':>4s} {'first/s':>7s} {'tokens':>6s} {'service ms':>10s} {'load':>5s}")
    for path in sorted(run_dir.glob("points/baseline/*/c*-r0.parquet")):
        frame = pd.read_parquet(path, columns=["prompt_tokens", "t_first_token_s"]).dropna()
        inside = frame[(frame["t_first_token_s"] >= 0) & (frame["t_first_token_s"] < window_s)]
        if inside.empty:
            continue
        level = int(path.stem.split("-")[0][1:])
        rate = len(inside) / window_s
        tokens = float(inside["prompt_tokens"].mean())
        service = profile.frontend.service_ms(round(tokens), tokenized=True)
        print(
            f"{path.parts[-2]:8s} {level:4d} {rate:7.2f} {tokens:6.0f} {service:10.1f} "
            f"{rate * service / 1e3:5.2f}"
        )


def print_output_hold_table(run_dir: Path, window_s: float) -> None:
    """Late first tokens in the window and the gaps to the next chunks: 1-3 ms, where a decode
    step takes ~10, is a backlog the process held back."""
    print(
        f"\noutput hold: first tokens in the window that came after {LATE_FIRST_TOKEN_MS:.0f} "
        "ms, median gap between a request's first 10 chunks (median over requests)"
    )
    print(f"{'mode':9s} {'set':8s} {'c':>4s} {'late':>5s} {'gap ms':>6s} {'others':>6s}")
    for path in sorted(run_dir.glob("points/*/*/c*-r0.parquet")):
        columns = ["ttft_ms", "t_first_token_s", "chunk_t_s"]
        frame = pd.read_parquet(path, columns=columns).dropna()
        late, other = [], []
        for ttft, first_s, times in frame.itertuples(index=False):
            if len(times) < 11 or not 0.0 <= first_s < window_s:
                continue
            gap = 1e3 * float(np.median(np.diff(np.asarray(times[:11]))))
            (late if ttft > LATE_FIRST_TOKEN_MS else other).append(gap)
        if len(late) >= 5:
            level = path.stem.split("-")[0][1:]
            rest = f"{statistics.median(other):6.1f}" if other else "     -"
            print(
                f"{path.parts[-3]:9s} {path.parts[-2]:8s} {level:>4s} {len(late):5d} "
                f"{statistics.median(late):6.1f} {rest}"
            )


# Output flow: chunks closer than this belong to one write-out; a gap this long with no chunk
# to any stream is a silence (a plain decode step here takes 5-24 ms).
CLUMP_GAP_S = 0.002
SILENCE_S = 0.030
PACED_S = 0.020
DRAIN_MIN_CHUNKS = 50


@dataclass(frozen=True)
class OutputFlow:
    """How one point's chunks left the server, over all its streams together."""

    silent_s: float  # window time in gaps of >= SILENCE_S with no chunk to any stream
    sends: int  # requests sent in the window
    paced: float  # share of the gaps >= CLUMP_GAP_S that are under PACED_S (decode pace)
    drain_us: float  # median us per chunk inside write-outs of >= DRAIN_MIN_CHUNKS chunks


def output_flow(path: Path, window_s: float) -> OutputFlow | None:
    frame = pd.read_parquet(path, columns=["t_send_s", "chunk_t_s"])
    times = [np.asarray(t, float) for t in frame["chunk_t_s"] if t is not None and len(t)]
    if not times:
        return None
    chunks = np.sort(np.concatenate(times))
    chunks = chunks[(chunks >= 0) & (chunks < window_s)]
    gaps = np.diff(chunks)
    breaks = np.flatnonzero(gaps >= CLUMP_GAP_S)
    between = gaps[breaks]
    drains = []
    for start, end in zip(np.r_[0, breaks + 1], np.r_[breaks + 1, len(chunks)], strict=True):
        if end - start >= DRAIN_MIN_CHUNKS:
            drains.append(1e6 * (chunks[end - 1] - chunks[start]) / (end - start - 1))
    sends = pd.to_numeric(frame["t_send_s"]).to_numpy(float)
    return OutputFlow(
        silent_s=float(between[between >= SILENCE_S].sum()),
        sends=int(((sends >= 0) & (sends < window_s)).sum()),
        paced=float((between < PACED_S).mean()) if between.size else float("nan"),
        drain_us=float(np.median(drains)) if drains else float("nan"),
    )


def print_output_flow_table(runs: Sequence[Path], window_s: float) -> None:
    """Each run's baseline points side by side: how much of the window no stream got a chunk,
    how much of that per request sent, and whether chunks left at the decode's pace. A process
    that keeps up writes each step's tokens as the step ends (gaps of one step); one that is
    behind writes backlogs (DRAIN_MIN_CHUNKS chunks or more at its own rate) between silences."""
    print(
        f"\noutput flow (baseline): window s with no chunk for >= {1e3 * SILENCE_S:.0f} ms, that "
        f"per request sent, share of gaps under {1e3 * PACED_S:.0f} ms, us per chunk in backlogs"
    )
    print(f"{'run':24s} {'set':8s} {'c':>4s} {'silent s':>8s} {'ms/send':>7s} {'paced':>5s} "
          f"{'us/chunk':>8s}")
    for run in runs:
        for path in sorted(run.glob("points/baseline/*/c*-r0.parquet"),
                           key=lambda p: (p.parts[-2], int(p.stem.split("-")[0][1:]))):
            flow = output_flow(path, window_s)
            level = int(path.stem.split("-")[0][1:])
            if flow is None or level < 16:
                continue
            per_send = 1e3 * flow.silent_s / max(flow.sends, 1)
            print(f"{run.name[:24]:24s} {path.parts[-2]:8s} {level:4d} {flow.silent_s:8.2f} "
                  f"{per_send:7.0f} {flow.paced:5.2f} {flow.drain_us:8.0f}")
