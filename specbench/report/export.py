"""One record per measured point, in the result schemas that other tools' users already parse.

- ``sglang``: the JSONL line SGLang 0.5.23's ``sglang.benchmark.serving`` (``bench_serving``)
  appends with ``--output-file`` (without ``--output-details``, ``--goodput`` or
  ``--cache-report``), its keys in its order;
- ``vllm``: the JSON object ``vllm bench serve --save-result`` writes (vLLM's
  ``vllm/benchmarks/serve.py`` at commit 009e6d4a), as if run with ``--max-concurrency C
  --percentile-metrics ttft,tpot,itl,e2el`` and ``--metric-percentiles`` the run's
  ``--percentiles`` (default 50,90,99); one object per line, as ``--append-result`` writes
  several;
- ``jsonl``: the point's summary row (every column, public ones first) after ``run_id``.

**Which requests count.** The window's, exactly as :mod:`specbench.metrics` counts them for the
summary: output tokens of every request inside the window (so ``output_throughput`` is the
summary's ``output_tok_s``), latency from the requests that finished OK inside it, ITL
token-normalised (a chunk of k tokens after a gap g gives k samples of g/k), percentiles
``np.percentile``'s linear ones, std the population std as both tools take it. ``duration``
is the window length. Times are model (GPU) time, as everywhere in specbench.

**Keys a window fills differently from a fixed-count benchmark**, and why:

- ``total_output_tokens``: tokens generated inside the window, rounded, so that
  ``output_throughput`` = ``total_output_tokens`` / ``duration`` as in the tools' own files
  (where every request lies inside the duration); ``total_output_tokens_retokenized`` (SGLang):
  the same count, specbench counts the server's tokens and never retokenizes.
- ``total_input_tokens``, ``completed``, ``request_throughput``: the requests that finished OK in
  the window; ``latencies`` (vLLM, which writes the list by default): their E2E in seconds.
  ``failed`` (vLLM): the requests that failed in it. ``num_prompts`` (vLLM): every request
  alive in the window.
- ``concurrency`` (SGLang): the mean number of requests in flight over the window (SGLang's
  sum of latencies / duration means that); ``max_concurrent_requests``: the most in flight at
  once (vLLM's sweep line; SGLang counts requests per 1-s bucket, which counts a request and its
  successor in the same second twice); ``max_output_tokens_per_s``: the busiest of the window's
  slices of about 1 s.
- ``tag`` (SGLang), ``label`` (vLLM): the point's label ``mode/prompt_set/cC-rR``;
  ``dataset_name``: the prompt set; ``backend``: the protocol's name in that tool (vLLM has
  none for SGLang's native /generate: ``sglang`` there);
  ``server_info``: the configuration's ``/server_info`` as the manifest recorded it;
  ``accept_length``: the summary's (client, verify-weighted), null for a baseline.
- Keys of options a specbench run has no counterpart for carry what the tool writes when the
  option is left alone: SGLang ``sharegpt_output_len`` null and ``random_input_len``,
  ``random_output_len``, ``random_range_ratio`` its defaults 1024, 1024, 0.0 (unused unless the
  dataset is random); ``request_rate`` infinite (closed loop: users send as soon as they may),
  which SGLang writes as ``Infinity`` and vLLM as ``"inf"``; vLLM ``burstiness`` 1.0,
  ``request_goodput`` null, ``rtfx`` 0.0, ``queue_times`` and the ``client_queue_time`` stats
  0 (a specbench user sends its next request the moment the last one ends: no client queue).
- Empty samples: SGLang and vLLM write 0 for TTFT/TPOT/ITL stats without samples (and vLLM for
  E2E too); SGLang's E2E mean/median/std are NaN then, and so are its percentiles here.

The ``sglang`` lines are written as SGLang's own ``json.dumps`` writes them (``Infinity``,
``NaN``); ``vllm`` and ``jsonl`` are strict JSON (NaN as null).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from specbench.errors import UserError
from specbench.metrics import itl_samples_s
from specbench.results import PointKey, Run, point_files
from specbench.stats import slice_rates

FORMATS: tuple[str, ...] = ("sglang", "vllm", "jsonl")
SGLANG_BACKENDS = {"openai-chat": "sglang-oai-chat", "openai-completions": "sglang-oai",
                   "sglang-native": "sglang"}
VLLM_BACKENDS = {"openai-chat": "openai-chat", "openai-completions": "openai",
                 "sglang-native": "sglang"}
# bench_serving's argparse defaults, written whatever the dataset.
SGLANG_RANDOM_DEFAULTS = {"random_input_len": 1024, "random_output_len": 1024,
                          "random_range_ratio": 0.0}
SGLANG_PERCENTILES = (90, 95, 99)
VLLM_PERCENTILES = (99,)
PEAK_SLICE_S = 1.0  # the tools' peak tok/s is per second


@dataclass(frozen=True)
class PointStats:
    """One point recomputed from its per-request rows, with the summary's definitions."""

    window_s: float
    n_alive: int
    completed: int
    failed: int
    input_tokens: int
    window_tokens: float
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    itl_ms: np.ndarray
    e2e_ms: np.ndarray
    accept_length: float | None
    peak_tok_s: float
    mean_in_flight: float
    peak_in_flight: int

    def per_s(self, amount: float) -> float:
        return amount / self.window_s if self.window_s > 0 else math.nan

    @property
    def output_tok_s(self) -> float:
        return self.per_s(self.window_tokens)


def _itl_ms(chunk_t_s: Sequence[np.ndarray], chunk_tokens: Sequence[np.ndarray]) -> np.ndarray:
    samples = []
    for t, n in zip(chunk_t_s, chunk_tokens, strict=True):
        samples.append(itl_samples_s(np.asarray(t, dtype=float), np.asarray(n, dtype=np.int64)))
    return np.concatenate(samples) * 1000.0 if samples else np.empty(0)


def _in_flight(t_send_s: np.ndarray, t_end_s: np.ndarray, window_s: float) -> tuple[float, int]:
    """(mean, most) requests in flight inside the window (0, window_s]."""
    lo, hi = np.clip(t_send_s, 0.0, window_s), np.clip(t_end_s, 0.0, window_s)
    inside = hi > lo
    mean = float((hi - lo)[inside].sum() / window_s) if window_s > 0 else math.nan
    # A departure sorts before an arrival at the same instant: half-open intervals.
    events = sorted([(t, 1) for t in lo[inside]] + [(t, -1) for t in hi[inside]])
    level, most = 0, 0
    for _, step in events:
        level += step
        most = max(most, level)
    return mean, most


def point_stats(rows: pd.DataFrame, window_s: float, open_loop: bool = False) -> PointStats:
    """The numbers both schemas need, from a point file's rows (metrics.requests_frame). In an
    open loop the window's arrivals, followed to their end, are the completed requests."""
    done = rows["finished_in_window"].to_numpy(dtype=bool)
    if open_loop:
        done = (rows["arrived_in_window"] & (rows["status"] == "ok")).to_numpy(dtype=bool)
    t_end_s = rows["t_end_s"].to_numpy(dtype=float)
    failed = (rows["status"] == "error").fillna(False).to_numpy(dtype=bool)
    failed &= (t_end_s > 0) & (t_end_s <= window_s)
    finished = rows[done]
    spec = finished[finished["spec_verify_ct"].notna()]
    verify = float(spec["spec_verify_ct"].sum())
    accept = float(spec["completion_tokens"].sum()) / verify if verify > 0 else None
    chunk_t, chunk_n = list(rows["chunk_t_s"]), list(rows["chunk_tokens"])
    slices = slice_rates(chunk_t, chunk_n, window_s, max(1, round(window_s / PEAK_SLICE_S)))
    mean_in_flight, peak_in_flight = _in_flight(
        rows["t_send_s"].to_numpy(dtype=float), t_end_s, window_s)
    return PointStats(
        window_s=window_s,
        n_alive=len(rows),
        completed=int(done.sum()),
        failed=int(failed.sum()),
        input_tokens=int(finished["prompt_tokens"].fillna(0).sum()),
        # The summary's own sum: the same numbers in the same order.
        window_tokens=float(np.asarray(rows["window_tokens"], dtype=float).sum()),
        ttft_ms=finished["ttft_ms"].dropna().to_numpy(dtype=float),
        tpot_ms=finished["tpot_ms"].dropna().to_numpy(dtype=float),
        itl_ms=_itl_ms(list(finished["chunk_t_s"]), list(finished["chunk_tokens"])),
        e2e_ms=finished["e2e_ms"].to_numpy(dtype=float),
        accept_length=accept,
        peak_tok_s=float(slices.max()) if len(slices) else 0.0,
        mean_in_flight=mean_in_flight,
        peak_in_flight=peak_in_flight,
    )


def _stats_ms(name: str, values_ms: np.ndarray, percentiles: Sequence[int],
              empty: float) -> dict[str, float]:
    """mean/median/std/pP of one latency, keyed as both tools key them."""
    keys = [f"mean_{name}_ms", f"median_{name}_ms", f"std_{name}_ms",
            *(f"p{p}_{name}_ms" for p in percentiles)]
    if not len(values_ms):
        return dict.fromkeys(keys, empty)
    values = [np.mean(values_ms), np.median(values_ms), np.std(values_ms),
              *(np.percentile(values_ms, p) for p in percentiles)]
    return {k: float(v) for k, v in zip(keys, values, strict=True)}


def _rate(row: dict[str, Any]) -> float | None:
    """An open-loop point's request rate (None: closed loop)."""
    return PointKey.of_row(row).request_rate


def _label(row: dict[str, Any]) -> str:
    return PointKey.of_row(row).label


def _cap(row: dict[str, Any]) -> int | None:
    """max_concurrency as the tools write it: the users, or an open loop's cap (None: none)."""
    if _rate(row) is None:
        return int(row["concurrency"])
    return int(row["concurrency"]) or None


def sglang_record(run: Run, row: dict[str, Any], st: PointStats) -> dict[str, Any]:
    """SGLang bench_serving's --output-file line for one point."""
    protocol = run.manifest.config.load.protocol
    server = run.manifest.servers.get(row["mode"])
    tokens = st.window_tokens
    return {
        "tag": _label(row),
        "backend": SGLANG_BACKENDS.get(protocol, protocol),
        "dataset_name": row["prompt_set"],
        "request_rate": _rate(row) or math.inf,
        "max_concurrency": _cap(row),
        "sharegpt_output_len": None,
        **SGLANG_RANDOM_DEFAULTS,
        "server_info": server.server_info if server is not None else None,
        "duration": st.window_s,
        "completed": st.completed,
        "total_input_tokens": st.input_tokens,
        "total_input_text_tokens": st.input_tokens,
        "total_input_vision_tokens": 0,
        "total_output_tokens": round(tokens),
        "total_output_tokens_retokenized": round(tokens),
        "request_throughput": st.per_s(st.completed),
        "input_throughput": st.per_s(st.input_tokens),
        "output_throughput": st.output_tok_s,
        "total_throughput": st.per_s(st.input_tokens + tokens),
        **_stats_ms("e2e_latency", st.e2e_ms, SGLANG_PERCENTILES, math.nan),
        **_stats_ms("ttft", st.ttft_ms, SGLANG_PERCENTILES, 0.0),
        **_stats_ms("tpot", st.tpot_ms, SGLANG_PERCENTILES, 0.0),
        **_stats_ms("itl", st.itl_ms, SGLANG_PERCENTILES, 0.0),
        "concurrency": st.mean_in_flight,
        "accept_length": st.accept_length,
        "max_output_tokens_per_s": st.peak_tok_s,
        "max_concurrent_requests": st.peak_in_flight,
    }


def _vllm_date(started_at: str) -> str:
    try:
        return datetime.fromisoformat(started_at).strftime("%Y%m%d-%H%M%S")
    except ValueError:
        return started_at


def vllm_record(run: Run, row: dict[str, Any], st: PointStats) -> dict[str, Any]:
    """vLLM bench serve's --save-result object for one point."""
    manifest = run.manifest
    protocol = manifest.config.load.protocol
    backend = VLLM_BACKENDS.get(protocol, protocol)
    model = manifest.config.server.model_path
    tokens = st.window_tokens
    no_queue = np.zeros(st.completed)
    # As if run with --metric-percentiles set to the run's --percentiles (vLLM's default 99
    # for a run made before specbench had the option).
    percentiles = manifest.config.load.percentiles or VLLM_PERCENTILES
    return {
        "date": _vllm_date(manifest.started_at),
        "endpoint_type": backend,
        "backend": backend,
        "label": _label(row),
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": st.n_alive,
        "request_rate": "inf" if (_rate(row) or math.inf) == math.inf else _rate(row),
        "burstiness": manifest.config.load.burstiness,
        "max_concurrency": _cap(row),
        "duration": st.window_s,
        "completed": st.completed,
        "failed": st.failed,
        "total_input_tokens": st.input_tokens,
        "total_output_tokens": round(tokens),
        "request_throughput": st.per_s(st.completed),
        "request_goodput": row.get("goodput_req_s"),
        "output_throughput": st.output_tok_s,
        "total_token_throughput": st.per_s(st.input_tokens + tokens),
        "latencies": [float(v) / 1000.0 for v in st.e2e_ms],
        "queue_times": no_queue.tolist(),
        "max_output_tokens_per_s": st.peak_tok_s,
        "max_concurrent_requests": st.peak_in_flight,
        "rtfx": 0.0,
        **_stats_ms("ttft", st.ttft_ms, percentiles, 0.0),
        **_stats_ms("tpot", st.tpot_ms, percentiles, 0.0),
        **_stats_ms("itl", st.itl_ms, percentiles, 0.0),
        **_stats_ms("e2el", st.e2e_ms, percentiles, 0.0),
        **_stats_ms("client_queue_time", no_queue, percentiles, 0.0),
    }


def _plain(value: Any) -> Any:
    """A JSON-ready value: numpy scalars as Python ones, NaN and missing as None."""
    if hasattr(value, "item"):
        value = value.item()
    if value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and math.isinf(value):  # rate inf: as vLLM writes it
        return "inf" if value > 0 else "-inf"
    return value


def jsonl_record(run: Run, row: dict[str, Any]) -> dict[str, Any]:
    """specbench's own flat record: the run's id, then the summary row."""
    return {"run_id": run.path.name, **{str(k): _plain(v) for k, v in row.items()}}


def _names(given: Sequence[str] | None, known: list[str], what: str, flag: str) -> list[str]:
    if not given:
        return known
    unknown = [name for name in given if name not in known]
    if unknown:
        raise UserError(f"{what} {', '.join(unknown)} not in this run; "
                        f"{flag} takes {', '.join(known)}")
    return list(given)


def select_points(run: Run, modes: Sequence[str] | None = None,
                  prompt_sets: Sequence[str] | None = None) -> pd.DataFrame:
    """The summary rows to export, in the summary's order."""
    if not len(run.summary):
        raise UserError(f"{run.path} has no measured points; run a sweep first")
    keep_modes = _names(modes, run.modes, "configuration(s)", "--modes")
    keep_sets = _names(prompt_sets, run.prompt_sets, "prompt set(s)", "--prompts")
    summary = run.summary
    return summary[summary["mode"].isin(keep_modes) & summary["prompt_set"].isin(keep_sets)]


def check_format(fmt: str) -> str:
    """`fmt` as one of FORMATS, or a UserError naming them."""
    if fmt.strip().lower() not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}; use --format {'|'.join(FORMATS)}")
    return fmt.strip().lower()


def build_records(run: Run, fmt: str, modes: Sequence[str] | None = None,
                  prompt_sets: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One record per selected point in format `fmt` (one of FORMATS)."""
    fmt = check_format(fmt)
    points = [{str(k): v for k, v in row.items()}
              for row in select_points(run, modes, prompt_sets).to_dict("records")]
    if fmt == "jsonl":
        return [jsonl_record(run, row) for row in points]
    if not point_files(run.path):
        raise UserError(
            f"{run.path} has no per-request point files (a stored reference keeps only the "
            f"summary), which --format {fmt} is computed from; export the run directory itself, "
            "or use --format jsonl")
    builder = sglang_record if fmt == "sglang" else vllm_record
    records = []
    for row in points:
        rows = run.requests(row["mode"], row["prompt_set"], int(row["concurrency"]),
                            int(row["repeat"]), _rate(row))
        stats = point_stats(rows, float(row["window_s"]), _rate(row) is not None)
        records.append(builder(run, row, stats))
    return records


def records_text(records: list[dict[str, Any]], fmt: str) -> str:
    """JSON lines; SGLang's as its json.dumps writes them, the others strict JSON."""
    if check_format(fmt) == "sglang":
        return "".join(json.dumps(r) + "\n" for r in records)
    return "".join(json.dumps({k: _plain(v) for k, v in r.items()}, allow_nan=False) + "\n"
                   for r in records)
