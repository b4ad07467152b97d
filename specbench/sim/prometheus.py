"""`/metrics`: SGLang 0.5.23's Prometheus exposition, plus three simulator counters.

The metric names, labels, help texts and value formatting copy SGLang's, because specbench's
metrics scraper parses them (SGLang 0.5.23's collector). The metrics are a table
(:data:`METRICS`) of name, type, help and how to read the value from the scheduler; the
latency histograms are folded in from the scheduler's samples at each scrape.

The load gauges (`num_running_reqs`, `num_queue_reqs`, `token_usage`, `num_retracted_reqs`)
show what the scheduler last reported, at a prefill or every --decode-log-interval decode
steps (stats.LoadGauges), as SGLang's do; the retraction counters appear with the first
retraction, as a prometheus_client counter appears with its first increment.

Simulator extensions: `sglang:sim_running_reqs_seconds_total` (running requests integrated
over model time: its delta over the delta of `sglang:sim_model_seconds_total` is the mean
number of running requests), `sglang:sim_model_seconds_total` and
`sglang:sim_emitted_tokens_total` (tokens counted when emitted, not when a request finishes).
Latencies are model time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from specbench.sim.args import ServerSettings
from specbench.sim.scheduler import Scheduler

HIST_BUCKETS_S = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    320.0,
)
_E2E_HELP = "End-to-end request latency (model time)."
_TTFT_HELP = "Time to first token (model time)."
# Label sets: both name the model; SCHEDULER adds SGLang's rank labels.
MODEL, SCHEDULER = "model", "scheduler"


@dataclass(frozen=True)
class Metric:
    """One gauge or counter. A value getter that returns a dict (keyed by is_streaming) gives
    one sample per key, labelled is_streaming="false" then "true"."""

    name: str
    kind: str  # "gauge" | "counter"
    help: str
    value: Callable[[Scheduler], float | dict[bool, int]]
    labels: str = SCHEDULER
    speculative_only: bool = False
    shown: Callable[[Scheduler], bool] | None = None  # None: always exported


def _spec_accept_rate(sch: Scheduler) -> float:
    k, accept = sch.current_steps, sch.decode_log.last_accept_length
    return (accept - 1.0) / k if k > 0 and accept else 0.0


def _retracted_any(sch: Scheduler) -> bool:
    return sch.counters.retracted_requests > 0


def _cache_hit_rate(sch: Scheduler) -> float:
    cache = sch.cache
    return cache.hit_tokens / cache.query_tokens if cache.query_tokens else 0.0


METRICS: tuple[Metric, ...] = (
    Metric(
        "sglang:num_running_reqs",
        "gauge",
        "The number of running requests.",
        lambda s: s.gauges.running,
    ),
    Metric(
        "sglang:num_queue_reqs",
        "gauge",
        "The number of requests in the waiting queue.",
        lambda s: s.gauges.queued,
    ),
    Metric(
        "sglang:gen_throughput",
        "gauge",
        "The generation throughput (token/s).",
        lambda s: s.decode_log.last_gen_throughput,
    ),
    Metric("sglang:token_usage", "gauge", "The token usage.", lambda s: s.gauges.token_usage),
    Metric(
        "sglang:num_retracted_reqs",
        "gauge",
        "The number of retracted requests.",
        lambda s: s.gauges.retracted,
    ),
    Metric(
        "sglang:num_retracted_requests_total",
        "counter",
        "Total number of retracted requests.",
        lambda s: s.counters.retracted_requests,
        shown=_retracted_any,
    ),
    Metric(
        "sglang:num_retracted_input_tokens_total",
        "counter",
        "Total number of retracted input tokens.",
        lambda s: s.counters.retracted_input_tokens,
        shown=_retracted_any,
    ),
    Metric(
        "sglang:num_retracted_output_tokens_total",
        "counter",
        "Total number of retracted output tokens.",
        lambda s: s.counters.retracted_output_tokens,
        shown=_retracted_any,
    ),
    Metric("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", _cache_hit_rate),
    Metric(
        "sglang:max_total_num_tokens",
        "gauge",
        "Maximum total number of tokens in the KV pool.",
        lambda s: s.kv_capacity_tokens,
    ),
    Metric(
        "sglang:spec_accept_length",
        "gauge",
        "The average acceptance length of speculative decoding.",
        lambda s: s.decode_log.last_accept_length,
        speculative_only=True,
    ),
    Metric(
        "sglang:spec_accept_rate",
        "gauge",
        "The average acceptance rate of speculative decoding.",
        _spec_accept_rate,
        speculative_only=True,
    ),
    Metric(
        "sglang:spec_num_steps",
        "gauge",
        "The current number of speculative steps.",
        lambda s: s.current_steps,
        speculative_only=True,
    ),
    Metric(
        "sglang:spec_num_draft_tokens",
        "gauge",
        "The current number of draft tokens.",
        lambda s: s.draft_tokens_now,
        speculative_only=True,
    ),
    Metric(
        "sglang:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        lambda s: s.counters.prompt_tokens,
        labels=MODEL,
    ),
    Metric(
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        lambda s: s.counters.generation_tokens,
        labels=MODEL,
    ),
    Metric(
        "sglang:spec_verify_calls_total",
        "counter",
        "Number of speculative verify calls (counted when a request finishes).",
        lambda s: s.counters.verify_calls,
        labels=MODEL,
    ),
    Metric(
        "sglang:num_requests_total",
        "counter",
        "Number of requests processed.",
        lambda s: s.counters.num_requests,
        labels=MODEL,
    ),
    Metric(
        "sglang:sim_emitted_tokens_total",
        "counter",
        "specbench.sim extension: output tokens counted at emission (per forward).",
        lambda s: s.counters.emitted_tokens,
    ),
    Metric(
        "sglang:sim_running_reqs_seconds_total",
        "counter",
        "specbench.sim extension: integral of running requests over model time "
        "(delta / delta sglang:sim_model_seconds_total = mean running requests).",
        lambda s: s.counters.running_seconds,
    ),
    Metric(
        "sglang:sim_model_seconds_total",
        "counter",
        "specbench.sim extension: model (simulated GPU) time elapsed.",
        lambda s: s.model_time_now(),
    ),
)


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int]
    total: float = 0.0
    n: int = 0

    @classmethod
    def empty(cls, buckets: tuple[float, ...]) -> Histogram:
        return cls(buckets, [0] * len(buckets))

    def observe(self, value: float) -> None:
        self.n += 1
        self.total += value
        for i, b in enumerate(self.buckets):
            if value <= b:
                self.counts[i] += 1


class PrometheusExporter:
    """Renders `/metrics` for one server; owns the latency histograms (they persist)."""

    def __init__(self, settings: ServerSettings, scheduler: Scheduler) -> None:
        self.settings = settings
        self.scheduler = scheduler
        self.e2e_hist = Histogram.empty(HIST_BUCKETS_S)
        self.ttft_hist = Histogram.empty(HIST_BUCKETS_S)

    def _sync_histograms(self) -> None:
        """Fold the latencies the scheduler recorded since the last scrape into histograms."""
        c = self.scheduler.counters
        for hist, samples in ((self.e2e_hist, c.e2e_s), (self.ttft_hist, c.ttft_s)):
            for value in samples:
                hist.observe(value)
            samples.clear()

    def text(self) -> str:
        self._sync_histograms()
        name = self.settings.served_model_name.replace("\\", "\\\\").replace('"', '\\"')
        model = f'model_name="{name}",engine_type="unified"'
        labels = {MODEL: model, SCHEDULER: f'{model},tp_rank="0",pp_rank="0",moe_ep_rank="0"'}
        lines: list[str] = []
        for metric in METRICS:
            if metric.speculative_only and not self.settings.speculative:
                continue
            if metric.shown is not None and not metric.shown(self.scheduler):
                continue
            lines.append(f"# HELP {metric.name} {metric.help}")
            lines.append(f"# TYPE {metric.name} {metric.kind}")
            base, value = labels[metric.labels], metric.value(self.scheduler)
            if isinstance(value, dict):
                for streaming in (False, True):
                    label = f'{base},is_streaming="{str(streaming).lower()}"'
                    lines.append(f"{metric.name}{{{label}}} {float(value[streaming])!r}")
            else:
                lines.append(f"{metric.name}{{{base}}} {float(value)!r}")
        for hist_name, help_text, hist in (
            ("sglang:e2e_request_latency_seconds", _E2E_HELP, self.e2e_hist),
            ("sglang:time_to_first_token_seconds", _TTFT_HELP, self.ttft_hist),
        ):
            lines.extend(_histogram_lines(hist_name, help_text, hist, model))
        return "\n".join(lines) + "\n"


def _histogram_lines(name: str, help_text: str, hist: Histogram, labels: str) -> Iterable[str]:
    yield f"# HELP {name} {help_text}"
    yield f"# TYPE {name} histogram"
    for b, count in zip(hist.buckets, hist.counts, strict=True):
        yield f'{name}_bucket{{{labels},le="{b}"}} {float(count)!r}'
    yield f'{name}_bucket{{{labels},le="+Inf"}} {float(hist.n)!r}'
    yield f"{name}_sum{{{labels}}} {hist.total!r}"
    yield f"{name}_count{{{labels}}} {float(hist.n)!r}"
