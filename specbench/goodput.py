"""Latency SLOs, goodput, and the open-loop columns of a point's summary.

**SLOs** as vLLM's ``--goodput`` defines them: a request counts toward goodput when it meets
every SLO given, TTFT (send to first token), TPOT ((E2E - TTFT) / (output tokens - 1), 0 for a
one-token answer) and E2E (send to last token), each in model milliseconds. A request that
failed, or had not ended when the drain did, meets none.

**Goodput** is the requests that arrived in the window and met every SLO, per model second of
the window. Its standard error comes from blocks of consecutive arrivals (:data:`BLOCKS`): the
share meeting the SLOs per block, whose spread keeps what requests sent close together share
(a burst that overloads the server fails them together), the paired-request intervals' idea
(:mod:`specbench.analysis.intervals`).

**Open-loop columns** (:func:`open_loop_columns`): the asked and achieved request rate, the
client's lag behind its schedule, the latency percentiles of the window's arrivals followed to
their end, goodput, and the server's running batch sampled through the window (its gauge
samples are kept, so a share above any threshold can be read later).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from specbench.errors import ConfigError
from specbench.load.records import PointResult
from specbench.rules.slo import SLO_KEYS

NAN = float("nan")
BLOCKS = 8
PERCENTILES = (50, 90, 95, 99)
# The client is behind its schedule when its median lag is above this share of the mean gap
# between arrivals (wall), and above the event loop's own timer granularity.
LAG_SHARE_MAX = 0.10
LAG_FLOOR_MS = 2.0


@dataclass(frozen=True)
class Slo:
    """Latency objectives in model milliseconds; None: not asked."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    @classmethod
    def from_mapping(cls, values: dict[str, float]) -> Slo:
        return cls(**{k: float(v) for k, v in values.items()})

    def given(self) -> dict[str, float]:
        return {k: v for k in SLO_KEYS if (v := getattr(self, k)) is not None}

    def text(self) -> str:
        return ", ".join(f"{k.removesuffix('_ms').upper()} <= {v:g} ms"
                         for k, v in self.given().items())

    def meets(self, frame: pd.DataFrame) -> np.ndarray:
        """Per request row: ended OK and met every SLO given."""
        ok = (frame["status"] == "ok").to_numpy(dtype=bool).copy()
        for key, limit in self.given().items():
            values = frame[key].to_numpy(dtype=float)
            if key == "tpot_ms":  # a one-token answer has no time per output token: 0
                values = np.where(frame["completion_tokens"].to_numpy() <= 1, 0.0, values)
            ok &= np.nan_to_num(values, nan=math.inf) <= limit
        return ok


def parse_slo(text: str) -> dict[str, float]:
    """`ttft_ms=2000,tpot_ms=40` as the plain mapping the config validates."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, number = part.partition("=")
        key = key.strip()
        try:
            value = float(number)
        except ValueError:
            value = NAN
        if not sep or key not in SLO_KEYS or not value > 0:
            raise ConfigError(
                f"--slo {text!r}: {part!r} is not KEY=MS with KEY one of "
                f"{', '.join(SLO_KEYS)}; give e.g. --slo ttft_ms=2000,tpot_ms=40")
        out[key] = value
    if not out:
        raise ConfigError("--slo is empty; give e.g. --slo ttft_ms=2000,tpot_ms=40")
    return out


@dataclass(frozen=True)
class Goodput:
    req_s: float  # per model second
    se: float
    good: int
    arrived: int
    met_frac: float


def goodput(arrivals: pd.DataFrame, window_s: float, slo: Slo) -> Goodput:
    """Goodput of the window's arrivals (rows in arrival order) over `window_s` model seconds."""
    n = len(arrivals)
    if n == 0 or window_s <= 0:
        return Goodput(NAN, NAN, 0, n, NAN)
    met = slo.meets(arrivals.sort_values("request_id")).astype(float)
    frac = float(met.mean())
    blocks = np.array_split(met, min(BLOCKS, n))
    se_frac = NAN
    if len(blocks) >= 2:
        shares = np.array([b.mean() for b in blocks])
        weights = np.array([len(b) for b in blocks], dtype=float)
        # Blocks of unequal size: the weighted spread of the block shares around the mean.
        var = float(np.sum(weights ** 2 * (shares - frac) ** 2)) / float(weights.sum()) ** 2
        # Floor: the binomial error, with half a request on each side so that a window where
        # every request met its SLOs (or none did) still has one.
        binomial = (frac * n + 0.5) * ((1 - frac) * n + 0.5) / (n + 1) ** 2 / n
        se_frac = math.sqrt(max(var * len(blocks) / (len(blocks) - 1), binomial))
    scale = n / window_s
    return Goodput(frac * scale, se_frac * scale, int(met.sum()), n, frac)


def percentile_columns(samples: dict[str, np.ndarray]) -> dict[str, float]:
    """`<name>_p50/p90/p95/p99` of each latency's samples (NaN ones left out; none: NaN)."""
    out: dict[str, float] = {}
    for name, values in samples.items():
        values = values[np.isfinite(values)]
        out |= {f"{name}_p{q}": float(np.percentile(values, q)) if len(values) else NAN
                for q in PERCENTILES}
    return out


def open_loop_columns(result: PointResult, frame: pd.DataFrame, time_scale: float,
                      slo: Slo | None, running: np.ndarray, itl_ms: np.ndarray) -> dict[str, Any]:
    """The summary columns an open-loop point adds (and the latency ones it redefines):
    `frame` its request rows, `running` the running-batch gauge samples, `itl_ms` the ITL
    samples of the window's arrivals that ended OK."""
    assert result.request_rate is not None
    window_s = (result.window_end - result.window_start) * time_scale
    arrived = frame[frame["arrived_in_window"]]
    done = arrived[arrived["status"] == "ok"]
    rate = result.request_rate / time_scale  # per model second
    lag_p50 = result.arrival_lag_ms.get("p50", NAN)
    gap_wall_ms = 1000.0 / result.request_rate if math.isfinite(rate) else 0.0
    behind = bool(math.isfinite(rate) and lag_p50 > max(LAG_FLOOR_MS, LAG_SHARE_MAX * gap_wall_ms))
    row: dict[str, Any] = {
        "achieved_rate_req_s": len(arrived) / window_s if math.isfinite(rate) else math.inf,
        "window_arrivals": result.window_arrivals,
        "n_unfinished": result.unfinished,
        "n_requests": len(done),
        "arrival_lag_ms_p50": lag_p50,
        "arrival_lag_ms_p99": result.arrival_lag_ms.get("p99", NAN),
        "behind_schedule": behind,
        **percentile_columns({name: done[name].to_numpy(dtype=float)
                              for name in ("ttft_ms", "tpot_ms", "e2e_ms")} | {"itl_ms": itl_ms}),
        "server_running_reqs_p10": float(np.percentile(running, 10)) if len(running) else NAN,
        "server_running_reqs_p90": float(np.percentile(running, 90)) if len(running) else NAN,
        "server_running_reqs_samples": running.tolist(),
    }
    if slo is not None and slo.given():
        found = goodput(arrived, window_s, slo)
        row |= {"goodput_req_s": found.req_s, "goodput_req_s_se": found.se,
                "slo_met_frac": found.met_frac, "slo_good": found.good}
    return row


def share_above(samples: Any, threshold: float | None) -> float:
    """Share of a point's running-batch samples above `threshold` (NaN: none or no T)."""
    if threshold is None or samples is None:
        return NAN
    values = np.asarray(list(samples), dtype=float)
    return float(np.mean(values > threshold)) if len(values) else NAN
